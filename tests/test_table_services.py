"""Cleaning, archival, savepoints, restore and rollback: what they write on the timeline, what they
delete, and that every query they still allow reads right (pyhudi and hudi-rs) while the others fail
with a clear error."""

from __future__ import annotations

import itertools

import pytest
from conftest import hudi_rs_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi.cli import main as cli
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiConfigError, HudiRestoreError, HudiRetentionError
from pyhudi.spark.reader import plan_query
from pyhudi.timeline.archive import ArchivedTimeline, list_archive_files
from pyhudi.timeline.avro_records import CLEAN_METADATA, CLEANER_PLAN, read_record
from pyhudi.timeline.instant import CLEAN, RESTORE, SAVEPOINT, Instant, State

SCHEMA = T.StructType([T.StructField("key", T.StringType()), T.StructField("part", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("val", T.LongType())])
_ts = itertools.count(1)


def opts(table_type: str = "COPY_ON_WRITE", **extra: str) -> dict:
    return {"hoodie.table.name": "svc", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type, "hoodie.datasource.write.operation": "upsert",
            **{k.replace("_", "."): v for k, v in extra.items()}}


def write(spark, path: str, rows: list[tuple[str, str, int]], options: dict) -> str:
    batch = [(k, p, next(_ts), v) for k, p, v in rows]
    return pyhudi.write(spark.createDataFrame(batch, SCHEMA), path, options).instant_time


def snapshot(spark, path: str, options: dict | None = None) -> list[tuple]:
    return sorted((r["key"], r["val"]) for r in pyhudi.read(spark, path, options).collect())


def rs(path: str, **kw) -> list[tuple]:
    return sorted((r["key"], r["val"]) for r in hudi_rs_rows(path, **kw))


def daily(spark, path: str, n: int, options: dict) -> list[tuple[str, list[tuple]]]:
    """n commits updating the same two keys (and adding one): the same file groups get rewritten."""
    out = []
    for i in range(n):
        instant = write(spark, path, [("a", "p1", i), ("b", "p2", i), (f"n{i}", "p1", i)], options)
        out.append((instant, snapshot(spark, path)))
    return out


def test_keep_latest_commits_cleans_and_guards_old_instants(spark, tmp_path):
    path = str(tmp_path / "t")
    options = opts(**{"hoodie.clean.commits.retained": "2"})
    history = daily(spark, path, 6, options)
    table = pyhudi.HudiTable(path)
    cleans = table.timeline.completed([CLEAN])
    assert cleans, "six commits with two retained must clean"
    plan = read_record(table.timeline.read_bytes(Instant(cleans[-1].timestamp, State.REQUESTED, CLEAN)),
                       CLEANER_PLAN)
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["version"] == 2
    assert plan["earliestInstantToRetain"]["timestamp"] == history[-2][0]
    inflight = table.timeline.read_bytes(Instant(cleans[-1].timestamp, State.INFLIGHT, CLEAN))
    assert read_record(inflight) == read_record(table.timeline.read_bytes(
        Instant(cleans[-1].timestamp, State.REQUESTED, CLEAN)))
    meta = read_record(table.timeline.read_bytes(cleans[-1]), CLEAN_METADATA)
    assert meta["earliestCommitToRetain"] == history[-2][0]
    assert meta["totalFilesDeleted"] == sum(len(p["successDeleteFiles"]) for p in meta["partitionMetadata"].values())
    # per file group: the slices from the ECTR on, and one before it
    ectr = history[-2][0]
    for group in table.file_system_view().file_groups():
        instants = [s.base_instant for s in group.slices]
        assert len([t for t in instants if t < ectr]) <= 1, instants
    # retained instants read as they were; cleaned ones are refused
    for instant, snap in history[-3:]:
        assert snapshot(spark, path, {"as.of.instant": instant}) == snap
        assert rs(path, as_of=instant) == snap
    with pytest.raises(HudiRetentionError, match="hoodie.clean.commits.retained"):
        pyhudi.read(spark, path, {"as.of.instant": history[0][0]})
    incr = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": history[0][0],
            "hoodie.datasource.read.end.instanttime": history[2][0]}
    with pytest.raises(HudiRetentionError, match="fulltablescan"):
        pyhudi.read(spark, path, incr)
    fallback = pyhudi.read(spark, path, {**incr, "hoodie.datasource.read.incr.fallback.fulltablescan.enable": "true"})
    # the latest state of records whose latest write is in the range: only n1 and n2
    assert sorted((r["key"], r["val"]) for r in fallback.collect()) == [("n1", 1), ("n2", 2)]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_an_async_clean_runs_while_the_write_writes_and_cleans_as_inline(spark, tmp_path, monkeypatch, table_type):
    """hoodie.clean.async: each write's clean starts on a thread of its own once the write
    requested its instant, before the write completes; the table ends with the same records as the
    same writes cleaning inline, and the same file slices once cleaned once more."""
    import threading

    from pyhudi.commit.transaction import WriteTransaction
    from pyhudi.spark import post_commit

    seen = []
    real, commit = post_commit.clean, WriteTransaction.commit
    cleaned = threading.Event()

    def watched(table, cfg, **kw):
        pending = [i.timestamp for i in pyhudi.HudiTable(table.storage.base_path).timeline.pending_writes()]
        seen.append((threading.current_thread().name, pending))
        try:
            return real(table, cfg, **kw)
        finally:
            cleaned.set()

    def after_the_clean(self, *args, **kw):  # the commit waits for a clean running beside the write
        if async_mode[0]:
            assert cleaned.wait(60)
        return commit(self, *args, **kw)

    async_mode = [False]
    monkeypatch.setattr(post_commit, "clean", watched)
    monkeypatch.setattr(WriteTransaction, "commit", after_the_clean)
    paths = {mode: str(tmp_path / mode) for mode in ("inline", "async")}
    for mode, path in paths.items():
        options = opts(table_type, **{"hoodie.clean.commits.retained": "2", "hoodie.clean.async": str(mode == "async"),
                                      "hoodie.write.concurrency.mode": "optimistic_concurrency_control"})
        history = []
        for i in range(6):  # (as daily(); each commit after the first waits for the clean beside it)
            async_mode[0] = mode == "async" and i > 0
            cleaned.clear()
            instant = write(spark, path, [("a", "p1", i), ("b", "p2", i), (f"n{i}", "p1", i)], options)
            history.append((instant, snapshot(spark, path)))
        assert history[-1][1] == snapshot(spark, path) == rs(path)
        threads = [name for name, _pending in seen]
        if mode == "async":  # the first write creates the table, and cleans after its commit
            assert all(name.startswith("pyhudi-async-clean") for name in threads[1:]) and len(threads) == 6
            assert all(pending == [instant] for (_n, pending), (instant, _s) in zip(seen[1:], history[1:]))
        else:
            assert not any(name.startswith("pyhudi-async-clean") for name in threads)
            assert all(pending == [] for _n, pending in seen)
        seen.clear()
    def shape(path):
        return sorted((g.partition_path, len(g.slices), len(g.slices[-1].log_files))
                      for g in pyhudi.HudiTable(path).file_system_view().file_groups())

    # a clean beside a write sees the table before that write's commit: it may keep a slice a clean
    # after the commit would have removed, which the next clean removes
    assert shape(paths["async"]) != shape(paths["inline"])
    assert all(a[1] >= i[1] for a, i in zip(shape(paths["async"]), shape(paths["inline"])))
    pyhudi.clean(paths["async"], {"hoodie.clean.commits.retained": "2"})
    assert shape(paths["async"]) == shape(paths["inline"])
    cleaned = {mode: len(pyhudi.HudiTable(path).timeline.completed([CLEAN])) for mode, path in paths.items()}
    assert cleaned["async"] == cleaned["inline"] > 0  # (each async one a commit later, and the one more)
    assert rs(paths["async"]) == rs(paths["inline"])


