"""Snapshot (and read-optimized) queries of copy-on-write tables through Spark's parquet reader.

The file-system view picks the latest committed base file of every file group; Spark reads exactly
those files, natively, with an explicit schema (the newest file's, so columns added by schema
evolution read as null from older files). A filter on partition columns prunes partitions before
any file is listed in them.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.utils import AnalysisException

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiConfigError
from pyhudi.io.avro_schema import META_FIELDS
from pyhudi.keygen.spec import DEFAULT_PARTITION
from pyhudi.read.incremental import plan_incremental
from pyhudi.read.merge import MergeSpec
from pyhudi.read.retention import Retention
from pyhudi.spark.merged import read_merged
from pyhudi.table.fs_view import FileSlice, FileSystemView
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import WRITE_ACTIONS

log = logging.getLogger("pyhudi")


def _partition_values(path: str, fields: tuple[str, ...], hive: bool, encoded: bool) -> dict[str, str | None] | None:
    parts = path.split("/") if path else []
    if len(parts) != len(fields):
        return None
    out: dict[str, str | None] = {}
    for name, part in zip(fields, parts):
        if hive:
            if "=" not in part:
                return None
            part = part.split("=", 1)[1]
        if encoded:
            part = urllib.parse.unquote(part)
        out[name] = None if part in (DEFAULT_PARTITION, "default") else part
    return out


def prune_partitions(spark: SparkSession, table: HudiTable, partitions: list[str], schema: T.StructType,
                     condition: Column | str) -> list[str] | None:
    """Partitions whose values satisfy ``condition``; None when it cannot be decided from paths."""
    cfg = table.config
    fields = cfg.partition_fields
    if not fields or (cfg.keygen_class or "").endswith("TimestampBasedKeyGenerator"):
        return None
    rows = []
    for p in partitions:
        values = _partition_values(p, fields, cfg.hive_style, cfg.url_encode)
        if values is None:
            return None
        rows.append((p, *[values[f] for f in fields]))
    if not rows:
        return []
    str_schema = T.StructType([T.StructField("_pyhudi_partition", T.StringType())] +
                              [T.StructField(f, T.StringType()) for f in fields])
    df = spark.createDataFrame(rows, str_schema)
    casts = [F.col("_pyhudi_partition")]
    for f in fields:
        target = schema[f].dataType if f in schema.fieldNames() else T.StringType()
        casts.append(F.col(f).cast(target).alias(f))
    try:
        kept = df.select(*casts).where(condition).select("_pyhudi_partition").collect()
    except AnalysisException:
        return None  # the condition reads other columns too: no pruning, Spark filters rows
    return [r[0] for r in kept]


@dataclass(frozen=True)
class QueryFiles:
    """What a query reads: file slices of one file-system view, and a row filter on commit times."""

    view: FileSystemView
    slices: list[FileSlice]
    merged: bool  # merge log files (snapshot, incremental) or read base files only (read_optimized)
    commit_filter: tuple[str, str] | None = None  # (exclusive begin, inclusive end) of an incremental pull
    note: str | None = None

    @property
    def files(self) -> list[tuple[str, int]]:
        """(relative path, size) of every file the query reads."""
        out = []
        for s in self.slices:
            if s.base_file is not None:
                out.append((s.base_file.path, s.base_file.size))
            if self.merged:
                out.extend((lf.path, lf.size) for lf in s.log_files)
        return out


def plan_query(table: HudiTable, cfg: HudiConfig) -> QueryFiles:
    """The files a snapshot, read-optimized, time-travel or incremental query of ``table`` reads.

    Time travel and incremental pulls are checked against what the cleaner removed first: a query
    that would miss files fails with :class:`HudiRetentionError` instead of returning partial data.
    """
    query = cfg.get(C.QUERY_TYPE)
    if query == "incremental":
        plan = plan_incremental(table, cfg.get(C.BEGIN_INSTANT), cfg.get(C.END_INSTANT),
                                fallback=cfg.get(C.INCR_FALLBACK_FULL_SCAN), holes=cfg.get(C.TIMELINE_HOLES_POLICY))
        if plan.full_scan_reason is not None:
            log.warning("incremental pull falls back to a full table scan: %s", plan.full_scan_reason)
            view = table.file_system_view()
            return QueryFiles(view, view.latest_slices(), True, (plan.begin, plan.end), plan.full_scan_reason)
        if not plan.instants:
            view = table.file_system_view(as_of=plan.end, partitions=[])
            return QueryFiles(view, [], True, (plan.begin, plan.end))
        view = table.file_system_view(as_of=plan.end, partitions=plan.partitions)
        slices = [s for s in view.latest_slices() if (s.partition_path, s.file_id) in plan.file_groups]
        return QueryFiles(view, slices, True, (plan.begin, plan.end))
    as_of = cfg.get(C.AS_OF_INSTANT)
    if as_of is not None:
        pending = table.timeline.pending(WRITE_ACTIONS)
        if pending and as_of >= pending[0].timestamp:
            raise HudiConfigError(
                f"time travel to {as_of} must be earlier than the first incomplete commit {pending[0].timestamp} "
                "(a write in flight, or a failed one the next write rolls back)")
        Retention(table.storage, table.timeline).check(as_of)
    view = table.file_system_view(as_of=as_of)
    return QueryFiles(view, view.latest_slices(), query == "snapshot")


def read(spark: SparkSession, path: str, options: Mapping[str, Any] | None = None, *,
         filters: Column | str | None = None) -> DataFrame:
    """A DataFrame of a Hudi table, meta columns first: snapshot, read_optimized, time travel or incremental.

    ``filters`` (a Column or SQL string) is applied to the result; when it only involves partition
    columns, partitions that cannot match are skipped without listing them.
    """
    cfg = HudiConfig.of(options)
    table = HudiTable(path)
    files = plan_query(table, cfg)
    schema = _schema(spark, table)
    if schema is None:
        return spark.createDataFrame([], T.StructType([T.StructField(n, T.StringType()) for n in META_FIELDS]))
    slices = files.slices
    if filters is not None:
        kept = prune_partitions(spark, table, files.view.partitions, schema, filters)
        if kept is not None:
            keep = set(kept)
            slices = [s for s in slices if s.partition_path in keep]
    merged = files.merged
    bases = [s.base_file for s in slices if s.base_file is not None and not (merged and s.log_files)]
    if not bases:
        df = spark.createDataFrame([], schema)
    else:
        df = _read_files(spark, table, bases, schema)
    logged = [s for s in slices if merged and s.log_files]
    if logged:  # merge-on-read slices with log files: merged in executors
        file_schema = table.arrow_schema()
        assert file_schema is not None
        spec = MergeSpec.of(table.config.precombine_field, table.config.payload_class or cfg.get(C.PAYLOAD_CLASS))
        df = df.unionByName(read_merged(spark, table.storage.base_uri, [s.to_read() for s in logged],
                                        file_schema, schema, spec, files.view.visibility()))
    if files.commit_filter is not None:
        begin, end = files.commit_filter
        commit_time = F.col("_hoodie_commit_time")
        df = df.where((commit_time > F.lit(begin)) & (commit_time <= F.lit(end)))
    if filters is not None:
        df = df.where(filters)
    return df


def _read_files(spark: SparkSession, table: HudiTable, bases: list, schema: T.StructType) -> DataFrame:
    """Read base files natively; files written under an older schema are read apart and cast.

    Spark's vectorised reader cannot widen types (an int column read as long fails), so when the
    table schema changed across commits, each group of files sharing a commit schema is read with
    its own schema and its columns are cast (or null-filled) to the latest schema.
    """
    schema_of: dict[str, str | None] = {}
    groups: dict[str | None, list[str]] = {}
    for b in bases:
        if b.instant_time not in schema_of:
            schema_of[b.instant_time] = _commit_schema(table, b.instant_time)
        groups.setdefault(schema_of[b.instant_time], []).append(table.storage.uri(b.path))
    latest = _commit_schema(table, None)
    if len(groups) == 1 or set(groups) <= {latest, None}:
        return spark.read.schema(schema).parquet(*[u for us in groups.values() for u in us])
    parts = []
    for key, uris in groups.items():
        if key == latest:
            parts.append(spark.read.schema(schema).parquet(*uris))
            continue
        own = spark.read.parquet(uris[0]).schema
        df = spark.read.schema(own).parquet(*uris)
        cols = [F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) if f.name in own.fieldNames()
                else F.lit(None).cast(f.dataType).alias(f.name) for f in schema]
        parts.append(df.select(*cols))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def _commit_schema(table: HudiTable, instant_time: str | None) -> str | None:
    writes = table.timeline.completed_writes()
    chosen = [i for i in writes if instant_time is None or i.timestamp == instant_time]
    if not chosen:
        return None
    return table.timeline.commit_metadata(chosen[-1]).schema


def _schema(spark: SparkSession, table: HudiTable) -> T.StructType | None:
    """Spark's reading of the newest base file's schema (the latest table schema)."""
    newest = table.newest_base_file()
    if newest is None:
        return None
    return spark.read.parquet(table.storage.uri(newest)).schema
