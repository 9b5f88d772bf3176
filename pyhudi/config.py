"""Every ``hoodie.*`` option pyhudi understands, declared once.

Users of Apache Hudi already know these keys; they must mean here what they mean there, with the
same defaults. Each :class:`ConfigOption` carries its key, default, documentation, the aliases Hudi
accepts (older keys and the short forms of Hudi's Spark SQL such as ``primaryKey``) and a parser
that turns the user's value into a typed one or fails with a :class:`HudiConfigError` naming the key.

:class:`HudiConfig` is the resolved view of one call's options: aliases folded to canonical keys,
unknown ``hoodie.*`` keys reported with the closest known key, values parsed on first access.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pyhudi.errors import HudiConfigError
from pyhudi.timeline.instant import parse_query_instant

T = TypeVar("T")

MB = 1024 * 1024


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    return int(str(value).strip())


def parse_non_negative_int(value: Any) -> int:
    number = parse_int(value)
    if number < 0:
        raise ValueError(f"expected an integer >= 0, got {value!r}")
    return number


def parse_positive_int(value: Any) -> int:
    number = parse_int(value)
    if number <= 0:
        raise ValueError(f"expected an integer > 0, got {value!r}")
    return number


def parse_float(value: Any) -> float:
    return float(str(value).strip())


def parse_str(value: Any) -> str:
    return str(value)


def parse_fields(value: Any) -> tuple[str, ...]:
    """A comma-separated field list, as Hudi accepts for key and partition fields."""
    if isinstance(value, (list, tuple)):
        parts = [str(v) for v in value]
    else:
        parts = str(value).split(",")
    return tuple(p.strip() for p in parts if p.strip())


def choice(*allowed: str, mapping: Mapping[str, str] | None = None) -> Callable[[Any], str]:
    """A parser for an enumerated option: case-insensitive, normalised to upper case."""
    extra = {k.upper(): v for k, v in (mapping or {}).items()}

    def parse(value: Any) -> str:
        text = str(value).strip().upper()
        if text in extra:
            return extra[text]
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {value!r}")
        return text

    return parse


COMPACTION_STRATEGIES = (
    "org.apache.hudi.table.action.compact.strategy.LogFileSizeBasedCompactionStrategy",
    "org.apache.hudi.table.action.compact.strategy.UnBoundedCompactionStrategy",
)


CONFLICT_STRATEGIES = (
    "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy",
    "org.apache.hudi.client.transaction.BucketIndexConcurrentFileWritesConflictResolutionStrategy",
)


def class_choice(what: str, known: tuple[str, ...]) -> Callable[[Any], str]:
    """A parser for a Java class option: the full or the simple class name of one of ``known``."""
    def parse(value: Any) -> str:
        text = str(value).strip()
        for name in known:
            if text in (name, name.rsplit(".", 1)[1]):
                return name
        raise ValueError(f"{what} {text!r} is not supported; use one of "
                         + ", ".join(k.rsplit(".", 1)[1] for k in known))

    return parse


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One option: canonical key, default (``None`` = unset), doc, aliases, parser."""

    key: str
    default: T | None
    doc: str
    parser: Callable[[Any], T]
    aliases: tuple[str, ...] = ()

    def parse(self, value: Any) -> T:
        try:
            return self.parser(value)
        except (TypeError, ValueError) as exc:
            raise HudiConfigError(f"invalid value for {self.key}: {exc}") from None


REGISTRY: dict[str, ConfigOption[Any]] = {}
_ALIASES: dict[str, str] = {}


def option(
    key: str,
    default: Any,
    doc: str,
    parser: Callable[[Any], Any] = parse_str,
    aliases: tuple[str, ...] = (),
) -> ConfigOption[Any]:
    opt: ConfigOption[Any] = ConfigOption(key, default, doc, parser, aliases)
    if key in REGISTRY or key in _ALIASES:
        raise RuntimeError(f"option {key} declared twice")
    REGISTRY[key] = opt
    for alias in aliases:
        _ALIASES[alias] = key
    return opt


# ---------------------------------------------------------------------------------------------
# Table identity and layout (also persisted in hoodie.properties)
# ---------------------------------------------------------------------------------------------
TABLE_NAME = option(
    "hoodie.table.name", None, "Table name; required when a write creates the table.",
    aliases=("hoodie.datasource.write.table.name",))
DATABASE_NAME = option(
    "hoodie.database.name", None, "Database name recorded in hoodie.properties (part of the checksum).")
TABLE_TYPE = option(
    "hoodie.datasource.write.table.type", "COPY_ON_WRITE",
    "COPY_ON_WRITE or MERGE_ON_READ (Spark SQL short form type=cow|mor).",
    choice("COPY_ON_WRITE", "MERGE_ON_READ", mapping={"COW": "COPY_ON_WRITE", "MOR": "MERGE_ON_READ"}),
    aliases=("hoodie.table.type", "type", "tableType"))
OPERATION = option(
    "hoodie.datasource.write.operation", "upsert",
    "Write operation: upsert, insert, bulk_insert, delete; insert_overwrite (the batch replaces every "
    "partition it has records in), insert_overwrite_table (the batch replaces the table), delete_partition "
    "(the partitions of hoodie.datasource.write.partitions.to.delete, else the batch's, are emptied).",
    lambda v: choice("UPSERT", "INSERT", "BULK_INSERT", "DELETE", "INSERT_OVERWRITE",
                     "INSERT_OVERWRITE_TABLE", "DELETE_PARTITION")(v).lower())
PARTITIONS_TO_DELETE = option(
    "hoodie.datasource.write.partitions.to.delete", None,
    "delete_partition: comma-separated partition paths to empty, * matching any characters "
    "(2024-01-*); unset, the partitions of the batch's records.", parse_fields)
RECORDKEY_FIELD = option(
    "hoodie.datasource.write.recordkey.field", None,
    "Record key field(s), comma separated; nested fields as a.b.", parse_fields,
    aliases=("hoodie.table.recordkey.fields", "primaryKey"))
