"""Upgrade and downgrade: a table moved between versions 6, 8 and 9 as Apache Hudi's
``UpgradeDowngrade`` moves it (docs/hudi-1x-format.md section 6).

6 -> 8 rewrites the active timeline in layout 2 (``.hoodie/timeline/``, completion times in the
names, Avro commit metadata) and records the merge mode, key generator type and initial version;
8 -> 9 renames the ordering field and retires the payload class (``hoodie.table.legacy.payload.class``,
with the merge mode, partial-update mode and merge properties Hudi 1.1 derives from each payload);
downgrades undo them step by step. A table created at 8 or 9 gets the properties Hudi 1.0 / 1.1
create it with (:func:`creation_properties`). Whatever the steps, ``hoodie.properties`` changes once, at the
end, after every new timeline file is written: that update is the moment the table changes
version, and a failure before it leaves the table as it was (:mod:`pyhudi.timeline.layout_change`).

What pyhudi does not convert is refused before anything changes, naming it: a pending instant
(finish or roll it back first: Hudi rolls failed writes back and compacts first), log files in the
latest slices of a merge-on-read table (compact first), secondary and expression index definitions
(the metadata table's own column_stats and record_index definitions go with it). An archived timeline
moves with the active one: version 6's archive log files become the LSM history of versions 8 and
9 and back, switched by the same ``hoodie.properties`` update. The metadata table is dropped
(readers list storage until a writer that keeps one rebuilds it); it holds nothing the data files
do not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyhudi import config as C
from pyhudi.commit.metadata_sync import prepare_metadata_table
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.config.properties import bare_partition_fields, update_table_config
from pyhudi.config.support import (
    COMMIT_TIME_STRATEGY,
    EVENT_TIME_STRATEGY,
    HISTORY_PATH,
    INITIAL_VERSION,
    MERGE_PROPERTY_PREFIX,
    MERGE_STRATEGY,
    MERGE_STRATEGY_V6,
    ORDERING_FIELDS,
    PARTIAL_UPDATE_MODE,
    PAYLOAD_STRATEGY,
    TABLE_FORMAT,
    TIMELINE_PATH,
)
from pyhudi.config.table import (
    AWS_DMS_PAYLOAD,
    DEFAULT_PAYLOAD,
    EVENT_TIME_PAYLOAD,
    MYSQL_DEBEZIUM_PAYLOAD,
    NON_DEFAULTS_PAYLOAD,
    OVERWRITE_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    POSTGRES_DEBEZIUM_PAYLOAD,
)
from pyhudi.errors import HudiUnsupportedError
from pyhudi.table.table import HudiTable
from pyhudi.timeline.layout_change import remove_old, write_converted, write_converted_archive
from pyhudi.transaction.lock import TableLock

log = logging.getLogger("pyhudi")

VERSIONS = (6, 8, 9)
EVENT_TIME, COMMIT_TIME = "EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"
#: hoodie.record.merge.strategy.id of the two built-in merge modes
STRATEGY_OF_MODE = {EVENT_TIME: EVENT_TIME_STRATEGY, COMMIT_TIME: COMMIT_TIME_STRATEGY}
LEGACY_PAYLOAD = "hoodie.table.legacy.payload.class"
_KEYGEN = "org.apache.hudi.keygen."
#: key generator class -> Hudi's KeyGeneratorType, for the classes pyhudi's tables name
KEYGEN_TYPES = {_KEYGEN + "SimpleKeyGenerator": "SIMPLE", _KEYGEN + "ComplexKeyGenerator": "COMPLEX",
                _KEYGEN + "NonpartitionedKeyGenerator": "NON_PARTITION",
                _KEYGEN + "TimestampBasedKeyGenerator": "TIMESTAMP", _KEYGEN + "CustomKeyGenerator": "CUSTOM",
                _KEYGEN + "GlobalDeleteKeyGenerator": "GLOBAL_DELETE"}
CLASS_OF_KEYGEN_TYPE = {t: c for c, t in KEYGEN_TYPES.items()}


@dataclass(frozen=True)
class VersionChange:
    """A table moved from one version to another, and what went with it."""

    path: str
    from_version: int
    to_version: int
    instants_converted: int
    metadata_table_dropped: bool
    archive_files_written: int = 0  # files of the archived timeline in its new layout


def _refuse(table: HudiTable, what: str, todo: str) -> HudiUnsupportedError:
    return HudiUnsupportedError(f"cannot change the version of {table.path}: {what}. {todo}; nothing was changed")


def _check(table: HudiTable, to_version: int) -> None:
    version = table.config.version
    if version not in VERSIONS or to_version not in VERSIONS:
        raise _refuse(table, f"pyhudi moves tables between versions {', '.join(map(str, VERSIONS))}, "
                      f"not {version} -> {to_version}", "Use Apache Hudi's own upgrade for other versions")
    pending = table.timeline.pending()
    if pending:
        raise _refuse(table, f"instants are pending ({', '.join(str(i) for i in pending[:3])})",
                      "Let them finish, or roll failed writes back (the next write does), then run again")
    if (version < 8) != (to_version < 8):  # the timeline changes layout
        if table.table_type == P.MERGE_ON_READ and any(
                s.log_files for s in table.file_system_view().latest_slices()):
            raise _refuse(table, "its latest file slices have log files, which table versions 6 and 8 name and "
                          "slice differently", "Compact the table first (pyhudi.compact)")
    foreign = _foreign_index_definitions(table)
    if foreign:
        raise _refuse(table, f"it has index definitions pyhudi does not keep ({', '.join(foreign)}, in "
                      f"{table.index_definitions_path})",
                      "Drop those indexes with Apache Hudi first (DROP INDEX)")
    if to_version == 9 and version < 9 and table.config.keygen_class == _KEYGEN + "ComplexKeyGenerator" \
            and len(table.config.record_key_fields) == 1:
        raise _refuse(table, "it uses ComplexKeyGenerator with one record key field, whose keys version 9 "
                      "encodes as field:value", "Keep the table at version 8 or below")


#: The six payloads Hudi 1.1 deprecates beside the two of the merge modes
#: (``UpgradeDowngradeUtils.PAYLOAD_CLASSES_TO_HANDLE`` holds all eight), by the merge mode
#: ``EightToNineUpgradeHandler`` gives each (``PAYLOADS_MAPPED_TO_EVENT_TIME_MERGE_MODE`` /
#: ``..._COMMIT_TIME_MERGE_MODE``)
MODE_OF_LEGACY_PAYLOAD = {
    EVENT_TIME_PAYLOAD: EVENT_TIME, MYSQL_DEBEZIUM_PAYLOAD: EVENT_TIME, PARTIAL_UPDATE_PAYLOAD: EVENT_TIME,
    POSTGRES_DEBEZIUM_PAYLOAD: EVENT_TIME, AWS_DMS_PAYLOAD: COMMIT_TIME, NON_DEFAULTS_PAYLOAD: COMMIT_TIME}
LEGACY_PAYLOADS = (DEFAULT_PAYLOAD, OVERWRITE_PAYLOAD, *MODE_OF_LEGACY_PAYLOAD)
#: ``EightToNineUpgradeHandler.reconcilePartialUpdateModeConfig``
PARTIAL_MODE_OF_PAYLOAD = {NON_DEFAULTS_PAYLOAD: "IGNORE_DEFAULTS", PARTIAL_UPDATE_PAYLOAD: "IGNORE_DEFAULTS",
                           POSTGRES_DEBEZIUM_PAYLOAD: "FILL_UNAVAILABLE"}
#: DefaultHoodieRecordPayload.DELETE_KEY / DELETE_MARKER
_DELETE_KEY, _DELETE_MARKER = C.PAYLOAD_DELETE_FIELD.key, C.PAYLOAD_DELETE_MARKER.key
#: HoodieTableConfig.PARTIAL_UPDATE_UNAVAILABLE_VALUE
_UNAVAILABLE_VALUE = "hoodie.write.partial.update.unavailable.value"
#: DebeziumConstants.FLATTENED_OP_COL_NAME / DELETE_OP
_DEBEZIUM_DELETE = {_DELETE_KEY: "_change_operation_type", _DELETE_MARKER: "d"}
#: ``EightToNineUpgradeHandler.reconcileMergePropertiesConfig``: ``hoodie.record.merge.property.<name>``
#: of each payload (AWSDmsAvroPayload.OP_FIELD / DELETE_OPERATION_VALUE; HoodieTableConfig.DEBEZIUM_UNAVAILABLE_VALUE)
MERGE_PROPERTIES_OF_PAYLOAD = {
    AWS_DMS_PAYLOAD: {_DELETE_KEY: "Op", _DELETE_MARKER: "D"},
    POSTGRES_DEBEZIUM_PAYLOAD: {_UNAVAILABLE_VALUE: "__debezium_unavailable_value", **_DEBEZIUM_DELETE},
    MYSQL_DEBEZIUM_PAYLOAD: dict(_DEBEZIUM_DELETE)}
#: ``EightToNineUpgradeHandler.reconcileOrderingFieldsConfig``: the Debezium payloads order by their
#: source position (DebeziumConstants FLATTENED_FILE_COL_NAME, FLATTENED_POS_COL_NAME, FLATTENED_LSN_COL_NAME)
ORDERING_OF_PAYLOAD = {MYSQL_DEBEZIUM_PAYLOAD: "_event_bin_file,_event_pos", POSTGRES_DEBEZIUM_PAYLOAD: "_event_lsn"}
#: ``NineToEightDowngradeHandler.reconcileOrderingFieldsConfig``: MySQL's precombine field again
#: (DebeziumConstants.ADDED_SEQ_COL_NAME)
MYSQL_SEQ_FIELD = "_event_seq"


#: index types of the metadata table's own partitions, which pyhudi keeps or rebuilds (the ones
#: ``EightToSevenDowngradeHandler`` keeps: files, column_stats, bloom_filters, record_index; and
#: partition_stats, which pyhudi writes beside column_stats on versions 8 and 9)
OWN_INDEX_TYPES = ("files", "column_stats", "bloom_filters", "record_index", "partition_stats")


def _foreign_index_definitions(table: HudiTable) -> list[str]:
    """The indexes of the table's ``index.json`` (``hoodie.table.index.defs.path``) that are not
    the metadata table's own: secondary and expression indexes a user created, or an unreadable
    file (named as such). pyhudi's metadata table writer defines ``column_stats`` and
    ``record_index`` there (:func:`pyhudi.commit.metadata_sync.index_definitions`); a version change
    drops the metadata table and those definitions with it (``prepare_metadata_table``), as Hudi's
    ``EightToSevenDowngradeHandler`` drops the metadata partitions it does not keep."""
    defs = table.index_definitions()
    if defs is None:
        return [f"{table.index_definitions_path} (not Hudi's index definitions JSON)"]
    kinds = {name: str(d.get("indexType") or name) for name, d in defs.items()}
    return sorted(name for name, kind in kinds.items() if kind not in OWN_INDEX_TYPES)


def _check_payload_version(payload: str, version: int) -> None:
    """EventTimeAvroPayload cannot be kept at table version 8 as Hudi keeps it: Hudi 1.0 records it
    under the merge mode EVENT_TIME_ORDERING (``HoodieTableConfig.inferMergingConfigsForPreV9Table``:
    ``inferRecordMergeModeFromPayloadClass``), and upgrading from 6 replaces it by
    DefaultHoodieRecordPayload or OverwriteWithLatestAvroPayload
    (``SevenToEightUpgradeHandler.upgradeMergeMode``: only other payloads stay, as CUSTOM). Either way
    the table would merge by another payload than before (a delete of a record with a smaller
    ordering value: EventTimeAvroPayload deletes, DefaultHoodieRecordPayload keeps the record), so it
    is refused at version 8; version 9 keeps it in ``hoodie.table.legacy.payload.class``.

    MySqlDebeziumAvroPayload is refused at version 9, whose ordering fields Hudi 1.1 makes the binlog
    file and position: two fields, which pyhudi reads but does not write with."""
    if payload == EVENT_TIME_PAYLOAD and version == 8:
        raise HudiUnsupportedError(
            "a table whose payload class is EventTimeAvroPayload cannot be at table version 8: Apache Hudi 1.0 "
            "records it as the merge mode EVENT_TIME_ORDERING (and an upgrade from version 6 replaces it), whose "
            "merges are DefaultHoodieRecordPayload's, not EventTimeAvroPayload's; keep the table at version 6, or "
            "create it at version 9 (hoodie.write.table.version=9), which keeps the payload")
    if payload == MYSQL_DEBEZIUM_PAYLOAD and version == 9:
        raise HudiUnsupportedError(
            "pyhudi does not write a table whose payload class is MySqlDebeziumAvroPayload at table version 9: Apache "
            f"Hudi 1.1 orders its records by two fields there ({ORDERING_OF_PAYLOAD[payload]}, "
            "EightToNineUpgradeHandler.reconcileOrderingFieldsConfig), and pyhudi writes with one ordering field (it "
            "reads such tables); keep the table at version 6 or 8, or use Apache Hudi to create or upgrade it")
    if payload not in LEGACY_PAYLOADS:
        raise HudiUnsupportedError(
            f"pyhudi writes tables whose payload class is {payload} at table version 6 only, not {version}; "
            "set hoodie.write.table.version=6, or use Apache Hudi to create or upgrade the table")


def _upgrade_8_to_9(current: Mapping[str, str], put: Callable[[str, str | None], None]) -> None:
    """``EightToNineUpgradeHandler.upgrade`` (Hudi 1.1): the merge mode and strategy of a deprecated
    payload (``reconcileMergeModeConfig``), its partial-update mode and merge properties, the
    payload moved to ``hoodie.table.legacy.payload.class`` (``reconcilePayloadClassConfig``), the
    ordering fields (``reconcileOrderingFieldsConfig``). The handler's changes are applied as
    ``HoodieTableConfig.updateAndDeleteProps`` applies them: additions, then removals (so an
    EVENT_TIME_ORDERING table keeps no strategy id)."""
    payload = current.get(P.PAYLOAD_CLASS) or ""
    _check_payload_version(payload or DEFAULT_PAYLOAD, 9)
    mode = (current.get(P.MERGE_MODE) or "").upper()
    removals = [MERGE_STRATEGY_V6]
    if mode != "CUSTOM":
        removals.append(MERGE_STRATEGY)
    if payload in MODE_OF_LEGACY_PAYLOAD:
        put(P.MERGE_MODE, MODE_OF_LEGACY_PAYLOAD[payload])
        put(MERGE_STRATEGY, STRATEGY_OF_MODE[MODE_OF_LEGACY_PAYLOAD[payload]])
    if payload in PARTIAL_MODE_OF_PAYLOAD:
        put(PARTIAL_UPDATE_MODE, PARTIAL_MODE_OF_PAYLOAD[payload])
    for name, value in MERGE_PROPERTIES_OF_PAYLOAD.get(payload, {}).items():
        put(MERGE_PROPERTY_PREFIX + name, value)
    if payload in LEGACY_PAYLOADS:
        put(LEGACY_PAYLOAD, payload)
        removals.append(P.PAYLOAD_CLASS)
    ordering = ORDERING_OF_PAYLOAD.get(payload) or current.get(P.PRECOMBINE_FIELD)
    if ordering:
        put(ORDERING_FIELDS, ordering)
        removals.append(P.PRECOMBINE_FIELD)
    for key in removals:
        if key in current:
            put(key, None)


def _downgrade_9_to_8(current: Mapping[str, str], put: Callable[[str, str | None], None], *, final: bool) -> None:
    """``NineToEightDowngradeHandler.reconcileMergeConfigs`` / ``reconcileOrderingFieldsConfig``:
    the partial-update mode goes; a legacy payload becomes the payload class again, the six
    deprecated ones with the CUSTOM mode and the payload-based strategy; the merge properties the
    upgrade derived from the payload go (the handler's doc: "remove any properties with prefix
    hoodie.record.merge.property."); MySQL's ordering field is ``_event_seq`` again. ``final``: the
    table stays at version 8 (on the way to 6, an EventTimeAvroPayload table is at 8 only between
    two steps of one change, and ends at 6 with its payload)."""
    legacy = current.get(LEGACY_PAYLOAD) or ""
    if final:
        _check_payload_version(legacy or DEFAULT_PAYLOAD, 8)
    if PARTIAL_UPDATE_MODE in current:
        put(PARTIAL_UPDATE_MODE, None)
    if legacy in LEGACY_PAYLOADS:
        put(P.PAYLOAD_CLASS, legacy)
        put(LEGACY_PAYLOAD, None)
        if legacy in MODE_OF_LEGACY_PAYLOAD:
            put(MERGE_STRATEGY, PAYLOAD_STRATEGY)
            put(P.MERGE_MODE, "CUSTOM")
            for key in [k for k in current if k.startswith(MERGE_PROPERTY_PREFIX)]:
                put(key, None)
    ordering = MYSQL_SEQ_FIELD if legacy == MYSQL_DEBEZIUM_PAYLOAD else current.get(ORDERING_FIELDS)
    if ordering:
        put(P.PRECOMBINE_FIELD, ordering)
        if ORDERING_FIELDS in current:
            put(ORDERING_FIELDS, None)


def property_changes(props: Mapping[str, str], from_version: int, to_version: int, *,
                     partition_path_field: str | None = None) -> dict[str, str | None]:
    """The ``hoodie.properties`` changes of moving a table from one version to another (None:
    remove), step by step as Hudi's handlers make them. ``partition_path_field``: the writer's
    ``hoodie.datasource.write.partitionpath.field``, which a custom key generator's table records
    with its ``:TYPE`` suffixes from version 8 on (``SevenToEightUpgradeHandler.upgradePartitionFields``;
    a downgrade strips them again, ``EightToSevenDowngradeHandler.downgradePartitionFields``)."""
    current = dict(props)
    custom = current.get(P.KEYGEN_CLASS, "").rsplit(".", 1)[-1] in ("CustomKeyGenerator", "CustomAvroKeyGenerator") \
        or current.get(P.KEYGEN_TYPE, "").upper() in ("CUSTOM", "CUSTOM_AVRO")
    changes: dict[str, str | None] = {}

    def put(key: str, value: str | None) -> None:
        changes[key] = value
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value

    version = from_version
    while version != to_version:
        if version == 6 and to_version > 6:  # SevenToEightUpgradeHandler
            payload = current.get(P.PAYLOAD_CLASS) or DEFAULT_PAYLOAD
            _check_payload_version(payload, 8)
            if payload in MODE_OF_LEGACY_PAYLOAD:  # upgradeMergeMode: isCustomPayloadClass
                put(P.MERGE_MODE, "CUSTOM")
                put(MERGE_STRATEGY, PAYLOAD_STRATEGY)
                put(MERGE_STRATEGY_V6, PAYLOAD_STRATEGY)
            else:
                mor_ordered = current.get(P.TYPE) == P.MERGE_ON_READ and current.get(P.PRECOMBINE_FIELD)
                mode = EVENT_TIME if payload == DEFAULT_PAYLOAD or mor_ordered else COMMIT_TIME
                put(P.PAYLOAD_CLASS, DEFAULT_PAYLOAD if mode == EVENT_TIME else OVERWRITE_PAYLOAD)
                put(P.MERGE_MODE, mode)
                put(MERGE_STRATEGY, STRATEGY_OF_MODE[mode])
                put(MERGE_STRATEGY_V6, STRATEGY_OF_MODE[mode])
            put(INITIAL_VERSION, str(from_version))
            put(TIMELINE_PATH, "timeline")
            kind = KEYGEN_TYPES.get(current.get(P.KEYGEN_CLASS, ""))
            if kind:
                put(P.KEYGEN_TYPE, kind)
            if custom and partition_path_field and ":" in partition_path_field:
                put(P.PARTITION_FIELDS, ",".join(f.strip() for f in partition_path_field.split(",") if f.strip()))
            version = 8
        elif version == 8 and to_version > 8:  # EightToNineUpgradeHandler
            _upgrade_8_to_9(current, put)
            version = 9
        elif version == 9:  # NineToEightDowngradeHandler
            _downgrade_9_to_8(current, put, final=to_version == 8)
            version = 8
        else:  # 8 -> 6: EightToSevenDowngradeHandler, then nothing from 7 to 6
            mode = (current.get(P.MERGE_MODE) or "").upper()
            if not current.get(P.PAYLOAD_CLASS) and mode in (EVENT_TIME, COMMIT_TIME):
                put(P.PAYLOAD_CLASS, DEFAULT_PAYLOAD if mode == EVENT_TIME else OVERWRITE_PAYLOAD)
            if custom and ":" in current.get(P.PARTITION_FIELDS, ""):
                put(P.PARTITION_FIELDS, ",".join(bare_partition_fields(current[P.PARTITION_FIELDS])))
            if not current.get(P.KEYGEN_CLASS) and current.get(P.KEYGEN_TYPE) in CLASS_OF_KEYGEN_TYPE:
                put(P.KEYGEN_CLASS, CLASS_OF_KEYGEN_TYPE[current[P.KEYGEN_TYPE]])
            for key in (INITIAL_VERSION, P.MERGE_MODE, MERGE_STRATEGY, MERGE_STRATEGY_V6, P.KEYGEN_TYPE,
                        "hoodie.bootstrap.index.type"):
                if key in current:
                    put(key, None)
            version = 6
    put(P.VERSION, str(to_version))
    put(P.LAYOUT_VERSION, "2" if to_version >= 8 else "1")
    return changes


def creation_properties(props: Mapping[str, str], version: int, *, merge_mode: str | None) -> dict[str, str]:
    """The ``hoodie.properties`` of a new table at ``version``, from the version-6 properties a
    write would create (docs/hudi-1x-format.md section 1.2): what Hudi 1.0 (8) or 1.1 (9) writes
    when it creates a table. Version 8 keeps the merge trio (mode, payload, strategy id) and the
    precombine key; version 9 keeps the merge mode alone and names the field
    ``hoodie.table.ordering.fields``. Both record the key generator by type, the initial version and
    the timeline folders; 9 adds ``hoodie.table.format``.

    A payload of its own (one of the six Hudi 1.1 deprecates) makes at version 8 the CUSTOM mode
    with the payload and the payload-based strategy (``HoodieTableConfig.inferMergingConfigsForPreV9Table``:
    ``inferRecordMergeModeFromPayloadClass`` gives CUSTOM, ``HoodieRecordMerger.getRecordMergeStrategyId``
    the payload-based id; ``HoodieTableMetaClient.TableBuilder.build`` stores the trio), and at version 9
    what the 8 -> 9 upgrade makes of that (``inferMergingConfigsForV9TableCreation``: "fits the same
    behavior of upgrade from 8 to 9"): mode, strategy, legacy payload, partial-update mode, merge
    properties and ordering fields of :func:`_upgrade_8_to_9`.

    ``merge_mode``: the one the writer asked for; None infers Hudi's (event-time ordering where the
    table has an ordering field, else commit-time)."""
    out = dict(props)
    if version not in (8, 9):
        return out
    payload = out.get(P.PAYLOAD_CLASS) or OVERWRITE_PAYLOAD
    if payload in MODE_OF_LEGACY_PAYLOAD:
        return _payload_creation_properties(out, payload, version)
    _check_payload_version(payload, version)
    ordering = out.pop(P.PRECOMBINE_FIELD, None)
    mode = merge_mode or (EVENT_TIME if ordering else COMMIT_TIME)
    out.pop(P.PAYLOAD_CLASS, None)
    _layout_properties(out, version)
    out[P.MERGE_MODE] = mode
    if version == 8:
        if ordering:
            out[P.PRECOMBINE_FIELD] = ordering
        out[P.PAYLOAD_CLASS] = DEFAULT_PAYLOAD if mode == EVENT_TIME else OVERWRITE_PAYLOAD
        out[MERGE_STRATEGY] = STRATEGY_OF_MODE[mode]
    elif ordering:
        out[ORDERING_FIELDS] = ordering
    return out


def _layout_properties(out: dict[str, str], version: int) -> None:
    """The properties of a new table of version 8 or 9 besides the merge ones (in place)."""
    kind = KEYGEN_TYPES.get(out.pop(P.KEYGEN_CLASS, ""))
    if kind:
        out[P.KEYGEN_TYPE] = kind
    out[INITIAL_VERSION] = str(version)
    out[TIMELINE_PATH] = "timeline"
    out[HISTORY_PATH] = "history"
    if version == 9:
        out[TABLE_FORMAT] = "native"
    out[P.VERSION] = str(version)
    out[P.LAYOUT_VERSION] = "2"


def _payload_creation_properties(out: dict[str, str], payload: str, version: int) -> dict[str, str]:
    _check_payload_version(payload, version)
    _layout_properties(out, version)
    if payload == EVENT_TIME_PAYLOAD:  # (version 9 only) Hudi 1.0 would record EVENT_TIME_ORDERING
        out[P.MERGE_MODE] = EVENT_TIME
        out[MERGE_STRATEGY] = EVENT_TIME_STRATEGY
    else:
        out[P.MERGE_MODE] = "CUSTOM"
        out[MERGE_STRATEGY] = PAYLOAD_STRATEGY
    if version == 8:
        return out
    current = dict(out)

    def put(key: str, value: str | None) -> None:
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value

    _upgrade_8_to_9(out, put)
    return current


def change_version(table: HudiTable, to_version: int, cfg: HudiConfig | None = None, *,
                   direction: str | None = None) -> VersionChange:
    """Move the table to ``to_version`` (6, 8 or 9), under the table lock; a table at that version
    already is left alone. ``direction`` ("upgrade" or "downgrade"): refuse a move the other way."""
    cfg = cfg or HudiConfig()
    with TableLock(table.storage, cfg).held():
        table.reload()
        from_version = table.config.version
        if from_version == to_version:
            return VersionChange(table.path, from_version, to_version, 0, False)
        if direction is not None and (direction == "upgrade") != (to_version > from_version):
            raise HudiUnsupportedError(
                f"{table.path} is at table version {from_version}: a {direction} cannot take it to {to_version}; use "
                f"{'downgrade' if direction == 'upgrade' else 'upgrade'}")
        _check(table, to_version)
        dropped = bool(table.config.metadata_partitions) or table.storage.is_dir(".hoodie/metadata")
        if dropped:
            prepare_metadata_table(table, enabled=False)
        conversion = archived = None
        if (from_version < 8) != (to_version < 8):
            layout = 2 if to_version >= 8 else 1
            conversion = write_converted(table.storage, to_layout=layout, utc=table.config.utc_timeline)
            archived = write_converted_archive(table.storage, to_layout=layout)
        written = str(cfg.raw[C.PARTITIONPATH_FIELD.key]) if cfg.is_set(C.PARTITIONPATH_FIELD) else None
        update_table_config(table.storage, property_changes(table.config.props, from_version, to_version,
                                                            partition_path_field=written))
        for done in (conversion, archived):
            if done is not None:
                remove_old(table.storage, done)
        table.reload()
        log.info("%s: table version %d -> %d", table.path, from_version, to_version)
        return VersionChange(table.path, from_version, to_version,
                             len(conversion.written) if conversion else 0, dropped,
                             len(archived.written) if archived else 0)
