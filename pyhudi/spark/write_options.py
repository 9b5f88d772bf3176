"""A write's options, checked and resolved against the table before anything is written.

Every refusal here happens before the table or an instant exists, so a refused write leaves no
trace: options that conflict with ``hoodie.properties`` (Hudi's ``validateTableConfig``),
operations, index types and table features pyhudi does not write, and the properties a new table
gets. :mod:`pyhudi.spark.writer` runs the write these checks let through.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.config.support import LEGACY_PAYLOAD_CLASS
from pyhudi.config.table import MERGE_MODE_OF_PAYLOAD, OVERWRITE_PAYLOAD, PAYLOAD_OF_MERGE_MODE
from pyhudi.errors import HudiConfigError, HudiError, HudiSchemaError, HudiTableMismatchError, HudiUnsupportedError
from pyhudi.io.avro_schema import META_FIELDS, PARTITION_PATH, RECORD_KEY
from pyhudi.keygen.encoding import resolve_encoding
from pyhudi.keygen.spec import CUSTOM, KeyGenSpec, kind_of_class, resolve_keygen, table_keygen_kind
from pyhudi.services.archival import validate as validate_archival
from pyhudi.services.table_version import creation_properties
from pyhudi.spark.keygen import field_type
from pyhudi.spark.record_index_job import keeps_record_index
from pyhudi.storage import Storage
from pyhudi.sync.tool import check_sync_options, sync_enabled
from pyhudi.table.table import HudiTable
from pyhudi.write.replace import DELETE_PARTITION, INSERT_OVERWRITE_TABLE, REPLACE_OPERATIONS
from pyhudi.write.result import OPERATION_TYPES

log = logging.getLogger("pyhudi")

#: table property -> write option it answers, compared when a write targets an existing table
_TABLE_TO_OPTION = {
    P.NAME: C.TABLE_NAME,
    P.TYPE: C.TABLE_TYPE,
    P.RECORD_KEY_FIELDS: C.RECORDKEY_FIELD,
    P.PARTITION_FIELDS: C.PARTITIONPATH_FIELD,
    P.PRECOMBINE_FIELD: C.PRECOMBINE_FIELD,
    P.KEYGEN_CLASS: C.KEYGENERATOR_CLASS,
    P.HIVE_STYLE: C.HIVE_STYLE_PARTITIONING,
    P.URL_ENCODE: C.PARTITIONPATH_URLENCODE,
    P.POPULATE_META_FIELDS: C.POPULATE_META_FIELDS,
    P.PAYLOAD_CLASS: C.PAYLOAD_CLASS,  # merge-on-read tables record it: readers and writers must agree
    P.ORDERING_FIELDS: C.PRECOMBINE_FIELD,  # the name table version 9 gives the precombine field
    P.MERGE_MODE: C.RECORD_MERGE_MODE,  # tables of version 8 on
    P.CDC_ENABLED: C.CDC_ENABLED,  # Hudi's validateTableConfig leaves these to the table; pyhudi refuses a
    P.CDC_LOGGING_MODE: C.CDC_LOGGING_MODE,  # write asking for other change data than the table logs
}
_TIMESTAMP_PROPS = (C.TIMESTAMP_TYPE, C.TIMESTAMP_INPUT_FORMAT, C.TIMESTAMP_OUTPUT_FORMAT,
                    C.TIMESTAMP_INPUT_TIMEZONE, C.TIMESTAMP_OUTPUT_TIMEZONE, C.TIMESTAMP_SCALAR_UNIT,
                    C.TIMESTAMP_INPUT_FORMAT_DELIMITER, C.TIMESTAMP_TIMEZONE)


@dataclass(frozen=True)
class WriteRequest:
    """What a write is to do once its options passed the checks: the options completed from the
    table's own configuration, the table (None: to be created), the operation and the replace
    operation it amounts to (None for none). ``overwrite``: an existing table is overwritten, so
    its old schema goes too."""

    cfg: HudiConfig
    table: HudiTable | None
    operation: str
    replace: str | None
    overwrite: bool
    #: the rows carry their stored ``_hoodie_record_key`` / ``_hoodie_partition_path`` and are written
    #: by them, no key generated (Hudi's prepped writes); ``operation`` is then the base operation
    prepped: bool = False


def check_request(storage: Storage, cfg: HudiConfig, mode: str) -> WriteRequest:
    """The write's mode and operation checked, and its options against the table at ``path``."""
    if mode not in ("append", "overwrite"):
        raise HudiConfigError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    path = storage.uri()
    table = HudiTable.open_if_exists(storage)
    if table is not None:
        table.check_writable("write", merges=True)
        table_keygen_kind(table.properties)  # refuses a key generator pyhudi does not implement
        check_table_config(cfg, table)
        cfg = cfg.with_defaults(options_from_table(table))
    elif not cfg.get(C.TABLE_NAME):
        raise HudiConfigError(f"{path} has no table yet: set hoodie.table.name to create one")
    if sync_enabled(cfg):
        check_sync_options(cfg)
    check_async_clean(cfg)
    operation = cfg.get(C.OPERATION)
    if not cfg.get(C.RECORDKEY_FIELD) and not cfg.is_set(C.OPERATION):
        operation = "bulk_insert"  # Hudi's deduceOperation: generated keys make the write append-only
    prepped = operation.endswith(PREPPED_SUFFIX)
    if prepped:
        operation = operation[:-len(PREPPED_SUFFIX)]
        if mode == "overwrite":
            raise HudiConfigError(f"mode='overwrite' cannot be combined with the {operation}{PREPPED_SUFFIX} operation")
    if operation not in OPERATION_TYPES:
        raise HudiUnsupportedError(f"operation {operation} is not supported; use one of {', '.join(OPERATION_TYPES)}")
    if mode == "overwrite" and operation in ("delete", "delete_partition"):
        raise HudiConfigError(f"mode='overwrite' cannot be combined with the {operation} operation")
    # Hudi's SaveMode.Overwrite on an existing table: the batch replaces the table
    # (where Hudi deletes the table first, pyhudi replaces it in one atomic commit)
    replace = REPLACE_OPERATIONS.get(operation)
    if mode == "overwrite" and table is not None:
        replace = INSERT_OVERWRITE_TABLE
    return WriteRequest(cfg, table, operation, replace, overwrite=mode == "overwrite" and table is not None,
                        prepped=prepped)