PARTITIONPATH_FIELD = option(
    "hoodie.datasource.write.partitionpath.field", None,
    "Partition path field(s), comma separated; unset or empty for a non-partitioned table.",
    parse_fields, aliases=("hoodie.table.partition.fields",))
PRECOMBINE_FIELD = option(
    "hoodie.datasource.write.precombine.field", "ts",
    "Ordering field: of two records with the same key the one with the larger value wins.",
    aliases=("hoodie.table.precombine.field", "preCombineField", "hoodie.payload.ordering.field"))
KEYGENERATOR_CLASS = option(
    "hoodie.datasource.write.keygenerator.class", None,
    "Key generator class; inferred from the key and partition fields when unset.",
    aliases=("hoodie.table.keygenerator.class",))
KEYGENERATOR_TYPE = option(
    "hoodie.datasource.write.keygenerator.type", None,
    "Key generator type (SIMPLE, COMPLEX, TIMESTAMP, NON_PARTITION, CUSTOM); the class wins when both are set.",
    choice("SIMPLE", "COMPLEX", "TIMESTAMP", "NON_PARTITION", "CUSTOM", "GLOBAL_DELETE"))
HIVE_STYLE_PARTITIONING = option(
    "hoodie.datasource.write.hive_style_partitioning", False,
    "Name partition folders field=value.", parse_bool)
PARTITIONPATH_URLENCODE = option(
    "hoodie.datasource.write.partitionpath.urlencode", False,
    "Escape partition values Hive-style (%XX) before building the path.", parse_bool)
DROP_PARTITION_COLUMNS = option(
    "hoodie.datasource.write.drop.partition.columns", False,
    "Drop partition columns from data files (not supported by pyhudi: readers need them).", parse_bool)
POPULATE_META_FIELDS = option(
    "hoodie.populate.meta.fields", True,
    "Fill _hoodie_commit_time, _hoodie_commit_seqno, _hoodie_record_key and _hoodie_partition_path.",
    parse_bool)
CONSISTENT_LOGICAL_TIMESTAMP = option(
    "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled", False,
    "Render timestamp/date key values as their logical value instead of the raw number.", parse_bool)
PAYLOAD_CLASS = option(
    "hoodie.datasource.write.payload.class",
    "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload",
    "Merge semantics: OverwriteWithLatestAvroPayload (incoming wins) or DefaultHoodieRecordPayload "
    "(the stored record wins when its ordering value is larger).",
    lambda v: _parse_payload(v),
    aliases=("hoodie.compaction.payload.class", "payloadClass"))
TIMELINE_TIMEZONE = option(
    "hoodie.table.timeline.timezone", "LOCAL",
    "Time zone of instant times: LOCAL or UTC.", choice("LOCAL", "UTC"))
METADATA_ENABLE = option(
    "hoodie.metadata.enable", True,
    "Keep the metadata table (.hoodie/metadata) and its files partition in step with every action, "
    "so readers and writers plan from it instead of listing storage. A write with false removes "
    "the metadata table of a table that has one.",
    parse_bool)
METADATA_COLUMN_STATS_ENABLE = option(
    "hoodie.metadata.index.column.stats.enable", False,
    "Keep the metadata table's column_stats partition: per base file and column, min, max, null "
    "count, value count and sizes (from the file's footer). A write without it removes the partition.",
    parse_bool)
METADATA_COLUMN_STATS_COLUMNS = option(
    "hoodie.metadata.index.column.stats.column.list", (),
    "Top-level columns whose statistics the column_stats partition keeps, comma-separated; empty (the "
    "default, as in Hudi 0.14) keeps every column, the meta fields included. Filters on other columns "
    "skip no file.", parse_fields)
METADATA_COLUMN_STATS_FILE_GROUPS = option(
    "hoodie.metadata.index.column.stats.file.group.count", 2,
    "File groups of the column_stats partition (records spread by the hash of their key).", parse_positive_int)
METADATA_BLOOM_FILTER_ENABLE = option(
    "hoodie.metadata.index.bloom.filter.enable", False,
    "Keep the metadata table's bloom_filters partition: the bloom filter of every base file (as in its "
    "footer). A write without it removes the partition.", parse_bool)
METADATA_BLOOM_FILTER_FILE_GROUPS = option(
    "hoodie.metadata.index.bloom.filter.file.group.count", 4,
    "File groups of the bloom_filters partition (records spread by the hash of their key).", parse_positive_int)
METADATA_RECORD_INDEX_ENABLE = option(
    "hoodie.metadata.record.index.enable", False,
    "Keep the metadata table's record_index partition: the partition and file group of every record "
    "key, updated by every write. A key maps to one place, so it suits tables whose keys are unique "
    "across partitions (those of a global index), as in Hudi 0.14. hoodie.index.type=RECORD_INDEX keeps "
    "it whatever this says. A write without either removes the partition.", parse_bool)
METADATA_RECORD_INDEX_MIN_GROUPS = option(
    "hoodie.metadata.record.index.min.filegroup.count", 10,
    "Fewest file groups the record_index partition is created with.", parse_positive_int)
METADATA_RECORD_INDEX_MAX_GROUPS = option(
    "hoodie.metadata.record.index.max.filegroup.count", 10000,
    "Most file groups the record_index partition is created with.", parse_positive_int)
METADATA_RECORD_INDEX_MAX_GROUP_SIZE = option(
    "hoodie.metadata.record.index.max.filegroup.size", 1024 * 1024 * 1024,
    "Bytes a record_index file group is sized for (at 48 bytes per key) when the partition is created.",
    parse_positive_int)
METADATA_RECORD_INDEX_GROWTH = option(
    "hoodie.metadata.record.index.growth.factor", 2.0,
    "Growth of the table the record_index partition is sized for at creation (its file-group count is "
    "fixed then): keys x this factor.", parse_float)
METADATA_COMPACT_MAX_DELTA_COMMITS = option(
    "hoodie.metadata.compact.max.delta.commits", 10,
    "Compact the metadata table after this many delta commits.", parse_positive_int)

