"""Index lookups on Spark: which stored file group holds each incoming key.

Every lookup returns the *existing* side of the tagging join: rows (key, partition, file id) of
records already in the table that the incoming batch may touch. SIMPLE reads all record keys of
the affected partitions' latest base files; BLOOM narrows that down to the keys that really match,
after range pruning and bloom filter checks run per file in executors. The statistics that explain
a lookup (files considered, left after pruning and after the bloom check, keys checked, false
positives, time per phase) are gathered in :class:`IndexStats`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiUnsupportedError
from pyhudi.index import bloom_index as B
from pyhudi.index.bucket import bucket_ids, check_num_buckets, resolve_hash_fields
from pyhudi.io.avro_schema import FILE_NAME, PARTITION_PATH, RECORD_KEY
from pyhudi.keygen.spec import KeyGenSpec
from pyhudi.metadata import bloom_filters
from pyhudi.metadata.files import MdtSlice
from pyhudi.metadata.table import MetadataTable, usable_partitions
from pyhudi.read.merge import MergeSpec, key_columns
from pyhudi.spark.base_files import base_files_frame
from pyhudi.spark.merged import merged_keys
from pyhudi.spark.worker import map_in_arrow
from pyhudi.storage import Storage
from pyhudi.table.fs_view import BaseFile, FileSlice, FileSystemView
from pyhudi.table.table import HudiTable
from pyhudi.write.columns import FILE_ID
from pyhudi.write.partition_writer import BucketSpec

EXISTING_PP = "_pyhudi_existing_partition"
EXISTING_RK = "_pyhudi_existing_key"


@dataclass
class IndexStats:
    """What an index lookup did; stored in the commit's extraMetadata and in ``res.stats``."""

    index_type: str
    partitions: int = 0
    files_in_partitions: int = 0
    files_after_range_pruning: int | None = None
    files_after_bloom: int | None = None
    keys_checked: int | None = None
    bloom_positives: int | None = None
    false_positives: int | None = None
    keys_matched: int | None = None
    phases: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Lookup:
    """The existing side of the tagging join, and how to finish the statistics once it has run."""

    existing: DataFrame | None
    stats: IndexStats
    check_output: DataFrame | None = None  # BLOOM: per-file stats rows, collected after the join ran

    def finish(self) -> IndexStats:
        if self.check_output is None:
            return self.stats
        started = time.monotonic()
        rows = self.check_output.where(F.col("is_stat")).select(
            "candidates", "bloom_positives", "matches", "check_ms").collect()
        s = self.stats
        s.files_after_range_pruning = len(rows)
        s.files_after_bloom = sum(1 for r in rows if r["bloom_positives"] > 0)
        s.keys_checked = sum(r["candidates"] for r in rows)
        s.bloom_positives = sum(r["bloom_positives"] for r in rows)
        s.keys_matched = sum(r["matches"] for r in rows)
        s.false_positives = s.bloom_positives - s.keys_matched
        s.phases["bloom_check_task_s"] = round(sum(r["check_ms"] for r in rows) / 1000, 3)
        s.phases["stats_s"] = round(time.monotonic() - started, 3)
        return s


HASH_BUCKET = "_pyhudi_hash_bucket"


def bucket_spec(cfg: HudiConfig, spec: KeyGenSpec) -> BucketSpec:
    """The BUCKET index's settings, validated as Hudi does."""
    if cfg.get(C.BUCKET_ENGINE) != "SIMPLE":
        raise HudiUnsupportedError("hoodie.index.bucket.engine=CONSISTENT_HASHING is not supported; use SIMPLE")
    key_fields = tuple(spec.record_key_fields)
    return BucketSpec(check_num_buckets(cfg.get(C.BUCKET_NUM_BUCKETS)),
                      tuple(resolve_hash_fields(cfg.get(C.BUCKET_HASH_FIELD) or None, key_fields)), key_fields)