#: the suffix of Hudi's prepped operations (``WriteOperationType.UPSERT_PREPPED`` ...)
PREPPED_SUFFIX = "_prepped"
#: the meta columns a prepped row is written by (Hudi's ``HoodieCreateRecordUtils``
#: ``getHoodieKeyAndMaybeLocationFromAvroRecord`` reads the key and the partition path from them)
PREPPED_COLUMNS = (RECORD_KEY, PARTITION_PATH)


def resolve_prepped(request: WriteRequest, columns: list[str]) -> WriteRequest:
    """The request with ``prepped`` decided from the incoming columns, as Hudi decides it.

    An explicit ``*_prepped`` operation is prepped, and its rows must carry both meta columns. On a
    table with auto-generated keys, an ``upsert`` or ``delete`` whose rows carry
    ``_hoodie_record_key`` is prepped too (``HoodieWriterUtils.canDoPreppedWrites``: "Changing
    operation type to UPSERT PREPPED for pk less table upserts"); without it the write stays refused
    (:func:`check_auto_keys`)."""
    cfg = request.cfg
    if (not cfg.get(C.RECORDKEY_FIELD) and not cfg.is_set(C.OPERATION) and RECORD_KEY in columns
            and request.table is not None and request.replace is None):
        # Hudi's deduceOperation makes an unset operation bulk_insert only when the rows carry no
        # _hoodie_record_key; with it the default upsert stands, and is prepped
        request = dataclasses.replace(request, operation="upsert")
    prepped = request.prepped or (
        not cfg.get(C.RECORDKEY_FIELD) and request.replace is None
        and request.operation in ("upsert", "delete") and RECORD_KEY in columns)
    if not prepped:
        return request
    missing = [c for c in PREPPED_COLUMNS if c not in columns]
    if missing:
        raise HudiConfigError(
            f"a prepped {request.operation} writes each row by its stored record key and partition path, and the "
            f"incoming rows lack {', '.join(missing)}: read the rows from the table with their meta columns "
            f"(pyhudi.read keeps them), or write with operation {request.operation} and a record key field")
    if request.table is None:
        raise HudiConfigError(f"a prepped {request.operation} writes rows read from a table, and "
                              f"{cfg.get(C.TABLE_NAME) or 'the path'} has no table yet: create it with insert or "
                              "bulk_insert first")
    return dataclasses.replace(request, prepped=True)


