"""Merged reads of merge-on-read file slices, distributed over executors.

Each Spark task receives a few file slices (frozen :class:`SliceToRead` plans) and merges each
one's base file with its log blocks using :mod:`pyhudi.read.merge` (pyarrow, vectorised). Slices
without log files never come here: Spark's native parquet reader serves them faster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyhudi.io.avro_schema import IS_DELETED_FIELD, PARTITION_PATH, RECORD_KEY
from pyhudi.io.base_file import align, read_base_file
from pyhudi.read.merge import (
    LOG_DELETE_ORDER,
    LOG_DELETED,
    LOG_RECORD,
    MergeSpec,
    SliceToRead,
    Visibility,
    log_state,
    read_slice,
    scan_logs,
)
from pyhudi.spark.worker import map_in_arrow
from pyhudi.storage import Storage


def spread(spark: SparkSession, count: int) -> DataFrame:
    """``count`` row ids spread over enough partitions that every core gets slices."""
    parallelism = spark.sparkContext.defaultParallelism
    return spark.range(0, count, numPartitions=max(1, min(count, parallelism * 2)))


def _merge_slices(spark: SparkSession, base_uri: str, slices: list[SliceToRead], read_schema: pa.Schema,
                  spec: MergeSpec, visibility: Visibility, out: pa.Schema, out_ddl: T.StructType | str,
                  emit: Callable[[SliceToRead, pa.Table], pa.Table]) -> DataFrame:
    """Merge each slice in an executor (``read_schema`` columns) and return ``emit``'s rows of it."""
    schema_ipc = read_schema.serialize().to_pybytes()
    pieces = list(slices)

    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = Storage(base_uri)
        schema = pa.ipc.read_schema(pa.py_buffer(schema_ipc))
        for batch in batches:
            for i in batch.column(0).to_pylist():
                merged, _counts, _scan = read_slice(storage, pieces[i], schema, spec, visibility)
                if merged.num_rows:
                    yield from emit(pieces[i], merged).cast(out).to_batches()

    return map_in_arrow(spread(spark, len(pieces)), body, out_ddl)


