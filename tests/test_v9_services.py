"""Table services and replace operations on copy-on-write tables of versions 8 and 9 (Hudi 1.x's
timeline layout 2): the instant files they leave, and the table every step leaves, as a plain dict
model, pyhudi and hudi-rs read it (docs/hudi-1x-format.md sections 2.1, 2.4, 2.5, 3)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from pathlib import Path

import fastavro
import pytest
from conftest import hudi_rs_rows, pyhudi_rows

import pyhudi
from pyhudi.instant_time import parse_instant_time
from pyhudi.plans.clustering import pending_clusterings
from pyhudi.timeline.instant import CLUSTERING, ROLLBACK, State
from pyhudi.timeline.lsm_history import LSMHistory, read_manifest

SCHEMA = "key string, part string, ts long, v string"


def options(version: int = 9, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.metadata.enable": "false", "hoodie.write.table.version": str(version),
            "hoodie.parquet.small.file.limit": "0", **extra}


class Model:
    """The table as a dict key -> (part, ts, v), with every write's effect applied by hand."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[str, int, str]] = {}

    def upsert(self, rows):
        for key, part, ts, v in rows:
            self.rows[key] = (part, ts, v)

    def overwrite(self, rows, parts=None):
        parts = {r[1] for r in rows} if parts is None else parts
        self.rows = {k: r for k, r in self.rows.items() if r[0] not in parts}
        self.upsert(rows)


def write(spark, path, model, rows, opts, operation="upsert"):
    done = pyhudi.write(spark.createDataFrame(rows, SCHEMA), path,
                        {**opts, "hoodie.datasource.write.operation": operation})
    if model is not None:
        if operation == "insert_overwrite":
            model.overwrite(rows)
        elif operation == "insert_overwrite_table":
            model.overwrite(rows, {r[0] for r in model.rows.values()})
        elif operation == "delete_partition":
            model.overwrite([], {r[1] for r in rows})
        else:
            model.upsert(rows)
    return done.instant_time


def state(spark, path, **kw) -> dict[str, tuple[str, int, str]]:
    return {r["key"]: (r["part"], r["ts"], r["v"]) for r in pyhudi_rows(spark, path, **kw)}


def check(spark, path, model: Model) -> None:
    """pyhudi and hudi-rs read the model."""
    assert state(spark, path) == model.rows
    assert {r["key"]: (r["part"], r["ts"], r["v"]) for r in hudi_rs_rows(path)} == model.rows


def timeline_files(path) -> list[str]:
    folder = Path(path) / ".hoodie" / "timeline"
    return sorted(p.name for p in folder.iterdir() if p.is_file())


def avro(path, name) -> dict:
    data = (Path(path) / ".hoodie" / "timeline" / name).read_bytes()
    reader = fastavro.reader(__import__("io").BytesIO(data))
    record = next(iter(reader))
    record["_schema"] = reader.writer_schema["name"] if isinstance(reader.writer_schema, dict) else ""
    return record


def completed_name(path, instant: str, action: str) -> str:
    names = [n for n in timeline_files(path) if re.fullmatch(rf"{instant}_\d{{17}}\.{action}", n)]
    assert len(names) == 1, (instant, action, timeline_files(path))
    return names[0]


def batches(spark, path, model, opts, n=3):
    for b in range(n):
        write(spark, path, model, [(f"k{b}-{i}", f"p{i % 2}", b, f"b{b}") for i in range(6)], opts, "insert")


