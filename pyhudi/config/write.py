"""Options of the write path: operations, index, file sizing, merge-on-read logs and compaction,
and the bloom filter in base file footers."""

from __future__ import annotations

from pyhudi.config.registry import (
    MB,
    choice,
    class_choice,
    implemented_choice,
    option,
    parse_bool,
    parse_fields,
    parse_float,
    parse_non_negative_int,
    parse_positive_int,
)

COMPACTION_STRATEGIES = (
    "org.apache.hudi.table.action.compact.strategy.LogFileSizeBasedCompactionStrategy",
    "org.apache.hudi.table.action.compact.strategy.UnBoundedCompactionStrategy",
)

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
#: the values of ``hoodie.index.type`` pyhudi implements, and those only Apache Hudi's engines do
INDEX_TYPES = ("SIMPLE", "GLOBAL_SIMPLE", "BLOOM", "GLOBAL_BLOOM", "BUCKET", "RECORD_INDEX")
HUDI_ONLY_INDEX_TYPES = ("INMEMORY", "HBASE", "FLINK_STATE")
INDEX_TYPE = option(
    "hoodie.index.type", "SIMPLE",
    "How upserts find existing records: SIMPLE, GLOBAL_SIMPLE, BLOOM, GLOBAL_BLOOM, BUCKET or RECORD_INDEX "
    "(global: the metadata table's record_index partition maps every key to its file group). Hudi's "
    "INMEMORY, HBASE and FLINK_STATE are refused.",
    implemented_choice(INDEX_TYPES, hudi_only=HUDI_ONLY_INDEX_TYPES))
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
WRITE_PARTIAL_UPDATE_SCHEMA = option(
    "hoodie.write.partial.update.schema", "",
    "Avro schema of partial updates (Hudi 1.x): set by pyhudi.merge on a merge-on-read table when a statement "
    "assigns only some columns; log data blocks then hold those columns with IS_PARTIAL=true. Not meant to be set "
    "by hand (HoodieWriteConfig.WRITE_PARTIAL_UPDATE_SCHEMA).")
MERGE_INTO_PARTIAL_UPDATES = option(
    "hoodie.spark.sql.merge.into.partial.updates", True,
    "Whether pyhudi.merge writes partial updates (log blocks of the assigned columns only) to merge-on-read tables "
    "of version 8+ when its update clauses assign a subset of the columns (Hudi's "
    "DataSourceWriteOptions.ENABLE_MERGE_INTO_PARTIAL_UPDATES, since 1.0.0).", parse_bool)
LOGFILE_DATA_BLOCK_MAX_SIZE = option(
    "hoodie.logfile.data.block.max.size", 256 * MB,
    "A log data block (merge-on-read appends, change data of CDC tables) holds records up to about this many bytes; "
    "more records go into further blocks (HoodieAppendHandle, HoodieCDCLogger.flushIfNeeded).", parse_positive_int)
PARTITION_LOCAL_WRITE = option(
    "pyhudi.write.partition.local", True,
    "pyhudi only: upserts, inserts and deletes with a SIMPLE, BLOOM or BUCKET index (and bulk "
    "inserts with BUCKET) tag, size and write each table partition in one Spark task, two Spark jobs "
    "in all, unless a partition receives more than 2,000,000 records; false always takes Hudi's "
    "distributed chain of tagging, profiling and bucketing stages.", parse_bool)
SMALL_BATCH_BYTES = option(
    "pyhudi.write.small.batch.bytes", 64 * MB,
    "pyhudi only: a partition-local write (see pyhudi.write.partition.local) whose input Spark's "
    "optimizer estimates at or below this many bytes (the estimate Spark's broadcast join threshold "
    "uses; known for local data and file scans) is brought to the driver as Arrow in one Spark job (none "
    "for a small pandas frame of plain columns) and tagged, sized, written and committed there without "
    "further Spark jobs; larger or unknown inputs take the two-job path, except pandas and Arrow frames "
    "Spark holds on the driver (see pyhudi.write.small.batch.held.bytes). 0 always takes the two-job "
    "path. On local[2] the driver path took 0.5-0.65x the two-job path's time from 1,000 to 1,000,000 "
    "rows (benchmarks/small_batch.py; BENCHMARKS.md, 'Small batches'); the default, about 430,000 drone "
    "rows, bounds the Arrow the driver holds (a file scan's estimate is its compressed size) and leaves "
    "larger batches to a cluster's executors.",
    parse_non_negative_int)
SMALL_BATCH_HELD_BYTES = option(
    "pyhudi.write.small.batch.held.bytes", 256 * MB,
    "pyhudi only: a pandas or Arrow frame past Spark's local relation threshold is held by Spark as "
    "Arrow record batches in the driver's JVM; a partition-local write of one whose batches take at "
    "most this many bytes reads them on the driver without a Spark job, keys them with pyarrow where "
    "its key and partition fields are strings or integers (else by one Spark job), and writes them "
    "there as pyhudi.write.small.batch.bytes describes (which at 0 turns this off too; a held frame "
    "pyarrow cannot key is bounded by that option). The rows are on the driver already; the write "
    "holds two to three copies of them in the Python process at its peak. The daily "
    "drone upsert (316,800 rows, 69 MB) took 0.3x the two-job path's time on local[2] "
    "(benchmarks/drones.py; BENCHMARKS.md).",
    parse_non_negative_int)
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
