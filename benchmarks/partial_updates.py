"""Hudi 1.x partial updates against whole-row updates, on the drone workload.

    .venv/bin/python benchmarks/partial_updates.py [--drones 20 --days 13 --repeats 3]

A merge-on-read table of version 8 (``--days`` days of :mod:`workload`'s drone rows, 28,800 a day
with 20 drones, bulk_insert), then ``pyhudi.merge`` of 2,880 corrections of a day (every tenth
minute) that sets three of the table's columns (``status``, ``battery`` and the ordering field ``ts``):

* (a) written as partial updates (``hoodie.spark.sql.merge.into.partial.updates=true``, Hudi's
  default: log blocks of the three columns, ``IS_PARTIAL=true``), against (b) the same merge written
  as whole rows (the option false), each the median of ``--repeats`` runs on days of their own;
* (c) a snapshot read of a day whose slices hold partial blocks, against (d) one of a day whose slices
  hold whole-row blocks (``pyhudi.read`` with the day's filter, counted and summed);
* the log bytes each kind of merge wrote.

The peer: delta-rs's ``merge`` (``when_matched_update`` of the same three columns) of the same rows on
a delta table of the same load partitioned by day (``--no-delta`` leaves it out).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload  # noqa: E402  (a sibling module of this script)
from dml import timed  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

import pyhudi  # noqa: E402

SET = {"status": "s.status", "battery": "s.battery", "ts": "s.ts"}


def log_bytes(path: Path, day: str) -> int:
    return sum(f.stat().st_size for f in (path / day).glob(".*.log.*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drones", type=int, default=20)
    parser.add_argument("--days", type=int, default=13)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-delta", action="store_true", help="leave out delta-rs")
    args = parser.parse_args()
    n = args.repeats
    if args.days < 1 + 4 * n:
        parser.error(f"--days must be at least {1 + 4 * n} (each run takes a day of its own)")
    spark = pyhudi.spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="pyhudi-partial-bench-"))
    path = work / "drones"
    opts = {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.write.table.version": "8",
            "hoodie.compact.inline": "false"}
    started = time.perf_counter()
    pyhudi.write(workload.pandas_frame(spark, workload.rows(0, args.days, args.drones)), str(path),
                 {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    print(f"MERGE_ON_READ v8: {args.days} days x {1440 * args.drones:,} rows loaded in "
          f"{time.perf_counter() - started:.1f} s")
    day = workload.day_name

    def source(d: int) -> pa.Table:
        return workload.rows(d, 1, args.drones, revision=1, every_nth_minute=10)

    frames: dict[int, object] = {}

    def merge(d: int, partial: bool) -> None:
        res = (pyhudi.merge(spark, str(path), frames[d], on="t.key = s.key AND t.day = s.day")
               .when_matched_update(set=SET)
               .execute({"hoodie.spark.sql.merge.into.partial.updates": str(partial).lower()}))
        assert res.stats["partial_update"] is partial, res.stats

    frames[0] = workload.pandas_frame(spark, source(0))
    merge(0, True)  # warm-up
    days = iter(range(1, args.days))
    figures: dict[str, float] = {}
    partial_days = [next(days) for _ in range(n)]
    whole_days = [next(days) for _ in range(n)]
    # the two kinds alternate, so a machine that slows down or speeds up weighs on both alike
    times: dict[bool, list[float]] = {True: [], False: []}
    for pair in zip(partial_days, whole_days, strict=True):
        for d, partial in zip(pair, (True, False), strict=True):
            frames[d] = workload.pandas_frame(spark, source(d))
            started = time.perf_counter()
            merge(d, partial)
            times[partial].append(time.perf_counter() - started)
    figures["(a) merge, partial updates"] = statistics.median(times[True])
    figures["(b) merge, whole rows"] = statistics.median(times[False])

    def read(d: int) -> None:
        pyhudi.read(spark, str(path), filters=f"day = '{day(d)}'").agg(F.count("*"), F.sum("battery")).collect()

    figures["(c) read a day with partial blocks"] = timed([(lambda d=d: read(d)) for d in partial_days])
    figures["(d) read a day with whole-row blocks"] = timed([(lambda d=d: read(d)) for d in whole_days])
    partial_bytes = log_bytes(path, f"day={day(partial_days[0])}") or log_bytes(path, day(partial_days[0]))
    whole_bytes = log_bytes(path, f"day={day(whole_days[0])}") or log_bytes(path, day(whole_days[0]))
    peer = None if args.no_delta else delta_merge(work, args, [next(days) for _ in range(n)])

    rows = source(1).num_rows
    print(f"median of {n} runs, seconds ({rows:,} rows merged per run):")
    for name, seconds in figures.items():
        print(f"  {name:<40} {seconds:6.2f}")
    merges = figures["(a) merge, partial updates"] / figures["(b) merge, whole rows"]
    reads = figures["(c) read a day with partial blocks"] / figures["(d) read a day with whole-row blocks"]
    print(f"partial / whole: merge {merges:.2f}x, read {reads:.2f}x; "
          f"log bytes of a day's merge: partial {partial_bytes:,}, whole {whole_bytes:,}")
    if peer is not None:
        print(f"delta-rs merge of the same rows (update of the three columns): {peer:.2f} s "
              f"(pyhudi partial {figures['(a) merge, partial updates'] / peer:.1f}x)")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


def delta_merge(work: Path, args: argparse.Namespace, ds: list[int]) -> float:
    from deltalake import DeltaTable, write_deltalake

    path = str(work / "delta")
    write_deltalake(path, workload.rows(0, args.days, args.drones), partition_by=["day"])
    dt = DeltaTable(path)
    sources = {d: workload.rows(d, 1, args.drones, revision=1, every_nth_minute=10) for d in ds}
    updates = {c: f"s.{c}" for c in ("status", "battery", "ts")}
    dt.merge(sources[ds[0]], "t.key = s.key AND t.day = s.day", source_alias="s", target_alias="t") \
        .when_matched_update(updates).execute()  # warm-up
    return timed([(lambda d=d: dt.merge(sources[d], "t.key = s.key AND t.day = s.day", source_alias="s",
                                        target_alias="t").when_matched_update(updates).execute()) for d in ds])


if __name__ == "__main__":
    main()
