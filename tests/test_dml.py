"""Predicate DML (``pyhudi.update``, ``pyhudi.delete``, ``pyhudi.merge``) against a pandas model.

Hudi's behaviour followed (cited in :mod:`pyhudi.spark.dml` and :mod:`pyhudi.spark.dml_merge`):

* ``UpdateHoodieTableCommand``: the filtered rows, assigned columns replaced (evaluated on the old
  row), written as an upsert with the table's payload (``ProvidesHoodieConfig.buildHoodieConfig``),
  so under ``DefaultHoodieRecordPayload`` an update lowering the ordering value loses
  (``DefaultHoodieRecordPayload.needUpdatingPersistedRecord``: stored <= incoming wins); record key
  and partition fields are not assignable (HUDI-8823, apache/hudi#12587).
* ``DeleteHoodieTableCommand``: the matching rows written with operation delete.
* ``MergeIntoHoodieTableCommand``: ``on`` equalities on the record key (all of it) and optionally
  partition fields, of the form ``t.id = s.id``; at most one delete clause
  (``checkDeletingActions``); ``ExpressionPayload.processMatchedRecord``: the first matching update
  clause applies unless the stored ordering value is larger (target kept), else the delete clause;
  inserts null the columns not assigned (``PartialAssignmentMode.NULL_VALUE``).

Every statement is one completed instant (none when nothing changes), and the table read by
pyhudi and by hudi-rs equals the model after each.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import hudi_rs_rows
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

import pyhudi
from pyhudi.errors import HudiConfigError, HudiKeyError, HudiSchemaError
from pyhudi.spark import reader

COLUMNS = ["id", "day", "ts", "v", "s"]
SCHEMA = "id int, day string, ts long, v double, s string"
DAYS = ["d0", "d1", "d2"]
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"


def options(table_type: str, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "dml", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type, **extra}


def initial_rows() -> list[tuple]:
    return [(i, DAYS[i % 3], 10, float(i), "x") for i in range(18)]


class Model:
    """The table as pandas rows keyed by (id, day): a non-global index keeps one record per key
    and partition."""

    def __init__(self, rows: list[tuple], *, options: dict[str, str]) -> None:
        self.df = pd.DataFrame(rows, columns=COLUMNS)
        #: what each statement is given: the payload class, which pyhudi records in hoodie.properties
        #: for merge-on-read tables only (so a statement on the COW table is told, as its writes are)
        self.options = {k: v for k, v in options.items() if "payload" in k}
        self.keep_larger = self.options.get("hoodie.datasource.write.payload.class") == DEFAULT_PAYLOAD
        self.broken: str | None = None

    def rows(self) -> list[tuple]:
        return sorted(tuple(None if pd.isna(v) else v for v in r) for r in self.df[COLUMNS].itertuples(index=False))


def table_rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in COLUMNS) for r in pyhudi.read(spark, path).collect())


def rs_rows(path: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in COLUMNS) for r in hudi_rs_rows(path))


def writes(path: str) -> list[str]:
    table = pyhudi.HudiTable(path)
    assert table.timeline.pending() == []
    return [i.timestamp for i in table.timeline.completed_writes()]


@pytest.fixture(scope="module", params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def modelled(request, spark, tmp_path_factory):
    """One table per type and its model, changed by every example of the model test: COW with
    ``DefaultHoodieRecordPayload`` (event-time ordering), MOR with the default overwrite payload."""
    table_type = request.param
    path = str(tmp_path_factory.mktemp("dml") / table_type)
    extra = {"hoodie.datasource.write.payload.class": DEFAULT_PAYLOAD} if table_type == "COPY_ON_WRITE" else {}
    opts = options(table_type, **extra)
    pyhudi.write(spark.createDataFrame(initial_rows(), SCHEMA), path, opts)
    return path, Model(initial_rows(), options=opts)


# -- predicates: (SQL over the table, the same over the model) -------------------------------------
def _predicates() -> st.SearchStrategy:
    c = st.integers(0, 20)
    day = st.sampled_from(DAYS)
    return st.one_of(
        st.just((None, lambda df: pd.Series(True, index=df.index))),
        day.map(lambda d: (f"day = '{d}'", lambda df, d=d: df["day"] == d)),
        c.map(lambda k: (f"v > {k}", lambda df, k=k: df["v"] > k)),
        st.tuples(st.integers(2, 4), st.integers(0, 1)).map(
            lambda p: (f"id % {p[0]} = {p[1]}", lambda df, p=p: df["id"] % p[0] == p[1])),
        st.tuples(day, c).map(lambda p: (f"day = '{p[0]}' AND ts < {p[1] + 5}",
                                         lambda df, p=p: (df["day"] == p[0]) & (df["ts"] < p[1] + 5))),
        st.just(("s = 'x'", lambda df: df["s"] == "x")),
    )


def _updates() -> st.SearchStrategy:
    return st.one_of(st.tuples(st.just("v"), st.integers(1, 5)), st.tuples(st.just("s"), st.sampled_from(["a", "b"])),
                     st.tuples(st.just("ts"), st.integers(-3, 3)))


def assignment(spec: tuple, model: Model):
    """``set`` of an update, and the same over the model's rows. The ordering field goes down only
    on the event-time table: on the merge-on-read table with the overwrite payload the outcome of
    a lower value would depend on whether the record is in a base or a log file (Hudi merges log
    records by ``preCombine``, the larger ordering value winning; the base file by
    ``combineAndGetUpdateValue``, the log winning), which the model leaves out."""
    col, k = spec
    if col == "v":
        return {"v": f"v + {k}"}, lambda df: {"v": df["v"] + k}
    if col == "s":
        return {"s": f"'{k}'"}, lambda df: {"s": pd.Series(k, df.index, dtype=object)}
    k = k if model.keep_larger else abs(k)
    return {"ts": f"ts + {k}", "s": "concat(s, '!')"}, lambda df: {"ts": df["ts"] + k, "s": df["s"].map(
        lambda x: None if x is None or pd.isna(x) else x + "!")}


def apply_update(model: Model, mask, new) -> None:
    df = model.df
    changed = df[mask].copy()
    for col, values in new(changed).items():
        changed[col] = values
    if model.keep_larger and "ts" in new(changed):  # DefaultHoodieRecordPayload: stored <= incoming wins
        changed = changed[changed["ts"] >= df.loc[changed.index, "ts"]]
    df.loc[changed.index, COLUMNS] = changed[COLUMNS]


# -- merge ---------------------------------------------------------------------------------------
_CONDITIONS = {  # clause condition -> over (source row, target row or None)
    None: lambda s, t: True,
    "s.op = 'D'": lambda s, t: s["op"] == "D",
    "s.ts > t.ts": lambda s, t: s["ts"] > t["ts"],
    "s.v < 50": lambda s, t: s["v"] < 50,
}


@st.composite
def _merges(draw):
    existing = draw(st.lists(st.integers(0, 17), max_size=5, unique=True))
    new_ids = draw(st.lists(st.integers(100, 110), max_size=3, unique=True))
    source = [(i, draw(st.sampled_from(DAYS)), draw(st.integers(5, 15)), float(draw(st.integers(0, 99))),
               "m", draw(st.sampled_from(["U", "D"]))) for i in existing + new_ids]
    on_day = draw(st.booleans())
    kinds = draw(st.lists(st.sampled_from(["update", "update_all", "delete", "insert", "insert_all"]),
                          min_size=1, max_size=4))
    clauses = []
    for kind in kinds:
        if kind == "delete" and any(k == "delete" for k, _ in clauses):
            continue
        conds = [None, "s.v < 50"] if kind.startswith("insert") else list(_CONDITIONS)
        clauses.append((kind, draw(st.sampled_from(conds))))
    return source, on_day, clauses


def run_merge(spark, path, source, on_day, clauses, *, options=None):
    src = spark.createDataFrame(source, SCHEMA + ", op string")
    builder = pyhudi.merge(spark, path, src, on="t.id = s.id" + (" AND t.day = s.day" if on_day else ""))
    for kind, cond in clauses:
        if kind == "update":
            builder.when_matched_update(set={"v": "s.v + 1000", "ts": "s.ts"}, condition=cond)
        elif kind == "update_all":
            builder.when_matched_update_all(condition=cond)
        elif kind == "delete":
            builder.when_matched_delete(condition=cond)
        elif kind == "insert":
            builder.when_not_matched_insert(values={"id": "s.id", "day": "s.day", "ts": "s.ts", "v": "s.v * 2"},
                                            condition=cond)
        else:
            builder.when_not_matched_insert_all(condition=cond)
    return builder.execute(options)


def model_merge(model: Model, source, on_day, clauses) -> dict[str, int]:
    df = model.df
    counts = {"updated": 0, "deleted": 0, "inserted": 0}
    drop, inserts = [], []
    for row in source:
        s = dict(zip([*COLUMNS, "op"], row, strict=True))
        match = df[(df["id"] == s["id"]) & ((df["day"] == s["day"]) if on_day else True)]
        targets = [(idx, t) for idx, t in match.iterrows()] or [(None, None)]
        for idx, t in targets:
            for kind, cond in clauses:
                if (t is None) != kind.startswith("insert"):
                    continue
                if cond is not None and "t." in cond and t is None:
                    continue
                if not _CONDITIONS[cond](s, t):
                    continue
                if kind == "delete":
                    drop.append(idx)
                    counts["deleted"] += 1
                elif kind.startswith("update"):
                    new = ({"v": s["v"] + 1000, "ts": s["ts"]} if kind == "update"
                           else {"ts": s["ts"], "v": s["v"], "s": s["s"]})
                    if new["ts"] >= t["ts"]:  # ExpressionPayload keeps a target with a larger ordering value
                        for col, value in new.items():
                            df.loc[idx, col] = value
                        counts["updated"] += 1
                else:
                    inserts.append((s["id"], s["day"], s["ts"], s["v"] * 2, None) if kind == "insert"
                                   else tuple(s[c] for c in COLUMNS))
                    counts["inserted"] += 1
                break
    df = df.drop(index=drop)
    if inserts:
        df = pd.concat([df, pd.DataFrame(inserts, columns=COLUMNS)], ignore_index=True)
    model.df = df.reset_index(drop=True)
    return counts


_OPS = st.one_of(
    st.tuples(st.just("update"), _predicates(), _updates()),
    st.tuples(st.just("delete"), _predicates()),
    st.tuples(st.just("merge"), _merges()),
)


# stateful across examples (one table per type), so no shrinking: a failure is replayed as drawn
@settings(max_examples=6, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(op=_OPS)
def test_dml_matches_the_pandas_model(spark, modelled, op):
    path, model = modelled
    if model.broken:  # (Hypothesis replays the failing example on the table the failure left)
        pytest.fail(f"an earlier example failed: {model.broken}")
    try:
        check_one_statement(spark, path, model, op)
    except BaseException as exc:
        model.broken = f"{op!r}: {type(exc).__name__}: {exc}"
        raise


def check_one_statement(spark, path: str, model: Model, op) -> None:
    before = writes(path)
    if op[0] == "update":
        (where, mask), (assign, new) = op[1], assignment(op[2], model)
        result = pyhudi.update(spark, path, where=where, set=assign, options=model.options)
        matched = int(mask(model.df).sum())
        apply_update(model, mask(model.df), new)
        assert result.stats["updated"] == matched
    elif op[0] == "delete":
        where, mask = op[1]
        result = pyhudi.delete(spark, path, where=where, options=model.options)
        matched = int(mask(model.df).sum())
        model.df = model.df[~mask(model.df)].reset_index(drop=True)
        assert result.stats["deleted"] == matched
    else:
        source, on_day, clauses = op[1]
        result = run_merge(spark, path, source, on_day, clauses, options=model.options)
        counts = model_merge(model, source, on_day, clauses)
        assert {k: result.stats[k] for k in counts} == counts
        matched = sum(counts.values())
    after = writes(path)
    if matched:  # exactly one instant, the result's
        assert after == [*before, result.instant_time]
    else:
        assert result.instant_time is None and after == before
    expected = model.rows()
    assert table_rows(spark, path) == expected
    assert rs_rows(path) == expected


# -- pruning ---------------------------------------------------------------------------------------
@pytest.fixture
def three_days(spark, tmp_path) -> str:
    """A copy-on-write table: d0 holds ids 0-9, d1 ids 100-109, d2 ids 200-209."""
    path = str(tmp_path / "t")
    rows = [(i + 100 * d, DAYS[d], 10, float(i), "x") for d in range(3) for i in range(10)]
    pyhudi.write(spark.createDataFrame(rows, SCHEMA), path, options("COPY_ON_WRITE"))
    return path


def corrupt_partition(path: str, day: str) -> None:
    for f in Path(path, day).glob("*.parquet"):
        f.write_bytes(b"not a parquet file")


def test_dml_of_one_partition_never_reads_another(spark, three_days):
    """The other partitions' files are garbage; statements on d0 succeed because nothing reads them."""
    corrupt_partition(three_days, "d2")
    corrupt_partition(three_days, "d1")
    pyhudi.update(spark, three_days, where="day = 'd0' AND id < 3", set={"v": "-v"})
    pyhudi.delete(spark, three_days, where=F_day0_and("id = 9"))
    src = spark.createDataFrame([(1, "d0", 11, 7.0, "m", "U"), (50, "d0", 11, 5.0, "m", "I")], SCHEMA + ", op string")
    res = (pyhudi.merge(spark, three_days, src, on="t.id = s.id AND t.day = s.day")
           .when_matched_update_all().when_not_matched_insert_all().execute())
    assert (res.stats["updated"], res.stats["inserted"]) == (1, 1)
    rows = sorted(tuple(r) for r in pyhudi.read(spark, three_days, filters="day = 'd0'").select(*COLUMNS).collect())
    assert rows == sorted([(0, "d0", 10, -0.0, "x"), (1, "d0", 11, 7.0, "m"), (2, "d0", 10, -2.0, "x")]
                          + [(i, "d0", 10, float(i), "x") for i in range(3, 9)] + [(50, "d0", 11, 5.0, "m")])
    assert len(writes(three_days)) == 4


