"""Base files as a DataFrame: Spark's parquet reader where Spark opens the store, pyarrow in
executors where it cannot.

Every place of pyhudi that reads base files on Spark (snapshot, time-travel and incremental reads,
the base side of merge-on-read merges, SIMPLE index lookups, clusterings ordered by Spark) goes
through :func:`base_files_frame`, and every place that asks Spark how a file's columns read
through :func:`stored_spark_schema`, so the choice is made in one place, once per session and
scheme (:func:`pyhudi.spark.storage_conf.spark_can_open`):

* Spark opens the scheme (local paths, ``hdfs://``, ``s3a://`` with ``hadoop-aws``): Spark's
  native parquet reader reads the files, with column pruning and filters pushed into the scan;
* it does not (``s3a://`` without ``hadoop-aws``, Spark Connect): each executor task reads its
  files with pyarrow (only the columns asked for, with few requests: :mod:`pyhudi.spark.arrow_files`)
  and hands Spark Arrow batches of exactly the Spark types the native reader
  gives, each file reconciled to the table schema by name (:func:`pyhudi.io.reconcile.reconcile`:
  columns a file lacks are null, older types widened), as the native path does by groups
  (:mod:`pyhudi.spark.evolution`). Spark cannot push filters or prune columns into a Python
  source; file-level pruning (partitions, column statistics) happens before either path.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type

from pyhudi.errors import HudiSchemaError
from pyhudi.io.reconcile import promotion_problem
from pyhudi.read.skipping import footers
from pyhudi.spark import evolution
from pyhudi.spark.arrow_files import int96_columns, read_as
from pyhudi.spark.compat import arrow_schema
from pyhudi.spark.jvm import string_seq
from pyhudi.spark.merged import BASE_ROW, BASE_SIZE, FILE_ID, base_columns, with_file_id
from pyhudi.spark.storage_conf import spark_can_open
from pyhudi.spark.worker import per_item
from pyhudi.storage import Storage
from pyhudi.table.fs_view import BaseFile
from pyhudi.table.table import HudiTable


def base_files_frame(spark: SparkSession, table: HudiTable, files: Sequence[BaseFile], schema: T.StructType, *,
                     as_of: str | None = None, file_ids: bool = False, names: bool = False,
                     evolved: bool = True) -> DataFrame:
    """The rows of base files ``files`` as ``schema`` (a subset of the table schema as of
    ``as_of``, default the latest, as Spark's parquet reader types it).

    ``file_ids`` adds each row's file size and position in its file, and with ``names`` its file
    name (:func:`pyhudi.spark.merged.with_file_id`). ``evolved=False`` says every file stores
    ``schema``'s columns with its types (the meta columns an index lookup reads), so the native
    path reads them all at once without asking the commits which schema each file was written with.
    """
    if not files:
        extra = [T.StructField(c, T.StringType() if c == FILE_ID else T.LongType(), False)
                 for c in (base_columns(names=names) if file_ids else ())]
        return spark.createDataFrame([], T.StructType([*schema.fields, *extra]))
    if not spark_can_open(spark, table.storage):
        return arrow_files_frame(spark, table.storage, files, schema, file_ids=file_ids, names=names)
    if not evolved:
        df = parquet_files(spark, schema, [table.storage.uri(b.path) for b in files])
        return with_file_id(df, names=names) if file_ids else df
    return _native_frame(spark, table, files, schema, as_of=as_of, file_ids=file_ids, names=names)


def _native_frame(spark: SparkSession, table: HudiTable, bases: Sequence[BaseFile], schema: T.StructType, *,
                  as_of: str | None, file_ids: bool, names: bool) -> DataFrame:
    """Spark's parquet reader over ``bases``, grouped by the schema their commit recorded. Those of
    the table schema's commit are read with ``schema`` directly; for each other group one footer
    tells the stored schema, the group is read with the table schema's shape and its stored types,
    and cast by name (:mod:`pyhudi.spark.evolution`): added fields read as null, widened types are
    promoted, struct fields match by name whatever their order."""
    def read(read_schema: T.StructType, uris: list[str]) -> DataFrame:
        df = parquet_files(spark, read_schema, uris)
        return with_file_id(df, names=names) if file_ids else df

    target_avro, arrow_target = table.schemas(as_of=as_of)
    schema_of: dict[str, str] = {}
    groups: dict[str, list[BaseFile]] = {}
    unknown: dict[str, str] = {}  # instant -> one of its files, where the commit was archived
    for b in bases:
        if b.instant_time not in schema_of and b.instant_time not in unknown:
            recorded = _commit_schema(table, b.instant_time)
            if recorded is not None:
                schema_of[b.instant_time] = recorded
            else:
                unknown[b.instant_time] = b.path
    if unknown:  # an archived commit's schema is unknown here: its files' footers tell, read at once
        read_footers = footers(table.storage, list(unknown.values()))
        for instant, rel in unknown.items():
            schema_of[instant] = "footer " + str(read_footers[rel].schema.to_arrow_schema().remove_metadata())
    for b in bases:
        groups.setdefault(schema_of[b.instant_time], []).append(b)
    same: list[str] = []
    parts = []
    for key, files in groups.items():
        uris = [table.storage.uri(b.path) for b in files]
        if key == target_avro or arrow_target is None:
            same.extend(uris)
            continue
        stored = _stored_schema(spark, table, files[0].path, arrow_target)
        wanted = evolution.read_schema(schema, stored)
        if wanted == schema:
            same.extend(uris)
            continue
        df = evolution.conform(read(wanted, uris), schema, keep=base_columns(names=names) if file_ids else ())
        parts.append(df)
    if same:
        parts.insert(0, read(schema, same))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def _commit_schema(table: HudiTable, instant_time: str | None) -> str | None:
    writes = table.timeline.completed_writes()
    chosen = [i for i in writes if instant_time is None or i.timestamp == instant_time]
    if not chosen:
        return None
    return table.timeline.commit_metadata(chosen[-1]).schema


def _stored_schema(spark: SparkSession, table: HudiTable, rel_path: str, target: pa.Schema) -> T.StructType:
    """The Spark schema a base file is stored with, after checking in Arrow terms that each of its
    columns widens to the table schema ``target`` (:class:`HudiSchemaError` otherwise)."""
    arrow = footers(table.storage, [rel_path])[rel_path].schema.to_arrow_schema()
    for field in target:
        i = arrow.get_field_index(field.name)
        if i >= 0 and (problem := promotion_problem(arrow.field(i).type, field.type, path=f"column {field.name}")):
            raise HudiSchemaError(f"base file {rel_path}: {problem}; the table cannot be read as its schema says")
    converted = spark_type(pa.struct(list(arrow)))
    if isinstance(converted, T.StructType):
        return converted
    return stored_spark_schema(spark, table.storage, rel_path)


_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


def parquet_files(spark: SparkSession, schema: T.StructType, uris: list[str]) -> DataFrame:
    """Spark's native parquet reader over exactly these files.

    Two costs of ``spark.read.parquet(*uris)`` grow with the number of files and are avoided here:
    py4j sends a Python list to the JVM one element per round trip (here the paths travel as one
    string), and above 32 paths Spark lists them with a Spark job (1.5 s for 300 files on two
    cores), although every path is a file pyhudi already listed: the listing runs on the driver.
    """
    paths = string_seq(spark, uris)
    if paths is None:
        return spark.read.schema(schema).parquet(*uris)
    conf = spark.conf
    before = conf.get(_LISTING_THRESHOLD, None)
    conf.set(_LISTING_THRESHOLD, str(max(32, len(uris) + 1)))
    try:
        jdf = spark.read.schema(schema)._jreader.parquet(paths)
    finally:
        if before is None:
            conf.unset(_LISTING_THRESHOLD)
        else:
            conf.set(_LISTING_THRESHOLD, before)
    return DataFrame(jdf, spark)


def arrow_files_frame(spark: SparkSession, storage: Storage, files: Sequence[BaseFile], schema: T.StructType, *,
                      file_ids: bool = False, names: bool = False) -> DataFrame:
    """``files`` read by pyarrow in executors as ``schema`` (see the module docstring), one file
    per work item; ``file_ids`` and ``names`` as for :func:`base_files_frame`."""
    out = T.StructType(list(schema.fields))
    if file_ids:
        out = out.add(BASE_SIZE, T.LongType(), False).add(BASE_ROW, T.LongType(), False)
        if names:
            out = out.add(FILE_ID, T.StringType(), False)
    items = [(b.path, b.name, b.size) for b in files]

    def work(storage: Storage, item: tuple[str, str, int], target: pa.Schema) -> Iterator[pa.RecordBatch]:
        rel, name, size = item
        for rows, first in read_as(storage, rel, target, size=size):
            if file_ids:
                n = rows.num_rows
                rows = rows.append_column(BASE_SIZE, pa.repeat(pa.scalar(size, pa.int64()), n))
                rows = rows.append_column(BASE_ROW, pa.array(np.arange(first, first + n, dtype=np.int64)))
                if names:
                    rows = rows.append_column(FILE_ID, pa.repeat(pa.scalar(name, pa.string()), n))
            yield from rows.to_batches()

    return per_item(spark, storage, items, arrow_schema(schema), work, out)


def stored_spark_schema(spark: SparkSession, storage: Storage, rel_path: str) -> T.StructType:
    """The schema Spark's parquet reader gives a base file: asked of Spark where it opens the
    store, else derived from the file's footer by Spark's rules (:func:`footer_spark_type`)."""
    if spark_can_open(spark, storage):
        return spark.read.parquet(storage.uri(rel_path)).schema
    metadata = footers(storage, [rel_path])[rel_path]
    arrow = metadata.schema.to_arrow_schema()
    int96 = int96_columns(metadata)
    return T.StructType([
        T.StructField(f.name, T.TimestampType() if f.name in int96 else footer_spark_type(f.type), True)
        for f in arrow])


def footer_spark_type(t: pa.DataType) -> T.DataType:
    """The Spark type the parquet reader gives a column pyarrow reads as ``t`` (every field
    nullable): :func:`spark_type`, timestamps as instants where the file says they are adjusted to
    UTC (``TimestampType``) and local otherwise (``TimestampNTZType``), unsigned integers widened
    as Spark widens them."""
    simple = spark_type(t)
    if simple is not None:
        return simple
    unsigned = {8: T.ShortType(), 16: T.IntegerType(), 32: T.LongType(), 64: T.DecimalType(20, 0)}
    if pa.types.is_unsigned_integer(t):
        return unsigned[t.bit_width]
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, footer_spark_type(f.type), True) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(footer_spark_type(t.value_type), True)
    if pa.types.is_map(t):
        return T.MapType(footer_spark_type(t.key_type), footer_spark_type(t.item_type), True)
    return from_arrow_type(t)


_SIMPLE_TYPES: list[tuple[Any, T.DataType]] = [
    (pa.types.is_boolean, T.BooleanType()), (pa.types.is_int8, T.ByteType()), (pa.types.is_int16, T.ShortType()),
    (pa.types.is_int32, T.IntegerType()), (pa.types.is_int64, T.LongType()), (pa.types.is_float32, T.FloatType()),
    (pa.types.is_float64, T.DoubleType()), (pa.types.is_string, T.StringType()),
    (pa.types.is_large_string, T.StringType()), (pa.types.is_binary, T.BinaryType()),
    (pa.types.is_large_binary, T.BinaryType()), (pa.types.is_date32, T.DateType()),
]


def spark_type(t: pa.DataType) -> T.DataType | None:
    """The Spark type the parquet reader gives a column of Arrow type ``t`` (every field nullable,
    as Spark reads files), None where the mapping is not one to one (timestamps, unsigned, ...)."""
    for check, spark_t in _SIMPLE_TYPES:
        if check(t):
            return spark_t
    if pa.types.is_decimal128(t):
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_struct(t):
        fields = []
        for f in t:
            inner = spark_type(f.type)
            if inner is None:
                return None
            fields.append(T.StructField(f.name, inner, True))
        return T.StructType(fields)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element = spark_type(t.value_type)
        return None if element is None else T.ArrayType(element, True)
    if pa.types.is_map(t):
        key, value = spark_type(t.key_type), spark_type(t.item_type)
        return None if key is None or value is None else T.MapType(key, value, True)
    return None
