"""Clustering the drone workload after a badly laid-out load: files, time, and queries before and after.

The rows of ``--days`` days (200 drones, 288,000 rows a day) are bulk-inserted in 1 MB files
(``hoodie.parquet.max.file.size=1048576``): hundreds of small files. One clustering run then
rewrites them at ``hoodie.clustering.plan.strategy.target.file.max.bytes`` (128 MB), twice on
separate copies: sorted by ``drone_id, ts`` (linear), and along a Z-order curve over ``lat, lon``.
Queries (medians of five after a warm-up, ``pyhudi.read`` with the filter, so data skipping
applies): a point lookup by key, one drone's readings, a lat/lon box, and ``avg(speed)`` per day.

    python benchmarks/clustering.py [--days 20]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from timing import median_ms  # noqa: E402
from workload import pandas_frame, rows  # noqa: E402

import pyhudi  # noqa: E402

OPTIONS = {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
           "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts"}
LAYOUTS = {"linear drone_id,ts": {"hoodie.clustering.plan.strategy.sort.columns": "drone_id,ts"},
           "z-order lat,lon": {"hoodie.clustering.plan.strategy.sort.columns": "lat,lon",
                               "hoodie.layout.optimize.strategy": "z-order"}}


def queries(spark: Any, load: Any) -> dict[str, str]:
    key = load.column("key")[len(load) // 3].as_py()
    return {"point lookup by key": f"key = '{key}'", "one drone": "drone_id = 'drone-042'",
            "lat/lon box": "lat between 37.01 and 37.012 and lon between -122.03 and -122.028",
            "avg(speed) per day": ""}


def run_queries(spark: Any, path: str, wanted: dict[str, str]) -> dict[str, float]:
    from pyspark.sql import functions as F

    out = {}
    for name, where in wanted.items():
        if where:
            out[name] = median_ms(lambda w=where: pyhudi.read(spark, path, filters=w).count())
        else:
            out[name] = median_ms(lambda: pyhudi.read(spark, path).groupBy("day").agg(F.avg("speed")).collect())
    return out


def files(path: str) -> tuple[int, float]:
    bases = pyhudi.HudiTable(path).file_system_view().latest_base_files()
    return len(bases), sum(b.size for b in bases) / len(bases) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = pyhudi.spark_session()
    work = Path(tempfile.mkdtemp(prefix="pyhudi_cluster_bench_"))
    try:
        load = rows(0, args.days, 200)
        wanted = queries(spark, load)
        print(f"{load.num_rows:,} rows, {args.days} days, bulk-inserted in 1 MB files; PySpark {spark.version}")
        warmed = False
        for label, layout in LAYOUTS.items():
            path = str(work / label.replace(" ", "_").replace(",", "_"))
            bulk = {**OPTIONS, "hoodie.datasource.write.operation": "bulk_insert",
                    "hoodie.parquet.max.file.size": str(1 << 20)}
            pyhudi.write(pandas_frame(spark, load), path, bulk)
            n, mb = files(path)
            if not warmed:  # the first queries of a session pay for Spark's and Python's start
                run_queries(spark, path, wanted)
                warmed = True
            before = run_queries(spark, path, wanted)
            started = time.monotonic()
            done = pyhudi.cluster(spark, path, {**layout, "hoodie.clustering.plan.strategy.target.file.max.bytes":
                                                str(128 << 20)})
            seconds = time.monotonic() - started
            n2, mb2 = files(path)
            after = run_queries(spark, path, wanted)
            print(f"\n{label}: {n} files of {mb:.2f} MB -> {n2} files of {mb2:.1f} MB in {seconds:.1f} s "
                  f"({done[0]['groups']} groups)")
            for name in wanted:
                print(f"  {name:<22} before {before[name]:7.0f} ms   after {after[name]:7.0f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
