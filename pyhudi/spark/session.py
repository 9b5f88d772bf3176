"""A SparkSession set up for pyhudi on one machine (any other SparkSession works too)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def spark_session(master: str | None = None, *, app_name: str = "pyhudi", **conf: str) -> SparkSession:
    """``local[*]`` Spark with Arrow enabled, executors on this interpreter, a quiet log.

    Executors must run the same Python as the driver (they import pyhudi), so ``PYSPARK_PYTHON``
    defaults to ``sys.executable``. Shuffle partitions default to the core count: Spark's 200 is
    tuned for clusters and makes every small shuffle here pay for 200 tasks.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    cores = os.cpu_count() or 2
    builder = (
        SparkSession.builder.master(master or os.environ.get("PYHUDI_SPARK_MASTER", "local[*]"))
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(max(2, cores)))
        .config("spark.default.parallelism", str(max(2, cores)))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("PYHUDI_DRIVER_MEMORY", "4g"))
        .config("spark.python.worker.reuse", "true")
    )
    for key, value in conf.items():
        builder = builder.config(key.replace("__", "."), value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
