"""pyhudi: Apache Hudi tables (format version 6) written and read with PySpark.

    import pyhudi
    spark = pyhudi.spark_session()
    res = pyhudi.write(df, "/data/drones", {...hoodie.* options...})
    df = pyhudi.read(spark, "/data/drones")
    query = pyhudi.write_stream(stream_df, "/data/drones", {...}, checkpoint_location="/chk/drones")
    table = pyhudi.HudiTable("/data/drones")

Only ``pyhudi.spark`` imports pyspark; ``HudiTable`` and the format modules work without it, and
the Spark entry points below import their ``pyhudi.spark`` modules when called (the table services
that need no Spark are imported here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyhudi.config import HudiConfig
from pyhudi.errors import (
    HudiClusteringError,
    HudiClusteringUpdateError,
    HudiCommitError,
    HudiCompactionError,
    HudiConcurrentWriteError,
    HudiConfigError,
    HudiCorruptFileError,
    HudiError,
    HudiFileExistsError,
    HudiInstantNotFoundError,
    HudiKeyError,
    HudiLockError,
    HudiPartitionPathError,
    HudiRestoreError,
    HudiRetentionError,
    HudiSchemaError,
    HudiTableMismatchError,
    HudiTableNotFoundError,
    HudiTablePropertiesError,
    HudiUnsupportedError,
    HudiUnsupportedOptionError,
    HudiWriteConflictError,
)
from pyhudi.plans.savepoint import list_savepoints as _list_savepoints
from pyhudi.services import table_version as _table_version
from pyhudi.services.archival import archive as _archive
from pyhudi.services.clean import clean as _clean
from pyhudi.services.clustering import schedule_clustering as _schedule_clustering
from pyhudi.services.compaction import schedule_compaction as _schedule_compaction
from pyhudi.services.restore import restore as _restore
from pyhudi.services.restore import rollback_commit as _rollback_commit
from pyhudi.services.savepoint import create_savepoint as _create_savepoint
from pyhudi.services.savepoint import delete_savepoint as _delete_savepoint
from pyhudi.sync.catalog import HudiCatalogError
from pyhudi.sync.tool import SyncReport
from pyhudi.sync.tool import sync_catalogs as _sync_catalogs
from pyhudi.table.table import HudiTable
from pyhudi.write.result import WriteResult

if TYPE_CHECKING:  # annotations only: pyspark is not imported at run time
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from pyhudi.spark.dml_merge import MergeBuilder
    from pyhudi.spark.streaming import CommitStream

__version__ = "0.1.0"


def spark_session(master: str | None = None, **conf: str) -> SparkSession:
    """A local SparkSession configured for pyhudi (see :func:`pyhudi.spark.session.spark_session`)."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.session import spark_session as _session

    return _session(master, **conf)


def write(df: DataFrame, path: str, options: dict[str, Any] | None = None, *, mode: str = "append") -> WriteResult:
    """Write ``df`` to the Hudi table at ``path``; see :func:`pyhudi.spark.writer.write`."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.writer import write as _write

    return _write(df, path, options, mode=mode)


def read(spark: SparkSession, path: str, options: dict[str, Any] | None = None, *, filters: Any = None) -> DataFrame:
    """Snapshot DataFrame of the table at ``path``; see :func:`pyhudi.spark.reader.read`. Its
    ``.filter(...)`` / ``.where(...)`` prune as ``filters=`` does (:mod:`pyhudi.spark.query`)."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.query import read as _read

    return _read(spark, path, options, filters=filters)


def update(spark: SparkSession, path: str, *, where: Column | str | None, set: dict[str, Column | str],  # noqa: A002
           options: dict[str, Any] | None = None) -> WriteResult:
    """``UPDATE t SET col = expr, ... WHERE where`` as one upsert commit; see :func:`pyhudi.spark.dml.update`."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.dml import update as _update

    return _update(spark, path, where=where, set=set, options=options)


def delete(spark: SparkSession, path: str, *, where: Column | str | None,
           options: dict[str, Any] | None = None) -> WriteResult:
    """``DELETE FROM t WHERE where`` as one delete commit; see :func:`pyhudi.spark.dml.delete`."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.dml import delete as _delete

    return _delete(spark, path, where=where, options=options)


