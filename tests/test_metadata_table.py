"""The metadata table pyhudi writes: created on the first write, in step with every action,
compacted, cleaned and archived, undone with failed writes, removed when disabled, and used to plan."""

from __future__ import annotations

import logging
import os
import shutil

import pytest
from conftest import hudi_rs_rows, kill_writer_on_failure, pyhudi_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi.cli.metadata import validate, validate_text
from pyhudi.metadata.table import MetadataTable
from pyhudi.timeline.instant import COMMIT, DELTA_COMMIT, ROLLBACK, SAVEPOINT
from pyhudi.timeline.timeline import Timeline

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}


def _rows(spark, rows):
    return spark.createDataFrame(rows, SCHEMA)


def _agrees(spark, path: str) -> MetadataTable:
    """The metadata table agrees with storage, and hudi-rs reads the table as pyhudi does."""
    table = pyhudi.HudiTable(path)
    assert table.has_metadata_table()
    result = validate(table)
    assert result.agrees, validate_text(result)
    assert sorted((r["id"], r["ts"]) for r in hudi_rs_rows(path)) == \
        sorted((r["id"], r["ts"]) for r in pyhudi_rows(spark, path))
    return MetadataTable(table.storage)


def _in_metadata_table(timeline: Timeline) -> bool:
    return "/.hoodie/metadata" in timeline.storage.base_path


