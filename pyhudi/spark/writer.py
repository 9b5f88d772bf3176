"""``pyhudi.write``: options and table checks, the instant's life cycle, and failure handling.

The driver plans and commits; rows never come back to it. A write:

1. resolves options against the table's own configuration (a conflict is an error);
2. validates the input (key fields, ordering field, partition paths, schema evolution) before
   anything is written;
3. under the table lock, rolls back writes that failed earlier and requests a new instant
   (:class:`pyhudi.commit.transaction.WriteTransaction`, which also keeps its heartbeat);
4. runs the operation's Spark pipeline (:mod:`pyhudi.spark.pipeline`), executors writing files;
5. under the lock, checks the instant is still its own and (optimistic concurrency control) that
   no other writer changed its file groups meanwhile, then completes it: the single step that
   makes data visible.

Any failure in 4-5 rolls the instant back before the error reaches the caller.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import DataFrame

from pyhudi import config as C
from pyhudi.commit.transaction import WriteTransaction
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.errors import (
    HudiCommitError,
    HudiConfigError,
    HudiError,
    HudiRestoreError,
    HudiSchemaError,
    HudiTableMismatchError,
    HudiUnsupportedError,
)
from pyhudi.io.avro_schema import IS_DELETED_FIELD, META_FIELDS, table_avro_schema
from pyhudi.keygen.spec import TIMESTAMP, KeyGenSpec, resolve_keygen
from pyhudi.read.merge import MergeSpec
from pyhudi.spark.compat import arrow_schema
from pyhudi.spark.errors import translate
from pyhudi.spark.keygen import check_partitions, field_type
from pyhudi.spark.pipeline import Pipeline
from pyhudi.spark.record_index_job import builder as record_index_builder
from pyhudi.spark.record_index_job import keeps_record_index
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import REPLACE_COMMIT
from pyhudi.timeline.timeline import commit_action_for
from pyhudi.write import schema as schema_evolution
from pyhudi.write.replace import (
    DELETE_PARTITION,
    INSERT_OVERWRITE_TABLE,
    REPLACE_OPERATIONS,
    check_delete_partitions,
    requested_replace,
    resolve_partitions,
)
from pyhudi.write.result import OPERATION_TYPES, WriteResult, summarize

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
}
_TIMESTAMP_PROPS = (C.TIMESTAMP_TYPE, C.TIMESTAMP_INPUT_FORMAT, C.TIMESTAMP_OUTPUT_FORMAT,
                    C.TIMESTAMP_INPUT_TIMEZONE, C.TIMESTAMP_OUTPUT_TIMEZONE, C.TIMESTAMP_SCALAR_UNIT,
                    C.TIMESTAMP_INPUT_FORMAT_DELIMITER, C.TIMESTAMP_TIMEZONE)


def _normalized(opt: C.ConfigOption[Any], value: Any) -> str:
    parsed = opt.parse(value)
    if isinstance(parsed, tuple):
        return ",".join(parsed)
    return str(parsed).lower()


def check_table_config(cfg: HudiConfig, table: HudiTable) -> None:
    """Hudi's ``validateTableConfig``: options the user set must agree with hoodie.properties."""
    conflicts = []
    for prop, opt in _TABLE_TO_OPTION.items():
        if not cfg.is_set(opt) or prop not in table.properties:
            continue
        mine, theirs = _normalized(opt, cfg.raw[opt.key]), _normalized(opt, table.properties[prop])
        if prop == P.KEYGEN_CLASS:
            mine, theirs = mine.rsplit(".", 1)[-1], theirs.rsplit(".", 1)[-1]
        if mine != theirs:
            conflicts.append(f"  {opt.key}: write option {cfg.raw[opt.key]!r}, table has {table.properties[prop]!r}")
    if cfg.is_set(C.PARTITIONPATH_FIELD) and P.PARTITION_FIELDS not in table.properties and \
            cfg.get(C.PARTITIONPATH_FIELD):
        conflicts.append(f"  {C.PARTITIONPATH_FIELD.key}: write option "
                         f"{cfg.raw[C.PARTITIONPATH_FIELD.key]!r}, table is not partitioned")
    if conflicts:
        raise HudiTableMismatchError(
            f"the write options conflict with the table at {table.path}:\n" + "\n".join(conflicts)
            + "\nwrite with the table's settings, or write to a new path")


