"""The small-batch write: a partition-local write (:mod:`pyhudi.spark.local_write`) of a batch
small enough to hold on the driver runs one Spark job, not two.

The job brings the prepared records (keys, partition paths, delete flags, computed in Spark as on
every path) to the driver as Arrow; the counts per partition come from that table, the plan is
the same :func:`~pyhudi.spark.local_write.partition_job`, and the same
:func:`~pyhudi.write.partition_writer.write_partitions` tags, sizes and writes every partition on
the driver, as one task does in an executor. Files and commit metadata are those of the two-job
path; only the write token differs (``0-0-0``: the driver is no Spark task, and it writes each
file once).

Whether a batch is small is decided without a Spark job, from the size Spark's optimizer estimates
for the input plan (the figure its broadcast-join threshold uses): known for local data and file
scans, unknown (and then huge) otherwise. ``pyhudi.write.small.batch.bytes`` is the threshold.
"""

from __future__ import annotations

import time

from pyspark.sql import DataFrame

from pyhudi import config as C
from pyhudi.io.avro_schema import PARTITION_PATH
from pyhudi.spark.compat import collect_arrow
from pyhudi.spark.local_write import file_rows, mark_inflight, partition_job, writes_locally
from pyhudi.spark.prepare import prepare
from pyhudi.spark.state import WriteState
from pyhudi.write.partition_writer import write_partitions
from pyhudi.write.plan import WriteContext
from pyhudi.write.rows import counts_of


def estimated_bytes(data: DataFrame) -> int | None:
    """The size Spark's optimizer estimates for ``data``'s plan (no Spark job); None when the
    plan cannot be asked (a plan without statistics)."""
    try:
        return int(data._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    except Exception:  # noqa: BLE001 - an estimate only: the two-job path is always right
        return None


def is_small(state: WriteState, data: DataFrame) -> bool:
    """Whether the write of ``data`` runs on the driver (:func:`driver_write`)."""
    limit = state.cfg.get(C.SMALL_BATCH_BYTES)
    if limit <= 0:
        return False
    size = estimated_bytes(data)
    return size is not None and size <= limit


def driver_write(state: WriteState, data: DataFrame, operation: str, ctx: WriteContext,
                 index: str) -> list[dict] | None:
    """A partition-local write with one Spark job: the prepared records collected as Arrow, then
    tagged, sized and written on the driver. Returns None, having written nothing, where the
    two-job path would (a partition past one task's records, a pending clustering's partition)."""
    started = time.monotonic()
    keyed = collect_arrow(prepare(state, data, operation, combine_in_spark=False))
    counts = counts_of(keyed.column(PARTITION_PATH).combine_chunks())
    if not writes_locally(state, counts):
        return None
    started = state.phase("collect", started)  # the phase name tells the commit took this path
    partitions = sorted(counts)
    job = partition_job(state, partitions, operation, ctx, index)
    mark_inflight(state, partitions, operation)
    if not partitions:
        return []
    started = state.phase("plan", started)
    out = [row for batch in write_partitions(keyed.to_batches(), job) for row in batch.to_pylist()]
    state.phase("write", started)
    return file_rows(state, out)
