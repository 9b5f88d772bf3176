"""``pyhudi.read(spark, p).filter(...)`` / ``.where(...)`` prune as ``filters=`` does and give its rows."""

from __future__ import annotations

import math

import pytest
from conftest import hudi_rs_rows
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import pyhudi
from pyhudi.demo import drone_options, readings
from pyhudi.spark import reader

SMALL_FILES = {"hoodie.parquet.max.file.size": "60000", "hoodie.parquet.bloom.filter.enabled": "false"}
#: (table type, partitioning, metadata table)
LAYOUTS = [("COPY_ON_WRITE", "day", True), ("COPY_ON_WRITE", "hive", False), ("COPY_ON_WRITE", "none", True),
           ("MERGE_ON_READ", "day", True), ("MERGE_ON_READ", "hive", False)]
KEY = "202401021130_001"


@pytest.fixture(scope="module", params=LAYOUTS, ids=lambda p: f"{p[0][:3]}-{p[1]}-{'mdt' if p[2] else 'nomdt'}")
def table(request, spark, tmp_path_factory):
    """Two days of three drones in small files; merge-on-read tables get an update in log files."""
    kind, partitioning, metadata = request.param
    path = str(tmp_path_factory.mktemp("filters") / "t")
    extra = {**SMALL_FILES, "hoodie.datasource.write.table.type": kind,
             "hoodie.metadata.enable": str(metadata).lower()}
    if metadata:
        extra["hoodie.metadata.index.column.stats.enable"] = "true"
    if partitioning == "hive":
        extra["hoodie.datasource.write.hive_style_partitioning"] = "true"
    if partitioning == "none":
        extra["hoodie.datasource.write.partitionpath.field"] = ""
        extra["hoodie.datasource.write.keygenerator.class"] = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    pyhudi.write(readings(spark, 0, 2, 3), path, drone_options(**extra, **{
        "hoodie.datasource.write.operation": "bulk_insert"}))
    if kind == "MERGE_ON_READ":
        update = readings(spark, 1, 1, 3, revision=1, every_nth_minute=60)
        pyhudi.write(update, path, drone_options(**extra, **{"hoodie.datasource.write.operation": "upsert"}))
    return path


def rows_of(df: DataFrame) -> list[tuple]:
    def plain(v):  # NaN never equals itself: compare its name
        return "NaN" if isinstance(v, float) and math.isnan(v) else v

    return sorted(tuple(map(plain, r)) for r in df.drop("_hoodie_commit_seqno").collect())


#: made once the session exists (a Column needs one)
FILTERS = [
    lambda: F.col("day") == "2024-01-02",
    lambda: "day = '2024-01-01' AND altitude_m > 300",
    lambda: F.col("key") == KEY,
    lambda: F.col("_hoodie_record_key") == KEY,
    lambda: "key > '202401020000' AND key < '202401020100'",
]


@pytest.mark.parametrize("condition", FILTERS, ids=["day", "day-and-column", "key", "meta-key", "key-range"])
def test_filter_equals_filters_argument_and_spark_filter(spark, table, condition):
    condition = condition()
    via_filter = pyhudi.read(spark, table).filter(condition)
    via_where = pyhudi.read(spark, table).where(condition)
    via_argument = pyhudi.read(spark, table, filters=condition)
    unpruned = reader.read(spark, table)
    assert not getattr(type(unpruned), "_pyhudi_replans", False)
    expected = rows_of(unpruned.where(condition))
    assert expected
    assert rows_of(via_filter) == rows_of(via_where) == rows_of(via_argument) == expected
    # the same files as filters= reads: partitions and files the filter rules out are not read
    assert sorted(via_filter.inputFiles()) == sorted(via_argument.inputFiles())
    everything = unpruned.inputFiles()
    assert len(via_filter.inputFiles()) < len(everything) or len(everything) == 1


def test_results_match_hudi_rs(spark, table):
    df = pyhudi.read(spark, table).where(F.col("day") == "2024-01-02")
    ours = sorted(r["key"] for r in df.select("key").collect())
    theirs = sorted(r["key"] for r in hudi_rs_rows(table) if r["day"] == "2024-01-02")
    assert ours == theirs and ours


