"""Queries whose filter names record keys read only the file groups the record index puts them in.

The tables here are laid out so that nothing else can prune: every commit writes new file groups
(no small-file packing) whose key ranges overlap, so footers and column statistics keep every
file of a partition, and the filters do not name the partition column."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import hudi_rs_rows
from pyspark.sql import functions as F
from pyspark.sql import types as T

import pyhudi
from pyhudi.read.skipping import MAX_INDEXED_KEYS, And, Compare, In, IsNull, Not, Or, Unknown, record_keys
from pyhudi.table.table import HudiTable

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("n", T.LongType())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.min.filegroup.count": "4",
        "hoodie.metadata.record.index.max.filegroup.count": "4", "hoodie.parquet.small.file.limit": "0",
        "hoodie.record.index.update.partition.path": "true"}
#: the read option that has key filters use the record index
USE_INDEX = {"hoodie.metadata.record.index.enable": "true"}


def test_filters_name_keys_by_equality_and_in_lists():
    def keys(pred, field="id"):
        return record_keys(pred, key_column="_hoodie_record_key", key_field=field)

    assert keys(Compare("id", "=", "a")) == {"a", "id:a"}  # simple or complex key generator
    assert keys(Compare("id", "=", 7)) == {"7", "id:7"}
    assert keys(Compare("_hoodie_record_key", "=", "id:a")) == {"id:a"}
    assert keys(In("id", ("a", "b", None))) == {"a", "id:a", "b", "id:b"}
    assert keys(Compare("id", "=", None)) == frozenset()
    assert keys(And((Compare("id", "=", "a"), In("id", ("a", "b")), Compare("n", ">", 1)))) == {"a", "id:a"}
    assert keys(And((Compare("id", "=", "a"), Compare("id", "=", "b")))) == frozenset()
    assert keys(Or((Compare("id", "=", "a"), Compare("_hoodie_record_key", "=", "b")))) == {"a", "id:a", "b"}
    # what does not restrict the key to a set
    for pred in (Compare("id", ">", "a"), Compare("n", "=", 1), Or((Compare("id", "=", "a"), Compare("n", "=", 1))),
                 Not(Compare("id", "=", "a")), IsNull("id"), Unknown(), Compare("id", "=", 1.5),
                 Compare("id", "=", True), Compare("id", "=", ""), Compare("_hoodie_record_key", "=", 3),
                 In("id", tuple(f"k{i}" for i in range(MAX_INDEXED_KEYS)))):
        assert keys(pred) is None, pred
    assert keys(Compare("id", "=", "a"), field=None) is None  # several record key fields
    simple = record_keys(In("id", ("a", 7)), key_column="_hoodie_record_key", key_field="id", bare=True)
    assert simple == {"a", "7"}  # a simple key generator stores the value alone


def _write(spark, path, rows, **extra):
    return pyhudi.write(spark.createDataFrame(rows, SCHEMA), path, {**OPTS, **extra})


@pytest.fixture(scope="module", params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def table(request, spark, tmp_path_factory):
    """Two partitions, each with three file groups of interleaved keys; then an update, a key
    moved to the other partition and a delete (in log files on merge-on-read)."""
    path = str(tmp_path_factory.mktemp("rli") / "t")
    kind = {"hoodie.datasource.write.table.type": request.param}
    for part in range(3):
        _write(spark, path, [(f"k{i:03d}", f"p{i % 2}", 1, i) for i in range(part, 90, 3)],
               **kind, **{"hoodie.datasource.write.operation": "insert"})
    before_changes = HudiTable(path).timeline.completed()[-1].timestamp
    _write(spark, path, [("k010", "p0", 2, -10), ("k011", "p0", 2, -11)], **kind)  # k011 moves from p1 to p0
    _write(spark, path, [("k012", "p0", 3, 0)], **kind, **{"hoodie.datasource.write.operation": "delete"})
    return path, before_changes


def _files(df) -> set[str]:
    return {f.rsplit("/", 1)[-1] for f in df.inputFiles()}


@pytest.mark.parametrize("condition, named, expected", [
    ("id = 'k010'", ["k010"], {("k010", "p0", -10)}),
    ("id = 'k011'", ["k011"], {("k011", "p0", -11)}),  # moved: found where it lives now
    ("id IN ('k001', 'k050', 'nope')", ["k001", "k050"], {("k001", "p1", 1), ("k050", "p0", 50)}),
    ("_hoodie_record_key = 'k020'", ["k020"], {("k020", "p0", 20)}),
    ("id = 'k003' OR id = 'k004'", ["k003", "k004"], {("k003", "p1", 3), ("k004", "p0", 4)}),
    ("id = 'k010' AND n > 0", ["k010"], set()),
    ("id = 'k012'", [], set()),  # deleted
    ("id = 'nope'", [], set()),
])
def test_key_filters_read_the_file_groups_the_index_names(spark, table, condition, named, expected):
    path, _ = table
    df = pyhudi.read(spark, path, USE_INDEX).where(F.expr(condition) if "OR" in condition else condition)
    assert {(r["id"], r["_hoodie_partition_path"], r["n"]) for r in df.collect()} == expected
    unpruned = pyhudi.read(spark, path, {"hoodie.enable.data.skipping": "false"}).where(condition)
    assert sorted(map(tuple, df.collect())) == sorted(map(tuple, unpruned.collect()))
    by_statistics = pyhudi.read(spark, path).where(condition)  # without the read option
    assert sorted(map(tuple, by_statistics.collect())) == sorted(map(tuple, unpruned.collect()))
    # each named key's one file group (its base file, and its log files on merge-on-read), no more
    slices = {(s.partition_path, s.file_id): s for s in HudiTable(path).file_system_view().latest_slices()}
    located = HudiTable(path).record_locations([*named, "nope", "k012"]) or {}
    assert sorted(located) == named
    base_files = {slices[g].base_file.name for g in located.values() if slices[g].base_file is not None}
    assert {f for f in _files(df) if f.endswith(".parquet")} == base_files
    every = {s.base_file.name for s in slices.values() if s.base_file is not None}
    assert {f for f in _files(unpruned) if f.endswith(".parquet")} == every and len(every) >= 6


def test_time_travel_does_not_use_the_index(spark, table):
    """Before the move the key lived in the other partition, which the index no longer says."""
    path, before_changes = table
    df = pyhudi.read(spark, path, {**USE_INDEX, "as.of.instant": before_changes}).where("id = 'k011'")
    assert [(r["id"], r["_hoodie_partition_path"], r["n"]) for r in df.collect()] == [("k011", "p1", 11)]


def test_results_match_hudi_rs(spark, table):
    path, _ = table
    wanted = {"k001", "k011", "k050", "k089"}
    ours = {(r["id"], r["_hoodie_partition_path"], r["n"])
            for r in pyhudi.read(spark, path, USE_INDEX).where(F.col("id").isin(*wanted)).collect()}
    theirs = {(r["id"], r["_hoodie_partition_path"], r["n"]) for r in hudi_rs_rows(path) if r["id"] in wanted}
    assert ours == theirs and len(ours) == 4


def test_without_a_usable_record_index_reads_prune_by_statistics(spark, tmp_path):
    """A write that turns the metadata table off removes it: key filters prune by footers."""
    path = str(tmp_path / "t")
    _write(spark, path, [("a", "x", 1, 1), ("b", "y", 1, 2)])
    _write(spark, path, [("c", "y", 2, 3)], **{"hoodie.metadata.enable": "false"})
    assert HudiTable(path).record_locations(["a"]) is None
    assert [r["id"] for r in pyhudi.read(spark, path, USE_INDEX).where("id = 'c'").collect()] == ["c"]
    assert sorted(r["id"] for r in hudi_rs_rows(path)) == ["a", "b", "c"]


def test_datasource_reads_the_located_slices(spark, table):
    """``spark.read.format("hudi")``: the key filter Spark pushes leaves one split per located key."""
    if not hasattr(spark, "dataSource"):
        pytest.skip("spark.read.format('hudi') needs PySpark 4")
    path, _ = table
    pyhudi.register(spark)
    df = spark.read.format("hudi").options(**USE_INDEX).load(path).where("id IN ('k001', 'k050', 'k012')")
    assert {(r["id"], r["_hoodie_partition_path"], r["n"]) for r in df.collect()} == \
        {("k001", "p1", 1), ("k050", "p0", 50)}
    assert df.rdd.getNumPartitions() == 2
    everything = spark.read.format("hudi").options(**USE_INDEX, **{"hoodie.enable.data.skipping": "false"}).load(path)
    assert everything.where("id IN ('k001', 'k050', 'k012')").rdd.getNumPartitions() >= 6


def test_the_record_index_apache_hudi_wrote_prunes_key_filters(spark, v9_table):
    """A table Hudi 1.1 wrote with its record index (five file groups in three regions): a
    filter on the keys of one file group reads that group alone and gives hudi-rs's rows."""
    path = str(v9_table)
    every = hudi_rs_rows(path)
    by_file: dict[str, set[str]] = {}
    for r in every:
        by_file.setdefault(r["_hoodie_file_name"].split("_")[0], set()).add(r["txn_id"])
    wanted = sorted(max(by_file.values(), key=len))  # the keys of one file group (by hudi-rs)
    df = pyhudi.read(spark, path, USE_INDEX).where(F.col("txn_id").isin(*wanted))
    fields = ("txn_id", "region", "amount", "txn_type")
    assert sorted(tuple(r[f] for f in fields) for r in df.collect()) == \
        sorted(tuple(r[f] for f in fields) for r in every if r["txn_id"] in wanted)
    located = HudiTable(path).record_locations(wanted)
    assert located is not None and sorted(located) == wanted
    slices = {(s.partition_path, s.file_id): s for s in HudiTable(path).file_system_view().latest_slices()}
    assert len(slices) == 5 and len(set(located.values())) == 1
    assert {f.rsplit("/", 1)[-1] for f in df.inputFiles() if f.endswith(".parquet")} == \
        {slices[g].base_file.name for g in set(located.values())}


