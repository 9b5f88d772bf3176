"""Running clustering plans on Spark; the driver commits.

A group of up to :data:`IN_TASK_GROUP_BYTES` is one task: it merges the group's file slices (base
file and log blocks) with pyarrow, orders the records
(:func:`pyhudi.actions.ordering.ordering`) and writes them as new file groups cut at
``hoodie.clustering.plan.strategy.target.file.max.bytes``. A larger group is read by Spark,
range-partitioned into its planned number of files and sorted by Spark (:func:`ordered_by_spark`),
which spills where one task's memory would not hold it. Either way each record keeps its commit
time and sequence number (``hoodie.clustering.preserve.commit.metadata``). The driver then completes
``T.replacecommit`` (operation ``CLUSTER``; ``T_C.replacecommit`` after ``T.clustering.inflight``
on table versions 8 and 9) retiring the input groups, under the table lock; the
record index, where the table keeps one, learns the keys' new file groups in the same step.

A plan whose earlier attempt died (its instant inflight, its heartbeat expired) is re-attempted:
the files its markers name are deleted first.
"""

from __future__ import annotations

import functools
import logging
import posixpath
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyhudi import config as C
from pyhudi.actions.ordering import curve_bits, curve_index, on_curve, ordering, scaled_ranks
from pyhudi.actions.rollback import rollback_instant
from pyhudi.commit.point import CommitPoint, Expect
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiClusteringError, HudiWriteConflictError
from pyhudi.io.avro_schema import PARTITION_PATH, RECORD_KEY, table_avro_schema
from pyhudi.io.base_file import parquet_settings
from pyhudi.io.file_names import parse_base_file, parse_log_file
from pyhudi.metadata.table import RECORD_INDEX_PARTITION
from pyhudi.plans.clustering import (
    CLUSTER,
    ClusteringGroup,
    clustering_conflicts,
    describe_groups,
    pending_clusterings,
    read_clustering_plan,
    requested_plan_file,
)
from pyhudi.read.merge import MergeSpec, Visibility, read_slice
from pyhudi.services.clustering import clustering_due, schedule_clustering
from pyhudi.spark.merged import drop_soft_deleted
from pyhudi.spark.reader import slices_frame, spark_schema
from pyhudi.spark.record_index_job import write_changes
from pyhudi.spark.storage_conf import table_storage
from pyhudi.spark.worker import map_in_arrow, per_item
from pyhudi.storage import Storage
from pyhudi.table.fs_view import BaseFile, FileSlice, LogFile
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import REPLACE_COMMIT, State
from pyhudi.timeline.timeline import Timeline
from pyhudi.transaction.heartbeat import Heartbeat, HeartbeatPolicy, heartbeat_age, is_alive
from pyhudi.transaction.lock import TableLock
from pyhudi.write.bulk_insert import bulk_insert_writer
from pyhudi.write.columns import STATS_DDL
from pyhudi.write.markers import remove_marked_files
from pyhudi.write.plan import WriteContext
from pyhudi.write.result import commit_metadata
from pyhudi.write.task import current_task

log = logging.getLogger("pyhudi")

#: Groups of at most this many input bytes are merged and ordered in one task's memory, which is
#: quickest for the small groups clustering often makes (20 groups of 12 MB: 12 s in tasks, 27 s
#: by Spark). A task holds about 25 times its group's parquet bytes (232 MB: 5.9 GB), so larger
#: groups are ordered by Spark, whose Python workers stay near 300 MB (benchmarks/clustering.py).
IN_TASK_GROUP_BYTES = 64 << 20


