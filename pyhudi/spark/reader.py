"""Snapshot (and read-optimized) queries of copy-on-write tables through Spark's parquet reader.

The file-system view picks the latest committed base file of every file group; Spark reads exactly
those files, natively, with an explicit schema (the newest file's, so columns added by schema
evolution read as null from older files). A filter on partition columns prunes partitions before
any file is listed in them.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.utils import AnalysisException

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiUnsupportedError
from pyhudi.keygen.spec import DEFAULT_PARTITION
from pyhudi.read.merge import MergeSpec
from pyhudi.spark.merged import read_merged
from pyhudi.table.table import HudiTable
from pyhudi.timeline.instant import parse_instant_time

AS_OF_INSTANT = "as.of.instant"


def normalize_instant(value: str) -> str:
    """Accept ``yyyyMMddHHmmssSSS``, ``yyyyMMddHHmmss`` or ISO ``yyyy-MM-dd[ HH:mm:ss[.SSS]]``."""
    text = str(value).strip()
    if text.isdigit() and len(text) in (14, 17):
        parse_instant_time(text)
        return text if len(text) == 17 else text + "999"
    digits = "".join(ch for ch in text if ch.isdigit())
    if len(digits) == 8:
        return digits + "235959999"
    if len(digits) >= 14:
        return (digits + "000")[:17] if len(digits) < 17 else digits[:17]
    raise HudiUnsupportedError(f"cannot read {value!r} as an instant; use yyyyMMddHHmmssSSS or an ISO timestamp")


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


def read(spark: SparkSession, path: str, options: Mapping[str, Any] | None = None, *,
         filters: Column | str | None = None) -> DataFrame:
    """Snapshot DataFrame of a Hudi table, meta columns first.

    ``filters`` (a Column or SQL string) is applied to the result; when it only involves partition
    columns, partitions that cannot match are skipped without listing them.
    """
    cfg = HudiConfig.of(options)
    query = cfg.get(C.QUERY_TYPE)
    if query == "incremental":
        raise HudiUnsupportedError("incremental queries are not supported yet")
    table = HudiTable(path)
    as_of = cfg.raw.get(AS_OF_INSTANT)
    as_of_instant = normalize_instant(as_of) if as_of else None
    view = table.file_system_view(as_of=as_of_instant)
    slices = view.latest_slices()
    merged = query == "snapshot"  # read_optimized: base files only
    schema = _schema(spark, table, [s.base_file.path for s in slices if s.base_file is not None])
    if schema is None:
        return spark.createDataFrame([], T.StructType([
            T.StructField(n, T.StringType()) for n in ("_hoodie_commit_time", "_hoodie_commit_seqno",
                                                      "_hoodie_record_key", "_hoodie_partition_path",
                                                      "_hoodie_file_name")]))
    if filters is not None:
        kept = prune_partitions(spark, table, view.partitions, schema, filters)
        if kept is not None:
            keep = set(kept)
            slices = [s for s in slices if s.partition_path in keep]
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
                                        file_schema, schema, spec, view.visibility()))
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


def _schema(spark: SparkSession, table: HudiTable, files: list[str]) -> T.StructType | None:
    """Spark's reading of the newest base file's schema (latest table schema for COW)."""
    newest = table.newest_base_file()
    if newest is None or not files:
        return None
    return spark.read.parquet(table.storage.uri(newest)).schema
