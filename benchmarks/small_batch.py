"""Where the small-batch write pays: an upsert of N rows from a pandas frame written on the driver
with its rows read as the Arrow Spark holds and keyed with pyarrow (no Spark job: ``held``), on the
driver after one Spark job (``driver``: the held rows turned off), and by the two-job
partition-local path (``pyhudi.write.small.batch.bytes`` at 0), in the same run, on the same table.
Both thresholds are set above any input, so every size takes each way.

    python benchmarks/small_batch.py [--sizes 1000,10000,100000,300000,1000000] [--repeats 2]

For each size a copy-on-write table of N drone readings (one day, so one partition and one file
group per 120 MB) is bulk-inserted, then the same N rows are upserted again (all updates),
alternating the two paths ``--repeats`` times each; the median of each path prints with Spark's
size estimate of the input (the figure the option is compared with).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload  # noqa: E402  (a sibling module of this script)

import pyhudi  # noqa: E402
from pyhudi.spark import small_write  # noqa: E402
from pyhudi.spark.local_batch import held_arrow  # noqa: E402
from pyhudi.spark.small_write import estimated_bytes  # noqa: E402

OPTIONS = {"hoodie.table.name": "small", "hoodie.datasource.write.recordkey.field": "key",
           "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts"}
ON_DRIVER = str((1 << 63) - 1)  # above any estimate, unknown ones (Long.MaxValue) included


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000,300000,1000000")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    spark = pyhudi.spark_session("local[2]", spark__sql__shuffle__partitions="2")
    work = Path(tempfile.mkdtemp(prefix="pyhudi-small-"))
    print(f"{'rows':>9} {'estimate MB':>12} {'held MB':>8} {'held s':>7} {'driver s':>9} {'two jobs s':>11} "
          f"{'held/two':>9} {'driver/two':>11}")
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            data = workload.rows(0, 1, max(1, n // 1440)).slice(0, n)
            path = str(work / f"t{n}")
            pyhudi.write(workload.pandas_frame(spark, data), path,
                         {**OPTIONS, "hoodie.datasource.write.operation": "bulk_insert"})
            frame = workload.pandas_frame(spark, data)
            size = estimated_bytes(frame) or 0
            source = held_arrow(frame)
            ways = {"held": (ON_DRIVER, True), "driver": (ON_DRIVER, False), "two": ("0", False)}
            times: dict[str, list[float]] = {way: [] for way in ways}
            for _ in range(args.repeats):
                for way, (threshold, keep_held) in ways.items():
                    small_write.held_arrow = held_arrow if keep_held else (lambda df: None)
                    try:
                        started = time.perf_counter()
                        pyhudi.write(frame, path, {**OPTIONS, "pyhudi.write.small.batch.bytes": threshold,
                                                   "pyhudi.write.small.batch.held.bytes": ON_DRIVER})
                        times[way].append(time.perf_counter() - started)
                    finally:
                        small_write.held_arrow = held_arrow
            held, driver, spread = (statistics.median(times[w]) for w in ways)
            estimate = "unknown" if size >= (1 << 63) - 1 else f"{size / 2**20:.1f}"
            held_mb = f"{source.nbytes / 2**20:.1f}" if source is not None else "-"
            print(f"{n:>9} {estimate:>12} {held_mb:>8} {held:>7.2f} {driver:>9.2f} {spread:>11.2f} "
                  f"{held / spread:>9.2f} {driver / spread:>11.2f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
