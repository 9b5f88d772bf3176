"""From executor stats to a completed commit, and the result handed back to the caller."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.write.markers import APPEND, CREATE
from pyhudi.write.replace import REPLACE_OPERATIONS

#: ``hoodie.datasource.write.operation`` values pyhudi writes -> the ``WriteOperationType`` their
#: commits record (what Hudi's readers, cleaners and CLI key on)
OPERATION_TYPES = {"upsert": "UPSERT", "insert": "INSERT", "bulk_insert": "BULK_INSERT", "delete": "DELETE",
                   **REPLACE_OPERATIONS}


@dataclass
class WriteResult:
    """What ``pyhudi.write`` returns: the committed instant and its statistics."""

    instant_time: str | None
    operation: str
    table_path: str
    stats: dict[str, Any] = field(default_factory=dict)
    write_stats: list[WriteStat] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"WriteResult(instant_time={self.instant_time!r}, operation={self.operation!r}, "
                f"files={len(self.write_stats)}, stats={self.stats!r})")


def write_stat(row: dict[str, Any]) -> WriteStat:
    """The ``HoodieWriteStat`` of one executor stats row (a delta write stat for log files)."""
    io_type = row["io_type"]
    runtime = {"totalScanTime": 0, "totalUpsertTime": row["time_ms"] if io_type != CREATE else 0,
               "totalCreateTime": row["time_ms"] if io_type == CREATE else 0}
    stat = WriteStat(
        fileId=row["file_id"], path=row["path"], partitionPath=row["partition_path"],
        prevCommit=row["prev_commit"] or "null", numWrites=row["num_writes"],
        numDeletes=row["num_deletes"], numUpdateWrites=row["num_update_writes"],
        numInserts=row["num_inserts"], totalWriteBytes=row.get("write_bytes") or row["file_size"],
        fileSizeInBytes=row["file_size"], runtimeStats=runtime)
    if row.get("cdc_stats"):  # HoodieWriteStat.cdcStats: the change data files, path -> size
        stat.cdcStats = {str(k): int(v) for k, v in json.loads(row["cdc_stats"]).items()}
    if io_type == APPEND:
        stat.logVersion = row["log_version"]
        stat.logOffset = row["log_offset"]
        stat.baseFile = row["base_file"] or ""
        stat.logFiles = [n for n in (row["log_files"] or "").split("\n") if n]
        stat.totalLogBlocks = row.get("log_blocks") or 0
        stat.totalLogRecords = row["num_writes"] + row["num_deletes"]
    if row.get("log_files_compacted") is not None:  # compaction
        stat.totalLogFilesCompacted = row["log_files_compacted"]
        stat.totalLogSizeCompacted = row["log_size_compacted"] or 0
        stat.totalUpdatedRecordsCompacted = row["updated_compacted"] or 0
        stat.totalLogRecords = row["log_records"] or 0
        stat.totalLogBlocks = row.get("log_blocks") or 0
        stat.totalRollbackBlocks = row["rollback_blocks"] or 0
        stat.totalCorruptLogBlock = row["corrupt_blocks"] or 0
    return stat


def written_files(rows: list[dict[str, Any]]) -> list[str]:
    """Relative paths of every file the executor stats rows name: data files and the change data
    files of a CDC table (their markers name them too, so the commit keeps them; any other marked
    file is a failed task attempt's)."""
    out = [r["path"] for r in rows if r.get("path")]
    for r in rows:
        if r.get("cdc_stats"):
            out.extend(json.loads(r["cdc_stats"]))
    return out


def commit_metadata(rows: list[dict[str, Any]], *, operation_type: str, schema_json: str,
                    replaced: dict[str, list[str]] | None = None) -> CommitMetadata:
    by_partition: dict[str, list[WriteStat]] = {}
    for row in sorted(rows, key=lambda r: (r["partition_path"], r["file_id"])):
        by_partition.setdefault(row["partition_path"], []).append(write_stat(row))
    return CommitMetadata(partition_to_write_stats=by_partition, operation_type=operation_type,
                          extra_metadata={"schema": schema_json}, partition_to_replace_file_ids=replaced)


#: extraMetadata entry of a pyhudi write: seconds of each write phase, as JSON
PHASES_KEY = "pyhudi.write.phases"
#: extraMetadata entry of a pyhudi write: the hoodie.* options the writer set, as JSON
OPTIONS_KEY = "pyhudi.write.options"
#: option keys whose values are not recorded (credentials of lock providers and stores)
_SECRET = re.compile(r"password|secret|token|credential|access\.?key", re.IGNORECASE)


def record_run(meta: CommitMetadata, phases: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    """Add the write's phase times and the ``hoodie.*`` options it was given to ``meta``, so that
    ``pyhudi report`` and ``pyhudi advise`` can tell how each write ran."""
    meta.extra_metadata[PHASES_KEY] = json.dumps(
        {k[:-2]: v for k, v in phases.items() if k.endswith("_s") and isinstance(v, (int, float))}, sort_keys=True)
    meta.extra_metadata[OPTIONS_KEY] = json.dumps(
        {k: str(v) for k, v in options.items() if k.startswith("hoodie.") and not _SECRET.search(k)}, sort_keys=True)


def recorded_options(timeline: Any) -> dict[str, str]:
    """The ``hoodie.*`` options the newest pyhudi write was given (empty when no write recorded
    them): what a table service run without options knows of how the table is written."""
    for inst in reversed(timeline.completed_writes()):
        text = timeline.commit_metadata(inst).extra_metadata.get(OPTIONS_KEY)
        if text:
            try:
                return dict(json.loads(text))
            except ValueError:
                return {}
    return {}


def summarize(meta: CommitMetadata) -> dict[str, Any]:
    stats = meta.write_stats()
    return {
        "partitions_written": len(meta.partition_to_write_stats),
        "files_created": sum(1 for s in stats if s.prevCommit == "null"),
        "files_merged": sum(1 for s in stats if s.prevCommit != "null"),
        "records_written": meta.total("numWrites"),
        "inserts": meta.total("numInserts"),
        "updates": meta.total("numUpdateWrites"),
        "deletes": meta.total("numDeletes"),
        "bytes_written": meta.total("totalWriteBytes"),
    }
