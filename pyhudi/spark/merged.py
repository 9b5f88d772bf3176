"""Merged reads of merge-on-read file slices, distributed over executors.

Each Spark task receives a few file slices (frozen :class:`SliceToRead` plans) and merges each
one's base file with its log blocks using :mod:`pyhudi.read.merge` (pyarrow, vectorised). Slices
without log files never come here: their base files are read as they are
(:mod:`pyhudi.spark.base_files`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from pyhudi.io.avro_schema import IS_DELETED_FIELD, PARTITION_PATH, RECORD_KEY
from pyhudi.io.base_file import align
from pyhudi.read.merge import (
    LOG_DELETE_ORDER,
    LOG_DELETED,
    LOG_PAYLOAD_DELETE,
    LOG_RECORD,
    MergeSpec,
    SliceToRead,
    Visibility,
    read_slice,
    slice_log_state,
)
from pyhudi.read.payloads import KEEP_STORED, TAKE_INCOMING, merge_stored
from pyhudi.read.skipping import ColumnRange, Predicate, columns_of, may_match
from pyhudi.spark.arrow_files import read_columns
from pyhudi.spark.compat import arrow_schema
from pyhudi.spark.jvm import quoted, select_exprs
from pyhudi.spark.positions import MAX_BITMAP_FILES, replaced_filter, replaced_rows
from pyhudi.spark.worker import map_in_arrow, per_item, spread
from pyhudi.storage import Storage


def _merge_slices(spark: SparkSession, storage: Storage, slices: list[SliceToRead], read_schema: pa.Schema,
                  spec: MergeSpec, visibility: Visibility, out: pa.Schema, out_ddl: T.StructType | str,
                  emit: Callable[[SliceToRead, pa.Table], pa.Table]) -> DataFrame:
    """Merge each slice in an executor (``read_schema`` columns) and return ``emit``'s rows of it."""
    def work(storage: Storage, piece: SliceToRead, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        merged, _counts, _scan = read_slice(storage, piece, schema, spec, visibility)
        if merged.num_rows:
            yield from emit(piece, merged).cast(out).to_batches()

    return per_item(spark, storage, slices, read_schema, work, out_ddl)


def read_merged(spark: SparkSession, storage: Storage, slices: list[SliceToRead], file_schema: pa.Schema,
                out_schema: T.StructType, spec: MergeSpec, visibility: Visibility) -> DataFrame:
    """The merged records of ``slices`` as a DataFrame of ``out_schema``."""
    target = arrow_schema(out_schema)
    return _merge_slices(spark, storage, slices, file_schema, spec, visibility, target, out_schema,
                         lambda _piece, merged: align(merged, target))


def merged_keys(spark: SparkSession, storage: Storage, slices: list[SliceToRead], key_schema: pa.Schema,
                spec: MergeSpec, visibility: Visibility, *, names: tuple[str, str, str]) -> DataFrame:
    """(record key, partition path, file id) of every record alive in ``slices`` after merging.

    Index lookups on merge-on-read tables use this for slices with log files: a key deleted by a
    log block is gone even though the base file still holds it. ``key_schema`` is
    :func:`pyhudi.spark.index.key_read_schema`.
    """
    key_col, part_col, fid_col = names
    out = pa.schema([(key_col, pa.string()), (part_col, pa.string()), (fid_col, pa.string())])

    def keys(piece: SliceToRead, merged: pa.Table) -> pa.Table:
        return pa.Table.from_arrays([merged.column(RECORD_KEY), merged.column(PARTITION_PATH),
                                     pa.array([piece.file_id] * merged.num_rows, pa.string())], schema=out)

    ddl = f"{key_col} string, {part_col} string, {fid_col} string"
    return _merge_slices(spark, storage, slices, key_schema, spec, visibility, out, ddl, keys)


#: The base file each base-file row comes from (``<file id>_<token>_<instant>.parquet``); read only
#: when two of the merged slices' base files have the same size (see :func:`with_file_id`)
FILE_ID = "_pyhudi_file_name"
LOG_PREFIX = "_pyhudi_l_"  # the log side's record columns in the join
LOG_FILE_ID = "_pyhudi_log_file_id"
#: Log bytes (the slices' log files) up to which the log side of a merge is broadcast
BROADCAST_LOG_BYTES = 256 << 20


#: The size of the base file each base-file row comes from (Spark's ``_metadata.file_size``)
BASE_SIZE = "_pyhudi_base_size"
#: The position of each base-file row in its file (Spark's ``_metadata.row_index``)
BASE_ROW = "_pyhudi_base_row"
#: Log side: the size of the slice's base file, and the position in it of the key's record (the
#: first, should the file hold the key twice; null when the base file does not hold the key)
LOG_BASE_SIZE = "_pyhudi_log_base_size"
LOG_BASE_ROW = "_pyhudi_log_base_row"


def base_columns(*, names: bool) -> tuple[str, ...]:
    """What :func:`with_file_id` adds to base-file rows."""
    return (BASE_SIZE, BASE_ROW, FILE_ID) if names else (BASE_SIZE, BASE_ROW)


def with_file_id(df: DataFrame, *, names: bool = False) -> DataFrame:
    """Base-file rows with the size of the file each comes from and the row's position in it.

    Both are Spark ``_metadata`` fields that cost nothing to read: the size is a constant per file
    and the position is counted by the reader. Together they name a row of one of the slices being
    merged as long as no two of their base files have the same size; where two do, ``names`` adds
    the file name as well (a string per row, which costs about as much as reading a column).
    """
    source = {BASE_SIZE: "file_size", BASE_ROW: "row_index", FILE_ID: "file_name"}
    return select_exprs(df, ["*", *(f"_metadata.{source[c]} AS {c}" for c in base_columns(names=names))])


def log_side_schema(target: pa.Schema, spec: MergeSpec) -> pa.Schema:
    """Columns of the log side: the record columns prefixed, the file id, :func:`log_state`'s flags
    and where the base file holds the key."""
    order = spec.ordering_field if spec.ordering_field in target.names and not spec.more_ordering_fields else None
    return pa.schema([pa.field(LOG_PREFIX + f.name, f.type) for f in target] + [
        pa.field(LOG_FILE_ID, pa.string()), pa.field(LOG_RECORD, pa.bool_()), pa.field(LOG_DELETED, pa.bool_()),
        pa.field(LOG_DELETE_ORDER, target.field(order).type if order else pa.string()),
        pa.field(LOG_BASE_SIZE, pa.int64()), pa.field(LOG_BASE_ROW, pa.int64()),
        pa.field(LOG_PAYLOAD_DELETE, pa.bool_())])


def log_side_rows(state: pa.Table, file_id: str, stored_keys: pa.ChunkedArray | None, base_size: int | None,
                  target: pa.Schema, out: pa.Schema) -> pa.Table:
    """:func:`log_state` of one slice as log-side rows (``out`` is :func:`log_side_schema`);
    ``stored_keys`` are the record keys of the slice's base file and ``base_size`` its size in
    bytes (None: it has none)."""
    records = align(state, target)
    n = state.num_rows
    first = np.full(n, -1, dtype=np.int64)
    if stored_keys is not None and n:
        # hash the log's keys (few) and probe the base file's (many): the row of each matched key
        at = pc.index_in(stored_keys.combine_chunks(), value_set=state.column(RECORD_KEY).combine_chunks())
        rows = np.flatnonzero(at.is_valid().to_numpy(zero_copy_only=False))[::-1]
        first[at.drop_null().to_numpy(zero_copy_only=False)[::-1]] = rows  # the lowest row wins
    columns = list(records.columns) + [
        pa.repeat(pa.scalar(file_id, pa.string()), n), state.column(LOG_RECORD), state.column(LOG_DELETED),
        state.column(LOG_DELETE_ORDER).cast(out.field(LOG_DELETE_ORDER).type),
        pa.repeat(pa.scalar(base_size, pa.int64()), n), pa.array(first, mask=first < 0),
        state.column(LOG_PAYLOAD_DELETE)]
    return pa.Table.from_arrays(columns, schema=out)


def _log_side(spark: SparkSession, storage: Storage, slices: list[SliceToRead], base_sizes: list[int | None],
              file_schema: pa.Schema, out_schema: T.StructType, spec: MergeSpec, visibility: Visibility) -> DataFrame:
    """Per slice, :func:`log_state` of its logs as log-side rows, computed once per DataFrame
    (``base_sizes``: the size of each slice's base file).

    The rows feed two parts of the plan (the join with the base rows, or the positions collected
    for :mod:`pyhudi.spark.positions`, and the log records), so they are local-checkpointed lazily:
    the first job that needs them stores them on the executors, and the other parts read them back
    instead of decoding the logs again. Spark frees the blocks with the DataFrame.
    """
    target = arrow_schema(out_schema)
    out = log_side_schema(target, spec)
    schema_ipc = file_schema.serialize().to_pybytes()
    pieces = list(zip(slices, base_sizes))

    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema = pa.ipc.read_schema(pa.py_buffer(schema_ipc))
        for batch in batches:
            for i in batch.column(0).to_pylist():
                piece, size = pieces[i]
                state = slice_log_state(storage, piece, schema, spec, visibility)
                if not state.num_rows:
                    continue
                stored = read_columns(storage, piece.base_file, [RECORD_KEY], size=size).column(RECORD_KEY) \
                    if piece.base_file else None
                yield from log_side_rows(state, piece.file_id, stored, size, target, out).to_batches()

    return map_in_arrow(spread(spark, len(pieces)), body, from_arrow_schema(out)).localCheckpoint(eager=False)


def _same_row(base: DataFrame) -> Column:
    """The join condition of base rows (aliased ``b``) and log-side rows: the same position in a
    file of the same size, and of the same file id where base rows carry their file name.

    The position alone is the hash key: positions are small numbers, for which Spark builds a
    dense array instead of a hash table, and the other comparisons, written as ``coalesce(... =
    ...)`` so that Spark does not take them for keys too, run only for rows whose position matches.
    """
    same = F.col(f"b.{BASE_SIZE}") == F.col(LOG_BASE_SIZE)
    if FILE_ID in base.columns:
        same = same & (F.substring_index(F.col(f"b.{FILE_ID}"), "_", 1) == F.col(LOG_FILE_ID))
    return (F.col(f"b.{BASE_ROW}") == F.col(LOG_BASE_ROW)) & F.coalesce(same, F.lit(False))


def join_logs(base: DataFrame, logs: DataFrame, names: list[str], spec: MergeSpec, *,
              broadcast: bool = True) -> DataFrame:
    """Base rows (with :func:`with_file_id`'s columns) merged with the log side: per row the base
    record, the log record, or nothing, by the rules of :func:`pyhudi.read.merge.merge_slice`.

    A row is matched by its position in its base file and the file's size (:func:`_same_row`),
    which the log side knows from the base file's keys: Spark neither decodes nor hashes a record
    key per row. The choice per row is one SQL expression per column.
    """
    order = spec.ordering_field if spec.ordering_field in names else None
    logs = logs.where(F.col(LOG_BASE_ROW).isNotNull())
    right = F.broadcast(logs) if broadcast else logs
    joined = base.alias("b").join(right, _same_row(base), "left")
    has_record = f"coalesce({LOG_RECORD}, false)"
    alive = f"{LOG_RECORD} IS NULL OR NOT {LOG_DELETED}"  # a log delete removes the base record ...
    if order is not None:  # ... unless the base record's ordering value is larger than the delete's
        alive += f" OR coalesce(b.{quoted(order)} > {LOG_DELETE_ORDER}, false)"
    take_base = f"(({alive}) AND NOT {has_record})"
    if order is not None and spec.keep_larger_ordering:
        stored, logged = f"b.{quoted(order)}", quoted(LOG_PREFIX + order)
        take_base = f"(({alive}) AND (NOT {has_record} OR ({stored} IS NOT NULL AND ({logged} IS NULL OR " \
                    f"{stored} > {logged}))))"
    return select_exprs(joined.where(f"{take_base} OR {has_record}"), [
        f"CASE WHEN {take_base} THEN b.{quoted(n)} ELSE {quoted(LOG_PREFIX + n)} END AS {quoted(n)}" for n in names])


def new_records(logs: DataFrame, names: list[str]) -> DataFrame:
    """The log records of keys the base files do not hold, with the record columns unprefixed."""
    return select_exprs(logs.where(f"coalesce({LOG_RECORD}, false) AND {LOG_BASE_ROW} IS NULL "
                                   f"AND NOT {LOG_PAYLOAD_DELETE}"),
                        [f"{quoted(LOG_PREFIX + n)} AS {quoted(n)}" for n in names])


def surviving_base(base: DataFrame, logs: DataFrame, names: list[str], spec: MergeSpec, *,
                   broadcast: bool = True, replaced: Column | None = None) -> DataFrame:
    """The base rows no log record replaces (the log wins whatever the ordering values:
    ``OverwriteWithLatestAvroPayload``) and no log delete removes, as they are in the base file.

    Every row comes out with its own values, so a filter on the result is a filter on the base
    file: Spark pushes it into the scan, and base files whose statistics rule it out need not be
    read at all (the logs' records come from :func:`log_records`).

    ``replaced`` (:func:`pyhudi.spark.positions.replaced_filter` of the log side's positions) tells
    the base rows a log record or delete replaces without a join.
    """
    if replaced is not None:
        return select_exprs(base.where(~replaced), [quoted(n) for n in names])
    order = spec.ordering_field if spec.ordering_field in names else None
    logs = logs.where(F.col(LOG_BASE_ROW).isNotNull())
    right = F.broadcast(logs) if broadcast else logs
    removed = _same_row(base)  # a log record or delete for the key removes the base record ...
    if order is not None:  # ... but a delete with a real ordering value spares one with a larger value
        removed = removed & F.expr(f"{LOG_RECORD} OR NOT coalesce(b.{quoted(order)} > {LOG_DELETE_ORDER}, false)")
    # an anti join: Spark emits the rows without a match as they are, joining no columns to them
    return select_exprs(base.alias("b").join(right, removed, "left_anti"), [f"b.{quoted(n)}" for n in names])


def log_records(logs: DataFrame, names: list[str]) -> DataFrame:
    """Every surviving log record, unprefixed: with ``OverwriteWithLatestAvroPayload`` each one is
    in the result, over the base record of its key if there is one."""
    return select_exprs(logs.where(f"coalesce({LOG_RECORD}, false) AND NOT {LOG_PAYLOAD_DELETE}"),
                        [f"{quoted(LOG_PREFIX + n)} AS {quoted(n)}" for n in names])


def filters_reach_base_files(spec: MergeSpec) -> bool:
    """Whether a filter on a merged slice may be applied to its base file alone (and its statistics
    used to skip it): true where a log record replaces or deletes the base record whatever their
    values (OverwriteWithLatestAvroPayload, AWSDmsAvroPayload); not where the base record's values
    decide between it and the log record, or fill the log record's fields."""
    return spec.incoming_always_wins


def _sql_merge(spec: MergeSpec) -> bool:
    """Whether :func:`join_logs` merges by one SQL expression per column: DefaultHoodieRecordPayload
    (one ordering field, no delete marker); other payloads are merged by :func:`join_logs_arrow`."""
    return spec.keep_larger_ordering and not spec.more_ordering_fields and not spec.delete_field


def join_logs_arrow(base: DataFrame, logs: DataFrame, names: list[str], spec: MergeSpec, *,
                    broadcast: bool = True) -> DataFrame:
    """Base rows merged with the log side by the payload's ``combineAndGetUpdateValue``, for the
    payloads whose merge is more than a choice of one row by ordering value (partial updates,
    Debezium orderings, deletes that ignore the ordering value): Spark joins the rows as
    :func:`join_logs` does, and each task merges its joined rows with
    :func:`pyhudi.read.payloads.merge_stored`, the function compaction and copy-on-write writes use
    (column-wise, pyarrow). A base record a log delete removes gives way to the log record written
    after the delete, if any, which is then an insert."""
    order = spec.ordering_field if spec.ordering_field in names and not spec.more_ordering_fields else None
    logs = logs.where(F.col(LOG_BASE_ROW).isNotNull())
    right = F.broadcast(logs) if broadcast else logs
    joined = base.alias("b").join(right, _same_row(base), "left")
    beaten = f"coalesce({LOG_DELETED}, false)"
    if order is not None:
        beaten += f" AND NOT coalesce(b.{quoted(order)} > {LOG_DELETE_ORDER}, false)"
    joined = select_exprs(joined, [f"b.{quoted(n)} AS {quoted(n)}" for n in names]
                          + [quoted(LOG_PREFIX + n) for n in names]
                          + [f"coalesce({LOG_RECORD}, false) AS {LOG_RECORD}", f"{beaten} AS {LOG_DELETED}",
                             f"coalesce({LOG_PAYLOAD_DELETE}, false) AS {LOG_PAYLOAD_DELETE}"])
    out_type = base.select(*[F.col(quoted(n)) for n in names]).schema
    prefixed = [LOG_PREFIX + n for n in names]

    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if not batch.num_rows:
                continue
            table = pa.Table.from_batches([batch])
            stored = table.select(names)
            logged = pa.Table.from_arrays(list(table.select(prefixed).columns), names=names)
            has_log = table.column(LOG_RECORD).to_numpy(zero_copy_only=False).astype(bool)
            beaten_np = table.column(LOG_DELETED).to_numpy(zero_copy_only=False).astype(bool)
            log_delete = table.column(LOG_PAYLOAD_DELETE).to_numpy(zero_copy_only=False).astype(bool)
            both = np.flatnonzero(has_log & ~beaten_np)
            merged, take = merge_stored(stored.take(pa.array(both)), logged.take(pa.array(both)),
                                        pa.array(log_delete[both]), spec)
            base_only = np.flatnonzero(~has_log & ~beaten_np)
            log_only = np.flatnonzero(has_log & beaten_np & ~log_delete)
            parts = [stored.take(pa.array(np.sort(np.concatenate([base_only, both[take == KEEP_STORED]])))),
                     merged.filter(pa.array(take == TAKE_INCOMING)).cast(stored.schema),
                     logged.take(pa.array(log_only)).cast(stored.schema)]
            yield from pa.concat_tables(parts).to_batches()

    return map_in_arrow(joined, body, out_type)


def merged_records(base: DataFrame | None, logs: DataFrame, names: list[str], spec: MergeSpec, *,
                   broadcast: bool = True, replaced: Column | None = None) -> DataFrame:
    """The records of merged slices from their base rows and log side (see :func:`merge_with_logs`;
    ``replaced`` as for :func:`surviving_base`)."""
    if filters_reach_base_files(spec):
        parts = [] if base is None else [surviving_base(base, logs, names, spec, broadcast=broadcast,
                                                        replaced=replaced)]
        parts.append(log_records(logs, names))
    else:
        join = join_logs if _sql_merge(spec) else join_logs_arrow
        parts = [] if base is None else [join(base, logs, names, spec, broadcast=broadcast)]
        parts.append(new_records(logs, names))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return drop_soft_deleted(out)


def drop_soft_deleted(df: DataFrame) -> DataFrame:
    if IS_DELETED_FIELD not in df.columns:
        return df
    return df.where(~F.coalesce(F.col(f"`{IS_DELETED_FIELD}`").cast("boolean"), F.lit(False)))


#: Log sides kept for reads of the same snapshot (see :func:`merge_with_logs`)
LOG_SIDES_KEPT = 4
#: Log bytes per task reading a kept log side's records (a task costs more than decoding ~10 MB)
LOG_BYTES_PER_TASK = 64 << 20
#: Merged frames kept per log side: one per set of base files read and of slices wanted
MERGED_KEPT = 8


@dataclass
class _KeptLogSide:
    """A snapshot's log side and what queries derived from it: the scan filter of the base rows it
    replaces (None: joined instead; unknown until the snapshot's second plan) and merged frames
    ready to query."""

    logs: DataFrame
    replaced: Column | None = None
    replaced_known: bool = False
    planned: bool = False  # a merged frame of this log side was planned before
    merged: OrderedDict[Hashable, DataFrame | None] = field(default_factory=OrderedDict)


_LOG_SIDES: OrderedDict[Hashable, _KeptLogSide] = OrderedDict()


def _kept_log_side(key: Hashable, make: Callable[[], DataFrame]) -> _KeptLogSide:
    found = _LOG_SIDES.pop(key, None)
    if found is None:
        found = _KeptLogSide(make())
    _LOG_SIDES[key] = found
    while len(_LOG_SIDES) > LOG_SIDES_KEPT:
        _LOG_SIDES.popitem(last=False)
    return found


def _replaced_filter(kept: _KeptLogSide, names: list[str], spec: MergeSpec, *, files: int,
                     file_name: str | None) -> Column | None:
    """The snapshot's :func:`pyhudi.spark.positions.replaced_filter`, made once: its positions are
    collected by the second plan of the snapshot, not the first, so that ``pyhudi.read`` stays
    lazy (a read re-planned by ``where`` is never executed as first planned) and the collect
    finds the log side stored by the first query. None: join (``files``: base files of the
    snapshot's slices; more than :data:`~pyhudi.spark.positions.MAX_BITMAP_FILES` are joined
    without collecting anything)."""
    if not kept.replaced_known:
        if files > MAX_BITMAP_FILES:
            kept.replaced_known = True
        elif kept.planned:
            positions = kept.logs.where(F.col(LOG_BASE_ROW).isNotNull())
            bitmaps = replaced_rows(positions, file_id=LOG_FILE_ID, size=LOG_BASE_SIZE, row=LOG_BASE_ROW,
                                    ordering=spec.ordering_field in names)
            if bitmaps is not None:
                kept.replaced = replaced_filter(bitmaps, size=BASE_SIZE, row=BASE_ROW, file_name=file_name)
            kept.replaced_known = True
    return kept.replaced


def merge_with_logs(spark: SparkSession, base: Callable[[], DataFrame | None], storage: Storage,
                    slices: list[SliceToRead], base_sizes: list[int | None], file_schema: pa.Schema,
                    out_schema: T.StructType, spec: MergeSpec, visibility: Visibility, *, log_bytes: int,
                    snapshot: Hashable | None = None, predicate: Predicate | None = None,
                    base_ids: frozenset[str] = frozenset()) -> DataFrame | None:
    """The merged records of merge-on-read slices with log files, merged by Spark.

    ``base`` makes the frame of the slices' base files with :func:`with_file_id`'s columns
    (Spark's parquet reader, or pyarrow in executors where Spark cannot open the store:
    :func:`pyhudi.spark.base_files.base_files_frame`; None when there are none, or filters ruled
    them all out); ``base_sizes`` are the sizes of the slices' base files.
    Only the logs go through Python: each slice's :func:`log_state` (one row per key its blocks
    hold). With ``OverwriteWithLatestAvroPayload`` the result is the base rows no log record or
    delete touches (:func:`surviving_base`) plus every log record; with
    ``DefaultHoodieRecordPayload`` each row picks the base or the log record by ordering value
    (:func:`join_logs`), plus the records of keys only the logs hold. Spark joins the base rows
    with the log side by the key's position in its base file and the file's size (the log side
    broadcast while the logs are small, :data:`BROADCAST_LOG_BYTES`). Spark prunes the base files'
    columns and (first case) pushes filters into their scan as it does for copy-on-write files,
    which a merge of whole slices in Python cannot.

    ``snapshot`` names what was read (the log files with their sizes, and the visibility): reads of
    the same snapshot reuse its log side, whose rows the first query stored on the executors, so
    only the first query after a commit decodes the logs. The last :data:`LOG_SIDES_KEPT` are kept
    (up to :data:`BROADCAST_LOG_BYTES` of logs each); Spark frees the rows of those dropped. For
    such a snapshot (first case) the replaced base rows come to the driver once, as bitmaps
    (:mod:`pyhudi.spark.positions`), when it is planned a second time, and from then on a filter
    in the base files' scan replaces the join; the merged frame itself is then kept per set of base
    files read (``base_ids``) and of slices the predicate leaves, so a query of the same snapshot
    plans nothing again (:data:`MERGED_KEPT`).

    ``predicate`` (the query's filter) with ``base_ids`` (the file ids of the slices whose base
    files ``base`` reads: the others' base files were ruled out by their statistics) drops, where
    filters reach base files (:func:`filters_reach_base_files`), the slices none of whose log
    records can match either, by the column ranges of each slice's log records
    (:func:`log_record_ranges`, kept with the log side). A point lookup whose key no log holds then
    reads no log side at all. None: no slice can hold a matching row.
    """
    names = out_schema.fieldNames()

    def make() -> DataFrame:
        return _log_side(spark, storage, slices, base_sizes, file_schema, out_schema, spec, visibility)

    broadcast = log_bytes <= BROADCAST_LOG_BYTES
    if snapshot is None or not broadcast:
        return merged_records(base(), make(), names, spec, broadcast=broadcast)
    key = (id(spark), snapshot, file_schema, out_schema.json(), spec)
    kept = _kept_log_side(key, make)
    logs = kept.logs
    wanted: frozenset[str] | None = None
    if predicate is not None and filters_reach_base_files(spec):
        ranges = log_record_ranges(logs, out_schema, sorted(columns_of(predicate)), key=key)
        if ranges is not None:
            wanted = frozenset(s.file_id for s in slices if s.file_id in base_ids
                               or (s.file_id in ranges and may_match(predicate, ranges[s.file_id])))
            if not wanted:
                return None
            if len(wanted) == len({s.file_id for s in slices}):
                wanted = None
    merged_key = (base_ids, wanted)
    if merged_key in kept.merged:
        kept.merged.move_to_end(merged_key)
        return _fresh(kept.merged[merged_key])
    if wanted is not None:
        logs = logs.where(F.col(LOG_FILE_ID).isin(sorted(wanted)))
    base_df = base()
    replaced = None
    filtered = base_df is not None and filters_reach_base_files(spec)  # (where a filter may stand for the join)
    if filtered:
        assert base_df is not None
        replaced = _replaced_filter(kept, names, spec, files=sum(n is not None for n in base_sizes),
                                    file_name=FILE_ID if FILE_ID in base_df.columns else None)
    if replaced is not None:  # the log records alone are read from the log side: in few tasks
        logs = logs.coalesce(max(1, -(-log_bytes // LOG_BYTES_PER_TASK)))
    out = merged_records(base_df, logs, names, spec, replaced=replaced)
    kept.planned = True
    if filtered and not kept.replaced_known:
        return out  # (a joined frame the next plan of this snapshot replaces: not kept)
    kept.merged[merged_key] = out
    while len(kept.merged) > MERGED_KEPT:
        kept.merged.popitem(last=False)
    return _fresh(out)


def _fresh(df: DataFrame | None) -> DataFrame | None:
    """A new Python frame of a kept frame's plan: callers may change the object they get
    (:func:`pyhudi.spark.query.read` gives it a re-planning class), never the kept one."""
    return None if df is None else DataFrame(df._jdf, df.sparkSession)


#: Column types whose Spark min/max order is the order :mod:`pyhudi.read.skipping` compares in
_RANGED = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
           T.DecimalType, T.DateType)
_LOG_RANGES: OrderedDict[Hashable, dict[str, dict[str, ColumnRange]]] = OrderedDict()


def log_record_ranges(logs: DataFrame, out_schema: T.StructType, columns: list[str], *,
                      key: Hashable) -> dict[str, dict[str, ColumnRange]] | None:
    """Per file id, the ranges of ``columns`` over the slice's log records (deletes left out: they
    add no row); a slice without log records is absent. One aggregation over the log side the
    first time a snapshot is filtered on these columns, kept beside the log side after that. None
    when no column of the filter has a comparable type."""
    types = {f.name: f.dataType for f in out_schema.fields}
    cols = [c for c in columns if isinstance(types.get(c), _RANGED)]
    if not cols:
        return None
    found = _LOG_RANGES.get((key, tuple(cols)))
    if found is not None:
        return found
    aggs = []
    for c in cols:
        p = F.col(quoted(LOG_PREFIX + c))
        aggs += [F.min(p), F.max(p), F.count(p)]
    rows = logs.where(F.coalesce(F.col(LOG_RECORD), F.lit(False))).groupBy(LOG_FILE_ID) \
        .agg(F.count(F.lit(1)), *aggs).collect()
    out: dict[str, dict[str, ColumnRange]] = {}
    for r in rows:
        n = r[1]
        out[r[0]] = {c: ColumnRange(r[2 + 3 * i], r[3 + 3 * i], n - r[4 + 3 * i], n,
                                    floating=isinstance(types[c], (T.FloatType, T.DoubleType)))
                     for i, c in enumerate(cols)}
    _LOG_RANGES[(key, tuple(cols))] = out
    while len(_LOG_RANGES) > 4 * LOG_SIDES_KEPT:
        _LOG_RANGES.popitem(last=False)
    return out
