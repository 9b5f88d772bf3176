"""What a Spark task through a Python worker costs before any work, with and without pyhudi's preparation.

Runs jobs of tiny ``mapInArrow`` tasks (2, 4 and 8 per job on this machine's cores) and a no-op pass
of a daily drone batch, through plain ``df.mapInArrow`` and through
:func:`pyhudi.spark.worker.map_in_arrow`, alternately. The preparation patches the worker process,
so the two run in separate worker pools (Spark pools Python workers by their environment).

    .venv/bin/python benchmarks/worker_overhead.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame

import pyhudi
from pyhudi.demo import daily_batch
from pyhudi.spark.worker import map_in_arrow


def count_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})


def medians(spark, df: DataFrame, repeats: int = 6) -> tuple[float, float]:
    """Median seconds of a no-op pass of ``df``: plain ``mapInArrow``, then pyhudi's, alternating."""
    env = spark.sparkContext.environment
    runs: dict[str, list[float]] = {"plain": [], "prepared": []}
    for _ in range(repeats):
        for pool in runs:
            env["PYHUDI_BENCH_POOL"] = pool  # read when the job is defined: one worker pool per value
            job = (df.mapInArrow(count_rows, "n long") if pool == "plain"
                   else map_in_arrow(df, count_rows, "n long"))
            started = time.perf_counter()
            job.collect()
            runs[pool].append(time.perf_counter() - started)
    del env["PYHUDI_BENCH_POOL"]
    return statistics.median(runs["plain"][1:]), statistics.median(runs["prepared"][1:])  # first: worker start


def main() -> None:
    spark = pyhudi.spark_session()
    batch = daily_batch(spark, 10, 200).persist()
    rows = batch.count()
    jobs: list[tuple[str, DataFrame]] = [
        (f"{n} tiny tasks", spark.range(0, 100, numPartitions=n)) for n in (2, 4, 8)]
    jobs.append((f"daily batch, {rows:,} rows in {batch.rdd.getNumPartitions()} tasks", batch))
    print(f"{'job':<44} {'mapInArrow s':>13} {'prepared s':>11}")
    for label, df in jobs:
        plain, prepared = medians(spark, df)
        print(f"{label:<44} {plain:13.3f} {prepared:11.3f}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