def with_hash_bucket(keyed: DataFrame, cfg: HudiConfig, spec: KeyGenSpec) -> DataFrame:
    """``keyed`` plus the BUCKET index's bucket number of every record key, computed in executors."""
    buckets = bucket_spec(cfg, spec)

    def add(batches):  # type: ignore[no-untyped-def]
        for batch in batches:
            ids = bucket_ids(batch.column(RECORD_KEY), hash_fields=buckets.hash_fields,
                             record_key_fields=buckets.record_key_fields, num_buckets=buckets.num_buckets)
            yield pa.RecordBatch.from_arrays([*batch.columns, pa.array(ids, pa.int32())],
                                             names=[*batch.schema.names, HASH_BUCKET])

    schema = StructType([*keyed.schema.fields, StructField(HASH_BUCKET, IntegerType(), nullable=False)])
    return map_in_arrow(keyed, add, schema)


def key_read_schema(table: HudiTable, spec: MergeSpec | None) -> pa.Schema | None:
    """Columns a merged read of a slice needs to know which keys are alive (see
    :func:`pyhudi.read.merge.key_columns`); None for a table without a schema yet."""
    schema = table.arrow_schema()
    return None if schema is None else key_columns(schema, spec)


def _split(table: HudiTable, partitions: list[str] | None) -> tuple[FileSystemView, list[BaseFile], list[FileSlice]]:
    """Latest base files of slices without log files, and the slices with log files."""
    view = table.file_system_view(partitions=partitions)
    slices = view.latest_slices()
    plain = [s.base_file for s in slices if s.base_file is not None and not s.log_files]
    return view, plain, [s for s in slices if s.log_files]


def _with_merged_keys(spark: SparkSession, table: HudiTable, view: FileSystemView, existing: DataFrame | None,
                      logged: list[FileSlice], spec: MergeSpec | None) -> DataFrame | None:
    """Add the keys alive in merge-on-read slices with log files (a log may delete a base key)."""
    if not logged:
        return existing
    schema = key_read_schema(table, spec)
    if schema is None:
        return existing
    merged = merged_keys(spark, table.storage, [s.to_read() for s in logged], schema,
                         spec or MergeSpec(None), view.visibility(), names=(EXISTING_RK, EXISTING_PP, FILE_ID))
    return merged if existing is None else existing.unionByName(merged)


#: What a SIMPLE lookup reads of each base file: meta columns, strings in every file
_KEY_COLUMNS = StructType([StructField(c, StringType()) for c in (RECORD_KEY, PARTITION_PATH, FILE_NAME)])


def simple_lookup(spark: SparkSession, table: HudiTable, partitions: list[str] | None,
                  index_type: str, *, spec: MergeSpec | None = None) -> Lookup:
    """SIMPLE / GLOBAL_SIMPLE: the record keys of all latest file slices in ``partitions``."""
    view, files, logged = _split(table, partitions)
    stats = IndexStats(index_type, partitions=len(view.partitions), files_in_partitions=len(files) + len(logged))
    existing = None
    if files:
        existing = base_files_frame(spark, table, files, _KEY_COLUMNS, evolved=False).select(
            F.col(RECORD_KEY).alias(EXISTING_RK), F.col(PARTITION_PATH).alias(EXISTING_PP),
            F.regexp_extract(F.col(FILE_NAME), r"^([^_]+)_", 1).alias(FILE_ID))
    return Lookup(_with_merged_keys(spark, table, view, existing, logged, spec), stats)


def key_ranges(spark: SparkSession, storage: Storage, files: list[BaseFile]) -> list[B.FileRange]:
    """Footer key range of every file: remembered ones from memory, the others read in executors."""
    base_uri = storage.base_uri
    known = {b.path: B.known_range(base_uri, b.path) for b in files}
    missing = [b for b in files if known[b.path] is None]
    if missing:  # one footer per file, read where the data is; only the ranges come back
        # a local relation is already split over the default parallelism: no shuffle needed
        listing = spark.createDataFrame([(b.partition_path, b.file_id, b.path) for b in missing],
                                        "partition_path string, file_id string, path string")
        read = map_in_arrow(listing, lambda it: B.key_ranges(it, storage), B.RANGE_DDL).collect()
        B.remember_ranges(base_uri, [(r["path"], r["min_key"], r["max_key"]) for r in read])
        known.update({r["path"]: (r["min_key"], r["max_key"]) for r in read})
    out = []
    for b in files:
        low, high = known[b.path] or (None, None)
        out.append(B.FileRange(b.partition_path, b.file_id, b.path, low, high))
    return out