def read_merged(spark: SparkSession, base_uri: str, slices: list[SliceToRead], file_schema: pa.Schema,
                out_schema: T.StructType, spec: MergeSpec, visibility: Visibility) -> DataFrame:
    """The merged records of ``slices`` as a DataFrame of ``out_schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(out_schema)
    return _merge_slices(spark, base_uri, slices, file_schema, spec, visibility, target, out_schema,
                         lambda _piece, merged: align(merged, target))


def merged_keys(spark: SparkSession, base_uri: str, slices: list[SliceToRead], key_schema: pa.Schema,
                spec: MergeSpec, visibility: Visibility, *, names: tuple[str, str, str]) -> DataFrame:
    """(record key, partition path, file id) of every record alive in ``slices`` after merging.

    Index lookups on merge-on-read tables use this for slices with log files: a key deleted by a
    log block is gone even though the base file still holds it. ``key_schema`` is
    :func:`pyhudi.spark.index.key_read_schema`.
    """
    key_col, part_col, fid_col = names
    out = pa.schema([(key_col, pa.string()), (part_col, pa.string()), (fid_col, pa.string())])

    def keys(piece: SliceToRead, merged: pa.Table) -> pa.Table:
        return pa.Table.from_arrays([merged.column(RECORD_KEY), merged.column(PARTITION_PATH),
                                     pa.array([piece.file_id] * merged.num_rows, pa.string())], schema=out)

    ddl = f"{key_col} string, {part_col} string, {fid_col} string"
    return _merge_slices(spark, base_uri, slices, key_schema, spec, visibility, out, ddl, keys)


#: The file id of each base-file row, taken from its file's name (``<file id>_<token>_<instant>``)
FILE_ID = "_pyhudi_file_id"
LOG_PREFIX = "_pyhudi_l_"  # the log side's record columns in the join
LOG_FILE_ID = "_pyhudi_log_file_id"
#: Log bytes (the slices' log files) up to which the log side of a merge is broadcast
BROADCAST_LOG_BYTES = 256 << 20


def with_file_id(df: DataFrame) -> DataFrame:
    """Base-file rows with the file id of the file each comes from (Spark's ``_metadata``)."""
    return df.withColumn(FILE_ID, F.substring_index(F.col("_metadata.file_name"), "_", 1))


def log_side_schema(target: pa.Schema, spec: MergeSpec) -> pa.Schema:
    """Columns of the log side: the record columns prefixed, the file id and :func:`log_state`'s flags."""
    order = spec.ordering_field if spec.ordering_field in target.names else None
    return pa.schema([pa.field(LOG_PREFIX + f.name, f.type) for f in target] + [
        pa.field(LOG_FILE_ID, pa.string()), pa.field(LOG_RECORD, pa.bool_()), pa.field(LOG_DELETED, pa.bool_()),
        pa.field(LOG_DELETE_ORDER, target.field(order).type if order else pa.string())])


def log_side_rows(state: pa.Table, file_id: str, target: pa.Schema, out: pa.Schema) -> pa.Table:
    """:func:`log_state` of one slice as log-side rows (``out`` is :func:`log_side_schema`)."""
    records = align(state, target)
    columns = list(records.columns) + [
        pa.repeat(pa.scalar(file_id, pa.string()), state.num_rows), state.column(LOG_RECORD),
        state.column(LOG_DELETED), state.column(LOG_DELETE_ORDER).cast(out.field(LOG_DELETE_ORDER).type)]
    return pa.Table.from_arrays(columns, schema=out)


def only_new_keys(state: pa.Table, stored_keys: pa.ChunkedArray | None) -> pa.Table:
    """The surviving log records of keys the slice's base file does not hold."""
    state = state.filter(state.column(LOG_RECORD))
    if stored_keys is None:
        return state
    return state.filter(pc.invert(pc.is_in(state.column(RECORD_KEY), value_set=stored_keys.combine_chunks())))


def _log_side(spark: SparkSession, base_uri: str, slices: list[SliceToRead], file_schema: pa.Schema,
              out_schema: T.StructType, spec: MergeSpec, visibility: Visibility, *, new_keys: bool) -> DataFrame:
    """Per slice, :func:`log_state` of its logs as log-side rows; with ``new_keys`` only the
    surviving records of keys the slice's base file does not hold (:func:`only_new_keys`)."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    target = to_arrow_schema(out_schema)
    out = log_side_schema(target, spec)
    schema_ipc = file_schema.serialize().to_pybytes()
    pieces = list(slices)

    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = Storage(base_uri)
        schema = pa.ipc.read_schema(pa.py_buffer(schema_ipc))
        for batch in batches:
            for i in batch.column(0).to_pylist():
                piece = pieces[i]
                state = log_state(scan_logs(storage, piece.log_files, schema, visibility), schema, spec)
                if new_keys:
                    stored = read_base_file(storage, piece.base_file, [RECORD_KEY]).column(RECORD_KEY) \
                        if piece.base_file else None
                    state = only_new_keys(state, stored)
                if state.num_rows:
                    yield from log_side_rows(state, piece.file_id, target, out).to_batches()

    return map_in_arrow(spread(spark, len(pieces)), body, from_arrow_schema(out))


def join_logs(base: DataFrame, logs: DataFrame, names: list[str], spec: MergeSpec, *,
              broadcast: bool = True) -> DataFrame:
    """Base rows (with :data:`FILE_ID`) merged with the log side: per row the base record, the log
    record, or nothing, by the rules of :func:`pyhudi.read.merge.merge_slice`."""
    order = spec.ordering_field if spec.ordering_field in names else None
    b = base.alias("b")
    right = F.broadcast(logs) if broadcast else logs
    joined = b.join(right, (F.col(f"b.`{RECORD_KEY}`") == F.col(f"`{LOG_PREFIX}{RECORD_KEY}`"))
                    & (F.col(f"b.`{FILE_ID}`") == F.col(LOG_FILE_ID)), "left")
    matched = F.col(LOG_RECORD).isNotNull()
    has_record = matched & F.col(LOG_RECORD)
    alive = ~matched | ~F.col(LOG_DELETED)  # a log delete removes the base record ...
    if order is not None:
        stored = F.col(f"b.`{order}`")
        alive = alive | F.coalesce(stored > F.col(LOG_DELETE_ORDER), F.lit(False))  # ... unless it is larger
    take_base = alive & ~has_record
    if order is not None and spec.keep_larger_ordering:
        logged = F.col(f"`{LOG_PREFIX}{order}`")
        take_base = alive & (~has_record | (stored.isNotNull() & (logged.isNull() | (stored > logged))))
    return joined.where(take_base | has_record).select(
        *[F.when(take_base, F.col(f"b.`{n}`")).otherwise(F.col(f"`{LOG_PREFIX}{n}`")).alias(n) for n in names])


def log_records(logs: DataFrame, names: list[str]) -> DataFrame:
    """The record columns of log-side rows, unprefixed."""
    return logs.select(*[F.col(f"`{LOG_PREFIX}{n}`").alias(n) for n in names])


def drop_soft_deleted(df: DataFrame) -> DataFrame:
    if IS_DELETED_FIELD not in df.columns:
        return df
    return df.where(~F.coalesce(F.col(f"`{IS_DELETED_FIELD}`").cast("boolean"), F.lit(False)))


def merge_with_logs(spark: SparkSession, base: DataFrame | None, base_uri: str, slices: list[SliceToRead],
                    file_schema: pa.Schema, out_schema: T.StructType, spec: MergeSpec, visibility: Visibility, *,
                    log_bytes: int) -> DataFrame:
    """The merged records of merge-on-read slices with log files, merged by Spark.

    ``base`` reads the slices' base files natively (with :func:`with_file_id`). Only the logs go
    through Python: each slice's :func:`log_state` (one row per key its blocks hold). Spark joins
    the base rows with it on record key and file id (the log side broadcast while the logs are
    small, :data:`BROADCAST_LOG_BYTES`) and picks, per row, the base record or the log record
    (:func:`join_logs`). Keys only the logs hold come from a second pass over the logs. Spark
    prunes the base files' columns and pushes filters into their scan as it does for
    copy-on-write files, which a merge of whole slices in Python cannot.
    """
    names = out_schema.fieldNames()
    parts = []
    if base is not None:
        logs = _log_side(spark, base_uri, slices, file_schema, out_schema, spec, visibility, new_keys=False)
        parts.append(join_logs(base, logs, names, spec, broadcast=log_bytes <= BROADCAST_LOG_BYTES))
    new = _log_side(spark, base_uri, slices, file_schema, out_schema, spec, visibility, new_keys=True)
    parts.append(log_records(new, names))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return drop_soft_deleted(out)
