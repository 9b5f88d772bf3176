"""Reads on a store Spark cannot open (``s3a://`` on moto's S3 server, Spark without hadoop-aws):
base files are read by pyarrow in executors, everywhere pyhudi hands files to Spark (queries, index
lookups, clusterings, commit streams, ``spark.read.format("hudi")``), with the rows hudi-rs reads
and the Spark types Spark's own reader gives on a local copy of the same table; local paths keep
Spark's native reader."""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from collections import Counter
from decimal import Decimal

import pyspark
import pytest
from conftest import hudi_rs_rows
from pyspark.sql import functions as F
from pyspark.sql import types as T

import pyhudi
from pyhudi.spark import storage_conf
from pyhudi.spark.index import simple_lookup
from pyhudi.spark.storage_conf import spark_can_open, table_storage
from pyhudi.table.table import HudiTable

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("v", T.DoubleType())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}
PYSPARK_4 = int(pyspark.__version__.split(".")[0]) >= 4


def rs_rows(server, path: str, **read: object) -> list[dict]:
    """:func:`conftest.hudi_rs_rows` on this server (``as_of``, ``start``, ``end``, ``read_optimized``)."""
    return hudi_rs_rows(path, storage_options=server.storage_options, **read)  # type: ignore[arg-type]


def requests_by_object(server, mark: int, bucket: str) -> Counter[tuple[str, str]]:
    """(method, key) of the requests for objects of ``bucket`` since ``mark``, from the server's log."""
    server.mark()
    with open(server.log_path) as f:
        f.seek(mark)
        text = f.read()
    return Counter(re.findall(rf'"(GET|HEAD) /{re.escape(bucket)}/([^?" ]+)', text))


def objects_read(server, mark: int, bucket: str) -> set[str]:
    return {key for method, key in requests_by_object(server, mark, bucket) if method == "GET"}


def key_rows(rows) -> list[tuple]:
    return sorted((r["id"], r["p"], r["ts"], r["v"]) for r in rows)


def collected(df) -> list[tuple]:
    return key_rows(r.asDict() for r in df.collect())


