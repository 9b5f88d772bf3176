"""Completing a data-table instant: its metadata-table delta commit first, then the instant.

Every code path that completes a data-table action (writes, compactions, clusterings, cleans,
rollbacks, restores, savepoints) completes it through :func:`complete_instant`, under the table
lock, by way of the commit point (:class:`pyhudi.commit.point.CommitPoint`), which passes the
writer's :class:`MetadataOptions` every time. When the table has
a usable metadata table, the action's ``files``-partition records are applied to it as a delta
commit of the same instant time before the data instant's completed file appears; a crash in
between leaves an MDT delta commit of a pending data instant, which readers ignore and the
instant's rollback undoes.

On a table of version 8 or 9 the data table records its metadata table as Hudi 1.x does
(docs/hudi-1x-format.md section 5): ``hoodie.table.metadata.partitions`` (sorted),
``hoodie.table.metadata.partitions.inflight`` (empty when no partition is being built) and
``hoodie.table.index.defs.path`` naming ``.hoodie/.index_defs/index.json``, the definitions of
the ``column_stats`` and ``record_index`` indexes (with their index versions on 9: column
statistics V2, record index V1). A table without a metadata table has none of them.

A partitioned table of version 8 or 9 whose metadata table keeps ``column_stats`` keeps
``partition_stats`` beside it, as Hudi 1.x does (``hoodie.metadata.index.partition.stats.enable``,
default true): initialized after the other partitions, its records recomputed for every data
partition a write touches (:mod:`pyhudi.commit.partition_stats_build`).
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyhudi import config as C
from pyhudi.commit import partition_stats_build
from pyhudi.commit.metadata_writer import MetadataWriter
from pyhudi.commit.record_index_build import build_locally
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.config.properties import load_table_config, update_table_config
from pyhudi.config.support import INDEX_DEFS_FILE, INDEX_DEFS_PATH, METADATA_PARTITIONS_INFLIGHT
from pyhudi.io.avro_schema import META_FIELDS
from pyhudi.metadata import bloom_filters, column_stats
from pyhudi.metadata.convert import Record, clean_records, commit_records, merge_records, rollback_records
from pyhudi.metadata.files import FILES_PARTITION, files_record, partitions_record
from pyhudi.metadata.record_index import Sizing
from pyhudi.metadata.table import (
    BLOOM_FILTERS_PARTITION,
    COLUMN_STATS_PARTITION,
    FILE_ACTIONS,
    INIT_SUFFIX,
    PARTITION_STATS_PARTITION,
    RECORD_INDEX_PARTITION,
    Builder,
    usable_partitions,
)
from pyhudi.storage import Storage
from pyhudi.table.fs_view import FileSystemView
from pyhudi.table.table import HudiTable
from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.instant import CLEAN, RESTORE, ROLLBACK, WRITE_ACTIONS, Instant
from pyhudi.timeline.timeline import Timeline

log = logging.getLogger("pyhudi")


@dataclass(frozen=True)
class MetadataOptions:
    """The writer's options that shape every metadata-table delta commit. Read once from the
    options (the registry holds the defaults), so that a clean or rollback run after a write
    compacts and indexes the metadata table exactly as the write does."""

    max_delta_commits: int
    stats_columns: tuple[str, ...]
    #: file groups of a partition_stats partition beside column_stats (0: none; versions 8+)
    partition_stats_groups: int = 1

    @classmethod
    def of(cls, cfg: HudiConfig) -> MetadataOptions:
        return cls(cfg.get(C.METADATA_COMPACT_MAX_DELTA_COMMITS), tuple(cfg.get(C.METADATA_COLUMN_STATS_COLUMNS)),
                   cfg.get(C.METADATA_PARTITION_STATS_FILE_GROUPS) if cfg.get(C.METADATA_PARTITION_STATS_ENABLE)
                   else 0)


def metadata_table_of(storage: Storage, timeline: Timeline) -> MetadataWriter | None:
    """The table's metadata table when the table declares its ``files`` partition usable."""
    if FILES_PARTITION not in usable_partitions(load_table_config(storage).props):
        return None
    mdt = MetadataWriter(storage)
    return mdt if mdt.exists() else None


