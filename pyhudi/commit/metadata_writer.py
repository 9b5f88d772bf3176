"""The metadata table (MDT) of a data table, written: created from storage, updated in step with
every data-table action, compacted, cleaned and archived.

It stands in the commit package because only the commit point writes it, and because keeping it
up means running the same actions the data table runs (rollback, clean) with the MDT's own plain
completion, on plan records (compaction, clean) and on a :class:`~pyhudi.table.table.HudiTable`
of the MDT: all of them below this package. Reading stays in :mod:`pyhudi.metadata.table`.

``<table>/.hoodie/metadata`` is a merge-on-read table of version 6. pyhudi writes its ``files``
partition (one file group, ``files-0000-0``) and, with
``hoodie.metadata.index.column.stats.enable``, its ``column_stats`` partition (file groups
``col-stats-0000-0``, ...; a record goes to the group its key hashes to). Every file group is an
HFile base file and HFile log blocks (:mod:`pyhudi.metadata.files` reads them back). Its timeline
mirrors the data table's:

* every data-table action (commit, delta commit, replace commit, compaction, clean, rollback,
  restore) becomes an MDT delta commit with the *same* instant time, completed just before the
  data-table instant completes (the caller holds the table lock). A data instant that fails after
  its MDT delta commit is invisible to readers anyway: they only trust MDT blocks of completed
  data instants. Its rollback undoes that delta commit (an MDT ``rollback`` at the data
  rollback's time + ``006``), and applying an instant again first undoes its earlier attempt;
* every delta commit writes one block into a new log file (version + 1) of the current slice of
  each file group it has records for, so undoing one deletes its files and nothing is ever
  appended in place (object stores cannot);
* after ``hoodie.metadata.compact.max.delta.commits`` delta commits the slice is compacted into a
  new base HFile at the latest delta commit's time + ``001`` (Hudi's MDT compaction time), but only
  while no data write older than that delta commit is pending, so no record of an unfinished
  write is ever folded into a base file;
* after a compaction, slices older than the previous one are cleaned (time + ``002``) and the
  MDT timeline is archived down to its newest instants, never past its latest compaction.

Initialization (at the partitions' init time: the latest completed data instant + ``010``, or
``00000000000000010`` for an empty table) lists the committed files of the data table and
bulk-writes them as the first base file, then records ``files`` in the data table's
``hoodie.table.metadata.partitions``, the property that tells readers the MDT is usable.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import time
from collections.abc import Iterable, Iterator, Mapping

import pyarrow as pa

from pyhudi.actions.clean import run_clean
from pyhudi.actions.rollback import finish_pending_rollbacks, rollback_instant
from pyhudi.config import properties as P
from pyhudi.config.properties import write_partition_metadata
from pyhudi.errors import HudiCommitError, HudiCorruptFileError
from pyhudi.io.bloom import BloomFilter
from pyhudi.io.file_names import log_file_name, log_path_order, parse_base_file, parse_log_file, slice_key
from pyhudi.io.hfile import CellColumns, as_columns, write_hfile
from pyhudi.io.log_format import delete_block, hfile_data_block
from pyhudi.metadata import record_index
from pyhudi.metadata.files import FILES_PARTITION, INIT_INSTANT_PREFIX, encode_records
from pyhudi.metadata.keys import file_group_id, file_group_index
from pyhudi.metadata.schema import RECORD_SCHEMA
from pyhudi.metadata.table import (
    CLEAN_SUFFIX,
    COMPACTION_SUFFIX,
    INIT_SUFFIX,
    KEEP_MAX,
    KEEP_MIN,
    KEYGEN_CLASS,
    PAYLOAD_CLASS,
    PREFIXES,
    RECORD_INDEX_PARTITION,
    ROLLBACK_SUFFIX,
    WRITE_TOKEN,
    Builder,
    Cells,
    MetadataTable,
    Records,
    hfile_name,
)
from pyhudi.plans.clean import CleanPlan
from pyhudi.plans.compaction import CompactionOperation, CompactionPlan
from pyhudi.table.table import HudiTable
from pyhudi.timeline.archive import archive_instants
from pyhudi.timeline.avro_records import CLEANER_PLAN, write_record
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.completion import complete_plainly
from pyhudi.timeline.instant import CLEAN, COMMIT, COMPACTION, DELTA_COMMIT, ROLLBACK
from pyhudi.timeline.timeline import Timeline
from pyhudi.write.markers import APPEND, CREATE, create_marker, delete_markers

log = logging.getLogger("pyhudi")


def _buckets(records: Records, groups: list[str]) -> dict[str, Records]:
    """Records by the file group their key maps to (Hudi's ``mapRecordKeyToFileGroupIndex``)."""
    out: dict[str, Records] = {g: [] for g in groups}
    for key, record in records:
        out[groups[file_group_index(key, len(groups)) if len(groups) > 1 else 0]].append((key, record))
    return out


class MetadataWriter(MetadataTable):
    """The metadata table under a data table's storage, opened to be written (by the commit
    point, under the table lock; executors use :meth:`write_log_cells` and
    :meth:`write_base_cells` for the record index files they write)."""

    # -- initialization and removal --------------------------------------------------------------
    def initialize(self, data_timeline: Timeline, data_props: Mapping[str, str],
                   partitions: Mapping[str, tuple[int, Records]], *, instant: str | None = None,
                   built: Mapping[str, Builder] | None = None) -> str:
        """Create the MDT with the given partitions (name -> (file groups, records)) as its first
        base files, at ``instant`` (default: the latest completed data instant + ``010``, as
        Hudi does); ``built``: partitions whose base files a builder writes."""
        self.storage.delete_dir("")
        self._timeline = None
        if instant is None:
            done = [i.timestamp for i in data_timeline.completed()]
            instant = (max(done) if done else INIT_INSTANT_PREFIX) + INIT_SUFFIX
        name = data_props.get(P.NAME, "table")
        HudiTable.create(self.storage, {
            P.NAME: f"{name}_metadata", P.TYPE: P.MERGE_ON_READ, P.VERSION: "6", P.LAYOUT_VERSION: "1",
            P.RECORD_KEY_FIELDS: "key", P.BASE_FILE_FORMAT: "HFILE", P.PAYLOAD_CLASS: PAYLOAD_CLASS,
            P.KEYGEN_CLASS: KEYGEN_CLASS, P.POPULATE_META_FIELDS: "false", P.ARCHIVE_FOLDER: "archived",
            P.TIMELINE_TIMEZONE: data_props.get(P.TIMELINE_TIMEZONE, "LOCAL"),
            "hoodie.datasource.write.hive_style_partitioning": "false",
            "hoodie.datasource.write.partitionpath.urlencode": "false",
        })
        tl = self.timeline.reload()
        tl.create_requested(instant, DELTA_COMMIT)
        tl.transition_inflight(instant, DELTA_COMMIT)
        stats: dict[str, list[WriteStat]] = {}
        for partition, (count, records) in sorted(partitions.items()):
            write_partition_metadata(self.storage, partition, instant)
            groups = [file_group_id(PREFIXES[partition], i) for i in range(count)]
            for group, bucket in _buckets(records, groups).items():
                log_rel = f"{partition}/{log_file_name(group, instant, 1, WRITE_TOKEN)}"
                create_marker(self.storage, instant, log_rel, APPEND)
                self.storage.create_new(log_rel, delete_block([], [], instant))
                stats.setdefault(partition, []).append(self._write_base(instant, partition, group, bucket))
        for partition, build in sorted((built or {}).items()):
            write_partition_metadata(self.storage, partition, instant)
            written = build(instant)
            for stat in written:
                log_rel = f"{partition}/{log_file_name(stat.fileId, instant, 1, WRITE_TOKEN)}"
                create_marker(self.storage, instant, log_rel, APPEND)
                self.storage.create_new(log_rel, delete_block([], [], instant))
            stats[partition] = written
        meta = CommitMetadata(stats, operation_type="BULK_INSERT_PREPPED", extra_metadata={"schema": RECORD_SCHEMA})
        tl.complete(instant, DELTA_COMMIT, meta.to_json().encode("utf-8"))
        delete_markers(self.storage, instant)
        log.info("initialized the metadata table of %s at %s: %s", self.data_storage.base_uri, instant,
                 ", ".join([f"{p} ({len(r)} records)" for p, (_n, r) in sorted(partitions.items())]
                           + [f"{p} ({sum(st.numWrites for st in stats.get(p, []))} records)"
                              for p in sorted(built or {})]))
        return instant

    def delete(self) -> None:
        self.storage.delete_dir("")
        self._timeline = None

    # -- updates ---------------------------------------------------------------------------------
    def apply(self, instant: str, records: Mapping[str, Records], data_timeline: Timeline, *,
              max_delta_commits: int, undo: Iterable[str] = (),
              written: Mapping[str, list[WriteStat]] | None = None,
              existing: Mapping[str, list[str]] | None = None) -> None:
        """Apply one data-table action as the MDT delta commit ``instant`` (the caller holds the
        table lock and completes the data instant right after): ``records`` per MDT partition
        (those the MDT does not have are left out). ``undo``: data instants the action rolls
        back, whose MDT delta commits go first. ``written``: log files of this delta commit that
        executors wrote already (the record index), moved into the current slice of their file
        group if a compaction started a new one since. ``existing``: :meth:`partitions` as the
        caller listed them under the same lock (default: list them)."""
        tl = self.timeline.reload()
        rollback_times = self._rollback_times(instant)
        self._finish_interrupted(tl, keep=instant, rollback_times=rollback_times)
        for target in undo:
            if any(i.timestamp == target and i.action == DELTA_COMMIT for i in tl.instants()):
                self._undo(tl, target, next(rollback_times))
        again = any(i.timestamp == instant for i in tl.instants())
        if again:  # an earlier attempt: apply it afresh
            self._undo(tl, instant, next(rollback_times))
        base = self.base_instant()
        if self._compact_if_due(data_timeline, max_delta_commits, base=base or "") is not None:
            base = self.base_instant()  # the compaction's
        if base is None:
            raise HudiCorruptFileError(f"the metadata table {self.storage.base_uri} has no base file")
        tl.create_requested(instant, DELTA_COMMIT)
        tl.transition_inflight(instant, DELTA_COMMIT)
        stats: dict[str, list[WriteStat]] = {}
        existing = self.partitions() if existing is None else existing
        for partition, part_records in sorted(records.items()):
            if partition not in existing:
                continue
            for group, bucket in _buckets(part_records, existing[partition]).items():
                if bucket or partition == FILES_PARTITION:
                    stats.setdefault(partition, []).append(self._write_log(instant, partition, group, base, bucket))
        for partition, partition_stats in sorted((written or {}).items()):
            if partition in existing:
                stats.setdefault(partition, []).extend(self._adopt(instant, stat, base) for stat in partition_stats)
        # the markers of the log files written just now are all there are, unless executors or an
        # earlier attempt wrote others: then the folder is listed
        mine = None if written or again else [(s.path, APPEND) for part in stats.values() for s in part]
        meta = CommitMetadata(stats, operation_type="UPSERT_PREPPED", extra_metadata={"schema": RECORD_SCHEMA})
        tl.complete(instant, DELTA_COMMIT, meta.to_json().encode("utf-8"))
        delete_markers(self.storage, instant, markers=mine)

    def _write_log(self, instant: str, partition: str, group: str, base: str, records: Records) -> WriteStat:
        return self.write_log_cells(instant, partition, group, base, encode_records(records, RECORD_SCHEMA))

    def _next_log(self, partition: str, group: str, base: str) -> tuple[str, int]:
        """(relative path, version) of the next log file of a file group's slice ``base``."""
        versions = [lf.version for info in self.storage.list_files(partition)
                    if (lf := parse_log_file(info.name)) is not None and lf.base_instant == base
                    and lf.file_id == group]
        version = max(versions, default=0) + 1
        # the attempt's own token: a delta commit written again after a rollback never takes the
        # name (and so the cached decoding) of the one rolled back
        token = f"0-0-{time.time_ns() % 1_000_000_000}"
        return f"{partition}/{log_file_name(group, base, version, token)}", version

    def write_log_cells(self, instant: str, partition: str, group: str, base: str, cells: Cells | CellColumns,
                        deleted_keys: list[str] | None = None) -> WriteStat:
        """A new log file of a file group's slice ``base`` with one HFile data block of ``cells``
        (sorted (key, Avro value) pairs) and, for ``deleted_keys``, a delete block."""
        rel, version = self._next_log(partition, group, base)
        create_marker(self.storage, instant, rel, APPEND)
        blocks = [hfile_data_block(cells, RECORD_SCHEMA, instant)] if len(cells) or not deleted_keys else []
        if deleted_keys:
            blocks.append(delete_block(deleted_keys, [partition] * len(deleted_keys), instant))
        data = b"".join(blocks)
        self.storage.create_new(rel, data)
        n = len(cells) + len(deleted_keys or [])
        return WriteStat(group, rel, partition, prevCommit=base, numWrites=len(cells),
                         numUpdateWrites=len(cells), numDeletes=len(deleted_keys or []), totalWriteBytes=len(data),
                         fileSizeInBytes=len(data), totalLogRecords=n, totalLogBlocks=len(blocks),
                         logVersion=version, logOffset=0, baseFile=hfile_name(base, group),
                         logFiles=[posixpath.basename(rel)])

    def _adopt(self, instant: str, stat: WriteStat, base: str) -> WriteStat:
        """A log file an executor wrote for this delta commit, in its group's current slice: a
        compaction since then (another writer's delta commit, or this one's) started a new slice,
        and readers ignore log files of older slices, so it moves (its blocks stay valid). A
        partition rebuilt since (its file groups made anew, their count perhaps too) or a file
        cleaned away fails the commit, which the write then rolls back."""
        group = stat.fileId
        current = self.current_base(stat.partitionPath, group) or base
        if stat.prevCommit == current:
            return stat
        if current.endswith(INIT_SUFFIX) or not self.storage.exists(stat.path):
            raise HudiCommitError(
                f"the {stat.partitionPath} partition of the metadata table of {self.data_storage.base_uri} was rebuilt "
                f"or cleaned while write {instant} ran (its file {stat.path} no longer fits it); run the write again")
        rel, version = self._next_log(stat.partitionPath, group, current)
        create_marker(self.storage, instant, rel, APPEND)
        self.storage.create_new(rel, self.storage.read_bytes(stat.path))
        self.storage.delete(stat.path)
        return dataclasses.replace(stat, path=rel, prevCommit=current, logVersion=version,
                                   baseFile=hfile_name(current, group), logFiles=[posixpath.basename(rel)])

    def _rollback_times(self, instant: str) -> Iterator[str]:
        """Times of the MDT rollbacks an update at ``instant`` makes: ``instant`` + ``006`` (Hudi's
        rollback suffix) and the next suffixes, never a data-table instant time."""
        taken = {i.timestamp for i in self.timeline.instant_files}
        for n in range(int(ROLLBACK_SUFFIX), int(INIT_SUFFIX)):
            if f"{instant}{n:03d}" not in taken:
                yield f"{instant}{n:03d}"
        raise HudiCorruptFileError(f"the metadata table {self.storage.base_uri} has no rollback time left "
                                   f"for instant {instant}")

    def _undo(self, tl: Timeline, instant: str, rb_time: str) -> None:
        target = next(i for i in tl.instants() if i.timestamp == instant)
        rollback_instant(self.storage, tl, target, complete=complete_plainly, rb_time=rb_time)

    def _finish_interrupted(self, tl: Timeline, *, keep: str, rollback_times: Iterator[str]) -> None:
        """Finish what a crash left pending in the MDT: its rollbacks and cleans run to the end;
        its delta commits and compactions (whose data instants never completed) are undone."""
        if tl.pending([ROLLBACK, CLEAN]):  # then see the timeline afresh after finishing them
            finish_pending_rollbacks(self.storage, tl, complete=complete_plainly)
            for inst in tl.pending([CLEAN]):
                run_clean(HudiTable(self.storage), inst.timestamp, complete=complete_plainly)
            tl.reload()
        for inst in tl.pending([DELTA_COMMIT, COMPACTION]):
            if inst.timestamp != keep:
                self._undo(tl, inst.timestamp, next(rollback_times))

    # -- compaction, clean, archival ---------------------------------------------------------------
    def _compact_if_due(self, data_timeline: Timeline, max_delta_commits: int, *,
                        base: str | None = None) -> str | None:
        tl = self.timeline
        base = (self.base_instant() or "") if base is None else base
        deltas = [i.timestamp for i in tl.completed([DELTA_COMMIT]) if i.timestamp > base]
        if len(deltas) < max(1, max_delta_commits):
            return None
        latest = deltas[-1]
        pending = [i.timestamp for i in data_timeline.pending() if i.timestamp <= latest]
        if pending:  # a failed or running action older than the delta commits: never fold it into a base
            log.info("metadata table compaction waits for pending data writes %s", pending)
            return None
        instant = latest + COMPACTION_SUFFIX
        merged = self.merged_records(data_timeline)
        ops, plans = [], []
        for partition, groups in sorted(self.partitions().items()):
            if partition == RECORD_INDEX_PARTITION:
                continue
            names = [info.name for info in self.storage.list_files(partition)]
            for group, bucket in _buckets(merged.get(partition, []), groups).items():
                logs = sorted((n for n in names if (lf := parse_log_file(n)) is not None and lf.file_id == group
                               and lf.base_instant == base), key=log_path_order)
                base_name = hfile_name(base, group) if hfile_name(base, group) in names else None
                ops.append(CompactionOperation(partition, group, base, base_name, tuple(logs)))
                plans.append((partition, group, bucket))
        cell_plans = []
        for piece in self.slices(RECORD_INDEX_PARTITION, data_timeline) if RECORD_INDEX_PARTITION in self.partitions() \
                else []:
            names = [posixpath.basename(rel) for rel, _info in piece.logs]
            base_name = posixpath.basename(piece.base[0]) if piece.base else None
            ops.append(CompactionOperation(RECORD_INDEX_PARTITION, piece.file_id, base, base_name, tuple(names)))
            cell_plans.append(piece)
        tl.create_requested(instant, COMPACTION, CompactionPlan(tuple(ops)).to_bytes())
        tl.transition_inflight(instant, COMPACTION)
        stats: dict[str, list[WriteStat]] = {}
        for partition, group, bucket in plans:
            stats.setdefault(partition, []).append(self._write_base(instant, partition, group, bucket))
        for piece in cell_plans:
            stats.setdefault(RECORD_INDEX_PARTITION, []).append(self.write_base_cells(
                instant, RECORD_INDEX_PARTITION, piece.file_id, record_index.merged_cells(self.data_storage, piece)))
        meta = CommitMetadata(stats, operation_type="COMPACT", compacted=True, extra_metadata={"schema": RECORD_SCHEMA})
        tl.complete(instant, COMMIT, meta.to_json().encode("utf-8"))
        delete_markers(self.storage, instant)
        self._clean(latest + CLEAN_SUFFIX)
        self._archive(data_timeline)
        return instant

    def _write_base(self, instant: str, partition: str, group: str, records: Records) -> WriteStat:
        return self.write_base_cells(instant, partition, group, encode_records(records, RECORD_SCHEMA))

    def write_base_cells(self, instant: str, partition: str, group: str, cells: Cells | CellColumns) -> WriteStat:
        """A file group's base HFile at ``instant`` holding ``cells`` (sorted)."""
        columns = as_columns(cells)
        bloom = BloomFilter()
        bloom.add_keys(columns.rows.cast(pa.string()))
        rel = f"{partition}/{hfile_name(instant, group)}"
        create_marker(self.storage, instant, rel, CREATE)
        n = len(columns)
        info = {"schema": RECORD_SCHEMA.encode(), "bloomFilterTypeCode": b"DYNAMIC_V0",
                "minRecordKey": columns.rows[0].as_py() if n else b"",
                "maxRecordKey": columns.rows[n - 1].as_py() if n else b""}
        data = write_hfile(columns, block_size=1024 * 1024, codec="GZ", file_info=info,
                           meta_blocks={"bloomFilter": bloom.serialize().encode()})
        self.storage.write_bytes(rel, data)
        return WriteStat(group, rel, partition, prevCommit="null", numWrites=n,
                         numInserts=n, totalWriteBytes=len(data), fileSizeInBytes=len(data))

    def _clean(self, instant: str) -> None:
        """Delete slices older than the previous one: readers that listed the MDT before this
        compaction still find their slice."""
        pending = {i.timestamp for i in self.timeline.reload().pending()}  # archived compactions count
        bases = sorted({parsed.instant_time for info in self.storage.list_files(FILES_PARTITION)
                        if info.name.endswith(".hfile") and (parsed := parse_base_file(info.name)) is not None
                        and parsed.instant_time not in pending})
        if len(bases) < 3:
            return
        keep_from = bases[-2]
        doomed: dict[str, tuple[str, ...]] = {}
        for partition in self.partitions():
            old = []
            for info in self.storage.list_files(partition):
                key = slice_key(info.name)
                if key is not None and key[1] < keep_from:
                    old.append(f"{partition}/{info.name}")
            if old:
                doomed[partition] = tuple(sorted(old))
        if not doomed:
            return
        mdt = HudiTable(self.storage)
        plan = CleanPlan("KEEP_LATEST_FILE_VERSIONS", None, bases[-1], doomed)
        mdt.timeline.create_requested(instant, CLEAN, write_record(CLEANER_PLAN, plan.to_avro(mdt)))
        run_clean(mdt, instant, complete=complete_plainly)
        self.timeline.reload()

    def _archive(self, data_timeline: Timeline) -> None:
        """Archive the MDT timeline to its newest instants: never its latest compaction or anything
        after it, nor the delta commits of data instants still on the active timeline."""
        tl = self.timeline.reload()
        done = tl.completed()
        if len(done) <= KEEP_MAX:
            return
        limits = [t for t in (self.latest_compaction(), data_timeline.first_data_instant_time()) if t]
        if not limits:
            return
        candidates = [i.timestamp for i in done if i.timestamp < min(limits)]
        chosen = candidates[:max(0, len(done) - KEEP_MIN)]
        if chosen:
            archive_instants(self.storage, tl, chosen)
            tl.reload()
