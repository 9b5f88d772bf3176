"""Options of queries and of Structured Streaming."""

from __future__ import annotations

from typing import Any

from pyhudi.config.registry import choice, option, parse_bool, parse_non_negative_int, parse_positive_int
from pyhudi.instant_time import parse_query_instant

# ---------------------------------------------------------------------------------------------
# Read
# ---------------------------------------------------------------------------------------------
QUERY_TYPE = option(
    "hoodie.datasource.query.type", "snapshot",
    "snapshot, read_optimized or incremental.",
    lambda v: choice("SNAPSHOT", "READ_OPTIMIZED", "INCREMENTAL")(v).lower())

QUERY_AS_RO_TABLE = option(
    "hoodie.query.as.ro.table", False,
    "Read the read-optimized view when hoodie.datasource.query.type is not given: the serde property Hudi's "
    "catalog sync gives a merge-on-read table's _ro entry, which Spark passes to the hudi source.",
    parse_bool)


def query_type(cfg: Any) -> str:
    """The query a read runs: ``hoodie.datasource.query.type``, else read_optimized for a catalog
    table registered as read-optimized (``hoodie.query.as.ro.table``), else snapshot."""
    if not cfg.is_set(QUERY_TYPE) and cfg.get(QUERY_AS_RO_TABLE):
        return "read_optimized"
    return str(cfg.get(QUERY_TYPE))


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
    "column_stats partition when the table keeps it, else the files' parquet footers (or the record_index "
    "partition, for key filters read with hoodie.metadata.record.index.enable=true). On by default, as "
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


def _holes_policy(value: Any) -> str:
    text = choice("FAIL", "BLOCK", "USE_TRANSITION_TIME")(value)
    if text == "USE_TRANSITION_TIME":
        raise ValueError("USE_TRANSITION_TIME is not supported; use FAIL or BLOCK")
    return text