def merge(spark: SparkSession, path: str, source: DataFrame, *, on: Column | str, source_alias: str = "s",
          target_alias: str = "t") -> MergeBuilder:
    """A ``MERGE INTO`` builder (``when_matched_update(...)``, ``when_not_matched_insert_all()``,
    ``execute()``) run as one upsert commit; see :mod:`pyhudi.spark.dml_merge`."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.dml_merge import merge as _merge

    return _merge(spark, path, source, on=on, source_alias=source_alias, target_alias=target_alias)


def write_stream(stream_df: DataFrame, path: str, options: dict[str, Any] | None = None, *,
                 checkpoint_location: str, trigger: dict[str, Any] | None = None,
                 query_name: str | None = None) -> StreamingQuery:
    """Start a streaming query upserting each micro-batch of ``stream_df`` exactly once; see
    :func:`pyhudi.spark.streaming.write_stream`."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.streaming import write_stream as _write_stream

    return _write_stream(stream_df, path, options, checkpoint_location=checkpoint_location, trigger=trigger,
                         query_name=query_name)


def commit_stream(spark: SparkSession, path: str, options: dict[str, Any] | None = None, *,
                  checkpoint_location: str) -> CommitStream:
    """The table's commits as a polled stream of incremental pulls (any PySpark); see
    :class:`pyhudi.spark.streaming.CommitStream`. On PySpark 4 ``spark.readStream.format("hudi")``
    does the same inside Spark after :func:`register`."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.streaming import CommitStream

    return CommitStream(spark, path, options, checkpoint_location=checkpoint_location)


def schedule_clustering(path: str, options: dict[str, Any] | None = None) -> str | None:
    """Schedule a clustering of the small file slices of ``path`` (no Spark needed); its instant, or
    None when nothing is worth clustering (:mod:`pyhudi.services.clustering`)."""
    return _schedule_clustering(HudiTable(path, storage_options=options), HudiConfig.of(options))


def cluster(spark: SparkSession, path: str, options: dict[str, Any] | None = None, *,
            instant: str | None = None) -> list[dict[str, Any]]:
    """Run clustering ``instant``, or every pending plan (scheduling one if none is pending); the
    figures of each (:mod:`pyhudi.spark.clustering_job`)."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.clustering_job import cluster as _cluster

    return _cluster(spark, path, options, instant=instant)


def schedule_compaction(path: str, options: dict[str, Any] | None = None) -> str | None:
    """Schedule a compaction of the merge-on-read table at ``path`` (no Spark needed).

    Returns the compaction instant, or None when no file slice has log files to compact.
    """
    return _schedule_compaction(HudiTable(path, storage_options=options), HudiConfig.of(options))


def compact(spark: SparkSession, path: str, options: dict[str, Any] | None = None, *,
            instant: str | None = None) -> list[str]:
    """Run compaction ``instant``, or all pending ones (scheduling one if none is pending)."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.compaction_job import compact as _compact

    return _compact(spark, path, options, instant=instant)


def clean(path: str, options: dict[str, Any] | None = None) -> list[Any]:
    """Run the cleaner on the table at ``path`` now (pending cleans first), whatever its trigger says.

    The policy comes from ``options`` (``hoodie.clean.policy``, ``hoodie.clean.commits.retained``...).
    """
    return _clean(HudiTable(path, storage_options=options), HudiConfig.of(options), force=True)


def archive(path: str, options: dict[str, Any] | None = None) -> list[str]:
    """Archive instants of the table at ``path`` beyond ``hoodie.keep.max.commits``; returns their times."""
    return _archive(HudiTable(path, storage_options=options), HudiConfig.of(options))


def sync_catalog(path: str, options: dict[str, Any] | None = None) -> list[SyncReport]:
    """Register the table at ``path`` in its catalogs now, as a write with
    ``hoodie.datasource.meta.sync.enable`` does after its commit: Hudi's ``hoodie.datasource.hive_sync.*``
    and ``hoodie.meta.sync.*`` options say which catalogs (Hive metastore, AWS Glue) and how. One
    report per catalog; if any failed, a :class:`HudiCatalogError` naming each failure after all ran."""
    table = HudiTable(path, storage_options=options)
    reports = _sync_catalogs(table, HudiConfig.of(options))
    failed = [f"{r.catalog}: {r.error}" for r in reports if r.error]
    if failed:
        raise HudiCatalogError("catalog sync of " + path + " failed: " + "; ".join(failed))
    return reports


def upgrade(path: str, *, to: int = 9, options: dict[str, Any] | None = None) -> Any:
    """Move the table at ``path`` to table version ``to`` (8 or 9) as Apache Hudi's upgrade does
    (:mod:`pyhudi.services.table_version`); ``options``: the lock settings its writers use."""
    return _table_version.change_version(HudiTable(path, storage_options=options), to, HudiConfig.of(options),
                                         direction="upgrade")


def downgrade(path: str, *, to: int = 6, options: dict[str, Any] | None = None) -> Any:
    """Move the table at ``path`` back to table version ``to`` (8 or 6) as Apache Hudi's downgrade does."""
    return _table_version.change_version(HudiTable(path, storage_options=options), to, HudiConfig.of(options),
                                         direction="downgrade")


