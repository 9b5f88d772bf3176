"""Avro records Hudi keeps on the timeline (rollback plans and metadata, replace requests).

Java reads these files with its generated classes and resolves our writer schema against them,
so record names, namespace and field names/types must match Hudi's ``*.avsc`` definitions
(table version 6). Files are Avro object containers with one record and no codec.
"""

from __future__ import annotations

import io
from typing import Any

NAMESPACE = "org.apache.hudi.avro.model"
_STR = "string"
_LONG_MAP = {"type": "map", "values": "long"}


def _opt(t: Any) -> list[Any]:
    return ["null", t]


INSTANT_INFO = {
    "type": "record", "name": "HoodieInstantInfo", "namespace": NAMESPACE,
    "fields": [{"name": "commitTime", "type": _STR}, {"name": "action", "type": _STR}],
}

ROLLBACK_PLAN = {
    "type": "record", "name": "HoodieRollbackPlan", "namespace": NAMESPACE,
    "fields": [
        {"name": "instantToRollback", "type": _opt(INSTANT_INFO), "default": None},
        {"name": "RollbackRequests", "type": _opt({"type": "array", "items": {
            "type": "record", "name": "HoodieRollbackRequest", "fields": [
                {"name": "partitionPath", "type": _STR},
                {"name": "fileId", "type": _opt(_STR), "default": None},
                {"name": "latestBaseInstant", "type": _opt(_STR), "default": None},
                {"name": "filesToBeDeleted", "type": {"type": "array", "items": _STR}, "default": []},
                {"name": "logBlocksToBeDeleted", "type": _opt(_LONG_MAP), "default": None},
            ]}}), "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}

ROLLBACK_METADATA = {
    "type": "record", "name": "HoodieRollbackMetadata", "namespace": NAMESPACE,
    "fields": [
        {"name": "startRollbackTime", "type": _STR},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": {"type": "array", "items": _STR}},
        {"name": "partitionMetadata", "type": {"type": "map", "values": {
            "type": "record", "name": "HoodieRollbackPartitionMetadata", "fields": [
                {"name": "partitionPath", "type": _STR},
                {"name": "successDeleteFiles", "type": {"type": "array", "items": _STR}},
                {"name": "failedDeleteFiles", "type": {"type": "array", "items": _STR}},
                {"name": "rollbackLogFiles", "type": _opt(_LONG_MAP), "default": None},
                {"name": "logFilesFromFailedCommit", "type": _opt(_LONG_MAP), "default": None},
            ]}}},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "instantsRollback", "type": {"type": "array", "items": "HoodieInstantInfo"}, "default": []},
    ],
}

#: Only the fields an insert_overwrite request fills; the clustering plan branch is left out
#: (Avro schema resolution maps our ["null"] union onto Hudi's ["null", HoodieClusteringPlan]).
REQUESTED_REPLACE_METADATA = {
    "type": "record", "name": "HoodieRequestedReplaceMetadata", "namespace": NAMESPACE,
    "fields": [
        {"name": "operationType", "type": _opt(_STR), "default": None},
        {"name": "clusteringPlan", "type": ["null"], "default": None},
        {"name": "extraMetadata", "type": _opt({"type": "map", "values": _STR}), "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}


#: ``HoodieCompactionPlan`` (plan version 2: log and base files by name, relative to their partition).
#: Later Hudi releases added fields with defaults (strategy, preserveHoodieMetadata), which Avro
#: schema resolution fills in when Java reads our plans.
COMPACTION_PLAN = {
    "type": "record", "name": "HoodieCompactionPlan", "namespace": NAMESPACE,
    "fields": [
        {"name": "operations", "type": _opt({"type": "array", "items": {
            "type": "record", "name": "HoodieCompactionOperation", "fields": [
                {"name": "baseInstantTime", "type": _opt(_STR)},
                {"name": "deltaFilePaths", "type": _opt({"type": "array", "items": _STR}), "default": None},
                {"name": "dataFilePath", "type": _opt(_STR), "default": None},
                {"name": "fileId", "type": _opt(_STR)},
                {"name": "partitionPath", "type": _opt(_STR), "default": None},
                {"name": "metrics", "type": _opt({"type": "map", "values": "double"}), "default": None},
                {"name": "bootstrapFilePath", "type": _opt(_STR), "default": None},
            ]}}), "default": None},
        {"name": "extraMetadata", "type": _opt({"type": "map", "values": _STR}), "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}


def _with_instant_info_inline(schema: dict) -> dict:
    """The metadata schema references HoodieInstantInfo by name; define it where it is first used."""
    if schema is ROLLBACK_METADATA:
        fields = [dict(f) for f in schema["fields"]]
        for f in fields:
            if f["name"] == "instantsRollback":
                f["type"] = {"type": "array", "items": INSTANT_INFO}
        return {**schema, "fields": fields}
    return schema


def write_record(schema: dict, record: dict) -> bytes:
    import fastavro

    parsed = fastavro.parse_schema(_with_instant_info_inline(schema))
    buf = io.BytesIO()
    fastavro.writer(buf, parsed, [record], codec="null")
    return buf.getvalue()
