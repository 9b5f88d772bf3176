"""HFile version 3, the base-file format of Hudi's metadata table, read and written without a JVM.

An HFile is a sorted map of byte keys to byte values (HBase's storage format). Its layout:

* data blocks of cells, each block ``DATABLK*`` + header + (compressed) cells + checksums;
* the load-on-open section: the root data index (one entry per data block, or per leaf index
  block when the index has several levels), the meta index, and the file info (``PBUF`` + a
  length-delimited protobuf list of name/value pairs);
* a fixed 4,096-byte trailer: ``TRABLK"$``, a length-delimited protobuf with the offsets and
  counts, and the version (minor byte, 3-byte major) in its last 4 bytes.

A block header is 33 bytes: magic (8), on-disk size without header (4), uncompressed size
without header (4), previous block offset (8), checksum type (1), bytes per checksum (4), on-disk
data size with header (4); all big-endian. Checksums (4 bytes per ``bytes per checksum`` chunk)
cover header and on-disk data and follow the data. A cell is key length (4), value length (4),
key, value, and a memstore timestamp (a Hadoop vlong); the key is row length (2), row, family length (1),
family, qualifier, timestamp (8), type (1). Hudi keeps its record key in the row and leaves
family and qualifier empty, so lookups compare rows.

Point and prefix lookups bisect the block index and decode only the blocks that can hold the
key. The facts here were checked on the HFiles HBase wrote for Hudi's tests (apache/hudi-rs,
``crates/core/tests/data/hfile``).
"""

from __future__ import annotations

import bisect
import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiCorruptFileError

HEADER_SIZE = 33
TRAILER_SIZE = 4096
DATA, LEAF_INDEX, META, INTERMEDIATE_INDEX, ROOT_INDEX, FILE_INFO, TRAILER = (
    b"DATABLK*", b"IDXLEAF2", b"METABLKc", b"IDXINTE2", b"IDXROOT2", b"FILEINF2", b'TRABLK"$')
CODEC_GZ, CODEC_NONE = 1, 2
CHECKSUM_NULL, CHECKSUM_CRC32, CHECKSUM_CRC32C = 0, 1, 2
BYTES_PER_CHECKSUM = 16384
KEY_TYPE_PUT = 4
#: HBase's "latest timestamp", which Hudi's cells carry
LATEST_TIMESTAMP = (1 << 63) - 1
PBUF = b"PBUF"


# -- small encodings -------------------------------------------------------------------------
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A protobuf varint at ``pos``: (value, next position)."""
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _put_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_vlong(data: bytes, pos: int) -> tuple[int, int]:
    """Hadoop's WritableUtils vlong (index key lengths)."""
    first = struct.unpack_from(">b", data, pos)[0]
    if first >= -112:
        return first, pos + 1
    size = (-119 - first) if first < -120 else (-111 - first)
    value = int.from_bytes(data[pos + 1:pos + size], "big")
    return (~value if first < -120 else value), pos + size


def _write_vlong(value: int) -> bytes:
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    negative = value < 0
    if negative:
        value = ~value
    body = value.to_bytes((value.bit_length() + 7) // 8, "big")
    marker = (-120 if negative else -112) - len(body)
    return struct.pack(">b", marker) + body


def _fields(data: bytes) -> dict[int, list[int | bytes]]:
    """A protobuf message as field number -> values (varints and length-delimited bytes only)."""
    out: dict[int, list[int | bytes]] = {}
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.setdefault(number, []).append(value)
        elif wire == 2:
            length, pos = _varint(data, pos)
            out.setdefault(number, []).append(data[pos:pos + length])
            pos += length
        else:
            raise HudiCorruptFileError(f"unexpected protobuf wire type {wire} in an HFile")
    return out


def _field_bytes(number: int, value: bytes) -> bytes:
    return _put_varint(number << 3 | 2) + _put_varint(len(value)) + value


def _field_varint(number: int, value: int) -> bytes:
    return _put_varint(number << 3) + _put_varint(value)


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), HBase's default block checksum."""
    return int(google_crc32c.value(data))


def _checksums(kind: int, data: bytes, chunk: int) -> bytes:
    fn = zlib.crc32 if kind == CHECKSUM_CRC32 else crc32c
    return b"".join(struct.pack(">I", fn(data[i:i + chunk]) & 0xFFFFFFFF) for i in range(0, len(data), chunk))


