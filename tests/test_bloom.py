"""Bloom filters: Hudi's exact bytes, membership, and the dynamic filter's row growth."""

from __future__ import annotations

import base64
import hashlib

import numpy as np
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


# -- byte-for-byte regression against the original (per-key-gather, int64 ``fmod``) implementation --------------
# The expected digests below were computed with that implementation before hashing was reorganised for speed
# (regrouping by length, uint32 positions, short-circuit probing, packed rows); any change to them means pyhudi
# writes bloom filters Java Hudi would read differently.

_ALPHABET = "abcXYZ019_-:/ .éüßключ中文😀\x7f"


def _regression_keys(kind: str, seed: int, n: int) -> list[str | bytes]:
    """Deterministic keys from sha512: ASCII of 1..40 bytes, non-ASCII text, or raw bytes (many >= 0x80)."""
    out: list[str | bytes] = []
    for i in range(n):
        d = hashlib.sha512(f"{kind}{seed}:{i}".encode()).digest()
        if kind == "ascii":
            out.append("".join(chr(33 + b % 94) for b in d[1:2 + d[0] % 40]))
        elif kind == "unicode":
            out.append("".join(_ALPHABET[b % len(_ALPHABET)] for b in d[1:2 + d[0] % 20]))
        else:
            out.append(d[1:2 + d[0] % 40])
    return out


def _regression_digests() -> dict[str, str]:
    a, u = _regression_keys("ascii", 1, 3000), _regression_keys("unicode", 2, 3000)
    raw = pa.array(_regression_keys("binary", 3, 3000), pa.binary())
    mixed = [k for pair in zip(a, u) for k in pair]
    out: dict[str, str] = {}
    positions, probes = hashlib.sha256(), hashlib.sha256()
    for keys in (pa.array(a), pa.array(u), raw, pa.array(mixed, pa.large_string()).slice(17, 4000)):
        for nb, vs in [(1, 7), (5, 1000003), (30, 2587966), (4, 2**31 + 11)]:
            positions.update(hash_positions(keys, nb, vs).tobytes())
    out["positions"] = positions.hexdigest()
    probe = pa.array(a[:1500] + _regression_keys("ascii", 9, 1500) + u[:500] + _regression_keys("unicode", 8, 500))
    cases: dict[str, tuple[dict, list]] = {
        "simple-default": ({"filter_type": SIMPLE}, [mixed[:2000]]),
        "simple-small": ({"num_entries": 1000, "fpp": 0.01, "filter_type": SIMPLE}, [a, u, raw]),
        "dynamic-default": ({"filter_type": DYNAMIC_V0}, [mixed[:1000]]),
        # 5 rows filled 100 keys at a time, then round-robin; batches straddle the row boundaries
        "dynamic-rows": ({"num_entries": 100, "fpp": 0.001, "filter_type": DYNAMIC_V0, "max_entries": 450},
                         [a[:7], a[7:100], a[100:550], a[550:551], a[551:], u]),
        "dynamic-exact": ({"num_entries": 50, "fpp": 0.01, "filter_type": DYNAMIC_V0, "max_entries": 200},
                          [a[:200], a[200:201], a[201:202], a[202:1000]]),
        "dynamic-one-row": ({"num_entries": 1000, "fpp": 1e-6, "filter_type": DYNAMIC_V0, "max_entries": 500},
                            [u[:999], u[999:2500]]),
        # 20 rows (three bit planes when probing), about two thirds full
        "dynamic-20-rows": ({"num_entries": 20, "fpp": 0.01, "filter_type": DYNAMIC_V0, "max_entries": 390},
                            [u[:150], u[150:450], raw[:150]]),
    }
    for name, (kwargs, batches) in cases.items():
        bloom = BloomFilter(**kwargs)
        for batch in batches:
            bloom.add_keys(batch)
        data = bloom.to_bytes()
        assert base64.b64decode(bloom.serialize()) == data
        out[name] = hashlib.sha256(data).hexdigest()
        again = BloomFilter.deserialize(bloom.serialize(), kwargs["filter_type"])
        assert again.to_bytes() == data
        for which in (bloom, again):
            for size in (len(probe), 40):  # many probes pack dynamic rows into bit planes, few do not
                probes.update(np.packbits(which.might_contain(probe[:size])).tobytes())
    out["probes"] = probes.hexdigest()
    return out


_REGRESSION_SHA256 = {  # computed with the original implementation
    "dynamic-20-rows": "fad5e43cab42acc349f91ae879084fc9b5a19ef00c02ae5a2a52d312195d729c",
    "dynamic-default": "32573a56a112ec1bad89c895b94c150446be29a441b742127039f757b98b0714",
    "dynamic-exact": "57e062d359d46c5ef5244265121678edfd0a2385be4443c435355f32ed5aab78",
    "dynamic-one-row": "548cceac8896f43b1977e67390522eeaa237025a4222899c52c5174dd16a2de5",
    "dynamic-rows": "a985749316c4526b1a667026c57cb2d19b1a7771aaafad75d760053985fab501",
    "positions": "5a137307194700f7ad2d9dc296ae8cfe33aa7c521238685ba0537f6d72c4fc70",
    "probes": "1e167c617a9cff12766e3b38f31565415d174e3f80dbf2a086aefc84df0aa7ce",
    "simple-default": "b58a39fdc6b980044f39802e661d9005a01ca424f792a6a3cd0154000cc4cebb",
    "simple-small": "991095a83957ff9417bc3c836ab24960093b91d2f94022a7da17b88d6d5e7ca0",
}


def test_regression_bytes_and_probes_unchanged():
    assert _regression_digests() == _REGRESSION_SHA256