# ---------------------------------------------------------------------------------------------
# Timestamp-based key generator
# ---------------------------------------------------------------------------------------------
_TB = "hoodie.keygen.timebased."
_TB_OLD = "hoodie.deltastreamer.keygen.timebased."
TIMESTAMP_TYPE = option(
    _TB + "timestamp.type", None,
    "How the partition field is read: UNIX_TIMESTAMP, DATE_STRING, MIXED, EPOCHMILLISECONDS, "
    "EPOCHMICROSECONDS or SCALAR.",
    choice("UNIX_TIMESTAMP", "DATE_STRING", "MIXED", "EPOCHMILLISECONDS", "EPOCHMICROSECONDS", "SCALAR"),
    aliases=(_TB_OLD + "timestamp.type",))
TIMESTAMP_SCALAR_UNIT = option(
    _TB + "timestamp.scalar.time.unit", "SECONDS", "Unit of SCALAR timestamps (java TimeUnit name).",
    choice("NANOSECONDS", "MICROSECONDS", "MILLISECONDS", "SECONDS", "MINUTES", "HOURS", "DAYS"),
    aliases=(_TB_OLD + "timestamp.scalar.time.unit",))
TIMESTAMP_INPUT_FORMAT = option(
    _TB + "input.dateformat", "", "Input date format (Java pattern) for DATE_STRING/MIXED.",
    aliases=(_TB_OLD + "input.dateformat",))
TIMESTAMP_INPUT_FORMAT_DELIMITER = option(
    _TB + "input.dateformat.list.delimiter.regex", ",", "Separator of several input formats.",
    aliases=(_TB_OLD + "input.dateformat.list.delimiter.regex",))
TIMESTAMP_INPUT_TIMEZONE = option(
    _TB + "input.timezone", "UTC", "Time zone of input date strings without an offset.",
    aliases=(_TB_OLD + "input.timezone",))
TIMESTAMP_OUTPUT_FORMAT = option(
    _TB + "output.dateformat", "", "Output date format (Java pattern) of the partition path.",
    aliases=(_TB_OLD + "output.dateformat",))
TIMESTAMP_OUTPUT_TIMEZONE = option(
    _TB + "output.timezone", "UTC", "Time zone in which the partition path is rendered.",
    aliases=(_TB_OLD + "output.timezone",))
TIMESTAMP_TIMEZONE = option(
    _TB + "timezone", None, "Sets both input and output time zones when they are not set.",
    aliases=(_TB_OLD + "timezone",))

# ---------------------------------------------------------------------------------------------
# Write path
# ---------------------------------------------------------------------------------------------
COMBINE_BEFORE_INSERT = option(
    "hoodie.combine.before.insert", False,
    "De-duplicate incoming records by key before insert/bulk_insert.", parse_bool)
COMBINE_BEFORE_UPSERT = option(
    "hoodie.combine.before.upsert", True, "De-duplicate incoming records by key before upsert.", parse_bool)
COMBINE_BEFORE_DELETE = option(
    "hoodie.combine.before.delete", True, "De-duplicate incoming keys before delete.", parse_bool)
INSERT_DROP_DUPLICATES = option(
    "hoodie.datasource.write.insert.drop.duplicates", False,
    "On insert, drop incoming records whose key already exists in the table.", parse_bool)
UPSERT_PARALLELISM = option(
    "hoodie.upsert.shuffle.parallelism", 0,
    "Shuffle parallelism of upsert; 0 derives it from the input (Hudi 0.13+).", parse_non_negative_int)
INSERT_PARALLELISM = option(
    "hoodie.insert.shuffle.parallelism", 0,
    "Shuffle parallelism of insert; 0 derives it from the input.", parse_non_negative_int)
BULKINSERT_PARALLELISM = option(
    "hoodie.bulkinsert.shuffle.parallelism", 0,
    "Shuffle parallelism of bulk_insert; 0 keeps the input's partition count.", parse_non_negative_int)
DELETE_PARALLELISM = option(
    "hoodie.delete.shuffle.parallelism", 0,
    "Shuffle parallelism of delete; 0 derives it from the input.", parse_non_negative_int)
BULKINSERT_SORT_MODE = option(
    "hoodie.bulkinsert.sort.mode", "GLOBAL_SORT",
    "bulk_insert ordering: GLOBAL_SORT (by partition path, record key), PARTITION_SORT, "
    "PARTITION_PATH_REPARTITION, PARTITION_PATH_REPARTITION_AND_SORT or NONE. pyhudi defaults to "
    "GLOBAL_SORT (Hudi's default before 0.12; 0.12+ uses NONE) so files hold tight key ranges.",
    choice("GLOBAL_SORT", "PARTITION_SORT", "NONE", "PARTITION_PATH_REPARTITION",
           "PARTITION_PATH_REPARTITION_AND_SORT"))
ROW_WRITER_ENABLE = option(
    "hoodie.datasource.write.row.writer.enable", True,
    "Hudi's row-writer bulk_insert path; pyhudi always writes from Arrow batches.", parse_bool)
RECONCILE_SCHEMA = option(
    "hoodie.datasource.write.reconcile.schema", False,
    "Keep the table schema when the incoming batch lacks some of its columns (filled with null).",
    parse_bool)
SET_NULL_FOR_MISSING_COLUMNS = option(
    "hoodie.write.set.null.for.missing.columns", False,
    "Fill table columns that the incoming batch lacks with null instead of failing.", parse_bool)
ALLOW_COLUMN_DROP = option(
    "hoodie.datasource.write.schema.allow.auto.evolution.column.drop", False,
    "Let an incoming batch without some table columns drop them from the table schema.", parse_bool)

# ---------------------------------------------------------------------------------------------
# Index
# ---------------------------------------------------------------------------------------------
INDEX_TYPE = option(
    "hoodie.index.type", "SIMPLE",
    "How upserts find existing records: SIMPLE, GLOBAL_SIMPLE, BLOOM, GLOBAL_BLOOM, BUCKET or RECORD_INDEX "
    "(global: the metadata table's record_index partition maps every key to its file group).",
    choice("SIMPLE", "GLOBAL_SIMPLE", "BLOOM", "GLOBAL_BLOOM", "BUCKET", "INMEMORY", "HBASE",
           "RECORD_INDEX", "FLINK_STATE"))
