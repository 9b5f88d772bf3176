"""Bad input gets a clear pyhudi error before anything is written; the table stays as it was."""

from __future__ import annotations

import os
import warnings

import pytest
from conftest import hudi_rs_rows, pyhudi_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi.config import HudiConfig

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("v", T.IntegerType())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}


def _table(spark, tmp_path):
    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame([("a", "x", 1, 1), ("b", "y", 1, 2)], SCHEMA), path,
                 {**OPTS, "hoodie.datasource.write.operation": "bulk_insert"})
    return path


def _snapshot(path):
    files = sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)
    return files


def test_null_record_key_is_rejected_and_table_unchanged(spark, tmp_path):
    path = _table(spark, tmp_path)
    before = pyhudi_rows(spark, path)
    bad = spark.createDataFrame([("c", "x", 2, 3), (None, "x", 2, 4)], SCHEMA)
    for op in ("upsert", "insert", "bulk_insert"):
        with pytest.raises(pyhudi.HudiKeyError, match="record key field 'id' is null or empty"):
            pyhudi.write(bad, path, {**OPTS, "hoodie.datasource.write.operation": op})
    assert pyhudi_rows(spark, path) == before
    assert len(hudi_rs_rows(path)) == 2
    table = pyhudi.HudiTable(path)
    assert table.timeline.pending() == []
    assert len(table.timeline.completed_writes()) == 1


@pytest.mark.parametrize("index", ["BLOOM", "GLOBAL_SIMPLE"])  # combined in the handles / in Spark
def test_null_ordering_value_is_rejected_and_table_unchanged(spark, tmp_path, index):
    """Hudi refuses a record without an ordering value; combining would silently drop it."""
    path = _table(spark, tmp_path)
    before = pyhudi_rows(spark, path)
    bad = spark.createDataFrame([("c", "x", 2, 3), ("d", "x", None, 4), ("d", "x", None, 5)], SCHEMA)
    for op in ("upsert", "insert", "bulk_insert"):
        with pytest.raises(pyhudi.HudiKeyError, match="precombine field 'ts' .* is null"):
            pyhudi.write(bad, path, {**OPTS, "hoodie.index.type": index, "hoodie.datasource.write.operation": op,
                                     "hoodie.combine.before.insert": "true"})
    assert pyhudi_rows(spark, path) == before
    assert len(hudi_rs_rows(path)) == 2
    # a delete needs no ordering value, and removes the key whatever the stored one (as Hudi's delete
    # does, with DefaultHoodieRecordPayload too)
    default_payload = {**OPTS, "hoodie.index.type": index, "hoodie.datasource.write.payload.class":
                       "org.apache.hudi.common.model.DefaultHoodieRecordPayload"}
    pyhudi.write(spark.createDataFrame([("a", "x", None, 0)], SCHEMA), path,
                 {**default_payload, "hoodie.datasource.write.operation": "delete"})
    pyhudi.write(spark.createDataFrame([("b", "y", 0, 0)], SCHEMA), path,
                 {**default_payload, "hoodie.datasource.write.operation": "delete"})
    assert pyhudi_rows(spark, path) == [] and hudi_rs_rows(path) == []


@pytest.mark.parametrize("index", ["BLOOM", "GLOBAL_SIMPLE"])
def test_duplicates_with_equal_ordering_values_keep_the_later_row(spark, tmp_path, index):
    """Hudi's preCombine keeps the newer of two records with equal ordering values."""
    path = _table(spark, tmp_path)
    rows = [("a", "x", 5, 10), ("c", "x", 5, 30), ("a", "x", 5, 11), ("c", "x", 4, 99), ("c", "x", 5, 31)]
    pyhudi.write(spark.createDataFrame(rows, SCHEMA).coalesce(1), path, {**OPTS, "hoodie.index.type": index})
    expected = {"a": 11, "b": 2, "c": 31}
    assert {r["id"]: r["v"] for r in pyhudi_rows(spark, path)} == expected
    assert {r["id"]: r["v"] for r in hudi_rs_rows(path)} == expected


def _rejected(spark, tmp_path, ddl: str, row: tuple, error: type, match: str) -> None:
    """Writing ``row`` raises ``error`` and leaves every file of the table as it was."""
    path = _table(spark, tmp_path)
    before = _snapshot(path)
    with pytest.raises(error, match=match):
        pyhudi.write(spark.createDataFrame([row], ddl), path, OPTS)
    assert _snapshot(path) == before