def F_day0_and(cond: str) -> str:  # noqa: N802 -- reads as SQL
    return f"day = 'd0' AND {cond}"


def test_merge_on_the_key_alone_skips_files_by_key_range(spark, three_days, monkeypatch):
    """Without partition fields in ``on`` the source's key range prunes: the base files whose id
    statistics lie outside [100, 105] are not read (only d1's)."""
    read_files: list[str] = []
    original = reader.base_files_frame
    monkeypatch.setattr(reader, "base_files_frame",
                        lambda spark, table, bases, *a, **k: read_files.extend(b.path for b in bases)
                        or original(spark, table, bases, *a, **k))
    src = spark.createDataFrame([(100, "d1", 20, 1.0, "m", "U"), (105, "d1", 20, 2.0, "m", "U")],
                                SCHEMA + ", op string")
    res = pyhudi.merge(spark, three_days, src, on="t.id = s.id").when_matched_update_all().execute()
    assert res.stats["updated"] == 2
    assert read_files and all(p.startswith("d1/") for p in read_files)


# -- Hudi's rules and the error cases ---------------------------------------------------------------
def unchanged(spark, path):
    """A context manager asserting the table's rows and timeline are the same after the block."""
    import contextlib

    @contextlib.contextmanager
    def check():
        rows, instants = table_rows(spark, path), writes(path)
        yield
        assert table_rows(spark, path) == rows and writes(path) == instants

    return check()


