"""The Avro schema of metadata-table records in table version 6 (Hudi 0.14/0.15).

``HoodieMetadataRecord`` has six fields: ``key``, ``type`` and one optional payload per MDT
partition kind (file listing, bloom filter, column statistics, record index). Hudi's writers
prepend the five ``_hoodie_*`` meta fields (null in the MDT, which does not populate them) to the
schema they store with every HFile and log block; readers decode each block with the schema it
stores, so the schema must match Hudi's field for field, in order.

Hudi 1.x appends fields, and pyhudi writes a version-8 or version-9 metadata table in the shape
Hudi 1.0 or 1.1 writes it (checked on the Hudi 1.x tables in ``tests/data/hudi1x``): version 8
adds ``LocalDateWrapper`` to the wrapped values, ``isTightBound`` (default false) to column
statistics, ``position`` to record index entries and ``SecondaryIndexMetadata`` to the record;
version 9 also adds ``ArrayWrapper`` and the ``valueType`` of a statistic (index version V2,
:mod:`pyhudi.metadata.column_stats`). Documentation strings are left out: Avro ignores them.
"""

from __future__ import annotations

import json
from typing import Any

NAMESPACE = "org.apache.hudi.avro.model"
_STRING: dict[str, Any] = {"type": "string", "avro.java.string": "String"}


def _nullable(kind: Any) -> dict[str, Any]:
    return {"type": ["null", kind], "default": None}


def _field(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


def _wrapper(name: str, kind: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [_field("value", kind)]}


def _column_stats(version: int = 6) -> dict[str, Any]:
    wrappers = [
        _wrapper("BooleanWrapper", "boolean"), _wrapper("IntWrapper", "int"), _wrapper("LongWrapper", "long"),
        _wrapper("FloatWrapper", "float"), _wrapper("DoubleWrapper", "double"), _wrapper("BytesWrapper", "bytes"),
        _wrapper("StringWrapper", _STRING), _wrapper("DateWrapper", "int"),
        _wrapper("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
        _wrapper("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
        _wrapper("TimestampMicrosWrapper", "long"),
    ]
    if version >= 8:
        wrappers.append(_wrapper("LocalDateWrapper", "int"))
    if version >= 9:
        items = ["null", *(w["name"] for w in wrappers)]
        wrappers.append({"type": "record", "name": "ArrayWrapper", "fields": [
            _field("wrappedValues", ["null", {"type": "array", "items": items}], default=None)]})
    names = [w["name"] for w in wrappers]
    extra = [_field("isTightBound", "boolean", default=False)] if version >= 8 else []
    if version >= 9:
        extra.append(_field("valueType", ["null", {"type": "record", "name": "HoodieValueTypeInfo", "fields": [
            _field("typeOrdinal", "int"), _field("additionalInfo", ["null", _STRING], default=None)]}],
            default=None))
    return {"type": "record", "name": "HoodieMetadataColumnStats", "fields": [
        _field("fileName", ["null", _STRING], default=None),
        _field("columnName", ["null", _STRING], default=None),
        _field("minValue", ["null", *wrappers], default=None),
        _field("maxValue", ["null", *names], default=None),
        *(_field(n, ["null", "long"], default=None) for n in ("valueCount", "nullCount", "totalSize",
                                                              "totalUncompressedSize")),
        _field("isDeleted", "boolean"),
        *extra,
    ]}


def record_schema(version: int = 6) -> dict[str, Any]:
    """``HoodieMetadataRecord`` with the meta fields, as MDT files of a table ``version`` (6, 8
    or 9) store it."""
    file_info = {"type": "record", "name": "HoodieMetadataFileInfo",
                 "fields": [_field("size", "long"), _field("isDeleted", "boolean")]}
    bloom = {"type": "record", "name": "HoodieMetadataBloomFilter", "fields": [
        _field("type", _STRING), _field("timestamp", _STRING), _field("bloomFilter", "bytes"),
        _field("isDeleted", "boolean")]}
    record_index = {"type": "record", "name": "HoodieRecordIndexInfo", "fields": [
        _field("partitionName", ["null", _STRING], default=None),
        _field("fileIdHighBits", ["null", "long"], default=None),
        _field("fileIdLowBits", ["null", "long"], default=None),
        _field("fileIndex", ["null", "int"], default=None),
        _field("fileId", ["null", _STRING], default=None),
        _field("instantTime", ["null", "long"], default=None),
        _field("fileIdEncoding", "int", default=0),
        *([_field("position", ["null", "long"], default=None)] if version >= 8 else []),
    ]}
    meta = [_field(n, ["null", "string"], default=None) for n in (
        "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name")]
    return {"type": "record", "name": "HoodieMetadataRecord", "namespace": NAMESPACE, "fields": [
        *meta,
        _field("key", _STRING),
        _field("type", "int"),
        _field("filesystemMetadata", ["null", {"type": "map", "values": file_info, "avro.java.string": "String"}]),
        _field("BloomFilterMetadata", ["null", bloom], default=None),
        _field("ColumnStatsMetadata", ["null", _column_stats(version)], default=None),
        _field("recordIndexMetadata", ["null", record_index], default=None),
        *([_field("SecondaryIndexMetadata", ["null", {"type": "record", "name": "HoodieSecondaryIndexInfo",
                                                       "fields": [_field("isDeleted", "boolean")]}], default=None)]
          if version >= 8 else []),
    ]}


#: the schema text written into MDT HFiles and log block headers (version 6)
RECORD_SCHEMA = json.dumps(record_schema(), separators=(",", ":"))
#: the same for the metadata tables of versions 8 and 9
RECORD_SCHEMAS = {6: RECORD_SCHEMA, 8: json.dumps(record_schema(8), separators=(",", ":")),
                  9: json.dumps(record_schema(9), separators=(",", ":"))}


def schema_of(table_version: int) -> str:
    """The record schema text of a metadata table of ``table_version`` (5 and 6 share one)."""
    return RECORD_SCHEMAS[9 if table_version >= 9 else 8 if table_version >= 8 else 6]