SIMPLE_INDEX_UPDATE_PARTITION_PATH = option(
    "hoodie.simple.index.update.partition.path", True,
    "GLOBAL_SIMPLE: a record whose partition changed moves (delete + insert); false updates it in place.",
    parse_bool)

RECORD_INDEX_UPDATE_PARTITION_PATH = option(
    "hoodie.record.index.update.partition.path", False,
    "RECORD_INDEX: a record whose partition changed moves (delete + insert); false updates it in place.",
    parse_bool)

BLOOM_PRUNE_BY_RANGES = option(
    "hoodie.bloom.index.prune.by.ranges", True,
    "BLOOM: check a key only against files whose footer key range (min/max record key) holds it.", parse_bool)
BLOOM_INDEX_USE_METADATA = option(
    "hoodie.bloom.index.use.metadata", False,
    "BLOOM: take the files' key ranges from the metadata table's column statistics of "
    "_hoodie_record_key and their bloom filters from its bloom_filters partition (when the table keeps "
    "them) instead of reading footers.", parse_bool)
BLOOM_USE_TREE_FILTER = option(
    "hoodie.bloom.index.use.treebased.filter", True,
    "BLOOM: look key ranges up in a sorted structure instead of a list. pyhudi always uses a sorted-range "
    "lookup (binary search of each file's range over the sorted incoming keys), so both values behave alike.",
    parse_bool)
BLOOM_INDEX_PARALLELISM = option(
    "hoodie.bloom.index.parallelism", 0,
    "BLOOM: Spark partitions of the per-file bloom check; 0 derives it from the number of candidate files.",
    parse_non_negative_int)
BLOOM_UPDATE_PARTITION_PATH = option(
    "hoodie.bloom.index.update.partition.path", True,
    "GLOBAL_BLOOM: a record whose partition changed moves (delete + insert); false updates it in place.",
    parse_bool)
BUCKET_NUM_BUCKETS = option(
    "hoodie.bucket.index.num.buckets", 256,
    "BUCKET: number of buckets (file groups) in every partition; fixed for the life of the table.",
    parse_positive_int)
BUCKET_HASH_FIELD = option(
    "hoodie.bucket.index.hash.field", None,
    "BUCKET: the record-key fields hashed to choose a bucket; defaults to the record key fields.",
    parse_fields)
BUCKET_ENGINE = option(
    "hoodie.index.bucket.engine", "SIMPLE",
    "BUCKET: SIMPLE (a fixed number of buckets) or CONSISTENT_HASHING (not supported by pyhudi).",
    choice("SIMPLE", "CONSISTENT_HASHING"))

# ---------------------------------------------------------------------------------------------
# Storage: file sizing and parquet
# ---------------------------------------------------------------------------------------------
PARQUET_MAX_FILE_SIZE = option(
    "hoodie.parquet.max.file.size", 120 * MB, "Target size of base files in bytes.", parse_positive_int)
PARQUET_SMALL_FILE_LIMIT = option(
    "hoodie.parquet.small.file.limit", 100 * MB,
    "Base files below this size receive inserts before new file groups are created; 0 disables.",
    parse_non_negative_int)
PARQUET_BLOCK_SIZE = option(
    "hoodie.parquet.block.size", 120 * MB, "Parquet row group size in bytes.", parse_positive_int)
PARQUET_PAGE_SIZE = option(
    "hoodie.parquet.page.size", 1 * MB, "Parquet page size in bytes.", parse_positive_int)
PARQUET_COMPRESSION_CODEC = option(
    "hoodie.parquet.compression.codec", "gzip",
    "Parquet codec: gzip, snappy, zstd, lz4, brotli or uncompressed.",
    lambda v: choice("GZIP", "SNAPPY", "ZSTD", "LZ4", "BROTLI", "UNCOMPRESSED", "NONE")(v).lower())
PARQUET_COMPRESSION_RATIO = option(
    "hoodie.parquet.compression.ratio", 0.1,
    "Expected parquet size / in-memory size, used to size files before they are written.", parse_float)
PARQUET_DICTIONARY_ENABLED = option(
    "hoodie.parquet.dictionary.enabled", True, "Parquet dictionary encoding.", parse_bool)
RECORD_SIZE_ESTIMATION_THRESHOLD = option(
    "hoodie.record.size.estimation.threshold", 1.0,
    "A commit counts for record-size estimation when it wrote more than threshold x small file limit.",
    parse_float)
COPY_ON_WRITE_RECORD_SIZE_ESTIMATE = option(
    "hoodie.copyonwrite.record.size.estimate", 1024,
    "Average record size in bytes assumed until a commit large enough to measure exists.",
    parse_positive_int)
INSERT_SPLIT_SIZE = option(
    "hoodie.copyonwrite.insert.split.size", 500000,
    "Records per new file group when auto split is off.", parse_positive_int)
INSERT_AUTO_SPLIT = option(
    "hoodie.copyonwrite.insert.auto.split", True,
    "Size new file groups from the max file size and the estimated record size.", parse_bool)

# ---------------------------------------------------------------------------------------------
# Merge-on-read: log files and compaction
# ---------------------------------------------------------------------------------------------
LOGFILE_DATA_BLOCK_FORMAT = option(
    "hoodie.logfile.data.block.format", "avro",
    "Format of log data blocks: avro (Hudi's default for parquet tables) or parquet.",
    lambda v: choice("AVRO", "PARQUET")(v).lower())
LOGFILE_MAX_SIZE = option(
    "hoodie.logfile.max.size", 1024 * MB,
    "A log file is appended to until it reaches this size; then a new log version starts.", parse_positive_int)
PARTITION_LOCAL_WRITE = option(
    "pyhudi.write.partition.local", True,
    "pyhudi only: upserts, inserts and deletes with a SIMPLE, BLOOM or BUCKET index (and bulk "
    "inserts with BUCKET) tag, size and write each table partition in one Spark task, two Spark jobs "
    "in all, unless a partition receives more than 2,000,000 records; false always takes Hudi's "
    "distributed chain of tagging, profiling and bucketing stages.", parse_bool)