def check_features(request: WriteRequest) -> KeyGenSpec:
    """The index, the table features and the meta-field setting checked; the key generator."""
    cfg, operation, replace = request.cfg, request.operation, request.replace
    if cfg.get(C.INDEX_TYPE) == "RECORD_INDEX" and not cfg.get(C.METADATA_ENABLE):
        log.warning("hoodie.index.type=RECORD_INDEX needs the metadata table (hoodie.metadata.enable=true); "
                    "looking records up with GLOBAL_SIMPLE instead")
    if cfg.get(C.DROP_PARTITION_COLUMNS):
        raise HudiUnsupportedError("hoodie.datasource.write.drop.partition.columns=true is not supported")
    if cfg.get(C.ARCHIVE_AUTOMATIC):
        validate_archival(cfg)
    populate = cfg.get(C.POPULATE_META_FIELDS)
    if not populate and operation in ("upsert", "delete") and replace is None:
        raise HudiUnsupportedError("upsert and delete need hoodie.populate.meta.fields=true")
    if not populate and cfg.get(C.CDC_ENABLED):
        raise HudiUnsupportedError(
            f"{C.CDC_ENABLED.key}=true needs {C.POPULATE_META_FIELDS.key}=true: change data names each record by the "
            "record key stored with it (pyhudi's .cdc files and CDC queries read it)")
    if not populate and keeps_record_index(cfg):
        raise HudiConfigError("the record index (hoodie.metadata.record.index.enable, hoodie.index.type=RECORD_INDEX) "
                              "reads the record keys stored in the files: it needs hoodie.populate.meta.fields=true")
    _check_delete_marker_version(request)
    spec = resolve_keygen(cfg)
    if spec.auto_keys:
        check_auto_keys(cfg, operation, replace, prepped=request.prepped)
    # a delete_partition writes no record: the keys' encoding does not matter to it
    return spec if replace == DELETE_PARTITION else resolve_encoding(request.table, spec, cfg)


def _check_delete_marker_version(request: WriteRequest) -> None:
    """Refuse ``hoodie.payload.delete.field``/``.marker`` on a write that leaves the table at version 9.
    Up to version 8 they are the writer's and reader's options, as pyhudi takes them; Hudi 1.1 reads
    them from the table's merge properties (``hoodie.record.merge.property.*``, which
    ``EightToNineUpgradeHandler.reconcileMergePropertiesConfig`` records from the writer's), and pyhudi
    neither records nor reads those for DefaultHoodieRecordPayload tables: its marked records would be
    deletes to pyhudi's writer and ordinary records to a Hudi 1.1 reader merging the logs."""
    cfg = request.cfg
    if not cfg.get(C.PAYLOAD_DELETE_FIELD):
        return
    table = request.table
    version = written_version(table, cfg) if table is not None else int(cfg.get(C.WRITE_TABLE_VERSION))
    if version >= 9:
        raise HudiUnsupportedError(
            f"{C.PAYLOAD_DELETE_FIELD.key} with a table of version 9: Hudi 1.1 keeps the delete field and marker in "
            "the table's merge properties (hoodie.record.merge.property.*), which pyhudi does not write for "
            "DefaultHoodieRecordPayload tables; write the table at version 8 or 6, or mark deletes with "
            "_hoodie_is_deleted")


#: the operations a write with generated record keys may run: they add records and never look
#: stored ones up by key (the replace operations retire file groups, not keys)
AUTO_KEY_OPERATIONS = ("insert", "bulk_insert")