def _kill_when(monkeypatch, doomed) -> None:
    """The writer dies (no rollback, heartbeat expired) at the instant completion ``doomed(timeline,
    action)`` picks."""
    original = Timeline.complete

    def complete(self, timestamp, action, content):
        if doomed(self, action):
            raise KeyboardInterrupt("killed")
        return original(self, timestamp, action, content)

    monkeypatch.setattr(Timeline, "complete", complete)
    kill_writer_on_failure(monkeypatch)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_every_action_is_applied_and_the_table_stays_small(spark, tmp_path, table_type):
    """Writes, deletes, cleans, compactions, a rollback, a savepoint and a restore: after each the
    metadata table lists exactly the files in storage; its timeline mirrors the data table's, is
    compacted every 3 delta commits, cleaned and archived; a restore rebuilds it from storage;
    hudi-rs reads what pyhudi reads. The record index (the write's index) is validated each time."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type, "hoodie.metadata.compact.max.delta.commits": "3",
            "hoodie.cleaner.commits.retained": "1", "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
            "hoodie.compact.inline.max.delta.commits": "2", "hoodie.index.type": "RECORD_INDEX",
            "hoodie.metadata.record.index.min.filegroup.count": "2",
            "hoodie.metadata.record.index.max.filegroup.count": "2"}
    expected: dict[str, int] = {}
    for n in range(12):
        rows = [(f"k{i}", f"p{i % 3}", n) for i in range(n % 4, 30, 3)]
        op = "delete" if n % 5 == 4 else "upsert"
        pyhudi.write(_rows(spark, rows), path, {**opts, "hoodie.datasource.write.operation": op})
        for key, _p, ts in rows:
            if op == "delete":
                expected.pop(key, None)
            else:
                expected[key] = ts
        mdt = _agrees(spark, path)
        if n == 6:
            saved = pyhudi.HudiTable(path).timeline.completed_writes()[-1].timestamp
            pyhudi.create_savepoint(path, saved)
            at_savepoint = dict(expected)
    mdt_instants = {i.timestamp: i for i in mdt.timeline.reload().instants()}
    for inst in pyhudi.HudiTable(path).timeline.completed():  # every data action has its delta commit
        if inst.action != SAVEPOINT and inst.timestamp > (mdt.base_instant() or ""):
            assert mdt_instants[inst.timestamp].action == DELTA_COMMIT, inst
    assert mdt.timeline.completed([COMMIT]), "the metadata table was compacted"
    assert len(mdt.timeline.instants()) <= 30 + 3, "the metadata timeline is archived"
    files = os.listdir(os.path.join(path, ".hoodie", "metadata", "files"))
    assert sum(f.endswith(".hfile") for f in files) <= 3, "old metadata slices are cleaned"
    pyhudi.rollback(path)  # the latest write, completed: undone in the MDT too
    _agrees(spark, path)
    restored = pyhudi.restore(path, saved)
    mdt = _agrees(spark, path)
    assert mdt.base_instant() == restored.instant + "010", "rebuilt from storage at the restore"
    assert sorted((r["id"], r["ts"]) for r in pyhudi_rows(spark, path)) == sorted(at_savepoint.items())
    assert sorted((r["id"], r["ts"]) for r in hudi_rs_rows(path)) == sorted(at_savepoint.items())


def test_a_write_killed_after_its_metadata_delta_commit_is_undone_in_both(spark, tmp_path, monkeypatch):
    """The MDT delta commit completes, the data instant never does: readers ignore the delta
    commit, and the next writer's rollback undoes it (an MDT rollback at the rollback's time + 006)."""
    path = str(tmp_path / "t")
    pyhudi.write(_rows(spark, [("a", "x", 1), ("b", "y", 1)]), path, OPTS)
    _kill_when(monkeypatch, lambda timeline, action: not _in_metadata_table(timeline))
    with pytest.raises(KeyboardInterrupt):
        pyhudi.write(_rows(spark, [("a", "x", 2), ("c", "x", 2)]), path, OPTS)
    monkeypatch.undo()
    table = pyhudi.HudiTable(path)
    failed = table.timeline.pending()[0].timestamp
    mdt = MetadataTable(table.storage)
    assert mdt.timeline.reload().is_completed(failed), "the MDT delta commit of the failed write completed"
    assert sorted((r["id"], r["ts"]) for r in pyhudi_rows(spark, path)) == [("a", 1), ("b", 1)]
    assert not [f for files in mdt.listing(table.timeline).files.values() for f in files if failed in f]
    pyhudi.write(_rows(spark, [("d", "y", 3)]), path, OPTS)
    mdt = _agrees(spark, path)
    rollback = pyhudi.HudiTable(path).timeline.completed([ROLLBACK])[0].timestamp
    assert failed not in {i.timestamp for i in mdt.timeline.reload().instants()}
    assert mdt.timeline.completed([ROLLBACK])[0].timestamp == rollback + "006"
    assert sorted((r["id"], r["ts"]) for r in pyhudi_rows(spark, path)) == [("a", 1), ("b", 1), ("d", 3)]


def test_a_write_killed_inside_the_metadata_table_is_rolled_back_there(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    pyhudi.write(_rows(spark, [("a", "x", 1)]), path, OPTS)
    _kill_when(monkeypatch, lambda timeline, action: _in_metadata_table(timeline))
    with pytest.raises(KeyboardInterrupt):
        pyhudi.write(_rows(spark, [("b", "x", 2)]), path, OPTS)
    monkeypatch.undo()
    mdt = MetadataTable(pyhudi.HudiTable(path).storage)
    assert mdt.timeline.reload().pending([DELTA_COMMIT])
    pyhudi.write(_rows(spark, [("c", "y", 3)]), path, OPTS)
    mdt = _agrees(spark, path)
    assert not mdt.timeline.reload().pending()
    assert sorted(r["id"] for r in pyhudi_rows(spark, path)) == ["a", "c"]


def test_disabling_removes_the_metadata_table_and_enabling_builds_it_from_storage(spark, tmp_path):
    path = str(tmp_path / "t")
    pyhudi.write(_rows(spark, [("a", "x", 1), ("b", "y", 1)]), path, OPTS)
    _agrees(spark, path)
    pyhudi.write(_rows(spark, [("c", "x", 2)]), path, {**OPTS, "hoodie.metadata.enable": "false"})
    table = pyhudi.HudiTable(path)
    assert not os.path.exists(os.path.join(path, ".hoodie", "metadata"))
    assert "hoodie.table.metadata.partitions" not in table.properties
    assert not table.has_metadata_table() and table.metadata_listing() is None
    pyhudi.write(_rows(spark, [("d", "y", 3)]), path, OPTS)
    table = pyhudi.HudiTable(path)
    mdt = _agrees(spark, path)
    init = mdt.timeline.completed([DELTA_COMMIT])[0].timestamp
    second = table.timeline.completed_writes()[1].timestamp
    assert init == second + "010", "initialized at the latest completed instant + 010"
    assert sorted(r["id"] for r in pyhudi_rows(spark, path)) == ["a", "b", "c", "d"]


def test_a_stale_metadata_table_is_not_trusted_and_is_rebuilt(spark, tmp_path, caplog):
    """A write that did not keep the MDT (an older writer) leaves it behind: readers list storage
    with a warning; a table service finding it behind declares it unusable instead of updating it
    (a compaction would hide the gap); the next write rebuilds it."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.clean.automatic": "false"}
    pyhudi.write(_rows(spark, [("a", "x", 1)]), path, opts)
    old = str(tmp_path / "old_mdt")
    shutil.copytree(os.path.join(path, ".hoodie", "metadata"), old)
    pyhudi.write(_rows(spark, [("a", "x", 2)]), path, opts)  # a new version of a's file
    shutil.rmtree(os.path.join(path, ".hoodie", "metadata"))
    shutil.copytree(old, os.path.join(path, ".hoodie", "metadata"))
    table = pyhudi.HudiTable(path)
    with caplog.at_level(logging.WARNING, logger="pyhudi"):
        assert table.metadata_listing() is None
    assert "behind the timeline" in caplog.text
    assert [(r["id"], r["ts"]) for r in pyhudi_rows(spark, path)] == [("a", 2)]
    assert pyhudi.clean(path, {"hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS",  # deletes a's first version
                               "hoodie.clean.fileversions.retained": "1"})
    table = pyhudi.HudiTable(path)
    assert not table.has_metadata_table() and table.metadata_listing() is None
    assert [(r["id"], r["ts"]) for r in pyhudi_rows(spark, path)] == [("a", 2)]
    pyhudi.write(_rows(spark, [("c", "x", 3)]), path, opts)
    _agrees(spark, path)
    assert pyhudi.HudiTable(path).metadata_listing() is not None
    assert sorted((r["id"], r["ts"]) for r in pyhudi_rows(spark, path)) == [("a", 2), ("c", 3)]


