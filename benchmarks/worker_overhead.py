"""What a Spark task through a Python worker costs before any work, with and without pyhudi's preparation.

Runs jobs of tiny ``mapInArrow`` tasks (2, 4 and 8 per job on this machine's cores) and a no-op pass
of a daily drone batch, first through plain ``df.mapInArrow`` on fresh workers, then through
:func:`pyhudi.spark.worker.map_in_arrow`. The preparation patches the worker process, so the plain
figures must come first; run the script in a fresh process.

    .venv/bin/python benchmarks/worker_overhead.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame

import pyhudi
from pyhudi.demo import daily_batch
from pyhudi.spark.worker import map_in_arrow


def count_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})


def median_s(run: Callable[[], object], repeats: int = 6) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])  # the first run may start workers


def main() -> None:
    spark = pyhudi.spark_session()
    batch = daily_batch(spark, 10, 200).persist()
    rows = batch.count()
    jobs: list[tuple[str, DataFrame]] = [
        (f"{n} tiny tasks", spark.range(0, 100, numPartitions=n)) for n in (2, 4, 8)]
    jobs.append((f"daily batch, {rows:,} rows in {batch.rdd.getNumPartitions()} tasks", batch))
    plain = {label: median_s(lambda df=df: df.mapInArrow(count_rows, "n long").collect()) for label, df in jobs}
    prepared = {label: median_s(lambda df=df: map_in_arrow(df, count_rows, "n long").collect())
                for label, df in jobs}
    print(f"{'job':<44} {'mapInArrow s':>13} {'prepared s':>11}")
    for label, _ in jobs:
        print(f"{label:<44} {plain[label]:13.3f} {prepared[label]:11.3f}")
    spark.stop()


if __name__ == "__main__":
    main()