def check_auto_keys(cfg: HudiConfig, operation: str, replace: str | None, *, prepped: bool = False) -> None:
    """A write with auto-generated record keys (no record key field), refused where Hudi refuses it
    (``AutoRecordKeyGenerationUtils.mayBeValidateParamsForAutoGenerationOfRecordKeys``: combining or
    dropping duplicates, no meta fields) and where its keys could not find a stored record: an
    upsert or delete by incoming rows. Hudi generates fresh keys for an upsert's rows (so it inserts
    them), and updates or deletes such a table only through records that carry their stored
    ``_hoodie_record_key`` (``HoodieWriterUtils.canDoPreppedWrites``) or Spark SQL's UPDATE, DELETE
    and MERGE INTO; pyhudi writes the prepped ones (``prepped``) and refuses the keyed upsert and
    delete rather than duplicate records."""
    where = ("no record key field is set (hoodie.datasource.write.recordkey.field, and the table records none), "
             "so the record keys are generated")
    if operation not in AUTO_KEY_OPERATIONS and replace is None and not prepped:
        raise HudiUnsupportedError(
            f"operation {operation} is not supported with auto generation of record keys: {where} "
            "(<instant>_<partition>_<row>) and no incoming row can name a stored record (Hudi would generate new "
            "keys and insert the rows again). Use insert or bulk_insert to append; to update or delete, write rows "
            "read from the table with their _hoodie_record_key and _hoodie_partition_path (a prepped write, "
            "e.g. operation upsert_prepped), or use pyhudi.update / pyhudi.delete")
    for opt in (C.COMBINE_BEFORE_INSERT, C.INSERT_DROP_DUPLICATES):
        if cfg.get(opt):
            raise HudiConfigError(f"Enabling {opt.key} is not supported with auto generation of record keys: {where}, "
                                  f"so no two records share a key to combine; set {opt.key}=false")
    if not cfg.get(C.POPULATE_META_FIELDS):
        raise HudiConfigError(f"Disabling {C.POPULATE_META_FIELDS.key} is not supported with auto generation of record "
                              f"keys: {where}, and only _hoodie_record_key keeps them")
    if cfg.get(C.INDEX_TYPE) == "BUCKET":
        raise HudiUnsupportedError(f"hoodie.index.type=BUCKET is not supported with auto generation of record keys: "
                                   f"{where}, and the bucket index hashes record key fields")


def check_stats_columns(cfg: HudiConfig, target: pa.Schema) -> None:
    """The column-stats column list names only columns of the table."""
    unknown = [c for c in cfg.get(C.METADATA_COLUMN_STATS_COLUMNS) if c not in target.names and c not in META_FIELDS]
    if unknown:
        raise HudiConfigError(f"hoodie.metadata.index.column.stats.column.list names {', '.join(unknown)}, which the "
                              f"table does not have (its columns: {', '.join(target.names)})")


def _normalized(opt: C.ConfigOption[Any], value: Any) -> str:
    parsed = opt.parse(value)
    if isinstance(parsed, tuple):
        return ",".join(parsed)
    return str(parsed).lower()


