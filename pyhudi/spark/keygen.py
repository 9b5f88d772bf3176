"""Record keys and partition paths as native Spark expressions.

Keys are computed for every incoming row, so they must not go through Python: each rule of
:mod:`pyhudi.keygen.spec` becomes a Catalyst expression. A null or empty record key raises inside
the Spark job with a marked message that :func:`pyhudi.spark.errors.translate` turns into a
:class:`~pyhudi.errors.HudiKeyError`. Partition paths that cannot be folders of the table are
refused before the write starts (:func:`check_partitions`).

Auto-generated keys (:func:`auto_key_expr`) are ``<instant>_<spark partition>_<row>`` as Hudi's
``AutoRecordGenWrapperKeyGenerator`` makes them: the Spark partition index of the rows being keyed
(``TaskContext.getPartitionId`` in ``HoodieCreateRecordUtils``/``HoodieDatasetBulkInsertHelper``)
and the row's position within that partition from 0 (the wrapper's ``rowId++``), both taken from
``monotonically_increasing_id`` (partition index << 33 | position), so a retried task regenerates the
same keys for the same input partition.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyhudi.errors import HudiKeyError
from pyhudi.keygen.paths import check_partition_paths
from pyhudi.keygen.spec import (
    _ESCAPED,
    DEFAULT_PARTITION,
    EMPTY_KEY,
    NON_PARTITION,
    NULL_KEY,
    SIMPLE,
    TIMESTAMP,
    KeyGenSpec,
    missing_key_message,
    missing_ordering_message,
)
from pyhudi.spark.local_batch import collect_local
from pyhudi.table.table import HudiTable
from pyhudi.write.rows import counts_of

KEY_ERROR_MARKER = "[pyhudi:key]"

_UNIT_MILLIS = {"NANOSECONDS": 1e-6, "MICROSECONDS": 1e-3, "MILLISECONDS": 1, "SECONDS": 1000,
                "MINUTES": 60_000, "HOURS": 3_600_000, "DAYS": 86_400_000}


def field_type(schema: T.StructType, path: str) -> T.DataType:
    """Type of a (possibly nested ``a.b``) field; HudiKeyError naming it when absent."""
    current: T.DataType = schema
    for part in path.split("."):
        if not isinstance(current, T.StructType) or part not in current.fieldNames():
            raise HudiKeyError(
                f"field {path!r} is not in the incoming data (columns: {', '.join(schema.fieldNames())}); "
                "fix hoodie.datasource.write.recordkey.field / partitionpath.field or the DataFrame")
        current = current[part].dataType
    return current


def _col(path: str) -> Column:
    return F.col(".".join(f"`{p}`" for p in path.split(".")))


def value_string(path: str, dtype: T.DataType, consistent_ts: bool) -> Column:
    """A field value rendered as Hudi's Avro key path renders it."""
    col = _col(path)
    if isinstance(dtype, T.StringType):
        return col
    if isinstance(dtype, T.TimestampType):
        if consistent_ts:  # java.sql.Timestamp.toString: millisecond precision, trailing zeros cut
            text = F.date_format(col, "yyyy-MM-dd HH:mm:ss.SSS")
            return F.regexp_replace(text, r"(\.\d*?)0+$", "$1").alias(path)
        return F.unix_micros(col).cast("string")
    if isinstance(dtype, T.TimestampNTZType):
        return F.unix_micros(col.cast("timestamp")).cast("string")
    if isinstance(dtype, T.BinaryType):
        return F.lower(F.hex(col))
    if isinstance(dtype, (T.StructType, T.ArrayType, T.MapType)):
        raise HudiKeyError(f"field {path!r} has type {dtype.simpleString()}, which cannot be a key or partition")
    return col.cast("string")


def _raise(message: str) -> Column:
    return F.raise_error(F.lit(f"{KEY_ERROR_MARKER} {message}"))


