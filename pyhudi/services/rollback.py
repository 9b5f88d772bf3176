"""Rollback of failed writes, recorded on the timeline as Hudi records it.

A write that dies leaves its requested/inflight instant and some data files. Before the next write
starts, every pending write instant is rolled back (Hudi's EAGER failed-writes policy): the files
its markers name are deleted, then its instant files, and a ``rollback`` instant (Avro plan and
metadata) records what happened, so Hudi tools see the same history a Java writer would leave.
"""

from __future__ import annotations

import time

from pyhudi.io.file_names import parse_base_file
from pyhudi.storage import Storage
from pyhudi.timeline.avro_records import ROLLBACK_METADATA, ROLLBACK_PLAN, write_record
from pyhudi.timeline.instant import ROLLBACK, WRITE_ACTIONS, Instant, new_instant_time
from pyhudi.timeline.timeline import META_FOLDER, Timeline
from pyhudi.write.markers import delete_markers, list_markers


def _files_of(storage: Storage, instant: Instant) -> list[str]:
    """Data files a pending instant wrote: from its markers, else by scanning for its instant time."""
    marked = [path for path, _io in list_markers(storage, instant.timestamp)]
    if marked:
        return [p for p in marked if storage.exists(p)]
    found = []
    for rel, info in storage.walk_files(""):
        if rel.startswith(META_FOLDER + "/"):
            continue
        parsed = parse_base_file(info.name)
        if parsed is not None and parsed.instant_time == instant.timestamp:
            found.append(rel)
    return found


def _partition_of(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


def rollback_instant(storage: Storage, timeline: Timeline, instant: Instant, *, utc: bool = False) -> str:
    """Roll back one pending write instant; returns the rollback instant time."""
    started = time.monotonic()
    rb_time = new_instant_time(after=timeline.last_instant_time(), utc=utc)
    files = _files_of(storage, instant)
    by_partition: dict[str, list[str]] = {}
    for rel in files:
        by_partition.setdefault(_partition_of(rel), []).append(rel)
    plan = {
        "instantToRollback": {"commitTime": instant.timestamp, "action": instant.action},
        "RollbackRequests": [
            {"partitionPath": p, "fileId": "", "latestBaseInstant": "",
             "filesToBeDeleted": [storage.full(r) for r in rels], "logBlocksToBeDeleted": {}}
            for p, rels in sorted(by_partition.items())
        ],
        "version": 1,
    }
    timeline.create_requested(rb_time, ROLLBACK, write_record(ROLLBACK_PLAN, plan))
    timeline.transition_inflight(rb_time, ROLLBACK)
    deleted: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    for p, rels in by_partition.items():
        for rel in rels:
            (deleted if storage.delete(rel) or not storage.exists(rel) else failed).setdefault(p, []).append(
                storage.full(rel))
    timeline.delete_instant(instant.timestamp)
    metadata = {
        "startRollbackTime": rb_time,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "totalFilesDeleted": sum(len(v) for v in deleted.values()),
        "commitsRollback": [instant.timestamp],
        "partitionMetadata": {
            p: {"partitionPath": p, "successDeleteFiles": deleted.get(p, []),
                "failedDeleteFiles": failed.get(p, []), "rollbackLogFiles": {}, "logFilesFromFailedCommit": {}}
            for p in sorted(by_partition)
        },
        "version": 1,
        "instantsRollback": [{"commitTime": instant.timestamp, "action": instant.action}],
    }
    timeline.complete(rb_time, ROLLBACK, write_record(ROLLBACK_METADATA, metadata))
    delete_markers(storage, instant.timestamp)
    return rb_time


def rollback_failed_writes(storage: Storage, timeline: Timeline, *, utc: bool = False) -> list[str]:
    """Roll back every pending commit/deltacommit/replacecommit (not table services)."""
    done = []
    for inst in timeline.pending(WRITE_ACTIONS):
        done.append(rollback_instant(storage, timeline, inst, utc=utc))
    return done

