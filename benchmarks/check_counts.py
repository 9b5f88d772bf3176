"""A commit of drone rows on the distributed path, with and without the partition-path check's
counts standing in for the write's own counting job.

    .venv/bin/python benchmarks/check_counts.py [--drones 20] [--commits 8]

The input is a frame of Python rows (``spark.createDataFrame(list_of_rows)``: an RDD, whose size
Spark does not estimate, so the write takes the distributed path, not the driver's). Each commit
upserts corrections of one day (every tenth minute, ``drones`` x 144 rows of 12 columns) into a
table of four days partitioned by ``day``, a free-form string: the write checks the batch's paths
with one Spark job before its instant. Runs alternate between the two ways, so the machine's load
is shared; the figures are the median seconds and Spark jobs of a commit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload  # noqa: E402  (a sibling module of this script)

OPTIONS = {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
           "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drones", type=int, default=20)
    parser.add_argument("--commits", type=int, default=8)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyhudi
    from pyhudi.spark import writer

    spark = pyhudi.spark_session("local[2]")
    tracker = spark.sparkContext.statusTracker()
    work = Path(tempfile.mkdtemp(prefix="pyhudi-check-counts-"))
    real = writer.check_partitions
    seconds: dict[bool, list[float]] = {True: [], False: []}
    jobs: dict[bool, list[int]] = {True: [], False: []}
    for counted in (True, False):
        pyhudi.write(workload.pandas_frame(spark, workload.rows(0, 4, args.drones)), str(work / str(counted)),
                     {**OPTIONS, "hoodie.datasource.write.operation": "bulk_insert"})
    for n in range(args.commits * 2):
        counted = n % 2 == 0
        batch = workload.rows(n % 4, 1, args.drones, revision=n + 1, every_nth_minute=10).to_pylist()
        frame = spark.createDataFrame(batch)
        writer.check_partitions = real if counted else (lambda *a: (real(*a), None)[1])  # type: ignore[assignment]
        group = f"commit-{n}"
        spark.sparkContext.setJobGroup(group, group)
        started = time.perf_counter()
        pyhudi.write(frame, str(work / str(counted)), OPTIONS)
        seconds[counted].append(time.perf_counter() - started)
        spark.sparkContext.setJobGroup(None, None)  # type: ignore[arg-type]
        jobs[counted].append(len(tracker.getJobIdsForGroup(group)))
    writer.check_partitions = real
    print(f"{args.drones * 144:,} rows a commit, {args.commits} commits each way")
    for counted, label in ((False, "write counts again"), (True, "check's counts")):
        print(f"  {label:18s}: median {statistics.median(seconds[counted]):.2f} s, "
              f"{statistics.median(jobs[counted]):.0f} Spark jobs")
    ratio = statistics.median(seconds[True]) / statistics.median(seconds[False])
    print(f"  check's counts / counting again: {ratio:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