def required_ordering(field: str, *, unless: Column | None = None) -> Column:
    """The ordering (precombine) value ``field``, failing the job that reads a row where it is
    null. Hudi refuses such a record ("The value of ts can not be null") rather than guess its
    order; a combine step would otherwise drop it or let it lose to any other version of its key.
    Rows ``unless`` holds for (a statement's hard deletes) need none."""
    value = F.col(f"`{field}`")
    message = missing_ordering_message(field)
    missing = value.isNull() if unless is None else value.isNull() & ~unless
    return F.when(missing, _raise(message)).otherwise(value)


#: ``monotonically_increasing_id`` keeps the row's position within its partition in its low 33 bits
_POSITION_BITS = 33


def auto_key_expr(instant: str) -> Column:
    """Hudi's generated key ``<instant>_<spark partition>_<row>`` (``HoodieRecord.generateSequenceId``)
    for the rows of the DataFrame it is evaluated on; native Spark, no UDF."""
    partition = F.spark_partition_id()
    position = F.monotonically_increasing_id() - F.shiftleft(partition.cast("long"), _POSITION_BITS)
    return F.concat_ws("_", F.lit(instant), partition.cast("string"), position.cast("string"))


def record_key_expr(spec: KeyGenSpec, schema: T.StructType, *, instant: str | None = None) -> Column:
    """The record key of every row; ``instant``: the write's instant, which generated keys carry."""
    if spec.auto_keys:
        if instant is None:
            raise ValueError("auto-generated record keys need the write's instant")
        return auto_key_expr(instant)
    fields = spec.record_key_fields
    values = [value_string(f, field_type(schema, f), spec.consistent_logical_timestamp) for f in fields]
    if len(fields) == 1:
        v = values[0]
        msg = missing_key_message(fields)
        key = F.concat(F.lit(fields[0] + ":"), v) if spec.single_complex_key and spec.field_prefixed else v
        return F.when(v.isNull() | (v == ""), _raise(msg)).otherwise(key)
    parts = [F.concat(F.lit(f + ":"), F.when(v.isNull(), F.lit(NULL_KEY))
                      .when(v == "", F.lit(EMPTY_KEY)).otherwise(v)) for f, v in zip(fields, values)]
    all_missing = None
    for v in values:
        cond = v.isNull() | (v == "")
        all_missing = cond if all_missing is None else (all_missing & cond)
    msg = missing_key_message(fields)
    assert all_missing is not None
    return F.when(all_missing, _raise(msg)).otherwise(F.concat_ws(",", *parts))


def _escape(col: Column) -> Column:
    out = F.regexp_replace(col, "%", "%25")
    for ch in sorted(_ESCAPED - {"%"}):
        out = F.replace(out, F.lit(ch), F.lit(f"%{ord(ch):02X}"))
    return out


def partition_path_expr(spec: KeyGenSpec, schema: T.StructType, session_tz: str) -> Column:
    """The partition path: one part per partition field, joined with ``/``. A SIMPLE part is
    ``KeyGenUtils.getPartitionPath`` (null or empty: ``__HIVE_DEFAULT_PARTITION__``, then escaped
    when urlencode is on, then ``field=`` when hive-style), a TIMESTAMP part the timestamp-based
    rule; CustomKeyGenerator says per field which (``CustomKeyGenerator.getPartitionPath``)."""
    if spec.kind == NON_PARTITION or not spec.partition_fields:
        return F.lit("")
    parts = []
    for i, f in enumerate(spec.partition_fields):
        dtype = field_type(schema, f)
        if spec.part_type(i) == TIMESTAMP:
            v = _timestamp_partition(spec, f, dtype, session_tz)
            if spec.url_encode:
                v = _escape(v)
        else:
            raw = value_string(f, dtype, spec.consistent_logical_timestamp)
            encoded = _escape(raw) if spec.url_encode else raw
            v = F.when(raw.isNull() | (raw == ""), F.lit(DEFAULT_PARTITION)).otherwise(encoded)
        parts.append(F.concat(F.lit(f + "="), v) if spec.hive_style else v)
    return parts[0] if len(parts) == 1 else F.concat_ws("/", *parts)


