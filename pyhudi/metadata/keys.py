"""Record keys of the metadata table's index partitions, and the file group a key is stored in.

The ``column_stats`` and ``bloom_filters`` partitions key their records by hashes of what they
describe, each encoded in standard Base64 and concatenated:

* a column name and a partition path: XXH64 of the UTF-8 bytes, 8 bytes big-endian, with Hudi's
  seed (the Java int ``0xdabadaba`` widened to a long, hence ``0xFFFFFFFFDABADABA``); the partition
  of a non-partitioned table is ``.``;
* a file name: MD5 of the UTF-8 bytes (16 bytes).

Column statistics: column + partition + file (48 characters), so the statistics of one column
share a prefix; bloom filters: partition + file. A partition's records are spread over its file
groups by Java's ``String.hashCode`` of the whole key (``Math.abs(Math.abs(h) % n)``), the rule
the record index uses for record keys too.
"""

from __future__ import annotations

import base64
import hashlib
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

SEED = 0xFFFFFFFFDABADABA
NON_PARTITIONED = "."


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def column_id(column: str) -> str:
    return _b64(struct.pack(">Q", xxhash.xxh64_intdigest(column.encode("utf-8"), seed=SEED)))


def partition_id(partition: str) -> str:
    return column_id(partition or NON_PARTITIONED)


def file_id(file_name: str) -> str:
    return _b64(hashlib.md5(file_name.encode("utf-8")).digest())


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    return column_id(column) + partition_id(partition) + file_id(file_name)


def bloom_filter_key(partition: str, file_name: str) -> str:
    return partition_id(partition) + file_id(file_name)


def java_string_hash(text: str) -> int:
    """``String.hashCode``: over UTF-16 code units, in 32-bit signed arithmetic."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def file_group_index(key: str, count: int) -> int:
    """``mapRecordKeyToFileGroupIndex``: ``Math.abs(Math.abs(hash) % count)``. Java's ``%`` keeps
    the dividend's sign, so even for the smallest int (whose ``Math.abs`` stays negative) this is
    the remainder of the hash's magnitude."""
    return abs(java_string_hash(key)) % count


def file_group_id(prefix: str, index: int) -> str:
    """``files-0000-0``, ``col-stats-0001-0``, ...: a partition's file group ``index``."""
    return f"{prefix}{index:04d}-0"


def file_group_indexes(keys: pa.Array | pa.ChunkedArray, count: int) -> np.ndarray:
    """:func:`file_group_index` of every key of a string array, vectorized.

    For ASCII keys a UTF-16 code unit is the byte, so ``hashCode`` is the sum of each byte times
    31 to the power of the characters after it, modulo 2**32: one pass of numpy over the array's
    bytes. Keys with other characters (rare) take :func:`java_string_hash`.
    """
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    arr = pc.cast(arr, pa.large_string()) if not pa.types.is_large_string(arr.type) else arr
    n = len(arr)
    if n == 0 or count <= 1:
        return np.zeros(n, dtype=np.int64)
    if arr.null_count:
        raise ValueError("record keys must not be null")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    start, end = int(offsets[0]), int(offsets[-1])
    chars = data[start:end].astype(np.uint64)
    lengths = np.diff(offsets)
    longest = int(lengths.max(initial=0))
    powers = np.ones(max(1, longest), dtype=np.uint64)
    for i in range(1, longest):
        powers[i] = (powers[i - 1] * np.uint64(31)) & np.uint64(0xFFFFFFFF)
    # exponent of each byte: characters after it in its key
    ends = (offsets[1:] - start - 1).astype(np.int32)
    exponent = np.repeat(ends, lengths) - np.arange(end - start, dtype=np.int32)
    terms = (chars * powers[exponent]) & np.uint64(0xFFFFFFFF)
    sums = np.zeros(n, dtype=np.uint64)
    non_ascii = np.zeros(n, dtype=bool)
    filled = np.nonzero(lengths > 0)[0]
    if len(filled):
        firsts = offsets[:-1][filled] - start
        sums[filled] = np.add.reduceat(terms, firsts)  # below 2**40 per byte: no overflow in 64 bits
        non_ascii[filled] = np.maximum.reduceat(chars, firsts) >= 128
    hashes = (sums & np.uint64(0xFFFFFFFF)).astype(np.int64)
    hashes = np.where(hashes >= 1 << 31, hashes - (1 << 32), hashes)
    out = np.abs(hashes) % count
    for i in np.nonzero(non_ascii)[0].tolist():
        out[i] = file_group_index(arr[i].as_py(), count)
    return out