def partition_records(mdt: MetadataWriter, storage: Storage, action: str, content: bytes, *, source: str,
                      stats_columns: tuple[str, ...] = (),
                      have: Mapping[str, list[str]] | None = None) -> tuple[dict[str, list[Record]], list[str]]:
    """(records of a completed action per MDT partition the table has, data instants it rolls back);
    ``stats_columns``: the columns whose statistics new base files get (empty: all); ``have``: the
    MDT's partitions as just listed (default: list them)."""
    files, undo, written = action_records(action, content, source=source)
    out = {FILES_PARTITION: files}
    have = mdt.partitions() if have is None else have
    if COLUMN_STATS_PARTITION in have:
        out[COLUMN_STATS_PARTITION] = (column_stats.retired_records(files, indexed_columns(storage))
                                       + column_stats.base_file_records(storage, written, columns=stats_columns))
    if BLOOM_FILTERS_PARTITION in have:
        out[BLOOM_FILTERS_PARTITION] = (bloom_filters.retired_records(files)
                                        + bloom_filters.base_file_records(storage, written))
    return out, undo


def indexed_columns(storage: Storage) -> list[str]:
    """The top-level columns the column-stats partition indexes: every column of the table
    schema, meta fields included (Hudi's default without a column list)."""
    schema = HudiTable(storage).avro_schema()
    fields = [f["name"] for f in json.loads(schema).get("fields", [])] if schema else []
    return [*(m for m in META_FIELDS if m not in fields), *fields]


def action_records(action: str, content: bytes, *,
                   source: str) -> tuple[list[Record], list[str], list[str]]:
    """(``files``-partition records of a completed action, data instants it rolls back, files it
    wrote relative to the table)."""
    if action in WRITE_ACTIONS:
        meta = CommitMetadata.from_json(content, source=source)
        return commit_records(meta), [], [s.path for s in meta.write_stats() if s.path]
    record = read_record(content)
    if action == CLEAN:
        return clean_records(record), [], []
    if action == ROLLBACK:
        return rollback_records(record), [str(t) for t in record.get("commitsRollback") or []], []
    if action == RESTORE:
        records = [r for metas in (record.get("hoodieRestoreMetadata") or {}).values()
                   for meta in metas for r in rollback_records(meta)]
        return merge_records(records), [str(t) for t in record.get("instantsToRollback") or []], []
    return [], [], []


def complete_instant(storage: Storage, timeline: Timeline, instant: str, action: str, content: bytes, *,
                     options: MetadataOptions, rebuild: bool = False,
                     written: Mapping[str, list[WriteStat]] | None = None,
                     records: Mapping[str, list[Record]] | None = None,
                     record_index: Builder | None = None) -> Instant:
    """Apply a data-table action to the metadata table (if the table has one and the action
    changes files: a savepoint does not), then complete it.

    A restore, and a rollback finished from its plan after a crash (``rebuild``), may have undone
    more than their metadata records: the metadata table is rebuilt from storage instead, at the
    instant's time + ``010``. So is a rollback of a commit whose record index entries a metadata
    compaction folded into a base file already (its undo cannot take them out again). A metadata
    table that missed an action (a writer that did not keep it) is not updated, but declared
    unusable, so that readers list storage and the next write rebuilds it.

    ``written``: the record index log files executors wrote for this instant; ``records``: more
    records executors computed for it (the statistics of the log files it wrote); ``record_index``:
    how to build that partition when the metadata table is rebuilt (default: in this process);
    ``options``: the writer's metadata options (when to compact, which columns get statistics)."""
    mdt = metadata_table_of(storage, timeline) if action in FILE_ACTIONS else None
    if mdt is not None:
        mdt.stats_columns = options.stats_columns
        if action in WRITE_ACTIONS and mdt.table_version >= 8:
            mdt.data_schema = CommitMetadata.from_json(content, source=f"{action} {instant}").schema
        have = mdt.partitions()
        if mdt.data_schema and COLUMN_STATS_PARTITION in have:  # a column added: the definition grows
            _write_index_definitions(storage, have, stats_columns=options.stats_columns, schema=mdt.data_schema,
                                     version=mdt.table_version)
        if action == ROLLBACK and RECORD_INDEX_PARTITION in have and not rebuild:
            compacted = mdt.latest_compaction() or ""
            rebuild = any(t < compacted for t in action_records(action, content, source=instant)[1])
        if rebuild or action == RESTORE:
            groups = {p: len(g) for p, g in have.items()}
            built = {}
            if RECORD_INDEX_PARTITION in groups:
                built[RECORD_INDEX_PARTITION] = record_index or _local_builder(
                    storage, len(have[RECORD_INDEX_PARTITION]))
            mdt.initialize(timeline, load_table_config(storage).props,
                           initial_records(storage, timeline, groups, stats_columns=options.stats_columns),
                           instant=instant + INIT_SUFFIX, built=built)
            if mdt.table_version >= 8:  # its init times are below the instant: record that it applied
                mdt.apply(instant, {FILES_PARTITION: []}, timeline, max_delta_commits=options.max_delta_commits)
        elif lag := mdt.lag(timeline):
            log.warning("the metadata table of %s missed %s; readers list storage until the next write rebuilds it",
                        storage.base_uri, ", ".join(lag[:3]))
            _set_partitions(storage, None)
        else:
            # the partitions listed above serve the whole update (only a rebuild changes them)
            found, undo = partition_records(mdt, storage, action, content, source=f"{action} {instant}",
                                            stats_columns=options.stats_columns, have=have)
            for partition, extra in (records or {}).items():
                if partition in found:
                    found[partition] = found[partition] + list(extra)
            if PARTITION_STATS_PARTITION in have:
                found[PARTITION_STATS_PARTITION] = _partition_stats(mdt, storage, timeline, instant, action, content,
                                                                    found.get(COLUMN_STATS_PARTITION, []))
            mdt.apply(instant, found, timeline, undo=undo, max_delta_commits=options.max_delta_commits,
                      written=written, existing=have)
    return timeline.complete(instant, action, content)


