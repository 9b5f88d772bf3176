"""Reads prune before Spark plans: partitions by their paths, base files by footer statistics."""

from __future__ import annotations

import datetime as dt
import math
import os

import pytest
from conftest import hudi_rs_rows
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

import pyhudi
from pyhudi.demo import daily_batch, drone_options, readings
from pyhudi.spark.filters import to_predicate
from pyhudi.storage import Storage

SMALL_FILES = {"hoodie.parquet.max.file.size": "60000", "hoodie.parquet.bloom.filter.enabled": "false"}


@pytest.fixture(scope="module")
def many_files(spark, tmp_path_factory):
    """Three days, each in many small files of disjoint key ranges."""
    path = str(tmp_path_factory.mktemp("many") / "t")
    pyhudi.write(readings(spark, 0, 3, 20), path, drone_options(**SMALL_FILES, **{
        "hoodie.datasource.write.operation": "bulk_insert"}))
    return path


def rows_of(df) -> list[tuple]:
    def plain(v):  # NaN never equals itself: compare its name
        return "NaN" if isinstance(v, float) and math.isnan(v) else v

    return sorted(tuple(map(plain, r)) for r in df.drop("_hoodie_file_name", "_hoodie_commit_seqno").collect())


def test_point_lookup_reads_one_file_of_a_many_file_partition(spark, many_files):
    day_files = pyhudi.HudiTable(many_files).file_system_view().latest_base_files("2024-01-02")
    assert len(day_files) >= 5
    key = "202401021130_007"
    df = pyhudi.read(spark, many_files, filters=F.col("key") == key)
    assert len(df.inputFiles()) == 1
    assert [r["key"] for r in df.collect()] == [key]
    assert [r["key"] for r in hudi_rs_rows(many_files) if r["key"] == key] == [key]
    assert pyhudi.read(spark, many_files, filters="key = 'nope'").inputFiles() == []
    # without data skipping, every file of the table is read (no partition column in the filter)
    unskipped = pyhudi.read(spark, many_files, {"hoodie.enable.data.skipping": "false"}, filters=F.col("key") == key)
    assert len(unskipped.inputFiles()) == len(pyhudi.HudiTable(many_files).file_system_view().latest_base_files())
    assert [r["key"] for r in unskipped.collect()] == [key]


@pytest.mark.parametrize("metadata_table", [True, False])
def test_partition_filters_list_only_matching_partitions(spark, many_files, monkeypatch, metadata_table):
    """With the metadata table no data partition is listed; without it, only the matching one."""
    listed: list[str] = []
    original = Storage.list_files
    monkeypatch.setattr(Storage, "list_files", lambda self, rel: listed.append(self.full(rel)) or original(self, rel))
    if not metadata_table:
        monkeypatch.setattr(pyhudi.HudiTable, "metadata_listing", lambda self: None)
    df = pyhudi.read(spark, many_files, filters="day = '2024-01-02' AND altitude_m > 300")
    data = {os.path.relpath(p, many_files) for p in listed if "/.hoodie" not in p}
    assert data == (set() if metadata_table else {"2024-01-02"})  # and the timelines
    expected = pyhudi.read(spark, many_files).where("day = '2024-01-02' AND altitude_m > 300")
    assert rows_of(df) == rows_of(expected) and df.count() > 0


def test_reads_plan_without_spark_jobs(spark, many_files):
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("pyhudi-plan", "planning only")
    try:
        pyhudi.read(spark, many_files)
        pyhudi.read(spark, many_files, filters="day IN ('2024-01-01', '2024-01-03') AND key > '2024'")
        assert tracker.getJobIdsForGroup("pyhudi-plan") == []
    finally:
        spark.sparkContext.setJobGroup(None, None)


def test_filter_translation(spark):
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("n", T.IntegerType()),
                           T.StructField("d", T.DateType())])
    pred = to_predicate(spark, schema, "k = 'a' AND n > 2.5 AND d >= date'2024-01-02' AND n % 2 = 1")
    text = repr(pred)
    assert "Compare(column='k', op='=', value='a')" in text and "Compare(column='n', op='>', value=2)" in text
    assert "datetime.date(2024, 1, 2)" in text and "Unknown()" in text


FILTERS = [
    "n = 3", "n > 6", "n IS NULL", "NOT (n < 5)", "x > 5", "x < 0.5", "NOT (x < 5)", "x = 2.0", "s LIKE 'b%'",
    "s IN ('a', 'zz')", "d < date'2024-01-03'", "b", "NOT b", "n = 3 OR s = 'c'", "n + 1 = 4", "s <=> NULL",
]


