"""The metadata table of table versions 8 and 9, kept as Hudi 1.0 / 1.1 keep it (docs/hudi-1x-format.md
section 5): its properties, its layout-2 timeline (per-partition initialization at reserved times, one
delta commit per data instant completing first, compaction at a fresh time completing as a commit),
log files named with the delta commit writing them, the 1.x record schema, column statistics V1 (8)
and V2 (9), index definitions; checked against a model, validate, hudi-rs (which lists files through
it) and the structure of a metadata table Hudi 1.1 wrote (tests/data/hudi1x)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import hudi_rs_rows, pyhudi_rows, unzip_table
from pyspark.sql import types as T

import pyhudi
from pyhudi.cli.metadata import validate, validate_text
from pyhudi.config.properties import parse_properties
from pyhudi.metadata.table import MetadataTable
from pyhudi.timeline.instant import COMMIT, DELTA_COMMIT

SAMPLES = Path(__file__).parent / "data" / "hudi1x"
SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType())])
BASE = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.metadata.compact.max.delta.commits": "2",
        "hoodie.compact.inline.max.delta.commits": "2", "hoodie.cleaner.commits.retained": "1"}
PARTITIONED = {**BASE, "hoodie.datasource.write.partitionpath.field": "p",
               "hoodie.metadata.index.bloom.filter.enable": "true", "hoodie.index.type": "RECORD_INDEX",
               "hoodie.metadata.record.index.min.filegroup.count": "2",
               "hoodie.metadata.record.index.max.filegroup.count": "2"}
COMPLETED = re.compile(r"^(\d{17})_(\d{17})\.(\w+)$")


def _props(path: Path) -> dict[str, str]:
    return parse_properties((path / "hoodie.properties").read_text())


def _check(spark, path: str, expected: dict[str, int]) -> MetadataTable:
    """validate agrees; pyhudi and hudi-rs (listing through the metadata table) read the model."""
    table = pyhudi.HudiTable(path)
    assert table.has_metadata_table()
    result = validate(table)
    assert result.agrees, validate_text(result)
    want = sorted(expected.items())
    assert sorted((r["id"], r["ts"]) for r in pyhudi_rows(spark, path)) == want
    assert sorted((r["id"], r["ts"]) for r in hudi_rs_rows(path)) == want
    return MetadataTable(table.storage)


def _write_series(spark, path: str, opts: dict, writes: int) -> dict[str, int]:
    """Upserts and a delete (the 4th write); validate after each, the readers at the end."""
    expected: dict[str, int] = {}
    for n in range(writes):
        rows = [(f"k{i}", f"p{i % 3}", n) for i in range(n % 4, 24, 3)]
        op = "delete" if n % 5 == 3 else "upsert"
        pyhudi.write(spark.createDataFrame(rows, SCHEMA), path, {**opts, "hoodie.datasource.write.operation": op})
        for key, _p, ts in rows:
            if op == "delete":
                expected.pop(key, None)
            else:
                expected[key] = ts
        result = validate(pyhudi.HudiTable(path))
        assert result.agrees, validate_text(result)
    _check(spark, path, expected)
    return expected


@pytest.mark.parametrize("version,table_type", [("9", "COPY_ON_WRITE"), ("9", "MERGE_ON_READ"),
                                                ("8", "COPY_ON_WRITE"), ("8", "MERGE_ON_READ")])
def test_the_metadata_table_follows_every_write_as_hudi_1x_keeps_it(spark, tmp_path, version, table_type):
    """Inserts, upserts and deletes on a partitioned table with the files, bloom_filters and
    record_index partitions (the record index tags the writes): after each, validate agrees and
    both readers read the model; the MDT has the data table's version and layout 2, is initialized
    at 000.. (files), 001 (bloom_filters), 002 (record_index), has one delta commit per data instant
    completing before it, log files named with their delta commit (version 1), and is compacted at
    fresh instant times that complete as commits."""
    path = str(tmp_path / "t")
    opts = {**PARTITIONED, "hoodie.write.table.version": version, "hoodie.datasource.write.table.type": table_type}
    _write_series(spark, path, opts, 5)
    meta = Path(path) / ".hoodie" / "metadata"
    props = _props(meta / ".hoodie")
    assert props["hoodie.table.version"] == props["hoodie.table.initial.version"] == version
    assert props["hoodie.timeline.layout.version"] == "2"
    data = pyhudi.HudiTable(path)
    assert data.properties["hoodie.table.metadata.partitions"] == "bloom_filters,files,record_index"
    assert data.properties["hoodie.table.metadata.partitions.inflight"] == ""
    names = os.listdir(meta / ".hoodie" / "timeline")
    done = {m.group(1): (m.group(2), m.group(3)) for n in names if (m := COMPLETED.match(n))}
    assert [done[f"0000000000000000{i}"][1] for i in range(3)] == [DELTA_COMMIT] * 3
    assert not any(n.startswith("00000000000000003") for n in names)
    for inst in data.timeline.completed():  # one delta commit per data instant, completed before it
        assert done[inst.timestamp] == (done[inst.timestamp][0], DELTA_COMMIT), inst
        assert done[inst.timestamp][0] < inst.completion_time, inst
    compactions = [t for t, (_c, action) in done.items() if action == COMMIT]
    assert compactions, "the metadata table was compacted"
    deltas = {t for t, (_c, action) in done.items() if action == DELTA_COMMIT}
    assert not any(c[:17] in deltas for c in compactions), "a fresh time, not a delta commit's"
    assert all(f"{c}.compaction.requested" in names for c in compactions)
    for partition, prefix, init in (("files", "files", "0"), ("bloom_filters", "bloom-filters", "1"),
                                    ("record_index", "record-index", "2")):
        for name in os.listdir(meta / partition):
            if name.startswith(f".{prefix}-") and ".log." in name:
                m = re.match(rf"^\.{prefix}-\d{{4}}-0_(\d{{17}})\.log\.(\d+)_", name)
                assert m and m.group(2) == "1" and m.group(1) in deltas, name
        # the init logs (000.., 001, 002) were in the slices the cleaner removed after compaction
        assert not any(f"_0000000000000000{init}.log" in n for n in os.listdir(meta / partition))


@pytest.mark.parametrize("version", ["9", "8"])
def test_column_statistics_are_kept_in_the_index_version_of_the_table(spark, tmp_path, version):
    """A non-partitioned table with column statistics: version 9 writes index version V2 (value
    types, dates as IntWrapper, decimals as the unscaled bytes with "precision,scale"), version 8
    V1 (DecimalWrapper, no value type); both hold Hudi 1.x's default columns (three meta fields
    and the data columns), index.json defines them; data skipping reads them."""
    schema = T.StructType([T.StructField("id", T.StringType()), T.StructField("d", T.DateType()),
                           T.StructField("amount", T.DecimalType(10, 2)), T.StructField("ts", T.LongType())])
    path = str(tmp_path / "t")
    opts = {**BASE, "hoodie.write.table.version": version, "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    rows = [(f"k{i}", dt.date(2024, 1, 1 + i), Decimal(f"{i - 3}.25"), i) for i in range(8)]
    pyhudi.write(spark.createDataFrame(rows, schema), path, opts)
    pyhudi.write(spark.createDataFrame([("k1", dt.date(2024, 3, 1), Decimal("99.99"), 9)], schema), path, opts)
    table = pyhudi.HudiTable(path)
    result = validate(table)
    assert result.agrees, validate_text(result)
    records = MetadataTable(table.storage).read("column_stats", table.timeline)
    stats = {r["ColumnStatsMetadata"]["columnName"] for _k, r in records}
    assert stats == {"_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key", "id", "d", "amount",
                     "ts"}
    base = [r["ColumnStatsMetadata"] for _k, r in records
            if r["ColumnStatsMetadata"]["fileName"].endswith(".parquet")]
    amount = next(s for s in base if s["columnName"] == "amount")
    day = next(s for s in base if s["columnName"] == "d")
    assert amount["isTightBound"] is False
    if version == "9":
        assert amount["valueType"] == {"typeOrdinal": 10, "additionalInfo": "10,2"}
        assert amount["minValue"] == ("org.apache.hudi.avro.model.BytesWrapper", {"value": (-325).to_bytes(2, "big",
                                                                                                         signed=True)})
        assert day["valueType"]["typeOrdinal"] == 12 and day["minValue"][0].endswith(".IntWrapper")
    else:
        assert "valueType" not in amount and amount["minValue"][0].endswith(".DecimalWrapper")
        assert day["minValue"][0].endswith(".DateWrapper")
    defs = json.loads((Path(path) / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]
    assert defs["column_stats"]["sourceFields"] == ["_hoodie_commit_time", "_hoodie_partition_path",
                                                    "_hoodie_record_key", "id", "d", "amount", "ts"]
    assert defs["column_stats"].get("version") == ("V2" if version == "9" else None)
    got = pyhudi.read(spark, path).where("amount > 50").collect()
    assert [(r["id"], r["amount"]) for r in got] == [("k1", Decimal("99.99"))]
    assert sorted(r["id"] for r in hudi_rs_rows(path)) == [f"k{i}" for i in range(8)]


def test_the_structure_matches_a_metadata_table_hudi_1_1_wrote(spark, tmp_path):
    """Properties keys of the MDT and the data table's metadata keys, timeline file names, partition
    folders, file-group and init-log names and the layout of index.json compare with the v9 sample
    cow__v9_txns_simple_meta (Hudi 1.1.1)."""
    sample = unzip_table(SAMPLES / "cow__v9_txns_simple_meta.zip", tmp_path / "sample")
    path = tmp_path / "t"
    opts = {**BASE, "hoodie.write.table.version": "9", "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.min.filegroup.count": "1",
            "hoodie.metadata.record.index.max.filegroup.count": "1"}
    for n in range(2):
        pyhudi.write(spark.createDataFrame([(f"k{i}", "x", n) for i in range(4)], SCHEMA), str(path), opts)
    ours, theirs = path / ".hoodie", sample / ".hoodie"
    assert set(_props(ours / "metadata" / ".hoodie")) == set(_props(theirs / "metadata" / ".hoodie"))
    mdt_props = _props(ours / "metadata" / ".hoodie")
    for key in ("hoodie.table.keygenerator.type", "hoodie.record.merge.mode", "hoodie.record.merge.strategy.id",
                "hoodie.archivelog.folder", "hoodie.compaction.payload.class", "hoodie.table.base.file.format"):
        assert mdt_props[key] == _props(theirs / "metadata" / ".hoodie")[key], key
    keys = ("hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight",
            "hoodie.table.index.defs.path")
    assert all(k in _props(ours) for k in keys)
    assert _props(ours)["hoodie.table.index.defs.path"] == _props(theirs)["hoodie.table.index.defs.path"]

    def shape(name: str) -> str:
        return re.sub(r"[1-9]\d{16}", "T", name)

    def timeline(root: Path) -> set[str]:
        return {shape(n) for n in os.listdir(root / "metadata" / ".hoodie" / "timeline")}

    assert {"00000000000000000.deltacommit.requested", "00000000000000000.deltacommit.inflight",
            "00000000000000000_T.deltacommit", "00000000000000001_T.deltacommit", "00000000000000002_T.deltacommit",
            "T.deltacommit.requested", "T_T.deltacommit"} <= timeline(ours) & timeline(theirs)
    for partition in ("files", "column_stats", "record_index"):
        mine = {shape(n) for n in os.listdir(ours / "metadata" / partition)}
        sample_names = {shape(n) for n in os.listdir(theirs / "metadata" / partition)}
        init = {n for n in sample_names if "-0000-0_0000000000000000" in n and n.endswith("_0-0-0")}
        assert init and init <= mine, (partition, init, mine)
        assert ".hoodie_partition_metadata" in mine
    ours_defs = json.loads((ours / ".index_defs" / "index.json").read_text())["indexDefinitions"]
    theirs_defs = json.loads((theirs / ".index_defs" / "index.json").read_text())["indexDefinitions"]
    assert ours_defs["record_index"] == theirs_defs["record_index"]
    assert set(ours_defs["column_stats"]) == set(theirs_defs["column_stats"])
    text = (ours / ".index_defs" / "index.json").read_text()
    assert '"indexOptions" : { }' in text and '"sourceFields" : [ ]' in text  # Jackson's pretty printer


def test_hudi_rs_lists_the_files_through_the_metadata_table(spark, tmp_path):
    """A copy of a base file planted as a new file group of a committed instant is in storage but
    not in the metadata table: hudi-rs (which lists through the metadata table of a version-9
    table declaring ``files``) and pyhudi read without it; a copy of the table without its
    metadata table makes hudi-rs list storage, and it reads the planted rows."""
    path = tmp_path / "t"
    opts = {**PARTITIONED, "hoodie.write.table.version": "9"}
    expected = _write_series(spark, str(path), opts, 2)
    part = path / "p0"
    base = sorted(n for n in os.listdir(part) if n.endswith(".parquet"))[-1]
    planted = "00000000-0000-0000-0000-000000000000-0" + base[base.index("_"):]
    shutil.copy(part / base, part / planted)
    want = sorted(expected.items())
    assert sorted((r["id"], r["ts"]) for r in hudi_rs_rows(path)) == want
    assert sorted((r["id"], r["ts"]) for r in pyhudi_rows(spark, str(path))) == want
    bare = tmp_path / "bare"
    shutil.copytree(path, bare)
    shutil.rmtree(bare / ".hoodie" / "metadata")
    props = bare / ".hoodie" / "hoodie.properties"
    props.write_text("".join(line for line in props.read_text().splitlines(keepends=True)
                             if not line.startswith("hoodie.table.metadata.partitions")))
    assert len(hudi_rs_rows(bare)) > len(want)


def test_rollback_and_disabling_keep_the_v9_metadata_table_right(spark, tmp_path):
    """A rollback of the latest write undoes its delta commit (the record index rebuilt if a
    compaction folded it in); disabling the metadata table removes it with the three properties and
    index.json; enabling builds it again from storage."""
    path = str(tmp_path / "t")
    opts = {**PARTITIONED, "hoodie.write.table.version": "9", "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    expected = _write_series(spark, path, opts, 3)
    before = dict(expected)
    pyhudi.write(spark.createDataFrame([("k1", "p1", 50), ("new", "p2", 50)], SCHEMA), path, opts)
    pyhudi.rollback(path)
    _check(spark, path, before)
    pyhudi.write(spark.createDataFrame([("z", "p0", 7)], SCHEMA), path, {**opts, "hoodie.metadata.enable": "false"})
    props = pyhudi.HudiTable(path).properties
    assert not any(k in props for k in ("hoodie.table.metadata.partitions", "hoodie.table.index.defs.path",
                                        "hoodie.table.metadata.partitions.inflight"))
    assert not (Path(path) / ".hoodie" / "metadata").exists()
    assert not (Path(path) / ".hoodie" / ".index_defs").exists()
    pyhudi.write(spark.createDataFrame([("y", "p1", 8)], SCHEMA), path, opts)
    _check(spark, path, {**before, "z": 7, "y": 8})
