"""The cleaner: deleting file slices no retained query needs, recorded on the timeline as Hudi does.

Every copy-on-write update and every compaction leaves the previous slice of a file group behind,
so that readers of older snapshots (time travel, incremental pulls, long queries) keep working.
The cleaner bounds that history by a policy:

- ``KEEP_LATEST_COMMITS``: keep what a query as of any of the last ``hoodie.clean.commits.retained``
  commits needs. The oldest retained commit is the *earliest commit to retain* (ECTR); in every
  file group the cleaner keeps the slices written from the ECTR on, plus the newest slice older
  than it (the one a query at the ECTR reads), and deletes older ones.
- ``KEEP_LATEST_BY_HOURS``: the same with the ECTR the first commit of the last N hours.
- ``KEEP_LATEST_FILE_VERSIONS``: keep the newest N slices of every file group.

Whatever the policy, the latest slice of a group, slices a pending compaction will read and
files a savepoint lists are never deleted, and the ECTR never passes the oldest pending write (its
rollback may need the slice before it). File groups retired by a replace commit are deleted whole
once the replace commit is older than the ECTR.

A clean is three timeline files: ``T.clean.requested`` (HoodieCleanerPlan: the files to delete),
``T.clean.inflight`` (the same plan, written before any deletion; empty in timeline layout 2, as
Hudi 1.x leaves it) and ``T.clean``
(HoodieCleanMetadata: what was deleted). A clean that died after its plan is finished by the next
one, from the plan, so no file is ever forgotten half-deleted.
"""

from __future__ import annotations

import datetime as dt
import logging
import posixpath

from pyhudi import config as C
from pyhudi.actions.clean import run_clean
from pyhudi.actions.rollback import rollback_failed_writes
from pyhudi.commit.point import CommitPoint
from pyhudi.config import HudiConfig
from pyhudi.instant_time import parse_instant_time
from pyhudi.plans.clean import CleanPlan, CleanResult, last_clean, last_clean_ectr
from pyhudi.plans.compaction import pending_compactions, read_plan
from pyhudi.plans.savepoint import savepointed_files
from pyhudi.table.fs_view import FileGroup, FileSlice
from pyhudi.table.table import HudiTable
from pyhudi.timeline.avro_records import CLEANER_PLAN, write_record
from pyhudi.timeline.instant import CLEAN, new_instant_time
from pyhudi.timeline.timeline import DATA_ACTIONS
from pyhudi.transaction.concurrency import Concurrency
from pyhudi.transaction.lock import under_table_lock

log = logging.getLogger("pyhudi")

# -- planning ------------------------------------------------------------------------------------
def earliest_commit_to_retain(table: HudiTable, cfg: HudiConfig) -> tuple[str, str] | None:
    """The ECTR under KEEP_LATEST_COMMITS / KEEP_LATEST_BY_HOURS; None when nothing is old enough."""
    policy = cfg.get(C.CLEAN_POLICY)
    commits = table.timeline.completed_writes()
    pending = table.timeline.pending(DATA_ACTIONS)
    chosen = None
    if policy == "KEEP_LATEST_COMMITS":
        retained = cfg.get(C.CLEAN_COMMITS_RETAINED)
        if len(commits) > retained:
            chosen = commits[len(commits) - retained]
    elif policy == "KEEP_LATEST_BY_HOURS" and commits:
        hours = cfg.get(C.CLEAN_HOURS_RETAINED)
        utc = table.config.utc_timeline
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) if utc else dt.datetime.now()
        cutoff = now - dt.timedelta(hours=hours)
        after = [c for c in commits if parse_instant_time(c.timestamp) >= cutoff]
        if after and after[0] != commits[0]:
            chosen = after[0]
    if chosen is None:
        return None
    if policy == "KEEP_LATEST_COMMITS" and pending and chosen.timestamp > pending[0].timestamp:
        # a pending write or compaction may still need the slices before it
        before = [c for c in commits if c.timestamp < pending[0].timestamp]
        chosen = before[-1] if before else None
    return (chosen.timestamp, chosen.action) if chosen else None


def _partitions_to_clean(table: HudiTable, cfg: HudiConfig, ectr: str | None) -> list[str] | None:
    """Partitions written since the last clean's ECTR (incremental mode); None = every partition."""
    if not cfg.get(C.CLEAN_INCREMENTAL) or ectr is None or cfg.get(C.CLEAN_POLICY) == "KEEP_LATEST_FILE_VERSIONS":
        return None
    previous = last_clean_ectr(table)
    if previous is None:
        return None
    first = table.timeline.first_data_instant_time()
    if first is not None and previous < first:
        return None  # history before the active timeline is unknown: look everywhere
    parts: set[str] = set()
    for inst in table.timeline.completed_writes():
        if previous <= inst.timestamp < ectr:
            meta = table.timeline.commit_metadata(inst)
            parts.update(meta.partition_to_write_stats)
            parts.update(meta.partition_to_replace_file_ids or {})
    return sorted(parts)


def _slice_files(piece: FileSlice) -> list[str]:
    out = [piece.base_file.path] if piece.base_file is not None else []
    # a CDC table's change data files go with their slice (CleanPlanner.getCleanFileInfoForSlice:
    # "clean the log files ... which contain cdc log files in cdc scenario")
    return out + [lf.path for lf in piece.log_files] + [lf.path for lf in piece.cdc_files]


