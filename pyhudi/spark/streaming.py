"""Structured Streaming: micro-batches written exactly once, and the table read as a stream of its commits.

**Sink.** :func:`write_stream` runs a streaming query whose every micro-batch is one
:func:`pyhudi.write` (through ``foreachBatch``, so the write keeps its shuffles and index lookups).
Each commit records the batch id under ``_hudi_streaming_sink_checkpoint`` in its extra metadata
(:mod:`pyhudi.timeline.checkpoint`), as Apache Hudi's streaming sink does. A query that dies
after a commit but before Spark marked the batch done replays the batch on restart; the sink finds
the batch id in the table and skips it. A query that dies during a write leaves an incomplete
instant that the next write rolls back once its heartbeat expires (the batch is then written
again), so every batch lands once.

On a merge-on-read table the sink compacts asynchronously, as Hudi's does: when
``hoodie.compact.inline.max.delta.commits`` is reached after a batch it schedules a compaction and
runs it on a background thread (:mod:`pyhudi.spark.background`) while the next batches write their
log files into the new slices. With ``hoodie.clustering.async.enabled`` it schedules a clustering
every ``hoodie.clustering.async.max.commits`` commits and runs it the same way; a batch that updates
file groups of the running plan (refused by Hudi's default update strategy) waits for it, then writes.

**Source.** :class:`CommitStream` hands each new range of completed commits to a function as an
incremental pull, keeping its offsets in a checkpoint folder so that a restart goes on where it
stopped; it works on every PySpark. On PySpark 4, ``spark.readStream.format("hudi")`` does the same
inside Spark (:mod:`pyhudi.spark.datasource`). Both stop before a write that is still pending while
later ones completed (it will commit records older than theirs).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.errors import (
    HudiClusteringUpdateError,
    HudiConcurrentWriteError,
    HudiConfigError,
    HudiKeyError,
    HudiSchemaError,
    HudiTableMismatchError,
    HudiUnsupportedError,
)
from pyhudi.plans.clustering import pending_clusterings
from pyhudi.plans.compaction import pending_compactions
from pyhudi.services.clustering import clustering_due, schedule_clustering
from pyhudi.services.compaction import compaction_due, schedule_compaction
from pyhudi.spark.background import CLUSTERING, COMPACTION, BackgroundServices
from pyhudi.spark.reader import read
from pyhudi.spark.storage_conf import table_storage
from pyhudi.spark.writer import write
from pyhudi.table.incremental import latest_offset, start_offset
from pyhudi.table.table import HudiTable
from pyhudi.timeline.checkpoint import SINK_CHECKPOINT_KEY, checkpoint_value, last_batch_id
from pyhudi.transaction.heartbeat import HeartbeatPolicy, is_alive

log = logging.getLogger("pyhudi")

#: batches whose offset and commit files CommitStream keeps
_BATCHES_KEPT = 100
#: errors in the input or the options: another attempt would fail the same way
_NOT_RETRIED = (HudiConfigError, HudiKeyError, HudiSchemaError, HudiTableMismatchError, HudiUnsupportedError)


@dataclass(frozen=True)
class BatchReport:
    """What the sink did with one micro-batch."""

    batch_id: int
    instant_time: str | None  # None when skipped, or failed and ignored
    seconds: float
    skipped: bool = False
    compaction: str | None = None  # compaction scheduled after the batch
    clustering: str | None = None  # clustering scheduled after the batch


class HudiStreamSink:
    """A ``foreachBatch`` function upserting each micro-batch into the table at ``path``.

    ``df.writeStream.foreachBatch(HudiStreamSink(path, options)).option("checkpointLocation", ...)``
    is what :func:`write_stream` starts. ``options`` are :func:`pyhudi.write`'s, plus the
    ``hoodie.datasource.write.streaming.*`` options (checkpoint identifier, retries, failed batches)
    and ``hoodie.datasource.compaction.async.enable`` / ``hoodie.clustering.async.*``.
    """

    def __init__(self, path: str, options: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self.options = dict(options or {})
        self.storage = table_storage(None, path, self.options)
        cfg = HudiConfig.of(self.options)
        self.identifier = cfg.get(C.STREAMING_CHECKPOINT_IDENTIFIER)
        self.attempts = cfg.get(C.STREAMING_RETRY_COUNT)
        self.retry_pause_s = cfg.get(C.STREAMING_RETRY_INTERVAL_MS) / 1000
        self.ignore_failed = cfg.get(C.STREAMING_IGNORE_FAILED_BATCH)
        self.no_compaction = cfg.get(C.STREAMING_DISABLE_COMPACTION)
        self.async_compaction = cfg.get(C.ASYNC_COMPACT_ENABLE) and not self.no_compaction \
            and not cfg.get(C.COMPACT_INLINE)
        if self.no_compaction or self.async_compaction:  # none, or scheduled by this sink
            self.options[C.COMPACT_INLINE.key] = "false"
            self.options[C.COMPACT_SCHEDULE_INLINE.key] = "false"
        self.async_clustering = cfg.get(C.CLUSTERING_ASYNC_ENABLED)
        if self.async_clustering:  # scheduled by this sink
            self.options[C.CLUSTERING_INLINE.key] = "false"
            self.options[C.CLUSTERING_SCHEDULE_INLINE.key] = "false"
        self.cfg = HudiConfig.of(self.options)
        self.reports: list[BatchReport] = []
        self._services: BackgroundServices | None = None
        self._last_clustering = ""  # the newest clustering this sink scheduled

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if self._services is not None:
            self._services.raise_failure()
        started = time.monotonic()
        committed = self.committed_batch()
        if committed is not None and batch_id <= committed:
            log.warning("micro-batch %d: skipped, the table at %s holds it already (writer %r committed batches up "
                        "to %d; a new checkpoint location needs a new "
                        "hoodie.datasource.write.streaming.checkpoint.identifier)",
                        batch_id, self.path, self.identifier, committed)
            self.reports.append(BatchReport(batch_id, None, time.monotonic() - started, skipped=True))
            return
        instant = self._write(df, batch_id)
        compaction = clustering = None
        if instant and (self.async_compaction or self.async_clustering) and not self.services(df.sparkSession).busy():
            compaction = self._compact_async() if self.async_compaction else None
            clustering = self._cluster_async() if self.async_clustering else None
        self.reports.append(BatchReport(batch_id, instant, time.monotonic() - started, compaction=compaction,
                                        clustering=clustering))

    def _write(self, df: DataFrame, batch_id: int) -> str | None:
        """Write the batch, retrying; its instant, or None when it failed and is ignored."""
        # a write that died with its process holds the table until its heartbeat expires (the next
        # write then rolls it back): a restarted query waits that long before counting failures
        waits_until = time.monotonic() + HeartbeatPolicy.of(self.cfg).max_age_s + self.retry_pause_s
        pause, attempt = self.retry_pause_s, 0
        while True:
            try:
                return write(df, self.path, self.options,
                             extra_metadata={SINK_CHECKPOINT_KEY: checkpoint_value(self.identifier, batch_id)}
                             ).instant_time
            except _NOT_RETRIED:
                raise
            except Exception as exc:
                if isinstance(exc, HudiClusteringUpdateError) and self._services is not None \
                        and self._services.busy():  # our clustering rewrites what the batch updates
                    log.warning("micro-batch %d waits for the background clustering: %s", batch_id, exc)
                    self._services.wait()
                    continue
                committed = self.committed_batch()
                if committed is not None and batch_id <= committed:  # it failed after its commit
                    log.warning("micro-batch %d committed although its write reported: %s", batch_id, exc)
                    return None
                if isinstance(exc, HudiConcurrentWriteError) and time.monotonic() < waits_until:
                    log.warning("micro-batch %d waits for an earlier write to finish or expire: %s", batch_id, exc)
                    time.sleep(min(self.retry_pause_s or 1.0, max(0.1, waits_until - time.monotonic())))
                    continue
                attempt += 1
                if attempt >= self.attempts:
                    if not self.ignore_failed:
                        raise
                    log.error("micro-batch %d failed %d times and is dropped "
                              "(hoodie.datasource.write.streaming.ignore.failed.batch=true): %s",
                              batch_id, attempt, exc)
                    return None
                log.warning("micro-batch %d failed (attempt %d of %d), retrying in %.1f s: %s",
                            batch_id, attempt, self.attempts, pause, exc)
                time.sleep(pause)
                pause *= 2

    def committed_batch(self) -> int | None:
        """The newest batch id the table holds for this sink's identifier."""
        if not HudiTable.exists(self.storage):
            return None
        return last_batch_id(HudiTable(self.storage).timeline, self.identifier)

    def services(self, spark: SparkSession) -> BackgroundServices:
        if self._services is None:
            self._services = BackgroundServices(spark, self.path, self.options)
        return self._services

    def _compact_async(self) -> str | None:
        """Compactions of a merge-on-read table, when ``hoodie.compact.inline.max.delta.commits`` is due."""
        table = HudiTable(self.storage)
        if table.table_type != P.MERGE_ON_READ:
            return None
        return self._queue(COMPACTION, table, [i.timestamp for i in pending_compactions(table.timeline)],
                           compaction_due(table.timeline, self.cfg), lambda: schedule_compaction(table, self.cfg))

    def _cluster_async(self) -> str | None:
        """Clusterings, once ``hoodie.clustering.async.max.commits`` commits completed since the last
        (a plan of ours that a conflict rolled back counts: the next waits as long again)."""
        table = HudiTable(self.storage)
        due = clustering_due(table.timeline, self.cfg, max_commits=self.cfg.get(C.CLUSTERING_ASYNC_MAX_COMMITS),
                             since=self._last_clustering)
        scheduled = self._queue(CLUSTERING, table, [i.timestamp for i, _ in pending_clusterings(table.timeline)],
                                due, lambda: schedule_clustering(table, self.cfg))
        self._last_clustering = scheduled or self._last_clustering
        return scheduled

    def _queue(self, kind: str, table: HudiTable, pending: list[str], due: bool,
               schedule: Callable[[], str | None]) -> str | None:
        """Queue the pending plans of ``kind`` nobody runs (left by a crashed run, or scheduled by
        another writer), else schedule a new one when ``due``; the new plan's instant. Called while
        the service thread is idle."""
        assert self._services is not None
        policy = HeartbeatPolicy.of(self.cfg)
        idle = [t for t in pending if not is_alive(table.storage, t, policy)]
        for instant in idle:
            self._services.submit(kind, instant)
        if idle or not due:
            return None
        scheduled = schedule()
        if scheduled is not None:
            self._services.submit(kind, scheduled)
        return scheduled

    def wait_for_services(self, timeout_s: float | None = None) -> None:
        """Block until the queued compactions and clusterings have run (raising the error of one that failed)."""
        if self._services is not None:
            self._services.wait(timeout_s)
            self._services.raise_failure()


