"""Merging a file slice: its base file and the blocks of its log files, as Hudi's readers do.

This is what a merge-on-read snapshot query, and a compaction, compute for each file slice
(plain pyarrow, run in executors):

1. Log blocks are taken in file order (base instant, log version, write token, then position in
   the file: :func:`pyhudi.io.file_names.log_order`). A block counts
   only if its instant is visible (a completed write, not newer than the query's instant) and
   no rollback command block targets it, so the blocks of failed or rolled-back writes never
   reach a reader.
2. The log records of a key are folded by the payload's ``preCombine``: the one with the largest
   ordering value wins, equal values go to the later record (PartialUpdateAvroPayload merges their
   fields instead); see :func:`pyhudi.read.payloads.precombine`.
3. The log winner is merged with the base record by the payload's ``combineAndGetUpdateValue``
   (:func:`pyhudi.read.payloads.merge_stored`): with ``OverwriteWithLatestAvroPayload`` it
   replaces it, with ``DefaultHoodieRecordPayload`` the base record stays when its ordering value
   is larger, and so on for each payload pyhudi implements.
4. A delete removes every record of its key written before it (same or earlier block order),
   unless the delete carries a real ordering value and the record's is strictly larger; records
   written after the delete survive it (a delete's one ordering value is not compared with records
   ordered by several fields, nor, where the payload deletes whatever the stored values
   (:attr:`MergeSpec.delete_spares_larger_stored`), with the base record's). Records the payload
   takes for deletes (``_hoodie_is_deleted = true``, AWS DMS ``Op = 'D'``, ...) delete the key as
   they win.

All steps are column-wise (sorts, hash lookups, masks); there is no per-row Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyhudi.io.avro_schema import IS_DELETED_FIELD, PARTITION_PATH, RECORD_KEY
from pyhudi.io.base_file import align
from pyhudi.io.keys import first_of_runs
from pyhudi.io.log_format import (
    ROLLBACK_COMMAND,
    BlockType,
    HeaderKey,
    LogBlock,
    block_fields,
    block_where,
    data_block_records,
    delete_block_records,
    is_partial,
    read_blocks,
    unsupported_in_data_table,
)
from pyhudi.read.partial import PartialBlock, check_partial_merge, fold_partial
from pyhudi.read.payloads import KEEP_STORED, TAKE_INCOMING, MergeSpec, merge_stored, payload_deletes, precombine
from pyhudi.storage import Storage

__all__ = ["MergeSpec", "SliceToRead", "Visibility", "LogScan", "MergeCounts", "merge_slice", "read_slice",
           "base_file_row_groups", "log_state", "scan_logs", "key_columns", "partial_log_state", "slice_log_state"]

_POS = "_pyhudi_pos"


@dataclass(frozen=True)
class Visibility:
    """Which instants a reader may see: completed writes, bounded by the query's instant.

    ``as_of`` is inclusive (time travel, snapshot of the latest commit); ``before`` is exclusive
    (a compaction at instant T folds only blocks older than T). Instants older than the active
    timeline (``archived_before``) were committed.
    """

    committed: frozenset[str]
    archived_before: str | None = None
    as_of: str | None = None
    before: str | None = None

    def sees(self, instant: str | None) -> bool:
        if instant is None:
            return False
        if self.as_of is not None and instant > self.as_of:
            return False
        if self.before is not None and instant >= self.before:
            return False
        if instant in self.committed:
            return True
        return self.archived_before is not None and instant < self.archived_before


def key_columns(schema: pa.Schema, spec: MergeSpec | None) -> pa.Schema:
    """The columns of ``schema`` a merged read needs to know which keys are alive: record key,
    partition path, the ordering field and the delete flag (when the table has them)."""
    wanted = [RECORD_KEY, PARTITION_PATH]
    for extra in (*(spec.key_columns() if spec else ()), IS_DELETED_FIELD):
        if extra and extra in schema.names and extra not in wanted:
            wanted.append(extra)
    return pa.schema([schema.field(n) for n in wanted if n in schema.names])


@dataclass(frozen=True)
class SliceToRead:
    """One file slice as shipped to an executor: relative paths only, picklable."""

    partition_path: str
    file_id: str
    base_file: str | None
    log_files: tuple[str, ...]


@dataclass
class LogScan:
    """The visible content of a slice's log files, in block order."""

    data: list[tuple[int, pa.Table]] = field(default_factory=list)
    deletes: list[tuple[int, pa.Table]] = field(default_factory=list)
    blocks: int = 0
    rollback_blocks: int = 0
    corrupt_blocks: int = 0
    skipped_blocks: int = 0
    log_records: int = 0
    log_bytes: int = 0
    #: block position -> the columns of a partial block (``IS_PARTIAL=true``, Hudi 1.x partial updates)
    partial: dict[int, PartialBlock] = field(default_factory=dict)


