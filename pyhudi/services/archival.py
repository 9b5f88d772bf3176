"""Archival: keeping the active timeline short by moving old instants to the archived timeline.

Every reader and writer lists ``.hoodie/`` and parses what it finds, so the active timeline must
stay small. Once it holds more than ``hoodie.keep.max.commits`` completed commits, the oldest are
moved (with all their states) into the archive log, down to ``hoodie.keep.min.commits``. On table
versions 8 and 9 the archive is the LSM history of ``.hoodie/timeline/history/`` (one layer-0
parquet file and manifest per run, then the instants' timeline files go, then the layers are
compacted by ``hoodie.timeline.compaction.batch.size``; :mod:`pyhudi.timeline.lsm_history`). Data files
of archived commits stay valid: readers treat instants older than the active timeline as committed.

What archival must never pass (Hudi's ``HoodieTimelineArchiver`` rules):

- the last commit before the first pending instant of the commit timeline (a write or compaction
  in flight: nothing after a hole may go, or it would look older than the timeline and count as
  committed);
- the oldest savepoint (unless ``hoodie.archive.beyond.savepoint``; savepointed commits never go);
- the earliest commit the last clean retains (the cleaner plans incrementally from it, and those
  commits are what time travel and incremental pulls read);
- on merge-on-read tables with inline compaction, the last compaction (its trigger counts the delta
  commits after it);
- a replace commit whose replaced file groups still have files (readers hide them only while it is
  active).

Archival stops at the first instant it may not take: the active timeline stays a contiguous suffix
of the history, since readers treat data instants older than its start as committed.

Clean and rollback instants are archived on their own counts (each action apart), beyond the same
maximum. ``hoodie.keep.min.commits`` at or below ``hoodie.clean.commits.retained`` is widened, with a
warning, as Hudi's archiver does.
"""

from __future__ import annotations

import logging

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.errors import HudiConfigError
from pyhudi.metadata.table import MetadataTable
from pyhudi.plans.clean import last_clean_ectr
from pyhudi.table.table import HudiTable
from pyhudi.timeline.archive import archive_folder, archive_instants
from pyhudi.timeline.instant import CLEAN, COMMIT, REPLACE_COMMIT, ROLLBACK, SAVEPOINT, WRITE_ACTIONS, State
from pyhudi.timeline.timeline import DATA_ACTIONS
from pyhudi.transaction.lock import under_table_lock

log = logging.getLogger("pyhudi")


def validate(cfg: HudiConfig) -> None:
    """Hudi's write-config check: the archival window needs a maximum above its minimum."""
    keep_min, keep_max = cfg.get(C.KEEP_MIN_COMMITS), cfg.get(C.KEEP_MAX_COMMITS)
    if keep_max <= keep_min:
        raise HudiConfigError(f"increase hoodie.keep.max.commits ({keep_max}) to be greater than "
                              f"hoodie.keep.min.commits ({keep_min})")
    if cfg.get(C.TIMELINE_COMPACTION_BATCH_SIZE) < 2:
        raise HudiConfigError(f"{C.TIMELINE_COMPACTION_BATCH_SIZE.key} must be at least 2 (files merged into one of "
                              "the next layer of the archived timeline)")


def keep_window(cfg: HudiConfig) -> tuple[int, int]:
    """(min, max) commits to keep, widened as Hudi's archiver does so that the cleaner's retained
    commits (and one before them) always stay on the active timeline."""
    keep_min, keep_max = cfg.get(C.KEEP_MIN_COMMITS), cfg.get(C.KEEP_MAX_COMMITS)
    if cfg.get(C.CLEAN_POLICY) == "KEEP_LATEST_COMMITS":
        needed = cfg.get(C.CLEAN_COMMITS_RETAINED) + 1
        if keep_min < needed:
            log.warning("hoodie.keep.min.commits=%d is not above hoodie.clean.commits.retained=%d; archival keeps "
                        "%d commits instead", keep_min, needed - 1, needed)
            keep_min, keep_max = needed, needed + keep_max - keep_min
    return keep_min, keep_max


