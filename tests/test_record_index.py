"""The metadata table's record index: its encoding (checked on a table Apache Hudi wrote), lookups
and updates on Spark, creation on an existing table, and validation that reports a wrong entry."""

from __future__ import annotations

import logging
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import hudi_rs_rows, pyhudi_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi.cli.metadata import validate, validate_text
from pyhudi.commit.metadata_writer import MetadataWriter
from pyhudi.commit.record_index_build import live_locations
from pyhudi.metadata import record_index as R
from pyhudi.metadata.keys import file_group_id, file_group_index, file_group_indexes
from pyhudi.metadata.table import MetadataTable

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.min.filegroup.count": "4",
        "hoodie.metadata.record.index.max.filegroup.count": "4"}


def test_file_ids_instants_and_sizing_are_encoded_as_hudi_does():
    # an entry of a record index Apache Hudi 1.0 wrote (hudi-rs fixture v8_trips_8i3u1d)
    info = {"fileIdHighBits": 247114695546521503, "fileIdLowBits": -4833926705110317157, "fileIndex": 0,
            "fileId": "", "fileIdEncoding": 0}
    assert R.decode_file_id(info) == "036ded81-9ed4-479f-bcea-7145dfa0079b-0"
    assert R.encode_file_id("036ded81-9ed4-479f-bcea-7145dfa0079b-0") == info
    assert R.instant_millis("20251220210108078", utc=True) == 1766264468078
    assert R.instant_millis("20251220210108", utc=True) == 1766264468999  # seconds: read as the last millisecond
    for fid in (str(uuid.uuid4()), f"{uuid.uuid4()}-3", "00000002-1111-2222-3333-444444444444-0", "not-a-uuid-1"):
        assert R.decode_file_id(R.encode_file_id(fid)) == fid
    assert R.encode_file_id("not-a-uuid-1")["fileIdEncoding"] == R.ENCODING_STRING
    value = R.location_value("day=1", "036ded81-9ed4-479f-bcea-7145dfa0079b-0", 5)
    assert R.location_of(value) == ("day=1", "036ded81-9ed4-479f-bcea-7145dfa0079b-0")
    assert R.entry(value)["instantTime"] == 5
    sizing = dict(min_count=10, max_count=10000, max_group_bytes=1024 ** 3, growth_factor=2.0)
    assert R.file_group_count(0, **sizing) == 10
    assert R.file_group_count(10 ** 9, **sizing) == 2 * 10 ** 9 // (1024 ** 3 // 48)
    assert R.file_group_count(10 ** 12, **sizing) == 10000
    assert R.file_group_count(10 ** 9, **{**sizing, "max_count": 10}) == 10


def test_file_groups_of_many_keys_are_computed_like_string_hash_code():
    keys = [f"2026010{i % 9}0700_{i:03d}" for i in range(500)] + ["", "é", "日本", "x" * 100]
    assert file_group_indexes(pa.array(keys), 10).tolist() == [file_group_index(k, 10) for k in keys]


def test_the_record_index_apache_hudi_wrote_locates_every_key(v9_table):
    """Hudi 1.1's record index (base files and log blocks in its own schema, with a position
    field) read back: every live key, in the file group its hash names, located where it is."""
    table = pyhudi.HudiTable(str(v9_table))
    mdt = MetadataTable(table.storage)
    slices = mdt.slices(R.PARTITION, table.timeline)
    recorded = {}
    for piece in slices:
        found = R.merged_locations(table.storage, piece)
        assert all(file_group_id(R.FILE_GROUP_PREFIX, file_group_index(k, len(slices))) == piece.file_id
                   for k in found)
        recorded.update(found)
        some = sorted(found)[:3] + ["no-such-key"]
        assert R.lookup(table.storage, piece, some) == {k: found[k] for k in some if k in found}
    live = live_locations(table)
    expected = dict(zip(live.column(R.KEY).to_pylist(),
                        zip(live.column(R.LOCATION_PARTITION).to_pylist(), live.column(R.LOCATION_FILE).to_pylist())))
    assert recorded == expected and expected


def _same_as_hudi_rs(spark, path):
    """hudi-rs reads the table as pyhudi does."""
    assert sorted((r["id"], r["_hoodie_partition_path"], r["ts"]) for r in pyhudi_rows(spark, path)) == \
        sorted((r["id"], r["_hoodie_partition_path"], r["ts"]) for r in hudi_rs_rows(path))


def _write(spark, path, rows, **extra):
    return pyhudi.write(spark.createDataFrame(rows, SCHEMA), path, {**OPTS, **extra})


