"""pyhudi's Python-worker preparation runs in the executors, once per worker process."""

from __future__ import annotations

import gc
import os
import sys
import uuid
import zipfile
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
    assert all(r.frozen > 0 for r in out)
    assert all(r.zip_kept for r in out) == (sys.version_info < (3, 12))


def test_prepare_worker_patches_and_freezes_once(monkeypatch):
    freezes = []
    monkeypatch.setattr(worker, "_prepared", False)
    monkeypatch.setattr(zipimport.zipimporter, "invalidate_caches", zipimport.zipimporter.invalidate_caches)
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
    worker.prepare_worker()
    worker.prepare_worker()
    assert freezes == [1]
    patched = zipimport.zipimporter.invalidate_caches is worker._keep_directory
    assert patched == (sys.version_info < (3, 12))


def test_zip_directory_is_read_again_only_when_the_archive_changed(tmp_path, monkeypatch):
    archive = tmp_path / "m.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.py", "X = 1\n")
    importer = zipimport.zipimporter(str(archive))
    reads = []
    original = worker._reread_directory
    monkeypatch.setattr(worker, "_reread_directory", lambda imp: (reads.append(1), original(imp)))
    worker._keep_directory(importer)  # first call: the importer's read time is unknown
    worker._keep_directory(importer)
    assert len(reads) == 1
    with zipfile.ZipFile(archive, "w") as z:  # rewritten in place, bigger
        z.writestr("a.py", "X = 1\n")
        z.writestr("b.py", "Y = 2\n")
    worker._keep_directory(importer)
    assert len(reads) == 2 and importer.find_spec("b") is not None
