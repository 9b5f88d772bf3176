"""Running pyhudi's per-file work in Spark's Python workers.

Every ``mapInArrow`` of pyhudi goes through :func:`map_in_arrow`, which prepares the worker process
once before the first batch and tells the write layer which task it runs in (see
:mod:`pyhudi.write.task`). The preparation removes two fixed costs that PySpark 3.5 puts on every
task of a reused worker, and which dominate writes of a few hundred thousand rows:

* PySpark's ``worker.py`` calls ``importlib.invalidate_caches()`` at the start of each task. On
  Python 3.10 and 3.11, ``zipimporter.invalidate_caches`` re-reads the central directory of every zip
  on the worker's path: ``pyspark.zip``, py4j's zip and the 14 MB spark-core jar, once per package
  path. That is 80-90 ms per task on this machine (seen with ``strace``). These archives never
  change while a worker lives, so the re-read is skipped unless the archive's size or modification
  time changed (a ``stat`` per archive); Python 3.12 makes the re-read lazy itself.
* PySpark's daemon runs ``gc.collect()`` between two tasks of a reused worker; with pyarrow, pandas
  and pyhudi loaded, a full collection takes 40-60 ms. ``gc.freeze()`` moves the objects alive at
  preparation (modules, classes, caches) out of the collector's reach, so the collection only looks
  at what tasks create. Frozen objects are still freed by reference counting when the last
  reference goes; only a reference cycle among them would outlive the worker.

Measured with ``benchmarks/worker_overhead.py``.
"""

from __future__ import annotations

import gc
import os
import sys
import zipimport
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pyhudi.storage import Storage
from pyhudi.write.task import NO_TASK, TaskInfo, running_task

ArrowBody = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]
Item = TypeVar("Item")

_prepared = False
_reread_directory = zipimport.zipimporter.invalidate_caches


def _keep_directory(importer: zipimport.zipimporter) -> None:
    """``zipimporter.invalidate_caches`` that re-reads an archive's directory only when the archive
    changed since this importer last read it (and on its first call, when that is unknown)."""
    try:
        st = os.stat(importer.archive)
        stamp: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
    except OSError:
        stamp = None
    if stamp is None or getattr(importer, "_pyhudi_stamp", None) != stamp:
        _reread_directory(importer)
        importer._pyhudi_stamp = stamp  # type: ignore[attr-defined]


def prepare_worker() -> None:
    """Make this Python worker cheap to reuse (see the module docstring); runs once per process."""
    global _prepared
    if _prepared:
        return
    _prepared = True
    if sys.version_info < (3, 12):
        zipimport.zipimporter.invalidate_caches = _keep_directory  # type: ignore[method-assign,assignment]
    gc.collect()  # garbage left so far is collected, not frozen with the rest
    gc.freeze()


def spark_task() -> TaskInfo:
    """The Spark task running this code, read from its ``TaskContext`` (0-0-0 outside a task)."""
    ctx = TaskContext.get()
    if ctx is None:
        return NO_TASK
    return TaskInfo(ctx.partitionId(), ctx.stageId(), ctx.taskAttemptId())


def map_in_arrow(df: DataFrame, body: ArrowBody, schema: T.StructType | str) -> DataFrame:
    """``df.mapInArrow(body, schema)``, with the Python worker prepared before ``body`` runs and
    the task's identity handed to the write layer (:func:`pyhudi.write.task.current_task`), which
    names files and sequence numbers after it but must not import pyspark itself."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_worker()
        with running_task(spark_task()):
            yield from body(batches)

    return df.mapInArrow(run, schema)


def spread(spark: SparkSession, count: int) -> DataFrame:
    """``count`` row ids spread over enough partitions that every core gets some."""
    parallelism = spark.sparkContext.defaultParallelism
    return spark.range(0, count, numPartitions=max(1, min(count, parallelism * 2)))


def per_item(spark: SparkSession, storage: Storage, items: Sequence[Item], schema: pa.Schema,
             work: Callable[[Storage, Item, pa.Schema], Iterable[pa.RecordBatch]],
             out: T.StructType | str) -> DataFrame:
    """The batches ``work`` makes of each of ``items`` (frozen plans: file slices, file groups,
    clustering groups), one call per item in an executor. The items travel pickled with the
    function; ``schema`` as Arrow IPC bytes, and each task opens the table's storage once."""
    schema_ipc = schema.serialize().to_pybytes()
    pieces = list(items)

    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read_schema = pa.ipc.read_schema(pa.py_buffer(schema_ipc))
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield from work(storage, pieces[i], read_schema)

    return map_in_arrow(spread(spark, len(pieces)), body, out)