MERGE_SMALL_FILE_GROUP_CANDIDATES_LIMIT = option(
    "hoodie.merge.small.file.group.candidates.limit", 1,
    "Merge-on-read: how many small file groups (without log files) per partition may take inserts.",
    parse_non_negative_int)
COMPACT_INLINE = option(
    "hoodie.compact.inline", False,
    "Schedule and run a compaction after a delta commit once the trigger is reached.", parse_bool)
COMPACT_SCHEDULE_INLINE = option(
    "hoodie.compact.schedule.inline", False,
    "Only schedule a compaction after a delta commit once the trigger is reached (run it later).", parse_bool)
COMPACT_INLINE_MAX_DELTA_COMMITS = option(
    "hoodie.compact.inline.max.delta.commits", 5,
    "Delta commits since the last compaction that trigger an inline compaction.", parse_positive_int)
COMPACT_INLINE_TRIGGER_STRATEGY = option(
    "hoodie.compact.inline.trigger.strategy", "NUM_COMMITS",
    "When inline compaction triggers; pyhudi implements NUM_COMMITS.",
    choice("NUM_COMMITS", "NUM_COMMITS_AFTER_LAST_REQUEST", "TIME_ELAPSED", "NUM_OR_TIME", "NUM_AND_TIME"))
COMPACTION_STRATEGY = option(
    "hoodie.compaction.strategy", "org.apache.hudi.table.action.compact.strategy.LogFileSizeBasedCompactionStrategy",
    "Which file slices a compaction plan takes: LogFileSizeBasedCompactionStrategy (largest logs first, up to "
    "hoodie.compaction.target.io) or UnBoundedCompactionStrategy (all).",
    class_choice("compaction strategy", COMPACTION_STRATEGIES))
COMPACTION_TARGET_IO = option(
    "hoodie.compaction.target.io", 500 * 1024,
    "MB of reads and writes one compaction plan may take (log-size based strategy).", parse_positive_int)

# ---------------------------------------------------------------------------------------------
# Clustering: rewriting small file groups into large, sorted ones (a replacecommit, CLUSTER)
# ---------------------------------------------------------------------------------------------
CLUSTERING_INLINE = option(
    "hoodie.clustering.inline", False,
    "Schedule and run a clustering after a write once hoodie.clustering.inline.max.commits writes "
    "completed since the last one.", parse_bool, aliases=("hoodie.datasource.clustering.inline.enable",))
CLUSTERING_SCHEDULE_INLINE = option(
    "hoodie.clustering.schedule.inline", False,
    "Only schedule the clustering after a write once due (run it later: pyhudi clustering run).", parse_bool)
CLUSTERING_INLINE_MAX_COMMITS = option(
    "hoodie.clustering.inline.max.commits", 4,
    "Completed writes since the last clustering that make an inline clustering due.", parse_positive_int)
CLUSTERING_SMALL_FILE_LIMIT = option(
    "hoodie.clustering.plan.strategy.small.file.limit", 300 * 1024 * 1024,
    "File slices whose base file is smaller than this many bytes are clustered.", parse_non_negative_int)
CLUSTERING_TARGET_FILE_MAX_BYTES = option(
    "hoodie.clustering.plan.strategy.target.file.max.bytes", 1024 * 1024 * 1024,
    "Size the clustered files are cut at (a group of N bytes makes N / this output files).", parse_positive_int)
CLUSTERING_MAX_BYTES_PER_GROUP = option(
    "hoodie.clustering.plan.strategy.max.bytes.per.group", 2 * 1024 * 1024 * 1024,
    "Bytes of input one clustering group (one Spark task) takes at most.", parse_positive_int)
CLUSTERING_MAX_NUM_GROUPS = option(
    "hoodie.clustering.plan.strategy.max.num.groups", 30,
    "Clustering groups one plan holds at most.", parse_positive_int)
CLUSTERING_SORT_COLUMNS = option(
    "hoodie.clustering.plan.strategy.sort.columns", None,
    "Columns the clustered records are sorted by (comma separated); unset, by record key.", parse_fields)
CLUSTERING_SINGLE_GROUP = option(
    "hoodie.clustering.plan.strategy.single.group.clustering.enabled", True,
    "Also plan a group holding one file slice.", parse_bool)
CLUSTERING_PARTITION_FILTER_MODE = option(
    "hoodie.clustering.plan.partition.filter.mode", "NONE",
    "Partitions a plan considers: NONE (all), RECENT_DAYS (the latest ...daybased.lookback.partitions after "
    "skipping ...daybased.skipfromlatest.partitions, by partition path), SELECTED_PARTITIONS "
    "(...cluster.begin.partition to ...cluster.end.partition, inclusive).",
    lambda v: _clustering_filter(v))
CLUSTERING_LOOKBACK_PARTITIONS = option(
    "hoodie.clustering.plan.strategy.daybased.lookback.partitions", 2,
    "RECENT_DAYS: how many of the latest partitions are considered.", parse_positive_int)
CLUSTERING_SKIP_FROM_LATEST = option(
    "hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions", 0,
    "RECENT_DAYS: latest partitions left out (still being written).", parse_non_negative_int)
CLUSTERING_BEGIN_PARTITION = option(
    "hoodie.clustering.plan.strategy.cluster.begin.partition", None, "SELECTED_PARTITIONS: first partition.")
CLUSTERING_END_PARTITION = option(
    "hoodie.clustering.plan.strategy.cluster.end.partition", None, "SELECTED_PARTITIONS: last partition.")
CLUSTERING_PARTITION_REGEX = option(
    "hoodie.clustering.plan.strategy.partition.regex.pattern", None,
    "Only partitions whose path matches this regular expression are clustered.")
CLUSTERING_PARTITION_SELECTED = option(
    "hoodie.clustering.plan.strategy.partition.selected", None,
    "Only these partitions (comma separated) are clustered.", parse_fields)
