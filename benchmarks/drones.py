"""Drone workload benchmark: bulk load + daily copy-on-write upserts, with figures printed.

    .venv/bin/python benchmarks/drones.py [--drones 200 --days 10 --upserts 5]

Prints the bulk-load time against plain ``df.write.parquet`` of the same rows (same codec, same
run), then per daily upsert: time, bytes written, bytes of the two touched day partitions, and
files per partition.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyhudi
from pyhudi.demo import daily_batch, drone_options, readings


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def latest_partition_bytes(table: pyhudi.HudiTable, partition: str) -> int:
    return sum(b.size for b in table.file_system_view(partitions=[partition]).latest_base_files())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--drones", type=int, default=200)
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--upserts", type=int, default=5)
    parser.add_argument("--codec", default="gzip", help="hoodie.parquet.compression.codec (Hudi default gzip)")
    args = parser.parse_args()
    spark = pyhudi.spark_session()
    work = Path(tempfile.mkdtemp(prefix="pyhudi-bench-"))
    table_path = str(work / "drones")
    opts = drone_options(**{"hoodie.parquet.compression.codec": args.codec})
    rows_per_day = 1440 * args.drones
    print(f"drones={args.drones} days={args.days} upserts={args.upserts} rows/day={rows_per_day:,} "
          f"codec={args.codec} cores={os.cpu_count()}")

    # warm up the JVM and Python workers so the first measurement is not start-up
    readings(spark, 0, 1, 5).write.mode("overwrite").parquet(str(work / "warmup"))
    pyhudi.write(readings(spark, 0, 1, 5), str(work / "warmup_hudi"),
                 {**opts, "hoodie.datasource.write.operation": "bulk_insert"})

    load = readings(spark, 0, args.days, args.drones)
    t = time.perf_counter()
    load.write.option("compression", args.codec).mode("overwrite").parquet(str(work / "plain"))
    plain_s = time.perf_counter() - t
    t = time.perf_counter()
    res = pyhudi.write(load, table_path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    bulk_s = time.perf_counter() - t
    print(f"\nbulk load: {args.days * rows_per_day:,} rows")
    print(f"  df.write.parquet         {plain_s:7.2f} s  {dir_bytes(work / 'plain') / 1e6:8.1f} MB")
    print(f"  pyhudi bulk_insert       {bulk_s:7.2f} s  {res.stats['bytes_written'] / 1e6:8.1f} MB  "
          f"({bulk_s / plain_s:.2f}x plain, sorted by partition and key, {res.stats['files_created']} files)")

    print("\ndaily upserts (new day + corrections to 10% of the previous day):")
    print(f"  {'day':>4} {'time s':>7} {'written MB':>11} {'2 partitions MB':>16} {'ratio':>6} "
          f"{'files new/rewritten':>20}  phases")
    times = []
    for i in range(args.upserts):
        day = args.days + i
        batch = daily_batch(spark, day, args.drones)
        t = time.perf_counter()
        res = pyhudi.write(batch, table_path, {**opts, "hoodie.datasource.write.operation": "upsert"})
        elapsed = time.perf_counter() - t
        times.append(elapsed)
        table = pyhudi.HudiTable(table_path)
        parts = sorted({s.partitionPath for s in res.write_stats})
        touched = sum(latest_partition_bytes(table, p) for p in parts)
        phases = {k: v for k, v in res.stats.items() if k.endswith("_s") and k != "total_s"}
        print(f"  {i + 1:>4} {elapsed:7.2f} {res.stats['bytes_written'] / 1e6:11.2f} {touched / 1e6:16.2f} "
              f"{res.stats['bytes_written'] / max(1, touched):6.2f} "
              f"{res.stats['files_created']:>9}/{res.stats['files_merged']:<10}  {phases}")
    print(f"  median upsert: {statistics.median(times):.2f} s")

    table = pyhudi.HudiTable(table_path)
    view = table.file_system_view()
    per_partition = [len(view.latest_base_files(p)) for p in view.partitions]
    print(f"\nfiles per partition: min {min(per_partition)} max {max(per_partition)} "
          f"(partitions {len(per_partition)}, latest base files {sum(per_partition)})")
    total = pyhudi.read(spark, table_path).count()
    print(f"rows in table: {total:,} (expected {(args.days + args.upserts) * rows_per_day:,})")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
