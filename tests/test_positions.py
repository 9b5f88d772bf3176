"""Replaced base rows as bitmaps (:mod:`pyhudi.read.positions`) and the scan filter made of them
(:mod:`pyhudi.spark.positions`): merge-on-read snapshots read without a join, the same rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from conftest import hudi_rs_rows, spark_jobs_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql import types as T
from test_model import SCHEMA

import pyhudi
from pyhudi.read.positions import row_bitmaps
from pyhudi.spark import merged
from pyhudi.spark.positions import replaced_filter

BASE = {
    "hoodie.table.name": "pos", "hoodie.datasource.write.recordkey.field": "key",
    "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
}

files = st.sampled_from([("fa", 100), ("fb", 100), ("fc", 7), ("fa", 7)])
replaced = st.lists(st.tuples(files, st.integers(0, 300)), max_size=60)


@settings(max_examples=60, deadline=None)
@given(rows=replaced, probes=st.lists(st.integers(-2, 400), max_size=40))
def test_bitmaps_hold_exactly_the_replaced_positions(rows, probes):
    ids = pa.array([f for (f, _s), _r in rows], pa.string())
    sizes = pa.array([s for (_f, s), _r in rows], pa.int64())
    positions = pa.chunked_array([pa.array([r for _f, r in rows], pa.int64())])
    bitmaps = row_bitmaps(ids, sizes, positions)
    want: dict[tuple[str, int], set[int]] = {}
    for key, r in rows:
        want.setdefault(key, set()).add(r)
    assert [(b.file_id, b.base_size) for b in bitmaps] == sorted(want)
    for b in bitmaps:
        held = want[(b.file_id, b.base_size)]
        assert b.rows == len(held) and len(b.words) == max(held) // 64 + 1
        at = np.array(sorted(held | set(probes)), dtype=np.int64)
        assert b.holds(at).tolist() == [int(p) in held for p in at]


def test_a_negative_position_is_refused():
    with pytest.raises(ValueError, match="negative"):
        row_bitmaps(pa.array(["f"]), pa.array([1]), pa.array([-1]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=replaced, names=st.booleans())
def test_the_scan_filter_is_true_for_the_replaced_rows_only(spark, rows, names):
    """Base rows at positions 0-320 of four files (two pairs of equal size; without names, the two
    whose sizes differ, as readers choose): the filter keeps to the bitmaps, tells files of equal
    size apart by name, and is false past a bitmap's end and for files without one."""
    chosen = [("fa", 100), ("fb", 100), ("fc", 7), ("fa", 7)] if names else [("fa", 100), ("fc", 7)]
    rows = [r for r in rows if r[0] in chosen]
    bitmaps = row_bitmaps(pa.array([f for (f, _s), _r in rows], pa.string()),
                          pa.array([s for (_f, s), _r in rows], pa.int64()),
                          pa.array([r for _f, r in rows], pa.int64()))
    base = [(fid, size, f"{fid}_1-0-1_001.parquet", pos) for fid, size in chosen for pos in range(0, 321, 5)]
    df = spark.createDataFrame(base, "fid string, size long, name string, pos long")
    cond = replaced_filter(bitmaps, size="size", row="pos", file_name="name" if names else None)
    got = sorted((r.fid, r.size, r.pos) for r in df.where(cond).collect())
    held = {(f, s, r) for (f, s), r in rows}
    assert got == sorted((f, s, p) for f, s, _n, p in base if (f, s, p) in held)


def test_no_bitmap_filters_nothing(spark):
    df = spark.createDataFrame([(1, 0)], "size long, pos long")
    assert df.where(replaced_filter([], size="size", row="pos", file_name=None)).count() == 0


def _rows(n: int, ts: int, part: str = "p1", gone: bool = False) -> list[tuple]:
    return [(f"k{i:04d}", part, ts, float(i * ts), gone) for i in range(n)]


def _write(spark, path, rows, op="upsert"):
    df = spark.createDataFrame(rows, SCHEMA)
    return pyhudi.write(df, str(path), {**BASE, "hoodie.datasource.write.operation": op})


def _snapshot(spark, path) -> dict[tuple[str, str], float]:
    rows = pyhudi.read(spark, str(path)).select("part", "key", "val").collect()
    return {(r["part"], r["key"]): r["val"] for r in rows}


