"""Clustering: small file groups rewritten into fewer, larger ones, ordered for the queries.

Scheduling writes ``T.replacecommit.requested`` (``T.clustering.requested`` on table versions 8
and 9, whose timeline has a ``clustering`` action for pending clusterings) holding a
``HoodieRequestedReplaceMetadata`` with operation ``CLUSTER`` and a ``HoodieClusteringPlan``:
groups of file slices, each read and rewritten by one task. The plan follows Hudi's size-based
strategy: in every considered partition, the slices whose base file is under
``...small.file.limit`` (none pending in another plan), largest first, are packed into groups of
at most ``...max.bytes.per.group``, each to be written as about ``size / ...target.file.max.bytes``
files; at most ``...max.num.groups`` groups. Running the plan (:mod:`pyhudi.spark.clustering_job`)
completes ``T.replacecommit`` (``T_C.replacecommit`` in layout 2) naming the input file groups in
``partitionToReplaceFileIds``; until then readers see the old groups.

Writers meeting a pending plan follow ``hoodie.clustering.updates.strategy``. Under Hudi's default
reject strategy a write that updates a planned file group fails before it writes
(:class:`pyhudi.errors.HudiClusteringUpdateError`). Under the allow strategy it writes, and the
clustering, whose plan names the slices as they were, fails at its commit and is rolled back
(:func:`clustering_conflicts`): either way no update is lost. The plan records which writes had
completed when it was made (its ``extraMetadata``), which tells the writes that came after.

A pending clustering is a table service, not a failed write: a writer's rollback of failed writes
leaves it to be run (again) by ``pyhudi clustering run``, which first removes what an interrupted
attempt wrote.

Records are ordered by ``...sort.columns`` (by record key without them): lexicographically, or along
a Z-order or Hilbert curve over the columns' ranks (``hoodie.layout.optimize.strategy``), so that
filters on any of the columns find their rows in few files.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Iterable

from pyhudi import config as C
from pyhudi.actions.ordering import sort_column_problem
from pyhudi.actions.rollback import rollback_instant
from pyhudi.commit.point import CommitPoint
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiConfigError, HudiUnsupportedError
from pyhudi.plans.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    allows_updates,
    clustering_file_groups,
    pending_clusterings,
    plan_action,
    update_refused,
)
from pyhudi.plans.compaction import pending_file_groups
from pyhudi.table.fs_view import FileSlice, FileSystemView
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import CLUSTERING, COMMIT, DELTA_COMMIT, REPLACE_COMMIT, State, new_instant_time
from pyhudi.timeline.timeline import Timeline
from pyhudi.transaction.heartbeat import HeartbeatPolicy, is_alive
from pyhudi.transaction.lock import TableLock
from pyhudi.write.markers import list_markers
from pyhudi.write.result import recorded_options

log = logging.getLogger("pyhudi")

MB = 1024 * 1024


def guard_updates(table: HudiTable, cfg: HudiConfig, instant: str, updated: set[tuple[str, str]]) -> None:
    """Before a write writes its files: what its updates of pending clusterings' file groups do,
    by ``hoodie.clustering.updates.strategy`` (Hudi's ``UpdateStrategy.handleUpdate``)."""
    clustered = clustering_file_groups(table.timeline)
    hit = sorted(updated & set(clustered))
    if not hit:
        return
    plans = sorted({clustered[g] for g in hit})
    if not allows_updates(cfg):
        raise update_refused(instant, table.path, hit, plans, written=False)
    if not cfg.get(C.CLUSTERING_ROLLBACK_PENDING_ON_CONFLICT):
        log.info("write %s updates file groups of pending clustering %s; the clustering will fail at its commit",
                 instant, ", ".join(plans))
        return
    policy = HeartbeatPolicy.of(cfg)
    undone = []
    with TableLock(table.storage, cfg).held():
        timeline = table.timeline.reload()
        for inst, _plan in pending_clusterings(timeline):
            if inst.timestamp not in plans:
                continue
            if inst.state == State.INFLIGHT and is_alive(table.storage, inst.timestamp, policy):
                continue  # running now: it fails at its commit instead (its tasks may still write files)
            rollback_instant(table.storage, timeline, inst, complete=CommitPoint.of(table, cfg).complete,
                             utc=table.config.utc_timeline)
            undone.append(inst.timestamp)
            timeline = timeline.reload()
    if undone:
        log.warning("write %s rolled back pending clustering %s, whose file groups it updates (%s)", instant,
                    ", ".join(undone), C.CLUSTERING_ROLLBACK_PENDING_ON_CONFLICT.key)


def considered_partitions(partitions: Iterable[str], cfg: HudiConfig) -> list[str]:
    """The partitions a plan looks at, as Hudi picks them: the selected partitions, else those the
    regex matches, then the filter mode."""
    chosen = sorted(partitions)
    if cfg.get(C.CLUSTERING_PARTITION_SELECTED):
        wanted = set(cfg.get(C.CLUSTERING_PARTITION_SELECTED))
        chosen = [p for p in chosen if p in wanted]
    elif cfg.get(C.CLUSTERING_PARTITION_REGEX):
        regex = re.compile(cfg.get(C.CLUSTERING_PARTITION_REGEX))
        chosen = [p for p in chosen if regex.fullmatch(p)]
    mode = cfg.get(C.CLUSTERING_PARTITION_FILTER_MODE)
    if mode == "RECENT_DAYS":
        skip, keep = cfg.get(C.CLUSTERING_SKIP_FROM_LATEST), cfg.get(C.CLUSTERING_LOOKBACK_PARTITIONS)
        newest_first = sorted(chosen, reverse=True)[skip:skip + keep]
        chosen = sorted(newest_first)
    elif mode == "SELECTED_PARTITIONS":
        begin, end = cfg.get(C.CLUSTERING_BEGIN_PARTITION), cfg.get(C.CLUSTERING_END_PARTITION)
        chosen = [p for p in chosen if (begin is None or p >= begin) and (end is None or p <= end)]
    return chosen


def plan_clustering(view: FileSystemView, cfg: HudiConfig, *, busy: set[tuple[str, str]],
                    uncommitted: frozenset[str] = frozenset()) -> ClusteringPlan:
    """Hudi's size-based plan over ``view``; ``busy`` groups (pending compaction or clustering) are
    left out, and so are groups with log files of writes still pending (``uncommitted``: their
    rollback would delete files the plan reads)."""
    limit = cfg.get(C.CLUSTERING_SMALL_FILE_LIMIT)
    per_group, target = cfg.get(C.CLUSTERING_MAX_BYTES_PER_GROUP), cfg.get(C.CLUSTERING_TARGET_FILE_MAX_BYTES)
    max_file = cfg.get(C.PARQUET_MAX_FILE_SIZE)
    groups: list[ClusteringGroup] = []
    for partition in considered_partitions(view.partitions, cfg):
        def size(s: FileSlice) -> int:
            return s.base_file.size if s.base_file is not None else max_file

        eligible = [s for s in view.latest_slices(partition) if (s.partition_path, s.file_id) not in busy
                    and (s.base_file.size if s.base_file is not None else 0) < limit
                    and not any(lf.path in uncommitted for lf in s.log_files)]
        eligible.sort(key=size, reverse=True)
        current: list[FileSlice] = []
        total = 0
        for piece in eligible:
            if current and total + size(piece) > per_group:
                groups.append(_group(partition, current, total, target))
                current, total = [], 0
            current.append(piece)
            total += size(piece)
        if current and (len(current) > 1 or cfg.get(C.CLUSTERING_SINGLE_GROUP)):
            groups.append(_group(partition, current, total, target))
    params = {k: str(v) for k, v in cfg.raw.items() if k.startswith("hoodie.clustering.plan.strategy.")}
    sort = tuple(cfg.get(C.CLUSTERING_SORT_COLUMNS) or ())
    if sort:
        params[C.CLUSTERING_SORT_COLUMNS.key] = ",".join(sort)
    return ClusteringPlan(tuple(groups[:cfg.get(C.CLUSTERING_MAX_NUM_GROUPS)]), sort, params,
                          cfg.get(C.CLUSTERING_PRESERVE_COMMIT_METADATA))


def _group(partition: str, slices: list[FileSlice], total: int, target: int) -> ClusteringGroup:
    return ClusteringGroup(partition, tuple(s.to_read() for s in slices), max(1, math.ceil(total / target)), total)


def schedule_clustering(table: HudiTable, cfg: HudiConfig) -> str | None:
    """Write a clustering plan for ``table`` now; its instant, or None when nothing is worth clustering."""
    table.check_writable("clustering", merges=True)
    index = cfg.get(C.INDEX_TYPE) if cfg.is_set(C.INDEX_TYPE) else \
        recorded_options(table.timeline).get(C.INDEX_TYPE.key, "").upper()  # as the table's writers say
    if index == "BUCKET":
        raise HudiUnsupportedError("clustering a BUCKET-index table would move records out of their buckets' file "
                                   "groups; pyhudi does not cluster such tables (Hudi 0.14 neither, for the simple "
                                   "bucket engine)")
    sort = cfg.get(C.CLUSTERING_SORT_COLUMNS) or ()
    schema = table.arrow_schema()
    problems = [(c, why) for c in sort if (why := sort_column_problem(schema, c))] if schema is not None else []
    if problems:
        assert schema is not None
        raise HudiConfigError(f"{C.CLUSTERING_SORT_COLUMNS.key}: "
                              + "; ".join(f"cannot sort by {c}: {why}" for c, why in problems)
                              + f" (the table's columns: {', '.join(schema.names)})")
    with TableLock(table.storage, cfg).held():
        timeline = table.timeline.reload()
        busy = set(pending_file_groups(timeline)) | set(clustering_file_groups(timeline))
        uncommitted = frozenset(rel for inst in timeline.pending_writes()
                                for rel, _io in list_markers(table.storage, inst.timestamp))
        plan = plan_clustering(table.file_system_view(), cfg, busy=busy, uncommitted=uncommitted)
        if not plan.groups:
            return None
        last = timeline.latest_completed_write()
        plan = dataclasses.replace(plan, last_completed=last.timestamp if last else "",
                                   pending_writes=tuple(i.timestamp for i in timeline.pending_writes()))
        instant = new_instant_time(after=timeline.last_instant_time(), utc=table.config.utc_timeline)
        timeline.create_requested(instant, plan_action(timeline), plan.to_bytes(table.storage.uri("")))
        return instant


def clustering_due(timeline: Timeline, cfg: HudiConfig, *, max_commits: int | None = None,
                   since: str = "") -> bool:
    """Whether ``max_commits`` (default ``hoodie.clustering.inline.max.commits``) writes completed
    since the last clustering (and since ``since``: a plan of the caller's that was rolled back)."""
    last = max([i.timestamp for i in timeline.instants()
                if i.action == CLUSTERING or (i.action == REPLACE_COMMIT and timeline.is_clustering(i))]
               + [since])
    writes = [i for i in timeline.completed([COMMIT, DELTA_COMMIT, REPLACE_COMMIT]) if i.timestamp > last]
    return len(writes) >= (max_commits or cfg.get(C.CLUSTERING_INLINE_MAX_COMMITS))


