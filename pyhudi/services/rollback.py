"""Rollback of failed writes, recorded on the timeline as Hudi records it.

A write that dies leaves its requested/inflight instant and some data files. Before the next write
starts, every pending write instant is rolled back (Hudi's EAGER failed-writes policy): the files
its markers name are deleted, then its instant files, and a ``rollback`` instant (Avro plan and
metadata) records what happened, so Hudi tools see the same history a Java writer would leave.
"""

from __future__ import annotations

import posixpath
import time

from pyhudi.errors import HudiError
from pyhudi.io.file_names import log_file_name, parse_base_file, parse_log_file, relative_path
from pyhudi.io.log_format import read_log_file, rollback_block
from pyhudi.storage import Storage
from pyhudi.timeline.avro_records import ROLLBACK_METADATA, ROLLBACK_PLAN, read_record, write_record
from pyhudi.timeline.instant import ROLLBACK, WRITE_ACTIONS, Instant, State, new_instant_time
from pyhudi.timeline.timeline import META_FOLDER, Timeline, family
from pyhudi.write.markers import delete_markers, list_markers


def _files_of(storage: Storage, timeline: Timeline, instant: Instant) -> list[str]:
    """Data files an instant wrote: a completed one's from its commit metadata, a pending one's
    from its markers, else by scanning for its instant time.

    Log files are listed too: they may hold blocks of earlier, committed instants as well.
    """
    marked = sorted({path for path, _io in list_markers(storage, instant.timestamp)})
    if instant.is_completed or not marked:
        # a completed instant, or one a rollback reverted: its metadata names its files
        source = instant if instant.is_completed else Instant(instant.timestamp, State.INFLIGHT, instant.action)
        written: set[str] = set()
        if source in timeline.instant_files:
            try:
                written = {s.path for s in timeline.commit_metadata(source).write_stats() if s.path}
            except HudiError:
                written = set()  # an inflight profile that is not commit metadata
        if instant.is_completed or written:
            return [p for p in sorted(written | set(marked)) if storage.exists(p)]
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


#: write token of log files holding rollback command blocks (Hudi writes them outside any task)
ROLLBACK_TOKEN = "1-0-1"


def _log_request(storage: Storage, rel: str) -> dict:
    """The rollback request of a log file the failed instant appended blocks to."""
    parsed = parse_log_file(posixpath.basename(rel))
    assert parsed is not None
    return {"partitionPath": _partition_of(rel), "fileId": parsed.file_id, "latestBaseInstant": parsed.base_instant,
            "filesToBeDeleted": [], "logBlocksToBeDeleted": {storage.full(rel): storage.size(rel)}}


