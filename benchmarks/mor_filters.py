"""Merge-on-read queries against copy-on-write, interleaved; filtered ones also without the log-record ranges.

    .venv/bin/python benchmarks/mor_filters.py [--drones 200 --days 10 --upserts 3 --runs 7]

The drone tables of ``benchmarks/drones.py`` (a bulk load, then daily upserts, each a new day and
corrections of the day before, which a merge-on-read table keeps in log files), one of each table
type. Timed, interleaved and each the median of ``--runs`` after a warm-up: the point lookup of a key
of a day without log files (day 5 of the load: ``--days`` at least 6), the rows of one
corrected day with ``battery < 5``, and ``avg(speed)`` per day over the table, on copy-on-write,
on merge-on-read, and on merge-on-read with :func:`pyhudi.spark.merged.log_record_ranges` turned off
(every slice with log files is merged, whatever the filter).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload  # noqa: E402  (a sibling module of this script)
from drones import POINT_DAY, workload_options  # noqa: E402

import pyhudi  # noqa: E402
import pyhudi.spark.merged as merged  # noqa: E402


def main() -> None:
    from pyspark.sql import functions as F

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drones", type=int, default=200)
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--upserts", type=int, default=3)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    if args.days < POINT_DAY + 2:
        parser.error(f"--days must be at least {POINT_DAY + 2}: the point key's day must be one no upsert corrects")
    spark = pyhudi.spark_session()
    work = Path(tempfile.mkdtemp(prefix="pyhudi-mor-filters-"))
    paths = {}
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        path = paths[table_type] = str(work / table_type)
        opts = {**workload_options(), "hoodie.datasource.write.table.type": table_type}
        pyhudi.write(workload.pandas_frame(spark, workload.rows(0, args.days, args.drones)), path,
                     {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
        for i in range(args.upserts):
            pyhudi.write(workload.pandas_frame(spark, workload.daily_batch(args.days + i, args.drones)), path,
                         {**opts, "hoodie.datasource.write.operation": "upsert"})
    key = f"{workload.day_name(POINT_DAY).replace('-', '')}0700_017"
    corrected = workload.day_name(args.days - 1)
    queries = {"point": lambda p: pyhudi.read(spark, p, filters=F.col("key") == key).collect(),
               "corrected day count": lambda p: pyhudi.read(
                   spark, p, filters=f"day = '{corrected}' AND battery < 5").count(),
               "group-by": lambda p: pyhudi.read(spark, p).groupBy("day").agg(F.avg("speed")).collect()}
    real = merged.log_record_ranges
    systems = {"COW": (paths["COPY_ON_WRITE"], real), "MOR": (paths["MERGE_ON_READ"], real),
               "MOR without log ranges": (paths["MERGE_ON_READ"], lambda *a, **k: None)}
    print(f"drones={args.drones} days={args.days} upserts={args.upserts}; {args.runs} runs each, interleaved")
    for name, run in queries.items():
        times: dict[str, list[float]] = {s: [] for s in systems}
        for path, ranges in systems.values():  # warm-up (the first read of a snapshot ranges its logs)
            merged.log_record_ranges = ranges  # type: ignore[assignment]
            run(path)
        for _ in range(args.runs):
            for s, (path, ranges) in systems.items():
                merged.log_record_ranges = ranges  # type: ignore[assignment]
                started = time.perf_counter()
                run(path)
                times[s].append(time.perf_counter() - started)
        merged.log_record_ranges = real
        ms = {s: statistics.median(t) * 1000 for s, t in times.items()}
        print(f"  {name:<20} " + ", ".join(f"{s} {v:.0f} ms" for s, v in ms.items())
              + f"; MOR / COW {ms['MOR'] / ms['COW']:.2f}x, without log ranges "
              f"{ms['MOR without log ranges'] / ms['COW']:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