@pytest.fixture(scope="module")
def small(spark, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("rules") / "t")
    pyhudi.write(spark.createDataFrame(initial_rows(), SCHEMA), path,
                 options("MERGE_ON_READ", **{"hoodie.datasource.write.payload.class": DEFAULT_PAYLOAD}))
    return path


@pytest.mark.parametrize(("kwargs", "error", "says"), [
    ({"set": {"nope": "1"}}, HudiSchemaError, "no column 'nope'"),
    ({"set": {"v": "nope + 1"}}, HudiSchemaError, "nope"),
    ({"set": {"id": "id + 1"}}, HudiConfigError, "record key"),
    ({"set": {"day": "'d9'"}}, HudiConfigError, "partition path"),
    ({"set": {"_hoodie_record_key": "'k'"}}, HudiConfigError, "meta column"),
    ({"set": {}}, HudiConfigError, "set names no column"),
    ({"set": {"v": "1"}, "where": "nope = 1"}, HudiSchemaError, "nope"),
    ({"set": {"v": "1"}, "options": {"as.of.instant": "20240101000000"}}, HudiConfigError, "as.of.instant"),
])
def test_refused_updates_leave_the_table_unchanged(spark, small, kwargs, error, says):
    kwargs = {"where": "id < 5", **kwargs}
    with unchanged(spark, small), pytest.raises(error, match=says):
        pyhudi.update(spark, small, **kwargs)


