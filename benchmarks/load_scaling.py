"""Bulk load time against rows: 10, 20 and 30 days of drone rows into fresh tables.

    .venv/bin/python benchmarks/load_scaling.py [--days 10,20,30] [--drones 200]
        [--systems plain,COPY_ON_WRITE,MERGE_ON_READ] [--codec snappy] [--option KEY=VALUE ...]

The rows are :mod:`workload`'s, given as ``benchmarks/drones.py`` gives them: a DataFrame made
with ``spark.createDataFrame(pandas_df)``, made outside the clock. Per size and system: the load's
seconds, rows per second, the time per row against the smallest size's (1.00x = linear), and for
pyhudi the phases its commit records (``pyhudi.write.phases``: prepare, partition counts, plan,
write, commit). Plain Spark's ``df.write.partitionBy("day").parquet`` of the same rows is the scale
(it pays the same cost of reading a pandas-made DataFrame). Before each load the previous input is
released (``release_frames``: a pandas-made DataFrame holds its rows in the driver's JVM heap), and
the JVM's garbage-collection seconds during the load are printed: a driver short of heap shows up
there first.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload  # noqa: E402  (a sibling module of this script)
from drones import release_frames, workload_options  # noqa: E402

import pyhudi  # noqa: E402


def gc_seconds(spark) -> float:  # type: ignore[no-untyped-def]
    """The driver JVM's total garbage-collection time so far (every collector)."""
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    return sum(beans.get(i).getCollectionTime() for i in range(beans.size())) / 1000


def load_once(spark, table, path: Path, system: str, codec: str, extra: dict[str, str]):  # type: ignore[no-untyped-def]
    """Seconds of one load of ``table`` by ``system``, its phases, and GC seconds during it."""
    release_frames(spark)
    df = workload.pandas_frame(spark, table)
    gc0 = gc_seconds(spark)
    started = time.perf_counter()
    phases: dict[str, float] = {}
    if system == "plain":
        df.write.option("compression", codec).partitionBy("day").parquet(str(path))
    else:
        res = pyhudi.write(df, str(path), {**workload_options(), "hoodie.datasource.write.operation": "bulk_insert",
                                           "hoodie.parquet.compression.codec": codec,
                                           "hoodie.datasource.write.table.type": system, **extra})
        phases = {k[:-2]: v for k, v in res.stats.items() if k.endswith("_s") and k != "total_s"
                  and isinstance(v, (int, float))}
    seconds = time.perf_counter() - started
    gc = gc_seconds(spark) - gc0
    del df
    shutil.rmtree(path, ignore_errors=True)
    return seconds, phases, gc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", default="10,20,30", help="comma-separated load sizes in days")
    parser.add_argument("--drones", type=int, default=200)
    parser.add_argument("--systems", default="plain,COPY_ON_WRITE,MERGE_ON_READ")
    parser.add_argument("--codec", default="snappy")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra hoodie.* option for every pyhudi load")
    args = parser.parse_args()
    extra = dict(o.split("=", 1) for o in args.option)
    spark = pyhudi.spark_session()
    work = Path(tempfile.mkdtemp(prefix="pyhudi-load-"))
    conf = spark.sparkContext.getConf()
    print(f"drones={args.drones} codec={args.codec} driver memory {conf.get('spark.driver.memory', '-')}, "
          f"shuffle partitions {spark.conf.get('spark.sql.shuffle.partitions')}, Spark {spark.version}")
    small = workload.rows(0, 1, 20)  # warm the JVM and the Python workers
    for system in args.systems.split(","):
        load_once(spark, small, work / "warmup", system, args.codec, extra)
    first: dict[str, float] = {}
    print(f"\n{'days':>4} {'rows':>10} {'system':<14} {'s':>7} {'rows/s':>9} {'s/row vs first':>15} "
          f"{'GC s':>6}  phases (s)")
    for days in (int(d) for d in args.days.split(",")):
        table = workload.rows(0, days, args.drones)
        for system in args.systems.split(","):
            seconds, phases, gc = load_once(spark, table, work / f"{system}_{days}", system, args.codec, extra)
            per_row = seconds / table.num_rows
            first.setdefault(system, per_row)
            shown = ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
            print(f"{days:>4} {table.num_rows:>10,} {system:<14} {seconds:7.2f} {table.num_rows / seconds:9,.0f} "
                  f"{per_row / first[system]:14.2f}x {gc:6.2f}  {shown}", flush=True)
        del table
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