# -- clustering --------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [9, 8])
def test_clustering_is_a_clustering_instant_completing_as_replacecommit(spark, tmp_path, version):
    path = str(tmp_path / "t")
    opts = options(version)
    model = Model()
    batches(spark, path, model, opts)
    instant = pyhudi.schedule_clustering(path, opts)
    assert instant is not None
    names = timeline_files(path)
    assert f"{instant}.clustering.requested" in names and f"{instant}.replacecommit.requested" not in names
    plan = avro(path, f"{instant}.clustering.requested")
    assert plan["operationType"] == "CLUSTER" and plan["clusteringPlan"]["inputGroups"]
    table = pyhudi.HudiTable(path)
    [(pending, _)] = pending_clusterings(table.timeline)
    assert pending.timestamp == instant and pending.action == CLUSTERING
    assert table.timeline.pending_writes() == []  # a table service, not a write to roll back
    # a write updating a planned file group is refused (reject strategy); an insert goes on
    with pytest.raises(pyhudi.HudiClusteringUpdateError, match=instant):
        write(spark, path, None, [("k0-1", "p1", 9, "x")], opts)
    write(spark, path, model, [("new", "p0", 5, "n")], opts)
    check(spark, path, model)
    done = pyhudi.cluster(spark, path, opts)
    assert [d["instant"] for d in done] == [instant]
    names = timeline_files(path)
    assert (Path(path) / ".hoodie/timeline" / f"{instant}.clustering.inflight").stat().st_size == 0
    meta = avro(path, completed_name(path, instant, "replacecommit"))
    assert meta["operationType"] == "CLUSTER" and sum(map(len, meta["partitionToReplaceFileIds"].values())) >= 6
    assert "partitionToReplaceFileIds" in meta and meta["version"] is None
    assert not any(n.startswith(instant) and "replacecommit." in n.split("_")[0] for n in names)
    check(spark, path, model)
    write(spark, path, model, [("k0-1", "p1", 9, "x")], opts)  # allowed again
    check(spark, path, model)
    assert len(pyhudi.HudiTable(path).file_system_view().latest_base_files()) <= 4


