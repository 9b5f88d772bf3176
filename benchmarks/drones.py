"""Drone workload benchmark: bulk load + daily upserts, copy-on-write and merge-on-read, figures printed.

    .venv/bin/python benchmarks/drones.py [--drones 200 --days 10 --upserts 5]
                                          [--index SIMPLE,BLOOM,BUCKET] [--codec gzip,snappy]
                                          [--table-type COPY_ON_WRITE,MERGE_ON_READ]

For every (codec, index): the bulk-load time against plain ``df.write.parquet`` of the same persisted
rows, written just before it (so both see the same JVM warmth), and Spark's own floor for a sorted
bulk load, measured just after it (the sort by partition and key plus a no-op Arrow pass of the
rows). Then per daily upsert the time, bytes written against the bytes of the two touched day
partitions, what the index did (files in the affected partitions, left after range pruning, left
after the bloom check) and the time of the cleaning and archival after the commit. Merge-on-read
runs also print the bytes of the batch's own parquet file (``df.write.parquet`` of the incoming
rows, the yardstick for log writes), then the cost of a compaction. Every run ends with the time of
a snapshot read (and for merge-on-read, a read-optimized read) that scans a column of every record,
an incremental pull of the last upsert (files and bytes read against the latest snapshot's) and a
time travel to the upsert before. Once per codec it prints the floor of a daily upsert: one Arrow
pass of the batch, and the two Spark jobs of a partition-local write doing nothing (count by
partition, then a shuffle by partition into a no-op Arrow pass).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

import pyhudi
from pyhudi.demo import daily_batch, drone_options, readings
from pyhudi.spark.worker import map_in_arrow


def count_rows(batches):  # type: ignore[no-untyped-def]
    """A no-op ``mapInArrow`` body: reads every batch, returns the row count."""
    yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def latest_partition_bytes(table: pyhudi.HudiTable, partition: str) -> int:
    return sum(b.size for b in table.file_system_view(partitions=[partition]).latest_base_files())


def scan_s(spark, path: str, options: dict | None = None) -> tuple[float, int]:
    """Seconds to read every record's altitude (a real scan, not a metadata count)."""
    from pyspark.sql import functions as F

    t = time.perf_counter()
    row = pyhudi.read(spark, path, options).agg(F.count(F.lit(1)).alias("n"), F.sum("altitude_m")).first()
    return time.perf_counter() - t, int(row["n"])


def batch_parquet_bytes(batch, work: Path, codec: str) -> int:
    target = work / "batch_yardstick"
    batch.write.option("compression", codec).mode("overwrite").parquet(str(target))
    return sum(f.stat().st_size for f in target.glob("*.parquet"))


def incremental_pull(spark, path: str, instants: list[str]) -> None:
    """The pull of the last daily upsert, and a time travel to the one before: files and bytes read."""
    from pyhudi.config import HudiConfig
    from pyhudi.spark.reader import plan_query

    table = pyhudi.HudiTable(path)
    latest = plan_query(table, HudiConfig.of({})).files
    incr_opts = {"hoodie.datasource.query.type": "incremental",
                 "hoodie.datasource.read.begin.instanttime": instants[-2]}
    pulled = plan_query(table, HudiConfig.of(incr_opts)).files
    t = time.perf_counter()
    rows = pyhudi.read(spark, path, incr_opts).count()
    pull_s = time.perf_counter() - t
    print(f"  incremental pull of the last upsert: {rows:,} rows in {pull_s:.2f} s, reading {len(pulled)} of "
          f"{len(latest)} files, {sum(b for _, b in pulled) / 1e6:.1f} of {sum(b for _, b in latest) / 1e6:.1f} MB "
          f"of the latest snapshot")
    back_s, back_rows = scan_s(spark, path, {"as.of.instant": instants[-2]})
    print(f"  time travel to the upsert before: {back_rows:,} rows, scan {back_s:.2f} s")


