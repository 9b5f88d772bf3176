"""Avro schemas of table records, derived from Arrow schemas the way Hudi on Spark derives them.

Hudi records the table schema as Avro JSON (commit ``extraMetadata.schema``, ``hoodie.properties``
``hoodie.table.create.schema``, the ``parquet.avro.schema`` footer); Java readers resolve columns
through it. Spark-written Hudi tables name the record ``<table>_record`` in namespace
``hoodie.<table>``, make nullable fields ``["null", T]`` unions with a null default, name nested
records after their field and decimal fixed types ``fixed``: we produce the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from pyhudi.errors import HudiSchemaError
from pyhudi.io.avro_codec import avro_to_arrow_schema

META_FIELDS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME = META_FIELDS
IS_DELETED_FIELD = "_hoodie_is_deleted"

META_ARROW_FIELDS = [pa.field(name, pa.string()) for name in META_FIELDS]


def decimal_fixed_size(precision: int) -> int:
    """Bytes of the smallest two's-complement integer holding ``precision`` decimal digits."""
    size = 1
    while 2 ** (8 * size - 1) < 10 ** precision:
        size += 1
    return size


def _avro_type(dtype: pa.DataType, name: str, namespace: str) -> Any:
    if pa.types.is_boolean(dtype):
        return "boolean"
    if pa.types.is_integer(dtype):
        return "long" if dtype.bit_width > 32 else "int"
    if pa.types.is_float16(dtype) or pa.types.is_float32(dtype):
        return "float"
    if pa.types.is_float64(dtype):
        return "double"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "string"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or pa.types.is_fixed_size_binary(dtype):
        return "bytes"
    if pa.types.is_decimal(dtype):
        return {"type": "fixed", "name": "fixed", "namespace": f"{namespace}.{name}",
                "size": decimal_fixed_size(dtype.precision), "logicalType": "decimal",
                "precision": dtype.precision, "scale": dtype.scale}
    if pa.types.is_date(dtype):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(dtype):
        unit = "millis" if dtype.unit == "ms" else "micros"
        logical = f"timestamp-{unit}" if dtype.tz is not None else f"local-timestamp-{unit}"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        item = dtype.value_field
        return {"type": "array", "items": _nullable(_avro_type(item.type, name, namespace), item.nullable)}
    if pa.types.is_map(dtype):
        item = dtype.item_field
        return {"type": "map", "values": _nullable(_avro_type(item.type, name, namespace), item.nullable)}
    if pa.types.is_struct(dtype):
        return record_schema(list(dtype), name, namespace)
    raise TypeError(f"column {name} has type {dtype}, which has no Avro equivalent in Hudi")


def _nullable(avro: Any, nullable: bool) -> Any:
    return ["null", avro] if nullable else avro


def record_schema(fields: list[pa.Field], name: str, namespace: str) -> dict[str, Any]:
    full = f"{namespace}.{name}" if namespace else name
    out = []
    for f in fields:
        entry: dict[str, Any] = {"name": f.name, "type": _nullable(_avro_type(f.type, f.name, full), f.nullable)}
        if f.nullable:
            entry["default"] = None
        out.append(entry)
    return {"type": "record", "name": name, "namespace": namespace, "fields": out}


#: An Avro name (record field names included): Java's Avro refuses any other when it parses a schema.
AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def invalid_avro_names(fields: Iterable[pa.Field], prefix: str = "") -> list[str]:
    """Paths (``a.b`` for nested fields) of the fields, at any depth, whose names Avro cannot hold."""
    bad: list[str] = []
    for f in fields:
        path = f"{prefix}{f.name}"
        if not AVRO_NAME.fullmatch(f.name):
            bad.append(path)
        dtype = f.type
        while pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_map(dtype):
            dtype = dtype.item_type if pa.types.is_map(dtype) else dtype.value_type
        if pa.types.is_struct(dtype):
            bad.extend(invalid_avro_names(list(dtype), f"{path}."))
    return bad


def table_avro_schema(schema: pa.Schema, table_name: str, *, with_meta_fields: bool = False) -> str:
    """Avro schema JSON of a table's data columns (optionally with the five meta fields first).

    Column names must be Avro names, as Hudi requires when it converts a Spark schema: a table
    schema Java's Avro cannot parse would make the table unreadable to Hudi, so such a name is a
    :class:`HudiSchemaError` naming the column (nested fields as ``a.b``) before any file is written.
    """
    bad = invalid_avro_names(schema)
    if bad:
        raise HudiSchemaError(
            f"column name(s) {', '.join(repr(b) for b in bad)} are not valid Avro names (letters, digits and _, "
            "not starting with a digit), which Hudi's table schema requires; rename them before writing, e.g. "
            "with DataFrame.withColumnRenamed")
    data_fields = [f for f in schema if f.name not in META_FIELDS]
    record = record_schema(data_fields, f"{table_name}_record", f"hoodie.{table_name}")
    if with_meta_fields:
        meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in META_FIELDS]
        record["fields"] = meta + record["fields"]
    return json.dumps(record, separators=(",", ":"))


def hudi_storage_type(dtype: pa.DataType) -> pa.DataType:
    """The Arrow type a column is stored with so that it matches its Avro type.

    Avro has no 8- or 16-bit integers: Hudi stores Spark byte/short columns as int.
    """
    if pa.types.is_integer(dtype) and dtype.bit_width < 32:
        return pa.int32()
    if pa.types.is_large_string(dtype):
        return pa.string()
    if pa.types.is_large_binary(dtype):
        return pa.binary()
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return pa.list_(dtype.value_field.with_type(hudi_storage_type(dtype.value_type)))
    if pa.types.is_map(dtype):
        return pa.map_(dtype.key_field.with_type(hudi_storage_type(dtype.key_type)),
                       dtype.item_field.with_type(hudi_storage_type(dtype.item_type)))
    if pa.types.is_struct(dtype):
        return pa.struct([f.with_type(hudi_storage_type(f.type)) for f in dtype])
    return dtype


def storage_schema(data_schema: pa.Schema) -> pa.Schema:
    """The schema of a base file: meta fields, then data columns with Hudi storage types."""
    data = [f.with_type(hudi_storage_type(f.type)) for f in data_schema if f.name not in META_FIELDS]
    return pa.schema(META_ARROW_FIELDS + data)


OPERATION_FIELD = "_hoodie_operation"


def table_arrow_schema(avro_schema: str, *, operation_field: bool = False) -> pa.Schema:
    """The Arrow schema of a table's files from its Avro schema (as commits record it, without
    meta fields): the five meta fields first (and ``_hoodie_operation`` when the table keeps it),
    then the data columns with their Hudi storage types."""
    data = [f.with_type(hudi_storage_type(f.type)) for f in avro_to_arrow_schema(avro_schema)
            if f.name not in META_FIELDS and f.name != OPERATION_FIELD]
    meta = META_ARROW_FIELDS + ([pa.field(OPERATION_FIELD, pa.string())] if operation_field else [])
    return pa.schema(meta + data)
