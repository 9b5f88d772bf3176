"""The ``partition_stats`` records of a data-table action (table versions 8 and 9), as Hudi 1.1
writes them (:mod:`pyhudi.metadata.partition_stats` describes the partition).

A commit (a write, a compaction, a clustering, an overwrite) recomputes every data partition it
wrote to: the files of the partition's latest slices once the commit is done - the committed
slices, a file group the commit gives a new base file starting afresh (keeping only log files
completed after it), log files of the commit joining their slice, new file groups added - each
file with its column statistics (the metadata table's, merged with those the commit adds). File
groups a replace commit retires still count at that commit (Hudi 1.1 does not take them out;
the next commit to the partition does). ``delete_partition`` deletes the partitions' records.

A rollback (and a clean) writes nothing in Hudi 1.1; the rolled-back delta commit of the
metadata table takes its records back. pyhudi recomputes the partitions a rollback touched all
the same (from the committed slices), because once the metadata table has compacted that delta
commit into a base file, undoing it no longer can, and a tight bound computed from rolled-back
files would exclude values the restored files hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyhudi.metadata import column_stats
from pyhudi.metadata import partition_stats as ps
from pyhudi.metadata.keys import column_id, partition_id
from pyhudi.metadata.table import COLUMN_STATS_PARTITION, MetadataTable
from pyhudi.storage import Storage
from pyhudi.table.fs_view import FileSystemView, completion_of
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.timeline import Timeline

Records = list[tuple[str, dict]]
DELETE_PARTITION = "DELETE_PARTITION"
_ID = len(column_id(""))  # the length of a column or partition id


def latest_files(storage: Storage, timeline: Timeline, partitions: list[str] | None = None, *,
                 instant: str = "", stats: Mapping[str, list[WriteStat]] | None = None) -> dict[str, set[str]]:
    """partition -> names of the files of its latest slices once ``instant`` (writing ``stats``)
    completes (default: as committed; ``partitions`` None: every partition); log files only of
    completed delta commits and of ``instant``."""
    view = FileSystemView(storage, timeline, partitions=partitions)
    partitions = view.partitions if partitions is None else partitions
    stats = stats or {}
    done = {i.timestamp: completion_of(i.timestamp, i.completion_time) for i in timeline.completed()}
    out: dict[str, set[str]] = {}
    for partition in partitions:
        written = stats.get(partition, [])
        new_base = {s.fileId: s.file_name for s in written if s.path and not s.is_log}
        names: set[str] = set()
        for piece in view.latest_slices(partition):
            if piece.file_id in new_base:
                # a new base file at the instant: only logs completed after it extend its slice
                names.update(lf.name for lf in piece.log_files if done.get(lf.base_instant, "") > instant)
                continue
            if piece.base_file is not None:
                names.add(piece.base_file.name)
            names.update(lf.name for lf in piece.log_files if lf.base_instant in done or lf.base_instant == instant)
        names.update(s.file_name for s in written if s.path)
        out[partition] = names
    return out


def _file_stats(mdt: MetadataTable, timeline: Timeline, partition: str, columns: list[str],
                new: Records) -> dict[str, dict[str, dict]]:
    """file -> column -> statistics of a data partition: the metadata table's column
    statistics of its files merged with ``new`` (this action's, version shape)."""
    prefixes = ps.key_prefixes(columns, partition)
    recorded = mdt.read(COLUMN_STATS_PARTITION, timeline, key_prefixes=prefixes)
    mine = [(k, r) for k, r in new if k.startswith(prefixes)]
    return ps.by_file(column_stats.merged([*recorded, *mine]))


def recompute(mdt: MetadataTable, storage: Storage, timeline: Timeline, partitions: Iterable[str], *,
              instant: str, columns: list[str], new_column_stats: Records,
              stats: Mapping[str, list[WriteStat]] | None = None) -> Records:
    """The records of ``partitions`` recomputed from their latest files (see the module)."""
    wanted = sorted({p for p in partitions})
    files = latest_files(storage, timeline, wanted, instant=instant, stats=stats)
    out: Records = []
    for partition in wanted:
        by_file = _file_stats(mdt, timeline, partition, columns, new_column_stats)
        out += ps.aggregate(partition, files[partition], by_file, columns, mdt.table_version)
    return out


def commit_records(mdt: MetadataTable, storage: Storage, timeline: Timeline, meta: CommitMetadata, *,
                   instant: str, columns: list[str], new_column_stats: Records) -> Records:
    """The ``partition_stats`` records of a completed write-like action (see the module)."""
    if meta.operation_type == DELETE_PARTITION:
        return [r for p in sorted(meta.partition_to_replace_file_ids or {})
                for r in ps.deleted_records(p, columns, mdt.table_version)]
    by_partition: dict[str, list[WriteStat]] = {}
    for stat in meta.write_stats():
        if stat.path:
            by_partition.setdefault(stat.partitionPath or "", []).append(stat)
    if not by_partition:
        return []
    return recompute(mdt, storage, timeline, by_partition, instant=instant, columns=columns,
                     new_column_stats=new_column_stats, stats=by_partition)


def initial_records(files: Mapping[str, Iterable[str]], column_records: Records, *,
                    columns: list[str], table_version: int) -> Records:
    """The first records of the partition (the metadata table built from storage): every data
    partition over the files of its committed slices (``files``: partition -> names), from the
    column statistics built beside them (version shape)."""
    ids = {partition_id(p): p for p in files if p}
    by_partition: dict[str, Records] = {}
    for key, record in column_records:  # a key: column id, partition id, file id (12 + 12 + 24)
        partition = ids.get(key[_ID:2 * _ID])
        if partition is not None:
            by_partition.setdefault(partition, []).append((key, record))
    out: Records = []
    for partition, names in sorted(files.items()):
        if partition:
            by_file = ps.by_file(column_stats.merged(by_partition.get(partition, [])))
            out += ps.aggregate(partition, names, by_file, columns, table_version)
    return out
