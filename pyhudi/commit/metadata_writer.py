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

The MDT of a version-8 or version-9 table is kept as Hudi 1.0 / 1.1 keep it
(docs/hudi-1x-format.md section 5): its ``hoodie.properties`` has the data table's version, the
layout-2 timeline and the merge keys of the metadata payload; each partition is initialized by
its own delta commit at a reserved time (``00000000000000000`` for ``files``, then ``...001``,
``...002``, ... in Hudi's partition order), whose files are an empty delete block log named with
that time and, where there are records, a base file; every later delta commit writes a new log
file named with its own instant time (version 1), which belongs to the slice its completion time
falls in; a compaction takes a fresh instant time and completes as a ``commit``, and so does a
clean. Records are written in the 1.x record schema (:mod:`pyhudi.metadata.schema`), column
statistics in the index version of the table (V1 on 8, V2 on 9). The MDT timeline of these
versions is not archived: its LSM history is left to Hudi (the MDT's instants stay active).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import posixpath
import time
from collections.abc import Iterable, Iterator, Mapping

import pyarrow as pa

from pyhudi.actions.clean import run_clean
from pyhudi.actions.rollback import finish_pending_rollbacks, rollback_instant
from pyhudi.config import properties as P
from pyhudi.config.properties import write_partition_metadata
from pyhudi.config.support import HISTORY_PATH
from pyhudi.errors import HudiCommitError, HudiCorruptFileError
from pyhudi.io.bloom import BloomFilter
from pyhudi.io.file_names import log_file_name, log_path_order, parse_base_file, parse_log_file, slice_key
from pyhudi.io.hfile import CellColumns, as_columns, write_hfile
from pyhudi.io.log_format import delete_block, hfile_data_block
from pyhudi.metadata import column_stats, record_index
from pyhudi.metadata.files import FILES_PARTITION, INIT_INSTANT_PREFIX, encode_records
from pyhudi.metadata.keys import file_group_id, file_group_index
from pyhudi.metadata.table import (
    CLEAN_SUFFIX,
    COLUMN_STATS_PARTITION,
    COMPACTION_SUFFIX,
    INIT_ORDER,
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
from pyhudi.timeline.instant import CLEAN, COMMIT, COMPACTION, DELTA_COMMIT, ROLLBACK, new_instant_time
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

    #: the columns the writer asked statistics for (empty: Hudi's default); set by the commit point
    stats_columns: tuple[str, ...] = ()
    #: the data schema of the write being applied (its commit's), when the commit point knows it
    data_schema: str | None = None

    # -- initialization and removal --------------------------------------------------------------
    def initialize(self, data_timeline: Timeline, data_props: Mapping[str, str],
                   partitions: Mapping[str, tuple[int, Records]], *, instant: str | None = None,
                   built: Mapping[str, Builder] | None = None) -> str:
        """Create the MDT with the given partitions (name -> (file groups, records)) as its first
        base files, at ``instant`` (default: the latest completed data instant + ``010``, as
        Hudi does); ``built``: partitions whose base files a builder writes."""
        self.storage.delete_dir("")
        self._timeline = None
        version = int(data_props.get(P.VERSION) or 6)
        self._version = 6 if version < 8 else version
        if version >= 8:
            return self._initialize_v8(data_props, partitions, built or {})
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
        meta = CommitMetadata(stats, operation_type="BULK_INSERT_PREPPED",
                              extra_metadata={"schema": self.record_schema})
        tl.complete(instant, DELTA_COMMIT, meta.to_json().encode("utf-8"))
        delete_markers(self.storage, instant)
        log.info("initialized the metadata table of %s at %s: %s", self.data_storage.base_uri, instant,
                 ", ".join([f"{p} ({len(r)} records)" for p, (_n, r) in sorted(partitions.items())]
                           + [f"{p} ({sum(st.numWrites for st in stats.get(p, []))} records)"
                              for p in sorted(built or {})]))
        return instant

    def _initialize_v8(self, data_props: Mapping[str, str], partitions: Mapping[str, tuple[int, Records]],
                       built: Mapping[str, Builder]) -> str:
        """Create the MDT of a version-8/9 table as Hudi 1.x does: one delta commit per partition at
        the reserved times ``00000000000000000``, ``...001``, ... in Hudi's partition order; every
        file group gets an empty delete-block log named with that time, and a base file when it
        has records (``files`` always has: the partition list). Returns the last init time."""
        name = data_props.get(P.NAME, "table")
        version = str(self.table_version)
        HudiTable.create(self.storage, {
            "hoodie.compaction.payload.class": PAYLOAD_CLASS, "hoodie.table.initial.version": version,
            P.KEYGEN_TYPE: "HOODIE_TABLE_METADATA", P.TYPE: P.MERGE_ON_READ, P.ARCHIVE_FOLDER: "history",
            P.LAYOUT_VERSION: "2", HISTORY_PATH: "history",
            P.DROP_PARTITION_COLUMNS: "false",
            "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
            P.RECORD_KEY_FIELDS: "key", P.NAME: f"{name}_metadata", "hoodie.timeline.path": "timeline",
            P.POPULATE_META_FIELDS: "false", P.BASE_FILE_FORMAT: "HFILE", "hoodie.record.merge.mode": "CUSTOM",
            # the time zone only when not Hudi's default, as Hudi 1.x's metadata tables show
            **({P.TIMELINE_TIMEZONE: "UTC"} if data_props.get(P.TIMELINE_TIMEZONE) == "UTC" else {}),
            P.VERSION: version,
        })
        tl = self.timeline.reload()
        order = [p for p in INIT_ORDER if p in partitions or p in built]
        instant = ""
        for n, partition in enumerate(order):
            instant = f"{INIT_INSTANT_PREFIX}{n:03d}"
            tl.create_requested(instant, DELTA_COMMIT)
            tl.transition_inflight(instant, DELTA_COMMIT)
            write_partition_metadata(self.storage, partition, instant)
            stats: list[WriteStat] = []
            if partition in partitions:
                count, records = partitions[partition]
                groups = [file_group_id(PREFIXES[partition], i) for i in range(count)]
                for group, bucket in _buckets(self.shaped(partition, records), groups).items():
                    self._init_log(instant, partition, group)
                    if bucket or partition == FILES_PARTITION:
                        stats.append(self._write_base(instant, partition, group, bucket))
            else:
                stats = built[partition](instant)
                for stat in stats:
                    self._init_log(instant, partition, stat.fileId)
            meta = CommitMetadata({partition: stats}, operation_type="BULK_INSERT_PREPPED",
                                  extra_metadata={"schema": self.record_schema})
            tl.complete(instant, DELTA_COMMIT, meta.to_json().encode("utf-8"))
            delete_markers(self.storage, instant)
        log.info("initialized the metadata table (version %s) of %s: %s", version, self.data_storage.base_uri,
                 ", ".join(order))
        return instant

    def _init_log(self, instant: str, partition: str, group: str) -> None:
        log_rel = f"{partition}/{log_file_name(group, instant, 1, WRITE_TOKEN)}"
        create_marker(self.storage, instant, log_rel, APPEND)
        self.storage.create_new(log_rel, delete_block([], [], instant))

    def shaped(self, partition: str, records: Records) -> Records:
        """Records as this MDT's version holds them: column statistics of a version-8/9 table
        only for the columns Hudi 1.x indexes by default (unless the writer chose columns) and
        in its index version (:func:`pyhudi.metadata.column_stats.in_version`)."""
        if partition != COLUMN_STATS_PARTITION or self.table_version < 8 or not records:
            return records
        schema = self.data_schema or HudiTable(self.data_storage).avro_schema()
        fields = json.loads(schema).get("fields", []) if schema else []
        chosen = self.stats_columns or column_stats.default_columns(fields)
        return column_stats.in_version(records, self.table_version, fields, columns=chosen)

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
        existing = self.partitions() if existing is None else existing
        planned = {partition: _buckets(self.shaped(partition, part_records), existing[partition])
                   for partition, part_records in sorted(records.items()) if partition in existing}
        tl.create_requested(instant, DELTA_COMMIT)
        tl.transition_inflight(instant, DELTA_COMMIT, self._workload(planned, written))
        stats: dict[str, list[WriteStat]] = {}
        for partition, buckets in planned.items():
            for group, bucket in buckets.items():
                if bucket or partition == FILES_PARTITION:
                    stats.setdefault(partition, []).append(self._write_log(instant, partition, group, base, bucket))
        for partition, partition_stats in sorted((written or {}).items()):
            if partition in existing:
                stats.setdefault(partition, []).extend(self._adopt(instant, stat, base) for stat in partition_stats)
        # the markers of the log files written just now are all there are, unless executors or an
        # earlier attempt wrote others: then the folder is listed
        mine = None if written or again else [(s.path, APPEND) for part in stats.values() for s in part]
        meta = CommitMetadata(stats, operation_type="UPSERT_PREPPED", extra_metadata={"schema": self.record_schema})
        tl.complete(instant, DELTA_COMMIT, meta.to_json().encode("utf-8"))
        delete_markers(self.storage, instant, markers=mine)

    def _workload(self, planned: Mapping[str, Mapping[str, Records]],
                  written: Mapping[str, list[WriteStat]] | None) -> bytes:
        """The inflight content of a delta commit: nothing in version 6; from version 8 the
        workload profile Hudi 1.x writes (updates per file group, the records being prepped)."""
        if self.table_version < 8:
            return b""
        profile: dict[str, list[WriteStat]] = {}
        for partition, buckets in planned.items():
            profile[partition] = [WriteStat(fileId="", path="", partitionPath=partition, numInserts=0)] + [
                WriteStat(fileId=group, path="", partitionPath=partition, numUpdateWrites=len(bucket))
                for group, bucket in sorted(buckets.items()) if bucket]
        for partition, done in (written or {}).items():
            profile.setdefault(partition, [WriteStat(fileId="", path="", partitionPath=partition, numInserts=0)])
            profile[partition] += [WriteStat(fileId=st.fileId, path="", partitionPath=partition,
                                             numUpdateWrites=st.numWrites + st.numDeletes) for st in done]
        return CommitMetadata(profile, operation_type="UPSERT_PREPPED").to_json().encode("utf-8")

    def _write_log(self, instant: str, partition: str, group: str, base: str, records: Records) -> WriteStat:
        return self.write_log_cells(instant, partition, group, base, encode_records(records, self.record_schema))

    def _next_log(self, partition: str, group: str, base: str) -> tuple[str, int]:
        """(relative path, version) of the next log file of a file group's slice ``base`` (in
        version 8 and later ``base`` is the writing instant, which names its log files)."""
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
        (sorted (key, Avro value) pairs, in :attr:`record_schema`) and, for ``deleted_keys``, a
        delete block. Version 8 and later name it with ``instant`` (its slice follows from the
        instant's completion time), version 6 with ``base``."""
        v8 = self.table_version >= 8
        rel, version = self._next_log(partition, group, instant if v8 else base)
        create_marker(self.storage, instant, rel, APPEND)
        blocks = [hfile_data_block(cells, self.record_schema, instant)] if len(cells) or not deleted_keys else []
        if deleted_keys:
            blocks.append(delete_block(deleted_keys, [partition] * len(deleted_keys), instant))
        data = b"".join(blocks)
        self.storage.create_new(rel, data)
        n = len(cells) + len(deleted_keys or [])
        return WriteStat(group, rel, partition, prevCommit=instant if v8 else base, numWrites=len(cells),
                         numUpdateWrites=len(cells), numDeletes=len(deleted_keys or []), totalWriteBytes=len(data),
                         fileSizeInBytes=len(data), totalLogRecords=n, totalLogBlocks=len(blocks),
                         logVersion=version, logOffset=0, baseFile="" if v8 else hfile_name(base, group),
                         logFiles=[posixpath.basename(rel)])

    def _adopt(self, instant: str, stat: WriteStat, base: str) -> WriteStat:
        """A log file an executor wrote for this delta commit, in its group's current slice: a
        compaction since then (another writer's delta commit, or this one's) started a new slice,
        and readers ignore log files of older slices, so it moves (its blocks stay valid). A
        partition rebuilt since (its file groups made anew, their count perhaps too) or a file
        cleaned away fails the commit, which the write then rolls back."""
        group = stat.fileId
        if self.table_version >= 8:
            # named with the delta commit's own time: its completion puts it in the current slice
            if not self.storage.exists(stat.path):
                raise HudiCommitError(
                    f"the {stat.partitionPath} partition of the metadata table of {self.data_storage.base_uri} was "
                    f"rebuilt or cleaned while write {instant} ran ({stat.path} is gone); run the write again")
            return stat
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
        v8 = self.table_version >= 8
        # version 8+: a delta commit extends the slice its completion time falls in
        deltas = sorted(i.timestamp for i in tl.completed([DELTA_COMMIT])
                        if (v8 and (i.completion_time or "") > base) or (not v8 and i.timestamp > base))
        if len(deltas) < max(1, max_delta_commits):
            return None
        latest = deltas[-1]
        pending = [i.timestamp for i in data_timeline.pending() if i.timestamp <= latest]
        if pending:  # a failed or running action older than the delta commits: never fold it into a base
            log.info("metadata table compaction waits for pending data writes %s", pending)
            return None
        # Hudi 1.x compacts the MDT at a fresh instant time (0.x: the latest delta commit's + 001)
        instant = self._fresh_time(data_timeline) if v8 else latest + COMPACTION_SUFFIX
        merged = self.merged_records(data_timeline)
        ops, plans = [], []
        for partition, groups in sorted(self.partitions().items()):
            if partition == RECORD_INDEX_PARTITION:
                continue
            names = [info.name for info in self.storage.list_files(partition)]
            pieces = {p.file_id: p for p in self.slices(partition, data_timeline)} if v8 else {}
            for group, bucket in _buckets(merged.get(partition, []), groups).items():
                if v8:
                    piece = pieces.get(group)
                    logs = sorted((posixpath.basename(rel) for rel, _i in piece.logs), key=log_path_order) \
                        if piece else []
                    base_name = posixpath.basename(piece.base[0]) if piece and piece.base else None
                    slice_base = piece.base_instant if piece and piece.base_instant else base
                else:
                    slice_base = base
                    logs = sorted((n for n in names if (lf := parse_log_file(n)) is not None and lf.file_id == group
                                   and lf.base_instant == base), key=log_path_order)
                    base_name = hfile_name(base, group) if hfile_name(base, group) in names else None
                ops.append(CompactionOperation(partition, group, slice_base, base_name, tuple(logs)))
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
        meta = CommitMetadata(stats, operation_type="COMPACT", compacted=True,
                              extra_metadata={"schema": self.record_schema})
        tl.complete(instant, COMMIT, meta.to_json().encode("utf-8"))
        delete_markers(self.storage, instant)
        self._clean(self._fresh_time(data_timeline) if v8 else latest + CLEAN_SUFFIX)
        if not v8:  # version 8+: the LSM history of the MDT is not written (module docstring)
            self._archive(data_timeline)
        return instant

    def _fresh_time(self, data_timeline: Timeline) -> str:
        """A new instant time for the MDT's own compaction or clean (version 8+): later than every
        instant and completion time of both timelines."""
        times = [t for i in [*self.timeline.reload().instant_files, *data_timeline.instant_files]
                 for t in (i.timestamp[:17], i.completion_time or "")]
        return new_instant_time(after=max(times, default=""), utc=self.timeline.utc)

    def _write_base(self, instant: str, partition: str, group: str, records: Records) -> WriteStat:
        return self.write_base_cells(instant, partition, group, encode_records(records, self.record_schema))

    def write_base_cells(self, instant: str, partition: str, group: str, cells: Cells | CellColumns) -> WriteStat:
        """A file group's base HFile at ``instant`` holding ``cells`` (sorted)."""
        columns = as_columns(cells)
        bloom = BloomFilter()
        bloom.add_keys(columns.rows.cast(pa.string()))
        rel = f"{partition}/{hfile_name(instant, group)}"
        create_marker(self.storage, instant, rel, CREATE)
        n = len(columns)
        info = {"schema": self.record_schema.encode(), "bloomFilterTypeCode": b"DYNAMIC_V0",
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
        done = self.completed() if self.table_version >= 8 else {}
        for partition in self.partitions():
            old = []
            for info in self.storage.list_files(partition):
                key = slice_key(info.name)
                if key is None:
                    continue
                if done and (lf := parse_log_file(info.name)) is not None:
                    # version 8+: a log file is of the slice its delta commit completed in
                    finished = done.get(lf.base_instant)
                    if finished is not None and finished < keep_from:
                        old.append(f"{partition}/{info.name}")
                elif key[1] < keep_from:
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