def _indexed_columns(storage: Storage, schema: str | None,
                     stats_columns: tuple[str, ...]) -> tuple[list[dict], list[str]]:
    """(the data schema's fields, the columns whose statistics a version-8/9 metadata table
    keeps: ``stats_columns``, else Hudi 1.x's default); ``schema``: the write's (default: the
    table's)."""
    schema = schema or HudiTable(storage).avro_schema()
    fields = json.loads(schema).get("fields", []) if schema else []
    return fields, list(stats_columns) or column_stats.default_columns(fields)


def _partition_stats(mdt: MetadataWriter, storage: Storage, timeline: Timeline, instant: str, action: str,
                     content: bytes, column_records: list[Record]) -> list[Record]:
    """The ``partition_stats`` records of an action (:mod:`pyhudi.commit.partition_stats_build`):
    a write's partitions recomputed, a rollback's too, nothing for a clean."""
    _fields, columns = _indexed_columns(storage, mdt.data_schema, mdt.stats_columns)
    new = mdt.shaped(COLUMN_STATS_PARTITION, list(column_records))
    if action in WRITE_ACTIONS:
        meta = CommitMetadata.from_json(content, source=f"{action} {instant}")
        return partition_stats_build.commit_records(mdt, storage, timeline, meta, instant=instant, columns=columns,
                                                    new_column_stats=new)
    if action == ROLLBACK:
        touched = [p for p in (read_record(content).get("partitionMetadata") or {}) if p]
        return partition_stats_build.recompute(mdt, storage, timeline, touched, instant=instant, columns=columns,
                                               new_column_stats=new)
    return []


def _local_builder(storage: Storage, groups: int) -> Builder:
    """Rebuilds the record index in this process with the file-group count it had."""
    return build_locally(HudiTable(storage), Sizing(min_count=groups, max_count=groups))


def _set_partitions(storage: Storage, value: str | None, *, version: int = 6) -> None:
    """Declare the usable metadata partitions (None: none) in hoodie.properties, with Hudi's backup
    protocol; version 8+ keeps an empty inflight list and the index definitions beside them."""
    changes: dict[str, str | None] = {METADATA_PARTITIONS_INFLIGHT: None, P.METADATA_PARTITIONS: value}
    if version >= 8 and value is not None:
        changes.update({METADATA_PARTITIONS_INFLIGHT: "", INDEX_DEFS_PATH: INDEX_DEFS_FILE})
    update_table_config(storage, changes)


def _json(value: object, indent: str = "") -> str:
    """Jackson's default pretty printer, which Hudi writes ``index.json`` with."""
    inner = indent + "  "
    if isinstance(value, dict):
        if not value:
            return "{ }"
        body = ",\n".join(f"{inner}{json.dumps(k)} : {_json(v, inner)}" for k, v in value.items())
        return "{\n" + body + "\n" + indent + "}"
    if isinstance(value, list):
        return "[ " + ", ".join(_json(v, inner) for v in value) + " ]" if value else "[ ]"
    return json.dumps(value)


