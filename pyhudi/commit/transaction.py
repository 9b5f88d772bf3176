"""The life of one write on a table other writers and services may touch at the same time.

:class:`WriteTransaction` brackets a write:

``begin``
    under the table lock: finish interrupted rollbacks, roll back failed writes (EAGER policy:
    pending writes whose heartbeat expired), refuse to start beside a live write in single-writer
    mode, note what is completed (for conflict resolution), start the heartbeat (unless a single
    writer holds the lock for its whole operation), and request an instant later than any on the
    timeline.
``commit``
    through the table's commit point (:meth:`pyhudi.commit.point.CommitPoint.finish`): under the
    lock, check the instant is still this write's pending instant (no other writer rolled it
    back), resolve conflicts under optimistic concurrency control, then complete it. A write that
    fails either check leaves nothing visible and says why.
``abort``
    roll the instant back (under the lock) and stop the heartbeat.

Between the two, files are written without the lock, unless the write runs in single-writer mode
and holds it throughout (:func:`pyhudi.transaction.lock.operation_hold`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pyhudi import config as C
from pyhudi.actions.rollback import (
    finish_pending_rollbacks,
    pending_rollback_targets,
    rollback_failed_writes,
    rollback_instant,
)
from pyhudi.commit.metadata_sync import prepare_metadata_table
from pyhudi.commit.point import CommitPoint, Expect, gone_reason
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiCommitError, HudiConcurrentWriteError, HudiWriteConflictError
from pyhudi.metadata.table import Builder
from pyhudi.plans.clustering import allows_updates, clustering_file_groups, update_refused
from pyhudi.storage import Storage
from pyhudi.table.table import HudiTable
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.instant import REPLACE_COMMIT, Instant, State, new_instant_time
from pyhudi.timeline.timeline import Timeline
from pyhudi.transaction.concurrency import Concurrency
from pyhudi.transaction.conflict import CONFLICT_CHECK_KEY, TimelineSnapshot, find_conflicts
from pyhudi.transaction.heartbeat import Heartbeat, heartbeat_age, live_instants
from pyhudi.transaction.lock import TableLock
from pyhudi.write.markers import list_markers

log = logging.getLogger("pyhudi")

def _describe_live(storage: Storage, live: list[Instant]) -> str:
    parts = []
    for inst in live:
        age = heartbeat_age(storage, inst.timestamp)
        parts.append(f"{inst.action} {inst.timestamp} (heartbeat {age:.0f} s ago)" if age is not None
                     else f"{inst.action} {inst.timestamp}")
    return ", ".join(parts)


class WriteTransaction:
    """One write's instant, from request to completion or rollback."""

    def __init__(self, table: HudiTable, cfg: HudiConfig) -> None:
        self.table = table
        self.cfg = cfg
        self.concurrency = Concurrency.of(cfg)
        self.point = CommitPoint.of(table, cfg)
        # the lock is made now: a set-up under which writers in two processes could both commit
        # (the in-process lock on S3, optimistic concurrency without exclusive creates) fails here
        # (pyhudi.transaction.lock.check_lock_choice), before anything is written
        self.lock: TableLock = self.point.lock
        self.instant: str | None = None
        self.action: str | None = None
        self.start: TimelineSnapshot | None = None
        self.heartbeat: Heartbeat | None = None
        self.rolled_back: list[str] = []
        self.finished = False

    @property
    def timeline(self) -> Timeline:
        return self.table.timeline

    def begin(self, action: str, requested: bytes = b"", *, record_index: Builder | None = None) -> str:
        """Request a new instant of ``action``; returns its time. ``record_index``: how to create
        the metadata table's record index when the write keeps one."""
        storage, conc = self.table.storage, self.concurrency
        # a single writer holding a lock that excludes other processes for its whole operation
        # cannot be rolled back by anyone meanwhile: it needs no heartbeat (Hudi's single writers
        # beat none either); everywhere else the heartbeat says the write is alive
        beats = conc.optimistic or not self.lock.held_for_operation()
        with self.lock.held():
            timeline = self.table.reload().timeline
            if conc.failed_writes == "EAGER":  # writes whose heartbeat expired
                self.rolled_back = rollback_failed_writes(storage, timeline, complete=self.point.complete,
                                                          utc=self.table.config.utc_timeline, heartbeat=conc.heartbeat)
            else:
                self.rolled_back = finish_pending_rollbacks(storage, timeline, complete=self.point.complete)
            live = live_instants(storage, timeline.pending_writes(), conc.heartbeat)
            if live and not conc.optimistic:
                raise HudiConcurrentWriteError(
                    f"another write is in progress on {self.table.path}: {_describe_live(storage, live)}. The table "
                    "is in single-writer mode: wait for that write to finish (a dead writer's heartbeat expires "
                    f"{conc.heartbeat.max_age_s:.0f} s after its last beat and the next writer rolls it back), or "
                    "let writers run side by side with hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL "
                    "on every writer (its failed-writes policy defaults to LAZY)")
            cfg = self.cfg
            prepare_metadata_table(
                self.table, enabled=cfg.get(C.METADATA_ENABLE),
                column_stats_groups=cfg.get(C.METADATA_COLUMN_STATS_FILE_GROUPS)
                if cfg.get(C.METADATA_COLUMN_STATS_ENABLE) else 0,
                bloom_filter_groups=cfg.get(C.METADATA_BLOOM_FILTER_FILE_GROUPS)
                if cfg.get(C.METADATA_BLOOM_FILTER_ENABLE) else 0, record_index=record_index,
                stats_columns=self.point.metadata.stats_columns,
                partition_stats_groups=self.point.metadata.partition_stats_groups)
            self.start = TimelineSnapshot.of(timeline)
            instant = new_instant_time(after=timeline.last_instant_time(), utc=self.table.config.utc_timeline)
            self.heartbeat = Heartbeat(storage, instant, conc.heartbeat).start() if beats else None
            try:
                timeline.create_requested(instant, action, requested)
            except BaseException:
                self._stop_heartbeat()
                raise
        self.instant, self.action = instant, action
        return instant

    def _expect(self) -> Expect:
        """This write's instant, requested or inflight, and no rollback planned against it."""
        assert self.action is not None
        return Expect(self.action, (State.REQUESTED, State.INFLIGHT), self._cannot_commit, watch_rollbacks=True)

    def _cannot_commit(self, timeline: Timeline, reason: str) -> HudiCommitError:
        """The error of a write whose instant is gone, once its late files are rolled back too."""
        self._stop_heartbeat()
        self._undo_late_files(timeline)
        return HudiCommitError(f"write {self.instant} to {self.table.path} cannot commit: {reason}. Nothing "
                               "of it is visible; run the write again")

    def commit(self, meta: CommitMetadata, *, written: Mapping[str, list[WriteStat]] | None = None,
               records: Mapping[str, list[tuple[str, dict]]] | None = None,
               files: Iterable[str] | None = None) -> None:
        """Complete the instant with ``meta``: the single step that makes the write visible.
        ``written``: metadata-table files executors wrote for it (the record index's log files);
        ``records``: metadata-table records executors computed for it (log files' statistics);
        ``files``: the data files its statistics name (other marked files are failed attempts).
        The post-commit hooks run later (:meth:`after_commit`), so the commit is timed alone."""
        assert self.instant is not None and self.action is not None and self.start is not None
        self.point.finish(self.instant, self.action, meta, expect=self._expect(),
                          check=lambda timeline: self._check(timeline, meta), files=files, written=written,
                          records=records, hooks=False)
        self.finished = True
        self._stop_heartbeat()

    def after_commit(self) -> dict[str, Any]:
        """Run the post-commit hooks registered on the commit point; their figures."""
        assert self.instant is not None and self.finished
        return self.point.run_hooks(self.instant)

    def _check(self, timeline: Timeline, meta: CommitMetadata) -> None:
        """Under the lock, before completion: no clustered file group written, and (optimistic
        concurrency control) no conflict with what completed since the write started."""
        assert self.start is not None and self.instant is not None
        conc = self.concurrency
        self._refuse_clustered_groups(timeline, meta)
        if not conc.optimistic:
            return
        check = find_conflicts(timeline, self.start, self.instant, meta.touched_file_groups(),
                               replaced=meta.replaced_file_groups(), by_bucket=conc.by_bucket)
        if check.conflicts:
            try:
                self.abort()
            except Exception:  # the next writer rolls it back; the conflict is what to report
                log.exception("could not roll back conflicting write %s", self.instant)
            raise HudiWriteConflictError(
                f"write {self.instant} to {self.table.path} conflicts with "
                + "; ".join(c.describe() for c in check.conflicts)
                + ", which completed (or was planned) after it started. It was rolled back and the table "
                "is as the other writer left it; run the write again")
        meta.extra_metadata[CONFLICT_CHECK_KEY] = json.dumps(check.summary(conc.mode), sort_keys=True)

    def _refuse_clustered_groups(self, timeline: Timeline, meta: CommitMetadata) -> None:
        """No write may commit into a file group a clustering retired while it ran (the clustering
        rewrote the group without the write's change), nor, under Hudi's reject update strategy, into
        one a pending clustering rewrites. The write checked the pending plans before writing
        (:func:`pyhudi.services.clustering.guard_updates`, from :mod:`pyhudi.spark.planned_write`);
        plans made since are checked here. Such a write is rolled back."""
        clustered = {} if allows_updates(self.cfg) else clustering_file_groups(timeline)
        assert self.start is not None
        for inst in timeline.completed_writes():  # completed since this write started: its groups are gone
            if inst.action == REPLACE_COMMIT and inst.timestamp not in self.start.completed \
                    and timeline.is_clustering(inst):
                clustered.update(dict.fromkeys(timeline.commit_metadata(inst).replaced_file_groups(), inst.timestamp))
        hit = sorted(meta.touched_file_groups() & set(clustered)) if clustered else []
        if not hit:
            return
        try:
            self.abort()
        except Exception:  # the next writer rolls it back; the refusal is what to report
            log.exception("could not roll back write %s", self.instant)
        assert self.instant is not None
        raise update_refused(self.instant, self.table.path, hit, [clustered[g] for g in hit], written=True)

    def _undo_late_files(self, timeline: Timeline) -> None:
        """Files written after another writer rolled this instant back (its markers were deleted
        with it, so any marker now names such a file): roll them back too, or an archival that
        moves the timeline past this instant time would make them look committed."""
        assert self.instant is not None and self.action is not None
        if list_markers(self.table.storage, self.instant) and self.instant not in pending_rollback_targets(timeline):
            rollback_instant(self.table.storage, timeline, Instant(self.instant, State.INFLIGHT, self.action),
                             complete=self.point.complete, utc=self.table.config.utc_timeline)

    def abort(self) -> None:
        """Roll back the instant if it is still pending (idempotent); never raises for a missing one."""
        if self.finished or self.instant is None:
            self._stop_heartbeat()
            return
        try:
            with self.lock.held():
                timeline = self.timeline.reload()
                if gone_reason(timeline, self.instant, self._expect()) is None:
                    rollback_instant(self.table.storage, timeline, timeline.find(self.instant),
                                     complete=self.point.complete, utc=self.table.config.utc_timeline)
                self.finished = True
        finally:
            self._stop_heartbeat()

    def _stop_heartbeat(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None
