"""The ``column_stats`` partition of the metadata table: per data file and column, its value range.

A record (``HoodieMetadataColumnStats``, keyed by :func:`pyhudi.metadata.keys.column_stats_key`)
holds the file name, the column name, the minimum and maximum wrapped in a typed record, the value
count (nulls included), the null count, the column's compressed and uncompressed sizes, and a
deletion flag. Version-6 tables (Hudi 0.14) wrap values by their logical type (``DateWrapper``
days, ``DecimalWrapper`` at decimal(30,15), timestamps as ``LongWrapper`` of the stored unit);
Hudi 1.x stores dates as ``IntWrapper`` and decimals as ``BytesWrapper`` of the unscaled value.
Readers interpret a wrapped value by the column's type in the table schema, which reads both.

Records are made in the version-6 shape; :func:`in_version` turns them into what the metadata
table of a version-8 or version-9 table holds when they are written: version 8 (index version V1)
adds ``isTightBound`` (false: bounds of a file, not of the rows alive in it); version 9 (column
statistics index version V2, Hudi 1.1's ``ValueType``) adds ``valueType`` (the ordinal of the
column's value type, decimals with ``"precision,scale"``) and wraps dates as ``IntWrapper`` days
and decimals as ``BytesWrapper`` of the unscaled value (big-endian two's complement, as Java's
``BigInteger.toByteArray``), as the Hudi 1.1 tables in ``tests/data/hudi1x`` show.

For a base file the statistics come from its parquet footer (every top-level primitive column, the
meta fields included, as Hudi 0.14 indexes them when no column list is configured); for a log
file from the records its data blocks hold (sizes 0, as Hudi records them), merged over the
commits that appended to it.
"""

from __future__ import annotations

import base64
import datetime as dt
import pickle
import posixpath
from collections.abc import Iterable
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyhudi.io.avro_schema import META_FIELDS
from pyhudi.io.log_format import BlockType, data_block_records, read_log_file
from pyhudi.metadata.files import deleted_base_files
from pyhudi.metadata.keys import column_id, column_stats_key
from pyhudi.read.skipping import ColumnRange, footers
from pyhudi.storage import Storage

PARTITION = "column_stats"
FILE_GROUP_PREFIX = "col-stats-"
TYPE_COLUMN_STATS = 3
_NS = "org.apache.hudi.avro.model."
_EPOCH = dt.date(1970, 1, 1)
_UTC_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_TS_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
DATA_BLOCKS = (BlockType.AVRO_DATA_BLOCK, BlockType.PARQUET_DATA_BLOCK, BlockType.HFILE_DATA_BLOCK)
#: DecimalWrapper's logical type in version 6: decimal(30, 15)
DECIMAL_SCALE = 15


def _wrap(value: Any, kind: pa.DataType, *, upper: bool = False) -> tuple[str, dict] | None:
    """``value`` (as a parquet footer gives it) in the wrapper Hudi 0.14 writes for ``kind``; a
    decimal with more than 15 places is cut toward the outside of the range (``upper``: a
    maximum, rounded up), so the bound still holds every value."""
    if value is None:
        return None
    raw: Any
    if pa.types.is_boolean(kind):
        name, raw = "BooleanWrapper", bool(value)
    elif pa.types.is_integer(kind):
        name, raw = ("LongWrapper" if kind.bit_width == 64 else "IntWrapper"), int(value)
    elif pa.types.is_float32(kind):
        name, raw = "FloatWrapper", float(value)
    elif pa.types.is_floating(kind):
        name, raw = "DoubleWrapper", float(value)
    elif pa.types.is_date32(kind):
        name, raw = "DateWrapper", (value - _EPOCH).days
    elif pa.types.is_timestamp(kind):
        delta = value - (_UTC_EPOCH if value.tzinfo is not None else _UTC_EPOCH.replace(tzinfo=None))
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        name, raw = "LongWrapper", micros * _TS_UNITS[kind.unit] // 1_000_000
    elif pa.types.is_decimal(kind):
        name, raw = "DecimalWrapper", Decimal(value).quantize(Decimal(1).scaleb(-DECIMAL_SCALE),
                                                              rounding=ROUND_CEILING if upper else ROUND_FLOOR)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        name, raw = "StringWrapper", str(value)
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        name, raw = "BytesWrapper", bytes(value)
    else:
        return None
    return _NS + name, {"value": raw}


