"""The partition-local write: one Spark task per table partition finds the stored records of its
partition, sizes and writes its files (:mod:`pyhudi.write.partition_writer`).

Two Spark jobs, the count of incoming records per partition and the write, against three for a
planned write; it applies when the index is local to a partition and no partition is too large
for one task. An input small enough for the driver takes :mod:`pyhudi.spark.small_write`, which
plans with :func:`partition_job` and writes with the same ``write_partitions`` after one job.
"""

from __future__ import annotations

import time

from pyspark.sql import DataFrame

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.index import bloom_index as B
from pyhudi.index.bucket import bucket_file_groups
from pyhudi.io.avro_schema import PARTITION_PATH
from pyhudi.plans.clustering import clustering_file_groups
from pyhudi.plans.compaction import pending_file_groups
from pyhudi.spark.index import IndexStats, bloom_filter_slices, bucket_spec, key_read_schema, ranges_from_metadata
from pyhudi.spark.prepare import combines, prepare
from pyhudi.spark.routing import by_partition, route, spark_parallelism
from pyhudi.spark.sizing import record_size, small_files
from pyhudi.spark.state import WriteState, global_index
from pyhudi.spark.worker import map_in_arrow
from pyhudi.table.fs_view import FileSlice
from pyhudi.timeline.commit_metadata import CommitMetadata
from pyhudi.write.columns import INDEX_ROW, STATS_DDL
from pyhudi.write.partition_writer import (
    BLOOM,
    BUCKET_INDEX,
    NO_INDEX,
    SIMPLE,
    PartitionLayout,
    PartitionWriteJob,
    write_partitions,
)
from pyhudi.write.plan import MAX_ROWS_PER_TASK, WriteContext, log_targets, pack_tasks


def local_index(cfg: HudiConfig, operation: str) -> str | None:
    """How a partition-local write finds stored records for ``operation``; None when it cannot
    (global indexes match keys across partitions)."""
    index_type = cfg.get(C.INDEX_TYPE)
    if global_index(cfg) or not cfg.get(C.PARTITION_LOCAL_WRITE):
        return None
    if index_type == "BUCKET":  # bulk_insert too: records still go to their hash bucket's file group
        return BUCKET_INDEX
    if operation == "bulk_insert":
        return None
    if operation == "insert" and not cfg.get(C.INSERT_DROP_DUPLICATES):
        return NO_INDEX
    return {"SIMPLE": SIMPLE, "BLOOM": BLOOM}.get(index_type)


def local_write(state: WriteState, data: DataFrame, operation: str, ctx: WriteContext,
                index: str) -> list[dict] | None:
    """Write with one Spark task per table partition (:mod:`pyhudi.write.partition_writer`).

    Two Spark jobs: incoming records per partition (unless the partition-path check counted them,
    :attr:`WriteState.input_counts`), then the write. Returns None, having written nothing, when a
    partition receives more records than one task should write.
    """
    started = time.monotonic()
    # not persisted: the count reads only the partition fields, and recomputing the keys in
    # the write job costs less than caching every incoming row (a task meeting a partition the
    # count did not see, from an input that is not deterministic, fails the write)
    keyed = prepare(state, data, operation, combine_in_spark=False)
    counts = state.input_counts  # (the partition-path check counted the same rows by the same paths)
    if counts is None:
        counts = {r[PARTITION_PATH]: r["count"] for r in keyed.groupBy(PARTITION_PATH).count().collect()}
    if not writes_locally(state, counts):
        return None
    started = state.phase("partitions", started)
    partitions = sorted(counts)
    job = partition_job(state, partitions, operation, ctx, index)
    mark_inflight(state, partitions, operation)
    if not partitions:
        return []
    started = state.phase("plan", started)
    task_of = pack_tasks(counts, spark_parallelism(data))
    routed = route(keyed, by_partition(task_of), max(task_of.values()) + 1)
    out = [r.asDict() for r in map_in_arrow(routed, lambda it: write_partitions(it, job), STATS_DDL).collect()]
    state.phase("write", started)
    return file_rows(state, out)


def writes_locally(state: WriteState, counts: dict[str, int]) -> bool:
    """Whether partitions receiving ``counts`` records each can be written partition-locally: none
    past one task's records, none holding a pending clustering's file groups (updates of those are
    checked before writing: :func:`~pyhudi.spark.planned_write.tagged_write`)."""
    if counts and max(counts.values()) > MAX_ROWS_PER_TASK:
        return False
    return not any(p in counts for p, _ in clustering_file_groups(state.table.timeline))


def mark_inflight(state: WriteState, partitions: list[str], operation: str) -> None:
    """The requested instant made inflight, naming the partitions the write touches."""
    state.table.timeline.transition_inflight(state.instant, state.write_action, CommitMetadata(
        partition_to_write_stats={p: [] for p in partitions},
        operation_type=operation.upper()).to_json().encode("utf-8"))


