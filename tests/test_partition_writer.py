"""Partition-local writes without Spark: tagging, insert ranges, packing partitions into tasks, bulk-insert batches."""

from __future__ import annotations

import pyarrow as pa
from conftest import hudi_rs_rows

from pyhudi.io.avro_schema import PARTITION_PATH, RECORD_KEY
from pyhudi.write.handles import split_by_partition
from pyhudi.write.partition_writer import _routes_by_key_range, tag
from pyhudi.write.plan import MAX_ROWS_PER_TASK, pack_tasks


def test_tag_gives_one_row_per_file_group_holding_the_key():
    rows = pa.table({RECORD_KEY: ["a", "b", "c"], "v": [1, 2, 3]})
    # "b" is stored twice (inserts without de-duplication put it in two file groups)
    stored = (pa.array(["a", "b", "b"]), pa.array(["f1", "f1", "f2"]))
    out, fids = tag(rows, stored)
    got = sorted(zip(out.column(RECORD_KEY).to_pylist(), out.column("v").to_pylist(), fids.to_pylist()),
                 key=lambda r: (r[0], r[2] or ""))
    assert got == [("a", 1, "f1"), ("b", 2, "f1"), ("b", 2, "f2"), ("c", 3, None)]


def test_tag_of_unique_stored_keys_keeps_rows_in_order():
    rows = pa.table({RECORD_KEY: ["c", "a"]})
    out, fids = tag(rows, (pa.array(["a", "b"]), pa.array(["f1", "f2"])))
    assert out.column(RECORD_KEY).to_pylist() == ["c", "a"] and fids.to_pylist() == [None, "f1"]


def test_insert_ranges_follow_weights_and_never_split_a_key():
    keys = pa.array(["d", "a", "c", "b", "e", "f"])
    routes = _routes_by_key_range(keys, [(0.5, 7), (1.0, 9)])
    assert dict(zip(keys.to_pylist(), routes.tolist())) == {"a": 7, "b": 7, "c": 7, "d": 9, "e": 9, "f": 9}
    dup = pa.array(["a", "b", "b", "b", "c", "d"])  # the cut at 3 would fall between two "b"s
    routes = _routes_by_key_range(dup, [(0.5, 0), (1.0, 1)])
    assert routes.tolist() == [0, 0, 0, 0, 1, 1]


def test_partitions_get_a_task_each_or_are_packed_under_the_row_budget():
    assert pack_tasks({"b": 5, "a": 9}, 2) == {"a": 0, "b": 1}
    counts = {f"p{i:03d}": MAX_ROWS_PER_TASK // 2 for i in range(40)}
    task_of = pack_tasks(counts, 2)
    load: dict[int, int] = {}
    for p, t in task_of.items():
        load[t] = load.get(t, 0) + counts[p]
    assert len(load) == 20 and max(load.values()) <= MAX_ROWS_PER_TASK


def test_upsert_updates_every_copy_of_a_key_inserted_twice(spark, tmp_path):
    """Plain inserts do not de-duplicate against the table: with no small files a second insert of
    a key makes a second copy in a new file group. An upsert then updates both copies, on the
    partition-local path as on the distributed one."""
    import pyhudi

    results = []
    for local in ("true", "false"):
        path = str(tmp_path / f"t_{local}")
        opts = {"hoodie.table.name": "dup", "hoodie.datasource.write.recordkey.field": "key",
                "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
                "hoodie.parquet.small.file.limit": "0", "pyhudi.write.partition.local": local}
        for ts in (1, 2):
            df = spark.createDataFrame([("k", "p", ts, "insert")], "key string, part string, ts long, v string")
            pyhudi.write(df, path, {**opts, "hoodie.datasource.write.operation": "insert"})
        df = spark.createDataFrame([("k", "p", 3, "upsert")], "key string, part string, ts long, v string")
        pyhudi.write(df, path, {**opts, "hoodie.datasource.write.operation": "upsert"})
        rows = sorted((r["key"], r["ts"], r["v"]) for r in pyhudi.read(spark, path).collect())
        assert sorted((r["key"], r["ts"], r["v"]) for r in hudi_rs_rows(path)) == rows
        results.append(rows)
    assert results[0] == results[1] == [("k", 3, "upsert"), ("k", 3, "upsert")]


def test_bulk_insert_batchessplit_by_partition_path():
    mixed = pa.table({PARTITION_PATH: ["d2", "d1", "d2"], "v": [1, 2, 3]})
    got = {p: rows.column("v").to_pylist() for p, rows in split_by_partition(mixed)}
    assert got == {"d2": [1, 3], "d1": [2]}
    # first and last rows agree but the middle one differs: still split
    ends = pa.table({PARTITION_PATH: ["d1", "d2", "d1"], "v": [1, 2, 3]})
    assert {p: rows.num_rows for p, rows in split_by_partition(ends)} == {"d1": 2, "d2": 1}
    one = pa.table({PARTITION_PATH: ["d1", "d1"], "v": [1, 2]})
    assert [(p, rows.num_rows) for p, rows in split_by_partition(one)] == [("d1", 2)]
    assert list(split_by_partition(one.slice(0, 0))) == []


def test_bulk_insert_numbers_records_across_row_groups(spark, tmp_path):
    """A bulk-insert file written in several row groups (1 MB flushes here) numbers its records
    ``instant_task_position`` without gaps or repeats, and the file holds every row."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    import pyhudi

    path = str(tmp_path / "t")
    df = spark.range(0, 40_000, numPartitions=1).select(
        F.format_string("k%06d", "id").alias("key"), F.lit("p").alias("part"), F.col("id").alias("ts"),
        F.repeat(F.lit("x"), 40).alias("pad"))
    res = pyhudi.write(df, path, {
        "hoodie.table.name": "groups", "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.parquet.block.size": str(1 << 20), "hoodie.datasource.write.operation": "bulk_insert"})
    (stat,) = res.write_stats
    meta = pq.ParquetFile(f"{path}/{stat.path}")
    assert meta.metadata.num_row_groups > 3  # 1 MB flushes of ~10 MB as stored
    seqnos = meta.read(columns=["_hoodie_commit_seqno"]).column(0).to_pylist()
    prefix = seqnos[0].rsplit("_", 1)[0]
    assert prefix.startswith(res.instant_time)
    assert seqnos == [f"{prefix}_{i}" for i in range(40_000)]
    rs = hudi_rs_rows(path)  # the independent reader sees every record, numbered the same way
    assert sorted(r["key"] for r in rs) == [f"k{i:06d}" for i in range(40_000)]
    assert sorted(r["_hoodie_commit_seqno"] for r in rs) == sorted(seqnos)