def footer_records(partition: str, file_name: str, metadata: pq.FileMetaData, *,
                   columns: Iterable[str] | None = None) -> list[tuple[str, dict]]:
    """The column-stats records of a base file from its footer: every top-level primitive column
    (or those of ``columns``), over all row groups."""
    schema = metadata.schema.to_arrow_schema()
    wanted = set(columns) if columns is not None else None
    out = []
    for i in range(metadata.num_columns):
        path = metadata.schema.column(i).path
        if "." in path or (wanted is not None and path not in wanted) or path not in schema.names:
            continue
        kind = schema.field(path).type
        lo = hi = None
        nulls = size = raw_size = 0
        for g in range(metadata.num_row_groups):
            chunk = metadata.row_group(g).column(i)
            size += chunk.total_compressed_size
            raw_size += chunk.total_uncompressed_size
            stats = chunk.statistics
            if stats is None:
                continue
            nulls += stats.null_count if stats.has_null_count else 0
            if stats.has_min_max:
                lo = stats.min if lo is None else min(lo, stats.min)
                hi = stats.max if hi is None else max(hi, stats.max)
        record = {"fileName": file_name, "columnName": path, "minValue": _wrap(lo, kind),
                  "maxValue": _wrap(hi, kind, upper=True), "valueCount": metadata.num_rows, "nullCount": nulls,
                  "totalSize": size, "totalUncompressedSize": raw_size, "isDeleted": False}
        key = column_stats_key(path, partition, file_name)
        out.append((key, {"key": key, "type": TYPE_COLUMN_STATS, "ColumnStatsMetadata": record}))
    return out


def table_records(partition: str, file_name: str, rows: pa.Table, *,
                  columns: Iterable[str] | None = None) -> list[tuple[str, dict]]:
    """The column-stats records of the rows a log block holds, as Hudi computes them for log
    files: every top-level primitive column (or those of ``columns``), value and null counts of
    the rows, sizes 0."""
    out = []
    wanted = set(columns) if columns else None
    for field in rows.schema:
        kind = field.type
        if pa.types.is_nested(kind) or pa.types.is_dictionary(kind) or pa.types.is_null(kind) or (
                wanted is not None and field.name not in wanted):
            continue
        column = rows.column(field.name)
        bounds = pc.min_max(column)
        record = {"fileName": file_name, "columnName": field.name,
                  "minValue": _wrap(bounds["min"].as_py(), kind),
                  "maxValue": _wrap(bounds["max"].as_py(), kind, upper=True),
                  "valueCount": rows.num_rows, "nullCount": column.null_count, "totalSize": 0,
                  "totalUncompressedSize": 0, "isDeleted": False}
        key = column_stats_key(field.name, partition, file_name)
        out.append((key, {"key": key, "type": TYPE_COLUMN_STATS, "ColumnStatsMetadata": record}))
    return out


