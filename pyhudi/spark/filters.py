"""A query filter (a Spark Column or SQL string) as a :mod:`pyhudi.read.skipping` predicate.

Spark resolves and simplifies the filter (types, casts of literals, constant folding) and
translates each conjunct into the data source filters it would push down to a parquet scan
(``EqualTo``, ``In``, ``LessThan``, ``And``, ...); those map one to one onto the skipping
predicates. What Spark cannot translate (functions of columns, casts of columns, UDFs) becomes
``Unknown`` and prunes nothing. No Spark job runs: the filter is planned over an empty RDD.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import types as T

from pyhudi.read.skipping import (
    And,
    Compare,
    In,
    IsNotNull,
    IsNull,
    Not,
    Or,
    Predicate,
    StartsWith,
    Unknown,
)

_COMPARISONS = {"EqualTo": "=", "LessThan": "<", "LessThanOrEqual": "<=", "GreaterThan": ">",
                "GreaterThanOrEqual": ">="}


class _Untranslatable(Exception):
    pass


#: (session, schema JSON) -> the empty DataFrame filters are planned over; made once (20 ms)
_PROBES: dict[tuple[int, str], Any] = {}


def _probe(spark: SparkSession, schema: T.StructType) -> Any:
    key = (id(spark), schema.json())
    probe = _PROBES.get(key)
    if probe is None:
        if len(_PROBES) > 32:
            _PROBES.clear()
        jschema = spark._jsparkSession.parseDataType(key[1])
        probe = _PROBES[key] = spark._jsparkSession.createDataFrame(spark.sparkContext._jsc.emptyRDD(), jschema)
    return probe


def to_predicate(spark: SparkSession, schema: T.StructType, condition: Column | str) -> Predicate:
    """The skipping predicate of ``condition`` over a table of ``schema``."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    filtered = _probe(spark, schema).filter(condition if isinstance(condition, str) else condition._jc)
    plan = filtered.queryExecution().optimizedPlan()
    while plan.getClass().getSimpleName() != "Filter":
        children = plan.children()
        if children.size() != 1:
            return Unknown()
        plan = children.apply(0)
    # the Scala object, not the case class of the same name
    strategy = getattr(getattr(jvm.org.apache.spark.sql.execution.datasources, "DataSourceStrategy$"), "MODULE$")
    parts: list[Predicate] = []
    for conjunct in _conjuncts(plan.condition()):
        translated = strategy.translateFilter(conjunct, True)
        if not translated.isDefined():
            parts.append(Unknown())
            continue
        try:
            parts.append(_convert(translated.get()))
        except _Untranslatable:
            parts.append(Unknown())
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def _conjuncts(expr: Any) -> list[Any]:
    if expr.getClass().getSimpleName() == "And":
        return _conjuncts(expr.left()) + _conjuncts(expr.right())
    return [expr]


def _convert(f: Any) -> Predicate:
    """A ``org.apache.spark.sql.sources.Filter`` as a predicate."""
    kind = f.getClass().getSimpleName()
    if kind in _COMPARISONS:
        return Compare(f.attribute(), _COMPARISONS[kind], _value(f.value()))
    if kind == "EqualNullSafe":
        value = _value(f.value())
        if value is None:
            return IsNull(f.attribute())
        return And((Compare(f.attribute(), "=", value), IsNotNull(f.attribute())))
    if kind == "In":
        return In(f.attribute(), tuple(_value(v) for v in f.values()))
    if kind == "IsNull":
        return IsNull(f.attribute())
    if kind == "IsNotNull":
        return IsNotNull(f.attribute())
    if kind == "StringStartsWith":
        return StartsWith(f.attribute(), str(f.value()))
    if kind == "And":
        return And((_convert(f.left()), _convert(f.right())))
    if kind == "Or":
        return Or((_convert(f.left()), _convert(f.right())))
    if kind == "Not":
        return Not(_convert(f.child()))
    raise _Untranslatable(kind)


def _value(v: Any) -> Any:
    """A literal as Python sees parquet statistics (dates as dates; timestamps are not compared)."""
    if v is None or isinstance(v, (str, bool, int, float, Decimal)):
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    name = v.getClass().getName() if hasattr(v, "getClass") else ""
    if name in ("java.sql.Date", "java.time.LocalDate"):
        return dt.date.fromisoformat(v.toString())
    raise _Untranslatable(name or type(v).__name__)
