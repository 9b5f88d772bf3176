"""A write killed before completion is invisible, and the next write rolls it back as Hudi does."""

from __future__ import annotations

import json
import os

from conftest import hudi_rs_rows, kill_writer_on_failure, pyhudi_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi.timeline.instant import ROLLBACK
from pyhudi.timeline.timeline import read_avro_record

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}


def test_killed_write_is_invisible_then_rolled_back(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame([("a", "x", 1), ("b", "y", 1)], SCHEMA), path,
                 {**OPTS, "hoodie.datasource.write.operation": "bulk_insert"})
    # simulate a writer killed after its executors wrote files but before the commit file appeared
    from pyhudi.timeline.timeline import Timeline

    def die(self, *a, **k):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(Timeline, "complete", die)
    kill_writer_on_failure(monkeypatch)
    try:
        pyhudi.write(spark.createDataFrame([("a", "x", 2), ("c", "z", 2)], SCHEMA), path, OPTS)
    except KeyboardInterrupt:
        pass
    monkeypatch.undo()
    table = pyhudi.HudiTable(path)
    pending = table.timeline.pending()
    assert len(pending) == 1
    failed = pending[0].timestamp
    leftovers = [f for d, _, fs in os.walk(path) for f in fs if f.endswith(f"_{failed}.parquet")]
    assert leftovers, "the killed write should have left data files behind"
    # readers see the previous snapshot
    assert sorted((r["id"], r["ts"]) for r in pyhudi_rows(spark, path)) == [("a", 1), ("b", 1)]
    assert sorted((r["id"], r["ts"]) for r in hudi_rs_rows(path)) == [("a", 1), ("b", 1)]
    # the next writer rolls it back first
    res = pyhudi.write(spark.createDataFrame([("d", "x", 3)], SCHEMA), path, OPTS)
    assert res.stats["rolled_back_instants"]
    table = pyhudi.HudiTable(path)
    assert table.timeline.pending() == []
    assert not [f for d, _, fs in os.walk(path) for f in fs if f.endswith(f"_{failed}.parquet")]
    rollbacks = table.timeline.completed([ROLLBACK])
    assert len(rollbacks) == 1
    meta = read_avro_record(table.timeline.read_bytes(rollbacks[0]), source="rollback")
    assert meta["commitsRollback"] == [failed]
    assert meta["totalFilesDeleted"] == len(leftovers)
    plan = read_avro_record(table.storage.read_bytes(f".hoodie/{rollbacks[0].timestamp}.rollback.requested"),
                            source="plan")
    assert plan["instantToRollback"] == {"commitTime": failed, "action": "commit"}
    assert sorted(r["id"] for r in pyhudi_rows(spark, path)) == ["a", "b", "d"]
    assert not os.path.exists(os.path.join(path, ".hoodie", ".temp", failed))


def test_files_of_failed_task_attempts_are_removed_before_the_commit(spark, tmp_path, monkeypatch):
    """A task attempt that failed (or lost to a speculative copy) after writing left a file under the
    instant's name: a whole copy of a merged file (same file group, another write token) and a
    partial new file. Both are gone before the instant completes, so readers see each record once."""
    from pyhudi.spark.pipeline import Pipeline
    from pyhudi.write.markers import CREATE, MERGE, create_marker

    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame([("a", "x", 1), ("b", "x", 1)], SCHEMA), path,
                 {**OPTS, "hoodie.datasource.write.operation": "bulk_insert"})
    planted: list[str] = []
    statistics = Pipeline.log_statistics

    def plant(self, rows):
        storage = self.table.storage
        (merged,) = [r["path"] for r in rows]  # the update rewrote the one file of partition x
        folder, name = merged.rsplit("/", 1)
        fid, token, rest = name.split("_", 2)
        copy = f"{folder}/{fid}_9-9-9_{rest}"
        partial = f"{folder}/{'f' * 8}{fid[8:]}_9-9-8_{rest}"
        data = storage.read_bytes(merged)
        for rel, content, io in ((copy, data, MERGE), (partial, data[:len(data) // 2], CREATE)):
            create_marker(storage, self.instant, rel, io)
            storage.write_bytes(rel, content)
            planted.append(rel)
        return statistics(self, rows)

    monkeypatch.setattr(Pipeline, "log_statistics", plant)
    pyhudi.write(spark.createDataFrame([("a", "x", 2)], SCHEMA), path, OPTS)
    monkeypatch.undo()
    assert len(planted) == 2 and not any(os.path.exists(os.path.join(path, rel)) for rel in planted)
    assert sorted((r["id"], r["ts"]) for r in pyhudi_rows(spark, path)) == [("a", 2), ("b", 1)]
    assert sorted((r["id"], r["ts"]) for r in hudi_rs_rows(path)) == [("a", 2), ("b", 1)]


def test_commit_metadata_is_hudi_shaped(spark, tmp_path):
    path = str(tmp_path / "t")
    res = pyhudi.write(spark.createDataFrame([("a", "x", 1), ("b", "y", 1)], SCHEMA), path,
                       {**OPTS, "hoodie.datasource.write.operation": "insert"})
    doc = json.load(open(os.path.join(path, ".hoodie", f"{res.instant_time}.commit")))
    assert doc["operationType"] == "INSERT"
    assert set(doc["partitionToWriteStats"]) == {"x", "y"}
    stat = doc["partitionToWriteStats"]["x"][0]
    assert stat["path"].startswith("x/") and stat["prevCommit"] == "null" and stat["numInserts"] == 1
    schema = json.loads(doc["extraMetadata"]["schema"])
    assert schema["name"] == "t_record" and schema["namespace"] == "hoodie.t"
    assert sorted(r["id"] for r in hudi_rs_rows(path)) == ["a", "b"]
    props = pyhudi.HudiTable(path).properties
    assert props["hoodie.table.version"] == "6" and props["hoodie.timeline.layout.version"] == "1"
    assert os.path.exists(os.path.join(path, "x", ".hoodie_partition_metadata"))
    for name in (f"{res.instant_time}.commit.requested", f"{res.instant_time}.inflight"):
        assert os.path.exists(os.path.join(path, ".hoodie", name))


def test_overwrite_replaces_contents_atomically(spark, tmp_path):
    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame([("a", "x", 1), ("b", "y", 1)], SCHEMA), path, OPTS)
    res = pyhudi.write(spark.createDataFrame([("z", "x", 9)], SCHEMA), path, OPTS, mode="overwrite")
    doc = json.load(open(os.path.join(path, ".hoodie", f"{res.instant_time}.replacecommit")))
    assert doc["operationType"] == "INSERT_OVERWRITE_TABLE"
    assert sum(len(v) for v in doc["partitionToReplaceFileIds"].values()) == 2
    assert [r["id"] for r in pyhudi_rows(spark, path)] == ["z"]
    assert [r["id"] for r in hudi_rs_rows(path)] == ["z"]
