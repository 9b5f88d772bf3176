"""Options of the table services and of writers beside each other: clustering, cleaning,
archival, concurrency control and locks."""

from __future__ import annotations

from typing import Any

from pyhudi.config.registry import (
    DERIVED,
    choice,
    class_choice,
    option,
    parse_bool,
    parse_fields,
    parse_non_negative_int,
    parse_positive_int,
)
from pyhudi.errors import HudiConfigError

UPDATE_STRATEGIES = (
    "org.apache.hudi.client.clustering.update.strategy.SparkRejectUpdateStrategy",
    "org.apache.hudi.client.clustering.update.strategy.SparkAllowUpdateStrategy",
)

CONFLICT_STRATEGIES = (
    "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy",
    "org.apache.hudi.client.transaction.BucketIndexConcurrentFileWritesConflictResolutionStrategy",
)

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
CLUSTERING_ASYNC_ENABLED = option(
    "hoodie.clustering.async.enabled", False,
    "Streaming sink: schedule a clustering every hoodie.clustering.async.max.commits commits and run it on "
    "a background thread while later micro-batches write. Batch writes leave it to "
    "hoodie.clustering.inline / schedule.inline.", parse_bool, aliases=("hoodie.datasource.clustering.async.enable",))
CLUSTERING_ASYNC_MAX_COMMITS = option(
    "hoodie.clustering.async.max.commits", 4,
    "Commits since the last clustering after which the streaming sink schedules one.", parse_positive_int)
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
CLUSTERING_UPDATES_STRATEGY = option(
    "hoodie.clustering.updates.strategy", UPDATE_STRATEGIES[0],
    "What a write that updates file groups of a pending clustering does. SparkRejectUpdateStrategy: it "
    "fails before writing anything (run the clustering first). SparkAllowUpdateStrategy: it writes; the "
    "clustering then fails at its commit and is rolled back, unless "
    "hoodie.clustering.rollback.pending.replacecommit.on.conflict makes the write roll the clustering back "
    "first.", class_choice("clustering update strategy", UPDATE_STRATEGIES))
CLUSTERING_ROLLBACK_PENDING_ON_CONFLICT = option(
    "hoodie.clustering.rollback.pending.replacecommit.on.conflict", False,
    "With SparkAllowUpdateStrategy: a write that updates file groups of pending clusterings rolls those "
    "clusterings back before it writes (a clustering running at that moment fails at its commit).", parse_bool)

# ---------------------------------------------------------------------------------------------
# Cleaning and archival (run after every commit unless turned off)
# ---------------------------------------------------------------------------------------------
CLEAN_AUTOMATIC = option(
    "hoodie.clean.automatic", True,
    "Clean old file slices after every commit (write or compaction), as the retention policy allows.",
    parse_bool)
CLEAN_ASYNC = option(
    "hoodie.clean.async", False,
    "Clean on a background thread that starts when a write has requested its instant and runs while "
    "it writes; the write waits for it after its commit, then archives (Hudi's async cleaner service). "
    "Off: the clean runs after the commit. Only with hoodie.clean.automatic, and under optimistic "
    "concurrency control (a single writer holds the table lock throughout its write).",
    parse_bool, aliases=("hoodie.clean.async.enabled",))
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
TIMELINE_COMPACTION_BATCH_SIZE = option(
    "hoodie.timeline.compaction.batch.size", 10,
    "Table versions 8 and 9: files of one layer of the archived (LSM) timeline merged into one file of the next "
    "layer once that many have gathered (at least 2).", parse_positive_int)
ARCHIVE_BEYOND_SAVEPOINT = option(
    "hoodie.archive.beyond.savepoint", False,
    "Archive instants newer than the oldest savepoint (savepointed commits themselves stay).", parse_bool)

