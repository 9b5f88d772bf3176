"""The services a write runs once it committed, registered as hooks on its commit point.

After a write Hudi runs, in this order: inline compaction (merge-on-read), inline clustering,
then clean and archival. They are post-commit hooks of the write's
:class:`~pyhudi.commit.point.CommitPoint` because they need Spark and the service policies, which
the commit package must not import. The write is durable when they run: a failing service is
reported in the write's figures (``service_error``), never raised, so the caller never retries a
committed write.

The catalog sync (:func:`catalog_sync`) comes last and is no hook: the writer calls it once it let
go of the table lock, so a slow catalog keeps no other writer waiting; its failures are reported
the same way (``sync_error``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from pyspark.sql import SparkSession

from pyhudi import config as C
from pyhudi.commit.point import CommitPoint
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.plans.clean import CleanResult
from pyhudi.services.archival import archive
from pyhudi.services.clean import clean
from pyhudi.spark.clustering_job import inline_clustering
from pyhudi.spark.compaction_job import inline_compaction
from pyhudi.storage import Storage
from pyhudi.sync.tool import sync_catalogs
from pyhudi.table.table import HudiTable

log = logging.getLogger("pyhudi")


class AsyncClean:
    """``hoodie.clean.async``: the write's clean on a thread of its own, started once the write
    requested its instant (:meth:`start`) so that it runs while the write writes, and waited for
    after the commit (:meth:`results`), before archival: Hudi's async cleaner service, within one
    write, under optimistic concurrency control (where the write holds the table lock only to start
    and to commit).

    The clean works on a table handle of its own and takes the table lock as an inline clean does,
    so the write's commit and the clean's instant take turns. It removes only file slices older
    than those the cleaning policy retains, never the latest slice a running write merges into."""

    def __init__(self, table: HudiTable, cfg: HudiConfig) -> None:
        self._table, self._cfg = table, cfg
        self._pool: ThreadPoolExecutor | None = None
        self._done: Future[list[CleanResult]] | None = None

    def start(self) -> None:
        storage, cfg = self._table.storage, self._cfg
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pyhudi-async-clean")
        self._done = self._pool.submit(lambda: clean(HudiTable(storage), cfg))

    def results(self) -> list[CleanResult]:
        """The clean's results once it finished (its error raised); the clean of now where it was
        never started."""
        if self._done is None:
            return clean(self._table, self._cfg)
        try:
            return self._done.result()
        finally:
            self._done = None  # (its error is the caller's now)
            self.stop()

    def stop(self) -> None:
        """Let the clean finish (a write that failed waits for it too, so that no thread of it
        outlives the write); its error, if any, is left to :meth:`results`, and logged here where
        nobody will ask for them."""
        if self._pool is None:
            return
        self._pool.shutdown(wait=True)
        self._pool = None
        error = self._done.exception() if self._done is not None else None
        if error is not None:
            log.warning("the clean beside the write failed: %s", error, exc_info=error)


def register_services(point: CommitPoint, spark: SparkSession, table: HudiTable, cfg: HudiConfig, *,
                      replace: str | None) -> AsyncClean | None:
    """Add the write's post-commit services to ``point``: compaction (merge-on-read) and
    clustering when inline, never after a replace operation; then clean and archival. Returns the
    clean to start once the write requested its instant where it runs alongside the write
    (``hoodie.clean.async``)."""
    if table.table_type == P.MERGE_ON_READ and not replace:
        point.add_hook(lambda _instant: inline_service("compaction", lambda: inline_compaction(spark, table, cfg)))
    if not replace and (cfg.get(C.CLUSTERING_INLINE) or cfg.get(C.CLUSTERING_SCHEDULE_INLINE)):
        point.add_hook(lambda _instant: inline_service("clustering", lambda: inline_clustering(spark, table, cfg)))
    cleaning = None
    if cfg.get(C.CLEAN_ASYNC) and cfg.get(C.CLEAN_AUTOMATIC):  # (under OCC: write_options.check_async_clean)
        cleaning = AsyncClean(table, cfg)
    point.add_hook(lambda _instant: timed_table_services(table, cfg, cleaning=cleaning))
    return cleaning


def inline_service(name: str, run: Callable[[], list[str]]) -> Mapping[str, Any]:
    """Run an inline service after the commit; its instants as ``"<name>s"`` (compactions,
    clusterings), or its failure as ``service_error``."""
    try:
        done = run()
    except Exception as exc:
        log.warning("the write committed, but the inline %s after it failed: %s", name, exc, exc_info=True)
        return {"service_error": str(exc)}
    return {f"{name}s": done} if done else {}


def timed_table_services(table: HudiTable, cfg: HudiConfig, *,
                         cleaning: AsyncClean | None = None) -> Mapping[str, Any]:
    """:func:`table_services` and the seconds they took (``services_s``: with an async clean, the
    wait for it)."""
    started = time.monotonic()
    out = table_services(table, cfg, cleaning=cleaning)
    out["services_s"] = round(time.monotonic() - started, 3)
    return out


def table_services(table: HudiTable, cfg: HudiConfig, *, cleaning: AsyncClean | None = None) -> dict[str, Any]:
    """Hudi's post-commit services, in Hudi's order: clean (or the wait for ``cleaning``), then archive."""
    out: dict[str, Any] = {}
    try:
        if cfg.get(C.CLEAN_AUTOMATIC):
            cleaned = cleaning.results() if cleaning is not None else clean(table, cfg)
            if cleaned:
                out["cleans"] = [c.instant for c in cleaned]
                out["files_cleaned"] = sum(c.files_deleted for c in cleaned)
        if cfg.get(C.ARCHIVE_AUTOMATIC):
            archived = archive(table, cfg)
            if archived:
                out["archived_instants"] = len(archived)
    except Exception as exc:  # the commit is durable: report, never make the caller retry the write
        log.warning("the write committed, but a table service after it failed: %s", exc, exc_info=True)
        out["service_error"] = str(exc)
    return out


def catalog_sync(spark: SparkSession, storage: Storage, cfg: HudiConfig) -> Mapping[str, Any]:
    """Sync the table to its catalogs after the write and its services (Hudi's meta sync): the
    reports as ``catalog_sync``, a failure also as ``sync_error`` (never raised: the write is
    committed, and the next sync catches the catalog up). The session's cached view of each synced
    table is refreshed, as Hudi's Spark writer does, so its next query sees the new commit."""
    try:
        reports = sync_catalogs(HudiTable(storage), cfg, spark_version=spark.version)
    except Exception as exc:  # the table unreadable just now, or sync settings that do not fit it
        log.warning("the write committed, but its catalog sync failed: %s", exc, exc_info=True)
        return {"sync_error": str(exc)}
    out: dict[str, Any] = {"catalog_sync": [r.as_dict() for r in reports]}
    errors = [f"{r.catalog}: {r.error}" for r in reports if r.error]
    if errors:
        out["sync_error"] = "; ".join(errors)
    for name in {t for r in reports if not r.error for t in r.tables}:
        try:
            if spark.catalog.tableExists(name):
                spark.catalog.refreshTable(name)
        except Exception:  # noqa: S110 - a session without that catalog has nothing cached to refresh
            pass
    return out
