"""Executor-side writers: Hudi's create and merge handles (bulk inserts: :mod:`pyhudi.write.bulk_insert`,
log appends: :mod:`pyhudi.write.append`; the row and stats helpers they share: :mod:`pyhudi.write.rows`).

These run inside Spark tasks (``mapInArrow``) on Arrow tables, with no Spark import: each turns the
rows of one bucket into one new base file and returns a stats row for the driver's commit.

* create (INSERT bucket): a new file group ``<uuid>-0`` with the incoming rows.
* merge (UPDATE bucket): the file group's latest base file rewritten with updates applied in
  place, deletes dropped and inserts appended; unchanged rows keep their commit time and seqno.
  On a CDC table (``ctx.cdc_mode``) it also writes what it changed (:mod:`pyhudi.write.cdc`).

All work is vectorised with pyarrow compute; there is no per-row Python.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.config.properties import write_partition_metadata
from pyhudi.io.avro_schema import COMMIT_SEQNO, FILE_NAME, PARTITION_PATH, RECORD_KEY
from pyhudi.io.base_file import BaseFileWriter, Encodings, align, read_base_file_and_metadata, stored_encodings
from pyhudi.io.file_names import base_file_name, file_id, relative_path
from pyhudi.io.keys import first_of_runs, keys_ascending
from pyhudi.read.payloads import DELETE, KEEP_STORED, TAKE_INCOMING, MergeSpec, merge_stored, precombine
from pyhudi.storage import Storage
from pyhudi.write.append import append_handle
from pyhudi.write.cdc import log_merge
from pyhudi.write.columns import BUCKET, IS_DELETE
from pyhudi.write.markers import CREATE, MERGE, create_marker
from pyhudi.write.plan import APPEND, UPDATE, WriteBucket, WriteContext
from pyhudi.write.rows import seqnos, stats_batch, stats_row_of, storage_schema_of, to_storage_rows
from pyhudi.write.task import TaskInfo, current_task


def open_base_file(storage: Storage, ctx: WriteContext, schema: pa.Schema, partition: str, name: str,
                   io_type: str, *, encodings: Encodings | None = None) -> BaseFileWriter:
    rel = relative_path(partition, name)
    if io_type != MERGE:  # a merge rewrites a base file, so its partition was set up when that was written
        write_partition_metadata(storage, partition, ctx.instant_time)
    create_marker(storage, ctx.instant_time, rel, io_type)
    return BaseFileWriter(storage, rel, schema, ctx.settings, encodings=encodings)


def create_handle(storage: Storage, ctx: WriteContext, schema: pa.Schema, bucket: WriteBucket,
                  rows: pa.Table, task: TaskInfo, *, first_position: int = 0) -> dict | None:
    started = time.monotonic()
    is_delete = rows.column(IS_DELETE)
    live = rows.filter(pc.invert(is_delete))
    deletes = rows.num_rows - live.num_rows
    if live.num_rows == 0:
        return None
    live = sorted_by_key(live)
    fid = file_id(bucket.file_id_prefix, 0)
    name = base_file_name(fid, task.token, ctx.instant_time)
    writer = open_base_file(storage, ctx, schema, bucket.partition_path, name, CREATE)
    writer.write(to_storage_rows(live, schema, ctx, name, task, first_position))
    written = writer.close()
    return stats_row_of(bucket.partition_path, fid, written, prev_commit="null", io_type=CREATE,
                      deletes=deletes, updates=0, inserts=live.num_rows, started=started)


def merge_handle(storage: Storage, ctx: WriteContext, schema: pa.Schema, bucket: WriteBucket,
                 rows: pa.Table, task: TaskInfo, *, first_position: int = 0) -> dict:
    """Rewrite a file group's base file with ``rows`` merged in (updates, deletes, inserts)."""
    started = time.monotonic()
    assert bucket.base_file is not None
    stored, metadata = read_base_file_and_metadata(storage, bucket.base_file)
    old = align(stored, schema, source=f"base file {bucket.base_file}")
    # the new file keeps the old one's encodings where sampling its rows would choose them again
    encodings = stored_encodings(metadata, schema, dictionary=ctx.settings.dictionary) \
        if stored.schema.names == schema.names else None
    n_old = old.num_rows
    inc_keys = rows.column(RECORD_KEY).cast(pa.string())
    is_delete = rows.column(IS_DELETE).combine_chunks()
    pos = pc.index_in(old.column(RECORD_KEY), value_set=inc_keys)
    matched = pos.is_valid()
    pos_filled = pc.fill_null(pos, 0)
    # the payload decides per matched stored record: keep it, take the incoming one (merged with
    # it where the payload merges fields), or delete the key (pyhudi.read.payloads.merge_stored)
    old_idx = np.arange(n_old, dtype=np.int64)
    pos_np = pos_filled.to_numpy(zero_copy_only=False).astype(np.int64)
    matched_np = matched.to_numpy(zero_copy_only=False)
    name = base_file_name(bucket.file_id_prefix, task.token, ctx.instant_time)
    new_rows = to_storage_rows(rows, schema, ctx, name, task, 0)
    at_incoming = pos_np[matched_np]
    spec = ctx.merge_spec
    # a payload that picks one record compares only its ordering and delete columns
    compared = None if spec.is_partial else [c for c in spec.key_columns() if c in new_rows.column_names]
    stored_side, incoming_side = old.filter(matched), new_rows.take(pa.array(at_incoming))
    if compared is not None:
        stored_side, incoming_side = stored_side.select(compared), incoming_side.select(compared)
    merged, choice = merge_stored(stored_side, incoming_side, pc.take(is_delete, pa.array(at_incoming)), spec)
    decision = np.full(n_old, KEEP_STORED, dtype=np.int8)
    decision[matched_np] = choice
    replaced = pa.array(decision == TAKE_INCOMING)
    dropped = pa.array(decision == DELETE)
    if compared is None:  # a replaced record comes from the merged rows (after the stored and incoming rows)
        incoming_at = np.full(n_old, -1, dtype=np.int64)
        incoming_at[np.flatnonzero(matched_np)] = new_rows.num_rows + np.arange(len(at_incoming), dtype=np.int64)
        extra = [merged]
    else:  # ... or is the incoming record
        incoming_at, extra = pos_np, []
    take_idx = np.where(decision == TAKE_INCOMING, n_old + incoming_at, old_idx)
    take_idx = take_idx[decision != DELETE]
    # incoming keys no stored record has: hash the matched stored keys (few), not the whole file
    stored_matched = old.column(RECORD_KEY).filter(matched)
    inserts_mask = pc.and_(pc.invert(pc.is_in(inc_keys, value_set=stored_matched.combine_chunks())),
                           pc.invert(is_delete))
    insert_idx = n_old + np.nonzero(inserts_mask.to_numpy(zero_copy_only=False))[0].astype(np.int64)
    order = np.concatenate([take_idx, insert_idx])
    combined = pa.concat_tables([old, new_rows, *extra]).take(pa.array(order))
    from_incoming = pa.array(order >= n_old)
    if ctx.settings.populate_meta_fields:
        fresh = seqnos(ctx.instant_time, task.partition_id, first_position, len(order))
        seq = pc.if_else(from_incoming, fresh, combined.column(COMMIT_SEQNO))
        combined = combined.set_column(combined.schema.get_field_index(COMMIT_SEQNO), COMMIT_SEQNO, seq)
    combined = combined.set_column(combined.schema.get_field_index(FILE_NAME), FILE_NAME,
                                   pa.repeat(pa.scalar(name, pa.string()), len(order)))
    writer = open_base_file(storage, ctx, schema, bucket.partition_path, name, MERGE, encodings=encodings)
    writer.write(combined)
    written = writer.close()
    stats = stats_row_of(bucket.partition_path, bucket.file_id_prefix, written, prev_commit=bucket.prev_commit,
                         io_type=MERGE, deletes=int(pc.sum(dropped).as_py() or 0),
                         updates=int(pc.sum(replaced).as_py() or 0),
                         inserts=len(insert_idx), started=started)
    if ctx.cdc_mode is not None:  # HoodieMergeHandleWithChangeLog: what the merge changed, into a .cdc file
        stats["cdc_stats"] = log_merge(storage, ctx, bucket, task, before=old, after=combined, replaced=replaced,
                                       dropped=dropped, first_insert=len(take_idx))
    return stats


