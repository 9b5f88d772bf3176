"""pyhudi's Python-worker preparation runs in the executors, once per worker process."""

from __future__ import annotations

import gc
import os
import sys
import uuid
import zipimport
from collections.abc import Iterable, Iterator

import pyarrow as pa

from pyhudi.spark import worker
from pyhudi.spark.worker import map_in_arrow


def test_map_in_arrow_prepares_each_worker_and_passes_every_row(spark):
    def report(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # pickled by value
        rows = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pydict({
            "pid": [os.getpid()], "rows": [rows], "frozen": [gc.get_freeze_count()],
            "zip_kept": [zipimport.zipimporter.invalidate_caches is worker._keep_directory]})

    ddl = "pid long, rows long, frozen long, zip_kept boolean"
    df = spark.range(0, 1000, numPartitions=4)
    env = spark.sparkContext.environment
    env["PYHUDI_TEST_WORKERS"] = uuid.uuid4().hex  # Spark pools workers by environment: these are new
    try:
        plain = df.mapInArrow(report, ddl).collect()
        out = map_in_arrow(df, report, ddl).collect()
    finally:
        del env["PYHUDI_TEST_WORKERS"]
    assert not any(r.zip_kept or r.frozen for r in plain)  # fresh workers, not prepared yet
    assert sum(r.rows for r in out) == 1000  # every batch reaches the body
    assert all(r.pid != os.getpid() for r in out)  # the body ran in Python workers, not the driver
    assert all(r.frozen > 0 for r in out)
    assert all(r.zip_kept for r in out) == (sys.version_info < (3, 12))


def test_prepare_worker_runs_once():
    frozen = gc.get_freeze_count()
    saved = zipimport.zipimporter.invalidate_caches
    try:
        worker._prepared = True  # as in a worker that has prepared already
        worker.prepare_worker()
        assert zipimport.zipimporter.invalidate_caches is saved
        assert gc.get_freeze_count() == frozen
    finally:
        worker._prepared = False