def _spark_patterns(joda: str) -> list[str]:
    """Spark patterns that parse what Hudi's Joda pattern ``joda`` parses. Joda's ``Z`` takes an
    offset such as ``+0100`` or the letter ``Z`` for UTC (Hudi's own tables hold ``...000Z``);
    Spark's ``Z`` takes only the first form and ``XX`` only the second's zero, so both are tried."""
    out, quoted = [], False
    for ch in joda:
        if ch == "'":
            quoted = not quoted
        out.append("XX" if ch == "Z" and not quoted else ch)
    alternative = "".join(out)
    return [joda] if alternative == joda else [joda, alternative]


def _render_in(ts: Column, fmt: str, tz: str | None, session_tz: str) -> Column:
    """Format an instant in zone ``tz`` (session zone when None) with a Java date pattern."""
    if tz and tz != session_tz:
        ts = F.to_utc_timestamp(F.from_utc_timestamp(ts, tz), session_tz)
    return F.date_format(ts, fmt)


def _timestamp_partition(spec: KeyGenSpec, path: str, dtype: T.DataType, session_tz: str) -> Column:
    ts_spec = spec.timestamp
    assert ts_spec is not None
    col = _col(path)
    ttype = ts_spec.timestamp_type
    if ttype in ("DATE_STRING", "MIXED"):
        text = col.cast("string")
        parsed = F.coalesce(*[F.try_to_timestamp(text, F.lit(fmt))
                              for fmt in ts_spec.input_formats for fmt in _spark_patterns(fmt)])
        if ts_spec.input_timezone and ts_spec.input_timezone != session_tz:
            parsed = F.to_utc_timestamp(F.from_utc_timestamp(parsed, session_tz), ts_spec.input_timezone)
        fallback = F.timestamp_millis(F.lit(1))
        instant = F.when(col.isNull(), fallback).otherwise(parsed)
        bad = col.isNotNull() & parsed.isNull()
        out_tz = ts_spec.output_timezone or ts_spec.input_timezone
        rendered = _render_in(instant, ts_spec.output_format, out_tz, session_tz)
        return F.when(bad, _raise(f"partition field {path!r} has values that match none of the input "
                                  f"date formats {list(ts_spec.input_formats)}")).otherwise(rendered)
    unit = {"UNIX_TIMESTAMP": "SECONDS", "EPOCHMILLISECONDS": "MILLISECONDS",
            "EPOCHMICROSECONDS": "MICROSECONDS"}.get(ttype, ts_spec.scalar_unit)
    if isinstance(dtype, T.TimestampType):
        number = F.unix_millis(col) if spec.consistent_logical_timestamp else F.unix_micros(col)
        if spec.consistent_logical_timestamp:
            unit = "MILLISECONDS"
    elif isinstance(dtype, T.DateType):
        number = F.datediff(col, F.lit("1970-01-01").cast("date")).cast("long")
    elif isinstance(dtype, (T.NumericType, T.StringType)):
        number = col.cast("double").cast("long")
    else:
        raise HudiKeyError(f"partition field {path!r} has type {dtype.simpleString()}, "
                           "which TimestampBasedKeyGenerator cannot read")
    number = F.coalesce(number, F.lit(1).cast("long"))  # Hudi: a null value is 1 unit after the epoch
    factor = _UNIT_MILLIS[unit]
    millis = (number * F.lit(int(factor))) if factor >= 1 else (number / F.lit(int(round(1 / factor)))).cast("long")
    return _render_in(F.timestamp_millis(millis), ts_spec.output_format, ts_spec.output_timezone, session_tz)


def session_zone(df: DataFrame) -> str:
    """The session time zone, which timestamp partition paths are rendered in."""
    return df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"


def key_columns(df: DataFrame, spec: KeyGenSpec, *, key_col: str, partition_col: str,
                instant: str | None = None) -> dict[str, Column]:
    """The record key and partition path of ``df``'s rows as columns named ``key_col`` and
    ``partition_col`` (native expressions only); ``instant``: the write's instant (generated keys
    carry it)."""
    return {key_col: record_key_expr(spec, df.schema, instant=instant),
            partition_col: partition_path_expr(spec, df.schema, session_zone(df))}



