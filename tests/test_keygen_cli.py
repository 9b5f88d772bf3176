"""Key generators produce Hudi's strings; the CLI shows what the table holds."""

from __future__ import annotations

from conftest import hudi_rs_rows, pyhudi_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi.cli import main as cli_main
from pyhudi.keygen.spec import escape_partition_value
from pyhudi.spark.routing import shuffle_keys, spark_hash_int

SCHEMA = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("name", T.StringType()),
                       T.StructField("city", T.StringType()), T.StructField("ts", T.LongType())])


def test_complex_keys_hive_style_and_urlencode(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1, "Alice", "a/b:c", 1), (2, None, None, 1), (3, "", "x", 1)], SCHEMA)
    pyhudi.write(df, path, {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id,name",
                            "hoodie.datasource.write.partitionpath.field": "city",
                            "hoodie.datasource.write.hive_style_partitioning": "true",
                            "hoodie.datasource.write.partitionpath.urlencode": "true",
                            "hoodie.datasource.write.precombine.field": "ts"})
    rows = {r["id"]: r for r in pyhudi_rows(spark, path)}
    assert rows[1]["_hoodie_record_key"] == "id:1,name:Alice"
    assert rows[2]["_hoodie_record_key"] == "id:2,name:__null__"
    assert rows[3]["_hoodie_record_key"] == "id:3,name:__empty__"
    assert rows[1]["_hoodie_partition_path"] == "city=a%2Fb%3Ac"
    assert rows[2]["_hoodie_partition_path"] == "city=__HIVE_DEFAULT_PARTITION__"
    assert rows[3]["_hoodie_partition_path"] == "city=x"
    table = pyhudi.HudiTable(path)
    assert table.config.keygen_class == "org.apache.hudi.keygen.ComplexKeyGenerator"
    assert len(hudi_rs_rows(path)) == 3
    assert pyhudi.read(spark, path, filters="city = 'a/b:c'").count() == 1


def test_nonpartitioned_and_timestamp_keygens(spark, tmp_path):
    df = spark.createDataFrame([(1, "a", "x", 1700000000123), (2, "b", "y", 1700100000000)], SCHEMA)
    p1 = str(tmp_path / "np")
    pyhudi.write(df, p1, {"hoodie.table.name": "np", "hoodie.datasource.write.recordkey.field": "id"})
    rows = pyhudi_rows(spark, p1)
    assert {r["_hoodie_partition_path"] for r in rows} == {""}
    assert {r["_hoodie_record_key"] for r in rows} == {"1", "2"}
    assert {r["_hoodie_record_key"] for r in hudi_rs_rows(p1)} == {"1", "2"}
    p2 = str(tmp_path / "ts")
    pyhudi.write(df, p2, {
        "hoodie.table.name": "ts", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "ts",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd/HH",
        "hoodie.keygen.timebased.output.timezone": "UTC"})
    parts = {r["id"]: r["_hoodie_partition_path"] for r in pyhudi_rows(spark, p2)}
    assert parts == {1: "2023/11/14/22", 2: "2023/11/16/02"}
    assert len(hudi_rs_rows(p2)) == 2


def test_escape_partition_value():
    assert escape_partition_value("a b/c%d=e") == "a b%2Fc%25d%3De"


def test_shuffle_keys_match_spark_hash_partitioning(spark):
    from pyspark.sql import functions as F

    for n in (1, 3, 17):
        keys = shuffle_keys(n)
        got = spark.createDataFrame([(k,) for k in keys], "k int").select(
            F.pmod(F.hash("k"), F.lit(n)).alias("p")).collect()
        assert [r["p"] for r in got] == list(range(n))
    assert spark_hash_int(0) == spark.range(1).select(F.hash(F.lit(0))).first()[0]


def test_cli_shows_commits_and_file_groups(spark, tmp_path, capsys):
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1, "a", "x", 1), (2, "b", "y", 1)], SCHEMA)
    res = pyhudi.write(df, path, {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
                                  "hoodie.datasource.write.partitionpath.field": "city"})
    assert sorted(r["id"] for r in hudi_rs_rows(path)) == [1, 2]
    assert cli_main(["show", "commits", "--path", path]) == 0
    out = capsys.readouterr().out
    assert res.instant_time in out and "UPSERT" in out
    assert cli_main(["show", "file-groups", "--path", path]) == 0
    out = capsys.readouterr().out
    assert "2 file group(s) in 2 partition(s)" in out
    assert cli_main(["show", "commit", res.instant_time, "--path", path]) == 0
    assert "Records Written" in capsys.readouterr().out
    assert cli_main(["show", "commits", "--path", str(tmp_path / "none")]) == 2
    assert "not a Hudi table" in capsys.readouterr().err