def floor(spark, work: Path, args: argparse.Namespace, codec: str) -> None:
    """What pyhudi's Spark plumbing costs for a daily batch before any work: one Arrow pass of it
    through (prepared) Python workers, ``mapInArrow`` doing nothing; the two jobs of a
    partition-local write doing nothing, routed as pyhudi routes them; and pyarrow writing the batch
    as one parquet file."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from pyhudi.io.avro_schema import PARTITION_PATH
    from pyhudi.spark.pipeline import by_partition, route, tasks_for_partitions

    batch = daily_batch(spark, args.days, args.drones).withColumn(PARTITION_PATH, F.col("day")).persist()
    batch.count()

    def two_jobs() -> None:
        counts = {r[PARTITION_PATH]: r["count"] for r in batch.groupBy(PARTITION_PATH).count().collect()}
        task_of = tasks_for_partitions(counts, spark.sparkContext.defaultParallelism)
        routed = route(batch, by_partition(task_of), max(task_of.values()) + 1)
        map_in_arrow(routed, count_rows, "n long").collect()

    passes, local = [], []
    for _ in range(3):
        t = time.perf_counter()
        map_in_arrow(batch, count_rows, "n long").collect()
        passes.append(time.perf_counter() - t)
        t = time.perf_counter()
        two_jobs()
        local.append(time.perf_counter() - t)
    table = pa.Table.from_pandas(batch.drop(PARTITION_PATH).toPandas(), preserve_index=False)
    t = time.perf_counter()
    pq.write_table(table, str(work / "batch.parquet"), compression=codec)
    write_s = time.perf_counter() - t
    batch.unpersist()
    print(f"  floor of a daily batch ({table.num_rows:,} rows): one Arrow pass through Spark's Python workers "
          f"{statistics.median(passes):.2f} s; count by partition + shuffle by partition + no-op Arrow pass "
          f"{statistics.median(local):.2f} s; pyarrow alone writes it in {write_s:.2f} s")


def plain_write(load, work: Path, codec: str) -> tuple[float, int]:
    """``df.write.parquet`` of the persisted bulk-load rows, the yardstick of a bulk insert: seconds
    and bytes (into a fresh directory, so no deletion is timed)."""
    out = Path(tempfile.mkdtemp(dir=work, prefix="plain-"))
    t = time.perf_counter()
    load.write.option("compression", codec).mode("overwrite").parquet(str(out))
    elapsed = time.perf_counter() - t
    size = dir_bytes(out)
    shutil.rmtree(out, ignore_errors=True)
    return elapsed, size


def sort_floor_s(load) -> float:
    """Spark's sort of the bulk-load rows by (day, key) plus a no-op Arrow pass: what a GLOBAL_SORT
    bulk insert costs before it writes anything."""
    n = load.rdd.getNumPartitions()
    t = time.perf_counter()
    map_in_arrow(load.repartitionByRange(n, "day", "key").sortWithinPartitions("day", "key"), count_rows,
                 "n long").collect()
    return time.perf_counter() - t


def run(spark, work: Path, args: argparse.Namespace, codec: str, index: str,
        table_type: str = "COPY_ON_WRITE") -> tuple[float, float]:
    mor = table_type == "MERGE_ON_READ"
    table_path = str(work / f"drones_{codec}_{index}_{table_type}")
    extra = {"hoodie.parquet.compression.codec": codec, "hoodie.index.type": index,
             "hoodie.datasource.write.table.type": table_type, **dict(o.split("=", 1) for o in args.option)}
    if index == "BUCKET":
        extra["hoodie.bucket.index.num.buckets"] = str(args.buckets)
    opts = drone_options(**extra)
    rows_per_day = 1440 * args.drones
    load = readings(spark, 0, args.days, args.drones).persist()  # in memory, as for the plain write
    load.count()
    plain_s, plain_bytes = plain_write(load, work, codec)
    t = time.perf_counter()
    res = pyhudi.write(load, table_path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    bulk_s = time.perf_counter() - t
    sorted_load = opts.get("hoodie.bulkinsert.sort.mode", "GLOBAL_SORT") == "GLOBAL_SORT"
    sort_s = sort_floor_s(load) if sorted_load else None  # after the bulk load, so it cannot warm it up
    load.unpersist()
    print(f"\n[{table_type} / {codec} / {index}{f' ({args.buckets} buckets)' if index == 'BUCKET' else ''}]")
    print(f"  bulk_insert {args.days * rows_per_day:,} rows  {bulk_s:6.2f} s  "
          f"{res.stats['bytes_written'] / 1e6:7.1f} MB  ({bulk_s / plain_s:.2f}x plain, "
          f"{res.stats['files_created']} files)")
    print(f"    plain df.write.parquet of the same rows just before: {plain_s:.2f} s, "
          f"{plain_bytes / 1e6:.1f} MB"
          + (f"; Spark's sort by (day, key) + no-op Arrow pass: {sort_s:.2f} s ({sort_s / plain_s:.2f}x plain)"
             if sort_s is not None else ""))
    print(f"  {'day':>4} {'time s':>7} {'written MB':>11} {'2 parts MB':>11} {'ratio':>6} {'new/merged':>11}"
          f" {'files':>6} {'pruned':>7} {'bloom':>6} {'keys chk':>9} {'false+':>7} {'clean s':>7}"
          + (f" {'batch MB':>9} {'w/batch':>8} {'log MB':>7}" if mor else ""))
    times = []
    instants = [res.instant_time]
    for i in range(args.upserts):
        # the batch is in memory before the clock starts, as it is for the peers we compare with
        batch = daily_batch(spark, args.days + i, args.drones).persist()
        batch.count()
        t = time.perf_counter()
        res = pyhudi.write(batch, table_path, {**opts, "hoodie.datasource.write.operation": "upsert"})
        elapsed = time.perf_counter() - t
        times.append(elapsed)
        instants.append(res.instant_time)
        table = pyhudi.HudiTable(table_path)
        parts = sorted({s.partitionPath for s in res.write_stats})
        touched = sum(latest_partition_bytes(table, p) for p in parts)
        ix = res.stats.get("index", {})
        yardstick = ""
        if mor:
            own = batch_parquet_bytes(batch, work, codec)
            log_mb = sum(st.totalWriteBytes for st in res.write_stats if st.is_log) / 1e6
            yardstick = f" {own / 1e6:9.2f} {res.stats['bytes_written'] / own:8.2f} {log_mb:7.2f}"
        print(f"  {i + 1:>4} {elapsed:7.2f} {res.stats['bytes_written'] / 1e6:11.2f} {touched / 1e6:11.2f} "
              f"{res.stats['bytes_written'] / max(1, touched):6.2f} "
              f"{res.stats['files_created']:>5}/{res.stats['files_merged']:<5} "
              f"{ix.get('files_in_partitions', '-'):>6} {ix.get('files_after_range_pruning', '-'):>7} "
              f"{ix.get('files_after_bloom', '-'):>6} {ix.get('keys_checked', '-'):>9} "
              f"{ix.get('false_positives', '-'):>7} {res.stats.get('services_s', 0):7.2f}{yardstick}")
        batch.unpersist()
    median = statistics.median(times)
    view = pyhudi.HudiTable(table_path).file_system_view()
    per_partition = [len(view.latest_base_files(p)) for p in view.partitions]
    read_s, total = scan_s(spark, table_path)
    expected = (args.days + args.upserts) * rows_per_day
    print(f"  median upsert {median:.2f} s; files per partition {min(per_partition)}-{max(per_partition)}; "
          f"rows {total:,} ({'ok' if total == expected else f'EXPECTED {expected:,}'})")
    print(f"  snapshot read (scan of every record) {read_s:.2f} s")
    incremental_pull(spark, table_path, instants)
    if mor:
        ro_s, ro_rows = scan_s(spark, table_path, {"hoodie.datasource.query.type": "read_optimized"})
        print(f"  read-optimized read {ro_s:.2f} s ({ro_rows:,} rows: base files only)")
        t = time.perf_counter()
        done = pyhudi.compact(spark, table_path)
        compact_s = time.perf_counter() - t
        meta = pyhudi.HudiTable(table_path).timeline.commit_metadata(
            pyhudi.HudiTable(table_path).timeline.find(done[0])) if done else None
        if meta is not None:
            print(f"  compaction {compact_s:.2f} s: {len(meta.write_stats())} file slices, "
                  f"{meta.total('totalLogFilesCompacted')} log files, {meta.total('totalWriteBytes') / 1e6:.1f} MB "
                  f"written")
        read_s, total = scan_s(spark, table_path)
        print(f"  snapshot read after compaction {read_s:.2f} s ({total:,} rows)")
    return median, bulk_s / plain_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--drones", type=int, default=200)
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--upserts", type=int, default=5)
    parser.add_argument("--index", default="SIMPLE,BLOOM,BUCKET", help="comma-separated hoodie.index.type values")
    parser.add_argument("--buckets", type=int, default=4, help="hoodie.bucket.index.num.buckets for BUCKET")
    parser.add_argument("--table-type", default="COPY_ON_WRITE",
                        help="comma-separated: COPY_ON_WRITE, MERGE_ON_READ")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra hoodie.* option for every run, e.g. hoodie.logfile.data.block.format=parquet")
    parser.add_argument("--codec", default="gzip",
                        help="comma-separated hoodie.parquet.compression.codec values (Hudi's default: gzip)")
    args = parser.parse_args()
    spark = pyhudi.spark_session()
    work = Path(tempfile.mkdtemp(prefix="pyhudi-bench-"))
    print(f"drones={args.drones} days={args.days} upserts={args.upserts} rows/day={1440 * args.drones:,} "
          f"cores={os.cpu_count()}")
    # warm up the JVM and Python workers so the first measurement is not start-up
    readings(spark, 0, 1, 5).write.mode("overwrite").parquet(str(work / "warmup"))
    for day, operation in ((0, "bulk_insert"), (1, "upsert")):  # both write paths, JIT-compiled before the clock
        pyhudi.write(daily_batch(spark, day, 5) if day else readings(spark, 0, 1, 5), str(work / "warmup_hudi"),
                     {**drone_options(), "hoodie.datasource.write.operation": operation})
    summary = []
    for codec in args.codec.split(","):
        print(f"\n=== codec {codec}")
        floor(spark, work, args, codec)
        for table_type in args.table_type.split(","):
            for index in args.index.split(","):
                median, ratio = run(spark, work, args, codec, index.strip().upper(), table_type.strip().upper())
                summary.append((table_type, codec, index, median, ratio))
    print("\nmedian daily upsert, bulk insert against plain:")
    for table_type, codec, index, median, ratio in summary:
        print(f"  {table_type:>13} {codec:>7} {index:>7} {median:6.2f} s  {ratio:5.2f}x")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
