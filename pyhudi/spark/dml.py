"""Predicate DML on Spark: ``UPDATE ... SET ... WHERE`` and ``DELETE ... WHERE`` as one Hudi commit.

Each statement reads the rows it changes and writes them back through the ordinary write pipeline
(:func:`pyhudi.spark.writer.write`) as one instant, as Hudi's Spark SQL commands do
(``UpdateHoodieTableCommand``: the table's rows filtered by the condition, the assigned columns
replaced, written as an ``upsert``; ``DeleteHoodieTableCommand``: the matching rows written with
operation ``delete``). The read prunes before anything is scanned: :func:`pyhudi.spark.reader.read`
turns the condition into partition pruning and data skipping (column statistics), and applies the
whole condition to the rows of the files it keeps. The merge builder is :mod:`pyhudi.spark.dml_merge`.

Decisions, each following Hudi where Hudi decides:

* Record key and partition path fields cannot be assigned: Hudi refuses it since HUDI-8823
  (``UpdateHoodieTableCommand`` validates the assignments, apache/hudi#12587), because a changed
  key is another record and a changed partition would leave the old record in place. Meta columns
  (``_hoodie_*``) are not assignable either (Hudi strips them from the written rows).
* The ordering (precombine) field can be assigned. The write uses the table's own payload, as
  ``ProvidesHoodieConfig.buildHoodieConfig`` does for an UPDATE: with ``DefaultHoodieRecordPayload``
  (event-time ordering) an updated row whose ordering value is smaller than the stored one loses the
  merge (``DefaultHoodieRecordPayload.needUpdatingPersistedRecord``: the stored value must be <= the
  incoming one) and the record keeps its old values; with the default overwrite payload it wins.
  The payload is the table's where ``hoodie.properties`` records it (merge-on-read tables); on a
  copy-on-write table pyhudi records none, so pass ``hoodie.datasource.write.payload.class`` in
  ``options`` as its writes do.
* ``where=None`` changes every row of the table (as ``UPDATE t SET ...`` without ``WHERE``).
* When no row matches, nothing is written and no instant is created; the result has
  ``instant_time=None`` and a ``note``. (Hudi's SQL would write an empty commit,
  ``hoodie.allow.empty.commit``; pyhudi does not make instants that change nothing.)
* The matched rows are cached in the executors for the write (never collected to the driver): the
  write reads them several times (index lookup, sizing, files) while it writes the table they came
  from.
* The rows are written by prepped writes, as Hudi's commands write them with
  ``hoodie.spark.sql.optimized.writes.enable`` (its default, and the only way for a table with
  auto-generated record keys): read with their ``_hoodie_record_key`` and ``_hoodie_partition_path``
  and written back by them (``_hoodie.spark.sql.writes.prepped``), committed as ``UPSERT_PREPPED`` /
  ``DELETE_PREPPED`` (``SparkRDDWriteClient.upsertPreppedRecords`` / ``deletePrepped``); keys never
  change. (Setting that option is refused: pyhudi does not implement the non-prepped statement.)
* In single-writer mode the statement holds the table lock from its read to its commit
  (:func:`statement_hold`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiConfigError, HudiSchemaError
from pyhudi.io.avro_schema import FILE_NAME, META_FIELDS
from pyhudi.read.payloads import MergeSpec
from pyhudi.spark.reader import read, spark_schema
from pyhudi.spark.storage_conf import table_storage
from pyhudi.spark.write_options import PREPPED_COLUMNS, PREPPED_SUFFIX
from pyhudi.spark.writer import write
from pyhudi.table.table import HudiTable
from pyhudi.transaction.lock import operation_hold
from pyhudi.write.columns import IS_DELETE
from pyhudi.write.result import WriteResult

log = logging.getLogger("pyhudi")

#: options that would make the DML's read something other than the latest snapshot
_READ_ONLY_OPTIONS = (C.QUERY_TYPE, C.AS_OF_INSTANT, C.BEGIN_INSTANT, C.END_INSTANT)
#: the column of the rows a statement writes that marks deletes: the write pipeline's own flag,
#: which :func:`pyhudi.spark.prepare.prepare` honours in an upsert and the table schema leaves out
#: (where a ``_hoodie_is_deleted`` column would become a table column)
DELETE_FLAG = IS_DELETE


@dataclass(frozen=True)
class DmlTarget:
    """The table a statement changes: its data columns (Spark types) and the fields Hudi forbids
    assigning."""

    path: str
    table: HudiTable
    schema: T.StructType  # data columns, no meta columns
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    precombine_field: str | None
    #: the field merges order records by (None: the later write wins, e.g. COMMIT_TIME_ORDERING)
    ordering_field: str | None
    options: dict[str, Any]
    #: how the table merges records (its payload, or the one the options name where a copy-on-write
    #: table of version 6 records none)
    merge_spec: MergeSpec = MergeSpec(None)
    #: the table has auto-generated record keys (no record key field)
    auto_keys: bool = False

    @property
    def stored_key_columns(self) -> list[str]:
        """The meta columns a statement carries from the rows it read to the rows it writes: the
        stored record key and partition path, which a prepped write is keyed by, and the file name,
        whose file group it writes to without an index lookup."""
        return [*PREPPED_COLUMNS, FILE_NAME]

    def prepped(self, operation: str) -> str:
        """``operation`` (upsert or delete) as the prepped write an ``UPDATE`` or ``DELETE`` is in
        Hudi: ``UpdateHoodieTableCommand`` and ``DeleteHoodieTableCommand`` write the rows with their
        meta columns and ``_hoodie.spark.sql.writes.prepped`` under
        ``hoodie.spark.sql.optimized.writes.enable`` (default true), committed as ``UPSERT_PREPPED`` /
        ``DELETE_PREPPED`` (``SparkRDDWriteClient.upsertPreppedRecords`` / ``deletePrepped``)."""
        return f"{operation}{PREPPED_SUFFIX}"

    @property
    def columns(self) -> list[str]:
        return self.schema.fieldNames()

    def column(self, name: str, what: str) -> str:
        """The table column ``name`` denotes (Spark's case-insensitive resolution); an error naming
        ``what`` otherwise."""
        if name in META_FIELDS:
            raise HudiConfigError(f"{what}: {name} is a Hudi meta column, which a statement cannot assign")
        for c in self.columns:
            if c == name or c.lower() == name.lower():
                return c
        raise HudiSchemaError(f"{what}: the table {self.path} has no column {name!r} "
                              f"(columns: {', '.join(self.columns)})")

    def check_assignable(self, name: str, what: str) -> str:
        """``name`` resolved, refused when it is a record key or partition path field (HUDI-8823)."""
        col = self.column(name, what)
        if col in self.record_key_fields:
            raise HudiConfigError(f"{what}: {col} is a record key field of {self.path}; a record key cannot be "
                                  "updated (Hudi refuses it too): delete the record and insert one with the new key")
        if col in self.partition_fields:
            raise HudiConfigError(f"{what}: {col} is a partition path field of {self.path}; it cannot be updated "
                                  "(Hudi refuses it too): delete the record and insert it with the new value")
        return col

    def read(self, spark: SparkSession, where: Column | str | None, what: str) -> DataFrame:
        """The latest snapshot's rows ``where`` matches, pruned by partition and data skipping,
        without meta columns but the stored key ones (:attr:`stored_key_columns`); an unresolvable
        condition is a :class:`HudiSchemaError`."""
        with resolving(what):  # (the condition is planned as soon as it prunes)
            df = read(spark, self.path, self.options, filters=where)
            df = df.select(*[F.col(f"`{c}`") for c in self.columns + self.stored_key_columns])
        return analysed(df, what)


def open_target(spark: SparkSession, path: str, options: Mapping[str, Any] | None, what: str) -> DmlTarget | None:
    """The table at ``path`` (None when no write has given it a schema yet); options that are not a
    snapshot's, or that set the operation, are refused."""
    opts = dict(options or {})
    cfg = HudiConfig.of(opts)
    for opt in _READ_ONLY_OPTIONS:
        if cfg.is_set(opt) and not (opt is C.QUERY_TYPE and cfg.get(opt) == "snapshot"):
            raise HudiConfigError(f"{what} reads the latest snapshot: remove option {opt.key}")
    if cfg.is_set(C.OPERATION):
        raise HudiConfigError(f"{what} chooses its write operation itself: remove option {C.OPERATION.key}")
    table = HudiTable(table_storage(spark, path, opts))
    arrow = table.arrow_schema()
    if arrow is None:
        return None
    full = spark_schema(spark, table, arrow=arrow)  # (a read would plan every file to learn it)
    assert full is not None
    schema = T.StructType([f for f in full.fields if f.name not in META_FIELDS])
    tc = table.config
    payload = tc.payload_class or cfg.get(C.PAYLOAD_CLASS)
    spec = MergeSpec.of(tc.merge_ordering_field, payload)
    return DmlTarget(path=path, table=table, schema=schema, record_key_fields=tc.record_key_fields,
                     partition_fields=tc.partition_fields, precombine_field=tc.precombine_field,
                     ordering_field=tc.merge_ordering_field, options=opts, merge_spec=spec,
                     auto_keys=not tc.record_key_fields)


@contextlib.contextmanager
def statement_hold(spark: SparkSession, path: str, options: Mapping[str, Any] | None) -> Iterator[None]:
    """The table lock held from a statement's read of the target to its write's last post-commit
    service, in single-writer mode (:func:`pyhudi.transaction.lock.operation_hold`; the write
    re-enters it). A statement's rows are computed from what it read: had another writer committed
    between the read and the write, the statement would write rows computed from the older snapshot
    over that commit's changes, and nothing would notice, since single-writer mode checks no
    conflicts. Hudi's single-writer mode assumes no other writer at all; pyhudi's writers take the
    lock for a whole operation, so a second one waits for the statement instead. Under optimistic
    concurrency control nothing is held, as for any write: conflicts are checked at commit against
    what completed after the write started (Hudi's SQL commands, too, list the target before their
    write client captures its last completed instant, ``BaseHoodieWriteClient.preWrite``)."""
    opts = dict(options or {})
    storage = table_storage(spark, path, opts)
    if not HudiTable.exists(storage):  # no table: the statement's read says so, and no lock leaves .hoodie/ behind
        yield
        return
    with operation_hold(storage, HudiConfig.of(opts)):
        yield


def analysed(df: DataFrame, what: str) -> DataFrame:
    """``df`` with its plan analysed now, so a column the statement names wrongly fails before any
    write starts (a :class:`HudiSchemaError` saying which)."""
    with resolving(what):
        df.schema  # noqa: B018 -- forces analysis
    return df


@contextlib.contextmanager
def resolving(what: str) -> Iterator[None]:
    """Spark's analysis errors in the block (a column or function the statement names that the
    table or source lacks; Spark 4 analyses eagerly) as a :class:`HudiSchemaError`."""
    try:
        yield
    except AnalysisException as exc:
        raise HudiSchemaError(f"{what}: {str(exc).splitlines()[0]}") from None


def expression(value: Column | str, what: str) -> Column:
    """A SQL expression string or a Column as a Column."""
    if isinstance(value, Column):
        return value
    if isinstance(value, str):
        try:
            return F.expr(value)
        except Exception as exc:  # a parse error
            raise HudiConfigError(f"{what}: cannot parse {value!r}: {str(exc).splitlines()[0]}") from None
    raise HudiConfigError(f"{what}: expected a SQL expression string or a Column, got {type(value).__name__}")


@contextlib.contextmanager
def cached(df: DataFrame) -> Iterator[DataFrame]:
    """``df`` cached in the executors while the statement writes, released after."""
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield df
    finally:
        df.unpersist()


def nothing_matched(path: str, operation: str, note: str) -> WriteResult:
    """The result of a statement that changed nothing: no instant."""
    return WriteResult(None, operation, path, {"note": note, "updated": 0, "deleted": 0, "inserted": 0})


def write_rows(df: DataFrame, target: DmlTarget, operation: str, counts: dict[str, int]) -> WriteResult:
    """Write ``df`` as one instant with ``operation``; the result carries the statement's counts."""
    result = write(df, target.path, {**target.options, C.OPERATION.key: operation})
    result.stats.update(counts)
    return result


def update(spark: SparkSession, path: str, *, where: Column | str | None,
           set: Mapping[str, Column | str], options: Mapping[str, Any] | None = None) -> WriteResult:  # noqa: A002
    """``UPDATE t SET col = expr, ... WHERE where`` on the Hudi table at ``path``, one upsert commit.

    ``set`` maps columns to SQL expression strings or Columns evaluated on the old row (``{"n":
    "n + 1"}``), cast to the column's type; the other columns keep their values. ``where`` is a SQL
    string or Column; None updates every row. Returns the write's result with ``updated`` (rows
    matched) in its stats; see the module docstring for what cannot be assigned and how the
    ordering field behaves.
    """
    what = f"update of {path}"
    if not set:
        raise HudiConfigError(f"{what}: set names no column")
    with statement_hold(spark, path, options):
        return _update(spark, path, set, where, options, what)


def _update(spark: SparkSession, path: str, set: Mapping[str, Column | str],  # noqa: A002
            where: Column | str | None, options: Mapping[str, Any] | None, what: str) -> WriteResult:
    target = open_target(spark, path, options, what)
    if target is None:
        return nothing_matched(path, "upsert", "the table has no rows yet; nothing updated")
    assigned: dict[str, Column] = {}
    for name, value in set.items():
        col = target.check_assignable(name, what)
        if col in assigned:
            raise HudiConfigError(f"{what}: column {col} is assigned twice")
        assigned[col] = expression(value, f"{what}, column {col}")
    rows = target.read(spark, where, what)
    with resolving(what):
        out = rows.select(*[assigned[c].cast(target.schema[c].dataType).alias(c) if c in assigned
                            else F.col(f"`{c}`") for c in target.columns + target.stored_key_columns])
    out = analysed(out, what)
    with cached(out) as out:
        matched = out.count()
        if matched == 0:
            return nothing_matched(path, "upsert", "no row matches the condition; nothing written")
        return write_rows(out, target, target.prepped("upsert"), {"updated": matched, "deleted": 0, "inserted": 0})


def delete(spark: SparkSession, path: str, *, where: Column | str | None,
           options: Mapping[str, Any] | None = None) -> WriteResult:
    """``DELETE FROM t WHERE where`` on the Hudi table at ``path``: the keys of the matching rows
    written with operation ``delete`` (Hudi's ``DeleteHoodieTableCommand``), one commit. ``where``
    None deletes every row. Returns the write's result with ``deleted`` (rows matched) in its stats.
    """
    what = f"delete from {path}"
    with statement_hold(spark, path, options):
        return _delete(spark, path, where, options, what)


def _delete(spark: SparkSession, path: str, where: Column | str | None, options: Mapping[str, Any] | None,
            what: str) -> WriteResult:
    target = open_target(spark, path, options, what)
    if target is None:
        return nothing_matched(path, "delete", "the table has no rows yet; nothing deleted")
    rows = target.read(spark, where, what)
    needed = [*target.record_key_fields, *target.partition_fields, *target.stored_key_columns]
    if target.precombine_field in target.columns:
        needed.append(target.precombine_field)
    out = rows.select(*[F.col(f"`{c}`") for c in dict.fromkeys(needed)
                        if c in target.columns or c in target.stored_key_columns])
    with cached(out) as out:
        matched = out.count()
        if matched == 0:
            return nothing_matched(path, "delete", "no row matches the condition; nothing written")
        return write_rows(out, target, target.prepped("delete"), {"updated": 0, "deleted": matched, "inserted": 0})
