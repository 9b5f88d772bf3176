"""Structured Streaming: each micro-batch lands once through kills and restarts, and the table streams
its commits (Spark 4's ``readStream.format("hudi")`` and the polling :class:`CommitStream`) once each."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from conftest import hudi_rs_rows, pyhudi_rows

import pyhudi
from pyhudi.timeline.checkpoint import SINK_CHECKPOINT_KEY, last_batch_id
from pyhudi.timeline.instant import WRITE_ACTIONS

WRITER = str(Path(__file__).parent / "stream_process.py")
KEYS, FILES, ROWS = 120, 8, 40
BASE = {"hoodie.table.name": "stream", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.streaming.retry.interval.ms": "1000", "hoodie.metadata.enable": "true"}
#: the kill test: a restarted writer finds the killed write's heartbeat alive (20 s) and must wait it
#: out, with no retry of other failures to hide behind
KILLED = {"hoodie.client.heartbeat.interval_in_ms": "10000", "hoodie.datasource.write.streaming.retry.count": "1"}


def write_inputs(directory: Path, seed: int) -> list[list[dict]]:
    """FILES files of random upserts and deletes (with repeated keys), oldest first by modification time."""
    rng = random.Random(seed)
    directory.mkdir()
    batches = []
    for n in range(FILES):
        rows = []
        for j in range(ROWS):
            k = rng.randrange(KEYS)
            rows.append({"id": f"k{k:03d}", "p": f"p{k % 3}", "ts": n * 1000 + j, "val": f"f{n}-{j}",
                         "_hoodie_is_deleted": n > 0 and rng.random() < 0.15})
        path = directory / f"in-{n:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))
        batches.append(rows)
    return batches


def model(batches: list[list[dict]]) -> dict[str, dict]:
    """Key -> row after upserting each batch (its rows combined on ts, a deleted winner deleting)."""
    state: dict[str, dict] = {}
    for rows in batches:
        latest: dict[str, dict] = {}
        for r in rows:
            if r["id"] not in latest or r["ts"] > latest[r["id"]]["ts"]:
                latest[r["id"]] = r
        for k, r in latest.items():
            if r["_hoodie_is_deleted"]:
                state.pop(k, None)
            else:
                state[k] = r
    return state


def start_writer(tmp: Path, options: dict, *mode: str) -> tuple[subprocess.Popen, Path]:
    report = tmp / f"report-{time.monotonic_ns()}.json"
    proc = subprocess.Popen([sys.executable, WRITER, str(tmp / "in"), str(tmp / "table"), str(tmp / "chk"),
                             json.dumps(options), str(report), *mode],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, report


def kill_mid_write(proc: subprocess.Popen, table: Path, *, after: int, timeout_s: float = 240) -> None:
    """SIGKILL the writer while one of its writes is pending, once ``after`` writes completed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"writer ended before it was killed: {proc.stderr.read()[-3000:]}"
        if pyhudi.HudiTable.exists(str(table)):
            timeline = pyhudi.HudiTable(str(table)).timeline
            if len(timeline.completed_writes()) >= after and timeline.pending(WRITE_ACTIONS):
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return
        time.sleep(0.02)
    proc.kill()
    pytest.fail("no write was caught in flight")


def wait_for_dead_heartbeats(table: Path, options: dict) -> None:
    """Sleep until no pending instant of ``table`` has a live heartbeat (its writer exited)."""
    from pyhudi.config import HudiConfig
    from pyhudi.transaction.heartbeat import HeartbeatPolicy, is_alive

    hudi_table = pyhudi.HudiTable(str(table))
    policy = HeartbeatPolicy.of(HudiConfig.of(options))
    deadline = time.monotonic() + policy.max_age_s + 30
    while any(is_alive(hudi_table.storage, i.timestamp, policy) for i in hudi_table.timeline.reload().pending()):
        assert time.monotonic() < deadline, "a heartbeat outlived its writer"
        time.sleep(0.5)


