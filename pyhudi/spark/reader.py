"""Snapshot, read-optimized, time-travel and incremental queries on Spark.

The file-system view picks the latest committed base file of every file group; Spark reads exactly
those files (:func:`pyhudi.spark.base_files.base_files_frame`: natively where Spark opens the
store, by pyarrow in executors where it cannot) with an explicit schema: the table schema the
commits record (as of the query's instant), each older file reconciled to it by name. A filter on
partition columns prunes partitions before any file is listed in them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyhudi import config as C
from pyhudi.config import HudiConfig, parse_bool
from pyhudi.config.properties import PARTITION_METAFILE
from pyhudi.errors import HudiConfigError, HudiUnsupportedError
from pyhudi.io.avro_schema import META_FIELDS, RECORD_KEY
from pyhudi.keygen.spec import DEFAULT_PARTITION, SIMPLE, TIMESTAMP, partition_values_in_paths, table_keygen_kind
from pyhudi.read.merge import MergeSpec, Visibility
from pyhudi.read.retention import Retention
from pyhudi.read.skipping import (
    Predicate,
    columns_of,
    may_match,
    prune_partition_paths,
    record_keys,
    skip_files,
)
from pyhudi.spark.base_files import base_files_frame, spark_type, stored_spark_schema
from pyhudi.spark.cdc import is_cdc_query, read_cdc
from pyhudi.spark.filters import to_predicate
from pyhudi.spark.merged import filters_reach_base_files, merge_with_logs, read_merged
from pyhudi.spark.storage_conf import table_storage
from pyhudi.table.fs_view import BaseFile, FileSlice, FileSystemView
from pyhudi.table.incremental import plan_incremental
from pyhudi.table.table import HudiTable

log = logging.getLogger("pyhudi")


@dataclass(frozen=True)
class QueryFiles:
    """What a query reads: file slices of one file-system view, and a row filter on commit times."""

    view: FileSystemView
    slices: list[FileSlice]
    merged: bool  # merge log files (snapshot, incremental) or read base files only (read_optimized)
    commit_filter: tuple[str, str] | None = None  # (exclusive begin, inclusive end) of an incremental pull
    note: str | None = None
    #: timeline layout 2: the instants of the pull (its range is of completion times), which
    #: ``_hoodie_commit_time`` must be one of; None: the commit filter's range applies to it
    commit_times: tuple[str, ...] | None = None

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


def plan_query(table: HudiTable, cfg: HudiConfig, *, partitions: list[str] | None = None) -> QueryFiles:
    """The files a snapshot, read-optimized, time-travel or incremental query of ``table`` reads,
    in ``partitions`` only when given (the others were pruned without being listed).

    Time travel and incremental pulls are checked against what the cleaner removed first: a query
    that would miss files fails with :class:`HudiRetentionError` instead of returning partial data.
    """
    table.config.check_data_table(merges=False)
    query = C.query_type(cfg)
    if query == "incremental":
        plan = plan_incremental(table, cfg.get(C.BEGIN_INSTANT), cfg.get(C.END_INSTANT),
                                fallback=cfg.get(C.INCR_FALLBACK_FULL_SCAN), holes=cfg.get(C.TIMELINE_HOLES_POLICY))
        # layout 2: the range is of completion times; records are those of the range's instants
        times = plan.instants if plan.by_completion and not plan.snapshot else None
        as_of, completed_by = (None, plan.end) if plan.by_completion else (plan.end, None)
        if plan.full_scan_reason is not None:
            log.warning("incremental pull falls back to a full table scan: %s", plan.full_scan_reason)
            view = table.file_system_view(partitions=partitions)
            return QueryFiles(view, view.latest_slices(), True, (plan.begin, plan.end), plan.full_scan_reason,
                              commit_times=times)
        if plan.snapshot:
            view = table.file_system_view(as_of=as_of, completed_by=completed_by, partitions=partitions)
            return QueryFiles(view, view.latest_slices(), True, (plan.begin, plan.end), commit_times=times)
        if not plan.instants:
            view = table.file_system_view(as_of=as_of, completed_by=completed_by, partitions=[])
            return QueryFiles(view, [], True, (plan.begin, plan.end), commit_times=times)
        wanted = plan.partitions if partitions is None else sorted(set(plan.partitions) & set(partitions))
        view = table.file_system_view(as_of=as_of, completed_by=completed_by, partitions=wanted)
        slices = [s for s in view.latest_slices() if (s.partition_path, s.file_id) in plan.file_groups]
        return QueryFiles(view, slices, True, (plan.begin, plan.end), commit_times=times)
    as_of = cfg.get(C.AS_OF_INSTANT)
    if as_of is not None:
        pending = table.timeline.pending_writes()
        if pending and as_of >= pending[0].timestamp:
            raise HudiConfigError(
                f"time travel to {as_of} must be earlier than the first incomplete commit {pending[0].timestamp} "
                "(a write in flight, or a failed one the next write rolls back)")
        Retention(table.storage, table.timeline).check(as_of)
    view = table.file_system_view(as_of=as_of, partitions=partitions)
    return QueryFiles(view, view.latest_slices(), query == "snapshot")


def read(spark: SparkSession, path: str, options: Mapping[str, Any] | None = None, *,
         filters: Column | str | None = None, table: HudiTable | None = None) -> DataFrame:
    """A DataFrame of a Hudi table, meta columns first: snapshot, read_optimized, time travel or incremental.

    ``filters`` (a Column or SQL string) is applied to the result. Before Spark plans anything it
    also prunes: partitions whose path values rule the filter out are never listed, and base files
    whose column statistics (metadata table, or parquet footer: min, max, nulls) rule it out are
    not read, so a lookup of one record key reads the one file whose key range holds it. With
    ``hoodie.metadata.record.index.enable=true`` a filter naming record keys reads only the file
    groups the record index locates them in (:func:`plan_filtered`). ``table``: the table at
    ``path`` as already loaded (its timeline is the one the query plans on).
    """
    cfg = HudiConfig.of(options)
    if is_cdc_query(cfg):  # Hudi's change data: op, ts_ms, before, after
        return read_cdc(spark, path, options, filters=filters)
    if table is None:
        table = HudiTable(table_storage(spark, path, options))
    table.config.check_data_table(merges=False)
    as_of = schema_instant(cfg)
    arrow = table.arrow_schema(as_of=as_of)
    schema = spark_schema(spark, table, arrow=arrow)
    predicate: Predicate | None = None
    indexed = False  # the record index located the filter's keys: no statistics needed
    if filters is not None and schema is not None:
        predicate = to_predicate(spark, schema, filters)
        files, indexed = plan_filtered(table, cfg, predicate, schema)
    else:
        files = plan_query(table, cfg)
    if schema is None:
        return spark.createDataFrame([], T.StructType([T.StructField(n, T.StringType()) for n in META_FIELDS]))
    slices = files.slices
    merged = files.merged
    bases = [s.base_file for s in slices if s.base_file is not None and not (merged and s.log_files)]
    recorded = None  # column statistics from the metadata table
    skipping = predicate if cfg.get(C.DATA_SKIPPING) and not indexed else None
    if skipping is not None and columns_of(skipping):
        recorded = table.metadata_column_ranges(columns_of(skipping), arrow) if arrow else None
    if skipping is not None and bases:
        before = len(bases)
        kept = set(skip_files(table.storage, skipping, [b.path for b in bases], known=recorded))
        bases = [b for b in bases if b.path in kept]
        log.info("data skipping on %s: %d of %d base files kept (statistics from %s)", table.path, len(bases),
                 before, "the metadata table" if recorded is not None else "footers")
    parts = [base_files_frame(spark, table, bases, schema, as_of=as_of)] if bases else []
    logged = [s for s in slices if merged and s.log_files]
    if skipping is not None and recorded is not None and logged:
        before = len(logged)
        logged = [s for s in logged if _slice_may_match(s, skipping, recorded)]
        log.info("data skipping on %s: %d of %d file slices with log files kept (statistics of all their files "
                 "from the metadata table)", table.path, len(logged), before)
    if logged:  # merge-on-read slices with log files
        spec = MergeSpec.of(table.config.merge_ordering_field, table.config.payload_class or cfg.get(C.PAYLOAD_CLASS))
        logged_bases = [s.base_file for s in logged if s.base_file is not None]
        # (without stored keys whole slices are merged in executors: no base file is read apart)
        if skipping is not None and logged_bases and filters_reach_base_files(spec) \
                and table.config.populate_meta_fields:
            kept = set(skip_files(table.storage, skipping, [b.path for b in logged_bases], known=recorded))
            logged_bases = [b for b in logged_bases if b.path in kept]
        merged_df = merged_slices(spark, table, logged, schema, spec, files.view.visibility(), bases=logged_bases,
                                  as_of=as_of, predicate=skipping)
        if merged_df is not None:  # (None: neither the base files nor the log records can match the filter)
            parts.append(merged_df)
    df = _union(spark, parts, schema)
    if files.commit_times is not None:
        df = df.where(F.col("_hoodie_commit_time").isin(list(files.commit_times)))
    elif files.commit_filter is not None:
        begin, end = files.commit_filter
        commit_time = F.col("_hoodie_commit_time")
        df = df.where((commit_time > F.lit(begin)) & (commit_time <= F.lit(end)))
    if filters is not None:
        df = df.where(filters)
    return df


def slices_frame(spark: SparkSession, table: HudiTable, slices: list[FileSlice], schema: T.StructType,
                 spec: MergeSpec, visibility: Visibility) -> DataFrame:
    """The records of ``slices`` merged as of ``visibility``: base files without logs read as they
    are (:func:`base_files_frame`), the others merged with their logs (:func:`merged_slices`)."""
    plain = [s.base_file for s in slices if s.base_file is not None and not s.log_files]
    logged = [s for s in slices if s.log_files]
    parts = [base_files_frame(spark, table, plain, schema)] if plain else []
    merged = merged_slices(spark, table, logged, schema, spec, visibility) if logged else None
    if merged is not None:
        parts.append(merged)
    return _union(spark, parts, schema)


def _union(spark: SparkSession, parts: list[DataFrame], schema: T.StructType) -> DataFrame:
    """``parts`` unioned by name; an empty frame of ``schema`` only when there are none (an empty
    frame unioned to a query would cost it a plan and tasks)."""
    if not parts:
        return spark.createDataFrame([], schema)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def merged_slices(spark: SparkSession, table: HudiTable, logged: list[FileSlice], schema: T.StructType,
                  spec: MergeSpec, visibility: Visibility, *, bases: list[BaseFile] | None = None,
                  as_of: str | None = None, predicate: Predicate | None = None) -> DataFrame | None:
    """Slices with log files, merged. With stored record keys Spark reads the base files
    (:func:`base_files_frame`) and merges them with the log records merged in executors (by a
    filter on replaced positions, or a join: :func:`merge_with_logs`); without them whole slices
    are merged in executors. ``bases``: the base files to read (default all of the slices'; fewer when data
    skipping ruled some out). Every file is read as the table schema as of ``as_of`` (default the
    latest). ``predicate``: the query's filter, by which slices whose base file was ruled out and
    whose log records cannot match are dropped (:func:`merge_with_logs`); None when that leaves
    none."""
    file_schema = table.arrow_schema(as_of=as_of)
    assert file_schema is not None
    pieces = [s.to_read() for s in logged]
    storage = table.storage
    if not table.config.populate_meta_fields:  # no stored record keys to join on
        return read_merged(spark, storage, pieces, file_schema, schema, spec, visibility)
    if bases is None:
        bases = [s.base_file for s in logged if s.base_file is not None]
    sizes = [s.base_file.size if s.base_file is not None else None for s in logged]
    known = [n for n in sizes if n is not None]
    # a base file's size and a row's position name the row, unless two base files share a size
    # (or a listing did not tell a size)
    names = len(set(known)) < len(known) or any(n <= 0 for n in known)
    chosen = bases

    def base() -> DataFrame | None:
        return base_files_frame(spark, table, chosen, schema, file_ids=True, names=names, as_of=as_of) \
            if chosen else None

    log_bytes = sum(lf.size for s in logged for lf in s.log_files)
    snapshot = (storage.uri(), visibility, tuple((s.file_id, s.base_file.path if s.base_file else None,
                                              tuple((lf.path, lf.size) for lf in s.log_files)) for s in logged))
    read_bases = {b.path for b in bases}
    base_ids = frozenset(s.file_id for s in logged if s.base_file is not None and s.base_file.path in read_bases)
    return merge_with_logs(spark, base, storage, pieces, sizes, file_schema, schema, spec, visibility,
                           log_bytes=log_bytes, snapshot=snapshot, predicate=predicate, base_ids=base_ids)


def plan_filtered(table: HudiTable, cfg: HudiConfig, predicate: Predicate,
                  schema: T.StructType) -> tuple[QueryFiles, bool]:
    """The files a filtered query reads, and whether the record index chose them: the file groups
    it locates the filter's keys in (:func:`indexed_groups`), else every file of the partitions
    the filter's partition values leave (data skipping by statistics follows then). A located file
    group the query's timeline does not show (an index read past a concurrent compaction of the
    metadata table) makes the query plan without the index."""
    groups = indexed_groups(table, cfg, predicate)
    if groups is not None:
        files = plan_query(table, cfg, partitions=sorted({p for p, _f in groups}))
        kept = [s for s in files.slices if (s.partition_path, s.file_id) in groups]
        if len(kept) == len(groups):
            return dataclasses.replace(files, slices=kept), True
        log.warning("the record index of %s locates keys in file groups its timeline does not show; "
                    "pruning by statistics instead", table.path)
    return plan_query(table, cfg, partitions=_pruned_partitions(table, predicate, schema)), False


def indexed_groups(table: HudiTable, cfg: HudiConfig, predicate: Predicate) -> set[tuple[str, str]] | None:
    """(partition, file id) of the file groups the record index puts the keys ``predicate``
    restricts the record key to (at most :data:`~pyhudi.read.skipping.MAX_INDEXED_KEYS`, by
    equality or ``IN`` on ``_hoodie_record_key`` or the one record key field); None when it
    restricts none, the table keeps no usable record index, or the read does not ask for it.

    The index holds one place per key, so using it trusts the table to hold each key once: true
    of a table kept by a global index and written by upserts, not of one whose writers kept the
    index beside a non-global index or inserted duplicates (``insert``, ``bulk_insert``). Hence a
    read opts in with ``hoodie.metadata.record.index.enable=true`` (with data skipping on). Only
    the latest snapshot is located this way (not time travel, incremental or read-optimized
    queries, whose files may hold a key where it was before)."""
    if not cfg.get(C.METADATA_RECORD_INDEX_ENABLE) or not cfg.get(C.DATA_SKIPPING) \
            or C.query_type(cfg) != "snapshot" or cfg.get(C.AS_OF_INSTANT) is not None:
        return None
    fields = table.config.record_key_fields
    try:
        kind = table_keygen_kind(table.config.props)
    except HudiUnsupportedError:  # a key generator of its own: its keys' text is unknown
        fields, kind = (), None
    keys = record_keys(predicate, key_column=RECORD_KEY, key_field=fields[0] if len(fields) == 1 else None,
                       bare=kind in (SIMPLE, TIMESTAMP))  # (those store the value alone)
    if keys is None:
        return None
    located = table.record_locations(keys)
    if located is None:
        return None
    groups = set(located.values())
    log.info("record index of %s: %d of %d candidate keys found, in %d file groups", table.path, len(located),
             len(keys), len(groups))
    return groups


def _slice_may_match(piece: FileSlice, pred: Predicate, recorded: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether a merge-on-read slice can hold a row ``pred`` matches: each of its rows is a base
    row or a log record, so it cannot when the statistics of every one of its files rule the filter
    out (a file without statistics may hold anything)."""
    names = ([piece.base_file.name] if piece.base_file is not None else []) + [lf.name for lf in piece.log_files]
    return any(name not in recorded or may_match(pred, recorded[name]) for name in names)


