"""What the CLI says about instants: one line per instant of the timeline, and the detail of one.

``hudi-cli`` spreads this over ``timeline show active``, ``cleans show``, ``savepoints show`` and
``commit showfiles``; here one table answers "what happened to this table, when, and what did each
step write or remove", and ``show commit`` explains any instant, not only writes.
"""

from __future__ import annotations

import datetime as dt
import posixpath
from collections.abc import Sequence

from pyhudi.cli.common import table_text
from pyhudi.config import HudiConfig
from pyhudi.table.table import HudiTable
from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.instant import (
    CLEAN,
    COMPACTION,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    State,
)
from pyhudi.timeline.timeline import family
from pyhudi.transaction.heartbeat import HeartbeatPolicy, heartbeat_age


def _fmt_time(mtime_ns: int | None) -> str:
    if not mtime_ns:
        return "-"
    return dt.datetime.fromtimestamp(mtime_ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")


def _record(table: HudiTable, inst: Instant) -> dict:
    data = table.timeline.read_bytes(inst)
    return read_record(data) if data else {}


def describe(table: HudiTable, inst: Instant) -> str:
    """A short account of what an instant wrote or removed."""
    tl = table.timeline
    try:
        if inst.action in WRITE_ACTIONS and inst.is_completed:
            m = tl.commit_metadata(inst)
            stats = m.write_stats()
            base = f"{m.operation_type}: {len(stats)} files, {m.total('numWrites')} records written"
            if m.operation_type == "COMPACT":
                return f"compacted {len(stats)} file slices ({m.total('totalLogFilesCompacted')} log files)"
            parts = [base]
            if m.total("numUpdateWrites"):
                parts.append(f"{m.total('numUpdateWrites')} updates")
            if m.total("numDeletes"):
                parts.append(f"{m.total('numDeletes')} deletes")
            replaced = sum(len(v) for v in (m.partition_to_replace_file_ids or {}).values())
            if replaced:
                parts.append(f"{replaced} file groups replaced")
            return ", ".join(parts)
        if inst.action == CLEAN and inst.is_completed:
            rec = _record(table, inst)
            kept = rec.get("earliestCommitToRetain") or "-"
            metas: list[dict] = list((rec.get("partitionMetadata") or {}).values())
            policy = metas[0].get("policy", "") if metas else ""
            return f"deleted {rec.get('totalFilesDeleted', 0)} files ({policy}, retains from {kept})"
        if inst.action == CLEAN:
            rec = _record(table, inst.with_state(State.REQUESTED))
            n = sum(len(v) for v in (rec.get("filePathsToBeDeletedPerPartition") or {}).values())
            return f"plans to delete {n} files"
        if inst.action == ROLLBACK and inst.is_completed:
            rec = _record(table, inst)
            blocks = sum(len(p.get("rollbackLogFiles") or {}) for p in rec["partitionMetadata"].values())
            targets = ", ".join(rec.get("commitsRollback") or [])
            return f"rolled back {targets}: deleted {rec.get('totalFilesDeleted')} files, {blocks} rollback blocks"
        if inst.action == SAVEPOINT and inst.is_completed:
            rec = _record(table, inst)
            n = sum(len(p.get("savepointDataFile") or []) for p in (rec.get("partitionMetadata") or {}).values())
            note = f" '{rec['comments']}'" if rec.get("comments") else ""
            return f"keeps {n} files for restore, by {rec.get('savepointedBy')}{note}"
        if inst.action == RESTORE:
            plan = _record(table, inst.with_state(State.REQUESTED))
            return f"restore to savepoint {plan.get('savepointToRestoreTimestamp')}: rolls back " \
                   f"{len(plan.get('instantsToRollback') or [])} instants"
        if inst.action == COMPACTION:
            plan = _record(table, inst.with_state(State.REQUESTED))
            return f"compaction plan of {len(plan.get('operations') or [])} file slices"
        if inst.action in WRITE_ACTIONS:
            return _heartbeat_text(table, inst)
    except Exception as exc:  # a damaged instant file must not hide the rest of the timeline
        return f"unreadable: {exc}"
    return "pending" if not inst.is_completed else ""


def _heartbeat_text(table: HudiTable, inst: Instant) -> str:
    """A pending write: running (heartbeat fresh) or failed (expired, rolled back by the next writer)."""
    policy = HeartbeatPolicy.of(HudiConfig())
    age = heartbeat_age(table.storage, inst.timestamp)
    if age is None:
        return "pending, no heartbeat: a failed write (the next writer or cleaner rolls it back)"
    if age <= policy.max_age_s:
        return f"in progress: heartbeat {age:.0f} s ago"
    return f"failed: heartbeat {age:.0f} s ago, expired (the next writer or cleaner rolls it back)"


def show_timeline(table: HudiTable) -> str:
    tl = table.timeline
    mtimes = {info.name: info.mtime_ns for info in table.storage.list_files(tl.folder)}
    rows = []
    for inst in tl.instants():
        times = []
        for state in State:
            files = [i for i in tl.instant_files
                     if i.timestamp == inst.timestamp and i.state == state and family(i.action) == family(inst.action)]
            times.append(_fmt_time(mtimes.get(files[0].file_name(tl.layout_version))) if files else "-")
        rows.append([inst.timestamp, inst.action, inst.state.name, *times, describe(table, inst)])
    return table_text(["Instant", "Action", "State", "Requested", "Inflight", "Completed", "What it did"], rows)


def show_service_instant(table: HudiTable, inst: Instant) -> str | None:
    """Per-partition detail of a clean, rollback, savepoint or restore; None for other actions."""
    head = f"{inst.action} {inst.timestamp}  {describe(table, inst)}\n"
    if inst.action == CLEAN and inst.is_completed:
        rec = _record(table, inst)
        rows = [[p or '""', len(m.get("successDeleteFiles") or []), len(m.get("failedDeleteFiles") or []),
                 ", ".join(m.get("successDeleteFiles") or [])] for p, m in sorted(rec["partitionMetadata"].items())]
        return head + table_text(["Partition Path", "Deleted", "Failed", "Files"], rows)
    if inst.action == ROLLBACK and inst.is_completed:
        return head + _rollback_rows(_record(table, inst))
    if inst.action == SAVEPOINT and inst.is_completed:
        rec = _record(table, inst)
        rows = [[p or '""', len(m.get("savepointDataFile") or []), ", ".join(m.get("savepointDataFile") or [])]
                for p, m in sorted((rec.get("partitionMetadata") or {}).items())]
        return head + table_text(["Partition Path", "Files", "Names"], rows)
    if inst.action == RESTORE and inst.is_completed:
        rec = _record(table, inst)
        parts = [head]
        for target, metas in sorted((rec.get("hoodieRestoreMetadata") or {}).items(), reverse=True):
            for meta in metas:
                parts.append(f"rollback of {target}:\n{_rollback_rows(meta)}\n")
        return "".join(parts)
    return None


def _rollback_rows(rec: dict) -> str:
    rows: list[Sequence[object]] = []
    for p, m in sorted((rec.get("partitionMetadata") or {}).items()):
        rows.append([p or '""', len(m.get("successDeleteFiles") or []), len(m.get("rollbackLogFiles") or {}),
                     ", ".join(posixpath.basename(f) for f in m.get("successDeleteFiles") or [])])
    return table_text(["Partition Path", "Deleted Files", "Rollback Blocks", "Files"], rows)

