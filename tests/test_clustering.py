"""Clustering: Hudi's size-based plans, the curves that order records, and a plan's life beside writers."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import hudi_rs_rows

import pyhudi
from pyhudi.actions.ordering import hilbert, ordering, sort_column_problem, z_order
from pyhudi.config import HudiConfig
from pyhudi.plans.clustering import pending_clusterings, read_clustering_plan
from pyhudi.services.clustering import considered_partitions
from pyhudi.timeline.instant import Instant, State

SCHEMA = "key string, part string, ts long, x double, y double"


def options(table_type: str = "COPY_ON_WRITE", **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type, "hoodie.parquet.small.file.limit": "0", **extra}


def small_files(spark, path: str, opts: dict, batches: int = 4) -> None:
    """A table of ``batches`` small files per partition (no small-file handling)."""
    for b in range(batches):
        rows = [(f"k{b}-{i:02d}", f"p{i % 2}", b, float((i * 7) % 20), float((i * 13) % 20)) for i in range(30)]
        pyhudi.write(spark.createDataFrame(rows, SCHEMA), path, opts)


def rows_of(spark, path: str, **kw) -> list[tuple]:
    """(key, commit time, x) through pyhudi; a snapshot is checked against hudi-rs too."""
    ours = sorted((r["key"], r["_hoodie_commit_time"], r["x"]) for r in pyhudi.read(spark, path, **kw).collect())
    if not kw:
        assert ours == sorted((r["key"], r["_hoodie_commit_time"], r["x"]) for r in hudi_rs_rows(path))
    return ours


def test_curves_visit_every_cell_once_and_hilbert_steps_to_neighbours():
    for dims, bits in ((2, 3), (3, 3)):
        cells = np.stack(np.meshgrid(*[np.arange(1 << bits)] * dims)).reshape(dims, -1).astype(np.uint64)
        n = 1 << (bits * dims)
        assert sorted(z_order(cells, bits).tolist()) == list(range(n))
        h = hilbert(cells, bits)
        assert sorted(h.tolist()) == list(range(n))
        path = cells[:, np.argsort(h)].T.astype(int)
        assert all(np.abs(a - b).sum() == 1 for a, b in zip(path[:-1], path[1:]))


def test_ordering_by_columns_keys_and_curves():
    rows = pa.table({"a": [3, 1, None, 2], "b": ["x", "y", "z", "w"], "_hoodie_record_key": ["4", "3", "2", "1"]})
    assert ordering(rows, (), "linear").tolist() == [3, 2, 1, 0]  # by record key
    assert ordering(rows, ("a",), "linear").tolist() == [2, 1, 3, 0]  # nulls first
    # dense ranks (a, b), nulls first: row0 (3, 1), row1 (1, 2), row2 (0, 3), row3 (2, 0), spread over 21 bits
    # each: the interleaved codes start 1011, 0110, 0101, 1000
    assert ordering(rows, ("a", "b"), "z-order").tolist() == [2, 1, 3, 0]
    assert ordering(rows, ("a", "b"), "hilbert").tolist() == [2, 1, 0, 3]
    # a nested field and a dictionary column order as their values do
    nested = rows.append_column("s", pa.array([{"v": 3}, {"v": 1}, None, {"v": 2}])) \
        .set_column(1, "b", pa.array(["x", "y", "z", "w"]).dictionary_encode())
    assert ordering(nested, ("s.v",), "linear").tolist() == [2, 1, 3, 0]
    assert ordering(nested, ("b",), "linear").tolist() == [3, 0, 1, 2]
    assert ordering(nested, ("s.v", "b"), "z-order").tolist() == [2, 1, 3, 0]
    schema = nested.schema
    assert sort_column_problem(schema, "s.v") is None and sort_column_problem(schema, "b") is None
    assert "no order" in sort_column_problem(schema, "s") and "no field" in sort_column_problem(schema, "s.w")
    assert "no such column" in sort_column_problem(schema, "c")


def test_partition_filters():
    parts = [f"2024-01-0{d}" for d in range(1, 8)]
    assert considered_partitions(parts, HudiConfig.of({})) == parts
    recent = HudiConfig.of({"hoodie.clustering.plan.partition.filter.mode": "RECENT_DAYS",
                            "hoodie.clustering.plan.strategy.daybased.lookback.partitions": "2",
                            "hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions": "1"})
    assert considered_partitions(parts, recent) == ["2024-01-05", "2024-01-06"]
    selected = HudiConfig.of({"hoodie.clustering.plan.partition.filter.mode": "SELECTED_PARTITIONS",
                              "hoodie.clustering.plan.strategy.cluster.begin.partition": "2024-01-03",
                              "hoodie.clustering.plan.strategy.cluster.end.partition": "2024-01-04"})
    assert considered_partitions(parts, selected) == ["2024-01-03", "2024-01-04"]
    regex = HudiConfig.of({"hoodie.clustering.plan.strategy.partition.regex.pattern": r".*-0[12]"})
    assert considered_partitions(parts, regex) == ["2024-01-01", "2024-01-02"]
    with pytest.raises(pyhudi.HudiConfigError):
        HudiConfig.of({"hoodie.clustering.plan.partition.filter.mode": "DAY_ROLLING"}).get(
            pyhudi.config.CLUSTERING_PARTITION_FILTER_MODE)


def test_plan_packs_groups_by_size(spark, tmp_path):
    path = str(tmp_path / "t")
    small_files(spark, path, options())
    table = pyhudi.HudiTable(path)
    sizes = sorted(b.size for b in table.file_system_view().latest_base_files())
    # groups of at most two files' bytes: 4 files per partition make 2 groups each, one output file each
    per_group = str(sizes[-1] * 2 + 1)
    instant = pyhudi.schedule_clustering(path, {"hoodie.clustering.plan.strategy.max.bytes.per.group": per_group,
                                                "hoodie.clustering.plan.strategy.max.num.groups": "3",
                                                "hoodie.clustering.plan.strategy.sort.columns": "x"})
    plan = read_clustering_plan(pyhudi.HudiTable(path).timeline, instant)
    assert plan is not None and len(plan.groups) == 3 and plan.sort_columns == ("x",)
    assert all(len(g.slices) == 2 and g.num_output_file_groups == 1 for g in plan.groups)
    with pytest.raises(pyhudi.HudiConfigError, match="sort.columns"):
        pyhudi.schedule_clustering(path, {"hoodie.clustering.plan.strategy.sort.columns": "nope"})
    # the groups of a pending plan are not planned again: the two files left make the next plan
    again = pyhudi.schedule_clustering(path, {"hoodie.clustering.plan.strategy.single.group.clustering.enabled":
                                              "false"})
    second = read_clustering_plan(pyhudi.HudiTable(path).timeline, again)
    assert second is not None and len(second.file_groups()) == 2
    assert not plan.file_groups() & second.file_groups()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_clustering_beside_writers(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    opts = options(table_type, **{"hoodie.cleaner.policy.failed.writes": "EAGER"})
    small_files(spark, path, opts)
    pyhudi.write(spark.createDataFrame([("k0-01", "p1", 9, 1.0, 1.0)], SCHEMA), path, opts)  # a log file on MOR
    before = rows_of(spark, path)
    last_write = pyhudi.HudiTable(path).timeline.completed_writes()[-1].timestamp
    instant = pyhudi.schedule_clustering(path, {"hoodie.clustering.plan.strategy.sort.columns": "x,y",
                                                "hoodie.layout.optimize.strategy": "z-order"})
    assert instant is not None
    # a write changing a clustered file group is refused before it writes a file; inserts go on
    with pytest.raises(pyhudi.HudiClusteringUpdateError, match=instant) as refused:
        pyhudi.write(spark.createDataFrame([("k1-01", "p1", 10, 5.0, 5.0)], SCHEMA), path, opts)
    assert "nothing was written" in str(refused.value)
    assert rows_of(spark, path) == before
    pyhudi.write(spark.createDataFrame([("new", "p0", 11, 2.0, 2.0)], SCHEMA), path, opts)
    before = rows_of(spark, path)
    table = pyhudi.HudiTable(path)
    assert [i.timestamp for i, _ in pending_clusterings(table.timeline)] == [instant], \
        "a writer's rollback of failed writes leaves the plan"
    done = pyhudi.cluster(spark, path, {"hoodie.layout.optimize.strategy": "z-order"})
    assert [d["instant"] for d in done] == [instant]
    after = rows_of(spark, path)
    assert after == before, "same records, same commit times"
    assert sorted((r["key"], r["_hoodie_commit_time"], r["x"]) for r in hudi_rs_rows(path)) == after
    table = pyhudi.HudiTable(path)
    assert len(table.file_system_view().latest_base_files()) < 6
    meta = table.timeline.commit_metadata(next(i for i in table.timeline.completed_writes() if i.timestamp == instant))
    assert meta.operation_type == "CLUSTER" and sum(map(len, meta.partition_to_replace_file_ids.values())) >= 8
    pull = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": last_write}
    assert [r[0] for r in rows_of(spark, path, options=pull)] == ["new"], "clustered records are not new"
    pyhudi.write(spark.createDataFrame([("k1-01", "p1", 12, 6.0, 6.0)], SCHEMA), path, opts)  # allowed again
    assert [r[2] for r in rows_of(spark, path) if r[0] == "k1-01"] == [6.0]
    cli = subprocess.run([sys.executable, "-m", "pyhudi.cli", "clustering", "show", "--path", path],
                         capture_output=True, text=True, check=True).stdout
    assert instant in cli and "COMPLETED" in cli


def test_a_dead_clustering_is_run_again_and_a_completed_one_rolled_back(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    opts = options()
    small_files(spark, path, opts, batches=3)
    before = rows_of(spark, path)
    instant = pyhudi.schedule_clustering(path)

    def died(*_args, **_kw):
        raise RuntimeError("executor lost")

    monkeypatch.setattr("pyhudi.commit.point.CommitPoint.complete", died)
    with pytest.raises(RuntimeError):
        pyhudi.cluster(spark, path, {"hoodie.client.heartbeat.interval_in_ms": "100"}, instant=instant)
    monkeypatch.undo()
    assert rows_of(spark, path) == before  # the attempt's files are invisible
    import time

    time.sleep(0.5)  # its heartbeat expires
    done = pyhudi.cluster(spark, path, {"hoodie.client.heartbeat.interval_in_ms": "100"})
    assert [d["instant"] for d in done] == [instant] and rows_of(spark, path) == before
    pyhudi.rollback(path, instant)
    assert rows_of(spark, path) == before
    assert len(pyhudi.HudiTable(path).file_system_view().latest_base_files()) == 6
    with pytest.raises(pyhudi.HudiUnsupportedError, match="BUCKET"):
        pyhudi.schedule_clustering(path, {"hoodie.index.type": "BUCKET"})


def test_a_write_that_planned_before_the_clustering_is_refused_at_commit(spark, tmp_path, monkeypatch):
    """The plan is scheduled while an update writes its files: the update may not commit into groups the
    clustering rewrites (it would be lost when the clustering replaces them)."""
    from test_concurrency import _with_other_write_before_commit

    path = str(tmp_path / "t")
    opts = options()
    small_files(spark, path, opts, batches=2)
    before = rows_of(spark, path)
    planned: list[str | None] = []
    _with_other_write_before_commit(monkeypatch, lambda: planned.append(pyhudi.schedule_clustering(path)))
    with pytest.raises(pyhudi.HudiClusteringUpdateError):
        pyhudi.write(spark.createDataFrame([("k0-01", "p1", 5, 9.0, 9.0)], SCHEMA), path, opts)
    monkeypatch.undo()
    assert planned[0] is not None and rows_of(spark, path) == before
    pyhudi.cluster(spark, path)
    assert rows_of(spark, path) == before


def test_an_update_is_refused_when_a_clustering_completed_while_it_wrote(spark, tmp_path, monkeypatch):
    """Single-writer mode: the clustering is a table service that runs beside the write; the write may
    not commit into a file group the clustering retired meanwhile (its update would be lost)."""
    from test_concurrency import _with_other_write_before_commit

    path = str(tmp_path / "t")
    opts = options()
    small_files(spark, path, opts, batches=2)
    before = rows_of(spark, path)
    _with_other_write_before_commit(monkeypatch, lambda: pyhudi.cluster(spark, path))
    with pytest.raises(pyhudi.HudiClusteringUpdateError):
        pyhudi.write(spark.createDataFrame([("k0-01", "p1", 5, 9.0, 9.0)], SCHEMA), path, opts)
    monkeypatch.undo()
    assert rows_of(spark, path) == before
    pyhudi.write(spark.createDataFrame([("k0-01", "p1", 5, 9.0, 9.0)], SCHEMA), path, opts)
    assert [r[2] for r in rows_of(spark, path) if r[0] == "k0-01"] == [9.0]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_allowed_updates_make_the_clustering_fail_and_lose_nothing(spark, tmp_path, monkeypatch, table_type):
    """Hudi's allow update strategy: writes update groups a plan rewrites; the clustering, which would
    drop their changes, fails at its commit and is rolled back, or the write rolls the plan back."""
    import pyhudi.spark.planned_write as planned_write

    path = str(tmp_path / "t")
    opts = options(table_type, **{"hoodie.clustering.updates.strategy": "SparkAllowUpdateStrategy"})
    small_files(spark, path, opts, batches=2)
    instant = pyhudi.schedule_clustering(path)
    pyhudi.write(spark.createDataFrame([("k0-01", "p1", 5, 9.0, 9.0)], SCHEMA), path, opts)
    expected = rows_of(spark, path)
    assert [r[2] for r in expected if r[0] == "k0-01"] == [9.0]
    with pytest.raises(pyhudi.HudiWriteConflictError, match=instant):
        pyhudi.cluster(spark, path, opts, instant=instant)
    assert rows_of(spark, path) == expected and not pending_clusterings(pyhudi.HudiTable(path).timeline)

    # planned while an update was under way (it had not written a file yet): the plan names the write
    # as pending, so the clustering still sees it
    planned: list[str | None] = []
    guard = planned_write.guard_updates

    def plan_first(*args, **kw):
        planned.append(pyhudi.schedule_clustering(path))
        return guard(*args, **kw)

    monkeypatch.setattr(planned_write, "guard_updates", plan_first)
    pyhudi.write(spark.createDataFrame([("k1-01", "p1", 6, 8.0, 8.0)], SCHEMA), path,
                 {**opts, "pyhudi.write.partition.local": "false"})  # the distributed path guards
    assert planned and planned[0] is not None
    monkeypatch.undo()
    expected = rows_of(spark, path)
    with pytest.raises(pyhudi.HudiWriteConflictError, match="k1|wrote"):
        pyhudi.cluster(spark, path, opts, instant=planned[0])
    assert rows_of(spark, path) == expected

    # the same with a plan as Apache Hudi writes it (no record of the writes under way): a write that
    # completed after the plan file was written still conflicts
    def hudi_plan_first(*args, **kw):
        made = pyhudi.schedule_clustering(path)
        assert made is not None
        table = pyhudi.HudiTable(path)
        bare = dataclasses.replace(read_clustering_plan(table.timeline, made), last_completed=None)
        requested = Instant(made, State.REQUESTED, "replacecommit")
        table.storage.write_bytes(table.timeline.path_of(requested), bare.to_bytes(table.storage.uri("")))
        planned.append(made)
        return guard(*args, **kw)

    monkeypatch.setattr(planned_write, "guard_updates", hudi_plan_first)
    pyhudi.write(spark.createDataFrame([("k1-02", "p0", 8, 4.0, 4.0)], SCHEMA), path,
                 {**opts, "pyhudi.write.partition.local": "false"})
    monkeypatch.undo()
    assert read_clustering_plan(pyhudi.HudiTable(path).timeline, planned[-1]).last_completed is None
    expected = rows_of(spark, path)
    with pytest.raises(pyhudi.HudiWriteConflictError):
        pyhudi.cluster(spark, path, opts, instant=planned[-1])
    assert rows_of(spark, path) == expected

    # hoodie.clustering.rollback.pending.replacecommit.on.conflict: the update rolls the plan back
    again = pyhudi.schedule_clustering(path)
    assert again is not None
    pyhudi.write(spark.createDataFrame([("k0-02", "p0", 7, 7.0, 7.0)], SCHEMA), path,
                 {**opts, "hoodie.clustering.rollback.pending.replacecommit.on.conflict": "true"})
    assert not pending_clusterings(pyhudi.HudiTable(path).timeline)
    expected = rows_of(spark, path)
    assert [d["instant"] for d in pyhudi.cluster(spark, path, opts)]
    assert rows_of(spark, path) == expected
    assert len(pyhudi.HudiTable(path).file_system_view().latest_base_files()) == 2


def test_inline_clustering_after_every_few_writes(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = options(**{"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "2"})
    first = pyhudi.write(spark.createDataFrame([("a", "p0", 1, 1.0, 1.0)], SCHEMA), path, opts)
    assert "clusterings" not in first.stats
    second = pyhudi.write(spark.createDataFrame([("b", "p0", 2, 2.0, 2.0)], SCHEMA), path, opts)
    table = pyhudi.HudiTable(path)
    assert second.stats["clusterings"] and table.timeline.is_completed(second.stats["clusterings"][0])
    assert len(table.file_system_view().latest_base_files()) == 1
    assert rows_of(spark, path) == sorted((r["key"], r["_hoodie_commit_time"], r["x"]) for r in hudi_rs_rows(path))
    assert [r[0] for r in rows_of(spark, path)] == ["a", "b"]


@pytest.mark.parametrize("table_type,columns,strategy", [
    ("COPY_ON_WRITE", "", "linear"),
    ("MERGE_ON_READ", "x,y", "linear"),
    ("COPY_ON_WRITE", "x,y", "z-order"),
    ("MERGE_ON_READ", "y,x", "hilbert"),
])
def test_large_groups_are_ordered_by_spark_in_the_same_order(spark, tmp_path, monkeypatch, table_type, columns,
                                                              strategy):
    """Groups over IN_TASK_GROUP_BYTES (here: all) are range-partitioned and sorted by Spark into
    their planned number of files: the files of a group, in order, hold the group's records in
    the order one task would give them, with the same records and commit times."""
    path = str(tmp_path / "t")
    opts = options(table_type)
    small_files(spark, path, opts)
    # updates (log files on MOR) and a delete
    pyhudi.write(spark.createDataFrame([("k0-01", "p1", 9, 1.5, 19.0), ("k2-04", "p0", 9, 0.0, 0.0)], SCHEMA), path,
                 opts)
    pyhudi.write(spark.createDataFrame([("k1-03", "p1", 9, 0.0, 0.0)], SCHEMA), path,
                 {**opts, "hoodie.datasource.write.operation": "delete"})
    before = rows_of(spark, path)
    cluster_opts = {"hoodie.clustering.plan.strategy.sort.columns": columns,
                    "hoodie.layout.optimize.strategy": strategy,
                    "hoodie.clustering.plan.strategy.target.file.max.bytes": "600000"}
    instant = pyhudi.schedule_clustering(path, cluster_opts)
    plan = read_clustering_plan(pyhudi.HudiTable(path).timeline, instant)
    assert sorted(g.num_output_file_groups for g in plan.groups) == [3, 3]
    monkeypatch.setattr("pyhudi.spark.clustering_job.IN_TASK_GROUP_BYTES", 0)
    (done,) = pyhudi.cluster(spark, path, cluster_opts, instant=instant)
    assert done["output_files"] == 6
    assert rows_of(spark, path) == before
    table = pyhudi.HudiTable(path)
    sort = tuple(c for c in columns.split(",") if c)
    for partition in ("p0", "p1"):
        bases = table.file_system_view().latest_base_files(partition)
        files = [pq.read_table(table.storage.full(b.path)) for b in bases]
        assert all(f.num_rows for f in files)
        whole = pa.concat_tables(files)
        expected = whole.take(ordering(whole, sort, strategy)).column("_hoodie_record_key").to_pylist()
        position = {k: i for i, k in enumerate(expected)}
        files.sort(key=lambda f: position[f.column("_hoodie_record_key")[0].as_py()])
        assert [k for f in files for k in f.column("_hoodie_record_key").to_pylist()] == expected


@pytest.mark.parametrize("in_task_bytes", [256 << 20, 0])
def test_a_table_without_meta_fields_keeps_every_row(spark, tmp_path, monkeypatch, in_task_bytes):
    """Its files store no partition path: the rewritten rows take their group's."""
    path = str(tmp_path / "t")
    opts = options(**{"hoodie.populate.meta.fields": "false", "hoodie.datasource.write.operation": "insert"})
    small_files(spark, path, opts, batches=3)
    before = sorted((r["key"], r["x"]) for r in pyhudi.read(spark, path).collect())
    monkeypatch.setattr("pyhudi.spark.clustering_job.IN_TASK_GROUP_BYTES", in_task_bytes)
    (done,) = pyhudi.cluster(spark, path, {"hoodie.clustering.plan.strategy.sort.columns": "x"})
    assert done["records"] == len(before) == 90 and done["output_files"] == 2
    assert sorted((r["key"], r["x"]) for r in pyhudi.read(spark, path).collect()) == before
    assert sorted((r["key"], r["x"]) for r in hudi_rs_rows(path)) == before