_PARSERS: dict[type, Any] = {
    T.StringType: str, T.IntegerType: int, T.LongType: int, T.ShortType: int, T.ByteType: int,
    T.DateType: dt.date.fromisoformat, T.BooleanType: parse_bool, T.DecimalType: Decimal,
}


def _pruned_partitions(table: HudiTable, predicate: Predicate, schema: T.StructType) -> list[str] | None:
    """Partitions the predicate may hold for, listed level by level; None for every partition (the
    table is not partitioned, the filter reads no partition column, or paths do not carry values)."""
    cfg = table.config
    fields = cfg.partition_fields
    if not fields or not (columns_of(predicate) & set(fields)) or not partition_values_in_paths(cfg.props):
        return None  # (a timestamp, custom or unknown key generator names folders otherwise than the values)
    parsers = {f: _PARSERS.get(type(schema[f].dataType)) if f in schema.fieldNames() else str for f in fields}
    return prune_partition_paths(table.storage, predicate, fields, hive=cfg.hive_style, encoded=cfg.url_encode,
                                 parsers=parsers, default_names=(DEFAULT_PARTITION, "default"),
                                 marker=PARTITION_METAFILE)


def schema_instant(cfg: HudiConfig) -> str | None:
    """The instant whose table schema a query reads: the time-travel instant, else the latest
    (incremental pulls read the latest schema, as Hudi's do)."""
    return cfg.get(C.AS_OF_INSTANT) if C.query_type(cfg) != "incremental" else None


def spark_schema(spark: SparkSession, table: HudiTable, *, arrow: pa.Schema | None = None,
                 as_of: str | None = None) -> T.StructType | None:
    """The table schema (:meth:`HudiTable.arrow_schema`, as of ``as_of``, or ``arrow`` when given)
    as Spark's parquet reader gives its columns; None before the first write.

    Columns of types Spark maps one way (numbers, strings, binary, booleans, dates, decimals, and
    structs, lists and maps of them) are converted here; for the others (timestamps, ...) the newest
    base file says how Spark reads them.
    """
    if arrow is None:
        arrow = table.arrow_schema(as_of=as_of)
    if arrow is None:
        return None
    converted = spark_type(pa.struct(list(arrow)))
    if isinstance(converted, T.StructType):
        return converted
    from pyspark.sql.pandas.types import from_arrow_type

    newest = table.newest_base_file()
    stored = stored_spark_schema(spark, table.storage, newest) if newest is not None else T.StructType()
    fields = []
    for f in arrow:
        t = spark_type(f.type)
        if t is None:
            t = stored[f.name].dataType if f.name in stored.fieldNames() else from_arrow_type(f.type)
        fields.append(T.StructField(f.name, t, True))
    return T.StructType(fields)
