"""The partition_stats partition of the metadata table of table versions 8 and 9 (Hudi 1.x keeps it
beside column_stats on a partitioned table): after inserts, upserts, deletes, delete_partition and
metadata-table compactions of v9 COW and MOR tables, its records equal what a plain model computes
from the rows of each partition's latest files; validate agrees; hudi-rs reads the model; the
records and the partition's layout compare with what Hudi 1.1 wrote (tests/data/hudi1x)."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import hudi_rs_rows, unzip_table
from pyspark.sql import types as T

import pyhudi
from pyhudi.cli.metadata import validate, validate_text
from pyhudi.commit.partition_stats_build import latest_files
from pyhudi.config.properties import parse_properties
from pyhudi.io.log_format import data_block_records, read_log_file
from pyhudi.metadata import column_stats
from pyhudi.metadata.keys import column_id, partition_id
from pyhudi.metadata.table import MetadataTable

SAMPLES = Path(__file__).parent / "data" / "hudi1x"
SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("v", T.DoubleType()),
                       T.StructField("d", T.DateType())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.write.table.version": "9", "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.compact.max.delta.commits": "3", "hoodie.compact.inline.max.delta.commits": "3"}
COLUMNS = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key", "id", "p", "ts", "v", "d")


def _rows(n: int, keys: range) -> list[tuple]:
    return [(f"k{i:02d}", f"p{i % 3}", n, None if (i + n) % 5 == 0 else float(i * 10 + n),
             dt.date(2024, 1, 1) + dt.timedelta(days=i + n)) for i in keys]


def _recorded(path: str) -> dict[str, dict[str, dict]]:
    """partition -> column -> live partition_stats record (merged), as readers see them."""
    table = pyhudi.HudiTable(path)
    out: dict[str, dict[str, dict]] = {}
    for key, record in column_stats.merged(MetadataTable(table.storage).read("partition_stats", table.timeline)):
        stats = record["ColumnStatsMetadata"]
        assert record["type"] == 6 and key == column_id(stats["columnName"]) + partition_id(stats["fileName"])
        if not stats["isDeleted"]:
            out.setdefault(stats["fileName"], {})[stats["columnName"]] = stats
    return out


def _model(path: str) -> dict[str, dict[str, tuple]]:
    """partition -> column -> (min, max, nulls, values) over the rows of the base files and the data
    blocks of completed instants in the log files of each partition's latest slices."""
    table = pyhudi.HudiTable(path)
    done = {i.timestamp for i in table.timeline.completed()}
    out: dict[str, dict[str, tuple]] = {}
    for partition, names in latest_files(table.storage, table.timeline).items():
        pieces = []
        for name in names:
            rel = f"{partition}/{name}"
            if name.endswith(".parquet"):
                pieces.append(pq.read_table(os.path.join(path, rel)).select(list(COLUMNS)))
                continue
            for block in read_log_file(table.storage, rel):
                if block.instant_time in done and block.block_type.name.endswith("DATA_BLOCK"):
                    pieces.append(data_block_records(block).select(list(COLUMNS)))
        if not pieces:
            continue
        rows = pa.concat_tables(pieces)
        out[partition] = {}
        for column in COLUMNS:
            values = rows.column(column)
            bounds = pc.min_max(values)
            out[partition][column] = (bounds["min"].as_py(), bounds["max"].as_py(), values.null_count, len(values))
    return out


def _check(spark, path: str, expected: dict[str, int], *, version: int = 9) -> None:
    """The recorded partition statistics equal the model; validate agrees; hudi-rs reads the rows."""
    result = validate(pyhudi.HudiTable(path))
    assert result.agrees, validate_text(result)
    model = _model(path)
    recorded = _recorded(path)
    assert set(recorded) == set(model)
    kinds = {"ts": pa.int64(), "v": pa.float64(), "d": pa.date32()}
    for partition, columns in model.items():
        assert set(recorded[partition]) == set(COLUMNS)
        for column, want in columns.items():
            stats = recorded[partition][column]
            kind = kinds.get(column, pa.string())
            got = (column_stats.unwrap(stats["minValue"], kind), column_stats.unwrap(stats["maxValue"], kind),
                   stats["nullCount"], stats["valueCount"])
            assert got == want, (partition, column, got, want)
            assert stats["isTightBound"] is True
            assert (stats.get("valueType") or {}).get("typeOrdinal", 0) > 0 if version >= 9 else \
                stats.get("valueType") is None
    assert sorted((r["id"], r["ts"]) for r in hudi_rs_rows(path)) == sorted(expected.items())


