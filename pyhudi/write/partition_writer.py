"""Partition-local writes: index lookup, bucket assignment and file writing of one table partition
in one Spark task (executor side, no Spark import).

Hudi's upsert runs as a chain of Spark stages: tag the records by joining them with the stored
keys, count the tagged records (the workload profile), assign buckets, shuffle the records to their
buckets, write. On a daily upsert that touches a handful of partitions most of that time is Spark
moving rows between stages, not work. Every step of that chain but the first shuffle is local to
a table partition: a non-global index only matches keys within the partition, and Hudi's
``UpsertPartitioner`` sizes small files and new file groups partition by partition. So once the
incoming records are shuffled by partition path, one task can do the whole chain for its
partitions with pyarrow, in memory:

1. combine duplicate keys (preCombine),
2. tag: the partition's stored keys (record-key column of each latest base file, or the merged
   keys of a merge-on-read slice with log files; the BUCKET index hashes keys instead),
3. profile and assign buckets exactly as the distributed path does (:func:`assign_buckets`,
   :func:`plan_bucket_index`), inserts split into key ranges so new files have tight key ranges,
4. run the create / merge / append handles, one after the other.

The driver chooses this path only when no single partition receives more records than one task
handles comfortably (:data:`pyhudi.write.plan.MAX_ROWS_PER_TASK`); otherwise the distributed path spreads a
partition's file groups over many tasks.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyhudi.errors import HudiCommitError
from pyhudi.index.bloom_index import lookup_file
from pyhudi.index.bucket import bucket_file_id_prefix, bucket_ids
from pyhudi.io.avro_schema import RECORD_KEY
from pyhudi.io.base_file import encoded_record_size
from pyhudi.io.bloom import BloomFilter
from pyhudi.io.keys import unique_keys
from pyhudi.metadata.bloom_filters import filters_of
from pyhudi.metadata.files import MdtSlice
from pyhudi.read.merge import MergeSpec, SliceToRead, Visibility, read_slice
from pyhudi.storage import Storage
from pyhudi.write.columns import INDEX_ROW, IS_DELETE
from pyhudi.write.handles import collect_batches, combine, group_indices, run_handle, split_by_partition
from pyhudi.write.plan import (
    BucketPlan,
    HashBucketCount,
    LogTarget,
    PartitionProfile,
    SmallFile,
    WriteContext,
    assign_buckets,
    plan_bucket_index,
    to_append_buckets,
)
from pyhudi.write.rows import counts_of, stats_batch, storage_schema_of, to_storage_rows
from pyhudi.write.task import NO_TASK, current_task

SIMPLE = "SIMPLE"
BLOOM = "BLOOM"
BUCKET_INDEX = "BUCKET"
NO_INDEX = "NONE"  # insert without de-duplication against the table: every record is new


@dataclass(frozen=True)
class PartitionLayout:
    """What the driver knows of one table partition's latest file slices, for its writing task."""

    partition_path: str
    #: (file id, base file path, base instant) of every latest slice with a base file
    base_files: tuple[tuple[str, str, str], ...] = ()
    #: SIMPLE and BLOOM: every latest slice, read for its record keys (merged when it has log files)
    key_sources: tuple[SliceToRead, ...] = ()
    #: BLOOM: (file id, min key, max key) of base files whose footer range the driver remembers
    key_ranges: tuple[tuple[str, str | None, str | None], ...] = ()
    #: small-file candidates in Hudi's order (they take inserts before new file groups are made)
    small_files: tuple[SmallFile, ...] = ()
    #: merge-on-read: where each file group's log blocks go
    log_targets: tuple[tuple[str, LogTarget], ...] = ()
    #: BUCKET index: hash bucket -> file id of the partition's bucket file groups
    bucket_groups: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class BucketSpec:
    num_buckets: int
    hash_fields: tuple[str, ...]
    record_key_fields: tuple[str, ...]


@dataclass(frozen=True)
class PartitionWriteJob:
    """Everything the tasks of a partition-local write need; picklable and immutable."""

    ctx: WriteContext
    operation: str  # upsert | insert | delete
    index: str  # SIMPLE | BLOOM | BUCKET | NONE
    combine: bool  # combine duplicate keys first (hoodie.combine.before.*)
    drop_existing: bool  # insert with hoodie.datasource.write.insert.drop.duplicates
    merge_on_read: bool
    avg_record_size: int
    auto_split: bool
    split_size: int
    layouts: Mapping[str, PartitionLayout] = field(default_factory=dict)
    bucket: BucketSpec | None = None
    merge_spec: MergeSpec = MergeSpec(None)
    visibility: Visibility | None = None
    key_schema_ipc: bytes = b""  # columns read to merge a slice's keys (key, ordering, delete flag)
    prune_by_ranges: bool = True  # hoodie.bloom.index.prune.by.ranges
    #: BLOOM with hoodie.bloom.index.use.metadata: the metadata table's bloom_filters file groups
    bloom_filters: tuple[MdtSlice, ...] = ()
    #: size new files from the encoded size of a sample of the inserts instead of
    #: ``avg_record_size`` (Hudi's default guess while no commit was large enough to measure)
    measure_record_size: bool = False


