"""Incoming rows made ready to write: record key, partition path, delete flag, ordering value, and
one record per key where the options ask duplicates to be combined."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any
from weakref import WeakKeyDictionary

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config.table import (
    AWS_DMS_PAYLOAD,
    MYSQL_DEBEZIUM_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    POSTGRES_DEBEZIUM_PAYLOAD,
)
from pyhudi.io.avro_schema import IS_DELETED_FIELD, PARTITION_PATH, RECORD_KEY
from pyhudi.keygen.spec import KeyGenSpec
from pyhudi.read.payloads import DEBEZIUM_OP_FIELD, DMS_OP_FIELD, MergeSpec, precombine
from pyhudi.spark.jvm import column_seqs, with_columns
from pyhudi.spark.keygen import key_columns, required_ordering, session_zone, with_stored_keys
from pyhudi.spark.routing import coalesced, spark_parallelism
from pyhudi.spark.state import WriteState
from pyhudi.spark.worker import map_in_arrow
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
    """Incoming rows with record key, partition path and delete flag (:func:`prepared`);
    de-duplicated in Spark unless ``combine_in_spark`` is false (the write handles then combine
    per bucket).

    The input is read by fewer, larger tasks when it is an in-memory RDD of many small
    partitions (see :func:`pyhudi.spark.routing.coalesced`).
    """
    data = coalesced(data, spark_parallelism(data))
    keyed = prepared(data, state.spec, merge_spec=state.merge_spec(), ordering_field=state.ordering_field,
                     operation=operation, instant=state.instant)
    if combine_in_spark and combines(state.cfg, operation):
        keyed = deduplicate(state, keyed, operation)
    return keyed


def prepared(data: DataFrame, spec: KeyGenSpec, *, merge_spec: MergeSpec, ordering_field: str | None,
             operation: str, instant: str | None) -> DataFrame:
    """``data`` with record key, partition path and delete flag, its ordering value required, in one
    projection (each projection Spark analyzes costs 10-20 ms of a small commit).

    ``instant`` is the write's instant, which only generated keys carry: a batch keyed by its
    fields can be prepared before the instant exists (:func:`pyhudi.spark.small_write.collect_prepared`).
    """
    if RECORD_KEY in data.columns:  # a prepped write (pyhudi.spark.writer keeps the meta columns only then)
        data = with_stored_keys(data, spec, key_col=RECORD_KEY, partition_col=PARTITION_PATH, instant=instant)
        return data.withColumns(_added_columns(data, spec, merge_spec, ordering_field, operation, None))
    if instant is not None and spec.auto_keys:  # the keys carry this write's instant
        return data.withColumns(_added_columns(data, spec, merge_spec, ordering_field, operation, instant))
    built = _BUILT.setdefault(data.sparkSession, OrderedDict())
    shape = (data.schema.json(), session_zone(data), spec, merge_spec, ordering_field, operation)
    seqs = built.pop(shape, None)
    if seqs is None:
        seqs = column_seqs(data, _added_columns(data, spec, merge_spec, ordering_field, operation, instant))
    built[shape] = seqs
    while len(built) > _BUILT_SHAPES:
        built.popitem(last=False)
    return with_columns(data, seqs)


#: per session, the columns :func:`prepared` added to inputs of a schema, session time zone, key
#: generator, merge and operation, as the JVM takes them (:func:`~pyhudi.spark.jvm.column_seqs`),
#: the most recently used last: building them is some 50 py4j calls of 0.3-0.8 ms (20-30 ms of a
#: 2,880-row commit), and a stream or a loop of small commits writes the same shape each time.
#: Spark columns are unresolved expressions, which any plan of the same columns can take; a
#: session no longer used takes its columns with it
_BUILT: WeakKeyDictionary[SparkSession, OrderedDict[tuple, tuple[Any, Any]]] = WeakKeyDictionary()
_BUILT_SHAPES = 16


def _added_columns(data: DataFrame, spec: KeyGenSpec, merge_spec: MergeSpec, ordering_field: str | None,
                   operation: str, instant: str | None) -> dict[str, Column]:
    """The columns :func:`prepared` adds to or replaces in ``data``."""
    columns: dict[str, Column] = {}
    if RECORD_KEY not in data.columns:
        columns = key_columns(data, spec, key_col=RECORD_KEY, partition_col=PARTITION_PATH, instant=instant)
    # rows a statement of pyhudi.spark.dml deletes: hard deletes, which carry no ordering value
    statement_delete = F.coalesce(F.col(IS_DELETE).cast("boolean"), F.lit(False)) \
        if operation != "delete" and IS_DELETE in data.columns else None
    if operation != "delete" and ordering_field and ordering_field in data.columns:
        columns[ordering_field] = required_ordering(ordering_field, unless=statement_delete)
    flag = F.lit(True) if operation == "delete" else payload_delete_flag(data.columns, merge_spec)
    if statement_delete is not None:
        flag = flag | statement_delete
    columns[IS_DELETE] = flag
    if operation == "delete":  # Hudi's delete (an empty payload) removes the key whatever its stored values
        for name in dict.fromkeys([ordering_field or "", *merge_spec.stored_order_fields()]):
            if name and name in data.columns:
                columns[name] = F.lit(None).cast(data.schema[name].dataType)
    return columns


def may_flag_deletes(columns: list[str], spec: MergeSpec, operation: str) -> bool:
    """Whether :func:`prepare` may flag some rows of an input with ``columns`` as deletes: a delete
    operation, a statement's delete column, or a column :func:`payload_delete_flag` reads."""
    return operation == "delete" or IS_DELETE in columns or bool(_payload_delete_columns(columns, spec))


