"""pyhudi: Apache Hudi tables (format version 6) written and read with PySpark.

    import pyhudi
    spark = pyhudi.spark_session()
    res = pyhudi.write(df, "/data/drones", {...hoodie.* options...})
    df = pyhudi.read(spark, "/data/drones")
    table = pyhudi.HudiTable("/data/drones")

Only ``pyhudi.spark`` imports pyspark; ``HudiTable`` and the format modules work without it, and
the Spark entry points below are imported lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyhudi.errors import (
    HudiCommitError,
    HudiCompactionError,
    HudiConfigError,
    HudiCorruptFileError,
    HudiError,
    HudiInstantNotFoundError,
    HudiKeyError,
    HudiSchemaError,
    HudiTableMismatchError,
    HudiTableNotFoundError,
    HudiUnsupportedError,
)
from pyhudi.table.table import HudiTable
from pyhudi.write.commit import WriteResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__version__ = "0.1.0"


def spark_session(master: str | None = None, **conf: str) -> SparkSession:
    """A local SparkSession configured for pyhudi (see :func:`pyhudi.spark.session.spark_session`)."""
    from pyhudi.spark.session import spark_session as _session

    return _session(master, **conf)


def write(df: DataFrame, path: str, options: dict[str, Any] | None = None, *, mode: str = "append") -> WriteResult:
    """Write ``df`` to the Hudi table at ``path``; see :func:`pyhudi.spark.writer.write`."""
    from pyhudi.spark.writer import write as _write

    return _write(df, path, options, mode=mode)


def read(spark: SparkSession, path: str, options: dict[str, Any] | None = None, *, filters: Any = None) -> DataFrame:
    """Snapshot DataFrame of the table at ``path``; see :func:`pyhudi.spark.reader.read`."""
    from pyhudi.spark.reader import read as _read

    return _read(spark, path, options, filters=filters)


def schedule_compaction(path: str, options: dict[str, Any] | None = None) -> str | None:
    """Schedule a compaction of the merge-on-read table at ``path`` (no Spark needed).

    Returns the compaction instant, or None when no file slice has log files to compact.
    """
    from pyhudi.config import HudiConfig
    from pyhudi.services.compaction import schedule_compaction as _schedule

    return _schedule(HudiTable(path), HudiConfig.of(options))


def compact(spark: SparkSession, path: str, options: dict[str, Any] | None = None, *,
            instant: str | None = None) -> list[str]:
    """Run compaction ``instant``, or all pending ones (scheduling one if none is pending)."""
    from pyhudi.spark.compaction import compact as _compact

    return _compact(spark, path, options, instant=instant)


__all__ = [
    "HudiCommitError", "HudiCompactionError", "HudiConfigError", "HudiCorruptFileError", "HudiError",
    "HudiInstantNotFoundError",
    "HudiKeyError", "HudiSchemaError", "HudiTable", "HudiTableMismatchError", "HudiTableNotFoundError",
    "HudiUnsupportedError", "WriteResult", "compact", "read", "schedule_compaction", "spark_session", "write",
]
