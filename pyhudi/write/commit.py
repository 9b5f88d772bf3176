"""From executor stats to a completed commit, and the result handed back to the caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyhudi.timeline.metadata import CommitMetadata, WriteStat
from pyhudi.write.markers import CREATE


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
    io_type = row["io_type"]
    runtime = {"totalScanTime": 0, "totalUpsertTime": row["time_ms"] if io_type != CREATE else 0,
               "totalCreateTime": row["time_ms"] if io_type == CREATE else 0}
    return WriteStat(
        fileId=row["file_id"], path=row["path"], partitionPath=row["partition_path"],
        prevCommit=row["prev_commit"] or "null", numWrites=row["num_writes"],
        numDeletes=row["num_deletes"], numUpdateWrites=row["num_update_writes"],
        numInserts=row["num_inserts"], totalWriteBytes=row["file_size"],
        fileSizeInBytes=row["file_size"], runtimeStats=runtime)


def commit_metadata(rows: list[dict[str, Any]], *, operation_type: str, schema_json: str,
                    replaced: dict[str, list[str]] | None = None) -> CommitMetadata:
    by_partition: dict[str, list[WriteStat]] = {}
    for row in sorted(rows, key=lambda r: (r["partition_path"], r["file_id"])):
        by_partition.setdefault(row["partition_path"], []).append(write_stat(row))
    return CommitMetadata(partition_to_write_stats=by_partition, operation_type=operation_type,
                          extra_metadata={"schema": schema_json}, partition_to_replace_file_ids=replaced)


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