@dataclass(frozen=True)
class MergeCounts:
    base_records: int
    log_records: int
    output_records: int
    updated: int  # keys whose output record came from a log block
    deleted: int  # keys removed from the base file


def _is_rollback(block: LogBlock) -> bool:
    return (block.block_type == BlockType.COMMAND_BLOCK
            and block.header.get(HeaderKey.COMMAND_BLOCK_TYPE, ROLLBACK_COMMAND) == ROLLBACK_COMMAND)


def scan_logs(storage: Storage, log_files: tuple[str, ...] | list[str], schema: pa.Schema,
              visibility: Visibility) -> LogScan:
    """Decode the visible data and delete blocks of ``log_files`` (already in slice order)."""
    scan = LogScan()
    blocks: list[LogBlock] = []
    sources: list[str] = []
    for path in log_files:
        data = storage.read_bytes(path)  # its size is its length: no second request for it
        found = read_blocks(data, source=storage.full(path))
        blocks.extend(found)
        sources.extend([f"log file {path}"] * len(found))
        scan.log_bytes += len(data)
    scan.blocks = len(blocks)
    rolled_back = {b.target_instant_time for b in blocks if _is_rollback(b)}
    for pos, block in enumerate(blocks):
        kind = block.block_type
        if kind == BlockType.COMMAND_BLOCK:
            scan.rollback_blocks += 1
            continue
        if kind == BlockType.CORRUPT_BLOCK:
            scan.corrupt_blocks += 1
            continue
        instant = block.instant_time
        if instant in rolled_back or not visibility.sees(instant):
            scan.skipped_blocks += 1
            continue
        if kind in (BlockType.AVRO_DATA_BLOCK, BlockType.PARQUET_DATA_BLOCK):
            if is_partial(block):
                own = block_fields(block, sources[pos])
                scan.partial[pos] = PartialBlock(tuple(n for n in schema.names if n in own),
                                                 f"{sources[pos]}: {block_where(block)} (instant {instant})")
            rows = data_block_records(block, schema, source=sources[pos])
            scan.log_records += rows.num_rows
            scan.data.append((pos, rows))
        elif kind == BlockType.DELETE_BLOCK:
            deletes = delete_block_records(block, source=sources[pos])
            scan.log_records += deletes.num_rows
            scan.deletes.append((pos, deletes))
        else:
            raise unsupported_in_data_table(block, sources[pos])
    return scan


def _last_deletes(scan: LogScan) -> pa.Table | None:
    """One row per deleted key: the last delete of it (key, block position, ordering)."""
    if not scan.deletes:
        return None
    parts = [t.select(["record_key", "ordering_is_default", "ordering_value"]).append_column(
        _POS, pa.array(np.full(t.num_rows, pos, dtype=np.int64))) for pos, t in scan.deletes if t.num_rows]
    if not parts:
        return None
    table = pa.concat_tables(parts, promote_options="default")  # a block of default orderings has null values
    order = pc.sort_indices(table, sort_keys=[("record_key", "ascending"), (_POS, "descending")])
    table = table.take(order)
    return table.filter(pa.array(first_of_runs(table.column("record_key").combine_chunks())))


