"""Rollback of failed writes, recorded on the timeline as Hudi records it.

A write that dies leaves its requested/inflight instant and some data files. Once its heartbeat
has expired, the next writer (EAGER failed-writes policy) or the cleaner (LAZY) rolls it back
(:mod:`pyhudi.commit.transaction`): the files its markers name are deleted, then its instant
files, and a ``rollback`` instant (Avro plan and metadata) records what happened, so Hudi tools
see the same history a Java writer would leave.

Table version 8+ (timeline layout 2): every log file is written by one delta commit and named with
its instant (Hudi 1.x's ``HoodieAppendHandle``), so undoing that delta commit deletes its log files
like base files, without reading them and without a rollback command block, as Hudi 1.x's
``MarkerBasedRollbackStrategy``/``RollbackHelper`` do for version 8+ tables. Log files named with
another instant (written in version 6 before an upgrade) are handled as in version 6.

The rollback instant completes through the ``complete`` step the caller hands over: the data
table's commit point (which applies it to the metadata table first), or the metadata table's own
plain completion when it undoes its own delta commits.
"""

from __future__ import annotations

import posixpath
import time

from pyhudi.errors import HudiError
from pyhudi.io.file_names import log_file_name, parse_base_file, parse_log_file, relative_path
from pyhudi.io.log_format import read_log_file, rollback_block
from pyhudi.storage import Storage
from pyhudi.timeline.avro_records import ROLLBACK_METADATA, ROLLBACK_PLAN, read_record, write_record
from pyhudi.timeline.completion import Complete
from pyhudi.timeline.instant import ROLLBACK, Instant, State, new_instant_time
from pyhudi.timeline.timeline import META_FOLDER, Timeline, family
from pyhudi.transaction.heartbeat import HeartbeatPolicy, heartbeat_path, live_instants
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
                stats = timeline.commit_metadata(source).write_stats()
                written = {s.path for s in stats if s.path} | {p for s in stats for p in (s.cdcStats or {})}
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
        elif (cdc := parse_log_file(info.name)) is not None and cdc.cdc and cdc.base_instant == instant.timestamp:
            found.append(rel)  # the instant's change data file (named with the instant that wrote it)
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


def _split(storage: Storage, files: list[str], gone: frozenset[str], *,
           per_instant: bool = False) -> tuple[list[str], list[str]]:
    """(files to delete, log files to neutralise): a log file holding only blocks of ``gone``
    instants can go; one with other blocks too keeps them and gets a rollback command block.

    ``per_instant`` (table version 8+): a log file named with a ``gone`` instant was written by it
    alone, so it goes without being read."""
    keep_logs = []
    for rel in files:
        parsed = parse_log_file(posixpath.basename(rel))
        if parsed is None or (per_instant and parsed.base_instant in gone):
            continue
        if not _only_blocks_of(storage, rel, gone):
            keep_logs.append(rel)
    keep_logs.sort()
    return [rel for rel in files if rel not in keep_logs], keep_logs


def rollback_metadata(rb_time: str, target: str, action: str, *, seconds: float = 0.0,
                      deleted: dict[str, list[str]] | None = None, failed: dict[str, list[str]] | None = None,
                      rollback_logs: dict[str, dict[str, int]] | None = None,
                      failed_logs: dict[str, dict[str, int]] | None = None) -> dict:
    """HoodieRollbackMetadata of one undone instant (per partition: what went, what was neutralised)."""
    deleted, failed = deleted or {}, failed or {}
    rollback_logs, failed_logs = rollback_logs or {}, failed_logs or {}
    partitions = sorted(set(deleted) | set(failed) | set(rollback_logs))
    return {
        "startRollbackTime": rb_time,
        "timeTakenInMillis": int(seconds * 1000),
        "totalFilesDeleted": sum(len(v) for v in deleted.values()),
        "commitsRollback": [target],
        "partitionMetadata": {
            p: {"partitionPath": p, "successDeleteFiles": deleted.get(p, []),
                "failedDeleteFiles": failed.get(p, []), "rollbackLogFiles": rollback_logs.get(p, {}),
                "logFilesFromFailedCommit": failed_logs.get(p, {})}
            for p in partitions
        },
        "version": 1,
        "instantsRollback": [{"commitTime": target, "action": action}],
    }


def undo_instant(storage: Storage, timeline: Timeline, instant: Instant, rb_time: str, *,
                 disposable: frozenset[str] = frozenset(),
                 split: tuple[list[str], list[str]] | None = None) -> dict:
    """Undo what ``instant`` wrote and drop it from the timeline; returns its HoodieRollbackMetadata.

    Base files it wrote are deleted. A log file it created holds only its blocks and is deleted
    too; a log file it appended to keeps the earlier blocks, and a rollback command block (in the
    slice's next log file, as Hudi writes it) tells every reader to skip the failed instant's.
    ``disposable`` names other instants going away with this one (a restore): a log file holding
    only their blocks is deleted rather than neutralised. ``split`` is the division into files to
    delete and logs to neutralise, when the caller made it already (for the rollback plan).
    """
    started = time.monotonic()
    if split is None:
        split = _split(storage, _files_of(storage, timeline, instant), disposable | {instant.timestamp, rb_time},
                       per_instant=timeline.layout_version >= 2)
    files, keep_logs = split
    if instant.is_completed:  # invisible first: a crash from here on leaves a pending write to roll back
        timeline.revert_to_inflight(instant)
    deleted: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    for rel in files:
        storage.discard(rel)  # gone either way (a failure raises): no probe before or after it
        deleted.setdefault(_partition_of(rel), []).append(storage.full(rel))
    rollback_logs: dict[str, dict[str, int]] = {}
    failed_logs: dict[str, dict[str, int]] = {}
    for rel in keep_logs:
        p = _partition_of(rel)
        failed_logs.setdefault(p, {})[storage.full(rel)] = storage.size(rel)
        path, size = _rollback_log(storage, rel, rb_time, instant.timestamp)
        rollback_logs.setdefault(p, {})[path] = size
    timeline.delete_instant(instant.timestamp, instant.action)
    delete_markers(storage, instant.timestamp)
    storage.delete(heartbeat_path(instant.timestamp))
    return rollback_metadata(rb_time, instant.timestamp, instant.action, seconds=time.monotonic() - started,
                             deleted=deleted, failed=failed, rollback_logs=rollback_logs, failed_logs=failed_logs)


