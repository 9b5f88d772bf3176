"""Spark calls that cost one py4j round trip where PySpark's own cost one per element.

PySpark hands a Python list to the JVM one element per round trip (about 1 ms each on a local
driver), so a ``selectExpr`` of twenty columns or a read of three hundred paths spends most of its
planning time on the socket. Here the strings travel as one and the JVM splits them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession

_SEPARATOR = "\n"


def string_seq(spark: SparkSession, values: Sequence[str]) -> Any | None:
    """A Scala ``Seq[String]`` of ``values`` made in one call; None when that cannot be done (no
    JVM gateway, or a value that is empty or holds a line break, which the split would lose)."""
    jvm = spark.sparkContext._jvm
    if jvm is None or any(not v or _SEPARATOR in v for v in values):
        return None
    util = jvm.java.util
    return jvm.PythonUtils.toSeq(util.Collections.list(util.StringTokenizer(_SEPARATOR.join(values), _SEPARATOR)))


def quoted(name: str) -> str:
    """``name`` as a column name in a SQL expression (backticks, doubled inside)."""
    return "`" + name.replace("`", "``") + "`"


def select_exprs(df: DataFrame, exprs: Sequence[str]) -> DataFrame:
    """``df.selectExpr(*exprs)`` in one round trip."""
    seq = string_seq(df.sparkSession, exprs)
    if seq is None:
        return df.selectExpr(*exprs)
    return DataFrame(df._jdf.selectExpr(seq), df.sparkSession)


def column_seqs(df: DataFrame, columns: dict[str, Column]) -> tuple[Any, Any]:
    """The names and expressions of ``df.withColumns(columns)`` as the JVM takes them (Scala
    sequences), to be kept and handed to :func:`with_columns` for other frames of the same columns:
    the names travel in one round trip, the expressions one each, as PySpark sends them."""
    names = string_seq(df.sparkSession, list(columns))
    if names is None:  # a name PySpark must send itself
        names = df._jseq(list(columns))  # type: ignore[attr-defined,operator,unused-ignore]
    return names, df._jcols(*columns.values())  # type: ignore[attr-defined,operator,unused-ignore]


def with_columns(df: DataFrame, seqs: tuple[Any, Any]) -> DataFrame:
    """``df.withColumns`` of the columns :func:`column_seqs` made (PySpark's own call, in one round trip)."""
    return DataFrame(df._jdf.withColumns(*seqs), df.sparkSession)
