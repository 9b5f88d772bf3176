"""Hudi's bloom filters (``SimpleBloomFilter`` and ``DYNAMIC_V0``), vectorised with numpy.

Every base file carries a filter of its record keys in the parquet footer, so the BLOOM index can
rule files out without reading them. The bytes must match Hudi's exactly (Java ``DataOutput``
big-endian headers, an LSB-first bit vector, Hadoop's MurmurHash variant chained ``nbHash`` times),
or Java and pyhudi would disagree about which keys a file may hold.

Every write builds a filter over up to a million keys and every index lookup probes one, so the
hashing is laid out for numpy rather than transcribed:

* keys are regrouped (one ``take``) so all keys of one byte length are consecutive; a chunk of them
  is then a zero-copy ``(keys, length)`` byte matrix, and one vector op serves the whole chunk;
* the per-word mixing of MurmurHash does not depend on the seed, so it is done once per key and
  stored as ``(words, keys)``: each chained hash then reads contiguous rows;
* the chain runs in place on uint32 buffers of a chunk small enough to stay in cache, and the
  position ``Math.abs(h % vectorSize)`` is computed as ``|h| mod vectorSize`` in uint32, where
  numpy divides by a scalar with SIMD (an int64 ``fmod`` is ten times slower);
* probing checks hash by hash and drops keys as soon as every row has missed them, so an absent
  key usually costs a couple of hashes instead of ``nbHash``.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiCorruptFileError

SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
MURMUR = 1
_M = np.uint32(0x5BD1E995)
_R13, _R15, _R24 = np.uint32(13), np.uint32(15), np.uint32(24)
# Keys hashed together. Small enough that a chunk's words and hash buffers stay in L2 next to the
# bit vector they index, large enough that numpy's per-call overhead is noise.
_CHUNK = 32768
# While probing, a chunk's dead keys are dropped once fewer than this share of them is still alive:
# compacting costs about one hash of work, so it only pays once many keys stop needing hashes.
_COMPACT = 0.75


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
    out = np.empty((len(arr), num_hashes), dtype=np.int64)
    groups = _group_keys(arr)
    divisor = abs(vector_size)
    for lo, _, mat in groups.chunks():
        chain = _Chain(mat)
        pos = np.empty((num_hashes, len(mat)), dtype=np.uint32)
        for i in range(num_hashes):
            chain.advance()
            chain.positions(divisor, pos[i])
        out[groups.index(np.arange(len(mat)), lo)] = pos.T
    return out


@dataclass
class _Groups:
    """Keys laid out so each group (one byte length, one dynamic row) is consecutive in ``data``.

    Arrow stores a binary array's bytes back to back, so consecutive keys of one length are a
    ``(keys, length)`` matrix: a plain reshape, where gathering bytes per key would cost more than
    the hashing itself.
    """

    data: np.ndarray
    starts: np.ndarray
    order: np.ndarray | None  # input index of each laid-out key; None when the input order was kept
    bounds: list[tuple[int, int, int, int]]  # (first, end, byte length, row) of each group

    def chunks(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """(first key, row, ``(keys, length)`` uint8 matrix) per chunk of at most ``_CHUNK`` keys."""
        for first, end, length, row in self.bounds:
            for lo in range(first, end, _CHUNK):
                hi = min(lo + _CHUNK, end)
                s0 = int(self.starts[lo])
                yield lo, row, self.data[s0:s0 + (hi - lo) * length].reshape(hi - lo, length)

    def index(self, local: np.ndarray, lo: int) -> np.ndarray:
        """Input indices of the laid-out keys ``lo + local``."""
        return lo + local if self.order is None else self.order[lo + local]


def _group_keys(arr: pa.Array, rows: np.ndarray | None = None) -> _Groups:
    """Group keys by byte length (and by ``rows``, the dynamic row each key goes to)."""
    data, starts, lengths = _key_bytes(arr)
    n = len(lengths)
    if n == 0:
        return _Groups(data, starts, None, [])
    shortest, longest = int(lengths.min()), int(lengths.max())
    if shortest == 0:
        raise ValueError("bloom filter keys must not be empty")
    if shortest == longest and (rows is None or rows.min() == rows.max()):
        return _Groups(data, starts, None, [(0, n, longest, 0 if rows is None else int(rows[0]))])
    key = lengths if rows is None else rows * (longest + 1) + lengths
    # a stable sort of 16-bit integers is a radix sort: a few ms for a million keys
    key = key.astype(np.uint16) if int(key.max()) < 1 << 16 else key
    order = np.argsort(key, kind="stable")
    key = key[order]
    data, starts, lengths = _key_bytes(pc.take(arr, order))
    edges = [0, *(np.flatnonzero(key[1:] != key[:-1]) + 1).tolist(), n]
    bounds = [(a, b, int(lengths[a]), 0 if rows is None else int(rows[order[a]])) for a, b in zip(edges, edges[1:])]
    return _Groups(data, starts, order, bounds)


class _Chain:
    """Hadoop's MurmurHash chained over a chunk of equal-length keys, one hash per :meth:`advance`.

    ``HashFunction.hash`` feeds each hash back as the seed of the next, so hashes are computed in
    sequence; every step runs in place on preallocated uint32 buffers, which wrap exactly like
    Java's ``int`` arithmetic.
    """

    def __init__(self, mat: np.ndarray) -> None:
        m, length = mat.shape
        nwords = length // 4
        words = np.ascontiguousarray(mat[:, :4 * nwords]).view("<u4")
        # (words, keys), native order: the chain reads one contiguous row per word
        k = words.T.astype(np.uint32, order="C")
        if nwords:  # the seed-independent half of the per-word mixing, done once per key
            tmp = np.empty_like(k)
            k *= _M
            np.right_shift(k, _R24, out=tmp)
            k ^= tmp
            k *= _M
        self.words = k
        self.tail: np.ndarray | None = None
        left = length - 4 * nwords
        if left:  # Java bytes are signed: each tail byte is sign-extended before it is shifted in
            signed = mat[:, 4 * nwords:].view(np.int8)
            tail = np.zeros(m, dtype=np.uint32)
            for j in range(left):  # byte len-left+j is shifted by 8 * (left - 1 - j)
                tail ^= signed[:, j].astype(np.int32).view(np.uint32) << np.uint32(8 * (left - 1 - j))
            self.tail = tail
        self.length = np.uint32(length & 0xFFFFFFFF)
        self.h = np.zeros(m, dtype=np.uint32)  # the chain starts from seed 0
        self.tmp = np.empty(m, dtype=np.uint32)

    def advance(self) -> None:
        """Replace ``h`` by ``murmur(key, seed=h)``."""
        h, tmp = self.h, self.tmp
        h ^= self.length
        for kj in self.words:
            h *= _M
            h ^= kj
        if self.tail is not None:
            h ^= self.tail
            h *= _M
        np.right_shift(h, _R13, out=tmp)
        h ^= tmp
        h *= _M
        np.right_shift(h, _R15, out=tmp)
        h ^= tmp

    def positions(self, divisor: int, out: np.ndarray) -> None:
        """Write ``Math.abs(h % divisor)`` of the current hashes into ``out`` (uint32).

        That equals ``|h| mod divisor``; ``|h|`` fits uint32 even for ``Integer.MIN_VALUE`` (2**31),
        and a uint32 division by a scalar is vectorised where an int64 ``fmod`` is not.
        """
        np.abs(self.h.view(np.int32), out=out.view(np.int32))
        if divisor > 1 << 31:  # |h| <= 2**31 < divisor: the remainder is |h| itself
            return
        if divisor == 0:  # numpy's fmod by zero gave 0 (Java would throw)
            out[:] = 0
            return
        d = np.uint32(divisor)
        np.floor_divide(out, d, out=self.tmp)
        self.tmp *= d
        out -= self.tmp

    def keep(self, sel: np.ndarray) -> None:
        """Keep only the keys at ``sel`` (their words, tail and hash so far)."""
        self.words = self.words[:, sel]
        if self.tail is not None:
            self.tail = self.tail[sel]
        self.h = self.h[sel]
        self.tmp = np.empty(len(sel), dtype=np.uint32)


def _probe(chain: _Chain, planes: list[np.ndarray], masks: list[int], num_hashes: int,
           divisor: int) -> np.ndarray:
    """Chunk-local indices of the keys whose every hash is set in at least one row.

    ``planes`` are byte vectors whose bits are rows (see :meth:`BloomFilter._planes`) and ``masks``
    the bits each one holds. A key is dropped as soon as every row has missed one of its hashes:
    against a filter that is not full, an absent key is usually out after a couple of hashes.
    """
    m = len(chain.h)
    local = np.arange(m)
    live = np.empty((len(planes), m), dtype=np.uint8)  # per plane: the rows still holding every hash
    live[:] = np.array(masks, dtype=np.uint8)[:, None]
    pos = np.empty(m, dtype=np.uint32)
    got = np.empty(m, dtype=np.uint8)
    alive = live.any(axis=0)
    for i in range(num_hashes):
        chain.advance()
        chain.positions(divisor, pos)
        for p, plane in enumerate(planes):
            np.take(plane, pos, out=got)
            live[p] &= got
        alive = live[0] if len(planes) == 1 else live.any(axis=0)
        count = int(np.count_nonzero(alive))
        if count == 0:
            return local[:0]
        if count < _COMPACT * len(local) and i + 1 < num_hashes:
            sel = np.flatnonzero(alive)
            chain.keep(sel)
            local, live = local[sel], live[:, sel]
            pos, got = pos[:count], got[:count]
            alive = live[0] if len(planes) == 1 else live.any(axis=0)
    return local[np.flatnonzero(alive)]


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
        """Add keys in order (the order decides a dynamic filter's rows); empty or null keys raise."""
        arr = _as_binary(keys)
        n = len(arr)
        if n == 0:
            return
        rows = None
        if self.filter_type != SIMPLE:
            rows = self._row_of(np.arange(self.count, self.count + n, dtype=np.int64))
        groups = _group_keys(arr, rows)  # raises on empty keys before anything is set
        if rows is not None:
            while len(self.rows) <= int(rows.max()):
                self.rows.append(_Row(np.zeros(self.vector_size, dtype=bool)))
        divisor = abs(self.vector_size)
        pos = np.empty((self.num_hashes, min(n, _CHUNK)), dtype=np.uint32)
        for _, row, mat in groups.chunks():  # every chunk goes to a single row
            chain = _Chain(mat)
            block = pos[:, :len(mat)]
            for i in range(self.num_hashes):
                chain.advance()
                chain.positions(divisor, block[i])
            self.rows[row].bits[block] = True
        self.count += n

    # -- membership ------------------------------------------------------------------------------
    def might_contain(self, keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> np.ndarray:
        """A bool per key: False means certainly absent."""
        arr = _as_binary(keys)
        result = np.zeros(len(arr), dtype=bool)
        groups = _group_keys(arr)
        if not self.rows:  # a dynamic footer may declare no rows at all
            return result
        planes, masks = self._planes(len(arr))
        divisor = abs(self.vector_size)
        for lo, _, mat in groups.chunks():
            result[groups.index(_probe(_Chain(mat), planes, masks, self.num_hashes, divisor), lo)] = True
        return result

    def _planes(self, num_keys: int) -> tuple[list[np.ndarray], list[int]]:
        """Byte vectors to probe, each holding up to 8 rows as bits, and the bits each one holds.

        A bool row is already a byte vector holding one row in bit 0. With several rows, packing
        them 8 to a vector lets one gather check a hash against all of them; it costs a pass per
        row over the vector, so it is done only when the probe does more gathers than that.
        """
        views = [row.bits.view(np.uint8) for row in self.rows]
        if (len(views) == 1 or num_keys * self.num_hashes < len(views) * self.vector_size
                or len({len(v) for v in views}) > 1):
            return views, [1] * len(views)
        planes, masks = [], []
        shifted = np.empty_like(views[0])
        for first in range(0, len(views), 8):
            group = views[first:first + 8]
            plane = group[0].copy()
            for bit, view in enumerate(group[1:], 1):
                np.left_shift(view, np.uint8(bit), out=shifted)
                plane |= shifted
            planes.append(plane)
            masks.append((1 << len(group)) - 1)
        return planes, masks

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