def _protected(piece: FileSlice, saved: set[str], compacting: set[tuple[str, str, str]]) -> bool:
    if (piece.partition_path, piece.file_id, piece.base_instant) in compacting:
        return True
    return any(posixpath.basename(f) in saved for f in _slice_files(piece))


def _clean_group(group: FileGroup, policy: str, ectr: str | None, versions: int, saved: set[str],
                 compacting: set[tuple[str, str, str]], replaced_at: str | None) -> list[str]:
    """Files of one file group the policy lets go."""
    newest_first = list(reversed(group.slices))
    if not newest_first:
        return []
    if replaced_at is not None:  # a retired group: all of it once the replace is old enough
        if ectr is not None and replaced_at >= ectr:
            return []
        return [f for s in newest_first if not _protected(s, saved, compacting) for f in _slice_files(s)]
    doomed: list[str] = []
    if policy == "KEEP_LATEST_FILE_VERSIONS":
        keep, kept = versions, 0
        while kept < len(newest_first) and keep > 0:  # savepointed slices do not count as versions
            if not _protected(newest_first[kept], saved, set()):
                keep -= 1
            kept += 1
        for piece in newest_first[kept:]:
            if not _protected(piece, saved, compacting):
                doomed.extend(_slice_files(piece))
        return doomed
    assert ectr is not None
    last_before = next((s.base_instant for s in newest_first if s.base_instant < ectr), None)
    for i, piece in enumerate(newest_first):
        if i == 0 or piece.base_instant == last_before or piece.base_instant >= ectr:
            continue
        if _protected(piece, saved, compacting):
            continue
        doomed.extend(_slice_files(piece))
    return doomed


def plan_clean(table: HudiTable, cfg: HudiConfig) -> CleanPlan | None:
    """The files the configured policy deletes now; None when the policy keeps everything."""
    policy = cfg.get(C.CLEAN_POLICY)
    writes = table.timeline.completed_writes()
    if not writes:
        return None
    ectr = None
    if policy != "KEEP_LATEST_FILE_VERSIONS":
        ectr = earliest_commit_to_retain(table, cfg)
        if ectr is None:
            return None
    partitions = _partitions_to_clean(table, cfg, ectr[0] if ectr else None)
    view = table.file_system_view(partitions=partitions, include_replaced=True)
    saved = savepointed_files(table.timeline)
    compacting = {(op.partition_path, op.file_id, op.base_instant)
                  for inst in pending_compactions(table.timeline)
                  for op in read_plan(table.timeline, inst.timestamp).operations}
    files: dict[str, tuple[str, ...]] = {}
    versions = cfg.get(C.CLEAN_FILE_VERSIONS_RETAINED)
    for group in view.file_groups():
        doomed = _clean_group(group, policy, ectr[0] if ectr else None, versions, saved, compacting,
                              view.replaced_at(group.partition_path, group.file_id))
        if doomed:
            files[group.partition_path] = files.get(group.partition_path, ()) + tuple(doomed)
    return CleanPlan(policy, ectr, writes[-1].timestamp, files)


# -- scheduling and running ------------------------------------------------------------------------
def commits_since_last_clean(table: HudiTable) -> int:
    """Completed commits after the last commit the previous clean saw (Hudi's trigger count)."""
    rec = last_clean(table)
    since = (rec.get("lastCompletedCommitTimestamp") or rec.get("startCleanTime") or "") if rec else ""
    return sum(1 for c in table.timeline.completed_writes() if c.timestamp > since)


def clean_due(table: HudiTable, cfg: HudiConfig) -> bool:
    return commits_since_last_clean(table) >= cfg.get(C.CLEAN_MAX_COMMITS)


def schedule_clean(table: HudiTable, cfg: HudiConfig) -> str | None:
    """Write a clean plan (``T.clean.requested``) when there is something to delete."""
    plan = plan_clean(table, cfg)
    if plan is None or plan.file_count == 0:
        return None
    utc = table.config.utc_timeline
    instant = new_instant_time(after=table.timeline.last_instant_time(), utc=utc)
    table.timeline.create_requested(instant, CLEAN, write_record(CLEANER_PLAN, plan.to_avro(table)))
    return instant


@under_table_lock
def clean(table: HudiTable, cfg: HudiConfig, *, force: bool = False) -> list[CleanResult]:
    """Finish cleans left pending, then schedule and run a new one if it is due (or ``force``).

    Under the LAZY failed-writes policy the cleaner first rolls back writes whose heartbeat expired.
    Every instant completes through the commit point of ``cfg``, so the metadata table is kept as
    the writer's options say.
    """
    table.check_writable("clean")
    table.timeline.reload()
    point = CommitPoint.of(table, cfg)
    concurrency = Concurrency.of(cfg)
    if concurrency.failed_writes == "LAZY":
        rollback_failed_writes(table.storage, table.timeline, complete=point.complete, utc=table.config.utc_timeline,
                               heartbeat=concurrency.heartbeat)
    results = [run_clean(table, inst.timestamp, complete=point.complete) for inst in table.timeline.pending([CLEAN])]
    if force or clean_due(table, cfg):
        instant = schedule_clean(table, cfg)
        if instant is not None:
            results.append(run_clean(table, instant, complete=point.complete))
    return results
