"""A writer process for the concurrency tests: its own local Spark, writing to a shared table.

    python tests/writer_process.py stress TABLE RESULT.json WRITER SEED WRITES OPTIONS_JSON
    python tests/writer_process.py hang TABLE OPTIONS_JSON     (prints the instant, then hangs)

``stress`` does random upserts (updates of existing keys, inserts of keys no other writer uses)
and deletes on random partitions and records each write's outcome, so the test can rebuild the
table from the successful writes alone.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

PARTITIONS = [f"p{i}" for i in range(4)]
KEYS_PER_PARTITION = 50


def initial_rows() -> list[tuple[str, str, int, str]]:
    return [(f"k{p}-{i:03d}", p, 0, "init") for p in PARTITIONS for i in range(KEYS_PER_PARTITION)]


def _session():
    import pyhudi

    return pyhudi.spark_session("local[1]", spark__sql__shuffle__partitions="1", spark__driver__memory="1g")


def stress(table: str, result: str, writer: int, seed: int, writes: int, options: dict) -> None:
    from pyspark.sql import types as T

    import pyhudi

    schema = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                           T.StructField("ts", T.LongType()), T.StructField("val", T.StringType())])
    spark = _session()
    rng = random.Random(seed)
    outcomes = []
    for n in range(writes):
        parts = rng.sample(PARTITIONS, rng.choice([1, 1, 2]))
        keys = [(f"k{p}-{i:03d}", p) for p in parts for i in rng.sample(range(KEYS_PER_PARTITION), 5)]
        tag = f"w{writer}-{n}"
        if rng.random() < 0.25:
            op, rows = "delete", [(k, p, n + 1, tag) for k, p in keys[:3]]
        else:
            rows = [(k, p, n + 1, tag) for k, p in keys]
            rows += [(f"new-{tag}-{j}", p, n + 1, tag) for j, p in enumerate(parts)]
            op = "upsert"
        started = time.time()
        try:
            res = pyhudi.write(spark.createDataFrame(rows, schema), table,
                               {**options, "hoodie.datasource.write.operation": op})
            outcomes.append({"ok": True, "instant": res.instant_time, "op": op, "rows": rows,
                             "started": started, "ended": time.time()})
        except pyhudi.HudiError as exc:
            outcomes.append({"ok": False, "error": type(exc).__name__, "message": str(exc)[:300], "op": op,
                             "rows": rows, "started": started, "ended": time.time()})
    spark.stop()
    with open(result, "w") as f:
        json.dump(outcomes, f)


def hang(table: str, options: dict) -> None:
    """Write, but stop forever just before the commit (the test kills the process there)."""
    import pyhudi
    from pyhudi.spark import pipeline

    real_run = pipeline.Pipeline.run

    def run(self, *args, commit, **kwargs):
        def stall(meta, **_kw):
            print(self.instant, flush=True)
            time.sleep(3600)

        return real_run(self, *args, commit=stall, **kwargs)

    pipeline.Pipeline.run = run
    spark = _session()
    rows = [(f"late-{i}", "p0", 1, "late") for i in range(10)]
    pyhudi.write(spark.createDataFrame(rows, "id string, p string, ts long, val string"), table, options)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if sys.argv[1] == "stress":
        stress(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), json.loads(sys.argv[7]))
    else:
        hang(sys.argv[2], json.loads(sys.argv[3]))
