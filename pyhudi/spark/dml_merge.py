"""``MERGE INTO`` on Spark: a builder in the style of delta-rs, written as one Hudi upsert commit.

    (pyhudi.merge(spark, path, source_df, on="t.id = s.id")
        .when_matched_update(set={"value": "s.value"}, condition="s.ts > t.ts")
        .when_matched_delete(condition="s.op = 'D'")
        .when_not_matched_insert_all()
        .execute())

How it runs, and where it follows Hudi's ``MergeIntoHoodieTableCommand``:

* ``on`` must be a conjunction of equalities ``t.<field> = s.<column>`` that equates every record
  key field of the table, and may equate partition path fields; nothing else. Hudi matches source
  and target by record key (its index does the join), so it requires equality predicates on the
  primary key, of the simple form ``t.id = s.id`` for key and partition fields
  (``MergeIntoHoodieTableCommand.recordKeyAttributeToConditionExpression``); pyhudi also refuses
  conditions on other columns, which Hudi's key-based match would not honour: put those in the
  clauses' conditions.
* The target rows are read pruned: one small Spark job collects the source's distinct partition
  values (for partition fields in ``on``) with the range of its record keys in each (one key
  field), turned into an ``IN`` / range filter that prunes partitions and skips base files by their
  key statistics (:func:`pyhudi.spark.reader.read`). Then a Spark left join of source to target; no
  row goes to the driver.
* Clauses are tried in order for each source row, the first whose condition holds applies (SQL
  MERGE); a row no clause applies to is left alone. At most one ``when_matched_delete`` (Hudi:
  ``checkDeletingActions``).
* A target row matched by more than one source row is an error naming its key (SQL's MERGE
  cardinality rule), checked before anything is written.
* A matched update keeps the record key and partition path fields of the target row; assigning
  them explicitly is refused (as for ``UPDATE``, HUDI-8823). ``when_matched_update_all`` takes every
  other column from the source column of the same name (one missing is an error).
* With an ordering field (the one merges order by; none under Hudi 1.x's COMMIT_TIME_ORDERING),
  a matched update whose new ordering value is smaller than the stored one
  leaves the record as it is: Hudi's ``ExpressionPayload`` extends ``DefaultHoodieRecordPayload``
  and keeps the target record unless ``needUpdatingPersistedRecord`` (stored <= new), whatever the
  table's payload. A matched delete deletes whatever the ordering values
  (``ExpressionPayload.processMatchedRecord``: the delete condition yields an empty record).
* Inserts set the columns ``values`` does not name to null (Hudi's ``PartialAssignmentMode.NULL_VALUE``
  for inserts). Two inserted rows with one key are combined by the upsert as any upsert's are.
* Updates, deletes (rows flagged with the pipeline's delete flag) and inserts go in one upsert, one
  instant; nothing to do writes nothing (``instant_time=None``).
* A table with auto-generated record keys has no key to equate: ``on`` may be any condition, as
  Hudi allows for tables without a primary key (``MergeIntoHoodieTableCommand``), and the target is
  read whole. Matched rows are written by their stored ``_hoodie_record_key`` / partition path (the
  merge-into prepped write, ``_hoodie.spark.sql.merge.into.prepped``), inserts get generated keys; Hudi's
  client runs a plain upsert, so the commit records ``UPSERT``.
* Allowed where Hudi is narrower only because of how it runs the merge: an update clause of a
  merge-on-read table may read target columns (``set={"n": "t.n + s.n"}``; Hudi's
  ``checkUpdatingActions`` refuses it because its ``ExpressionPayload`` has no target row for log
  records); pyhudi evaluates every clause in the Spark join, where the target row is at hand.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config.properties import MERGE_ON_READ
from pyhudi.config.table import (
    DEFAULT_PAYLOAD,
    MYSQL_DEBEZIUM_PAYLOAD,
    NON_DEFAULTS_PAYLOAD,
    OVERWRITE_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    POSTGRES_DEBEZIUM_PAYLOAD,
)
from pyhudi.errors import HudiConfigError, HudiKeyError, HudiUnsupportedError
from pyhudi.io.avro_schema import table_avro_schema
from pyhudi.spark.compat import arrow_schema
from pyhudi.spark.dml import (
    DELETE_FLAG,
    DmlTarget,
    analysed,
    cached,
    expression,
    nothing_matched,
    open_target,
    resolving,
    statement_hold,
    write_rows,
)
from pyhudi.spark.keygen import GENERATE_KEY
from pyhudi.spark.write_options import written_version
from pyhudi.write.result import WriteResult

log = logging.getLogger("pyhudi")

_ACTION = "__pyhudi_merge_action"
_MATCHED = "__pyhudi_merge_target"
_STALE = "__pyhudi_merge_stale"
_TKEY = "__pyhudi_merge_tkey"
#: most distinct source partitions turned into one pruning filter (more: key range only)
MAX_PRUNING_PARTITIONS = 1000

#: payloads whose upsert would not write a matched update as assigned, and why
_FIELD_MERGING = {
    NON_DEFAULTS_PAYLOAD: "keeps the stored value wherever the new one is null",
    PARTIAL_UPDATE_PAYLOAD: "keeps stored values where the new ones are null, and a newer stored record's fields",
    POSTGRES_DEBEZIUM_PAYLOAD: "keeps the stored record on an equal _event_lsn and stored values for TOASTed ones",
    MYSQL_DEBEZIUM_PAYLOAD: "keeps the stored record unless _event_seq grows",
}


@dataclass(frozen=True)
class Clause:
    """One WHEN clause: ``kind`` update, delete or insert; ``assignments`` None for ``*``."""

    kind: str
    condition: Column | str | None
    assignments: Mapping[str, Column | str] | None


class MergeBuilder:
    """Clauses of a ``MERGE INTO`` collected in order; :meth:`execute` runs it (see the module)."""

    def __init__(self, spark: SparkSession, path: str, source: DataFrame, *, on: str | Column,
                 source_alias: str = "s", target_alias: str = "t") -> None:
        if source_alias == target_alias:
            raise HudiConfigError(f"merge into {path}: source and target need different aliases")
        self.spark, self.path, self.source, self.on = spark, path, source, on
        self.source_alias, self.target_alias = source_alias, target_alias
        self.clauses: list[Clause] = []

    def when_matched_update(self, set: Mapping[str, Column | str], *,  # noqa: A002
                            condition: Column | str | None = None) -> MergeBuilder:
        if not set:
            raise HudiConfigError(f"merge into {self.path}: when_matched_update needs set={{column: expression}}")
        self.clauses.append(Clause("update", condition, dict(set)))
        return self

    def when_matched_update_all(self, *, condition: Column | str | None = None) -> MergeBuilder:
        self.clauses.append(Clause("update", condition, None))
        return self

    def when_matched_delete(self, *, condition: Column | str | None = None) -> MergeBuilder:
        if any(c.kind == "delete" for c in self.clauses):
            raise HudiConfigError(f"merge into {self.path}: only one when_matched_delete clause is allowed "
                                  "(as in Hudi's MERGE INTO); combine the conditions with OR")
        self.clauses.append(Clause("delete", condition, None))
        return self

    def when_not_matched_insert(self, values: Mapping[str, Column | str], *,
                                condition: Column | str | None = None) -> MergeBuilder:
        if not values:
            raise HudiConfigError(f"merge into {self.path}: when_not_matched_insert needs values={{column: expr}}")
        self.clauses.append(Clause("insert", condition, dict(values)))
        return self

    def when_not_matched_insert_all(self, *, condition: Column | str | None = None) -> MergeBuilder:
        self.clauses.append(Clause("insert", condition, None))
        return self

    def execute(self, options: Mapping[str, Any] | None = None) -> WriteResult:
        """Run the merge as one upsert commit; the result's stats say how many rows were
        ``updated``, ``deleted`` and ``inserted``. The table lock is held from the read of the
        target to the write in single-writer mode (:func:`pyhudi.spark.dml.statement_hold`)."""
        with statement_hold(self.spark, self.path, options):
            return self._execute(options)

    def _execute(self, options: Mapping[str, Any] | None) -> WriteResult:
        what = f"merge into {self.path}"
        if not self.clauses:
            raise HudiConfigError(f"{what}: no when_... clause")
        target = open_target(self.spark, self.path, options, what)
        if target is None:
            raise HudiConfigError(f"{what}: the table has no schema yet; write it first (pyhudi.write)")
        payload = target.merge_spec.payload
        if payload in _FIELD_MERGING and any(c.kind == "update" for c in self.clauses):
            raise HudiUnsupportedError(
                f"{what}: the table merges records by {payload.rsplit('.', 1)[1]}, which "
                f"{_FIELD_MERGING[payload]}; Hudi's MERGE INTO writes a matched update as the clause assigns it "
                "(ExpressionPayload), which pyhudi's upsert by the table's payload would not: write the updated rows "
                "with pyhudi.write (merged by the table's payload), or use Apache Hudi's MERGE INTO")
        s, t = self.source_alias, self.target_alias
        src_cols = {c.lower(): c for c in self.source.columns}
        equated = self._equated(target, src_cols)
        target_rows = target.read(self.spark, self._pruning(target, equated), what)
        with resolving(what):
            source = self.source.alias(s)
            joined = source.join(target_rows.withColumn(_MATCHED, F.lit(True)).alias(t),
                                 on=expression(self.on, f"{what}, on"), how="left")
            matched = F.col(_MATCHED).isNotNull()
            action: Column | None = None
            for i, clause in enumerate(self.clauses):
                when = matched if clause.kind in ("update", "delete") else ~matched
                if clause.condition is not None:
                    when = when & expression(clause.condition, f"{what}, clause {i + 1} condition")
                action = F.when(when, F.lit(i)) if action is None else action.when(when, F.lit(i))
            assert action is not None
            joined = analysed(joined.withColumn(_ACTION, action), what)
            values = {c: self._value(c, target, src_cols, equated) for c in target.columns}
            stale = F.lit(False)
            ordering = target.ordering_field
            if ordering in target.columns:  # ExpressionPayload: a matched update never lowers the ordering value
                is_update = F.col(_ACTION).isin([i for i, c in enumerate(self.clauses) if c.kind == "update"])
                stored, new = F.col(f"{t}.`{ordering}`"), values[ordering]
                stale = is_update & stored.isNotNull() & ~F.coalesce(stored <= new, F.lit(False))
            is_delete = F.col(_ACTION).isin([i for i, c in enumerate(self.clauses) if c.kind == "delete"])
            kinds = F.lit(None).cast("string")  # (not element_at of an array: Spark folds a null index of a
            for kind in ("update", "delete", "insert"):  # one-element literal array to its element)
                indexes = [i for i, c in enumerate(self.clauses) if c.kind == kind]
                kinds = F.when(F.col(_ACTION).isin(indexes), F.lit(kind)).otherwise(kinds)
            rows = joined.where(F.col(_ACTION).isNotNull() | matched).select(
                *[v.alias(c) for c, v in values.items()], is_delete.alias(DELETE_FLAG), kinds.alias(_ACTION),
                stale.alias(_STALE), *self._key_of_target(target), *self._stored_keys(target, matched))
            rows = analysed(rows, what)
        with cached(rows) as rows:
            counts = self._tally(rows, target, check=any(c.kind != "insert" for c in self.clauses))
            if not (counts["updated"] or counts["deleted"] or counts["inserted"]):
                result = nothing_matched(self.path, "upsert", "no clause changes any row; nothing written")
                result.stats["not_updated_older"] = counts["not_updated_older"]
                return result
            data = rows.where(F.col(_ACTION).isNotNull() & ~F.col(_STALE)).drop(
                _ACTION, _STALE, *[c for c in rows.columns if c.startswith(_TKEY)])
            partial = self._partial_update_schema(target, counts)
            if partial is not None:
                target = replace(target, options={**target.options, C.WRITE_PARTIAL_UPDATE_SCHEMA.key: partial})
            result = write_rows(data, target, target.prepped("upsert") if target.auto_keys else "upsert", counts)
            result.stats["partial_update"] = partial is not None
            return result

    # -- the parts ---------------------------------------------------------------------------
    def _partial_update_schema(self, target: DmlTarget, counts: Mapping[str, int]) -> str | None:
        """The Avro schema of the columns the update clauses assign, when the updates are to be
        written as Hudi 1.x partial updates (log blocks of those columns, ``IS_PARTIAL=true``); None
        for whole records.

        Hudi's ``MergeIntoHoodieTableCommand`` writes them for an upsert to a merge-on-read table
        with ``hoodie.spark.sql.merge.into.partial.updates`` on (default true) and update clauses
        that do not assign every column (``areAllFieldsUpdated``), the schema being the assigned
        columns in table order (``getOrderedUpdatedFields``, ``generateProjectionSchema``). pyhudi
        writes them only where every reader merges them right, and whole records otherwise:
        table version 8+ (Hudi 1.x; a 0.x reader has no partial merge), a merge by ordering or commit
        time (Hudi's record mergers; a payload class has no ``partialMerge``), the ordering field
        among the assigned columns (a partial record without it cannot be ordered:
        ``HoodieSparkRecord.getOrderingValue``), and no row inserted (an insert must be written
        whole; Hudi's inserts go to new base files, pyhudi's may go to the same log block).
        """
        if not counts["updated"] or counts["inserted"]:
            return None
        table, cfg = target.table, HudiConfig.of(target.options)
        # the version the write leaves the table at: hoodie.write.table.version may move it first
        if table.table_type != MERGE_ON_READ or written_version(table, cfg) < 8:
            return None
        if not cfg.get(C.MERGE_INTO_PARTIAL_UPDATES):
            return None
        if target.merge_spec.payload not in (OVERWRITE_PAYLOAD, DEFAULT_PAYLOAD):
            return None
        updated: set[str] = set()
        for i, clause in enumerate(self.clauses):
            if clause.kind != "update":
                continue
            if clause.assignments is None:  # update *: every column
                return None
            updated |= {target.column(k, f"merge into {self.path}, clause {i + 1}") for k in clause.assignments}
        ordering = {target.ordering_field, *target.merge_spec.more_ordering_fields} - {None}
        if not updated or not ordering <= updated | (ordering - set(target.columns)):
            return None
        columns = [c for c in target.columns if c in updated]
        if len(columns) == len(target.columns):
            return None
        return table_avro_schema(arrow_schema(T.StructType([target.schema[c] for c in columns])), table.name)

    def _equated(self, target: DmlTarget, src_cols: Mapping[str, str]) -> dict[str, str]:
        """{target field: source column} of ``on``, checked as Hudi's MERGE INTO checks it. A table
        with auto-generated keys has no key to equate: any condition matches (Hudi: "pkless tables
        can have more complex conditions"), the target is read whole."""
        if target.auto_keys:
            return {}
        what = f"merge into {self.path}, on"
        on: Any = self.on
        text = on if isinstance(on, str) else on._jc.toString()  # a Column's expression as SQL text
        try:
            jexpr = self.spark._jsparkSession.sessionState().sqlParser().parseExpression(text)
        except Exception as exc:
            raise HudiConfigError(f"{what}: cannot parse {text!r}: {str(exc).splitlines()[0]}") from None
        pairs: dict[str, str] = {}
        for conjunct in _conjuncts(jexpr):
            if conjunct.getClass().getSimpleName() != "EqualTo":
                raise HudiConfigError(f"{what}: only equalities joined by AND are allowed (Hudi's MERGE INTO "
                                      f"matches by record key); found {conjunct.sql()}")
            sides = [_attribute(conjunct.left()), _attribute(conjunct.right())]
            if any(side is None or len(side) != 2 for side in sides):
                raise HudiConfigError(f"{what}: each equality must be of the form {self.target_alias}.<field> = "
                                      f"{self.source_alias}.<column>; found {conjunct.sql()}")
            by_alias = {side[0]: side[1] for side in sides if side is not None}
            if set(by_alias) != {self.target_alias, self.source_alias}:
                raise HudiConfigError(f"{what}: each equality must compare {self.target_alias}.<field> with "
                                      f"{self.source_alias}.<column>; found {conjunct.sql()}")
            field = target.column(by_alias[self.target_alias], what)
            if field not in target.record_key_fields and field not in target.partition_fields:
                raise HudiConfigError(
                    f"{what}: {field} is neither a record key nor a partition path field; Hudi's MERGE INTO "
                    "matches records by key, so put conditions on other columns in the clauses' conditions")
            column = src_cols.get(by_alias[self.source_alias].lower())
            if column is None:
                raise HudiConfigError(f"{what}: the source has no column {by_alias[self.source_alias]!r}")
            pairs[field] = column
        missing = [f for f in target.record_key_fields if f not in pairs]
        if missing:
            raise HudiConfigError(f"{what}: must equate every record key field of the table; missing "
                                  f"{', '.join(missing)} (Hudi's MERGE INTO matches on the primary key)")
        return pairs

    def _pruning(self, target: DmlTarget, equated: Mapping[str, str]) -> Column | None:
        """A filter on the target that keeps every row the source can match: the source's
        partition values, each with the range of its record keys (one small aggregate job)."""
        parts = [f for f in target.partition_fields if f in equated]
        keys = target.record_key_fields
        key = keys[0] if len(keys) == 1 else None
        aggs = []
        if key is not None:
            src_key = F.col(f"`{equated[key]}`").cast(target.schema[key].dataType)
            aggs = [F.min(src_key).alias("lo"), F.max(src_key).alias("hi")]
        if not parts and not aggs:
            return None
        casts = [F.col(f"`{equated[p]}`").cast(target.schema[p].dataType).alias(p) for p in parts]
        grouped = self.source.select(*casts, *([F.col(f"`{equated[key]}`").alias("__k")] if key else []))
        if key is not None:
            grouped = grouped.withColumn("__k", F.col("__k").cast(target.schema[key].dataType))
            aggs = [F.min("__k").alias("lo"), F.max("__k").alias("hi")]
        rows = (grouped.groupBy(*parts).agg(*aggs) if aggs else grouped.select(*parts).distinct()) \
            .limit(MAX_PRUNING_PARTITIONS + 1).collect()
        if not rows:
            return F.lit(False)
        if len(rows) > MAX_PRUNING_PARTITIONS:
            parts = []
            rows = grouped.agg(*aggs).collect() if aggs else []
            if not rows:
                return None
        alternatives = []
        for r in rows:
            terms = [(F.col(f"`{p}`") == F.lit(r[p])) if r[p] is not None else F.col(f"`{p}`").isNull()
                     for p in parts]
            if key is not None:
                if r["lo"] is None:  # only null keys: they match nothing
                    continue
                terms.append(F.col(f"`{key}`").between(F.lit(r["lo"]), F.lit(r["hi"])))
            alternatives.append(_all(terms))
        if not alternatives:
            return F.lit(False)
        out = alternatives[0]
        for alt in alternatives[1:]:
            out = out | alt
        return out

    def _value(self, column: str, target: DmlTarget, src_cols: Mapping[str, str],
               equated: Mapping[str, str]) -> Column:
        """The value ``column`` is written with: per clause, its assignment, the source column of
        the same name (``*``; for a key or partition field, the source column ``on`` equates it
        with, as Hudi's MERGE INTO derives the key of the source), the target's value (matched
        rows) or null (inserts)."""
        what = f"merge into {self.path}"
        s, t = self.source_alias, self.target_alias
        dtype = target.schema[column].dataType
        stored = F.col(f"{t}.`{column}`")
        fixed = column in target.record_key_fields or column in target.partition_fields
        unordered = {target.ordering_field, *target.merge_spec.stored_order_fields()} - {None}
        value: Column | None = None
        for i, clause in enumerate(self.clauses):
            assigned = {target.column(k, f"{what}, clause {i + 1}"): v for k, v in (clause.assignments or {}).items()}
            if clause.kind == "delete":  # without its ordering values: a hard delete under every payload
                v = F.lit(None).cast(dtype) if column in unordered else stored
            elif clause.kind == "update" and fixed:
                if column in assigned:
                    target.check_assignable(column, f"{what}, clause {i + 1}")
                v = stored
            elif clause.assignments is not None:
                v = expression(assigned[column], f"{what}, clause {i + 1}, column {column}") \
                    if column in assigned else (stored if clause.kind == "update" else F.lit(None))
            else:  # update_all / insert_all
                name = equated.get(column) or src_cols.get(column.lower())
                if name is None:
                    raise HudiConfigError(f"{what}: clause {i + 1} ({clause.kind} *) takes every column from the "
                                          f"source, which has no column {column!r}")
                v = F.col(f"{s}.`{name}`")
            v = v.cast(dtype)
            value = F.when(F.col(_ACTION) == i, v) if value is None else value.when(F.col(_ACTION) == i, v)
        assert value is not None
        return value

    def _stored_keys(self, target: DmlTarget, matched: Column) -> list[Column]:
        """On a table with auto-generated keys: the matched row's stored key and partition path
        (the write is prepped), and the mark of rows to key as new records (inserts), as Hudi's
        MERGE INTO projects the target's meta columns for a table without a record key field
        (``MergeIntoHoodieTableCommand``: "for pkless table, we need to project the meta columns")."""
        if not target.auto_keys:
            return []
        t = self.target_alias
        return [*[F.col(f"{t}.`{c}`").alias(c) for c in target.stored_key_columns], (~matched).alias(GENERATE_KEY)]

    def _key_of_target(self, target: DmlTarget) -> list[Column]:
        """The matched target row's key fields (with its partition fields; the stored key where
        keys are generated), for the cardinality check."""
        t = self.target_alias
        return [F.when(F.col(_MATCHED).isNotNull(), F.col(f"{t}.`{f}`")).alias(f"{_TKEY}{i}")
                for i, f in enumerate(_target_key_fields(target))]

    def _tally(self, rows: DataFrame, target: DmlTarget, *, check: bool) -> dict[str, int]:
        """How many rows each kind of clause changes, in one Spark job that also finds a target row
        several source rows match: refused when ``check`` (SQL MERGE's cardinality rule; Spark's
        own MERGE raises MERGE_CARDINALITY_VIOLATION), before anything is written."""
        keys = [c for c in rows.columns if c.startswith(_TKEY)]
        kind, stale = F.col(_ACTION), F.col(_STALE)

        def number(cond: Column) -> Column:
            return F.sum(F.when(cond, 1).otherwise(0))

        per_target = rows.groupBy(*keys).agg(
            F.count(F.lit(1)).alias("n"), number((kind == "update") & ~stale).alias("updated"),
            number(kind == "delete").alias("deleted"), number(kind == "insert").alias("inserted"),
            number((kind == "update") & stale).alias("not_updated_older"))
        twice = F.when(F.col(keys[0]).isNotNull() & (F.col("n") > 1), F.struct(F.col("n"), *[F.col(k) for k in keys]))
        names = ("updated", "deleted", "inserted", "not_updated_older")
        total = per_target.agg(*[F.sum(n).alias(n) for n in names], F.max(twice).alias("twice")).collect()[0]
        if check and total["twice"] is not None:
            dup = total["twice"]
            named = ", ".join(f"{f}={dup[k]!r}" for f, k in zip(_target_key_fields(target), keys, strict=True))
            raise HudiKeyError(f"merge into {self.path}: the target row {named} is matched by "
                               f"{dup['n']} source rows; a MERGE may change each target row once: "
                               "de-duplicate the source")
        return {n: int(total[n] or 0) for n in names}


def _target_key_fields(target: DmlTarget) -> list[str]:
    """The fields that name a target row: its key and partition fields, or the stored key where
    keys are generated."""
    fields = target.stored_key_columns[:1] if target.auto_keys else [*target.record_key_fields,
                                                                      *target.partition_fields]
    return list(dict.fromkeys(fields))


def merge(spark: SparkSession, path: str, source: DataFrame, *, on: str | Column, source_alias: str = "s",
          target_alias: str = "t") -> MergeBuilder:
    """A ``MERGE INTO`` of ``source`` into the Hudi table at ``path`` (see :class:`MergeBuilder`)."""
    return MergeBuilder(spark, path, source, on=on, source_alias=source_alias, target_alias=target_alias)


def _conjuncts(expr: Any) -> list[Any]:
    if expr.getClass().getSimpleName() == "And":
        return _conjuncts(expr.left()) + _conjuncts(expr.right())
    return [expr]


def _attribute(expr: Any) -> tuple[str, ...] | None:
    """The name parts of an unresolved column reference (``t.id`` -> ("t", "id")), else None."""
    if expr.getClass().getSimpleName() != "UnresolvedAttribute":
        return None
    parts = expr.nameParts()
    return tuple(str(parts.apply(i)) for i in range(parts.length()))


def _all(terms: list[Column]) -> Column:
    out = F.lit(True) if not terms else terms[0]
    for term in terms[1:]:
        out = out & term
    return out