def file_rows(state: WriteState, out: list[dict]) -> list[dict]:
    """The stats rows of the written files; the index lookup rows among ``out`` go into the
    write's index statistics."""
    lookups = [r for r in out if r["io_type"] == INDEX_ROW]
    if lookups and state.index_stats is not None:
        s = state.index_stats
        s.files_after_range_pruning = sum(r["index_files_in_range"] for r in lookups)
        s.files_after_bloom = sum(r["index_files_positive"] for r in lookups)
        s.keys_checked = sum(r["index_keys_checked"] for r in lookups)
        s.bloom_positives = sum(r["index_bloom_positives"] for r in lookups)
        s.keys_matched = sum(r["index_matches"] for r in lookups)
        s.false_positives = s.bloom_positives - s.keys_matched
    return [r for r in out if r["io_type"] != INDEX_ROW]


def partition_job(state: WriteState, partitions: list[str], operation: str, ctx: WriteContext,
                  index: str) -> PartitionWriteJob:
    """The driver's plan of a partition-local write: the latest slices of ``partitions``."""
    cfg, table = state.cfg, state.table
    view = table.file_system_view(partitions=partitions)
    pending = pending_file_groups(table.timeline) if state.is_mor else {}
    small = small_files(state, view, partitions, pending) if index != BUCKET_INDEX else {}
    targets = log_targets(view, pending) if state.is_mor else {}
    slices: dict[str, list[FileSlice]] = {}
    for piece in view.latest_slices():
        slices.setdefault(piece.partition_path, []).append(piece)
    from_metadata = None  # key ranges remembered from the metadata table's column statistics
    if index == BLOOM and cfg.get(C.BLOOM_INDEX_USE_METADATA):
        from_metadata = ranges_from_metadata(table, [s.base_file for s in view.latest_slices()
                                                     if s.base_file is not None])
    layouts = {}
    base_uri = table.storage.base_uri
    for p in partitions:
        mine = slices.get(p, [])
        bases = [s.base_file for s in mine if s.base_file is not None]
        layouts[p] = PartitionLayout(
            p, tuple((b.file_id, b.path, b.instant_time) for b in bases),
            key_sources=tuple(s.to_read() for s in mine) if index in (SIMPLE, BLOOM) else (),
            key_ranges=tuple((b.file_id, *known) for b in bases
                             if (known := B.known_range(base_uri, b.path)) is not None)
            if index == BLOOM else (),
            small_files=tuple(small.get(p, [])),
            log_targets=tuple((fid, t) for (pp, fid), t in sorted(targets.items()) if pp == p),
            bucket_groups=tuple(sorted(bucket_file_groups([b.file_id for b in bases], p).items()))
            if index == BUCKET_INDEX else ())
    if index != NO_INDEX:
        files = sum(len(slices.get(p, [])) for p in partitions)
        state.index_stats = IndexStats(cfg.get(C.INDEX_TYPE), partitions=len(view.partitions),
                                       files_in_partitions=files)
        if from_metadata is not None:
            state.index_stats.phases["key_ranges_from_metadata_table"] = from_metadata
        if index == BLOOM and cfg.get(C.BLOOM_INDEX_USE_METADATA) and (blooms := bloom_filter_slices(table)):
            state.index_stats.phases["bloom_filters_from_metadata_table"] = len(blooms)
    key_schema = key_read_schema(table, state.merge_spec()) if index in (SIMPLE, BLOOM) and state.is_mor else None
    avg, measured = record_size(state) if index != BUCKET_INDEX else (1, True)
    return PartitionWriteJob(
        ctx=ctx, operation=operation, index=index, combine=combines(cfg, operation),
        drop_existing=operation == "insert" and bool(cfg.get(C.INSERT_DROP_DUPLICATES)),
        merge_on_read=state.is_mor,
        avg_record_size=avg,
        # no commit tells the record size and the user named none: the tasks measure their inserts
        measure_record_size=not measured and not cfg.is_set(C.COPY_ON_WRITE_RECORD_SIZE_ESTIMATE),
        auto_split=cfg.get(C.INSERT_AUTO_SPLIT), split_size=cfg.get(C.INSERT_SPLIT_SIZE), layouts=layouts,
        bucket=bucket_spec(cfg, state.spec) if index == BUCKET_INDEX else None, merge_spec=state.merge_spec(),
        visibility=view.visibility() if key_schema is not None else None,
        key_schema_ipc=key_schema.serialize().to_pybytes() if key_schema is not None else b"",
        prune_by_ranges=cfg.get(C.BLOOM_PRUNE_BY_RANGES),
        bloom_filters=bloom_filter_slices(table) if index == BLOOM and cfg.get(C.BLOOM_INDEX_USE_METADATA) else ())