def ranges_from_metadata(table: HudiTable, files: list[BaseFile]) -> int:
    """Remember the key ranges the metadata table's column statistics give (``_hoodie_record_key``
    min and max), so that no footer is read for them; returns how many files had one."""
    schema = table.arrow_schema()
    recorded = table.metadata_column_ranges([RECORD_KEY], schema) if schema is not None else None
    if not recorded:
        return 0
    found = [(b.path, r.min, r.max) for b in files
             if (r := recorded.get(b.name, {}).get(RECORD_KEY)) is not None]
    B.remember_ranges(table.storage.base_uri, found)
    return len(found)


def bloom_filter_slices(table: HudiTable) -> tuple[MdtSlice, ...]:
    """The file groups of the metadata table's bloom_filters partition (empty when the table does
    not keep it usable): the bloom checks then take each file's filter from it, not its footer."""
    if bloom_filters.PARTITION not in usable_partitions(table.config.props) or table.metadata_listing() is None:
        return ()
    return tuple(MetadataTable(table.storage).slices(bloom_filters.PARTITION, table.timeline))


def bloom_lookup(spark: SparkSession, table: HudiTable, keyed: DataFrame, partitions: list[str] | None,
                 cfg: HudiConfig, *, global_index: bool, spec: MergeSpec | None = None) -> Lookup:
    """BLOOM / GLOBAL_BLOOM: range pruning, then per-file bloom and exact key checks in executors.

    Merge-on-read slices with log files are looked up by their merged keys instead (their base
    file's bloom filter still holds keys a log block deleted).
    """
    index_type = "GLOBAL_BLOOM" if global_index else "BLOOM"
    started = time.monotonic()
    view, files, logged = _split(table, partitions)
    stats = IndexStats(index_type, partitions=len(view.partitions), files_in_partitions=len(files) + len(logged))
    if not files:
        return Lookup(_with_merged_keys(spark, table, view, None, logged, spec), stats)
    storage = table.storage
    parallelism = spark.sparkContext.defaultParallelism
    prune = cfg.get(C.BLOOM_PRUNE_BY_RANGES)
    if prune:
        if cfg.get(C.BLOOM_INDEX_USE_METADATA):
            stats.phases["key_ranges_from_metadata_table"] = ranges_from_metadata(table, files)
        ranges = key_ranges(spark, table.storage, files)
    else:
        ranges = [B.FileRange(b.partition_path, b.file_id, b.path) for b in files]
    stats.phases["key_ranges_s"] = round(time.monotonic() - started, 3)

    def candidates(batches):  # type: ignore[no-untyped-def]
        for batch in batches:
            if batch.num_rows:
                table_ = pa.Table.from_batches([batch])
                out = B.range_candidates(table_, ranges, prune_by_ranges=prune, global_index=global_index)
                yield from out.to_batches()

    pairs = map_in_arrow(keyed.select(F.col(RECORD_KEY).alias(B.KEY), F.col(PARTITION_PATH).alias(B.PARTITION)),
                         candidates, "key string, partition_path string, file_id string, path string")
    n = cfg.get(C.BLOOM_INDEX_PARALLELISM) or max(1, min(len(ranges), parallelism * 2))
    blooms = bloom_filter_slices(table) if cfg.get(C.BLOOM_INDEX_USE_METADATA) else ()
    if blooms:
        stats.phases["bloom_filters_from_metadata_table"] = len(blooms)
    checked = map_in_arrow(pairs.repartition(n, B.PATH), lambda it: B.check_file_candidates(it, storage, blooms),
                           B.CHECK_DDL)
    checked = checked.persist()
    existing = checked.where(~F.col("is_stat")).select(
        F.col(B.KEY).alias(EXISTING_RK), F.col(B.PARTITION).alias(EXISTING_PP), F.col(B.FILE_ID).alias(FILE_ID))
    return Lookup(_with_merged_keys(spark, table, view, existing, logged, spec), stats, check_output=checked)
