"""Edges where statements, prepped writes and version moves meet: each refusal leaves the table as it
was (no version moved, no file written, no ``.hoodie/`` made), and names the problem."""

from __future__ import annotations

import os

import pytest
from conftest import hudi_rs_rows

import pyhudi
from pyhudi.errors import HudiConfigError, HudiError, HudiKeyError
from pyhudi.table.table import HudiTable

SCHEMA = "id int, name string, price double, _ts long"


def test_a_merge_whose_write_moves_the_table_below_8_writes_whole_rows(spark, tmp_path):
    """Partial updates are decided by the version the write leaves the table at: a merge that also
    downgrades a version 8 table to 6 writes whole rows (version 6 has no partial blocks)."""
    path = str(tmp_path / "v")
    opts = {"hoodie.table.name": "v", "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "",
            "hoodie.datasource.write.precombine.field": "_ts", "hoodie.metadata.enable": "false",
            "hoodie.write.table.version": "8"}
    pyhudi.write(spark.createDataFrame([(1, "a", 1.0, 10), (2, "b", 2.0, 10)], SCHEMA), path, opts)
    src = spark.createDataFrame([(1, 5.0, 11)], "id int, price double, ts long")
    res = (pyhudi.merge(spark, path, src, on="t.id = s.id")
           .when_matched_update(set={"price": "s.price", "_ts": "s.ts"})
           .execute({"hoodie.write.table.version": "6"}))
    assert res.stats["partial_update"] is False
    assert HudiTable(path).config.version == 6
    rows = sorted((r.id, r.name, r.price, r._ts) for r in pyhudi.read(spark, path).collect())
    assert rows == [(1, "a", 5.0, 11), (2, "b", 2.0, 10)]
    assert sorted((r["id"], r["name"], r["price"], r["_ts"]) for r in hudi_rs_rows(path)) == rows


def test_a_partial_schema_with_a_downgrade_is_refused_before_the_table_moves(spark, tmp_path):
    path = str(tmp_path / "w")
    opts = {"hoodie.table.name": "w", "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "",
            "hoodie.datasource.write.precombine.field": "_ts", "hoodie.metadata.enable": "false",
            "hoodie.write.table.version": "8"}
    df = spark.createDataFrame([(1, "a", 1.0, 10)], SCHEMA)
    pyhudi.write(df, path, opts)
    before = [i.timestamp for i in HudiTable(path).timeline.instants()]
    assert [r["id"] for r in hudi_rs_rows(path)] == [1]
    partial = '{"type":"record","name":"w_record","fields":[{"name":"price","type":["null","double"]}]}'
    with pytest.raises(HudiConfigError, match="moves .* to table version 6"):
        pyhudi.write(df, path, {**opts, "hoodie.write.table.version": "6",
                                "hoodie.write.partial.update.schema": partial})
    table = HudiTable(path)
    assert table.config.version == 8
    assert [i.timestamp for i in table.timeline.instants()] == before


def test_insert_prepped_without_a_partition_path_is_refused(spark, tmp_path):
    """A partitioned table's prepped row without ``_hoodie_partition_path`` would land in the table's
    root, the parent folder of every partition (Hudi fails on the null: ``HoodieCreateRecordUtils``)."""
    path = str(tmp_path / "np")
    opts = {"hoodie.table.name": "np", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.metadata.enable": "false"}
    pyhudi.write(spark.createDataFrame([(1, "a", "x")], "id int, name string, p string"), path, opts)
    schema = "_hoodie_record_key string, _hoodie_partition_path string, id int, name string, p string"
    for stored in (None, ""):
        rows = spark.createDataFrame([("9", stored, 9, "n", "y")], schema)
        with pytest.raises(HudiError, match="_hoodie_partition_path is null or empty|cannot be folders of the table"):
            pyhudi.write(rows, path, {**opts, "hoodie.datasource.write.operation": "insert_prepped"})
    bad = spark.createDataFrame([("9", ".hidden", 9, "n", "y")], schema)
    with pytest.raises(HudiError, match="hidden"):
        pyhudi.write(bad, path, {**opts, "hoodie.datasource.write.operation": "insert_prepped"})
    assert sorted((r.id, r._hoodie_partition_path) for r in pyhudi.read(spark, path).collect()) == [(1, "x")]
    assert [(r["id"], r["_hoodie_partition_path"]) for r in hudi_rs_rows(path)] == [(1, "x")]
    assert not [f for f in os.listdir(path) if f.endswith(".parquet")]


@pytest.mark.parametrize("partitions", ["", "p", "p,q"])
def test_a_target_row_matched_twice_is_named_by_its_stored_key_on_auto_key_tables(spark, tmp_path, partitions):
    path = str(tmp_path / "c")
    opts = {"hoodie.table.name": "c", "hoodie.datasource.write.partitionpath.field": partitions,
            "hoodie.metadata.enable": "false", "hoodie.datasource.write.operation": "insert"}
    pyhudi.write(spark.createDataFrame([(1, "a", "x", "z")], "id int, name string, p string, q string"), path, opts)
    assert [r["name"] for r in hudi_rs_rows(path)] == ["a"]
    src = spark.createDataFrame([(1, "A"), (1, "B")], "id int, name string")
    with pytest.raises(HudiKeyError, match=r"the target row _hoodie_record_key='\d+_\d+_\d+' is matched by 2"):
        pyhudi.merge(spark, path, src, on="t.id = s.id").when_matched_update(set={"name": "s.name"}).execute()


def test_a_statement_on_a_path_without_a_table_leaves_no_trace(spark, tmp_path):
    path = tmp_path / "none"
    with pytest.raises(HudiError):
        pyhudi.update(spark, str(path), where="id = 1", set={"name": "'x'"})
    with pytest.raises(HudiError):
        pyhudi.delete(spark, str(path), where="id = 1")
    assert not path.exists()


def test_a_delete_marker_is_refused_on_version_9_where_hudi_reads_it_from_the_table(spark, tmp_path):
    """Hudi 1.1 reads DefaultHoodieRecordPayload's delete field and marker from the table's merge
    properties (``EightToNineUpgradeHandler.reconcileMergePropertiesConfig``), which pyhudi does not
    write: a version 9 write with them is refused, a version 8 one (writer options, as in 1.0) is not."""
    opts = {"hoodie.table.name": "d", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "", "hoodie.datasource.write.precombine.field": "_ts",
            "hoodie.metadata.enable": "false", "hoodie.datasource.write.payload.class":
            "org.apache.hudi.common.model.DefaultHoodieRecordPayload", "hoodie.payload.delete.field": "name",
            "hoodie.payload.delete.marker": "gone"}
    df = spark.createDataFrame([(1, "a", 1.0, 10), (2, "gone", 2.0, 10)], SCHEMA)
    with pytest.raises(HudiError, match="hoodie.payload.delete.field with a table of version 9"):
        pyhudi.write(df, str(tmp_path / "v9"), {**opts, "hoodie.write.table.version": "9"})
    assert not (tmp_path / "v9").exists()
    pyhudi.write(df, str(tmp_path / "v8"), {**opts, "hoodie.write.table.version": "8"})
    assert [r.id for r in pyhudi.read(spark, str(tmp_path / "v8")).collect()] == [1]
    assert [r["id"] for r in hudi_rs_rows(tmp_path / "v8")] == [1]