def test_metadata_partitions_pyhudi_does_not_keep_are_removed(spark, tmp_path):
    """An Apache Hudi writer's record index would go stale under pyhudi's writes: it is removed and
    no longer declared; the files partition stays."""
    path = str(tmp_path / "t")
    pyhudi.write(_rows(spark, [("a", "x", 1)]), path, OPTS)
    table = pyhudi.HudiTable(path)
    table.update_properties({"hoodie.table.metadata.partitions": "files,record_index"})
    os.makedirs(os.path.join(path, ".hoodie", "metadata", "record_index"))
    pyhudi.write(_rows(spark, [("b", "x", 2)]), path, OPTS)
    assert pyhudi.HudiTable(path).properties["hoodie.table.metadata.partitions"] == "files"
    assert not os.path.exists(os.path.join(path, ".hoodie", "metadata", "record_index"))
    _agrees(spark, path)


def test_planning_takes_the_file_list_from_the_metadata_table(spark, tmp_path):
    """A data file the MDT does not list (here: one copied in behind pyhudi's back, named like a
    committed file) is not planned while the MDT is usable; a storage listing would pick it up."""
    path = str(tmp_path / "t")
    pyhudi.write(_rows(spark, [("a", "x", 1)]), path, OPTS)
    _agrees(spark, path)
    table = pyhudi.HudiTable(path)
    base = table.file_system_view().latest_base_files()[0]
    stray = base.name.replace(base.file_id, "00000000-0000-0000-0000-000000000000-0")
    shutil.copy(os.path.join(path, base.path), os.path.join(path, "x", stray))
    names = {b.name for b in pyhudi.HudiTable(path).file_system_view().latest_base_files()}
    assert stray not in names and base.name in names
    from pyhudi.table.fs_view import FileSystemView

    listed = FileSystemView(table.storage, table.timeline)
    assert stray in {b.name for b in listed.latest_base_files()}


