"""Undoing completed commits: rollback of the latest commit, and restore to a savepoint.

``rollback`` takes back the latest completed write (a commit, delta commit, replace commit or
compaction), leaving the table as it was before it; only the latest, because a later commit may
have built on the files an earlier one wrote. ``restore`` rolls back every instant after a
savepoint, newest first, in one ``restore`` instant: Hudi records the rollbacks inside the
HoodieRestoreMetadata instead of as separate rollback instants, so the timeline shows one action.

Both refuse to run when the result would not be whole: the files the table returns to must
still exist (the cleaner may have removed the previous version of a file group; a savepoint
protects its snapshot, which is why restore goes to savepoints only).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyhudi.actions.rollback import rollback_failed_writes, rollback_instant, undo_instant
from pyhudi.commit.point import CommitPoint
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiConcurrentWriteError, HudiInstantNotFoundError, HudiRestoreError, HudiRetentionError
from pyhudi.io.file_names import slice_key
from pyhudi.plans.compaction import pending_compactions
from pyhudi.plans.savepoint import list_savepoints
from pyhudi.table.table import HudiTable
from pyhudi.timeline.archive import archived_timeline, has_archive
from pyhudi.timeline.avro_records import RESTORE_METADATA, RESTORE_PLAN, read_record, write_record
from pyhudi.timeline.instant import (
    CLEAN,
    COMPACTION,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    State,
    new_instant_time,
)
from pyhudi.timeline.timeline import DATA_ACTIONS
from pyhudi.transaction.heartbeat import HeartbeatPolicy, live_instants
from pyhudi.transaction.lock import under_table_lock

log = logging.getLogger("pyhudi")


@dataclass(frozen=True)
class RestoreResult:
    instant: str
    savepoint: str
    rolled_back: tuple[str, ...]
    files_deleted: int
    seconds: float


def _check_previous_versions(table: HudiTable, instant: Instant) -> None:
    """What the table returns to must still exist: the slice every rewritten file group had before
    the commit, and the latest slice of every group a replace commit retired."""
    meta = table.timeline.commit_metadata(instant)
    listings: dict[str, list[str]] = {}

    def names(part: str) -> list[str]:
        if part not in listings:
            listings[part] = [info.name for info in table.storage.list_files(part)]
        return listings[part]

    def has_slice(part: str, fid: str, base: str | None) -> bool:
        keys = (slice_key(n) for n in names(part))
        return any(k is not None and k[0] == fid and (base is None or k[1] == base) for k in keys)

    for stat in meta.write_stats():
        prev = stat.prevCommit
        if stat.is_log or prev in (None, "", "null"):
            continue
        if not has_slice(stat.partitionPath, stat.fileId, prev):
            raise HudiRetentionError(
                f"cannot roll back {instant.timestamp}: the version of file group {stat.fileId} in partition "
                f"'{stat.partitionPath}' it replaced (written at {prev}) was cleaned, so its records would be lost. "
                "Restore to a savepoint instead, or keep more versions (hoodie.clean.commits.retained)")
    for part, ids in (meta.partition_to_replace_file_ids or {}).items():
        for fid in ids:
            if not has_slice(part, fid, None):
                raise HudiRetentionError(
                    f"cannot roll back {instant.timestamp}: file group {fid} of partition '{part}', which it "
                    "replaced, was cleaned since, so the rollback would lose its records. Restore to a savepoint "
                    "instead")


def _refuse_beside_live_writes(table: HudiTable, what: str, cfg: HudiConfig | None) -> HeartbeatPolicy:
    """Undoing commits under a running write or compaction would pull the ground from under it."""
    policy = HeartbeatPolicy.of(cfg or HudiConfig())
    live = live_instants(table.storage, table.timeline.pending((*WRITE_ACTIONS, COMPACTION)), policy)
    if live:
        raise HudiConcurrentWriteError(f"cannot {what} while writes {', '.join(i.timestamp for i in live)} "
                                       f"are in progress on "
                                       f"{table.path}; wait for them to finish")
    return policy


@under_table_lock
def rollback_commit(table: HudiTable, instant: str | None = None, *, cfg: HudiConfig | None = None) -> str:
    """Roll back the latest completed write (``instant`` must name it, if given); returns the rollback instant."""
    table.check_writable("rollback")
    timeline = table.timeline.reload()
    policy = _refuse_beside_live_writes(table, "roll back a commit", cfg)
    point = CommitPoint.of(table, cfg)
    rollback_failed_writes(table.storage, timeline, complete=point.complete, utc=table.config.utc_timeline,
                           heartbeat=policy)
    writes = timeline.completed_writes()
    if not writes:
        raise HudiInstantNotFoundError(f"{table.path} has no completed commit to roll back")
    latest = writes[-1]
    if instant is not None and instant != latest.timestamp:
        timeline.find(instant)  # not found at all: that error
        newer = [w.timestamp for w in writes if w.timestamp > instant]
        raise HudiRestoreError(f"only the latest commit can be rolled back; {instant} is followed by "
                               f"{', '.join(newer)}. Roll those back first, or restore to a savepoint")
    if any(s.timestamp == latest.timestamp for s in timeline.completed([SAVEPOINT])):
        raise HudiRestoreError(f"commit {latest.timestamp} has a savepoint; delete it first "
                               f"(`pyhudi savepoint delete --instant {latest.timestamp}`)")
    later = [c.timestamp for c in pending_compactions(timeline) if c.timestamp > latest.timestamp]
    if later:
        raise HudiRestoreError(f"compaction {later[0]} was planned on top of {latest.timestamp}; run it and roll "
                               "it back first, or restore to a savepoint")
    cleaning = timeline.pending([CLEAN])
    if cleaning:
        raise HudiRestoreError(f"clean {cleaning[0].timestamp} is unfinished and may delete the version a rollback "
                               "returns to; finish it first (`pyhudi clean`), then roll back")
    _check_previous_versions(table, latest)
    done = rollback_instant(table.storage, timeline, latest, complete=point.complete, utc=table.config.utc_timeline)
    log.info("rolled back %s %s as %s", latest.action, latest.timestamp, done)
    return done


def archived_writes_after(table: HudiTable, instant: str) -> list[str]:
    if not has_archive(table.storage):
        return []
    archived = archived_timeline(table.storage)  # archive log files (v6) or the LSM history (v8, v9)
    return [i.timestamp for i in archived.completed_writes() if i.timestamp > instant]


def missing_savepoint_files(table: HudiTable, savepoint: str) -> list[str]:
    saved = next(s for s in list_savepoints(table.timeline) if s.instant == savepoint)
    missing: list[str] = []
    for part, names in saved.files.items():
        present = {info.name for info in table.storage.list_files(part)}
        missing.extend(f"{part}/{n}" if part else n for n in names if n not in present)
    return missing


def pending_restore(table: HudiTable) -> tuple[str, str] | None:
    """(restore instant, savepoint) of a restore that has not completed."""
    for inst in table.timeline.pending([RESTORE]):
        requested = Instant(inst.timestamp, State.REQUESTED, RESTORE)
        if requested in table.timeline.instant_files:
            plan = read_record(table.timeline.read_bytes(requested))
            return inst.timestamp, plan.get("savepointToRestoreTimestamp") or ""
    return None


@under_table_lock
def restore(table: HudiTable, savepoint: str, *, cfg: HudiConfig | None = None) -> RestoreResult:
    """Return the table to savepoint ``savepoint``: every data instant after it is rolled back.

    A restore that died midway is finished by the next call (for the same savepoint); writes are
    refused until then.
    """
    table.check_writable("restore")
    started = time.monotonic()
    timeline = table.timeline.reload()
    _refuse_beside_live_writes(table, "restore", cfg)
    unfinished = pending_restore(table)
    if unfinished is not None and unfinished[1] != savepoint:
        raise HudiRestoreError(f"restore {unfinished[0]} to savepoint {unfinished[1]} is unfinished; finish it first "
                               f"(`pyhudi restore --instant {unfinished[1]}`)")
    if not any(s.timestamp == savepoint for s in timeline.completed([SAVEPOINT])):
        raise HudiInstantNotFoundError(f"there is no savepoint at {savepoint}; restore goes to a savepoint "
                                       "(`pyhudi savepoint list`, `pyhudi savepoint create`)")
    if archived_writes_after(table, savepoint):
        raise HudiRestoreError(f"commits after savepoint {savepoint} were archived (hoodie.archive.beyond.savepoint)"
                               "; their rollback metadata is gone, so the table cannot be restored to it")
    missing = missing_savepoint_files(table, savepoint)
    if missing:
        raise HudiRestoreError(f"savepoint {savepoint} lists files that no longer exist ({', '.join(missing[:3])}"
                               f"{'...' if len(missing) > 3 else ''}); restoring would not bring its snapshot back")
    later = [s.timestamp for s in timeline.completed([SAVEPOINT]) if s.timestamp > savepoint]
    if later:
        raise HudiRestoreError(f"savepoints {', '.join(later)} are newer than {savepoint}; restoring would roll back "
                               "savepointed commits. Delete them first (`pyhudi savepoint delete --instant T`)")
    doomed = [i for i in timeline.instants() if i.action in DATA_ACTIONS and i.timestamp > savepoint]
    doomed.sort(key=lambda i: i.timestamp, reverse=True)
    infos = [{"commitTime": i.timestamp, "action": i.action} for i in doomed]
    unfinished = pending_restore(table)
    if unfinished is not None:  # a restore that died midway: finish it under its own instant
        instant = unfinished[0]
    else:
        instant = new_instant_time(after=timeline.last_instant_time(), utc=table.config.utc_timeline)
        timeline.create_requested(instant, RESTORE, write_record(
            RESTORE_PLAN, {"savepointToRestoreTimestamp": savepoint, "instantsToRollback": infos, "version": 2}))
    if not timeline.has_state(instant, State.INFLIGHT, RESTORE):
        timeline.transition_inflight(instant, RESTORE)
    per_instant: dict[str, list[dict]] = {}
    deleted = 0
    disposable = frozenset(i.timestamp for i in doomed)
    for inst in doomed:
        meta = undo_instant(table.storage, timeline, inst, instant, disposable=disposable)
        per_instant[inst.timestamp] = [meta]
        deleted += int(meta["totalFilesDeleted"])
    for rb in timeline.instants():  # as Hudi: rollbacks after the savepoint go with what they rolled back
        if rb.action == ROLLBACK and rb.timestamp > savepoint:
            timeline.delete_instant(rb.timestamp, ROLLBACK)
    seconds = time.monotonic() - started
    metadata = {
        "startRestoreTime": instant,
        "timeTakenInMillis": int(seconds * 1000),
        "instantsToRollback": [i.timestamp for i in doomed],
        "hoodieRestoreMetadata": per_instant,
        "version": 1,
        "restoreInstantInfo": infos,
    }
    CommitPoint.of(table, cfg).complete(timeline, instant, RESTORE, write_record(RESTORE_METADATA, metadata))
    log.info("restored %s to savepoint %s: rolled back %d instants", table.path, savepoint, len(doomed))
    return RestoreResult(instant, savepoint, tuple(i.timestamp for i in doomed), deleted, seconds)
