"""Names of the helper columns the write pipeline adds to incoming rows, and the stats schema."""

from __future__ import annotations

import pyarrow as pa

BUCKET = "_pyhudi_bucket"
IS_DELETE = "_pyhudi_is_delete"
FILE_ID = "_pyhudi_file_id"
SHUFFLE_KEY = "_pyhudi_shuffle_key"
#: a row's position in the incoming data while duplicates of a key are combined (the later wins ties)
ARRIVAL = "_pyhudi_arrival"
INTERNAL = (BUCKET, IS_DELETE, FILE_ID, SHUFFLE_KEY)

#: One row per file written, returned by executors to the driver.
STATS_SCHEMA = pa.schema([
    ("partition_path", pa.string()),
    ("file_id", pa.string()),
    ("path", pa.string()),
    ("prev_commit", pa.string()),
    ("io_type", pa.string()),
    ("num_writes", pa.int64()),
    ("num_deletes", pa.int64()),
    ("num_update_writes", pa.int64()),
    ("num_inserts", pa.int64()),
    ("file_size", pa.int64()),
    ("time_ms", pa.int64()),
    ("min_key", pa.string()),
    ("max_key", pa.string()),
    ("write_bytes", pa.int64()),
    # log files (merge-on-read APPEND) only
    ("log_version", pa.int64()),
    ("log_offset", pa.int64()),
    ("base_file", pa.string()),
    ("log_files", pa.string()),  # names of the slice's log files after the write, newline-separated
    ("log_blocks", pa.int64()),
    ("column_stats", pa.string()),  # the log block's column statistics (metadata table records, encoded)
    ("cdc_stats", pa.string()),  # change data files written (CDC tables): JSON {path: size}
    # compaction only
    ("log_records", pa.int64()),
    ("log_files_compacted", pa.int64()),
    ("log_size_compacted", pa.int64()),
    ("updated_compacted", pa.int64()),
    ("rollback_blocks", pa.int64()),
    ("corrupt_blocks", pa.int64()),
    # partition-local BLOOM lookups: one row (io_type INDEX_ROW) per table partition
    ("index_files_in_range", pa.int64()),
    ("index_files_positive", pa.int64()),
    ("index_keys_checked", pa.int64()),
    ("index_bloom_positives", pa.int64()),
    ("index_matches", pa.int64()),
])
#: io_type of a stats row that reports an index lookup instead of a written file
INDEX_ROW = "INDEX"
STATS_DDL = ", ".join(f"{f.name} {'string' if f.type == pa.string() else 'long'}" for f in STATS_SCHEMA)