def _delete_ordering(values: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray | None:
    try:
        return values.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None  # not comparable with the ordering field: the delete wins by block order


def _beaten(work: pa.Table, keys: pa.ChunkedArray, deletes: pa.Table, ordering: str | None) -> pa.ChunkedArray:
    """Mask of the records a later delete of their key removes (``work`` has their block positions):
    all of them, unless the delete carries a real ordering value and the record's is larger."""
    at = pc.index_in(keys, value_set=deletes.column("record_key"))
    hit = pc.is_valid(at)
    filled = pc.fill_null(at, 0)
    beaten = pc.and_(hit, pc.less(work.column(_POS), pc.take(deletes.column(_POS), filled)))
    if ordering is not None:
        del_order = _delete_ordering(deletes.column("ordering_value"), work.schema.field(ordering).type)
        if del_order is not None:
            is_default = pc.take(deletes.column("ordering_is_default"), filled)
            larger = pc.fill_null(pc.greater(work.column(ordering), pc.take(del_order, filled)), False)
            beaten = pc.and_(beaten, pc.invert(pc.and_(pc.invert(is_default), larger)))
    return beaten


def _log_records(scan: LogScan, schema: pa.Schema, deletes: pa.Table | None,
                 spec: MergeSpec) -> pa.Table:
    """The log records of a slice that no later delete block removes, folded to one per key by the
    payload's ``preCombine`` in block order (rows in key order)."""
    records = pa.concat_tables([t for _, t in scan.data]) if scan.data else schema.empty_table()
    positions = np.concatenate([np.full(t.num_rows, pos, dtype=np.int64) for pos, t in scan.data]) \
        if scan.data else np.zeros(0, dtype=np.int64)
    rank = np.arange(records.num_rows, dtype=np.int64)  # blocks in order, rows in block order
    if deletes is not None and records.num_rows:
        ordering = spec.ordering_field if spec.ordering_field in schema.names and not spec.more_ordering_fields \
            else None
        work = records.append_column(_POS, pa.array(positions))
        alive = pc.invert(_beaten(work, records.column(RECORD_KEY), deletes, ordering))
        records, rank = records.filter(alive), rank[alive.to_numpy(zero_copy_only=False)]
    return precombine(records, spec, rank=rank)


def merge_slice(base: pa.Table | None, scan: LogScan, schema: pa.Schema,
                spec: MergeSpec) -> tuple[pa.Table, MergeCounts]:
    """The records of a file slice after applying its log blocks; see the module docstring."""
    base_rows = 0 if base is None else base.num_rows
    deletes = _last_deletes(scan)
    if not scan.data and deletes is None:
        table = align(base, schema) if base is not None else schema.empty_table()
        return _drop_soft_deleted(table), MergeCounts(base_rows, scan.log_records, table.num_rows, 0, 0)
    if scan.partial:
        return _merge_partial_slice(base, scan, schema, spec, deletes)
    ordering = spec.ordering_field if spec.ordering_field in schema.names and not spec.more_ordering_fields else None
    logged = _log_records(scan, schema, deletes, spec)
    log_deletes = payload_deletes(logged, spec)
    stored = align(base, schema) if base is not None else schema.empty_table()
    if deletes is not None and stored.num_rows:
        work = stored.append_column(_POS, pa.array(np.full(stored.num_rows, -1, dtype=np.int64)))
        spared_by = ordering if spec.delete_spares_larger_stored else None
        stored = stored.filter(pc.invert(_beaten(work, stored.column(RECORD_KEY), deletes, spared_by)))
    at = pc.index_in(stored.column(RECORD_KEY), value_set=logged.column(RECORD_KEY).combine_chunks())
    matched = at.is_valid().to_numpy(zero_copy_only=False)
    log_idx = at.drop_null().to_numpy(zero_copy_only=False).astype(np.int64)
    stored_idx = np.flatnonzero(matched)
    merged, take = merge_stored(stored.take(pa.array(stored_idx)), logged.take(pa.array(log_idx)),
                                pc.take(log_deletes, pa.array(log_idx)), spec)
    unmatched_log = np.ones(logged.num_rows, dtype=bool)
    unmatched_log[log_idx] = False
    inserts = np.flatnonzero(unmatched_log & ~log_deletes.to_numpy(zero_copy_only=False))
    out = pa.concat_tables([
        stored.filter(pa.array(~matched)),
        stored.take(pa.array(stored_idx[take == KEEP_STORED])),
        merged.filter(pa.array(take == TAKE_INCOMING)),
        logged.take(pa.array(inserts)),
    ])
    out = _drop_soft_deleted(out.take(pc.sort_indices(out.column(RECORD_KEY))))
    updated = int(np.count_nonzero(take == TAKE_INCOMING)) + len(inserts)
    deleted = 0
    if base is not None and base_rows:
        deleted = base_rows - int(pc.sum(pc.is_in(base.column(RECORD_KEY), value_set=out.column(RECORD_KEY)))
                                  .as_py() or 0)
    return out, MergeCounts(base_rows, scan.log_records, out.num_rows, updated, max(0, deleted))


def _partial_inputs(scan: LogScan, schema: pa.Schema, deletes: pa.Table | None,
                    spec: MergeSpec) -> tuple[pa.Table, np.ndarray, np.ndarray, pa.Table | None, tuple[str, ...]]:
    """The log records of a slice with partial blocks, their block positions, which columns each
    holds, every delete-block entry (not only the last of a key) and the ordering fields."""
    ordering = spec.ordering_in(schema.names)
    check_partial_merge(scan.partial, schema, spec.payload, ordering)
    records = pa.concat_tables([t for _, t in scan.data]) if scan.data else schema.empty_table()
    positions = np.concatenate([np.full(t.num_rows, pos, dtype=np.int64) for pos, t in scan.data]) \
        if scan.data else np.zeros(0, dtype=np.int64)
    has = np.ones((records.num_rows, len(schema.names)), dtype=bool)
    row = 0
    for pos, t in scan.data:
        if pos in scan.partial:
            own = set(scan.partial[pos].columns)
            has[row:row + t.num_rows] = np.array([n in own for n in schema.names], dtype=bool)
        row += t.num_rows
    parts = [t.select(["record_key", "ordering_is_default", "ordering_value"]).append_column(
        _POS, pa.array(np.full(t.num_rows, pos, dtype=np.int64))) for pos, t in scan.deletes if t.num_rows]
    every_delete = pa.concat_tables(parts, promote_options="default") if parts else None
    return records, positions, has, every_delete if deletes is not None else None, ordering


def _merge_partial_slice(base: pa.Table | None, scan: LogScan, schema: pa.Schema, spec: MergeSpec,
                         deletes: pa.Table | None) -> tuple[pa.Table, MergeCounts]:
    """:func:`merge_slice` for a slice with partial blocks (:mod:`pyhudi.read.partial`)."""
    base_rows = 0 if base is None else base.num_rows
    records, positions, has, every_delete, ordering = _partial_inputs(scan, schema, deletes, spec)
    stored = align(base, schema) if base is not None else schema.empty_table()
    deleting = payload_deletes(records, spec).to_numpy(zero_copy_only=False).astype(bool)
    out, updated, deleted = fold_partial(stored, records, positions, has, every_delete, schema, ordering, deleting)
    out = _drop_soft_deleted(out)
    return out, MergeCounts(base_rows, scan.log_records, out.num_rows, updated, deleted)


@contextmanager
def _base_parquet(storage: Storage, base_file: str, schema: pa.Schema) -> Iterator[tuple[pq.ParquetFile, list[str]]]:
    """The base file open, with the columns of ``schema`` it has (by name; :func:`align` makes
    the others null)."""
    with storage.fs.open_input_file(storage.full(base_file)) as f:
        # pre_buffer: the columns' chunks in one coalesced read, not a request per column on object stores
        parquet = pq.ParquetFile(f, pre_buffer=True)
        names = set(parquet.schema_arrow.names)
        yield parquet, [n for n in schema.names if n in names]


def _read_base(storage: Storage, base_file: str, schema: pa.Schema) -> pa.Table:
    """The base file read as ``schema`` (by name; columns it lacks are null, see :func:`align`)."""
    with _base_parquet(storage, base_file, schema) as (parquet, columns):
        table = parquet.read(columns=columns)
    return align(table, schema, source=f"base file {base_file}")


def base_file_row_groups(storage: Storage, base_file: str, schema: pa.Schema) -> Iterator[pa.Table]:
    """The rows of a slice without log files, one parquet row group at a time: what
    :func:`read_slice` returns for it (read as ``schema``, soft deletes dropped), but streamed, so
    a consumer (Spark's Python data source) takes the first rows while the rest are decoded."""
    with _base_parquet(storage, base_file, schema) as (parquet, columns):
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group, columns=columns)
            yield _drop_soft_deleted(align(table, schema, source=f"base file {base_file}"))


