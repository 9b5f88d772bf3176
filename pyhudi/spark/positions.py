"""The base rows a snapshot's log blocks replace, as a filter in the base files' scan.

:func:`pyhudi.spark.merged.surviving_base` keeps the base rows no log record replaces. As a join,
every query builds a hash table of the log side's positions in a Spark job and probes it per base
row. The positions of a snapshot do not change, so here they come to the driver once
(:func:`replaced_rows`), become one bitmap per base file (:mod:`pyhudi.read.positions`), and
each bitmap an ``array<bigint>`` literal (:func:`pyhudi.spark.compat.long_array_literal`). The
filter (:func:`replaced_filter`) is an array lookup and a shift per row, evaluated in the scan's
generated code, with no job of its own.
"""

from __future__ import annotations

import pyarrow.compute as pc
from pyspark import SparkContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pyhudi.read.merge import LOG_DELETE_ORDER, LOG_RECORD
from pyhudi.read.positions import RowBitmap, row_bitmaps
from pyhudi.spark.compat import collect_arrow, long_array_literal

#: Base files with replaced rows up to which a filter tests a row's file branch by branch
#: (one comparison each per row); beyond, the log side is joined instead
MAX_BITMAP_FILES = 64
#: Bitmap words (8 bytes each, in every scan task's plan) up to which a filter stands for the join
MAX_BITMAP_WORDS = 2_000_000


def replaced_rows(positions: DataFrame, *, file_id: str, size: str, row: str,
                  ordering: bool) -> list[RowBitmap] | None:
    """The bitmaps of the base rows ``positions`` (log-side rows with a base position) replace,
    collected in one Spark job (the rows a broadcast of the log side would carry: callers keep
    the logs small, :data:`pyhudi.spark.merged.BROADCAST_LOG_BYTES`); None where a filter cannot
    stand for the join: a log delete with an ordering value (``ordering``: the table has an
    ordering field, so the base row survives when its value is larger, a comparison per row), or
    more than :data:`MAX_BITMAP_FILES` files or :data:`MAX_BITMAP_WORDS` words."""
    columns = [file_id, size, row] + ([LOG_RECORD, LOG_DELETE_ORDER] if ordering else [])
    got = collect_arrow(positions.select(*columns))
    if ordering:
        record = pc.fill_null(got.column(LOG_RECORD), False)
        conditional = pc.and_(pc.invert(record), pc.is_valid(got.column(LOG_DELETE_ORDER)))
        if pc.any(conditional).as_py():
            return None
    bitmaps = row_bitmaps(got.column(file_id), got.column(size), got.column(row))
    if len(bitmaps) > MAX_BITMAP_FILES or sum(len(b.words) for b in bitmaps) > MAX_BITMAP_WORDS:
        return None
    return bitmaps


def replaced_filter(bitmaps: list[RowBitmap], *, size: str, row: str, file_name: str | None) -> Column:
    """True for a base row (its file's size in column ``size``, its position in ``row``) whose
    file's bitmap sets its position; ``file_name`` (the base file's name, when two base files may
    have the same size) tells the files apart by file id as well. False for rows of other files."""
    sc = SparkContext._active_spark_context
    assert sc is not None
    position = F.col(row)
    word_at = F.call_function("shiftright", position, F.lit(6)).cast("int")
    shift = F.call_function("pmod", position, F.lit(64)).cast("int")
    out: Column | None = None
    for bitmap in bitmaps:
        same = F.col(size) == F.lit(bitmap.base_size)
        if file_name is not None:
            same = same & (F.substring_index(F.col(file_name), "_", 1) == F.lit(bitmap.file_id))
        word = F.get(long_array_literal(sc, bitmap.words), word_at)
        bit = F.call_function("shiftright", word, shift).bitwiseAND(F.lit(1)) == F.lit(1)
        out = F.when(same, bit) if out is None else out.when(same, bit)
    if out is None:
        return F.lit(False)
    return F.coalesce(out.otherwise(F.lit(False)), F.lit(False))