def pull_with_spark(spark, table: Path, out: Path, checkpoint: Path) -> None:
    """A downstream query of the table's commits (Spark 4 source), restarted from its checkpoint each call."""
    def keep(df, batch_id):
        df.select("_hoodie_commit_time", "id", "val").write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))

    query = (spark.readStream.format("hudi").load(str(table)).writeStream.foreachBatch(keep)
             .option("checkpointLocation", str(checkpoint)).start())
    query.processAllAvailable()
    query.stop()


def pull_with_poller(spark, table: Path, out: Path, checkpoint: Path, *, fail_once: bool = False) -> None:
    """The same with CommitStream; ``fail_once``: the first batch fails after writing its output, as a
    process dying before the commit file would, and the restart runs it again."""
    failed = []

    def keep(df, batch_id):
        df.select("_hoodie_commit_time", "id", "val").write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))
        if fail_once and not failed:
            failed.append(batch_id)
            raise RuntimeError("downstream died")

    stream = pyhudi.commit_stream(spark, str(table), checkpoint_location=str(checkpoint))
    try:
        stream.process_available(keep)
    except RuntimeError:
        assert failed
        stream = pyhudi.commit_stream(spark, str(table), checkpoint_location=str(checkpoint))
        stream.process_available(keep)


def check_downstream(spark, out: Path, table: Path, expected: dict[str, dict]) -> None:
    rows = [r.asDict() for r in spark.read.parquet(str(out)).collect()]
    pairs = [(r["_hoodie_commit_time"], r["id"]) for r in rows]
    assert len(pairs) == len(set(pairs)), "a commit's record reached the downstream twice"
    timeline = pyhudi.HudiTable(str(table)).timeline
    batches = {i.timestamp for i in timeline.completed_writes()
               if SINK_CHECKPOINT_KEY in timeline.commit_metadata(i).extra_metadata}
    # every micro-batch's commit reached the downstream (the downstream pulled after each writer run,
    # and no batch of this input has all its records replaced within one run)
    assert {t for t, _ in pairs} == batches
    latest: dict[str, dict] = {}
    for r in rows:
        if r["id"] not in latest or r["_hoodie_commit_time"] > latest[r["id"]]["_hoodie_commit_time"]:
            latest[r["id"]] = r
    assert {k: latest[k]["val"] for k in expected} == {k: r["val"] for k, r in expected.items()}


