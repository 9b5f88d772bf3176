"""Apache Hudi options pyhudi implements in part, and the few it accepts without effect.

pyhudi writes Hudi table versions 6, 8 and 9 with parquet base files and reads what those formats
hold. An option asking for more (another table version, another base file format, change data
capture, a custom merge) is refused with :class:`~pyhudi.errors.HudiUnsupportedOptionError` naming the option,
the value and what pyhudi implements; its default value is accepted, since it asks for nothing
pyhudi lacks. Every other Hudi option pyhudi does not declare is refused by
:meth:`~pyhudi.config.registry.HudiConfig.of` (its key is in ``hudi_keys.txt``).

A handful of options only tune Apache Hudi's JVM engine (its timeline server, memory budgets,
spill maps, Spark parallelism of its own stages): whatever their value, Hudi writes the same
files, so pyhudi accepts them and does nothing with them. They are declared here, each with the
reason it cannot change what is written or read; options that change the table or a result never
belong on this list.
"""

from __future__ import annotations

from typing import Any

from pyhudi.config.registry import (
    DERIVED,
    UNIMPLEMENTED_WHY,
    choice,
    only,
    only_false,
    option,
    parse_bool,
    parse_str,
)
from pyhudi.config.table import (
    DEFAULT_PAYLOAD,
    PAYLOAD_CLASS,
    PAYLOAD_DELETE_FIELD,
    PAYLOAD_DELETE_MARKER,
    PAYLOAD_OF_MERGE_MODE,
    PAYLOAD_TYPE,
)
from pyhudi.errors import HudiConfigError

# ---------------------------------------------------------------------------------------------
# Options of which pyhudi implements Hudi's default only
# ---------------------------------------------------------------------------------------------
WRITE_TABLE_VERSION = option(
    "hoodie.write.table.version", "6",
    "Table version a new table is created at: 6 (Hudi 0.14/0.15), 8 (Hudi 1.0) or 9 (Hudi 1.1). Set on a write to an "
    "existing table of a lower version, the table is upgraded first when hoodie.write.auto.upgrade is true (failed "
    "writes rolled back and, from 6 to 8 or 9, a merge-on-read table compacted first, as Hudi does); of a higher "
    "version, it is downgraded first. Unset, a write keeps the table's version.",
    only("6", "8", "9", hudi_accepts="no other value"))
AUTO_UPGRADE = option(
    "hoodie.write.auto.upgrade", True,
    "Whether a write whose hoodie.write.table.version is above the table's version upgrades the table first; with "
    "false the write keeps the table's own version (logged), as Hudi 1.x pins its writer to the table's version. "
    "Downgrades happen whatever it says.",
    parse_bool)
BASE_FILE_FORMAT = option(
    "hoodie.table.base.file.format", "PARQUET",
    "Format of base files: pyhudi writes and reads PARQUET only.",
    only("PARQUET", hudi_accepts="ORC, HFILE and LANCE"), aliases=("hoodie.table.ro.file.format",))
SCHEMA_ON_READ = option(
    "hoodie.schema.on.read.enable", False,
    "Schema evolution on read (renames and type changes kept in .hoodie/.schema): not implemented, "
    "so only false is accepted.",
    only_false(hudi_does="keeps an evolving internal schema in .hoodie/.schema"))
RECORD_MERGE_MODE = option(
    "hoodie.write.record.merge.mode", None,
    "How two versions of a record merge: COMMIT_TIME_ORDERING (the later write wins, as "
    "OverwriteWithLatestAvroPayload) or EVENT_TIME_ORDERING (the larger ordering value wins, as "
    "DefaultHoodieRecordPayload); it sets the payload class, which it must agree with when both are given.",
    only("COMMIT_TIME_ORDERING", "EVENT_TIME_ORDERING", hudi_accepts="CUSTOM (a record merger class)"),
    aliases=("hoodie.record.merge.mode",))


