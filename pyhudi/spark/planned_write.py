"""The planned writes: profile the incoming records per file group, plan the write buckets on the
driver, then route every record to its bucket's task and write.

:func:`tagged_write` finds stored records by an index lookup (or the record index) and sizes new
files around Hudi's small files; :func:`bucket_write` (BUCKET index) takes each record's file group
from the hash of its key, with no lookup and no sizing. Both store the profile in the inflight
instant before writing, as Hudi's writers do; the tagged write first checks that no pending
clustering rewrites a file group it updates (:func:`pyhudi.services.clustering.guard_updates`).
"""

from __future__ import annotations

import dataclasses
import logging
import time

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyhudi import config as C
from pyhudi.errors import HudiConfigError
from pyhudi.index.bucket import bucket_file_groups, bucket_file_id_prefix
from pyhudi.io.avro_schema import FILE_NAME, PARTITION_PATH
from pyhudi.plans.compaction import pending_file_groups
from pyhudi.services.clustering import guard_updates
from pyhudi.spark.index import HASH_BUCKET, IndexStats, with_hash_bucket
from pyhudi.spark.prepare import combines, deduplicate, prepare
from pyhudi.spark.record_index_job import locate as record_index_locate
from pyhudi.spark.routing import by_partition_and, route
from pyhudi.spark.sizing import assign, plan_buckets
from pyhudi.spark.state import WriteState
from pyhudi.spark.tagging import lookup, tag
from pyhudi.spark.worker import map_in_arrow
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.instant import REPLACE_COMMIT
from pyhudi.write.columns import FILE_ID, IS_DELETE, STATS_DDL
from pyhudi.write.handles import write_buckets
from pyhudi.write.plan import (
    BucketPlan,
    HashBucketCount,
    PartitionProfile,
    WriteContext,
    log_targets,
    plan_bucket_index,
    to_append_buckets,
)

log = logging.getLogger("pyhudi")

#: RECORD_INDEX: at most this many stored locations are broadcast to the incoming rows (a larger
#: set is joined with a shuffle)
BROADCAST_ROWS = 500_000


def tagged_write(state: WriteState, data: DataFrame, operation: str, ctx: WriteContext) -> list[dict]:
    """Tag every record with its stored file group, profile, plan the buckets, write."""
    cfg = state.cfg
    started = time.monotonic()
    # without a global index, duplicates of a key land in one bucket: the handles combine them,
    # which saves the shuffle of a separate de-duplication
    in_handles = not state.is_global and combines(cfg, operation)
    if in_handles:
        ctx = dataclasses.replace(ctx, combine_in_handles=True)
    needs_index = operation in ("upsert", "delete") or (operation == "insert" and cfg.get(C.INSERT_DROP_DUPLICATES))
    located = None
    prepped = FILE_NAME in data.columns  # (pyhudi.spark.pipeline passes the stored file names of prepped rows only)
    if prepped:
        keyed = prepare(state, data, operation, combine_in_spark=not in_handles)
        tagged = keyed.withColumn(FILE_ID, stored_file_id(F.col(FILE_NAME))).drop(FILE_NAME)
        needs_index = False
    elif needs_index and cfg.get(C.INDEX_TYPE) == "RECORD_INDEX":
        keyed = prepare(state, data, operation, combine_in_spark=False)
        located = record_index_locate(state.table, keyed)
        if located is None:
            log.warning("%s has no record index to look keys up in (hoodie.metadata.enable=false?); using "
                        "GLOBAL_SIMPLE", state.table.path)
    if located is not None:
        state.keep_cached(located.cached)
        started = state.phase("index_lookup", started)
        if located.duplicates and combines(cfg, operation):
            keyed = deduplicate(state, keyed, operation)
        small = located.found <= BROADCAST_ROWS
        tagged = tag(state, keyed, F.broadcast(located.existing) if small else located.existing)
    elif needs_index:
        keyed = prepare(state, data, operation, combine_in_spark=not in_handles)
        keyed = state.persist(keyed)
        partitions: list[str] | None = None  # a global index looks in every partition
        if not state.is_global:
            partitions = sorted(state.input_counts) if state.input_counts is not None else \
                sorted(r[0] for r in keyed.select(PARTITION_PATH).distinct().collect())
        started = state.phase("partitions", started)
        found = lookup(state, data.sparkSession, keyed, partitions)
        tagged = tag(state, keyed, found.existing)
    elif not prepped:
        keyed = prepare(state, data, operation, combine_in_spark=not in_handles)
        tagged = keyed.withColumn(FILE_ID, F.lit(None).cast("string"))
    if not in_handles:  # a delete of an unknown key may still beat an insert of that key in a handle
        tagged = tagged.where(~(F.col(IS_DELETE) & F.col(FILE_ID).isNull()))
    if operation == "delete":
        tagged = tagged.where(F.col(FILE_ID).isNotNull())
    if operation == "insert" and cfg.get(C.INSERT_DROP_DUPLICATES):
        tagged = tagged.where(F.col(FILE_ID).isNull())
    tagged = state.persist(tagged)
    counts = tagged.groupBy(PARTITION_PATH, FILE_ID).count().collect()
    started = state.phase("profile", started)
    profile: dict[str, PartitionProfile] = {}
    for row in counts:
        p = row[PARTITION_PATH]
        prof = profile.setdefault(p, PartitionProfile(0, {}))
        if row[FILE_ID] is None:
            profile[p] = PartitionProfile(prof.inserts + row["count"], prof.updates)
        else:
            prof.updates[row[FILE_ID]] = row["count"]
    if prepped:
        check_stored_locations(state, profile)
    if located is not None:
        state.index_stats = IndexStats("RECORD_INDEX", files_in_partitions=0, keys_matched=located.found)
    elif needs_index:
        state.index_stats = found.finish()
    guard_updates(state.table, cfg, state.instant, {(p, f) for p, pr in profile.items() for f in pr.updates})
    mark_inflight(state, profile, operation, state.write_action)
    if not profile:
        return []
    plan = plan_buckets(state, profile)
    started = state.phase("plan", started)
    return write_planned(state, assign(tagged, plan), ctx, plan, started)


