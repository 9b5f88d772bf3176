"""Writers side by side on the drone table: commits per minute and conflict rate.

    .venv/bin/python benchmarks/concurrent_writers.py [--seconds 45] [--drones 20]

Each writer is its own process with its own local Spark (``local[1]``), as separate jobs on one
machine would be. Every writer upserts corrections of one day (every tenth minute of the day,
``drones`` x 144 rows of 12 columns) again and again for ``--seconds``:

* disjoint: writer w corrects day w, so every commit succeeds under optimistic concurrency control;
  1, 2 and 4 writers show how commits per minute scale on this machine's cores;
* overlapping: every writer corrects day 0 (one file group), so all but one of the writes that
  overlap in time fail with HudiWriteConflictError; the conflict rate is failed / attempted.

The peer is delta-rs: the same batches merged (key and a literal day predicate) by 1, 2 and 4
processes into a Delta table of the same rows; both write snappy parquet (delta-rs's default;
Hudi's is gzip). Figures print as a table; the machine's two cores are shared by all writers (and
their JVMs), so more writers than cores measure contention too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload  # noqa: E402  (a sibling module of this script)

OPTIONS = {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
           "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
           "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
           # delta-rs writes snappy parquet; Hudi's default is gzip, which takes 3-4x longer to write the
           # day's file each commit rewrites: both systems write the same codec
           "hoodie.parquet.compression.codec": "snappy"}
DAYS = 4
SCENARIOS = ((1, False), (2, False), (4, False), (2, True), (4, True))


def writer(system: str, path: str, day: int, drones: int, start_at: float, seconds: float, out: str) -> None:
    """One writer process: correct ``day`` until ``seconds`` after ``start_at``."""
    outcomes = []
    if system == "pyhudi":
        import pyhudi

        spark = pyhudi.spark_session("local[1]", spark__sql__shuffle__partitions="1", spark__driver__memory="1g")
        spark.range(1).count()  # the JVM and a Python worker are up before the clock starts
    else:
        from deltalake import DeltaTable
    time.sleep(max(0.0, start_at - time.time()))
    revision = 0
    while time.time() < start_at + seconds:
        revision += 1
        batch = workload.rows(day, 1, drones, revision=revision + day * 1000, every_nth_minute=10)
        t = time.time()
        try:
            if system == "pyhudi":
                pyhudi.write(workload.pandas_frame(spark, batch), path, OPTIONS)
            else:
                (DeltaTable(path).merge(batch, predicate=f"t.key = s.key AND t.day = '{workload.day_name(day)}'",
                                        source_alias="s", target_alias="t")
                 .when_matched_update_all().when_not_matched_insert_all().execute())
            outcomes.append({"ok": True, "start": t, "end": time.time()})
        except Exception as exc:  # a conflict (pyhudi.HudiWriteConflictError, deltalake's CommitFailedError)
            outcomes.append({"ok": False, "error": type(exc).__name__, "message": str(exc)[:500],
                             "start": t, "end": time.time()})
    with open(out, "w") as f:
        json.dump(outcomes, f)


def load(system: str, path: str, drones: int) -> None:
    data = workload.rows(0, DAYS, drones)
    if system == "pyhudi":
        import pyhudi

        spark = pyhudi.spark_session("local[2]")
        pyhudi.write(workload.pandas_frame(spark, data), path,
                     {**OPTIONS, "hoodie.datasource.write.operation": "bulk_insert"})
        spark.stop()
    else:
        from deltalake import write_deltalake

        write_deltalake(path, data, partition_by=["day"])


def scenario(system: str, work: Path, writers: int, overlapping: bool, args: argparse.Namespace) -> dict:
    path = str(work / f"{system}_{writers}_{overlapping}")
    if system == "pyhudi":  # a JVM per load: keep the parent free of Spark
        subprocess.run([sys.executable, __file__, "--load", system, path, str(args.drones)], check=True)
    else:
        load(system, path, args.drones)
    start_at = time.time() + (25 if system == "pyhudi" else 3)  # every JVM is up by then
    procs = []
    for w in range(writers):
        out = str(work / f"out_{system}_{writers}_{overlapping}_{w}.json")
        day = 0 if overlapping else w % DAYS
        procs.append((out, subprocess.Popen(
            [sys.executable, __file__, "--writer", system, path, str(day), str(args.drones), str(start_at),
             str(args.seconds), out], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)))
    outcomes = []
    for out, proc in procs:
        proc.wait()
        outcomes += json.loads(Path(out).read_text())
    ok = sum(o["ok"] for o in outcomes)
    window = max(o["end"] for o in outcomes) - start_at if outcomes else float("nan")
    shutil.rmtree(path, ignore_errors=True)
    errors: dict[str, int] = {}
    for o in outcomes:
        if not o["ok"]:
            errors[o["error"]] = errors.get(o["error"], 0) + 1
            if not overlapping:  # disjoint writers should not fail: show why one did
                print(f"    {o['error']}: {o['message']}")
    return {"errors": errors, "system": system, "writers": writers, "overlapping": overlapping,
            "attempted": len(outcomes),
            "committed": ok, "per_minute": ok / window * 60, "conflict_rate": 1 - ok / max(1, len(outcomes)),
            "median_s": sorted(o["end"] - o["start"] for o in outcomes if o["ok"])[ok // 2] if ok else float("nan")}


def main() -> None:
    if sys.argv[1:2] == ["--writer"]:
        system, path, day, drones, start_at, seconds, out = sys.argv[2:9]
        writer(system, path, int(day), int(drones), float(start_at), float(seconds), out)
        return
    if sys.argv[1:2] == ["--load"]:
        load(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--drones", type=int, default=20)
    parser.add_argument("--systems", default="pyhudi,delta")
    parser.add_argument("--scenarios", default="", help="e.g. 2d,4o: writers and d(isjoint) or o(verlapping)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="pyhudi-concurrency-"))
    print(f"{args.drones} drones, {DAYS} days loaded; each commit corrects {args.drones * 144:,} rows of one day; "
          f"{args.seconds:.0f} s per scenario")
    rows = []
    try:
        for system in args.systems.split(","):
            for writers, overlapping in SCENARIOS:
                if args.scenarios and f"{writers}{'o' if overlapping else 'd'}" not in args.scenarios.split(","):
                    continue
                r = scenario(system, work, writers, overlapping, args)
                rows.append(r)
                print(f"  {system:7s} {writers} writer(s) {'same day ' if overlapping else 'own days '}: "
                      f"{r['committed']}/{r['attempted']} committed, {r['per_minute']:.1f} commits/min, "
                      f"conflict rate {r['conflict_rate']:.0%}, median commit {r['median_s']:.2f} s"
                      + (f" ({', '.join(f'{k} x{v}' for k, v in r['errors'].items())})" if r["errors"] else ""),
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
