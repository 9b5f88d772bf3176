"""Hudi's BUCKET index, SIMPLE engine (``hoodie.index.type=BUCKET``), as Hudi 0.14/0.15 computes it.

A bucket-index table has a fixed number of file groups ("buckets") per partition and every record
goes to the bucket its key hashes to, so a writer finds a record's file group without reading any
file. pyhudi must hash exactly like Java or an upsert from either side would put the same key into
a different file group and the table would hold duplicates. The rules, from Hudi 0.14/0.15
(``BucketIdentifier``, ``KeyGenUtils.extractRecordKeysByFields``, ``HoodieSimpleBucketIndex``):

* The input is the record key string (``_hoodie_record_key``), not the source columns.
* Hash values (``BucketIdentifier.getHashKeys``): a key without ``:`` is one value, the whole key
  (commas included). A key with ``:`` is split on ``,`` (Java ``String.split``: trailing empty parts
  dropped); each part is split at its first ``:``; a part without ``:`` is kept as is; a
  ``field:value`` part is kept when ``field`` is one of the hash fields, its value mapped from
  ``__null__`` to null and ``__empty__`` to ``""``. Values keep record-key order, not hash-field order.
* ``hash = java.util.List.hashCode`` of those values (``h = 31*h + (v == null ? 0 : v.hashCode())``
  from 1, ``String.hashCode`` over UTF-16 code units), all in wrapping 32-bit arithmetic.
* ``bucket = (hash & Integer.MAX_VALUE) % numBuckets``.

Consequences worth knowing: a bare key that contains ``:`` (a timestamp, a URL) is parsed as if it
were complex; with no part naming a hash field it hashes to ``[]`` = 1, so all such keys land in
bucket 1 (Hudi issue 8279). Null and empty values hash alike (0). Hudi 1.0 changed the parsing (a
key must contain both ``,`` and ``:`` to be split); this module follows 0.14/0.15 (table version 6).

File groups of bucket ``N`` are named ``{N:08d}`` + the rest of a random UUID + ``-0``; the bucket
is read back as ``Integer.parseInt(fileId.substring(0, 8))``. A partition must hold at most one
file group per bucket, and no file group whose id does not start with a number, or Java writers fail.

Java's hashes themselves, scalar and vectorised with numpy, are :mod:`pyhudi.io.java_hash`; this
module parses keys into the values they hash, and the list hash of many keys is vectorised the
same way (powers of 31 by position, one wrapping cumulative sum).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiConfigError, HudiTableMismatchError
from pyhudi.io.java_hash import java_list_hash, java_string_hashes, pow31

NULL_PLACEHOLDER = "__null__"
EMPTY_PLACEHOLDER = "__empty__"
_PLACEHOLDERS = (NULL_PLACEHOLDER, EMPTY_PLACEHOLDER)

#: Width of the zero-padded bucket number at the start of a file id (``BucketIdentifier.bucketIdStr``).
BUCKET_ID_WIDTH = 8
#: Largest bucket number whose padded form still fits the 8 characters ``bucketIdFromFileId`` reads.
MAX_BUCKET_ID = 10**BUCKET_ID_WIDTH - 1

_INT_MAX = 0x7FFFFFFF
_ROWS_PER_CHUNK = 1 << 16
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------
def check_num_buckets(num_buckets: int) -> int:
    """Validate ``hoodie.bucket.index.num.buckets`` as ``HoodieIndexConfig`` does, plus the file-id limit.

    Java rejects ``<= 0``; more than 10**8 buckets would give ids wider than the 8 characters that
    ``bucketIdFromFileId`` parses back, so those tables could not be re-read by a Java writer.
    """
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, (int, np.integer)):
        raise HudiConfigError(f"hoodie.bucket.index.num.buckets must be an integer, got {num_buckets!r}")
    if not 0 < int(num_buckets) <= MAX_BUCKET_ID + 1:
        raise HudiConfigError(
            f"hoodie.bucket.index.num.buckets must be between 1 and {MAX_BUCKET_ID + 1}, got {num_buckets}")
    return int(num_buckets)


def resolve_hash_fields(hash_fields: Sequence[str] | str | None, record_key_fields: Sequence[str]) -> tuple[str, ...]:
    """The hash fields in effect: the record key fields when unset, else a validated subset of them.

    Mirrors ``HoodieIndexConfig.validateBucketIndexConfig``: an empty/unset option defaults to the
    record key option, and a configured one must name only record key fields. A string is split on
    ``,`` without trimming, like Java (a space is part of the field name and matches nothing).
    """
    rk = tuple(record_key_fields)
    if hash_fields is None or (isinstance(hash_fields, str) and hash_fields == ""):
        return rk
    fields = tuple(hash_fields.split(",")) if isinstance(hash_fields, str) else tuple(hash_fields)
    unknown = [f for f in fields if f not in rk]
    if unknown:
        raise HudiConfigError(
            f"hoodie.bucket.index.hash.field must be a subset of the record key fields {','.join(rk)}; "
            f"not record key fields: {','.join(unknown)}")
    return fields


# ---------------------------------------------------------------------------------------------
# Scalar reference (one key at a time; the specification the vectorised code is tested against)
# ---------------------------------------------------------------------------------------------
def _java_split(text: str, sep: str) -> list[str]:
    """``String.split(sep)`` with limit 0: like ``str.split`` but trailing empty strings are removed."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def hash_values(record_key: str, hash_fields: Sequence[str]) -> list[str | None]:
    """The values ``BucketIdentifier.getHashKeys`` hashes for one record key (Hudi 0.14/0.15)."""
    if ":" not in record_key:
        return [record_key]
    fields = list(hash_fields)
    out: list[str | None] = []
    for part in _java_split(record_key, ","):
        kv = part.split(":", 1)
        if len(kv) == 1:
            out.append(kv[0])
        elif not fields or kv[0] in fields:
            out.append(None if kv[1] == NULL_PLACEHOLDER else "" if kv[1] == EMPTY_PLACEHOLDER else kv[1])
    return out


