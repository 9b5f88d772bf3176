"""Data skipping without Spark: predicates against value ranges, footers, partition folders."""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from pyhudi.read.skipping import (
    And,
    ColumnRange,
    Compare,
    In,
    IsNotNull,
    IsNull,
    Not,
    Or,
    StartsWith,
    Unknown,
    exact,
    file_ranges,
    footers,
    may_match,
    prune_partition_paths,
    skip_files,
)
from pyhudi.storage import Storage


def rng(lo, hi, nulls=0, count=10, floating=False):
    return {"x": ColumnRange(lo, hi, nulls, count, floating)}


def test_comparisons_against_a_range():
    r = rng(10, 20)
    assert may_match(Compare("x", "=", 15), r) and not may_match(Compare("x", "=", 21), r)
    assert may_match(Compare("x", "<", 11), r) and not may_match(Compare("x", "<", 10), r)
    assert may_match(Compare("x", "<=", 10), r) and not may_match(Compare("x", ">", 20), r)
    assert may_match(Compare("x", ">=", 20), r) and not may_match(Compare("x", ">=", 21), r)
    assert may_match(Compare("x", "!=", 15), r) and not may_match(Compare("x", "!=", 7), rng(7, 7))
    assert may_match(In("x", (1, 12)), r) and not may_match(In("x", (1, 25)), r)
    assert not may_match(In("x", ()), r)
    assert may_match(StartsWith("x", "ab"), {"x": ColumnRange("aa", "ac", 0, 3)})
    assert not may_match(StartsWith("x", "ab"), {"x": ColumnRange("ac", "az", 0, 3)})
    assert not may_match(StartsWith("x", "ab"), {"x": ColumnRange("aa", "aaz", 0, 3)})


def test_nulls_and_not_are_three_valued():
    only_nulls = rng(None, None, nulls=10)
    assert not may_match(Compare("x", "=", 1), only_nulls)
    assert not may_match(Not(Compare("x", "=", 1)), only_nulls)  # NOT (null = 1) is null, not true
    assert may_match(IsNull("x"), only_nulls) and not may_match(IsNotNull("x"), only_nulls)
    assert not may_match(IsNull("x"), rng(1, 2)) and may_match(IsNotNull("x"), rng(1, 2))
    assert not may_match(Not(Compare("x", ">=", 0)), rng(1, 2))  # every value is >= 0
    assert may_match(Not(Compare("x", ">=", 2)), rng(1, 2))


def test_and_or_and_unknown_parts():
    r = {"x": ColumnRange(10, 20, 0, 5), "y": ColumnRange("a", "c", 0, 5)}
    assert not may_match(And((Compare("x", "=", 15), Compare("y", "=", "z"))), r)
    assert may_match(Or((Compare("x", "=", 99), Compare("y", "=", "b"))), r)
    assert may_match(And((Unknown(), Compare("x", "=", 15))), r)
    assert not may_match(And((Unknown(), Compare("x", "=", 99))), r)
    assert may_match(Compare("z", "=", 1), r)  # no range: keep
    assert may_match(Compare("x", "=", "15"), r)  # not comparable: keep


def test_nan_is_larger_than_any_number():
    # Spark orders NaN above every number; statistics leave NaN out, so a file whose max is 3
    # may still hold rows with x > 5
    floats = rng(1.0, 3.0, floating=True)
    assert may_match(Compare("x", ">", 5.0), floats) and may_match(Compare("x", ">=", 5.0), floats)
    assert not may_match(Compare("x", "<", 0.5), floats)
    assert may_match(Not(Compare("x", "<", 5.0)), floats)
    assert may_match(Compare("x", "=", 2.0), floats) and not may_match(Compare("x", "=", 9.0), floats)
    assert may_match(Compare("x", "<", math.nan), rng(1.0, 3.0, floating=True))  # NaN literal: not compared


values = st.one_of(st.none(), st.integers(-5, 5))
predicates = st.deferred(lambda: st.one_of(
    st.builds(Compare, st.just("x"), st.sampled_from(["=", "<", "<=", ">", ">=", "!="]), st.integers(-6, 6)),
    st.builds(In, st.just("x"), st.lists(st.integers(-6, 6), max_size=3).map(tuple)),
    st.builds(IsNull, st.just("x")), st.builds(IsNotNull, st.just("x")), st.just(Unknown()),
    st.builds(Not, predicates),
    st.builds(And, st.lists(predicates, min_size=1, max_size=3).map(tuple)),
    st.builds(Or, st.lists(predicates, min_size=1, max_size=3).map(tuple))))