def _payload_delete_columns(columns: list[str], spec: MergeSpec) -> list[str]:
    """The columns among ``columns`` that the payload's delete rule reads: the delete field of
    DefaultHoodieRecordPayload when one is set, else ``_hoodie_is_deleted`` and the payload's
    operation column (AWS DMS ``Op``, Debezium ``_change_operation_type``)."""
    if spec.delete_field:
        return [spec.delete_field] if spec.delete_field in columns else []
    op = DMS_OP_FIELD if spec.payload == AWS_DMS_PAYLOAD else \
        DEBEZIUM_OP_FIELD if spec.payload in (MYSQL_DEBEZIUM_PAYLOAD, POSTGRES_DEBEZIUM_PAYLOAD) else None
    return [c for c in (IS_DELETED_FIELD, op) if c and c in columns]


def payload_delete_flag(columns: list[str], spec: MergeSpec) -> Column:
    """Whether each incoming row is a delete by the payload's rule, as a Spark expression (the same
    rule as :func:`pyhudi.read.payloads.payload_deletes`): the delete field/marker of
    DefaultHoodieRecordPayload when set, else ``_hoodie_is_deleted``; AWS DMS ``Op = 'D'``,
    Debezium ``_change_operation_type = 'd'``. Such rows are written as deletes, as Hudi's
    ``HoodieAppendHandle`` does (a delete block in a log file; nothing in a new base file)."""
    flag: Column = F.lit(False)
    for name in _payload_delete_columns(columns, spec):
        if name == spec.delete_field:
            is_delete = F.col(f"`{name}`").cast("string") == F.lit(spec.delete_marker)
        elif name == IS_DELETED_FIELD:
            is_delete = F.col(IS_DELETED_FIELD).cast("boolean")
        else:  # the operation column: Debezium's 'd', DMS's 'D', either case
            letter = "d" if name == DEBEZIUM_OP_FIELD else "D"
            is_delete = F.lower(F.col(f"`{name}`").cast("string")) == F.lit(letter.lower())
        flag = flag | F.coalesce(is_delete, F.lit(False))
    return flag


