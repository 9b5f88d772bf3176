"""Tuning advice read from the table's own history: each piece names the figures behind it and
the exact option to set (or command to run).

A rule speaks only when the table shows the problem: the figures come from the commit metadata,
the timeline and the latest file slices (:mod:`pyhudi.report.facts`), never from guesses about
the data. The thresholds are module constants, so a test can build a table on either side of each.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass

from pyhudi import config as C
from pyhudi.report.facts import TableFacts

MB = 1024 * 1024
#: range pruning that leaves more than this share of the candidate files is no pruning
PRUNING_USELESS_SHARE = 0.9
#: lookups with fewer candidate files than this say nothing about pruning
PRUNING_MIN_FILES = 4
#: writes needed before an index or amplification rule speaks
MIN_WRITES = 3
#: a partition holding this many small base files wants clustering
CLUSTERING_MIN_SMALL_FILES = 10
#: a file slice whose logs exceed this many times its base wants compaction
LOG_TO_BASE_LIMIT = 1.0
#: a bulk insert that made this many files, most of them small, wanted less parallelism
BULK_INSERT_MIN_FILES = 8
#: insert-only writes amplifying more than this rewrite small files for few records
INSERT_AMPLIFICATION_LIMIT = 20.0
#: incremental readers should be able to fall this far behind
RETENTION_TARGET_HOURS = 24.0


@dataclass(frozen=True)
class Advice:
    rule: str
    finding: str  # what the table shows, with its figures
    action: str  # the option to set or the command to run


def advise(facts: TableFacts) -> list[Advice]:
    out: list[Advice] = []
    for rule in (_index, _small_file_limit, _clustering, _compaction, _bulk_insert, _retention):
        advice = rule(facts)
        if advice is not None:
            out.append(advice)
    return out


def _index(facts: TableFacts) -> Advice | None:
    lookups = [w for w in facts.ingests() if w.index and str(w.index.get("index_type", "")).endswith("BLOOM")
               and (w.index.get("files_in_partitions") or 0) >= PRUNING_MIN_FILES
               and w.index.get("files_after_range_pruning") is not None][-10:]
    if len(lookups) < MIN_WRITES:
        return None
    shares = [w.index["files_after_range_pruning"] / w.index["files_in_partitions"] for w in lookups if w.index]
    share = statistics.mean(shares)
    if share <= PRUNING_USELESS_SHARE:
        return None
    files = statistics.mean(w.index["files_in_partitions"] for w in lookups if w.index)
    return Advice(
        "index",
        f"key-range pruning kept {share:.0%} of the candidate files over the last {len(lookups)} upserts "
        f"({files:.0f} files per lookup on average): the record keys are not ordered with time, so every "
        "upsert checks the bloom filter of nearly every file",
        "set hoodie.index.type=RECORD_INDEX (the metadata table maps each key to its file group), or "
        "hoodie.index.type=BUCKET with hoodie.bucket.index.num.buckets sized for the largest partition")


def _small_file_limit(facts: TableFacts) -> Advice | None:
    based = [s for s in facts.slices if s.base_bytes]
    default_limit = C.PARQUET_SMALL_FILE_LIMIT.default or 0
    if facts.small_file_limit == 0 and len(based) >= 5:
        small = [s for s in based if s.base_bytes < default_limit]
        inserting = [w for w in facts.ingests() if w.inserts]
        if len(small) >= 0.2 * len(based) and inserting:
            return Advice(
                "small-file-limit",
                f"hoodie.parquet.small.file.limit is 0: inserts never fill existing files, and {len(small)} of "
                f"{len(based)} base files are under {default_limit // MB} MB",
                f"set hoodie.parquet.small.file.limit={default_limit} (Hudi's default), so inserts top small files up")
    inserts_only = [w for w in facts.ingests() if w.inserts and not w.updates and not w.deletes
                    and w.amplification][-10:]
    if facts.small_file_limit and len(inserts_only) >= MIN_WRITES:
        amp = statistics.median(w.amplification or 0 for w in inserts_only)
        if amp > INSERT_AMPLIFICATION_LIMIT:
            lower = max(facts.small_file_limit // 4, MB)
            return Advice(
                "small-file-limit",
                f"insert-only writes rewrite {amp:.0f} bytes per incoming byte (median of the last "
                f"{len(inserts_only)}): each batch is small next to the small files it tops up "
                f"(hoodie.parquet.small.file.limit={facts.small_file_limit})",
                f"set hoodie.parquet.small.file.limit={lower} (or larger batches), and cluster the small files later")
    return None


def _clustering(facts: TableFacts) -> Advice | None:
    if facts.setting(C.INDEX_TYPE) == "BUCKET":  # many small bucket files are by design; not clustered
        return None
    limit = facts.small_file_limit or (C.PARQUET_SMALL_FILE_LIMIT.default or 0)
    small = Counter(s.partition for s in facts.slices if s.base_bytes and s.base_bytes < limit)
    crowded = {p: n for p, n in small.items() if n >= CLUSTERING_MIN_SMALL_FILES}
    if not crowded:
        return None
    worst = sorted(crowded.items(), key=lambda kv: -kv[1])[:3]
    names = ", ".join(f"{p or '(root)'} ({n})" for p, n in worst)
    return Advice(
        "clustering",
        f"{len(crowded)} partitions hold {CLUSTERING_MIN_SMALL_FILES} or more base files under {limit // MB} MB: "
        f"{names}",
        f"run `pyhudi clustering run --path {facts.path}` (add --option "
        "hoodie.clustering.plan.strategy.sort.columns=<query columns>), or write with "
        "hoodie.clustering.inline=true and hoodie.clustering.inline.max.commits=4")


def _compaction(facts: TableFacts) -> Advice | None:
    if facts.table_type != "MERGE_ON_READ":
        return None
    heavy = [s for s in facts.slices if s.log_to_base is not None and s.log_to_base > LOG_TO_BASE_LIMIT]
    if not heavy:
        return None
    worst = max(s.log_to_base or 0 for s in heavy)
    every = facts.setting(C.COMPACT_INLINE_MAX_DELTA_COMMITS)
    return Advice(
        "compaction",
        f"{len(heavy)} file slices carry more log bytes than {LOG_TO_BASE_LIMIT:g} x their base file (up to "
        f"{worst:.1f} x): snapshot reads merge them record by record",
        f"run `pyhudi compaction run --path {facts.path}`, or compact sooner: "
        f"hoodie.compact.inline=true with hoodie.compact.inline.max.delta.commits={max(1, every // 2)} (now {every})")


def _bulk_insert(facts: TableFacts) -> Advice | None:
    """A load that made many more files than its bytes need at the target file size."""
    if facts.setting(C.INDEX_TYPE) == "BUCKET":  # the bucket count decides the files
        return None
    loads = [w for w in facts.writes() if w.operation == "BULK_INSERT" and w.files_created >= BULK_INSERT_MIN_FILES]
    limit = facts.small_file_limit or (C.PARQUET_SMALL_FILE_LIMIT.default or 0)
    for load in reversed(loads):
        per_file = load.bytes_written / load.files_created
        needed = max(load.partitions, math.ceil(load.bytes_written / facts.max_file_size))
        if per_file >= limit or load.files_created < 2 * needed:
            continue
        finding = (f"bulk insert {load.timestamp} wrote {load.files_created} files of {per_file / MB:.2f} MB on "
                   f"average ({load.bytes_written / MB:.1f} MB in {load.partitions} partitions, where {needed} "
                   f"file(s) of {facts.max_file_size // MB} MB would do)")
        ran_with = load.options.get(C.PARQUET_MAX_FILE_SIZE.key)
        if load.options and ran_with and int(ran_with) < facts.max_file_size:  # pyhudi sizes loads by bytes
            action = (f"the load ran with {C.PARQUET_MAX_FILE_SIZE.key}={ran_with}: run loads with the table's "
                      f"target ({facts.max_file_size}), and cluster the files it made (`pyhudi clustering run`)")
        elif load.options:
            continue
        else:  # Apache Hudi writes one file per bulk-insert task
            action = (f"set {C.BULKINSERT_PARALLELISM.key}={needed} for such loads, and cluster the files it made "
                      "(`pyhudi clustering run`)")
        return Advice("bulk-insert-parallelism", finding, action)
    return None


def _retention(facts: TableFacts) -> Advice | None:
    if not facts.options:  # the cleaner's settings are known from pyhudi's writes only
        return None
    if facts.setting(C.CLEAN_POLICY) != "KEEP_LATEST_COMMITS" or not any(i.action == "clean" for i in facts.instants):
        return None
    times = [w.requested_at for w in facts.ingests()]
    if len(times) < MIN_WRITES:
        return None
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:])]
    cadence = statistics.median(gaps)
    retained = facts.setting(C.CLEAN_COMMITS_RETAINED)
    window_h = retained * cadence / 3600
    if window_h >= RETENTION_TARGET_HOURS or cadence <= 0:
        return None
    wanted = math.ceil(RETENTION_TARGET_HOURS * 3600 / cadence)
    return Advice(
        "retention",
        f"the cleaner keeps the last {retained} commits and a write lands every {_duration(cadence)} (median): an "
        f"incremental reader or time-travel query more than {_duration(window_h * 3600)} behind finds its files "
        "cleaned",
        f"set hoodie.clean.policy=KEEP_LATEST_BY_HOURS with hoodie.clean.hours.retained="
        f"{RETENTION_TARGET_HOURS:g}, or hoodie.clean.commits.retained={wanted}")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def advice_text(advice: list[Advice]) -> str:
    if not advice:
        return "no advice: nothing in this table's history calls for a change"
    lines = []
    for n, a in enumerate(advice, 1):
        lines += [f"{n}. [{a.rule}] {a.finding}", f"   -> {a.action}"]
    return "\n".join(lines)
