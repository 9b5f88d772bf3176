"""Hudi's bloom filters (``SimpleBloomFilter`` and ``DYNAMIC_V0``), vectorised with numpy.

Every base file carries a filter of its record keys in the parquet footer, so the BLOOM index can
rule files out without reading them. The bytes must match Hudi's exactly (Java ``DataOutput``
big-endian headers, an LSB-first bit vector, Hadoop's MurmurHash variant chained ``nbHash`` times),
or Java and pyhudi would disagree about which keys a file may hold.

Hashing is done for all keys of one byte length at once: the per-word mixing of MurmurHash does not
depend on the seed, so it is computed once per key and reused for every chained hash.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiCorruptFileError

SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
MURMUR = 1
_M = np.uint32(0x5BD1E995)
_CHUNK = 32768


def optimal_size(num_entries: int, fpp: float) -> tuple[int, int]:
    """(vector size in bits, number of hashes) as ``BloomFilterUtils`` computes them."""
    bits = int(math.ceil(num_entries * (-math.log(fpp) / (math.log(2) ** 2))))
    hashes = int(math.ceil(math.log(2) * bits / num_entries))
    return bits, hashes


def _as_binary(keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> pa.Array:
    if not isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = pa.array(keys, pa.string())
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks else pa.array([], pa.string())
    if keys.null_count:
        raise ValueError("bloom filter keys must not be null")
    if pa.types.is_large_string(keys.type) or pa.types.is_large_binary(keys.type):
        keys = keys.cast(pa.large_binary())
    else:
        keys = keys.cast(pa.binary())
    return keys


def _key_bytes(keys: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat byte buffer, start offsets, lengths) of a binary array, without copying per key."""
    offsets_dtype = np.int64 if pa.types.is_large_binary(keys.type) else np.int32
    bufs = keys.buffers()
    offsets = np.frombuffer(bufs[1], dtype=offsets_dtype)[keys.offset:keys.offset + len(keys) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    return data, starts, lengths


def hash_positions(keys: pa.Array | Sequence[str], num_hashes: int, vector_size: int) -> np.ndarray:
    """Bit positions ``(n, num_hashes)`` of every key, as ``HashFunction.hash`` computes them."""
    arr = _as_binary(keys)
    n = len(arr)
    out = np.empty((n, num_hashes), dtype=np.int64)
    if n == 0:
        return out
    data, starts, lengths = _key_bytes(arr)
    for length in np.unique(lengths):
        idx = np.nonzero(lengths == length)[0]
        for lo in range(0, len(idx), _CHUNK):
            part = idx[lo:lo + _CHUNK]
            out[part] = _positions_fixed_length(data, starts[part], int(length), num_hashes, vector_size)
    return out


def _positions_fixed_length(data: np.ndarray, starts: np.ndarray, length: int,
                            num_hashes: int, vector_size: int) -> np.ndarray:
    if length == 0:
        raise ValueError("bloom filter keys must not be empty")
    gather = starts[:, None] + np.arange(length, dtype=np.int64)[None, :]
    mat = data[gather]  # (n, length) uint8
    words = length // 4
    with np.errstate(over="ignore"):
        if words:
            k = np.ascontiguousarray(mat[:, :words * 4]).view("<u4").astype(np.uint32)
            k = k * _M
            k ^= k >> np.uint32(24)
            k = k * _M
        left = length - words * 4
        tail = np.zeros(len(starts), dtype=np.uint32)
        if left:
            signed = mat[:, words * 4:].view(np.int8).astype(np.int32)  # Java bytes are signed
            for j in range(left):  # byte len-left+j is shifted by 8 * (left - 1 - j)
                tail ^= (signed[:, j] << (8 * (left - 1 - j))).astype(np.uint32)
        h = np.zeros(len(starts), dtype=np.uint32)
        out = np.empty((len(starts), num_hashes), dtype=np.int64)
        seed_xor = np.uint32(length)
        for i in range(num_hashes):
            h = h ^ seed_xor
            for j in range(words):
                h = (h * _M) ^ k[:, j]
            if left:
                h = (h ^ tail) * _M
            h ^= h >> np.uint32(13)
            h = h * _M
            h ^= h >> np.uint32(15)
            out[:, i] = np.abs(np.fmod(h.view(np.int32).astype(np.int64), vector_size))
    return out


@dataclass
class _Row:
    """One standard filter: a bit vector of ``vector_size`` bits (bool array while building)."""

    bits: np.ndarray

    def to_bytes(self, num_hashes: int, vector_size: int) -> bytes:
        header = struct.pack(">iibi", -1, num_hashes, MURMUR, vector_size)
        return header + np.packbits(self.bits, bitorder="little").tobytes()


class BloomFilter:
    """A Hudi bloom filter: one row (SIMPLE) or several (DYNAMIC_V0)."""

    def __init__(self, *, num_entries: int = 60000, fpp: float = 1e-9, filter_type: str = DYNAMIC_V0,
                 max_entries: int = 100000) -> None:
        if filter_type not in (SIMPLE, DYNAMIC_V0):
            raise ValueError(f"unknown bloom filter type {filter_type}")
        self.filter_type = filter_type
        self.vector_size, self.num_hashes = optimal_size(num_entries, fpp)
        self.rows_limit = num_entries  # keys per row (``nr``)
        self.max_entries = max_entries
        self.count = 0
        self.rows: list[_Row] = [_Row(np.zeros(self.vector_size, dtype=bool))]

    # -- building ------------------------------------------------------------------------------
    def _row_of(self, ordinals: np.ndarray) -> np.ndarray:
        """Row receiving the key added as number ``ordinal`` (0-based) to a dynamic filter.

        Mirrors ``InternalDynamicBloomFilter``: rows fill up ``nr`` keys at a time until
        ``rows * nr`` reaches the maximum; from then on keys go round-robin, starting at row 0.
        """
        nr = self.rows_limit
        max_rows = max(1, -(-self.max_entries // nr))
        full = max_rows * nr
        rows = np.minimum(ordinals // nr, max_rows - 1)
        over = ordinals >= full
        if over.any():
            rows = np.where(over, np.where(ordinals == full, 0, (ordinals - full - 1) % max_rows), rows)
        return rows

    def add_keys(self, keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> None:
        arr = _as_binary(keys)
        n = len(arr)
        if n == 0:
            return
        positions = hash_positions(arr, self.num_hashes, self.vector_size)
        if self.filter_type == SIMPLE:
            self.rows[0].bits[positions.ravel()] = True
            self.count += n
            return
        rows = self._row_of(np.arange(self.count, self.count + n, dtype=np.int64))
        for r in np.unique(rows):
            while len(self.rows) <= r:
                self.rows.append(_Row(np.zeros(self.vector_size, dtype=bool)))
            self.rows[int(r)].bits[positions[rows == r].ravel()] = True
        self.count += n

    # -- membership ------------------------------------------------------------------------------
    def might_contain(self, keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> np.ndarray:
        """A bool per key: False means certainly absent."""
        positions = hash_positions(keys, self.num_hashes, self.vector_size)
        result = np.zeros(len(positions), dtype=bool)
        for row in self.rows:
            result |= row.bits[positions].all(axis=1)
        return result

    # -- serialisation -------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        if self.filter_type == SIMPLE:
            return self.rows[0].to_bytes(self.num_hashes, self.vector_size)
        nr = self.rows_limit
        current = self.count - (len(self.rows) - 1) * nr if self.count else 0
        header = struct.pack(">iibi", -1, self.num_hashes, MURMUR, self.vector_size)
        header += struct.pack(">iii", nr, current, len(self.rows))
        return header + b"".join(r.to_bytes(self.num_hashes, self.vector_size) for r in self.rows)

    def serialize(self) -> str:
        """The footer value: standard base64 of :meth:`to_bytes`."""
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @classmethod
    def deserialize(cls, text: str | bytes, filter_type: str | None = None) -> BloomFilter:
        """Parse a footer value; ``filter_type`` comes from ``hoodie_bloom_filter_type_code``."""
        try:
            buf = base64.b64decode(text)
        except ValueError as exc:
            raise HudiCorruptFileError(f"bloom filter is not base64: {exc}") from None
        ftype = (filter_type or SIMPLE).upper()
        self = cls.__new__(cls)
        self.filter_type = DYNAMIC_V0 if ftype.startswith("DYNAMIC") else SIMPLE
        try:
            version, nb_hash, hash_type, vector_size = struct.unpack_from(">iibi", buf, 0)
            if version >= 0:  # pre-versioned layout: the first int is nbHash, Jenkins hashing
                raise HudiCorruptFileError("bloom filters with Jenkins hashing are not supported")
            if hash_type != MURMUR:
                raise HudiCorruptFileError(f"bloom filter hash type {hash_type} is not supported")
            self.vector_size, self.num_hashes = vector_size, nb_hash
            nbytes = (vector_size + 7) // 8
            self.rows = []
            if self.filter_type == SIMPLE:
                pos, rows = 13, 1
                self.rows_limit, self.count, self.max_entries = 0, 0, 0
            else:
                self.rows_limit, current, rows = struct.unpack_from(">iii", buf, 13)
                pos = 25
                self.count = (rows - 1) * self.rows_limit + current
                self.max_entries = rows * self.rows_limit
            for _ in range(rows):
                rvs = vector_size
                if self.filter_type != SIMPLE:  # each dynamic row repeats the standard header
                    _, _, _, rvs = struct.unpack_from(">iibi", buf, pos)
                    pos += 13
                raw = np.frombuffer(buf, dtype=np.uint8, count=(rvs + 7) // 8, offset=pos)
                self.rows.append(_Row(np.unpackbits(raw, bitorder="little")[:rvs].astype(bool)))
                pos += nbytes
        except struct.error as exc:
            raise HudiCorruptFileError(f"bloom filter is truncated: {exc}") from None
        if pos != len(buf):
            raise HudiCorruptFileError(f"bloom filter has {len(buf) - pos} unexpected trailing bytes")
        return self


def build_filter(keys: pa.Array | pa.ChunkedArray, *, num_entries: int, fpp: float, filter_type: str,
                 max_entries: int) -> BloomFilter:
    bloom = BloomFilter(num_entries=num_entries, fpp=fpp, filter_type=filter_type, max_entries=max_entries)
    bloom.add_keys(pc.cast(keys, pa.string()) if not isinstance(keys, pa.ChunkedArray) else keys)
    return bloom
