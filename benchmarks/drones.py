"""Drone benchmark: pyhudi against plain Spark parquet and delta-rs, on the same realistic rows.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/drones.py [--drones 200 --days 10 --upserts 5]
        [--codec snappy,gzip] [--table-type COPY_ON_WRITE,MERGE_ON_READ] [--input pandas,persisted]
        [--index SIMPLE] [--peers spark,delta] [--option KEY=VALUE ...]

The rows are :mod:`workload`'s: 12 columns with a JSON payload, a 10-day bulk load of 2.88M rows,
then daily upserts of 316,800 rows (a new day and corrections to a tenth of the day before). Every
system gets them the way it takes them: pyhudi and plain Spark a DataFrame made with
``spark.createDataFrame(pandas_df)`` (``--input pandas``: one Spark partition per 10,000 rows) or
the same DataFrame persisted and counted first (``--input persisted``); delta-rs the Arrow table.
Data generation and DataFrame creation are outside the clock.

Per system: the bulk load, the median daily upsert, the files of the latest snapshot (and the most
base files any day has after the load and after any upsert), and three queries, each the median of
five runs after one warm-up, timed from the read call to the result as users see it:

* point: the row of one record key (``filters=F.col("key") == KEY``);
* count: rows of one day with ``battery < 5``;
* group-by: ``avg(speed)`` per day over the table.

pyhudi also prints its plan time (``pyhudi.read`` alone), an incremental pull of the last upsert and
a time travel to the one before, and for merge-on-read a compaction. Per codec it prints the floor
of a daily upsert: the two Spark jobs of a partition-local write doing nothing (and the shuffle job
alone, and a pass of the batch without a shuffle), and pyarrow alone writing the new day's rows. At
the end the load is written again into about 400 files (``--plan-files``) to time planning there,
with and without a partition filter, and to count the files a point lookup reads.

The peers: plain Spark parquet partitioned by day (bulk load ``df.write.partitionBy("day")``; an
upsert reads the batch's days, keeps the latest row per key and replaces those day folders; it reads
``day`` back as a date, inferred from the folder names) and delta-rs (``write_deltalake`` partitioned
by day; upserts are ``MERGE`` on key and day, once with a literal ``day IN (...)`` in the predicate,
which lets delta-rs prune files; queries through its pyarrow dataset). The summary prints the
ratios the project's targets are stated in.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload  # noqa: E402  (a sibling module of this script)
from timing import median_ms  # noqa: E402

import pyhudi  # noqa: E402

POINT_DAY = 4  # the point lookup and the filtered count look at day 5 of the load


@dataclass
class Result:
    system: str
    load_s: float = 0.0
    upserts: list[float] = field(default_factory=list)
    files: int = 0
    most_per_day: int = 0  # base files of the fullest day, after the load or any upsert
    point_ms: float = 0.0
    count_ms: float = 0.0
    groupby_ms: float = 0.0
    plan_ms: float | None = None

    @property
    def upsert_s(self) -> float:
        return statistics.median(self.upserts) if self.upserts else float("nan")




def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Data:
    """The rows of one run, made once: the load and the daily batches as Arrow tables."""

    def __init__(self, args: argparse.Namespace) -> None:
        started = time.perf_counter()
        self.load = workload.rows(0, args.days, args.drones)
        self.batches = [workload.daily_batch(args.days + i, args.drones) for i in range(args.upserts)]
        self.key = f"{workload.day_name(POINT_DAY).replace('-', '')}0700_017"
        self.day = workload.day_name(POINT_DAY)
        print(f"rows made in {time.perf_counter() - started:.1f} s: load {self.load.num_rows:,} "
              f"({self.load.nbytes / self.load.num_rows:.0f} bytes/row in Arrow), "
              f"{len(self.batches)} batches of {self.batches[0].num_rows:,}" if self.batches else "")


def frame(spark, table: pa.Table, kind: str):  # type: ignore[no-untyped-def]
    df = workload.pandas_frame(spark, table)
    if kind == "persisted":
        df = df.persist()
        df.count()
    return df


# -- pyhudi --------------------------------------------------------------------------------------
def files_per_day(path: str) -> tuple[int, int]:
    view = pyhudi.HudiTable(path).file_system_view()
    counts = [len(view.latest_base_files(p)) for p in view.partitions]
    return sum(len(view.latest_slices(p)) for p in view.partitions), max(counts, default=0)


def run_pyhudi(spark, work: Path, data: Data, args: argparse.Namespace, *, codec: str, table_type: str,
               kind: str, index: str) -> Result:
    from pyspark.sql import functions as F

    label = f"pyhudi {'COW' if table_type == 'COPY_ON_WRITE' else 'MOR'} {codec} {index} ({kind})"
    path = str(work / label.replace(" ", "_").replace("(", "").replace(")", ""))
    opts = {**workload_options(), "hoodie.parquet.compression.codec": codec, "hoodie.index.type": index,
            "hoodie.datasource.write.table.type": table_type, **dict(o.split("=", 1) for o in args.option)}
    result = Result(label)
    load = frame(spark, data.load, kind)
    t = time.perf_counter()
    res = pyhudi.write(load, path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    result.load_s = time.perf_counter() - t
    load.unpersist()
    files, most = files_per_day(path)
    print(f"\n[{label}]\n  bulk_insert {data.load.num_rows:,} rows {result.load_s:6.2f} s, "
          f"{res.stats['bytes_written'] / 1e6:.1f} MB, {files} files, at most {most} per day")
    result.most_per_day = most
    instants = [res.instant_time]
    print(f"  {'day':>4} {'time s':>7} {'count s':>8} {'write s':>8} {'MB':>7} {'new/merged':>11} "
          f"{'files/day':>9}")
    for i, table in enumerate(data.batches):
        batch = frame(spark, table, kind)
        t = time.perf_counter()
        res = pyhudi.write(batch, path, {**opts, "hoodie.datasource.write.operation": "upsert"})
        result.upserts.append(time.perf_counter() - t)
        batch.unpersist()
        instants.append(res.instant_time)
        files, most = files_per_day(path)
        result.most_per_day = max(result.most_per_day, most)
        s = res.stats
        print(f"  {i + 1:>4} {result.upserts[-1]:7.2f} {s.get('partitions_s', 0):8.2f} {s.get('write_s', 0):8.2f} "
              f"{s['bytes_written'] / 1e6:7.1f} {s['files_created']:>5}/{s['files_merged']:<5} {most:>9}")
    result.files = files
    key, day = data.key, data.day
    result.plan_ms = median_ms(lambda: pyhudi.read(spark, path))
    result.point_ms = median_ms(lambda: pyhudi.read(spark, path, filters=F.col("key") == key).collect())
    result.count_ms = median_ms(
        lambda: pyhudi.read(spark, path, filters=f"day = '{day}' AND battery < 5").count())
    result.groupby_ms = median_ms(lambda: pyhudi.read(spark, path).groupBy("day").agg(F.avg("speed")).collect())
    print(f"  median upsert {result.upsert_s:.2f} s; plan {result.plan_ms:.0f} ms; point {result.point_ms:.0f} ms, "
          f"count {result.count_ms:.0f} ms, group-by {result.groupby_ms:.0f} ms")
    incremental_pull(spark, path, instants)
    if table_type == "MERGE_ON_READ":
        t = time.perf_counter()
        done = pyhudi.compact(spark, path)
        compact_s = time.perf_counter() - t
        after = median_ms(lambda: pyhudi.read(spark, path).groupBy("day").agg(F.avg("speed")).collect())
        print(f"  compaction of {len(done)} plan(s) {compact_s:.2f} s; group-by after it {after:.0f} ms")
    return result


def planning_at_scale(spark, work: Path, data: Data, files: int) -> None:
    """Plan time and the files a point lookup reads, on the load written into about ``files`` files
    (a small ``hoodie.parquet.max.file.size``)."""
    from pyspark.sql import functions as F

    path = str(work / "many_files")
    size = data.load.nbytes // 4 // files  # these rows take about a quarter of their Arrow bytes in parquet
    opts = {**workload_options(), "hoodie.parquet.compression.codec": "snappy",
            "hoodie.parquet.max.file.size": str(size), "hoodie.datasource.write.operation": "bulk_insert"}
    pyhudi.write(frame(spark, data.load, "pandas"), path, opts)
    table = pyhudi.HudiTable(path)
    view = table.file_system_view()
    count = len(view.latest_base_files())
    plan = median_ms(lambda: pyhudi.read(spark, path))
    one_day = median_ms(lambda: pyhudi.read(spark, path, filters=f"day = '{data.day}'"))
    key = data.key
    lookup = pyhudi.read(spark, path, filters=F.col("key") == key)
    read = len(lookup.inputFiles())
    point = median_ms(lambda: pyhudi.read(spark, path, filters=F.col("key") == key).collect())
    print(f"\n[planning at scale] {count} files in {len(view.partitions)} days (snappy): plan {plan:.0f} ms "
          f"(target <= 200), with a one-day filter {one_day:.0f} ms; point lookup reads {read} of "
          f"{len(view.latest_base_files(data.day))} files of its day, {point:.0f} ms")


def count_rows(batches):  # type: ignore[no-untyped-def]
    """A ``mapInArrow`` body that does nothing but count (the rows still cross into Python)."""
    yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})


def upsert_floor(spark, data: Data, codec: str) -> None:
    """What a daily upsert costs pyhudi's Spark plumbing before any work, on the same input as the
    upserts (a DataFrame from pandas): the count of records per partition, then the shuffle by
    partition into Python workers doing nothing, as a partition-local write routes them; and
    pyarrow alone writing the new day's rows into one file."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from pyhudi.io.avro_schema import PARTITION_PATH
    from pyhudi.spark.routing import by_partition, coalesced, route
    from pyhudi.spark.worker import map_in_arrow
    from pyhudi.write.plan import pack_tasks

    table = data.batches[-1]
    parallelism = spark.sparkContext.defaultParallelism
    batch = coalesced(workload.pandas_frame(spark, table), parallelism).withColumn(PARTITION_PATH, F.col("day"))

    def count_job() -> dict[str, int]:
        return {r[PARTITION_PATH]: r["count"] for r in batch.groupBy(PARTITION_PATH).count().collect()}

    def shuffle_job(task_of: dict[str, int]) -> None:
        map_in_arrow(route(batch, by_partition(task_of), max(task_of.values()) + 1), count_rows, "n long").collect()

    jobs_ms = median_ms(lambda: shuffle_job(pack_tasks(count_job(), parallelism)))
    task_of = pack_tasks(count_job(), parallelism)
    shuffle_ms = median_ms(lambda: shuffle_job(task_of))
    pass_ms = median_ms(lambda: map_in_arrow(batch, count_rows, "n long").collect())
    new_day = table.filter(pc.equal(table.column("day"), table.column("day")[0]))
    sink = Path(tempfile.mkdtemp()) / "day.parquet"
    write_ms = median_ms(lambda: pq.write_table(new_day, sink, compression=codec))
    shutil.rmtree(sink.parent, ignore_errors=True)
    print(f"\n[upsert floor, {codec}] count per partition + shuffle by partition into a no-op Arrow pass: "
          f"{jobs_ms:.0f} ms (the shuffle job alone {shuffle_ms:.0f} ms; a no-op Arrow pass without a shuffle "
          f"{pass_ms:.0f} ms); pyarrow writing the new day ({new_day.num_rows:,} rows) alone: {write_ms:.0f} ms")


