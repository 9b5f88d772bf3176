"""Commit metadata: what a completed commit/deltacommit/replacecommit says it wrote.

Version 6 stores it as JSON (``HoodieCommitMetadata`` serialised by Jackson); readers of other
engines locate changed files from ``partitionToWriteStats`` and take the table schema from
``extraMetadata.schema``, so both must always be filled. Field names and order follow Hudi's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pyhudi.errors import HudiCorruptFileError


@dataclass
class WriteStat:
    """One file written by a commit (``HoodieWriteStat``)."""

    fileId: str
    path: str
    partitionPath: str
    prevCommit: str = "null"
    numWrites: int = 0
    numDeletes: int = 0
    numUpdateWrites: int = 0
    numInserts: int = 0
    totalWriteBytes: int = 0
    totalWriteErrors: int = 0
    fileSizeInBytes: int = 0
    cdcStats: Any = None
    tempPath: Any = None
    totalLogRecords: int = 0
    totalLogFilesCompacted: int = 0
    totalLogSizeCompacted: int = 0
    totalUpdatedRecordsCompacted: int = 0
    totalLogBlocks: int = 0
    totalCorruptLogBlock: int = 0
    totalRollbackBlocks: int = 0
    minEventTime: Any = None
    maxEventTime: Any = None
    runtimeStats: dict[str, int] | None = None
    # HoodieDeltaWriteStat: set on stats of log files written by merge-on-read writes
    logVersion: int | None = None
    logOffset: int | None = None
    baseFile: str | None = None
    logFiles: list[str] | None = None

    @property
    def is_log(self) -> bool:
        return self.logVersion is not None

    def to_json_dict(self) -> dict[str, Any]:
        order = ["fileId", "path", "cdcStats", "prevCommit", "numWrites", "numDeletes",
                 "numUpdateWrites", "numInserts", "totalWriteBytes", "totalWriteErrors", "tempPath",
                 "partitionPath", "totalLogRecords", "totalLogFilesCompacted",
                 "totalLogSizeCompacted", "totalUpdatedRecordsCompacted", "totalLogBlocks",
                 "totalCorruptLogBlock", "totalRollbackBlocks", "fileSizeInBytes", "minEventTime",
                 "maxEventTime", "runtimeStats"]
        data = asdict(self)
        out = {k: data[k] for k in order}
        if self.is_log:
            out.update(logVersion=self.logVersion, logOffset=self.logOffset, baseFile=self.baseFile or "",
                       logFiles=list(self.logFiles or []), recordsStats={"val": None})
        return out

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> WriteStat:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs.setdefault("fileId", "")
        kwargs.setdefault("path", "")
        kwargs.setdefault("partitionPath", "")
        return cls(**kwargs)

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass
class CommitMetadata:
    """``HoodieCommitMetadata`` (and ``HoodieReplaceCommitMetadata`` when replace ids are set)."""

    partition_to_write_stats: dict[str, list[WriteStat]] = field(default_factory=dict)
    operation_type: str = "UNKNOWN"
    extra_metadata: dict[str, str] = field(default_factory=dict)
    compacted: bool = False
    partition_to_replace_file_ids: dict[str, list[str]] | None = None

    @property
    def schema(self) -> str | None:
        return self.extra_metadata.get("schema")

    def write_stats(self) -> list[WriteStat]:
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    def total(self, name: str) -> int:
        return sum(int(getattr(s, name) or 0) for s in self.write_stats())

    def replaced_file_groups(self) -> set[tuple[str, str]]:
        """(partition, file id) of every file group a replace commit retired."""
        return {(p, fid) for p, ids in (self.partition_to_replace_file_ids or {}).items() for fid in ids}

    def touched_file_groups(self) -> set[tuple[str, str]]:
        """(partition, file id) of every file group the commit wrote or replaced: what conflict
        checks (writers, clustering plans) compare."""
        return {(s.partitionPath, s.fileId) for s in self.write_stats() if s.fileId} | self.replaced_file_groups()

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [s.to_json_dict() for s in stats] for p, stats in self.partition_to_write_stats.items()
            },
            "compacted": self.compacted,
            "extraMetadata": self.extra_metadata,
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            doc["partitionToReplaceFileIds"] = self.partition_to_replace_file_ids
        return json.dumps(doc, indent=2)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> CommitMetadata:
        stats = {
            p: [WriteStat.from_json_dict(s) for s in (lst or [])]
            for p, lst in (doc.get("partitionToWriteStats") or {}).items()
        }
        return cls(
            partition_to_write_stats=stats,
            operation_type=doc.get("operationType") or "UNKNOWN",
            extra_metadata=dict(doc.get("extraMetadata") or {}),
            compacted=bool(doc.get("compacted", False)),
            partition_to_replace_file_ids=doc.get("partitionToReplaceFileIds"),
        )

    @classmethod
    def from_json(cls, text: bytes | str, *, source: str = "commit metadata") -> CommitMetadata:
        if not text or not str(text if isinstance(text, str) else text.decode("utf-8", "replace")).strip():
            return cls()
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise HudiCorruptFileError(f"{source} is not valid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise HudiCorruptFileError(f"{source} is not a JSON object")
        return cls.from_dict(doc)
