"""Clustering plans: the file groups a clustering rewrites, as Hudi records them in
``T.replacecommit.requested`` (table version 6) or ``T.clustering.requested`` (versions 8 and 9,
timeline layout 2, where a clustering is pending as a ``clustering`` instant and completes as a
``replacecommit``), their readers, and what they mean for writes that touch those groups.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiClusteringUpdateError
from pyhudi.io.file_names import log_path_order
from pyhudi.read.merge import SliceToRead
from pyhudi.timeline.avro_records import REQUESTED_REPLACE_METADATA_FULL, read_record, write_record
from pyhudi.timeline.instant import CLUSTERING, REPLACE_COMMIT, Instant, State
from pyhudi.timeline.timeline import Timeline

MB = 1024 * 1024
CLUSTER = "CLUSTER"
PLAN_LAST_COMPLETED = "pyhudi.plan.lastCompletedWrite"
PLAN_PENDING_WRITES = "pyhudi.plan.pendingWrites"
EXECUTION_STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
@dataclass(frozen=True)
class ClusteringGroup:
    """The file slices one task rewrites (``HoodieClusteringGroup``); paths relative to the table."""

    partition_path: str
    slices: tuple[SliceToRead, ...]
    num_output_file_groups: int
    input_bytes: int


@dataclass(frozen=True)
class ClusteringPlan:
    groups: tuple[ClusteringGroup, ...]
    sort_columns: tuple[str, ...]
    strategy_params: Mapping[str, str]
    preserve_commit_metadata: bool = True
    #: the newest write completed, and the writes pending, when the plan was made (None: unknown,
    #: a plan scheduled by Apache Hudi)
    last_completed: str | None = None
    pending_writes: tuple[str, ...] = ()

    def file_groups(self) -> set[tuple[str, str]]:
        return {(s.partition_path, s.file_id) for g in self.groups for s in g.slices}

    def to_bytes(self, base_uri: str) -> bytes:
        def full(rel: str) -> str:
            return f"{base_uri.rstrip('/')}/{rel}"

        groups = [{
            "slices": [{"dataFilePath": full(s.base_file) if s.base_file else "",
                        "deltaFilePaths": [full(p) for p in s.log_files], "fileId": s.file_id,
                        "partitionPath": s.partition_path, "bootstrapFilePath": "", "version": 1} for s in g.slices],
            "metrics": {"TOTAL_IO_READ_MB": g.input_bytes / MB, "TOTAL_LOG_FILES": float(
                sum(len(s.log_files) for s in g.slices))},
            "numOutputFileGroups": g.num_output_file_groups, "extraMetadata": None, "version": 1,
        } for g in self.groups]
        return write_record(REQUESTED_REPLACE_METADATA_FULL, {
            "operationType": CLUSTER, "version": 1, "extraMetadata": {} if self.last_completed is None else {
                PLAN_LAST_COMPLETED: self.last_completed, PLAN_PENDING_WRITES: ",".join(self.pending_writes)},
            "clusteringPlan": {"inputGroups": groups, "extraMetadata": None, "version": 1,
                               "preserveHoodieMetadata": self.preserve_commit_metadata,
                               "strategy": {"strategyClassName": EXECUTION_STRATEGY,
                                            "strategyParams": dict(self.strategy_params), "version": 1}}})


def plan_action(timeline: Timeline) -> str:
    """The action a clustering is pending as: ``clustering`` in timeline layout 2 (Hudi 1.x's
    ``saveToPendingClusterCommit``), ``replacecommit`` before."""
    return CLUSTERING if timeline.layout_version >= 2 else REPLACE_COMMIT


def requested_plan_file(timeline: Timeline, instant_time: str) -> Instant:
    """The requested file holding the plan of clustering ``instant_time``: a ``clustering``
    instant in layout 2, unless the timeline holds a replacecommit plan of that time (a table
    upgraded from version 6 by a writer that kept it)."""
    if timeline.layout_version >= 2:
        legacy = Instant(instant_time, State.REQUESTED, REPLACE_COMMIT)
        if legacy not in timeline.instant_files:
            return Instant(instant_time, State.REQUESTED, CLUSTERING)
        return legacy
    return Instant(instant_time, State.REQUESTED, REPLACE_COMMIT)


def read_clustering_plan(timeline: Timeline, instant_time: str) -> ClusteringPlan | None:
    """The clustering plan of a pending clustering; None when it is another replace (an overwrite)."""
    requested = requested_plan_file(timeline, instant_time)
    try:
        data = timeline.storage.read_bytes(timeline.path_of(requested))
    except FileNotFoundError:
        return None
    if not data:
        return None
    record = read_record(data, REQUESTED_REPLACE_METADATA_FULL)
    plan = record.get("clusteringPlan")
    if record.get("operationType") != CLUSTER or not plan:
        return None
    base = _without_scheme(timeline.storage.uri("")).rstrip("/") + "/"

    def rel(path: str | None) -> str | None:
        if not path:
            return None
        bare = _without_scheme(path)
        return bare[len(base):] if bare.startswith(base) else bare

    groups = []
    for g in plan.get("inputGroups") or []:
        slices = tuple(SliceToRead(s.get("partitionPath") or "", s.get("fileId") or "", rel(s.get("dataFilePath")),
                                   # Hudi lists a slice's logs newest first: readers need them oldest first
                                   tuple(sorted((r for r in (rel(p) for p in s.get("deltaFilePaths") or []) if r),
                                                key=log_path_order)))
                       for s in g.get("slices") or [])
        metrics = g.get("metrics") or {}
        groups.append(ClusteringGroup(slices[0].partition_path if slices else "", slices,
                                      int(g.get("numOutputFileGroups") or 1),
                                      int(float(metrics.get("TOTAL_IO_READ_MB", 0)) * MB)))
    params = dict((plan.get("strategy") or {}).get("strategyParams") or {})
    sort = tuple(c.strip() for c in params.get(C.CLUSTERING_SORT_COLUMNS.key, "").split(",") if c.strip())
    extra = record.get("extraMetadata") or {}
    pending = tuple(t for t in (extra.get(PLAN_PENDING_WRITES) or "").split(",") if t)
    return ClusteringPlan(tuple(groups), sort, params, plan.get("preserveHoodieMetadata") is not False,
                          last_completed=extra.get(PLAN_LAST_COMPLETED) if PLAN_LAST_COMPLETED in extra else None,
                          pending_writes=pending)


def _without_scheme(path: str) -> str:
    """A path or URI as scheme-less, slash-free at the start (file:/t, file:///t, /t and s3a://b/t alike)."""
    return re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*:(//)?", "", path).lstrip("/")


def pending_clusterings(timeline: Timeline) -> list[tuple[Instant, ClusteringPlan]]:
    """Pending clusterings (replacecommits that are clustering plans; ``clustering`` instants in
    layout 2), oldest first."""
    out = []
    for inst in timeline.pending([REPLACE_COMMIT, CLUSTERING]):
        plan = read_clustering_plan(timeline, inst.timestamp)
        if plan is not None:
            out.append((inst, plan))
    return out


def clustering_file_groups(timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> the pending clustering that rewrites the group."""
    return {g: inst.timestamp for inst, plan in pending_clusterings(timeline) for g in plan.file_groups()}


def writes_since_plan(timeline: Timeline, instant_time: str, plan: ClusteringPlan) -> list[Instant]:
    """Completed writes that had not completed when the plan ``instant_time`` was made."""
    out = []
    # Hudi's plan has no record of the writes under way: a write after it, or one completed after it was written
    planned_at = timeline.mtime_ns(requested_plan_file(timeline, instant_time)) or 0
    for w in timeline.completed_writes():
        if w.timestamp == instant_time:
            continue
        if plan.last_completed is None and w.completion_time:  # layout 2: completed after the plan's time
            after = w.timestamp > instant_time or w.completion_time > instant_time
        elif plan.last_completed is None:
            after = w.timestamp > instant_time or (timeline.mtime_ns(w) or 0) >= planned_at
        else:
            after = w.timestamp > plan.last_completed or w.timestamp in plan.pending_writes
        if after:
            out.append(w)
    return out


def clustering_conflicts(timeline: Timeline, instant_time: str,
                         plan: ClusteringPlan) -> dict[str, list[tuple[str, str]]]:
    """Writes completed since the plan was made that changed or replaced its file groups (the
    clustering, which rewrites the slices the plan names, would drop their changes): write -> groups."""
    groups = plan.file_groups()
    out = {}
    for w in writes_since_plan(timeline, instant_time, plan):
        hit = sorted(timeline.commit_metadata(w).touched_file_groups() & groups)
        if hit:
            out[w.timestamp] = hit
    return out


def allows_updates(cfg: HudiConfig) -> bool:
    """Whether writes may update file groups of pending clusterings (Hudi's allow update strategy)."""
    return cfg.get(C.CLUSTERING_UPDATES_STRATEGY) == C.UPDATE_STRATEGIES[1]


def describe_groups(groups: list[tuple[str, str]], limit: int = 5) -> str:
    """``partition/fileId`` of the first ``limit`` file groups, for error messages."""
    shown = ", ".join(f"{p or '<root>'}/{f}" for p, f in groups[:limit])
    return shown + (f" and {len(groups) - limit} more" if len(groups) > limit else "")


def update_refused(instant: str, path: str, hit: list[tuple[str, str]], plans: Iterable[str], *,
                   written: bool) -> HudiClusteringUpdateError:
    """The error of a write refused for updating file groups that clustering ``plans`` rewrite."""
    outcome = "it was rolled back" if written else "nothing was written"
    return HudiClusteringUpdateError(
        f"write {instant} to {path} updates file groups that clustering {', '.join(sorted(set(plans)))} rewrites "
        f"({describe_groups(hit)}); {outcome}. "
        "Run the clustering first (`pyhudi clustering run`), then the write again, or let writes go on beside "
        f"clusterings with {C.CLUSTERING_UPDATES_STRATEGY.key}=SparkAllowUpdateStrategy")


