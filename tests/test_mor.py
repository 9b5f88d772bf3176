"""Merge-on-read tables: log files, merged reads, compaction, recovery; checked by hudi-rs too."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from conftest import hudi_rs_rows, kill_writer_on_failure, pyhudi_rows, unzip_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_model import INDEXES, SCHEMA, SIZING, apply, check, index_options, op_st, run_clustering

import pyhudi
from pyhudi.io.log_format import BlockType, read_log_file
from pyhudi.plans.compaction import pending_compactions, read_plan
from pyhudi.spark.compaction_job import compact, run_compaction
from pyhudi.timeline.instant import COMMIT, DELTA_COMMIT

BASE = {
    "hoodie.table.name": "mor", "hoodie.datasource.write.recordkey.field": "key",
    "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
}
RO = {"hoodie.datasource.query.type": "read_optimized"}


def _df(spark, rows):
    return spark.createDataFrame(rows, SCHEMA)


def _logs(path):
    table = pyhudi.HudiTable(str(path))
    return [lf for s in table.file_system_view().latest_slices() for lf in s.log_files]


# -- model-based: random writes with compactions scheduled and run at random points ------------
mor_op_st = st.one_of(op_st, st.tuples(st.just("schedule"), st.just([])), st.tuples(st.just("compact"), st.just([])))


@pytest.mark.parametrize("index", INDEXES)
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(mor_op_st, min_size=2, max_size=6), sizing=st.sampled_from(sorted(SIZING)),
       update_partition=st.booleans(), block_format=st.sampled_from(["avro", "parquet"]))
def test_mor_random_operations_match_model(spark, tmp_path_factory, index, ops, sizing, update_partition,
                                           block_format):
    run_mor_model(spark, tmp_path_factory, index, ops, sizing, update_partition, block_format, version="6")


# table version 9 (Hudi 1.1's format): logs named by their delta commit, sliced by completion time
@pytest.mark.parametrize("index", INDEXES)
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(mor_op_st, min_size=2, max_size=6), sizing=st.sampled_from(sorted(SIZING)),
       update_partition=st.booleans(), block_format=st.sampled_from(["avro", "parquet"]))
def test_mor_random_operations_match_model_on_version_9(spark, tmp_path_factory, index, ops, sizing,
                                                        update_partition, block_format):
    run_mor_model(spark, tmp_path_factory, index, ops, sizing, update_partition, block_format, version="9")


def run_mor_model(spark, tmp_path_factory, index: str, ops: list, sizing: str, update_partition: bool,
                  block_format: str, *, version: str) -> None:
    """One random sequence of writes, compactions and clusterings on a merge-on-read table of
    ``version``, each step checked against the model."""
    path = str(tmp_path_factory.mktemp("mor") / "t")
    index, index_opts = index_options(index)
    global_index = index.startswith("GLOBAL_") or index == "RECORD_INDEX"
    options = {
        **BASE, **index_opts,
        "hoodie.simple.index.update.partition.path": str(update_partition).lower(),
        "hoodie.bloom.index.update.partition.path": str(update_partition).lower(),
        "hoodie.bucket.index.num.buckets": "3", "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.index.bloom.filter.enable": "true",
        # the record index maps a key to one place: it is kept for tables whose keys are unique
        "hoodie.metadata.record.index.enable": str(global_index).lower(),
        "hoodie.record.index.update.partition.path": str(update_partition).lower(),
        "hoodie.metadata.record.index.min.filegroup.count": "3", "hoodie.metadata.compact.max.delta.commits": "3",
        "hoodie.logfile.data.block.format": block_format, "hoodie.write.table.version": version,
        **SIZING[sizing],
    }
    model: dict = {}
    for op, rows in ops:
        if op in ("schedule", "compact"):
            if not pyhudi.HudiTable.exists(path):
                continue
            if op == "schedule":
                pyhudi.schedule_compaction(path)
            else:
                pyhudi.compact(spark, path)
                assert not pending_compactions(pyhudi.HudiTable(path).timeline)
                if not _logs(path):  # everything folded into base files: read-optimized sees it all
                    expected = sorted((r[0], r[2], r[3]) for r in model.values())
                    ro = pyhudi_rows(spark, path, options=RO)
                    assert sorted((r["key"], r["ts"], r["val"]) for r in ro) == expected
        elif op == "cluster":
            run_clustering(spark, path, options, rows)
            if not pyhudi.HudiTable.exists(path):
                continue
        else:
            batch = apply(model, op, rows, global_index, update_partition)
            if not batch:
                continue
            pyhudi.write(_df(spark, batch), path, {**options, "hoodie.datasource.write.operation": op})
            if not pyhudi.HudiTable.exists(path):
                continue
        # hudi-rs 0.5.0 ignores version-6 log files named after a pending compaction (Java merges them
        # into the slice before it, as pyhudi does), so there it is checked only while no compaction
        # is pending; from version 8 logs are named by their own delta commit
        table = pyhudi.HudiTable(path)
        assert table.config.version == int(version)
        pending = version == "6" and bool(pending_compactions(table.timeline))
        check(spark, path, model, global_index, update_partition, hudi_rs=not pending)


# -- log files ---------------------------------------------------------------------------------
def test_updates_and_deletes_go_to_log_files(spark, tmp_path):
    path = tmp_path / "t"
    rows = [(f"k{i:02d}", "p1", 1, float(i), False) for i in range(20)]
    first = pyhudi.write(_df(spark, rows), str(path), {**BASE, "hoodie.datasource.write.operation": "bulk_insert"})
    upd = pyhudi.write(_df(spark, [("k01", "p1", 2, -1.0, False), ("k02", "p1", 2, -2.0, True)]), str(path), BASE)
    table = pyhudi.HudiTable(str(path))
    instants = table.timeline.completed_writes()
    assert [i.action for i in instants] == [DELTA_COMMIT, DELTA_COMMIT]
    meta = table.timeline.commit_metadata(instants[-1])
    (stat,) = meta.write_stats()
    doc = json.loads(meta.to_json())["partitionToWriteStats"]["p1"][0]
    assert doc["logVersion"] == 1 and doc["baseFile"].endswith(f"_{first.instant_time}.parquet")
    assert stat.path.startswith("p1/.") and ".log.1_" in stat.path
    assert (stat.numUpdateWrites, stat.numDeletes) == (1, 1)
    blocks = read_log_file(table.storage, stat.path)
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA_BLOCK, BlockType.DELETE_BLOCK]
    assert {b.instant_time for b in blocks} == {upd.instant_time}
    # the base file is untouched; read-optimized still sees it, snapshot sees the merge
    assert len(pyhudi_rows(spark, path, options=RO)) == 20
    snap = {r["key"]: r["val"] for r in pyhudi_rows(spark, path)}
    assert len(snap) == 19 and snap["k01"] == -1.0 and "k02" not in snap
    assert {r["key"]: r["val"] for r in hudi_rs_rows(path)} == snap
    # a second upsert appends to the same log file
    pyhudi.write(_df(spark, [("k03", "p1", 3, -3.0, False)]), str(path), BASE)
    logs = _logs(path)
    assert len(logs) == 1 and len(read_log_file(table.storage, logs[0].path)) == 3


def test_log_rolls_over_at_max_size(spark, tmp_path):
    path = tmp_path / "t"
    opts = {**BASE, "hoodie.logfile.max.size": "1"}
    pyhudi.write(_df(spark, [("a", "p", 1, 1.0, False), ("b", "p", 1, 1.0, False)]), str(path),
                 {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    for ts in (2, 3, 4):
        pyhudi.write(_df(spark, [("a", "p", ts, float(ts), False)]), str(path), opts)
    assert sorted(lf.version for lf in _logs(path)) == [1, 2, 3]
    assert {r["key"]: r["val"] for r in pyhudi_rows(spark, path)} == {"a": 4.0, "b": 1.0}
    assert {r["key"]: r["val"] for r in hudi_rs_rows(path)} == {"a": 4.0, "b": 1.0}


# -- compaction ----------------------------------------------------------------------------------
def test_compaction_plan_and_writes_while_pending(spark, tmp_path):
    path = str(tmp_path / "t")
    rows = [(f"k{i}", "p1" if i % 2 else "p2", 1, float(i), False) for i in range(10)]
    pyhudi.write(_df(spark, rows), path, {**BASE, "hoodie.datasource.write.operation": "bulk_insert"})
    pyhudi.write(_df(spark, [("k1", "p1", 2, 10.0, False), ("k2", "p2", 2, 20.0, False)]), path, BASE)
    instant = pyhudi.schedule_compaction(path)
    table = pyhudi.HudiTable(path)
    plan = read_plan(table.timeline, instant)
    assert sorted(op.partition_path for op in plan.operations) == ["p1", "p2"]
    assert all(len(op.log_files) == 1 and op.base_file for op in plan.operations)
    # writes continue: new log files start the slice of the pending compaction
    pyhudi.write(_df(spark, [("k1", "p1", 3, 30.0, False), ("k3", "p1", 3, 33.0, True)]), path, BASE)
    new_logs = [lf for lf in _logs(path) if lf.base_instant == instant]
    assert len(new_logs) == 1 and new_logs[0].version == 1
    expected = {f"k{i}": float(i) for i in range(10)} | {"k1": 30.0, "k2": 20.0}
    del expected["k3"]
    assert {r["key"]: r["val"] for r in pyhudi_rows(spark, path)} == expected
    # (hudi-rs 0.5.0 does not read log files named after a pending compaction: checked after it ran)
    run_compaction(spark, pyhudi.HudiTable(path), instant)
    table = pyhudi.HudiTable(path)
    (completed,) = [i for i in table.timeline.completed_writes() if i.timestamp == instant]
    assert completed.action == COMMIT
    meta = table.timeline.commit_metadata(completed)
    assert meta.operation_type == "COMPACT" and meta.compacted
    assert sum(s.totalLogFilesCompacted for s in meta.write_stats()) == 2
    assert {r["key"]: r["val"] for r in pyhudi_rows(spark, path)} == expected
    assert {r["key"]: r["val"] for r in hudi_rs_rows(path)} == expected
    # read-optimized: the compacted base files, without the write made while the plan was pending
    ro = {r["key"]: r["val"] for r in pyhudi_rows(spark, path, options=RO)}
    assert ro == {f"k{i}": float(i) for i in range(10)} | {"k1": 10.0, "k2": 20.0}
    # records keep the commit time of the write that made them
    snap = {r["key"]: r["_hoodie_commit_time"] for r in pyhudi_rows(spark, path, options=RO)}
    assert snap["k4"] == table.timeline.completed_writes()[0].timestamp


def test_logs_of_a_pending_compaction_are_read_after_the_slice_before_it(spark, tmp_path):
    """The slice before a pending compaction has log versions 1 and 2, the compaction's slice its
    own log 1: readers apply them by base instant first (Hudi's ``LogFileComparator``), so a key
    deleted before the plan and written again after it is there, in snapshot and incremental reads."""
    path = str(tmp_path / "t")
    opts = {**BASE, "hoodie.logfile.max.size": "1",  # every write rolls over to a new log version
            "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "1"}  # inserts go to logs too
    pyhudi.write(_df(spark, [("a", "p", 1, 1.0, False), ("b", "p", 1, 1.0, False)]), path,
                 {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    pyhudi.write(_df(spark, [("a", "p", 2, 2.0, False)]), path, opts)
    deleted = pyhudi.write(_df(spark, [("b", "p", 5, 0.0, True)]), path, opts)
    instant = pyhudi.schedule_compaction(path)
    again = pyhudi.write(_df(spark, [("b", "p", 5, 5.0, False)]), path, opts)
    (piece,) = pyhudi.HudiTable(path).file_system_view().latest_slices()
    assert [(lf.base_instant == instant, lf.version) for lf in piece.log_files] == [(False, 1), (False, 2), (True, 1)]
    assert {r["key"]: r["val"] for r in pyhudi_rows(spark, path)} == {"a": 2.0, "b": 5.0}
    incremental = {"hoodie.datasource.query.type": "incremental",
                   "hoodie.datasource.read.begin.instanttime": deleted.instant_time}
    assert [(r["key"], r["val"]) for r in pyhudi_rows(spark, path, options=incremental)] == [("b", 5.0)]
    assert [r["_hoodie_commit_time"] for r in pyhudi_rows(spark, path, options=incremental)] == [again.instant_time]
    run_compaction(spark, pyhudi.HudiTable(path), instant)
    assert {r["key"]: r["val"] for r in pyhudi_rows(spark, path)} == {"a": 2.0, "b": 5.0}
    assert {r["key"]: r["val"] for r in hudi_rs_rows(path)} == {"a": 2.0, "b": 5.0}


def test_inline_compaction_after_max_delta_commits(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = {**BASE, "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"}
    pyhudi.write(_df(spark, [("a", "p", 1, 1.0, False)]), path, {**opts, "hoodie.datasource.write.operation": "insert"})
    res = pyhudi.write(_df(spark, [("a", "p", 2, 2.0, False)]), path, opts)
    table = pyhudi.HudiTable(path)
    actions = [i.action for i in table.timeline.completed_writes()]
    assert actions == [DELTA_COMMIT, DELTA_COMMIT, COMMIT]
    assert res.stats["compactions"] == [table.timeline.completed_writes()[-1].timestamp]
    assert _logs(path) == []
    assert [(r["key"], r["val"]) for r in pyhudi_rows(spark, path, options=RO)] == [("a", 2.0)]
    assert [(r["key"], r["val"]) for r in hudi_rs_rows(path)] == [("a", 2.0)]


def test_failed_compaction_is_reattempted(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    pyhudi.write(_df(spark, [("a", "p", 1, 1.0, False)]), path, {**BASE, "hoodie.datasource.write.operation": "insert"})
    pyhudi.write(_df(spark, [("a", "p", 2, 2.0, False)]), path, BASE)
    instant = pyhudi.schedule_compaction(path)
    table = pyhudi.HudiTable(path)

    def boom(*args, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(table.timeline, "complete", boom)
    with pytest.raises(RuntimeError):
        run_compaction(spark, table, instant)
    monkeypatch.undo()
    assert [r["val"] for r in pyhudi_rows(spark, path)] == [2.0]  # the half-done compaction is invisible
    assert compact(spark, path) == [instant]
    assert [r["val"] for r in pyhudi_rows(spark, path, options=RO)] == [2.0]
    assert [r["val"] for r in hudi_rs_rows(path)] == [2.0]


# -- recovery ------------------------------------------------------------------------------------
def test_failed_delta_commit_is_rolled_back_with_a_command_block(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    pyhudi.write(_df(spark, [("a", "p", 1, 1.0, False), ("b", "p", 1, 1.0, False)]), path,
                 {**BASE, "hoodie.datasource.write.operation": "bulk_insert"})
    pyhudi.write(_df(spark, [("a", "p", 2, 2.0, False)]), path, BASE)
    from pyhudi.timeline.timeline import Timeline

    original = Timeline.complete

    def die(self, timestamp, action, content):
        if action == DELTA_COMMIT:
            raise KeyboardInterrupt  # the process is killed: no rollback runs
        return original(self, timestamp, action, content)

    monkeypatch.setattr(Timeline, "complete", die)
    kill_writer_on_failure(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        pyhudi.write(_df(spark, [("a", "p", 3, 3.0, False), ("b", "p", 3, 3.0, True)]), path, BASE)
    monkeypatch.undo()
    # the failed blocks sit in the log but no reader sees them
    assert {r["key"]: r["val"] for r in pyhudi_rows(spark, path)} == {"a": 2.0, "b": 1.0}
    res = pyhudi.write(_df(spark, [("c", "p", 4, 4.0, False)]), path, BASE)
    assert len(res.stats["rolled_back_instants"]) == 1
    logs = _logs(path)
    rollback_logs = [lf for lf in logs if lf.write_token == "1-0-1"]
    assert len(rollback_logs) == 1
    table = pyhudi.HudiTable(path)
    (cmd,) = read_log_file(table.storage, rollback_logs[0].path)
    assert cmd.block_type == BlockType.COMMAND_BLOCK
    expected = {"a": 2.0, "b": 1.0, "c": 4.0}
    assert {r["key"]: r["val"] for r in pyhudi_rows(spark, path)} == expected
    assert {r["key"]: r["val"] for r in hudi_rs_rows(path)} == expected
    pyhudi.compact(spark, path)
    assert {r["key"]: r["val"] for r in pyhudi_rows(spark, path, options=RO)} == expected


def test_truncated_log_tail_is_skipped_and_not_appended_to(spark, tmp_path):
    path = str(tmp_path / "t")
    pyhudi.write(_df(spark, [("a", "p", 1, 1.0, False)]), path, {**BASE, "hoodie.datasource.write.operation": "insert"})
    pyhudi.write(_df(spark, [("a", "p", 2, 2.0, False)]), path, BASE)
    (log,) = _logs(path)
    full = tmp_path / "t" / log.path
    data = full.read_bytes()
    full.write_bytes(data + data[:40])  # a crashed writer's partial block
    assert [r["val"] for r in pyhudi_rows(spark, path)] == [2.0]
    pyhudi.write(_df(spark, [("a", "p", 3, 3.0, False)]), path, BASE)
    assert sorted(lf.version for lf in _logs(path)) == [1, 2]  # rolled over past the damaged tail
    assert [r["val"] for r in pyhudi_rows(spark, path)] == [3.0]
    assert [r["val"] for r in hudi_rs_rows(path)] == [3.0]


# -- Apache Hudi's MOR tables --------------------------------------------------------------------
AFTER_SQL = {1: ("Alice", False), 2: ("Bob", False), 3: ("Carol", True), 4: ("Diana", True)}


@pytest.mark.parametrize("name", ["v6_nonpartitioned", "v6_simplekeygen_nonhivestyle"])
def test_interop_mor_parquet_blocks(spark, interop_dir, tmp_path, name):
    path = unzip_table(interop_dir / "mor" / "parquet" / f"{name}.zip", tmp_path)
    rows = pyhudi_rows(spark, path)
    by_id = {r["id"]: r for r in rows}
    assert {i: (r["name"], r["isActive"]) for i, r in by_id.items()} == AFTER_SQL
    alice = by_id[1]
    assert alice["decimalField"] == Decimal("12345.67890")
    assert alice["dateField"] == dt.date(2023, 4, 1)
    assert alice["structField"]["child_struct"]["child_field1"] == pytest.approx(123.456)
    theirs = {r["id"]: (r["name"], r["isActive"]) for r in hudi_rs_rows(path)}
    assert theirs == AFTER_SQL
    # read-optimized: base files only, so Alice's update in the log is not there
    ro = {r["id"]: r["isActive"] for r in pyhudi_rows(spark, path, options=RO)}
    assert ro[1] is True


def test_interop_mor_avro_update(spark, interop_dir, tmp_path):
    path = unzip_table(interop_dir / "mor" / "avro" / "v6_trips_8i1u.zip", tmp_path)
    rows = {r["rider"]: r["fare"] for r in pyhudi_rows(spark, path)}
    assert len(rows) == 8 and rows["rider-D"] == 25.0 and rows["rider-A"] == pytest.approx(19.10)
    assert {r["rider"]: r["fare"] for r in hudi_rs_rows(path)} == rows


def test_interop_mor_avro_delete(spark, interop_dir, tmp_path):
    path = unzip_table(interop_dir / "mor" / "avro" / "v6_trips_8i3d.zip", tmp_path)
    riders = sorted(r["rider"] for r in pyhudi_rows(spark, path))
    assert riders == ["rider-E", "rider-F", "rider-G", "rider-I", "rider-J"]
    assert sorted(r["rider"] for r in hudi_rs_rows(path)) == riders


def test_we_write_to_and_compact_an_apache_hudi_mor_table(spark, interop_dir, tmp_path):
    path = unzip_table(interop_dir / "mor" / "avro" / "v6_trips_8i3d.zip", tmp_path)
    row = (1695516137099, "e3cf430c-889d-4015-bc98-59bdce1e530c", "rider-F", "driver-P", 99.0, "sao_paulo")
    df = spark.createDataFrame([row], "ts long, uuid string, rider string, driver string, fare double, city string")
    pyhudi.write(df, str(path), {"hoodie.datasource.write.operation": "upsert"})
    expected = {"rider-E": 93.5, "rider-F": 99.0, "rider-G": 43.4, "rider-I": 41.06, "rider-J": 17.85}
    assert {r["rider"]: r["fare"] for r in pyhudi_rows(spark, path)} == expected
    assert {r["rider"]: r["fare"] for r in hudi_rs_rows(path)} == expected
    pyhudi.compact(spark, str(path))
    assert {r["rider"]: r["fare"] for r in pyhudi_rows(spark, path, options=RO)} == expected
    assert {r["rider"]: r["fare"] for r in hudi_rs_rows(path)} == expected


def test_compaction_cli(spark, tmp_path, capsys):
    from pyhudi.cli import main

    path = str(tmp_path / "t")
    pyhudi.write(_df(spark, [("a", "p", 1, 1.0, False)]), path, {**BASE, "hoodie.datasource.write.operation": "insert"})
    pyhudi.write(_df(spark, [("a", "p", 2, 2.0, False)]), path, BASE)
    assert main(["show", "file-groups", "--path", path]) == 0
    assert "Log Files" in capsys.readouterr().out
    assert main(["compaction", "schedule", "--path", path]) == 0
    instant = capsys.readouterr().out.split()[-1]
    assert main(["compaction", "show", "--path", path]) == 0
    out = capsys.readouterr().out
    assert instant in out and "REQUESTED" in out
    assert main(["compaction", "show", "--path", path, "--instant", instant]) == 0
    assert ".log.1_" not in capsys.readouterr().out  # counts, not names
    assert main(["compaction", "run", "--path", path]) == 0
    assert f"completed compaction {instant}" in capsys.readouterr().out
    assert main(["compaction", "show", "--path", path]) == 0
    assert "COMPLETED" in capsys.readouterr().out
    assert main(["compaction", "schedule", "--path", path]) == 0
    assert "nothing to compact" in capsys.readouterr().out
    assert [(r["key"], r["val"]) for r in hudi_rs_rows(path)] == [("a", 2.0)]


def test_a_group_without_base_files_reads_its_logs_across_a_pending_compaction(tmp_path):
    """Writers that insert into log files (Flink, Hudi's bucket index) leave file groups without a
    base file. While a compaction of such a group is pending, the logs named after it extend the
    slice before it: a reader of the latest slice must see both."""
    from pyhudi.io.file_names import log_file_name
    from pyhudi.storage import Storage
    from pyhudi.table.fs_view import FileSystemView
    from pyhudi.timeline.timeline import Timeline

    storage = Storage(str(tmp_path))
    first, compaction, second = "20260101000000000", "20260101000001000", "20260101000002000"
    for name in (f"{first}.deltacommit.requested", f"{first}.deltacommit.inflight", f"{first}.deltacommit",
                 f"{compaction}.compaction.requested", f"{second}.deltacommit.requested",
                 f"{second}.deltacommit.inflight", f"{second}.deltacommit"):
        storage.write_bytes(f".hoodie/{name}", b"")
    for base_instant, version in ((compaction, 1), (first, 1), (first, 2)):
        storage.write_bytes(f"p/{log_file_name('fg', base_instant, version, '0-1-0')}", b"")
    (piece,) = FileSystemView(storage, Timeline(storage), partitions=["p"]).latest_slices()
    assert piece.base_instant == first and piece.base_file is None
    assert [(lf.base_instant, lf.version) for lf in piece.log_files] == [(first, 1), (first, 2), (compaction, 1)]
