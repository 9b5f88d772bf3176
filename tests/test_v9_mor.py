"""Merge-on-read writes on table versions 8 and 9 as Hudi 1.x makes them (docs/hudi-1x-format.md
2.3, 4.1, 4.2): every delta commit writes its own log files named with its instant, version 1;
readers and writers place them by completion time; a failed delta commit's logs are deleted; a
compaction is ``P.compaction.requested`` and completes as ``P_C.commit``.

Every step is read by pyhudi and by hudi-rs and compared with a plain dict model.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from conftest import hudi_rs_rows, kill_writer_on_failure, pyhudi_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi.io.file_names import parse_base_file, parse_log_file
from pyhudi.plans.compaction import pending_compactions, read_plan
from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.instant import COMMIT, DELTA_COMMIT, ROLLBACK

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("v", T.StringType())])
#: ``.{fileId}_{T}.log.{version}_{writeToken}`` with the write token of a Spark task
LOG_NAME = re.compile(r"^\.([0-9a-f-]+-\d+)_(\d{17})\.log\.(\d+)_(\d+-\d+-\d+)$")
VERSIONS = ["8", "9"]


def _options(version: str, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.write.table.version": version,
            "hoodie.metadata.enable": "false", **extra}


class Model:
    """The table as a dict, and the checks that both readers agree with it."""

    def __init__(self, spark, path: str) -> None:
        self.spark, self.path, self.rows = spark, path, {}

    def write(self, rows: list[tuple], options: dict[str, str], *, delete: bool = False) -> str:
        opts = {**options, "hoodie.datasource.write.operation": "delete"} if delete else options
        res = pyhudi.write(self.spark.createDataFrame(rows, SCHEMA), self.path, opts)
        for r in rows:
            if delete:
                self.rows.pop(r[0], None)
            elif r[0] not in self.rows or self.rows[r[0]][2] <= r[2]:
                self.rows[r[0]] = r
        assert res.instant_time is not None
        return res.instant_time

    def check(self) -> None:
        expected = sorted(self.rows.values())
        got = sorted((r["id"], r["p"], r["ts"], r["v"]) for r in pyhudi_rows(self.spark, self.path))
        assert got == expected
        rs = sorted((r["id"], r["p"], r["ts"], r["v"]) for r in hudi_rs_rows(self.path))
        assert rs == expected


def _files(path: str) -> set[str]:
    """Data files of the table, relative to it."""
    out = set()
    for folder, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        out |= {os.path.relpath(os.path.join(folder, n), path) for n in names if n != ".hoodie_partition_metadata"}
    return out


def _logs(path: str) -> set[str]:
    return {f for f in _files(path) if parse_log_file(os.path.basename(f)) is not None}


def _timeline_files(path: str) -> list[str]:
    return sorted(os.listdir(Path(path) / ".hoodie" / "timeline"))


def _new_logs_of(path: str, before: set[str], instant: str) -> list[str]:
    """Log files written since ``before``, each checked against the 1.x name of ``instant``."""
    new = sorted(_logs(path) - before)
    assert new, "the delta commit should have written log files"
    for rel in new:
        m = LOG_NAME.match(os.path.basename(rel))
        assert m, rel
        assert m.group(2) == instant and m.group(3) == "1", rel
    return new


def _delta_stats(path: str, instant: str) -> list:
    table = pyhudi.HudiTable(path)
    (inst,) = [i for i in table.timeline.completed([DELTA_COMMIT]) if i.timestamp == instant]
    assert inst.completion_time, "layout 2 records completion times"
    return table.timeline.commit_metadata(inst).write_stats()


@pytest.mark.parametrize("version", VERSIONS)
def test_mor_upserts_deletes_small_files_compaction(spark, tmp_path, version):
    path = str(tmp_path / "t")
    opts = _options(version)
    model = Model(spark, path)
    model.write([("a", "x", 1, "a1"), ("b", "x", 1, "b1"), ("c", "y", 1, "c1"), ("d", "z", 1, "d1")], opts)
    model.check()
    assert pyhudi.HudiTable(path).config.version == int(version)

    # an upsert writes one new log file per file group, named with its own instant, version 1
    before = _logs(path)
    t1 = model.write([("a", "x", 2, "a2"), ("c", "y", 2, "c2")], opts)
    first = _new_logs_of(path, before, t1)
    assert len(first) == 2
    model.check()
    for st in _delta_stats(path, t1):
        name = os.path.basename(st.path)
        assert st.path == f"{st.partitionPath}/{name}" and name in {os.path.basename(f) for f in first}
        assert (st.prevCommit, st.baseFile, st.logFiles, st.logVersion) == (t1, "", [name], 1)
        assert st.fileId == parse_log_file(name).file_id

    # a second upsert of the same file group: a new file, the first one is left as it was
    sizes = {f: os.path.getsize(os.path.join(path, f)) for f in first}
    before = _logs(path)
    t2 = model.write([("a", "x", 3, "a3")], opts)
    (second,) = _new_logs_of(path, before, t2)
    assert {f: os.path.getsize(os.path.join(path, f)) for f in first} == sizes
    model.check()

    # a delete is a log file of its own as well
    before = _logs(path)
    t3 = model.write([("c", "y", 0, None)], opts, delete=True)
    _new_logs_of(path, before, t3)
    model.check()

    # inserts go into the small file group without logs (partition z), rewritten as a base file
    z_before = {f for f in _files(path) if f.startswith("z/")}
    t4 = model.write([("e", "z", 1, "e1")], opts)
    z_after = {f for f in _files(path) if f.startswith("z/")} - z_before
    assert len(z_after) == 1 and parse_base_file(os.path.basename(next(iter(z_after)))).instant_time == t4
    assert {parse_base_file(os.path.basename(f)).file_id for f in z_before | z_after} == \
        {parse_base_file(os.path.basename(f)).file_id for f in z_before}
    model.check()

    # explicit compaction: a plan listing exactly the logs of each slice, completed as P_C.commit
    view = pyhudi.HudiTable(path).file_system_view()
    slices = {(s.partition_path, s.file_id): sorted(lf.name for lf in s.log_files)
              for s in view.latest_slices() if s.log_files}
    (p,) = pyhudi.compact(spark, path, opts)
    plan = read_plan(pyhudi.HudiTable(path).timeline, p)
    assert {(op.partition_path, op.file_id): sorted(op.log_files) for op in plan.operations} == slices
    names = _timeline_files(path)
    assert f"{p}.compaction.requested" in names
    assert os.path.getsize(Path(path) / ".hoodie" / "timeline" / f"{p}.compaction.inflight") == 0
    done = [n for n in names if re.fullmatch(rf"{p}_\d{{17}}\.commit", n)]
    assert len(done) == 1
    table = pyhudi.HudiTable(path)
    meta = table.timeline.commit_metadata(table.timeline.completed([COMMIT])[-1])
    assert meta.operation_type == "COMPACT" and meta.compacted
    for st in meta.write_stats():
        assert parse_base_file(os.path.basename(st.path)).instant_time == p
        assert st.totalLogFilesCompacted == len(slices[(st.partitionPath, st.fileId)])
    model.check()
    ro = pyhudi_rows(spark, path, options={"hoodie.datasource.query.type": "read_optimized"})
    assert sorted((r["id"], r["ts"]) for r in ro) == sorted((r[0], r[2]) for r in model.rows.values())

    # updates after the compaction: logs named with their own instant, in the compacted slice
    before = _logs(path)
    t5 = model.write([("a", "x", 4, "a4"), ("b", "x", 4, "b4")], opts)
    (log5,) = _new_logs_of(path, before, t5)
    model.check()
    latest = {s.file_id: s for s in pyhudi.HudiTable(path).file_system_view().latest_slices()}
    assert latest[parse_log_file(os.path.basename(log5)).file_id].base_instant == p
    assert second  # the compacted slice's logs stay until cleaned


@pytest.mark.parametrize("version", VERSIONS)
def test_inline_compaction_after_delta_commits(spark, tmp_path, version):
    path = str(tmp_path / "t")
    opts = _options(version, **{"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"})
    model = Model(spark, path)
    model.write([("a", "x", 1, "a1"), ("b", "y", 1, "b1")], opts)
    model.write([("a", "x", 2, "a2")], opts)
    table = pyhudi.HudiTable(path)
    compactions = table.timeline.completed([COMMIT])
    assert len(compactions) == 1 and compactions[0].completion_time
    assert not pending_compactions(table.timeline)
    model.check()
    t = model.write([("b", "y", 2, "b2")], opts)
    assert LOG_NAME.match(os.path.basename(_delta_stats(path, t)[0].path))
    model.check()


@pytest.mark.parametrize("version", VERSIONS)
def test_killed_delta_commit_is_rolled_back_by_deleting_its_logs(spark, tmp_path, monkeypatch, version):
    path = str(tmp_path / "t")
    opts = _options(version)
    model = Model(spark, path)
    model.write([("a", "x", 1, "a1"), ("b", "y", 1, "b1")], opts)
    model.write([("a", "x", 2, "a2")], opts)
    before = _logs(path)

    from pyhudi.timeline.timeline import Timeline

    def die(self, *a, **k):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(Timeline, "complete", die)
    kill_writer_on_failure(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        pyhudi.write(spark.createDataFrame([("a", "x", 9, "lost"), ("b", "y", 9, "lost")], SCHEMA), path, opts)
    monkeypatch.undo()
    (failed,) = [i.timestamp for i in pyhudi.HudiTable(path).timeline.pending()]
    left = _new_logs_of(path, before, failed)
    assert len(left) == 2
    model.check()  # the failed delta commit is invisible

    model.write([("c", "x", 3, "c3")], opts)  # rolls the failed one back first
    assert not _logs(path) & set(left)
    assert {parse_log_file(os.path.basename(f)).base_instant for f in _logs(path)} <= \
        {i.timestamp for i in pyhudi.HudiTable(path).timeline.completed()}, "no rollback command logs"
    table = pyhudi.HudiTable(path)
    (rb,) = table.timeline.completed([ROLLBACK])
    assert rb.completion_time
    meta = read_record(table.timeline.read_bytes(rb))
    assert meta["commitsRollback"] == [failed]
    deleted = sorted(f for pm in meta["partitionMetadata"].values() for f in pm["successDeleteFiles"])
    assert deleted == sorted(table.storage.full(f) for f in left)
    assert all(not pm["rollbackLogFiles"] and not pm["logFilesFromFailedCommit"]
               for pm in meta["partitionMetadata"].values())
    plan = read_record(table.storage.read_bytes(f".hoodie/timeline/{rb.timestamp}.rollback.requested"))
    assert plan["instantToRollback"] == {"commitTime": failed, "action": DELTA_COMMIT}
    assert all(not r["logBlocksToBeDeleted"] for r in plan["RollbackRequests"])
    assert sorted(f for r in plan["RollbackRequests"] for f in r["filesToBeDeleted"]) == deleted
    model.check()


@pytest.mark.parametrize("version", VERSIONS)
def test_delta_commit_completing_after_compaction_is_requested(spark, tmp_path, monkeypatch, version):
    """A delta commit requested before compaction P but completed after it: its log is not in the
    plan, and once P completes it belongs to P's slice (completion-time slicing)."""
    path = str(tmp_path / "t")
    opts = _options(version)
    model = Model(spark, path)
    model.write([("a", "x", 1, "a1"), ("b", "x", 1, "b1")], opts)
    model.write([("a", "x", 2, "a2")], opts)
    planned_logs = _logs(path)

    from pyhudi.commit.transaction import WriteTransaction
    from pyhudi.config import HudiConfig
    from pyhudi.services.compaction import schedule_compaction

    commit = WriteTransaction.commit
    scheduled: list[str] = []

    def schedule_then_commit(self, *a, **k):
        # another process schedules a compaction while this delta commit's files are written
        occ = HudiConfig.of({"hoodie.write.concurrency.mode": "optimistic_concurrency_control"})
        scheduled.append(schedule_compaction(pyhudi.HudiTable(path), occ))
        return commit(self, *a, **k)

    monkeypatch.setattr(WriteTransaction, "commit", schedule_then_commit)
    t = model.write([("b", "x", 3, "b3")], opts)
    monkeypatch.undo()
    (p,) = scheduled
    assert t < p
    late = _new_logs_of(path, planned_logs, t)
    (op,) = read_plan(pyhudi.HudiTable(path).timeline, p).operations
    assert set(op.log_files) == {os.path.basename(f) for f in planned_logs}
    table = pyhudi.HudiTable(path)
    (inst,) = [i for i in table.timeline.completed([DELTA_COMMIT]) if i.timestamp == t]
    assert inst.completion_time > p
    model.check()  # the plan is pending: its slice and the late log read merged

    assert pyhudi.compact(spark, path, opts) == [p]
    (piece,) = pyhudi.HudiTable(path).file_system_view().latest_slices()
    assert piece.base_instant == p and [lf.path for lf in piece.log_files] == late
    model.check()
    model.write([("a", "x", 4, "a4")], opts)
    model.check()