#: a prepped write's internal column marking rows that have no stored key yet and are keyed as
#: new records (a merge's inserts into a table with auto-generated keys); dropped before writing
GENERATE_KEY = "_pyhudi_generate_key"


def with_stored_keys(df: DataFrame, spec: KeyGenSpec, *, key_col: str, partition_col: str,
                     instant: str | None = None) -> DataFrame:
    """``df`` (a prepped write's rows) keyed by the record key and partition path it carries in
    ``key_col`` / ``partition_col``, as Hudi's prepped writes take them from ``_hoodie_record_key``
    and ``_hoodie_partition_path`` (``HoodieCreateRecordUtils.getHoodieKeyAndMaybeLocationFromAvroRecord``)
    instead of running the key generator. A row without a stored key fails the job (it names no
    record, and a generated key would insert it again), except rows :data:`GENERATE_KEY` marks: those
    are keyed by the table's key generator, as Hudi's MERGE INTO keys the inserts of a table without
    a record key field (``HoodieSparkKeyGeneratorFactory``: the auto-key wrapper unless
    ``_hoodie.spark.sql.merge.into.prepped``, then ``SqlKeyGenerator``'s key-less path)."""
    key = F.col(key_col).cast("string")
    part = F.coalesce(F.col(partition_col).cast("string"), F.lit(""))
    msg = (f"{key_col} is null or empty in some rows of a prepped write; prepped rows must be read from the "
           "table with their meta columns (a new row has no stored key: insert it with insert or bulk_insert)")
    key = F.when(key.isNull() | (key == ""), _raise(msg)).otherwise(key)
    if spec.kind != NON_PARTITION and spec.partition_fields:  # "" is the root, the parent of every partition
        bad = (f"{partition_col} is null or empty in some rows of a prepped write to a table partitioned by "
               f"{', '.join(spec.partition_fields)}; prepped rows must carry the partition path they were read with")
        stored = F.col(partition_col).cast("string")
        part = F.when(stored.isNull() | (stored == ""), _raise(bad)).otherwise(stored)
    if GENERATE_KEY in df.columns:
        fresh = F.coalesce(F.col(GENERATE_KEY).cast("boolean"), F.lit(False))
        key = F.when(fresh, record_key_expr(spec, df.schema, instant=instant)).otherwise(key)
        part = F.when(fresh, partition_path_expr(spec, df.schema, session_zone(df))).otherwise(part)
        return df.withColumns({key_col: key, partition_col: part}).drop(GENERATE_KEY)
    return df.withColumns({key_col: key, partition_col: part})


def check_partitions(df: DataFrame, spec: KeyGenSpec, table: HudiTable | None, *,
                     counts: dict[str, int] | None = None) -> dict[str, int] | None:
    """Refuse (:class:`~pyhudi.errors.HudiPartitionPathError`) a batch whose partition paths cannot
    be folders of ``table`` (None: not created yet), before anything is written.

    Only string values of SIMPLE parts can make a bad path, and only where urlencode or hive-style
    leaves their characters as they are: then the batch's rows per partition path are counted
    (:func:`_path_counts`: on the driver for a small local relation, else by one Spark job), the
    paths checked with pyarrow (:mod:`pyhudi.keygen.paths`), and the counts returned: the write
    plans with them instead of counting again (None: nothing was counted). Other values
    (numbers, dates, hex) make one plain folder name each. A TIMESTAMP part's shape comes from its output format alone
    (``TimestampBasedAvroKeyGenerator``), so one rendered value stands for all: it is rendered on
    the driver from a local one-row relation, which Spark evaluates without a job
    (:func:`_check_timestamp_parts`). A custom key generator's parts are joined with ``/``, so its
    paths are safe when each part is: one with TIMESTAMP parts and no free-form string part runs no
    job over the input.

    ``counts``: the batch's rows per partition path where the caller has them (a small batch
    collected with its keys, :func:`pyhudi.spark.small_write.collect_prepared`); then those paths
    are checked where free-form strings make them, nothing is counted, and ``counts`` is returned.
    """
    if spec.kind == NON_PARTITION or not spec.partition_fields:
        return counts
    tz = session_zone(df)
    strings = any(isinstance(field_type(df.schema, f), T.StringType) and spec.part_type(i) == SIMPLE
                  for i, f in enumerate(spec.partition_fields))
    if not strings or (spec.hive_style and spec.url_encode):
        if spec.has_timestamp_part:
            _check_timestamp_parts(df, spec, tz)
        return counts
    if counts is not None:
        _check_paths(list(counts), spec, table)
        return counts
    return _check_path_counts(df.select(partition_path_expr(spec, df.schema, tz).alias("path")), spec, table)