def index_definitions(partitions: Iterable[str], stats_columns: list[str], version: int) -> str:
    """``index.json`` of a version-8/9 table keeping ``partitions``: the record index and column
    statistics entries Hudi 1.x writes (``files`` and ``bloom_filters`` get none), with their index
    versions on 9 (column statistics V2, record index V1) and none on 8."""
    defs: dict[str, dict] = {}
    if RECORD_INDEX_PARTITION in partitions:
        defs[RECORD_INDEX_PARTITION] = {
            "indexName": RECORD_INDEX_PARTITION, "indexType": RECORD_INDEX_PARTITION, "indexFunction": "",
            "sourceFields": [], "indexOptions": {"isPartitioned": "false"},
            **({"version": "V1"} if version >= 9 else {})}
    if COLUMN_STATS_PARTITION in partitions:
        defs[COLUMN_STATS_PARTITION] = {
            "indexName": COLUMN_STATS_PARTITION, "indexType": COLUMN_STATS_PARTITION,
            "indexFunction": COLUMN_STATS_PARTITION, "sourceFields": list(stats_columns), "indexOptions": {},
            **({"version": "V2"} if version >= 9 else {})}
    return _json({"indexDefinitions": defs})


def _write_index_definitions(storage: Storage, partitions: Iterable[str], *, stats_columns: tuple[str, ...],
                             schema: str | None, version: int) -> None:
    """Write ``index.json`` when its content changes (a column added to the indexed ones)."""
    fields = json.loads(schema).get("fields", []) if schema else []
    columns = list(stats_columns) or column_stats.default_columns(fields)
    text = index_definitions(partitions, columns, version)
    if storage.read_bytes_or_none(INDEX_DEFS_FILE) != text.encode("utf-8"):
        storage.write_bytes(INDEX_DEFS_FILE, text.encode("utf-8"))


def initial_records(storage: Storage, timeline: Timeline, groups: Mapping[str, int], *,
                    stats_columns: tuple[str, ...] = ()) -> dict[str, tuple[int, list[Record]]]:
    """The first records of each MDT partition (name -> file-group count), from storage;
    ``stats_columns``: the columns whose statistics are kept (empty: all)."""
    files = committed_files(storage, timeline)
    out: dict[str, tuple[int, list[Record]]] = {}
    records = [partitions_record(sorted(p or "." for p in files))]
    records += [files_record(p, dict(sizes)) for p, sizes in sorted(files.items())]
    out[FILES_PARTITION] = (1, records)
    bases = [posixpath.join(p, name) if p else name for p, names in files.items() for name in names]
    if COLUMN_STATS_PARTITION in groups:
        records = column_stats.base_file_records(storage, bases, columns=stats_columns)
        if load_table_config(storage).version >= 8:  # and of log files, from their rows (partition_stats sums them)
            done = {i.timestamp for i in timeline.completed()}
            records += column_stats.log_file_records(storage, [b for b in bases if not b.endswith(".parquet")],
                                                     completed=done, columns=stats_columns)
        out[COLUMN_STATS_PARTITION] = (groups[COLUMN_STATS_PARTITION], records)
    if PARTITION_STATS_PARTITION in groups:  # version 8+: from the column statistics, in their shape
        version = load_table_config(storage).version
        fields, columns = _indexed_columns(storage, None, stats_columns)
        shaped = column_stats.in_version(out.get(COLUMN_STATS_PARTITION, (0, []))[1], version, fields,
                                         columns=columns)
        latest = partition_stats_build.latest_files(storage, timeline)
        out[PARTITION_STATS_PARTITION] = (groups[PARTITION_STATS_PARTITION], partition_stats_build.initial_records(
            latest, shaped, columns=columns, table_version=version))
    if BLOOM_FILTERS_PARTITION in groups:  # the record index has a builder
        out[BLOOM_FILTERS_PARTITION] = (groups[BLOOM_FILTERS_PARTITION],
                                        bloom_filters.base_file_records(storage, bases))
    return out


def committed_files(storage: Storage, timeline: Timeline) -> dict[str, dict[str, int]]:
    """Partition -> file name -> size of every file of committed slices in storage (replaced file
    groups included: their files stay listed until the cleaner deletes them)."""
    view = FileSystemView(storage, timeline, include_replaced=True)
    files: dict[str, dict[str, int]] = {p: {} for p in view.partitions}
    for group in view.file_groups():
        for piece in group.slices:
            for f in ([piece.base_file] if piece.base_file else []) + list(piece.log_files):
                files[f.partition_path][f.name] = f.size
    return files


