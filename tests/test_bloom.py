"""Bloom filters: Hudi's exact bytes, membership, and the dynamic filter's row growth."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import unzip_table

from pyhudi.io.bloom import DYNAMIC_V0, SIMPLE, BloomFilter, hash_positions, optimal_size


def java_murmur(data: bytes, seed: int) -> int:
    """Reference: Hudi's MurmurHash.hash written out per byte (signed 32-bit arithmetic)."""
    mask = 0xFFFFFFFF
    m = 0x5BD1E995
    h = (seed ^ len(data)) & mask
    n4 = len(data) // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    left = len(data) - 4 * n4
    if left:
        def sb(b: int) -> int:
            return (b - 256 if b > 127 else b) & mask
        if left >= 3:
            h ^= (sb(data[-3]) << 16) & mask
        if left >= 2:
            h ^= (sb(data[-2]) << 8) & mask
        h ^= sb(data[-1])
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@pytest.mark.parametrize("key", ["a", "ab", "abc", "abcd", "abcde", "20240101_drone001", "ключ", "é", "x" * 37])
def test_positions_match_reference(key):
    nb, vs = 5, 1000003
    h, expected = 0, []
    for _ in range(nb):
        h = java_murmur(key.encode(), h)
        expected.append(abs(h % vs) if h >= 0 else abs(-((-h) % vs)))
    assert hash_positions([key], nb, vs)[0].tolist() == expected


def test_default_sizing():
    assert optimal_size(60000, 1e-9) == (2587966, 30)


def test_interop_footers_decode_and_rebuild_byte_identical(interop_dir, tmp_path):
    checked = 0
    for z in sorted(interop_dir.rglob("*.zip")):
        table = unzip_table(z, tmp_path / z.stem)
        for f in table.rglob("*.parquet"):
            if ".hoodie" in f.parts:
                continue
            md = pq.read_metadata(f).metadata or {}
            if b"org.apache.hudi.bloomfilter" not in md:
                continue
            ftype = md.get(b"hoodie_bloom_filter_type_code", b"SIMPLE").decode()
            bloom = BloomFilter.deserialize(md[b"org.apache.hudi.bloomfilter"], ftype)
            keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0)
            assert bloom.might_contain(keys).all(), f
            assert md[b"hoodie_min_record_key"].decode() == min(keys.to_pylist())
            assert md[b"hoodie_max_record_key"].decode() == max(keys.to_pylist())
            rebuilt = BloomFilter(filter_type=bloom.filter_type)
            rebuilt.add_keys(keys)
            assert rebuilt.serialize() == md[b"org.apache.hudi.bloomfilter"].decode(), f
            checked += 1
    assert checked >= 5


@pytest.mark.parametrize("ftype", [SIMPLE, DYNAMIC_V0])
def test_roundtrip_and_false_positive_rate(ftype):
    keys = pa.array([f"key-{i}" for i in range(5000)])
    bloom = BloomFilter(num_entries=5000, fpp=0.001, filter_type=ftype, max_entries=20000)
    bloom.add_keys(keys)
    again = BloomFilter.deserialize(bloom.serialize(), ftype)
    assert again.might_contain(keys).all()
    absent = pa.array([f"other-{i}" for i in range(20000)])
    assert again.might_contain(absent).mean() < 0.005


def test_dynamic_rows_grow_then_round_robin():
    bloom = BloomFilter(num_entries=10, fpp=0.01, filter_type=DYNAMIC_V0, max_entries=25)
    bloom.add_keys([f"k{i}" for i in range(25)])
    assert len(bloom.rows) == 3
    bloom.add_keys([f"k{i}" for i in range(25, 60)])
    assert len(bloom.rows) == 3  # bounded: 3 rows x 10 >= 25
    assert bloom.might_contain([f"k{i}" for i in range(60)]).all()
    again = BloomFilter.deserialize(bloom.serialize(), DYNAMIC_V0)
    assert again.might_contain([f"k{i}" for i in range(60)]).all()