def appended_records(records: list[tuple[str, dict]], recorded: Iterable[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The statistics of blocks appended to an existing log file, kept for the (file, column)
    pairs whose earlier blocks the metadata table describes (``recorded``, its records of those
    keys), merged with them; the other pairs get a deletion record instead, so the file counts
    as unindexed there (statistics of the new blocks alone would rule out rows the older blocks
    hold: a log file written before column statistics were kept, or a column added since)."""
    live = {k for k, r in merged(recorded) if not r["ColumnStatsMetadata"].get("isDeleted")
            and r["ColumnStatsMetadata"].get("valueCount") is not None}
    out = []
    for key, record in records:
        if key in live:
            out.append((key, record))
        else:
            stats = record["ColumnStatsMetadata"]
            out += deleted_records_of(key, stats["fileName"], stats["columnName"])
    return out


def encode(records: list[tuple[str, dict]]) -> str:
    """Records as text, to travel from an executor in a stats row."""
    return base64.b64encode(pickle.dumps(records)).decode("ascii")


def decode(text: str) -> list[tuple[str, dict]]:
    return list(pickle.loads(base64.b64decode(text)))


def deleted_records(partition: str, file_name: str, columns: Iterable[str]) -> list[tuple[str, dict]]:
    """Records retiring the statistics of a deleted file (a clean, a rollback)."""
    return [r for column in columns
            for r in deleted_records_of(column_stats_key(column, partition, file_name), file_name, column)]


def deleted_records_of(key: str, file_name: str, column: str) -> list[tuple[str, dict]]:
    return [(key, {"key": key, "type": TYPE_COLUMN_STATS, "ColumnStatsMetadata": {
        "fileName": file_name, "columnName": column, "minValue": None, "maxValue": None, "valueCount": None,
        "nullCount": None, "totalSize": None, "totalUncompressedSize": None, "isDeleted": True}})]


def unwrap(wrapped: Any, kind: pa.DataType | None) -> Any:
    """A wrapped minimum or maximum as a Python value of the column's type (``kind``), whichever
    Hudi version wrote it."""
    if wrapped is None:
        return None
    _name, body = wrapped if isinstance(wrapped, tuple) else ("", wrapped)
    value = body.get("value") if isinstance(body, dict) else body
    if value is None or kind is None:
        return value
    if pa.types.is_date32(kind) and isinstance(value, int):
        return _EPOCH + dt.timedelta(days=value)
    if pa.types.is_timestamp(kind) and isinstance(value, int):
        micros = value * 1_000_000 // _TS_UNITS[kind.unit]
        moment = _UTC_EPOCH + dt.timedelta(microseconds=micros)
        return moment if kind.tz is not None else moment.replace(tzinfo=None)
    if pa.types.is_decimal(kind):
        if isinstance(value, bytes):  # Hudi 1.x: the unscaled value, big-endian two's complement
            return Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-kind.scale)
        return Decimal(value).quantize(Decimal(1).scaleb(-kind.scale))
    return value


#: Hudi 1.1's ``ValueType`` ordinals (``org.apache.hudi.stats.ValueType``)
VALUE_TYPES = {"null": 1, "boolean": 2, "int": 3, "long": 4, "float": 5, "double": 6, "string": 7, "bytes": 8,
               "fixed": 9, "decimal": 10, "uuid": 11, "date": 12, "time-millis": 13, "time-micros": 14,
               "timestamp-millis": 15, "timestamp-micros": 16, "timestamp-nanos": 17,
               "local-timestamp-millis": 18, "local-timestamp-micros": 19, "local-timestamp-nanos": 20}
DECIMAL_TYPE = VALUE_TYPES["decimal"]
#: the meta fields Hudi 1.x indexes by default (``HoodieTableMetadataUtil.getColumnsToIndex``)
INDEXED_META_FIELDS = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
#: Hudi 1.x's default of ``hoodie.metadata.index.column.stats.max.columns.to.index``
MAX_COLUMNS_TO_INDEX = 32


def value_types(avro_fields: Iterable[dict]) -> dict[str, dict[str, Any]]:
    """Column name -> ``HoodieValueTypeInfo`` of every top-level field of an Avro record schema
    that column statistics can describe (primitives and their logical types)."""
    out: dict[str, dict[str, Any]] = {}
    for f in avro_fields:
        kind = f.get("type")
        if isinstance(kind, list):
            options = [k for k in kind if k != "null"]
            kind = options[0] if len(options) == 1 else None
        if isinstance(kind, str):
            if kind in VALUE_TYPES:
                out[f["name"]] = {"typeOrdinal": VALUE_TYPES[kind], "additionalInfo": None}
            continue
        if not isinstance(kind, dict) or kind.get("type") in ("record", "array", "map", "enum"):
            continue
        logical = kind.get("logicalType")
        if logical == "decimal":
            out[f["name"]] = {"typeOrdinal": DECIMAL_TYPE,
                              "additionalInfo": f"{int(kind['precision'])},{int(kind.get('scale', 0))}"}
        elif logical in VALUE_TYPES:
            out[f["name"]] = {"typeOrdinal": VALUE_TYPES[logical], "additionalInfo": None}
        elif kind.get("type") in VALUE_TYPES:
            out[f["name"]] = {"typeOrdinal": VALUE_TYPES[kind["type"]], "additionalInfo": None}
    return out


def default_columns(avro_fields: Iterable[dict]) -> list[str]:
    """The columns Hudi 1.x indexes when no list is configured: three meta fields, then the first
    32 data columns of a type statistics can describe."""
    kinds = value_types(avro_fields)
    data = [name for name in kinds if not name.startswith("_hoodie_")]
    return [*INDEXED_META_FIELDS, *data[:MAX_COLUMNS_TO_INDEX]]


def _unscaled_bytes(value: int) -> bytes:
    """Java's ``BigInteger.toByteArray``: the shortest big-endian two's complement."""
    length = max(1, (value + (value < 0)).bit_length() // 8 + 1)
    return value.to_bytes(length, "big", signed=True)


def _to_v2(wrapped: Any, info: dict | None) -> Any:
    if wrapped is None or info is None:
        return wrapped
    name, body = wrapped if isinstance(wrapped, tuple) else ("", wrapped)
    value: Any = body.get("value") if isinstance(body, dict) else body
    if name.endswith("DateWrapper") and not name.endswith("LocalDateWrapper"):
        return _NS + "IntWrapper", {"value": int(value)}
    if name.endswith("DecimalWrapper"):
        scale = int(str(info.get("additionalInfo") or "0,0").split(",")[1])
        unscaled = int(Decimal(value).scaleb(scale).to_integral_value())
        return _NS + "BytesWrapper", {"value": _unscaled_bytes(unscaled)}
    return wrapped


def in_version(records: Iterable[tuple[str, dict]], table_version: int, avro_fields: Iterable[dict] = (), *,
               columns: Iterable[str] | None = None) -> list[tuple[str, dict]]:
    """Column-stats records (version-6 shape) as a metadata table of ``table_version`` holds them
    (see the module docstring); ``avro_fields``: the table schema's fields (the value types of
    version 9); ``columns``: keep only statistics of these columns (deletions are kept)."""
    if table_version < 8:
        return list(records)
    # the meta fields (strings) are not in the table schema
    kinds = {**{m: {"typeOrdinal": VALUE_TYPES["string"], "additionalInfo": None} for m in META_FIELDS},
             **value_types(avro_fields)} if table_version >= 9 else {}
    keep = set(columns) if columns is not None else None
    out = []
    for key, record in records:
        stats = dict(record["ColumnStatsMetadata"])
        column = stats.get("columnName") or ""
        if keep is not None and column not in keep and not stats.get("isDeleted"):
            continue
        stats["isTightBound"] = False
        if table_version >= 9:
            info = kinds.get(column)
            if not stats.get("isDeleted"):
                stats["minValue"] = _to_v2(stats.get("minValue"), info)
                stats["maxValue"] = _to_v2(stats.get("maxValue"), info)
                stats["valueType"] = info
            else:
                stats["valueType"] = None
        out.append((key, {**record, "ColumnStatsMetadata": stats}))
    return out


def _ordered(wrapped: Any, stats: dict) -> Any:
    """A wrapped bound as a value that orders like the column's (version-9 decimals are bytes)."""
    value = unwrap(wrapped, None)
    info = stats.get("valueType") or {}
    if isinstance(value, bytes) and info.get("typeOrdinal") == DECIMAL_TYPE:
        return int.from_bytes(value, "big", signed=True)
    return value


def merge(older: dict, newer: dict) -> dict:
    """Two statistics of one file and column, as Hudi merges them (a log file written twice): a
    deletion wins over what came before, and so does a tight bound (``isTightBound``: a
    partition's statistics recomputed from its files, ``partition_stats``); otherwise ranges widen
    and counts add up."""
    if newer.get("isDeleted") or older.get("isDeleted") or newer.get("isTightBound"):
        return newer
    out = dict(newer)
    for field, pick in (("minValue", min), ("maxValue", max)):
        a, b = older.get(field), newer.get(field)
        if a is not None and b is not None:
            x, y = _ordered(a, older), _ordered(b, newer)
            out[field] = a if pick(x, y) == x else b
        else:
            out[field] = a if b is None else b
    for field in ("valueCount", "nullCount", "totalSize", "totalUncompressedSize"):
        out[field] = (older.get(field) or 0) + (newer.get(field) or 0)
    return out


def merged(records: Iterable[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """One (key, record) per file and column, its statistics merged over the partition's records
    in merge order (:func:`merge`; deletions kept), in key order."""
    out: dict[tuple[str, str], tuple[str, dict]] = {}
    for key, record in records:
        stats = record.get("ColumnStatsMetadata")
        if not stats:
            continue
        ident = (stats.get("fileName") or "", stats.get("columnName") or "")
        if ident in out:
            record = {**record, "ColumnStatsMetadata": merge(out[ident][1]["ColumnStatsMetadata"], stats)}
        out[ident] = (key, record)
    return sorted(out.values(), key=lambda kr: kr[0])


def file_ranges(records: Iterable[tuple[str, dict]], schema: pa.Schema) -> dict[str, dict[str, ColumnRange]]:
    """file name -> column -> range, from the partition's records in merge order."""
    out: dict[str, dict[str, ColumnRange]] = {}
    for _key, record in merged(records):
        stats = record["ColumnStatsMetadata"]
        file_name, column = stats.get("fileName") or "", stats.get("columnName") or ""
        if stats.get("isDeleted") or stats.get("valueCount") is None:
            continue
        kind = schema.field(column).type if column in schema.names else None
        out.setdefault(file_name, {})[column] = ColumnRange(
            unwrap(stats.get("minValue"), kind), unwrap(stats.get("maxValue"), kind), stats.get("nullCount"),
            int(stats["valueCount"]), kind is not None and pa.types.is_floating(kind))
    return out



def key_prefixes(columns: Iterable[str]) -> tuple[str, ...]:
    """The key prefixes of the statistics of ``columns`` (a column's records share its id)."""
    return tuple(sorted({column_id(c) for c in columns}))


def column_ranges(records: Iterable[tuple[str, dict]], columns: Iterable[str],
                  schema: pa.Schema) -> dict[str, dict[str, ColumnRange]]:
    """file name -> column -> range for ``columns`` only."""
    prefixes = key_prefixes(columns)
    return file_ranges(((k, r) for k, r in records if k.startswith(prefixes)), schema)


def base_file_records(storage: Storage, paths: Iterable[str], *,
                      columns: Iterable[str] | None = None) -> list[tuple[str, dict]]:
    """Column-stats records of base files (paths relative to the table), from their footers: of
    every column, or of ``columns`` when given (non-empty)."""
    wanted = [p for p in paths if p.endswith(".parquet")]
    metas = footers(storage, wanted)
    chosen = list(columns) if columns else None
    out = []
    for rel in wanted:
        out += footer_records(posixpath.dirname(rel), posixpath.basename(rel), metas[rel], columns=chosen)
    return out


def log_file_records(storage: Storage, paths: Iterable[str], *, completed: set[str],
                     columns: Iterable[str] | None = None) -> list[tuple[str, dict]]:
    """Column-stats records of log files (paths relative to the table) from the rows of their
    data blocks written by ``completed`` instants and not rolled back, merged per file and column
    (what Hudi records for a log file when it builds the partition from storage). A file of
    delete blocks only gets none: it adds no value."""
    out: list[tuple[str, dict]] = []
    chosen = list(columns) if columns else None
    for rel in paths:
        blocks = read_log_file(storage, rel)
        void = {b.target_instant_time for b in blocks if b.block_type == BlockType.COMMAND_BLOCK}
        records: list[tuple[str, dict]] = []
        for block in blocks:
            if block.block_type in DATA_BLOCKS and block.instant_time in completed and block.instant_time not in void:
                rows = data_block_records(block, source=storage.full(rel))
                records += table_records(posixpath.dirname(rel), posixpath.basename(rel), rows, columns=chosen)
        out += merged(records)
    return out


def retired_records(files_records: Iterable[tuple[str, dict]], columns: Iterable[str]) -> list[tuple[str, dict]]:
    """Records retiring the statistics of every base file a ``files``-partition record deletes."""
    names = list(columns)
    return [r for partition, name in deleted_base_files(files_records) for r in deleted_records(partition, name, names)]
