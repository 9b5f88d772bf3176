"""The Avro schema of metadata-table records in table version 6 (Hudi 0.14/0.15).

``HoodieMetadataRecord`` has six fields: ``key``, ``type`` and one optional payload per MDT
partition kind (file listing, bloom filter, column statistics, record index). Hudi's writers
prepend the five ``_hoodie_*`` meta fields (null in the MDT, which does not populate them) to the
schema they store with every HFile and log block; readers decode each block with the schema it
stores, so the schema must match Hudi's field for field, in order. Hudi 1.x appends fields
(secondary index, value types, tight bounds); this is the version-6 shape.
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


def _column_stats() -> dict[str, Any]:
    wrappers = [
        _wrapper("BooleanWrapper", "boolean"), _wrapper("IntWrapper", "int"), _wrapper("LongWrapper", "long"),
        _wrapper("FloatWrapper", "float"), _wrapper("DoubleWrapper", "double"), _wrapper("BytesWrapper", "bytes"),
        _wrapper("StringWrapper", _STRING), _wrapper("DateWrapper", "int"),
        _wrapper("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
        _wrapper("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
        _wrapper("TimestampMicrosWrapper", "long"),
    ]
    names = [w["name"] for w in wrappers]
    return {"type": "record", "name": "HoodieMetadataColumnStats", "fields": [
        _field("fileName", ["null", _STRING], default=None),
        _field("columnName", ["null", _STRING], default=None),
        _field("minValue", ["null", *wrappers], default=None),
        _field("maxValue", ["null", *names], default=None),
        *(_field(n, ["null", "long"], default=None) for n in ("valueCount", "nullCount", "totalSize",
                                                              "totalUncompressedSize")),
        _field("isDeleted", "boolean"),
    ]}


def record_schema() -> dict[str, Any]:
    """``HoodieMetadataRecord`` with the meta fields, as version-6 MDT files store it."""
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
        _field("ColumnStatsMetadata", ["null", _column_stats()], default=None),
        _field("recordIndexMetadata", ["null", record_index], default=None),
    ]}


#: the schema text written into MDT HFiles and log block headers
RECORD_SCHEMA = json.dumps(record_schema(), separators=(",", ":"))
