"""Incoming rows made ready to write: record key, partition path, delete flag, ordering value, and
one record per key where the options ask duplicates to be combined."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.io.avro_schema import IS_DELETED_FIELD, PARTITION_PATH, RECORD_KEY
from pyhudi.spark.keygen import with_keys, with_required_ordering
from pyhudi.spark.routing import coalesced, spark_parallelism
from pyhudi.spark.state import WriteState
from pyhudi.write.columns import ARRIVAL, IS_DELETE


def combines(cfg: HudiConfig, operation: str) -> bool:
    """Whether incoming duplicates are combined (``hoodie.combine.before.*``)."""
    combine = {"upsert": C.COMBINE_BEFORE_UPSERT, "delete": C.COMBINE_BEFORE_DELETE}.get(
        operation, C.COMBINE_BEFORE_INSERT)
    return bool(cfg.get(combine) or (operation == "insert" and cfg.get(C.INSERT_DROP_DUPLICATES)))


def parallelism(cfg: HudiConfig, operation: str) -> int:
    """The shuffle parallelism the options give ``operation`` (0: let Spark choose)."""
    opt = {"upsert": C.UPSERT_PARALLELISM, "insert": C.INSERT_PARALLELISM,
           "bulk_insert": C.BULKINSERT_PARALLELISM, "delete": C.DELETE_PARALLELISM}[operation]
    return int(cfg.get(opt))


def prepare(state: WriteState, data: DataFrame, operation: str, *, combine_in_spark: bool = True) -> DataFrame:
    """Incoming rows with record key, partition path and delete flag; de-duplicated in Spark
    unless ``combine_in_spark`` is false (the write handles then combine per bucket).

    The input is read by fewer, larger tasks when it is an in-memory RDD of many small
    partitions (see :func:`pyhudi.spark.routing.coalesced`).
    """
    data = coalesced(data, spark_parallelism(data))
    keyed = with_keys(data, state.spec, key_col=RECORD_KEY, partition_col=PARTITION_PATH, instant=state.instant)
    if operation == "delete":
        flag: Column = F.lit(True)
    elif state.is_deleted_column:
        flag = F.coalesce(F.col(IS_DELETED_FIELD).cast("boolean"), F.lit(False))
    else:
        flag = F.lit(False)
    if operation != "delete" and IS_DELETE in keyed.columns:  # rows a statement of pyhudi.spark.dml deletes
        flag = flag | F.coalesce(F.col(IS_DELETE).cast("boolean"), F.lit(False))
    keyed = keyed.withColumn(IS_DELETE, flag)
    ordering_field = state.ordering_field
    if ordering_field and ordering_field in keyed.columns:
        if operation == "delete":  # Hudi's delete removes the key whatever its stored ordering value
            keyed = keyed.withColumn(ordering_field, F.lit(None).cast(keyed.schema[ordering_field].dataType))
        else:
            keyed = with_required_ordering(keyed, ordering_field)
    if combine_in_spark and combines(state.cfg, operation):
        keyed = deduplicate(state, keyed, operation)
    return keyed


def deduplicate(state: WriteState, keyed: DataFrame, operation: str) -> DataFrame:
    """Keep one record per key: the one with the largest ordering value, the later arrival
    among equal ones (Hudi's preCombine); a null ordering value (deletes may have one) loses."""
    keys = [RECORD_KEY] if state.is_global else [RECORD_KEY, PARTITION_PATH]
    cols = keyed.columns
    keyed = keyed.withColumn(ARRIVAL, F.monotonically_increasing_id())  # input order, before any shuffle
    n = parallelism(state.cfg, operation)
    if n > 0:
        keyed = keyed.repartition(n, *keys)
    rank = F.col(ARRIVAL)
    if state.ordering_field in cols:
        ordering = F.col(f"`{state.ordering_field}`")
        rank = F.struct(ordering.isNotNull(), ordering, rank)  # never null, so max_by keeps a row
    best = F.max_by(F.struct(*[F.col(f"`{c}`") for c in cols]), rank)
    return keyed.groupBy(*keys).agg(best.alias("_pyhudi_row")).select("_pyhudi_row.*")
