"""Savepoints on the timeline and the files they keep."""

from __future__ import annotations

from dataclasses import dataclass

from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.instant import SAVEPOINT, Instant
from pyhudi.timeline.timeline import Timeline


@dataclass(frozen=True)
class Savepoint:
    instant: str
    savepointed_by: str
    savepointed_at: int  # epoch milliseconds (System.currentTimeMillis in Hudi)
    comments: str
    files: dict[str, tuple[str, ...]]  # partition -> file names


def savepoint_of(timeline: Timeline, instant: Instant) -> Savepoint:
    rec = read_record(timeline.read_bytes(instant))
    files = {p: tuple(m.get("savepointDataFile") or ()) for p, m in (rec.get("partitionMetadata") or {}).items()}
    return Savepoint(instant.timestamp, rec.get("savepointedBy") or "", int(rec.get("savepointedAt") or 0),
                     rec.get("comments") or "", files)


def list_savepoints(timeline: Timeline) -> list[Savepoint]:
    return [savepoint_of(timeline, i) for i in timeline.completed([SAVEPOINT])]


def savepointed_files(timeline: Timeline) -> set[str]:
    """Names of every file some savepoint lists (the cleaner keeps them)."""
    return {name for sp in list_savepoints(timeline) for names in sp.files.values() for name in names}


def oldest_savepoint(timeline: Timeline) -> str | None:
    saved = timeline.completed([SAVEPOINT])
    return saved[0].timestamp if saved else None


