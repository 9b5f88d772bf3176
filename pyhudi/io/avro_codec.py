"""Avro binary datums of Hudi records, encoded and decoded column-wise.

MOR writers put every updated record into an AVRO_DATA log block as one schemaless Avro datum;
executors encode 30k-300k rows per write, so calling fastavro once per row would dominate the
write. For the field types Hudi tables mostly have -- (nullable) strings, bytes, ints/longs (incl.
date and timestamp), floats/doubles, booleans and fixed-size decimals -- this module computes the
Avro bytes of a whole column at once with numpy (union branch bytes, zig-zag varints, string
lengths, big-endian decimals) and stitches the columns into rows with one Arrow
``binary_join_element_wise``. Decoding mirrors that: all rows advance through the fields together,
string fields are cut out of the block with one Arrow ``take``.

Other field types (nested records, arrays, maps, enums, bytes decimals) are encoded and decoded by
fastavro one value at a time through a one-field wrapper record (a record's bytes are just its
fields' bytes in order), so one nested column does not slow the others down. Only schemas whose
fields share named types fall back to whole-record fastavro. All paths produce the same bytes as
fastavro's ``schemaless_writer`` (the tests prove it on random tables).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiCorruptFileError, HudiSchemaError, HudiUnsupportedError

_PRIMITIVES = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "bytes": pa.binary(),
}
_LOGICAL = {
    ("int", "date"): pa.date32(), ("int", "time-millis"): pa.time32("ms"),
    ("long", "time-micros"): pa.time64("us"),
    ("long", "timestamp-millis"): pa.timestamp("ms", tz="UTC"),
    ("long", "timestamp-micros"): pa.timestamp("us", tz="UTC"),
    ("long", "local-timestamp-millis"): pa.timestamp("ms"),
    ("long", "local-timestamp-micros"): pa.timestamp("us"),
}
_EMPTY = pa.scalar(b"", pa.large_binary())


def load_schema(avro_schema: str | dict) -> dict[str, Any]:
    """The schema as a dict (header SCHEMA values are JSON strings)."""
    schema = json.loads(avro_schema) if isinstance(avro_schema, str) else avro_schema
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise HudiSchemaError(f"expected an Avro record schema, got {str(avro_schema)[:200]}")
    return schema


# -- Avro -> Arrow schema ------------------------------------------------------------------
class _Names:
    """Named Avro types seen so far, so later fields may refer to them by (full) name."""

    def __init__(self) -> None:
        self.types: dict[str, Any] = {}

    def define(self, t: dict[str, Any], namespace: str) -> str:
        name = t["name"]
        ns = t.get("namespace", namespace) if "." not in name else name.rsplit(".", 1)[0]
        full = name if "." in name else (f"{ns}.{name}" if ns else name)
        self.types[full] = t
        self.types.setdefault(full.rsplit(".", 1)[-1], t)
        return ns or ""


def _split_union(t: list[Any]) -> tuple[Any, bool]:
    branches = [b for b in t if b != "null"]
    if len(branches) > 1:
        raise HudiUnsupportedError(f"Avro union {json.dumps(t)[:200]} has several non-null branches; "
                                   "Hudi table schemas only use [\"null\", T] unions")
    return (branches[0] if branches else "null"), len(branches) < len(t)


def _arrow_type(t: Any, names: _Names, namespace: str) -> tuple[pa.DataType, bool]:
    """Arrow type and nullability of one Avro type."""
    if isinstance(t, list):
        inner, nullable = _split_union(t)
        dtype, inner_nullable = _arrow_type(inner, names, namespace)
        return dtype, nullable or inner_nullable
    if isinstance(t, str):
        if t in _PRIMITIVES:
            return _PRIMITIVES[t], t == "null"
        if t not in names.types:
            raise HudiSchemaError(f"Avro schema refers to undefined type {t!r}")
        return _arrow_type(names.types[t], names, namespace)
    kind, logical = t.get("type"), t.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        if kind == "fixed":
            names.define(t, namespace)
        precision, scale = int(t["precision"]), int(t.get("scale", 0))
        return (pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)), False
    if isinstance(kind, str) and (kind, logical) in _LOGICAL:
        return _LOGICAL[(kind, logical)], False
    if kind in _PRIMITIVES or isinstance(kind, (list, dict)):
        return _arrow_type(kind, names, namespace)
    if kind == "record":
        ns = names.define(t, namespace)
        return pa.struct([_arrow_field(f, names, ns) for f in t["fields"]]), False
    if kind == "enum":
        names.define(t, namespace)
        return pa.string(), False
    if kind == "fixed":
        names.define(t, namespace)
        return pa.binary(int(t["size"])), False
    if kind == "array":
        item, item_null = _arrow_type(t["items"], names, namespace)
        return pa.list_(pa.field("element", item, nullable=item_null)), False
    if kind == "map":
        value, value_null = _arrow_type(t["values"], names, namespace)
        return pa.map_(pa.string(), pa.field("value", value, nullable=value_null)), False
    if isinstance(kind, str) and kind in names.types:
        return _arrow_type(kind, names, namespace)
    raise HudiUnsupportedError(f"Avro type {json.dumps(t)[:200]} has no Arrow mapping in pyhudi")


def _arrow_field(f: dict[str, Any], names: _Names, namespace: str) -> pa.Field:
    dtype, nullable = _arrow_type(f["type"], names, namespace)
    return pa.field(f["name"], dtype, nullable=nullable)


def avro_to_arrow_schema(avro_schema: str | dict) -> pa.Schema:
    """Arrow schema of an Avro record schema (inverse of :mod:`pyhudi.io.avro_schema`).

    ``["null", T]`` unions become nullable fields, logical types their Arrow counterparts
    (``timestamp-*`` UTC-zoned, ``local-timestamp-*`` zone-less), decimals (fixed or bytes)
    decimal128/256, enums strings; list items are named ``element`` like parquet files have them.
    """
    record = load_schema(avro_schema)
    names = _Names()
    ns = names.define(record, "")
    return pa.schema([_arrow_field(f, names, ns) for f in record["fields"]])


# -- flat record plans ---------------------------------------------------------------------
_WRAPPER = "pyhudi_single_field"


@dataclass(frozen=True)
class FlatField:
    """One field of a record as the column-wise codec handles it.

    ``kind`` is an Avro primitive (string, bytes, int, long, float, double, boolean), ``decimal``
    (fixed-size decimal, Spark's encoding) or ``avro``: any other type, encoded per row by fastavro
    through a one-field wrapper record (a record's bytes are its fields' bytes, concatenated).
    """

    name: str
    kind: str
    logical: str | None
    null_index: int  # union branch of null: 0 for ["null", T], 1 for [T, "null"], -1 if required/avro
    size: int = 0  # decimal: fixed size in bytes
    precision: int = 0
    scale: int = 0
    wrapper: Any = None  # avro: parsed {"type": "record", "fields": [{"name": "v", "type": T}]}


def _simple_field(name: str, t: Any) -> FlatField | None:
    null_index = -1
    if isinstance(t, list):
        if len(t) != 2 or "null" not in t:
            return None
        null_index = t.index("null")
        t = t[1 - null_index]
    if isinstance(t, dict):
        logical = t.get("logicalType")
        if logical == "decimal" and t.get("type") == "fixed" and int(t.get("precision", 99)) <= 38 \
                and 0 < int(t["size"]) <= 16:
            return FlatField(name, "decimal", logical, null_index, size=int(t["size"]),
                             precision=int(t["precision"]), scale=int(t.get("scale", 0)))
        if logical is not None and (t.get("type"), logical) not in _LOGICAL and logical != "uuid":
            return None
        if t.get("type") in ("string", "bytes", "int", "long", "float", "double", "boolean"):
            return FlatField(name, t["type"], logical, null_index)
        return None
    if t in ("string", "bytes", "int", "long", "float", "double", "boolean"):
        return FlatField(name, t, None, null_index)
    return None


def flat_plan(record: dict[str, Any], *, mixed: bool = True) -> list[FlatField] | None:
    """How to encode each field of ``record`` column-wise; None if only whole-record fastavro will do.

    Without ``mixed`` only records of primitives and fixed decimals get a plan. With it, other
    fields become per-row fastavro fields, unless a field refers to a named type defined in
    another field (the one-field wrapper could not resolve it).
    """
    plan = []
    for f in record["fields"]:
        simple = _simple_field(f["name"], f["type"])
        if simple is None:
            if not mixed:
                return None
            try:
                wrapper = fastavro.parse_schema(
                    {"type": "record", "name": _WRAPPER, "fields": [{"name": "v", "type": f["type"]}]})
            except Exception:  # fastavro raises several types for unresolvable names
                return None
            simple = FlatField(f["name"], "avro", None, -1, wrapper=wrapper)
        plan.append(simple)
    return plan


# -- vectorized encoding -------------------------------------------------------------------
def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def _varint(z: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Varint bytes of unsigned values as an (n, width) matrix plus the bytes used per row."""
    used = np.ones(len(z), dtype=np.int64)
    for k in range(1, width):
        used += z >= np.uint64(1 << (7 * k))
    mat = np.empty((len(z), width), dtype=np.uint8)
    for k in range(width):
        more = (used > k + 1).astype(np.uint8) << 7
        mat[:, k] = ((z >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8) | more
    return mat, used


def _column(table: pa.Table, f: FlatField) -> tuple[pa.Array, np.ndarray]:
    """The column of ``f`` as one Arrow array of the Avro physical type, plus its validity."""
    n = table.num_rows
    if f.name not in table.column_names:
        if f.null_index < 0:
            raise HudiSchemaError(f"column {f.name} is required by the Avro schema but missing")
        return pa.nulls(n, pa.null()), np.zeros(n, dtype=bool)
    col = table.column(f.name).combine_chunks()
    if isinstance(col, pa.ChunkedArray):  # pyarrow < 15 with no chunks
        col = pa.concat_arrays(col.chunks) if col.num_chunks else pa.nulls(0, col.type)
    dtype = col.type
    if f.kind == "long" and pa.types.is_timestamp(dtype):
        unit = "ms" if f.logical and f.logical.endswith("millis") else "us"
        col = col.cast(pa.timestamp(unit, tz=dtype.tz), safe=False).cast(pa.int64())
    elif f.kind == "int" and (pa.types.is_date(dtype) or pa.types.is_time(dtype)):
        col = col.cast(pa.time32("ms") if pa.types.is_time(dtype) else pa.date32()).cast(pa.int32())
    elif f.kind == "long" and pa.types.is_time(dtype):
        col = col.cast(pa.time64("us")).cast(pa.int64())
    else:
        target = {"string": pa.large_binary(), "bytes": pa.large_binary(), "int": pa.int32(),
                  "long": pa.int64(), "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(),
                  "decimal": pa.decimal128(max(f.precision, 1), f.scale)}[f.kind]
        col = col.cast(target)
    valid = np.ones(n, dtype=bool) if col.null_count == 0 else col.is_valid().to_numpy(zero_copy_only=False)
    if f.null_index < 0 and not valid.all():
        raise HudiSchemaError(f"column {f.name} has nulls but the Avro schema makes it required")
    return col, valid


def _encode_avro_field(table: pa.Table, f: FlatField) -> pa.Array:
    """Per-row fastavro bytes of a field the vectorized code does not cover (nested, maps...)."""
    field_type = f.wrapper["fields"][0]["type"]
    if f.name in table.column_names:
        values = table.column(f.name).to_pylist()
    else:
        values = [None] * table.num_rows
    buf = io.BytesIO()
    out = []
    names: dict[str, Any] = {}
    for value in values:
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, f.wrapper, {"v": _python_value(field_type, value, names)})
        out.append(buf.getvalue())
    return pa.array(out, pa.large_binary())


def _encode_field(table: pa.Table, f: FlatField) -> tuple[list[tuple[np.ndarray, np.ndarray]], pa.Array | None]:
    """(byte matrix, bytes used per row) parts of one field over all rows, plus its variable tail."""
    if f.kind == "avro":
        return [], _encode_avro_field(table, f)
    col, valid = _column(table, f)
    n = table.num_rows
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    if f.null_index >= 0:
        branch = np.where(valid, 2 * (1 - f.null_index), 2 * f.null_index).astype(np.uint8)
        parts.append((branch.reshape(n, 1), np.ones(n, dtype=np.int64)))
    tail = None
    if f.kind in ("string", "bytes"):
        if pa.types.is_null(col.type):
            col = pa.nulls(n, pa.large_binary())
        lengths = pc.fill_null(pc.binary_length(col), 0).to_numpy(zero_copy_only=False)
        mat, used = _varint(_zigzag(lengths), 5)
        parts.append((mat, np.where(valid, used, 0)))
        tail = pc.fill_null(col, _EMPTY)
    elif f.kind in ("int", "long"):
        values = np.zeros(n, np.int64) if pa.types.is_null(col.type) else \
            col.fill_null(0).to_numpy(zero_copy_only=False)
        mat, used = _varint(_zigzag(values), 5 if f.kind == "int" else 10)
        parts.append((mat, np.where(valid, used, 0)))
    elif f.kind == "decimal":
        # decimal128 is 16 little-endian two's-complement bytes; Avro wants the low `size` big-endian
        if pa.types.is_null(col.type):
            raw = np.zeros((n, 16), dtype=np.uint8)
        else:
            raw = np.frombuffer(col.buffers()[1], dtype=np.uint8, count=16 * n, offset=16 * col.offset).reshape(n, 16)
        parts.append((np.ascontiguousarray(raw[:, f.size - 1::-1]), np.where(valid, f.size, 0)))
    else:
        np_type, size = {"float": ("<f4", 4), "double": ("<f8", 8), "boolean": ("u1", 1)}[f.kind]
        if pa.types.is_null(col.type):
            values = np.zeros(n, dtype=np_type)
        else:
            values = col.fill_null(False if f.kind == "boolean" else 0).to_numpy(zero_copy_only=False)
        mat = np.ascontiguousarray(values.astype(np_type)).view(np.uint8).reshape(n, size)
        parts.append((mat, np.where(valid, size, 0)))
    return parts, tail


def _pack(parts: list[tuple[np.ndarray, np.ndarray]]) -> pa.Array:
    """Rows of the used bytes of each part's matrix, concatenated, as one large_binary array."""
    n = len(parts[0][0])
    mat = np.concatenate([m for m, _ in parts], axis=1) if len(parts) > 1 else parts[0][0]
    masks = [np.arange(m.shape[1]) < used[:, None] for m, used in parts]
    data = mat[np.concatenate(masks, axis=1) if len(masks) > 1 else masks[0]]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sum(used for _, used in parts), out=offsets[1:])
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def encode_flat(table: pa.Table, plan: list[FlatField], *, length_prefix: bool) -> bytes:
    """Concatenated datums of all rows (each preceded by ``int32`` big-endian length if asked)."""
    if table.num_rows == 0:
        return b""
    joined = encode_rows(table, plan, length_prefix=length_prefix)
    if joined is None:
        return b""
    n = table.num_rows
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64, count=n + 1, offset=joined.offset * 8)
    start, end = int(offsets[0]), int(offsets[-1])
    return joined.buffers()[2].slice(start, end - start).to_pybytes()