CLUSTERING_PRESERVE_COMMIT_METADATA = option(
    "hoodie.clustering.preserve.commit.metadata", True,
    "Clustered records keep their _hoodie_commit_time and _hoodie_commit_seqno, so incremental pulls do "
    "not see them again.", parse_bool)
LAYOUT_OPTIMIZE_STRATEGY = option(
    "hoodie.layout.optimize.strategy", "linear",
    "How clustering orders records by the sort columns: linear (lexicographic), z-order or hilbert "
    "(space-filling curves over the columns' ranks, for filters on any of them).",
    lambda v: choice("LINEAR", "Z-ORDER", "HILBERT", mapping={"ZORDER": "Z-ORDER"})(v).lower())

# ---------------------------------------------------------------------------------------------
# Cleaning and archival (run after every commit unless turned off)
# ---------------------------------------------------------------------------------------------
CLEAN_AUTOMATIC = option(
    "hoodie.clean.automatic", True,
    "Clean old file slices after every commit (write or compaction), as the retention policy allows.",
    parse_bool)
CLEAN_ASYNC = option(
    "hoodie.clean.async", False,
    "Clean in a background service; pyhudi cleans inline after the commit and accepts false only.",
    lambda v: _only_false("hoodie.clean.async", v))
CLEAN_POLICY = option(
    "hoodie.clean.policy", "KEEP_LATEST_COMMITS",
    "KEEP_LATEST_COMMITS keeps every slice a query of the last hoodie.clean.commits.retained commits needs; "
    "KEEP_LATEST_FILE_VERSIONS keeps hoodie.clean.fileversions.retained slices per file group; "
    "KEEP_LATEST_BY_HOURS keeps what queries of the last hoodie.clean.hours.retained hours need.",
    choice("KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS", "KEEP_LATEST_BY_HOURS"),
    aliases=("hoodie.cleaner.policy",))
CLEAN_COMMITS_RETAINED = option(
    "hoodie.clean.commits.retained", 10,
    "Commits whose snapshots stay readable (time travel, incremental pulls) under KEEP_LATEST_COMMITS.",
    parse_positive_int, aliases=("hoodie.cleaner.commits.retained",))
CLEAN_FILE_VERSIONS_RETAINED = option(
    "hoodie.clean.fileversions.retained", 3,
    "File slices kept per file group under KEEP_LATEST_FILE_VERSIONS.",
    parse_positive_int, aliases=("hoodie.cleaner.fileversions.retained",))
CLEAN_HOURS_RETAINED = option(
    "hoodie.clean.hours.retained", 24,
    "Hours of commits whose snapshots stay readable under KEEP_LATEST_BY_HOURS.",
    parse_positive_int, aliases=("hoodie.cleaner.hours.retained",))
CLEAN_TRIGGER_STRATEGY = option(
    "hoodie.clean.trigger.strategy", "NUM_COMMITS",
    "When a clean is scheduled: after hoodie.clean.max.commits commits since the last clean.",
    choice("NUM_COMMITS"))
CLEAN_MAX_COMMITS = option(
    "hoodie.clean.max.commits", 1,
    "Commits since the last clean that trigger the next one.", parse_positive_int)
CLEAN_INCREMENTAL = option(
    "hoodie.clean.incremental.enabled", True,
    "Only look at partitions written since the last clean's earliest retained commit, instead of all.",
    parse_bool, aliases=("hoodie.cleaner.incremental.mode",))
ARCHIVE_AUTOMATIC = option(
    "hoodie.archive.automatic", True,
    "Archive old instants after every commit once the active timeline holds more than hoodie.keep.max.commits.",
    parse_bool)
KEEP_MIN_COMMITS = option(
    "hoodie.keep.min.commits", 20,
    "Commits archival leaves on the active timeline; must exceed hoodie.clean.commits.retained.",
    parse_positive_int)
KEEP_MAX_COMMITS = option(
    "hoodie.keep.max.commits", 30,
    "Commits on the active timeline that trigger archival (down to hoodie.keep.min.commits).",
    parse_positive_int)
ARCHIVE_BEYOND_SAVEPOINT = option(
    "hoodie.archive.beyond.savepoint", False,
    "Archive instants newer than the oldest savepoint (savepointed commits themselves stay).", parse_bool)

# ---------------------------------------------------------------------------------------------
# Concurrency: heartbeats, failed writes, locks, conflict resolution
# ---------------------------------------------------------------------------------------------
WRITE_CONCURRENCY_MODE = option(
    "hoodie.write.concurrency.mode", "SINGLE_WRITER",
    "SINGLE_WRITER: one writer at a time (a writer that finds another write in progress, its "
    "heartbeat alive, fails); OPTIMISTIC_CONCURRENCY_CONTROL: writers run side by side and one whose "
    "file groups another writer changed meanwhile fails at commit (HudiWriteConflictError).",
    choice("SINGLE_WRITER", "OPTIMISTIC_CONCURRENCY_CONTROL"))
FAILED_WRITES_POLICY = option(
    "hoodie.cleaner.policy.failed.writes", "EAGER",
    "When failed writes are rolled back: EAGER by every writer before it starts, LAZY by the cleaner. "
    "Either way only writes whose heartbeat expired. Unset, it is LAZY under optimistic concurrency "
    "control, as in Hudi.",
    choice("EAGER", "LAZY", "NEVER"))
HEARTBEAT_INTERVAL_MS = option(
    "hoodie.client.heartbeat.interval_in_ms", 60 * 1000,
    "How often a writer touches .hoodie/.heartbeat/<instant> while its write is in progress.",
    parse_positive_int)
HEARTBEAT_TOLERABLE_MISSES = option(
    "hoodie.client.heartbeat.tolerable.misses", 2,
    "Heartbeats a writer may miss before its write counts as failed (expired after interval x misses).",
    parse_positive_int)
LOCK_PROVIDER = option(
    "hoodie.write.lock.provider", None,
    "Lock that serializes timeline changes (the start and the commit of a write, table services). "
    "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider (a lock file; local "
    "paths), org.apache.hudi.client.transaction.lock.InProcessLockProvider (writers in one process), or "
    "the dotted name of a Python class implementing pyhudi.transaction.lock.LockProvider. Unset, pyhudi "
    "uses the file-system lock where storage creates files atomically (local paths) and the in-process "
    "lock elsewhere; Hudi's ZooKeeper, DynamoDB and Hive metastore locks need a JVM.")
