"""Avro records Hudi keeps on the timeline and in the archived timeline (table version 6).

Java reads these files with its generated classes and resolves our writer schema against them,
so record names, namespace and field names/types/order/defaults must match Hudi's ``*.avsc``
definitions. Timeline files are Avro object containers with one record and no codec; the
archived timeline holds ``HoodieArchivedMetaEntry`` datums in log blocks (see
:mod:`pyhudi.timeline.archive`).

Schemas are plain dicts. A named type used in several places is the same dict object (or, in the
older constants, its name); :func:`expand_schema` turns a schema into one Avro can parse, with
each named type defined once, at its first use, and referenced by full name afterwards -- the
form Java's ``Schema.toString()`` produces for its generated classes.

The schemas added for the archived timeline follow Apache Hudi 0.14.0/0.14.1
(``hudi-common/src/main/avro/<file>.avsc``; the file of each is named in a comment). Later
releases only added fields with defaults, which Avro schema resolution fills in.
"""

from __future__ import annotations

import functools
import io
import json
from typing import Any

from pyhudi.errors import HudiCorruptFileError

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


# ---------------------------------------------------------------------------------------------
# Records of table services and of the archived timeline (Hudi 0.14.0/0.14.1)
# ---------------------------------------------------------------------------------------------
def _rec(name: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    """A top-level record of Hudi's namespace (nested records inherit the namespace)."""
    return {"type": "record", "name": name, "namespace": NAMESPACE, "fields": fields}


def _f(name: str, t: Any, *default: Any) -> dict[str, Any]:
    """A field; the default, when given, may be None (Avro ``null``), so it is positional-optional."""
    field: dict[str, Any] = {"name": name, "type": t}
    if default:
        field["default"] = default[0]
    return field


def _arr(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _map(values: Any) -> dict[str, Any]:
    return {"type": "map", "values": values}


def _onull(name: str, t: Any) -> dict[str, Any]:
    """The commonest Hudi field: ``["null", t]`` with default null."""
    return _f(name, _opt(t), None)


_VERSION = _f("version", ["int", "null"], 1)
_STR_MAP = _map(_STR)

#: HoodieWriteStat, defined inside HoodieCommitMetadata.avsc. Its fields are not the JSON
#: write stat's: Java copies the JSON stat into it by property name (``totalLogFiles`` has no
#: JSON counterpart and stays null; cdcStats, runtimeStats, event times... are dropped).
WRITE_STAT = _rec("HoodieWriteStat", [
    _onull("fileId", _STR), _onull("path", _STR), _onull("prevCommit", _STR),
    _onull("numWrites", "long"), _onull("numDeletes", "long"), _onull("numUpdateWrites", "long"),
    _onull("totalWriteBytes", "long"), _onull("totalWriteErrors", "long"), _onull("partitionPath", _STR),
    _onull("totalLogRecords", "long"), _onull("totalLogFiles", "long"),
    _onull("totalUpdatedRecordsCompacted", "long"), _onull("numInserts", "long"), _onull("totalLogBlocks", "long"),
    _onull("totalCorruptLogBlock", "long"), _onull("totalRollbackBlocks", "long"),
    _onull("fileSizeInBytes", "long"),
])

#: HoodieCommitMetadata.avsc: the Avro commit metadata (archived commits; v8 timeline files).
COMMIT_METADATA = _rec("HoodieCommitMetadata", [
    _onull("partitionToWriteStats", _map(_arr(WRITE_STAT))),
    _onull("extraMetadata", _STR_MAP),
    _VERSION,
    _onull("operationType", _STR),
])

#: HoodieReplaceCommitMetadata.avsc
REPLACE_COMMIT_METADATA = _rec("HoodieReplaceCommitMetadata", [
    _onull("partitionToWriteStats", _map(_arr(WRITE_STAT))),
    _onull("extraMetadata", _STR_MAP),
    _VERSION,
    _onull("operationType", _STR),
    _onull("partitionToReplaceFileIds", _map(_arr(_STR))),
])

#: HoodieCompactionMetadata.avsc (deprecated; only a field of HoodieArchivedMetaEntry). Its only
#: field has no default in Hudi.
COMPACTION_METADATA = _rec("HoodieCompactionMetadata", [
    _f("partitionToCompactionWriteStats", _opt(_map(_arr({
        "type": "record", "name": "HoodieCompactionWriteStat", "fields": [
            _onull("partitionPath", _STR), _onull("totalLogRecords", "long"), _onull("totalLogFiles", "long"),
            _onull("totalUpdatedRecordsCompacted", "long"), _onull("hoodieWriteStat", WRITE_STAT),
        ]})))),
])

#: HoodieCleanPartitionMetadata.avsc
CLEAN_PARTITION_METADATA = _rec("HoodieCleanPartitionMetadata", [
    _f("partitionPath", _STR), _f("policy", _STR),
    _f("deletePathPatterns", _arr(_STR)), _f("successDeleteFiles", _arr(_STR)), _f("failedDeleteFiles", _arr(_STR)),
    _onull("isPartitionDeleted", "boolean"),
])

#: HoodieCleanMetadata.avsc (the completed ``T.clean``). 0.14 has no ``extraMetadata`` (added by
#: HUDI-7104 in 0.15/1.0, with a default).
CLEAN_METADATA = _rec("HoodieCleanMetadata", [
    _f("startCleanTime", _STR), _f("timeTakenInMillis", "long"), _f("totalFilesDeleted", "int"),
    _f("earliestCommitToRetain", _STR), _f("lastCompletedCommitTimestamp", _STR, ""),
    _f("partitionMetadata", _map(CLEAN_PARTITION_METADATA)),
    _VERSION,
    _onull("bootstrapPartitionMetadata", _map(CLEAN_PARTITION_METADATA)),
])

#: HoodieActionInstant, defined inside HoodieCleanerPlan.avsc
ACTION_INSTANT = _rec("HoodieActionInstant", [_f("timestamp", _STR), _f("action", _STR), _f("state", _STR)])

#: HoodieCleanFileInfo, defined inside HoodieCleanerPlan.avsc
CLEAN_FILE_INFO = _rec("HoodieCleanFileInfo", [_onull("filePath", _STR), _onull("isBootstrapBaseFile", "boolean")])

#: HoodieCleanerPlan.avsc (``T.clean.requested`` and ``T.clean.inflight``). Version 2 plans fill
#: ``filePathsToBeDeletedPerPartition``; ``filesToBeDeletedPerPartition`` is the deprecated v1 form.
#: 0.14 has no ``extraMetadata`` (added by HUDI-7104 in 0.15/1.0, with a default).
CLEANER_PLAN = _rec("HoodieCleanerPlan", [
    _onull("earliestInstantToRetain", ACTION_INSTANT),
    _f("lastCompletedCommitTimestamp", _STR, ""),
    _f("policy", _STR),
    _onull("filesToBeDeletedPerPartition", _map(_arr(_STR))),
    _VERSION,
    _onull("filePathsToBeDeletedPerPartition", _map(_arr(CLEAN_FILE_INFO))),
    _onull("partitionsToBeDeleted", _arr(_STR)),
])

#: HoodieSavepointPartitionMetadata, defined inside HoodieSavePointMetadata.avsc
SAVEPOINT_PARTITION_METADATA = _rec("HoodieSavepointPartitionMetadata", [
    _f("partitionPath", _STR), _f("savepointDataFile", _arr(_STR)),
])

#: HoodieSavePointMetadata.avsc (record name HoodieSavepointMetadata; the completed ``T.savepoint``)
SAVEPOINT_METADATA = _rec("HoodieSavepointMetadata", [
    _f("savepointedBy", _STR), _f("savepointedAt", "long"), _f("comments", _STR),
    _f("partitionMetadata", _map(SAVEPOINT_PARTITION_METADATA)),
    _VERSION,
])

#: HoodieRestorePlan.avsc (``T.restore.requested``); note the version default 2
RESTORE_PLAN = _rec("HoodieRestorePlan", [
    _f("instantsToRollback", _arr(INSTANT_INFO), []),
    _f("version", ["int", "null"], 2),
    _onull("savepointToRestoreTimestamp", _STR),
])

#: HoodieRestoreMetadata.avsc (the completed ``T.restore``): one list of rollback metadata per
#: rolled-back instant. HoodieInstantInfo is first defined inside HoodieRollbackMetadata.
RESTORE_METADATA = _rec("HoodieRestoreMetadata", [
    _f("startRestoreTime", _STR), _f("timeTakenInMillis", "long"), _f("instantsToRollback", _arr(_STR)),
    _f("hoodieRestoreMetadata", _map(_arr(_opt(ROLLBACK_METADATA)))),
    _VERSION,
    _f("restoreInstantInfo", _arr(INSTANT_INFO), []),
])

#: HoodieCompactionOperation, defined inside HoodieCompactionOperation.avsc (whose top record is
#: HoodieCompactionPlan); the same fields as in :data:`COMPACTION_PLAN`. ``baseInstantTime`` and
#: ``fileId`` have no default in Hudi.
COMPACTION_OPERATION = _rec("HoodieCompactionOperation", [
    _f("baseInstantTime", _opt(_STR)), _onull("deltaFilePaths", _arr(_STR)), _onull("dataFilePath", _STR),
    _f("fileId", _opt(_STR)), _onull("partitionPath", _STR), _onull("metrics", _map("double")),
    _onull("bootstrapFilePath", _STR),
])

#: HoodieCompactionStrategy.avsc
COMPACTION_STRATEGY = _rec("HoodieCompactionStrategy", [
    _onull("compactorClassName", _STR), _onull("strategyParams", _STR_MAP), _VERSION,
])

#: HoodieCompactionOperation.avsc: the whole HoodieCompactionPlan of 0.14 (``COMPACTION_PLAN`` is
#: the subset pyhudi writes).
COMPACTION_PLAN_FULL = _rec("HoodieCompactionPlan", [
    _onull("operations", _arr(COMPACTION_OPERATION)),
    _onull("extraMetadata", _STR_MAP),
    _VERSION,
    _onull("strategy", COMPACTION_STRATEGY),
    _f("preserveHoodieMetadata", ["boolean", "null"], False),
])

#: HoodieSliceInfo.avsc
SLICE_INFO = _rec("HoodieSliceInfo", [
    _onull("dataFilePath", _STR), _onull("deltaFilePaths", _arr(_STR)), _f("fileId", _opt(_STR)),
    _onull("partitionPath", _STR), _onull("bootstrapFilePath", _STR), _VERSION,
])

#: HoodieClusteringGroup.avsc
CLUSTERING_GROUP = _rec("HoodieClusteringGroup", [
    _onull("slices", _arr(SLICE_INFO)), _onull("metrics", _map("double")),
    _f("numOutputFileGroups", ["int", "null"], 1), _onull("extraMetadata", _STR_MAP), _VERSION,
])

#: HoodieClusteringStrategy.avsc
CLUSTERING_STRATEGY = _rec("HoodieClusteringStrategy", [
    _onull("strategyClassName", _STR), _onull("strategyParams", _STR_MAP), _VERSION,
])

#: HoodieClusteringPlan.avsc
CLUSTERING_PLAN = _rec("HoodieClusteringPlan", [
    _onull("inputGroups", _arr(CLUSTERING_GROUP)), _onull("strategy", CLUSTERING_STRATEGY),
    _onull("extraMetadata", _STR_MAP), _VERSION, _onull("preserveHoodieMetadata", "boolean"),
])

#: HoodieRequestedReplaceMetadata.avsc with its clustering plan branch (``REQUESTED_REPLACE_METADATA``
#: is the subset pyhudi writes).
REQUESTED_REPLACE_METADATA_FULL = _rec("HoodieRequestedReplaceMetadata", [
    _onull("operationType", _STR), _onull("clusteringPlan", CLUSTERING_PLAN),
    _onull("extraMetadata", _STR_MAP), _VERSION,
])

#: HoodieIndexPartitionInfo.avsc
INDEX_PARTITION_INFO = _rec("HoodieIndexPartitionInfo", [
    _VERSION, _onull("metadataPartitionPath", _STR), _onull("indexUptoInstant", _STR),
])

#: HoodieIndexCommitMetadata.avsc
INDEX_COMMIT_METADATA = _rec("HoodieIndexCommitMetadata", [
    _VERSION, _onull("operationType", _STR), _onull("indexPartitionInfos", _arr(INDEX_PARTITION_INFO)),
])

#: HoodieArchivedMetaEntry.avsc: one instant file (requested, inflight or completed) of the
#: archived timeline. ``stateTransitionTime`` arrived in 0.14 (HUDI-5517); ``version`` is left
#: null by Java's archiver (it never sets it).
ARCHIVED_META_ENTRY = _rec("HoodieArchivedMetaEntry", [
    _onull("hoodieCommitMetadata", COMMIT_METADATA),
    _onull("hoodieCleanMetadata", CLEAN_METADATA),
    _onull("hoodieCompactionMetadata", COMPACTION_METADATA),
    _onull("hoodieRollbackMetadata", ROLLBACK_METADATA),
    _onull("hoodieSavePointMetadata", SAVEPOINT_METADATA),
    _onull("commitTime", _STR),
    _onull("actionType", _STR),
    _VERSION,
    _onull("hoodieCompactionPlan", COMPACTION_PLAN_FULL),
    _onull("hoodieCleanerPlan", CLEANER_PLAN),
    _onull("actionState", _STR),
    _onull("hoodieReplaceCommitMetadata", REPLACE_COMMIT_METADATA),
    _onull("hoodieRequestedReplaceMetadata", REQUESTED_REPLACE_METADATA_FULL),
    _onull("HoodieInflightReplaceMetadata", COMMIT_METADATA),
    _onull("hoodieIndexCommitMetadata", INDEX_COMMIT_METADATA),
    _onull("stateTransitionTime", _STR),
])


# ---------------------------------------------------------------------------------------------
# Named types, encoding and decoding
# ---------------------------------------------------------------------------------------------
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED_KINDS = frozenset({"record", "error", "enum", "fixed"})
#: where a reference by name (rather than by the dict itself) finds its definition; the full 0.14
#: records come before the subsets pyhudi writes, so a name resolves to Hudi's definition
_CANONICAL = (ARCHIVED_META_ENTRY, RESTORE_PLAN, RESTORE_METADATA, ROLLBACK_PLAN, INSTANT_INFO)


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


@functools.lru_cache(maxsize=1)
def _known_types() -> dict[str, dict[str, Any]]:
    """Every named record reachable from the canonical schemas, by full name (first one wins)."""
    found: dict[str, dict[str, Any]] = {}

    def visit(node: Any, ns: str | None) -> None:
        if isinstance(node, list):
            for branch in node:
                visit(branch, ns)
        elif isinstance(node, dict):
            kind = node.get("type")
            if kind in _NAMED_KINDS:
                full = _full_name(node["name"], node.get("namespace", ns))
                if full in found:
                    return
                found[full] = node
                for f in node.get("fields", []):
                    visit(f["type"], full.rpartition(".")[0] or None)
            elif kind == "array":
                visit(node["items"], ns)
            elif kind == "map":
                visit(node["values"], ns)
            elif isinstance(kind, (dict, list)):
                visit(kind, ns)

    for schema in _CANONICAL:
        visit(schema, None)
    return found


def expand_schema(schema: Any) -> Any:
    """``schema`` with each named type defined once, where first used, and named after that.

    Avro rejects a second definition of a name, while our constants embed shared records (a
    HoodieWriteStat in commit and replace metadata, HoodieInstantInfo in rollback and restore
    records) as the same dict in several places, and older constants refer to a record by name
    before any definition. Both forms come out as Java's generated schemas look: definition at
    the first use in field order, full name afterwards.
    """
    defined: set[str] = set()

    def walk(node: Any, ns: str | None) -> Any:
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return node
            full = _full_name(node, ns)
            if full in defined:
                return full
            known = _known_types().get(full)
            if known is None:
                raise ValueError(f"Avro type {node!r} is used before its definition and is not a known Hudi record")
            return walk(known, ns)
        if isinstance(node, list):
            return [walk(branch, ns) for branch in node]
        kind = node["type"]
        if kind in _NAMED_KINDS:
            full = _full_name(node["name"], node.get("namespace", ns))
            if full in defined:
                return full
            defined.add(full)
            own_ns = full.rpartition(".")[0] or None
            out: dict[str, Any] = {}
            for key, value in node.items():
                if key == "fields":
                    value = [{**f, "type": walk(f["type"], own_ns)} for f in value]
                out[key] = value
            if "namespace" not in node and own_ns != ns and "." not in node["name"]:
                out["namespace"] = own_ns
            return out
        if kind == "array":
            return {**node, "items": walk(node["items"], ns)}
        if kind == "map":
            return {**node, "values": walk(node["values"], ns)}
        if isinstance(kind, (dict, list)) or kind not in _PRIMITIVES:
            return {**node, "type": walk(kind, ns)}
        return dict(node)  # a primitive with attributes (logicalType...)

    return walk(schema, None)


def schema_json(schema: Any) -> str:
    """The expanded schema as compact JSON (what Java's ``Schema.toString()`` gives; log block headers)."""
    return json.dumps(expand_schema(schema), separators=(",", ":"))


@functools.lru_cache(maxsize=64)
def _parsed(schema_text: str) -> Any:
    import fastavro

    return fastavro.parse_schema(json.loads(schema_text))


def parsed_schema(schema: Any) -> Any:
    """``schema`` (a dict, or Avro JSON text as found in a log block header) parsed by fastavro, cached."""
    return _parsed(schema if isinstance(schema, str) else schema_json(schema))


def write_record(schema: dict, record: dict) -> bytes:
    """One record as an Avro object container file (codec null), the form of Hudi's timeline files."""
    import fastavro

    buf = io.BytesIO()
    fastavro.writer(buf, parsed_schema(schema), [record], codec="null")
    return buf.getvalue()


def read_record(data: bytes, schema: dict | None = None, *, source: str = "timeline file") -> dict:
    """The single record of an Avro object container file.

    With ``schema`` the record is resolved against it (Avro schema resolution): fields the writer
    did not know get their defaults and fields the schema does not have are dropped, so a file of
    another Hudi release reads as the record this module describes.
    """
    import fastavro

    try:
        reader = fastavro.reader(io.BytesIO(data), reader_schema=None if schema is None else parsed_schema(schema))
        record = next(iter(reader), None)
    except Exception as exc:  # fastavro raises several unrelated types on bad input
        raise HudiCorruptFileError(f"{source} is not a readable Avro file: {exc}") from None
    if not isinstance(record, dict):
        raise HudiCorruptFileError(f"{source} holds no Avro record")
    return record


def encode_datum(schema: Any, record: dict) -> bytes:
    """A record as a schemaless Avro datum (the records of log data blocks)."""
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed_schema(schema), record)
    return buf.getvalue()


def decode_datum(data: bytes, writer_schema: Any, reader_schema: Any = None) -> dict:
    """A schemaless Avro datum written with ``writer_schema``, resolved against ``reader_schema``.

    Raises ValueError (and the decoder's own errors) on bytes that do not hold one whole datum.
    """
    import fastavro

    stream = io.BytesIO(data)
    record = fastavro.schemaless_reader(stream, parsed_schema(writer_schema),
                                       None if reader_schema is None else parsed_schema(reader_schema))
    if stream.tell() != len(data):
        raise ValueError(f"{len(data) - stream.tell()} bytes left after the datum")
    if not isinstance(record, dict):
        raise ValueError("the datum is not a record")
    return record
