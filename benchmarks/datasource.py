"""``spark.read.format("hudi")`` (PySpark 4's Python data source) against ``pyhudi.read``.

The drone rows of ``--days`` days (200 drones) bulk-inserted, then three queries through both
paths, medians of five runs after a warm-up: a count of every row, the rows of one day
(``day = ...``, a partition filter) counted, and ``avg(speed)`` per day.

    /path/to/pyspark4-venv/bin/python benchmarks/datasource.py [--days 10]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from timing import median_ms  # noqa: E402
from workload import day_name, pandas_frame, rows  # noqa: E402

import pyhudi  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = pyhudi.spark_session()
    pyhudi.register(spark)
    work = Path(tempfile.mkdtemp(prefix="pyhudi_ds_bench_"))
    try:
        path = str(work / "t")
        load = rows(0, args.days, 200)
        pyhudi.write(pandas_frame(spark, load), path, {
            "hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.operation": "bulk_insert"})
        from pyspark.sql import functions as F

        day = day_name(args.days // 2)
        queries = {
            "count of every row": lambda df: df.count(),
            f"rows of {day} (partition filter)": lambda df: df.where(F.col("day") == day).count(),
            "avg(speed) per day": lambda df: df.groupBy("day").agg(F.avg("speed")).collect(),
        }
        print(f"{load.num_rows:,} rows, {args.days} days, PySpark {spark.version}")
        for name, query in queries.items():
            ours = median_ms(lambda q=query: q(pyhudi.read(spark, path)))
            source = median_ms(lambda q=query: q(spark.read.format("hudi").load(path)))
            print(f"  {name:<40} pyhudi.read {ours:7.0f} ms   spark.read.format('hudi') {source:7.0f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
