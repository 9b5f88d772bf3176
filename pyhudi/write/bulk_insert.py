"""Bulk insert: how many files each table partition gets, and the executor-side writer.

Hudi's bulk insert writes one file per Spark partition and table partition, so its layout follows
the input's partitioning: a DataFrame made from pandas has one partition per 10,000 rows, and a
10-day load of 288 such partitions leaves about 30 files of 1 MB per day. pyhudi plans the files
from the data instead:

1. the driver counts the incoming records of every table partition (one Spark job);
2. :func:`plan_bulk_insert` gives each table partition one *slot* per :data:`MAX_ROWS_PER_TASK`
   records (so a huge partition is still written by several tasks), and packs the slots into
   tasks; the records are shuffled to their slot's task;
3. each task streams its records into files (:func:`bulk_insert_writer`), one file per table
   partition unless the partition's data is larger than ``hoodie.parquet.max.file.size``. The
   writer measures the compressed bytes per record on its first row group and then cuts the
   partition's records into equal files just under the maximum, so a partition of 1.3x the maximum
   gets two files of 0.65x, not one full file and a small one.

With ``GLOBAL_SORT`` the slots of one table partition are consecutive key ranges (cut at the
quantiles of a key sample), and every task sorts its records by partition path and key: files
hold tight, non-overlapping key ranges. Other sort modes hash keys to slots.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.io.base_file import BaseFileWriter
from pyhudi.io.file_names import base_file_name, file_id, new_file_id_prefix
from pyhudi.write.columns import IS_DELETE
from pyhudi.write.handles import open_base_file, split_by_partition
from pyhudi.write.markers import CREATE
from pyhudi.write.plan import MAX_ROWS_PER_TASK, WriteContext, pack_tasks
from pyhudi.write.rows import stats_batch, stats_row_of, storage_schema_of, to_storage_rows
from pyhudi.write.task import TaskInfo, current_task

#: Estimated bytes (record size estimate x records) above which a slot is split further.
MAX_TASK_BYTES = 4 << 30
#: In-memory bytes of a partition's first row group: enough to measure compressed bytes per record.
FIRST_ROW_GROUP_BYTES = 8 << 20
#: In-memory bytes of later row groups (capped by ``hoodie.parquet.block.size``).
ROW_GROUP_BYTES = 64 << 20
#: In-memory bytes all open files of a task may hold before the largest is flushed.
MAX_PENDING_BYTES = 256 << 20

@dataclass(frozen=True)
class BulkInsertPlan:
    """Where a bulk insert's records go; picklable, the writer gets ``expected_rows``."""

    #: table partition -> number of slots (at least 1)
    slots: Mapping[str, int]
    #: (table partition, slot) -> task
    task_of: Mapping[tuple[str, int], int]
    #: (task, table partition) -> records the task receives of the partition (approximate with
    #: several slots): what the writer divides into equal files
    expected_rows: Mapping[tuple[int, str], int]
    num_tasks: int
    #: GLOBAL_SORT: the key at which each slot after the first starts, per partition with slots > 1
    bounds: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def multi_slot(self) -> dict[str, int]:
        return {p: k for p, k in self.slots.items() if k > 1}