def combine(rows: pa.Table, spec: MergeSpec) -> pa.Table:
    """One row per record key: the versions of each key folded by the payload's ``preCombine``
    (:func:`pyhudi.read.payloads.precombine`): the one with the largest ordering value, the later among
    equal ones, or for PartialUpdateAvroPayload their fields merged.

    Rows whose ordering value is null lose to any non-null one. Rows come back in record-key order
    (unless they arrived in it, or there are fewer than two): sorting by key alone is cheap, and
    only keys seen twice need the ordering value compared.
    """
    keys = rows.column(RECORD_KEY)
    if rows.num_rows < 2 or keys_ascending(keys):
        return rows
    order = pc.sort_indices(keys)
    first = first_of_runs(pc.take(keys, order).combine_chunks())
    if first.all():
        return rows.take(order)
    return precombine(rows, spec, delete_flag=IS_DELETE)


def sorted_by_key(rows: pa.Table) -> pa.Table:
    """``rows`` in record-key order: new files hold their keys sorted, so the page statistics of
    the key column let readers skip all but the pages a key lookup needs."""
    if keys_ascending(rows.column(RECORD_KEY)):
        return rows
    return rows.take(pc.sort_indices(rows.column(RECORD_KEY)))


def collect_batches(batches: Iterable[pa.RecordBatch]) -> pa.Table | None:
    """The non-empty batches a ``mapInArrow`` task receives, as one table (None if there are none).

    The batches are combined into one chunk per column (string columns past 2 GiB keep several):
    ``take`` on a table of many chunks concatenates them on every call, which made each of 768 file
    groups (256 buckets, 3 partitions) copy the task's whole input. Combining costs one copy.
    """
    items = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(items).combine_chunks() if items else None


