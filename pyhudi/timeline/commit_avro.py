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

import json
from typing import Any

from pyhudi.timeline.avro_records import _arr, _f, _map, _onull, _rec, read_record, write_record
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
    _onull("baseFile", _STR), _onull("logFiles", _arr(_STR)), _onull("cdcStats", _map("long")),
    _onull("prevBaseFile", _STR), _onull("minEventTime", "long"), _onull("maxEventTime", "long"),
    _onull("runtimeStats", RUNTIME_STATS), _onull("totalLogFilesCompacted", "long"),
    _onull("totalLogReadTimeMs", "long"), _onull("totalLogSizeCompacted", "long"), _onull("tempPath", _STR),
    _onull("numUpdates", "long"),
])

_COMMIT_FIELDS = [
    _onull("partitionToWriteStats", _map(_arr(WRITE_STAT))),
    _onull("compacted", "boolean"),
    _onull("extraMetadata", _map(_STR)),
    _f("version", ["int", "null"], 1),
    _onull("operationType", _STR),
]

#: HoodieCommitMetadata of Hudi 1.x: commits, delta commits, and every inflight write
COMMIT_METADATA = _rec("HoodieCommitMetadata", _COMMIT_FIELDS)
#: HoodieReplaceCommitMetadata of Hudi 1.x: completed replace commits (overwrites, clusterings)
REPLACE_COMMIT_METADATA = _rec("HoodieReplaceCommitMetadata", [
    *_COMMIT_FIELDS, _onull("partitionToReplaceFileIds", _map(_arr(_STR))),
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
    return write_record(REPLACE_COMMIT_METADATA if replace else COMMIT_METADATA, to_avro_record(doc, replace=replace))


def decode(data: bytes, *, source: str) -> CommitMetadata:
    """A layout-2 commit-like instant file (empty: empty metadata)."""
    return CommitMetadata.from_dict(read_record(data, source=source)) if data else CommitMetadata()


