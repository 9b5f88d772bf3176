"""Prepped writes, and update/delete/merge on tables with auto-generated record keys.

What Apache Hudi does, from its source (master of mid-2024):

* A table written without a record key field has keys ``<instant>_<partition>_<row>`` (see
  tests/test_auto_keys.py). Such a table is changed through *prepped* writes: rows that carry their
  stored ``_hoodie_record_key`` and ``_hoodie_partition_path`` and are written by them, without the
  key generator (``HoodieCreateRecordUtils.getHoodieKeyAndMaybeLocationFromAvroRecord``).
* ``HoodieWriterUtils.canDoPreppedWrites``: a DataFrame ``upsert`` / ``delete`` on a table without a
  record key field whose rows carry ``_hoodie_record_key`` becomes ``UPSERT_PREPPED`` /
  ``DELETE_PREPPED``; ``HoodieSparkSqlWriter.deduceOperation`` makes an unset operation bulk_insert only
  when the rows carry no ``_hoodie_record_key``.
* ``SparkRDDWriteClient.upsertPreppedRecords`` / ``deletePrepped`` / ``insertPreppedRecords`` commit
  with operation type ``UPSERT_PREPPED`` / ``DELETE_PREPPED`` / ``INSERT_PREPPED``;
  ``DataSourceOptions.OPERATION`` lists ``upsert_prepped``, ``insert_prepped``, ``delete_prepped``.
* ``UpdateHoodieTableCommand`` / ``DeleteHoodieTableCommand`` (``hoodie.spark.sql.optimized.writes.enable``)
  write the matched rows with their meta columns and ``_hoodie.spark.sql.writes.prepped``: committed as
  ``UPSERT_PREPPED`` / ``DELETE_PREPPED``; record keys never change.
* ``MergeIntoHoodieTableCommand``: on a table without a primary key the merge condition may be any
  expression ("pkless tables can have more complex conditions"), the target's meta columns are projected
  and ``_hoodie.spark.sql.merge.into.prepped`` is set: matched rows keep their stored key, inserts get
  new keys (``HoodieSparkKeyGeneratorFactory``); the client runs a plain ``upsert``, so the commit says
  ``UPSERT``.
* ``KeyGeneratorType.AUTO_RECORD`` names ``AutoRecordGenWrapperKeyGenerator``, which
  ``HoodieSparkKeyGeneratorFactory.createKeyGenerator`` wraps around the table's key generator itself;
  its only constructor takes the wrapped generator, so the option cannot build it: refused.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from conftest import hudi_rs_rows
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

import pyhudi
from pyhudi.errors import HudiConfigError, HudiKeyError, HudiLockError, HudiUnsupportedOptionError

KEY = re.compile(r"^(\d{17})_(\d+)_(\d+)$")
SCHEMA = "x long, region string, v long"
REGIONS = ["p0", "p1"]


def options(table_type: str, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "prepped", "hoodie.datasource.write.partitionpath.field": "region",
            "hoodie.datasource.write.table.type": table_type, **extra}


def operation_types(path: str | Path) -> list[str]:
    table = pyhudi.HudiTable(str(path))
    assert table.timeline.pending() == []
    return [table.timeline.commit_metadata(i).operation_type for i in table.timeline.completed_writes()]


def stored(rows: list[dict]) -> dict[str, tuple]:
    """{record key: (partition path, x, region, v)}; keys unique."""
    out = {r["_hoodie_record_key"]: (r["_hoodie_partition_path"], r["x"], r["region"], r["v"]) for r in rows}
    assert len(out) == len(rows)
    return out


def table_state(spark, path: str) -> dict[str, tuple]:
    return stored([r.asDict() for r in pyhudi.read(spark, path).collect()])


class Model:
    """The table as {stored record key: (partition path, x, region, v)}; ``x`` is unique, so the
    statements' predicates name rows by it."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple] = {}
        self.next_x = 0
        self.broken: str | None = None

    def fresh(self, n: int) -> list[tuple]:
        out = [(x, REGIONS[x % 2], x * 10) for x in range(self.next_x, self.next_x + n)]
        self.next_x += n
        return out

    def learn(self, state: dict[str, tuple], instant: str, new_x: set[int]) -> None:
        """Take the keys the write of ``instant`` generated for the rows ``new_x``: each is Hudi's
        ``<instant>_<partition>_<row>``, and the rows the model knew keep theirs."""
        for key, row in state.items():
            if key in self.rows:
                continue
            m = KEY.match(key)
            assert m and m.group(1) == instant, key
            assert row[1] in new_x, (key, row)
            self.rows[key] = row
        assert {r[1] for r in self.rows.values()} >= new_x

    def keys_of(self, xs: set[int]) -> list[str]:
        return [k for k, r in self.rows.items() if r[1] in xs]