def test_a_write_killed_in_the_metadata_compaction_leaves_both_tables_usable(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.metadata.compact.max.delta.commits": "1"}
    pyhudi.write(_rows(spark, [("a", "x", 1)]), path, opts)
    _kill_when(monkeypatch, lambda timeline, action: _in_metadata_table(timeline) and action == COMMIT)
    with pytest.raises(KeyboardInterrupt):
        pyhudi.write(_rows(spark, [("b", "x", 2)]), path, opts)
    monkeypatch.undo()
    mdt = MetadataTable(pyhudi.HudiTable(path).storage)
    assert mdt.timeline.reload().pending(), "a compaction was left pending"
    assert sorted(r["id"] for r in pyhudi_rows(spark, path)) == ["a"]
    pyhudi.write(_rows(spark, [("c", "y", 3)]), path, opts)
    mdt = _agrees(spark, path)
    assert not mdt.timeline.reload().pending() and mdt.timeline.completed([COMMIT])
    assert sorted(r["id"] for r in pyhudi_rows(spark, path)) == ["a", "c"]
    assert sorted(r["id"] for r in hudi_rs_rows(path)) == ["a", "c"]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_column_stats_and_bloom_filters_are_kept_in_step_with_the_footers(spark, tmp_path, table_type):
    """With hoodie.metadata.index.column.stats.enable and .bloom.filter.enable the column_stats (2
    file groups) and bloom_filters (4) partitions hold, after every action, exactly the footer
    statistics and bloom filters of the listed base files; a write without the options removes
    them again."""
    from pyhudi.metadata import bloom_filters
    from pyhudi.metadata.keys import bloom_filter_key

    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type,
            "hoodie.metadata.index.column.stats.enable": "true", "hoodie.metadata.index.bloom.filter.enable": "true",
            "hoodie.metadata.compact.max.delta.commits": "2",
            "hoodie.cleaner.commits.retained": "1", "hoodie.compact.inline.max.delta.commits": "2"}
    for n in range(6):
        rows = [(f"k{i}", f"p{i % 2}", 10 * n + i) for i in range(n % 3, 12, 2)]
        pyhudi.write(_rows(spark, rows), path, {**opts, "hoodie.datasource.write.operation":
                                                "delete" if n == 3 else "upsert"})
        mdt = _agrees(spark, path)
    table = pyhudi.HudiTable(path)
    assert table.properties["hoodie.table.metadata.partitions"] == "bloom_filters,column_stats,files"
    assert mdt.partitions()["column_stats"] == ["col-stats-0000-0", "col-stats-0001-0"]
    assert len(mdt.partitions()["bloom_filters"]) == 4
    blooms = bloom_filters.latest(mdt.read("bloom_filters", table.timeline))
    checked = 0
    for row in pyhudi_rows(spark, path):  # every stored key passes its base file's filter from the MDT
        key = bloom_filter_key(row["p"], row["_hoodie_file_name"])
        if key in blooms:
            assert bloom_filters.bloom_filter(blooms[key]).might_contain([row["id"]])[0]
            checked += 1
    assert checked
    assert mdt.timeline.completed([COMMIT]), "compacted"
    pyhudi.rollback(path)
    _agrees(spark, path)
    pyhudi.write(_rows(spark, [("z", "p0", 99)]), path, OPTS)
    assert set(MetadataTable(pyhudi.HudiTable(path).storage).partitions()) == {"files"}
    assert pyhudi.HudiTable(path).properties["hoodie.table.metadata.partitions"] == "files"


def _validate_after_a_wrong_write(spark, path, monkeypatch, option, module, name, wrong) -> list[str]:
    """Write a table with ``option`` on, then one write whose ``module.name`` records ``wrong``
    makes wrong; what validate reports."""
    opts = {**OPTS, option: "true"}
    pyhudi.write(_rows(spark, [("a", "x", 1)]), path, opts)
    _agrees(spark, path)
    monkeypatch.setattr(module, name, wrong(getattr(module, name)))
    pyhudi.write(_rows(spark, [("b", "y", 5)]), path, opts)
    monkeypatch.undo()
    result = validate(pyhudi.HudiTable(path))
    assert not result.agrees
    return result.stats_differ


def test_validate_reports_a_wrong_column_statistic(spark, tmp_path, monkeypatch):
    from pyhudi.metadata import column_stats

    def wrong(original):
        return lambda partition, file_name, metadata, **kw: off_by_one(original(partition, file_name, metadata, **kw))

    def off_by_one(records):
        for _key, record in records:
            stats = record["ColumnStatsMetadata"]
            if stats["columnName"] == "ts":
                stats["maxValue"] = (stats["maxValue"][0], {"value": stats["maxValue"][1]["value"] + 1})
        return records

    differ = _validate_after_a_wrong_write(spark, str(tmp_path / "t"), monkeypatch,
                                           "hoodie.metadata.index.column.stats.enable", column_stats, "footer_records",
                                           wrong)
    assert any("column ts" in d and "y/" in d for d in differ), differ


