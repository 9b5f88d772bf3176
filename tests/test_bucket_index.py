"""BUCKET index hashing and file ids must match Hudi 0.14/0.15 bit for bit.

Expected numbers are Java's: ``String.hashCode`` is ``31*h + c`` over UTF-16 code units and
``List.hashCode`` is ``31*h + e.hashCode()`` from 1, worked out by hand below and cross-checked
against a JDK. The vectorised path is checked against the scalar reference on random keys built
from the characters that steer Hudi's key parsing (``,`` ``:`` placeholders, non-BMP characters).
"""

from __future__ import annotations

import random
import re

import numpy as np
import pyarrow as pa
import pytest

from pyhudi.errors import HudiConfigError, HudiTableMismatchError
from pyhudi.index import bucket as B
from pyhudi.io import java_hash as J

# ---------------------------------------------------------------------------------------------
# Java hashes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0),
    ("1", 49),
    ("abc", 97 * 31 * 31 + 98 * 31 + 99),  # 96354
    ("héllo", 103094734),  # é is one code unit, 0xE9
    ("日本", 0x65E5 * 31 + 0x672C),  # 835047
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # a surrogate pair: 1772899
    ("a\U0001F600b", ((97 * 31 + 0xD83D) * 31 + 0xDE00) * 31 + 98),  # 57849694
    ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE: the sign must survive
])
def test_java_string_hash(text: str, expected: int) -> None:
    assert J.java_string_hash(text) == expected


def test_java_list_hash() -> None:
    assert J.java_list_hash([]) == 1
    assert J.java_list_hash(["1"]) == 31 + 49
    assert J.java_list_hash([None]) == 31
    assert J.java_list_hash([""]) == 31
    # ((1*31 + 49)*31 + 0)*31 + 0)*31 + "Alice".hashCode(), wrapped to int
    assert J.java_list_hash(["1", None, "", "Alice"]) == 65733648
    assert J.java_list_hash(["polygenelubricants"]) == -(2**31) + 31


# ---------------------------------------------------------------------------------------------
# Which values are hashed
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "fields", "expected"), [
    ("abc", ["f1"], ["abc"]),                       # no ':' -> the whole key
    ("a,b", ["f1"], ["a,b"]),                       # commas alone do not split
    ("f1:abc", ["f1"], ["abc"]),
    ("f1:abc,f2:bcd", ["f2"], ["bcd"]),
    ("f1:abc,f2:bcd", ["f1", "f2"], ["abc", "bcd"]),
    ("f1:abc,f2:bcd", ["f2", "f1"], ["abc", "bcd"]),  # record-key order, not hash-field order
    ("f1:abc,f2:bcd,efg", ["f1", "f2"], ["abc", "bcd", "efg"]),  # a value's comma makes a bare part (0.14/0.15)
    ("f1:__null__,f2:__empty__", ["f1", "f2"], [None, ""]),
    ("f1:a:b", ["f1"], ["a:b"]),                    # split at the first ':' only
    ("f1:a,,f2:b,,", ["f1", "f2"], ["a", "", "b"]),  # inner empty parts stay, trailing ones go
    ("2024-10-24 10:11:11", ["ts"], []),            # a bare key with ':' loses everything
    ("f1:abc,f2:bcd", [], ["abc", "bcd"]),          # no fields: keep all (Java's fields.isEmpty())
])
def test_hash_values(key: str, fields: list[str], expected: list[str | None]) -> None:
    assert B.hash_values(key, fields) == expected


def test_bucket_id_known_values() -> None:
    def one(key: str, fields: list[str] | None = None, rk: tuple[str, ...] = ("id",), n: int = 256) -> int:
        return B.bucket_id(key, hash_fields=fields, record_key_fields=rk, num_buckets=n)

    assert one("1") == 80
    assert one("abc") == 96385 % 256
    assert one("polygenelubricants") == 31  # (MIN_VALUE + 31) & MAX_VALUE = 31
    assert one("1", n=7) == 80 % 7
    # Complex keys: the field names are not hashed, only the values.
    assert one("id:1,name:Alice", rk=("id", "name")) == (J.java_list_hash(["1", "Alice"]) & 0x7FFFFFFF) % 256
    assert one("id:1,name:Alice", ["name"], rk=("id", "name")) == one("Alice")
    # Hudi 0.14.0 wrote a single complex key field as "id:1", 0.14.1+ as "1": same bucket.
    assert one("id:1") == one("1")
    # Every bare key with ':' and no hash-field prefix hashes to List.hashCode([]) = 1.
    assert {one(f"2024-01-0{d} 10:00:00", n=16) for d in range(1, 10)} == {1}


def test_options_validated_like_hudi() -> None:
    assert B.resolve_hash_fields(None, ["a", "b"]) == ("a", "b")
    assert B.resolve_hash_fields("", ["a", "b"]) == ("a", "b")
    assert B.resolve_hash_fields("b", ["a", "b"]) == ("b",)
    with pytest.raises(HudiConfigError, match="subset"):
        B.resolve_hash_fields("a, b", ["a", "b"])  # Java does not trim: " b" is not a key field
    for bad in (0, -1, 10**8 + 1, True):
        with pytest.raises(HudiConfigError):
            B.check_num_buckets(bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Vectorised == scalar
# ---------------------------------------------------------------------------------------------

_ATOMS = [",", ":", "f1", "f2", "id", "a", "é", "日", "\U0001F600", "\U0010FFFF", "\uFFFF",
          "__null__", "__empty__", "x", "0", " ", "f1:", "f2:", ",,", "::"]


def _random_keys(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_ATOMS) for _ in range(rng.randint(0, 9))) for _ in range(n)]


