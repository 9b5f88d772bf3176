"""Record keys and partition paths of rows the driver holds as Arrow, made with pyarrow.

Spark expressions (:mod:`pyhudi.spark.keygen`) key every batch Spark reads. A batch whose rows
already sit on the driver as Arrow (a frame Spark made from pandas or Arrow data and keeps as Arrow
record batches, :func:`pyhudi.spark.local_batch.held_arrow`) would be read back through a Spark job
only to compute these strings: about 0.5 s for 300,000 drone rows on two cores, where this module
takes a few milliseconds. The rules are those of :mod:`pyhudi.keygen.spec`, for the cases where
pyarrow renders a value exactly as Spark's ``cast('string')`` does (:func:`renders`): string and
integer fields of simple, complex, non-partitioned and custom key generators with simple parts.
Anything else is keyed by Spark. ``tests/test_held_arrow.py`` holds both to the same output.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiKeyError
from pyhudi.keygen.spec import (
    _ESCAPED,
    DEFAULT_PARTITION,
    EMPTY_KEY,
    NULL_KEY,
    SIMPLE,
    KeyGenSpec,
    missing_key_message,
    missing_ordering_message,
)

#: the escapes of ``PartitionPathEncodeUtils.escapePathName``, ``%`` first so that no escape is
#: escaped again
_ESCAPES = [("%", "%25")] + [(ch, f"%{ord(ch):02X}") for ch in sorted(_ESCAPED - {"%"})]


def _renders(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_integer(kind)


def renders(spec: KeyGenSpec, schema: pa.Schema) -> bool:
    """Whether :func:`record_keys` and :func:`partition_paths` key rows of ``schema`` as Spark
    would: keys made of fields (not generated), every key and partition field a top-level string
    or integer column, every partition part a simple one."""
    if spec.auto_keys:
        return False
    parts = spec.partition_fields if spec.is_partitioned else ()
    if any(spec.part_type(i) != SIMPLE for i in range(len(parts))):
        return False
    return all(f in schema.names and _renders(schema.field(f).type) for f in (*spec.record_key_fields, *parts))


def _text(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A field's values as Spark's ``cast('string')`` renders them (strings as they are)."""
    return column if pa.types.is_string(column.type) else pc.cast(column, pa.string())


def _missing(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Whether each value is null or empty."""
    return pc.fill_null(pc.equal(values, ""), True)


def _prefixed(prefix: str, values: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(pa.scalar(prefix), values, "")


def record_keys(table: pa.Table, spec: KeyGenSpec) -> pa.ChunkedArray:
    """The record key of every row (:func:`pyhudi.spark.keygen.record_key_expr`); a
    :class:`~pyhudi.errors.HudiKeyError` when a row has none."""
    fields = spec.record_key_fields
    values = [_text(table.column(f)) for f in fields]
    if len(fields) == 1:
        if pc.any(_missing(values[0])).as_py():
            raise HudiKeyError(missing_key_message(fields).rstrip(". "))
        prefixed = spec.single_complex_key and spec.field_prefixed
        return _prefixed(fields[0] + ":", values[0]) if prefixed else values[0]
    missing = [_missing(v) for v in values]
    every = missing[0]
    for m in missing[1:]:
        every = pc.and_(every, m)
    if pc.any(every).as_py():
        raise HudiKeyError(missing_key_message(fields).rstrip(". "))
    parts = [_prefixed(f + ":", pc.if_else(pc.is_null(v), NULL_KEY, pc.if_else(m, EMPTY_KEY, v)))
             for f, v, m in zip(fields, values, missing)]
    return pc.binary_join_element_wise(*parts, ",")


def _escaped(values: pa.ChunkedArray) -> pa.ChunkedArray:
    for ch, escape in _ESCAPES:
        values = pc.replace_substring(values, ch, escape)
    return values


def partition_paths(table: pa.Table, spec: KeyGenSpec) -> pa.ChunkedArray:
    """The partition path of every row (:func:`pyhudi.spark.keygen.partition_path_expr`)."""
    if not spec.is_partitioned:
        return pa.chunked_array([pa.repeat(pa.scalar("", pa.string()), table.num_rows)])
    parts = []
    for f in spec.partition_fields:
        raw = _text(table.column(f))
        value = pc.if_else(_missing(raw), DEFAULT_PARTITION, _escaped(raw) if spec.url_encode else raw)
        parts.append(_prefixed(f + "=", value) if spec.hive_style else value)
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/")


def require_ordering(table: pa.Table, field: str) -> None:
    """Refuse rows without an ordering value (:func:`pyhudi.spark.keygen.required_ordering`)."""
    if table.column(field).null_count:
        raise HudiKeyError(missing_ordering_message(field).rstrip(". "))
