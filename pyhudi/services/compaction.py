"""Compaction of merge-on-read tables: plans on the timeline, and when to make one.

Compaction folds the log files of a file slice into a new base file. It is two steps, each an
instant state: scheduling writes ``T.compaction.requested`` (an Avro ``HoodieCompactionPlan``
naming the base and log files of every slice to compact); running it writes the new base files,
named with T, and completes as ``T.commit`` (operation ``COMPACT``; ``T_C.commit`` from table
version 8, whose timeline records completion times). While a plan is pending, writers keep going
and never touch the planned files: in version 6 new log records of a planned file group start
the slice of T (log files named with base instant T); from version 8 every delta commit writes
its own log file, which belongs to the slice of T when that delta commit completes after T was
requested (``pyhudi.table.fs_view``), so the plan lists only logs of delta commits completed
before it.

This module is plain Python (planning, plan (de)serialisation, triggers); executing a plan is
distributed by :mod:`pyhudi.spark.compaction_job`.
"""

from __future__ import annotations

import dataclasses

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config.properties import MERGE_ON_READ
from pyhudi.errors import HudiCompactionError, HudiUnsupportedError
from pyhudi.plans.clustering import clustering_file_groups
from pyhudi.plans.compaction import CompactionOperation, CompactionPlan, pending_file_groups
from pyhudi.table.fs_view import FileSlice, FileSystemView
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import (
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    new_instant_time,
)
from pyhudi.timeline.timeline import Timeline
from pyhudi.transaction.lock import under_table_lock
from pyhudi.write.markers import list_markers

MB = 1024 * 1024
def _operation(piece: FileSlice) -> CompactionOperation:
    log_size = sum(lf.size for lf in piece.log_files)
    base_size = piece.base_file.size if piece.base_file else 0
    read_mb = (base_size + log_size) / MB
    write_mb = base_size / MB
    metrics = {"TOTAL_LOG_FILES": float(len(piece.log_files)), "TOTAL_LOG_FILES_SIZE": float(log_size),
               "TOTAL_IO_READ_MB": read_mb, "TOTAL_IO_WRITE_MB": write_mb, "TOTAL_IO_MB": read_mb + write_mb}
    return CompactionOperation(piece.partition_path, piece.file_id, piece.base_instant,
                               piece.base_file.name if piece.base_file else None,
                               tuple(lf.name for lf in piece.log_files), tuple(sorted(metrics.items())))


def plan_compaction(view: FileSystemView, excluded: set[tuple[str, str]], cfg: HudiConfig, *,
                    uncommitted: frozenset[str] = frozenset()) -> CompactionPlan:
    """Hudi's compaction planning: latest slices with log files, not already being compacted,
    chosen by the configured strategy. Log files in ``uncommitted`` (created by writes still
    pending) stay out of the plan: a rollback of their write deletes them."""
    slices = [dataclasses.replace(s, log_files=tuple(lf for lf in s.log_files if lf.path not in uncommitted))
              for s in view.latest_slices() if (s.partition_path, s.file_id) not in excluded]
    ops = [_operation(s) for s in slices if s.log_files]
    if cfg.get(C.COMPACTION_STRATEGY).endswith("LogFileSizeBasedCompactionStrategy"):
        ops.sort(key=lambda op: -op.metric("TOTAL_LOG_FILES_SIZE"))
        budget = float(cfg.get(C.COMPACTION_TARGET_IO))
        chosen = []
        for op in ops:
            chosen.append(op)
            budget -= op.metric("TOTAL_IO_MB")
            if budget <= 0:
                break
        ops = chosen
    return CompactionPlan(tuple(sorted(ops, key=lambda op: (op.partition_path, op.file_id))))


def schedule(timeline: Timeline, view: FileSystemView, cfg: HudiConfig, instant_time: str) -> CompactionPlan | None:
    """Write the plan of compaction ``instant_time``; None (nothing written) when no slice has logs.

    In single-writer mode pending writes must be rolled back first: their log blocks would
    otherwise sit in the planned files undecided. Under optimistic concurrency control a write
    pending now fails at its commit if the plan takes one of its file groups
    (:mod:`pyhudi.transaction.conflict`).
    """
    pending = timeline.pending_writes()
    if pending and cfg.get(C.WRITE_CONCURRENCY_MODE) != C.OCC:
        raise HudiCompactionError(
            f"cannot schedule a compaction while writes are pending ({', '.join(i.timestamp for i in pending)}); "
            "let them finish, or run a write (which rolls failed ones back) first")
    uncommitted = frozenset(rel for inst in pending for rel, _io in list_markers(timeline.storage, inst.timestamp))
    busy = set(pending_file_groups(timeline)) | set(clustering_file_groups(timeline))  # as Hudi's plan generator
    plan = plan_compaction(view, busy, cfg, uncommitted=uncommitted)
    if not plan.operations:
        return None
    timeline.create_requested(instant_time, COMPACTION, plan.to_bytes())
    return plan


def delta_commits_since_last_compaction(timeline: Timeline) -> int:
    """Completed delta commits after the latest completed commit (on MOR tables: compactions)."""
    commits = timeline.completed([COMMIT])
    last = commits[-1].timestamp if commits else ""
    return sum(1 for i in timeline.completed([DELTA_COMMIT]) if i.timestamp > last)


def compaction_due(timeline: Timeline, cfg: HudiConfig) -> bool:
    """Whether the inline trigger (``hoodie.compact.inline.trigger.strategy``) is reached."""
    strategy = cfg.get(C.COMPACT_INLINE_TRIGGER_STRATEGY)
    if strategy not in ("NUM_COMMITS", "NUM_COMMITS_AFTER_LAST_REQUEST"):
        raise HudiUnsupportedError(f"hoodie.compact.inline.trigger.strategy={strategy} is not supported; "
                                   "use NUM_COMMITS")
    count = delta_commits_since_last_compaction(timeline)
    if strategy == "NUM_COMMITS_AFTER_LAST_REQUEST":
        requested = [i.timestamp for i in timeline.instants() if i.action == COMPACTION or (
            i.action == COMMIT and i.is_completed)]
        last = max(requested) if requested else ""
        count = sum(1 for i in timeline.completed([DELTA_COMMIT]) if i.timestamp > last)
    return count >= cfg.get(C.COMPACT_INLINE_MAX_DELTA_COMMITS)


@under_table_lock
def schedule_compaction(table: HudiTable, cfg: HudiConfig, *, instant_time: str | None = None) -> str | None:
    """Schedule a compaction of ``table`` now; its instant, or None when no file slice has logs."""
    table.check_writable("compaction", merges=True)
    if table.table_type != MERGE_ON_READ:
        raise HudiCompactionError(f"{table.path} is a {table.table_type} table; only MERGE_ON_READ tables compact")
    table.timeline.reload()
    utc = table.config.utc_timeline
    instant = instant_time or new_instant_time(after=table.timeline.last_instant_time(), utc=utc)
    plan = schedule(table.timeline, table.file_system_view(), cfg, instant)
    return instant if plan is not None else None


