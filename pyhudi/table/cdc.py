"""Planning a CDC query: the change splits of a range of instants, from the timeline alone.

Apache Hudi's ``HoodieCDCExtractor`` plans a CDC query (``CDCRelation``, options
``hoodie.datasource.query.type=incremental``, ``hoodie.datasource.read.begin.instanttime``
exclusive, ``hoodie.datasource.read.end.instanttime`` inclusive and
``hoodie.datasource.query.incremental.format=cdc``). This module does the same:

- The instants of the range are the completed ``commit``, ``deltacommit`` and ``replacecommit``
  instants (``initInstantAndCommitMetadata``) whose operation yields changes
  (``WriteOperationType.yieldChanges``: insert, upsert, delete, bulk insert, insert overwrite (table),
  delete partition, bootstrap, and the prepped upsert/delete). Compaction and clustering rewrite
  records without changing them and are left out. The range is of instant times on timeline
  layout 1 and of completion times on layout 2, as pyhudi's incremental queries
  (:mod:`pyhudi.table.incremental`), so a CDC stream and a latest-state stream advance alike.
- Every write statistic of those instants becomes one split (``parseWriteStat``): with CDC
  files (``cdcStats``) ``AS_IS``; a base file that only inserted (``numUpdateWrites == 0 and
  numWrites == numInserts``) ``BASE_FILE_INSERT``; a delete that left no record
  (``numWrites == 0``, ``numDeletes != 0``) ``BASE_FILE_DELETE``; a log file ``LOG_FILE``; and
  every file group a replace commit retired ``REPLACE_COMMIT``
  (``extractCDCFileSplits``).

Where Hudi answers only tables with ``hoodie.table.cdc.enabled`` ("It isn't a CDC hudi table",
``CDCRelation.getCDCRelation``) and fails on a rewritten base file without a CDC file ("There
should be a cdc log file."), pyhudi answers from the file slices while they exist: the slice
before the instant against the slice the instant wrote (``BASE_FILE_UPDATE``, see
:mod:`pyhudi.read.cdc`). A split whose slices the cleaner removed, or a range reaching archived
instants (whose commit metadata is gone; Hudi's extractor silently reads the active timeline
only), fails with :class:`HudiRetentionError` naming the instant and file group.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import pyarrow as pa

from pyhudi.errors import HudiConfigError, HudiRetentionError, HudiUnsupportedError
from pyhudi.instant_time import parse_query_instant
from pyhudi.io.file_names import log_order, parse_log_file
from pyhudi.read.cdc import CDC_SCHEMA, CDCContext, CDCSplit, InferenceCase, split_changes
from pyhudi.read.merge import MergeSpec
from pyhudi.read.retention import CleanedSlice, cleaned_slices
from pyhudi.table.fs_view import FileGroup, FileSlice, completion_of
from pyhudi.table.incremental import EARLIEST, parse_begin, writes_before_hole
from pyhudi.table.table import HudiTable
from pyhudi.timeline.archive import has_archive
from pyhudi.timeline.commit_metadata import WriteStat
from pyhudi.timeline.instant import Instant

#: ``WriteOperationType.yieldChanges``: the operations whose commits a CDC query reads
YIELDS_CHANGES = frozenset({"INSERT", "UPSERT", "UPSERT_PREPPED", "DELETE", "DELETE_PREPPED", "BULK_INSERT",
                            "DELETE_PARTITION", "INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE", "BOOTSTRAP"})
_DELETES = frozenset({"DELETE", "DELETE_PREPPED"})  # WriteOperationType.isDelete
_NO_COMMIT = ("", "null", None)
#: cases that compare the group's state before and as of the instant (two log files the instant
#: wrote to one group, say a rolled-over log, are one comparison)
_COMPARED = frozenset({InferenceCase.LOG_FILE, InferenceCase.BASE_FILE_UPDATE})


@dataclass(frozen=True)
class CDCPlan:
    """The splits of one CDC query, ordered by instant, partition and file group."""

    begin: str  # exclusive
    end: str  # inclusive
    instants: tuple[str, ...]  # the instants whose changes the query returns
    splits: tuple[CDCSplit, ...]
    context: CDCContext


def _when(write: Instant) -> str:
    return completion_of(write.timestamp, write.completion_time)


def plan_cdc(table: HudiTable, begin: object, end: object | None = None, *, holes: str = "FAIL") -> CDCPlan:
    """The splits of the CDC query over ``(begin, end]`` (end: the latest completed write)."""
    if begin is None:
        raise HudiConfigError("a CDC query needs hoodie.datasource.read.begin.instanttime (an instant time, "
                              "exclusive; 000 for everything)")
    table.config.check_data_table(merges=False)
    if not table.config.populate_meta_fields:
        raise HudiUnsupportedError(
            f"{table.path} does not store record keys and commit times (hoodie.populate.meta.fields=false); pyhudi "
            "answers CDC queries from them: use a snapshot or time travel query")
    timeline = table.timeline
    start = parse_begin(begin)
    writes = writes_before_hole(table, holes, "a CDC query now could miss its changes")
    stop = parse_query_instant(end) if end is not None else max([start, *(_when(w) for w in writes)])
    if stop < start:
        raise HudiConfigError(f"hoodie.datasource.read.end.instanttime {stop} is before the begin instant {start}")
    first_active = timeline.first_data_instant_time()
    if (start == EARLIEST or (first_active is not None and start < first_active)) and has_archive(table.storage):
        raise HudiRetentionError(
            f"the CDC query ({start}, {stop}] reaches archived instants (the active timeline starts at "
            f"{first_active}): their commit metadata, which says what each write changed, is gone. Begin at "
            f"{first_active} or later, or keep more instants active (hoodie.keep.min.commits)")
    in_range = sorted((w for w in writes if start < _when(w) <= stop), key=lambda w: (_when(w), w.timestamp))
    metas = [(w, timeline.commit_metadata(w)) for w in in_range]
    metas = [(w, m) for w, m in metas if m.operation_type.upper() in YIELDS_CHANGES]
    touched = sorted({p for _, m in metas for p in m.partition_to_write_stats}
                     | {p for _, m in metas for p, _ in m.replaced_file_groups()})
    groups: dict[tuple[str, str], FileGroup] = {}
    if metas:
        view = table.file_system_view(partitions=touched, include_replaced=True)
        groups = {(g.partition_path, g.file_id): g for g in view.file_groups()}
    cleaned = cleaned_slices(table.storage, timeline) if metas else []
    splits: list[CDCSplit] = []
    for write, meta in metas:
        t = write.timestamp
        compared: set[tuple[str, str]] = set()
        for stat in sorted(meta.write_stats(), key=lambda s: (s.partitionPath, s.fileId)):
            if not stat.fileId:
                continue
            split = _split_of_stat(t, stat, meta.operation_type.upper(), groups, cleaned)
            if split.case in _COMPARED:  # the whole group's change at t: once, however many files t wrote
                if (stat.partitionPath, stat.fileId) in compared:
                    continue
                compared.add((stat.partitionPath, stat.fileId))
            splits.append(split)
        for partition, fid in sorted(meta.replaced_file_groups()):
            _check_cleaned(cleaned, t, partition, fid)
            group = groups.get((partition, fid))
            before = _latest_before(group, t) if group is not None else None
            if before is not None:  # (Hudi too skips a replaced group without a slice)
                splits.append(CDCSplit(t, InferenceCase.REPLACE_COMMIT, partition, fid, before=before.to_read()))
    schema = table.arrow_schema()
    ordering = table.config.merge_ordering_field
    context = CDCContext(
        schema_ipc=(schema if schema is not None else pa.schema([])).serialize().to_pybytes(),
        spec=MergeSpec.of(ordering, table.config.payload_class),
        committed=frozenset(i.timestamp for i in timeline.completed_writes()),
        archived_before=timeline.archived_before())
    return CDCPlan(start, stop, tuple(w.timestamp for w, _ in metas), tuple(splits), context)


def _gone(instant: str, partition: str, fid: str, what: str, clean: str | None = None) -> HudiRetentionError:
    by = f"clean {clean}" if clean else "the cleaner"
    return HudiRetentionError(
        f"the changes of instant {instant} in file group {fid} of partition '{partition}' cannot be read: {what}, "
        f"which {by} removed. A table without CDC logging answers CDC queries by comparing each write's file "
        "slice with the one before it while both exist. Query a later range, retain more history "
        "(hoodie.clean.commits.retained), or write the table with hoodie.table.cdc.enabled=true")


def _check_cleaned(cleaned: list[CleanedSlice], instant: str, partition: str, fid: str) -> None:
    """Fail when a slice the split reads (the one latest just before ``instant`` or the one as of
    it) was removed by a clean."""
    for gone in cleaned:
        if gone.partition_path == partition and gone.file_id == fid \
                and gone.base_instant <= instant <= gone.superseded_at:
            raise _gone(instant, partition, fid, f"it needs the file slice written at {gone.base_instant}",
                        gone.clean_instant)


def _latest_before(group: FileGroup, instant: str) -> FileSlice | None:
    older = [s for s in group.slices if s.base_instant < instant]
    return older[-1] if older else None


def _slice_holding(group: FileGroup | None, name: str) -> FileSlice | None:
    for s in (group.slices if group is not None else []):
        if (s.base_file is not None and s.base_file.name == name) or any(lf.name == name for lf in s.log_files):
            return s
    return None


def _cdc_file_order(path: str) -> tuple:
    """Change data files of one write in the order they were written (log version; Hudi's
    ``LogFileComparator``), not by name, where ``log.10`` sorts before ``log.2``."""
    parsed = parse_log_file(posixpath.basename(path))
    return (0, *log_order(parsed), path) if parsed is not None else (1, "", 0, "", path)


def _split_of_stat(instant: str, stat: WriteStat, operation: str, groups: dict[tuple[str, str], FileGroup],
                   cleaned: list[CleanedSlice]) -> CDCSplit:
    """``HoodieCDCExtractor.parseWriteStat``: the split of one file a commit wrote."""
    partition, fid = stat.partitionPath, stat.fileId
    _check_cleaned(cleaned, instant, partition, fid)
    group = groups.get((partition, fid))
    name = posixpath.basename(stat.path or "")
    written = _slice_holding(group, name) if name else None
    if name and written is None:
        raise _gone(instant, partition, fid, f"it needs {stat.path}, the file the instant wrote")
    previous = None
    if stat.prevCommit not in _NO_COMMIT and not stat.is_log:
        previous = next((s for s in (group.slices if group else []) if s.base_instant == stat.prevCommit), None)
        if previous is None:
            raise _gone(instant, partition, fid, f"it needs the file slice written at {stat.prevCommit}")
    elif group is not None and not stat.is_log:
        previous = _latest_before(group, instant)
    if stat.cdcStats:
        # a write's change data rolled over into several files (HoodieCDCLogger): read in log version order
        cdc_files = tuple(sorted(stat.cdcStats, key=_cdc_file_order))
        return CDCSplit(instant, InferenceCase.AS_IS, partition, fid, cdc_files,
                        before=previous.to_read() if previous else None,
                        after=written.to_read() if written else None)
    is_log = stat.is_log or (name and (parsed := parse_log_file(name)) is not None and parsed.extension == "log")
    if is_log:
        assert written is not None
        piece = written.to_read()  # read just before the instant, and as of it
        return CDCSplit(instant, InferenceCase.LOG_FILE, partition, fid, (stat.path,), before=piece, after=piece)
    if operation in _DELETES and stat.numWrites == 0 and stat.numDeletes != 0:
        return CDCSplit(instant, InferenceCase.BASE_FILE_DELETE, partition, fid,
                        before=previous.to_read() if previous else None)
    if stat.numUpdateWrites == 0 and stat.numWrites == stat.numInserts and previous is None:
        return CDCSplit(instant, InferenceCase.BASE_FILE_INSERT, partition, fid, (stat.path,))
    return CDCSplit(instant, InferenceCase.BASE_FILE_UPDATE, partition, fid, (stat.path,) if name else (),
                    before=previous.to_read() if previous else None,
                    after=written.to_read() if written else None)


def read_cdc(table: HudiTable, begin: object, end: object | None = None) -> pa.Table:
    """The CDC query over ``(begin, end]`` in this process (tests, the CLI; Spark reads the same
    splits in executors, :mod:`pyhudi.spark.cdc`): Hudi's columns op, ts_ms, before, after."""
    plan = plan_cdc(table, begin, end)
    schema = plan.context.schema
    parts = [split_changes(table.storage, s, plan.context, schema=schema) for s in plan.splits]
    parts = [p for p in parts if p.num_rows]
    return pa.concat_tables(parts) if parts else CDC_SCHEMA.empty_table()