@pytest.fixture(scope="module", params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def modelled(request, spark, tmp_path_factory):
    """One table per type with auto-generated keys and its model, changed by every example."""
    path = str(tmp_path_factory.mktemp("prepped") / request.param)
    model = Model()
    first = model.fresh(8)
    result = pyhudi.write(spark.createDataFrame(first, SCHEMA).repartition(2), path, options(request.param))
    model.learn(table_state(spark, path), result.instant_time, {r[0] for r in first})
    return path, request.param, model


_XS = st.sets(st.integers(0, 30), max_size=5)
_OPS = st.one_of(
    st.tuples(st.just("insert"), st.integers(1, 4)),
    st.tuples(st.just("update"), _XS, st.integers(1, 5)),
    st.tuples(st.just("delete"), _XS),
    st.tuples(st.just("merge"), _XS, st.integers(0, 3), st.booleans()),
    st.tuples(st.just("upsert_prepped"), _XS, st.integers(1, 5)),
)


def _in(xs: set[int]) -> str:
    return f"x IN ({', '.join(map(str, sorted(xs)))})" if xs else "false"


def apply(spark, path: str, table_type: str, model: Model, op: tuple) -> str | None:
    """Run ``op`` on the table and the model; the operation type the commit must record (None: no commit)."""
    kind = op[0]
    if kind == "insert":
        new = model.fresh(op[1])
        result = pyhudi.write(spark.createDataFrame(new, SCHEMA), path,
                              {**options(table_type), "hoodie.datasource.write.operation": "insert"})
        model.learn(table_state(spark, path), result.instant_time, {r[0] for r in new})
        return "INSERT"
    if kind in ("update", "upsert_prepped"):
        xs, add = op[1], op[2]
        if kind == "update":
            result = pyhudi.update(spark, path, where=_in(xs), set={"v": f"v + {add}"})
        else:  # rows read with their meta columns, changed, written back as Hudi's DataFrame prepped upsert
            rows = pyhudi.read(spark, path).where(_in(xs)).withColumn("v", F.col("v") + add)
            if rows.count() == 0:
                return None
            result = pyhudi.write(rows, path, {**options(table_type), "hoodie.datasource.write.operation": kind})
        for key in model.keys_of(xs):
            p, x, region, v = model.rows[key]
            model.rows[key] = (p, x, region, v + add)
        return "UPSERT_PREPPED" if result.instant_time else None
    if kind == "delete":
        result = pyhudi.delete(spark, path, where=_in(op[1]))
        for key in model.keys_of(op[1]):
            del model.rows[key]
        return "DELETE_PREPPED" if result.instant_time else None
    xs, n_new, delete = {r[1] for r in model.rows.values()} & op[1], op[2], op[3]  # (x stays unique)
    new = model.fresh(n_new)
    source = [(x, REGIONS[x % 2], 1000 + x) for x in sorted(xs)] + [(x, r, v) for x, r, v in new]
    builder = pyhudi.merge(spark, path, spark.createDataFrame(source, SCHEMA), on="t.x = s.x AND t.v >= 0")
    builder = (builder.when_matched_delete(condition="s.x % 2 = 1") if delete else builder) \
        .when_matched_update(set={"v": "s.v"}).when_not_matched_insert_all()
    result = builder.execute()
    for key in model.keys_of(xs):
        p, x, region, _ = model.rows[key]
        if delete and x % 2 == 1:
            del model.rows[key]
        else:
            model.rows[key] = (p, x, region, 1000 + x)
    if result.instant_time is None:
        return None
    if new:
        model.learn(table_state(spark, path), result.instant_time, {r[0] for r in new})
    return "UPSERT"  # Hudi's MERGE INTO: the client's plain upsert


# stateful across examples (one table per type), so no shrinking: a failure is replayed as drawn
@settings(max_examples=6, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(op=_OPS)
def test_statements_and_prepped_writes_on_generated_keys_match_the_model(spark, modelled, op):
    path, table_type, model = modelled
    if model.broken:
        pytest.fail(f"an earlier example failed: {model.broken}")
    try:
        before = operation_types(path)
        expected = apply(spark, path, table_type, model, op)
        after = operation_types(path)
        assert after == before + ([expected] if expected else []), op
        state = table_state(spark, path)
        assert state == model.rows  # same keys (never changed by an update), same values
        assert stored(hudi_rs_rows(path)) == model.rows
    except BaseException as exc:
        model.broken = f"{op!r}: {type(exc).__name__}: {exc}"
        raise


@pytest.fixture
def auto_table(spark, tmp_path):
    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame([(x, REGIONS[x % 2], x) for x in range(6)], SCHEMA), path,
                 options("MERGE_ON_READ"))
    return path


def test_an_upsert_or_delete_of_rows_with_their_stored_key_is_prepped(spark, auto_table):
    """``canDoPreppedWrites``: the default operation (upsert, not bulk_insert: ``deduceOperation``
    sees ``_hoodie_record_key``) and ``delete`` of rows read from the table."""
    path = auto_table
    before = table_state(spark, path)
    result = pyhudi.write(pyhudi.read(spark, path).where("x < 2").withColumn("v", F.lit(-1).cast("long")), path,
                          options("MERGE_ON_READ"))
    assert result.operation == "upsert_prepped"
    result = pyhudi.write(pyhudi.read(spark, path).where("x = 5"), path,
                          {**options("MERGE_ON_READ"), "hoodie.datasource.write.operation": "delete"})
    assert result.operation == "delete_prepped"
    assert operation_types(path)[1:] == ["UPSERT_PREPPED", "DELETE_PREPPED"]
    expected = {k: (p, x, r, -1 if x < 2 else v) for k, (p, x, r, v) in before.items() if x != 5}
    assert table_state(spark, path) == expected == stored(hudi_rs_rows(path))


def test_insert_prepped_writes_the_keys_the_rows_carry(spark, auto_table):
    path = auto_table
    rows = spark.createDataFrame([("k-1", "p1", 100, "p1", 7)],
                                 "_hoodie_record_key string, _hoodie_partition_path string, x long, region string, "
                                 "v long")
    result = pyhudi.write(rows, path,
                          {**options("MERGE_ON_READ"), "hoodie.datasource.write.operation": "insert_prepped"})
    assert result.operation == "insert_prepped"
    assert operation_types(path)[-1] == "INSERT_PREPPED"
    assert stored(hudi_rs_rows(path))["k-1"] == ("p1", 100, "p1", 7)


@pytest.mark.parametrize("drop", ["_hoodie_record_key", "_hoodie_partition_path"])
def test_a_prepped_write_without_its_meta_columns_is_refused_with_nothing_written(spark, auto_table, drop):
    path = auto_table
    before = operation_types(path)
    rows = pyhudi.read(spark, path).where("x = 1").drop(drop)
    with pytest.raises(HudiConfigError, match=f"prepped upsert .* lack {drop}"):
        pyhudi.write(rows, path, {**options("MERGE_ON_READ"), "hoodie.datasource.write.operation": "upsert_prepped"})
    assert operation_types(path) == before


def test_a_prepped_row_without_a_stored_key_fails_and_is_rolled_back(spark, auto_table):
    path = auto_table
    before = table_state(spark, path)
    rows = pyhudi.read(spark, path).where("x = 1").withColumn("_hoodie_record_key", F.lit(None).cast("string"))
    with pytest.raises(HudiKeyError, match="_hoodie_record_key is null or empty in some rows of a prepped write"):
        pyhudi.write(rows, path, {**options("MERGE_ON_READ"), "hoodie.datasource.write.operation": "upsert_prepped"})
    assert table_state(spark, path) == before
    assert operation_types(path) == ["BULK_INSERT"]


def test_a_plain_upsert_on_generated_keys_stays_refused(spark, auto_table):
    """Without the stored key Hudi would give the rows new keys and insert them again."""
    with pytest.raises(pyhudi.errors.HudiUnsupportedError, match="upsert_prepped"):
        pyhudi.write(spark.createDataFrame([(1, "p1", 3)], SCHEMA), auto_table,
                     {**options("MERGE_ON_READ"), "hoodie.datasource.write.operation": "upsert"})


@pytest.mark.parametrize("value", ["AUTO_RECORD", "AUTO_RECORD_AVRO"])
def test_the_auto_record_key_generator_type_is_refused_with_hudis_reason(spark, tmp_path, value):
    with pytest.raises(HudiUnsupportedOptionError, match="AutoRecordGenWrapper.*KeyGenerator.*recordkey.field unset"):
        pyhudi.write(spark.createDataFrame([(1, "p1", 3)], SCHEMA), str(tmp_path / "t"),
                     {**options("COPY_ON_WRITE"), "hoodie.datasource.write.keygenerator.type": value})
    assert not (tmp_path / "t").exists()


def test_a_statement_holds_the_lock_from_its_read_in_single_writer_mode(spark, tmp_path, monkeypatch):
    """A writer that commits between a statement's read and its write would have its change
    overwritten by rows computed from the older snapshot (single-writer mode checks no conflicts).
    The statement holds the table lock from its read: a second writer cannot commit meanwhile (here
    it gives up at once; by default it waits its turn), and the table keeps both changes once it
    writes after the statement."""
    from pyhudi.spark import dml

    path = str(tmp_path / "t")
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "x",
            "hoodie.datasource.write.partitionpath.field": "region", "hoodie.datasource.write.precombine.field": "v"}
    pyhudi.write(spark.createDataFrame([(1, "p1", 10)], SCHEMA), path, opts)
    other = {**opts, "hoodie.write.lock.wait_time_ms": "100", "hoodie.write.lock.client.num_retries": "0"}
    concurrent = spark.createDataFrame([(1, "p1", 50)], SCHEMA)  # another writer sets v=50
    outcome: list[BaseException | None] = []
    original = dml.DmlTarget.read

    def read_then_race(self, *args, **kwargs):
        rows = original(self, *args, **kwargs)
        rows.count()  # the statement has read v=10

        def racer() -> None:
            try:
                pyhudi.write(concurrent, path, other)
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 -- recorded for the assertion
                outcome.append(exc)

        thread = threading.Thread(target=racer)
        thread.start()
        thread.join()
        return rows

    monkeypatch.setattr(dml.DmlTarget, "read", read_then_race)
    pyhudi.update(spark, path, where="x = 1", set={"v": "v + 1"})
    monkeypatch.undo()
    assert len(outcome) == 1 and isinstance(outcome[0], HudiLockError), outcome
    assert [r["v"] for r in hudi_rs_rows(path)] == [11]
    assert operation_types(path) == ["UPSERT", "UPSERT_PREPPED"]  # an UPDATE is prepped on any table in Hudi
    pyhudi.write(concurrent, path, opts)  # its turn after the statement
    assert [r["v"] for r in hudi_rs_rows(path)] == [50]