def prepare_metadata_table(table: HudiTable, *, enabled: bool, column_stats_groups: int = 0,
                           bloom_filter_groups: int = 0, record_index: Builder | None = None,
                           stats_columns: tuple[str, ...] = (), partition_stats_groups: int = 1) -> None:
    """At the start of a write, under the table lock: build the metadata table from storage when it
    is enabled and missing, stale (a writer that did not keep it wrote since) or has other
    partitions than asked for (``column_stats_groups`` > 0: a ``column_stats`` partition of that
    many file groups), or remove it when disabled, as Hudi does, so that no reader trusts a file
    list that writes no longer maintain.

    ``record_index``: the builder of a ``record_index`` partition, when the write keeps one (its
    file-group count, fixed at creation, is the builder's choice). ``partition_stats_groups``: on a
    partitioned table of version 8 or 9 with a ``column_stats`` partition, the file groups of its
    ``partition_stats`` partition, which Hudi 1.x keeps beside it (0: none).

    pyhudi keeps the ``files``, ``column_stats``, ``bloom_filters``, ``record_index`` and
    ``partition_stats`` partitions: other partitions an Apache Hudi writer declared would go stale under pyhudi's
    writes, so they are deleted and no longer declared, as are index partitions not asked for."""
    mdt = MetadataWriter(table.storage)
    mdt.stats_columns = stats_columns
    declared = usable_partitions(table.config.props) | usable_partitions(
        {P.METADATA_PARTITIONS: table.config.props.get(METADATA_PARTITIONS_INFLIGHT, "")})
    version = table.config.version
    if not enabled:
        if declared or mdt.storage.is_dir("") or INDEX_DEFS_PATH in table.config.props:
            _set_partitions(table.storage, None)
            if INDEX_DEFS_PATH in table.config.props:
                update_table_config(table.storage, {INDEX_DEFS_PATH: None})
                table.storage.delete_dir(posixpath.dirname(INDEX_DEFS_FILE))
            mdt.delete()
            log.info("removed the metadata table of %s (hoodie.metadata.enable=false)", table.path)
        table.reload()
        return
    wanted = {FILES_PARTITION: 1}
    if column_stats_groups > 0:
        wanted[COLUMN_STATS_PARTITION] = column_stats_groups
        if version >= 8 and partition_stats_groups > 0 and table.config.props.get(P.PARTITION_FIELDS):
            wanted[PARTITION_STATS_PARTITION] = partition_stats_groups
    if bloom_filter_groups > 0:
        wanted[BLOOM_FILTERS_PARTITION] = bloom_filter_groups
    if record_index is not None:
        wanted[RECORD_INDEX_PARTITION] = 0  # any count: the builder chose it
    timeline = table.timeline
    if declared == set(wanted) and mdt.exists():
        have = {p: len(g) for p, g in mdt.partitions().items()}
        lag = mdt.lag(timeline)
        if not lag and all(have.get(p) == n or (p in have and p in (FILES_PARTITION, RECORD_INDEX_PARTITION))
                           for p, n in wanted.items()):
            if version >= 8 and COLUMN_STATS_PARTITION in wanted:
                _write_index_definitions(table.storage, wanted, stats_columns=stats_columns,
                                         schema=table.avro_schema(), version=version)
            table.reload()
            return
        if lag:
            log.warning("the metadata table of %s is behind the timeline (%s not applied); rebuilding it from "
                        "storage", table.path, ", ".join(lag[:3]))
    for other in sorted(declared - set(wanted)):
        log.warning("pyhudi does not maintain the %s partition of the metadata table of %s; removing it",
                    other, table.path)
    if declared:
        _set_partitions(table.storage, None)
    mdt.initialize(timeline, table.config.props,
                   initial_records(table.storage, timeline, wanted, stats_columns=stats_columns),
                   built={RECORD_INDEX_PARTITION: record_index} if record_index is not None else None)
    if version >= 8:
        _write_index_definitions(table.storage, wanted, stats_columns=stats_columns, schema=table.avro_schema(),
                                 version=version)
    _set_partitions(table.storage, ",".join(sorted(wanted)), version=version)
    table.reload()
