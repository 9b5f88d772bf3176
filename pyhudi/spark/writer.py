"""``pyhudi.write``: a write from its options to its committed instant, and failure handling.

The driver plans and commits; rows never come back to it. A write:

1. resolves options against the table's own configuration, a conflict being an error
   (:mod:`pyhudi.spark.write_options`);
2. validates the input (key fields, ordering field, partition paths, schema evolution) before
   anything is written, then creates the table if there is none (:func:`target_schema`);
3. under the table lock, rolls back writes that failed earlier and requests a new instant
   (:class:`pyhudi.commit.transaction.WriteTransaction`, which also keeps its heartbeat);
4. runs the operation's Spark pipeline (:mod:`pyhudi.spark.pipeline`), executors writing files;
5. completes the instant through the table's commit point
   (:meth:`pyhudi.commit.point.CommitPoint.finish`): under the lock, checks the instant is still its
   own and (optimistic concurrency control) that no other writer changed its file groups
   meanwhile, then completes it: the single step that makes data visible;
6. runs the post-commit services registered on the commit point (:mod:`pyhudi.spark.post_commit`).

Any failure in 4-5 rolls the instant back before the error reaches the caller.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any, NoReturn

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyhudi import config as C
from pyhudi.actions.rollback import rollback_failed_writes
from pyhudi.commit.point import CommitPoint
from pyhudi.commit.transaction import WriteTransaction
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.errors import HudiCommitError, HudiConfigError, HudiError, HudiKeyError, HudiRestoreError
from pyhudi.io.avro_schema import FILE_NAME, IS_DELETED_FIELD, META_FIELDS, PARTITION_PATH, table_avro_schema
from pyhudi.keygen.spec import KeyGenSpec
from pyhudi.read.merge import MergeSpec
from pyhudi.services.restore import pending_restore
from pyhudi.services.table_version import change_version
from pyhudi.spark.compaction_job import compact
from pyhudi.spark.compat import arrow_schema
from pyhudi.spark.errors import translate
from pyhudi.spark.keygen import GENERATE_KEY, check_partitions, check_stored_partitions, field_type
from pyhudi.spark.pipeline import Pipeline
from pyhudi.spark.post_commit import catalog_sync, register_services
from pyhudi.spark.record_index_job import builder as record_index_builder
from pyhudi.spark.record_index_job import keeps_record_index
from pyhudi.spark.small_write import collect_prepared
from pyhudi.spark.storage_conf import table_storage
from pyhudi.spark.write_options import (
    PREPPED_COLUMNS,
    PREPPED_SUFFIX,
    WriteRequest,
    check_features,
    check_request,
    check_stats_columns,
    data_schema,
    new_table_properties,
    ordering_field,
    resolve_prepped,
    version_change,
)
from pyhudi.storage import Storage
from pyhudi.sync.tool import sync_enabled
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import REPLACE_COMMIT
from pyhudi.timeline.timeline import commit_action_for
from pyhudi.transaction.concurrency import Concurrency
from pyhudi.transaction.lock import TableLock, operation_hold
from pyhudi.write import schema as schema_evolution
from pyhudi.write.columns import IS_DELETE
from pyhudi.write.replace import DELETE_PARTITION, check_delete_partitions, requested_replace, resolve_partitions
from pyhudi.write.result import WriteResult, summarize
from pyhudi.write.rows import counts_of

log = logging.getLogger("pyhudi")
#: the compaction strategy that plans every file slice with log files (Hudi's choice before an upgrade)
_UNBOUNDED = "org.apache.hudi.table.action.compact.strategy.UnBoundedCompactionStrategy"


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
    storage = table_storage(df.sparkSession, path, options)
    request = check_request(storage, HudiConfig.of(options), mode)
    with contextlib.ExitStack() as hold:
        if request.table is not None:
            hold.enter_context(operation_hold(storage, request.cfg))
            to_version = version_change(request)
            if to_version is not None and to_version < 8 and request.cfg.get(C.WRITE_PARTIAL_UPDATE_SCHEMA):
                raise HudiConfigError(f"{C.WRITE_PARTIAL_UPDATE_SCHEMA.key} is set, but the write moves {path} to "
                                      f"table version {to_version}, which has no partial-update log blocks (Hudi "
                                      "1.x): unset one or the other")
            if to_version is not None:
                move_table_version(df.sparkSession, request.table, to_version, request.cfg)
                request = check_request(storage, HudiConfig.of(options), mode)  # against the moved table
        result = _write(df, storage, path, request, hold, extra_metadata=extra_metadata, started=started)
    if result.instant_time is not None and sync_enabled(request.cfg):  # the lock is let go: a slow catalog
        result.stats.update(catalog_sync(df.sparkSession, storage, request.cfg))  # blocks no writer
    return result


def move_table_version(spark: SparkSession, table: HudiTable, to_version: int, cfg: HudiConfig) -> None:
    """Upgrade or downgrade ``table`` to ``to_version`` before a write, as Hudi's
    ``UpgradeDowngrade.run`` does before its writers start (docs/hudi-1x-format.md 6.1): failed
    writes are rolled back and, where the timeline changes layout (6 <-> 8 and 9, whose log files
    are named and sliced differently), a merge-on-read table is compacted whole first, Hudi's
    ``rollbackFailedWritesAndCompact``. What still stands in the way (a write whose heartbeat is
    alive, a pending clustering, index definitions) refuses the change with nothing changed and the
    write not started (:func:`~pyhudi.services.table_version.change_version`). The caller holds the
    table lock for the whole write in single-writer mode, so no other writer starts between the
    change and the write."""
    concurrency = Concurrency.of(cfg)
    with TableLock(table.storage, cfg).held():
        timeline = table.reload().timeline
        rolled_back = rollback_failed_writes(table.storage, timeline, complete=CommitPoint.of(table, cfg).complete,
                                             utc=table.config.utc_timeline, heartbeat=concurrency.heartbeat)
        if rolled_back:
            log.warning("rolled back %d failed write(s) before changing the table version: %s",
                        len(rolled_back), rolled_back)
        from_version = table.reload().config.version
        if table.table_type == P.MERGE_ON_READ and (from_version < 8) != (to_version < 8) and any(
                s.log_files for s in table.file_system_view().latest_slices()):
            compacted = compact(spark, table.storage, {**cfg.raw, C.COMPACTION_STRATEGY.key: _UNBOUNDED})
            log.info("compacted %s (%s) before moving it from table version %d to %d",
                     table.path, ", ".join(compacted), from_version, to_version)
        change_version(table.reload(), to_version, cfg)


def _write(df: DataFrame, storage: Storage, path: str, request: WriteRequest, hold: contextlib.ExitStack, *,
           extra_metadata: Mapping[str, str] | None, started: float) -> WriteResult:
    """:func:`write` once the options are checked; ``hold`` takes the table lock for the whole
    write in single-writer mode (:func:`~pyhudi.transaction.lock.operation_hold`) when the write
    creates the table."""
    request = resolve_prepped(request, df.columns)
    operation, replace = request.operation, request.replace
    if replace == DELETE_PARTITION and request.table is None:
        return WriteResult(None, operation, path, {"note": "no table yet; no partition to delete"})
    spec = check_features(request)
    # a prepped write is keyed by these meta columns, and finds its records by the file names it carries
    stored = (*PREPPED_COLUMNS, FILE_NAME) if request.prepped else ()
    dropped = [c for c in df.columns if c in META_FIELDS and c not in stored]
    data = df.drop(*dropped) if dropped else df
    # refusals that read no row come first (a DML statement's delete flag and a prepped row's
    # stored key are no table data)
    ordering = check_fields(request, spec, data)
    target = target_schema(request, T.StructType([f for f in data.schema.fields
                                                  if f.name not in (IS_DELETE, GENERATE_KEY, *stored)]))
    if request.table is not None:
        refuse_unfinished_restore(request.table)
    checking = time.monotonic()
    input_counts, collected = check_rows(request, spec, data, ordering)
    check_s = round(time.monotonic() - checking, 3)
    if target is None:
        return WriteResult(None, operation, path, {"note": "table is empty; nothing to delete"})
    cfg = request.cfg
    table, schema_json = open_table(storage, request, spec, target)
    if request.table is None:
        hold.enter_context(operation_hold(storage, cfg))
    to_delete = None
    if replace == DELETE_PARTITION and cfg.get(C.PARTITIONS_TO_DELETE):
        patterns = list(cfg.get(C.PARTITIONS_TO_DELETE))
        live = {g.partition_path for g in table.file_system_view().file_groups()}
        to_delete = tuple(resolve_partitions(patterns, live))
        check_delete_partitions(patterns, list(to_delete), path)
    action = REPLACE_COMMIT if replace else commit_action_for(table.table_type)
    txn = WriteTransaction(table, cfg)
    cleaning = register_services(txn.point, df.sparkSession, table, cfg, replace=replace)
    record_index = None
    if keeps_record_index(cfg):
        record_index = record_index_builder(df.sparkSession, table, cfg,
                                            MergeSpec.of(ordering, cfg.get(C.PAYLOAD_CLASS)))
    instant = txn.begin(action, requested_replace(replace) if replace else b"", record_index=record_index)
    rolled_back = txn.rolled_back
    if rolled_back:
        log.warning("rolled back %d failed write(s) before writing: %s", len(rolled_back), rolled_back)
    try:
        if cleaning is not None and request.table is not None:
            # (a write that creates the table holds its lock throughout, and leaves nothing to
            # clean: its clean runs after the commit)
            cleaning.start()
        pipeline = Pipeline(table=table, cfg=cfg, spec=spec, instant=instant, target_schema=target,
                            ordering_field=ordering, is_deleted_column=IS_DELETED_FIELD in data.columns,
                            extra_metadata=dict(extra_metadata or {}), partitions_to_delete=to_delete,
                            input_counts=input_counts, collected=collected, collected_s=check_s,
                            prepped=request.prepped and GENERATE_KEY not in df.columns)
        collected = None  # (the pipeline lets go of the rows once written)
        meta, phase = pipeline.run(data, operation=operation, replace=replace, schema_json=schema_json,
                                   commit=txn.commit)
    except BaseException as exc:
        _abort_quietly(txn)
        if cleaning is not None:
            cleaning.stop()
        translated = translate(exc)
        if translated is not None:
            raise translated from None
        if isinstance(exc, HudiError):
            raise
        if isinstance(exc, Exception):
            raise HudiCommitError(f"write {instant} to {path} failed and was rolled back: {exc}") from exc
        raise
    stats = summarize(meta)
    stats["check_s"] = check_s  # the input's checks before the instant (and a small batch's collect)
    stats.update(phase)
    stats["rolled_back_instants"] = rolled_back
    try:
        stats.update(txn.after_commit())
    finally:
        if cleaning is not None:  # (waited for by the services; here only if one of them raised)
            cleaning.stop()
    stats["total_s"] = round(time.monotonic() - started, 3)
    log.info("committed %s %s: %s", action, instant, stats)
    return WriteResult(instant, operation + (PREPPED_SUFFIX if pipeline.prepped else ""), path, stats,
                       meta.write_stats())


def check_fields(request: WriteRequest, spec: KeyGenSpec, data: DataFrame) -> str | None:
    """The input's columns checked before the table or an instant exists: key fields present (a
    prepped write's rows carry their stored keys instead), and the ordering field, returned (None
    when the data lacks an optional one)."""
    if not request.prepped:
        for f in spec.record_key_fields + spec.partition_fields:
            field_type(data.schema, f)  # HudiKeyError naming a missing field
    return ordering_field(request.cfg, data, request.operation, request.table)


def check_rows(request: WriteRequest, spec: KeyGenSpec, data: DataFrame,
               ordering: str | None) -> tuple[dict[str, int] | None, pa.Table | None]:
    """The input's rows checked before the table or an instant exists, so a refusal leaves no
    trace: keys and partition paths valid. A prepped write's rows carry their stored key and
    partition path, which are not generated: only an insert_prepped's stored paths (the user's)
    and a merge's new keys' paths are checked.

    Returned: the input's rows per partition path where the check has them (free-form string
    paths counted by one Spark job, or on the driver for a small local relation,
    :func:`~pyhudi.spark.keygen.check_partitions`; any paths of a collected batch), which the write
    plans with instead of counting again, and the prepared rows of a small batch bound for the
    driver write (:func:`~pyhudi.spark.small_write.collect_prepared`: its keys and paths computed
    once, before the instant, for the check and the write); None where there are none. A failure
    reading the batch is a :class:`~pyhudi.errors.HudiKeyError` where a key generator raised it,
    else a :class:`~pyhudi.errors.HudiCommitError`: nothing was written."""
    if request.prepped:
        if GENERATE_KEY in data.columns:  # a merge's inserts are keyed like new rows: their partition paths too
            check_partitions(data.where(F.col(GENERATE_KEY)), spec, request.table)
        if request.operation == "insert":  # insert_prepped: the stored paths are the user's, not the table's
            check_stored_partitions(data, spec, request.table, partition_col=PARTITION_PATH)
        return None, None
    counts = collected = None
    if request.replace is None and (request.table is not None or request.operation != "delete"):
        try:  # (a delete from no table has nothing to delete: target_schema says so)
            collected = collect_prepared(request.cfg, spec, data, operation=request.operation,
                                         ordering_field=ordering)
        except HudiKeyError:  # (pyarrow's key generator: rows held on the driver)
            raise
        except Exception as exc:  # a key generator failing on a row carries pyhudi's marker
            translated = translate(exc)
            if translated is not None:
                raise translated from None
            raise HudiCommitError(f"reading the batch failed before the write began; nothing was written: "
                                  f"{exc}") from exc
        if collected is not None:
            counts = counts_of(collected.column(PARTITION_PATH))
    if request.replace != DELETE_PARTITION:
        try:
            counts = check_partitions(data, spec, request.table, counts=counts)
        except Exception as exc:  # a key generator failing inside the Spark job carries pyhudi's marker
            _raise_translated(exc)
    return counts, collected


def _raise_translated(exc: Exception) -> NoReturn:
    """Raise the pyhudi error a Spark failure stands for (:func:`~pyhudi.spark.errors.translate`),
    or ``exc`` itself."""
    translated = translate(exc)
    if translated is None:
        raise exc
    raise translated from None


def target_schema(request: WriteRequest, incoming: T.StructType) -> pa.Schema | None:
    """The table schema after a write of ``incoming`` columns (without meta columns), the schema
    evolution allowed; None: a delete on a table without a schema, which has nothing to delete."""
    cfg, table, operation = request.cfg, request.table, request.operation
    incoming_arrow = arrow_schema(incoming)
    current = table.arrow_schema() if table is not None else None
    if operation in ("delete", "delete_partition"):
        if current is None:
            return None
        target = data_schema(current)
    else:
        target = schema_evolution.evolve(
            None if request.overwrite else current, incoming_arrow,
            fill_missing=cfg.get(C.SET_NULL_FOR_MISSING_COLUMNS) or cfg.get(C.RECONCILE_SCHEMA),
            drop_missing=cfg.get(C.ALLOW_COLUMN_DROP))
    check_stats_columns(cfg, target)
    return target


def open_table(path: Storage, request: WriteRequest, spec: KeyGenSpec, target: pa.Schema) -> tuple[HudiTable, str]:
    """The table to write (created with the write's properties when there is none) and the Avro
    schema the commit records."""
    cfg, table = request.cfg, request.table
    table_name = cfg.get(C.TABLE_NAME) if table is None else table.name
    schema_json = table_avro_schema(target, table_name)
    if table is None:
        table = HudiTable.create(path, new_table_properties(cfg, spec, schema_json))
        log.info("created table %s at %s", table_name, path.uri())
    return table, schema_json


def refuse_unfinished_restore(table: HudiTable) -> None:
    """Refuse a write to ``table`` while a restore of it is unfinished."""
    unfinished = pending_restore(table)
    if unfinished is not None:
        raise HudiRestoreError(f"restore {unfinished[0]} to savepoint {unfinished[1]} is unfinished; finish it "
                               f"(`pyhudi restore --instant {unfinished[1]}`) before writing")


def _abort_quietly(txn: WriteTransaction) -> None:
    try:
        txn.abort()
    except Exception:  # the next writer rolls it back; never hide the original error
        log.exception("could not roll back failed write %s; the next write will", txn.instant)
