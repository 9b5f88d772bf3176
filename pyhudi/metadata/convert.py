"""Data-table actions as ``files``-partition records, the way Hudi's metadata writer turns them.

Every completed action is applied to the metadata table as one delta commit of these records:

* a commit, delta commit or replace commit: ``__all_partitions__`` with every partition it wrote
  to, and per partition its files with their sizes after the write (a log file appended to twice
  in one commit keeps the larger size). Replaced file groups stay listed: their files remain
  until the cleaner deletes them. A ``DELETE_PARTITION`` replace commit marks its partitions
  deleted in ``__all_partitions__``;
* a clean: per partition, the files it deleted (``isDeleted``);
* a rollback (and each rollback inside a restore): per partition, the files it deleted, the log
  files it wrote rollback blocks to, and the log files the failed instant appended to, with their
  sizes (an append the metadata table never saw still grew the file).

A non-partitioned table's files are recorded under ``.``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from pyhudi.metadata.files import files_record, partitions_record
from pyhudi.timeline.commit_metadata import CommitMetadata

Record = tuple[str, dict]


def commit_records(meta: CommitMetadata) -> list[Record]:
    """The records of a completed commit, delta commit or replace commit."""
    deleted = sorted(p or "." for p in meta.partition_to_replace_file_ids or {}) \
        if meta.operation_type == "DELETE_PARTITION" else []
    records = [partitions_record(sorted(p or "." for p in meta.partition_to_write_stats), deleted)]
    for partition, stats in sorted(meta.partition_to_write_stats.items()):
        sizes: dict[str, int] = {}
        for stat in stats:
            if not stat.path:
                continue
            name = posixpath.basename(stat.path)
            sizes[name] = max(sizes.get(name, 0), int(stat.fileSizeInBytes or 0))
            # a CDC table's change data files are listed too (HoodieTableMetadataUtil
            # .convertMetadataToFilesPartitionRecords adds each write stat's cdcStats)
            for cdc_path, size in (stat.cdcStats or {}).items():
                sizes[posixpath.basename(cdc_path)] = int(size)
        records.append(files_record(partition, sizes))
    return records


def clean_records(clean_metadata: Mapping[str, Any]) -> list[Record]:
    """The records of a completed clean (``HoodieCleanMetadata``): as in Hudi, every file it set
    out to delete (``deletePathPatterns``) leaves the listing."""
    records = []
    for partition, meta in sorted((clean_metadata.get("partitionMetadata") or {}).items()):
        planned = meta.get("deletePathPatterns") or meta.get("successDeleteFiles") or []
        records.append(files_record(partition, {}, [posixpath.basename(f) for f in planned]))
    return records


def rollback_records(rollback_metadata: Mapping[str, Any]) -> list[Record]:
    """The records of a completed rollback (``HoodieRollbackMetadata``)."""
    records = []
    for partition, meta in sorted((rollback_metadata.get("partitionMetadata") or {}).items()):
        appended = {posixpath.basename(f): int(size) for key in ("logFilesFromFailedCommit", "rollbackLogFiles")
                    for f, size in (meta.get(key) or {}).items()}
        deleted = [posixpath.basename(f) for f in meta.get("successDeleteFiles") or []]
        records.append(files_record(partition, appended, deleted))
    return records


def merge_records(records: list[Record]) -> list[Record]:
    """One record per key, as one delta commit holds them (a restore rolls back many instants):
    the entries of later records win."""
    merged: dict[str, dict] = {}
    for key, record in records:
        if key not in merged:
            merged[key] = {**record, "filesystemMetadata": dict(record.get("filesystemMetadata") or {})}
        else:
            merged[key]["filesystemMetadata"].update(record.get("filesystemMetadata") or {})
    return sorted(merged.items())
