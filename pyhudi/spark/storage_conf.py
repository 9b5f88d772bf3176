"""The store as Spark sees it: store settings from the session, and whether Spark opens the scheme.

Spark users configure S3 in the session (``spark.hadoop.fs.s3a.endpoint``...); pyhudi reads those
entries (per-bucket ones too) from the session's Hadoop configuration, so a table is reached the
same way by Spark and by pyhudi's pyarrow I/O. Spark itself opens ``s3a://`` only with the
``hadoop-aws`` jar on its class path; :func:`spark_can_open` asks its Hadoop once per session and
scheme, and the readers hand paths to Spark only where it can open them (pyarrow in executors
otherwise).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

from pyhudi.storage import Storage, resolve_options
from pyhudi.storage.options import split_uri

log = logging.getLogger("pyhudi")

_PREFIXES = ("fs.s3a.", "spark.hadoop.fs.s3a.")
_CAN_OPEN: dict[tuple[int, str], bool] = {}
_GUARD = threading.Lock()


def _hadoop_conf(spark: SparkSession) -> Any | None:
    try:
        return spark._jsparkSession.sessionState().newHadoopConf()  # type: ignore[union-attr]
    except Exception:  # Spark Connect: no JVM here, no Hadoop configuration to read
        return None


def hadoop_store_conf(spark: SparkSession) -> dict[str, str]:
    """The session's S3A entries (``fs.s3a.*``, per-bucket ones included), by their Hadoop keys."""
    conf = _hadoop_conf(spark)
    if conf is None:
        return {}
    out: dict[str, str] = {}
    for prefix in _PREFIXES:
        for key, value in dict(conf.getPropsWithPrefix(prefix)).items():
            out.setdefault(prefix + str(key), str(value))
    return out


def table_storage(spark: SparkSession | None, path: str | Storage,
                  options: Mapping[str, Any] | None = None) -> Storage:
    """The storage of the table at ``path``: store settings from ``options``, then the session's
    (``spark`` or the active one) Hadoop configuration, then the environment."""
    if isinstance(path, Storage):
        return path
    spark = spark or SparkSession.getActiveSession()
    hadoop = hadoop_store_conf(spark) if spark is not None and "://" in path else {}
    return Storage(path, resolve_options(path, options, hadoop))


def spark_can_open(spark: SparkSession, storage: Storage) -> bool:
    """Whether Spark's own readers open paths of this storage's scheme (asked once per session)."""
    if storage.is_local:
        return True
    scheme = split_uri(storage.base_uri)[0]
    key = (id(spark), scheme)
    with _GUARD:
        if key in _CAN_OPEN:
            return _CAN_OPEN[key]
    conf = _hadoop_conf(spark)
    can = False
    if conf is not None:
        try:
            spark._jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)  # type: ignore[union-attr]
            can = True
        except Exception:
            can = False
    with _GUARD:
        if key not in _CAN_OPEN:
            _CAN_OPEN[key] = can
            log.info("Spark %s open %s:// paths: pyhudi reads files there %s", "can" if can else "cannot",
                     scheme, "with Spark's parquet reader" if can else "with pyarrow in Spark's executors")
    return can