@pytest.mark.parametrize("table_type,extra", [
    ("COPY_ON_WRITE", {}),
    ("MERGE_ON_READ", {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2",
                       "hoodie.compact.inline.max.delta.commits": "2"}),
])
def test_stream_survives_kills_and_lands_every_batch_once(spark, tmp_path, table_type, extra):
    batches = write_inputs(tmp_path / "in", seed=zlib.crc32(table_type.encode()))
    expected = model(batches)
    table = tmp_path / "table"
    options = {**BASE, **KILLED, "hoodie.datasource.write.table.type": table_type, **extra}
    spark_source = hasattr(spark, "dataSource")
    if spark_source:
        pyhudi.register(spark)
    downstream = [(pull_with_poller, tmp_path / "poller-out", tmp_path / "poller-chk")]
    if spark_source:
        downstream.append((pull_with_spark, tmp_path / "spark-out", tmp_path / "spark-chk"))

    # 1. killed in the middle of a micro-batch write
    proc, _ = start_writer(tmp_path, options)
    kill_mid_write(proc, table, after=2)
    # 2. restarted at once, so it meets the killed write's live heartbeat and waits it out; then dies
    #    right after a commit, before Spark marks the batch done: the next restart replays it
    proc, _ = start_writer(tmp_path, options, "exit-after-write")
    for pull, out, chk in downstream:
        pull(spark, table, out, chk)
    assert proc.wait(timeout=300) == 3, proc.stderr.read()[-3000:]
    pull_with_poller(spark, table, tmp_path / "poller-out", tmp_path / "poller-chk", fail_once=True)
    if spark_source:
        pull_with_spark(spark, table, tmp_path / "spark-out", tmp_path / "spark-chk")
    # 3. runs to the end. A compaction the exited writer scheduled stays pending while its heartbeat
    #    lives, and the restart takes it over only once it expired: wait for that, or the few batches
    #    left could all pass within the heartbeat's life and leave the plan to a later run
    wait_for_dead_heartbeats(table, options)
    proc, report = start_writer(tmp_path, options)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()[-3000:]
    reports = json.loads(report.read_text())
    assert [r["batch_id"] for r in reports if r["skipped"]], "the replayed batch was written again"
    for pull, out, chk in downstream:
        pull(spark, table, out, chk)

    hudi_table = pyhudi.HudiTable(str(table))
    timeline = hudi_table.timeline
    extras = [timeline.commit_metadata(i).extra_metadata for i in timeline.completed_writes()]
    recorded = [json.loads(e[SINK_CHECKPOINT_KEY])["default_single_writer"] for e in extras if SINK_CHECKPOINT_KEY in e]
    assert sorted(int(b) for b in recorded) == list(range(FILES)), "each micro-batch commits exactly once"
    assert last_batch_id(timeline, "default_single_writer") == FILES - 1
    if table_type == "MERGE_ON_READ":
        assert timeline.completed(["commit"]), "no compaction ran between the micro-batches"
    want = {k: (r["val"], r["ts"]) for k, r in expected.items()}
    assert {r["id"]: (r["val"], r["ts"]) for r in pyhudi_rows(spark, table)} == want
    assert {r["id"]: (r["val"], r["ts"]) for r in hudi_rs_rows(table)} == want
    for _pull, out, _chk in downstream:
        check_downstream(spark, out, table, expected)


def test_sink_skips_batches_it_committed_and_keeps_writers_apart(spark, tmp_path):
    from pyhudi.spark.streaming import HudiStreamSink

    path = str(tmp_path / "t")
    rows = spark.createDataFrame([("a", "p0", 1, "one", False)],
                                 "id string, p string, ts long, val string, _hoodie_is_deleted boolean")
    again = spark.createDataFrame([("a", "p0", 2, "two", False)], rows.schema)
    sink = HudiStreamSink(path, BASE)
    sink(rows, 0)
    sink(again, 0)  # a replay of batch 0 with other rows: skipped
    assert [r.skipped for r in sink.reports] == [False, True]
    assert [r["val"] for r in pyhudi_rows(spark, path)] == ["one"]
    other = HudiStreamSink(path, {**BASE, "hoodie.datasource.write.streaming.checkpoint.identifier": "second"})
    other(again, 0)  # another writer's batch 0
    assert [r["val"] for r in pyhudi_rows(spark, path)] == ["two"]
    timeline = pyhudi.HudiTable(path).timeline
    assert last_batch_id(timeline, "default_single_writer") == 0 and last_batch_id(timeline, "second") == 0
    pyhudi.write(again, path, {**BASE, "_pipeline_run": "nightly-7"})  # a batch write between them
    meta = timeline.reload().commit_metadata(timeline.completed_writes()[-1])
    assert meta.extra_metadata["_pipeline_run"] == "nightly-7" and SINK_CHECKPOINT_KEY not in meta.extra_metadata
    assert last_batch_id(timeline, "second") == 0
    prefixed = HudiStreamSink(path, {**BASE, "hoodie.datasource.write.commitmeta.key.prefix": "app_",
                                     "hoodie.datasource.write.streaming.checkpoint.identifier": "third"})
    prefixed(rows, 5)  # the batch id is recorded whatever the prefix of commit-metadata options
    prefixed(again, 5)
    assert [r.skipped for r in prefixed.reports] == [False, True]
    assert last_batch_id(timeline.reload(), "third") == 5
    assert [(r["id"], r["val"]) for r in hudi_rs_rows(path)] == [(r["id"], r["val"]) for r in pyhudi_rows(spark, path)]
    with pytest.raises(pyhudi.HudiConfigError, match="streaming DataFrame"):
        pyhudi.write_stream(rows, path, BASE, checkpoint_location=str(tmp_path / "chk"))