def test_refused_merges_leave_the_table_unchanged(spark, small):
    src = spark.createDataFrame([(1, "d1", 20, 1.0, "m", "U"), (1, "d1", 21, 2.0, "m", "U")], SCHEMA + ", op string")
    with unchanged(spark, small):
        with pytest.raises(HudiKeyError, match=r"id=1.*matched by 2 source rows"):
            pyhudi.merge(spark, small, src, on="t.id = s.id").when_matched_update_all().execute()
        one = src.limit(1)
        for on, says in [("t.v = s.v", "neither a record key"), ("t.day = s.day", "missing id"),
                         ("t.id = s.id OR t.id = s.ts", "only equalities"), ("t.id = s.id + 1", "of the form"),
                         ("t.id = s.nope", "no column 'nope'")]:
            with pytest.raises(HudiConfigError, match=says):
                pyhudi.merge(spark, small, one, on=on).when_matched_update_all().execute()
        with pytest.raises(HudiConfigError, match="record key"):
            pyhudi.merge(spark, small, one, on="t.id = s.id").when_matched_update(set={"id": "s.id"}).execute()
        with pytest.raises(HudiConfigError, match="only one when_matched_delete"):
            pyhudi.merge(spark, small, one, on="t.id = s.id").when_matched_delete().when_matched_delete()
        with pytest.raises(HudiConfigError, match="has no column 'ts'"):  # update * needs every column
            pyhudi.merge(spark, small, spark.createDataFrame([(1, "d1")], "id int, day string"),
                         on="t.id = s.id").when_matched_update_all().execute()