def test_an_async_clean_needs_optimistic_concurrency_control(spark, tmp_path):
    """A single writer holds the table lock throughout its write: no clean can run beside it, so
    hoodie.clean.async=true is refused before the write starts: no table is created, an existing
    one is left as it was."""
    path = str(tmp_path / "t")
    with pytest.raises(HudiConfigError, match="optimistic"):
        write(spark, path, [("a", "p1", 1)], opts(**{"hoodie.clean.async": "true"}))
    assert not (tmp_path / "t").exists()
    write(spark, path, [("a", "p1", 1)], opts())
    before = sorted(p.name for p in (tmp_path / "t" / ".hoodie").iterdir())
    with pytest.raises(HudiConfigError, match="optimistic"):
        write(spark, path, [("a", "p1", 2)], opts(**{"hoodie.clean.async": "true"}))
    assert sorted(p.name for p in (tmp_path / "t" / ".hoodie").iterdir()) == before
    assert rs(path) == [("a", 1)]


def test_keep_latest_file_versions(spark, tmp_path):
    path = str(tmp_path / "t")
    options = opts(**{"hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "2"})
    history = daily(spark, path, 5, options)
    table = pyhudi.HudiTable(path)
    assert table.timeline.completed([CLEAN])
    for group in table.file_system_view().file_groups():
        assert len(group.slices) <= 2
    assert snapshot(spark, path) == history[-1][1] == rs(path)
    with pytest.raises(HudiRetentionError):
        pyhudi.read(spark, path, {"as.of.instant": history[0][0]})
    assert snapshot(spark, path, {"as.of.instant": history[-2][0]}) == history[-2][1]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_savepoint_survives_cleaning_and_restore_returns_to_it(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    options = opts(table_type, **{"hoodie.clean.commits.retained": "1", "hoodie.compact.inline": "true",
                                  "hoodie.compact.inline.max.delta.commits": "2"})
    history = daily(spark, path, 2, options)
    saved = pyhudi.create_savepoint(path, comments="before the backfill")
    assert saved.instant >= history[-1][0] and saved.files  # merge-on-read: the inline compaction after it
    history += daily(spark, path, 4, options)
    table = pyhudi.HudiTable(path)
    assert table.timeline.completed([CLEAN]), "retaining one commit cleans"
    assert [s.instant for s in pyhudi.list_savepoints(path)] == [saved.instant]
    assert snapshot(spark, path, {"as.of.instant": saved.instant}) == history[1][1]
    with pytest.raises(HudiRetentionError):
        pyhudi.read(spark, path, {"as.of.instant": history[0][0]})
    with pytest.raises(HudiRestoreError, match="only the latest"):
        pyhudi.rollback(path, history[2][0])
    res = pyhudi.restore(path, saved.instant)
    assert len(res.rolled_back) >= 4
    assert snapshot(spark, path) == history[1][1] == rs(path)
    table = pyhudi.HudiTable(path)
    assert table.timeline.latest_completed_write().timestamp == saved.instant
    assert table.timeline.completed([RESTORE])[0].timestamp == res.instant
    assert table.timeline.completed([SAVEPOINT])[0].timestamp == saved.instant
    # the table keeps working after a restore
    write(spark, path, [("a", "p1", 99)], options)
    assert dict(snapshot(spark, path))["a"] == 99


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_rollback_of_the_latest_commit(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    options = opts(table_type)
    history = daily(spark, path, 3, options)
    rb = pyhudi.rollback(path)
    assert snapshot(spark, path) == history[1][1] == rs(path)
    table = pyhudi.HudiTable(path)
    assert table.timeline.is_completed(rb) and not any(i.timestamp == history[2][0] for i in table.timeline.instants())
    pyhudi.create_savepoint(path)
    with pytest.raises(HudiRestoreError, match="savepoint"):
        pyhudi.rollback(path)
    pyhudi.delete_savepoint(path, history[1][0])
    assert not pyhudi.list_savepoints(path)
    pyhudi.rollback(path, history[1][0])
    assert snapshot(spark, path) == history[0][1]


def test_archival_moves_old_instants_and_keeps_the_table_readable(spark, tmp_path):
    path = str(tmp_path / "t")
    options = opts(**{"hoodie.clean.commits.retained": "1", "hoodie.keep.min.commits": "2",
                      "hoodie.keep.max.commits": "3"})
    history = daily(spark, path, 7, options)
    table = pyhudi.HudiTable(path)
    assert list_archive_files(table.storage)
    archived = ArchivedTimeline(table.storage)
    archived_writes = [i.timestamp for i in archived.completed_writes()]
    active_writes = [i.timestamp for i in table.timeline.completed_writes()]
    assert archived_writes and max(archived_writes) < min(active_writes)
    assert sorted(archived_writes + active_writes) == [h[0] for h in history]
    assert len(active_writes) <= 3
    assert archived.commit_metadata(archived_writes[0]).write_stats()
    assert snapshot(spark, path) == history[-1][1] == rs(path)
    # a pull from an archived instant cannot know what the archived commits wrote
    incr = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": history[0][0]}
    with pytest.raises(HudiRetentionError, match="archived"):
        pyhudi.read(spark, path, incr)
    with pytest.raises(HudiConfigError, match="hoodie.keep.max.commits"):
        write(spark, path, [("a", "p1", 1)], {**options, "hoodie.keep.max.commits": "2"})


def test_incremental_pull_reads_only_what_the_range_wrote_and_sees_late_data(spark, tmp_path):
    path = str(tmp_path / "t")
    options = opts()
    days = [f"2024-01-0{d}" for d in range(1, 6)]
    instants = [write(spark, path, [(f"{day}-{i}", day, i) for i in range(20)], options) for day in days]
    late = write(spark, path, [("late-1", days[0], 7), (f"{days[4]}-3", days[4], 100)], options)
    cfg = HudiConfig.of({"hoodie.datasource.query.type": "incremental",
                         "hoodie.datasource.read.begin.instanttime": instants[-1]})
    files = plan_query(pyhudi.HudiTable(path), cfg)
    written = {s.path for s in pyhudi.HudiTable(path).timeline.commit_metadata(
        pyhudi.HudiTable(path).timeline.find(late)).write_stats()}
    assert {f for f, _ in files.files} == written
    assert files.view.partitions == sorted({days[0], days[4]})  # nothing else listed
    pulled = pyhudi.read(spark, path, {"hoodie.datasource.query.type": "incremental",
                                       "hoodie.datasource.read.begin.instanttime": instants[-1]}).collect()
    assert sorted((r["key"], r["val"], r["_hoodie_commit_time"]) for r in pulled) == \
        [(f"{days[4]}-3", 100, late), ("late-1", 7, late)]
    assert sorted(r["key"] for r in hudi_rs_rows(path, start=instants[-1])) == [f"{days[4]}-3", "late-1"]
    # ISO forms of the same instants
    iso = f"{late[:4]}-{late[4:6]}-{late[6:8]} {late[8:10]}:{late[10:12]}:{late[12:14]}.{late[14:]}"
    assert len(pyhudi.read(spark, path, {"as.of.instant": iso}).collect()) == 101
    begin_iso = f"{instants[0][:4]}-{instants[0][4:6]}-{instants[0][6:8]} {instants[0][8:10]}:" \
                f"{instants[0][10:12]}:{instants[0][12:14]}.{instants[0][14:]}"
    two = pyhudi.read(spark, path, {"hoodie.datasource.query.type": "incremental",
                                    "hoodie.datasource.read.begin.instanttime": begin_iso,
                                    "hoodie.datasource.read.end.instanttime": instants[1]}).collect()
    assert {r["part"] for r in two} == {days[1]} and len(two) == 20
    assert pyhudi.read(spark, path, {"hoodie.datasource.query.type": "incremental",
                                     "hoodie.datasource.read.begin.instanttime": late}).count() == 0


def test_incremental_refuses_a_hole_in_the_timeline(spark, tmp_path):
    path = str(tmp_path / "t")
    options = opts(**{"hoodie.clean.automatic": "false"})
    first = write(spark, path, [("a", "p1", 1)], options)
    second = write(spark, path, [("b", "p1", 2)], options)
    table = pyhudi.HudiTable(path)
    hole = str(int(second) - 1)  # a write between them that has not completed
    table.timeline.create_requested(hole, "commit")
    incr = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": "000"}
    with pytest.raises(HudiConfigError, match="holes.resolution.policy"):
        pyhudi.read(spark, path, incr)
    blocked = pyhudi.read(spark, path, {**incr, "hoodie.read.timeline.holes.resolution.policy": "BLOCK"}).collect()
    assert [(r["key"], r["_hoodie_commit_time"]) for r in blocked] == [("a", first)]
    assert snapshot(spark, path) == [("a", 1), ("b", 2)] == rs(path)
    with pytest.raises(HudiConfigError, match="first incomplete commit"):
        pyhudi.read(spark, path, {"as.of.instant": second})


def test_mor_clean_keeps_slices_of_a_pending_compaction(spark, tmp_path):
    path = str(tmp_path / "t")
    options = opts("MERGE_ON_READ", **{"hoodie.clean.commits.retained": "1"})
    write(spark, path, [("a", "p1", 0), ("b", "p1", 0)], options)
    write(spark, path, [("a", "p1", 1)], options)
    planned = pyhudi.schedule_compaction(path)
    assert planned
    for i in range(2, 5):
        write(spark, path, [("a", "p1", i)], options)
    table = pyhudi.HudiTable(path)
    for group in table.file_system_view().file_groups():
        assert group.slices[0].base_file is not None  # the slice being compacted is still whole
    assert dict(snapshot(spark, path))["a"] == 4
    pyhudi.compact(spark, path)
    for i in range(5, 8):
        write(spark, path, [("a", "p1", i)], options)
    assert dict(snapshot(spark, path)) == {"a": 7, "b": 0} == dict(rs(path))
    assert pyhudi.HudiTable(path).timeline.completed([CLEAN])


def test_service_cli(spark, tmp_path, capsys):
    path = str(tmp_path / "t")
    options = opts(**{"hoodie.clean.automatic": "false"})
    history = daily(spark, path, 4, options)
    assert cli(["savepoint", "create", "--path", path, "--instant", history[1][0], "--comments", "qa"]) == 0
    assert cli(["savepoint", "list", "--path", path]) == 0
    assert "qa" in capsys.readouterr().out
    assert cli(["clean", "--path", path, "--option", "hoodie.clean.commits.retained=1"]) == 0
    out = capsys.readouterr().out
    assert "deleted" in out
    clean_instant = out.split()[1].rstrip(":")
    assert cli(["show", "commit", clean_instant, "--path", path]) == 0
    assert "Deleted" in capsys.readouterr().out
    assert cli(["show", "timeline", "--path", path]) == 0
    out = capsys.readouterr().out
    assert "savepoint" in out and "clean" in out and "keeps" in out and "retains from" in out
    assert cli(["rollback", "--path", path]) == 0
    assert cli(["restore", "--path", path, "--instant", history[1][0]]) == 0
    assert snapshot(spark, path) == history[1][1] == rs(path)
    assert cli(["savepoint", "delete", "--path", path, "--instant", history[1][0]]) == 0
    assert cli(["restore", "--path", path, "--instant", history[1][0]]) == 2
    assert "no savepoint" in capsys.readouterr().err
    assert cli(["archive", "--path", path]) == 0


def test_archival_beyond_savepoint_keeps_archived_commits_visible(spark, tmp_path):
    path = str(tmp_path / "t")
    options = opts(**{"hoodie.clean.commits.retained": "1", "hoodie.keep.min.commits": "2",
                      "hoodie.keep.max.commits": "3", "hoodie.archive.beyond.savepoint": "true",
                      "hoodie.metadata.compact.max.delta.commits": "1"})  # archival stops at its compaction
    first = write(spark, path, [("k0", "p0", 0)], options)
    pyhudi.create_savepoint(path, first)
    for i in range(1, 7):
        write(spark, path, [(f"k{i}", f"p{i}", i)], options)
    table = pyhudi.HudiTable(path)
    assert ArchivedTimeline(table.storage).completed_writes(), "commits after the savepoint were archived"
    # as Java's getFirstNonSavepointCommit; hudi-rs 0.5 treats the archived commits after the savepointed
    # one as uncommitted (it shows k0, k5, k6), so it is not the oracle here
    assert snapshot(spark, path) == [(f"k{i}", i) for i in range(7)]
    with pytest.raises(HudiRestoreError, match="archived"):
        pyhudi.restore(path, first)


def test_rollback_refuses_what_the_cleaner_took(spark, tmp_path):
    path = str(tmp_path / "t")
    options = opts(**{"hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.clean.fileversions.retained": "1"})
    write(spark, path, [("a", "p1", 1)], options)
    spark_df = spark.createDataFrame([("c", "p1", 1, 2)], SCHEMA)
    pyhudi.write(spark_df, path, options, mode="overwrite")  # replaces a's file group; the clean deletes it
    with pytest.raises(HudiRetentionError, match="replaced"):
        pyhudi.rollback(path)
    write(spark, path, [("c", "p1", 3)], options)  # rewrites c's group; the clean takes the old version
    with pytest.raises(HudiRetentionError, match="was cleaned"):
        pyhudi.rollback(path)
    assert snapshot(spark, path) == [("c", 3)] == rs(path)


def test_a_rollback_killed_midway_is_finished_by_the_next_write(spark, tmp_path, monkeypatch):
    from pyhudi.storage import Storage

    path = str(tmp_path / "t")
    options = opts(**{"hoodie.clean.automatic": "false"})
    write(spark, path, [("a", "p1", 1), ("b", "p2", 1)], options)
    doomed = write(spark, path, [("a", "p1", 2), ("b", "p2", 2)], options)

    class Killed(BaseException):
        pass

    real_delete, deletes = Storage.delete, []

    def dying_delete(self, rel):
        if rel.endswith(".parquet"):
            deletes.append(rel)
            if len(deletes) == 2:
                raise Killed()
        return real_delete(self, rel)

    monkeypatch.setattr(Storage, "delete", dying_delete)
    with pytest.raises(Killed):
        pyhudi.rollback(path)
    monkeypatch.setattr(Storage, "delete", real_delete)
    table = pyhudi.HudiTable(path)
    assert not table.timeline.is_completed(doomed)  # invisible from the first step on
    assert snapshot(spark, path) == [("a", 1), ("b", 1)] == rs(path)
    write(spark, path, [("z", "p3", 9)], options)
    assert snapshot(spark, path) == [("a", 1), ("b", 1), ("z", 9)]
    table = pyhudi.HudiTable(path)
    assert not table.timeline.pending() and not any(i.timestamp == doomed for i in table.timeline.instants())
    assert not [n for n in (tmp_path / "t").rglob(f"*_{doomed}.parquet")]


def test_savepoint_files_on_the_timeline(spark, tmp_path):
    path = str(tmp_path / "t")
    instant = write(spark, path, [("a", "p1", 1)], opts())
    pyhudi.create_savepoint(path)
    assert snapshot(spark, path) == [("a", 1)] == rs(path)
    names = sorted(p.name for p in (tmp_path / "t" / ".hoodie").iterdir() if p.name.startswith(instant))
    assert names == [f"{instant}.commit", f"{instant}.commit.requested", f"{instant}.inflight",
                     f"{instant}.savepoint", f"{instant}.savepoint.inflight"]
    pyhudi.delete_savepoint(path, instant)
    assert not list((tmp_path / "t" / ".hoodie").glob("*.savepoint*"))