def options_from_table(table: HudiTable) -> dict[str, str]:
    """hoodie.properties expressed as write options, to fill what the user did not set."""
    out = {opt.key: table.properties[prop] for prop, opt in _TABLE_TO_OPTION.items() if prop in table.properties}
    if P.PARTITION_FIELDS not in table.properties:
        out[C.PARTITIONPATH_FIELD.key] = ""
    for opt in _TIMESTAMP_PROPS:
        if opt.key in table.properties:
            out[opt.key] = table.properties[opt.key]
    return out


def new_table_properties(cfg: HudiConfig, spec: KeyGenSpec, create_schema: str) -> dict[str, str]:
    name = cfg.get(C.TABLE_NAME)
    props: dict[str, str] = {P.NAME: name, P.TYPE: cfg.get(C.TABLE_TYPE), P.VERSION: "6",
                             P.LAYOUT_VERSION: "1", P.RECORD_KEY_FIELDS: ",".join(spec.record_key_fields)}
    if cfg.get(C.DATABASE_NAME):
        props[P.DATABASE] = cfg.get(C.DATABASE_NAME)
    if spec.partition_fields:
        props[P.PARTITION_FIELDS] = ",".join(spec.partition_fields)
    if cfg.is_set(C.PRECOMBINE_FIELD):
        props[P.PRECOMBINE_FIELD] = cfg.get(C.PRECOMBINE_FIELD)
    props[P.KEYGEN_CLASS] = spec.class_name
    props[P.HIVE_STYLE] = str(spec.hive_style).lower()
    props[P.URL_ENCODE] = str(spec.url_encode).lower()
    props[P.DROP_PARTITION_COLUMNS] = "false"
    props[P.BASE_FILE_FORMAT] = "PARQUET"
    props[P.ARCHIVE_FOLDER] = "archived"
    if cfg.get(C.TABLE_TYPE) == P.MERGE_ON_READ:
        props[P.PAYLOAD_CLASS] = cfg.get(C.PAYLOAD_CLASS)
    props[P.TIMELINE_TIMEZONE] = cfg.get(C.TIMELINE_TIMEZONE)
    if not cfg.get(C.POPULATE_META_FIELDS):
        props[P.POPULATE_META_FIELDS] = "false"
    if spec.kind == TIMESTAMP:
        for opt in _TIMESTAMP_PROPS:
            if cfg.is_set(opt):
                props[opt.key] = str(cfg.raw[opt.key])
    props[P.CREATE_SCHEMA] = create_schema
    return props


def _ordering_field(cfg: HudiConfig, df: DataFrame, operation: str, table: HudiTable | None) -> str | None:
    """The precombine field if the data has it; an error if the user asked for one it lacks."""
    field = cfg.get(C.PRECOMBINE_FIELD)
    explicit = cfg.is_set(C.PRECOMBINE_FIELD) or (table is not None and table.config.precombine_field)
    if not field:
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


