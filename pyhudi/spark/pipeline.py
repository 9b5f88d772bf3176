"""The Spark side of a write: keys, de-duplication, index tagging, bucketing, file writing.

Every step on rows is a native Spark operation; the driver only collects small aggregates (the
partitions touched, counts per file group) and executor stats (one row per file). An upsert runs
three Spark jobs: affected partitions, the workload profile of the tagged records, and the write.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config.properties import MERGE_ON_READ
from pyhudi.errors import HudiInstantNotFoundError
from pyhudi.index import INDEX_STATS_KEY
from pyhudi.index import bloom_index as B
from pyhudi.index.bloom_index import remember_ranges
from pyhudi.index.bucket import bucket_file_groups, bucket_file_id_prefix
from pyhudi.io.avro_schema import (
    IS_DELETED_FIELD,
    PARTITION_PATH,
    RECORD_KEY,
    storage_schema,
    table_avro_schema,
)
from pyhudi.io.base_file import parquet_settings
from pyhudi.keygen.spec import KeyGenSpec
from pyhudi.metadata import column_stats
from pyhudi.metadata.table import RECORD_INDEX_PARTITION, MetadataTable
from pyhudi.plans.clustering import clustering_file_groups
from pyhudi.plans.compaction import pending_file_groups
from pyhudi.read.merge import MergeSpec
from pyhudi.services.clustering import guard_updates
from pyhudi.spark.index import (
    EXISTING_PP,
    EXISTING_RK,
    HASH_BUCKET,
    IndexStats,
    Lookup,
    bloom_filter_slices,
    bloom_lookup,
    bucket_spec,
    key_read_schema,
    simple_lookup,
    with_hash_bucket,
)
from pyhudi.spark.keygen import with_keys, with_required_ordering
from pyhudi.spark.record_index_job import keeps_record_index, write_changes
from pyhudi.spark.record_index_job import locate as record_index_locate
from pyhudi.spark.worker import map_in_arrow
from pyhudi.table.fs_view import FileSlice, FileSystemView
from pyhudi.table.table import HudiTable
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.instant import COMMIT, DELTA_COMMIT, REPLACE_COMMIT
from pyhudi.timeline.timeline import commit_action_for
from pyhudi.write.bulk_insert import BulkInsertPlan, bulk_insert_writer, plan_bulk_insert, slot_bounds
from pyhudi.write.columns import ARRIVAL, BUCKET, FILE_ID, INDEX_ROW, IS_DELETE, SHUFFLE_KEY, STATS_DDL
from pyhudi.write.handles import write_buckets
from pyhudi.write.partition_writer import (
    BLOOM,
    BUCKET_INDEX,
    NO_INDEX,
    SIMPLE,
    PartitionLayout,
    PartitionWriteJob,
    write_partitions,
)
from pyhudi.write.plan import (
    MAX_ROWS_PER_TASK,
    BucketPlan,
    HashBucketCount,
    PartitionProfile,
    SmallFile,
    WriteContext,
    assign_buckets,
    average_record_size,
    log_targets,
    pack_tasks,
    plan_bucket_index,
    to_append_buckets,
)
from pyhudi.write.replace import DELETE_PARTITION, INSERT_OVERWRITE_TABLE, replaced_file_groups
from pyhudi.write.result import commit_metadata, record_run

log = logging.getLogger("pyhudi")

#: Input tasks per core of the jobs that read an incoming DataFrame made from local data
TASKS_PER_CORE = 2
#: At most this many partitions of such a DataFrame are merged into one task: each carries its
#: rows inside the task, and a task of too many would be too large to ship
MERGED_PARTITIONS = 8
#: RECORD_INDEX: at most this many stored locations are broadcast to the incoming rows (a larger
#: set is joined with a shuffle)
BROADCAST_ROWS = 500_000
#: Keys a GLOBAL_SORT bulk insert samples to cut a large table partition into key ranges.
KEY_SAMPLE = 20_000


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` (Murmur3 x86_32, seed 42) of a 32-bit integer, as a signed int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = (value & mask) * 0xCC9E2D51 & mask
    k1 = rotl(k1, 15) * 0x1B873593 & mask
    h1 = rotl(seed ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def shuffle_keys(num_buckets: int) -> list[int]:
    """For each bucket b, an int whose Spark hash partitioning lands in partition b.

    ``repartition(n, col)`` places a row in ``pmod(hash(col), n)``; choosing these keys gives
    every bucket its own task, so no task writes two file groups one after the other.
    """
    keys: list[int | None] = [None] * num_buckets
    missing, candidate = num_buckets, 0
    while missing:
        target = spark_hash_int(candidate) % num_buckets
        if keys[target] is None:
            keys[target] = candidate
            missing -= 1
        candidate += 1
    return [k for k in keys if k is not None]


@dataclass
class Pipeline:
    table: HudiTable
    cfg: HudiConfig
    spec: KeyGenSpec
    instant: str
    target_schema: pa.Schema
    ordering_field: str | None
    is_deleted_column: bool
    extra_metadata: dict[str, str] = field(default_factory=dict)  # stored in the commit as given
    partitions_to_delete: tuple[str, ...] | None = None  # delete_partition with the option set
    touched_partitions: tuple[str, ...] = ()  # partitions a bucket write had records for
    phases: dict[str, float] = field(default_factory=dict)
    index_stats: IndexStats | None = None
    _cached: list[DataFrame] = field(default_factory=list)

    # -- helpers -------------------------------------------------------------------------------
    @property
    def is_global(self) -> bool:
        index_type = self.cfg.get(C.INDEX_TYPE)
        return index_type.startswith("GLOBAL_") or index_type == "RECORD_INDEX"

    @property
    def is_mor(self) -> bool:
        return self.table.table_type == MERGE_ON_READ

    @property
    def write_action(self) -> str:
        """``deltacommit`` on merge-on-read tables, ``commit`` on copy-on-write ones."""
        return commit_action_for(self.table.table_type)

    def merge_spec(self) -> MergeSpec:
        return MergeSpec.of(self.ordering_field, self.cfg.get(C.PAYLOAD_CLASS))

    def _phase(self, name: str, started: float) -> float:
        now = time.monotonic()
        self.phases[f"{name}_s"] = round(now - started, 3)
        return now

    def _persist(self, df: DataFrame) -> DataFrame:
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._cached.append(df)
        return df

    def context(self) -> WriteContext:
        cfg = self.cfg
        file_schema = storage_schema(self.target_schema)
        settings = parquet_settings(cfg, table_avro_schema(file_schema, self.table.name, with_meta_fields=True),
                                    populate_meta_fields=cfg.get(C.POPULATE_META_FIELDS))
        return WriteContext(
            base_uri=self.table.storage.base_uri, instant_time=self.instant, settings=settings,
            storage_schema_ipc=file_schema.serialize().to_pybytes(),
            precombine_field=self.ordering_field,
            keep_larger_ordering=self.merge_spec().keep_larger_ordering,
            max_file_size=cfg.get(C.PARQUET_MAX_FILE_SIZE), compression_ratio=cfg.get(C.PARQUET_COMPRESSION_RATIO),
            log_block_format=cfg.get(C.LOGFILE_DATA_BLOCK_FORMAT), log_max_size=cfg.get(C.LOGFILE_MAX_SIZE),
            append_in_place=cfg.get(C.WRITE_CONCURRENCY_MODE) != "OPTIMISTIC_CONCURRENCY_CONTROL",
            log_column_stats=bool(cfg.get(C.METADATA_ENABLE) and cfg.get(C.METADATA_COLUMN_STATS_ENABLE)),
            stats_columns=tuple(cfg.get(C.METADATA_COLUMN_STATS_COLUMNS)))

    def combines(self, operation: str) -> bool:
        """Whether incoming duplicates are combined (``hoodie.combine.before.*``)."""
        combine = {"upsert": C.COMBINE_BEFORE_UPSERT, "delete": C.COMBINE_BEFORE_DELETE}.get(
            operation, C.COMBINE_BEFORE_INSERT)
        return bool(self.cfg.get(combine) or (operation == "insert" and self.cfg.get(C.INSERT_DROP_DUPLICATES)))

    def prepare(self, data: DataFrame, operation: str, *, combine_in_spark: bool = True) -> DataFrame:
        """Incoming rows with record key, partition path and delete flag; de-duplicated in Spark
        unless ``combine_in_spark`` is false (the write handles then combine per bucket).

        The input is read by fewer, larger tasks when it is an in-memory RDD of many small
        partitions (see :func:`coalesced`).
        """
        data = coalesced(data, self._spark_parallelism(data))
        keyed = with_keys(data, self.spec, key_col=RECORD_KEY, partition_col=PARTITION_PATH)
        if operation == "delete":
            flag: Column = F.lit(True)
        elif self.is_deleted_column:
            flag = F.coalesce(F.col(IS_DELETED_FIELD).cast("boolean"), F.lit(False))
        else:
            flag = F.lit(False)
        keyed = keyed.withColumn(IS_DELETE, flag)
        if self.ordering_field and self.ordering_field in keyed.columns:
            if operation == "delete":  # Hudi's delete removes the key whatever its stored ordering value
                keyed = keyed.withColumn(self.ordering_field,
                                         F.lit(None).cast(keyed.schema[self.ordering_field].dataType))
            else:
                keyed = with_required_ordering(keyed, self.ordering_field)
        if combine_in_spark and self.combines(operation):
            keyed = self.deduplicate(keyed, operation)
        return keyed

    def parallelism(self, operation: str) -> int:
        opt = {"upsert": C.UPSERT_PARALLELISM, "insert": C.INSERT_PARALLELISM,
               "bulk_insert": C.BULKINSERT_PARALLELISM, "delete": C.DELETE_PARALLELISM}[operation]
        return int(self.cfg.get(opt))

    def deduplicate(self, keyed: DataFrame, operation: str) -> DataFrame:
        """Keep one record per key: the one with the largest ordering value, the later arrival
        among equal ones (Hudi's preCombine); a null ordering value (deletes may have one) loses."""
        keys = [RECORD_KEY] if self.is_global else [RECORD_KEY, PARTITION_PATH]
        cols = keyed.columns
        keyed = keyed.withColumn(ARRIVAL, F.monotonically_increasing_id())  # input order, before any shuffle
        n = self.parallelism(operation)
        if n > 0:
            keyed = keyed.repartition(n, *keys)
        rank = F.col(ARRIVAL)
        if self.ordering_field in cols:
            ordering = F.col(f"`{self.ordering_field}`")
            rank = F.struct(ordering.isNotNull(), ordering, rank)  # never null, so max_by keeps a row
        best = F.max_by(F.struct(*[F.col(f"`{c}`") for c in cols]), rank)
        return keyed.groupBy(*keys).agg(best.alias("_pyhudi_row")).select("_pyhudi_row.*")

    # -- running -------------------------------------------------------------------------------
    def run(self, data: DataFrame, *, operation: str, replace: str | None, schema_json: str,
            commit: Callable[..., None]) -> tuple[CommitMetadata, dict[str, Any]]:
        """Write the files of the requested instant, then hand its metadata to ``commit``.

        ``replace`` names a replace operation (:mod:`pyhudi.write.replace`): its new files are
        written as an insert, and the commit retires the file groups it replaces."""
        table = self.table
        try:
            ctx = self.context()
            local = self.local_index(operation)
            bucket = self.cfg.get(C.INDEX_TYPE) == "BUCKET"
            replaced: dict[str, list[str]] | None
            if replace == DELETE_PARTITION:
                rows, replaced = [], self.deleted_partitions(data)
            elif replace and bucket:  # new file groups named after the buckets, as Hudi's overwrite makes
                rows = self.bucket_write(data, "insert", ctx, fresh=True)
                replaced = self.replaced_groups(replace, self.touched_partitions)
            elif (operation == "bulk_insert" and not bucket) or replace:
                rows, replaced = self.bulk_insert(data, operation, ctx, replace)
            elif local is not None and (written := self.local_write(data, operation, ctx, local)) is not None:
                rows, replaced = written, None
            elif bucket:
                rows, replaced = self.bucket_write(data, operation, ctx), None
            else:
                rows, replaced = self.tagged_write(data, operation, ctx), None
            op_type = replace or {
                "upsert": "UPSERT", "insert": "INSERT", "bulk_insert": "BULK_INSERT", "delete": "DELETE"}[operation]
            meta = commit_metadata(rows, operation_type=op_type, schema_json=schema_json, replaced=replaced)
            prefix = self.cfg.get(C.COMMIT_METADATA_KEY_PREFIX)
            if prefix:  # Hudi's commitmeta.key.prefix: such options travel with the commit
                meta.extra_metadata.update({k: str(v) for k, v in self.cfg.raw.items() if k.startswith(prefix)})
            meta.extra_metadata.update(self.extra_metadata)
            if self.index_stats is not None:
                meta.extra_metadata[INDEX_STATS_KEY] = json.dumps(self.index_stats.to_dict(), sort_keys=True)
            record_run(meta, self.phases, self.cfg.raw)
            started = time.monotonic()
            index_files = None
            if keeps_record_index(self.cfg):
                index_files = {RECORD_INDEX_PARTITION: write_changes(
                    data.sparkSession, table, self.instant, rows, replaced, self.merge_spec(),
                    storage_schema(self.target_schema))}
                started = self._phase("record_index", started)
            log_stats = self.log_statistics(rows)
            commit(meta, written=index_files, records={column_stats.PARTITION: log_stats} if log_stats else None,
                   files=[r["path"] for r in rows if r.get("path")])
            remember_ranges(table.storage.base_uri, [(r["path"], r["min_key"], r["max_key"]) for r in rows])
            self._phase("commit", started)
            result: dict[str, Any] = dict(self.phases)
            if self.index_stats is not None:
                result["index"] = self.index_stats.to_dict()
            return meta, result
        finally:
            for df in self._cached:
                df.unpersist()

    def log_statistics(self, rows: list[dict]) -> list[tuple[str, dict]]:
        """The column statistics the append handles computed for the log files they wrote. Blocks
        appended to an existing log file are kept only where the metadata table describes the
        file's earlier blocks (:func:`pyhudi.metadata.column_stats.appended_records`)."""
        fresh: list[tuple[str, dict]] = []
        appended: list[tuple[str, dict]] = []
        for row in rows:
            if row.get("column_stats"):
                (appended if (row.get("log_offset") or 0) > 0 else fresh).extend(
                    column_stats.decode(row["column_stats"]))
        if appended:
            recorded = MetadataTable(self.table.storage).read(column_stats.PARTITION, self.table.timeline,
                                                              key_prefixes=tuple(sorted({k for k, _r in appended})))
            fresh += column_stats.appended_records(appended, recorded)
        return fresh

    def _inflight(self, profile: dict[str, PartitionProfile], operation: str, action: str) -> None:
        stats = {p: [WriteStat(fileId="", path="", partitionPath=p, numInserts=prof.inserts)] +
                 [WriteStat(fileId=fid, path="", partitionPath=p, numUpdateWrites=n)
                  for fid, n in sorted(prof.updates.items())]
                 for p, prof in sorted(profile.items())}
        meta = CommitMetadata(partition_to_write_stats=stats, operation_type=operation.upper())
        self.table.timeline.transition_inflight(self.instant, action, meta.to_json().encode("utf-8"))

    def bulk_insert(self, data: DataFrame, operation: str, ctx: WriteContext,
                    replace: str | None) -> tuple[list[dict], dict[str, list[str]] | None]:
        """Records sized into files per table partition (:mod:`pyhudi.write.bulk_insert`): a count
        per partition, a key sample when a partition needs several GLOBAL_SORT slots, then one
        shuffle to the slots' tasks, which sort (unless the sort mode is NONE or
        PARTITION_PATH_REPARTITION) and write."""
        started = time.monotonic()
        keyed = self.prepare(data, "bulk_insert" if operation in ("bulk_insert", "delete") else
                             "insert" if replace else operation)
        # a replace empties every partition the batch has records in, soft-deleted ones included
        per_partition = keyed.groupBy(PARTITION_PATH).agg(F.sum((~F.col(IS_DELETE)).cast("long")).alias("live"))
        counts = {r[PARTITION_PATH]: r["live"] or 0 for r in per_partition.collect()}
        keyed = keyed.where(~F.col(IS_DELETE))
        started = self._phase("partitions", started)
        mode = self.cfg.get(C.BULKINSERT_SORT_MODE)
        parallelism = self.parallelism("bulk_insert") or self._spark_parallelism(data)
        avg, _measured = self.record_size()
        plan = plan_bulk_insert(counts, avg_record_size=avg, parallelism=parallelism)
        if mode == "GLOBAL_SORT" and plan.multi_slot:
            plan = plan_bulk_insert(counts, avg_record_size=avg, parallelism=parallelism,
                                    bounds=self._key_sample(keyed, plan.multi_slot, counts))
        action = REPLACE_COMMIT if replace else self.write_action
        self.table.timeline.transition_inflight(self.instant, action, b"")
        started = self._phase("plan", started)
        stats = []
        if plan.num_tasks:
            routed = route(keyed, bulk_insert_task(plan), plan.num_tasks)
            if mode not in ("NONE", "PARTITION_PATH_REPARTITION"):
                routed = routed.sortWithinPartitions(PARTITION_PATH, RECORD_KEY)
            expected = plan.expected_rows
            stats = map_in_arrow(routed, lambda it: bulk_insert_writer(it, ctx, expected), STATS_DDL).collect()
        self.phases["tasks"] = plan.num_tasks
        self._phase("write", started)
        return [r.asDict() for r in stats], self.replaced_groups(replace, counts)

    def replaced_groups(self, replace: str | None, partitions: Iterable[str]) -> dict[str, list[str]] | None:
        """The file groups a replace write retires: the table's, or those of the partitions it wrote."""
        if not replace:
            return None
        if replace == INSERT_OVERWRITE_TABLE:
            return replaced_file_groups(self.table.file_system_view(), None)
        partitions = sorted(set(partitions))
        return replaced_file_groups(self.table.file_system_view(partitions=partitions), partitions)

    def deleted_partitions(self, data: DataFrame) -> dict[str, list[str]]:
        """delete_partition: the file groups of the partitions named by the option (resolved before the
        write began), else of the batch's records."""
        partitions = self.partitions_to_delete
        if partitions is None:
            keyed = self.prepare(data, "delete", combine_in_spark=False)
            partitions = tuple(r[PARTITION_PATH] for r in keyed.select(PARTITION_PATH).distinct().collect())
        self.table.timeline.transition_inflight(self.instant, REPLACE_COMMIT, b"")
        return replaced_file_groups(self.table.file_system_view(partitions=list(partitions)), partitions)

    @staticmethod
    def _key_sample(keyed: DataFrame, slots: dict[str, int], counts: dict[str, int]) -> dict[str, tuple[str, ...]]:
        """GLOBAL_SORT slot boundaries of the partitions with several slots, from a key sample of
        about :data:`KEY_SAMPLE` keys (at least 20 per slot while the sample stays small)."""
        rows = sum(counts[p] for p in slots)
        fraction = min(1.0, max(KEY_SAMPLE, 20 * sum(slots.values())) / max(1, rows))
        sample: dict[str, list[str]] = {}
        picked = keyed.where(F.col(PARTITION_PATH).isin(list(slots))).select(PARTITION_PATH, RECORD_KEY)
        for r in picked.sample(fraction=fraction, seed=17).collect():
            sample.setdefault(r[0], []).append(r[1])
        return slot_bounds(sample, slots)

    def tagged_write(self, data: DataFrame, operation: str, ctx: WriteContext) -> list[dict]:
        self._spark = data.sparkSession
        started = time.monotonic()
        # without a global index, duplicates of a key land in one bucket: the handles combine them,
        # which saves the shuffle of a separate de-duplication
        in_handles = not self.is_global and self.combines(operation)
        if in_handles:
            ctx = dataclasses.replace(ctx, combine_in_handles=True)
        needs_index = operation in ("upsert", "delete") or (
            operation == "insert" and self.cfg.get(C.INSERT_DROP_DUPLICATES))
        located = None
        if needs_index and self.cfg.get(C.INDEX_TYPE) == "RECORD_INDEX":
            keyed = self.prepare(data, operation, combine_in_spark=False)
            located = record_index_locate(self.table, keyed)
            if located is None:
                log.warning("%s has no record index to look keys up in (hoodie.metadata.enable=false?); using "
                            "GLOBAL_SIMPLE", self.table.path)
        if located is not None:
            self._cached.append(located.cached)
            started = self._phase("index_lookup", started)
            if located.duplicates and self.combines(operation):
                keyed = self.deduplicate(keyed, operation)
            small = located.found <= BROADCAST_ROWS
            tagged = self.tag(keyed, F.broadcast(located.existing) if small else located.existing)
        elif needs_index:
            keyed = self.prepare(data, operation, combine_in_spark=not in_handles)
            keyed = self._persist(keyed)
            partitions = None if self.is_global else sorted(
                r[0] for r in keyed.select(PARTITION_PATH).distinct().collect())
            started = self._phase("partitions", started)
            lookup = self.lookup(keyed, partitions)
            tagged = self.tag(keyed, lookup.existing)
        else:
            keyed = self.prepare(data, operation, combine_in_spark=not in_handles)
            tagged = keyed.withColumn(FILE_ID, F.lit(None).cast("string"))
        if not in_handles:  # a delete of an unknown key may still beat an insert of that key in a handle
            tagged = tagged.where(~(F.col(IS_DELETE) & F.col(FILE_ID).isNull()))
        if operation == "delete":
            tagged = tagged.where(F.col(FILE_ID).isNotNull())
        if operation == "insert" and self.cfg.get(C.INSERT_DROP_DUPLICATES):
            tagged = tagged.where(F.col(FILE_ID).isNull())
        tagged = self._persist(tagged)
        counts = tagged.groupBy(PARTITION_PATH, FILE_ID).count().collect()
        started = self._phase("profile", started)
        profile: dict[str, PartitionProfile] = {}
        for row in counts:
            p = row[PARTITION_PATH]
            prof = profile.setdefault(p, PartitionProfile(0, {}))
            if row[FILE_ID] is None:
                profile[p] = PartitionProfile(prof.inserts + row["count"], prof.updates)
            else:
                prof.updates[row[FILE_ID]] = row["count"]
        if located is not None:
            self.index_stats = IndexStats("RECORD_INDEX", files_in_partitions=0, keys_matched=located.found)
        elif needs_index:
            self.index_stats = lookup.finish()
        guard_updates(self.table, self.cfg, self.instant, {(p, f) for p, pr in profile.items() for f in pr.updates})
        self._inflight(profile, operation, self.write_action)
        if not profile:
            return []
        plan = self.plan(profile)
        started = self._phase("plan", started)
        return self._write_planned(self.assign(tagged, plan), ctx, plan, started)

    # -- partition-local writes -----------------------------------------------------------------
    def local_index(self, operation: str) -> str | None:
        """How a partition-local write finds stored records for ``operation``; None when it cannot
        (global indexes match keys across partitions)."""
        index_type = self.cfg.get(C.INDEX_TYPE)
        if self.is_global or not self.cfg.get(C.PARTITION_LOCAL_WRITE):
            return None
        if index_type == "BUCKET":  # bulk_insert too: records still go to their hash bucket's file group
            return BUCKET_INDEX
        if operation == "bulk_insert":
            return None
        if operation == "insert" and not self.cfg.get(C.INSERT_DROP_DUPLICATES):
            return NO_INDEX
        return {"SIMPLE": SIMPLE, "BLOOM": BLOOM}.get(index_type)

    def local_write(self, data: DataFrame, operation: str, ctx: WriteContext, index: str) -> list[dict] | None:
        """Write with one Spark task per table partition (:mod:`pyhudi.write.partition_writer`).

        Two Spark jobs: incoming records per partition, then the write. Returns None, having
        written nothing, when a partition receives more records than one task should write.
        """
        started = time.monotonic()
        # not persisted: the count reads only the partition fields, and recomputing the keys in
        # the write job costs less than caching every incoming row (a task meeting a partition the
        # count did not see, from an input that is not deterministic, fails the write)
        keyed = self.prepare(data, operation, combine_in_spark=False)
        counts = {r[PARTITION_PATH]: r["count"] for r in keyed.groupBy(PARTITION_PATH).count().collect()}
        if counts and max(counts.values()) > MAX_ROWS_PER_TASK:
            return None
        if any(p in counts for p, _ in clustering_file_groups(self.table.timeline)):
            return None  # updates of pending clusterings' groups are checked before writing: tagged_write
        started = self._phase("partitions", started)
        partitions = sorted(counts)
        job = self.partition_job(partitions, operation, ctx, index)
        self.table.timeline.transition_inflight(self.instant, self.write_action, CommitMetadata(
            partition_to_write_stats={p: [] for p in partitions},
            operation_type=operation.upper()).to_json().encode("utf-8"))
        if not partitions:
            return []
        started = self._phase("plan", started)
        task_of = pack_tasks(counts, self._spark_parallelism(data))
        routed = route(keyed, by_partition(task_of), max(task_of.values()) + 1)
        out = [r.asDict() for r in map_in_arrow(routed, lambda it: write_partitions(it, job), STATS_DDL).collect()]
        self._phase("write", started)
        lookups = [r for r in out if r["io_type"] == INDEX_ROW]
        if lookups and self.index_stats is not None:
            s = self.index_stats
            s.files_after_range_pruning = sum(r["index_files_in_range"] for r in lookups)
            s.files_after_bloom = sum(r["index_files_positive"] for r in lookups)
            s.keys_checked = sum(r["index_keys_checked"] for r in lookups)
            s.bloom_positives = sum(r["index_bloom_positives"] for r in lookups)
            s.keys_matched = sum(r["index_matches"] for r in lookups)
            s.false_positives = s.bloom_positives - s.keys_matched
        return [r for r in out if r["io_type"] != INDEX_ROW]

    @staticmethod
    def _spark_parallelism(data: DataFrame) -> int:
        return int(data.sparkSession.sparkContext.defaultParallelism)

    def partition_job(self, partitions: list[str], operation: str, ctx: WriteContext,
                      index: str) -> PartitionWriteJob:
        """The driver's plan of a partition-local write: the latest slices of ``partitions``."""
        cfg = self.cfg
        view = self.table.file_system_view(partitions=partitions)
        pending = pending_file_groups(self.table.timeline) if self.is_mor else {}
        small = self.small_files(view, partitions, pending) if index != BUCKET_INDEX else {}
        targets = log_targets(view, pending) if self.is_mor else {}
        slices: dict[str, list[FileSlice]] = {}
        for piece in view.latest_slices():
            slices.setdefault(piece.partition_path, []).append(piece)
        from_metadata = None  # key ranges remembered from the metadata table's column statistics
        if index == BLOOM and cfg.get(C.BLOOM_INDEX_USE_METADATA):
            from pyhudi.spark.index import ranges_from_metadata

            from_metadata = ranges_from_metadata(self.table, [s.base_file for s in view.latest_slices()
                                                              if s.base_file is not None])
        layouts = {}
        base_uri = self.table.storage.base_uri
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
            self.index_stats = IndexStats(cfg.get(C.INDEX_TYPE), partitions=len(view.partitions),
                                          files_in_partitions=files)
            if from_metadata is not None:
                self.index_stats.phases["key_ranges_from_metadata_table"] = from_metadata
            if index == BLOOM and cfg.get(C.BLOOM_INDEX_USE_METADATA) and (blooms := bloom_filter_slices(self.table)):
                self.index_stats.phases["bloom_filters_from_metadata_table"] = len(blooms)
        key_schema = key_read_schema(self.table, self.merge_spec()) \
            if index in (SIMPLE, BLOOM) and self.is_mor else None
        avg, measured = self.record_size() if index != BUCKET_INDEX else (1, True)
        return PartitionWriteJob(
            ctx=ctx, operation=operation, index=index, combine=self.combines(operation),
            drop_existing=operation == "insert" and bool(cfg.get(C.INSERT_DROP_DUPLICATES)),
            merge_on_read=self.is_mor,
            avg_record_size=avg,
            # no commit tells the record size and the user named none: the tasks measure their inserts
            measure_record_size=not measured and not cfg.is_set(C.COPY_ON_WRITE_RECORD_SIZE_ESTIMATE),
            auto_split=cfg.get(C.INSERT_AUTO_SPLIT), split_size=cfg.get(C.INSERT_SPLIT_SIZE), layouts=layouts,
            bucket=bucket_spec(cfg, self.spec) if index == BUCKET_INDEX else None, merge_spec=self.merge_spec(),
            visibility=view.visibility() if key_schema is not None else None,
            key_schema_ipc=key_schema.serialize().to_pybytes() if key_schema is not None else b"",
            prune_by_ranges=cfg.get(C.BLOOM_PRUNE_BY_RANGES),
            bloom_filters=bloom_filter_slices(self.table)
            if index == BLOOM and cfg.get(C.BLOOM_INDEX_USE_METADATA) else ())

    def lookup(self, keyed: DataFrame, partitions: list[str] | None) -> Lookup:
        """The stored records the incoming keys may match, by the configured index."""
        index_type = self.cfg.get(C.INDEX_TYPE)
        if index_type == "RECORD_INDEX":  # without a usable record index (tagged_write warned)
            index_type = "GLOBAL_SIMPLE"
        if index_type in ("BLOOM", "GLOBAL_BLOOM"):
            found = bloom_lookup(self._spark, self.table, keyed, partitions, self.cfg, global_index=self.is_global,
                                 spec=self.merge_spec())
            if found.check_output is not None:
                self._cached.append(found.check_output)
            return found
        return simple_lookup(self._spark, self.table, partitions, index_type, spec=self.merge_spec())

    def tag(self, keyed: DataFrame, existing: DataFrame | None) -> DataFrame:
        """Join incoming keys with the stored ones: the file group of every update and delete."""
        if existing is None:
            return keyed.withColumn(FILE_ID, F.lit(None).cast("string"))
        if not self.is_global:
            cond = (F.col(RECORD_KEY) == F.col(EXISTING_RK)) & (F.col(PARTITION_PATH) == F.col(EXISTING_PP))
            return keyed.join(existing, cond, "left").drop(EXISTING_RK, EXISTING_PP)
        return self.relocate(keyed.join(existing, F.col(RECORD_KEY) == F.col(EXISTING_RK), "left").drop(EXISTING_RK))

    def relocate(self, joined: DataFrame) -> DataFrame:
        """Global indexes: incoming rows with the stored partition and file group of their key;
        a record found in another partition moves there (a delete in the old partition and an
        insert in the new one) or, when the index's update.partition.path option is false, is
        updated where it is."""
        moved = F.col(EXISTING_PP).isNotNull() & (F.col(EXISTING_PP) != F.col(PARTITION_PATH))
        moves = {"GLOBAL_BLOOM": C.BLOOM_UPDATE_PARTITION_PATH, "RECORD_INDEX": C.RECORD_INDEX_UPDATE_PARTITION_PATH}
        move = moves.get(self.cfg.get(C.INDEX_TYPE), C.SIMPLE_INDEX_UPDATE_PARTITION_PATH)
        if not self.cfg.get(move):
            return joined.withColumn(PARTITION_PATH, F.when(moved, F.col(EXISTING_PP)).otherwise(
                F.col(PARTITION_PATH))).drop(EXISTING_PP)
        # one pass, no union (which would compute the rows once per branch): a moved row becomes
        # two, the delete in its old partition (0) and the insert in its new one (1)
        variant = "_pyhudi_variant"
        out = joined.withColumn(variant, F.explode(F.when(moved, F.array(F.lit(0), F.lit(1))).otherwise(
            F.array(F.lit(2)))))
        is_old, is_new = F.col(variant) == 0, F.col(variant) == 1
        out = out.withColumn(PARTITION_PATH, F.when(is_old, F.col(EXISTING_PP)).otherwise(F.col(PARTITION_PATH)))
        out = out.withColumn(IS_DELETE, is_old | F.col(IS_DELETE))
        out = out.withColumn(FILE_ID, F.when(is_new, F.lit(None).cast("string")).otherwise(F.col(FILE_ID)))
        return out.drop(EXISTING_PP, variant)

    def small_files(self, view: FileSystemView, partitions: Iterable[str],
                    pending: dict[tuple[str, str], str]) -> dict[str, list[SmallFile]]:
        """Hudi's small-file candidates of ``partitions``, in the order they take inserts."""
        limit = self.cfg.get(C.PARQUET_SMALL_FILE_LIMIT)
        wanted = set(partitions)
        small: dict[str, list[SmallFile]] = {}
        if limit <= 0 or not self.table.timeline.completed_writes():
            return small
        clustered = clustering_file_groups(self.table.timeline)  # being rewritten: no inserts
        for s in view.latest_slices():
            b = s.base_file
            if b is None or b.size >= limit or b.partition_path not in wanted or (b.partition_path, b.file_id) \
                    in clustered:
                continue
            if self.is_mor and (s.log_files or (b.partition_path, b.file_id) in pending):
                continue  # merge-on-read: only file groups without log files take inserts
            small.setdefault(b.partition_path, []).append(
                SmallFile(b.partition_path, b.file_id, b.path, b.instant_time, b.size))
        if self.is_mor:
            cap = self.cfg.get(C.MERGE_SMALL_FILE_GROUP_CANDIDATES_LIMIT)
            small = {p: sorted(files, key=lambda f: f.size)[:cap] for p, files in small.items()}
        return small

    def record_size(self) -> tuple[int, bool]:
        """Hudi's record-size estimate, and whether a commit measured it: bytes per record of the
        newest commit that wrote enough bytes to tell, else ``hoodie.copyonwrite.record.size.estimate``."""
        cfg = self.cfg
        threshold = cfg.get(C.RECORD_SIZE_ESTIMATION_THRESHOLD) * cfg.get(C.PARQUET_SMALL_FILE_LIMIT)
        commits = []
        # newest first, stopping at the first big one; delta commits count by their base files only
        # (log blocks are uncompressed Avro: their bytes per record say nothing of parquet's)
        for inst in reversed(self.table.timeline.completed([COMMIT, DELTA_COMMIT])):
            try:
                meta = self.table.timeline.commit_metadata(inst)
            except HudiInstantNotFoundError:  # archived meanwhile by another writer, and all before it
                break
            stats = [st for st in meta.write_stats() if not st.is_log]
            commits.append((sum(st.totalWriteBytes for st in stats), sum(st.numWrites for st in stats)))
            if commits[-1][0] > threshold:
                break
        measured = average_record_size(commits, threshold_bytes=threshold)
        avg = measured if measured is not None else cfg.get(C.COPY_ON_WRITE_RECORD_SIZE_ESTIMATE)
        self.phases["avg_record_size"] = avg
        return avg, measured is not None

    def plan(self, profile: dict[str, PartitionProfile]) -> Any:
        cfg = self.cfg
        view = self.table.file_system_view(partitions=sorted(profile))
        bases = view.latest_base_files()
        latest = {(b.partition_path, b.file_id): (b.path, b.instant_time) for b in bases}
        pending = pending_file_groups(self.table.timeline) if self.is_mor else {}
        small = self.small_files(view, [p for p, prof in profile.items() if prof.inserts > 0], pending)
        plan = assign_buckets(profile, latest, small, avg_record_size=self.record_size()[0],
                              max_file_size=cfg.get(C.PARQUET_MAX_FILE_SIZE),
                              auto_split=cfg.get(C.INSERT_AUTO_SPLIT), split_size=cfg.get(C.INSERT_SPLIT_SIZE))
        if not self.is_mor:
            return plan
        rewrite = {(f.partition_path, f.file_id) for files in small.values() for f in files}
        return to_append_buckets(plan, log_targets(view, pending), rewrite)

    def assign(self, tagged: DataFrame, plan: Any) -> DataFrame:
        """Bucket of every record as a Spark expression, then one Spark partition per bucket."""
        if plan.update_bucket:
            update_bucket = by_partition_and(plan.update_bucket, F.col(FILE_ID))
        else:
            update_bucket = F.lit(None).cast("int")
        if plan.insert_weights:
            entries = []
            for p, (total, weights) in plan.insert_weights.items():
                arr = F.array(*[F.struct(F.lit(float(w)).alias("w"), F.lit(b).alias("b")) for w, b in weights])
                entries += [F.lit(p), F.struct(F.lit(total).cast("long").alias("total"), arr.alias("buckets"))]
            info = F.element_at(F.create_map(*entries), F.col(PARTITION_PATH))
            total = info["total"]
            r = F.pmod(F.xxhash64(F.col(RECORD_KEY)), total) / total
            chosen = F.element_at(F.filter(info["buckets"], lambda x: x["w"] > r), 1)["b"]
            insert_bucket = F.coalesce(chosen, F.element_at(info["buckets"], 1)["b"])
        else:
            insert_bucket = F.lit(None).cast("int")
        bucket = F.when(F.col(FILE_ID).isNotNull(), update_bucket).otherwise(insert_bucket)
        return route(tagged, bucket, len(plan.buckets))

    # -- BUCKET index ----------------------------------------------------------------------------
    def bucket_write(self, data: DataFrame, operation: str, ctx: WriteContext, *, fresh: bool = False) -> list[dict]:
        """BUCKET index: a record's file group follows from hashing its key; no lookup, no sizing.

        Each (partition, bucket) with incoming records is one write bucket: a merge of the bucket's
        file group when the partition has one, else a new file group named after the bucket.
        Duplicates of a key share a bucket, so the handles combine them. ``fresh`` (a replace
        write) ignores the existing file groups: every bucket gets a new one.
        """
        started = time.monotonic()
        if self.combines(operation):
            ctx = dataclasses.replace(ctx, combine_in_handles=True)
        keyed = self.prepare(data, operation, combine_in_spark=False)
        keyed = self._persist(with_hash_bucket(keyed, self.cfg, self.spec))
        counts = keyed.groupBy(PARTITION_PATH, HASH_BUCKET).agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.col(IS_DELETE).cast("long")).alias("deletes")).collect()
        started = self._phase("profile", started)
        partitions = sorted({r[PARTITION_PATH] for r in counts})
        self.touched_partitions = tuple(partitions)
        view = self.table.file_system_view(partitions=partitions)
        bases = [] if fresh else view.latest_base_files()
        file_ids: dict[str, list[str]] = {p: [] for p in partitions}
        for b in bases:
            file_ids[b.partition_path].append(b.file_id)
        groups = {p: bucket_file_groups(ids, p) for p, ids in file_ids.items()}
        self.index_stats = IndexStats("BUCKET", partitions=len(partitions), files_in_partitions=len(bases))
        plan, profile, by_hash = plan_bucket_index(
            [HashBucketCount(r[PARTITION_PATH], r[HASH_BUCKET], r["n"], r["deletes"]) for r in counts],
            {(b.partition_path, b.file_id): (b.path, b.instant_time) for b in bases}, groups,
            bucket_file_id_prefix)
        if self.is_mor and not fresh:
            plan = to_append_buckets(plan, log_targets(view, pending_file_groups(self.table.timeline)), set())
        self._inflight(profile, operation, REPLACE_COMMIT if fresh else self.write_action)
        if not plan.buckets:
            return []
        started = self._phase("plan", started)
        bucket = by_partition_and(by_hash, F.col(HASH_BUCKET).cast("string"))
        return self._write_planned(route(keyed.where(bucket.isNotNull()), bucket, len(plan.buckets)),
                                   ctx, plan, started)

    def _write_planned(self, routed: DataFrame, ctx: WriteContext, plan: BucketPlan, started: float) -> list[dict]:
        """Run the write handles over rows routed one write bucket per Spark partition."""
        buckets = {b.bucket_id: b for b in plan.buckets}
        stats = map_in_arrow(routed, lambda it: write_buckets(it, ctx, buckets), STATS_DDL).collect()
        self.phases["buckets"] = len(plan.buckets)
        self._phase("write", started)
        return [r.asDict() for r in stats]