@pytest.mark.parametrize("new_encoding", ["false", "true"])
def test_a_complex_key_generators_keys_are_found_in_either_encoding(spark, tmp_path, new_encoding):
    """One record key field under ComplexKeyGenerator is stored ``id:k1`` or ``k1`` by the writer's
    encoding; a filter on ``id`` finds the key either way."""
    path = str(tmp_path / "t")
    extra = {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
             "hoodie.write.complex.keygen.new.encoding": new_encoding}
    for part in range(2):
        _write(spark, path, [(f"k{i}", "p", 1, i) for i in range(part, 20, 2)], **extra)
    stored = {r["_hoodie_record_key"] for r in hudi_rs_rows(path)}
    assert ("k1" in stored) == (new_encoding == "true") and len(stored) == 20
    df = pyhudi.read(spark, path, USE_INDEX).where("id IN ('k1', 'k3')")  # both in the second commit's file
    assert sorted(r["n"] for r in df.collect()) == [1, 3]
    assert len([f for f in df.inputFiles() if f.endswith(".parquet")]) == 1
    assert len(HudiTable(path).file_system_view().latest_base_files()) == 2


def test_without_the_read_option_a_key_held_twice_is_read_twice(spark, tmp_path):
    """The index kept beside a non-global index knows one place of a key two partitions hold: a
    read that does not opt in reads both rows (by statistics); one that does trusts the index."""
    path = str(tmp_path / "t")
    simple = {"hoodie.index.type": "SIMPLE", "hoodie.metadata.record.index.enable": "true"}
    _write(spark, path, [("a", "x", 1, 1), ("b", "x", 1, 2)], **simple)
    _write(spark, path, [("a", "y", 2, 3)], **simple)  # a second "a", in partition y
    rows = sorted((r["_hoodie_partition_path"], r["n"]) for r in pyhudi.read(spark, path).where("id = 'a'").collect())
    assert rows == [("x", 1), ("y", 3)]
    assert sorted((r["_hoodie_partition_path"], r["n"]) for r in hudi_rs_rows(path) if r["id"] == "a") == rows
    trusted = pyhudi.read(spark, path, USE_INDEX).where("id = 'a'").collect()
    assert [(r["_hoodie_partition_path"], r["n"]) for r in trusted] == [("y", 3)]