def test_chained_filters_and_together(spark, table):
    chained = pyhudi.read(spark, table).where(F.col("day") == "2024-01-02").filter("altitude_m > 300") \
        .where(F.col("key") < "202401021200")
    once = pyhudi.read(spark, table, filters=(F.col("day") == "2024-01-02") & (F.col("altitude_m") > 300)
                       & (F.col("key") < "202401021200"))
    assert rows_of(chained) == rows_of(once)
    assert sorted(chained.inputFiles()) == sorted(once.inputFiles())
    # filters= and a later filter AND together too
    mixed = pyhudi.read(spark, table, filters="day = '2024-01-02'").where(F.col("key") == KEY)
    assert [r["key"] for r in mixed.collect()] == [KEY]
    assert sorted(mixed.inputFiles()) == sorted(pyhudi.read(spark, table, filters=(F.col("day") == "2024-01-02")
                                                             & (F.col("key") == KEY)).inputFiles())


def test_other_transformations_are_plain_spark(spark, table):
    df = pyhudi.read(spark, table)
    selected = df.select("key", "day", "altitude_m")
    assert not getattr(type(selected), "_pyhudi_replans", False)
    # a filter after a projection is Spark's own: correct rows, no pyhudi pruning
    later = selected.where(F.col("key") == KEY)
    assert [r["key"] for r in later.collect()] == [KEY]
    assert sorted(later.inputFiles()) == sorted(df.inputFiles())
    assert df.rdd.count() == df.count()


def test_cached_frame_filters_its_cached_rows(spark, table):
    df = pyhudi.read(spark, table).cache()
    try:
        filtered = df.where(F.col("key") == KEY)
        assert [r["key"] for r in filtered.collect()] == [KEY]
        assert sorted(filtered.inputFiles()) == sorted(df.inputFiles())  # the cached plan, all files
    finally:
        df.unpersist()


def test_datasource_where_matches(spark, table):
    if not hasattr(spark, "dataSource"):
        pytest.skip("spark.read.format('hudi') needs PySpark 4")
    pyhudi.register(spark)
    condition = (F.col("day") == "2024-01-02") & (F.col("key") == KEY)
    got = spark.read.format("hudi").load(table).where(condition)
    assert rows_of(got) == rows_of(pyhudi.read(spark, table, filters=condition))


def test_columns_taken_from_the_frame_prune_too(spark, table):
    """``df["day"]`` and ``df.day`` are bound to the frame's plan; the new read gets them by name."""
    df = pyhudi.read(spark, table)
    wanted = pyhudi.read(spark, table, filters=F.col("day") == "2024-01-02")
    for condition in (df["day"] == "2024-01-02", df.day == "2024-01-02"):
        got = df.where(condition)
        assert rows_of(got) == rows_of(wanted)
        assert sorted(got.inputFiles()) == sorted(wanted.inputFiles())
    # a Python UDF prunes nothing and still gives Spark's rows
    second = F.udf(lambda day: day == "2024-01-02", "boolean")
    assert rows_of(df.where(second(F.col("day")))) == rows_of(wanted)


def test_filter_after_a_commit_keeps_the_frames_snapshot(spark, tmp_path):
    """A frame read before a commit shows the snapshot it was planned on, filtered or not: its
    filter does not plan again against the newer timeline."""
    path = str(tmp_path / "t")
    opts = drone_options(**SMALL_FILES, **{"hoodie.datasource.write.operation": "bulk_insert"})
    pyhudi.write(readings(spark, 0, 1, 3), path, opts)
    before = pyhudi.read(spark, path)
    old_rows = rows_of(before.where(F.col("day") == "2024-01-01"))
    assert old_rows
    pyhudi.write(readings(spark, 0, 1, 3, revision=1, every_nth_minute=60), path,
                 drone_options(**SMALL_FILES, **{"hoodie.datasource.write.operation": "upsert"}))
    after_commit = before.where(F.col("day") == "2024-01-01")
    assert not getattr(after_commit, "_pyhudi_read", None)  # Spark's plain filter of the old listing
    assert rows_of(after_commit) == old_rows
    fresh = pyhudi.read(spark, path).where(F.col("day") == "2024-01-01")
    assert fresh._pyhudi_read is not None and rows_of(fresh) != old_rows
    theirs = {(r["key"], r["ts"]) for r in hudi_rs_rows(path) if r["day"] == "2024-01-01"}
    assert {(r["key"], r["ts"]) for r in fresh.select("key", "ts").collect()} == theirs
