"""Instants: the (time, action, state) triples that make up a Hudi timeline, and their file names.

Table version 6 keeps every state of an instant as its own file in ``.hoodie/``:
``T.commit.requested`` -> ``T.inflight`` -> ``T.commit``. Version 8 moves the active timeline to
``.hoodie/timeline/`` and names completed instants ``T_completion.action``. Instant times are
17-digit ``yyyyMMddHHmmssSSS`` strings, so string order is time order; reading and writing them
as text is :mod:`pyhudi.instant_time`, issuing new ones is :func:`new_instant_time` here.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import re
import threading
from dataclasses import dataclass

from pyhudi.instant_time import format_instant, parse_instant_time

COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
REPLACE_COMMIT = "replacecommit"
CLEAN = "clean"
ROLLBACK = "rollback"
SAVEPOINT = "savepoint"
RESTORE = "restore"
COMPACTION = "compaction"
LOG_COMPACTION = "logcompaction"
INDEXING = "indexing"
SCHEMA_COMMIT = "schemacommit"
CLUSTERING = "clustering"

ACTIONS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLEAN, ROLLBACK, SAVEPOINT, RESTORE, COMPACTION,
           LOG_COMPACTION, INDEXING, SCHEMA_COMMIT, CLUSTERING)
#: Actions whose completed instants make data files visible.
WRITE_ACTIONS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)
#: Pending actions that complete under another action's name.
COMPLETES_AS = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT, CLUSTERING: REPLACE_COMMIT}


class State(enum.IntEnum):
    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


@dataclass(frozen=True, order=True)
class Instant:
    """One state of one instant. Sorted by time, then state."""

    timestamp: str
    state: State
    action: str
    completion_time: str | None = None

    @property
    def is_completed(self) -> bool:
        return self.state == State.COMPLETED

    def file_name(self, layout_version: int = 1) -> str:
        """The timeline file name of this instant state."""
        if self.state == State.REQUESTED:
            return f"{self.timestamp}.{self.action}.requested"
        if self.state == State.INFLIGHT:
            if self.action == COMMIT:  # both layouts: a commit's inflight file is ``T.inflight``
                return f"{self.timestamp}.inflight"
            return f"{self.timestamp}.{self.action}.inflight"
        if layout_version >= 2:
            return f"{self.timestamp}_{self.completion_time}.{self.action}"
        return f"{self.timestamp}.{self.action}"

    def with_state(self, state: State, action: str | None = None) -> Instant:
        return Instant(self.timestamp, state, action or self.action)

    def __str__(self) -> str:
        return f"[{self.timestamp}__{self.action}__{self.state.name}]"


_NAME = re.compile(r"^(\d{14,23})(?:_(\d{14,17}))?\.([a-z]+)(?:\.(requested|inflight))?$")


@functools.lru_cache(maxsize=8192)
def parse_instant_file(name: str) -> Instant | None:
    """Parse a timeline file name (v6 or v8 form); None for anything else in the folder. Instants
    are immutable, and a writer lists the same timeline files a dozen times a commit, so each name
    is parsed once."""
    m = _NAME.match(name)
    if not m:
        return None
    ts, completion, action, suffix = m.groups()
    if action == "inflight" and suffix is None:  # v6 COW "T.inflight"
        return Instant(ts, State.INFLIGHT, COMMIT)
    if action not in ACTIONS:
        return None
    if suffix == "requested":
        return Instant(ts, State.REQUESTED, action)
    if suffix == "inflight":
        return Instant(ts, State.INFLIGHT, action)
    return Instant(ts, State.COMPLETED, action, completion)


# ---------------------------------------------------------------------------------------------
# Instant time generation
# ---------------------------------------------------------------------------------------------
_lock = threading.Lock()
_last_issued = ""


def new_instant_time(*, after: str | None = None, utc: bool = False) -> str:
    """A fresh instant time, strictly greater than ``after`` and than any issued by this process.

    Hudi guarantees unique, increasing instants by waiting for the clock; we step one millisecond
    past the largest known instant instead, which keeps two writes in the same millisecond apart
    without sleeping.
    """
    global _last_issued
    with _lock:
        now = dt.datetime.now(dt.timezone.utc) if utc else dt.datetime.now()
        candidate = format_instant(now.replace(tzinfo=None))
        floor = max(after or "", _last_issued)
        if candidate <= floor:
            candidate = format_instant(parse_instant_time(floor[:17].ljust(17, "0"))
                                       + dt.timedelta(milliseconds=1))
        _last_issued = candidate
        return candidate
