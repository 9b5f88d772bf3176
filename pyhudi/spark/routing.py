"""Where rows go: the write bucket or task of every row, and one Spark partition per bucket.

The routing is all map-literal lookups and a hash repartition on keys chosen so that Spark's own
hash partitioning gives every bucket its own task (:func:`shuffle_keys`); :func:`coalesced` reads
the JVM plan to merge the many tiny partitions of a DataFrame made from local data.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyhudi.io.avro_schema import PARTITION_PATH, RECORD_KEY
from pyhudi.write.bulk_insert import BulkInsertPlan
from pyhudi.write.columns import BUCKET, SHUFFLE_KEY

#: Input tasks per core of the jobs that read an incoming DataFrame made from local data
TASKS_PER_CORE = 2
#: At most this many partitions of such a DataFrame are merged into one task: each carries its
#: rows inside the task, and a task of too many would be too large to ship
MERGED_PARTITIONS = 8


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


def spark_parallelism(data: DataFrame) -> int:
    """The session's default parallelism: the task count the sizing falls back on."""
    return int(data.sparkSession.sparkContext.defaultParallelism)


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