def run_clustering(spark: SparkSession, table: HudiTable, instant_time: str,
                   options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Execute the pending clustering plan ``instant_time`` and complete it; returns its figures."""
    table.check_writable("clustering", merges=True)
    cfg = HudiConfig.of(options)
    lock = TableLock(table.storage, cfg)
    policy = HeartbeatPolicy.of(cfg)
    started = time.monotonic()
    with lock.held():
        timeline = table.timeline.reload()
        if timeline.is_completed(instant_time):
            raise HudiClusteringError(f"clustering {instant_time} has already completed")
        plan = read_clustering_plan(timeline, instant_time)
        if plan is None:
            raise HudiClusteringError(f"{instant_time} is not a pending clustering of {table.path}")
        if timeline.has_state(instant_time, State.INFLIGHT, REPLACE_COMMIT):
            if is_alive(table.storage, instant_time, policy):
                raise HudiClusteringError(f"clustering {instant_time} is being run by another process (heartbeat "
                                          f"{heartbeat_age(table.storage, instant_time):.0f} s ago)")
            remove_marked_files(table.storage, instant_time)  # what an earlier attempt wrote before it died
            log.warning("re-attempting clustering %s", instant_time)
        else:
            timeline.transition_inflight(instant_time, requested_plan_file(timeline, instant_time).action, b"")
        heartbeat = Heartbeat(table.storage, instant_time, policy).start()
    try:
        return _execute(spark, table, cfg, lock, instant_time, plan, started)
    finally:
        heartbeat.stop()


def _execute(spark: SparkSession, table: HudiTable, cfg: HudiConfig, lock: TableLock, instant_time: str,
             plan: Any, started: float) -> dict[str, Any]:
    schema_json, file_schema = table.schemas()  # the latest table schema: written to the new files and recorded
    if file_schema is None:
        raise HudiClusteringError(f"{table.path} has no committed schema to cluster with")
    avro = table_avro_schema(file_schema, table.name, with_meta_fields=True)
    ctx = WriteContext(
        storage=table.storage, instant_time=instant_time,
        settings=parquet_settings(cfg, avro, populate_meta_fields=table.config.populate_meta_fields),
        storage_schema_ipc=file_schema.serialize().to_pybytes(), merge_spec=MergeSpec(None),
        max_file_size=cfg.get(C.CLUSTERING_TARGET_FILE_MAX_BYTES),
        compression_ratio=cfg.get(C.PARQUET_COMPRESSION_RATIO),
        preserve_commit_metadata=plan.preserve_commit_metadata)
    spec = MergeSpec.of(table.config.precombine_field, table.config.payload_class or cfg.get(C.PAYLOAD_CLASS))
    visibility = table.file_system_view().visibility(before=instant_time)
    groups = list(plan.groups)
    sort_columns, strategy = plan.sort_columns, cfg.get(C.LAYOUT_OPTIMIZE_STRATEGY)

    def work(storage: Storage, group: ClusteringGroup, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        merged = [read_slice(storage, piece, schema, spec, visibility)[0] for piece in group.slices]
        rows = pa.concat_tables(merged) if merged else schema.empty_table()
        if rows.num_rows:
            # the writer files rows by this column, which tables without meta fields leave null
            rows = rows.set_column(rows.schema.get_field_index(PARTITION_PATH), PARTITION_PATH,
                                   pa.repeat(pa.scalar(group.partition_path, pa.string()), rows.num_rows))
            rows = rows.take(ordering(rows, sort_columns, strategy))
            expected = {(current_task().partition_id, group.partition_path): rows.num_rows}
            yield from bulk_insert_writer(rows.to_batches(max_chunksize=64 * 1024), ctx, expected)

    in_task = [g for g in groups if g.input_bytes <= IN_TASK_GROUP_BYTES]
    by_spark = [g for g in groups if g.input_bytes > IN_TASK_GROUP_BYTES]
    rows = []
    if in_task:
        rows += per_item(spark, table.storage, in_task, file_schema, work, STATS_DDL).collect()
    if by_spark:
        log.info("clustering %s: %d of %d groups ordered by Spark (over %d MB each)", instant_time, len(by_spark),
                 len(groups), IN_TASK_GROUP_BYTES >> 20)
        ordered = ordered_by_spark(spark, table, by_spark, spec, visibility, sort_columns, strategy,
                                   file_schema=file_schema)
        rows += map_in_arrow(ordered, lambda it: bulk_insert_writer(it, ctx, {}), STATS_DDL).collect()
    stats = [r.asDict() for r in rows]
    replaced: dict[str, list[str]] = {}
    for g in groups:
        for piece in g.slices:
            replaced.setdefault(piece.partition_path, []).append(piece.file_id)
    meta = commit_metadata(stats, operation_type=CLUSTER, schema_json=schema_json or "", replaced=replaced)
    index_files = write_changes(spark, table, instant_time, stats, replaced, spec, file_schema)
    point = CommitPoint.of(table, cfg, lock=lock)

    def gone(timeline: Timeline, _reason: str) -> HudiClusteringError:
        _remove_late_files(table, timeline, instant_time)
        return HudiClusteringError(f"clustering {instant_time} was completed or undone by another process while "
                                   "it ran; the files this run wrote were removed")

    def no_conflicts(timeline: Timeline) -> None:
        conflicts = clustering_conflicts(timeline, instant_time, plan)
        if conflicts:
            pending = requested_plan_file(timeline, instant_time).with_state(State.INFLIGHT)
            rollback_instant(table.storage, timeline, pending,
                             complete=point.complete, utc=table.config.utc_timeline)
            shown = "; ".join(f"{w} wrote {describe_groups(groups)}" for w, groups in sorted(conflicts.items())[:3])
            raise HudiWriteConflictError(
                f"clustering {instant_time} of {table.path} conflicts with writes that changed its file groups after "
                f"it was planned ({shown}); it was rolled back and the table is as those writes left it. Schedule "
                "the clustering again (`pyhudi clustering run` plans anew)")

    point.finish(instant_time, REPLACE_COMMIT, meta, expect=Expect(REPLACE_COMMIT, (State.INFLIGHT,), gone),
                 check=no_conflicts, files=[r["path"] for r in stats if r.get("path")],
                 written={RECORD_INDEX_PARTITION: index_files} if index_files else None)
    seconds = time.monotonic() - started
    figures = {"instant": instant_time, "groups": len(groups),
               "input_file_groups": sum(len(v) for v in replaced.values()), "output_files": len(stats),
               "records": sum(r["num_writes"] for r in stats), "seconds": round(seconds, 3)}
    log.info("clustering %s: %s", instant_time, figures)
    return figures


def ordered_by_spark(spark: SparkSession, table: HudiTable, groups: list[ClusteringGroup], spec: MergeSpec,
                     visibility: Visibility, sort_columns: tuple[str, ...], strategy: str, *,
                     file_schema: pa.Schema | None = None) -> DataFrame:
    """The records of ``groups``, each group range-partitioned by Spark into its planned number of
    output files and sorted within them, for large groups: Spark's shuffle and sort spill to disk
    where one task's memory would not hold the group.

    The order is :func:`pyhudi.actions.ordering.ordering`'s: linear by the sort columns (nulls
    first), or along the curve of their dense ranks within the group (ranked by Spark windows),
    then by record key. Every file is read as ``file_schema`` (default: the latest table schema).
    """
    schema = spark_schema(spark, table, arrow=file_schema)
    if schema is None:
        raise HudiClusteringError(f"{table.path} has no base file to read the schema of")
    curve = on_curve(sort_columns, strategy)
    leading = [F.col(CURVE).asc()] if curve else [F.col(c).asc_nulls_first() for c in sort_columns]
    order = [*leading, F.col(RECORD_KEY).asc()]
    sizes: dict[str, dict[str, int]] = {}  # partition -> file name -> size, listed once per partition
    frames = []
    for group in groups:
        if group.partition_path not in sizes:
            sizes[group.partition_path] = {i.name: i.size for i in table.storage.list_files(group.partition_path)}
        slices = _planned_slices(group, sizes[group.partition_path])
        # as read_slice does: a soft-deleted row in a base file (bulk inserts by other writers) is not copied
        df = drop_soft_deleted(slices_frame(spark, table, slices, schema, spec, visibility))
        df = df.withColumn(PARTITION_PATH, F.lit(group.partition_path))  # null in tables without meta fields
        if curve:
            df = _with_curve(df, sort_columns, strategy)
        frames.append(df.repartitionByRange(group.num_output_file_groups, *order))
    out = functools.reduce(DataFrame.union, frames).sortWithinPartitions(*order)
    return out.drop(CURVE) if curve else out


#: the column :func:`_with_curve` adds
CURVE = "_pyhudi_curve"


def _with_curve(df: DataFrame, columns: tuple[str, ...], strategy: str) -> DataFrame:
    """``df`` with each row's position on the curve through the dense ranks of ``columns`` (one
    group: one partition path, so the windows rank within it)."""
    bits = curve_bits(len(columns))
    ranks = [f"_pyhudi_rank{i}" for i in range(len(columns))]
    tops = [f"_pyhudi_top{i}" for i in range(len(columns))]
    whole = Window.partitionBy(PARTITION_PATH)
    for c, rank, top in zip(columns, ranks, tops, strict=True):
        df = df.withColumn(rank, F.dense_rank().over(whole.orderBy(F.col(c).asc_nulls_first())) - 1)
        df = df.withColumn(top, F.max(rank).over(whole))
    out_schema = T.StructType([*df.schema.fields, T.StructField(CURVE, T.LongType())])

    def add(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            coords = np.stack([scaled_ranks(batch.column(r).to_numpy(zero_copy_only=False),
                                            batch.column(t).to_numpy(zero_copy_only=False), bits)
                               for r, t in zip(ranks, tops, strict=True)])
            curve = pa.array(curve_index(coords, bits, strategy).astype(np.int64))
            yield pa.RecordBatch.from_arrays([*batch.columns, curve], names=[*batch.schema.names, CURVE])

    return map_in_arrow(df, add, out_schema).drop(*ranks, *tops)


def _planned_slices(group: ClusteringGroup, sizes: Mapping[str, int]) -> list[FileSlice]:
    """The plan's file slices of ``group`` with their files' sizes (``sizes``: file name -> size in
    the group's partition; the readers need them)."""
    out = []
    for piece in group.slices:
        base = None
        if piece.base_file is not None:
            name = posixpath.basename(piece.base_file)
            parsed = parse_base_file(name)
            if parsed is None or name not in sizes:
                raise HudiClusteringError(f"base file {piece.base_file} of the clustering plan is gone; roll the "
                                          "plan back (`pyhudi clustering` schedules a new one)")
            base = BaseFile(group.partition_path, piece.file_id, parsed.instant_time, parsed.write_token, name,
                            sizes[name])
        logs = []
        for rel in piece.log_files:
            name = posixpath.basename(rel)
            lg = parse_log_file(name)
            if lg is None or name not in sizes:
                raise HudiClusteringError(f"log file {rel} of the clustering plan is gone; roll the plan back")
            logs.append(LogFile(group.partition_path, piece.file_id, lg.base_instant, lg.version, lg.write_token,
                                name, sizes[name]))
        out.append(FileSlice(group.partition_path, piece.file_id, base.instant_time if base else "", base,
                             tuple(logs)))
    return out


def _remove_late_files(table: HudiTable, timeline: Timeline, instant_time: str) -> None:
    """Files this run wrote after another process rolled the clustering back (or completed it in a
    run of its own): their markers name them. Left behind, they would look committed once archival
    passes the instant's time."""
    done = [i for i in timeline.completed_writes() if i.timestamp == instant_time]
    keep = frozenset(s.path for i in done for s in timeline.commit_metadata(i).write_stats() if s.path)
    remove_marked_files(table.storage, instant_time, keep=keep)


def cluster(spark: SparkSession, path: str | Storage, options: Mapping[str, Any] | None = None, *,
            instant: str | None = None) -> list[dict[str, Any]]:
    """Run clustering ``instant``, or every pending plan (scheduling one first if none is pending).

    Returns the figures of each clustering completed; empty when nothing was worth clustering.
    """
    table = HudiTable(table_storage(spark, path, options))
    cfg = HudiConfig.of(options)
    if instant is not None:
        return [run_clustering(spark, table, instant, cfg.raw)]
    policy = HeartbeatPolicy.of(cfg)
    pending = [i.timestamp for i, _ in pending_clusterings(table.timeline)
               if not (i.state == State.INFLIGHT and is_alive(table.storage, i.timestamp, policy))]
    if not pending:
        scheduled = schedule_clustering(table, cfg)
        pending = [scheduled] if scheduled else []
    return [run_clustering(spark, table, inst, cfg.raw) for inst in pending]


def inline_clustering(spark: SparkSession, table: HudiTable, cfg: HudiConfig) -> list[str]:
    """After a write: schedule (and with ``hoodie.clustering.inline`` run) a clustering once due."""
    inline, schedule_only = cfg.get(C.CLUSTERING_INLINE), cfg.get(C.CLUSTERING_SCHEDULE_INLINE)
    if not (inline or schedule_only) or not clustering_due(table.timeline.reload(), cfg):
        return []
    instant = schedule_clustering(table, cfg)
    if instant is None:
        return []
    if inline:
        run_clustering(spark, table, instant, cfg.raw)
    return [instant]
