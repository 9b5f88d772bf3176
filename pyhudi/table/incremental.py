"""Planning incremental queries: which commits a pull covers and which file groups it must read.

An incremental pull over ``(begin, end]`` returns, for every record written by a commit in that
range, its state as of ``end``: the snapshot at ``end`` restricted to ``_hoodie_commit_time`` in the
range. Every such record lives in a file group that one of those commits wrote, so the commit
metadata of the range names all the file groups to read; the rest of the table is never listed.
Late data needs no special case: a commit that writes an old event time into an old partition
names that partition's file group in its metadata like any other.

Which commits a range holds depends on the timeline layout. In layout 1 (table version 6) the
range is of instant (requested) times. In layout 2 (versions 8 and 9) it is of *completion* times,
as in Hudi 1.x: ``(begin, end]`` holds the writes that completed after ``begin`` and by ``end``,
and a stream that reads up to the newest completion time cannot miss a write still in flight (it
will complete later), so layout 2 has no timeline holes. Records are then those whose
``_hoodie_commit_time`` is one of the range's instants, read as of what had completed by ``end``.

When the range cannot be served exactly (its commits were archived, so their metadata is gone, or
the cleaner removed file slices the snapshot at ``end`` needs) the pull fails with a
:class:`HudiRetentionError`, or, with ``hoodie.datasource.read.incr.fallback.fulltablescan.enable``,
falls back as Hudi does to scanning the latest snapshot and filtering on the commit time.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyhudi.errors import HudiConfigError, HudiRetentionError
from pyhudi.instant_time import parse_query_instant
from pyhudi.read.retention import Retention
from pyhudi.table.fs_view import completion_of
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import Instant
from pyhudi.timeline.lsm_history import LSMHistory, has_history

#: Hudi's spelling of "from the beginning of the timeline"
EARLIEST = "00000000000000000"


def parse_begin(value: object) -> str:
    text = str(value).strip()
    if text.strip("0") == "" or text.lower() == "earliest":
        return EARLIEST
    return parse_query_instant(text)


@dataclass(frozen=True)
class IncrementalPlan:
    """The commits of one pull and what to read for them."""

    begin: str  # exclusive
    end: str  # inclusive: the last completed write in the range, or the requested end
    instants: tuple[str, ...]
    file_groups: frozenset[tuple[str, str]]  # (partition path, file id)
    full_scan_reason: str | None = None
    snapshot: bool = False  # from the beginning: every file group of the snapshot as of ``end``
    by_completion: bool = False  # begin and end are completion times (timeline layout 2)

    @property
    def partitions(self) -> list[str]:
        return sorted({p for p, _ in self.file_groups})


def plan_incremental(table: HudiTable, begin: object, end: object | None = None, *,
                     fallback: bool = False, holes: str = "FAIL") -> IncrementalPlan:
    """The plan of an incremental pull; raises when the range cannot be read exactly (no fallback)."""
    if begin is None:
        raise HudiConfigError("an incremental query needs hoodie.datasource.read.begin.instanttime "
                              "(an instant time, exclusive; 000 for everything)")
    if not table.config.populate_meta_fields:
        raise HudiConfigError(f"{table.path} does not store _hoodie_commit_time (hoodie.populate.meta.fields="
                              "false), so it cannot be read incrementally; use a snapshot or time travel query")
    start = parse_begin(begin)
    by_completion = table.timeline.layout_version >= 2
    writes = writes_before_hole(table, holes, "a pull now could miss its records")
    if by_completion:
        writes = sorted([*writes, *_archived_writes(table, start, writes)], key=_when)
    stop = parse_query_instant(end) if end is not None else max(_when(writes[-1]) if writes else start, start)
    if stop < start:
        raise HudiConfigError(f"hoodie.datasource.read.end.instanttime {stop} is before the begin instant {start}")
    in_range = [w for w in writes if start < _when(w) <= stop]
    first_active = table.timeline.first_data_instant_time()
    retention = Retention(table.storage, table.timeline)
    # the snapshot the records are read from: what had completed by ``stop`` (layout 2), i.e. no
    # write requested after the newest one in range (layout 1)
    snapshot_at = max((w.timestamp for w in in_range), default=start) if by_completion else stop
    archived = retention.archived or retention.lsm_history is not None
    reason = None
    if archived and first_active is not None and start < first_active and start != EARLIEST:
        reason = (f"begin instant {start} is older than the active timeline (it starts at {first_active}); "
                  "the commits after it were archived")
    elif archived and start == EARLIEST:
        # every record's commit is at or before ``stop``: the pull is the snapshot as of ``stop``,
        # which needs no commit metadata (a new stream of a long-lived table starts here)
        try:
            retention.check(snapshot_at, purpose="incremental pull")
        except HudiRetentionError as exc:
            reason = str(exc)
        else:
            return IncrementalPlan(start, stop, tuple(w.timestamp for w in in_range), frozenset(), snapshot=True,
                                   by_completion=by_completion)
    groups: set[tuple[str, str]] = set()
    if reason is None:
        for inst in in_range:
            for stat in table.timeline.commit_metadata(inst).write_stats():
                if stat.fileId:
                    groups.add((stat.partitionPath, stat.fileId))
        try:
            retention.check(snapshot_at, file_groups=groups, purpose="incremental pull")
        except HudiRetentionError as exc:
            reason = str(exc)
    if reason is not None and not fallback:
        raise HudiRetentionError(
            f"cannot pull ({start}, {stop}] incrementally: {reason}. Start from a later instant, or set "
            "hoodie.datasource.read.incr.fallback.fulltablescan.enable=true to scan the latest snapshot "
            "(records rewritten after the range are then left out)")
    return IncrementalPlan(start, stop, tuple(w.timestamp for w in in_range), frozenset(groups), reason,
                           by_completion=by_completion)


def _archived_writes(table: HudiTable, start: str, active: list[Instant]) -> list[Instant]:
    """Layout 2: the writes archived into the LSM history, with their completion times, when the
    pull begins before the active timeline, so that the range (and a full-scan fallback's filter on
    its instants) counts the archived writes that completed after ``start``."""
    first = table.timeline.first_data_instant_time()
    if first is None or start >= first or not has_history(table.storage):
        return []
    known = {w.timestamp for w in active}
    return [w for w in LSMHistory(table.storage).completed_writes() if w.timestamp not in known]


def _when(write: Instant) -> str:
    """Where a completed write falls on the axis of incremental ranges (see the module docstring)."""
    return completion_of(write.timestamp, write.completion_time)


def writes_before_hole(table: HudiTable, holes: str, risk: str) -> list[Instant]:
    """The completed writes a query of changes may read: all of them, or those before the first
    pending write that later commits passed (``holes``: BLOCK); FAIL refuses the query then, ``risk``
    saying what it could miss."""
    writes = table.timeline.completed_writes()
    hole = first_hole(table)
    if hole is None:
        return writes
    if holes == "FAIL":
        raise HudiConfigError(
            f"write {hole} is still pending while later commits completed (a hole in the timeline): {risk} when it "
            "completes. Retry after it completes or is rolled back, or set "
            "hoodie.read.timeline.holes.resolution.policy=BLOCK to read only up to it")
    return [w for w in writes if w.timestamp < hole]


def first_hole(table: HudiTable) -> str | None:
    """The first pending write that completed writes follow, if any (none in timeline layout 2,
    whose ranges are of completion times: a pending write completes after every completed one)."""
    if table.timeline.layout_version >= 2:
        return None
    pending = [i.timestamp for i in table.timeline.pending_writes()]
    if not pending:
        return None
    writes = table.timeline.completed_writes()
    return pending[0] if writes and writes[-1].timestamp > pending[0] else None


def latest_offset(table: HudiTable) -> str:
    """How far a stream of the table's commits may read now: the latest completed write that no
    pending write precedes (Hudi's BLOCK policy for streams), or :data:`EARLIEST` before the first;
    in timeline layout 2 the latest completion time.

    A write still pending while later ones completed will commit records older than those, so a
    stream that went past it would never see them.
    """
    timeline = table.timeline
    writes = timeline.completed_writes()
    hole = first_hole(table)
    if hole is not None:
        writes = [w for w in writes if w.timestamp < hole]
    if not writes:
        return EARLIEST
    return max(_when(w) for w in writes) if timeline.layout_version >= 2 else writes[-1].timestamp


def start_offset(table: HudiTable, start: str) -> str:
    """The exclusive begin of a new stream: ``earliest``, ``latest`` or an instant time (parsed
    by ``hoodie.datasource.streaming.startOffset``)."""
    if start == "earliest":
        return EARLIEST
    if start == "latest":
        return latest_offset(table)
    return start