def _drop_soft_deleted(table: pa.Table) -> pa.Table:
    if IS_DELETED_FIELD not in table.column_names:
        return table
    flag = table.column(IS_DELETED_FIELD)
    if not pa.types.is_boolean(flag.type) or flag.null_count == len(flag):
        return table
    return table.filter(pc.invert(pc.fill_null(flag, False)))


def read_slice(storage: Storage, piece: SliceToRead, schema: pa.Schema, spec: MergeSpec,
               visibility: Visibility) -> tuple[pa.Table, MergeCounts, LogScan]:
    """Read one file slice merged (executor side of snapshot queries, compaction, index lookups).

    ``schema`` may be a subset of the table's columns (it must hold the record key; the ordering
    field and ``_hoodie_is_deleted`` when present): only those are read and returned.
    """
    base = None
    if piece.base_file:
        base = _read_base(storage, piece.base_file, schema)
    scan = scan_logs(storage, piece.log_files, schema, visibility)
    merged, counts = merge_slice(base, scan, schema, spec)
    return merged, counts, scan


#: Columns :func:`log_state` adds to the record columns of each key
LOG_RECORD = "_pyhudi_log_record"  # the key has a log record that survived the log's deletes
LOG_DELETED = "_pyhudi_log_deleted"  # the log deletes the key after any base record
LOG_DELETE_ORDER = "_pyhudi_log_delete_order"  # that delete's real ordering value (null: none)