def stored_keys(storage: Storage, layout: PartitionLayout, job: PartitionWriteJob,
                pieces: Iterable[SliceToRead] | None = None) -> tuple[pa.Array, pa.Array]:
    """(record key, file id) of every record alive in the partition's latest slices (or ``pieces``)."""
    keys: list[pa.Array] = []
    sources: list[np.ndarray] = []
    file_ids: list[str] = []
    key_schema = pa.ipc.read_schema(pa.py_buffer(job.key_schema_ipc)) if job.key_schema_ipc else None
    for piece in layout.key_sources if pieces is None else pieces:
        if piece.log_files and key_schema is not None and job.visibility is not None:
            merged, _counts, _scan = read_slice(storage, piece, key_schema, job.merge_spec, job.visibility)
            column = merged.column(RECORD_KEY)
        elif piece.base_file:
            with storage.fs.open_input_file(storage.full(piece.base_file)) as f:
                column = pq.read_table(f, columns=[RECORD_KEY]).column(RECORD_KEY)
        else:
            continue
        flat = column.combine_chunks().cast(pa.string())
        keys.append(flat)
        sources.append(np.full(len(flat), len(file_ids), dtype=np.int32))
        file_ids.append(piece.file_id)
    if not keys:
        return pa.array([], pa.string()), pa.array([], pa.string())
    return pa.concat_arrays(keys), pa.array(file_ids, pa.string()).take(pa.array(np.concatenate(sources)))


def bloom_keys(storage: Storage, layout: PartitionLayout, job: PartitionWriteJob,
               rows: pa.Table) -> tuple[tuple[pa.Array, pa.Array], dict | None]:
    """The BLOOM index in one task: (record key, file id) of the stored records that incoming keys
    match, found file by file with range pruning, the bloom filter and an exact check; and the
    lookup's statistics (an :data:`INDEX_ROW` stats row).

    Slices with log files are matched by their merged keys, as the distributed lookup does (a
    log block may have deleted a key the base file's filter still holds).
    """
    incoming = pc.unique(rows.column(RECORD_KEY).combine_chunks().cast(pa.string()))
    ranges = {fid: (low, high) for fid, low, high in layout.key_ranges}
    found_keys: list[pa.Array] = []
    found_fids: list[pa.Array] = []
    in_range = positive = checked = positives = 0
    logged = []
    filters: dict[str, BloomFilter] = {}
    if job.bloom_filters:
        filters = filters_of(storage, job.bloom_filters, [
            (layout.partition_path, posixpath.basename(p.base_file)) for p in layout.key_sources
            if p.base_file and not p.log_files])
    for piece in layout.key_sources:
        if piece.log_files:
            logged.append(piece)
            continue
        if not piece.base_file:
            continue
        result = lookup_file(storage, piece.base_file, incoming, key_range=ranges.get(piece.file_id),
                             prune_by_ranges=job.prune_by_ranges,
                             bloom=filters.get(posixpath.basename(piece.base_file)))
        in_range += result.candidates > 0
        positive += result.positives > 0
        checked += result.candidates
        positives += result.positives
        if len(result.present):
            found_keys.append(result.present)
            found_fids.append(pa.repeat(pa.scalar(piece.file_id, pa.string()), len(result.present)))
    matches = sum(len(k) for k in found_keys)
    if logged:
        keys, fids = stored_keys(storage, layout, job, logged)
        found_keys.append(keys)
        found_fids.append(fids)
    stats = None if not layout.key_sources else {
        "partition_path": layout.partition_path, "io_type": INDEX_ROW, "index_files_in_range": in_range,
        "index_files_positive": positive, "index_keys_checked": checked, "index_bloom_positives": positives,
        "index_matches": matches}
    if not found_keys:
        return (pa.array([], pa.string()), pa.array([], pa.string())), stats
    return (pa.concat_arrays(found_keys), pa.concat_arrays(found_fids)), stats


