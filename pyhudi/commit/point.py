"""The commit point: the one place where a data-table instant completes.

A :class:`CommitPoint` is built once per operation from the options and the table
(:meth:`CommitPoint.of`), so every instant that operation completes (its own, and the rollbacks
and cleans it runs on the way) passes the same metadata-table settings
(:class:`~pyhudi.commit.metadata_sync.MetadataOptions`). It offers two entry points:

:meth:`~CommitPoint.finish`
    for an instant whose files were written outside the lock (a write, a compaction, a
    clustering): stray files of failed tasks removed, then under the table lock the timeline
    reloaded, the instant checked to be still pending (no other process completed or rolled it
    back), the caller's checks (conflicts), the metadata-table delta commit and the completion;
    then its markers deleted and, the lock released, the post-commit hooks run.
:meth:`~CommitPoint.complete`
    the bare completion step (metadata-table delta commit, then the instant), for actions that run
    wholly under the lock (cleans, rollbacks, restores, savepoints). It has the shape of
    :class:`~pyhudi.timeline.completion.Complete`, so actions below this package take it as a
    parameter and never import it.

Post-commit hooks (the writer's inline compaction, clustering, clean and archival) are callables
the layer above registers (:meth:`~CommitPoint.add_hook`): this package imports neither Spark nor
the services.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyhudi.actions.rollback import pending_rollback_targets
from pyhudi.commit.metadata_sync import MetadataOptions, complete_instant
from pyhudi.config import HudiConfig
from pyhudi.metadata.convert import Record
from pyhudi.metadata.table import Builder
from pyhudi.table.table import HudiTable
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.instant import Instant, State
from pyhudi.timeline.timeline import Timeline
from pyhudi.transaction.lock import TableLock
from pyhudi.write.markers import delete_markers, list_markers, remove_stray_files

log = logging.getLogger("pyhudi")

#: runs after an instant completed and the lock is released; returns figures for the caller's report
PostCommit = Callable[[str], Mapping[str, Any]]
#: a check under the lock before completion (conflicts): raises to refuse the commit
Check = Callable[[Timeline], None]


@dataclass(frozen=True)
class Expect:
    """What :meth:`CommitPoint.finish` expects pending, and what it raises when it is not.

    ``action`` and ``states``: the pending instant files one of which must still be there (a
    write: requested or inflight; a compaction or clustering: inflight). ``watch_rollbacks``: a
    rollback planned against the instant counts as gone too (another writer found the write's
    heartbeat expired). ``refuse(timeline, reason)`` builds the error to raise, tidying up first
    where the caller must (late files, the heartbeat)."""

    action: str
    states: tuple[State, ...]
    refuse: Callable[[Timeline, str], BaseException]
    watch_rollbacks: bool = False


def gone_reason(timeline: Timeline, instant: str, expect: Expect) -> str | None:
    """Why ``instant`` can no longer complete (None if it can)."""
    if timeline.is_completed(instant):
        return "it is completed already"
    if not any(timeline.has_state(instant, state, expect.action) for state in expect.states):
        return "another writer rolled it back (its heartbeat had expired)"
    if expect.watch_rollbacks and instant in pending_rollback_targets(timeline):
        return "another writer is rolling it back (its heartbeat had expired)"
    return None


class CommitPoint:
    """Completes the instants of one table with one set of options."""

    def __init__(self, table: HudiTable, cfg: HudiConfig, lock: TableLock | None) -> None:
        self.table = table
        self.cfg = cfg
        self._lock = lock
        self.metadata = MetadataOptions.of(cfg)
        self.hooks: list[PostCommit] = []

    @classmethod
    def of(cls, table: HudiTable, cfg: HudiConfig | None = None, *, lock: TableLock | None = None) -> CommitPoint:
        """The commit point of ``table`` for the options ``cfg`` (defaults when None: a service
        run without options); ``lock``: the table lock the caller uses already, if any."""
        return cls(table, cfg or HudiConfig(), lock)

    @property
    def lock(self) -> TableLock:
        """The table lock :meth:`finish` takes, made on first use: actions that only
        :meth:`complete` run under a lock their caller holds."""
        if self._lock is None:
            self._lock = TableLock(self.table.storage, self.cfg)
        return self._lock

    def add_hook(self, hook: PostCommit) -> None:
        """Run ``hook`` after each instant :meth:`finish` completes, in the order added."""
        self.hooks.append(hook)

    def complete(self, timeline: Timeline, instant: str, action: str, content: bytes, *,
                 rebuild: bool = False, written: Mapping[str, list[WriteStat]] | None = None,
                 records: Mapping[str, list[Record]] | None = None,
                 record_index: Builder | None = None) -> Instant:
        """Apply the action to the metadata table with this point's options, then complete it
        (the caller holds the table lock, and it must still be surely held: a lapsed lease
        refuses). ``rebuild``, ``written``, ``records``, ``record_index``: as
        :func:`~pyhudi.commit.metadata_sync.complete_instant` takes them."""
        self.lock.verify()
        return complete_instant(self.table.storage, timeline, instant, action, content, options=self.metadata,
                                rebuild=rebuild, written=written, records=records, record_index=record_index)

    def finish(self, instant: str, action: str, content: CommitMetadata | bytes, *, expect: Expect,
               check: Check | None = None, files: Iterable[str] | None = None,
               written: Mapping[str, list[WriteStat]] | None = None,
               records: Mapping[str, list[Record]] | None = None, hooks: bool = True) -> Instant:
        """Complete ``instant`` as ``action`` with ``content`` (commit metadata is encoded after
        ``check``, which may add to its extra metadata).

        ``files``: the files the instant's statistics name; other files its markers name are
        failed task attempts, removed first. ``check``: the caller's checks under the lock, after
        the still-pending check. ``written``/``records``: metadata-table files and records
        executors made for the instant. ``hooks``: run the post-commit hooks now (a write runs
        them itself, once its commit phase is timed: :meth:`run_hooks`)."""
        storage = self.table.storage
        markers = None
        if files is not None:
            markers = list_markers(storage, instant)
            remove_stray_files(storage, instant, files, markers=markers)
        with self.lock.held():
            timeline = self.table.timeline.reload()
            reason = gone_reason(timeline, instant, expect)
            if reason is not None:
                raise expect.refuse(timeline, reason)
            if check is not None:
                check(timeline)
            data = content.to_json().encode("utf-8") if isinstance(content, CommitMetadata) else content
            done = self.complete(timeline, instant, action, data, written=written, records=records)
        delete_markers(storage, instant, markers=markers)
        if hooks:
            self.run_hooks(instant)
        return done

    def run_hooks(self, instant: str) -> dict[str, Any]:
        """Run the post-commit hooks after ``instant`` completed; their figures, merged."""
        out: dict[str, Any] = {}
        for hook in self.hooks:
            out.update(hook(instant))
        return out
