"""Compaction plans: the file slices a compaction merges, as Hudi records them in
``T.compaction.requested``, and their readers.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from pyhudi.errors import HudiCompactionError
from pyhudi.io.file_names import log_path_order
from pyhudi.read.merge import SliceToRead
from pyhudi.timeline.avro_records import COMPACTION_PLAN, write_record
from pyhudi.timeline.instant import (
    COMPACTION,
    Instant,
    State,
)
from pyhudi.timeline.timeline import Timeline, read_avro_record

PLAN_VERSION = 2


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact (``HoodieCompactionOperation``); file names relative to the partition."""

    partition_path: str
    file_id: str
    base_instant: str
    base_file: str | None
    log_files: tuple[str, ...]
    metrics: tuple[tuple[str, float], ...] = ()

    def _rel(self, name: str) -> str:
        return posixpath.join(self.partition_path, name) if self.partition_path else name

    def to_read(self) -> SliceToRead:
        return SliceToRead(self.partition_path, self.file_id, self._rel(self.base_file) if self.base_file else None,
                           tuple(self._rel(n) for n in self.log_files))

    def metric(self, name: str) -> float:
        return dict(self.metrics).get(name, 0.0)

    def to_avro(self) -> dict:
        return {"baseInstantTime": self.base_instant, "deltaFilePaths": list(self.log_files),
                "dataFilePath": self.base_file, "fileId": self.file_id, "partitionPath": self.partition_path,
                "metrics": dict(self.metrics), "bootstrapFilePath": None}

    @classmethod
    def from_avro(cls, rec: dict) -> CompactionOperation:
        partition = rec.get("partitionPath") or ""
        base = rec.get("dataFilePath")
        return cls(partition, rec.get("fileId") or "", rec.get("baseInstantTime") or "",
                   posixpath.basename(base) if base else None,
                   # Hudi lists a slice's logs newest first; they merge oldest first
                   tuple(sorted((posixpath.basename(p) for p in rec.get("deltaFilePaths") or []), key=log_path_order)),
                   tuple(sorted((rec.get("metrics") or {}).items())))


@dataclass(frozen=True)
class CompactionPlan:
    operations: tuple[CompactionOperation, ...]

    def to_bytes(self) -> bytes:
        return write_record(COMPACTION_PLAN, {"operations": [op.to_avro() for op in self.operations],
                                              "extraMetadata": {}, "version": PLAN_VERSION})

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str) -> CompactionPlan:
        rec = read_avro_record(data, source=source)
        return cls(tuple(CompactionOperation.from_avro(op) for op in rec.get("operations") or []))


def read_plan(timeline: Timeline, instant_time: str) -> CompactionPlan:
    requested = Instant(instant_time, State.REQUESTED, COMPACTION)
    if requested not in timeline.instant_files:
        raise HudiCompactionError(f"no compaction plan {instant_time} on the timeline; "
                                  "list plans with `pyhudi compaction show PATH`")
    return CompactionPlan.from_bytes(timeline.read_bytes(requested), source=timeline.path_of(requested))


def pending_compactions(timeline: Timeline) -> list[Instant]:
    return timeline.pending([COMPACTION])


def pending_file_groups(timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> instant of the pending compaction that covers the group."""
    out: dict[tuple[str, str], str] = {}
    for inst in pending_compactions(timeline):
        for op in read_plan(timeline, inst.timestamp).operations:
            out[(op.partition_path, op.file_id)] = inst.timestamp
    return out


