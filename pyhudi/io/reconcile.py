"""Rows written under an older table schema, read as the table's current schema.

A Hudi table's schema evolves on write (:mod:`pyhudi.write.schema`): columns and nested fields are
added, types widened, struct fields may come in another order. Files keep the schema they were
written with, so every reader reconciles each file's (or log block's) rows to the table schema of
the query, as Hudi's schema-on-write readers do:

- fields are matched **by name**, at every level (structs, lists of structs, map values);
- a field the rows lack is null; a field the table schema no longer has is left out;
- a type is promoted along Hudi's widening rules (int -> long -> float -> double, float -> double,
  decimals to more integer digits and scale, byte/short -> int, a timestamp to a finer unit), and
  an integer column is read as a string where the table schema says string (Hudi's Avro rewrite
  does ``String.valueOf``; Spark SQL's UPDATE of a table with a timestamp-based key generator writes
  the partition column back as a string, so Hudi 1.x tables hold both).

Any other difference (a string where the table has an int, a long read as an int) is a
:class:`HudiSchemaError`: such a file does not belong to the table schema, and casting it would
answer wrong or fail half-way. All work is column-wise pyarrow casts, no per-row Python.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiSchemaError
from pyhudi.io.avro_schema import hudi_storage_type

#: Hudi's numeric widening order: a type may be read (or evolve) as any type of higher rank
NUMERIC_RANK = {"int32": 0, "int64": 1, "float": 2, "double": 3}
_TIME_UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def _kind(t: pa.DataType) -> str:
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "list"
    if pa.types.is_map(t):
        return "map"
    return "leaf"


def promotion_problem(source: pa.DataType, target: pa.DataType, *, path: str) -> str | None:
    """Why values of type ``source`` cannot be read as ``target`` by Hudi's rules (fields by
    name, recursively); None when they can. ``path`` names the column in the message."""
    if pa.types.is_null(source) or source == target:
        return None
    s, t = hudi_storage_type(source), hudi_storage_type(target)
    kind = _kind(s)
    if kind != _kind(t):
        return f"{path} is {source} in the file but {target} in the table schema"
    if kind == "struct":
        for field in t:
            i = s.get_field_index(field.name)
            if i >= 0 and (problem := promotion_problem(s.field(i).type, field.type, path=f"{path}.{field.name}")):
                return problem
        return None
    if kind == "list":
        return promotion_problem(s.value_type, t.value_type, path=f"{path}[]")
    if kind == "map":
        return (promotion_problem(s.key_type, t.key_type, path=f"{path}{{key}}")
                or promotion_problem(s.item_type, t.item_type, path=f"{path}{{value}}"))
    rank_s, rank_t = NUMERIC_RANK.get(str(s)), NUMERIC_RANK.get(str(t))
    if s == t or (rank_s is not None and rank_t is not None and rank_s <= rank_t):
        return None
    if pa.types.is_decimal(s) and pa.types.is_decimal(t) and t.scale >= s.scale \
            and t.precision - t.scale >= s.precision - s.scale:
        return None
    if pa.types.is_timestamp(s) and pa.types.is_timestamp(t) and _TIME_UNITS[s.unit] <= _TIME_UNITS[t.unit] \
            and (s.tz is None) == (t.tz is None):
        return None
    if pa.types.is_integer(s) and pa.types.is_decimal(t) and t.precision - t.scale >= (10 if s.bit_width <= 32 else 19):
        return None
    if pa.types.is_signed_integer(s) and (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return None  # decimal digits, as Java's Long.toString (floats are left out: Java prints them its own way)
    return (f"{path} is {source} in the file but {target} in the table schema, which is not a widening "
            "(int -> long -> float -> double, float -> double, wider decimals, integers -> string)")


def reconcile(table: pa.Table, target: pa.Schema, *, source: str = "rows") -> pa.Table:
    """``table`` with exactly ``target``'s columns, in its order: matched by name at every nesting
    level, absent ones null, types widened (see the module docstring).

    ``source`` names the file or block in the :class:`HudiSchemaError` raised for a type that is
    not a widening of the table's.
    """
    columns = []
    for field in target:
        i = table.schema.get_field_index(field.name)
        if i < 0:
            columns.append(pa.chunked_array([pa.nulls(table.num_rows, field.type)], field.type))
            continue
        column = table.column(i)
        if column.type != field.type:
            column = reconcile_column(column, field.type, path=field.name, source=source)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=target)


def reconcile_column(column: pa.ChunkedArray | pa.Array, target: pa.DataType, *, path: str,
                     source: str = "rows") -> pa.ChunkedArray:
    """One column read as ``target`` (by name, recursively; see :func:`reconcile`)."""
    problem = promotion_problem(column.type, target, path=f"column {path}")
    if problem is not None:
        raise HudiSchemaError(f"{source}: {problem}; the table cannot be read as its schema says. Rewrite the "
                              "data with a type the table schema accepts (only widening is allowed)")
    # pyarrow casts structs by field name, fills absent nullable fields with nulls and drops
    # fields the target lacks; the check above admits widenings only, so an unchecked cast loses
    # nothing Hudi keeps (long -> double rounds beyond 2**53 as Java does)
    chunked = column if isinstance(column, pa.ChunkedArray) else pa.chunked_array([column], column.type)
    if pa.types.is_null(chunked.type):
        return pa.chunked_array([pa.nulls(len(chunked), target)], target)
    try:
        return pc.cast(chunked, target, safe=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise HudiSchemaError(f"{source}: column {path} of type {chunked.type} cannot be read as {target} ({exc}); "
                              "the table cannot be read as its schema says") from None
