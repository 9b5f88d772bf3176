"""Conflict resolution at commit, as Hudi's optimistic concurrency control decides it.

Two writes conflict when both changed one file group and the other one completed after this one
started: committing both would keep only one side's version of the group (a copy-on-write
update rewrites the whole file; a merge-on-read log block lands in a slice a compaction closed).
New file groups never conflict. A compaction planned after the write started conflicts on the
groups it plans, since it will not see this write's log blocks; one planned before does not (as
in Hudi: the write's log blocks start the compaction's new slice). A write that replaces file
groups (an overwrite) conflicts with any compaction pending on them.

"Completed after this write started" is decided by the set of instants that were completed when
the write requested its instant (recorded under the lock), not by instant times: a write that
started earlier but completed later is a candidate too. On timeline layout 2 (table versions 8
and 9) completed instants carry their completion time, and as in Hudi 1.x's
``SimpleConcurrentFileWritesConflictResolutionStrategy`` the candidates are the instants whose
completion time is after this write's instant time (and any not in the snapshot, so a writer whose
clock lags is still checked against what it did not see). With the bucket index two writers that
created different file groups for one bucket conflict as well (Hudi's
``BucketIndexConcurrentFileWritesConflictResolutionStrategy``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyhudi.plans.compaction import pending_compactions, read_plan
from pyhudi.timeline.timeline import Timeline

#: extraMetadata key under which a commit records the conflict check it passed
CONFLICT_CHECK_KEY = "pyhudi.conflict.check"


@dataclass(frozen=True)
class TimelineSnapshot:
    """What was on the timeline when a write started (taken under the lock)."""

    completed: frozenset[str]  # times of completed commits, delta commits and replace commits
    compactions: frozenset[str]  # times of pending compaction plans

    @classmethod
    def of(cls, timeline: Timeline) -> TimelineSnapshot:
        return cls(frozenset(i.timestamp for i in timeline.completed_writes()),
                   frozenset(i.timestamp for i in pending_compactions(timeline)))


@dataclass(frozen=True)
class Conflict:
    instant: str
    action: str
    file_groups: tuple[tuple[str, str], ...]  # (partition, file id) of this write both touched

    def describe(self) -> str:
        shown = ", ".join(f"{p or '<root>'}/{f}" for p, f in self.file_groups[:5])
        more = f" and {len(self.file_groups) - 5} more" if len(self.file_groups) > 5 else ""
        return f"{self.action} {self.instant} (file groups {shown}{more})"


def _bucket(file_id: str) -> str:
    head = file_id[:8]
    return "bucket:" + head if head.isdigit() else file_id


@dataclass
class ConflictCheck:
    """The check of one commit: what it looked at, and what it found."""

    candidates: list[str]
    conflicts: list[Conflict]

    def summary(self, mode: str) -> dict[str, object]:
        return {"mode": mode, "candidates": self.candidates,
                "conflicts": [c.instant for c in self.conflicts]}


def find_conflicts(timeline: Timeline, start: TimelineSnapshot, instant: str, mine: set[tuple[str, str]], *,
                   replaced: set[tuple[str, str]], by_bucket: bool) -> ConflictCheck:
    """Instants that conflict with the write ``instant`` touching ``mine`` (``replaced`` among them)."""

    def key(group: tuple[str, str]) -> tuple[str, str]:
        return (group[0], _bucket(group[1])) if by_bucket else group

    my_keys = {key(g): g for g in mine}
    candidates: list[str] = []
    conflicts: list[Conflict] = []

    def check(inst: str, action: str, theirs: set[tuple[str, str]], against: dict) -> None:
        candidates.append(inst)
        both = sorted(against[k] for k in {key(g) for g in theirs} & set(against))
        if both:
            conflicts.append(Conflict(inst, action, tuple(both)))

    for other in timeline.completed_writes():
        if other.timestamp == instant:
            continue
        after_start = other.completion_time is not None and other.completion_time > instant
        if other.timestamp in start.completed and not after_start:
            continue
        meta = timeline.commit_metadata(other)
        if meta.operation_type == "COMPACT" and other.timestamp < instant:
            # planned before this write started: its log blocks went to the compaction's new slice
            candidates.append(other.timestamp)
            continue
        check(other.timestamp, other.action, meta.touched_file_groups(), my_keys)
    replaced_keys = {key(g): g for g in replaced}
    for plan in pending_compactions(timeline):
        planned = {(op.partition_path, op.file_id) for op in read_plan(timeline, plan.timestamp).operations}
        if plan.timestamp not in start.compactions:
            check(plan.timestamp, "compaction", planned, my_keys)
        elif replaced_keys:
            check(plan.timestamp, "compaction", planned, replaced_keys)
    return ConflictCheck(candidates, conflicts)
