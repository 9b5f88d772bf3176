"""Write plans: where each incoming record goes (Hudi's UpsertPartitioner, steps 4-7).

The driver turns a small workload profile (insert counts per partition, update counts per file
group) into buckets: one per file group receiving updates, small files topped up with inserts,
then new file groups sized from the estimated record size. Buckets are frozen dataclasses shipped
to executors; assigning a record to a bucket is a Spark expression built from the plan.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from pyhudi.io.base_file import ParquetSettings
from pyhudi.io.file_names import new_file_id_prefix
from pyhudi.read.payloads import MergeSpec
from pyhudi.storage import Storage
from pyhudi.table.fs_view import FileSystemView

#: Records of one table partition one task takes: a partition-local write holds them in memory,
#: and a bulk insert gives a partition one task (slot) per this many records.
MAX_ROWS_PER_TASK = 2_000_000

INSERT = "INSERT"
UPDATE = "UPDATE"
APPEND = "APPEND"  # merge-on-read: updates and deletes appended to the file group's log


@dataclass(frozen=True)
class WriteBucket:
    """One unit of executor work: a file group to rewrite (UPDATE), to create (INSERT), or whose
    log to append to (APPEND, merge-on-read)."""

    bucket_id: int
    kind: str
    partition_path: str
    file_id_prefix: str  # UPDATE/APPEND: the file id itself; INSERT: a uuid, files are "<uuid>-<n>"
    base_file: str | None = None  # UPDATE: relative path of the base file being merged
    prev_commit: str = "null"
    log: LogTarget | None = None  # APPEND: where the log blocks go


@dataclass(frozen=True)
class LogTarget:
    """Where an APPEND bucket writes: the slice's current log file, or the next log version.

    ``base_instant`` names the slice in log file names: the base file's instant, or a pending
    compaction's instant, whose slice new log records belong to.
    """

    base_instant: str
    base_file_name: str  # of the slice being appended to ("" when it has none)
    current: str | None  # relative path of the log file to append to, None to start a new one
    current_size: int
    next_version: int
    log_files: tuple[str, ...]  # names of the slice's log files before this write
    # table version 8+ (timeline layout 2): every delta commit writes its own log file, named with
    # its instant, version 1; the fields above then say nothing about where the blocks go
    per_instant: bool = False


#: Hudi's defaults (``HoodieStorageConfig``) of ``hoodie.logfile.max.size`` (a log file rolls over
#: past it) and ``hoodie.logfile.data.block.max.size`` (the most a log data block holds)
LOG_MAX_SIZE = 1024 * 1024 * 1024
LOG_BLOCK_MAX_SIZE = 256 * 1024 * 1024


@dataclass(frozen=True)
class SmallFile:
    partition_path: str
    file_id: str
    base_file: str
    base_instant: str
    size: int


@dataclass(frozen=True)
class WriteContext:
    """Everything an executor needs besides its rows; picklable and immutable."""

    storage: Storage  # the table's, with its store settings
    instant_time: str
    settings: ParquetSettings
    storage_schema_ipc: bytes  # Arrow IPC of the base-file schema (meta + data columns)
    # how incoming records merge with each other and with stored ones (payload, ordering, deletes)
    merge_spec: MergeSpec
    max_file_size: int
    compression_ratio: float
    # de-duplicate incoming rows per bucket in the executor instead of in a separate Spark shuffle:
    # duplicates of a key always share a bucket when the index is not global
    combine_in_handles: bool = False
    log_block_format: str = "avro"  # hoodie.logfile.data.block.format
    log_max_size: int = LOG_MAX_SIZE  # hoodie.logfile.max.size
    log_block_max_size: int = LOG_BLOCK_MAX_SIZE  # hoodie.logfile.data.block.max.size
    # append to a slice's current log file in place; off when writers run side by side, since two
    # processes appending to one file would interleave their bytes
    append_in_place: bool = True
    # merge-on-read: return the column statistics of the records each log block holds (the
    # metadata table's column_stats partition keeps them for log files too)
    log_column_stats: bool = False
    stats_columns: tuple[str, ...] = ()  # hoodie.metadata.index.column.stats.column.list (empty: all)
    # clustering: rows keep the _hoodie_commit_time and _hoodie_commit_seqno they carry
    preserve_commit_metadata: bool = False
    # hoodie.table.cdc.supplemental.logging.mode of a CDC table (None: CDC off): merges write
    # change data files (pyhudi.write.cdc)
    cdc_mode: str | None = None
    # hoodie.write.partial.update.schema: the Avro writer schema (meta fields + updated columns) of
    # log data blocks of partial records (IS_PARTIAL=true); None: whole records
    partial_update_schema: str | None = None


@dataclass
class BucketPlan:
    buckets: list[WriteBucket] = field(default_factory=list)
    update_bucket: dict[tuple[str, str], int] = field(default_factory=dict)
    #: partition -> (total inserts, [(cumulative weight, bucket id)])
    insert_weights: dict[str, tuple[int, list[tuple[float, int]]]] = field(default_factory=dict)

    def _add(self, kind: str, partition: str, prefix: str, base_file: str | None = None,
             prev_commit: str = "null", log: LogTarget | None = None) -> int:
        bucket = WriteBucket(len(self.buckets), kind, partition, prefix, base_file, prev_commit, log)
        self.buckets.append(bucket)
        return bucket.bucket_id


@dataclass(frozen=True)
class PartitionProfile:
    inserts: int
    updates: dict[str, int]  # file id -> records routed to it (updates and deletes)


def assign_buckets(
    profile: dict[str, PartitionProfile],
    latest_base: dict[tuple[str, str], tuple[str, str]],
    small_files: dict[str, list[SmallFile]],
    *,
    avg_record_size: int,
    max_file_size: int,
    auto_split: bool,
    split_size: int,
) -> BucketPlan:
    """Hudi's ``UpsertPartitioner``: update buckets, then small files, then new insert buckets.

    ``latest_base`` maps (partition, file id) to (base file path, base instant) for every file
    group that receives updates.
    """
    plan = BucketPlan()
    for partition in sorted(profile):
        for fid in sorted(profile[partition].updates):
            path, instant = latest_base[(partition, fid)]
            plan.update_bucket[(partition, fid)] = plan._add(UPDATE, partition, fid, path, instant)
    avg = max(1, avg_record_size)
    for partition in sorted(profile):
        total = profile[partition].inserts
        if total <= 0:
            continue
        remaining = total
        assigned: list[tuple[int, int]] = []
        for sf in small_files.get(partition, []):
            if remaining <= 0:
                break
            room = (max_file_size - sf.size) // avg
            take = min(room, remaining)
            if take <= 0:
                continue
            bucket = plan.update_bucket.get((partition, sf.file_id))
            if bucket is None:
                bucket = plan._add(UPDATE, partition, sf.file_id, sf.base_file, sf.base_instant)
                plan.update_bucket[(partition, sf.file_id)] = bucket
            assigned.append((bucket, take))
            remaining -= take
        if remaining > 0:
            per_bucket = max(1, max_file_size // avg) if auto_split else split_size
            count = math.ceil(remaining / per_bucket)
            for i in range(count):
                size = per_bucket if i < count - 1 else remaining - (count - 1) * per_bucket
                assigned.append((plan._add(INSERT, partition, new_file_id_prefix()), size))
        cumulative, weights = 0.0, []
        for bucket, size in assigned:
            cumulative += size / total
            weights.append((cumulative, bucket))
        plan.insert_weights[partition] = (total, weights)
    return plan


@dataclass(frozen=True)
class HashBucketCount:
    """Incoming records of one (partition, hash bucket) under the BUCKET index."""

    partition_path: str
    bucket: int
    records: int
    deletes: int


def plan_bucket_index(
    counts: list[HashBucketCount],
    latest_base: dict[tuple[str, str], tuple[str, str]],
    groups: dict[str, dict[int, str]],
    new_prefix: Callable[[int], str],
) -> tuple[BucketPlan, dict[str, PartitionProfile], dict[tuple[str, int], int]]:
    """The BUCKET index's write plan: one write bucket per (partition, hash bucket), no sizing.

    A hash bucket whose file group exists in the partition (``groups``: partition -> bucket ->
    file id) merges into it; any other becomes a new file group named by ``new_prefix(bucket)``,
    unless it holds only deletes. Returns the plan, the workload profile for the inflight instant,
    and (partition, hash bucket) -> write bucket id.
    """
    plan = BucketPlan()
    profile: dict[str, PartitionProfile] = {}
    route: dict[tuple[str, int], int] = {}
    for c in sorted(counts, key=lambda c: (c.partition_path, c.bucket)):
        p = c.partition_path
        prof = profile.setdefault(p, PartitionProfile(0, {}))
        fid = groups.get(p, {}).get(c.bucket)
        if fid is not None:
            path, instant = latest_base[(p, fid)]
            route[(p, c.bucket)] = plan._add(UPDATE, p, fid, path, instant)
            prof.updates[fid] = c.records
        elif c.records > c.deletes:
            route[(p, c.bucket)] = plan._add(INSERT, p, new_prefix(c.bucket))
            profile[p] = PartitionProfile(prof.inserts + c.records, prof.updates)
    return plan, profile, route


def average_record_size(commits: list[tuple[int, int]], *, threshold_bytes: float) -> int | None:
    """Hudi's ``averageBytesPerRecord``: from the newest commit that wrote enough bytes; None when
    none did (Hudi then falls back to ``hoodie.copyonwrite.record.size.estimate``).

    ``commits`` is (total bytes written, records written) per completed commit, newest first.
    """
    for total_bytes, records in commits:
        if total_bytes > threshold_bytes and records > 0:
            return int(math.ceil(total_bytes / records))
    return None


def to_append_buckets(plan: BucketPlan, targets: dict[tuple[str, str], LogTarget],
                      rewrite: set[tuple[str, str]]) -> BucketPlan:
    """Merge-on-read: turn UPDATE buckets into APPEND buckets, except the small file groups in
    ``rewrite``, which are merged into a new base file as copy-on-write does (Hudi routes
    inserts to a small file group that has no log files this way)."""
    buckets = []
    for b in plan.buckets:
        key = (b.partition_path, b.file_id_prefix)
        if b.kind == UPDATE and key not in rewrite:
            b = WriteBucket(b.bucket_id, APPEND, b.partition_path, b.file_id_prefix, b.base_file,
                            b.prev_commit, targets[key])
        buckets.append(b)
    return BucketPlan(buckets, plan.update_bucket, plan.insert_weights)


K = TypeVar("K", bound=Hashable)


def pack_tasks(loads: Mapping[K, int], parallelism: int, *, budget: int = MAX_ROWS_PER_TASK) -> dict[K, int]:
    """Task of each item (a table partition, or a slot of one): one each while there are few items,
    else items packed largest first into the least loaded of enough tasks to keep each under
    ``budget`` records."""
    if len(loads) <= 4 * parallelism:
        return {item: i for i, item in enumerate(sorted(loads, key=repr))}
    tasks = max(2 * parallelism, -(-sum(loads.values()) // max(1, budget)))
    heap = [(0, t) for t in range(tasks)]
    heapq.heapify(heap)
    out = {}
    for item in sorted(loads, key=lambda i: (-loads[i], repr(i))):
        rows, t = heapq.heappop(heap)
        out[item] = t
        heapq.heappush(heap, (rows + loads[item], t))
    return out


def log_targets(view: FileSystemView, pending: dict[tuple[str, str], str]) -> dict[tuple[str, str], LogTarget]:
    """Where each file group's log blocks go: the current log file of its latest slice.

    A file group in a pending compaction plan starts the slice of that compaction instead: its
    new log files are named with the compaction's instant, and the planned files stay untouched.
    Table version 8+ never appends: the log file is the writing delta commit's own
    (``LogTarget.per_instant``), and readers place it by that commit's completion time.
    """
    out = {}
    per_instant = view.timeline.layout_version >= 2
    for piece in view.latest_slices():
        key = (piece.partition_path, piece.file_id)
        if per_instant:  # version 8+: a new log file per delta commit, placed by its completion time
            # (the slice's base file and logs are named only in the write stats of a CDC table)
            out[key] = LogTarget(piece.base_instant, piece.base_file.name if piece.base_file is not None else "",
                                 None, 0, 1, tuple(lf.name for lf in piece.log_files), per_instant=True)
            continue
        base_instant = pending.get(key, piece.base_instant)
        own = [lf for lf in piece.log_files if lf.base_instant == base_instant]
        current = max(own, key=lambda lf: (lf.version, lf.write_token or "")) if own else None
        base_name = piece.base_file.name if piece.base_file is not None and key not in pending else ""
        out[key] = LogTarget(base_instant, base_name, current.path if current else None,
                             current.size if current else 0,
                             max((lf.version for lf in own), default=0) + 1, tuple(lf.name for lf in own))
    return out
