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

from pyhudi.io.java_hash import java_string_hash, java_string_hashes

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


def file_group_index(key: str, count: int) -> int:
    """``mapRecordKeyToFileGroupIndex``: ``Math.abs(Math.abs(hash) % count)``. Java's ``%`` keeps
    the dividend's sign, so even for the smallest int (whose ``Math.abs`` stays negative) this is
    the remainder of the hash's magnitude."""
    return abs(java_string_hash(key)) % count


def file_group_id(prefix: str, index: int) -> str:
    """``files-0000-0``, ``col-stats-0001-0``, ...: a partition's file group ``index``."""
    return f"{prefix}{index:04d}-0"


def file_group_indexes(keys: pa.Array | pa.ChunkedArray, count: int) -> np.ndarray:
    """:func:`file_group_index` of every key of a string array, vectorized
    (:func:`~pyhudi.io.java_hash.java_string_hashes`)."""
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    arr = pc.cast(arr, pa.large_string()) if not pa.types.is_large_string(arr.type) else arr
    n = len(arr)
    if n == 0 or count <= 1:
        return np.zeros(n, dtype=np.int64)
    if arr.null_count:
        raise ValueError("record keys must not be null")
    hashes = java_string_hashes(arr).view(np.int32).astype(np.int64)
    return np.abs(hashes) % count