#: the winning log record is one the payload takes for a delete (:func:`payload_deletes`)
LOG_PAYLOAD_DELETE = "_pyhudi_log_payload_delete"


def log_state(scan: LogScan, schema: pa.Schema, spec: MergeSpec) -> pa.Table:
    """What a slice's log blocks say of every key they hold, for a merge with the base file done
    elsewhere (a Spark join, see :mod:`pyhudi.spark.merged`); the same rules as :func:`merge_slice`.

    One row per key: the winning log record (the record columns, folded by the payload's
    ``preCombine``; null with ``LOG_RECORD`` false when the log's own deletes removed every record
    of the key), whether the log deletes the key after any base record (``LOG_DELETED``), that
    delete's ordering value when it has a real one (``LOG_DELETE_ORDER``) and whether the winning
    record is one the payload takes for a delete (``LOG_PAYLOAD_DELETE``). A base record then
    survives the delete only if its ordering value is larger, and is merged with the log record by
    :func:`pyhudi.read.payloads.merge_stored`.
    """
    ordering = spec.ordering_field if spec.ordering_field in schema.names and not spec.more_ordering_fields else None
    deletes = _last_deletes(scan)
    winners = _log_records(scan, schema, deletes, spec).select(schema.names)
    payload_deleted = payload_deletes(winners, spec)
    winners = winners.append_column(LOG_RECORD, pa.repeat(pa.scalar(True), winners.num_rows))
    if deletes is not None:
        only_deleted = deletes.filter(pc.invert(pc.is_in(deletes.column("record_key"),
                                                         value_set=winners.column(RECORD_KEY).combine_chunks())))
        empty = align(pa.table({RECORD_KEY: only_deleted.column("record_key").cast(pa.string())}), schema)
        winners = pa.concat_tables([winners, empty.append_column(
            LOG_RECORD, pa.repeat(pa.scalar(False), empty.num_rows))])
        payload_deleted = pa.concat_arrays([payload_deleted, pa.array(np.zeros(empty.num_rows, dtype=bool))])
    keys = winners.column(RECORD_KEY)
    deleted = pa.repeat(pa.scalar(False), winners.num_rows)
    order_type = schema.field(ordering).type if ordering else pa.string()
    delete_order = pa.nulls(winners.num_rows, order_type)
    if deletes is not None and winners.num_rows:
        at = pc.index_in(keys, value_set=deletes.column("record_key"))
        deleted = pc.is_valid(at)
        # (no ordering value where the payload lets a delete win over a larger base record)
        cast = _delete_ordering(deletes.column("ordering_value"), order_type) \
            if ordering and spec.delete_spares_larger_stored else None
        if cast is not None:
            real = pc.if_else(pc.invert(deletes.column("ordering_is_default")), cast, pa.nulls(len(cast), order_type))
            delete_order = pc.take(real, at)
    return winners.append_column(LOG_DELETED, deleted).append_column(LOG_DELETE_ORDER, delete_order) \
        .append_column(LOG_PAYLOAD_DELETE, payload_deleted)