def test_data_skipping_takes_statistics_from_the_metadata_table(spark, tmp_path, monkeypatch, caplog):
    """A point lookup on a table with column stats keeps the one base file whose range holds the
    key without reading any footer; the rows equal an unpruned read's."""
    from pyspark.sql import functions as F

    from pyhudi.read import skipping

    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.metadata.index.column.stats.enable": "true", "hoodie.parquet.small.file.limit": "0"}
    for n in range(4):  # four files in partition x, with disjoint ts ranges
        pyhudi.write(_rows(spark, [(f"k{n}-{i}", "x", 100 * n + i) for i in range(5)]), path, opts)
    read: list[str] = []
    original = skipping.footers
    monkeypatch.setattr(skipping, "footers", lambda storage, paths, **kw: read.extend(paths) or original(
        storage, paths, **kw))
    with caplog.at_level(logging.INFO, logger="pyhudi"):
        df = pyhudi.read(spark, path, filters=F.col("ts") == 203)
        rows = [(r["id"], r["ts"]) for r in df.collect()]
    assert rows == [("k2-3", 203)]
    newest = pyhudi.HudiTable(path).newest_base_file()
    assert len(df.inputFiles()) == 1 and set(read) <= {newest}  # the newest footer gives the schema
    assert "1 of 4 base files kept (statistics from the metadata table)" in caplog.text
    everything = pyhudi.read(spark, path).where("ts > 150 AND ts < 350")
    assert sorted(r["ts"] for r in pyhudi.read(spark, path, filters="ts > 150 AND ts < 350").collect()) == \
        sorted(r["ts"] for r in everything.collect())


def test_log_files_get_column_statistics_and_slices_are_pruned_by_all_their_files(spark, tmp_path, caplog):
    """Merge-on-read: the records a log block holds give the log file its statistics (sizes 0, as
    Hudi records them, merged over the commits that append to it); a slice with log files is
    skipped only when the statistics of its base file and of every log file rule the filter out."""
    from pyspark.sql import functions as F

    from pyhudi.metadata import column_stats

    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.index.type": "BLOOM"}
    pyhudi.write(_rows(spark, [(f"k{i}", "x", i) for i in range(10)]), path, opts)
    pyhudi.write(_rows(spark, [("k1", "x", 100)]), path, opts)  # a log file: ts 100
    pyhudi.write(_rows(spark, [("k2", "x", 120)]), path, opts)  # appended to it: ts 100..120
    table = pyhudi.HudiTable(path)
    (piece,) = table.file_system_view().latest_slices()
    (log_file,) = piece.log_files
    ranges = column_stats.file_ranges(MetadataTable(table.storage).read(column_stats.PARTITION, table.timeline),
                                      table.arrow_schema())
    assert (ranges[log_file.name]["ts"].min, ranges[log_file.name]["ts"].max, ranges[log_file.name]["ts"].count) == \
        (100, 120, 2)
    with caplog.at_level(logging.INFO, logger="pyhudi"):
        assert [r["id"] for r in pyhudi.read(spark, path, filters=F.col("ts") == 120).collect()] == ["k2"]
        assert "1 of 1 file slices with log files kept" in caplog.text
        caplog.clear()
        assert pyhudi.read(spark, path, filters=F.col("ts") == 50).collect() == []
        assert "0 of 1 file slices with log files kept" in caplog.text
        caplog.clear()
        assert [r["id"] for r in pyhudi.read(spark, path, filters=F.col("ts") == 5).collect()] == ["k5"]
        assert "1 of 1 file slices with log files kept" in caplog.text
    _agrees(spark, path)