def coalesced(data: DataFrame, parallelism: int) -> DataFrame:
    """``data`` read by fewer tasks when it is made from local data in many small partitions.

    ``spark.createDataFrame(pandas_df)`` gives one partition per 10,000 rows, and every Spark job
    over it then pays for scheduling dozens of tiny tasks: a pass over a 32-partition daily batch
    took 0.5 s on two cores, against 0.17 s in two tasks. Such partitions hold their rows in the
    task itself, so at most :data:`MERGED_PARTITIONS` are merged into one task, and at least
    :data:`TASKS_PER_CORE` tasks per core remain. Coalescing is narrow (no shuffle). Other inputs
    (files, whose splits Spark sizes itself, or anything with a shuffle) are left as they are.
    """
    leaves = data._jdf.queryExecution().analyzed().collectLeaves()
    partitions = 0
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getSimpleName() != "LogicalRDD":
            return data
        partitions += leaf.rdd().getNumPartitions()
    target = max(TASKS_PER_CORE * parallelism, -(-partitions // MERGED_PARTITIONS))
    return data.coalesce(target) if partitions > target else data


def bulk_insert_task(plan: BulkInsertPlan) -> Column:
    """The task of each record of a bulk insert: its table partition's, or with several slots the
    task of its slot (a key range under GLOBAL_SORT, a key hash otherwise)."""
    if not plan.multi_slot:
        return by_partition({p: t for (p, _), t in plan.task_of.items()})
    if plan.bounds:
        literal = F.create_map(*[x for p, b in plan.bounds.items()
                                 for x in (F.lit(p), F.array(*[F.lit(v) for v in b]))])
        bounds = F.element_at(literal, F.col(PARTITION_PATH))
        slot = F.when(bounds.isNull(), F.lit(0)).otherwise(
            F.size(F.filter(bounds, lambda b: b <= F.col(RECORD_KEY))))
    else:
        slot = F.coalesce(F.pmod(F.xxhash64(F.col(RECORD_KEY)), by_partition(plan.multi_slot)), F.lit(0))
    return by_partition_and(dict(plan.task_of), slot.cast("string"))


def by_partition(mapping: dict[str, int]) -> Column:
    """The value ``mapping`` gives each row's partition path, as a map-literal lookup."""
    literal = F.create_map(*[x for p, v in mapping.items() for x in (F.lit(p), F.lit(v))])
    return F.element_at(literal, F.col(PARTITION_PATH))


def by_partition_and(mapping: dict[tuple[str, Any], int], second: Column) -> Column:
    """The value ``mapping`` gives (partition path, ``second``) of each row, as a map-literal lookup."""
    sep = "\u0000"
    literal = F.create_map(*[x for (p, k), b in mapping.items() for x in (F.lit(f"{p}{sep}{k}"), F.lit(b))])
    return F.element_at(literal, F.concat(F.col(PARTITION_PATH), F.lit(sep), second))


def route(df: DataFrame, bucket: Column, num_buckets: int) -> DataFrame:
    """Rows with their write bucket, one Spark partition per bucket (so no task writes two files)."""
    keys = F.array(*[F.lit(k) for k in shuffle_keys(num_buckets)])
    return (df.withColumn(BUCKET, bucket.cast("int"))
            .withColumn(SHUFFLE_KEY, F.element_at(keys, F.col(BUCKET) + 1))
            .repartition(num_buckets, SHUFFLE_KEY).drop(SHUFFLE_KEY))
