"""Java's ``String.hashCode`` and ``List.hashCode``, bit for bit, one value at a time or vectorised.

Two parts of a Hudi table are laid out by these hashes: the BUCKET index puts a record in the
bucket of ``List.hashCode`` of its key values (:mod:`pyhudi.index.bucket`), and the metadata table
spreads record-index keys over file groups by ``String.hashCode`` of the key
(:mod:`pyhudi.metadata.keys`). Writers in Java and in pyhudi must agree on every bit, so the
arithmetic is written once, here, in the io layer both of them stand on.

The scalar functions are the specification; the vectorised :func:`java_string_hashes` is tested
against them. ``String.hashCode`` of a string of UTF-16 code units ``c`` is
``sum(c[j] * 31**(len-1-j))`` modulo 2**32, so every code unit is multiplied by a power of 31
looked up by its distance to the end of its string and the products are summed per string with
one wrapping cumulative sum (numpy's uint32 arithmetic wraps like Java's int).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa

__all__ = ["java_list_hash", "java_string_hash", "java_string_hashes", "pow31"]

_MASK32 = 0xFFFFFFFF
_ROWS_PER_SLICE = 1 << 16


def _to_int32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def java_string_hash(value: str) -> int:
    """``java.lang.String.hashCode``: ``31*h + c`` over UTF-16 code units, as a signed 32-bit int.

    Characters outside the BMP count as two code units (a surrogate pair), as in Java.
    """
    data = value.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
    return _to_int32(h)


def java_list_hash(values: Iterable[str | None]) -> int:
    """``java.util.List.hashCode`` of a list of strings (``null`` contributes 0), signed 32-bit."""
    h = 1
    for v in values:
        h = (31 * h + (0 if v is None else java_string_hash(v))) & _MASK32
    return _to_int32(h)


def pow31(n: int) -> np.ndarray:
    """``31**i mod 2**32`` for ``i`` in ``0..n`` (uint32; numpy's uint32 products wrap like Java ints)."""
    out = np.ones(n + 1, dtype=np.uint32)
    if n:
        out[1:] = np.cumprod(np.full(n, 31, dtype=np.uint32), dtype=np.uint32)
    return out


def _utf16_units(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-16 code units as uint32, per-string offsets into them) of a string array.

    ASCII data is used as is. Otherwise the whole UTF-8 buffer is transcoded in one C call (valid
    UTF-8 strings concatenate to valid UTF-8), and each string's offset in code units is the count
    of UTF-8 lead bytes before it plus one more for every 4-byte sequence (a surrogate pair in Java).
    """
    offsets_dtype = np.int64 if pa.types.is_large_string(strings.type) else np.int32
    bufs = strings.buffers()
    offsets = np.frombuffer(bufs[1], dtype=offsets_dtype)[strings.offset:strings.offset + len(strings) + 1]
    offsets = offsets.astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(bufs[2], dtype=np.uint8)[lo:hi] if bufs[2] is not None else np.zeros(0, np.uint8)
    offsets = offsets - lo
    if not data.size or int(data.max()) < 0x80:
        return data.astype(np.uint32), offsets
    units_per_byte = ((data & 0xC0) != 0x80).astype(np.int64) + (data >= 0xF0)
    before = np.zeros(data.size + 1, dtype=np.int64)
    np.cumsum(units_per_byte, out=before[1:])
    units = np.frombuffer(data.tobytes().decode("utf-8").encode("utf-16-le"), dtype="<u2").astype(np.uint32)
    if units.size != before[-1]:  # pragma: no cover - arrow strings are valid UTF-8
        raise ValueError("strings are not valid UTF-8")
    return units, before[offsets]


def java_string_hashes(strings: pa.Array) -> np.ndarray:
    """``String.hashCode`` of every string of a ``string`` or ``large_string`` array, as uint32
    (the same 32 bits as Java's signed int; ``.view(np.int32)`` gives the signed values). Null
    entries hash as empty strings: callers that must refuse nulls check before. Long arrays are
    hashed in slices of 65536 strings, which bounds the temporary arrays (a few per code unit)."""
    if len(strings) <= _ROWS_PER_SLICE:
        return _hashes(strings)
    return np.concatenate([_hashes(strings.slice(lo, _ROWS_PER_SLICE))
                           for lo in range(0, len(strings), _ROWS_PER_SLICE)])


def _hashes(strings: pa.Array) -> np.ndarray:
    units, offsets = _utf16_units(strings)
    lengths = np.diff(offsets)
    if not units.size:
        return np.zeros(len(lengths), dtype=np.uint32)
    powers = pow31(int(lengths.max()))
    ends = offsets[1:]
    distance = np.repeat(ends - 1, lengths) - np.arange(units.size, dtype=np.int64)
    csum = np.zeros(units.size + 1, dtype=np.uint32)
    np.cumsum(units * powers[distance], dtype=np.uint32, out=csum[1:])
    return csum[ends] - csum[offsets[:-1]]