def partial_log_state(base: pa.Table | None, scan: LogScan, schema: pa.Schema, spec: MergeSpec) -> pa.Table:
    """:func:`log_state` of a slice with partial blocks (``scan.partial``), in the same columns.

    A partial record's columns overlay the base record (:mod:`pyhudi.read.partial`), which a join
    choosing between the base row and one log row cannot express; so the slice is merged whole here
    (``base`` is its base file read as ``schema``) and the log side holds, for every key its blocks
    touch, the merged record or a delete without ordering value (the base record is gone). Every
    row says ``LOG_DELETED``: the base row gives way to the merged record (where the base record
    won, the merged record is the base record) whatever the ordering values, in each of the join's
    plans."""
    merged, _ = merge_slice(base, scan, schema, spec)
    keys = [t.column(RECORD_KEY).combine_chunks().cast(pa.string()) for _, t in scan.data]
    keys += [t.column("record_key").combine_chunks().cast(pa.string()) for _, t in scan.deletes]
    touched = pc.unique(pa.concat_arrays(keys)) if keys else pa.array([], pa.string())
    records = merged.filter(pc.is_in(merged.column(RECORD_KEY), value_set=touched)).select(schema.names)
    n = records.num_rows
    gone_keys = pa.array([], pa.string())
    if base is not None and base.num_rows:
        stored = base.column(RECORD_KEY).combine_chunks().cast(pa.string())
        hit = pc.and_(pc.is_in(stored, value_set=touched),
                      pc.invert(pc.is_in(stored, value_set=merged.column(RECORD_KEY).combine_chunks())))
        gone_keys = pc.unique(stored.filter(hit))
    gone = align(pa.table({RECORD_KEY: gone_keys}), schema)
    order = spec.ordering_field if spec.ordering_field in schema.names and not spec.more_ordering_fields else None
    order_type = schema.field(order).type if order else pa.string()
    m = len(gone_keys)
    flags = {LOG_RECORD: np.r_[np.ones(n, bool), np.zeros(m, bool)], LOG_DELETED: np.ones(n + m, bool)}
    out = pa.concat_tables([records, gone])
    return out.append_column(LOG_RECORD, pa.array(flags[LOG_RECORD])) \
        .append_column(LOG_DELETED, pa.array(flags[LOG_DELETED])) \
        .append_column(LOG_DELETE_ORDER, pa.nulls(n + m, order_type)) \
        .append_column(LOG_PAYLOAD_DELETE, pa.array(np.zeros(n + m, bool)))


def slice_log_state(storage: Storage, piece: SliceToRead, schema: pa.Schema, spec: MergeSpec,
                    visibility: Visibility) -> pa.Table:
    """:func:`log_state` of one slice's logs (:func:`partial_log_state` when they hold partial blocks)."""
    scan = scan_logs(storage, piece.log_files, schema, visibility)
    if not scan.partial:
        return log_state(scan, schema, spec)
    base = _read_base(storage, piece.base_file, schema) if piece.base_file else None
    return partial_log_state(base, scan, schema, spec)