def check_table_config(cfg: HudiConfig, table: HudiTable) -> None:
    """Hudi's ``validateTableConfig``: options the user set must agree with hoodie.properties."""
    conflicts = []
    for prop, opt in _TABLE_TO_OPTION.items():
        if not cfg.is_set(opt) or prop not in table.properties or prop in (P.KEYGEN_CLASS, P.PARTITION_FIELDS):
            continue
        mine, theirs = _normalized(opt, cfg.raw[opt.key]), _normalized(opt, table.properties[prop])
        if mine != theirs:
            conflicts.append(f"  {opt.key}: write option {cfg.raw[opt.key]!r}, table has {table.properties[prop]!r}")
    partitions = _partition_fields_conflict(cfg, table)
    if partitions:
        conflicts.append(partitions)
    if cfg.is_set(C.RECORDKEY_FIELD) and cfg.get(C.RECORDKEY_FIELD) and not table.properties.get(P.RECORD_KEY_FIELDS):
        conflicts.append(f"  {C.RECORDKEY_FIELD.key}: write option {cfg.raw[C.RECORDKEY_FIELD.key]!r}, table has "
                         "auto-generated record keys (no hoodie.table.recordkey.fields)")
    theirs_kind, mine_kind = table_keygen_kind(table.properties), _keygen_option_kind(cfg)
    if theirs_kind is not None and mine_kind is not None and theirs_kind != mine_kind:
        prop = P.KEYGEN_CLASS if P.KEYGEN_CLASS in table.properties else P.KEYGEN_TYPE
        opt = C.KEYGENERATOR_CLASS if cfg.is_set(C.KEYGENERATOR_CLASS) else C.KEYGENERATOR_TYPE
        conflicts.append(f"  {opt.key}: write option {cfg.raw[opt.key]!r}, table has {prop}={table.properties[prop]!r}")
    conflicts.extend(_cdc_conflicts(cfg, table))
    payload_conflict = _payload_against_merge_mode(cfg, table)
    if payload_conflict:
        conflicts.append(payload_conflict)
    if cfg.is_set(C.PARTITIONPATH_FIELD) and P.PARTITION_FIELDS not in table.properties and \
            cfg.get(C.PARTITIONPATH_FIELD):
        conflicts.append(f"  {C.PARTITIONPATH_FIELD.key}: write option "
                         f"{cfg.raw[C.PARTITIONPATH_FIELD.key]!r}, table is not partitioned")
    if conflicts:
        raise HudiTableMismatchError(
            f"the write options conflict with the table at {table.path}:\n" + "\n".join(conflicts)
            + "\nwrite with the table's settings, or write to a new path")


def _typed_fields(value: Any) -> list[tuple[str, str | None]]:
    """Partition field entries as (field, TYPE or None): CustomKeyGenerator's ``field:TYPE``."""
    out: list[tuple[str, str | None]] = []
    for entry in C.PARTITIONPATH_FIELD.parse(value) or ():
        name, _, kind = entry.partition(":")
        out.append((name.strip(), kind.strip().upper() or None))
    return out


def _partition_fields_conflict(cfg: HudiConfig, table: HudiTable) -> str | None:
    """The partition fields the write names against those the table records, compared by name as
    Hudi's ``validateTableConfig`` does (``SparkKeyGenUtils.getPartitionColumns`` strips a custom
    key generator's ``:TYPE``; tables of version 6 record bare names), and by type where both
    carry one (version 8 on records them, ``HoodieTableConfigUtils``)."""
    if not cfg.is_set(C.PARTITIONPATH_FIELD) or P.PARTITION_FIELDS not in table.properties:
        return None
    mine = _typed_fields(cfg.raw[C.PARTITIONPATH_FIELD.key])
    theirs = _typed_fields(table.properties[P.PARTITION_FIELDS])
    same_names = [n for n, _ in mine] == [n for n, _ in theirs]
    same_types = all(a is None or b is None or a == b for (_, a), (_, b) in zip(mine, theirs))
    if same_names and same_types:
        return None
    return (f"  {C.PARTITIONPATH_FIELD.key}: write option {cfg.raw[C.PARTITIONPATH_FIELD.key]!r}, table has "
            f"{table.properties[P.PARTITION_FIELDS]!r}")


def _cdc_conflicts(cfg: HudiConfig, table: HudiTable) -> list[str]:
    """Change data capture the write asks for that the table does not log (or logs otherwise): the
    table's properties decide what every writer logs, so such a write would not get what it asked."""
    out = []
    mode = table.config.cdc_logging_mode
    if cfg.is_set(C.CDC_ENABLED) and P.CDC_ENABLED not in table.properties and cfg.get(C.CDC_ENABLED):
        out.append(f"  {C.CDC_ENABLED.key}: write option {cfg.raw[C.CDC_ENABLED.key]!r}, the table logs no change data")
    if cfg.is_set(C.CDC_LOGGING_MODE) and mode is not None and P.CDC_LOGGING_MODE not in table.properties \
            and cfg.get(C.CDC_LOGGING_MODE) != mode:
        out.append(f"  {C.CDC_LOGGING_MODE.key}: write option {cfg.raw[C.CDC_LOGGING_MODE.key]!r}, table logs {mode}")
    return out