# -- keys --------------------------------------------------------------------------------------
def cell_key(row: bytes) -> bytes:
    """The HBase key of a cell whose row is ``row`` (empty family and qualifier, a Put)."""
    return struct.pack(">H", len(row)) + row + b"\x00" + struct.pack(">QB", LATEST_TIMESTAMP, KEY_TYPE_PUT)


def key_row(key: bytes) -> bytes:
    (length,) = struct.unpack_from(">H", key, 0)
    return key[2:2 + length]


# -- reading -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Trailer:
    file_info_offset: int
    load_on_open_offset: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    comparator: str
    codec: int
    uncompressed_index_size: int = 0
    total_uncompressed_bytes: int = 0
    major_version: int = 3
    minor_version: int = 3


@dataclass(frozen=True)
class _IndexEntry:
    first_row: bytes
    offset: int
    size: int


class HFileReader:
    """An HFile held in memory: its index, file info and meta blocks, and lookups by row."""

    def __init__(self, data: bytes, *, source: str = "HFile", verify: bool = False) -> None:
        self.data = data
        self.source = source
        self.verify = verify
        if len(data) < TRAILER_SIZE or data[-TRAILER_SIZE:-TRAILER_SIZE + 8] != TRAILER:
            raise HudiCorruptFileError(f"{source} is not an HFile (no trailer)")
        self.trailer = self._trailer()
        if self.trailer.major_version != 3:
            raise HudiCorruptFileError(f"{source} is HFile version {self.trailer.major_version}; only 3 is read")
        if self.trailer.codec not in (CODEC_GZ, CODEC_NONE):
            raise HudiCorruptFileError(f"{source} uses compression codec {self.trailer.codec}; "
                                       "pyhudi reads GZ and uncompressed HFiles")
        self._index: list[_IndexEntry] = []
        self.meta_index: dict[str, _IndexEntry] = {}
        self.file_info: dict[str, bytes] = {}
        self._load()
        self._rows = [e.first_row for e in self._index]

    def _trailer(self) -> Trailer:
        t = self.data[-TRAILER_SIZE:]
        minor, major = t[-4], int.from_bytes(t[-3:], "big")
        length, pos = _varint(t, 8)
        f = _fields(t[pos:pos + length])

        def get(n: int, default: int = 0) -> int:
            value = f.get(n, [default])[0]
            return value if isinstance(value, int) else default

        comparator = f.get(11, [b""])[0]
        return Trailer(get(1), get(2), get(5), get(6), get(7), get(8, 1), get(9), get(10),
                       comparator.decode() if isinstance(comparator, bytes) else "", get(12, CODEC_NONE),
                       get(3), get(4), major, minor)

    def _block(self, offset: int) -> tuple[bytes, bytes, int]:
        """(magic, uncompressed payload, on-disk size with header) of the block at ``offset``."""
        d = self.data
        if offset + HEADER_SIZE > len(d):
            raise HudiCorruptFileError(f"{self.source}: block offset {offset} is past the end")
        magic = d[offset:offset + 8]
        on_disk, raw_size, _prev, kind, per_chunk, with_header = struct.unpack_from(">iiqbii", d, offset + 8)
        end = offset + with_header
        if self.verify and kind != CHECKSUM_NULL:
            stored = d[end:offset + HEADER_SIZE + on_disk]
            if _checksums(kind, d[offset:end], per_chunk) != stored:
                raise HudiCorruptFileError(f"{self.source}: checksum mismatch in the block at offset {offset}")
        body = d[offset + HEADER_SIZE:end]
        if self.trailer.codec == CODEC_GZ:  # every block but the trailer is compressed
            try:
                body = zlib.decompress(body, 31)
            except zlib.error as exc:
                raise HudiCorruptFileError(f"{self.source}: cannot decompress the block at {offset}: {exc}") from None
        return magic, body, HEADER_SIZE + on_disk

    def _root_entries(self, body: bytes, count: int, *, row_keys: bool) -> list[_IndexEntry]:
        out, pos = [], 0
        for _ in range(count):
            offset, size = struct.unpack_from(">qi", body, pos)
            length, pos = _read_vlong(body, pos + 12)
            key = body[pos:pos + length]
            pos += length
            out.append(_IndexEntry(key_row(key) if row_keys else key, offset, size))
        return out

    def _nonroot_entries(self, body: bytes) -> list[_IndexEntry]:
        (count,) = struct.unpack_from(">i", body, 0)
        rel = struct.unpack_from(f">{count + 1}i", body, 4)
        base = 4 + 4 * (count + 1)
        out = []
        for i in range(count):
            start = base + rel[i]
            offset, size = struct.unpack_from(">qi", body, start)
            out.append(_IndexEntry(key_row(body[start + 12:base + rel[i + 1]]), offset, size))
        return out

    def _load(self) -> None:
        t = self.trailer
        magic, body, size = self._block(t.load_on_open_offset)
        if magic != ROOT_INDEX:
            raise HudiCorruptFileError(f"{self.source}: expected the root index, found {magic!r}")
        entries = self._root_entries(body, t.data_index_count, row_keys=True)
        for _ in range(t.index_levels - 1):  # leaf (and intermediate) index blocks below the root
            lower: list[_IndexEntry] = []
            for e in entries:
                _m, child, _s = self._block(e.offset)
                lower.extend(self._nonroot_entries(child))
            entries = lower
        self._index = entries
        pos = t.load_on_open_offset + size
        magic, body, size = self._block(pos)
        if magic != ROOT_INDEX:
            raise HudiCorruptFileError(f"{self.source}: expected the meta index, found {magic!r}")
        self.meta_index = {e.first_row.decode(): e
                           for e in self._root_entries(body, t.meta_index_count, row_keys=False)}
        magic, body, _size = self._block(pos + size)
        if magic != FILE_INFO or body[:4] != PBUF:
            raise HudiCorruptFileError(f"{self.source}: no file info block where the trailer says")
        length, p = _varint(body, 4)
        for entry in _fields(body[p:p + length]).get(1, []):
            assert isinstance(entry, bytes)
            pair = _fields(entry)
            name, value = pair.get(1, [b""])[0], pair.get(2, [b""])[0]
            if isinstance(name, bytes) and isinstance(value, bytes):
                self.file_info[name.decode()] = value

    # -- access ---------------------------------------------------------------------------------
    @property
    def entry_count(self) -> int:
        return self.trailer.entry_count

    def meta_block(self, name: str) -> bytes | None:
        entry = self.meta_index.get(name)
        return None if entry is None else self._block(entry.offset)[1]

    def _cells(self, block: int) -> Iterator[tuple[bytes, bytes]]:
        """(row, value) of every cell of data block number ``block``."""
        _m, body, _s = self._block(self._index[block].offset)
        pos, end = 0, len(body)
        while pos + 8 <= end:
            klen, vlen = struct.unpack_from(">ii", body, pos)
            key_at = pos + 8
            (rlen,) = struct.unpack_from(">H", body, key_at)
            value_at = key_at + klen
            yield body[key_at + 2:key_at + 2 + rlen], body[value_at:value_at + vlen]
            pos = value_at + vlen
            pos = _read_vlong(body, pos)[1]  # memstore timestamp

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every (row, value), in key order."""
        for block in range(len(self._index)):
            yield from self._cells(block)

    def _first_block(self, row: bytes) -> int:
        """The first data block that can hold ``row`` or rows after it."""
        # an index key may be a shortened key between two blocks' keys: the block before it holds
        # every row below it, so start one block earlier when equal rows may span blocks
        return max(0, bisect.bisect_left(self._rows, row) - 1)

    def get(self, row: bytes) -> bytes | None:
        """The value of the first cell with ``row`` (None when there is none)."""
        for found in self.get_all(row):
            return found
        return None

    def get_all(self, row: bytes) -> Iterator[bytes]:
        for block in range(self._first_block(row), len(self._index)):
            for key, value in self._cells(block):
                if key == row:
                    yield value
                elif key > row:
                    return

    def get_many(self, rows: Iterable[bytes]) -> dict[bytes, bytes]:
        """The value of each of ``rows`` the file holds (the first cell of the row), reading only
        the data blocks the block index points the rows to: one decompression per block touched,
        however many rows fall into it, and each block's cells walked only up to the last row
        wanted there. Rows past the file's last row (``hfile.LASTKEY``) touch no block. Cells of
        one row are looked for in one block: HBase's and Hudi's writers never split a row's cells
        between blocks."""
        last = self.file_info.get("hfile.LASTKEY") or b""
        last_row: bytes | None = None
        if len(last) >= 2 and 2 + struct.unpack_from(">H", last, 0)[0] <= len(last):
            last_row = key_row(last)
            if self._rows and last_row < self._rows[-1]:
                last_row = None  # (not a key this file could have ended with: not trusted)
        by_block: dict[int, list[bytes]] = {}
        index = self._rows
        for row in rows:
            block = bisect.bisect_right(index, row) - 1
            if block >= 0 and (last_row is None or row <= last_row):
                by_block.setdefault(block, []).append(row)
        out: dict[bytes, bytes] = {}
        for block, wanted in by_block.items():
            _m, body, _s = self._block(self._index[block].offset)
            out.update(_find_rows(body, sorted(set(wanted))))
        return out

    def prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every (row, value) whose row starts with ``prefix``, in key order."""
        for block in range(self._first_block(prefix), len(self._index)):
            for key, value in self._cells(block):
                if key.startswith(prefix):
                    yield key, value
                elif key > prefix:
                    return