def write(df: DataFrame, path: str, options: Mapping[str, Any] | None = None, *,
          mode: str = "append", extra_metadata: Mapping[str, str] | None = None) -> WriteResult:
    """Write a DataFrame to the Hudi table at ``path`` (created on first write).

    ``mode="append"`` applies the operation (``hoodie.datasource.write.operation``, default
    upsert); ``mode="overwrite"`` replaces the table's contents atomically (an
    ``insert_overwrite_table`` replace commit, whatever the operation) or creates the table.
    ``extra_metadata`` is stored in the commit's extra metadata, whatever
    ``hoodie.datasource.write.commitmeta.key.prefix`` says.
    """
    started = time.monotonic()
    if mode not in ("append", "overwrite"):
        raise HudiConfigError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    cfg = HudiConfig.of(options)
    table = HudiTable(path) if HudiTable.exists(path) else None
    if table is not None:
        if table.config.version not in (5, 6):
            raise HudiUnsupportedError(
                f"{path} is a table of version {table.config.version}; pyhudi writes table version 6 only")
        table.config.check_data_table()
        if str(table.properties.get(P.CDC_ENABLED, "false")).strip().lower() == "true":
            raise HudiUnsupportedError(
                f"{path} has {P.CDC_ENABLED}=true: its writes must also write change data files, which pyhudi "
                "does not implement (it reads such a table's snapshot); write with Apache Hudi's own Spark bundle")
        check_table_config(cfg, table)
        cfg = cfg.with_defaults(options_from_table(table))
    elif not cfg.get(C.TABLE_NAME):
        raise HudiConfigError(f"{path} has no table yet: set hoodie.table.name to create one")
    operation = cfg.get(C.OPERATION)
    if operation not in OPERATION_TYPES:
        raise HudiUnsupportedError(f"operation {operation} is not supported; use one of {', '.join(OPERATION_TYPES)}")
    if mode == "overwrite" and operation in ("delete", "delete_partition"):
        raise HudiConfigError(f"mode='overwrite' cannot be combined with the {operation} operation")
    # Hudi's SaveMode.Overwrite on an existing table: the batch replaces the table
    # (where Hudi deletes the table first, pyhudi replaces it in one atomic commit)
    replace = REPLACE_OPERATIONS.get(operation)
    if mode == "overwrite" and table is not None:
        replace = INSERT_OVERWRITE_TABLE
    if replace == DELETE_PARTITION and table is None:
        return WriteResult(None, operation, path, {"note": "no table yet; no partition to delete"})
    overwrite = mode == "overwrite" and table is not None  # the old schema goes too
    if cfg.get(C.INDEX_TYPE) == "RECORD_INDEX" and not cfg.get(C.METADATA_ENABLE):
        log.warning("hoodie.index.type=RECORD_INDEX needs the metadata table (hoodie.metadata.enable=true); "
                    "looking records up with GLOBAL_SIMPLE instead")
    if cfg.get(C.DROP_PARTITION_COLUMNS):
        raise HudiUnsupportedError("hoodie.datasource.write.drop.partition.columns=true is not supported")
    if cfg.get(C.ARCHIVE_AUTOMATIC):
        from pyhudi.services.archival import validate as validate_archival

        validate_archival(cfg)
    populate = cfg.get(C.POPULATE_META_FIELDS)
    if not populate and operation in ("upsert", "delete") and replace is None:
        raise HudiUnsupportedError("upsert and delete need hoodie.populate.meta.fields=true")
    if not populate and keeps_record_index(cfg):
        raise HudiConfigError("the record index (hoodie.metadata.record.index.enable, hoodie.index.type=RECORD_INDEX) "
                              "reads the record keys stored in the files: it needs hoodie.populate.meta.fields=true")
    spec = resolve_keygen(cfg)

    data = df.drop(*[c for c in df.columns if c in META_FIELDS])
    for f in spec.record_key_fields + spec.partition_fields:
        field_type(data.schema, f)  # HudiKeyError naming a missing field
    ordering = _ordering_field(cfg, data, operation, table)
    if replace != DELETE_PARTITION:  # before the table or an instant exists: a refusal leaves no trace
        try:
            check_partitions(data, spec, table)
        except Exception as exc:  # a key generator failing inside the Spark job carries pyhudi's marker
            translated = translate(exc)
            if translated is None:
                raise
            raise translated from None
    incoming_arrow = arrow_schema(data.schema)
    current = table.arrow_schema() if table is not None else None
    if operation in ("delete", "delete_partition"):
        if current is None:
            return WriteResult(None, operation, path, {"note": "table is empty; nothing to delete"})
        target = pa_data_schema(current)
    else:
        target = schema_evolution.evolve(
            None if overwrite else current, incoming_arrow,
            fill_missing=cfg.get(C.SET_NULL_FOR_MISSING_COLUMNS) or cfg.get(C.RECONCILE_SCHEMA),
            drop_missing=cfg.get(C.ALLOW_COLUMN_DROP))
    unknown = [c for c in cfg.get(C.METADATA_COLUMN_STATS_COLUMNS) if c not in target.names and c not in META_FIELDS]
    if unknown:
        raise HudiConfigError(f"hoodie.metadata.index.column.stats.column.list names {', '.join(unknown)}, which the "
                              f"table does not have (its columns: {', '.join(target.names)})")
    table_name = cfg.get(C.TABLE_NAME) if table is None else table.name
    schema_json = table_avro_schema(target, table_name)

    if table is None:
        table = HudiTable.create(path, new_table_properties(cfg, spec, schema_json))
        log.info("created table %s at %s", table_name, path)
    from pyhudi.services.restore import pending_restore

    unfinished = pending_restore(table)
    if unfinished is not None:
        raise HudiRestoreError(f"restore {unfinished[0]} to savepoint {unfinished[1]} is unfinished; finish it "
                               f"(`pyhudi restore --instant {unfinished[1]}`) before writing")

    to_delete = None
    if replace == DELETE_PARTITION and cfg.get(C.PARTITIONS_TO_DELETE):
        patterns = list(cfg.get(C.PARTITIONS_TO_DELETE))
        live = {g.partition_path for g in table.file_system_view().file_groups()}
        to_delete = tuple(resolve_partitions(patterns, live))
        check_delete_partitions(patterns, list(to_delete), path)
    action = REPLACE_COMMIT if replace else commit_action_for(table.table_type)
    txn = WriteTransaction(table, cfg)
    record_index = None
    if keeps_record_index(cfg):
        record_index = record_index_builder(df.sparkSession, table, cfg,
                                            MergeSpec.of(ordering, cfg.get(C.PAYLOAD_CLASS)))
    instant = txn.begin(action, requested_replace(replace) if replace else b"", record_index=record_index)
    rolled_back = txn.rolled_back
    if rolled_back:
        log.warning("rolled back %d failed write(s) before writing: %s", len(rolled_back), rolled_back)
    try:
        pipeline = Pipeline(table=table, cfg=cfg, spec=spec, instant=instant, target_schema=target,
                            ordering_field=ordering, is_deleted_column=IS_DELETED_FIELD in data.columns,
                            extra_metadata=dict(extra_metadata or {}), partitions_to_delete=to_delete)
        meta, phase = pipeline.run(data, operation=operation, replace=replace, schema_json=schema_json,
                                   commit=txn.commit)
    except BaseException as exc:
        _abort_quietly(txn)
        translated = translate(exc)
        if translated is not None:
            raise translated from None
        if isinstance(exc, HudiError):
            raise
        if isinstance(exc, Exception):
            raise HudiCommitError(f"write {instant} to {path} failed and was rolled back: {exc}") from exc
        raise
    stats = summarize(meta)
    stats.update(phase)
    stats["rolled_back_instants"] = rolled_back
    if table.table_type == P.MERGE_ON_READ and not replace:
        from pyhudi.spark.compaction_job import inline_compaction

        _inline_service(stats, "compaction", lambda: inline_compaction(df.sparkSession, table, cfg))
    if not replace and (cfg.get(C.CLUSTERING_INLINE) or cfg.get(C.CLUSTERING_SCHEDULE_INLINE)):
        from pyhudi.spark.clustering_job import inline_clustering

        _inline_service(stats, "clustering", lambda: inline_clustering(df.sparkSession, table, cfg))
    services_started = time.monotonic()
    stats.update(table_services(table, cfg))
    stats["services_s"] = round(time.monotonic() - services_started, 3)
    stats["total_s"] = round(time.monotonic() - started, 3)
    log.info("committed %s %s: %s", action, instant, stats)
    return WriteResult(instant, operation, path, stats, meta.write_stats())