def test_prepped_rows_go_to_their_stored_file_groups_without_an_index_lookup(spark, tmp_path):
    """Hudi's prepped writes take each record's location from ``_hoodie_file_name``
    (``HoodieCreateRecordUtils``) and do not tag (``SparkUpsertPreppedCommitActionExecutor``): no
    index statistics, where a keyed upsert of the same rows looks them up."""
    path = str(tmp_path / "t")
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "x",
            "hoodie.datasource.write.partitionpath.field": "region", "hoodie.datasource.write.precombine.field": "v"}
    pyhudi.write(spark.createDataFrame([(x, REGIONS[x % 2], x) for x in range(4)], SCHEMA), path, opts)
    keyed = pyhudi.write(spark.createDataFrame([(1, "p1", 5)], SCHEMA), path, opts)
    assert "index" in keyed.stats
    rows = pyhudi.read(spark, path).where("x IN (1, 2)").withColumn("v", F.col("v") + 100)
    prepped = pyhudi.write(rows, path, {**opts, "hoodie.datasource.write.operation": "upsert_prepped"})
    assert "index" not in prepped.stats
    assert operation_types(path) == ["UPSERT", "UPSERT", "UPSERT_PREPPED"]
    assert sorted((r["x"], r["v"]) for r in hudi_rs_rows(path)) == [(0, 0), (1, 105), (2, 102), (3, 3)]


def test_prepped_rows_of_a_replaced_file_group_are_refused(spark, auto_table):
    """Rows read before an overwrite name a file group that is gone: writing into it would hide the
    change, so the write is refused and rolled back."""
    path = auto_table
    stale = spark.createDataFrame([r.asDict() for r in pyhudi.read(spark, path).where("region = 'p0'").collect()])
    pyhudi.write(spark.createDataFrame([(10, "p0", 1)], SCHEMA), path,
                 {**options("MERGE_ON_READ"), "hoodie.datasource.write.operation": "insert_overwrite"})
    before = table_state(spark, path)
    with pytest.raises(HudiConfigError, match="file groups that are no longer in .* read the rows again"):
        pyhudi.write(stale, path, {**options("MERGE_ON_READ"), "hoodie.datasource.write.operation": "upsert_prepped"})
    assert table_state(spark, path) == before
    assert operation_types(path) == ["BULK_INSERT", "INSERT_OVERWRITE"]
