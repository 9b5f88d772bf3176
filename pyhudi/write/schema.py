"""Schema evolution on write: which incoming schemas a table accepts, and the resulting schema.

Hudi (0.14, without schema-on-read) lets a batch add nullable columns and widen types
(int -> long -> float -> double, float -> double, wider decimals); a batch that lacks table columns
fails unless ``hoodie.write.set.null.for.missing.columns`` / ``reconcile.schema`` fill them with
nulls or ``...allow.auto.evolution.column.drop`` drops them. Anything else is refused before a
single file is written.
"""

from __future__ import annotations

import pyarrow as pa

from pyhudi.errors import HudiSchemaError
from pyhudi.io.avro_schema import META_FIELDS, hudi_storage_type
from pyhudi.io.reconcile import NUMERIC_RANK


def _norm(t: pa.DataType) -> pa.DataType:
    return hudi_storage_type(t)


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal as Hudi sees types: ignores list item names, nullability and timestamp zones."""
    a, b = _norm(a), _norm(b)
    if pa.types.is_list(a) and pa.types.is_list(b):
        return same_type(a.value_type, b.value_type)
    if pa.types.is_map(a) and pa.types.is_map(b):
        return same_type(a.key_type, b.key_type) and same_type(a.item_type, b.item_type)
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return [f.name for f in a] == [f.name for f in b] and all(
            same_type(fa.type, fb.type) for fa, fb in zip(a, b))
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return a.unit == b.unit and (a.tz is None) == (b.tz is None)
    return a == b


def widened(table_type: pa.DataType, incoming: pa.DataType) -> pa.DataType | None:
    """The type a column takes when ``incoming`` meets ``table_type``; None if incompatible."""
    if same_type(table_type, incoming):
        return table_type
    t, i = _norm(table_type), _norm(incoming)
    if str(t) in NUMERIC_RANK and str(i) in NUMERIC_RANK:
        return t if NUMERIC_RANK[str(t)] >= NUMERIC_RANK[str(i)] else i
    if pa.types.is_decimal(t) and pa.types.is_decimal(i):
        scale = max(t.scale, i.scale)
        digits = max(t.precision - t.scale, i.precision - i.scale)
        if digits + scale <= 38:
            return pa.decimal128(digits + scale, scale)
    if pa.types.is_struct(t) and pa.types.is_struct(i):
        merged = _merge_fields(list(t), list(i), where="struct field", fill_missing=True)
        return pa.struct(merged) if merged is not None else None
    if pa.types.is_list(t) and pa.types.is_list(i):
        inner = widened(t.value_type, i.value_type)
        return pa.list_(inner) if inner is not None else None
    if pa.types.is_map(t) and pa.types.is_map(i) and same_type(t.key_type, i.key_type):
        value = widened(t.item_type, i.item_type)
        return pa.map_(t.key_type, value) if value is not None else None
    return None


def _merge_fields(table_fields: list[pa.Field], incoming: list[pa.Field], *, where: str,
                  fill_missing: bool) -> list[pa.Field] | None:
    by_name = {f.name: f for f in table_fields}
    out = []
    for f in incoming:
        old = by_name.get(f.name)
        if old is None:
            out.append(f.with_nullable(True))
            continue
        t = widened(old.type, f.type)
        if t is None:
            return None
        out.append(pa.field(f.name, t, True))
    seen = {f.name for f in incoming}
    missing = [f for f in table_fields if f.name not in seen]
    if missing and not fill_missing:
        return None
    return out + [f.with_nullable(True) for f in missing]


def evolve(table_schema: pa.Schema | None, incoming: pa.Schema, *, fill_missing: bool,
           drop_missing: bool) -> pa.Schema:
    """The data schema (no meta columns) a write produces; HudiSchemaError when it cannot."""
    inc = [f for f in incoming if f.name not in META_FIELDS]
    if table_schema is None:
        return pa.schema([f.with_type(_norm(f.type)) for f in inc])
    current = [f for f in table_schema if f.name not in META_FIELDS]
    by_name = {f.name: f for f in current}
    out: list[pa.Field] = []
    for f in inc:
        old = by_name.get(f.name)
        if old is None:
            out.append(f.with_type(_norm(f.type)).with_nullable(True))
            continue
        t = widened(old.type, f.type)
        if t is None:
            raise HudiSchemaError(
                f"column {f.name!r} has type {f.type} in the incoming data but {old.type} in the table; "
                "only widening (int->long->float->double, wider decimals, added nullable fields) is "
                "allowed: cast the column before writing")
        out.append(pa.field(f.name, t, True))
    seen = {f.name for f in inc}
    missing = [f for f in current if f.name not in seen]
    if missing:
        names = ", ".join(f.name for f in missing)
        if drop_missing:
            return pa.schema(out)
        if not fill_missing:
            raise HudiSchemaError(
                f"the incoming data lacks table column(s) {names}; add them, or set "
                "hoodie.write.set.null.for.missing.columns=true to write nulls, or "
                "hoodie.datasource.write.schema.allow.auto.evolution.column.drop=true to drop them")
        out.extend(f.with_nullable(True) for f in missing)
    # keep the table's column order, new columns at the end: Hudi readers expect stable positions
    order = [f.name for f in current if f.name in {o.name for o in out}] + \
        [o.name for o in out if o.name not in by_name]
    by_out = {o.name: o for o in out}
    return pa.schema([by_out[n] for n in order])