def _payload_against_merge_mode(cfg: HudiConfig, table: HudiTable) -> str | None:
    """A payload class the user set whose semantics contradict the table's merge mode, where the
    table records the mode without a payload (version 9): merging by the payload would leave the
    table's records merged otherwise than every reader of the table merges them."""
    mode = table.properties.get(P.MERGE_MODE, "").strip().upper()
    if not cfg.is_set(C.PAYLOAD_CLASS) or cfg.is_set(C.RECORD_MERGE_MODE) or P.PAYLOAD_CLASS in table.properties \
            or mode not in PAYLOAD_OF_MERGE_MODE:
        return None
    payload = cfg.get(C.PAYLOAD_CLASS)
    legacy = table.properties.get(LEGACY_PAYLOAD_CLASS)  # version 9 keeps the payload it merges by there
    if legacy:
        return None if legacy == payload else \
            f"  {C.PAYLOAD_CLASS.key}: write option {cfg.raw[C.PAYLOAD_CLASS.key]!r}, table has " \
            f"{LEGACY_PAYLOAD_CLASS}={legacy!r}"
    if MERGE_MODE_OF_PAYLOAD.get(payload) == mode:
        return None
    return (f"  {C.PAYLOAD_CLASS.key}: write option {cfg.raw[C.PAYLOAD_CLASS.key]!r} (merge mode "
            f"{MERGE_MODE_OF_PAYLOAD.get(payload, 'CUSTOM')}), table has {P.MERGE_MODE}={mode!r}")


def version_change(request: WriteRequest) -> int | None:
    """The table version the table must move to before this write (None: write it at its own).

    As Hudi 1.x's writers (``UpgradeDowngrade``, docs/hudi-1x-format.md 6.1 and 6.6): unset,
    ``hoodie.write.table.version`` leaves the table's version alone; above it, the table is
    upgraded first when ``hoodie.write.auto.upgrade`` is true, and otherwise written at its own
    version (Hudi pins the writer to the table's version, it does not fail the write); below it,
    the table is downgraded first whatever ``hoodie.write.auto.upgrade`` says. A version 5 table
    takes version 6 writes as it is (pyhudi writes the version 6 format into it)."""
    cfg, table = request.cfg, request.table
    if table is None:
        return None
    current, wanted = table.config.version, written_version(table, cfg)
    if wanted == current:
        if cfg.is_set(C.WRITE_TABLE_VERSION) and int(cfg.get(C.WRITE_TABLE_VERSION)) > current:
            log.warning("%s is at table version %d; hoodie.write.table.version=%s with hoodie.write.auto.upgrade="
                        "false writes it at version %d, as Hudi does (set hoodie.write.auto.upgrade=true to upgrade "
                        "it first)", table.path, current, cfg.get(C.WRITE_TABLE_VERSION), current)
        return None
    return wanted


def written_version(table: HudiTable, cfg: HudiConfig) -> int:
    """The table version a write with ``cfg`` leaves ``table`` at (see :func:`version_change`):
    what a statement deciding on version-dependent features (partial updates) must look at."""
    current = table.config.version
    if not cfg.is_set(C.WRITE_TABLE_VERSION):
        return current
    wanted = int(cfg.get(C.WRITE_TABLE_VERSION))
    if (current == 5 and wanted == 6) or (wanted > current and not cfg.get(C.AUTO_UPGRADE)):
        return current
    return wanted


def _keygen_option_kind(cfg: HudiConfig) -> str | None:
    """The key generator the write's own options name (class first, as Hudi), None when they name none."""
    if cfg.is_set(C.KEYGENERATOR_CLASS) and cfg.get(C.KEYGENERATOR_CLASS):
        return kind_of_class(cfg.get(C.KEYGENERATOR_CLASS), what=C.KEYGENERATOR_CLASS.key + "=")
    if cfg.is_set(C.KEYGENERATOR_TYPE) and cfg.get(C.KEYGENERATOR_TYPE):
        return cfg.get(C.KEYGENERATOR_TYPE)
    return None


