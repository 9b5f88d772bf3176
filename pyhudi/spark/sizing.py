"""File sizing of a write: Hudi's small-file candidates, its record-size estimate, the bucket plan
of a profiled workload and each record's bucket as a Spark expression.

The driver decides from the timeline and the file listing; only :func:`assign` touches rows.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pyhudi import config as C
from pyhudi.errors import HudiInstantNotFoundError
from pyhudi.io.avro_schema import PARTITION_PATH, RECORD_KEY
from pyhudi.plans.clustering import clustering_file_groups
from pyhudi.plans.compaction import pending_file_groups
from pyhudi.spark.routing import by_partition_and, route
from pyhudi.spark.state import WriteState
from pyhudi.table.fs_view import FileSystemView
from pyhudi.timeline.instant import COMMIT, DELTA_COMMIT
from pyhudi.write.columns import FILE_ID
from pyhudi.write.plan import (
    BucketPlan,
    PartitionProfile,
    SmallFile,
    assign_buckets,
    average_record_size,
    log_targets,
    to_append_buckets,
)


def small_files(state: WriteState, view: FileSystemView, partitions: Iterable[str],
                pending: dict[tuple[str, str], str]) -> dict[str, list[SmallFile]]:
    """Hudi's small-file candidates of ``partitions``, in the order they take inserts."""
    cfg, table = state.cfg, state.table
    limit = cfg.get(C.PARQUET_SMALL_FILE_LIMIT)
    wanted = set(partitions)
    small: dict[str, list[SmallFile]] = {}
    if limit <= 0 or not table.timeline.completed_writes():
        return small
    clustered = clustering_file_groups(table.timeline)  # being rewritten: no inserts
    for s in view.latest_slices():
        b = s.base_file
        if b is None or b.size >= limit or b.partition_path not in wanted or (b.partition_path, b.file_id) \
                in clustered:
            continue
        if state.is_mor and (s.log_files or (b.partition_path, b.file_id) in pending):
            continue  # merge-on-read: only file groups without log files take inserts
        small.setdefault(b.partition_path, []).append(
            SmallFile(b.partition_path, b.file_id, b.path, b.instant_time, b.size))
    if state.is_mor:
        cap = cfg.get(C.MERGE_SMALL_FILE_GROUP_CANDIDATES_LIMIT)
        small = {p: sorted(files, key=lambda f: f.size)[:cap] for p, files in small.items()}
    return small


def record_size(state: WriteState) -> tuple[int, bool]:
    """Hudi's record-size estimate, and whether a commit measured it: bytes per record of the
    newest commit that wrote enough bytes to tell, else ``hoodie.copyonwrite.record.size.estimate``.

    The estimate is kept in the write's phases (``avg_record_size``)."""
    cfg, timeline = state.cfg, state.table.timeline
    threshold = cfg.get(C.RECORD_SIZE_ESTIMATION_THRESHOLD) * cfg.get(C.PARQUET_SMALL_FILE_LIMIT)
    commits = []
    # newest first, stopping at the first big one; delta commits count by their base files only
    # (log blocks are uncompressed Avro: their bytes per record say nothing of parquet's)
    for inst in reversed(timeline.completed([COMMIT, DELTA_COMMIT])):
        try:
            meta = timeline.commit_metadata(inst)
        except HudiInstantNotFoundError:  # archived meanwhile by another writer, and all before it
            break
        stats = [st for st in meta.write_stats() if not st.is_log]
        commits.append((sum(st.totalWriteBytes for st in stats), sum(st.numWrites for st in stats)))
        if commits[-1][0] > threshold:
            break
    measured = average_record_size(commits, threshold_bytes=threshold)
    avg = measured if measured is not None else cfg.get(C.COPY_ON_WRITE_RECORD_SIZE_ESTIMATE)
    state.phases["avg_record_size"] = avg
    return avg, measured is not None


def plan_buckets(state: WriteState, profile: dict[str, PartitionProfile]) -> BucketPlan:
    """The write buckets of a profiled workload (Hudi's ``UpsertPartitioner``); on merge-on-read
    tables updates become appends to log files, except in the small file groups that take inserts."""
    cfg, table = state.cfg, state.table
    view = table.file_system_view(partitions=sorted(profile))
    bases = view.latest_base_files()
    latest = {(b.partition_path, b.file_id): (b.path, b.instant_time) for b in bases}
    pending = pending_file_groups(table.timeline) if state.is_mor else {}
    small = small_files(state, view, [p for p, prof in profile.items() if prof.inserts > 0], pending)
    plan = assign_buckets(profile, latest, small, avg_record_size=record_size(state)[0],
                          max_file_size=cfg.get(C.PARQUET_MAX_FILE_SIZE),
                          auto_split=cfg.get(C.INSERT_AUTO_SPLIT), split_size=cfg.get(C.INSERT_SPLIT_SIZE))
    if not state.is_mor:
        return plan
    rewrite = {(f.partition_path, f.file_id) for files in small.values() for f in files}
    return to_append_buckets(plan, log_targets(view, pending), rewrite)


def assign(tagged: DataFrame, plan: BucketPlan) -> DataFrame:
    """Bucket of every record as a Spark expression, then one Spark partition per bucket."""
    if plan.update_bucket:
        update_bucket = by_partition_and(plan.update_bucket, F.col(FILE_ID))
    else:
        update_bucket = F.lit(None).cast("int")
    if plan.insert_weights:
        entries = []
        for p, (weight_total, weights) in plan.insert_weights.items():
            arr = F.array(*[F.struct(F.lit(float(w)).alias("w"), F.lit(b).alias("b")) for w, b in weights])
            entries += [F.lit(p), F.struct(F.lit(weight_total).cast("long").alias("total"), arr.alias("buckets"))]
        info = F.element_at(F.create_map(*entries), F.col(PARTITION_PATH))
        total = info["total"]
        r = F.pmod(F.xxhash64(F.col(RECORD_KEY)), total) / total
        chosen = F.element_at(F.filter(info["buckets"], lambda x: x["w"] > r), 1)["b"]
        insert_bucket = F.coalesce(chosen, F.element_at(info["buckets"], 1)["b"])
    else:
        insert_bucket = F.lit(None).cast("int")
    bucket = F.when(F.col(FILE_ID).isNotNull(), update_bucket).otherwise(insert_bucket)
    return route(tagged, bucket, len(plan.buckets))
