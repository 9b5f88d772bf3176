"""Predicate DML against key-based writes of the same rows, on the drone workload.

    .venv/bin/python benchmarks/dml.py [--drones 20 --days 20 --repeats 3 --table-type COPY_ON_WRITE]

A table of ``--days`` days of :mod:`workload`'s drone rows (bulk_insert; 28,800 rows a day with 20
drones), then, each the median of ``--repeats`` runs on days of their own (so no run rewrites what
another just wrote):

* (a) ``pyhudi.update`` of one day (``where day = X``, setting ``status`` and ``battery``) against
  (b) a key-based ``pyhudi.write`` upsert of that day's rows with the same change, which the user
  already holds (the DataFrame is made outside the clock);
* (c) ``pyhudi.delete`` of one day against a key-based delete of its keys (``operation=delete``);
* (d) a ``pyhudi.merge`` of 2,880 source rows (corrections of every tenth minute of a day with 20
  drones; matched update *, not matched insert *) against the same rows written as an upsert.

The peer: delta-rs on the same rows (``write_deltalake`` partitioned by day), its ``update``,
``delete`` and ``merge`` of the same days, timed in the same run (``--no-delta`` leaves it out).

The DML pays for reading the rows it changes (pruned to the day's partition) and for the small
Spark jobs that count them (and, for the merge, find the source's partitions and check that no
target row is matched twice); the key-based write starts from rows in memory.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload  # noqa: E402  (a sibling module of this script)

import pyhudi  # noqa: E402


def options(table_type: str) -> dict[str, str]:
    return {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type}


def timed(runs: list[Callable[[], object]], prepare: list[Callable[[], object]] | None = None) -> float:
    """The median seconds of ``runs`` (each prepared, outside the clock, by ``prepare``)."""
    times = []
    for i, run in enumerate(runs):
        if prepare is not None:
            prepare[i]()
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def changed_day(day: int, drones: int) -> pa.Table:
    """The rows of ``day`` with the change the update makes: status maintenance, battery - 1."""
    rows = workload.rows(day, 1, drones)
    rows = rows.set_column(rows.schema.get_field_index("status"), "status",
                           pa.array(["maintenance"] * rows.num_rows))
    return rows.set_column(rows.schema.get_field_index("battery"), "battery", pc.subtract(rows["battery"], 1.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drones", type=int, default=20)
    parser.add_argument("--days", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--table-type", default="COPY_ON_WRITE")
    parser.add_argument("--no-delta", action="store_true", help="leave out delta-rs")
    args = parser.parse_args()
    n = args.repeats
    if args.days < 1 + 6 * n:
        parser.error(f"--days must be at least {1 + 6 * n} (each run takes a day of its own)")
    spark = pyhudi.spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="pyhudi-dml-bench-"))
    path = str(work / "drones")
    opts = options(args.table_type)
    load = workload.pandas_frame(spark, workload.rows(0, args.days, args.drones))
    started = time.perf_counter()
    pyhudi.write(load, path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    print(f"{args.table_type}: {args.days} days x {1440 * args.drones:,} rows loaded in "
          f"{time.perf_counter() - started:.1f} s")
    day = workload.day_name
    # warm-up (Spark compiles its code on first use): one update, one upsert
    pyhudi.update(spark, path, where=f"day = '{day(0)}'", set={"status": "'maintenance'"})
    pyhudi.write(workload.pandas_frame(spark, changed_day(0, args.drones)), path, opts)

    days = iter(range(1, args.days))
    figures: dict[str, float] = {}
    ds = [next(days) for _ in range(n)]
    figures["(a) update one day"] = timed([
        (lambda d=d: pyhudi.update(spark, path, where=f"day = '{day(d)}'",
                                   set={"status": "'maintenance'", "battery": "battery - 1"})) for d in ds])
    ds = [next(days) for _ in range(n)]
    frames: dict[int, object] = {}
    figures["(b) upsert of the same rows"] = timed(
        [(lambda d=d: pyhudi.write(frames[d], path, opts)) for d in ds],
        [(lambda d=d: frames.__setitem__(d, workload.pandas_frame(spark, changed_day(d, args.drones)))) for d in ds])
    ds = [next(days) for _ in range(n)]
    figures["(c) delete one day"] = timed([(lambda d=d: pyhudi.delete(spark, path, where=f"day = '{day(d)}'"))
                                          for d in ds])
    ds = [next(days) for _ in range(n)]
    delete_opts = {**opts, "hoodie.datasource.write.operation": "delete"}
    figures["(c') key-based delete of the day"] = timed(
        [(lambda d=d: pyhudi.write(frames[d], path, delete_opts)) for d in ds],
        [(lambda d=d: frames.__setitem__(d, workload.pandas_frame(
            spark, workload.rows(d, 1, args.drones).select(["key", "day", "ts"])))) for d in ds])

    def source(d: int) -> pa.Table:  # 2,880 rows with 20 drones
        return workload.rows(d, 1, args.drones, revision=1, every_nth_minute=10)

    ds = [next(days) for _ in range(n)]
    rows_merged = source(ds[0]).num_rows
    figures[f"(d) merge of {rows_merged:,} rows"] = timed(
        [(lambda d=d: pyhudi.merge(spark, path, frames[d], on="t.key = s.key AND t.day = s.day")
          .when_matched_update_all().when_not_matched_insert_all().execute()) for d in ds],
        [(lambda d=d: frames.__setitem__(d, workload.pandas_frame(spark, source(d)))) for d in ds])
    ds = [next(days) for _ in range(n)]
    figures[f"(d') upsert of the same {rows_merged:,} rows"] = timed(
        [(lambda d=d: pyhudi.write(frames[d], path, opts)) for d in ds],
        [(lambda d=d: frames.__setitem__(d, workload.pandas_frame(spark, source(d)))) for d in ds])

    peer = {} if args.no_delta else delta_figures(work, args, n)
    print(f"median of {n} runs, seconds (delta-rs on the same rows and days in the last column):")
    for name, seconds in figures.items():
        other = peer.get(name[:3])
        print(f"  {name:<38} {seconds:6.2f}" + (f"   delta-rs {other:6.2f}  ({seconds / other:.2f}x)" if other else ""))
    a, b = figures["(a) update one day"], figures["(b) upsert of the same rows"]
    print(f"update / upsert: {a / b:.2f}x")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


def delta_figures(work: Path, args: argparse.Namespace, n: int) -> dict[str, float]:
    """delta-rs's update, delete and merge of the same rows on the same days (keyed by the figure's
    label: "(a)", "(c)", "(d)"), on a delta table of the same load partitioned by day."""
    from deltalake import DeltaTable, write_deltalake

    path = str(work / "delta")
    write_deltalake(path, workload.rows(0, args.days, args.drones), partition_by=["day"])
    dt = DeltaTable(path)
    day = workload.day_name
    dt.update(predicate=f"day = '{day(0)}'", updates={"status": "'maintenance'"})  # warm-up
    days = iter(range(1, args.days))
    out: dict[str, float] = {}
    ds = [next(days) for _ in range(n)]
    out["(a)"] = timed([(lambda d=d: dt.update(predicate=f"day = '{day(d)}'",
                                                updates={"status": "'maintenance'", "battery": "battery - 1"}))
                        for d in ds])
    for _ in range(n):  # (the days pyhudi's key-based upsert took)
        next(days)
    ds = [next(days) for _ in range(n)]
    out["(c)"] = timed([(lambda d=d: dt.delete(f"day = '{day(d)}'")) for d in ds])
    for _ in range(n):
        next(days)
    ds = [next(days) for _ in range(n)]
    sources = {d: workload.rows(d, 1, args.drones, revision=1, every_nth_minute=10) for d in ds}
    out["(d)"] = timed([(lambda d=d: dt.merge(sources[d], "t.key = s.key AND t.day = s.day",
        source_alias="s", target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute())
        for d in ds])
    return out


if __name__ == "__main__":
    main()