def test_pruning_never_changes_results(spark, tmp_path):
    """Columns of many types, with nulls and NaN, in several files: every filter gives what Spark's
    own filter of the whole table gives."""
    path = str(tmp_path / "t")
    schema = T.StructType([T.StructField(n, t) for n, t in [
        ("key", T.StringType()), ("part", T.StringType()), ("n", T.IntegerType()), ("x", T.DoubleType()),
        ("s", T.StringType()), ("d", T.DateType()), ("b", T.BooleanType())]])
    values = [(None, math.nan, None, None, None), (1, 1.0, "a", dt.date(2024, 1, 1), True),
              (3, 2.0, "b", dt.date(2024, 1, 2), False), (5, math.nan, "bb", dt.date(2024, 1, 3), True),
              (7, 9.0, "c", None, None), (9, -1.0, "d", dt.date(2024, 1, 5), False)]
    opts = {"hoodie.table.name": "types", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.operation": "insert",
            "hoodie.parquet.small.file.limit": "0"}
    for i, group in enumerate([values[:2], values[2:4], values[4:]]):  # one file per insert
        rows = [Row(key=f"k{i}{j}", part="p", n=v[0], x=v[1], s=v[2], d=v[3], b=v[4]) for j, v in enumerate(group)]
        pyhudi.write(spark.createDataFrame(rows, schema), path, opts)
    assert len(pyhudi.HudiTable(path).file_system_view().latest_base_files()) == 3
    whole = pyhudi.read(spark, path)
    assert sorted(r["key"] for r in whole.collect()) == sorted(r["key"] for r in hudi_rs_rows(path))
    for f in FILTERS:
        assert rows_of(pyhudi.read(spark, path, filters=f)) == rows_of(whole.where(f)), f


def test_merge_on_read_point_lookup_sees_log_records(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = drone_options(**SMALL_FILES, **{"hoodie.datasource.write.table.type": "MERGE_ON_READ"})
    pyhudi.write(readings(spark, 0, 2, 10), path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    pyhudi.write(daily_batch(spark, 2, 10), path, {**opts, "hoodie.datasource.write.operation": "upsert"})
    corrected = "202401020000_003"  # minute 0 of day 2: corrected by the upsert, in a log file
    for key in (corrected, "202401020001_003", "202401030000_003"):
        got = pyhudi.read(spark, path, filters=F.col("key") == key).collect()
        expected = [r for r in hudi_rs_rows(path) if r["key"] == key]
        assert [(r["key"], r["status"]) for r in got] == [(r["key"], r["status"]) for r in expected]
    assert pyhudi.read(spark, path, filters=F.col("key") == corrected).first()["status"] == "corrected"


def test_merge_on_read_slices_skipped_by_log_record_ranges(spark, tmp_path):
    """A slice whose base file its footer rules out is read only when one of its log records may
    match the filter (the ranges of its log records): results as Spark's filter of the whole table
    and as hudi-rs, and no log side in the plan when no log record can match."""
    path = str(tmp_path / "t")
    schema = T.StructType([T.StructField(n, t) for n, t in [
        ("key", T.StringType()), ("part", T.StringType()), ("n", T.IntegerType()), ("x", T.DoubleType()),
        ("s", T.StringType())]])
    opts = {"hoodie.table.name": "logs", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.parquet.small.file.limit": "0",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.datasource.write.operation": "insert"}
    for i in range(3):  # one file per insert: n in [10 i, 10 i + 1], s in 'f<i>a'..'f<i>b'
        rows = [Row(key=f"k{i}{j}", part="p", n=10 * i + j, x=float(j), s=f"f{i}{'ab'[j]}") for j in range(2)]
        pyhudi.write(spark.createDataFrame(rows, schema), path, opts)
    updates = [Row(key="k00", part="p", n=100, x=math.nan, s="zz"), Row(key="k10", part="p", n=-5, x=None, s=None)]
    pyhudi.write(spark.createDataFrame(updates, schema), path, {**opts, "hoodie.datasource.write.operation": "upsert"})
    view = pyhudi.HudiTable(path).file_system_view()
    assert sum(1 for s in view.latest_slices() if s.log_files) == 2
    whole = pyhudi.read(spark, path)
    stored = hudi_rs_rows(path)
    assert sorted(r["key"] for r in whole.collect()) == sorted(r["key"] for r in stored)
    filters = ["n > 50", "n = 0", "n < 0", "n = 10", "n = 11", "n > 500", "n IS NULL", "s = 'zz'", "s > 'y'",
               "s = 'f0a'", "x > 5", "x IS NULL", "key = 'k00'", "key = 'k21'", "n = 21 OR n = 100"]
    for f in filters:
        for _ in range(2):  # the first read ranges the log records, the second uses the ranges kept
            assert rows_of(pyhudi.read(spark, path, filters=f)) == rows_of(whole.where(f)), f
    assert [r["key"] for r in pyhudi.read(spark, path, filters="n > 50").collect()] == ["k00"]
    assert [r["key"] for r in stored if r["n"] is not None and r["n"] > 50] == ["k00"]
    for f, logs in (("n > 500", False), ("key = 'k21'", False), ("s = 'f2a'", False), ("n > 50", True),
                    ("s = 'f0a'", True)):  # (f0a: the base file of k00 may match, its log record must remove it)
        plan = pyhudi.read(spark, path, filters=f)._jdf.queryExecution().executedPlan().toString()
        assert ("_pyhudi_log_" in plan) == logs, (f, plan)
    # every base file ruled out: the query is the log side alone, no empty frame unioned to it
    leaves = pyhudi.read(spark, path, filters="n > 50")._jdf.queryExecution().analyzed().collectLeaves()
    outputs = [leaves.apply(i).output().toString() for i in range(leaves.size())]
    assert outputs and all("_pyhudi_l" in o for o in outputs), outputs