def _merge_mode_sets_payload(resolved: dict[str, Any]) -> None:
    """A merge mode stands for the payload class of the same semantics (as Hudi 1.x maps them for
    table version 6); given with a payload class of other semantics it is an error, not a choice."""
    if resolved.get(RECORD_MERGE_MODE.key) is None:
        return
    payload = PAYLOAD_OF_MERGE_MODE[RECORD_MERGE_MODE.parse(resolved[RECORD_MERGE_MODE.key])]
    given = resolved.get(PAYLOAD_CLASS.key)
    if given is not None and PAYLOAD_CLASS.parse(given) != payload:
        raise HudiConfigError(
            f"{RECORD_MERGE_MODE.key}={resolved[RECORD_MERGE_MODE.key]} and {PAYLOAD_CLASS.key}={given} "
            f"contradict each other: the merge mode means {payload.rsplit('.', 1)[1]}; set one of them")
    resolved[PAYLOAD_CLASS.key] = payload


def _payload_type_sets_payload(resolved: dict[str, Any]) -> None:
    """``hoodie.datasource.write.payload.type`` names a payload class; the class wins when both are
    given (Hudi's ``HoodiePayloadConfig`` infers the class from the type only when it is unset)."""
    if resolved.get(PAYLOAD_TYPE.key) is not None and resolved.get(PAYLOAD_CLASS.key) is None:
        resolved[PAYLOAD_CLASS.key] = PAYLOAD_TYPE.parse(resolved[PAYLOAD_TYPE.key])


def _delete_marker_checked(resolved: dict[str, Any]) -> None:
    """The delete field and marker go together (``DefaultHoodieRecordPayload.isDeleteRecord`` checks
    the marker is set with the field) and only DefaultHoodieRecordPayload reads them: with another
    payload Hudi would not delete the marked records, so pyhudi refuses rather than guess."""
    field, marker = resolved.get(PAYLOAD_DELETE_FIELD.key), resolved.get(PAYLOAD_DELETE_MARKER.key)
    if field is None and marker is None:
        return
    if not field or marker is None:
        raise HudiConfigError(f"{PAYLOAD_DELETE_FIELD.key} and {PAYLOAD_DELETE_MARKER.key} must be set together "
                              f"(given: field={field!r}, marker={marker!r})")
    payload = resolved.get(PAYLOAD_CLASS.key)
    if payload is None or PAYLOAD_CLASS.parse(payload) != DEFAULT_PAYLOAD:
        raise HudiConfigError(
            f"{PAYLOAD_DELETE_FIELD.key}={field} is read by DefaultHoodieRecordPayload only, and the payload class is "
            f"{payload or 'the default OverwriteWithLatestAvroPayload'}: set {PAYLOAD_CLASS.key}={DEFAULT_PAYLOAD} "
            "(or hoodie.write.record.merge.mode=EVENT_TIME_ORDERING), or mark deletes with _hoodie_is_deleted")


DERIVED.append(_merge_mode_sets_payload)
DERIVED.append(_payload_type_sets_payload)
DERIVED.append(_delete_marker_checked)


INCREMENTAL_FORMAT = option(
    "hoodie.datasource.query.incremental.format", "latest_state",
    "What an incremental query returns: latest_state, the latest state of each record written in the range; or "
    "cdc, Hudi's change data (columns op, ts_ms, before, after: one row per insert, update and delete of the "
    "range, the images as JSON strings). A table without CDC logging is answered from its file slices while the "
    "cleaner keeps them (pyhudi.table.cdc).",
    choice("LATEST_STATE", "CDC", mapping={"LATEST_STATE": "latest_state", "CDC": "cdc"}))
METRICS_ON = option(
    "hoodie.metrics.on", False,
    "Metrics reporting: pyhudi reports no metrics (its commit metadata holds each write's statistics), "
    "so only false is accepted.",
    only_false(hudi_does="sends metrics to a reporter"))
COMMIT_CALLBACK_ON = option(
    "hoodie.write.commit.callback.on", False,
    "A callback after each commit: not implemented, so only false is accepted.",
    only_false(hudi_does="calls a commit callback (HTTP, Kafka, Pulsar) after every commit"))