def test_an_index_of_other_file_groups_is_not_used(spark, tmp_path, caplog):
    """File groups named otherwise than record-index-0000-0 on (Hudi 1.x's partitioned record
    index names them by data partition) are not looked up as a global index."""
    import logging
    import os

    path = str(tmp_path / "t")
    _write(spark, path, [("a", "x", 1, 1), ("b", "y", 1, 2)])
    folder = os.path.join(path, ".hoodie", "metadata", "record_index")
    for name in os.listdir(folder):
        if "record-index-0001-0" in name:
            os.rename(os.path.join(folder, name), os.path.join(folder, name.replace("-0001-0", "-x-0001-0")))
    with caplog.at_level(logging.WARNING, logger="pyhudi"):
        assert HudiTable(path).record_locations(["a", "b"]) is None
    assert "not one global index" in caplog.text
    assert sorted(r["id"] for r in pyhudi.read(spark, path, USE_INDEX).where("id IN ('a', 'b')").collect()) == \
        ["a", "b"] == sorted(r["id"] for r in hudi_rs_rows(path))


def test_a_partitioned_record_index_is_read_around_and_refuses_writes(spark, v9_table, tmp_path):
    """A table whose index.json declares its record index partitioned (Hudi 1.x's non-global one):
    key filters read by statistics, and writes and table services are refused before anything is
    written (pyhudi keeps a global index, whose updates would go to the wrong file groups)."""
    import shutil

    from pyhudi.errors import HudiUnsupportedError

    path = str(tmp_path / "t")
    shutil.copytree(v9_table, path)
    defs = Path(path) / ".hoodie" / ".index_defs" / "index.json"
    text = defs.read_text()
    assert '"isPartitioned" : "false"' in text
    defs.write_text(text.replace('"isPartitioned" : "false"', '"isPartitioned" : "true"'))
    # (without the secondary indexes Hudi wrote, which are refused first)
    HudiTable(path).update_properties({"hoodie.table.metadata.partitions":
                                       "column_stats,files,partition_stats,record_index"})
    before = sorted(p.name for p in (Path(path) / ".hoodie").iterdir())
    table = HudiTable(path)
    assert table.record_locations(["TXN-001"]) is not None  # (its file groups here are the global ones)
    for action in ("write", "clean", "compaction"):
        with pytest.raises(HudiUnsupportedError, match="partitioned record index"):
            table.check_writable(action)
    frame = spark.createDataFrame([("TXN-001", "eu")], "txn_id string, region string")
    with pytest.raises(HudiUnsupportedError, match="partitioned record index"):
        pyhudi.write(frame, path, {"hoodie.table.name": "t"})
    assert sorted(p.name for p in (Path(path) / ".hoodie").iterdir()) == before