def tag(rows: pa.Table, stored: tuple[pa.Array, pa.Array]) -> tuple[pa.Table, pa.Array]:
    """Each incoming record with the file id holding its key (null for a new key).

    A key stored in several file groups (inserts without de-duplication can put it there) gives
    one row per file group, as the distributed path's join does, so every copy is updated.
    The hash table is built on the smaller side: a daily batch of corrections probes a file of
    many more stored keys.
    """
    keys, fids = stored
    if not len(keys):
        return rows, pa.nulls(rows.num_rows, pa.string())
    incoming = rows.column(RECORD_KEY).combine_chunks().cast(pa.string())
    if len(incoming) < len(keys) and unique_keys(incoming):
        at = pc.index_in(keys, value_set=incoming)  # stored key -> incoming row
        hit = at.is_valid().to_numpy(zero_copy_only=False)
        target = at.filter(at.is_valid()).to_numpy(zero_copy_only=False).astype(np.int64)
        if len(np.unique(target)) == len(target):  # every key stored once
            source = np.full(len(incoming), -1, dtype=np.int64)
            source[target] = np.flatnonzero(hit)
            return rows, pc.take(fids, pa.array(source, mask=source < 0))
    elif unique_keys(keys):
        return rows, pc.take(fids, pc.index_in(incoming, value_set=keys))
    left = pa.table({"k": incoming, "i": pa.array(np.arange(rows.num_rows, dtype=np.int64))})
    joined = left.join(pa.table({"k": keys, "f": fids}), "k", join_type="left outer")
    return rows.take(joined.column("i")), joined.column("f").combine_chunks()


def _routes_by_key_range(insert_keys: pa.Array, weights: list[tuple[float, int]]) -> np.ndarray:
    """Write bucket of each insert: inserts sorted by key and cut into consecutive ranges whose
    sizes follow the plan's cumulative weights (new files get narrow key ranges). A cut never
    separates records of one key (without de-duplication a batch may hold several)."""
    n = len(insert_keys)
    if len(weights) == 1:
        return np.full(n, weights[0][1], dtype=np.int64)
    order = pc.sort_indices(insert_keys).to_numpy()
    ordered = insert_keys.take(pa.array(order))
    out = np.empty(n, dtype=np.int64)
    start = 0
    for i, (cumulative, bucket) in enumerate(weights):
        end = n if i == len(weights) - 1 else max(start, min(n, int(round(cumulative * n))))
        while 0 < end < n and ordered[end] == ordered[end - 1]:
            end += 1
        out[order[start:end]] = bucket
        start = end
    return out


#: Inserts encoded to measure their record size (:func:`sampled_record_size`), and the fewest
#: inserts worth measuring (below it the estimate matters little and a sample says little)
RECORD_SIZE_SAMPLE = 20_000
RECORD_SIZE_MIN_SAMPLE = 1_000


def sampled_record_size(inserts: pa.Table, ctx: WriteContext) -> int:
    """Bytes per record of ``inserts`` in a base file: up to :data:`RECORD_SIZE_SAMPLE` of them,
    spread over the batch and sorted by key as a file holds them, encoded in memory.

    Hudi sizes new files with the record size of the newest commit that wrote more than the
    small-file limit, and until there is one, with ``hoodie.copyonwrite.record.size.estimate``
    (1 KB). For rows that compress well that guess is many times too large: a day of 288,000
    telemetry rows (9 MB of gzip parquet) would be cut into three files. The sample's own bytes
    avoid that guess.
    """
    n = inserts.num_rows
    picked = np.unique(np.linspace(0, n - 1, min(n, RECORD_SIZE_SAMPLE)).astype(np.int64))
    sample = inserts.take(pa.array(picked))
    sample = sample.take(pc.sort_indices(sample.column(RECORD_KEY)))
    rows = to_storage_rows(sample, storage_schema_of(ctx), ctx, "sample.parquet", NO_TASK, 0)
    return max(1, math.ceil(encoded_record_size(rows, ctx.settings)))