def options_from_table(table: HudiTable) -> dict[str, str]:
    """hoodie.properties expressed as write options, to fill what the user did not set."""
    out = {opt.key: table.properties[prop] for prop, opt in _TABLE_TO_OPTION.items() if prop in table.properties}
    if P.MERGE_MODE in table.properties and P.PAYLOAD_CLASS not in table.properties:
        payload = table.config.payload_class  # the payload of the mode's semantics (version 9 records none)
        if payload:
            out[C.PAYLOAD_CLASS.key] = payload
    if P.KEYGEN_CLASS not in table.properties and table.properties.get(P.KEYGEN_TYPE):
        out[C.KEYGENERATOR_TYPE.key] = table.properties[P.KEYGEN_TYPE]  # Hudi 1.x records the type only
    if P.PARTITION_FIELDS not in table.properties:
        out[C.PARTITIONPATH_FIELD.key] = ""
    for opt in _TIMESTAMP_PROPS:
        if opt.key in table.properties:
            out[opt.key] = table.properties[opt.key]
    return out


def new_table_properties(cfg: HudiConfig, spec: KeyGenSpec, create_schema: str) -> dict[str, str]:
    name = cfg.get(C.TABLE_NAME)
    version = int(cfg.get(C.WRITE_TABLE_VERSION))
    props: dict[str, str] = {P.NAME: name, P.TYPE: cfg.get(C.TABLE_TYPE), P.VERSION: "6", P.LAYOUT_VERSION: "1"}
    if not spec.auto_keys:  # Hudi records no key fields for generated keys (setRecordKeyFields(null))
        props[P.RECORD_KEY_FIELDS] = ",".join(spec.record_key_fields)
    if cfg.get(C.DATABASE_NAME):
        props[P.DATABASE] = cfg.get(C.DATABASE_NAME)
    if spec.partition_fields:
        # CustomKeyGenerator: bare names in version 6, field:TYPE from version 8 on
        # (HoodieSparkSqlWriter's partitionColumnsForKeyGenerator, HoodieTableConfigUtils.getPartitionFieldProp)
        typed = spec.kind == CUSTOM and version >= 8
        props[P.PARTITION_FIELDS] = ",".join(
            f"{f}:{t}" for f, t in zip(spec.partition_fields, spec.partition_types)) if typed \
            else ",".join(spec.partition_fields)
    if cfg.is_set(C.PRECOMBINE_FIELD):
        props[P.PRECOMBINE_FIELD] = cfg.get(C.PRECOMBINE_FIELD)
    props[P.KEYGEN_CLASS] = spec.class_name
    props[P.HIVE_STYLE] = str(spec.hive_style).lower()
    props[P.URL_ENCODE] = str(spec.url_encode).lower()
    props[P.DROP_PARTITION_COLUMNS] = "false"
    props[P.BASE_FILE_FORMAT] = "PARQUET"
    props[P.ARCHIVE_FOLDER] = "archived"
    # Hudi records the payload of a merge-on-read table always (its compaction merges by it), and of a
    # copy-on-write table the one its writer named: every later write, statement and CDC log of the
    # table merges by it without the option repeated
    if cfg.get(C.TABLE_TYPE) == P.MERGE_ON_READ or cfg.get(C.PAYLOAD_CLASS) != OVERWRITE_PAYLOAD:
        props[P.PAYLOAD_CLASS] = cfg.get(C.PAYLOAD_CLASS)
    props[P.TIMELINE_TIMEZONE] = cfg.get(C.TIMELINE_TIMEZONE)
    if not cfg.get(C.POPULATE_META_FIELDS):
        props[P.POPULATE_META_FIELDS] = "false"
    if cfg.get(C.CDC_ENABLED):  # HoodieTableMetaClient.PropertyBuilder: the mode only with CDC on, upper case
        props[P.CDC_ENABLED] = "true"
        props[P.CDC_LOGGING_MODE] = cfg.get(C.CDC_LOGGING_MODE)
    if spec.has_timestamp_part:  # (Hudi records them for TimestampBasedKeyGenerator; pyhudi for a custom one too)
        for opt in _TIMESTAMP_PROPS:
            if cfg.is_set(opt):
                props[opt.key] = str(cfg.raw[opt.key])
    props[P.CREATE_SCHEMA] = create_schema
    if version == 6:
        return props
    return creation_properties(props, version, merge_mode=creation_merge_mode(cfg))