def group_indices(ids: np.ndarray) -> list[np.ndarray]:
    """Row indices grouped by equal ``ids`` (rows keep their order within a group)."""
    order = np.argsort(ids, kind="stable")
    return [chunk for chunk in np.split(order, np.flatnonzero(np.diff(ids[order])) + 1) if len(chunk)]


def run_handle(storage: Storage, ctx: WriteContext, schema: pa.Schema, bucket: WriteBucket, rows: pa.Table,
               task: TaskInfo, *, first_position: int = 0) -> dict | None:
    """Write one bucket's rows with the handle of its kind: append (log), merge, or create."""
    if bucket.kind == APPEND:
        return append_handle(storage, ctx, schema, bucket, rows, task, first_position=first_position)
    if bucket.kind == UPDATE:
        return merge_handle(storage, ctx, schema, bucket, rows, task, first_position=first_position)
    return create_handle(storage, ctx, schema, bucket, rows, task, first_position=first_position)


def write_buckets(batches: Iterable[pa.RecordBatch], ctx: WriteContext,
                  buckets: dict[int, WriteBucket]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of upsert/insert/delete: one file per bucket present in this task."""
    table = collect_batches(batches)
    if table is None:
        return
    storage = ctx.storage
    schema = storage_schema_of(ctx)
    task = current_task()
    ids = table.column(BUCKET).to_numpy()
    for chunk in group_indices(ids):
        rows = table.take(pa.array(chunk))
        if ctx.combine_in_handles:
            rows = combine(rows, ctx.merge_spec)
        stats = run_handle(storage, ctx, schema, buckets[int(ids[chunk[0]])], rows, task)
        if stats is not None:
            yield stats_batch(stats)


def split_by_partition(table: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """(partition path, its rows) of a table, partitions in order of first appearance; a table of one
    partition (sorted bulk-insert batches, mostly) is passed through without a copy."""
    if table.num_rows == 0:
        return
    parts = table.column(PARTITION_PATH)
    first, last = parts[0].as_py(), parts[-1].as_py()
    if parts.null_count == 0 and first == last and pc.all(pc.equal(parts, first)).as_py():
        yield first, table
        return
    encoded = parts.combine_chunks().dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    for code, partition in enumerate(encoded.dictionary.to_pylist()):
        yield partition, table.filter(pa.array(codes == code))