def _inline_service(stats: dict[str, Any], name: str, run: Callable[[], list[str]]) -> None:
    """Run an inline service after the commit; its instants go to ``stats["<name>s"]`` (compactions,
    clusterings). A failure is reported in ``stats["service_error"]``: the write is committed, so
    the caller must never retry it."""
    try:
        done = run()
    except Exception as exc:
        log.warning("the write committed, but the inline %s after it failed: %s", name, exc, exc_info=True)
        stats["service_error"] = str(exc)
        return
    if done:
        stats[f"{name}s"] = done


def table_services(table: HudiTable, cfg: HudiConfig) -> dict[str, Any]:
    """Hudi's post-commit services, in Hudi's order: clean, then archive."""
    from pyhudi.services.archival import archive
    from pyhudi.services.clean import clean

    out: dict[str, Any] = {}
    try:
        if cfg.get(C.CLEAN_AUTOMATIC):
            cleaned = clean(table, cfg)
            if cleaned:
                out["cleans"] = [c.instant for c in cleaned]
                out["files_cleaned"] = sum(c.files_deleted for c in cleaned)
        if cfg.get(C.ARCHIVE_AUTOMATIC):
            archived = archive(table, cfg)
            if archived:
                out["archived_instants"] = len(archived)
    except Exception as exc:  # the commit is durable: report, never make the caller retry the write
        log.warning("the write committed, but a table service after it failed: %s", exc, exc_info=True)
        out["service_error"] = str(exc)
    return out


def pa_data_schema(schema: Any) -> Any:
    import pyarrow as pa

    return pa.schema([f for f in schema if f.name not in META_FIELDS])


def _abort_quietly(txn: WriteTransaction) -> None:
    try:
        txn.abort()
    except Exception:  # the next writer rolls it back; never hide the original error
        log.exception("could not roll back failed write %s; the next write will", txn.instant)