def creation_merge_mode(cfg: HudiConfig) -> str:
    """The record merge mode a new table of version 8 or 9 records, inferred as Hudi 1.x infers it
    (``HoodieTableConfig.inferMergingConfigsForPreV9Table`` / ``...ForV9TableCreation``,
    docs/hudi-1x-format.md section 8): the mode the write names; else the payload class's (the
    option resolver has already refused a mode and a payload of different semantics); else
    event-time ordering when the write names an ordering field, commit-time ordering when not.
    Like Hudi, an event-time table without an ordering field and a commit-time one with an
    ordering field only warn: the first merges as commit time, the second ignores the field."""
    ordering = cfg.get(C.PRECOMBINE_FIELD) if cfg.is_set(C.PRECOMBINE_FIELD) else None
    mode = cfg.get(C.RECORD_MERGE_MODE)
    if mode is None and cfg.is_set(C.PAYLOAD_CLASS):
        mode = MERGE_MODE_OF_PAYLOAD.get(cfg.get(C.PAYLOAD_CLASS))  # (the six others: creation_properties)
    if mode is None:
        return "EVENT_TIME_ORDERING" if ordering else "COMMIT_TIME_ORDERING"
    if mode == "EVENT_TIME_ORDERING" and not ordering:
        log.warning("merge mode EVENT_TIME_ORDERING without an ordering field "
                    "(hoodie.datasource.write.precombine.field): records merge as COMMIT_TIME_ORDERING")
    elif mode == "COMMIT_TIME_ORDERING" and ordering:
        log.warning("merge mode COMMIT_TIME_ORDERING ignores the ordering field %s: the latest write wins", ordering)
    return str(mode)


def ordering_field(cfg: HudiConfig, df: DataFrame, operation: str, table: HudiTable | None) -> str | None:
    """The precombine field if the data has it; an error if the user asked for one it lacks."""
    field = cfg.get(C.PRECOMBINE_FIELD)
    explicit = cfg.is_set(C.PRECOMBINE_FIELD) or (table is not None and table.config.precombine_field)
    if not field:
        return None
    if not cfg.get(C.RECORDKEY_FIELD):  # generated keys are unique: nothing to order
        if explicit:
            log.warning("Precombine field %s will be ignored with auto record key generation enabled", field)
        return None
    if field in df.columns or "." in field:
        try:
            field_type(df.schema, field)
            return field
        except HudiError:
            pass
    needs = operation == "upsert" or (operation != "delete" and cfg.get(C.COMBINE_BEFORE_INSERT))
    if explicit and needs:
        raise HudiSchemaError(
            f"precombine field {field!r} is not in the incoming data (columns: {', '.join(df.columns)}); "
            "add it or set hoodie.datasource.write.precombine.field to an existing column")
    return None


def data_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` without the meta columns."""
    return pa.schema([f for f in schema if f.name not in META_FIELDS])


def check_async_clean(cfg: HudiConfig) -> None:
    """Refuse ``hoodie.clean.async=true`` outside optimistic concurrency control, before the write
    reads a row or creates anything."""
    if cfg.get(C.CLEAN_ASYNC) and cfg.get(C.CLEAN_AUTOMATIC) and cfg.get(C.WRITE_CONCURRENCY_MODE) != C.OCC:
        raise HudiConfigError(
            f"{C.CLEAN_ASYNC.key}=true cleans beside the write, which needs {C.WRITE_CONCURRENCY_MODE.key}={C.OCC}: "
            "a single writer holds the table lock from its start to its end, so a clean beside it could not take "
            f"turns with it. Set optimistic concurrency control, or {C.CLEAN_ASYNC.key}=false (the clean then runs "
            "after the commit)")
