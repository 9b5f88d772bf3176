"""Table services on a background thread beside a streaming writer.

Apache Hudi's streaming sink runs compaction and clustering asynchronously
(``hoodie.datasource.compaction.async.enable``, ``hoodie.clustering.async.enabled``): the
micro-batches go on committing while a plan executes. :class:`BackgroundServices` is that service:
one daemon thread per sink taking plans from a queue and running them one at a time on the sink's
SparkSession (Spark schedules the jobs of both threads side by side). A plan that fails is reported
to the sink, which raises it at its next micro-batch; a plan that another process completed, undid,
or is running now is not a failure.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

from pyhudi.config import HudiConfig
from pyhudi.errors import HudiClusteringError, HudiCompactionError, HudiError
from pyhudi.plans.clustering import pending_clusterings
from pyhudi.plans.compaction import pending_compactions
from pyhudi.spark import clustering_job, compaction_job
from pyhudi.spark.storage_conf import table_storage
from pyhudi.table.table import HudiTable
from pyhudi.transaction.heartbeat import HeartbeatPolicy, is_alive

log = logging.getLogger("pyhudi")

COMPACTION = "compaction"
CLUSTERING = "clustering"


class BackgroundServices:
    """One background thread running queued compaction and clustering plans of one table."""

    def __init__(self, spark: SparkSession, path: str, options: Mapping[str, Any]) -> None:
        self.spark, self.path, self.options = spark, path, dict(options)
        self.storage = table_storage(spark, path, options)
        self.queue: queue.Queue[tuple[str, str]] = queue.Queue()
        self.failure: tuple[str, str, BaseException] | None = None
        self.thread = threading.Thread(target=self._loop, name=f"pyhudi-services {path}", daemon=True)
        self.thread.start()

    def submit(self, kind: str, instant: str) -> None:
        self.queue.put((kind, instant))

    def busy(self) -> bool:
        return self.queue.unfinished_tasks > 0

    def wait(self, timeout_s: float | None = None) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.busy() and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.05)

    def raise_failure(self) -> None:
        """Raise the error of a plan that failed since the last call (once)."""
        if self.failure is None:
            return
        kind, instant, exc = self.failure
        self.failure = None
        error: type[HudiError] = HudiCompactionError if kind == COMPACTION else HudiClusteringError
        raise error(f"the background {kind} {instant} of {self.path} failed: {exc}. The micro-batches before it are "
                    f"committed; restart the query (the next writer re-attempts the plan) or run `pyhudi {kind} run`"
                    ) from exc

    def _run(self, kind: str, instant: str) -> None:
        if kind == COMPACTION:
            compaction_job.run_compaction(self.spark, HudiTable(self.storage), instant, self.options)
        else:
            clustering_job.run_clustering(self.spark, HudiTable(self.storage), instant, self.options)

    def _loop(self) -> None:
        while True:
            kind, instant = self.queue.get()
            try:
                self._run(kind, instant)
                log.info("background %s %s of %s completed", kind, instant, self.path)
            except BaseException as exc:
                why = self._not_a_failure(kind, instant)
                if why is not None:
                    log.info("background %s %s of %s did not run: %s", kind, instant, self.path, why)
                else:
                    log.warning("background %s %s of %s failed: %s", kind, instant, self.path, exc, exc_info=True)
                    self.failure = (kind, instant, exc)
            finally:
                self.queue.task_done()

    def _not_a_failure(self, kind: str, instant: str) -> str | None:
        """Why a plan that raised is fine after all: done or undone by another process (a writer
        rolled a conflicting clustering back), or run by one now (the sink queues it again once
        that one's heartbeat expires)."""
        table = HudiTable(self.storage)
        timeline = table.timeline
        if timeline.is_completed(instant):
            return "another process completed it"
        pending = pending_compactions(timeline) if kind == COMPACTION else [i for i, _ in pending_clusterings(timeline)]
        if instant not in {i.timestamp for i in pending}:
            return "it is no longer on the timeline"
        if is_alive(table.storage, instant, HeartbeatPolicy.of(HudiConfig.of(self.options))):
            return "another process runs it"
        return None