EARLY_CONFLICT_DETECTION = option(
    "hoodie.write.concurrency.early.conflict.detection.enable", False,
    "Conflict detection while files are written: pyhudi detects conflicts at commit, so only false is accepted.",
    only_false(hudi_does="checks markers of other writers while writing"))
CONFLICT_RETRIES = option(
    "hoodie.write.num.retries.on.conflict.failures", "0",
    "Retries of a write that failed with a conflict: pyhudi does not retry (the write fails with "
    "HudiWriteConflictError and is rolled back), so only 0 is accepted.",
    only("0", hudi_accepts="a number of retries"))
ROLLBACK_USING_MARKERS = option(
    "hoodie.rollback.using.markers", "true",
    "Rollbacks find a failed write's files by its markers, as pyhudi always does.",
    only("true", hudi_accepts="false (rollback by listing)"))

UNIMPLEMENTED_WHY.update({
    "hoodie.table.multiple.base.file.formats.enable": "pyhudi reads and writes parquet base files only",
})

# ---------------------------------------------------------------------------------------------
# Accepted without effect: settings of Apache Hudi's JVM engine that never change the files
# ---------------------------------------------------------------------------------------------
_NO_EFFECT = "Accepted without effect: "
EMBED_TIMELINE_SERVER = option(
    "hoodie.embed.timeline.server", None,
    _NO_EFFECT + "Hudi's driver-side server answering its executors' file-system-view calls; pyhudi's "
    "tasks plan from the driver's view, and the files written are the same either way.", parse_str)
MARKERS_TYPE = option(
    "hoodie.write.markers.type", None,
    _NO_EFFECT + "pyhudi writes direct markers (one file per data file under .hoodie/.temp); Hudi's "
    "rollback reads both kinds, and markers are deleted when a write completes.", parse_str)
for _key in ("hoodie.memory.merge.max.size", "hoodie.memory.compaction.max.size", "hoodie.memory.merge.fraction",
             "hoodie.memory.compaction.fraction", "hoodie.memory.spillable.map.path",
             "hoodie.common.spillable.diskmap.type", "hoodie.common.diskmap.compression.enabled"):
    option(_key, None, _NO_EFFECT + "memory budget or spill map of Hudi's JVM merges; pyhudi merges with "
           "pyarrow and Spark, and the merged records are the same.", parse_str)
for _key, _why in (
        ("hoodie.auto.commit", "a setting of Hudi's write client; a pyhudi write always commits at its end"),
        ("hoodie.consistency.check.enabled", "Hudi's wait for files to show on eventually consistent storage; "
         "pyhudi's storage is read-after-write consistent (local disk, S3)"),
        ("hoodie.avro.schema.validate", "pyhudi checks every write's schema against the table's whatever the value"),
        ("hoodie.write.executor.type", "the queue between Hudi's record reader and writer threads"),
        ("hoodie.write.buffer.limit.bytes", "the size of that queue"),
        ("hoodie.filesystem.view.type", "where Hudi's driver keeps its file-system view"),
        ("hoodie.compaction.lazy.block.read", "when Hudi's log reader loads block contents"),
        ("hoodie.file.index.enable", "Hudi's Spark file index; pyhudi plans its reads itself"),
        ("hoodie.sql.insert.mode", "Spark SQL INSERT INTO only; a DataFrame write names its operation"),
        ("hoodie.spark.sql.insert.into.operation", "Spark SQL INSERT INTO only; a DataFrame write names its "
         "operation")):
    option(_key, None, _NO_EFFECT + _why + ".", parse_str)

for _key in ("hoodie.rollback.parallelism", "hoodie.cleaner.parallelism", "hoodie.finalize.write.parallelism",
             "hoodie.markers.delete.parallelism", "hoodie.file.listing.parallelism",
             "hoodie.archive.delete.parallelism", "hoodie.simple.index.parallelism",
             "hoodie.global.simple.index.parallelism"):
    option(_key, None, _NO_EFFECT + "Spark parallelism of one of Hudi's JVM stages; pyhudi sizes its own "
           "stages, and the files written are the same.", parse_str)
