"""The 2,880-row commit of a pandas frame against delta-rs's merge of the same rows, and what it
is made of.

    .venv/bin/python benchmarks/small_commit.py [--drones 20] [--commits 12]

One process, local[1] Spark, optimistic concurrency control, snappy parquet on both sides (as
``benchmarks/concurrent_writers.py`` writes): each commit upserts corrections of one day (every
tenth minute, ``drones`` x 144 rows of 12 columns) into a table of four days partitioned by
``day``, a free-form string. Five ways take turns, so the machine's load is shared:

* pyhudi: a small local relation's rows turned into Arrow by the JVM and served to Python without
  a Spark job, keyed with pyarrow, once for the partition-path check and the write (the default);
* pyhudi with the rows keyed by Spark's projection, which the optimizer folds, and collected as
  Python values (``small_write.held_arrow`` off: the default before held rows);
* pyhudi with the keyed rows collected by a Spark job (that, and ``local_batch.LOCAL_ROWS`` at 0:
  ``toArrow``), as a batch that is no local relation is;
* pyhudi with ``hoodie.clean.async=true``: the clean Hudi runs after every commit (each commit
  retires the day's oldest file slice) on a thread beside the write;
* delta-rs: a merge on key and the literal day, from the same pandas frame.

The clock runs from the pandas frame (``spark.createDataFrame`` inside it for pyhudi; the default
way is also timed from the DataFrame, as a pipeline that already has one writes it), and figures
are medians after two warm-up rounds. The last line is what a write that reads such a frame
with a Spark job pays before it writes a byte: the frame made from pandas, and one projection of
it (the record key and partition path) collected as Arrow.
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
from concurrent_writers import OPTIONS  # noqa: E402  (the writers' options: OCC, snappy)

#: the default way's commits timed from the Spark DataFrame, as a pipeline that has one writes it
FROM_FRAME = "pyhudi, the DataFrame made outside the clock"
#: the default way with the clean on a thread beside the write (``hoodie.clean.async``)
ASYNC_CLEAN = "pyhudi, hoodie.clean.async=true"
PHASES = ("check_s", "collect_s", "write_s", "commit_s", "services_s", "total_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drones", type=int, default=20)
    parser.add_argument("--commits", type=int, default=12)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from deltalake import DeltaTable, write_deltalake
    from pyspark.sql import functions as F

    import pyhudi
    from pyhudi.spark import local_batch, small_write
    from pyhudi.spark.compat import collect_arrow

    spark = pyhudi.spark_session("local[1]", spark__sql__shuffle__partitions="1", spark__driver__memory="1g")
    work = Path(tempfile.mkdtemp(prefix="pyhudi-small-commit-"))
    loaded = workload.rows(0, 4, args.drones)
    default_rows, held = local_batch.LOCAL_ROWS, small_write.held_arrow
    ways = {"pyhudi": (default_rows, True), "pyhudi, keyed by Spark's projection": (default_rows, False),
            "pyhudi, collected by a Spark job": (0, False), ASYNC_CLEAN: (default_rows, True)}
    options = {name: {**OPTIONS, "hoodie.clean.async": "true"} if name == ASYNC_CLEAN else OPTIONS for name in ways}
    for name in ways:
        pyhudi.write(workload.pandas_frame(spark, loaded), str(work / name),
                     {**OPTIONS, "hoodie.datasource.write.operation": "bulk_insert"})
    write_deltalake(str(work / "delta"), loaded, partition_by=["day"])
    seconds: dict[str, list[float]] = {name: [] for name in [*ways, FROM_FRAME, "delta-rs merge", "floor"]}
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    for n in range(args.commits + 2):
        batch = workload.rows(1, 1, args.drones, revision=n + 1, every_nth_minute=10)
        for name, (limit, keep_held) in ways.items():
            local_batch.LOCAL_ROWS = limit
            small_write.held_arrow = held if keep_held else (lambda df: None)
            try:
                started = time.perf_counter()
                frame = workload.pandas_frame(spark, batch)
                made = time.perf_counter()
                res = pyhudi.write(frame, str(work / name), options[name])
            finally:
                local_batch.LOCAL_ROWS, small_write.held_arrow = default_rows, held
            if n >= 2:
                seconds[name].append(time.perf_counter() - started)
                if name == "pyhudi":
                    seconds[FROM_FRAME].append(time.perf_counter() - made)
                    for p in PHASES:
                        phases[p].append(res.stats.get(p, 0.0))
        started = time.perf_counter()
        (DeltaTable(str(work / "delta")).merge(batch.to_pandas(), predicate=(
            f"t.key = s.key AND t.day = '{workload.day_name(1)}'"), source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())
        if n >= 2:
            seconds["delta-rs merge"].append(time.perf_counter() - started)
        started = time.perf_counter()
        frame = workload.pandas_frame(spark, batch)
        collect_arrow(frame.select(F.col("key").cast("string").alias("k"), F.col("day").alias("p")))
        if n >= 2:
            seconds["floor"].append(time.perf_counter() - started)
    medians = {name: statistics.median(t) for name, t in seconds.items()}
    delta = medians["delta-rs merge"]
    print(f"{args.drones * 144:,} rows a commit into a table of 4 days of {args.drones} drones; "
          f"{args.commits} commits each way, medians")
    for name, m in medians.items():
        label = "pandas frame + a projection by a Spark job" if name == "floor" else name
        print(f"  {label:<46} {m * 1000:7.0f} ms  {m / delta:5.2f}x delta-rs")
    print("  pyhudi's phases (median s): " + ", ".join(f"{p[:-2]} {statistics.median(v):.3f}"
                                                     for p, v in phases.items()))
    spark.stop()


if __name__ == "__main__":
    main()
