"""Commit metadata in timeline layout 2 (table versions 8 and 9): Avro, not JSON.

In layout 1 a commit, delta commit or replace commit file holds Jackson's JSON of Hudi's
``HoodieCommitMetadata`` POJO. From table version 8 on every timeline file with content is an Avro
object container holding one record, and commit-like files hold the Avro
``HoodieCommitMetadata`` (``HoodieReplaceCommitMetadata`` for a completed replace commit) of Hudi
1.x, whose write stat carries the fields the JSON one grew since 0.14 (log files, the previous base
file, runtime statistics). Java fills the Avro record from the POJO field by field, by name, and
leaves the record's ``version`` null; pyhudi does the same from its JSON, so both layouts are
written from the one :class:`~pyhudi.timeline.commit_metadata.CommitMetadata`.

The schemas below are Hudi 1.x's record layout (names, field order, types and defaults as the
files Apache Hudi 1.0 and 1.1 write carry them, ``docs/hudi-1x-format.md`` section 2.3): a Java
reader resolves our writer schema against its generated classes by name.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

from pyhudi.timeline.avro_records import _arr, _f, _map, _onull, _rec, parsed_schema, read_record
from pyhudi.timeline.commit_metadata import CommitMetadata

_STR = "string"

RUNTIME_STATS = _rec("HoodieRuntimeStats", [
    _onull("totalScanTime", "long"), _onull("totalCreateTime", "long"), _onull("totalUpsertTime", "long"),
])

#: HoodieWriteStat of Hudi 1.x (HoodieCommitMetadata.avsc)
WRITE_STAT = _rec("HoodieWriteStat", [
    _onull("fileId", _STR), _onull("path", _STR), _onull("prevCommit", _STR),
    _onull("numWrites", "long"), _onull("numDeletes", "long"), _onull("numUpdateWrites", "long"),
    _onull("totalWriteBytes", "long"), _onull("totalWriteErrors", "long"), _onull("partitionPath", _STR),
    _onull("totalLogRecords", "long"), _onull("totalLogFiles", "long"),
    _onull("totalUpdatedRecordsCompacted", "long"), _onull("numInserts", "long"), _onull("totalLogBlocks", "long"),
    _onull("totalCorruptLogBlock", "long"), _onull("totalRollbackBlocks", "long"),
    _onull("fileSizeInBytes", "long"), _onull("logVersion", "int"), _onull("logOffset", "long"),
    # Hudi's schema gives these array and map types themselves a ``default`` property: kept, for
    # the header to be Hudi's byte for byte
    _onull("baseFile", _STR), _onull("logFiles", {**_arr(_STR), "default": None}),
    _onull("cdcStats", {**_map("long"), "default": None}),
    _onull("prevBaseFile", _STR), _onull("minEventTime", "long"), _onull("maxEventTime", "long"),
    _onull("runtimeStats", RUNTIME_STATS), _onull("totalLogFilesCompacted", "long"),
    _onull("totalLogReadTimeMs", "long"), _onull("totalLogSizeCompacted", "long"), _onull("tempPath", _STR),
    _onull("numUpdates", "long"),
])

def _commit_fields(*, extra_default: bool) -> list[dict[str, Any]]:
    # the two schemas differ in one property: HoodieCommitMetadata's extraMetadata map type has
    # its own ``default`` (so the headers match Hudi's byte for byte)
    extra = {**_map(_STR), "default": None} if extra_default else _map(_STR)
    return [
        _onull("partitionToWriteStats", _map(_arr(WRITE_STAT))),
        _onull("compacted", "boolean"),
        _onull("extraMetadata", extra),
        _f("version", ["int", "null"], 1),
        _onull("operationType", _STR),
    ]


#: HoodieCommitMetadata of Hudi 1.x: commits, delta commits, and every inflight write
COMMIT_METADATA = _rec("HoodieCommitMetadata", _commit_fields(extra_default=True))
#: HoodieReplaceCommitMetadata of Hudi 1.x: completed replace commits (overwrites, clusterings)
REPLACE_COMMIT_METADATA = _rec("HoodieReplaceCommitMetadata", [
    *_commit_fields(extra_default=False), _onull("partitionToReplaceFileIds", _map(_arr(_STR))),
])

#: write stat fields Java declares as primitive ``long`` in the POJO: never null in its records
_LONGS = ("numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes", "totalWriteErrors", "totalLogRecords",
          "totalUpdatedRecordsCompacted", "numInserts", "totalLogBlocks", "totalCorruptLogBlock",
          "totalRollbackBlocks", "fileSizeInBytes", "totalLogFilesCompacted", "totalLogReadTimeMs",
          "totalLogSizeCompacted", "numUpdates")


def _stat(stat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in WRITE_STAT["fields"]:
        name = f["name"]
        value = stat.get(name)
        if name in _LONGS:
            value = int(value or 0)
        elif name == "runtimeStats" and isinstance(value, dict):
            value = {k: (None if value.get(k) is None else int(value[k]))
                     for k in ("totalScanTime", "totalCreateTime", "totalUpsertTime")}
        out[name] = value
    return out


def to_avro_record(doc: dict[str, Any], *, replace: bool) -> dict[str, Any]:
    """A commit metadata document (the JSON form) as the Avro record of Hudi 1.x."""
    out: dict[str, Any] = {
        "partitionToWriteStats": {p: [_stat(s) for s in stats or []]
                                  for p, stats in (doc.get("partitionToWriteStats") or {}).items()},
        "compacted": bool(doc.get("compacted", False)),
        "extraMetadata": {k: str(v) for k, v in (doc.get("extraMetadata") or {}).items()},
        "version": None,  # Java leaves it null
        "operationType": doc.get("operationType"),
    }
    if replace:
        out["partitionToReplaceFileIds"] = dict(doc.get("partitionToReplaceFileIds") or {})
    return out


def _java_form(schema: Any, namespace: str | None) -> Any:
    """``schema`` as Java's Avro ``Schema.toString`` writes the classes Hudi generates: strings
    and map keys carry ``"avro.java.string":"String"``, a nested record names its namespace only
    where it differs from the enclosing one, and attributes come in Java's order."""
    if isinstance(schema, list):
        return [_java_form(t, namespace) for t in schema]
    if schema == "string":
        return {"type": "string", "avro.java.string": "String"}
    if not isinstance(schema, dict):
        return schema
    kind = schema["type"]
    if kind == "record":
        own = schema.get("namespace", namespace)
        out: dict[str, Any] = {"type": "record", "name": schema["name"]}
        if own != namespace:
            out["namespace"] = own
        out["fields"] = []
        for f in schema["fields"]:
            field = {"name": f["name"], "type": _java_form(f["type"], own)}
            if "default" in f:
                field["default"] = f["default"]
            out["fields"].append(field)
        return out
    if kind == "map":
        return {"type": "map", "values": _java_form(schema["values"], namespace), "avro.java.string": "String",
                **{k: v for k, v in schema.items() if k not in ("type", "values")}}
    if kind == "array":
        return {"type": "array", "items": _java_form(schema["items"], namespace),
                **{k: v for k, v in schema.items() if k not in ("type", "items")}}
    return schema