def encode_rows(table: pa.Table, plan: list[FlatField], *, length_prefix: bool = False) -> pa.Array | None:
    """The datum of each row as one ``large_binary`` array (None for a plan without fields), for
    callers that embed records in larger ones (change data blocks nest table records)."""
    n = table.num_rows
    if n == 0:
        return pa.array([], pa.large_binary()) if plan else None
    # segments alternate: fixed-width matrix bytes, then a variable tail (string/bytes values)
    segments: list[tuple[list[tuple[np.ndarray, np.ndarray]], pa.Array | None]] = [([], None)]
    for f in plan:
        parts, tail = _encode_field(table, f)
        segments[-1][0].extend(parts)
        if tail is not None:
            segments[-1] = (segments[-1][0], tail)
            segments.append(([], None))
    if length_prefix:
        total = np.zeros(n, dtype=np.int64)
        for parts, tail in segments:
            for _, used in parts:
                total += used
            if tail is not None:
                total += pc.binary_length(tail).to_numpy(zero_copy_only=False)
        prefix = np.asarray(total, dtype=">i4").reshape(n, 1).view(np.uint8).reshape(n, 4)
        segments[0][0].insert(0, (prefix, np.full(n, 4, dtype=np.int64)))
    pieces: list[pa.Array] = []
    for parts, tail in segments:
        if parts:
            pieces.append(_pack(parts))
        if tail is not None:
            pieces.append(tail)
    if not pieces:
        return None
    return pieces[0] if len(pieces) == 1 else pc.binary_join_element_wise(*pieces, _EMPTY)