def deduplicate(state: WriteState, keyed: DataFrame, operation: str) -> DataFrame:
    """Keep one record per key, folded by the payload's ``preCombine``
    (:func:`pyhudi.read.payloads.precombine`): the one with the largest ordering value, the later
    arrival among equal ones; a null ordering value (deletes may have one) loses. With
    PartialUpdateAvroPayload the versions' fields are merged, folded in arrival order."""
    keys = [RECORD_KEY] if state.is_global else [RECORD_KEY, PARTITION_PATH]
    cols = keyed.columns
    spec = state.merge_spec()
    keyed = keyed.withColumn(ARRIVAL, F.monotonically_increasing_id())  # input order, before any shuffle
    n = parallelism(state.cfg, operation)
    if spec.payload == PARTIAL_UPDATE_PAYLOAD:
        return _fold_partial_updates(keyed, keys, spec, cols, n)
    if n > 0:
        keyed = keyed.repartition(n, *keys)
    ranks: list[Column] = []
    for name in spec.ordering_in(cols):
        ordering = F.col(f"`{name}`")
        ranks += [ordering.isNotNull(), ordering]
    rank = F.struct(*ranks, F.col(ARRIVAL))  # never null, so max_by keeps a row
    best = F.max_by(F.struct(*[F.col(f"`{c}`") for c in cols]), rank)
    return keyed.groupBy(*keys).agg(best.alias("_pyhudi_row")).select("_pyhudi_row.*")


#: the record's identity while PartialUpdateAvroPayload versions are folded (key, or key and partition)
_GROUP = "_pyhudi_group"


def _fold_partial_updates(keyed: DataFrame, keys: list[str], spec: MergeSpec, cols: list[str], n: int) -> DataFrame:
    """PartialUpdateAvroPayload's ``preCombine`` folded in arrival order: a fold that no aggregate
    expresses (each step merges fields by which of two versions has the larger ordering value, so
    a field an early version filled in stays before a later, smaller one). The versions of each
    record meet in one task, sorted by record and arrival, and :func:`fold_sorted_runs` folds them
    there batch by batch, column-wise, as the write handles do: a task holds one Arrow batch
    (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows) and one folded row, never its whole
    Spark partition."""
    group = F.concat_ws("\u0000", *[F.col(k) for k in keys]) if len(keys) > 1 else F.col(keys[0])
    keyed = keyed.withColumn(_GROUP, group)
    spread = keyed.repartition(n, _GROUP) if n > 0 else keyed.repartition(_GROUP)
    ordered = spread.sortWithinPartitions(_GROUP, ARRIVAL)
    out_schema = ordered.schema

    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from fold_sorted_runs(batches, spec)

    return map_in_arrow(ordered, body, out_schema).select(*[F.col(f"`{c}`") for c in cols])


def fold_sorted_runs(batches: Iterable[pa.RecordBatch], spec: MergeSpec) -> Iterator[pa.RecordBatch]:
    """PartialUpdateAvroPayload versions folded per record (:data:`_GROUP`), from ``batches``
    sorted by record and then arrival (:data:`ARRIVAL`), one batch at a time.

    The fold is a left fold whose state is the merged record itself
    (``PartialUpdateAvroPayload.preCombine``: each version merges into what the earlier ones gave),
    so the record still open at a batch's end is carried to the next batch as its one folded row
    (it keeps the arrival of its latest version, so it still sorts first). A record is finished --
    its delete flag recomputed from the merged ``_hoodie_is_deleted`` by
    :func:`pyhudi.read.payloads.precombine` -- once a later record starts."""
    carry: pa.Table | None = None
    for batch in batches:
        if not batch.num_rows:
            continue
        table = pa.Table.from_batches([batch])
        if carry is not None:
            table = pa.concat_tables([carry, table])
        folded = precombine(table, spec, rank=table.column(ARRIVAL).to_numpy(), key=_GROUP)
        last = batch.column(_GROUP)[batch.num_rows - 1]
        is_open = pc.equal(folded.column(_GROUP), last)
        carry = folded.filter(is_open)
        done = folded.filter(pc.invert(is_open))
        if done.num_rows:
            yield from _finish(done, spec).to_batches()
    if carry is not None:
        yield from _finish(carry, spec).to_batches()


def _finish(folded: pa.Table, spec: MergeSpec) -> pa.Table:
    """Folded records (one row each) with their delete flag as :func:`precombine` sets it."""
    return precombine(folded, spec, rank=folded.column(ARRIVAL).to_numpy(), delete_flag=IS_DELETE, key=_GROUP)