def _partition_of(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


def _only_blocks_of(storage: Storage, rel: str, instants: frozenset[str]) -> bool:
    """Whether every block of a log file was written by one of ``instants`` (then the file can go)."""
    try:
        blocks = read_log_file(storage, rel)
    except HudiError:
        return False  # damaged before the failed write: keep the earlier blocks, neutralise ours
    return all(b.instant_time in instants for b in blocks)


def _rollback_log(storage: Storage, rel: str, rb_time: str, target: str) -> tuple[str, int]:
    """Append a rollback command block for ``target`` in a new log version of the file's slice."""
    folder, name = posixpath.split(rel)
    parsed = parse_log_file(name)
    assert parsed is not None
    versions = [lf.version for info in storage.list_files(folder)
                if (lf := parse_log_file(info.name)) is not None
                and (lf.file_id, lf.base_instant) == (parsed.file_id, parsed.base_instant)]
    new_rel = relative_path(folder, log_file_name(parsed.file_id, parsed.base_instant, max(versions, default=0) + 1,
                                                  ROLLBACK_TOKEN))
    data = rollback_block(rb_time, target)
    storage.write_bytes(new_rel, data)
    return storage.full(new_rel), len(data)


def undo_instant(storage: Storage, timeline: Timeline, instant: Instant, rb_time: str, *,
                 disposable: frozenset[str] = frozenset()) -> dict:
    """Undo what ``instant`` wrote and drop it from the timeline; returns its HoodieRollbackMetadata.

    Base files it wrote are deleted. A log file it created holds only its blocks and is deleted
    too; a log file it appended to keeps the earlier blocks, and a rollback command block (in the
    slice's next log file, as Hudi writes it) tells every reader to skip the failed instant's.
    ``disposable`` names other instants going away with this one (a restore): a log file holding
    only their blocks is deleted rather than neutralised.
    """
    started = time.monotonic()
    files = _files_of(storage, timeline, instant)
    if instant.is_completed:  # invisible first: a crash from here on leaves a pending write to roll back
        timeline.revert_to_inflight(instant)
    gone = disposable | {instant.timestamp, rb_time}
    keep_logs = {rel for rel in files if parse_log_file(posixpath.basename(rel)) is not None
                 and not _only_blocks_of(storage, rel, gone)}
    files = [rel for rel in files if rel not in keep_logs]
    by_partition: dict[str, list[str]] = {}
    for rel in files:
        by_partition.setdefault(_partition_of(rel), []).append(rel)
    deleted: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    for p, rels in by_partition.items():
        for rel in rels:
            (deleted if storage.delete(rel) or not storage.exists(rel) else failed).setdefault(p, []).append(
                storage.full(rel))
    rollback_logs: dict[str, dict[str, int]] = {}
    failed_logs: dict[str, dict[str, int]] = {}
    for rel in sorted(keep_logs):
        p = _partition_of(rel)
        failed_logs.setdefault(p, {})[storage.full(rel)] = storage.size(rel)
        path, size = _rollback_log(storage, rel, rb_time, instant.timestamp)
        rollback_logs.setdefault(p, {})[path] = size
    timeline.delete_instant(instant.timestamp, instant.action)
    delete_markers(storage, instant.timestamp)
    partitions = sorted(set(by_partition) | set(rollback_logs))
    return {
        "startRollbackTime": rb_time,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "totalFilesDeleted": sum(len(v) for v in deleted.values()),
        "commitsRollback": [instant.timestamp],
        "partitionMetadata": {
            p: {"partitionPath": p, "successDeleteFiles": deleted.get(p, []),
                "failedDeleteFiles": failed.get(p, []), "rollbackLogFiles": rollback_logs.get(p, {}),
                "logFilesFromFailedCommit": failed_logs.get(p, {})}
            for p in partitions
        },
        "version": 1,
        "instantsRollback": [{"commitTime": instant.timestamp, "action": instant.action}],
    }


def rollback_plan(storage: Storage, timeline: Timeline, instant: Instant) -> dict:
    """The HoodieRollbackPlan of an instant: files to delete, log files to neutralise."""
    files = _files_of(storage, timeline, instant)
    keep_logs = {rel for rel in files if parse_log_file(posixpath.basename(rel)) is not None
                 and not _only_blocks_of(storage, rel, frozenset([instant.timestamp]))}
    by_partition: dict[str, list[str]] = {}
    for rel in files:
        if rel not in keep_logs:
            by_partition.setdefault(_partition_of(rel), []).append(rel)
    return {
        "instantToRollback": {"commitTime": instant.timestamp, "action": instant.action},
        "RollbackRequests": [
            {"partitionPath": p, "fileId": "", "latestBaseInstant": "",
             "filesToBeDeleted": [storage.full(r) for r in rels], "logBlocksToBeDeleted": {}}
            for p, rels in sorted(by_partition.items())
        ] + [_log_request(storage, rel) for rel in sorted(keep_logs)],
        "version": 1,
    }


def rollback_instant(storage: Storage, timeline: Timeline, instant: Instant, *, utc: bool = False) -> str:
    """Roll back one instant (a failed write, or a completed one); returns the rollback instant time."""
    rb_time = new_instant_time(after=timeline.last_instant_time(), utc=utc)
    timeline.create_requested(rb_time, ROLLBACK, write_record(ROLLBACK_PLAN, rollback_plan(storage, timeline, instant)))
    timeline.transition_inflight(rb_time, ROLLBACK)
    metadata = undo_instant(storage, timeline, instant, rb_time)
    timeline.complete(rb_time, ROLLBACK, write_record(ROLLBACK_METADATA, metadata))
    return rb_time


def finish_pending_rollbacks(storage: Storage, timeline: Timeline) -> list[str]:
    """Complete rollbacks that died midway, from their plans (Hudi re-runs them the same way)."""
    done = []
    for rb in timeline.pending([ROLLBACK]):
        requested = Instant(rb.timestamp, State.REQUESTED, ROLLBACK)
        if requested not in timeline.instant_files:
            timeline.delete_instant(rb.timestamp, ROLLBACK)
            continue
        plan = read_record(timeline.read_bytes(requested))
        target = (plan.get("instantToRollback") or {}).get("commitTime")
        action = (plan.get("instantToRollback") or {}).get("action") or ""
        left = [i for i in timeline.instants() if i.timestamp == target and family(i.action) == family(action)]
        if left:
            metadata = undo_instant(storage, timeline, left[0], rb.timestamp)
        else:  # its target was undone already; only the record is missing
            metadata = {"startRollbackTime": rb.timestamp, "timeTakenInMillis": 0, "totalFilesDeleted": 0,
                        "commitsRollback": [target], "partitionMetadata": {}, "version": 1,
                        "instantsRollback": [{"commitTime": target, "action": action}]}
        if not timeline.has_state(rb.timestamp, State.INFLIGHT, ROLLBACK):
            timeline.transition_inflight(rb.timestamp, ROLLBACK)
        timeline.complete(rb.timestamp, ROLLBACK, write_record(ROLLBACK_METADATA, metadata))
        done.append(rb.timestamp)
    return done


def rollback_failed_writes(storage: Storage, timeline: Timeline, *, utc: bool = False) -> list[str]:
    """Finish interrupted rollbacks, then roll back every pending commit/deltacommit/replacecommit
    (not table services)."""
    done = finish_pending_rollbacks(storage, timeline)
    for inst in timeline.pending(WRITE_ACTIONS):
        done.append(rollback_instant(storage, timeline, inst, utc=utc))
    return done