def workload_options() -> dict[str, str]:
    return {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts"}


def incremental_pull(spark, path: str, instants: list[str]) -> None:
    """The pull of the last daily upsert and a time travel to the one before."""
    from pyspark.sql import functions as F

    if len(instants) < 2:
        return
    opts = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": instants[-2]}
    t = time.perf_counter()
    pulled = pyhudi.read(spark, path, opts).count()
    pull_s = time.perf_counter() - t
    t = time.perf_counter()
    back = pyhudi.read(spark, path, {"as.of.instant": instants[-2]}).agg(F.count(F.lit(1))).first()[0]
    print(f"  incremental pull of the last upsert {pulled:,} rows in {pull_s:.2f} s; time travel to the "
          f"upsert before {back:,} rows in {time.perf_counter() - t:.2f} s")


# -- plain Spark ---------------------------------------------------------------------------------
def run_plain(spark, work: Path, data: Data, args: argparse.Namespace, *, codec: str, kind: str) -> Result:
    from pyspark.sql import functions as F

    result = Result(f"plain Spark parquet {codec} ({kind})")
    path = work / f"plain_{codec}_{kind}"
    load = frame(spark, data.load, kind)
    t = time.perf_counter()
    load.write.option("compression", codec).partitionBy("day").parquet(str(path))
    result.load_s = time.perf_counter() - t
    load.unpersist()
    columns = data.load.column_names
    for i, table in enumerate(data.batches):
        batch = frame(spark, table, kind)
        staging = work / f"plain_staging_{i}"
        t = time.perf_counter()
        days = [r[0] for r in batch.select("day").distinct().collect()]
        stored = spark.read.parquet(str(path)).where(F.col("day").isin(days)) \
            .withColumn("day", F.date_format("day", "yyyy-MM-dd"))
        rows = stored.select(*columns).unionByName(batch.select(*columns))
        latest = rows.groupBy("key", "day").agg(F.max_by(F.struct(*columns), "ts").alias("r")).select("r.*")
        latest.write.option("compression", codec).partitionBy("day").parquet(str(staging))
        for d in days:  # replace the day folders the batch touched
            shutil.rmtree(path / f"day={d}", ignore_errors=True)
            shutil.move(str(staging / f"day={d}"), str(path / f"day={d}"))
        spark.catalog.refreshByPath(str(path))  # Spark caches the listing of a path it read
        result.upserts.append(time.perf_counter() - t)
        shutil.rmtree(staging, ignore_errors=True)
        batch.unpersist()
    day_dirs = [d for d in path.iterdir() if d.is_dir()]
    per_day = [len(list(d.glob("*.parquet"))) for d in day_dirs]
    result.files, result.most_per_day = sum(per_day), max(per_day)
    key, day = data.key, data.day
    result.point_ms = median_ms(lambda: spark.read.parquet(str(path)).where(F.col("key") == key).collect())
    result.count_ms = median_ms(
        lambda: spark.read.parquet(str(path)).where(f"day = '{day}' AND battery < 5").count())
    result.groupby_ms = median_ms(
        lambda: spark.read.parquet(str(path)).groupBy("day").agg(F.avg("speed")).collect())
    print(f"\n[{result.system}]\n  load {result.load_s:.2f} s, median upsert {result.upsert_s:.2f} s, "
          f"{result.files} files; point {result.point_ms:.0f} ms, count {result.count_ms:.0f} ms, "
          f"group-by {result.groupby_ms:.0f} ms")
    return result


# -- delta-rs ------------------------------------------------------------------------------------
def run_delta(work: Path, data: Data, *, codec: str, literal: bool) -> Result:
    import pyarrow.compute as pc
    from deltalake import DeltaTable, WriterProperties, write_deltalake

    result = Result(f"delta-rs merge key+day{' + literal day IN' if literal else ''} {codec}")
    path = str(work / f"delta_{codec}_{literal}")
    props = WriterProperties(compression=codec.upper())
    t = time.perf_counter()
    write_deltalake(path, data.load, partition_by=["day"], writer_properties=props)
    result.load_s = time.perf_counter() - t
    for table in data.batches:
        t = time.perf_counter()
        predicate = "t.key = s.key AND t.day = s.day"
        if literal:
            days = sorted(set(table.column("day").to_pylist()))
            predicate += " AND t.day IN (" + ", ".join(f"'{d}'" for d in days) + ")"
        (DeltaTable(path).merge(table, predicate=predicate, source_alias="s", target_alias="t",
                                writer_properties=props)
         .when_matched_update_all().when_not_matched_insert_all().execute())
        result.upserts.append(time.perf_counter() - t)
    dt = DeltaTable(path)
    files = dt.file_uris()
    per_day: dict[str, int] = {}
    for uri in files:
        day = uri.split("day=")[1].split("/")[0]
        per_day[day] = per_day.get(day, 0) + 1
    result.files, result.most_per_day = len(files), max(per_day.values())
    key, day = data.key, data.day
    result.point_ms = median_ms(lambda: DeltaTable(path).to_pyarrow_dataset().to_table(filter=pc.field("key") == key))
    result.count_ms = median_ms(lambda: DeltaTable(path).to_pyarrow_dataset().count_rows(
        filter=(pc.field("day") == day) & (pc.field("battery") < 5)))
    result.groupby_ms = median_ms(lambda: DeltaTable(path).to_pyarrow_dataset().to_table(
        columns=["day", "speed"]).group_by("day").aggregate([("speed", "mean")]))
    print(f"\n[{result.system}]\n  load {result.load_s:.2f} s, median upsert {result.upsert_s:.2f} s, "
          f"{result.files} files; point {result.point_ms:.0f} ms, count {result.count_ms:.0f} ms, "
          f"group-by {result.groupby_ms:.0f} ms")
    return result


# -- summary -------------------------------------------------------------------------------------
def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def summary(results: list[Result], args: argparse.Namespace) -> None:
    print(f"\n{'system':<48} {'load s':>7} {'upsert s':>9} {'files':>6} {'most/day':>9} {'point ms':>9} "
          f"{'count ms':>9} {'group-by ms':>12} {'plan ms':>8}")
    for r in results:
        plan = f"{r.plan_ms:8.0f}" if r.plan_ms is not None else f"{'-':>8}"
        print(f"{r.system:<48} {r.load_s:7.2f} {r.upsert_s:9.2f} {r.files:6d} {r.most_per_day:9d} {r.point_ms:9.0f} "
              f"{r.count_ms:9.0f} {r.groupby_ms:12.0f} {plan}")
    by = {r.system: r for r in results}
    print("\nagainst the peers (same run):")
    for codec in args.codec.split(","):
        delta = by.get(f"delta-rs merge key+day {codec}")
        literal = by.get(f"delta-rs merge key+day + literal day IN {codec}")
        for kind in args.input.split(","):
            plain = by.get(f"plain Spark parquet {codec} ({kind})")
            for index in args.index.split(","):
                cow = by.get(f"pyhudi COW {codec} {index} ({kind})")
                mor = by.get(f"pyhudi MOR {codec} {index} ({kind})")
                tag = f"{codec}, {index}, {kind}"
                if cow and delta:
                    print(f"  COW upsert / delta-rs merge [{tag}]: {ratio(cow.upsert_s, delta.upsert_s)} "
                          "(target <= 1.0x)")
                if mor and literal:
                    print(f"  MOR upsert / delta-rs merge with literal days [{tag}]: "
                          f"{ratio(mor.upsert_s, literal.upsert_s)} (target <= 1.5x)")
                for r in (cow, mor):
                    if r and plain:
                        print(f"  {r.system}: load / plain Spark load {ratio(r.load_s, plain.load_s)} "
                              f"(target <= 1.0x); queries / plain Spark: point {ratio(r.point_ms, plain.point_ms)}, "
                              f"count {ratio(r.count_ms, plain.count_ms)}, "
                              f"group-by {ratio(r.groupby_ms, plain.groupby_ms)}")
                if cow and mor:
                    print(f"  MOR queries / COW queries [{tag}]: point {ratio(mor.point_ms, cow.point_ms)}, count "
                          f"{ratio(mor.count_ms, cow.count_ms)}, group-by {ratio(mor.groupby_ms, cow.groupby_ms)} "
                          "(target <= 1.5x)")
    most = max((r.most_per_day for r in results if r.system.startswith("pyhudi")), default=0)
    print(f"  pyhudi: at most {most} base files in any day after the load and after every upsert (target <= 2)")


def warm_up(spark, work: Path) -> None:
    """JVM and Python workers warm before the clock: every write path and query shape once, small."""
    from pyspark.sql import functions as F

    small = workload.rows(0, 2, 5)
    path = str(work / "warmup")
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        target = f"{path}_{table_type}"
        pyhudi.write(workload.pandas_frame(spark, small), target,
                     {**workload_options(), "hoodie.datasource.write.table.type": table_type,
                      "hoodie.datasource.write.operation": "bulk_insert"})
        pyhudi.write(workload.pandas_frame(spark, workload.daily_batch(2, 5)), target,
                     {**workload_options(), "hoodie.datasource.write.operation": "upsert"})
        pyhudi.read(spark, target, filters=F.col("key") == "x").collect()
        pyhudi.read(spark, target).groupBy("day").agg(F.avg("speed")).collect()
    workload.pandas_frame(spark, small).write.partitionBy("day").parquet(path + "_plain")
    spark.read.parquet(path + "_plain").groupBy("day").agg(F.avg("speed")).collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drones", type=int, default=200)
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--upserts", type=int, default=5)
    parser.add_argument("--codec", default="snappy,gzip", help="comma-separated codecs (Hudi's default: gzip)")
    parser.add_argument("--table-type", default="COPY_ON_WRITE,MERGE_ON_READ")
    parser.add_argument("--input", default="pandas,persisted", help="pandas and/or persisted DataFrames")
    parser.add_argument("--index", default="SIMPLE", help="comma-separated hoodie.index.type values")
    parser.add_argument("--peers", default="spark,delta", help="spark and/or delta, or none")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra hoodie.* option for every pyhudi write")
    parser.add_argument("--plan-files", type=int, default=400,
                        help="also time planning on the load written into this many files (0: skip)")
    args = parser.parse_args()
    spark = pyhudi.spark_session()
    work = Path(tempfile.mkdtemp(prefix="pyhudi-bench-"))
    print(f"drones={args.drones} days={args.days} upserts={args.upserts} cores={os.cpu_count()}")
    data = Data(args)
    warm_up(spark, work)
    peers = args.peers.split(",")
    results: list[Result] = []
    for codec in args.codec.split(","):
        print(f"\n=== codec {codec}")
        if data.batches:
            upsert_floor(spark, data, codec)
        if "delta" in peers:
            results += [run_delta(work, data, codec=codec, literal=literal) for literal in (False, True)]
        for kind in args.input.split(","):
            if "spark" in peers:
                results.append(run_plain(spark, work, data, args, codec=codec, kind=kind))
            for table_type in args.table_type.split(","):
                for index in args.index.split(","):
                    release_frames(spark)
                    results.append(run_pyhudi(spark, work, data, args, codec=codec, table_type=table_type.strip(),
                                              kind=kind, index=index.strip().upper()))
    summary(results, args)
    if args.plan_files:
        planning_at_scale(spark, work, data, args.plan_files)
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


def release_frames(spark) -> None:  # type: ignore[no-untyped-def]
    """Free the JVM heap the previous system's input DataFrames held. A DataFrame made from a pandas
    frame keeps its rows in the driver's JVM (about 1.2 GB for the 2.88M-row load) until py4j tells
    the JVM that Python dropped it, which happens on a later gateway call: without this, several
    systems' loads can be alive at once and exhaust a 4 GB driver (PySpark 4.3, MOR bulk load)."""
    import gc

    gc.collect()
    for _ in range(2):  # the first call carries the queued releases, the second collects after them
        spark._jvm.java.lang.System.gc()


if __name__ == "__main__":
    main()
