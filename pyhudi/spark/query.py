"""``pyhudi.read(spark, path)`` whose ``.filter(...)`` / ``.where(...)`` prune like ``filters=``.

Users write ``pyhudi.read(spark, p).where(F.col("day") == d)``, not ``filters=``. The DataFrame
:func:`read` returns is the session's own DataFrame class with two methods changed: ``filter``
and ``where`` plan the read again (:func:`pyhudi.spark.reader.read`) with the conjunction of
every filter so far as ``filters=``, so partitions are pruned by their paths and base files by
their column statistics (metadata table or footers), or to the file groups the record index
locates the filter's keys in (read with ``hoodie.metadata.record.index.enable=true``), before Spark
lists or opens them. The rows are those of ``read(spark, p, filters=...)`` and of Spark's own
filter over the unpruned read.

What prunes: ``filter``/``where`` applied directly to the returned frame, chained any number of
times (they AND together), with columns named (``F.col("day")``, SQL text) or taken from the frame
(``df["day"]``, ``df.day``: bound to the frame's plan, so the condition goes to the new read as
the SQL text Spark resolved it to). What does not: a condition that has no SQL text (a Python
UDF); any filter once the table has a completed instant the frame was not planned on (the
filtered frame shows the snapshot the unfiltered one does); a filter after any other transformation
(``.select(...).filter(...)``, ``.withColumn``, a join, ...) is Spark's plain filter over the
files already listed (Spark's parquet row-group statistics still apply): every other method is
the base class's and returns a plain DataFrame, so Spark's semantics stay as they are. A frame
that was cached (``cache``/``persist``) filters its cached rows as any DataFrame does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pyhudi.spark import reader
from pyhudi.spark.storage_conf import table_storage
from pyhudi.table.table import HudiTable


@dataclass(frozen=True)
class PlannedRead:
    """What a frame of :func:`read` was planned from; its filters AND together."""

    spark: SparkSession
    path: str
    options: Mapping[str, Any] | None
    filters: tuple[Column | str, ...]
    #: the completed instants of the timeline the frame was planned on: a filter plans again only
    #: while they are the same, so the filtered frame shows the snapshot the unfiltered one did
    snapshot: frozenset[tuple[str, str]]

    def condition(self) -> Column | str | None:
        """The conjunction of the filters, as ``filters=`` takes it."""
        if not self.filters:
            return None
        if len(self.filters) == 1:
            return self.filters[0]
        return reduce(lambda a, b: a & b, (F.expr(f) if isinstance(f, str) else f for f in self.filters))


def read(spark: SparkSession, path: str, options: Mapping[str, Any] | None = None, *,
         filters: Column | str | None = None) -> DataFrame:
    """:func:`pyhudi.spark.reader.read`, as a frame whose ``filter``/``where`` re-plan the read."""
    table = HudiTable(table_storage(spark, path, options))
    planned = PlannedRead(spark, path, None if options is None else dict(options),
                          () if filters is None else (filters,), _completed(table))
    return _replanning(reader.read(spark, path, options, filters=filters, table=table), planned)


def _completed(table: HudiTable) -> frozenset[tuple[str, str]]:
    return frozenset((i.timestamp, i.action) for i in table.timeline.completed())


def _replanning(df: DataFrame, planned: PlannedRead) -> DataFrame:
    df.__class__ = _subclass(type(df))
    df._pyhudi_read = planned  # type: ignore[attr-defined]
    return df


#: the session DataFrame class (classic or Connect, per PySpark version) -> its re-planning subclass
_SUBCLASSES: dict[type, type] = {}


def _subclass(base: type) -> type:
    if getattr(base, "_pyhudi_replans", False):
        return base
    sub = _SUBCLASSES.get(base)
    if sub is None:
        sub = _SUBCLASSES[base] = type(f"Hudi{base.__name__}", (base,), {
            "_pyhudi_replans": True, "_pyhudi_read": None, "__module__": __name__,
            "__doc__": "A DataFrame of pyhudi.read whose filter/where prune (pyhudi.spark.query).",
            "filter": _filter, "where": _filter, "cache": _cache, "persist": _persist,
        })
    return sub


def _filter(self: Any, condition: Any) -> DataFrame:
    """The read planned again with ``condition`` ANDed to its filters (pruning partitions and
    files); Spark's filter where the frame was cached or ``condition`` is not a Column or SQL text."""
    planned: PlannedRead | None = self._pyhudi_read
    plain = _base(type(self)).filter(self, condition)  # Spark's own check of the condition
    if planned is None or not isinstance(condition, (Column, str)):
        return plain  # type: ignore[no-any-return]
    table = HudiTable(table_storage(planned.spark, planned.path, planned.options))
    if _completed(table) != planned.snapshot:
        return plain  # the table moved on: planning again would show rows this frame does not hold
    for portable in (condition, _as_text(plain)):
        if portable is None:
            continue
        more = PlannedRead(planned.spark, planned.path, planned.options, (*planned.filters, portable),
                           planned.snapshot)
        try:
            return _replanning(reader.read(more.spark, more.path, more.options, filters=more.condition(),
                                           table=table), more)
        except AnalysisException:
            continue  # a column bound to this frame's plan (df["day"], df.day) names nothing in a new read
    return plain  # type: ignore[no-any-return]


def _as_text(filtered: DataFrame) -> str | None:
    """The condition of Spark's filter as SQL text, its columns by name: ``df["day"] == 1`` is
    bound to this frame's plan, ``day = 1`` holds in any read of the table (None: not a filter)."""
    plan = filtered._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() != "Filter":
        return None
    return str(plan.condition().sql())


def _cache(self: Any) -> DataFrame:
    """Spark's cache; later filters then read the cached rows instead of planning again."""
    self._pyhudi_read = None
    return _base(type(self)).cache(self)


def _persist(self: Any, *args: Any, **kwargs: Any) -> DataFrame:
    """Spark's persist; later filters then read the persisted rows instead of planning again."""
    self._pyhudi_read = None
    return _base(type(self)).persist(self, *args, **kwargs)


def _base(cls: type) -> Any:
    return next(c for c in cls.__mro__ if not c.__dict__.get("_pyhudi_replans", False))