def plan_of(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def history(spark, path: str, opts: dict) -> list[str]:
    """Three writes: an insert, an upsert (log files on MOR) with a new key, a delete."""
    first = [(f"k{i:02d}", f"p{i % 2}", 1, float(i)) for i in range(12)]
    upsert = [("k01", "p1", 2, 10.0), ("k02", "p0", 2, 20.0), ("k20", "p0", 2, 200.0)]
    instants = [pyhudi.write(spark.createDataFrame(first, SCHEMA), path, opts).instant_time,
                pyhudi.write(spark.createDataFrame(upsert, SCHEMA), path, opts).instant_time]
    instants.append(pyhudi.write(spark.createDataFrame([("k03", "p1", 3, 0.0)], SCHEMA), path,
                                 {**opts, "hoodie.datasource.write.operation": "delete"}).instant_time)
    return instants


@pytest.fixture(scope="module")
def s3_tables(spark, s3_server):
    """Tables of :func:`history` on s3a, one per table type, written once for the module's tests
    that only read them."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in s3_server.hadoop_conf.items():
        conf.set(key, value)
    bucket = s3_server.make_bucket(f"pyhudi-reads-{os.getpid()}")
    made: dict[str, tuple[str, list[str]]] = {}

    def table(table_type: str) -> tuple[str, list[str]]:
        if table_type not in made:
            path = f"s3a://{bucket}/{table_type.lower()}"
            made[table_type] = path, history(spark, path, {**OPTS, "hoodie.datasource.write.table.type": table_type})
        return made[table_type]

    return table


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_queries_on_s3a_read_through_pyarrow_as_hudi_rs_reads(s3_spark, s3_server, s3_tables, table_type, tmp_path):
    spark = s3_spark
    path, instants = s3_tables(table_type)
    assert not spark_can_open(spark, table_storage(spark, path))

    bucket = path.split("/")[2]
    snapshot = pyhudi.read(spark, path)
    assert "FileScan" not in plan_of(snapshot)  # Spark cannot open s3a:// here: no native scan
    mark = s3_server.mark()
    rows = collected(snapshot)
    if table_type == "COPY_ON_WRITE":  # a small base file is read by one GET, no HEAD first
        base_files = {k: n for k, n in requests_by_object(s3_server, mark, bucket).items() if k[1].endswith(".parquet")
                      and "/.hoodie/" not in k[1]}
        assert base_files and set(base_files.values()) == {1} and {m for m, _ in base_files} == {"GET"}
    assert rows == key_rows(rs_rows(s3_server, path))
    assert len(collected(snapshot)) == 12  # 12 + k20 - k03
    mark = s3_server.mark()
    filtered = collected(pyhudi.read(spark, path, filters=(F.col("p") == "p0") & (F.col("v") >= 4)))
    read = objects_read(s3_server, mark, bucket)
    assert any("/p0/" in k for k in read) and not any("/p1/" in k for k in read)  # p1 was pruned
    assert filtered == [r for r in key_rows(rs_rows(s3_server, path)) if r[1] == "p0" and r[3] >= 4]
    pull = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": instants[0]}
    assert collected(pyhudi.read(spark, path, pull)) == key_rows(rs_rows(s3_server, path, start=instants[0]))
    travel = pyhudi.read(spark, path, {"as.of.instant": instants[1]})
    assert collected(travel) == key_rows(rs_rows(s3_server, path, as_of=instants[1]))
    optimized = collected(pyhudi.read(spark, path, {"hoodie.datasource.query.type": "read_optimized"}))
    assert optimized == key_rows(rs_rows(s3_server, path, read_optimized=True))
    if table_type == "MERGE_ON_READ":  # the delete is in a log file: the base files still hold the key
        assert "k03" in {r[0] for r in optimized}

    # a commit stream pulls the same rows, batch by batch
    seen: list[list[tuple]] = []
    stream = pyhudi.commit_stream(spark, path, {"hoodie.datasource.streaming.startOffset": instants[0]},
                                  checkpoint_location=str(tmp_path / "checkpoint"))
    assert stream.process_available(lambda df, _i: seen.append(collected(df))) == 1
    assert seen == [key_rows(rs_rows(s3_server, path, start=instants[0]))]


def test_upserts_look_up_keys_on_s3a_with_every_index(s3_spark, s3_server, s3_bucket):
    """SIMPLE and GLOBAL_SIMPLE read the record keys of base files; BLOOM checks footers: each
    upsert updates its keys in place, nothing is duplicated."""
    spark = s3_spark
    path = f"s3a://{s3_bucket}/t"
    pyhudi.write(spark.createDataFrame([(f"k{i:02d}", f"p{i % 2}", 1, float(i)) for i in range(8)], SCHEMA), path,
                 {**OPTS, "hoodie.index.type": "SIMPLE"})
    expected = {f"k{i:02d}": (f"p{i % 2}", float(i)) for i in range(8)}
    for n, index in enumerate(("SIMPLE", "GLOBAL_SIMPLE", "BLOOM"), start=2):
        batch = [(f"k{n:02d}", f"p{n % 2}", n, 100.0 * n), (f"k{n + 3:02d}", f"p{(n + 3) % 2}", n, -1.0 * n)]
        pyhudi.write(spark.createDataFrame(batch, SCHEMA), path, {**OPTS, "hoodie.index.type": index})
        expected.update({k: (p, v) for k, p, _ts, v in batch})
        got = {r["id"]: (r["p"], r["v"]) for r in rs_rows(s3_server, path)}
        assert got == expected, index
    assert sorted((r["id"], r["p"], r["v"]) for r in pyhudi.read(spark, path).collect()) == \
        sorted((k, p, v) for k, (p, v) in expected.items())


def test_clustering_ordered_by_spark_reads_s3a_files_through_pyarrow(s3_spark, s3_server, s3_bucket, monkeypatch):
    """A merge-on-read table with a plain slice and one with a log file, clustered by Spark (every
    group over the in-task size): the same records and commit times afterwards."""
    spark = s3_spark
    path = f"s3a://{s3_bucket}/t"
    opts = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    pyhudi.write(spark.createDataFrame([(f"k{i:02d}", f"p{i % 2}", 1, float(i)) for i in range(12)], SCHEMA), path,
                 opts)
    pyhudi.write(spark.createDataFrame([("k00", "p0", 9, 99.0)], SCHEMA), path, opts)  # a log file in p0
    before = sorted((r["id"], r["_hoodie_commit_time"], r["v"]) for r in rs_rows(s3_server, path))
    monkeypatch.setattr("pyhudi.spark.clustering_job.IN_TASK_GROUP_BYTES", 0)
    (done,) = pyhudi.cluster(spark, path, {"hoodie.clustering.plan.strategy.sort.columns": "v"})
    assert done["input_file_groups"] == 2 and done["records"] == 12
    assert sorted((r["id"], r["_hoodie_commit_time"], r["v"]) for r in rs_rows(s3_server, path)) == before
    assert sorted((r["id"], r["_hoodie_commit_time"], r["v"]) for r in pyhudi.read(spark, path).collect()) == before


EVOLVED_1 = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                          T.StructField("n", T.IntegerType()), T.StructField("at", T.TimestampType()),
                          T.StructField("s", T.StructType([T.StructField("a", T.IntegerType())]))])
EVOLVED_2 = T.StructType([*EVOLVED_1.fields[:2], T.StructField("n", T.LongType()), EVOLVED_1.fields[3],
                          T.StructField("s", T.StructType([T.StructField("b", T.StringType()),
                                                           T.StructField("a", T.IntegerType())])),
                          T.StructField("d", T.DecimalType(10, 2))])


def test_evolved_files_read_with_the_types_and_rows_of_sparks_native_reader(s3_spark, s3_server, s3_bucket, tmp_path,
                                                                           monkeypatch):
    """Files of an older schema (a column added, an int widened, a struct field added before
    another; one file alone, one under a log file of the new schema) and a timestamp column (whose
    Spark type the newest base file's footer tells): the same table locally (Spark's reader) and on
    s3a (pyarrow, each file read in ranges as large files are) reads as the same schema and rows."""
    spark = s3_spark
    opts = {**OPTS, "hoodie.datasource.write.precombine.field": "n",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    at = dt.datetime(2026, 1, 2, 3, 4, 5)
    first = [(f"k{i}", f"p{i % 2}", i, at, (i,)) for i in range(6)]
    update = [("k1", "p1", 1 << 40, at, ("b", 7), Decimal("1.25")), ("k3", "p1", 9, None, (None, 9), None)]
    frames = []
    for path in (str(tmp_path / "t"), f"s3a://{s3_bucket}/t"):
        pyhudi.write(spark.createDataFrame(first, EVOLVED_1), path, opts)
        pyhudi.write(spark.createDataFrame(update, EVOLVED_2), path, opts)
        slices = HudiTable(table_storage(spark, path)).file_system_view().latest_slices()
        assert sorted((s.partition_path, bool(s.log_files)) for s in slices) == [("p0", False), ("p1", True)]
        frames.append(pyhudi.read(spark, path))
    local, remote = frames
    assert "FileScan parquet" in plan_of(local) and "FileScan" not in plan_of(remote)
    assert remote.schema == local.schema
    assert dict(remote.dtypes)["at"] == "timestamp"
    data = [c for c in local.columns if not c.startswith("_hoodie_")]
    monkeypatch.setattr("pyhudi.spark.arrow_files.WHOLE_FILE_BYTES", 0)
    mark = s3_server.mark()
    read = remote.select(*data).collect()
    requests = requests_by_object(s3_server, mark, s3_bucket)
    assert sorted(read) == sorted(local.select(*data).collect())
    assert {m for (m, key) in requests if key.endswith(".parquet") and "/.hoodie/" not in key} == {"GET"}
    assert len(local.collect()) == 6


def test_local_paths_keep_sparks_native_reader_and_the_choice_is_logged_once(spark, s3_spark, s3_bucket, tmp_path,
                                                                             caplog):
    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame([("k1", "p0", 1, 1.0)], SCHEMA), path,
                 {**OPTS, "hoodie.index.type": "SIMPLE"})
    assert spark_can_open(spark, table_storage(spark, path))
    df = pyhudi.read(spark, path)
    assert "FileScan parquet" in plan_of(df) and "MapInArrow" not in plan_of(df)
    # the SIMPLE lookup of an upsert reads the keys natively too
    lookup = simple_lookup(spark, HudiTable(path), None, "SIMPLE")
    assert lookup.existing is not None and "FileScan parquet" in plan_of(lookup.existing)
    assert [r[0] for r in lookup.existing.collect()] == ["k1"]

    s3a = f"s3a://{s3_bucket}/t"
    pyhudi.write(s3_spark.createDataFrame([("k1", "p0", 1, 1.0)], SCHEMA), s3a, OPTS)
    storage_conf._CAN_OPEN.clear()  # as in a new session
    with caplog.at_level(logging.INFO, logger="pyhudi"):
        for _ in range(2):
            assert collected(pyhudi.read(s3_spark, s3a)) == [("k1", "p0", 1, 1.0)]
    said = [r.getMessage() for r in caplog.records if "open s3a://" in r.getMessage()]
    assert said == ["Spark cannot open s3a:// paths: pyhudi reads files there with pyarrow in Spark's executors"]


@pytest.mark.skipif(not PYSPARK_4, reason="Spark's Python data source API arrived in PySpark 4.0")
def test_spark_read_format_hudi_on_s3a_takes_the_sessions_store_settings(s3_spark, s3_server, s3_tables):
    spark = s3_spark
    path, instants = s3_tables("MERGE_ON_READ")
    pyhudi.register(spark)  # no store option below: the session's fs.s3a.* travel with the source
    assert collected(spark.read.format("hudi").load(path)) == key_rows(rs_rows(s3_server, path))
    pull = spark.read.format("hudi").options(**{"hoodie.datasource.query.type": "incremental",
                                                "hoodie.datasource.read.begin.instanttime": instants[1]}).load(path)
    assert collected(pull) == key_rows(rs_rows(s3_server, path, start=instants[1]))