def test_commit_stream_start_positions(spark, tmp_path):
    path = str(tmp_path / "t")
    schema = "id string, p string, ts long, val string"
    instants = [pyhudi.write(spark.createDataFrame([(f"k{n}", "p0", n, f"v{n}")], schema), path, BASE).instant_time
                for n in range(3)]

    def ids(start: str | None, name: str) -> list[tuple[int, list[str]]]:
        options = {} if start is None else {"hoodie.datasource.streaming.startOffset": start}
        seen: list[tuple[int, list[str]]] = []
        stream = pyhudi.commit_stream(spark, path, options, checkpoint_location=str(tmp_path / name))
        stream.process_available(lambda df, i: seen.append((i, sorted(r.id for r in df.collect()))))
        return seen

    assert ids(None, "a") == [(0, ["k0", "k1", "k2"])]
    assert ids("latest", "b") == []
    assert ids(instants[0], "c") == [(0, ["k1", "k2"])]
    pyhudi.write(spark.createDataFrame([("k0", "p0", 9, "again")], schema), path, BASE)
    assert ids("latest", "b") == [(0, ["k0"])]  # the start was fixed when the stream began
    assert ids(None, "a") == [(1, ["k0"])]
    assert ids("000", "e") == [(0, ["k0", "k1", "k2"])]  # Hudi's spelling of earliest
    assert sorted((r["id"], r["val"]) for r in hudi_rs_rows(path)) == \
        sorted((r["id"], r["val"]) for r in pyhudi_rows(spark, path))
    with pytest.raises(pyhudi.HudiConfigError, match="startOffset"):
        ids("yesterday", "d")


def test_streams_stop_before_a_pending_write(spark, tmp_path):
    """A write still pending while a later one completed holds both streams back until it resolves."""
    from pyhudi.timeline.instant import new_instant_time

    path = str(tmp_path / "t")
    schema = "id string, p string, ts long, val string"
    options = {**BASE, "hoodie.cleaner.policy.failed.writes": "NEVER"}
    first = pyhudi.write(spark.createDataFrame([("a", "p0", 1, "a")], schema), path, options).instant_time
    timeline = pyhudi.HudiTable(path).timeline
    pending = new_instant_time(after=timeline.last_instant_time())
    timeline.create_requested(pending, "commit")  # a slow writer, still running
    pyhudi.write(spark.createDataFrame([("b", "p0", 2, "b")], schema), path, options)
    spark_source = hasattr(spark, "dataSource")
    seen: dict[str, list[tuple[int, list[str]]]] = {"poller": [], "spark": []}

    def keeper(name):
        return lambda df, i: seen[name].append((i, sorted(r.id for r in df.collect())))

    def pull():
        pyhudi.commit_stream(spark, path, checkpoint_location=str(tmp_path / "poll")).process_available(
            keeper("poller"))
        if spark_source:
            pyhudi.register(spark)
            query = (spark.readStream.format("hudi").load(path).writeStream.foreachBatch(keeper("spark"))
                     .option("checkpointLocation", str(tmp_path / "spark")).start())
            query.processAllAvailable()
            query.stop()

    pull()
    timeline.delete_instant(pending)  # the slow writer failed and was rolled back
    pull()
    assert seen["poller"] == [(0, ["a"]), (1, ["b"])]
    assert sorted(r["id"] for r in hudi_rs_rows(path)) == ["a", "b"]
    if spark_source:
        assert seen["spark"] == [(0, ["a"]), (1, ["b"])]
        late = []
        query = (spark.readStream.format("hudi").option("hoodie.datasource.streaming.startOffset", first).load(path)
                 .writeStream.foreachBatch(lambda df, i: late.append(sorted(r.id for r in df.collect())))
                 .option("checkpointLocation", str(tmp_path / "from-first")).start())
        query.processAllAvailable()
        query.stop()
        assert late == [["b"]]


