"""The small-batch write: a partition-local write (:mod:`pyhudi.spark.local_write`) of a batch
small enough to hold on the driver runs at most one Spark job, not two.

The prepared records (keys, partition paths, delete flags) come to the driver as Arrow; the counts
per partition come from that table, the plan is the same
:func:`~pyhudi.spark.local_write.partition_job`, and the same
:func:`~pyhudi.write.partition_writer.write_partitions` tags, sizes and writes every partition on
the driver, as one task does in an executor. Files and commit metadata are those of the two-job
path; only the write token differs (``0-0-0``: the driver is no Spark task, and it writes each
file once).

A small batch keyed by its fields is keyed and collected by the input check, before the instant
(:func:`collect_prepared`): its partition paths are checked on those rows and the write takes
them, so the check counts nothing by a Spark job of its own. A frame Spark holds on the driver (a
pandas or Arrow frame, a local relation: :func:`~pyhudi.spark.local_batch.held_arrow`) keyed by
string or integer fields comes to Python and is keyed with pyarrow (:func:`keyed_on_driver`), and
such a commit runs no Spark job. Other batches are keyed by Spark's expressions: a small local
relation of plain columns collected without a Spark job
(:func:`~pyhudi.spark.local_batch.collect_local`), any other batch (a streaming micro-batch read
from files) by one (``toArrow``). A batch with generated keys is collected once the instant exists.

Whether a batch is small is decided without a Spark job: from the size Spark's optimizer
estimates for the input plan (the figure its broadcast-join threshold uses; known for local data
and file scans, unknown and then huge otherwise) against ``pyhudi.write.small.batch.bytes``, and
for a pandas or Arrow frame Spark holds as Arrow batches, from their size against
``pyhudi.write.small.batch.held.bytes`` (where pyarrow keys them).
"""

from __future__ import annotations

import time

import pyarrow as pa
from pyspark.sql import DataFrame

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.io.avro_schema import PARTITION_PATH, RECORD_KEY
from pyhudi.keygen import arrow_keys
from pyhudi.keygen.spec import KeyGenSpec
from pyhudi.read.payloads import MergeSpec
from pyhudi.spark.compat import arrow_schema, collect_arrow
from pyhudi.spark.local_batch import HeldArrow, collect_local, fits_driver, held_arrow
from pyhudi.spark.local_write import file_rows, local_index, mark_inflight, partition_job, writes_locally
from pyhudi.spark.prepare import may_flag_deletes, prepare, prepared
from pyhudi.spark.state import WriteState, merge_spec_of
from pyhudi.write.columns import IS_DELETE
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


def is_small(cfg: HudiConfig, data: DataFrame) -> bool:
    """Whether the write of ``data`` runs on the driver (:func:`driver_write`)."""
    limit = cfg.get(C.SMALL_BATCH_BYTES)
    if limit <= 0:
        return False
    size = estimated_bytes(data)
    return size is not None and size <= limit


def collect_prepared(cfg: HudiConfig, spec: KeyGenSpec, data: DataFrame, *, operation: str,
                     ordering_field: str | None) -> pa.Table | None:
    """The prepared rows (:func:`~pyhudi.spark.prepare.prepared`) of a batch the write will take to
    the driver (:func:`driver_write`: an upsert, insert or delete with a partition-local index, the
    size within ``pyhudi.write.small.batch.bytes``, keys made of its fields: generated keys carry
    the instant), collected before the instant. The partition-path check takes these rows' paths,
    and the driver write the rows: one collect for both, where the check would count the paths by a
    job of its own. None, having run nothing, for any other batch.

    Without a Spark job: a frame Spark holds on the driver
    (:func:`~pyhudi.spark.local_batch.held_arrow`) keyed with pyarrow where it can be
    (:func:`keyed_on_driver`), else a small local relation of plain columns keyed by Spark's
    projection (:func:`~pyhudi.spark.local_batch.collect_local`). Any other batch, and a held pandas
    frame keyed by Spark, by one (``toArrow``)."""
    limit = cfg.get(C.SMALL_BATCH_BYTES)
    if spec.auto_keys or local_index(cfg, operation) is None or limit <= 0:
        return None
    merge_spec = merge_spec_of(cfg, ordering_field)
    held = held_arrow(data)
    if held is not None and held.nbytes > (limit if held.local else cfg.get(C.SMALL_BATCH_HELD_BYTES)):
        held = None
    if held is not None:
        keyed = keyed_on_driver(held, spec, merge_spec=merge_spec, ordering_field=ordering_field,
                                operation=operation)
        if keyed is not None:
            return keyed
        if held.nbytes > limit:  # keyed by a Spark job and written on the driver: the estimate's bound
            held = None
    local = fits_driver(data)
    if not local and held is None and not is_small(cfg, data):
        return None
    frame = prepared(data, spec, merge_spec=merge_spec, ordering_field=ordering_field, operation=operation,
                     instant=None)

    def small(planned: DataFrame) -> bool:  # the keyed rows' estimate exceeds the input's (is_small)
        size = estimated_bytes(planned)
        return size is not None and size <= limit

    collected = collect_local(frame, fits=small, checked=True) if local else None
    if collected is None and (not local or is_small(cfg, data)):  # (a local relation the optimizer keeps)
        collected = collect_arrow(frame)
    return collected


def keyed_on_driver(held: HeldArrow, spec: KeyGenSpec, *, merge_spec: MergeSpec, ordering_field: str | None,
                    operation: str) -> pa.Table | None:
    """The rows of ``held`` keyed with pyarrow (:mod:`pyhudi.keygen.arrow_keys`), as their
    :func:`~pyhudi.spark.prepare.prepared` frame would collect them: the input's columns, then the
    record key, partition path and delete flag (false). No Spark job; None, having read nothing,
    where pyarrow does not render the keys as Spark does, or rows may be deletes (a delete, a
    payload's or a statement's delete column: the flag is Spark's expression), or a prepped
    write's."""
    columns = list(held.schema.fieldNames())
    if operation not in ("upsert", "insert") or RECORD_KEY in columns:
        return None
    if may_flag_deletes(columns, merge_spec, operation):
        return None
    schema = arrow_schema(held.schema)
    if not arrow_keys.renders(spec, schema):
        return None
    rows = held.fetch()
    if rows is None:
        return None
    if ordering_field and ordering_field in columns:
        arrow_keys.require_ordering(rows, ordering_field)
    return (rows.append_column(pa.field(RECORD_KEY, pa.string()), arrow_keys.record_keys(rows, spec))
            .append_column(pa.field(PARTITION_PATH, pa.string()), arrow_keys.partition_paths(rows, spec))
            .append_column(pa.field(IS_DELETE, pa.bool_(), nullable=False),
                           pa.repeat(pa.scalar(False), rows.num_rows)))


def driver_write(state: WriteState, data: DataFrame, operation: str, ctx: WriteContext,
                 index: str) -> list[dict] | None:
    """A partition-local write with at most one Spark job: the prepared records on the driver as
    Arrow (collected by the check before the instant, :attr:`WriteState.collected`, or now), then
    tagged, sized and written there. Returns None, having written nothing, where the two-job path
    would (a partition past one task's records, a pending clustering's partition)."""
    started = time.monotonic()
    keyed, state.collected = state.collected, None
    if keyed is None:
        frame = prepare(state, data, operation, combine_in_spark=False)
        keyed = collect_local(frame)
        if keyed is None:
            keyed = collect_arrow(frame)
    else:  # collected by the check before the instant
        started -= state.collected_s
    counts = counts_of(keyed.column(PARTITION_PATH))
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