def create_savepoint(path: str, instant: str | None = None, *, user: str | None = None, comments: str = "",
                     options: dict[str, Any] | None = None) -> Any:
    """Savepoint a completed commit (default the latest): the cleaner keeps its snapshot for restore.

    ``options`` carry the lock settings the table's writers use (``hoodie.write.lock.*``).
    """
    return _create_savepoint(HudiTable(path, storage_options=options), instant, user=user, comments=comments,
                             cfg=HudiConfig.of(options))


def delete_savepoint(path: str, instant: str, *, options: dict[str, Any] | None = None) -> None:
    _delete_savepoint(HudiTable(path, storage_options=options), instant, cfg=HudiConfig.of(options))


def list_savepoints(path: str, *, options: dict[str, Any] | None = None) -> list[Any]:
    return _list_savepoints(HudiTable(path, storage_options=options).timeline)


def restore(path: str, savepoint: str, *, options: dict[str, Any] | None = None) -> Any:
    """Return the table to a savepoint, rolling back every later instant (refused while a write runs)."""
    return _restore(HudiTable(path, storage_options=options), savepoint, cfg=HudiConfig.of(options))


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("hudi").load(path)`` read Hudi tables through pyhudi, and
    ``spark.readStream.format("hudi").load(path)`` stream their commits (PySpark 4.0+;
    :mod:`pyhudi.spark.datasource`)."""
    # lazy: pyhudi.spark imports pyspark, which ``import pyhudi`` must not load
    from pyhudi.spark.datasource import register as _register

    _register(spark)


def rollback(path: str, instant: str | None = None, *, options: dict[str, Any] | None = None) -> str:
    """Roll back the latest completed commit (``instant``, if given, must be it; refused while a write runs)."""
    return _rollback_commit(HudiTable(path, storage_options=options), instant, cfg=HudiConfig.of(options))


__all__ = [
    "HudiCatalogError", "HudiClusteringError", "HudiClusteringUpdateError", "HudiCommitError", "HudiCompactionError",
    "HudiConcurrentWriteError", "HudiConfigError", "HudiCorruptFileError", "HudiError", "HudiFileExistsError",
    "HudiInstantNotFoundError", "HudiKeyError", "HudiLockError", "HudiPartitionPathError", "HudiWriteConflictError",
    "HudiRestoreError",
    "HudiRetentionError", "HudiSchemaError", "HudiTable", "HudiTableMismatchError", "HudiTableNotFoundError",
    "HudiTablePropertiesError", "HudiUnsupportedError", "HudiUnsupportedOptionError", "WriteResult", "archive",
    "clean", "cluster", "commit_stream", "compact", "create_savepoint", "delete", "delete_savepoint",
    "list_savepoints", "merge", "read",
    "restore", "register", "rollback",
    "schedule_clustering", "schedule_compaction", "spark_session", "sync_catalog", "SyncReport", "update", "upgrade",
    "downgrade", "write", "write_stream",
]