def check_stored_partitions(df: DataFrame, spec: KeyGenSpec, table: HudiTable | None, *, partition_col: str) -> None:
    """Refuse a prepped insert whose stored partition paths (``partition_col``, given by the user's
    rows, not generated) cannot be folders of ``table``: the paths counted as
    :func:`check_partitions` counts free-form string parts."""
    if spec.kind == NON_PARTITION or not spec.partition_fields:
        return
    _check_path_counts(df.select(F.col(partition_col).cast("string").alias("path"))
                          .where(F.col(partition_col).isNotNull()), spec, table)


def _check_path_counts(paths: DataFrame, spec: KeyGenSpec, table: HudiTable | None) -> dict[str, int]:
    """Check the distinct values of ``paths`` (one string column, ``path``) as folders of
    ``table``, beside the partitions it has; the rows per path (:func:`_path_counts`)."""
    counts = _path_counts(paths)
    _check_paths(list(counts), spec, table)
    return counts


def _check_paths(paths: list[str | None], spec: KeyGenSpec, table: HudiTable | None) -> None:
    """Check distinct partition paths as folders of ``table``, beside the partitions it has."""
    listing = table.metadata_listing() if table is not None else None
    existing = None if listing is None else listing.partitions | {p for p, names in listing.files.items() if names}
    check_partition_paths(pa.array(paths, pa.string()), fields=spec.partition_fields,
                          storage=table.storage if table is not None else None, existing=existing)


def _path_counts(paths: DataFrame) -> dict[str, int]:
    """The rows per value of ``paths``' one column: counted with pyarrow on the driver when
    ``paths`` is a projection of a small local relation, which brings its rows to Python without a
    Spark job (:func:`~pyhudi.spark.local_batch.collect_local`), else by a Spark job."""
    local = collect_local(paths)
    if local is not None:
        return counts_of(local.column(0))
    return {r[0]: r[1] for r in paths.groupBy(paths.columns[0]).count().collect()}


def _check_timestamp_parts(df: DataFrame, spec: KeyGenSpec, session_tz: str) -> None:
    """Check each TIMESTAMP part of the partition path by the part a record 1 ms after the epoch
    gets. The values come from ``VALUES (1)``: a local relation, whose projection Spark's optimizer
    evaluates (``ConvertToLocalRelation``), so collecting it starts no Spark job."""
    names = [f for i, f in enumerate(spec.partition_fields) if spec.part_type(i) == TIMESTAMP]
    one_row = df.sparkSession.sql("SELECT * FROM VALUES (1) AS t(x)")
    sample = one_row.select(*[_one_timestamp_part(spec, f, session_tz).alias(f"p{i}")
                              for i, f in enumerate(names)]).collect()[0]
    check_partition_paths(pa.array(list(sample), pa.string()), fields=spec.partition_fields)


def _one_timestamp_part(spec: KeyGenSpec, field: str, session_tz: str) -> Column:
    """The path part of TIMESTAMP field ``field`` for a record whose value is 1 ms after the epoch."""
    ts_spec = spec.timestamp
    assert ts_spec is not None
    value = _render_in(F.timestamp_millis(F.lit(1)), ts_spec.output_format, ts_spec.output_timezone, session_tz)
    if spec.url_encode:
        value = _escape(value)
    return F.concat(F.lit(field + "="), value) if spec.hive_style else value
