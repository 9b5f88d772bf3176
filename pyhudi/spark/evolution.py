"""Spark's native parquet reads of files written under an older table schema.

Spark's parquet reader matches the requested schema to a file by field name at every level and
reads fields the file lacks as null, but it cannot widen a stored type (an int column requested as
double fails), and a Spark cast of one struct to another goes by position. So a file whose schema
differs from the table's is read with a *read type*: the table schema's shape (fields, names,
order) carrying the file's stored leaf types, then cast to the table schema. Both sides of the cast
have the same field names in the same order, so the positional struct cast is the by-name one.
Widening is checked in Arrow terms first (:func:`pyhudi.io.reconcile.promotion_problem`), so a
type change that is not one fails with :class:`HudiSchemaError` naming the column and the file.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyhudi.errors import HudiSchemaError


def read_type(target: T.DataType, stored: T.DataType, *, path: str) -> T.DataType:
    """``target``'s shape with ``stored``'s leaf types where the file has the field (by name)."""
    if isinstance(target, T.StructType):
        if not isinstance(stored, T.StructType):
            raise HudiSchemaError(f"{path} is {stored.simpleString()} in the file but a struct in the table schema")
        by_name = {f.name: f for f in stored.fields}
        return T.StructType([
            T.StructField(f.name, read_type(f.dataType, by_name[f.name].dataType, path=f"{path}.{f.name}")
                          if f.name in by_name else f.dataType, True)
            for f in target.fields])
    if isinstance(target, T.ArrayType):
        if not isinstance(stored, T.ArrayType):
            raise HudiSchemaError(f"{path} is {stored.simpleString()} in the file but an array in the table schema")
        return T.ArrayType(read_type(target.elementType, stored.elementType, path=f"{path}[]"), True)
    if isinstance(target, T.MapType):
        if not isinstance(stored, T.MapType):
            raise HudiSchemaError(f"{path} is {stored.simpleString()} in the file but a map in the table schema")
        return T.MapType(read_type(target.keyType, stored.keyType, path=f"{path}{{key}}"),
                         read_type(target.valueType, stored.valueType, path=f"{path}{{value}}"), True)
    if isinstance(stored, (T.StructType, T.ArrayType, T.MapType)):
        raise HudiSchemaError(f"{path} is {stored.simpleString()} in the file but "
                              f"{target.simpleString()} in the table schema")
    return stored


def read_schema(target: T.StructType, stored: T.StructType) -> T.StructType:
    """The schema to read a file of schema ``stored`` with, so that :func:`conform` makes it ``target``."""
    by_name = {f.name: f for f in stored.fields}
    return T.StructType([
        T.StructField(f.name, read_type(f.dataType, by_name[f.name].dataType, path=f"column {f.name}")
                      if f.name in by_name else f.dataType, True)
        for f in target.fields])


def conform(df: DataFrame, target: T.StructType, *, keep: tuple[str, ...] = ()) -> DataFrame:
    """``df`` (read with :func:`read_schema`) cast to ``target``; ``keep``: further columns kept as they are."""
    read = {f.name: f.dataType for f in df.schema.fields}
    cols: list[Column] = []
    for f in target.fields:
        col = F.col(f"`{f.name}`")
        cols.append(col if read.get(f.name) == f.dataType else col.cast(f.dataType).alias(f.name))
    return df.select(*cols, *(F.col(f"`{k}`") for k in keep))
