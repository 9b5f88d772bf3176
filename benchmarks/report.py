"""How long `pyhudi report` takes on the drone workload's table after 100 commits.

A bulk load of one day (``--drones`` drones, 1,440 readings each), then ``--commits - 1`` daily
upserts (a day's readings plus corrections to every 10th minute of the day before), BLOOM index,
archival off so that every commit stays on the active timeline (cleans run as usual). Then the
report is written five times (after one untimed run); the figures split it into reading the
table's history (``gather``), the advice, the charts and the page. The peer is delta-rs on the
same batches appended to a Delta table: reading its history and its file list (the figures a
Delta report would start from).

    python benchmarks/report.py [--commits 100] [--drones 20]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from workload import daily_batch, pandas_frame, rows  # noqa: E402

import pyhudi  # noqa: E402
from pyhudi.report import charts  # noqa: E402
from pyhudi.report.advisor import advise  # noqa: E402
from pyhudi.report.facts import gather  # noqa: E402
from pyhudi.report.page import render, write_report  # noqa: E402

OPTIONS = {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
           "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
           "hoodie.index.type": "BLOOM", "hoodie.archive.automatic": "false"}


def timed(fn, repeats: int = 5) -> float:  # type: ignore[no-untyped-def]
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--drones", type=int, default=20)
    parser.add_argument("--work", default=None, help="folder for the tables (default: a temporary one)")
    args = parser.parse_args()
    logging.getLogger("pyhudi").setLevel(logging.WARNING)
    work = Path(args.work or tempfile.mkdtemp(prefix="pyhudi-report-"))
    path, delta = str(work / "hudi"), str(work / "delta")
    spark = pyhudi.spark_session()
    started = time.perf_counter()
    batches = [rows(0, 1, args.drones)] + [daily_batch(d, args.drones) for d in range(1, args.commits)]
    if pyhudi.HudiTable.exists(path):  # --work of an earlier run: time the report only
        print(f"reusing {path}")
    else:
        for n, batch in enumerate(batches):
            op = "bulk_insert" if n == 0 else "upsert"
            pyhudi.write(pandas_frame(spark, batch), path, {**OPTIONS, "hoodie.datasource.write.operation": op})
        print(f"wrote {args.commits} commits ({sum(len(b) for b in batches):,} rows) in "
              f"{time.perf_counter() - started:.0f} s: {path}")
    table = pyhudi.HudiTable(path)
    print(f"active timeline: {len(table.timeline.instants())} instants, "
          f"{len(table.timeline.completed_writes())} completed writes")
    total = timed(lambda: write_report(path, work / "report.html"))
    facts = gather(table)
    part = {"gather (timeline, commit metadata, file listing)": timed(lambda: gather(pyhudi.HudiTable(path))),
            "advise": timed(lambda: advise(facts)), "charts (8 PNGs)": timed(lambda: charts.draw(facts))}
    drawn = charts.draw(facts)
    part["page"] = timed(lambda: render(facts, drawn, advise(facts)))
    print(f"\npyhudi report, {args.commits} commits: {total:.2f} s (median of 5); "
          f"{(work / 'report.html').stat().st_size / 1024:.0f} KB page")
    for name, seconds in part.items():
        print(f"  {name:<52} {seconds:.3f} s")
    try:
        import deltalake
    except ImportError:
        print("\n(delta-rs peer skipped: pip install -e '.[bench]')")
        return
    if not Path(delta).exists():
        for batch in batches:
            deltalake.write_deltalake(delta, batch, mode="append", partition_by=["day"])

    def delta_history() -> None:
        t = deltalake.DeltaTable(delta)
        t.history()
        t.get_add_actions(flatten=True)

    print(f"delta-rs, same batches appended ({args.commits} commits): history + file list "
          f"{timed(delta_history):.3f} s (median of 5)")


if __name__ == "__main__":
    main()