def test_a_log_file_older_than_its_statistics_is_never_pruned_by_them(spark, tmp_path):
    """A log file written before column statistics were kept, then appended to: the new block's
    statistics alone would rule out the older block's rows, so the file counts as unindexed."""
    from pyspark.sql import functions as F

    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.index.type": "BLOOM"}
    pyhudi.write(_rows(spark, [(f"k{i}", "x", i) for i in range(10)]), path, opts)
    pyhudi.write(_rows(spark, [("k1", "x", 100)]), path, opts)  # a log file, no statistics kept yet
    stats = {**opts, "hoodie.metadata.index.column.stats.enable": "true"}
    pyhudi.write(_rows(spark, [("k2", "x", 50)]), path, stats)  # rebuilds the metadata table, appends to the log
    assert [r["id"] for r in pyhudi.read(spark, path, filters=F.col("ts") == 100).collect()] == ["k1"]
    assert [r["id"] for r in pyhudi.read(spark, path, filters=F.col("ts") == 50).collect()] == ["k2"]
    _agrees(spark, path)


def test_the_column_list_limits_the_statistics_kept(spark, tmp_path):
    """hoodie.metadata.index.column.stats.column.list: only the listed columns get statistics (base
    and log files); filters on them skip files by those statistics, filters on others by the files'
    footers; an unknown column is refused, naming it."""
    from pyspark.sql import functions as F

    from pyhudi.metadata import column_stats

    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.metadata.index.column.stats.enable": "true", "hoodie.parquet.small.file.limit": "0",
            "hoodie.metadata.index.column.stats.column.list": "ts",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    for n in range(3):
        pyhudi.write(_rows(spark, [(f"k{n}-{i}", "x", 100 * n + i) for i in range(5)]), path, opts)
    pyhudi.write(_rows(spark, [("k0-1", "x", 500)]), path, opts)
    table = pyhudi.HudiTable(path)
    records = MetadataTable(table.storage).read(column_stats.PARTITION, table.timeline)
    assert {r["ColumnStatsMetadata"]["columnName"] for _k, r in records} == {"ts"}
    assert any(r["ColumnStatsMetadata"]["fileName"].startswith(".") for _k, r in records)  # the log file's
    assert len(pyhudi.read(spark, path, filters=F.col("ts") == 203).inputFiles()) == 1
    assert [r["id"] for r in pyhudi.read(spark, path, filters=F.col("id") == "k2-3").collect()] == ["k2-3"]
    _agrees(spark, path)
    with pytest.raises(pyhudi.HudiConfigError, match="nope"):
        pyhudi.write(_rows(spark, [("z", "x", 1)]), path, {**opts, "hoodie.metadata.index.column.stats.column.list":
                                                              "ts,nope"})


def test_validate_reports_a_wrong_bloom_filter(spark, tmp_path, monkeypatch):
    from pyhudi.metadata import bloom_filters

    def wrong(original):
        return lambda storage, paths: [
            (k, {**r, "BloomFilterMetadata": {**r["BloomFilterMetadata"], "bloomFilter": b"x"}})
            for k, r in original(storage, paths)]

    differ = _validate_after_a_wrong_write(spark, str(tmp_path / "t"), monkeypatch,
                                           "hoodie.metadata.index.bloom.filter.enable", bloom_filters,
                                           "base_file_records", wrong)
    assert any("bloom filter of y/" in d for d in differ), differ


@pytest.mark.parametrize("local", ["true", "false"])
def test_the_bloom_index_takes_key_ranges_from_the_metadata_table(spark, tmp_path, local):
    """hoodie.bloom.index.use.metadata: the key ranges of the files come from the column statistics
    of _hoodie_record_key and their bloom filters from the bloom_filters partition (looked up by
    key, the same filters as the footers'), not from footers, on the partition-local and the
    distributed paths; the upsert lands as without it."""
    from pyhudi.index import bloom_index
    from pyhudi.metadata import bloom_filters

    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.index.type": "BLOOM", "pyhudi.write.partition.local": local,
            "hoodie.metadata.index.column.stats.enable": "true", "hoodie.metadata.index.bloom.filter.enable": "true",
            "hoodie.parquet.small.file.limit": "0"}
    for n in range(3):
        pyhudi.write(_rows(spark, [(f"k{n}-{i}", "x", n) for i in range(4)]), path, opts)
    bloom_index._KNOWN_RANGES.clear()
    res = pyhudi.write(_rows(spark, [("k1-2", "x", 9), ("new", "x", 9)]), path,
                       {**opts, "hoodie.bloom.index.use.metadata": "true"})
    assert res.stats["index"]["phases"]["key_ranges_from_metadata_table"] == 3
    assert res.stats["index"]["phases"]["bloom_filters_from_metadata_table"] == 4  # file groups
    table = pyhudi.HudiTable(path)
    bases = table.file_system_view().latest_base_files()
    found = bloom_filters.filters_of(table.storage, MetadataTable(table.storage).slices(
        bloom_filters.PARTITION, table.timeline), [(b.partition_path, b.name) for b in bases])
    assert {name: f.serialize() for name, f in found.items()} == {
        b.name: bloom_index._footer_bloom(bloom_index._read_footer(table.storage, b.path), b.path).serialize()
        for b in bases}
    if local == "false":
        assert res.stats["index"]["files_after_range_pruning"] == 1
    rows = {r["id"]: r["ts"] for r in pyhudi_rows(spark, path)}
    assert rows["k1-2"] == 9 and rows["new"] == 9 and len(rows) == 13
    _agrees(spark, path)


