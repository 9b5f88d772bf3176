"""Writers side by side: the table lock, heartbeats, failed-write policies and optimistic
concurrency control, down to several writer processes against one table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import hudi_rs_rows, pyhudi_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi.actions.rollback import rollback_instant
from pyhudi.commit.point import CommitPoint
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiCommitError, HudiConcurrentWriteError, HudiLockError, HudiWriteConflictError
from pyhudi.timeline.instant import ROLLBACK
from pyhudi.transaction.heartbeat import Heartbeat, HeartbeatPolicy, heartbeat_age, heartbeat_path, is_alive
from pyhudi.transaction.lock import FileSystemLockProvider, InProcessLockProvider, TableLock
from pyhudi.write.markers import CREATE, create_marker, list_markers

WRITER = str(Path(__file__).parent / "writer_process.py")
SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("val", T.StringType())])
BASE = {"hoodie.table.name": "c", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}
OCC = {**BASE, "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}
FAST_LOCK = {"hoodie.write.lock.wait_time_ms": "200", "hoodie.write.lock.client.num_retries": "1",
             "hoodie.write.lock.client.wait_time_ms_between_retry": "50"}


def _rows(spark, rows):
    return spark.createDataFrame(rows, SCHEMA)


def _table(spark, path, options=BASE, rows=None):
    rows = rows or [(f"k{p}-{i}", p, 0, "init") for p in ("p0", "p1") for i in range(5)]
    pyhudi.write(_rows(spark, rows), path, {**options, "hoodie.datasource.write.operation": "bulk_insert"})


def _state(spark, path) -> dict[str, tuple]:
    """The table as pyhudi reads it, checked against hudi-rs reading the same snapshot."""
    state = {r["id"]: (r["p"], r["ts"], r["val"]) for r in pyhudi_rows(spark, path)}
    assert {r["id"]: (r["p"], r["ts"], r["val"]) for r in hudi_rs_rows(path)} == state
    return state


# -- the lock ------------------------------------------------------------------------------------
_COUNTER = """
import sys, time
from pyhudi.config import HudiConfig
from pyhudi.transaction.lock import TableLock
path, counter, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
lock = TableLock(path, HudiConfig({"hoodie.write.lock.client.wait_time_ms_between_retry": "10"}))
for _ in range(n):
    with lock.held():
        value = int(open(counter).read())
        time.sleep(0.001)
        open(counter, "w").write(str(value + 1))
