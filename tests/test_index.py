"""Index types beyond SIMPLE: BLOOM range pruning and checks, BUCKET file groups, index statistics."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import hudi_rs_rows, pyhudi_rows, unzip_table

import pyhudi
from pyhudi.cli import main as cli_main
from pyhudi.demo import daily_batch, drone_options, readings
from pyhudi.index import INDEX_STATS_KEY
from pyhudi.index.bloom_index import FileRange, check_file, range_candidates
from pyhudi.index.bucket import bucket_ids, bucket_of_file_id
from pyhudi.storage import Storage


def _brute_force(keys, parts, files, *, prune, global_index):
    out = set()
    for k, p in zip(keys, parts):
        for f in files:
            if not global_index and f.partition_path != p:
                continue
            if prune and f.min_key is not None and not (f.min_key <= k <= f.max_key):
                continue
            out.add((k, f.partition_path, f.file_id))
    return out


@pytest.mark.parametrize("prune", [True, False])
@pytest.mark.parametrize("global_index", [True, False])
def test_range_candidates_equal_brute_force(prune, global_index):
    rng = random.Random(7)
    files = []
    for i in range(40):  # overlapping, nested and disjoint ranges over two partitions
        lo, hi = sorted(rng.randrange(1000) for _ in range(2))
        files.append(FileRange(f"p{i % 2}", f"f{i}", f"p{i % 2}/f{i}.parquet", f"k{lo:04d}", f"k{hi:04d}"))
    files.append(FileRange("p0", "nostats", "p0/nostats.parquet"))  # no footer range: always a candidate
    keys = [f"k{rng.randrange(1100):04d}" for _ in range(500)]
    parts = [rng.choice(["p0", "p1", "p2"]) for _ in keys]
    got = range_candidates(pa.table({"key": keys, "partition_path": parts}), files, prune_by_ranges=prune,
                           global_index=global_index)
    pairs = set(zip(*[got.column(c).to_pylist() for c in ("key", "partition_path", "file_id")]))
    assert pairs == _brute_force(keys, parts, files, prune=prune, global_index=global_index)
    assert got.num_rows == len(pairs)  # keys of one partition are checked once per file


def test_check_file_finds_stored_keys_and_counts_false_positives(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = drone_options(**{"hoodie.index.bloom.num_entries": "100", "hoodie.index.bloom.fpp": "0.2",
                            "hoodie.bloom.index.filter.type": "SIMPLE"})
    pyhudi.write(readings(spark, 0, 1, 3), path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    table = pyhudi.HudiTable(path)
    base = table.file_system_view().latest_base_files()[0]
    stored = pq.read_table(table.storage.full(base.path), columns=["_hoodie_record_key"]).column(0)
    absent = pa.array([f"x{i:05d}" for i in range(2000)])
    found, positives = check_file(Storage(path), base.path, pa.concat_arrays([stored.combine_chunks(), absent]))
    assert sorted(found.to_pylist()) == sorted(stored.to_pylist())
    assert positives > len(stored)  # a weak filter lets absent keys through; the exact check removes them
    ours = sorted(r["_hoodie_record_key"] for r in pyhudi_rows(spark, path))
    assert len(ours) == 3 * 1440 and sorted(r["_hoodie_record_key"] for r in hudi_rs_rows(path)) == ours


def test_interop_filters_answer_for_their_keys(interop_dir, tmp_path):
    checked = 0
    for z in sorted(interop_dir.rglob("*.zip")):
        table = unzip_table(z, tmp_path / z.stem)
        storage = Storage(str(table))
        for f in table.rglob("*.parquet"):
            if ".hoodie" in f.parts or b"org.apache.hudi.bloomfilter" not in (pq.read_metadata(f).metadata or {}):
                continue
            keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).combine_chunks()
            rel = str(f.relative_to(table))
            found, positives = check_file(storage, rel, keys)
            assert sorted(found.to_pylist()) == sorted(keys.to_pylist()) and positives == len(keys)
            checked += 1
    assert checked >= 5


@pytest.mark.parametrize("local", ["true", "false"])  # one task per partition, or Hudi's distributed stages
def test_bloom_upsert_prunes_by_range_and_records_stats(spark, tmp_path, capsys, local):
    path = str(tmp_path / "t")
    # a globally sorted bulk insert into small files: each holds a narrow, disjoint slice of the keys
    opts = drone_options(**{"hoodie.index.type": "BLOOM", "hoodie.parquet.max.file.size": "40000",
                            "pyhudi.write.partition.local": local})
    pyhudi.write(readings(spark, 0, 2, 10), path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    files_before = len(pyhudi.HudiTable(path).file_system_view().latest_base_files("2024-01-02"))
    assert files_before >= 3
    res = pyhudi.write(daily_batch(spark, 2, 10), path, {**opts, "hoodie.datasource.write.operation": "upsert"})
    index = res.stats["index"]
    assert index["index_type"] == "BLOOM"
    assert index["files_in_partitions"] == files_before
    assert 0 < index["files_after_range_pruning"] <= files_before
    assert index["keys_matched"] == res.stats["updates"] == 1440  # 10% of the previous day
    assert index["false_positives"] == index["bloom_positives"] - index["keys_matched"] >= 0
    timeline = pyhudi.HudiTable(path).timeline
    meta = timeline.commit_metadata(timeline.find(res.instant_time))
    assert json.loads(meta.extra_metadata[INDEX_STATS_KEY])["keys_matched"] == 1440
    assert cli_main(["show", "commit", res.instant_time, "--path", path]) == 0
    out = capsys.readouterr().out
    assert "files after range pruning" in out and "false positives" in out
    assert len(hudi_rs_rows(path)) == 3 * 14400


def test_bucket_index_names_file_groups_after_buckets(spark, tmp_path):
    path = str(tmp_path / "t")
    opts = drone_options(**{"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4"})
    pyhudi.write(readings(spark, 0, 2, 5), path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    res = pyhudi.write(daily_batch(spark, 2, 5), path, {**opts, "hoodie.datasource.write.operation": "upsert"})
    assert res.stats["files_merged"] == 4 and res.stats["index"]["index_type"] == "BUCKET"
    table = pyhudi.HudiTable(path)
    view = table.file_system_view()
    for p in view.partitions:
        files = view.latest_base_files(p)
        assert len(files) == 4
        for b in files:
            keys = pq.read_table(table.storage.full(b.path), columns=["_hoodie_record_key"]).column(0)
            expected = bucket_of_file_id(b.file_id)
            assert set(bucket_ids(keys, hash_fields=None, record_key_fields=["key"], num_buckets=4)) == {expected}
            assert b.file_id.endswith("-0") and b.file_id[:8] == f"{expected:08d}"
    assert len(hudi_rs_rows(path)) == 3 * 7200
