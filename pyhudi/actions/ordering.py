"""The row order a clustering writes: linear sort or a space-filling curve (z-order, Hilbert) over the
sort columns.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.io.avro_schema import RECORD_KEY


# -- ordering ------------------------------------------------------------------------------------
def ordering(rows: pa.Table, columns: tuple[str, ...], strategy: str) -> np.ndarray:
    """Row order of ``rows``: by ``columns`` (record key without them), linear or along a curve.
    A column may name a nested field (``a.b``), as Hudi's sort columns may."""
    if not columns:
        return np.asarray(pc.sort_indices(rows, sort_keys=[(RECORD_KEY, "ascending")]))
    keys = sort_key_columns(rows, columns)
    if not on_curve(columns, strategy):
        table = pa.table({**{f"k{i}": k for i, k in enumerate(keys)}, RECORD_KEY: rows.column(RECORD_KEY)})
        order = [(f"k{i}", "ascending", "at_start") for i in range(len(keys))] + [(RECORD_KEY, "ascending", "at_end")]
        return np.asarray(pc.sort_indices(table, sort_keys=order))
    bits = curve_bits(len(columns))
    coords = np.stack([_scaled_rank(k, bits) for k in keys])
    index = curve_index(coords, bits, strategy)
    return np.lexsort((np.asarray(pc.sort_indices(rows, sort_keys=[(RECORD_KEY, "ascending")])).argsort(), index))


def on_curve(columns: tuple[str, ...], strategy: str) -> bool:
    """Whether records are ordered along a curve (Z-order, Hilbert) rather than linearly: a curve
    needs two columns or more."""
    return strategy != "linear" and len(columns) > 1


def curve_bits(dimensions: int) -> int:
    """Bits per coordinate of a curve over ``dimensions`` columns: the index fits 63 bits (a long)."""
    return max(1, min(21, 63 // dimensions))


def curve_index(coords: np.ndarray, bits: int, strategy: str) -> np.ndarray:
    """Position of each point (``coords``: dimensions x points, ``bits`` each) along the curve."""
    return z_order(coords, bits) if strategy == "z-order" else hilbert(coords, bits)


def scaled_ranks(ranks: np.ndarray, top: np.ndarray | int, bits: int) -> np.ndarray:
    """Dense ranks (from 0; ``top`` the largest) spread over ``bits`` bits, so that every column
    spans the same coordinate range whatever its type or number of distinct values."""
    ranks = np.asarray(ranks, dtype=np.float64)
    top = np.asarray(top, dtype=np.float64)
    scale = (1 << bits) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(top > 0, ranks * (scale / np.where(top > 0, top, 1)), 0.0)
    return out.astype(np.uint64)


def sort_key_columns(rows: pa.Table, columns: tuple[str, ...]) -> list[pa.ChunkedArray]:
    """The values of each sort column: nested fields resolved, dictionaries decoded (Arrow sorts
    neither a struct nor a dictionary)."""
    out = []
    for name in columns:
        head, *rest = name.split(".")
        values = rows.column(head)
        for field_name in rest:
            values = pc.struct_field(values, field_name)
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        out.append(values)
    return out


def sort_column_problem(schema: pa.Schema, name: str) -> str | None:
    """Why ``name`` cannot be a sort column of ``schema`` (None when it can)."""
    head, *rest = name.split(".")
    if head not in schema.names:
        return "the table has no such column"
    typ = schema.field(head).type
    for field_name in rest:
        if not pa.types.is_struct(typ) or typ.get_field_index(field_name) < 0:
            return f"{head} has no field {name[len(head) + 1:]}"
        typ = typ.field(field_name).type
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_nested(typ):
        return f"it is of type {typ}, which has no order; name a field inside it (a.b)"
    return None


def _scaled_rank(column: pa.ChunkedArray, bits: int) -> np.ndarray:
    """Dense ranks of a column (nulls first) spread over ``bits`` bits: every type orders the same way."""
    ranks = np.asarray(pc.rank(column, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense"),
                       dtype=np.int64) - 1
    return scaled_ranks(ranks, int(ranks.max()) if len(ranks) else 0, bits)


def z_order(coords: np.ndarray, bits: int) -> np.ndarray:
    """Morton codes: the bits of the coordinates interleaved, highest first."""
    dims = coords.shape[0]
    out = np.zeros(coords.shape[1], dtype=np.uint64)
    for b in range(bits):
        for d in range(dims):
            bit = (coords[d] >> np.uint64(b)) & np.uint64(1)
            out |= bit << np.uint64(b * dims + (dims - 1 - d))
    return out


def hilbert(coords: np.ndarray, bits: int) -> np.ndarray:
    """Hilbert-curve distances (Skilling's transform of the coordinates, then their bits interleaved)."""
    x = coords.astype(np.uint64).copy()
    dims = x.shape[0]
    m = np.uint64(1 << (bits - 1))
    q = m
    while q > 1:
        p = q - np.uint64(1)
        for i in range(dims):
            high = (x[i] & q) != 0
            flipped = x[0] ^ p
            t = (x[0] ^ x[i]) & p
            x0 = np.where(high, flipped, x[0] ^ t)
            if i:
                x[i] = np.where(high, x[i], x[i] ^ t)
            x[0] = x0
        q >>= np.uint64(1)
    for i in range(1, dims):
        x[i] ^= x[i - 1]
    t = np.zeros(x.shape[1], dtype=np.uint64)
    q = m
    while q > 1:
        t = np.where((x[dims - 1] & q) != 0, t ^ (q - np.uint64(1)), t)
        q >>= np.uint64(1)
    x ^= t
    return z_order(x, bits)