def test_inline_clustering_and_its_rollback(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = options(**{"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "3"})
    model = Model()
    batches(spark, path, model, opts)
    table = pyhudi.HudiTable(path)
    clusterings = [i for i in table.timeline.completed_writes() if table.timeline.is_clustering(i)]
    assert len(clusterings) == 1
    instant = clusterings[0].timestamp
    assert f"{instant}.clustering.requested" in timeline_files(path)
    check(spark, path, model)
    pyhudi.rollback(path, instant)  # the completed clustering undone: the table as before it
    assert not any(n.startswith(instant) for n in timeline_files(path))
    rollback = pyhudi.HudiTable(path).timeline.completed([ROLLBACK])[-1]
    plan = avro(path, f"{rollback.timestamp}.rollback.requested")
    assert plan["instantToRollback"]["commitTime"] == instant
    check(spark, path, model)
    assert len(pyhudi.HudiTable(path).file_system_view().latest_base_files()) == 6


def test_a_failed_clustering_is_rolled_back_and_loses_no_update(spark, tmp_path, monkeypatch):
    """Allowed updates during a clustering: the clustering fails at its commit and is rolled back,
    found as a pending ``clustering`` instant."""
    path = str(tmp_path / "t")
    opts = options(**{"hoodie.clustering.updates.strategy":
                      "org.apache.hudi.client.clustering.update.strategy.SparkAllowUpdateStrategy"})
    model = Model()
    batches(spark, path, model, opts, n=2)
    instant = pyhudi.schedule_clustering(path, opts)
    write(spark, path, model, [("k0-1", "p1", 9, "updated")], opts)
    with pytest.raises(pyhudi.HudiWriteConflictError, match=instant):
        pyhudi.cluster(spark, path, opts, instant=instant)
    assert not any(n.startswith(instant) for n in timeline_files(path))
    rollback = pyhudi.HudiTable(path).timeline.completed([ROLLBACK])[-1]
    target = avro(path, f"{rollback.timestamp}.rollback.requested")["instantToRollback"]
    assert target == {"commitTime": instant, "action": "clustering"}
    check(spark, path, model)

    # a clustering that died mid-run (inflight, heartbeat expired) is run again
    instant = pyhudi.schedule_clustering(path, opts)

    def died(*_args, **_kw):
        raise RuntimeError("executor lost")

    monkeypatch.setattr("pyhudi.commit.point.CommitPoint.finish", died)
    with pytest.raises(RuntimeError):
        pyhudi.cluster(spark, path, {**opts, "hoodie.client.heartbeat.interval_in_ms": "100"}, instant=instant)
    monkeypatch.undo()
    assert f"{instant}.clustering.inflight" in timeline_files(path)
    check(spark, path, model)
    time.sleep(0.5)
    done = pyhudi.cluster(spark, path, {**opts, "hoodie.client.heartbeat.interval_in_ms": "100"})
    assert [d["instant"] for d in done] == [instant]
    completed_name(path, instant, "replacecommit")
    check(spark, path, model)


# -- replace operations ------------------------------------------------------------------------------
def test_overwrites_and_delete_partition_write_hudi_1x_replace_instants(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = options()
    model = Model()
    batches(spark, path, model, opts, n=2)
    write(spark, path, model, [("q0", "p2", 1, "q")], opts, "insert")
    times = {}
    times["insert_overwrite"] = write(spark, path, model, [("o0", "p0", 3, "o"), ("o1", "p0", 3, "o")], opts,
                                      "insert_overwrite")
    check(spark, path, model)
    times["delete_partition"] = write(spark, path, model, [("o0", "p0", 0, "")], opts, "delete_partition")
    check(spark, path, model)
    times["insert_overwrite_table"] = write(spark, path, model, [("t0", "p1", 4, "t"), ("t1", "p3", 4, "t")], opts,
                                            "insert_overwrite_table")
    check(spark, path, model)
    assert model.rows == {"t0": ("p1", 4, "t"), "t1": ("p3", 4, "t")}
    for operation, instant in times.items():
        requested = avro(path, f"{instant}.replacecommit.requested")
        if operation == "delete_partition":  # Hudi 1.x's startDeletePartitionCommit names the operation
            assert requested["operationType"] == "DELETE_PARTITION" and requested["clusteringPlan"] is None
        else:  # createRequestedCommitWithReplaceMetadata: every field null
            assert {k: v for k, v in requested.items() if k != "_schema"} == \
                {"operationType": None, "clusteringPlan": None, "extraMetadata": None, "version": None}
        inflight = avro(path, f"{instant}.replacecommit.inflight")
        assert inflight["_schema"].endswith("HoodieCommitMetadata") and "partitionToReplaceFileIds" not in inflight
        done = avro(path, completed_name(path, instant, "replacecommit"))
        assert done["_schema"].endswith("HoodieReplaceCommitMetadata")
        assert done["operationType"] == operation.upper() and done["partitionToReplaceFileIds"]
    replaced = avro(path, completed_name(path, times["insert_overwrite_table"], "replacecommit"))
    assert set(replaced["partitionToReplaceFileIds"]) == {"p1", "p2"}


# -- clean -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy, extra", [
    ("KEEP_LATEST_COMMITS", {"hoodie.cleaner.commits.retained": "2"}),
    ("KEEP_LATEST_FILE_VERSIONS", {"hoodie.cleaner.fileversions.retained": "2"}),
    ("KEEP_LATEST_BY_HOURS", {"hoodie.cleaner.hours.retained": "1"}),
])
def test_clean_by_each_policy(spark, tmp_path, monkeypatch, policy, extra):
    path = str(tmp_path / "t")
    opts = options()
    model = Model()
    versions = []
    for b in range(4):  # one file group per partition, rewritten every time
        versions.append(write(spark, path, model, [(f"k{i}", f"p{i % 2}", b, f"v{b}") for i in range(4)], opts))
    base_files = lambda: sorted(p.name for p in Path(path).glob("p*/*.parquet"))  # noqa: E731
    assert len(base_files()) == 8
    if policy == "KEEP_LATEST_BY_HOURS":  # the clock an hour after the last write: it is the ECTR
        _clock_at(monkeypatch, parse_instant_time(versions[3]) + dt.timedelta(hours=1))
    [result] = pyhudi.clean(path, {**opts, "hoodie.cleaner.policy": policy, **extra})
    kept = {"KEEP_LATEST_COMMITS": versions[1:], "KEEP_LATEST_FILE_VERSIONS": versions[2:],
            "KEEP_LATEST_BY_HOURS": versions[2:]}[policy]  # and the version a query at the ECTR reads
    assert sorted({n.rsplit("_", 1)[1][:17] for n in base_files()}) == kept
    assert result.files_deleted == 8 - 2 * len(kept)
    names = timeline_files(path)
    assert f"{result.instant}.clean.requested" in names
    assert (Path(path) / ".hoodie/timeline" / f"{result.instant}.clean.inflight").stat().st_size == 0
    meta = avro(path, completed_name(path, result.instant, "clean"))
    assert meta["totalFilesDeleted"] == result.files_deleted
    plan = avro(path, f"{result.instant}.clean.requested")
    assert plan["policy"] == policy
    check(spark, path, model)
    if policy != "KEEP_LATEST_BY_HOURS":  # time travel to the oldest retained version still works
        old = state(spark, path, options={"as.of.instant": kept[0]})
        assert {k: v[2] for k, v in old.items()} == {f"k{i}": f"v{versions.index(kept[0])}" for i in range(4)}
        assert {r["key"]: r["v"] for r in hudi_rs_rows(path, as_of=kept[0])} == {k: v[2] for k, v in old.items()}


def _clock_at(monkeypatch, now: dt.datetime) -> None:
    class Clock(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return now

    class Module:
        datetime, timedelta, timezone = Clock, dt.timedelta, dt.timezone

    monkeypatch.setattr("pyhudi.services.clean.dt", Module)


# -- savepoint and restore --------------------------------------------------------------------------
def test_savepoint_and_restore(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = options()
    model = Model()
    batches(spark, path, model, opts, n=2)
    saved = pyhudi.create_savepoint(path, options=opts)
    at_savepoint = dict(model.rows)
    names = timeline_files(path)
    assert f"{saved.instant}.savepoint.inflight" in names
    assert avro(path, completed_name(path, saved.instant, "savepoint"))["partitionMetadata"]
    assert [s.instant for s in pyhudi.list_savepoints(path)] == [saved.instant]
    write(spark, path, model, [("k0-0", "p0", 7, "later"), ("z", "p5", 7, "later")], opts)
    write(spark, path, model, [("o", "p1", 8, "o")], opts, "insert_overwrite")
    write(spark, path, model, [("o2", "p1", 8, "o")], opts, "insert_overwrite")
    write(spark, path, model, [("z", "p5", 9, "z")], opts)
    [result] = pyhudi.clean(path, {**opts, "hoodie.cleaner.commits.retained": "1"})
    assert result.files_deleted == 1  # the first overwrite's file; the savepointed files stay
    check(spark, path, model)
    done = pyhudi.restore(path, saved.instant, options=opts)
    assert len(done.rolled_back) == 4
    model.rows = at_savepoint
    check(spark, path, model)
    names = timeline_files(path)
    assert f"{done.instant}.restore.requested" in names and f"{done.instant}.restore.inflight" in names
    restore_meta = avro(path, completed_name(path, done.instant, "restore"))
    assert sorted(restore_meta["instantsToRollback"]) == sorted(done.rolled_back)
    assert not any(n.startswith(done.rolled_back[0]) for n in names)
    write(spark, path, model, [("after", "p0", 9, "a")], opts)
    check(spark, path, model)


# -- archival --------------------------------------------------------------------------------------
def test_archival_into_the_lsm_history_then_reads(spark, tmp_path):
    path = str(tmp_path / "t")
    keep = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1",
            "hoodie.timeline.compaction.batch.size": "2"}
    opts = options()
    model = Model()
    history = []  # (instant, model rows after it)
    for b in range(4):  # new file groups every time: every archived commit's files stay live
        write(spark, path, model, [(f"k{b}-{i}", f"p{i % 2}", b, f"b{b}") for i in range(2)], opts, "insert")
        history.append((pyhudi.HudiTable(path).timeline.completed_writes()[-1].timestamp, dict(model.rows)))
    archived = pyhudi.archive(path, {**opts, **keep})
    assert archived == [h[0] for h in history[:2]]
    folder = Path(path) / ".hoodie/timeline/history"
    first = f"{archived[0]}_{archived[-1]}_0.parquet"
    assert sorted(p.name for p in folder.iterdir()) == sorted([first, "manifest_1", "_version_"])
    assert (folder / "_version_").read_text() == "1"
    assert json.loads((folder / "manifest_1").read_text())["files"] == [
        {"fileName": first, "fileLen": (folder / first).stat().st_size}]
    assert not any(n.startswith(tuple(archived)) for n in timeline_files(path))
    lsm = LSMHistory(pyhudi.HudiTable(path).storage)
    assert [(i.instant_time, i.action) for i in lsm.records()] == [(t, "commit") for t in archived]
    check(spark, path, model)
    # time travel and incremental reads into the archived part (pyhudi reads the LSM history)
    for instant, rows in history:
        assert state(spark, path, options={"as.of.instant": instant}) == rows
    def pull(begin: str, **extra: str) -> list[str]:
        return sorted(state(spark, path, options={"hoodie.datasource.query.type": "incremental",
                                                  "hoodie.datasource.read.begin.instanttime": begin, **extra}))

    # layout 2 ranges are of completion times: begin at write 2's completion, only write 3 follows
    completion = pyhudi.HudiTable(path).timeline.find(history[2][0]).completion_time
    assert pull(completion) == sorted(set(history[3][1]) - set(history[2][1]))
    assert pull("000") == sorted(history[3][1])  # from the start: the snapshot
    # from inside the archived part: refused as on version 6 (the archived commits' files are not
    # looked up in the LSM history by the incremental planner), unless a full scan is asked for
    with pytest.raises(pyhudi.HudiRetentionError, match="archived"):
        pull(history[0][0])
    # ... the full scan keeps the records of archived writes completed after the begin instant
    archived_completion = lsm.records()[0].completion_time
    scan = {"hoodie.datasource.read.incr.fallback.fulltablescan.enable": "true"}
    assert pull(archived_completion, **scan) == sorted(set(history[3][1]) - set(history[0][1]))
    assert pull(history[0][0], **scan) == sorted(history[3][1])  # write 0 completed after its own time
    # hudi-rs (0.5.0) keeps base files of archived commits and time-travels into them too
    for instant, rows in (history[0], history[-1]):
        assert {r["key"]: r["v"] for r in hudi_rs_rows(path, as_of=instant)} == {k: v[2] for k, v in rows.items()}
    # a second archival publishes manifest 2; two layer-0 files are compacted into layer 1 (batch size 2)
    for b in range(4, 6):
        write(spark, path, model, [(f"k{b}-{i}", f"p{i % 2}", b, f"b{b}") for i in range(2)], opts, "insert")
    more = pyhudi.archive(path, {**opts, **keep})
    assert more == [history[2][0], history[3][0]]
    manifest = read_manifest(pyhudi.HudiTable(path).storage)
    assert [name for name in manifest.file_names] == [f"{archived[0]}_{more[-1]}_1.parquet"]
    assert int((folder / "_version_").read_text()) == manifest.version == 3
    assert [i.instant_time for i in LSMHistory(pyhudi.HudiTable(path).storage).records()] == [*archived, *more]
    check(spark, path, model)
    assert state(spark, path, options={"as.of.instant": history[1][0]}) == history[1][1]


def test_archival_keeps_a_replace_commit_whose_replaced_files_remain(spark, tmp_path):
    """Readers hide replaced file groups only while the replace commit is active: it stays until
    the cleaner removed them."""
    path = str(tmp_path / "t")
    keep = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1"}
    opts = options()
    model = Model()
    write(spark, path, model, [("a", "p0", 1, "a")], opts, "insert")
    overwrite = write(spark, path, model, [("b", "p0", 2, "b")], opts, "insert_overwrite")
    for b in range(3):
        write(spark, path, model, [(f"c{b}", "p1", 3, "c")], opts, "insert")
    archived = pyhudi.archive(path, {**opts, **keep})
    assert overwrite not in archived
    check(spark, path, model)


# -- optimistic concurrency control ------------------------------------------------------------------
def test_occ_candidates_are_instants_completed_after_the_write_started(spark, tmp_path, monkeypatch):
    from test_concurrency import _with_other_write_before_commit

    path = str(tmp_path / "t")
    opts = options(**{"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"})
    model = Model()
    write(spark, path, model, [(f"k{i}", f"p{i % 2}", 0, "init") for i in range(4)], opts, "bulk_insert")
    other = []
    _with_other_write_before_commit(monkeypatch, lambda: other.append(
        write(spark, path, model, [("k1", "p1", 2, "B")], opts)))
    mine = write(spark, path, model, [("k0", "p0", 1, "A")], opts)  # disjoint file groups: both commit
    monkeypatch.undo()
    check(spark, path, model)
    table = pyhudi.HudiTable(path)
    meta = table.timeline.commit_metadata(table.timeline.find(mine))
    assert json.loads(meta.extra_metadata["pyhudi.conflict.check"])["candidates"] == other
    theirs = table.timeline.find(other[0])
    assert other[0] > mine and theirs.completion_time > mine  # started after, completed after this write started
    _with_other_write_before_commit(monkeypatch, lambda: write(spark, path, model, [("k2", "p0", 3, "C")], opts))
    with pytest.raises(pyhudi.HudiWriteConflictError):
        write(spark, path, None, [("k0", "p0", 4, "lost")], opts)
    monkeypatch.undo()
    check(spark, path, model)
    assert pyhudi.HudiTable(path).timeline.pending() == []
    assert os.path.isdir(Path(path) / ".hoodie/timeline")
    assert all(i.state == State.COMPLETED for i in pyhudi.HudiTable(path).timeline.instants())