def rows_per_slot(avg_record_size: int) -> int:
    return max(1, min(MAX_ROWS_PER_TASK, MAX_TASK_BYTES // max(1, avg_record_size)))


def plan_bulk_insert(counts: Mapping[str, int], *, avg_record_size: int, parallelism: int,
                     bounds: Mapping[str, Sequence[str]] | None = None) -> BulkInsertPlan:
    """Slots and tasks for ``counts`` (incoming records per table partition).

    ``bounds`` (GLOBAL_SORT) are the slot boundaries of partitions with several slots, from
    :func:`slot_bounds`; records of a slot are then about equally many as the key sample says.
    """
    per_slot = rows_per_slot(avg_record_size)
    slots = {p: max(1, -(-n // per_slot)) for p, n in counts.items() if n > 0}
    loads: dict[tuple[str, int], int] = {}
    for p, k in slots.items():
        for s in range(k):
            loads[(p, s)] = counts[p] // k + (1 if s < counts[p] % k else 0)
    task_of = pack_tasks(loads, parallelism, budget=per_slot)
    expected: dict[tuple[int, str], int] = {}
    for (p, s), t in task_of.items():
        expected[(t, p)] = expected.get((t, p), 0) + loads[(p, s)]
    kept = {p: tuple(b) for p, b in (bounds or {}).items() if slots.get(p, 1) > 1}
    return BulkInsertPlan(slots, task_of, expected, max(task_of.values()) + 1 if task_of else 0, kept)


def slot_bounds(sample: Mapping[str, Sequence[str]], slots: Mapping[str, int]) -> dict[str, tuple[str, ...]]:
    """Per partition, the ``slots - 1`` keys at the quantiles of its sorted key sample: slot ``i``
    takes the keys ``>= bounds[i - 1]`` and ``< bounds[i]``. Equal keys always share a slot."""
    out = {}
    for p, keys in sample.items():
        k = slots.get(p, 1)
        ordered = sorted(keys)
        if k < 2 or not ordered:
            continue
        cuts = sorted({ordered[min(len(ordered) - 1, (i * len(ordered)) // k)] for i in range(1, k)})
        out[p] = tuple(cuts)
    return out


class _PartitionStream:
    """One table partition's records in this task, cut into files of about equal size.

    Records wait in ``pending`` until a row group's worth is there; the meta columns are added
    when they are written. The first row group measures the compressed bytes per record; from
    then on every file takes ``rows_per_file`` records, so the partition's ``expected`` records
    make ``ceil(bytes / max file size)`` equal files.
    """

    def __init__(self, writer: _TaskWriter, partition: str, expected: int) -> None:
        self.w, self.partition, self.expected = writer, partition, expected
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.pending_bytes = 0
        self.rows_per_file: int | None = None  # None: files are cut at the max file size only
        self.measured = False  # the first row group was written: later ones take the full size
        self.file: _OpenFile | None = None

    def add(self, rows: pa.Table) -> Iterator[pa.RecordBatch]:
        self.pending.append(rows)
        self.pending_rows += rows.num_rows
        self.pending_bytes += rows.nbytes + rows.num_rows * self.w.meta_row_bytes
        yield from self._drain(final=False)

    def close(self) -> Iterator[pa.RecordBatch]:
        yield from self._drain(final=True)
        if self.file is not None:
            yield self.w.finish(self.file)
            self.file = None

    def flush(self) -> Iterator[pa.RecordBatch]:
        """Write what is pending now (memory pressure), cut where files end."""
        yield from self._drain(final=True)

    def _drain(self, *, final: bool) -> Iterator[pa.RecordBatch]:
        while self.pending_rows:
            room = self._room()
            if room is not None and self.pending_rows >= room:
                yield from self._write(room)
                continue
            threshold = self.w.row_group_bytes if self.measured else self.w.first_row_group_bytes
            if final or self.pending_bytes >= threshold:
                yield from self._write(self.pending_rows)
                continue
            return

    def _room(self) -> int | None:
        """Records the current file still takes (None: not measured yet)."""
        if self.rows_per_file is None:
            return None
        written = self.file.writer.num_rows if self.file is not None else 0
        return max(1, self.rows_per_file - written)

    def _take(self, n: int) -> pa.Table:
        rows = pa.concat_tables(self.pending) if len(self.pending) > 1 else self.pending[0]
        head, rest = rows.slice(0, n), rows.slice(n)
        self.pending = [rest] if rest.num_rows else []
        share = head.num_rows / max(1, self.pending_rows)
        self.pending_rows -= head.num_rows
        self.pending_bytes = 0 if not self.pending else int(self.pending_bytes * (1 - share))
        return head

    def _write(self, n: int) -> Iterator[pa.RecordBatch]:
        if not n:
            return
        if self.file is None:
            self.file = self.w.new_file(self.partition)
        f = self.file
        f.write(self._take(n), self.w)
        if not self.measured:
            self._measure(f)
        full = f.writer.bytes_written >= self.w.ctx.max_file_size or (
            self.rows_per_file is not None and f.writer.num_rows >= self.rows_per_file)
        if full:
            yield self.w.finish(f)
            self.file = None

    def _measure(self, f: _OpenFile) -> None:
        if not f.writer.num_rows:
            return
        self.measured = True
        if not self.expected:  # the count is unknown (clustering by Spark): cut at the max file size
            return
        per_record = f.writer.bytes_written / f.writer.num_rows
        files = max(1, math.ceil(self.expected * per_record / self.w.ctx.max_file_size))
        self.rows_per_file = max(1, math.ceil(self.expected / files))


class _OpenFile:
    def __init__(self, writer: BaseFileWriter, partition: str, fid: str, name: str) -> None:
        self.writer, self.partition, self.fid, self.name = writer, partition, fid, name
        self.started = time.monotonic()

    def write(self, rows: pa.Table, task_writer: _TaskWriter) -> None:
        self.writer.write(to_storage_rows(rows, task_writer.schema, task_writer.ctx, self.name,
                                          task_writer.task, self.writer.num_rows))


class _TaskWriter:
    """What the streams of one task share: storage, schema, the task's file id prefix."""

    def __init__(self, ctx: WriteContext) -> None:
        self.ctx = ctx
        self.storage = ctx.storage
        self.schema = storage_schema_of(ctx)
        self.task: TaskInfo = current_task()
        self.prefix = new_file_id_prefix()
        self.counter = 0
        self.row_group_bytes = max(1 << 20, min(ctx.settings.block_size, ROW_GROUP_BYTES))
        # in memory a record takes more than on disk: a first row group of at most the max file size
        # cannot overshoot it much, whatever the compression
        self.first_row_group_bytes = max(64 << 10, min(FIRST_ROW_GROUP_BYTES, ctx.max_file_size))
        # what the commit time, sequence number and file name columns add to a row (values + offsets)
        self.meta_row_bytes = 2 * len(base_file_name(file_id(self.prefix, 0), self.task.token, ctx.instant_time)) + 32

    def new_file(self, partition: str) -> _OpenFile:
        fid = file_id(self.prefix, self.counter)
        self.counter += 1
        name = base_file_name(fid, self.task.token, self.ctx.instant_time)
        return _OpenFile(open_base_file(self.storage, self.ctx, self.schema, partition, name, CREATE),
                         partition, fid, name)

    def finish(self, f: _OpenFile) -> pa.RecordBatch:
        written = f.writer.close()
        return stats_batch(stats_row_of(f.partition, f.fid, written, prev_commit="null", io_type=CREATE,
                                        deletes=0, updates=0, inserts=written.num_rows, started=f.started))


def bulk_insert_writer(batches: Iterable[pa.RecordBatch], ctx: WriteContext,
                       expected_rows: Mapping[tuple[int, str], int]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of bulk_insert: records (sorted or not) streamed into files per table
    partition, cut into equal files under the max file size (see the module docstring).

    One file id prefix per task; each new file takes the next suffix, as Hudi's bulk-insert
    writers do.
    """
    w = _TaskWriter(ctx)
    streams: dict[str, _PartitionStream] = {}
    for batch in batches:
        if not batch.num_rows:
            continue
        table = pa.Table.from_batches([batch])
        if IS_DELETE in table.column_names:
            table = table.filter(pc.invert(table.column(IS_DELETE)))
        for partition, rows in split_by_partition(table):
            stream = streams.get(partition)
            if stream is None:
                stream = streams[partition] = _PartitionStream(
                    w, partition, expected_rows.get((w.task.partition_id, partition), 0))
            yield from stream.add(rows)
        if sum(s.pending_bytes for s in streams.values()) > MAX_PENDING_BYTES:
            yield from max(streams.values(), key=lambda s: s.pending_bytes).flush()
    for stream in streams.values():
        yield from stream.close()
