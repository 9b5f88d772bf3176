"""Two writer processes under the storage-based lock on an S3 server: does any committed write get
lost, in ``--runs`` runs?

    .venv/bin/pip install -e '.[test]'      # moto[server], hudi (hudi-rs)
    .venv/bin/python benchmarks/storage_lock_writers.py [--runs 20 --writes 3 --seed 203]

It starts moto's S3 server (``moto[server]``, the one the tests use: ``tests/s3server.py``) on
127.0.0.1. Each run bulk-inserts a fresh ``s3a://pyhudi-lock-writers/t<run>`` table (4 partitions
of 50 keys: ``tests/writer_process.py``'s ``initial_rows``) under optimistic concurrency control,
then starts two writer processes together (``tests/writer_process.py stress``, each with its own
local Spark), each doing ``--writes`` random upserts and deletes on random partitions; the seeds
change from run to run (writer w of run r: ``--seed + 2 (r - 1) + w``). The lock is the default on
S3, Hudi's ``StorageBasedLockProvider`` (``.hoodie/.locks/table_lock.json``, conditional PUTs).

After each run it checks what ``test_two_processes_occ_on_s3a_lose_no_committed_write``
(``tests/test_storage_lock.py``) checks: every write reported committed is completed on the
timeline, no instant is left pending, the table as hudi-rs reads it is what the committed writes
alone make of the initial rows, every refusal is a ``HudiWriteConflictError`` naming a completed
commit that changed a partition it wrote, each commit's recorded conflict check found no
conflict, there are at least ``--writes`` commits, and the lock file is left released. One more
check needs no recorded conflict check: each commit that rewrote a file group rewrote the slice of
the commit before it on that group (its ``prevCommit``), so no two commits of one group overlapped.

A lost write is a committed write missing from the timeline, or one whose rows the table does not
show as the model says (the last committed write of a key that differs). It prints a line per run
and a summary, and exits 1 if anything was lost or a check failed; a failing run's outcomes (the
writers' JSON) stay in the printed folder.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from s3server import S3Server  # noqa: E402  (the tests' moto server)
from writer_process import initial_rows  # noqa: E402  (the tests' writer process)

import pyhudi  # noqa: E402
from pyhudi.table.table import HudiTable  # noqa: E402
from pyhudi.transaction.conflict import CONFLICT_CHECK_KEY  # noqa: E402
from pyhudi.transaction.storage_lock import LOCK_FILE  # noqa: E402

WRITER = str(ROOT / "tests" / "writer_process.py")
BUCKET = "pyhudi-lock-writers"
BASE = {"hoodie.table.name": "c", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}
OCC = {**BASE, "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}
SCHEMA = "id string, p string, ts long, val string"
CONFLICT = "HudiWriteConflictError"
Model = dict[str, tuple[str, int, str]]


@dataclass
class Run:
    run: int
    seeds: tuple[int, ...]
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    lost: set[str] = field(default_factory=set)  # instants of committed writes lost
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    bulk_s: float = 0.0
    writers_s: float = 0.0
    spark_start_s: list[float] = field(default_factory=list)  # per writer: launch to its first write
    rewrites: int = 0  # file-group rewrites whose prevCommit was checked

    @property
    def committed(self) -> int:
        return sum(o["ok"] for o in self.outcomes)

    @property
    def conflicts(self) -> int:
        return sum(not o["ok"] and o["error"] == CONFLICT for o in self.outcomes)

    @property
    def other_failures(self) -> int:
        return sum(not o["ok"] and o["error"] != CONFLICT for o in self.outcomes)

    @property
    def failed(self) -> bool:
        return bool(self.lost or self.problems or self.other_failures)


def _model(outcomes: list[dict[str, Any]]) -> Model:
    """The table the successful writes alone make of the initial rows (as the test rebuilds it)."""
    model: Model = {k: (p, ts, v) for k, p, ts, v in initial_rows()}
    for o in sorted((o for o in outcomes if o["ok"]), key=lambda o: o["instant"]):
        for k, p, ts, v in o["rows"]:
            if o["op"] == "delete":
                model.pop(k, None)
            else:
                model[k] = (p, ts, v)
    return model


def _last_writer(outcomes: list[dict[str, Any]], key: str) -> str | None:
    """The instant of the last committed write of ``key``, if any wrote it."""
    last = None
    for o in sorted((o for o in outcomes if o["ok"]), key=lambda o: o["instant"]):
        if any(row[0] == key for row in o["rows"]):
            last = o["instant"]
    return last


def check(server: S3Server, path: str, table_key: str, result: Run, writes: int) -> None:
    """The checks of the test, recording lost writes and failed checks in ``result``."""
    import hudi
    import pyarrow as pa

    outcomes, problems = result.outcomes, result.problems
    committed = {o["instant"] for o in outcomes if o["ok"]}
    failed = [o for o in outcomes if not o["ok"]]
    if result.committed < writes and not result.other_failures:
        problems.append(f"{result.committed} commits, fewer than --writes={writes}")

    table = HudiTable(path, storage_options=server.storage_options)
    timeline = table.timeline
    if timeline.pending():
        problems.append(f"pending instants: {[str(i) for i in timeline.pending()]}")
    completed = {i.timestamp: i for i in timeline.completed_writes()}
    writes_meta = {t: timeline.commit_metadata(i) for t, i in completed.items()}
    for instant in sorted(committed - set(completed)):
        result.lost.add(instant)
        problems.append(f"committed {instant} is not completed on the timeline")

    # the table as hudi-rs reads it, against the model
    model = _model(outcomes)
    batches = hudi.HudiTable(path.replace("s3a://", "s3://"), options=server.storage_options).read()
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    seen = {r["id"]: (r["p"], r["ts"], r["val"]) for r in rows}
    if len(seen) != len(rows):
        problems.append(f"hudi-rs reads {len(rows)} rows for {len(seen)} keys")
    differing = sorted(k for k in set(model) | set(seen) if model.get(k) != seen.get(k))
    if differing:
        shown = "; ".join(f"{k}: table {seen.get(k)} model {model.get(k)}" for k in differing[:5])
        problems.append(f"{len(differing)} keys differ from the model ({shown})")
        for key in differing:
            instant = _last_writer(outcomes, key)
            if instant is not None:
                result.lost.add(instant)

    # refusals: conflicts only, each naming a completed commit that changed a partition it wrote
    for o in failed:
        if o["error"] != CONFLICT:
            problems.append(f"{o['op']} of writer {o['rows'][0][3]} failed: {o['error']}: {o['message'][:200]}")
            continue
        named = re.findall(r"commit (\d{17}) \(file groups ([^)]*)", o["message"])  # the message is cut at 300
        if not named:
            problems.append(f"refusal names no commit: {o['message'][:200]}")
        for other, groups in named:
            partitions = {g.split("/")[0] for g in groups.split(", ") if "/" in g}
            if other not in writes_meta or not partitions <= {row[1] for row in o["rows"]}:
                problems.append(f"refusal names {other} ({groups}), not a completed commit of its partitions")

    # each commit's recorded conflict check, and each file group's chain of slices
    for instant in sorted(committed & set(writes_meta)):
        recorded = writes_meta[instant].extra_metadata.get(CONFLICT_CHECK_KEY)
        if recorded is None:
            problems.append(f"{instant} records no conflict check")
            continue
        summary = json.loads(recorded)
        if summary["conflicts"]:
            problems.append(f"{instant} committed with conflicts {summary['conflicts']}")
        for other in summary["candidates"]:
            if other in writes_meta and (writes_meta[instant].touched_file_groups()
                                         & writes_meta[other].touched_file_groups()):
                problems.append(f"{instant} and its candidate {other} both changed a file group")
    chains: dict[tuple[str, str], list[tuple[str, str]]] = {}  # file group: (instant, prevCommit) in order
    for instant in sorted(writes_meta):
        for stat in writes_meta[instant].write_stats():
            chains.setdefault((stat.partitionPath, stat.fileId), []).append((instant, stat.prevCommit))
    for group, chain in chains.items():
        for (before, _), (instant, prev) in zip(chain, chain[1:]):
            result.rewrites += 1
            if prev != before:
                problems.append(f"{instant} rewrote {group[0]}/{group[1]} from {prev}, not from {before}, "
                                "the commit before it that wrote the group")

    lock = json.loads(server.client().get_object(Bucket=BUCKET, Key=f"{table_key}/{LOCK_FILE}")["Body"].read())
    if not lock.get("expired"):
        problems.append(f"lock file left held: {lock}")


def run_once(spark: Any, server: S3Server, run: int, seeds: tuple[int, ...], writes: int, work: Path) -> Run:
    result = Run(run, seeds)
    table_key = f"t{run}"
    path = f"s3a://{BUCKET}/{table_key}"
    started = time.perf_counter()
    pyhudi.write(spark.createDataFrame(initial_rows(), SCHEMA), path,
                 {**OCC, "hoodie.datasource.write.operation": "bulk_insert"})
    result.bulk_s = time.perf_counter() - started

    options = json.dumps({**OCC, **server.hadoop_conf})
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    procs = []
    launched = time.time()
    for w, seed in enumerate(seeds):
        out = work / f"run{run}-w{w}.json"
        err = open(work / f"run{run}-w{w}.stderr", "w")
        proc = subprocess.Popen([sys.executable, WRITER, "stress", path, str(out), str(w), str(seed), str(writes),
                                 options], stdout=subprocess.DEVNULL, stderr=err, env=env)
        procs.append((w, out, err, proc))
    for w, out, err, proc in procs:
        try:
            code = proc.wait(timeout=900)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
            result.problems.append(f"writer {w} ran longer than 900 s and was killed")
        err.close()
        if code != 0:
            tail = (work / f"run{run}-w{w}.stderr").read_text()[-600:]
            result.problems.append(f"writer {w} exited with {code}: {tail}")
        elif out.exists():
            mine = json.loads(out.read_text())
            result.outcomes += mine
            if mine:
                result.spark_start_s.append(min(o["started"] for o in mine) - launched)
    result.writers_s = time.time() - launched
    (work / f"run{run}-outcomes.json").write_text(json.dumps(result.outcomes, indent=1))
    if not result.problems:
        try:
            check(server, path, table_key, result, writes)
        except Exception as exc:  # noqa: BLE001 - a check that cannot run is a failed check
            result.problems.append(f"check raised {type(exc).__name__}: {exc}")
    result.seconds = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--writes", type=int, default=3, help="writes per writer per run")
    parser.add_argument("--seed", type=int, default=203, help="writer w of run r gets seed + 2 (r - 1) + w")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pyhudi-lock-writers-"))
    server = S3Server(work / "requests.log")
    results: list[Run] = []
    try:
        server.make_bucket(BUCKET)
        # small: it shares the cores with two writer processes
        spark = pyhudi.spark_session("local[1]", spark__sql__shuffle__partitions="1",
                                     spark__default__parallelism="1", spark__driver__memory="1g")
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in server.hadoop_conf.items():
            conf.set(key, value)
        print(f"{args.runs} runs, 2 writer processes x {args.writes} writes, OCC, storage-based lock on moto S3; "
              f"outcomes in {work}")
        print(f"{'run':>4} {'seeds':>9} {'committed':>9} {'conflicts':>9} {'other':>5} {'lost':>4} {'seconds':>7}"
              f"  (bulk insert, writers, writers' Spark start)")
        for run in range(1, args.runs + 1):
            seeds = (args.seed + 2 * (run - 1), args.seed + 2 * (run - 1) + 1)
            r = run_once(spark, server, run, seeds, args.writes, work)
            results.append(r)
            starts = "/".join(f"{s:.0f}" for s in r.spark_start_s)
            print(f"{run:>4} {seeds[0]:>4},{seeds[1]:<4} {r.committed:>9} {r.conflicts:>9} {r.other_failures:>5} "
                  f"{len(r.lost):>4} {r.seconds:>7.1f}  ({r.bulk_s:.1f}, {r.writers_s:.1f}, {starts})", flush=True)
            for problem in r.problems:
                print(f"       FAILED: {problem}", flush=True)
            if r.lost:
                print(f"       lost: {sorted(r.lost)}; outcomes: {work / f'run{run}-outcomes.json'}", flush=True)
        spark.stop()
    finally:
        server.stop()

    seconds = [r.seconds for r in results]
    attempted = sum(len(r.outcomes) for r in results)
    conflicts = sum(r.conflicts for r in results)
    lost = sum(len(r.lost) for r in results)
    failed_runs = [r.run for r in results if r.failed]
    starts = [s for r in results for s in r.spark_start_s]
    print("\nsummary")
    print(f"  runs: {len(results)} (2 writer processes x {args.writes} writes each)")
    print(f"  writes committed: {sum(r.committed for r in results)} of {attempted}; "
          f"conflicts (HudiWriteConflictError): {conflicts}; other failures: {sum(r.other_failures for r in results)}")
    print(f"  lost writes: {lost} (target 0); runs with a failed check: {len(failed_runs)}"
          + (f" {failed_runs}" if failed_runs else "")
          + f"; file-group rewrites checked against the commit before: {sum(r.rewrites for r in results)}")
    if seconds:
        print(f"  seconds per run: median {statistics.median(seconds):.1f}, max {max(seconds):.1f}; "
              f"of which bulk insert median {statistics.median(r.bulk_s for r in results):.1f}, "
              f"writer processes median {statistics.median(r.writers_s for r in results):.1f}"
              + (f" (launch to first write, their Spark start: median {statistics.median(starts):.1f})"
                 if starts else ""))
        first = [o["ended"] - o["started"] for r in results for o in r.outcomes if o["rows"][0][3].endswith("-0")]
        later = [o["ended"] - o["started"] for r in results for o in r.outcomes if not o["rows"][0][3].endswith("-0")]
        if first and later:
            print(f"  seconds per write: a writer's first median {statistics.median(first):.1f}, "
                  f"its later ones median {statistics.median(later):.1f}")
    sys.exit(1 if failed_runs or len(results) < args.runs else 0)


if __name__ == "__main__":
    main()