def write_stream(stream_df: DataFrame, path: str, options: Mapping[str, Any] | None = None, *,
                 checkpoint_location: str, trigger: Mapping[str, Any] | None = None,
                 query_name: str | None = None) -> StreamingQuery:
    """Start a streaming query writing every micro-batch of ``stream_df`` to the table at ``path``.

    ``checkpoint_location`` is Spark's (offsets of the input); the table's commits hold the batch
    ids (see :class:`HudiStreamSink`). ``trigger`` takes ``DataStreamWriter.trigger``'s keywords,
    e.g. ``{"processingTime": "10 seconds"}`` or ``{"availableNow": True}``.
    """
    if not stream_df.isStreaming:
        raise HudiConfigError("write_stream needs a streaming DataFrame (spark.readStream...); write a batch "
                              "DataFrame with pyhudi.write")
    sink = HudiStreamSink(path, options)
    writer = stream_df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint_location)
    if trigger:
        writer = writer.trigger(**trigger)
    if query_name:
        writer = writer.queryName(query_name)
    return writer.start()


class CommitStream:
    """The table at ``path`` as a stream of its commits, polled: each batch is an incremental pull
    of the commits completed since the previous one, handed to ``func(df, batch_id)``.

    The checkpoint folder keeps, as Spark's micro-batch engine does, an offset file per batch
    written before ``func`` runs and a commit file written after it returns. A restart re-runs a
    batch whose commit file is missing with the same range and batch id (so an idempotent ``func``,
    such as :class:`HudiStreamSink`, makes the whole exactly once), then goes on from its end.
    The first batch starts at ``hoodie.datasource.streaming.startOffset``.
    """

    def __init__(self, spark: SparkSession, path: str, options: Mapping[str, Any] | None = None, *,
                 checkpoint_location: str) -> None:
        self.spark, self.path = spark, path
        self.options = dict(options or {})
        self.storage = table_storage(spark, path, self.options)
        self.checkpoint = table_storage(spark, checkpoint_location, self.options)

    def process_available(self, func: Callable[[DataFrame, int], None], *, max_batches: int | None = None) -> int:
        """Run batches until the stream has caught up with the table; returns how many ran."""
        done = 0
        while max_batches is None or done < max_batches:
            batch = self.next_batch()
            if batch is None:
                break
            batch_id, begin, end = batch
            df = self.batch_frame(begin, end)
            func(df, batch_id)
            self.checkpoint.write_bytes(f"commits/{batch_id}", b"{}")
            self.checkpoint.delete(f"offsets/{batch_id - _BATCHES_KEPT}")  # the last 100 stay, as in Spark
            self.checkpoint.delete(f"commits/{batch_id - _BATCHES_KEPT}")
            done += 1
        return done

    def run(self, func: Callable[[DataFrame, int], None], *, interval_s: float = 10.0,
            stop: threading.Event | None = None) -> None:
        """Poll every ``interval_s`` until ``stop`` is set."""
        stop = stop or threading.Event()
        while not stop.is_set():
            self.process_available(func)
            stop.wait(interval_s)

    def next_batch(self) -> tuple[int, str, str] | None:
        """(batch id, begin exclusive, end inclusive) of the batch to run, recorded before it runs."""
        ids = sorted(int(f.name) for f in self.checkpoint.list_files("offsets") if f.name.isdigit())
        if ids and not self.checkpoint.exists(f"commits/{ids[-1]}"):
            recorded = json.loads(self.checkpoint.read_bytes(f"offsets/{ids[-1]}"))
            return ids[-1], recorded["begin"], recorded["end"]
        table = HudiTable(self.storage)
        if ids:
            begin = json.loads(self.checkpoint.read_bytes(f"offsets/{ids[-1]}"))["end"]
        elif self.checkpoint.exists("start"):
            begin = json.loads(self.checkpoint.read_bytes("start"))["begin"]
        else:  # a new stream: fix where it starts, even if nothing follows yet
            begin = start_offset(table, HudiConfig.of(self.options).get(C.STREAMING_START_OFFSET))
            self.checkpoint.write_bytes("start", json.dumps({"begin": begin}).encode())
        end = latest_offset(table)
        if end <= begin:
            return None
        batch_id = ids[-1] + 1 if ids else 0
        self.checkpoint.write_bytes(f"offsets/{batch_id}", json.dumps({"begin": begin, "end": end}).encode())
        return batch_id, begin, end

    def batch_frame(self, begin: str, end: str) -> DataFrame:
        return read(self.spark, self.path, {**self.options, C.QUERY_TYPE.key: "incremental",
                                            C.BEGIN_INSTANT.key: begin, C.END_INSTANT.key: end,
                                            C.TIMELINE_HOLES_POLICY.key: "BLOCK"})
