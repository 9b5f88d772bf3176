"""Clustering the drone workload after a badly laid-out load: files, time, and queries before and after.

The rows of ``--days`` days (200 drones, 288,000 rows a day) are bulk-inserted in 1 MB files
(``hoodie.parquet.max.file.size=1048576``): hundreds of small files. One clustering run then
rewrites them at ``hoodie.clustering.plan.strategy.target.file.max.bytes`` (128 MB), twice on
separate copies: sorted by ``drone_id, ts`` (linear), and along a Z-order curve over ``lat, lon``.
Queries (medians of five after a warm-up, ``pyhudi.read`` with the filter, so data skipping
applies): a point lookup by key, one drone's readings, a lat/lon box, and ``avg(speed)`` per day.

A last part loads the same rows into one partition (one clustering group of all the files) and
clusters it twice, merged and ordered in one task and ordered by Spark
(``pyhudi.spark.clustering_job.IN_TASK_GROUP_BYTES``), with the peak memory of a Python worker.

    python benchmarks/clustering.py [--days 20]
    python benchmarks/clustering.py --cluster DIR [--in-task-bytes N]   # one run on a copy of a table
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
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


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return False


class WorkerMemory:
    """The largest resident set of any of this process's Spark Python workers (descendants whose
    command line names ``pyspark.daemon`` or ``pyspark.worker``), sampled every 50 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        command = f.read()
                    if (b"pyspark.daemon" not in command and b"pyspark.worker" not in command) \
                            or not _descends_from(int(pid), os.getpid()):
                        continue
                    with open(f"/proc/{pid}/status") as f:
                        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
                except (OSError, StopIteration):
                    continue
                self.peak = max(self.peak, rss * 1024)


def one_partition(spark: Any, load: Any, work: Path) -> None:
    """All rows in one partition: one clustering group, in one task or ordered by Spark, each run in
    a process of its own (a fresh Spark, so no Python worker carries memory from earlier work)."""
    options = {**OPTIONS, "hoodie.datasource.write.partitionpath.field": "",
               "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator"}
    first = str(work / "one_partition")
    pyhudi.write(pandas_frame(spark, load), first, {**options, "hoodie.datasource.write.operation": "bulk_insert",
                                                     "hoodie.parquet.max.file.size": str(1 << 20)})
    n, mb = files(first)
    print(f"\none partition: {n} files of {mb:.2f} MB ({n * mb:.0f} MB), linear drone_id,ts, 128 MB target")
    for label, limit in (("in one task", 1 << 40), ("ordered by Spark", 0)):
        path = str(work / f"one_partition_{limit}")
        shutil.copytree(first, path)
        done = subprocess.run([sys.executable, __file__, "--cluster", path, "--in-task-bytes", str(limit)],
                              capture_output=True, text=True, check=True)
        print(f"  {label:<17} {done.stdout.strip().splitlines()[-1]}")


def cluster_one(path: str, in_task_bytes: int) -> None:
    """The child process of :func:`one_partition`: one clustering run, its figures on one line."""
    import pyhudi.spark.clustering_job as clustering

    spark = pyhudi.spark_session()
    clustering.IN_TASK_GROUP_BYTES = in_task_bytes
    started = time.monotonic()
    with WorkerMemory() as memory:
        pyhudi.cluster(spark, path, {**LAYOUTS["linear drone_id,ts"],
                                     "hoodie.clustering.plan.strategy.target.file.max.bytes": str(128 << 20)})
    seconds = time.monotonic() - started
    n, mb = files(path)
    print(f"{n} files of {mb:.1f} MB in {seconds:5.1f} s; peak Python worker {memory.peak / 2**20:,.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=20)
    parser.add_argument("--cluster", metavar="DIR", help="only cluster the table at DIR (linear drone_id,ts) and "
                        "print the time and the peak Python worker memory")
    parser.add_argument("--in-task-bytes", type=int, default=64 << 20,
                        help="with --cluster: groups up to this size are merged in one task")
    args = parser.parse_args()
    if args.cluster:
        cluster_one(args.cluster, args.in_task_bytes)
        return
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
        one_partition(spark, load, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