def _python_value(t: Any, value: Any, names: dict[str, Any]) -> Any:
    """Adapt a ``to_pylist`` value to what fastavro expects (maps as dicts, recursively)."""
    if value is None:
        return None
    if isinstance(t, list):
        inner = [b for b in t if b != "null"]
        return _python_value(inner[0], value, names) if len(inner) == 1 else value
    if isinstance(t, str):
        return _python_value(names[t], value, names) if t in names else value
    kind = t.get("type")
    if kind in ("record",):
        names[t["name"]] = t
        return {f["name"]: _python_value(f["type"], value.get(f["name"]), names) for f in t["fields"]}
    if kind == "array":
        return [_python_value(t["items"], v, names) for v in value]
    if kind == "map":
        items = value.items() if isinstance(value, dict) else value
        return {k: _python_value(t["values"], v, names) for k, v in items}
    if isinstance(kind, (list, dict)):
        return _python_value(kind, value, names)
    return value


def encode_fastavro(table: pa.Table, record: dict[str, Any], *, length_prefix: bool) -> bytes:
    """The same bytes as :func:`encode_flat`, through fastavro one record at a time (any shape)."""
    parsed = fastavro.parse_schema(record)
    names: dict[str, Any] = {}
    out = io.BytesIO()
    buf = io.BytesIO()
    for row in table.to_pylist():
        datum = {f["name"]: _python_value(f["type"], row.get(f["name"]), names) for f in record["fields"]}
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, parsed, datum)
        if length_prefix:
            out.write(len(buf.getbuffer()).to_bytes(4, "big"))
        out.write(buf.getbuffer())
    return out.getvalue()