def test_spark_stream_source_never_goes_back_before_its_start(spark, tmp_path):
    """A latest offset below the start would become the next batch's start: the stream would then
    deliver commits at or before the start instant that complete later."""
    if not hasattr(spark, "dataSource"):
        pytest.skip("Spark's Python streaming data source arrived in PySpark 4.0")
    from pyhudi.spark.datasource import HudiStreamReader
    from pyhudi.timeline.instant import new_instant_time

    path = str(tmp_path / "t")
    first = pyhudi.write(spark.createDataFrame([("a", "p0", 1, "a")], "id string, p string, ts long, val string"),
                         path, BASE).instant_time
    later = new_instant_time(after=first)
    reader = HudiStreamReader(path, {"hoodie.datasource.streaming.startoffset": later}, None)
    assert reader.initialOffset() == {"instant": later}
    assert reader.latestOffset() == {"instant": later}
    assert HudiStreamReader(path, {}, None).latestOffset({"instant": later}, None) == {"instant": later}
    assert HudiStreamReader(path, {}, None).latestOffset() == {"instant": first}


def test_sink_clusters_in_the_background_and_batches_wait_for_it(spark, tmp_path, monkeypatch, caplog):
    """hoodie.clustering.async.enabled: the sink schedules a clustering every few commits and runs it
    beside the batches; a batch updating the groups being clustered (refused by the reject strategy)
    waits for the clustering and then lands."""
    import logging
    import threading

    import pyhudi.spark.clustering_job as clustering
    from pyhudi.plans.clustering import pending_clusterings
    from pyhudi.spark.streaming import HudiStreamSink

    run, started = clustering.run_clustering, threading.Event()

    def slow(*args, **kw):  # the next batch arrives while the plan runs
        started.set()
        time.sleep(3)
        return run(*args, **kw)

    monkeypatch.setattr(clustering, "run_clustering", slow)
    path = str(tmp_path / "t")
    opts = {**BASE, "hoodie.parquet.small.file.limit": "0", "hoodie.clustering.async.enabled": "true",
            "hoodie.clustering.async.max.commits": "3", "hoodie.clustering.plan.strategy.sort.columns": "val"}
    schema = "id string, p string, ts long, val string, _hoodie_is_deleted boolean"
    sink, model = HudiStreamSink(path, opts), {}
    caplog.set_level(logging.WARNING, logger="pyhudi")
    for b in range(7):
        rows = [(f"k{b}-{i}", f"p{i % 2}", b, f"v{b}", False) for i in range(10)]
        rows += [(f"k0-{i}", f"p{i % 2}", b, f"u{b}", False) for i in range(2)] if b else []  # updates of batch 0
        if b == 3:
            assert started.wait(30), "the clustering scheduled after batch 2 runs in the background"
        sink(spark.createDataFrame(rows, schema), b)
        model.update({r[0]: r[3] for r in rows})
    sink.wait_for_services()
    scheduled = [r.clustering for r in sink.reports if r.clustering]
    assert len(scheduled) == 2, sink.reports  # after batches 2 and 5
    timeline = pyhudi.HudiTable(path).timeline
    assert all(timeline.is_completed(i) for i in scheduled) and not pending_clusterings(timeline)
    assert "waits for the background clustering" in caplog.text
    assert {r["id"]: r["val"] for r in pyhudi_rows(spark, path)} == model
    assert {r["id"]: r["val"] for r in hudi_rs_rows(path)} == model