def instants_to_archive(table: HudiTable, cfg: HudiConfig) -> list[str]:
    """Instant times to move to the archive now (oldest first)."""
    timeline = table.timeline
    keep_min, keep_max = keep_window(cfg)
    out: list[str] = []
    for action in (CLEAN, ROLLBACK):  # each on its own count
        services = timeline.completed([action])
        if len(services) > keep_max:
            out.extend(i.timestamp for i in services[:len(services) - keep_min])
    commits = timeline.completed_writes()
    if len(commits) <= keep_max:
        return sorted(out)
    limits = []
    pending = timeline.pending(DATA_ACTIONS)
    if pending:  # keep the pending instant and the last commit before it
        before = [c.timestamp for c in commits if c.timestamp < pending[0].timestamp]
        limits.append(before[-1] if before else pending[0].timestamp)
        since = _completed_since_oldest_pending_write(table, commits)
        if since is not None:  # a running write checks its conflicts against these
            limits.append(since)
    savepoints = sorted({s.timestamp for s in timeline.instants() if s.action == SAVEPOINT})  # pending ones too
    if savepoints and not cfg.get(C.ARCHIVE_BEYOND_SAVEPOINT):
        limits.append(savepoints[0])
    ectr = last_clean_ectr(table)
    if ectr:
        limits.append(ectr)
    if table.table_type == P.MERGE_ON_READ and (cfg.get(C.COMPACT_INLINE) or cfg.get(C.COMPACT_SCHEDULE_INLINE)):
        compactions = [c.timestamp for c in commits if c.action == COMMIT]
        limits.append(compactions[-1] if compactions else commits[0].timestamp)
    retired = _first_replace_with_leftovers(table, commits)
    if retired is not None:  # its replaced groups still have files: archiving it would bring them back
        limits.append(retired)
    limit = min(limits) if limits else None
    candidates = [c.timestamp for c in commits
                  if (limit is None or c.timestamp < limit) and c.timestamp not in savepoints]
    out.extend(candidates[:len(commits) - keep_min])
    return sorted(set(out))


def _completed_since_oldest_pending_write(table: HudiTable, commits: list) -> str | None:
    """The oldest commit that completed after the oldest pending write requested its instant.

    Optimistic concurrency control checks a write against every commit completed since it
    started, whatever their instant times; those must stay on the active timeline until it ends.
    """
    timeline = table.timeline
    if timeline.layout_version >= 2:  # completion times are in the names: what completed after the write began
        oldest_pending = min((i.timestamp for i in timeline.pending(WRITE_ACTIONS)), default=None)
        if oldest_pending is None:
            return None
        later = [c.timestamp for c in commits if (c.completion_time or c.timestamp) > oldest_pending]
        return min(later) if later else None
    mtimes = {info.name: info.mtime_ns for info in table.storage.list_files(timeline.folder)}
    starts = [mtimes.get(i.with_state(State.REQUESTED).file_name(timeline.layout_version))
              for i in timeline.pending(WRITE_ACTIONS)]
    known = [t for t in starts if t is not None]
    if not known:
        return None
    oldest = min(known)
    later = [c.timestamp for c in commits if mtimes.get(c.file_name(timeline.layout_version), 0) >= oldest]
    return min(later) if later else None


def _first_replace_with_leftovers(table: HudiTable, commits: list) -> str | None:
    """The oldest replace commit some of whose replaced file groups still have files.

    Readers hide replaced groups only while the replace commit is on the active timeline; the
    cleaner removes them, unless a savepoint kept them (and an incremental clean after the
    savepoint's deletion does not look at that partition again).
    """
    for inst in commits:
        if inst.action != REPLACE_COMMIT:
            continue
        replaced = table.timeline.commit_metadata(inst).partition_to_replace_file_ids or {}
        # the files the metadata table lists (storage is listed only without one)
        view = table.file_system_view(partitions=sorted(replaced), include_replaced=True)
        for partition, ids in replaced.items():
            left = {group.file_id for group in view.file_groups(partition)}
            if left & set(ids):
                return inst.timestamp
    return None


def _within_metadata_table(table: HudiTable, chosen: list[str]) -> list[str]:
    """Instants the metadata table no longer needs on the active timeline: older than its latest
    compaction (as Hudi: none before its first). Its readers trust only the log blocks of active
    completed instants, and every block after the latest compaction is read."""
    if not table.has_metadata_table():
        return chosen
    latest = MetadataTable(table.storage).latest_compaction()
    if latest is None:
        log.info("not archiving: the metadata table has not been compacted yet")
        return []
    return [t for t in chosen if t < latest]


@under_table_lock
def archive(table: HudiTable, cfg: HudiConfig) -> list[str]:
    """Archive what the rules allow; returns the archived instant times."""
    table.check_writable("archive")
    validate(cfg)
    table.reload()
    chosen = _within_metadata_table(table, instants_to_archive(table, cfg))
    if not chosen:
        return []
    archive_instants(table.storage, table.timeline, chosen, folder=archive_folder(table.storage),
                     utc=table.config.utc_timeline, compaction_batch_size=cfg.get(C.TIMELINE_COMPACTION_BATCH_SIZE))
    table.timeline.reload()
    log.info("archived %d instants (%s .. %s)", len(chosen), chosen[0], chosen[-1])
    return chosen