LOCK_WAIT_MS = option(
    "hoodie.write.lock.wait_time_ms", 60 * 1000,
    "How long one attempt to take the lock waits at the lock provider.", parse_non_negative_int)
LOCK_RETRY_WAIT_MS = option(
    "hoodie.write.lock.wait_time_ms_between_retry", 1000,
    "Longest pause between two polls of the lock provider within one attempt (polls start at 10 ms "
    "and back off exponentially up to this).", parse_positive_int)
LOCK_MAX_RETRY_WAIT_MS = option(
    "hoodie.write.lock.max_wait_time_ms_between_retry", 16000,
    "Hudi's cap on the provider's backoff (ZooKeeper); accepted for compatibility.", parse_positive_int)
LOCK_NUM_RETRIES = option(
    "hoodie.write.lock.num_retries", 15,
    "Hudi's retries inside a provider (ZooKeeper, Hive); accepted for compatibility.", parse_non_negative_int)
LOCK_CLIENT_NUM_RETRIES = option(
    "hoodie.write.lock.client.num_retries", 50,
    "Further attempts to take the lock after the first one fails, before the write gives up with HudiLockError.",
    parse_non_negative_int)
LOCK_CLIENT_RETRY_WAIT_MS = option(
    "hoodie.write.lock.client.wait_time_ms_between_retry", 5000,
    "Pause between two attempts to take the lock.", parse_non_negative_int)
LOCK_FILESYSTEM_PATH = option(
    "hoodie.write.lock.filesystem.path", None,
    "Folder of the file-system lock's file (named lock); default the table's .hoodie folder.")
LOCK_FILESYSTEM_EXPIRE = option(
    "hoodie.write.lock.filesystem.expire", 0,
    "Minutes after which a lock file that no live pyhudi process holds (one Apache Hudi's Java writers "
    "left) counts as abandoned and is broken; 0 never. A lock file of a dead pyhudi process is broken at "
    "once (its holder's flock on it is gone).", parse_non_negative_int)
CONFLICT_RESOLUTION_STRATEGY = option(
    "hoodie.write.lock.conflict.resolution.strategy",
    "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy",
    "How a commit decides it conflicts: Simple... (file groups both wrote) or BucketIndex... (the same "
    "bucket of a partition, the default with hoodie.index.type=BUCKET).",
    class_choice("conflict resolution strategy", CONFLICT_STRATEGIES))

# ---------------------------------------------------------------------------------------------
# Bloom filter written into every base file footer
# ---------------------------------------------------------------------------------------------
PARQUET_BLOOM_FILTER_ENABLED = option(
    "hoodie.parquet.bloom.filter.enabled", True,
    "Write the record-key bloom filter into base file footers. Files always get one when "
    "hoodie.index.type is a BLOOM index; with other indexes false saves its bytes (about 860 KB per "
    "file with the default DYNAMIC_V0 filter) and the time to build it.", parse_bool)
BLOOM_NUM_ENTRIES = option(
    "hoodie.index.bloom.num_entries", 60000, "Keys per bloom filter (per row of a dynamic filter).",
    parse_positive_int)
BLOOM_FPP = option(
    "hoodie.index.bloom.fpp", 0.000000001, "Target false positive probability of the bloom filter.",
    parse_float)
BLOOM_FILTER_TYPE = option(
    "hoodie.bloom.index.filter.type", "DYNAMIC_V0", "SIMPLE or DYNAMIC_V0.", choice("SIMPLE", "DYNAMIC_V0"))
BLOOM_DYNAMIC_MAX_ENTRIES = option(
    "hoodie.bloom.index.filter.dynamic.max.entries", 100000,
    "Upper bound of keys a DYNAMIC_V0 filter grows to.", parse_positive_int)

# ---------------------------------------------------------------------------------------------
# Read
# ---------------------------------------------------------------------------------------------
QUERY_TYPE = option(
    "hoodie.datasource.query.type", "snapshot",
    "snapshot, read_optimized or incremental.",
    lambda v: choice("SNAPSHOT", "READ_OPTIMIZED", "INCREMENTAL")(v).lower())

BEGIN_INSTANT = option(
    "hoodie.datasource.read.begin.instanttime", None,
    "Incremental queries: records written after this instant (exclusive); 000 reads from the start.")
END_INSTANT = option(
    "hoodie.datasource.read.end.instanttime", None,
    "Incremental queries: records written up to this instant (inclusive); default the latest commit.")
INCR_FALLBACK_FULL_SCAN = option(
    "hoodie.datasource.read.incr.fallback.fulltablescan.enable", False,
    "When an incremental range reaches archived instants or cleaned files, scan the latest snapshot "
    "and filter on _hoodie_commit_time instead of failing.", parse_bool)
TIMELINE_HOLES_POLICY = option(
    "hoodie.read.timeline.holes.resolution.policy", "FAIL",
    "Incremental queries when a write older than completed ones is still pending (a hole): FAIL, or BLOCK "
    "(read only up to the hole). USE_TRANSITION_TIME is not supported.",
    lambda v: _holes_policy(v))
DATA_SKIPPING = option(
    "hoodie.enable.data.skipping", True,
    "Filtered reads skip base files whose column statistics rule the filter out: the metadata table's "
    "column_stats partition when the table keeps it, else the files' parquet footers. On by default, as "
    "in Hudi 1.x (Hudi 0.x defaults to false); false reads every file of the partitions left after "
    "partition pruning.", parse_bool)
AS_OF_INSTANT = option(
    "as.of.instant", None,
    "Time travel: read the table as of this instant (yyyyMMddHHmmss[SSS], 'yyyy-MM-dd HH:mm:ss[.SSS]' "
    "or 'yyyy-MM-dd').", lambda v: parse_query_instant(v))

