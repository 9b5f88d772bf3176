"""Two writer processes on one table, the second starting while the first is in progress.

    .venv/bin/python benchmarks/two_writers.py [--rows 200000]

A table holds one bulk-loaded partition (d0). Process A upserts ``--rows`` rows into dA; process B,
with its own local Spark, starts its upsert of ``--rows`` rows into dB once A's instant is pending.
It runs twice: in single-writer mode (B must fail with HudiConcurrentWriteError, naming A, and
leave nothing) and under optimistic concurrency control (both commit). It prints each write's
outcome and time, and the rows per partition as pyhudi and hudi-rs read them.
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

OPTIONS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
           "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}


def writer(path: str, part: str, rows: int, options: dict) -> None:
    import pyhudi

    spark = pyhudi.spark_session("local[1]")
    if part == "dB":  # start while A's write is in progress
        while not pyhudi.HudiTable(path).timeline.pending():
            time.sleep(0.05)
    df = spark.range(rows).selectExpr(f"concat('{part}-', id) as id", f"'{part}' as p", "id as ts",
                                      "repeat('x', 80) as payload")
    started = time.time()
    try:
        res = pyhudi.write(df, path, options)
        out = {"ok": True, "instant": res.instant_time}
    except pyhudi.HudiError as exc:
        out = {"ok": False, "error": type(exc).__name__, "message": str(exc)}
    print(json.dumps({"partition": part, "seconds": round(time.time() - started, 1), **out}), flush=True)


def run(work: str, mode: str, rows: int) -> None:
    import hudi
    import pyarrow as pa
    import pyarrow.compute as pc

    import pyhudi

    path = os.path.join(work, mode)
    options = dict(OPTIONS)
    if mode == "occ":
        options["hoodie.write.concurrency.mode"] = "OPTIMISTIC_CONCURRENCY_CONTROL"

    def start(part: str, opts: dict) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, __file__, "--writer", path, part, str(rows), json.dumps(opts)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    start("d0", {**options, "hoodie.datasource.write.operation": "bulk_insert"}).communicate()
    a = start("dA", options)
    b = start("dB", options)
    print(f"== {'single writer' if mode == 'single' else 'optimistic concurrency control'}")
    for proc in (a, b):
        print("  " + proc.communicate()[0].strip())
    table = pa.Table.from_batches(hudi.HudiTable(path).read())
    counts = pc.value_counts(table.column("p")).to_pylist()
    print("  hudi-rs reads:", ", ".join(f"{c['values']} {c['counts']:,}" for c in sorted(counts, key=str)),
          "| pending instants:", [i.timestamp for i in pyhudi.HudiTable(path).timeline.pending()])


def main() -> None:
    if sys.argv[1:2] == ["--writer"]:
        writer(sys.argv[2], sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = tempfile.mkdtemp(prefix="pyhudi-two-writers-")
    try:
        for mode in ("single", "occ"):
            run(work, mode, args.rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
