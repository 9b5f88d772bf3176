"""Index tagging: the stored location (partition, file group) of every incoming key.

A lookup by the configured index gives the stored keys the batch may match; :func:`tag` joins them
to the incoming rows, and under a global index :func:`relocate` moves or keeps records whose key
is stored in another partition.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.io.avro_schema import PARTITION_PATH, RECORD_KEY
from pyhudi.spark.index import EXISTING_PP, EXISTING_RK, Lookup, bloom_lookup, simple_lookup
from pyhudi.spark.state import WriteState
from pyhudi.write.columns import FILE_ID, IS_DELETE


def lookup(state: WriteState, spark: SparkSession, keyed: DataFrame, partitions: list[str] | None) -> Lookup:
    """The stored records the incoming keys may match, by the configured index."""
    index_type = state.cfg.get(C.INDEX_TYPE)
    if index_type == "RECORD_INDEX":  # without a usable record index (tagged_write warned)
        index_type = "GLOBAL_SIMPLE"
    if index_type in ("BLOOM", "GLOBAL_BLOOM"):
        found = bloom_lookup(spark, state.table, keyed, partitions, state.cfg, global_index=state.is_global,
                             spec=state.merge_spec())
        if found.check_output is not None:
            state.keep_cached(found.check_output)
        return found
    return simple_lookup(spark, state.table, partitions, index_type, spec=state.merge_spec())


def tag(state: WriteState, keyed: DataFrame, existing: DataFrame | None) -> DataFrame:
    """Join incoming keys with the stored ones: the file group of every update and delete."""
    if existing is None:
        return keyed.withColumn(FILE_ID, F.lit(None).cast("string"))
    if not state.is_global:
        cond = (F.col(RECORD_KEY) == F.col(EXISTING_RK)) & (F.col(PARTITION_PATH) == F.col(EXISTING_PP))
        return keyed.join(existing, cond, "left").drop(EXISTING_RK, EXISTING_PP)
    return relocate(state.cfg, keyed.join(existing, F.col(RECORD_KEY) == F.col(EXISTING_RK), "left")
                    .drop(EXISTING_RK))


def relocate(cfg: HudiConfig, joined: DataFrame) -> DataFrame:
    """Global indexes: incoming rows with the stored partition and file group of their key;
    a record found in another partition moves there (a delete in the old partition and an
    insert in the new one) or, when the index's update.partition.path option is false, is
    updated where it is."""
    moved = F.col(EXISTING_PP).isNotNull() & (F.col(EXISTING_PP) != F.col(PARTITION_PATH))
    moves = {"GLOBAL_BLOOM": C.BLOOM_UPDATE_PARTITION_PATH, "RECORD_INDEX": C.RECORD_INDEX_UPDATE_PARTITION_PATH}
    move = moves.get(cfg.get(C.INDEX_TYPE), C.SIMPLE_INDEX_UPDATE_PARTITION_PATH)
    if not cfg.get(move):
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