def plan_partition(rows: pa.Table, layout: PartitionLayout, job: PartitionWriteJob,
                   storage: Storage) -> tuple[BucketPlan, pa.Table, np.ndarray, dict | None]:
    """The partition's write buckets, the rows to write, each row's write bucket, and the stats
    row of a BLOOM lookup."""
    p = layout.partition_path
    latest = {(p, fid): (path, instant) for fid, path, instant in layout.base_files}
    targets = {(p, fid): target for fid, target in layout.log_targets}
    if job.index == BUCKET_INDEX:
        assert job.bucket is not None
        spec = job.bucket
        hashed = bucket_ids(rows.column(RECORD_KEY), hash_fields=spec.hash_fields,
                            record_key_fields=spec.record_key_fields, num_buckets=spec.num_buckets)
        deletes = rows.column(IS_DELETE).to_numpy(zero_copy_only=False).astype(bool)
        present, counts = np.unique(hashed, return_counts=True)
        deleted = np.bincount(hashed[deletes], minlength=spec.num_buckets) if deletes.any() \
            else np.zeros(spec.num_buckets, dtype=np.int64)
        plan, _profile, by_hash = plan_bucket_index(
            [HashBucketCount(p, int(b), int(n), int(deleted[b])) for b, n in zip(present, counts)],
            latest, {p: dict(layout.bucket_groups)}, bucket_file_id_prefix)
        if job.merge_on_read:
            plan = to_append_buckets(plan, targets, set())
        lookup = np.full(spec.num_buckets, -1, dtype=np.int64)
        for (_, hash_bucket), write_bucket in by_hash.items():
            lookup[hash_bucket] = write_bucket
        return plan, rows, lookup[hashed], None

    index_stats = None
    if job.index == SIMPLE:
        rows, fids = tag(rows, stored_keys(storage, layout, job))
    elif job.index == BLOOM:
        stored, index_stats = bloom_keys(storage, layout, job, rows)
        rows, fids = tag(rows, stored)
    else:
        fids = pa.nulls(rows.num_rows, pa.string())
    known = fids.is_valid()
    is_delete = rows.column(IS_DELETE).combine_chunks()
    keep = pc.invert(pc.and_(is_delete, pc.invert(known)))  # deleting an unknown key does nothing
    if job.operation == "delete":
        keep = pc.and_(keep, known)
    if job.drop_existing:
        keep = pc.and_(keep, pc.invert(known))
    rows, fids = rows.filter(keep), fids.filter(keep)
    updates: dict[str, int] = counts_of(fids.drop_null()) if len(fids) else {}
    inserts = fids.null_count
    small = list(layout.small_files) if inserts else []  # as the distributed plan: only where inserts go
    avg = job.avg_record_size
    if inserts >= RECORD_SIZE_MIN_SAMPLE and job.measure_record_size:
        avg = sampled_record_size(rows.filter(fids.is_null()), job.ctx)
    plan = assign_buckets({p: PartitionProfile(inserts, updates)}, latest, {p: small},
                          avg_record_size=avg, max_file_size=job.ctx.max_file_size,
                          auto_split=job.auto_split, split_size=job.split_size)
    if job.merge_on_read:
        plan = to_append_buckets(plan, targets, {(p, f.file_id) for f in small})
    route = np.full(rows.num_rows, -1, dtype=np.int64)
    known_np = fids.is_valid().to_numpy(zero_copy_only=False)
    if updates:
        codes = pc.index_in(fids, value_set=pa.array(list(updates), pa.string())).to_numpy(zero_copy_only=False)
        by_code = np.array([plan.update_bucket[(p, fid)] for fid in updates], dtype=np.int64)
        route[known_np] = by_code[codes[known_np].astype(np.int64)]
    if inserts:
        insert_at = np.flatnonzero(~known_np)
        _total, weights = plan.insert_weights[p]
        route[insert_at] = _routes_by_key_range(rows.column(RECORD_KEY).take(pa.array(insert_at)).combine_chunks(),
                                                weights)
    return plan, rows, route, index_stats


def write_partitions(batches: Iterable[pa.RecordBatch], job: PartitionWriteJob) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: every table partition present in this task, tagged, sized and written."""
    table = collect_batches(batches)
    if table is None:
        return
    storage = job.ctx.storage
    schema = storage_schema_of(job.ctx)
    task = current_task()
    position = 0  # sequence numbers stay unique across the files this task writes
    for partition, rows in split_by_partition(table):
        if job.combine:
            rows = combine(rows, job.ctx.merge_spec)
        layout = job.layouts.get(partition)
        if layout is None:
            raise HudiCommitError(
                f"partition {partition!r} appeared in the incoming records after the write was planned: the "
                "input DataFrame gave different rows when computed again. Persist or checkpoint a "
                "non-deterministic input before writing it")
        plan, rows, route, index_stats = plan_partition(rows, layout, job, storage)
        if index_stats is not None:
            yield stats_batch(index_stats)
        for chunk in group_indices(route):
            if route[chunk[0]] < 0:  # BUCKET index: deletes of keys no file group holds
                continue
            bucket = plan.buckets[int(route[chunk[0]])]
            mine = rows if len(chunk) == rows.num_rows else rows.take(pa.array(chunk))  # one bucket: no copy
            stats = run_handle(storage, job.ctx, schema, bucket, mine, task, first_position=position)
            if stats is not None:
                position += int(stats["num_writes"])
                yield stats_batch(stats)
