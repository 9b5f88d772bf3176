"""Executing one split of a CDC query: the change rows of one file group at one instant.

A CDC query (``hoodie.datasource.query.incremental.format=cdc``) answers, for a range of instants,
one row per change: ``op`` ('i', 'u' or 'd'), ``ts_ms`` (the instant time of the commit that made
the change, as a string), ``before`` and ``after`` (the record before and after it, as JSON
strings; null for an insert's before and a delete's after). Columns and order are Hudi's
``CDCRelation.FULL_CDC_SPARK_SCHEMA``.

The planner (:mod:`pyhudi.table.cdc`) cuts the range into :class:`CDCSplit` s, one per (instant,
file group), each with the inference case Hudi's ``HoodieCDCExtractor.parseWriteStat`` gives it
(``HoodieCDCInferenceCase``) and the files it needs. This module turns a split into rows, as Hudi's
``CDCFileGroupIterator.loadCdcFile`` / ``loadNext`` do per case:

- ``AS_IS``: the split's ``.cdc`` files (``CDC_DATA_BLOCK`` s, Avro records of the schema
  ``HoodieCDCUtils.schemaBySupplementalLoggingMode`` makes): ``data_before_after`` holds op,
  ts_ms, before and after; ``data_before`` op, record_key and before, the after image coming from
  the slice the commit wrote; ``op_key_only`` op and record_key, both images from the slices.
  ``ts_ms`` is the split's instant whatever the block holds (``resetRecordFormat``).
- ``BASE_FILE_INSERT``: every record of the new base file, 'i'.
- ``BASE_FILE_DELETE`` and ``REPLACE_COMMIT``: every record of the slice before the instant, 'd'.
- ``LOG_FILE``: the slice before the instant against the slice with the instant's log blocks: a key
  only after is 'i', in both and rewritten by the instant is 'u', only before is 'd' (Hudi applies the
  log records to the before image one by one; a record the merge leaves unchanged yields nothing).
  The after image is the merged slice's record, so a change is what a snapshot shows: a log record
  that loses to an earlier log record of its slice by ordering value (the log scanner's precombine)
  is no change here, where Hudi's ``loadNextLogRecord`` merges it into the before image with
  ``combineAndGetUpdateValue`` and reports an update the table never holds.
- ``BASE_FILE_UPDATE`` (pyhudi's): a new version of a base file written without CDC logging, which
  Hudi refuses ("There should be a cdc log file."): the same comparison as ``LOG_FILE`` between the
  slice before and the new base file. A carried-over record keeps its ``_hoodie_commit_time``, so
  only the records the instant wrote count as changed.

JSON. Images read from file slices are rendered as Hudi's ``InternalRowToJsonStringConverter``
does (Jackson over every column of the table schema, meta columns included, nulls kept, compact:
``{"a":1,"b":"x"}``); images taken from a CDC file as Avro's ``GenericData.toString`` renders them
(``HoodieCDCUtils.recordToJson``: the table columns without the meta columns, ``{"a": 1, "b": "x"}``).
Dates are days since the epoch and timestamps microseconds, as both of Hudi's renderings give
them. Columns are rendered column-wise with pyarrow; only nested, binary or control-character
values fall back to Python's ``json`` per value.
"""

from __future__ import annotations

import base64
import enum
import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiCorruptFileError, HudiError
from pyhudi.io.avro_schema import COMMIT_TIME, RECORD_KEY
from pyhudi.io.cdc import cdc_records
from pyhudi.io.log_format import BlockType, read_blocks
from pyhudi.read.merge import MergeSpec, SliceToRead, Visibility, read_slice
from pyhudi.storage import Storage

#: Hudi's CDC columns (``HoodieCDCUtils.CDC_COLUMNS``), all strings
CDC_COLUMNS = ("op", "ts_ms", "before", "after")
CDC_SCHEMA = pa.schema([(name, pa.string()) for name in CDC_COLUMNS])
CDC_DDL = "op string, ts_ms string, before string, after string"

INSERT, UPDATE, DELETE = "i", "u", "d"  # HoodieCDCOperation