# ---------------------------------------------------------------------------------------------
# Concurrency: heartbeats, failed writes, locks, conflict resolution
# ---------------------------------------------------------------------------------------------
#: the values of ``hoodie.write.concurrency.mode``, named once for every module that tests the mode
SINGLE_WRITER = "SINGLE_WRITER"
OCC = "OPTIMISTIC_CONCURRENCY_CONTROL"
WRITE_CONCURRENCY_MODE = option(
    "hoodie.write.concurrency.mode", SINGLE_WRITER,
    "SINGLE_WRITER: one writer at a time (a writer that finds another write in progress, its "
    "heartbeat alive, fails); OPTIMISTIC_CONCURRENCY_CONTROL: writers run side by side and one whose "
    "file groups another writer changed meanwhile fails at commit (HudiWriteConflictError).",
    choice(SINGLE_WRITER, OCC))
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
    "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider (Hudi 1.1's lease in "
    ".hoodie/.locks/table_lock.json, taken and renewed by conditional writes: S3 and local paths; "
    "pyhudi and Apache Hudi writers exclude each other through it), "
    "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider (a lock file; local "
    "paths), org.apache.hudi.client.transaction.lock.InProcessLockProvider (writers in one process; on "
    "shared storage only with pyhudi.write.lock.single.process=true), or the dotted name of a Python "
    "class implementing pyhudi.transaction.lock.LockProvider. Unset, pyhudi uses the file-system lock on "
    "local paths, the storage-based lock on S3, and the in-process lock where no file can be created "
    "exclusively (gs://, abfs://, hdfs://: one writer at a time); Hudi's ZooKeeper, DynamoDB and Hive "
    "metastore locks need a JVM.")
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
LOCK_STORAGE_VALIDITY_S = option(
    "hoodie.write.lock.storage.validity.timeout.secs", 300,
    "Storage-based lock: seconds each lease is valid for (validUntil = the store's clock + this). The "
    "holder renews it every hoodie.write.lock.storage.renew.interval.secs; a holder that dies leaves a "
    "lease others take over once it ran out. At least 10 and at least 10 x the renew interval.",
    parse_positive_int)
LOCK_STORAGE_RENEW_S = option(
    "hoodie.write.lock.storage.renew.interval.secs", 30,
    "Storage-based lock: seconds between two renewals of the held lease (at least 1).",
    parse_positive_int, aliases=("hoodie.write.lock.storage.heartbeat.poll.secs",))
LOCK_SINGLE_PROCESS = option(
    "pyhudi.write.lock.single.process", False,
    "pyhudi only: the promise that every writer of the table runs in this one process, which lets "
    "hoodie.write.lock.provider=InProcessLockProvider serve a table on shared storage (S3, gs://, ...). "
    "Without it the in-process lock is refused there: it cannot exclude another process, and writers "
    "in two processes would lose each other's commits.", parse_bool)


def storage_lock_timing(validity: Any, renew: Any) -> tuple[int, int]:
    """The storage-based lock's (lease, renew interval) in seconds, checked as Hudi's
    ``StorageBasedLockConfig`` checks them: a lease shorter than ten renewals would lapse after a
    few missed ones, and one under 10 s would lapse in an ordinary pause of the holder."""
    lease, every = LOCK_STORAGE_VALIDITY_S.parse(validity), LOCK_STORAGE_RENEW_S.parse(renew)
    if lease < 10 * every:
        raise HudiConfigError(
            f"{LOCK_STORAGE_VALIDITY_S.key}={lease} must be at least 10 x {LOCK_STORAGE_RENEW_S.key} "
            f"(= {10 * every}): raise the first or lower the second")
    if lease < 10:
        raise HudiConfigError(f"{LOCK_STORAGE_VALIDITY_S.key}={lease} must be at least 10 seconds")
    return lease, every


def _check_storage_lock_timing(resolved: dict[str, Any]) -> None:
    """Check the storage-based lock's timing as soon as either key is given, before anything runs."""
    keys = (LOCK_STORAGE_VALIDITY_S.key, LOCK_STORAGE_RENEW_S.key)
    if any(resolved.get(k) is not None for k in keys):
        storage_lock_timing(*(resolved.get(k) if resolved.get(k) is not None else o.default
                              for k, o in zip(keys, (LOCK_STORAGE_VALIDITY_S, LOCK_STORAGE_RENEW_S))))


DERIVED.append(_check_storage_lock_timing)


CONFLICT_RESOLUTION_STRATEGY = option(
    "hoodie.write.lock.conflict.resolution.strategy",
    "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy",
    "How a commit decides it conflicts: Simple... (file groups both wrote) or BucketIndex... (the same "
    "bucket of a partition, the default with hoodie.index.type=BUCKET).",
    class_choice("conflict resolution strategy", CONFLICT_STRATEGIES))


def _clustering_filter(value: Any) -> str:
    text = choice("NONE", "RECENT_DAYS", "SELECTED_PARTITIONS", "DAY_ROLLING")(value)
    if text == "DAY_ROLLING":
        raise ValueError("DAY_ROLLING is not supported; use NONE, RECENT_DAYS or SELECTED_PARTITIONS")
    return text