def encode_datums(table: pa.Table, avro_schema: str | dict, *, length_prefix: bool = True) -> bytes:
    """Avro datums of every row of ``table`` under the record schema, vectorized when flat."""
    record = load_schema(avro_schema)
    plan = flat_plan(record)
    if plan is not None:
        return encode_flat(table, plan, length_prefix=length_prefix)
    return encode_fastavro(table, record, length_prefix=length_prefix)


# -- decoding ------------------------------------------------------------------------------
class _Malformed(Exception):
    """Datum bytes that do not match the writer schema (turned into HudiCorruptFileError)."""


def _read_varint(buf: np.ndarray, pos: np.ndarray, active: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints at ``pos`` where ``active``: (signed values, bytes consumed per row)."""
    last = len(buf) - 1
    z = np.zeros(len(pos), dtype=np.uint64)
    used = np.zeros(len(pos), dtype=np.int64)
    alive = active.copy()
    for k in range(width):
        raw = buf[np.minimum(pos + k, last)] if k else buf[np.minimum(pos, last)]
        z |= np.where(alive, (raw & 0x7F).astype(np.uint64) << np.uint64(7 * k), np.uint64(0))
        used += alive
        alive &= raw >= 0x80
        if not alive.any():
            break
    else:
        raise _Malformed("varint longer than its type allows")
    values = (z >> np.uint64(1)).view(np.int64) ^ -(z & np.uint64(1)).view(np.int64)
    return values, used


def _validity(valid: np.ndarray) -> pa.Buffer | None:
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def _decode_avro_field(data: bytes, pos: np.ndarray, ends: np.ndarray, f: FlatField,
                       target: pa.DataType) -> pa.Array:
    """Decode one field per row with fastavro, advancing ``pos`` in place."""
    view = memoryview(data)
    values = []
    starts = pos.tolist()
    for i, (start, end) in enumerate(zip(starts, ends.tolist())):
        stream = io.BytesIO(view[start:end])
        wrapped = fastavro.schemaless_reader(stream, f.wrapper, None)
        values.append(wrapped["v"] if isinstance(wrapped, dict) else None)
        starts[i] = start + stream.tell()
    pos[:] = starts
    return pa.array(values, type=target)


def decode_flat(data: bytes, starts: np.ndarray, ends: np.ndarray, plan: list[FlatField],
                schema: pa.Schema) -> pa.Table:
    """Decode the datums ``data[starts[i]:ends[i]]`` of a flat record, all rows at once."""
    pos = starts.astype(np.int64).copy()
    columns = decode_fields(data, pos, ends, plan, schema)
    if (pos != ends).any():
        raise _Malformed("records have bytes left after the last field")
    return pa.Table.from_arrays(columns, schema=schema)


def decode_fields(data: bytes, pos: np.ndarray, ends: np.ndarray, plan: list[FlatField],
                  schema: pa.Schema) -> list[pa.Array]:
    """The columns of ``plan``'s fields read from ``data`` at ``pos`` (one position per row, moved
    past the fields in place; ``ends`` bound each row), for records nested in others."""
    n = len(pos)
    buf = np.frombuffer(data, dtype=np.uint8)
    if len(buf) == 0:
        buf = np.zeros(1, dtype=np.uint8)
    blob = pa.py_buffer(data)
    even = pa.array(np.arange(0, 2 * n, 2))  # picks the field values out of (value, gap) spans
    columns = []
    for f in plan:
        valid = np.ones(n, dtype=bool)
        if f.null_index >= 0:
            branch = buf[np.minimum(pos, len(buf) - 1)]
            if ((branch != 0) & (branch != 2)).any():
                raise _Malformed(f"bad union branch in field {f.name}")
            valid = branch == 2 * (1 - f.null_index)
            pos += 1
        mask = _validity(valid)
        if f.kind in ("string", "bytes"):
            lengths, used = _read_varint(buf, pos, valid, 5)
            pos += used
            if (lengths < 0).any():
                raise _Malformed(f"negative length in field {f.name}")
            offsets = np.empty(2 * n + 1, dtype=np.int64)
            offsets[0:2 * n:2] = pos
            pos += lengths
            offsets[1::2] = pos
            offsets[2 * n] = pos[-1] if n else 0
            if (pos > ends).any():
                raise _Malformed(f"field {f.name} runs past its record")
            spans = pa.Array.from_buffers(pa.large_binary(), 2 * n, [None, pa.py_buffer(offsets), blob])
            taken = spans.take(even)
            if f.kind == "string":
                taken = taken.cast(pa.large_string())
            arr = taken.cast(pa.string() if f.kind == "string" else pa.binary())
            arr = pa.Array.from_buffers(arr.type, n, [mask, *arr.buffers()[1:]])
        elif f.kind == "avro":
            arr = _decode_avro_field(data, pos, ends, f, schema.field(f.name).type)
        elif f.kind == "decimal":
            idx = np.minimum(pos[:, None] + np.arange(f.size), len(buf) - 1)
            raw = buf[idx]
            full = np.empty((n, 16), dtype=np.uint8)
            full[:, :f.size] = raw[:, ::-1]
            full[:, f.size:] = np.where(raw[:, 0] >= 0x80, 0xFF, 0).astype(np.uint8)[:, None]
            pos += np.where(valid, f.size, 0)
            arr = pa.Array.from_buffers(pa.decimal128(f.precision, f.scale), n, [mask, pa.py_buffer(full)])
        elif f.kind in ("int", "long"):
            values, used = _read_varint(buf, pos, valid, 5 if f.kind == "int" else 10)
            pos += used
            arr = pa.Array.from_buffers(pa.int64(), n, [mask, pa.py_buffer(values)])
            if f.kind == "int":
                arr = arr.cast(pa.int32())
        else:
            np_type, size = {"float": ("<f4", 4), "double": ("<f8", 8), "boolean": ("u1", 1)}[f.kind]
            idx = np.minimum(pos[:, None] + np.arange(size), len(buf) - 1)
            raw = np.ascontiguousarray(buf[idx]).view(np_type).reshape(n)
            pos += np.where(valid, size, 0)
            if f.kind == "boolean":
                bits = pa.py_buffer(np.packbits(raw != 0, bitorder="little"))
                arr = pa.Array.from_buffers(pa.bool_(), n, [mask, bits])
            else:
                arr = pa.Array.from_buffers(pa.from_numpy_dtype(raw.dtype.newbyteorder("=")), n,
                                            [mask, pa.py_buffer(np.ascontiguousarray(raw))])
        if (pos > ends).any():
            raise _Malformed(f"field {f.name} runs past its record")
        target = schema.field(f.name).type
        columns.append(arr if arr.type == target else arr.cast(target))
    return columns


def decode_datums(data: bytes, starts: np.ndarray, ends: np.ndarray, avro_schema: str | dict,
                  *, source: str) -> pa.Table:
    """Records ``data[starts[i]:ends[i]]`` written with ``avro_schema``, as an Arrow table."""
    record = load_schema(avro_schema)
    schema = avro_to_arrow_schema(record)
    plan = flat_plan(record)
    try:
        if plan is not None:
            return decode_flat(data, starts, ends, plan, schema)
        parsed = fastavro.parse_schema(record)
        rows = []
        view = memoryview(data)
        for start, end in zip(starts.tolist(), ends.tolist()):
            stream = io.BytesIO(view[start:end])
            rows.append(fastavro.schemaless_reader(stream, parsed, None))
            if stream.tell() != end - start:
                raise _Malformed("record has bytes left after the last field")
        return pa.Table.from_pylist(rows, schema=schema)
    except (_Malformed, EOFError, ValueError, LookupError, OverflowError, UnicodeDecodeError, pa.ArrowException) as e:
        raise HudiCorruptFileError(
            f"{source}: Avro records do not decode with the block's schema ({e}); the file is damaged "
            "or was written with a different schema; restore it from a backup or roll back its instant") from e