class InferenceCase(str, enum.Enum):
    """How a split's changes are found (Hudi's ``HoodieCDCInferenceCase``, plus one of pyhudi's)."""

    AS_IS = "AS_IS"
    BASE_FILE_INSERT = "BASE_FILE_INSERT"
    BASE_FILE_DELETE = "BASE_FILE_DELETE"
    LOG_FILE = "LOG_FILE"
    REPLACE_COMMIT = "REPLACE_COMMIT"
    #: pyhudi: a rewritten base file without a CDC file, compared with the slice before it
    BASE_FILE_UPDATE = "BASE_FILE_UPDATE"


@dataclass(frozen=True)
class CDCSplit:
    """The changes of one file group at one instant (Hudi's ``HoodieCDCFileSplit``).

    ``cdc_files``: the ``.cdc`` files (AS_IS) or the data file the instant wrote (BASE_FILE_INSERT,
    LOG_FILE, BASE_FILE_UPDATE), relative to the table. ``before``: the slice whose state just
    before ``instant`` holds the before images; ``after``: the slice whose state as of ``instant``
    holds the after images.
    """

    instant: str
    case: InferenceCase
    partition_path: str
    file_id: str
    cdc_files: tuple[str, ...] = ()
    before: SliceToRead | None = None
    after: SliceToRead | None = None


@dataclass(frozen=True)
class CDCContext:
    """What every split of one query shares: the table schema (Arrow IPC, meta columns first), how
    records merge, and which instants' log blocks are committed."""

    schema_ipc: bytes
    spec: MergeSpec
    committed: frozenset[str]
    archived_before: str | None

    @property
    def schema(self) -> pa.Schema:
        return pa.ipc.read_schema(pa.py_buffer(self.schema_ipc))

    def visibility(self, *, as_of: str | None = None, before: str | None = None) -> Visibility:
        return Visibility(self.committed, self.archived_before, as_of=as_of, before=before)


# -- JSON ----------------------------------------------------------------------------------------
_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))


def _json_strings(values: pa.Array) -> pa.Array:
    """JSON string literals of a string column (null stays null)."""
    text = values.cast(pa.string())
    for raw, escaped in _ESCAPES:
        text = pc.replace_substring(text, raw, escaped)
    out = pc.binary_join_element_wise(pa.scalar('"'), text, pa.scalar('"'), "")
    odd = pc.fill_null(pc.match_substring_regex(text, "[\\x00-\\x1f]"), False)
    if pc.any(odd).as_py():  # other control characters: rare, so escaped by json per value
        exact = pa.array([None if v is None else json.dumps(v) for v in values.cast(pa.string()).to_pylist()],
                         pa.string())
        out = pc.if_else(odd, exact, out)
    return out


def _python_json(value: Any) -> Any:
    """A nested value as JSON-ready Python: bytes as base64 (Jackson's byte arrays), maps as objects."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: _python_json(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):  # a map's (key, value) pairs
            return {str(k): _python_json(v) for k, v in value}
        return [_python_json(v) for v in value]
    return value


def _json_values(values: pa.Array, *, spaced: bool) -> pa.Array:
    """JSON text of each value of a column (null for nulls)."""
    t = values.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _json_strings(values)
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_decimal(t):
        return values.cast(pa.string())
    if pa.types.is_floating(t):  # NaN and infinities as Jackson writes them
        text = values.cast(pa.float64()).cast(pa.string())
        return pc.replace_substring_regex(pc.replace_substring_regex(text, "^nan$", "NaN"), "inf$", "Infinity")
    if pa.types.is_date(t):
        return values.cast(pa.date32()).cast(pa.int32()).cast(pa.string())
    if pa.types.is_timestamp(t):
        return values.cast(pa.timestamp("us", t.tz)).cast(pa.int64()).cast(pa.string())
    seps = (", ", ": ") if spaced else (",", ":")
    # nested, binary and other rare types, value by value
    return pa.array([None if v is None else json.dumps(_python_json(v), separators=seps, default=str)
                     for v in values.to_pylist()], pa.string())


def records_json(table: pa.Table, *, spaced: bool) -> pa.Array:
    """Each row of ``table`` as a JSON object of all its columns, in column order.

    ``spaced``: Avro's ``GenericData.toString`` layout (``{"a": 1}``, images from CDC files);
    else Jackson's compact one (``{"a":1}``, images read from file slices)."""
    n = table.num_rows
    if n == 0:
        return pa.array([], pa.string())
    if not table.num_columns:
        return pa.array(["{}"] * n, pa.string())
    colon, comma = (": ", ", ") if spaced else (":", ",")
    parts: list[Any] = []
    for i, name in enumerate(table.column_names):
        column = table.column(i).combine_chunks()
        value = pc.fill_null(_json_values(column, spaced=spaced), "null")
        prefix = ("{" if i == 0 else comma) + json.dumps(name) + colon
        parts += [pa.scalar(prefix), value]
    parts.append(pa.scalar("}"))
    return pc.binary_join_element_wise(*parts, "")


