"""``pyhudi show commits|commit|file-groups|properties``: what writes did, as ``hudi-cli``'s ``commits``
and ``show fsview`` commands print it (``show commit`` of a clean, rollback, savepoint or restore is
explained by :mod:`pyhudi.cli.timeline`)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from pyhudi.cli.common import human, table_text
from pyhudi.cli.timeline import show_service_instant
from pyhudi.index import INDEX_STATS_KEY
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import SAVEPOINT, WRITE_ACTIONS
from pyhudi.transaction.conflict import CONFLICT_CHECK_KEY


def show_commits(table: HudiTable, limit: int) -> str:
    rows = []
    for c in reversed(table.commits()[-limit:] if limit else table.commits()):
        m = c.metadata
        rows.append([c.instant.timestamp, c.instant.action, m.operation_type, human(m.total("totalWriteBytes")),
                     c.files_added, c.files_updated, len(m.partition_to_write_stats), m.total("numWrites"),
                     m.total("numInserts"), m.total("numUpdateWrites"), m.total("numDeletes")])
    return table_text(["CommitTime", "Action", "Operation", "Total Bytes Written", "Total Files Added",
                       "Total Files Updated", "Total Partitions Written", "Total Records Written",
                       "Total Inserts", "Total Update Records Written", "Total Deletes"], rows)


def show_commit(table: HudiTable, instant: str) -> str:
    inst = table.timeline.find(instant)
    service = show_service_instant(table, inst)
    if service is not None:
        return service
    if not inst.is_completed:
        return f"instant {instant} is {inst.state.name.lower()} ({inst.action}); it has no commit metadata yet"
    meta = table.timeline.commit_metadata(inst)
    rows = []
    for partition, stats in sorted(meta.partition_to_write_stats.items()):
        for s in stats:
            rows.append([partition or '""', s.fileId, s.prevCommit, s.numWrites, s.numInserts, s.numUpdateWrites,
                         s.numDeletes, human(s.totalWriteBytes), s.file_name])
    head = f"{inst.action} {inst.timestamp}  operation={meta.operation_type}\n"
    body = table_text(["Partition Path", "File ID", "Previous Commit", "Records Written", "Inserts",
                       "Updates", "Deletes", "Bytes Written", "File"], rows)
    if meta.partition_to_replace_file_ids:
        replaced = sum(len(v) for v in meta.partition_to_replace_file_ids.values())
        body += f"\nreplaced file groups: {replaced}"
    index = meta.extra_metadata.get(INDEX_STATS_KEY)
    if index:
        body += "\n" + index_text(json.loads(index))
    if inst.action in WRITE_ACTIONS and meta.operation_type != "COMPACT":
        body += "\n" + conflict_text(meta.extra_metadata.get(CONFLICT_CHECK_KEY))
    saved = [sp for sp in table.timeline.completed([SAVEPOINT]) if sp.timestamp == inst.timestamp]
    if saved:  # a savepoint shares its commit's time
        body += "\n" + (show_service_instant(table, saved[0]) or "")
    return head + body


def conflict_text(recorded: str | None) -> str:
    """The conflict check a commit passed (optimistic concurrency control), or that it had none."""
    if not recorded:
        return "conflict check: none (written in single-writer mode)"
    check = json.loads(recorded)
    candidates = check.get("candidates") or []
    seen = ", ".join(candidates) if candidates else "none completed or planned meanwhile"
    return (f"conflict check ({check.get('mode')}): against {len(candidates)} instant(s) completed or planned "
            f"while it ran: {seen}; no overlapping file group")


def index_text(stats: dict) -> str:
    """The index lookup of a write, in the order a user tunes it: files, pruning, bloom, keys."""
    labels = [("index_type", "index"), ("partitions", "partitions looked up"),
              ("files_in_partitions", "files in those partitions"),
              ("files_after_range_pruning", "files after range pruning"),
              ("files_after_bloom", "files after bloom filter check"), ("keys_checked", "keys checked"),
              ("bloom_positives", "bloom positives"), ("false_positives", "false positives"),
              ("keys_matched", "keys matched")]
    rows = [[label, str(stats[k])] for k, label in labels if k in stats]
    rows += [[f"time {k.removesuffix('_s')} (s)", str(v)] for k, v in stats.get("phases", {}).items()]
    return table_text(["Index", "Value"], rows)


def show_file_groups(table: HudiTable, partition: str | None) -> str:
    view = table.file_system_view(partitions=[partition] if partition is not None else None)
    rows = []
    for group in view.file_groups():
        latest = group.latest_slice
        base = latest.base_file if latest else None
        records = ""
        if base is not None:
            with table.storage.fs.open_input_file(table.storage.full(base.path)) as f:
                records = str(pq.read_metadata(f).num_rows)
        logs = latest.log_files if latest else ()
        rows.append([group.partition_path or '""', group.file_id, latest.base_instant if latest else "",
                     base.name if base else "", human(base.size) if base else "", records, len(logs),
                     human(sum(lf.size for lf in logs)) if logs else "", len(group.slices)])
    return table_text(["Partition", "File ID", "Base Instant", "Latest Base File", "Size", "Records",
                       "Log Files", "Log Size", "Slices"], rows) + \
        f"\n{len(rows)} file group(s) in {len(view.partitions)} partition(s)"


def show_properties(table: HudiTable) -> str:
    return table_text(["Property", "Value"], sorted((k, v if len(v) < 100 else v[:97] + "...")
                                                   for k, v in table.properties.items()))