def _sql(pred, v):
    """SQL's three-valued value of ``pred`` for x = v (None: null)."""
    if isinstance(pred, Unknown):
        return None if v is None else (v % 2 == 0)  # some function of the row skipping cannot see
    if isinstance(pred, IsNull):
        return v is None
    if isinstance(pred, IsNotNull):
        return v is not None
    if isinstance(pred, Not):
        inner = _sql(pred.child, v)
        return None if inner is None else not inner
    if isinstance(pred, (And, Or)):
        parts = [_sql(c, v) for c in pred.children]
        decided = False if isinstance(pred, And) else True
        if decided in parts:
            return decided
        return None if None in parts else not decided
    if v is None:
        return None
    if isinstance(pred, In):
        return v in pred.values
    return {"=": v == pred.value, "<": v < pred.value, "<=": v <= pred.value, ">": v > pred.value,
            ">=": v >= pred.value, "!=": v != pred.value}[pred.op]


@settings(max_examples=400, deadline=None)
@given(pred=predicates, rows=st.lists(values, min_size=1, max_size=6))
def test_skipping_never_drops_a_matching_row(pred, rows):
    present = [v for v in rows if v is not None]
    r = {"x": ColumnRange(min(present, default=None), max(present, default=None), len(rows) - len(present),
                          len(rows))}
    if any(_sql(pred, v) is True for v in rows):
        assert may_match(pred, r)


def test_file_ranges_and_skip_files(tmp_path):
    storage = Storage(str(tmp_path))
    for name, keys, day in (("a.parquet", ["k1", "k2"], dt.date(2024, 1, 1)), ("b.parquet", ["k5", "k9"], None)):
        table = pa.table({"key": keys, "n": [1, None], "day": pa.array([day, day], pa.date32())})
        pq.write_table(table, str(tmp_path / name), row_group_size=1)  # ranges span row groups
    ranges = file_ranges(footers(storage, ["a.parquet"])["a.parquet"])
    assert ranges["key"].min == "k1" and ranges["key"].max == "k2" and ranges["n"].null_count == 1
    assert ranges["day"].min == dt.date(2024, 1, 1)
    assert skip_files(storage, Compare("key", "=", "k6"), ["a.parquet", "b.parquet"]) == ["b.parquet"]
    assert skip_files(storage, IsNull("day"), ["a.parquet", "b.parquet"]) == ["b.parquet"]
    assert skip_files(storage, Compare("day", ">=", dt.date(2024, 1, 1)), ["a.parquet", "b.parquet"]) == \
        ["a.parquet"]


def test_partition_folders_pruned_level_by_level(tmp_path, monkeypatch):
    for d in ("year=2024/month=1", "year=2024/month=2", "year=2025/month=1", ".hoodie/x"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / ".hoodie_partition_metadata").write_text("")
    storage = Storage(str(tmp_path))
    listed = []
    original = storage.list_dirs
    monkeypatch.setattr(storage, "list_dirs", lambda rel: listed.append(rel) or original(rel))
    kept = prune_partition_paths(storage, Compare("year", "=", 2024), ("year", "month"), hive=True, encoded=False,
                                 parsers={"year": int, "month": int}, marker=".hoodie_partition_metadata")
    assert kept == ["year=2024/month=1", "year=2024/month=2"]
    assert "year=2025" not in listed  # ruled out by its first level, never listed
    both = And((Compare("year", "=", 2024), In("month", (2,))))
    assert prune_partition_paths(storage, both, ("year", "month"), hive=True, encoded=False,
                                 parsers={"year": int, "month": int}) == ["year=2024/month=2"]
    # folders that do not look like the fields: no pruning
    assert prune_partition_paths(storage, Compare("a", "=", 1), ("a", "b", "c"), hive=True, encoded=False,
                                 parsers={}) is None


def test_exact_range_of_a_null_partition():
    assert not may_match(Compare("x", "=", 1), {"x": exact(None)})
    assert may_match(IsNull("x"), {"x": exact(None)})
