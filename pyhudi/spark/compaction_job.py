"""Running compaction plans on Spark: one task per planned file slice, the driver commits.

A plan that failed half-way (its instant inflight, some base files written) is re-attempted:
the files its markers name are deleted first, then every slice is compacted again. The new base
files are invisible until ``T.commit`` appears, so a failed attempt never shows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from pyhudi import config as C
from pyhudi.actions.compaction import compact_slice
from pyhudi.commit.point import CommitPoint, Expect
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiCompactionError
from pyhudi.io.avro_schema import table_avro_schema
from pyhudi.io.base_file import parquet_settings
from pyhudi.plans.compaction import CompactionOperation, pending_compactions, read_plan
from pyhudi.read.merge import MergeSpec
from pyhudi.services.compaction import compaction_due, schedule_compaction
from pyhudi.spark.storage_conf import table_storage
from pyhudi.spark.worker import per_item
from pyhudi.storage import Storage
from pyhudi.table.table import HudiTable
from pyhudi.timeline.commit_metadata import CommitMetadata
from pyhudi.timeline.instant import COMMIT, COMPACTION, Instant, State
from pyhudi.timeline.timeline import Timeline
from pyhudi.transaction.heartbeat import Heartbeat, HeartbeatPolicy, heartbeat_age, is_alive
from pyhudi.transaction.lock import TableLock
from pyhudi.write.columns import STATS_DDL
from pyhudi.write.markers import remove_marked_files
from pyhudi.write.result import commit_metadata, written_files
from pyhudi.write.rows import stats_batch
from pyhudi.write.task import current_task

log = logging.getLogger("pyhudi")


def _merge_spec(table: HudiTable, cfg: HudiConfig) -> MergeSpec:
    return MergeSpec.of(table.config.precombine_field, table.config.payload_class or cfg.get(C.PAYLOAD_CLASS))


def run_compaction(spark: SparkSession, table: HudiTable, instant_time: str,
                   options: Mapping[str, Any] | None = None) -> CommitMetadata:
    """Execute the pending compaction plan ``instant_time`` and complete it as a commit."""
    table.check_writable("compaction", merges=True)
    cfg = HudiConfig.of(options)
    lock = TableLock(table.storage, cfg)
    policy = HeartbeatPolicy.of(cfg)
    with lock.held():
        timeline = table.timeline.reload()
        if timeline.is_completed(instant_time):
            raise HudiCompactionError(f"compaction {instant_time} has already completed")
        plan = read_plan(timeline, instant_time)
        started = time.monotonic()
        inflight = Instant(instant_time, State.INFLIGHT, COMPACTION)
        if inflight in timeline.instant_files:
            if is_alive(table.storage, instant_time, policy):
                raise HudiCompactionError(f"compaction {instant_time} is being run by another process (heartbeat "
                                          f"{heartbeat_age(table.storage, instant_time):.0f} s ago)")
            remove_marked_files(table.storage, instant_time)  # what an earlier, failed attempt wrote
            log.warning("re-attempting compaction %s", instant_time)
        else:
            timeline.transition_inflight(instant_time, COMPACTION)
        heartbeat = Heartbeat(table.storage, instant_time, policy).start()
    try:
        return _execute(spark, table, cfg, lock, instant_time, plan.operations, started)
    finally:
        heartbeat.stop()


def _execute(spark: SparkSession, table: HudiTable, cfg: HudiConfig, lock: TableLock, instant_time: str,
             operations: tuple, started: float) -> CommitMetadata:
    schema_json, file_schema = table.schemas()  # the latest table schema: written to the new base files and recorded
    if file_schema is None:
        raise HudiCompactionError(f"{table.path} has no table schema in its commits and no base file to take "
                                  "one from")
    settings = parquet_settings(cfg, table_avro_schema(file_schema, table.name, with_meta_fields=True),
                                populate_meta_fields=table.config.populate_meta_fields)
    spec = _merge_spec(table, cfg)
    visibility = table.file_system_view().visibility(before=instant_time)
    ops = list(operations)
    # HoodieMergeHandleFactory.create (compactor path): a CDC table's compaction logs its changes only
    # where the index writes inserts to logs (HoodieWriteConfig.isYieldingPureLogForMor: BUCKET)
    cdc_mode = table.config.cdc_logging_mode if cfg.get(C.INDEX_TYPE) == "BUCKET" else None
    log_sizes = {"log_max_size": cfg.get(C.LOGFILE_MAX_SIZE),
                 "log_block_max_size": cfg.get(C.LOGFILE_DATA_BLOCK_MAX_SIZE)}

    def work(storage: Storage, op: CompactionOperation, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        yield stats_batch(compact_slice(storage, op, schema, settings, spec, visibility, instant_time,
                                        current_task().token, cdc_mode=cdc_mode, **log_sizes))

    stats = per_item(spark, table.storage, ops, file_schema, work, STATS_DDL) if ops else None
    rows = [r.asDict() for r in stats.collect()] if stats is not None else []
    meta = commit_metadata(rows, operation_type="COMPACT", schema_json=schema_json or "")
    meta.compacted = True

    def gone(_timeline: Timeline, _reason: str) -> HudiCompactionError:
        return HudiCompactionError(f"compaction {instant_time} was completed or undone by another process "
                                   "while it ran; its files are left to the cleaner")

    point = CommitPoint.of(table, cfg, lock=lock)
    point.finish(instant_time, COMMIT, meta, expect=Expect(COMPACTION, (State.INFLIGHT,), gone),
                 files=written_files(rows))
    log.info("compaction %s: %d file slices in %.2f s", instant_time, len(ops), time.monotonic() - started)
    return meta


def inline_compaction(spark: SparkSession, table: HudiTable, cfg: HudiConfig) -> list[str]:
    """After a delta commit: run pending plans and schedule (and run) a new one when it is due."""
    inline, schedule_only = cfg.get(C.COMPACT_INLINE), cfg.get(C.COMPACT_SCHEDULE_INLINE)
    if not (inline or schedule_only):
        return []
    table.timeline.reload()
    done = []
    if inline:
        policy = HeartbeatPolicy.of(cfg)
        for inst in pending_compactions(table.timeline):
            if is_alive(table.storage, inst.timestamp, policy):
                continue  # another writer runs it now
            run_compaction(spark, table, inst.timestamp, cfg.raw)
            done.append(inst.timestamp)
    if compaction_due(table.timeline, cfg):
        instant = schedule_compaction(table, cfg)
        if instant is not None:
            if inline:
                run_compaction(spark, table, instant, cfg.raw)
            done.append(instant)
    return done


def compact(spark: SparkSession, path: str | Storage, options: Mapping[str, Any] | None = None, *,
            instant: str | None = None) -> list[str]:
    """Run compaction ``instant``, or every pending plan (scheduling one first if none is pending).

    Returns the compaction instants completed; empty when no file slice has log files.
    """
    table = HudiTable(table_storage(spark, path, options))
    cfg = HudiConfig.of(options)
    if instant is not None:
        run_compaction(spark, table, instant, cfg.raw)
        return [instant]
    pending = [i.timestamp for i in pending_compactions(table.timeline)]
    if not pending:
        scheduled = schedule_compaction(table, cfg)
        pending = [scheduled] if scheduled else []
    for inst in pending:
        run_compaction(spark, table, inst, cfg.raw)
    return pending