# ---------------------------------------------------------------------------------------------
# Structured Streaming: the sink (pyhudi.write_stream) and the table as a stream of its commits
# ---------------------------------------------------------------------------------------------
COMMIT_METADATA_KEY_PREFIX = option(
    "hoodie.datasource.write.commitmeta.key.prefix", "_",
    "Write options whose keys start with this prefix are stored in the commit's extra metadata (a "
    "streaming sink's checkpoint, a pipeline's own markers); empty stores none.")
STREAMING_CHECKPOINT_IDENTIFIER = option(
    "hoodie.datasource.write.streaming.checkpoint.identifier", "default_single_writer",
    "Name of this streaming writer in the commits' _hudi_streaming_sink_checkpoint: each streaming query "
    "writing the table needs its own, so that each skips only the batches it committed itself.")
STREAMING_RETRY_COUNT = option(
    "hoodie.datasource.write.streaming.retry.count", 3,
    "Attempts of a micro-batch write before the query fails (errors in the input are not retried).",
    parse_positive_int)
STREAMING_RETRY_INTERVAL_MS = option(
    "hoodie.datasource.write.streaming.retry.interval.ms", 2000,
    "Pause before the second attempt of a micro-batch write; doubled before each further one.",
    parse_non_negative_int)
STREAMING_IGNORE_FAILED_BATCH = option(
    "hoodie.datasource.write.streaming.ignore.failed.batch", False,
    "Log a micro-batch whose attempts all failed and go on with the next one (its rows are lost) instead "
    "of failing the query.", parse_bool)
STREAMING_DISABLE_COMPACTION = option(
    "hoodie.datasource.write.streaming.disable.compaction", False,
    "Merge-on-read streaming sink: schedule and run no compaction at all (run it from another job).",
    parse_bool)
ASYNC_COMPACT_ENABLE = option(
    "hoodie.datasource.compaction.async.enable", True,
    "Merge-on-read streaming sink: when hoodie.compact.inline.max.delta.commits is reached, schedule a "
    "compaction after the micro-batch and run it in the background while later batches write.", parse_bool)
STREAMING_START_OFFSET = option(
    "hoodie.datasource.streaming.startOffset", "earliest",
    "Where a stream of the table's commits starts when its checkpoint is new: earliest (every commit), "
    "latest (commits after the current one), or an instant time (commits after it).",
    lambda v: _start_offset(v))


def _start_offset(value: Any) -> str:
    text = str(value).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    if text and text.strip("0") == "":  # Hudi's 000: from the beginning
        return "earliest"
    return parse_query_instant(text)


def _clustering_filter(value: Any) -> str:
    text = choice("NONE", "RECENT_DAYS", "SELECTED_PARTITIONS", "DAY_ROLLING")(value)
    if text == "DAY_ROLLING":
        raise ValueError("DAY_ROLLING is not supported; use NONE, RECENT_DAYS or SELECTED_PARTITIONS")
    return text


def _holes_policy(value: Any) -> str:
    text = choice("FAIL", "BLOCK", "USE_TRANSITION_TIME")(value)
    if text == "USE_TRANSITION_TIME":
        raise ValueError("USE_TRANSITION_TIME is not supported; use FAIL or BLOCK")
    return text


def _only_false(key: str, value: Any) -> bool:
    if parse_bool(value):
        raise ValueError(f"{key}=true is not supported: pyhudi runs this service inline after the commit")
    return False


def _parse_payload(value: Any) -> str:
    text = str(value).strip()
    known = {
        "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload",
        "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
    }
    if text not in known:
        raise ValueError(
            f"payload class {text!r} is not supported; use one of {', '.join(sorted(known))}")
    return text


DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
def canonical_key(key: str) -> str:
    """The registry key a user-supplied key (or alias) stands for; the key itself if unknown.

    Spark hands data source options over lower-cased, so a key matches in any case.
    """
    if key in REGISTRY:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    if not _BY_LOWER:
        _BY_LOWER.update({k.lower(): k for k in REGISTRY})
        _BY_LOWER.update({a.lower(): k for a, k in _ALIASES.items()})
    return _BY_LOWER.get(key.lower(), key)


_BY_LOWER: dict[str, str] = {}


@dataclass
class HudiConfig:
    """One call's options, resolved against the registry.

    Unknown ``hoodie.*`` keys produce a warning naming the closest known key (users mistype long
    keys; silently ignoring them hides the mistake). Keys outside ``hoodie.*`` (``path``, Spark
    options) are kept and ignored.
    """

    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, options: Mapping[str, Any] | None, *, warn_unknown: bool = True) -> HudiConfig:
        resolved: dict[str, Any] = {}
        for key, value in (options or {}).items():
            canon = canonical_key(str(key))
            if canon not in REGISTRY and canon.startswith("hoodie.") and warn_unknown:
                close = difflib.get_close_matches(canon, list(REGISTRY), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]}?" if close else ""
                warnings.warn(f"unknown option {key}{hint}", UserWarning, stacklevel=3)
            if canon in resolved and resolved[canon] != value and canon != key:
                continue  # the canonical spelling given alongside an alias wins
            resolved[canon] = value
        config = cls(resolved)
        for key in resolved:  # parse eagerly so a bad value fails before any work starts
            if key in REGISTRY:
                config.get(REGISTRY[key])
        return config

    def is_set(self, opt: ConfigOption[Any]) -> bool:
        return opt.key in self.raw

    def get(self, opt: ConfigOption[T]) -> T:
        if opt.key in self.raw and self.raw[opt.key] is not None:
            return opt.parse(self.raw[opt.key])
        return opt.default  # type: ignore[return-value]

    def with_defaults(self, values: Mapping[str, Any]) -> HudiConfig:
        """A copy where ``values`` fill keys the user did not set (table properties, for instance)."""
        merged = dict(values)
        merged.update(self.raw)
        return HudiConfig(merged)


def describe_options() -> list[tuple[str, str, str]]:
    """(key, default, doc) of every option, for the CLI and docs."""
    return [(o.key, "" if o.default is None else str(o.default), o.doc) for o in REGISTRY.values()]