def test_a_log_file_written_again_under_its_name_is_read_afresh(tmp_path):
    """Applying an instant again rolls its first delta commit back and may write a log file of the
    same name and size; a reader that decoded the first one must not reuse it."""
    from pyhudi.io.log_format import hfile_data_block
    from pyhudi.metadata.files import encode_records, files_record, read_partition
    from pyhudi.metadata.schema import RECORD_SCHEMA
    from pyhudi.storage import Storage

    folder = tmp_path / ".hoodie" / "metadata" / "files"
    folder.mkdir(parents=True)
    log_file = folder / ".files-0000-0_00000000000000010.log.1_0-0-0"
    instant = "20240101000000000"

    def write(name: str, mtime: int) -> None:
        records = [files_record("x", {name: 7})]
        log_file.write_bytes(hfile_data_block(encode_records(records, RECORD_SCHEMA), RECORD_SCHEMA, instant,
                                              codec="NONE"))
        os.utime(log_file, ns=(mtime, mtime))

    def listed() -> set[str]:
        records = read_partition(Storage(str(tmp_path)), "files", mdt_completed={instant: None})
        return {n for _key, r in records for n in r["filesystemMetadata"]}

    write("first-attempt.parquet", 1_000_000_000)
    size = log_file.stat().st_size
    assert listed() == {"first-attempt.parquet"}
    write("other-attempt.parquet", 2_000_000_000)
    assert log_file.stat().st_size == size
    assert listed() == {"other-attempt.parquet"}


def test_cleans_and_rollbacks_keep_the_writers_metadata_options(spark, tmp_path):
    """Issue 28: the delta commits of inline cleans and of rollbacks follow the writer's
    hoodie.metadata.compact.max.delta.commits (not Hudi's default of 10), so the metadata table never
    holds more delta commits after its base than the option allows; and a restore rebuilds the
    column_stats partition with the user's column list only."""
    from pyhudi.metadata import column_stats

    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.metadata.compact.max.delta.commits": "3", "hoodie.cleaner.commits.retained": "1",
            "hoodie.keep.min.commits": "20", "hoodie.keep.max.commits": "30",
            "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.metadata.index.column.stats.column.list": "ts"}
    cleans = 0
    for n in range(8):
        result = pyhudi.write(_rows(spark, [(f"k{i}", f"p{i % 2}", n) for i in range(6)]), path, opts)
        cleans += len(result.stats.get("cleans", []))
        mdt = MetadataTable(pyhudi.HudiTable(path).storage)
        base = mdt.base_instant() or ""
        deltas = [i.timestamp for i in mdt.timeline.reload().completed([DELTA_COMMIT]) if i.timestamp > base]
        assert len(deltas) <= 3, f"write {n}: {len(deltas)} delta commits after the metadata base {base}"
        if n == 2:
            saved = pyhudi.HudiTable(path).timeline.completed_writes()[-1].timestamp
            pyhudi.create_savepoint(path, saved)
    assert cleans >= 3, "the writes cleaned inline"
    pyhudi.rollback(path, options=opts)
    pyhudi.restore(path, saved, options=opts)
    table = pyhudi.HudiTable(path)
    records = MetadataTable(table.storage).read(column_stats.PARTITION, table.timeline)
    assert {r["ColumnStatsMetadata"]["columnName"] for _k, r in records} == {"ts"}
    _agrees(spark, path)