def _oracle(path) -> dict[tuple[str, str], float]:
    return {(r["part"], r["key"]): r["val"] for r in hudi_rs_rows(path)}


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_mor_snapshots_drop_replaced_base_rows_without_a_join(spark, tmp_path):
    """Updates in log files of two partitions: the snapshot is read with the bitmap filter, matches
    hudi-rs, and a group-by runs no job more than the same group-by over the base files alone."""
    path = tmp_path / "t"
    _write(spark, path, _rows(300, 1) + _rows(200, 1, "p2"), op="bulk_insert")
    _write(spark, path, [r for r in _rows(300, 2) if int(r[0][1:]) % 7 == 0] + _rows(40, 2, "p2"))
    # the first plan of a snapshot runs no job (it joins); the positions come with the second plan
    first: list = []
    assert spark_jobs_of(spark, "pos-lazy", lambda: first.append(pyhudi.read(spark, str(path)))) == 0
    assert "Join" in _plan(first[0])
    got = _snapshot(spark, path)
    assert got == _oracle(path)
    assert len(got) == 500 and got[("p1", "k0007")] == 14.0 and got[("p1", "k0008")] == 8.0
    assert got[("p2", "k0008")] == 16.0 and got[("p2", "k0040")] == 40.0
    df = pyhudi.read(spark, str(path))
    assert "Join" not in _plan(df) and "shiftright" in _plan(df)
    grouped = spark_jobs_of(spark, "pos-mor", lambda: pyhudi.read(spark, str(path)).groupBy("part").count().collect())
    ro = {"hoodie.datasource.query.type": "read_optimized"}
    plain = spark_jobs_of(spark, "pos-ro",
                          lambda: pyhudi.read(spark, str(path), ro).groupBy("part").count().collect())
    assert grouped == plain
    # reads of one snapshot share a plan, not a frame: filtering one leaves the other as it was
    first, second = pyhudi.read(spark, str(path)), pyhudi.read(spark, str(path))
    assert first is not second and first.where(F.col("part") == "p2").count() == 200
    assert second.count() == 500 and pyhudi.read(spark, str(path)).where(F.col("part") == "p1").count() == 300
    # the same snapshot's merged frame is planned once: a second read builds no base-file frame
    built = []
    real = merged.merged_records
    try:
        merged.merged_records = lambda *a, **kw: built.append(1) or real(*a, **kw)  # type: ignore[assignment]
        assert _snapshot(spark, path) == got
    finally:
        merged.merged_records = real  # type: ignore[assignment]
    assert built == []
    # a new commit is a new snapshot
    _write(spark, path, [("k0008", "p1", 3, -8.0, False)])
    assert _snapshot(spark, path)[("p1", "k0008")] == -8.0


def test_deletes_pyhudi_writes_are_bitmaps_too(spark, tmp_path):
    """pyhudi's delete blocks carry no ordering value (``IntWrapper(0)``: the delete wins by commit
    order), so soft and hard deletes are replaced rows like updates; hudi-rs agrees. (Deletes whose
    ordering value decides, as Apache Hudi may write them, are joined:
    ``test_merged_read.test_spark_merge_equals_slice_merge``.)"""
    path = tmp_path / "t"
    _write(spark, path, _rows(50, 5), op="bulk_insert")
    _write(spark, path, [("k0001", "p1", 9, 0.0, True), ("k0002", "p1", 1, 0.0, True), ("k0003", "p1", 6, 3.0, False)])
    pyhudi.write(spark.createDataFrame([("k0004", "p1", 1, 0.0, False)], SCHEMA), str(path),
                 {**BASE, "hoodie.datasource.write.operation": "delete"})
    got = _snapshot(spark, path)
    assert got == _oracle(path)
    assert len(got) == 47 and got[("p1", "k0003")] == 3.0
    assert "Join" not in _plan(pyhudi.read(spark, str(path)))


def test_filtered_reads_of_a_snapshot_match(spark, tmp_path):
    """Point, range and partition filters over a snapshot with replaced rows: the rows the
    unfiltered read gives that pass the filter."""
    path = tmp_path / "t"
    _write(spark, path, _rows(120, 1) + _rows(120, 1, "p2"), op="bulk_insert")
    _write(spark, path, [r for r in _rows(120, 2) if int(r[0][1:]) % 3 == 0])
    everything = _snapshot(spark, path)
    assert everything == _oracle(path)
    for cond in (F.col("key") == "k0003", F.col("key") == "k0004", F.col("val") > 100.0, F.col("part") == "p2"):
        df = pyhudi.read(spark, str(path), filters=cond)
        want = {(r["part"], r["key"]): r["val"] for r in pyhudi.read(spark, str(path)).where(cond).collect()}
        assert {(r["part"], r["key"]): r["val"] for r in df.collect()} == want
    assert everything[("p1", "k0003")] == 6.0 and everything[("p1", "k0004")] == 4.0
    assert everything[("p2", "k0003")] == 3.0


def test_the_literal_is_a_primitive_array(spark):
    from pyhudi.spark.compat import long_array_literal

    values = np.array([0, -1, 2**62, -(2**63)], dtype=np.int64)
    col = long_array_literal(spark.sparkContext, values)
    (row,) = spark.range(1).select(col.alias("a")).collect()
    assert row.a == values.tolist()
    assert isinstance(spark.range(1).select(col.alias("a")).schema["a"].dataType, T.ArrayType)