def bucket_id(
    record_key: str, *, hash_fields: Sequence[str] | None, record_key_fields: Sequence[str], num_buckets: int,
) -> int:
    """Bucket of one record key: ``(List.hashCode(hashValues) & Integer.MAX_VALUE) % numBuckets``."""
    fields = resolve_hash_fields(hash_fields, record_key_fields)
    n = check_num_buckets(num_buckets)
    return (java_list_hash(hash_values(record_key, fields)) & _INT_MAX) % n


# ---------------------------------------------------------------------------------------------
# Vectorised hashing
# ---------------------------------------------------------------------------------------------
def _as_string_array(keys: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(keys.type):
        keys = keys.dictionary_decode()
    if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
        return keys
    if str(keys.type) == "string_view":
        return keys.cast(pa.large_string())
    raise TypeError(f"record keys must be a string array, got {keys.type}")


def _list_offsets(arr: pa.Array) -> np.ndarray:
    offs = np.asarray(arr.offsets)
    return offs.astype(np.int64) - int(offs[0])


def _complex_hashes(keys: pa.Array, hash_fields: Sequence[str]) -> np.ndarray:
    """List hashes of keys that contain ``:`` (parsed as ``f1:v1,f2:v2``), as uint32."""
    m = len(keys)
    parts = pc.split_pattern(keys, ",")
    part_offsets = _list_offsets(parts)
    counts = np.diff(part_offsets)
    flat = parts.flatten()
    n_parts = len(flat)
    row_of_part = np.repeat(np.arange(m, dtype=np.int64), counts)
    # Java's split drops trailing empty parts; every key here has a non-empty part (it has a ':').
    nonempty = np.asarray(pc.binary_length(flat).fill_null(0)) > 0
    index = np.arange(n_parts, dtype=np.int64)
    last_nonempty = np.maximum.reduceat(np.where(nonempty, index, -1), part_offsets[:-1])
    keep = index <= last_nonempty[row_of_part]

    kv = pc.split_pattern(flat, ":", max_splits=1)
    kv_offsets = _list_offsets(kv)
    has_value = np.diff(kv_offsets) == 2
    kv_flat = kv.flatten()
    field = kv_flat.take(pa.array(kv_offsets[:-1]))
    if hash_fields:
        in_fields = np.asarray(pc.is_in(field, value_set=pa.array(list(hash_fields), pa.string())))
        keep &= ~has_value | in_fields
    text = kv_flat.take(pa.array(kv_offsets[:-1] + has_value)).filter(pa.array(keep))
    hashes = java_string_hashes(text)
    placeholder = has_value[keep] & np.asarray(pc.is_in(text, value_set=pa.array(list(_PLACEHOLDERS))))
    hashes[placeholder] = 0  # null and "" both contribute 0 to List.hashCode

    kept_rows = row_of_part[keep]
    k = np.bincount(kept_rows, minlength=m).astype(np.int64)
    first = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(k, out=first[1:])
    exponent = k[kept_rows] - 1 - (np.arange(kept_rows.size, dtype=np.int64) - first[kept_rows])
    powers = pow31(int(k.max()) if m else 0)
    csum = np.zeros(kept_rows.size + 1, dtype=np.uint32)
    np.cumsum(hashes * powers[exponent], dtype=np.uint32, out=csum[1:])
    return powers[k] + (csum[first[1:]] - csum[first[:-1]])


def _list_hashes_chunk(keys: pa.Array, hash_fields: Sequence[str]) -> np.ndarray:
    out = java_string_hashes(keys) + np.uint32(31)  # [key] -> 31*1 + key.hashCode()
    has_colon = np.asarray(pc.match_substring(keys, ":"))
    if has_colon.any():
        rows = np.nonzero(has_colon)[0]
        out[rows] = _complex_hashes(keys.take(pa.array(rows)), hash_fields)
    return out


def list_hashes(keys: pa.Array | pa.ChunkedArray | Sequence[str], hash_fields: Sequence[str]) -> np.ndarray:
    """``List.hashCode(getHashKeys(key))`` of every record key as int32 (vectorised ``hash_values``)."""
    if not isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = pa.array(list(keys), pa.string())
    chunks = keys.chunks if isinstance(keys, pa.ChunkedArray) else [keys]
    pieces: list[np.ndarray] = []
    for chunk in chunks:
        chunk = _as_string_array(chunk)
        if chunk.null_count:
            raise ValueError("record keys must not be null")
        for lo in range(0, len(chunk), _ROWS_PER_CHUNK):
            pieces.append(_list_hashes_chunk(chunk.slice(lo, _ROWS_PER_CHUNK), hash_fields))
    if not pieces:
        return np.zeros(0, dtype=np.int32)
    return np.concatenate(pieces).view(np.int32)


def bucket_ids(
    keys: pa.Array | pa.ChunkedArray | Sequence[str],
    *,
    hash_fields: Sequence[str] | None,
    record_key_fields: Sequence[str],
    num_buckets: int,
) -> np.ndarray:
    """Bucket of every record key (``_hoodie_record_key`` values) as an int32 array, no per-row Python.

    ``hash_fields=None`` means the record key fields (Hudi's default). Keys must not be null.
    """
    fields = resolve_hash_fields(hash_fields, record_key_fields)
    n = check_num_buckets(num_buckets)
    hashes = list_hashes(keys, fields).view(np.uint32)
    return ((hashes & np.uint32(_INT_MAX)) % np.uint32(n)).astype(np.int32)


# ---------------------------------------------------------------------------------------------
# File ids
# ---------------------------------------------------------------------------------------------
def bucket_id_str(bucket: int) -> str:
    """``BucketIdentifier.bucketIdStr``: the bucket number zero-padded to 8 digits."""
    if not 0 <= bucket <= MAX_BUCKET_ID:
        raise ValueError(f"bucket {bucket} is outside 0..{MAX_BUCKET_ID}")
    return f"{bucket:0{BUCKET_ID_WIDTH}d}"


def bucket_file_id_prefix(bucket: int) -> str:
    """``BucketIdentifier.newBucketFileIdPrefix``: a random UUID whose first 8 characters are the bucket."""
    return bucket_id_str(bucket) + str(uuid.uuid4())[BUCKET_ID_WIDTH:]


def bucket_file_id(bucket: int) -> str:
    """A new file id for bucket ``bucket``: the prefix plus ``-0``, as Hudi's insert handles name it.

    Spark upserts/inserts create the file with ``FSUtils.createNewFileId(prefix, 0)``, e.g.
    ``00000003-4b1c-4a8e-9d0f-2a9c3b7e5f61-0``.
    """
    return bucket_file_id_prefix(bucket) + "-0"


def bucket_of_file_id(file_id: str) -> int:
    """``BucketIdentifier.bucketIdFromFileId``: ``Integer.parseInt`` of the first 8 characters.

    Raises ValueError where Java would throw (ids shorter than 8 characters or not starting with a
    number, such as the plain UUID file ids of tables written with another index). Like
    ``parseInt`` a leading sign is accepted; unlike it, only ASCII digits are.
    """
    head = file_id[:BUCKET_ID_WIDTH]
    if len(head) < BUCKET_ID_WIDTH or not _JAVA_INT.fullmatch(head):
        raise ValueError(f"file id {file_id!r} does not start with an 8-digit bucket number")
    return int(head)


def bucket_file_groups(file_ids: Iterable[str], partition: str = "") -> dict[int, str]:
    """bucket -> file id of the latest file groups of one partition (``loadPartitionBucketIdFileIdMapping``).

    ``file_ids`` are the file groups of the partition's latest file slices (replaced groups already
    excluded). A writer reuses the group found for a record's bucket and creates one with
    :func:`bucket_file_id` otherwise. Like Hudi, two groups in one bucket, or a group whose id has
    no bucket number, make the partition unusable for a bucket-index write.
    """
    out: dict[int, str] = {}
    for fid in file_ids:
        try:
            bucket = bucket_of_file_id(fid)
        except ValueError as exc:
            raise HudiTableMismatchError(
                f"partition {partition!r} holds file group {fid}, which is not named after a bucket: the table "
                "was not written with the BUCKET index, which cannot be switched on for existing data") from exc
        if bucket in out and out[bucket] != fid:
            raise HudiTableMismatchError(
                f"partition {partition!r} has several file groups in bucket {bucket}: {out[bucket]} and {fid}")
        out[bucket] = fid
    return out