def _find_rows(body: bytes, wanted: list[bytes]) -> dict[bytes, bytes]:
    """The first value of each of ``wanted`` (sorted, distinct) in the cells of a data block, which
    are in row order. A cell is key length, value length (4 bytes each), the key (row length, 2
    bytes, and the row first), the value, and a memstore timestamp (vlong). Cells all of one shape
    (a record index's: keys of one length, values of one length) are binary-searched in place;
    others are walked once, up to the first row past the last one wanted."""
    found = _find_fixed(body, wanted)
    return found if found is not None else _walk_rows(body, wanted)


def _find_fixed(body: bytes, wanted: list[bytes]) -> dict[bytes, bytes] | None:
    """:func:`_find_rows` for a block whose cells all have the same key, row and value lengths and
    a one-byte memstore timestamp; None for any other block."""
    if len(body) < 11:
        return None
    klen, vlen, rlen = struct.unpack_from(">iiH", body, 0)
    stride = 8 + klen + vlen + 1
    if rlen == 0 or klen < rlen + 2 or vlen < 0 or stride > len(body) or len(body) % stride \
            or body[stride - 1] >= 0x80:
        return None
    cells = np.frombuffer(body, dtype=np.uint8).reshape(-1, stride)
    if not ((cells[:, :10] == cells[0, :10]).all() and (cells[:, -1] < 0x80).all()
            and (cells[:, 9 + rlen] != 0).all()):  # (numpy's fixed bytes drop trailing NULs)
        return None
    rows = np.ascontiguousarray(cells[:, 10:10 + rlen]).view(f"S{rlen}").ravel()
    probes = [w for w in wanted if len(w) == rlen]  # (every row here has length rlen)
    if not probes:
        return {}
    at = np.searchsorted(rows, np.array(probes, dtype=f"S{rlen}"), side="left").tolist()
    out: dict[bytes, bytes] = {}
    for row, i in zip(probes, at):
        if i < len(rows) and rows[i] == row:
            start = i * stride + 8 + klen
            out[row] = body[start:start + vlen]
    return out


