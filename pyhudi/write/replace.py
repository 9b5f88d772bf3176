"""Replace operations: which file groups an ``insert_overwrite``, ``insert_overwrite_table`` or
``delete_partition`` retires.

Each is a ``replacecommit`` whose ``partitionToReplaceFileIds`` names the retired groups. Readers
stop seeing them once the instant completes; the cleaner deletes them once the replace commit is
older than what it retains; rollback and restore undo the instant like any other. Nothing is
deleted when the instant completes, so a reader that planned before it still finds its files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pyhudi.errors import HudiConfigError
from pyhudi.table.fs_view import FileSystemView
from pyhudi.timeline.avro_records import REQUESTED_REPLACE_METADATA, write_record

#: operation -> ``WriteOperationType`` recorded in the commit
INSERT_OVERWRITE = "INSERT_OVERWRITE"
INSERT_OVERWRITE_TABLE = "INSERT_OVERWRITE_TABLE"
DELETE_PARTITION = "DELETE_PARTITION"
REPLACE_OPERATIONS = {"insert_overwrite": INSERT_OVERWRITE, "insert_overwrite_table": INSERT_OVERWRITE_TABLE,
                      "delete_partition": DELETE_PARTITION}


def requested_replace(operation_type: str) -> bytes:
    """The ``replacecommit.requested`` content (``HoodieRequestedReplaceMetadata``) of a replace write.

    On table versions 8 and 9 the timeline stores an overwrite's requested file with every field
    null, as Hudi 1.x does (:meth:`pyhudi.timeline.timeline.Timeline._pending_replace`); a
    delete_partition keeps its operation type there, as Hudi 1.x's ``startDeletePartitionCommit``."""
    return write_record(REQUESTED_REPLACE_METADATA, {
        "operationType": operation_type, "clusteringPlan": None, "extraMetadata": {}, "version": 1})


def replaced_file_groups(view: FileSystemView, partitions: Iterable[str] | None) -> dict[str, list[str]]:
    """Every live file group of ``partitions`` (all partitions when None), by partition."""
    wanted = None if partitions is None else set(partitions)
    replaced: dict[str, list[str]] = {}
    for group in view.file_groups():
        if wanted is None or group.partition_path in wanted:
            replaced.setdefault(group.partition_path, []).append(group.file_id)
    return replaced


def resolve_partitions(patterns: Iterable[str], existing: Iterable[str]) -> list[str]:
    """The partitions ``hoodie.datasource.write.partitions.to.delete`` names, as Hudi resolves them:
    ``*`` (or ``%2A``) matches any run of characters, anything else literally; names that match no
    partition of the table are dropped."""
    existing = sorted(set(existing))
    out: set[str] = set()
    for raw in patterns:
        pattern = raw.strip()
        if not pattern:
            continue
        if "*" in pattern or "%2A" in pattern:
            parts = re.split(r"\*|%2A", pattern)
            regex = re.compile(".*".join(re.escape(p) for p in parts))
            out.update(p for p in existing if regex.fullmatch(p))
        elif pattern in existing:
            out.add(pattern)
    return sorted(out)


def check_delete_partitions(patterns: list[str], resolved: list[str], path: str) -> None:
    if patterns and not resolved:
        raise HudiConfigError(f"hoodie.datasource.write.partitions.to.delete={','.join(patterns)} matches no "
                              f"partition of {path}; name partitions by their paths (e.g. 2024-01-01 or "
                              "day=2024-01-01 with hive-style partitioning), * matching any characters")
