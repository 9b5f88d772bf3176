"""File sizing: bulk inserts write files from the data, not from the input's partitioning."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from conftest import hudi_rs_rows, pyhudi_rows
from pyspark.sql import functions as F

import pyhudi
from pyhudi.demo import daily_batch, drone_options, readings
from pyhudi.write import bulk_insert as bulk
from pyhudi.write.bulk_insert import plan_bulk_insert, slot_bounds

NO_BLOOM = {"hoodie.parquet.bloom.filter.enabled": "false"}  # footers then add little to a file's size


def base_files(path: str, partition: str | None = None) -> list:
    return pyhudi.HudiTable(path).file_system_view().latest_base_files(partition)


def key_ranges(path: str, partition: str) -> list[tuple[str, str]]:
    table = pyhudi.HudiTable(path)
    out = []
    for b in base_files(path, partition):
        keys = pq.read_table(table.storage.full(b.path), columns=["_hoodie_record_key"]).column(0)
        out.append((min(keys.to_pylist()), max(keys.to_pylist())))
    return sorted(out)


def test_slots_and_tasks_plan():
    plan = plan_bulk_insert({"a": 10, "b": 5_000_001, "c": 0}, avg_record_size=100, parallelism=2)
    assert plan.slots == {"a": 1, "b": 3} and plan.num_tasks == 4
    assert sum(n for (_, p), n in plan.expected_rows.items() if p == "b") == 5_000_001
    assert len({plan.task_of[("b", s)] for s in range(3)}) == 3  # a large partition keeps its tasks apart
    wide = plan_bulk_insert({"a": 1_000_000}, avg_record_size=10_000, parallelism=2)  # 10 GB: bytes decide
    assert wide.slots["a"] > 1
    bounds = slot_bounds({"b": ["k5", "k1", "k3", "k3", "k9", "k7"]}, {"b": 3})
    assert bounds == {"b": ("k3", "k7")}  # keys of one value never straddle a cut


@pytest.mark.parametrize("mode", ["GLOBAL_SORT", "PARTITION_SORT", "NONE", "PARTITION_PATH_REPARTITION",
                                  "PARTITION_PATH_REPARTITION_AND_SORT"])
def test_many_input_partitions_give_one_file_per_day(spark, tmp_path, mode):
    path = str(tmp_path / "t")
    data = readings(spark, 0, 3, 10).repartition(37)  # like a DataFrame made from pandas: many small pieces
    opts = drone_options(**{"hoodie.bulkinsert.sort.mode": mode, "hoodie.datasource.write.operation": "bulk_insert"})
    pyhudi.write(data, path, opts)
    view = pyhudi.HudiTable(path).file_system_view()
    assert {p: len(view.latest_base_files(p)) for p in view.partitions} == \
        {"2024-01-01": 1, "2024-01-02": 1, "2024-01-03": 1}
    assert len(hudi_rs_rows(path)) == 3 * 14400
    if mode != "NONE" and mode != "PARTITION_PATH_REPARTITION":  # sorted files: keys in order
        table = pyhudi.HudiTable(path)
        keys = pq.read_table(table.storage.full(view.latest_base_files("2024-01-02")[0].path),
                             columns=["_hoodie_record_key"]).column(0).to_pylist()
        assert keys == sorted(keys)


def test_large_partition_is_cut_into_equal_files_under_the_max_size(spark, tmp_path):
    path = str(tmp_path / "t")
    limit = 200_000
    opts = drone_options(**NO_BLOOM, **{"hoodie.parquet.max.file.size": str(limit),
                                        "hoodie.datasource.write.operation": "bulk_insert"})
    pyhudi.write(readings(spark, 0, 1, 100).repartition(7), path, opts)  # one day, 144,000 rows
    sizes = sorted(b.size for b in base_files(path))
    assert len(sizes) >= 3
    assert sizes[-1] <= 1.25 * limit and sizes[-1] / sizes[0] < 1.5, sizes
    ranges = key_ranges(path, "2024-01-01")
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))  # GLOBAL_SORT: disjoint key ranges
    mine = sorted(r["_hoodie_record_key"] for r in pyhudi_rows(spark, path))
    assert len(mine) == 144000 and mine == sorted(r["_hoodie_record_key"] for r in hudi_rs_rows(path))


def test_huge_and_skewed_partitions_are_spread_over_tasks(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(bulk, "MAX_ROWS_PER_TASK", 3000)  # a "huge" partition: more than one task's share
    path = str(tmp_path / "t")
    skewed = readings(spark, 0, 1, 10).unionByName(readings(spark, 1, 1, 10, every_nth_minute=10))  # 91% day 1
    pyhudi.write(skewed.repartition(5), path, drone_options(**{"hoodie.datasource.write.operation": "bulk_insert"}))
    big, small = key_ranges(path, "2024-01-01"), key_ranges(path, "2024-01-02")
    assert len(big) >= 4 and len(small) == 1  # 14,400 records in slots of 3,000; 1,440 in one
    assert all(a[1] < b[0] for a, b in zip(big, big[1:]))  # slots are key ranges
    rows = hudi_rs_rows(path)
    assert len(rows) == 14400 + 1440 and len({r["_hoodie_record_key"] for r in rows}) == len(rows)


def test_upserts_keep_a_day_in_one_file(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = drone_options()
    pyhudi.write(readings(spark, 0, 2, 10).repartition(11), path, {**opts, "hoodie.datasource.write.operation":
                                                                   "bulk_insert"})
    for day in (2, 3):
        pyhudi.write(daily_batch(spark, day, 10).repartition(9), path, {**opts, "hoodie.datasource.write.operation":
                                                                        "upsert"})
    view = pyhudi.HudiTable(path).file_system_view()
    assert all(len(view.latest_base_files(p)) == 1 for p in view.partitions)
    assert len(hudi_rs_rows(path)) == 4 * 14400


@pytest.mark.parametrize("operation", ["bulk_insert", "insert", "upsert"])
def test_empty_and_single_row_inputs(spark, tmp_path, operation):
    path = str(tmp_path / "t")
    opts = drone_options(**{"hoodie.datasource.write.operation": operation})
    one = readings(spark, 0, 1, 1).limit(1)
    res = pyhudi.write(one.where(F.lit(False)), path, opts)
    assert res.stats["files_created"] == 0 and pyhudi_rows(spark, path) == []
    pyhudi.write(one, path, opts)
    assert len(base_files(path)) == 1 and len(hudi_rs_rows(path)) == 1
    pyhudi.write(one.where(F.lit(False)), path, opts)  # an empty write to a table with data
    assert len(pyhudi_rows(spark, path)) == 1 and len(hudi_rs_rows(path)) == 1


def test_new_files_are_sized_from_the_inserts_until_a_commit_tells_the_record_size(spark, tmp_path):
    """No commit wrote more than the small-file limit, so Hudi's record size comes from
    ``hoodie.copyonwrite.record.size.estimate`` (1 KB), many times what these rows take: the
    upsert's tasks measure their inserts instead, unless the user set the estimate."""
    opts = drone_options(**NO_BLOOM, **{"hoodie.parquet.max.file.size": str(1 << 20)})
    counts = {}
    for name, extra in (("measured", {}), ("named", {"hoodie.copyonwrite.record.size.estimate": "1024"})):
        path = str(tmp_path / name)
        pyhudi.write(readings(spark, 0, 1, 10), path, {**opts, **extra, "hoodie.datasource.write.operation":
                                                        "bulk_insert"})
        pyhudi.write(daily_batch(spark, 1, 10).repartition(5), path, {**opts, **extra,
                                                                      "hoodie.datasource.write.operation": "upsert"})
        counts[name] = len(base_files(path, "2024-01-02"))
        assert len(hudi_rs_rows(path)) == 2 * 14400
    assert counts["measured"] == 1  # 14,400 rows take well under 1 MB
    assert counts["named"] == 15  # 14,400 x 1 KB in files of 1 MB: Hudi's sizing from the named estimate