def stored_file_id(file_name: Column) -> Column:
    """The file group a prepped row's ``_hoodie_file_name`` names: a base file's name starts with
    its file id and ``_``, a log record's is the bare file id (Hudi's ``FSUtils.getFileId``)."""
    return F.split(file_name, "_").getItem(0)


def check_stored_locations(state: WriteState, profile: dict[str, PartitionProfile]) -> None:
    """A prepped write's rows go to the file groups they were read from, without an index lookup,
    as Hudi's prepped writes do (``HoodieCreateRecordUtils`` takes the location from
    ``_hoodie_file_name``; ``SparkUpsertPreppedCommitActionExecutor`` does not tag). Where Hudi would
    write into a file group that is gone (replaced by a clustering or an overwrite since the rows
    were read), the change would be invisible: refused here, before any file is written."""
    live = {(g.partition_path, g.file_id) for g in state.table.file_system_view(partitions=sorted(profile))
            .file_groups()}
    stale = sorted((p, f) for p, prof in profile.items() for f in prof.updates if (p, f) not in live)
    if stale:
        shown = ", ".join(f"{p or '(non-partitioned)'}/{f}" for p, f in stale[:5])
        raise HudiConfigError(
            f"a prepped {state.cfg.get(C.OPERATION)} names file groups that are no longer in {state.table.path} "
            f"({shown}{', ...' if len(stale) > 5 else ''}): they were replaced (clustering, insert_overwrite) "
            "after the rows were read; read the rows again and write them")


def bucket_write(state: WriteState, data: DataFrame, operation: str, ctx: WriteContext, *,
                 fresh: bool = False) -> list[dict]:
    """BUCKET index: a record's file group follows from hashing its key; no lookup, no sizing.

    Each (partition, bucket) with incoming records is one write bucket: a merge of the bucket's
    file group when the partition has one, else a new file group named after the bucket.
    Duplicates of a key share a bucket, so the handles combine them. ``fresh`` (a replace
    write) ignores the existing file groups: every bucket gets a new one. The partitions the
    batch has records in are kept in ``state.touched_partitions``.
    """
    started = time.monotonic()
    if combines(state.cfg, operation):
        ctx = dataclasses.replace(ctx, combine_in_handles=True)
    keyed = prepare(state, data, operation, combine_in_spark=False)
    keyed = state.persist(with_hash_bucket(keyed, state.cfg, state.spec))
    counts = keyed.groupBy(PARTITION_PATH, HASH_BUCKET).agg(
        F.count(F.lit(1)).alias("n"), F.sum(F.col(IS_DELETE).cast("long")).alias("deletes")).collect()
    started = state.phase("profile", started)
    partitions = sorted({r[PARTITION_PATH] for r in counts})
    state.touched_partitions = tuple(partitions)
    view = state.table.file_system_view(partitions=partitions)
    bases = [] if fresh else view.latest_base_files()
    file_ids: dict[str, list[str]] = {p: [] for p in partitions}
    for b in bases:
        file_ids[b.partition_path].append(b.file_id)
    groups = {p: bucket_file_groups(ids, p) for p, ids in file_ids.items()}
    state.index_stats = IndexStats("BUCKET", partitions=len(partitions), files_in_partitions=len(bases))
    plan, profile, by_hash = plan_bucket_index(
        [HashBucketCount(r[PARTITION_PATH], r[HASH_BUCKET], r["n"], r["deletes"]) for r in counts],
        {(b.partition_path, b.file_id): (b.path, b.instant_time) for b in bases}, groups,
        bucket_file_id_prefix)
    if state.is_mor and not fresh:
        plan = to_append_buckets(plan, log_targets(view, pending_file_groups(state.table.timeline)), set())
    mark_inflight(state, profile, operation, REPLACE_COMMIT if fresh else state.write_action)
    if not plan.buckets:
        return []
    started = state.phase("plan", started)
    bucket = by_partition_and(by_hash, F.col(HASH_BUCKET).cast("string"))
    return write_planned(state, route(keyed.where(bucket.isNotNull()), bucket, len(plan.buckets)),
                         ctx, plan, started)


def mark_inflight(state: WriteState, profile: dict[str, PartitionProfile], operation: str, action: str) -> None:
    """Move the instant to inflight with the workload profile as its content, as Hudi's writers do."""
    stats = {p: [WriteStat(fileId="", path="", partitionPath=p, numInserts=prof.inserts)] +
             [WriteStat(fileId=fid, path="", partitionPath=p, numUpdateWrites=n)
              for fid, n in sorted(prof.updates.items())]
             for p, prof in sorted(profile.items())}
    meta = CommitMetadata(partition_to_write_stats=stats, operation_type=operation.upper())
    state.table.timeline.transition_inflight(state.instant, action, meta.to_json().encode("utf-8"))


def write_planned(state: WriteState, routed: DataFrame, ctx: WriteContext, plan: BucketPlan,
                  started: float) -> list[dict]:
    """Run the write handles over rows routed one write bucket per Spark partition."""
    buckets = {b.bucket_id: b for b in plan.buckets}
    stats = map_in_arrow(routed, lambda it: write_buckets(it, ctx, buckets), STATS_DDL).collect()
    state.phases["buckets"] = len(plan.buckets)
    state.phase("write", started)
    return [r.asDict() for r in stats]
