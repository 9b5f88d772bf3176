"""Row positions in base files, as bitmaps: the base rows a merge-on-read slice's log blocks replace.

A log record (or delete) replaces the base record of its key; where the base file holds that key
the log side knows the row's position (``LOG_BASE_ROW`` in :mod:`pyhudi.spark.merged`). A snapshot
query whose log records win whatever their values (OverwriteWithLatestAvroPayload) keeps every
base row whose position no log block names, so the positions of a snapshot are all it needs to
drop the replaced rows: one bit per row, 64 rows to a word, per base file. That is a filter Spark
evaluates in the base file's scan (an array lookup and a shift per row) where a join would build
and probe a hash table on every query.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass(frozen=True, eq=False)
class RowBitmap:
    """The replaced rows of one base file: bit ``r % 64`` of word ``r // 64`` is set for row ``r``.

    ``base_size`` (bytes) and ``file_id`` name the file as a base-file row sees it (Spark's
    ``_metadata.file_size`` and the file name's first part); ``rows`` is how many rows it names.
    """

    file_id: str
    base_size: int
    words: np.ndarray  # int64: the bits as two's-complement words (Spark has no unsigned type)
    rows: int

    def holds(self, positions: np.ndarray) -> np.ndarray:
        """Whether each of ``positions`` is set (positions past the bitmap are not)."""
        positions = np.asarray(positions, dtype=np.int64)
        word = positions >> 6
        inside = (positions >= 0) & (word < len(self.words))
        out = np.zeros(len(positions), dtype=bool)
        bits = self.words.view(np.uint64)[word[inside]] >> (positions[inside] & 63).astype(np.uint64)
        out[inside] = (bits & np.uint64(1)).astype(bool)
        return out


def row_bitmaps(file_ids: pa.Array | pa.ChunkedArray, sizes: pa.Array | pa.ChunkedArray,
                positions: pa.Array | pa.ChunkedArray) -> list[RowBitmap]:
    """One bitmap per (file id, base size) of the rows at ``positions``, ordered by both.

    The three arrays run side by side (one entry per replaced row; a position may repeat); none
    may hold nulls. Words end at the highest position set, so a file's bitmap costs an eighth of a
    byte per row up to its last replaced row.
    """
    encoded = _whole(file_ids).dictionary_encode()
    names = encoded.dictionary.to_pylist()
    code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    size = _whole(sizes).to_numpy(zero_copy_only=False).astype(np.int64)
    rows = _whole(positions).to_numpy(zero_copy_only=False).astype(np.int64)
    if np.any(rows < 0):
        raise ValueError("a row position is negative")
    order = np.lexsort((rows, size, code))
    code, size, rows = code[order], size[order], rows[order]
    if not len(rows):
        return []
    starts = np.flatnonzero(np.r_[True, (np.diff(code) != 0) | (np.diff(size) != 0)])
    ends = [*starts[1:], len(rows)]
    out = []
    for start, end in zip(starts, ends):
        where = rows[start:end]
        words = np.zeros(int(where[-1]) // 64 + 1, dtype=np.uint64)
        np.bitwise_or.at(words, where >> 6, np.left_shift(np.uint64(1), (where & 63).astype(np.uint64)))
        out.append(RowBitmap(names[code[start]], int(size[start]), words.view(np.int64),
                             int(np.count_nonzero(np.diff(where)) + 1)))
    return sorted(out, key=lambda b: (b.file_id, b.base_size))


def _whole(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    return values