@pytest.mark.parametrize("version,table_type", [(9, "COPY_ON_WRITE"), (9, "MERGE_ON_READ"), (8, "MERGE_ON_READ")])
def test_partition_stats_follow_every_write(spark, tmp_path, version, table_type):
    """Inserts, upserts (some values growing a range, some shrinking it), a delete, a
    delete_partition and MDT compactions (every 3 delta commits): after each, every partition's
    record of every indexed column equals the model of its latest files."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type, "hoodie.write.table.version": str(version)}
    expected: dict[str, int] = {}
    steps = [("insert", _rows(0, range(0, 12))), ("upsert", _rows(1, range(0, 12, 2))),
             ("upsert", _rows(2, range(9, 15))), ("delete", _rows(3, range(0, 15, 4))),
             ("upsert", _rows(4, range(1, 6)))]
    for operation, rows in steps:
        pyhudi.write(spark.createDataFrame(rows, SCHEMA), path,
                     {**opts, "hoodie.datasource.write.operation": operation})
        for key, _p, ts, *_ in rows:
            if operation == "delete":
                expected.pop(key, None)
            else:
                expected[key] = ts
        _check(spark, path, expected, version=version)
    pyhudi.write(spark.createDataFrame(_rows(5, range(1, 2)), SCHEMA), path,
                 {**opts, "hoodie.datasource.write.operation": "delete_partition",
                  "hoodie.datasource.write.partitions.to.delete": "p1"})
    expected = {k: v for k, v in expected.items() if int(k[1:]) % 3 != 1}
    _check(spark, path, expected, version=version)
    assert "p1" not in _recorded(path)
    mdt = Path(path) / ".hoodie" / "metadata"
    assert any(n.endswith(".commit") for n in os.listdir(mdt / ".hoodie" / "timeline"))  # compacted
    assert any(n.endswith(".hfile") for n in os.listdir(mdt / "partition_stats"))


def test_structure_and_records_match_what_hudi_1_1_wrote(spark, tmp_path):
    """With files, column_stats and record_index, partition_stats is initialized fourth (at
    ``...003``) with an empty log of file group partition-stats-0000-0, as in the sample
    cow__v9_txns_simple_meta; the data table declares it; its records carry the sample's fields."""
    sample = unzip_table(SAMPLES / "cow__v9_txns_simple_meta.zip", tmp_path / "sample")
    path = tmp_path / "t"
    opts = {**OPTS, "hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.min.filegroup.count": "1",
            "hoodie.metadata.record.index.max.filegroup.count": "1"}
    pyhudi.write(spark.createDataFrame(_rows(0, range(6)), SCHEMA), str(path), opts)

    def shape(name: str) -> str:
        return re.sub(r"_\d+-\d+-\d+$", "_W", re.sub(r"[1-9]\d{16}", "T", name))

    ours, theirs = path / ".hoodie" / "metadata", sample / ".hoodie" / "metadata"
    mine = {shape(n) for n in os.listdir(ours / "partition_stats")}
    sample_names = {shape(n) for n in os.listdir(theirs / "partition_stats")}
    init = ".partition-stats-0000-0_00000000000000003.log.1_W"
    assert init in mine and init in sample_names
    assert ".partition-stats-0000-0_T.log.1_W" in mine & sample_names
    assert "00000000000000003_T.deltacommit" in {shape(n) for n in os.listdir(ours / ".hoodie" / "timeline")}
    props = parse_properties((path / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.table.metadata.partitions"] == "column_stats,files,partition_stats,record_index"
    sample_props = parse_properties((sample / ".hoodie" / "hoodie.properties").read_text())
    assert "partition_stats" in sample_props["hoodie.table.metadata.partitions"].split(",")
    table = pyhudi.HudiTable(str(sample))
    theirs_records = MetadataTable(table.storage).read("partition_stats", table.timeline)
    ours_table = pyhudi.HudiTable(str(path))
    ours_records = MetadataTable(ours_table.storage).read("partition_stats", ours_table.timeline)
    assert ours_records
    fields = {k for k, v in theirs_records[0][1]["ColumnStatsMetadata"].items()}
    assert set(ours_records[0][1]["ColumnStatsMetadata"]) == fields
    assert {r["type"] for _k, r in ours_records} == {r["type"] for _k, r in theirs_records} == {6}


def test_the_sample_partitions_last_written_by_a_commit_equal_the_aggregate_of_their_files(tmp_path):
    """In Hudi 1.1's samples (COW and MOR), the records of the partitions whose last write was a
    commit (us, eu) equal pyhudi's aggregate of the column statistics of their latest files, key,
    sizes and value types included; apac, last written by a clustering, also counts the file groups
    that clustering replaced (validate accepts the wider bound)."""
    from pyhudi.metadata import partition_stats as ps

    for name in ("cow__v9_txns_simple_meta", "mor__v9_txns_simple_meta"):
        sample = unzip_table(SAMPLES / f"{name}.zip", tmp_path / name)
        table = pyhudi.HudiTable(str(sample))
        mdt = MetadataTable(table.storage)
        recorded = {k: r["ColumnStatsMetadata"] for k, r in column_stats.merged(mdt.read("partition_stats",
                                                                                          table.timeline))}
        columns = sorted({s["columnName"] for s in recorded.values()})
        files = latest_files(table.storage, table.timeline)
        for partition in ("region=us", "region=eu", "region=apac"):
            by_file = ps.by_file(column_stats.merged(mdt.read(
                "column_stats", table.timeline, key_prefixes=ps.key_prefixes(columns, partition))))
            mine = {k: r["ColumnStatsMetadata"] for k, r in ps.aggregate(partition, files[partition], by_file,
                                                                         columns, 9)}
            assert len(mine) == 16
            same = all(recorded[k] == v for k, v in mine.items())
            assert same == (partition != "region=apac"), partition
        assert validate(table).agrees


def test_disabled_partition_stats_keep_column_stats_alone_and_enabling_builds_them(spark, tmp_path):
    """hoodie.metadata.index.partition.stats.enable=false keeps column_stats without partition_stats
    on a partitioned v9 table; enabling it later builds the partition from storage (the model);
    a non-partitioned table never has one."""
    path = str(tmp_path / "t")
    off = {**OPTS, "hoodie.metadata.index.partition.stats.enable": "false",
           "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    pyhudi.write(spark.createDataFrame(_rows(0, range(9)), SCHEMA), path, off)
    pyhudi.write(spark.createDataFrame(_rows(1, range(0, 9, 2)), SCHEMA), path, off)
    props = pyhudi.HudiTable(path).properties
    assert props["hoodie.table.metadata.partitions"] == "column_stats,files"
    assert not (Path(path) / ".hoodie" / "metadata" / "partition_stats").exists()
    pyhudi.write(spark.createDataFrame(_rows(2, range(3, 5)), SCHEMA), path,
                 {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"})
    assert "partition_stats" in pyhudi.HudiTable(path).properties["hoodie.table.metadata.partitions"]
    expected = {f"k{i:02d}": ts for ts, keys in ((0, range(9)), (1, range(0, 9, 2)), (2, range(3, 5)))
                for i in keys}
    _check(spark, path, expected)
    flat = str(tmp_path / "flat")
    pyhudi.write(spark.createDataFrame(_rows(0, range(3)), SCHEMA), flat,
                 {k: v for k, v in OPTS.items() if k != "hoodie.datasource.write.partitionpath.field"})
    assert not (Path(flat) / ".hoodie" / "metadata" / "partition_stats").exists()


def test_a_rollback_recomputes_the_partitions_it_touched(spark, tmp_path):
    """A rolled-back upsert whose MDT delta commit a compaction already folded in: the partitions
    it wrote are recomputed from the files left, so no bound excludes the restored values."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.metadata.compact.max.delta.commits": "1"}
    pyhudi.write(spark.createDataFrame(_rows(0, range(6)), SCHEMA), path, opts)
    pyhudi.write(spark.createDataFrame(_rows(50, range(6)), SCHEMA), path, opts)
    pyhudi.write(spark.createDataFrame(_rows(60, range(1)), SCHEMA), path, opts)  # compacts the MDT
    pyhudi.rollback(path)
    _check(spark, path, {f"k{i:02d}": 50 for i in range(6)})


def test_table_services_keep_partition_stats_sound_and_the_next_commit_tight(spark, tmp_path):
    """MOR v9: compaction (a new base per file group) keeps the records equal to the model;
    clustering counts the replaced file groups too (Hudi 1.1), which validate accepts as a wider
    bound, until the next write to every partition makes them equal again; clean writes none;
    a restore rebuilds the metadata table and the records equal the model of the restored files."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.parquet.small.file.limit": "0",
            "hoodie.metadata.compact.max.delta.commits": "4", "hoodie.cleaner.commits.retained": "1"}
    expected: dict[str, int] = {}

    def write(n: int, keys: range) -> None:
        pyhudi.write(spark.createDataFrame(_rows(n, keys), SCHEMA), path, opts)
        expected.update({f"k{i:02d}": n for i in keys})

    write(0, range(9))
    write(1, range(9, 18))
    saved = pyhudi.create_savepoint(path, options=opts)
    restored = dict(expected)
    write(2, range(0, 18, 2))
    pyhudi.compact(spark, path, opts)
    _check(spark, path, expected)
    assert pyhudi.cluster(spark, path, opts)
    result = validate(pyhudi.HudiTable(path))
    assert result.agrees, validate_text(result)
    model, recorded = _model(path), _recorded(path)
    assert any(recorded[p]["id"]["valueCount"] > model[p]["id"][3] for p in model)  # the retired groups count
    write(3, range(0, 6))  # every partition
    _check(spark, path, expected)
    pyhudi.clean(path, opts)
    _check(spark, path, expected)
    pyhudi.restore(path, saved.instant, options=opts)
    _check(spark, path, restored)