def test_missing_key_field(spark, tmp_path):
    _rejected(spark, tmp_path, "p string, ts long, v int", ("x", 1, 1),
              pyhudi.HudiKeyError, "field 'id' is not in the incoming data")


def test_missing_precombine_field(spark, tmp_path):
    _rejected(spark, tmp_path, "id string, p string, v int", ("a", "x", 1),
              pyhudi.HudiSchemaError, "precombine field 'ts'")


def test_incompatible_schema(spark, tmp_path):
    _rejected(spark, tmp_path, "id string, p string, ts long, v string", ("a", "x", 1, "text"),
              pyhudi.HudiSchemaError, "column 'v'")


def test_missing_column_needs_an_explicit_choice(spark, tmp_path):
    path = _table(spark, tmp_path)
    df = spark.createDataFrame([("c", "x", 5)], "id string, p string, ts long")
    with pytest.raises(pyhudi.HudiSchemaError, match="lacks table column"):
        pyhudi.write(df, path, OPTS)
    pyhudi.write(df, path, {**OPTS, "hoodie.write.set.null.for.missing.columns": "true"})
    rows = {r["id"]: r["v"] for r in pyhudi_rows(spark, path)}
    assert rows == {"a": 1, "b": 2, "c": None}
    assert {r["id"]: r["v"] for r in hudi_rs_rows(path)} == rows


def test_added_column_and_widened_type(spark, tmp_path):
    path = _table(spark, tmp_path)
    df = spark.createDataFrame([("c", "x", 5, 7, "new")], "id string, p string, ts long, v long, extra string")
    pyhudi.write(df, path, OPTS)
    rows = {r["id"]: (r["v"], r["extra"]) for r in pyhudi_rows(spark, path)}
    assert rows == {"a": (1, None), "b": (2, None), "c": (7, "new")}
    assert {r["id"] for r in hudi_rs_rows(path)} == {"a", "b", "c"}


def test_not_a_table(spark, tmp_path):
    with pytest.raises(pyhudi.HudiTableNotFoundError, match="not a Hudi table"):
        pyhudi.read(spark, str(tmp_path))
    with pytest.raises(pyhudi.HudiTableNotFoundError):
        pyhudi.HudiTable(str(tmp_path))


def test_table_config_conflict(spark, tmp_path):
    path = _table(spark, tmp_path)
    df = spark.createDataFrame([("a", "x", 1, 1)], SCHEMA)
    with pytest.raises(pyhudi.HudiTableMismatchError, match="recordkey.field"):
        pyhudi.write(df, path, {**OPTS, "hoodie.datasource.write.recordkey.field": "v"})
    with pytest.raises(pyhudi.HudiTableMismatchError, match="table.type"):
        pyhudi.write(df, path, {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"})
    with pytest.raises(pyhudi.HudiConfigError, match="hoodie.compaction.strategy"):
        pyhudi.write(df, str(tmp_path / "mor"), {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ",
                                                 "hoodie.compaction.strategy": "DayBasedCompactionStrategy"})
    assert not pyhudi.HudiTable.exists(str(tmp_path / "mor"))


def test_options_unknown_key_warns_and_bad_value_fails():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        HudiConfig.of({"hoodie.parquet.max.filesize": "10"})
    assert any("hoodie.parquet.max.file.size" in str(w.message) for w in caught)
    with pytest.raises(pyhudi.HudiConfigError, match="hoodie.parquet.max.file.size"):
        HudiConfig.of({"hoodie.parquet.max.file.size": "big"})
    with pytest.raises(pyhudi.HudiConfigError, match="hoodie.datasource.write.operation"):
        HudiConfig.of({"hoodie.datasource.write.operation": "merge"})
    cfg = HudiConfig.of({"primaryKey": "id", "preCombineField": "ts", "type": "mor"})
    assert cfg.raw["hoodie.datasource.write.recordkey.field"] == "id"
    assert cfg.raw["hoodie.datasource.write.precombine.field"] == "ts"
    from pyhudi import config as C
    assert cfg.get(C.TABLE_TYPE) == "MERGE_ON_READ"


def test_write_without_table_name(spark, tmp_path):
    df = spark.createDataFrame([("a", "x", 1, 1)], SCHEMA)
    opts = {k: v for k, v in OPTS.items() if k != "hoodie.table.name"}
    with pytest.raises(pyhudi.HudiConfigError, match="hoodie.table.name"):
        pyhudi.write(df, str(tmp_path / "new"), opts)
    assert not (tmp_path / "new").exists()