def _struct_json(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The JSON of a struct column (an image of a CDC file), null where the struct is null."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(array) == 0:
        return pa.array([], pa.string())
    if not pa.types.is_struct(array.type):
        raise HudiCorruptFileError(f"a CDC image column is {array.type}, not a record")
    fields = pa.Table.from_arrays(array.flatten(), names=[f.name for f in array.type])
    text = records_json(fields, spaced=True)
    return pc.if_else(array.is_valid(), text, pa.nulls(len(array), pa.string()))


# -- the rows of a split ---------------------------------------------------------------------------
def _state(storage: Storage, piece: SliceToRead | None, ctx: CDCContext, schema: pa.Schema, *,
           as_of: str | None = None, before: str | None = None) -> pa.Table:
    """The merged records of a slice as of an instant (inclusive) or just before one."""
    if piece is None:
        return schema.empty_table()
    rows, _counts, _scan = read_slice(storage, piece, schema, ctx.spec, ctx.visibility(as_of=as_of, before=before))
    return rows


def _rows(op: pa.Array | str, instant: str, before: pa.Array | None, after: pa.Array | None, n: int) -> pa.Table:
    nulls = pa.nulls(n, pa.string())
    ops = pa.repeat(pa.scalar(op, pa.string()), n) if isinstance(op, str) else op
    return pa.Table.from_arrays([ops, pa.repeat(pa.scalar(instant, pa.string()), n),
                                 nulls if before is None else before, nulls if after is None else after],
                                schema=CDC_SCHEMA)


def _keys(table: pa.Table) -> pa.Array:
    return table.column(RECORD_KEY).combine_chunks().cast(pa.string())


def compare_states(before: pa.Table, after: pa.Table, instant: str) -> pa.Table:
    """The changes from ``before`` to ``after`` (one file group, all columns): 'i' for keys only
    after, 'u' for keys in both whose after record the instant wrote, 'd' for keys only before."""
    old_keys, new_keys = _keys(before), _keys(after)
    written = pc.fill_null(pc.equal(after.column(COMMIT_TIME).combine_chunks().cast(pa.string()), instant), False)
    at_old = pc.index_in(new_keys, value_set=old_keys)
    inserted = pc.and_(written, pc.is_null(at_old))
    updated = pc.and_(written, pc.is_valid(at_old))
    deleted = pc.invert(pc.is_in(old_keys, value_set=new_keys))
    parts = []
    ins = after.filter(inserted)
    if ins.num_rows:
        parts.append(_rows(INSERT, instant, None, records_json(ins, spaced=False), ins.num_rows))
    upd = after.filter(updated)
    if upd.num_rows:
        old = before.take(at_old.filter(updated))
        parts.append(_rows(UPDATE, instant, records_json(old, spaced=False), records_json(upd, spaced=False),
                           upd.num_rows))
    gone = before.filter(deleted)
    if gone.num_rows:
        parts.append(_rows(DELETE, instant, records_json(gone, spaced=False), None, gone.num_rows))
    return pa.concat_tables(parts) if parts else CDC_SCHEMA.empty_table()


def _cdc_records(storage: Storage, split: CDCSplit) -> pa.Table:
    """The records of the split's CDC files (every visible CDC_DATA_BLOCK), in file and block order."""
    tables = []
    for path in split.cdc_files:
        source = storage.full(path)
        for block in read_blocks(storage.read_bytes(path), source=source):
            if block.block_type == BlockType.CDC_DATA_BLOCK:
                tables.append(cdc_records(block, source=source)[1])  # column-wise, images and all
            elif block.block_type != BlockType.CORRUPT_BLOCK:
                raise HudiCorruptFileError(f"{source} holds a {block.block_type.name} block; a .cdc file holds "
                                           "CDC_DATA_BLOCKs only")
    if not tables:
        return pa.table({"op": pa.array([], pa.string())})
    return pa.concat_tables(tables, promote_options="default")


def _lookup(state: pa.Table, keys: pa.Array) -> tuple[pa.Array, pa.Array]:
    """JSON of the rows of ``state`` holding ``keys`` (null where none does), and where it was found."""
    at = pc.index_in(keys, value_set=_keys(state))
    found = state.take(pc.fill_null(at, 0)) if state.num_rows else None
    if found is None:
        return pa.nulls(len(keys), pa.string()), at
    text = records_json(found, spaced=False)
    return pc.if_else(at.is_valid(), text, pa.nulls(len(keys), pa.string())), at


def _as_is(storage: Storage, split: CDCSplit, ctx: CDCContext, schema: pa.Schema) -> pa.Table:
    records = _cdc_records(storage, split)
    n = records.num_rows
    if n == 0:
        return CDC_SCHEMA.empty_table()
    names = set(records.column_names)
    ops = records.column("op").combine_chunks().cast(pa.string())
    if {"before", "after"} <= names:  # data_before_after: all from the CDC file
        return _rows(ops, split.instant, _struct_json(records.column("before")),
                     _struct_json(records.column("after")), n)
    if "record_key" not in names:
        raise HudiCorruptFileError(f"the CDC records of {', '.join(split.cdc_files)} have columns "
                                   f"{sorted(names)}: neither Hudi's data_before_after, data_before nor op_key_only")
    keys = records.column("record_key").combine_chunks().cast(pa.string())
    after_state = _state(storage, split.after, ctx, schema, as_of=split.instant)
    after, at = _lookup(after_state, keys)
    keeps_after = pc.is_in(ops, value_set=pa.array([INSERT, UPDATE]))
    missing = pc.and_(keeps_after, pc.is_null(at))
    if pc.any(missing).as_py():
        raise HudiError(f"CDC file {split.cdc_files[0]} of instant {split.instant} names record "
                        f"{keys.filter(missing)[0]} as written, but file group {split.file_id} does not hold it then")
    after = pc.if_else(keeps_after, after, pa.nulls(n, pa.string()))
    if "before" in names:  # data_before
        before = _struct_json(records.column("before"))
    else:  # op_key_only: the before image from the slice before the instant
        before_state = _state(storage, split.before, ctx, schema, before=split.instant)
        found, _ = _lookup(before_state, keys)
        before = pc.if_else(pc.equal(ops, INSERT), pa.nulls(n, pa.string()), found)
    return _rows(ops, split.instant, before, after, n)


def split_changes(storage: Storage, split: CDCSplit, ctx: CDCContext, *, schema: pa.Schema | None = None) -> pa.Table:
    """The change rows of one split (:data:`CDC_SCHEMA`)."""
    schema = schema if schema is not None else ctx.schema
    case = InferenceCase(split.case)
    if case == InferenceCase.AS_IS:
        return _as_is(storage, split, ctx, schema)
    if case == InferenceCase.BASE_FILE_INSERT:
        piece = SliceToRead(split.partition_path, split.file_id, split.cdc_files[0], ())
        rows = _state(storage, piece, ctx, schema, as_of=split.instant)
        return _rows(INSERT, split.instant, None, records_json(rows, spaced=False), rows.num_rows)
    if case in (InferenceCase.BASE_FILE_DELETE, InferenceCase.REPLACE_COMMIT):
        rows = _state(storage, split.before, ctx, schema, before=split.instant)
        return _rows(DELETE, split.instant, records_json(rows, spaced=False), None, rows.num_rows)
    old = _state(storage, split.before, ctx, schema, before=split.instant)
    new = _state(storage, split.after, ctx, schema, as_of=split.instant)
    return compare_states(old, new, split.instant)