@pytest.mark.parametrize("fields", [["f1", "f2"], ["f2"], ["f2", "f1"], []])
def test_vectorised_matches_scalar(fields: list[str]) -> None:
    keys = _random_keys(len(fields), 5000)
    expected = np.array([J.java_list_hash(B.hash_values(k, fields)) for k in keys], dtype=np.int32)
    assert np.array_equal(B.list_hashes(pa.array(keys), fields), expected)
    assert np.array_equal(B.list_hashes(pa.array(keys, pa.large_string()), fields), expected)
    if fields:
        got = B.bucket_ids(pa.array(keys), hash_fields=fields, record_key_fields=["f1", "f2"], num_buckets=13)
        assert got.dtype == np.int32
        assert got.tolist() == [
            B.bucket_id(k, hash_fields=fields, record_key_fields=["f1", "f2"], num_buckets=13) for k in keys]


def test_vectorised_uuid_keys_and_array_layouts() -> None:
    import uuid

    keys = [str(uuid.UUID(int=random.Random(7).getrandbits(128) + i)) for i in range(3000)]
    want = [B.bucket_id(k, hash_fields=None, record_key_fields=["id"], num_buckets=256) for k in keys]

    def run(arr: pa.Array | pa.ChunkedArray) -> list[int]:
        return B.bucket_ids(arr, hash_fields=None, record_key_fields=["id"], num_buckets=256).tolist()

    assert run(pa.array(keys)) == want
    assert run(pa.array(keys, pa.large_string())) == want
    assert run(pa.chunked_array([pa.array(keys[:1000]), pa.array(keys[1000:])])) == want
    assert run(pa.array(["pad"] + keys).slice(1)) == want
    assert run(pa.array(keys).dictionary_encode()) == want
    assert B.bucket_ids(keys, hash_fields=None, record_key_fields=["id"], num_buckets=256).tolist() == want


def test_vectorised_edge_inputs() -> None:
    assert B.list_hashes(pa.array([], pa.string()), ["id"]).tolist() == []
    assert B.list_hashes(pa.chunked_array([], pa.string()), ["id"]).tolist() == []
    assert B.list_hashes(pa.array(["", ""]), ["id"]).tolist() == [31, 31]
    assert B.list_hashes(pa.array(["polygenelubricants"]), ["id"]).tolist() == [-(2**31) + 31]
    with pytest.raises(ValueError, match="null"):
        B.list_hashes(pa.array(["a", None]), ["id"])
    with pytest.raises(TypeError):
        B.list_hashes(pa.array([1, 2]), ["id"])


# ---------------------------------------------------------------------------------------------
# File ids
# ---------------------------------------------------------------------------------------------

_FILE_ID = re.compile(r"[0-9]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-0")


@pytest.mark.parametrize("bucket", [0, 1, 7, 255, 12345678, B.MAX_BUCKET_ID])
def test_file_id_round_trip(bucket: int) -> None:
    fid = B.bucket_file_id(bucket)
    assert _FILE_ID.fullmatch(fid)
    assert fid.startswith(f"{bucket:08d}-")
    assert "_" not in fid
    assert B.bucket_of_file_id(fid) == bucket
    assert B.bucket_file_id(bucket) != fid  # random tail: a rewritten bucket gets a new group


def test_bucket_of_file_id_parses_like_integer_parse_int() -> None:
    assert B.bucket_of_file_id("00000003-4b1c-4a8e-9d0f-2a9c3b7e5f61-0") == 3
    assert B.bucket_of_file_id("00000042-0000-0000-0000-000000000000-0") == 42  # Hudi 1.x NBCC ids
    assert B.bucket_of_file_id("+0000001-4b1c") == 1
    for bad in ("a22e8257-e249-45e9-ba46-115bc85adcba-0", "0000001", "0000 001-x", ""):
        with pytest.raises(ValueError):
            B.bucket_of_file_id(bad)
    with pytest.raises(ValueError):
        B.bucket_id_str(-1)
    assert B.bucket_id_str(5) == "00000005"


def test_bucket_file_groups() -> None:
    a, b = B.bucket_file_id(0), B.bucket_file_id(3)
    assert B.bucket_file_groups([a, b, a]) == {0: a, 3: b}
    with pytest.raises(HudiTableMismatchError, match="several file groups in bucket 3"):
        B.bucket_file_groups([b, B.bucket_file_id(3)], "p=1")
    with pytest.raises(HudiTableMismatchError, match="not named after a bucket"):
        B.bucket_file_groups(["a22e8257-e249-45e9-ba46-115bc85adcba-0"])


# ---------------------------------------------------------------------------------------------
# Spark SQL expression
# ---------------------------------------------------------------------------------------------


def test_plan_bucket_index_merges_existing_groups_and_skips_delete_only_buckets() -> None:
    from pyhudi.write.plan import INSERT, UPDATE, HashBucketCount, plan_bucket_index

    counts = [HashBucketCount("p", 1, 5, 0), HashBucketCount("p", 2, 3, 3), HashBucketCount("p", 3, 4, 1)]
    plan, profile, route = plan_bucket_index(
        counts, {("p", "00000001-x-0"): ("p/f.parquet", "001")}, {"p": {1: "00000001-x-0"}},
        B.bucket_file_id_prefix)
    assert [(b.kind, b.file_id_prefix[:8]) for b in plan.buckets] == [(UPDATE, "00000001"), (INSERT, "00000003")]
    assert plan.buckets[0].base_file == "p/f.parquet" and plan.buckets[0].prev_commit == "001"
    assert route == {("p", 1): 0, ("p", 3): 1}  # bucket 2 holds only deletes of unknown keys
    assert profile["p"].inserts == 4 and profile["p"].updates == {"00000001-x-0": 5}