def rollback_plan(storage: Storage, instant: Instant, split: tuple[list[str], list[str]]) -> dict:
    """The HoodieRollbackPlan of an instant: files to delete, log files to neutralise."""
    files, keep_logs = split
    by_partition: dict[str, list[str]] = {}
    for rel in files:
        by_partition.setdefault(_partition_of(rel), []).append(rel)
    return {
        "instantToRollback": {"commitTime": instant.timestamp, "action": instant.action},
        "RollbackRequests": [
            {"partitionPath": p, "fileId": "", "latestBaseInstant": "",
             "filesToBeDeleted": [storage.full(r) for r in rels], "logBlocksToBeDeleted": {}}
            for p, rels in sorted(by_partition.items())
        ] + [_log_request(storage, rel) for rel in keep_logs],
        "version": 1,
    }


def rollback_instant(storage: Storage, timeline: Timeline, instant: Instant, *, complete: Complete,
                     utc: bool = False, rb_time: str | None = None) -> str:
    """Roll back one instant (a failed write, or a completed one); returns the rollback instant time
    (``rb_time`` when given: the metadata table names its rollbacks after the data table's).
    ``complete`` completes the rollback instant."""
    rb_time = rb_time or new_instant_time(after=timeline.last_instant_time(), utc=utc)
    split = _split(storage, _files_of(storage, timeline, instant), frozenset([instant.timestamp]),
                   per_instant=timeline.layout_version >= 2)
    timeline.create_requested(rb_time, ROLLBACK, write_record(ROLLBACK_PLAN, rollback_plan(storage, instant, split)))
    timeline.transition_inflight(rb_time, ROLLBACK)
    metadata = undo_instant(storage, timeline, instant, rb_time, split=split)
    complete(timeline, rb_time, ROLLBACK, write_record(ROLLBACK_METADATA, metadata))
    return rb_time


def _planned_target(timeline: Timeline, rollback_time: str) -> tuple[str, str] | None:
    """(commit time, action) a pending rollback's plan undoes; None when it has no plan file."""
    requested = Instant(rollback_time, State.REQUESTED, ROLLBACK)
    if requested not in timeline.instant_files:
        return None
    target = read_record(timeline.read_bytes(requested)).get("instantToRollback") or {}
    return target.get("commitTime") or "", target.get("action") or ""


def finish_pending_rollbacks(storage: Storage, timeline: Timeline, *, complete: Complete) -> list[str]:
    """Complete rollbacks that died midway, from their plans (Hudi re-runs them the same way),
    each through ``complete``."""
    done = []
    for rb in timeline.pending([ROLLBACK]):
        planned = _planned_target(timeline, rb.timestamp)
        if planned is None:
            timeline.delete_instant(rb.timestamp, ROLLBACK)
            continue
        target, action = planned
        left = [i for i in timeline.instants() if i.timestamp == target and family(i.action) == family(action)]
        if left:
            metadata = undo_instant(storage, timeline, left[0], rb.timestamp)
        else:  # its target was undone already; only the record is missing
            metadata = rollback_metadata(rb.timestamp, target, action)
        if not timeline.has_state(rb.timestamp, State.INFLIGHT, ROLLBACK):
            timeline.transition_inflight(rb.timestamp, ROLLBACK)
        # the metadata records of what the interrupted attempt did are lost: rebuild from storage
        complete(timeline, rb.timestamp, ROLLBACK, write_record(ROLLBACK_METADATA, metadata), rebuild=True)
        done.append(rb.timestamp)
    return done


def pending_rollback_targets(timeline: Timeline) -> set[str]:
    """Instant times that pending rollbacks (interrupted, or running now) undo."""
    out = set()
    for rb in timeline.pending([ROLLBACK]):
        try:
            planned = _planned_target(timeline, rb.timestamp)
        except HudiError:  # a plan being written, or gone meanwhile
            continue
        if planned is not None and planned[0]:
            out.add(planned[0])
    return out


def rollback_failed_writes(storage: Storage, timeline: Timeline, *, complete: Complete, utc: bool = False,
                           heartbeat: HeartbeatPolicy | None = None) -> list[str]:
    """Finish interrupted rollbacks, then roll back pending commits, delta commits and replace
    commits (not table services); with ``heartbeat``, only those whose heartbeat expired. Every
    rollback completes through ``complete``."""
    done = finish_pending_rollbacks(storage, timeline, complete=complete)
    pending = timeline.pending_writes()
    live = set(live_instants(storage, pending, heartbeat)) if heartbeat is not None else set()
    for inst in pending:
        if inst not in live:
            done.append(rollback_instant(storage, timeline, inst, complete=complete, utc=utc))
    return done