def _walk_rows(body: bytes, wanted: list[bytes]) -> dict[bytes, bytes]:
    """:func:`_find_rows` by one pass over the cells."""
    out: dict[bytes, bytes] = {}
    count = len(wanted)
    i = 0
    target = wanted[0]
    pos, end = 0, len(body)
    unpack = struct.unpack_from
    while pos + 10 <= end:
        klen, vlen, rlen = unpack(">iiH", body, pos)
        row = body[pos + 10:pos + 10 + rlen]
        value_at = pos + 8 + klen
        while row > target:
            i += 1
            if i == count:
                return out
            target = wanted[i]
        if row == target:
            out[row] = body[value_at:value_at + vlen]
            i += 1
            if i == count:
                return out
            target = wanted[i]
        pos = value_at + vlen
        pos = pos + 1 if body[pos] < 0x80 else _read_vlong(body, pos)[1]  # memstore timestamp
    return out


# -- writing -----------------------------------------------------------------------------------
@dataclass
class _BlockWriter:
    codec: int
    checksum: int
    out: bytearray = field(default_factory=bytearray)
    prev_offset: int = -1
    uncompressed_total: int = 0

    def write(self, magic: bytes, payload: bytes, *, compress: bool = True) -> tuple[int, int]:
        """Append a block; (its offset, its on-disk size with header)."""
        body = payload
        if compress and self.codec == CODEC_GZ:
            c = zlib.compressobj(6, zlib.DEFLATED, 31)
            body = c.compress(payload) + c.flush()
        with_header = HEADER_SIZE + len(body)
        chunks = -(-with_header // BYTES_PER_CHECKSUM) if self.checksum != CHECKSUM_NULL else 0
        header = magic + struct.pack(">iiqbii", len(body) + 4 * chunks, len(payload), self.prev_offset,
                                     self.checksum, BYTES_PER_CHECKSUM, with_header)
        offset = len(self.out)
        self.out += header + body
        if chunks:
            self.out += _checksums(self.checksum, bytes(self.out[offset:]), BYTES_PER_CHECKSUM)
        self.prev_offset = offset
        self.uncompressed_total += HEADER_SIZE + len(payload)
        return offset, len(self.out) - offset


def _root_index(entries: list[tuple[bytes, int, int]]) -> bytes:
    return b"".join(struct.pack(">qi", offset, size) + _write_vlong(len(key)) + key for key, offset, size in entries)


@dataclass(frozen=True)
class CellColumns:
    """Cells as two binary arrays, rows ascending: the form :func:`write_hfile` encodes with
    numpy instead of cell by cell (the record index writes hundreds of thousands per file)."""

    rows: pa.Array
    values: pa.Array

    def __len__(self) -> int:
        return len(self.rows)


def as_columns(cells: Iterable[tuple[bytes, bytes]] | CellColumns) -> CellColumns:
    """``cells`` as :class:`CellColumns` (pairs are taken in the order given)."""
    if isinstance(cells, CellColumns):
        return cells
    pairs = list(cells)
    return CellColumns(pa.array([r for r, _v in pairs], pa.binary()), pa.array([v for _r, v in pairs], pa.binary()))


def _binary_parts(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of a binary or string array."""
    arr = array.cast(pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


def _column_cells(cells: CellColumns) -> tuple[np.ndarray, np.ndarray]:
    """(every cell's bytes back to back, the offset of each cell and of the end): per cell the key
    and value lengths, the key of :func:`cell_key`, the value and a zero memstore timestamp, joined
    by pyarrow in one pass."""
    rows, values = cells.rows.cast(pa.large_binary()), cells.values.cast(pa.large_binary())
    r = pc.binary_length(rows).to_numpy(zero_copy_only=False).astype(np.int64)
    if len(r) and int(r.max()) > 0xFFFF:
        raise ValueError(f"an HFile row is at most 65535 bytes; one has {int(r.max())}")
    v = pc.binary_length(values).to_numpy(zero_copy_only=False).astype(np.int64)
    header = np.zeros((len(r), 10), dtype=np.uint8)
    header[:, 0:4] = (r + 12).astype(">i4").view(np.uint8).reshape(-1, 4)
    header[:, 4:8] = v.astype(">i4").view(np.uint8).reshape(-1, 4)
    header[:, 8:10] = r.astype(">u2").view(np.uint8).reshape(-1, 2)
    headers = pa.FixedSizeBinaryArray.from_buffers(pa.binary(10), len(r), [None, pa.py_buffer(header.tobytes())])
    tail = b"\x00" + struct.pack(">QB", LATEST_TIMESTAMP, KEY_TYPE_PUT)
    big = pa.large_binary()
    joined = pc.binary_join_element_wise(headers.cast(big), rows, pa.scalar(tail, big), values,
                                         pa.scalar(b"\x00", big), pa.scalar(b"", big))
    offsets, data = _binary_parts(joined)
    return data[offsets[0]:offsets[-1]], offsets - offsets[0]


def _cell_blocks(cells: Iterable[tuple[bytes, bytes]] | CellColumns,
                 block_size: int) -> Iterator[tuple[bytes, bytes, int, int, int, bytes, bytes]]:
    """Data blocks: (payload, first key, cells, row bytes, value bytes, last row, last key). A
    block is cut before a cell that would overflow it; cells of one row never span blocks."""
    if isinstance(cells, CellColumns):
        if not len(cells):
            return
        data, starts = _column_cells(cells)
        rows = cells.rows.cast(pa.binary())
        row_len, value_len = np.diff(_binary_parts(cells.rows)[0]), np.diff(_binary_parts(cells.values)[0])
        first, n = 0, len(cells)
        while first < n:
            # cells that fit from ``first`` (at least one; rows of equal value are unique here)
            last = max(first + 1, int(np.searchsorted(starts, starts[first] + block_size, side="right")) - 1)
            last = min(last, n)
            head, tail = rows[first].as_py(), rows[last - 1].as_py()
            yield (data[starts[first]:starts[last]].tobytes(), cell_key(head), last - first,
                   int(row_len[first:last].sum()), int(value_len[first:last].sum()), tail, cell_key(tail))
            first = last
        return
    block = bytearray()
    first_key: bytes | None = None
    last_row: bytes | None = None
    last_key = b""
    count = key_bytes = value_bytes = 0
    for row, value in cells:
        if last_row is not None and row < last_row:
            raise ValueError(f"HFile cells must come in ascending row order: {row!r} after {last_row!r}")
        key = cell_key(row)
        cell = struct.pack(">ii", len(key), len(value)) + key + value + b"\x00"
        if block and row != last_row and len(block) + len(cell) > block_size:
            assert first_key is not None
            yield bytes(block), first_key, count, key_bytes, value_bytes, last_row or b"", last_key
            block, first_key, count, key_bytes, value_bytes = bytearray(), None, 0, 0, 0
        if first_key is None:
            first_key = key
        block += cell
        last_row, last_key = row, key
        count += 1
        key_bytes += len(row)
        value_bytes += len(value)
    if block:
        assert first_key is not None
        yield bytes(block), first_key, count, key_bytes, value_bytes, last_row or b"", last_key


def write_hfile(cells: Iterable[tuple[bytes, bytes]] | CellColumns, *, block_size: int = 1024 * 1024,
                codec: str = "GZ", file_info: dict[str, bytes] | None = None,
                meta_blocks: dict[str, bytes] | None = None, checksum: int = CHECKSUM_CRC32C) -> bytes:
    """An HFile of ``cells`` ((row, value) pairs in ascending row order), as Hudi writes them:
    data blocks of at most ``block_size`` uncompressed bytes (a larger cell gets a block of its
    own; cells of one row never span blocks), a one-level root index keyed by each block's first
    key, meta blocks, and the file info Hudi's writer puts (``hfile.LASTKEY`` as row length and
    row, average row and value lengths, creation time, key-value version, plus ``file_info``).
    Checksums are CRC32C as HBase writes them (Hudi 0.14); Hudi 1.x's own writer leaves them
    zero, which readers accept as well."""
    codec_id = {"GZ": CODEC_GZ, "GZIP": CODEC_GZ, "NONE": CODEC_NONE}.get(codec.upper())
    if codec_id is None:
        raise ValueError(f"HFile compression {codec!r} is not supported; use GZ or NONE")
    w = _BlockWriter(codec_id, checksum)
    index: list[tuple[bytes, int, int]] = []
    last_row: bytes | None = None
    last_key = b""
    count = key_bytes = value_bytes = 0
    for payload, first_key, n, rows_bytes, values_bytes, block_last_row, block_last_key in _cell_blocks(
            cells, block_size):
        last_row, last_key = block_last_row, block_last_key
        offset, size = w.write(DATA, payload)
        index.append((first_key, offset, size))
        count += n
        key_bytes += rows_bytes
        value_bytes += values_bytes
    first_offset = index[0][1] if index else -1
    last_offset = index[-1][1] if index else -1
    metas = [(name.encode(), *w.write(META, payload)) for name, payload in sorted((meta_blocks or {}).items())]
    load_on_open = len(w.out)
    root = _root_index(index)
    w.write(ROOT_INDEX, root)
    w.write(ROOT_INDEX, _root_index(metas))
    info = {"hfile.LASTKEY": last_key[:2 + len(last_row or b"")],
            "hfile.CREATE_TIME_TS": struct.pack(">q", int(time.time() * 1000)),
            "hfile.AVG_KEY_LEN": struct.pack(">i", key_bytes // count if count else 0),
            "hfile.AVG_VALUE_LEN": struct.pack(">i", value_bytes // count if count else 0),
            "KEY_VALUE_VERSION": struct.pack(">i", 1), "MAX_MEMSTORE_TS_KEY": struct.pack(">q", 0)}
    info.update(file_info or {})
    pairs = b"".join(_field_bytes(1, _field_bytes(1, k.encode()) + _field_bytes(2, v)) for k, v in sorted(info.items()))
    file_info_offset, _ = w.write(FILE_INFO, PBUF + _put_varint(len(pairs)) + pairs)
    proto = (_field_varint(1, file_info_offset) + _field_varint(2, load_on_open)
             + _field_varint(3, len(root)) + _field_varint(4, w.uncompressed_total)
             + _field_varint(5, len(index)) + _field_varint(6, len(metas)) + _field_varint(7, count)
             + _field_varint(8, 1) + _field_varint(9, first_offset % (1 << 64)) + _field_varint(10, max(last_offset, 0))
             + _field_bytes(11, b"org.apache.hudi.io.storage.HoodieHBaseKVComparator") + _field_varint(12, codec_id))
    trailer = TRAILER + _put_varint(len(proto)) + proto
    trailer += b"\x00" * (TRAILER_SIZE - 4 - len(trailer)) + bytes([3]) + (3).to_bytes(3, "big")
    return bytes(w.out) + trailer