def test_merge_deletes_keep_the_schema_and_need_no_ordering(spark, small):
    """A matched delete deletes even when the source's ordering value is older
    (``ExpressionPayload``: the delete condition yields an empty record), and the delete flag
    does not become a table column."""
    src = spark.createDataFrame([(4, "d1", 1, 0.0, "m", "D")], SCHEMA + ", op string")
    res = pyhudi.merge(spark, small, src, on="t.id = s.id").when_matched_delete(condition="s.op = 'D'").execute()
    assert res.stats["deleted"] == 1
    assert 4 not in {r[0] for r in table_rows(spark, small)} and 4 not in {r[0] for r in rs_rows(small)}
    names = pyhudi.HudiTable(small).arrow_schema().names
    assert "_hoodie_is_deleted" not in names and not any(n.startswith("_pyhudi") for n in names)


def test_update_of_every_row_and_of_nothing(spark, tmp_path):
    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame(initial_rows()[:6], SCHEMA), path, options("COPY_ON_WRITE"))
    res = pyhudi.update(spark, path, where=None, set={"s": F.upper("s")})
    assert res.stats["updated"] == 6 and {r[4] for r in table_rows(spark, path)} == {"X"}
    nothing = pyhudi.delete(spark, path, where="v > 1000")
    assert nothing.instant_time is None and "nothing written" in nothing.stats["note"]
    assert len(writes(path)) == 2
    shutil.rmtree(path)


def test_merge_insert_all_takes_the_key_from_the_column_on_names(spark, small):
    """``on="t.id = s.sid"``: inserting ``*`` writes ``s.sid`` as the key (Hudi's MERGE INTO adds the
    key column to the source from the condition, ``MergeIntoHoodieTableCommand.projectedJoinedDataset``)."""
    src = spark.createDataFrame([(500, "d2", 30, 1.5, "n"), (6, "d0", 30, 2.5, "u")],
                                "sid int, day string, ts long, v double, s string")
    res = (pyhudi.merge(spark, small, src, on=F.expr("t.id = s.sid"))
           .when_matched_update(set={"v": F.col("s.v") * 10 + F.col("t.v")}).when_not_matched_insert_all().execute())
    assert (res.stats["updated"], res.stats["inserted"]) == (1, 1)
    rows = {r[0]: r for r in table_rows(spark, small)}
    # (an update of a merge-on-read table reading the target row, which Hudi's checkUpdatingActions refuses)
    assert rows[500] == (500, "d2", 30, 1.5, "n") and rows[6][3] == 25.0 + 6.0
    assert {r[0]: r for r in rs_rows(small)}[500] == rows[500]


@pytest.mark.parametrize("payload", [DEFAULT_PAYLOAD, None])
def test_an_update_lowering_the_ordering_value_follows_the_payload(spark, tmp_path, payload):
    """``DefaultHoodieRecordPayload.needUpdatingPersistedRecord``: the stored record stays when its
    ordering value is larger (a commit is still made, as Hudi's UPDATE makes one); with the overwrite
    payload the update wins."""
    path = str(tmp_path / "t")
    extra = {"hoodie.datasource.write.payload.class": payload} if payload else {}
    pyhudi.write(spark.createDataFrame(initial_rows()[:3], SCHEMA), path, options("COPY_ON_WRITE", **extra))
    res = pyhudi.update(spark, path, where="id = 1", set={"ts": "ts - 1", "s": "'lower'"}, options=extra)
    assert res.instant_time is not None and res.stats["updated"] == 1
    expected = (1, "d1", 10, 1.0, "x") if payload else (1, "d1", 9, 1.0, "lower")
    assert [r for r in table_rows(spark, path) if r[0] == 1] == [expected]
    assert [r for r in rs_rows(path) if r[0] == 1] == [expected]
