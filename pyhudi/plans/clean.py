"""Clean plans: the files a clean deletes, as Hudi records them in ``T.clean.requested``, and what the
last clean recorded.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from pyhudi.io.file_names import relative_path
from pyhudi.table.table import HudiTable
from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.instant import CLEAN, State

#: HoodieCleanerPlan version with ``filePathsToBeDeletedPerPartition`` (full paths)
PLAN_VERSION = 2
#: HoodieCleanMetadata version
METADATA_VERSION = 2


@dataclass(frozen=True)
class CleanPlan:
    """What one clean deletes, per partition (paths relative to the table), and why."""

    policy: str
    earliest_to_retain: tuple[str, str] | None  # (instant time, action) of the ECTR
    last_completed_commit: str
    files: dict[str, tuple[str, ...]]

    @property
    def file_count(self) -> int:
        return sum(len(v) for v in self.files.values())

    def to_avro(self, table: HudiTable) -> dict:
        ectr = None
        if self.earliest_to_retain is not None:
            ectr = {"timestamp": self.earliest_to_retain[0], "action": self.earliest_to_retain[1],
                    "state": State.COMPLETED.name}
        return {
            "earliestInstantToRetain": ectr,
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "policy": self.policy,
            "filesToBeDeletedPerPartition": {},
            "version": PLAN_VERSION,
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": table.storage.uri(rel), "isBootstrapBaseFile": False} for rel in rels]
                for p, rels in sorted(self.files.items())
            },
            "partitionsToBeDeleted": [],
        }

    @classmethod
    def from_avro(cls, rec: dict) -> CleanPlan:
        ectr = rec.get("earliestInstantToRetain")
        files: dict[str, tuple[str, ...]] = {}
        for p, infos in (rec.get("filePathsToBeDeletedPerPartition") or {}).items():
            files[p] = tuple(relative_path(p, posixpath.basename(info["filePath"])) for info in infos)
        for p, names in (rec.get("filesToBeDeletedPerPartition") or {}).items():  # plan version 1
            files.setdefault(p, tuple(relative_path(p, n) for n in names))
        return cls(rec.get("policy") or "", (ectr["timestamp"], ectr["action"]) if ectr else None,
                   rec.get("lastCompletedCommitTimestamp") or "", files)


@dataclass(frozen=True)
class CleanResult:
    instant: str
    files_deleted: int
    failed: int
    earliest_to_retain: str | None
    seconds: float


def last_clean(table: HudiTable) -> dict | None:
    """The HoodieCleanMetadata of the newest completed clean (None before any clean)."""
    cleans = table.timeline.completed([CLEAN])
    return read_record(table.timeline.read_bytes(cleans[-1])) if cleans else None


def last_clean_ectr(table: HudiTable) -> str | None:
    """The earliest commit the newest completed clean retained (None before any clean)."""
    rec = last_clean(table)
    return (rec.get("earliestCommitToRetain") or None) if rec else None


