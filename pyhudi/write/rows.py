"""What every write handle does to rows and reports: meta columns filled, one stats row per file.

The create and merge handles (:mod:`pyhudi.write.handles`), the append handle
(:mod:`pyhudi.write.append`), bulk insert, the partition writer and compaction all turn incoming
rows into the rows a Hudi file stores and describe each file they wrote with one row of
:data:`~pyhudi.write.columns.STATS_SCHEMA`. Those helpers live here, apart from the handles, so
the handle modules can use them without importing one another.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.io.avro_schema import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    META_FIELDS,
    PARTITION_PATH,
    RECORD_KEY,
)
from pyhudi.io.base_file import WrittenFile, align
from pyhudi.write.columns import STATS_SCHEMA
from pyhudi.write.plan import WriteContext
from pyhudi.write.task import TaskInfo

__all__ = ["counts_of", "seqnos", "stats_batch", "stats_row", "stats_row_of", "storage_schema_of", "to_storage_rows"]


def counts_of(values: pa.Array | pa.ChunkedArray) -> dict[Any, int]:
    """Rows per distinct value of ``values`` (a null counted under None): the plan of a write
    counts its records per partition path or file group this way, without a Python loop."""
    counted = pc.value_counts(values)
    return dict(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist()))


def storage_schema_of(ctx: WriteContext) -> pa.Schema:
    """The schema of the files this write produces (it travels to executors as Arrow IPC bytes)."""
    return pa.ipc.read_schema(pa.py_buffer(ctx.storage_schema_ipc))


def seqnos(instant: str, partition_id: int, start: int, count: int) -> pa.Array:
    """Hudi's ``_hoodie_commit_seqno`` values ``instant_partition_position`` for ``count`` rows."""
    positions = pa.array(np.arange(start, start + count, dtype=np.int64)).cast(pa.string())
    return pc.binary_join_element_wise(f"{instant}_{partition_id}_", positions, "")


def to_storage_rows(rows: pa.Table, schema: pa.Schema, ctx: WriteContext, file_name: str,
                    task: TaskInfo, first_position: int) -> pa.Table:
    """Incoming rows as base-file rows: meta columns filled for a new write at ``ctx.instant_time``."""
    n = rows.num_rows
    populate = ctx.settings.populate_meta_fields
    data = align(rows, pa.schema([f for f in schema if f.name not in META_FIELDS]))
    kept = populate and ctx.preserve_commit_metadata and COMMIT_TIME in rows.column_names
    meta = {
        COMMIT_TIME: rows.column(COMMIT_TIME).cast(pa.string()) if kept
        else pa.repeat(pa.scalar(ctx.instant_time, pa.string()), n) if populate else pa.nulls(n, pa.string()),
        COMMIT_SEQNO: rows.column(COMMIT_SEQNO).cast(pa.string()) if kept
        else seqnos(ctx.instant_time, task.partition_id, first_position, n) if populate
        else pa.nulls(n, pa.string()),
        RECORD_KEY: rows.column(RECORD_KEY).cast(pa.string()) if populate else pa.nulls(n, pa.string()),
        PARTITION_PATH: rows.column(PARTITION_PATH).cast(pa.string()) if populate else pa.nulls(n, pa.string()),
        FILE_NAME: pa.repeat(pa.scalar(file_name, pa.string()), n),
    }
    arrays = [meta[f.name] if f.name in meta else data.column(f.name) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def stats_row(partition: str, fid: str, path: str, *, prev_commit: str, io_type: str, num_writes: int,
              deletes: int, updates: int, inserts: int, file_size: int, started: float,
              min_key: str | None, max_key: str | None) -> dict:
    """One row of :data:`STATS_SCHEMA`: what a handle wrote, for the driver's commit metadata."""
    return {
        "partition_path": partition, "file_id": fid, "path": path, "prev_commit": prev_commit,
        "io_type": io_type, "num_writes": num_writes, "num_deletes": deletes,
        "num_update_writes": updates, "num_inserts": inserts, "file_size": file_size,
        "time_ms": int((time.monotonic() - started) * 1000), "min_key": min_key, "max_key": max_key,
        "write_bytes": file_size,
    }


def stats_row_of(bucket_partition: str, fid: str, written: WrittenFile, *, prev_commit: str, io_type: str,
               deletes: int, updates: int, inserts: int, started: float) -> dict:
    """:func:`stats_row` of a base file just closed (its path, size, row count and key range)."""
    return stats_row(bucket_partition, fid, written.path, prev_commit=prev_commit, io_type=io_type,
                     num_writes=written.num_rows, deletes=deletes, updates=updates, inserts=inserts,
                     file_size=written.size, started=started, min_key=written.min_key, max_key=written.max_key)


def stats_batch(stats: dict) -> pa.RecordBatch:
    """One stats row as the record batch a ``mapInArrow`` body yields."""
    return pa.RecordBatch.from_pylist([stats], schema=STATS_SCHEMA)