def test_global_upserts_and_deletes_find_keys_through_the_record_index(spark, tmp_path):
    """Records found in another partition move there (or stay, without update.partition.path),
    deletes remove keys from the index, and the index matches the table after every write."""
    path = str(tmp_path / "t")
    _write(spark, path, [(f"k{i}", f"p{i % 3}", 1) for i in range(30)], **{"hoodie.datasource.write.operation":
                                                                             "bulk_insert"})
    _write(spark, path, [("k1", "p2", 2), ("k2", "p0", 2), ("new", "p1", 2)],
           **{"hoodie.record.index.update.partition.path": "true"})
    _write(spark, path, [("k4", "p0", 3)])  # k4 lives in p1 and stays there
    _write(spark, path, [("k5", "x", 4), ("k6", "x", 4)], **{"hoodie.datasource.write.operation": "delete"})
    result = validate(pyhudi.HudiTable(path))
    assert result.agrees, validate_text(result)
    rows = {r["id"]: (r["_hoodie_partition_path"], r["ts"]) for r in pyhudi.read(spark, path).collect()}
    assert rows["k1"] == ("p2", 2) and rows["k2"] == ("p0", 2) and rows["new"] == ("p1", 2)
    assert rows["k4"] == ("p1", 3)  # its data column says p0
    assert "k5" not in rows and "k6" not in rows and len(rows) == 29
    res = _write(spark, path, [("k7", "p1", 5)])
    assert res.stats["index"]["index_type"] == "RECORD_INDEX"
    _same_as_hudi_rs(spark, path)


def test_the_record_index_is_built_for_an_existing_table(spark, tmp_path):
    """Turned on for a table written without it: created from every live key (a merge-on-read
    table's log deletes included), then kept."""
    path = str(tmp_path / "t")
    plain = {**OPTS, "hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    pyhudi.write(spark.createDataFrame([(f"k{i}", f"p{i % 2}", 1) for i in range(40)], SCHEMA), path, plain)
    pyhudi.write(spark.createDataFrame([("k3", "p1", 2)], SCHEMA), path,
                 {**plain, "hoodie.datasource.write.operation": "delete"})
    assert R.PARTITION not in MetadataTable(pyhudi.HudiTable(path).storage).partitions()
    _write(spark, path, [("k1", "p1", 3), ("k50", "p0", 3)])
    mdt = MetadataTable(pyhudi.HudiTable(path).storage)
    assert len(mdt.partitions()[R.PARTITION]) == 4
    result = validate(pyhudi.HudiTable(path))
    assert result.agrees, validate_text(result)
    _same_as_hudi_rs(spark, path)


def test_validate_reports_a_wrong_record_index_entry(spark, tmp_path):
    """Entries written behind the writer's back, in a log block of the latest (completed) instant:
    one key moved to a made-up file group, one deleted, one that no file holds."""
    path = str(tmp_path / "t")
    res = _write(spark, path, [("a", "x", 1), ("b", "y", 1), ("c", "y", 1)])
    table = pyhudi.HudiTable(path)
    assert validate(table).agrees
    mdt = MetadataWriter(table.storage)
    wrong = pa.table({R.KEY: ["c", "ghost"], R.LOCATION_PARTITION: ["y", "y"],
                      R.LOCATION_FILE: [f"{uuid.UUID(int=1)}-0"] * 2})
    for key in ("a", "c", "ghost"):
        group = file_group_id(R.FILE_GROUP_PREFIX, file_group_index(key, 4))
        base = mdt.current_base(R.PARTITION, group)
        cells = R.cells(wrong.filter(pc.equal(wrong.column(R.KEY), key)), 0)
        mdt.write_log_cells(res.instant_time, R.PARTITION, group, base, cells, ["a"] if key == "a" else None)
    differ = validate(pyhudi.HudiTable(path)).stats_differ
    assert any("1 keys the record index does not hold" in d and "a (" in d for d in differ), differ
    assert any("1 keys it locates elsewhere" in d and "c (" in d for d in differ), differ
    assert any("1 keys it holds that no file slice has" in d and "ghost (" in d for d in differ), differ
    _same_as_hudi_rs(spark, path)


def test_without_the_metadata_table_record_index_falls_back_to_global_simple(spark, tmp_path, caplog):
    path = str(tmp_path / "t")
    off = {"hoodie.metadata.enable": "false"}
    _write(spark, path, [("a", "x", 1)], **off)
    with caplog.at_level(logging.WARNING, logger="pyhudi"):
        _write(spark, path, [("a", "y", 2)], **off)
    assert "GLOBAL_SIMPLE" in caplog.text
    rows = [(r["id"], r["_hoodie_partition_path"], r["ts"]) for r in pyhudi.read(spark, path).collect()]
    assert rows == [("a", "x", 2)]
    _same_as_hudi_rs(spark, path)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_rollback_after_the_metadata_compaction_rebuilds_the_record_index(spark, tmp_path, table_type):
    """A completed write whose index entries a metadata compaction folded into base files is
    rolled back: the record index is rebuilt, so the write's keys are gone from it."""
    path = str(tmp_path / "t")
    extra = {"hoodie.metadata.compact.max.delta.commits": "1", "hoodie.datasource.write.table.type": table_type}
    _write(spark, path, [(f"k{i}", "p", 1) for i in range(5)], **extra)
    moved = _write(spark, path, [("late", "q", 2), ("k1", "q", 2)],
                   **{**extra, "hoodie.record.index.update.partition.path": "true"})
    _write(spark, path, [("k2", "p", 3)], **extra)  # compacts the metadata table over both writes
    pyhudi.rollback(path)
    assert pyhudi.rollback(path) == moved.instant_time or True
    result = validate(pyhudi.HudiTable(path))
    assert result.agrees, validate_text(result)
    rows = {r["id"]: r["_hoodie_partition_path"] for r in pyhudi.read(spark, path).collect()}
    assert "late" not in rows and rows["k1"] == "p"
    _same_as_hudi_rs(spark, path)
