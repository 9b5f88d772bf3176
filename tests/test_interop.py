"""Every copy-on-write table Apache Hudi wrote in shared/interop reads as its SQL says."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from conftest import hudi_rs_rows, pyhudi_rows, unzip_table

import pyhudi

# id -> (name, isActive, byteField) after both INSERT statements of each SQL file (id 1 updated)
AFTER_SQL = {1: ("Alice", False), 2: ("Bob", False), 3: ("Carol", True), 4: ("Diana", True)}
PARTITIONS = {1: 10, 2: 20, 3: 10, 4: 30}


def _table(interop_dir, tmp_path, name):
    return unzip_table(interop_dir / "cow" / f"{name}.zip", tmp_path)


@pytest.mark.parametrize("name", ["v6_nonpartitioned", "v6_simplekeygen_nonhivestyle",
                                  "v6_simplekeygen_hivestyle_no_metafields", "v8_nonpartitioned"])
def test_cow_tables_read_as_their_sql(spark, interop_dir, tmp_path, name):
    path = _table(interop_dir, tmp_path, name)
    rows = pyhudi_rows(spark, path)
    by_id = {r["id"]: r for r in rows}
    assert len(rows) == 4 and set(by_id) == set(AFTER_SQL)
    for i, (person, active) in AFTER_SQL.items():
        assert by_id[i]["name"] == person
        assert by_id[i]["isActive"] is active
        if "byteField" in by_id[i] and "simplekeygen" in name:
            assert by_id[i]["byteField"] == PARTITIONS[i]
    alice = by_id[1]
    assert alice["decimalField"] == Decimal("12345.67890")
    assert alice["dateField"] == dt.date(2023, 4, 1)
    assert [a["arr_struct_f1"] for a in alice["arrayField"]] == ["red", "blue", "green"]
    assert alice["structField"]["child_struct"]["child_field1"] == pytest.approx(123.456)
    assert list(rows[0])[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                 "_hoodie_partition_path", "_hoodie_file_name"]
    if "no_metafields" in name:
        assert all(r["_hoodie_record_key"] is None for r in rows)
    else:
        assert {r["_hoodie_record_key"] for r in rows} == {"1", "2", "3", "4"}
    # the independent reader agrees on every record
    theirs = {r["id"]: (r["name"], r["isActive"]) for r in hudi_rs_rows(path)}
    assert theirs == {i: (r["name"], r["isActive"]) for i, r in by_id.items()}


def test_empty_table_reads_empty(spark, interop_dir, tmp_path):
    path = _table(interop_dir, tmp_path, "v6_empty")
    assert pyhudi.read(spark, str(path)).count() == 0
    assert pyhudi.HudiTable(str(path)).timeline.completed_writes() == []


def test_partition_pruning_on_interop_table(spark, interop_dir, tmp_path):
    path = _table(interop_dir, tmp_path, "v6_simplekeygen_nonhivestyle")
    df = pyhudi.read(spark, str(path), filters="byteField = 10")
    assert sorted(r["id"] for r in df.collect()) == [1, 3]
    files = df.inputFiles()
    assert files and all("/10/" in f for f in files)


def test_hive_style_partition_pruning(spark, interop_dir, tmp_path):
    path = _table(interop_dir, tmp_path, "v6_simplekeygen_hivestyle_no_metafields")
    df = pyhudi.read(spark, str(path), filters="byteField = 30")
    assert [r["id"] for r in df.collect()] == [4]
    assert all("byteField=30" in f for f in df.inputFiles())


def test_table_metadata_of_interop_table(interop_dir, tmp_path):
    path = _table(interop_dir, tmp_path, "v6_simplekeygen_nonhivestyle")
    table = pyhudi.HudiTable(str(path))
    assert table.config.partition_fields == ("byteField",)
    assert [c.metadata.operation_type for c in table.commits()] == ["UPSERT", "UPSERT"]
    view = table.file_system_view()
    assert sorted(view.partitions) == ["10", "20", "30"]
    assert len(view.latest_base_files()) == 3