"""


def test_file_system_lock_excludes_other_processes(tmp_path):
    (tmp_path / ".hoodie").mkdir()
    counter = tmp_path / "counter"
    counter.write_text("0")
    procs = [subprocess.Popen([sys.executable, "-c", _COUNTER, str(tmp_path), str(counter), "40"]) for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    assert counter.read_text() == "120"  # no lost increment: every read-modify-write held the lock alone
    assert not (tmp_path / ".hoodie" / "lock").exists()


def test_lock_is_reentrant_per_thread_and_exclusive_across_threads(tmp_path):
    cfg = HudiConfig(FAST_LOCK)
    outer, inner = TableLock(str(tmp_path), cfg), TableLock(str(tmp_path), cfg)
    with outer.held(), inner.held():  # a write start that rolls back a failed write takes it twice
        errors = []

        def other():
            try:
                TableLock(str(tmp_path), cfg).acquire()
            except HudiLockError as exc:
                errors.append(str(exc))

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(errors) == 1 and "held by process" in errors[0] and str(os.getpid()) in errors[0]
        assert (tmp_path / ".hoodie" / "lock").exists()
    assert not (tmp_path / ".hoodie" / "lock").exists()


def test_lock_of_a_killed_process_is_broken(tmp_path):
    """A holder killed with SIGKILL leaves the lock file; its owner is provably dead, so it is taken over."""
    (tmp_path / ".hoodie").mkdir()
    code = ("import sys, time\nfrom pyhudi.config import HudiConfig\nfrom pyhudi.transaction.lock import TableLock\n"
            "TableLock(sys.argv[1], HudiConfig()).acquire()\nprint('held', flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(HudiLockError, match=f"process {proc.pid}"):
        TableLock(str(tmp_path), HudiConfig(FAST_LOCK)).acquire()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    started = time.monotonic()
    with TableLock(str(tmp_path), HudiConfig(FAST_LOCK)).held():
        assert time.monotonic() - started < 3.0  # the first attempt breaks it; no waiting for an expiry


def test_lock_held_from_another_host_expires_only_with_the_expiry_option(tmp_path):
    lock_file = tmp_path / ".hoodie" / "lock"
    lock_file.parent.mkdir()
    lock_file.write_text(json.dumps({"host": "elsewhere", "pid": 1, "lockThreadName": "main"}))
    old = time.time() - 120
    os.utime(lock_file, (old, old))
    with pytest.raises(HudiLockError, match="elsewhere"):  # nothing proves it stale
        TableLock(str(tmp_path), HudiConfig(FAST_LOCK)).acquire()
    with TableLock(str(tmp_path), HudiConfig({**FAST_LOCK, "hoodie.write.lock.filesystem.expire": "1"})).held():
        assert "elsewhere" not in lock_file.read_text()


@pytest.mark.parametrize("content", [b"", b"\0" * 64, b'{"lockCreateTime": "17'], ids=["empty", "zeroed", "torn"])
def test_a_lock_file_a_power_cut_left_unreadable_is_broken_after_ten_seconds(tmp_path, content):
    """The lock file's content is not synced: after a power cut it may be empty, zeroed or torn.
    Nobody holds its flock, and no writer writes such content, so it is broken once ten seconds
    old, without the expiry option; a younger one may be a creator that has not written yet."""
    lock_file = tmp_path / ".hoodie" / "lock"
    lock_file.parent.mkdir()
    lock_file.write_bytes(content)
    with pytest.raises(HudiLockError):
        TableLock(str(tmp_path), HudiConfig(FAST_LOCK)).acquire()
    old = time.time() - 11
    os.utime(lock_file, (old, old))
    with TableLock(str(tmp_path), HudiConfig(FAST_LOCK)).held():
        assert json.loads(lock_file.read_text())["owner"] == "pyhudi"


def test_lock_providers_by_hudi_class_name_and_custom(tmp_path):
    pre = "org.apache.hudi.client.transaction.lock."
    lock = TableLock(str(tmp_path), HudiConfig({"hoodie.write.lock.provider": pre + "InProcessLockProvider"}))
    assert isinstance(lock.provider, InProcessLockProvider)
    lock = TableLock(str(tmp_path), HudiConfig({"hoodie.write.lock.provider": pre + "FileSystemBasedLockProvider",
                                                "hoodie.write.lock.filesystem.path": str(tmp_path / "locks")}))
    assert isinstance(lock.provider, FileSystemLockProvider)
    with lock.held():
        assert (tmp_path / "locks" / "lock").exists()
    with pytest.raises(pyhudi.HudiUnsupportedError, match="JVM"):
        TableLock(str(tmp_path), HudiConfig({"hoodie.write.lock.provider": pre + "ZookeeperBasedLockProvider"}))
    with pytest.raises(pyhudi.HudiConfigError, match="not a subclass"):
        TableLock(str(tmp_path), HudiConfig({"hoodie.write.lock.provider": "collections.OrderedDict"}))


# -- heartbeats ----------------------------------------------------------------------------------
def test_heartbeat_beats_until_stopped_then_expires(tmp_path):
    from pyhudi.storage import Storage

    storage, policy = Storage(str(tmp_path)), HeartbeatPolicy(interval_ms=200, tolerable_misses=3)
    beat = Heartbeat(storage, "20260101000000000", policy).start()
    assert (tmp_path / heartbeat_path("20260101000000000")).exists()
    time.sleep(1.0)  # several beats later the file is still fresh
    assert heartbeat_age(storage, "20260101000000000") < 0.5 and is_alive(storage, "20260101000000000", policy)
    beat.stop(delete=False)  # a dead writer's file stays, and ages
    time.sleep(0.8)
    assert not is_alive(storage, "20260101000000000", policy)
    assert not is_alive(storage, "20260101000000001", policy)  # no heartbeat at all: failed


# -- single writer -------------------------------------------------------------------------------
def _pending_write(path, *, alive: bool) -> str:
    """A write that requested its instant and keeps (or lost) its heartbeat."""
    from pyhudi.timeline.instant import new_instant_time

    table = pyhudi.HudiTable(path)
    instant = new_instant_time(after=table.timeline.last_instant_time())
    table.storage.write_bytes(heartbeat_path(instant), b"")
    if not alive:
        os.utime(table.storage.full(heartbeat_path(instant)), (0, 0))
    table.timeline.create_requested(instant, "commit")
    return instant


def test_single_writer_refuses_to_start_beside_a_live_write(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path)
    before = _state(spark, path)
    live = _pending_write(path, alive=True)
    from pyhudi.cli.commits import show_commit
    from pyhudi.cli.timeline import show_timeline

    assert "in progress: heartbeat 0 s ago" in show_timeline(pyhudi.HudiTable(path))
    first = pyhudi.HudiTable(path).timeline.completed_writes()[0].timestamp
    assert "conflict check: none (written in single-writer mode)" in show_commit(pyhudi.HudiTable(path), first)
    with pytest.raises(HudiConcurrentWriteError, match=f"{live}.*OPTIMISTIC_CONCURRENCY_CONTROL"):
        pyhudi.write(_rows(spark, [("kp0-0", "p0", 1, "b")]), path, BASE)
    table = pyhudi.HudiTable(path)
    assert [i.timestamp for i in table.timeline.pending()] == [live]  # not rolled back, nothing added
    assert _state(spark, path) == before
    # once the writer is gone (its heartbeat expired) the next write rolls it back and goes ahead
    os.utime(table.storage.full(heartbeat_path(live)), (0, 0))
    assert "failed: heartbeat" in show_timeline(table)
    res = pyhudi.write(_rows(spark, [("kp0-0", "p0", 1, "b")]), path, BASE)
    assert len(res.stats["rolled_back_instants"]) == 1
    assert _state(spark, path)["kp0-0"] == ("p0", 1, "b")
    assert pyhudi.HudiTable(path).timeline.pending() == []
    assert not (tmp_path / "t" / heartbeat_path(res.instant_time)).exists()  # stopped and deleted at commit


def test_lazy_policy_leaves_failed_writes_to_the_cleaner(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path)
    lazy = {**BASE, "hoodie.cleaner.policy.failed.writes": "LAZY"}
    failed = _pending_write(path, alive=False)
    res = pyhudi.write(_rows(spark, [("kp1-0", "p1", 1, "b")]), path, {**lazy, "hoodie.clean.automatic": "false"})
    assert res.stats["rolled_back_instants"] == []
    assert [i.timestamp for i in pyhudi.HudiTable(path).timeline.pending()] == [failed]
    live = _pending_write(path, alive=True)
    pyhudi.clean(path, lazy)  # the cleaner rolls back the expired one only
    table = pyhudi.HudiTable(path)
    assert [i.timestamp for i in table.timeline.pending()] == [live]
    rollbacks = table.timeline.completed([ROLLBACK])
    assert len(rollbacks) == 1
    assert _state(spark, path)["kp1-0"] == ("p1", 1, "b")


def test_commit_fails_if_another_writer_rolled_the_instant_back(spark, tmp_path, monkeypatch):
    """A writer whose heartbeat expired while it worked finds its instant rolled back: it must not
    complete it (the files are gone), and it says so."""
    path = str(tmp_path / "t")
    _table(spark, path)
    before = _state(spark, path)
    from pyhudi.spark import pipeline

    real_run = pipeline.Pipeline.run

    def run(self, *args, commit, **kwargs):
        def other_writer_rolls_back(meta, **kw):
            table = pyhudi.HudiTable(path)
            rollback_instant(table.storage, table.timeline, table.timeline.find(self.instant),
                             complete=CommitPoint.of(table).complete)
            # a straggling task of this write writes one more file after that rollback
            late = f"p0/late-0_1-0-1_{self.instant}.parquet"
            create_marker(table.storage, self.instant, late, CREATE)
            table.storage.write_bytes(late, b"PAR1")
            commit(meta, **kw)

        return real_run(self, *args, commit=other_writer_rolls_back, **kwargs)

    monkeypatch.setattr(pipeline.Pipeline, "run", run)
    with pytest.raises(HudiCommitError, match="rolled it back"):
        pyhudi.write(_rows(spark, [("kp0-0", "p0", 1, "lost")]), path, BASE)
    monkeypatch.undo()
    table = pyhudi.HudiTable(path)
    assert table.timeline.pending() == [] and len(table.timeline.completed_writes()) == 1
    assert not list((tmp_path / "t" / "p0").glob("late-0_*"))  # rolled back too, by the failed writer
    assert len(table.timeline.completed([ROLLBACK])) == 2
    assert _state(spark, path) == before
    assert {r["id"]: r["val"] for r in hudi_rs_rows(path)} == {k: v[2] for k, v in before.items()}


# -- optimistic concurrency control ---------------------------------------------------------------
def _with_other_write_before_commit(monkeypatch, other):
    """Run ``other()`` (another writer's whole write) after this write's files, before its commit."""
    from pyhudi.spark import pipeline

    real_run = pipeline.Pipeline.run
    fired = []

    def run(self, *args, commit, **kwargs):
        def late_commit(meta, **kw):
            if not fired:
                fired.append(True)
                other()
            commit(meta, **kw)

        return real_run(self, *args, commit=late_commit, **kwargs)

    monkeypatch.setattr(pipeline.Pipeline, "run", run)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_occ_overlapping_file_group_fails_the_later_commit(spark, tmp_path, monkeypatch, table_type):
    path = str(tmp_path / "t")
    opts = {**OCC, "hoodie.datasource.write.table.type": table_type}
    _table(spark, path, opts)
    results = []
    _with_other_write_before_commit(monkeypatch, lambda: results.append(
        pyhudi.write(_rows(spark, [("kp0-1", "p0", 2, "B")]), path, opts)))
    with pytest.raises(HudiWriteConflictError) as err:
        pyhudi.write(_rows(spark, [("kp0-0", "p0", 1, "A")]), path, opts)
    monkeypatch.undo()
    b = results[0].instant_time
    assert b in str(err.value) and "p0/" in str(err.value)
    state = _state(spark, path)
    assert state["kp0-1"] == ("p0", 2, "B") and state["kp0-0"] == ("p0", 0, "init")  # as B left it
    table = pyhudi.HudiTable(path)
    assert table.timeline.pending() == []
    assert len(table.timeline.completed([ROLLBACK])) == 1
    assert {r["id"]: r["val"] for r in hudi_rs_rows(path)} == {k: v[2] for k, v in state.items()}


def test_occ_disjoint_writers_both_commit_and_record_the_check(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    _table(spark, path, OCC)
    results = []
    _with_other_write_before_commit(monkeypatch, lambda: results.append(
        pyhudi.write(_rows(spark, [("kp1-1", "p1", 2, "B"), ("new-b", "p2", 2, "B")]), path, OCC)))
    a = pyhudi.write(_rows(spark, [("kp0-0", "p0", 1, "A"), ("new-a", "p2", 1, "A")]), path, OCC)
    monkeypatch.undo()
    state = _state(spark, path)
    assert state["kp0-0"][2] == "A" and state["kp1-1"][2] == "B" and {"new-a", "new-b"} <= set(state)
    table = pyhudi.HudiTable(path)
    meta = table.timeline.commit_metadata(table.timeline.find(a.instant_time))
    check = json.loads(meta.extra_metadata["pyhudi.conflict.check"])
    assert check == {"mode": "OPTIMISTIC_CONCURRENCY_CONTROL", "candidates": [results[0].instant_time],
                     "conflicts": []}
    assert sorted(r["id"] for r in hudi_rs_rows(path)) == sorted(state)
    from pyhudi.cli.commits import show_commit

    shown = show_commit(table, a.instant_time)
    assert f"conflict check (OPTIMISTIC_CONCURRENCY_CONTROL): against 1 instant(s) completed or planned while it " \
           f"ran: {results[0].instant_time}" in shown


def test_occ_bucket_index_conflicts_on_the_same_new_bucket(spark, tmp_path, monkeypatch):
    """Two writers creating a file group for one bucket would leave the bucket with two groups."""
    path = str(tmp_path / "t")
    opts = {**OCC, "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "1"}
    _table(spark, path, opts, rows=[("kp0-0", "p0", 0, "init")])
    _with_other_write_before_commit(monkeypatch, lambda: pyhudi.write(
        _rows(spark, [("x", "p9", 2, "B")]), path, opts))
    with pytest.raises(HudiWriteConflictError, match="p9/"):
        pyhudi.write(_rows(spark, [("y", "p9", 1, "A")]), path, opts)
    monkeypatch.undo()
    assert sorted(_state(spark, path)) == ["kp0-0", "x"]


def test_occ_compaction_planned_during_a_write_conflicts(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    opts = {**OCC, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    _table(spark, path, opts)
    pyhudi.write(_rows(spark, [("kp0-0", "p0", 1, "log")]), path, opts)
    planned = []
    _with_other_write_before_commit(monkeypatch, lambda: planned.append(pyhudi.schedule_compaction(path, opts)))
    with pytest.raises(HudiWriteConflictError, match="compaction"):
        pyhudi.write(_rows(spark, [("kp0-1", "p0", 2, "A")]), path, opts)
    monkeypatch.undo()
    assert planned[0] is not None
    pyhudi.compact(spark, path, opts, instant=planned[0])
    state = _state(spark, path)
    assert state["kp0-0"][2] == "log" and state["kp0-1"][2] == "init"
    # an overwrite replaces every file group: a compaction pending on any of them is a conflict
    pyhudi.write(_rows(spark, [("kp0-2", "p0", 3, "log")]), path, opts)
    plan = pyhudi.schedule_compaction(path, opts)
    with pytest.raises(HudiWriteConflictError, match=plan):
        pyhudi.write(_rows(spark, [("z", "p0", 4, "over")]), path, opts, mode="overwrite")
    assert "z" not in _state(spark, path)


# -- processes -----------------------------------------------------------------------------------
def _model(outcomes: list[dict]) -> dict[str, tuple]:
    from writer_process import initial_rows

    model = {k: (p, ts, v) for k, p, ts, v in initial_rows()}
    for o in sorted((o for o in outcomes if o["ok"]), key=lambda o: o["instant"]):
        for k, p, ts, v in o["rows"]:
            if o["op"] == "delete":
                model.pop(k, None)
            else:
                model[k] = (p, ts, v)
    return model


@pytest.mark.parametrize(("options", "refusal"), [
    ({**OCC}, "HudiWriteConflictError"),
    ({**OCC, "hoodie.cleaner.policy.failed.writes": "EAGER"}, "HudiWriteConflictError"),
    ({**BASE}, "HudiConcurrentWriteError"),
], ids=["occ-lazy", "occ-eager", "single-writer"])
def test_writer_processes_never_lose_a_committed_write(spark, tmp_path, options, refusal):
    """Three processes, each with its own Spark, upsert and delete on random (overlapping and
    disjoint) partitions. Every write reported committed is visible, every failed one left
    nothing, and pyhudi and hudi-rs read the table the successful writes alone describe."""
    from writer_process import initial_rows

    path = str(tmp_path / "t")
    _table(spark, path, options, rows=initial_rows())
    procs = []
    for w in range(3):
        result = tmp_path / f"w{w}.json"
        procs.append((result, subprocess.Popen(
            [sys.executable, WRITER, "stress", path, str(result), str(w), str(100 + w), "4", json.dumps(options)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    outcomes = []
    for result, proc in procs:
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        outcomes += json.loads(result.read_text())
    failed = [o for o in outcomes if not o["ok"]]
    assert {o["error"] for o in failed} <= {refusal}, failed
    assert len(outcomes) - len(failed) >= 3  # some writes went through
    model = _model(outcomes)
    assert _state(spark, path) == model
    assert {r["id"]: (r["p"], r["ts"], r["val"]) for r in hudi_rs_rows(path)} == model
    table = pyhudi.HudiTable(path)
    assert table.timeline.pending() == []
    committed = {o["instant"] for o in outcomes if o["ok"]}
    assert committed <= {i.timestamp for i in table.timeline.completed_writes()}
    # a failed write left no data file of its own: every base file belongs to a completed commit
    data_instants = {name.rsplit("_", 1)[-1].split(".")[0] for _d, _s, files in os.walk(path)
                     for name in files if name.endswith(".parquet")}
    assert data_instants <= committed | {i.timestamp for i in table.timeline.completed_writes()}


def test_killed_writer_is_rolled_back_once_its_heartbeat_expires(spark, tmp_path):
    path = str(tmp_path / "t")
    lazy = {**OCC, "hoodie.client.heartbeat.interval_in_ms": "2000", "hoodie.client.heartbeat.tolerable.misses": "4"}
    _table(spark, path, lazy)
    before = _state(spark, path)
    proc = subprocess.Popen([sys.executable, WRITER, "hang", path, json.dumps(lazy)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    instant = proc.stdout.readline().strip()
    assert instant, "the writer did not reach its commit"
    table = pyhudi.HudiTable(path)
    assert heartbeat_age(table.storage, instant) < 8
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = time.time()
    # before expiry: neither the cleaner nor another writer touches it
    pyhudi.clean(path, lazy)
    pyhudi.write(_rows(spark, [("kp1-0", "p1", 1, "other")]), path, lazy)
    assert [i.timestamp for i in pyhudi.HudiTable(path).timeline.pending()] == [instant]
    # its last beat was at most 2 s before the kill: it expires 6-8 s after the kill
    assert time.time() - killed_at < 6, "the test was too slow to check the window before expiry"
    time.sleep(max(0.0, killed_at + 8.5 - time.time()))
    pyhudi.clean(path, lazy)
    table = pyhudi.HudiTable(path)
    assert table.timeline.pending() == []
    assert [i for i in table.timeline.completed([ROLLBACK])]
    assert not [f for _d, _s, fs in os.walk(path) for f in fs if instant in f]
    assert _state(spark, path) == {**before, "kp1-0": ("p1", 1, "other")}


def test_archival_keeps_commits_completed_since_a_pending_write_started(spark, tmp_path):
    """A write's conflict check needs every commit completed since it started on the active
    timeline, including one with an older instant time that completed late."""
    from pyhudi.services.archival import instants_to_archive
    from pyhudi.timeline.instant import new_instant_time

    path = str(tmp_path / "t")
    _table(spark, path)
    table = pyhudi.HudiTable(path)
    tl = table.timeline
    times = [tl.completed_writes()[0].timestamp]
    for _ in range(6):
        times.append(new_instant_time(after=times[-1]))
    c1, c2, c3, p, c4, c5, c6 = times
    for t in (c2, c3, c4, c5, c6):
        tl.create_requested(t, "commit")
        tl.complete(t, "commit", b"{}")
    tl.create_requested(p, "commit")
    table.storage.write_bytes(heartbeat_path(p), b"")

    def age(instant_file: str, seconds_ago: float) -> None:
        moment = time.time() - seconds_ago
        os.utime(table.storage.full(f".hoodie/{instant_file}"), (moment, moment))

    age(f"{p}.commit.requested", 50)
    for t in (c1, c3):
        age(f"{t}.commit", 100)  # completed before the pending write started
    age(f"{c2}.commit", 10)  # started before it, completed after it started
    cfg = HudiConfig({"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                      "hoodie.clean.commits.retained": "1"})
    assert instants_to_archive(pyhudi.HudiTable(path), cfg) == [c1]


def test_instants_archived_by_another_writer_while_listed(spark, tmp_path):
    """A writer lists the timeline, another archives old commits; reading what was listed stops
    at the archived ones instead of failing the write."""
    path = str(tmp_path / "t")
    _table(spark, path)
    for n in range(4):
        pyhudi.write(_rows(spark, [(f"kp0-{n}", "p0", n + 1, "u")]), path,
                     {**BASE, "hoodie.archive.automatic": "false", "hoodie.metadata.compact.max.delta.commits": "1"})
    mine = pyhudi.HudiTable(path)  # listed now
    first = mine.timeline.completed_writes()[0]
    archived = pyhudi.archive(path, {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                     "hoodie.clean.commits.retained": "1"})
    assert first.timestamp in archived
    with pytest.raises(pyhudi.HudiInstantNotFoundError, match="left the active timeline"):
        mine.timeline.read_bytes(first)
    assert mine.avro_schema() and mine.newest_base_file()
    res = pyhudi.write(_rows(spark, [("kp1-0", "p1", 9, "after")]), path, BASE)
    assert res.instant_time and _state(spark, path)["kp1-0"] == ("p1", 9, "after")


def test_new_log_file_takes_the_next_version_when_another_writer_has_the_name(tmp_path):
    from pyhudi.io.file_names import log_file_name
    from pyhudi.storage import Storage
    from pyhudi.write.append import _create_log_file

    storage = Storage(str(tmp_path))
    taken = f"p0/{log_file_name('fg', '20260101000000000', 1, '0-1-0')}"
    storage.write_bytes(taken, b"theirs")

    class Ctx:
        instant_time = "20260101000000001"

    rel = _create_log_file(storage, Ctx(), taken, b"mine", "0-1-0")  # type: ignore[arg-type]
    assert rel.endswith(".log.2_0-1-0") and storage.read_bytes(rel) == b"mine"
    assert storage.read_bytes(taken) == b"theirs"
    assert list_markers(storage, Ctx.instant_time) == [(rel, "APPEND")]  # no marker names their file


def test_a_compaction_run_by_a_live_process_is_not_run_twice(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = {**OCC, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    _table(spark, path, opts)
    pyhudi.write(_rows(spark, [("kp0-0", "p0", 1, "log")]), path, opts)
    plan = pyhudi.schedule_compaction(path, opts)
    table = pyhudi.HudiTable(path)
    table.timeline.transition_inflight(plan, "compaction")
    table.storage.write_bytes(heartbeat_path(plan), b"")  # another process runs it
    with pytest.raises(pyhudi.HudiCompactionError, match="being run by another process"):
        pyhudi.compact(spark, path, opts, instant=plan)
    res = pyhudi.write(_rows(spark, [("kp1-0", "p1", 2, "x")]), path, {**opts, "hoodie.compact.inline": "true"})
    assert "compactions" not in res.stats  # inline compaction leaves it to that process
    os.utime(table.storage.full(heartbeat_path(plan)), (0, 0))  # that process died
    assert pyhudi.compact(spark, path, opts, instant=plan) == [plan]
    assert _state(spark, path)["kp0-0"][2] == "log"


def test_occ_write_beside_a_compaction_planned_before_it_commits(spark, tmp_path, monkeypatch):
    """As in Hudi: a write that started after a compaction was planned puts its log blocks in the
    compaction's new slice, so the compaction completing meanwhile is no conflict."""
    path = str(tmp_path / "t")
    opts = {**OCC, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    _table(spark, path, opts)
    pyhudi.write(_rows(spark, [("kp0-0", "p0", 1, "log")]), path, opts)
    plan = pyhudi.schedule_compaction(path, opts)
    _with_other_write_before_commit(monkeypatch, lambda: pyhudi.compact(spark, path, opts, instant=plan))
    res = pyhudi.write(_rows(spark, [("kp0-1", "p0", 2, "A")]), path, opts)
    monkeypatch.undo()
    table = pyhudi.HudiTable(path)
    assert table.timeline.is_completed(plan) and table.timeline.is_completed(res.instant_time)
    state = _state(spark, path)
    assert state["kp0-0"][2] == "log" and state["kp0-1"][2] == "A"
    assert {r["id"]: r["val"] for r in hudi_rs_rows(path)} == {k: v[2] for k, v in state.items()}