def java_schema_text(schema: dict[str, Any]) -> str:
    """The ``avro.schema`` header Hudi 1.x's files carry for ``schema`` (byte for byte)."""
    return json.dumps(_java_form(schema, None), separators=(",", ":"))


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zig-zag
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _container(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """One record in an Avro object container file as Hudi's ``DataFileWriter`` writes it: the
    metadata holds ``avro.schema`` alone (Java's form of the schema, no ``avro.codec``: null codec),
    then one block and the sync marker."""
    import fastavro

    body = io.BytesIO()
    fastavro.schemaless_writer(body, parsed_schema(schema), record)
    text = java_schema_text(schema).encode("utf-8")
    key = b"avro.schema"
    sync = os.urandom(16)
    data = body.getvalue()
    return b"".join([b"Obj\x01", _varint(1), _varint(len(key)), key, _varint(len(text)), text, _varint(0), sync,
                     _varint(1), _varint(len(data)), data, sync])



def encode(content: bytes | CommitMetadata, *, replace: bool) -> bytes:
    """Commit metadata (JSON bytes as layout 1 stores it, or the object) as a layout-2 instant
    file: the Avro ``HoodieReplaceCommitMetadata`` when ``replace`` (a completed replace commit),
    else ``HoodieCommitMetadata``. Empty content stays empty (a requested write)."""
    if isinstance(content, CommitMetadata):
        doc = json.loads(content.to_json())
    elif not content.strip():
        return b""
    else:
        doc = json.loads(content)
    return _container(REPLACE_COMMIT_METADATA if replace else COMMIT_METADATA, to_avro_record(doc, replace=replace))


def decode(data: bytes, *, source: str) -> CommitMetadata:
    """A layout-2 commit-like instant file (empty: empty metadata)."""
    return CommitMetadata.from_dict(read_record(data, source=source)) if data else CommitMetadata()


