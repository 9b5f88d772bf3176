"""CDC queries on Spark: ``hoodie.datasource.query.incremental.format=cdc``.

The driver plans the query from the timeline and the commit metadata
(:func:`pyhudi.table.cdc.plan_cdc`: one frozen :class:`~pyhudi.read.cdc.CDCSplit` per instant and
file group); executors turn each split into change rows (:func:`pyhudi.read.cdc.split_changes`)
through ``mapInArrow``. No row passes through the driver. The result has Hudi's columns
(``CDCRelation.FULL_CDC_SPARK_SCHEMA``): ``op``, ``ts_ms``, ``before``, ``after``, all strings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiConfigError
from pyhudi.read.cdc import CDC_DDL, CDCSplit, split_changes
from pyhudi.spark.storage_conf import table_storage
from pyhudi.spark.worker import per_item
from pyhudi.storage import Storage
from pyhudi.table.cdc import CDCPlan, plan_cdc
from pyhudi.table.table import HudiTable


def is_cdc_query(cfg: HudiConfig) -> bool:
    """Whether the options ask for a CDC query (an incremental query in the cdc format)."""
    return C.query_type(cfg) == "incremental" and cfg.get(C.INCREMENTAL_FORMAT) == "cdc"


def has_cdc_schema(cfg: HudiConfig) -> bool:
    """Whether a read through Spark's data source returns CDC columns: a CDC query, or a stream in the
    cdc format (Hudi's ``HoodieStreamSource.isCDCQuery`` asks for the format only; one schema serves
    a source's batch and stream reads, so a batch read in the cdc format must say incremental)."""
    return cfg.get(C.INCREMENTAL_FORMAT) == "cdc" and (not cfg.is_set(C.QUERY_TYPE) or is_cdc_query(cfg))


def plan_of(table: HudiTable, cfg: HudiConfig) -> CDCPlan:
    """The CDC plan of a read's options (begin exclusive, end inclusive, the timeline-holes policy)."""
    return plan_cdc(table, cfg.get(C.BEGIN_INSTANT), cfg.get(C.END_INSTANT), holes=cfg.get(C.TIMELINE_HOLES_POLICY))


def cdc_frame(spark: SparkSession, table: HudiTable, plan: CDCPlan) -> DataFrame:
    """The change rows of ``plan``, each split read in an executor."""
    if not plan.splits:
        return spark.createDataFrame([], CDC_DDL)
    context = plan.context

    def work(storage: Storage, split: CDCSplit, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        yield from split_changes(storage, split, context, schema=schema).to_batches()

    return per_item(spark, table.storage, list(plan.splits), context.schema, work, CDC_DDL)


def read_cdc(spark: SparkSession, path: str, options: Mapping[str, Any] | None = None, *,
             filters: Column | str | None = None) -> DataFrame:
    """``pyhudi.read`` of a CDC query: Hudi's columns op, ts_ms, before, after (``filters`` applied to them)."""
    cfg = HudiConfig.of(options)
    table = HudiTable(table_storage(spark, path, options))
    df = cdc_frame(spark, table, plan_of(table, cfg))
    return df.where(filters) if filters is not None else df


# -- Spark's Python data source (spark.read.format("hudi"), readStream) -----------------------------
def source_splits(storage: Storage, options: Mapping[str, Any]) -> list[tuple[Storage, CDCSplit, Any]]:
    """The partitions of a CDC read by Spark's Python data source: (storage, split, context) each,
    planned on the driver; :func:`read_source_split` reads one in a task."""
    cfg = HudiConfig.of(dict(options))
    if not is_cdc_query(cfg):
        raise HudiConfigError(f"{C.INCREMENTAL_FORMAT.key}=cdc reads changes in an incremental query: set "
                              f"{C.QUERY_TYPE.key}=incremental and {C.BEGIN_INSTANT.key}")
    plan = plan_of(HudiTable(storage), cfg)
    return [(storage, split, plan.context) for split in plan.splits]


def read_source_split(value: tuple[Storage, CDCSplit, Any]) -> Iterator[pa.RecordBatch]:
    storage, split, context = value
    yield from split_changes(storage, split, context).to_batches()
