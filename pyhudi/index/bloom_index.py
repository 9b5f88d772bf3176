"""The BLOOM index's per-file work: key ranges, range pruning, bloom checks and exact key checks.

Hudi's bloom index (``HoodieBloomIndex``) finds the file group of each incoming key in four steps:

1. the key range of every latest base file in the affected partitions (footer entries
   ``hoodie_min_record_key`` / ``hoodie_max_record_key``);
2. range pruning: a key is a candidate only for files whose range holds it;
3. the bloom filter of each candidate file (footer ``org.apache.hudi.bloomfilter``) rules keys out;
4. the keys that pass are checked against the file's stored record keys, removing false positives.

This module does steps 1, 2 and 3-4 on Arrow tables, without Spark: the Spark side runs
:func:`range_candidates` over incoming keys and :func:`check_file_candidates` once per candidate
file, so each footer and each file's key column is read once per file, never once per key.
"""

from __future__ import annotations

import bisect
import contextlib
import posixpath
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyhudi.errors import HudiCorruptFileError
from pyhudi.io.avro_schema import RECORD_KEY
from pyhudi.io.base_file import BLOOM_FILTER_KEY, BLOOM_FILTER_TYPE_KEY, MAX_KEY, MIN_KEY
from pyhudi.io.bloom import BloomFilter
from pyhudi.metadata.bloom_filters import filters_of
from pyhudi.metadata.files import MdtSlice
from pyhudi.storage import Storage

KEY = "key"
PARTITION = "partition_path"
FILE_ID = "file_id"
PATH = "path"

#: Candidate (key, file) pairs produced by range pruning, and the matches of the final check.
CANDIDATE_SCHEMA = pa.schema([(KEY, pa.string()), (PARTITION, pa.string()), (FILE_ID, pa.string()),
                              (PATH, pa.string())])
#: Output of the per-file check: matched keys (``is_stat`` false) and one stats row per file.
CHECK_SCHEMA = pa.schema([
    (KEY, pa.string()), (PARTITION, pa.string()), (FILE_ID, pa.string()), ("is_stat", pa.bool_()),
    ("candidates", pa.int64()), ("bloom_positives", pa.int64()), ("matches", pa.int64()),
    ("check_ms", pa.int64()),
])
CHECK_DDL = ("key string, partition_path string, file_id string, is_stat boolean, candidates long, "
             "bloom_positives long, matches long, check_ms long")
RANGE_SCHEMA = pa.schema([(PARTITION, pa.string()), (FILE_ID, pa.string()), (PATH, pa.string()),
                          ("min_key", pa.string()), ("max_key", pa.string())])
RANGE_DDL = "partition_path string, file_id string, path string, min_key string, max_key string"


@dataclass(frozen=True)
class FileRange:
    """A latest base file and its record-key range (``None`` bounds: unknown, so always a candidate)."""

    partition_path: str
    file_id: str
    path: str  # relative to the table base path
    min_key: str | None = None
    max_key: str | None = None


#: Footer key ranges of base files already seen by this process, by absolute file path. Base files
#: are immutable (every write makes a new file name), so an entry never goes stale; this spares an
#: upsert re-reading the footers of files it or an earlier write already knows, as Hudi spares it
#: with the metadata table's column statistics.
_KNOWN_RANGES: dict[str, tuple[str | None, str | None]] = {}
_KNOWN_RANGES_LIMIT = 1_000_000


def remember_ranges(base_uri: str, ranges: Iterable[tuple[str, str | None, str | None]]) -> None:
    """Record (relative path, min key, max key) of base files, e.g. from a write's executor stats."""
    if len(_KNOWN_RANGES) > _KNOWN_RANGES_LIMIT:
        _KNOWN_RANGES.clear()
    for rel, low, high in ranges:
        _KNOWN_RANGES[f"{base_uri.rstrip('/')}/{rel}"] = (low, high)


def known_range(base_uri: str, rel_path: str) -> tuple[str | None, str | None] | None:
    return _KNOWN_RANGES.get(f"{base_uri.rstrip('/')}/{rel_path}")


def _read_footer(storage: Storage, rel_path: str) -> dict[bytes, bytes]:
    with storage.fs.open_input_file(storage.full(rel_path)) as f:
        return pq.read_metadata(f).metadata or {}


def _footer_range(meta: dict[bytes, bytes]) -> tuple[str | None, str | None]:
    low, high = meta.get(MIN_KEY.encode()), meta.get(MAX_KEY.encode())
    return (low.decode() if low is not None else None, high.decode() if high is not None else None)


def _footer_bloom(meta: dict[bytes, bytes], rel_path: str) -> BloomFilter | None:
    raw = meta.get(BLOOM_FILTER_KEY.encode())
    if raw is None:
        return None
    code = meta.get(BLOOM_FILTER_TYPE_KEY.encode())
    try:
        return BloomFilter.deserialize(raw, code.decode() if code else None)
    except HudiCorruptFileError as exc:
        raise HudiCorruptFileError(f"{rel_path}: {exc}") from None


def read_key_range(storage: Storage, rel_path: str) -> tuple[str | None, str | None]:
    """The footer's min/max record key of a base file (``None`` when the writer did not store them)."""
    return _footer_range(_read_footer(storage, rel_path))


def key_ranges(batches: Iterable[pa.RecordBatch], storage: Storage) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: for rows (partition_path, file_id, path), the footer key range of each file."""
    for batch in batches:
        rows = batch.to_pylist()
        if not rows:
            continue
        out = []
        for r in rows:  # one footer per file: per-file work, not per-key
            low, high = read_key_range(storage, r[PATH])
            out.append({**r, "min_key": low, "max_key": high})
        yield pa.RecordBatch.from_pylist(out, schema=RANGE_SCHEMA)


class _SortedKeys(Sequence[str]):
    """A sorted Arrow string array seen as a Python sequence, for :mod:`bisect` (log n lookups)."""

    def __init__(self, keys: pa.Array) -> None:
        self._keys = keys

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, i):  # type: ignore[no-untyped-def, override]
        return self._keys[i].as_py()


def range_candidates(keys: pa.Table, files: Sequence[FileRange], *, prune_by_ranges: bool,
                     global_index: bool) -> pa.Table:
    """Candidate (key, file) pairs: each incoming key against the files whose key range holds it.

    ``keys`` has columns ``key`` and ``partition_path``. Without a global index a key is checked
    only against files of its own partition. The incoming keys of a partition are sorted once and
    each file's range is located in them by binary search, so the cost is
    O(files x log keys + candidates), never keys x files comparisons. The output carries the
    file's partition, which for a global index may differ from the key's.
    """
    by_partition: dict[str | None, list[FileRange]] = {}
    for f in files:
        by_partition.setdefault(None if global_index else f.partition_path, []).append(f)
    parts: list[pa.Table] = []
    if global_index:
        groups: list[tuple[str | None, pa.Array]] = [(None, keys.column(KEY).combine_chunks())]
    else:
        pcol = keys.column(PARTITION).combine_chunks()
        encoded = pcol.dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        groups = []
        for code, partition in enumerate(encoded.dictionary.to_pylist()):
            if partition in by_partition:
                groups.append((partition, keys.column(KEY).combine_chunks().filter(pa.array(codes == code))))
    for partition, group_keys in groups:
        candidates_files = by_partition.get(partition, [])
        if not candidates_files or not len(group_keys):
            continue
        unique = pc.unique(group_keys)  # a key repeated in the batch is checked once per file
        ordered = pc.take(unique, pc.sort_indices(unique))
        view = _SortedKeys(ordered)
        for f in candidates_files:
            lo, hi = 0, len(ordered)
            if prune_by_ranges and f.min_key is not None and f.max_key is not None:
                lo = bisect.bisect_left(view, f.min_key)
                hi = bisect.bisect_right(view, f.max_key, lo=lo)
            if hi <= lo:
                continue
            chosen = ordered.slice(lo, hi - lo)
            n = len(chosen)
            parts.append(pa.table([chosen, pa.array([f.partition_path] * n, pa.string()),
                                   pa.array([f.file_id] * n, pa.string()), pa.array([f.path] * n, pa.string())],
                                  schema=CANDIDATE_SCHEMA))
    if not parts:
        return CANDIDATE_SCHEMA.empty_table()
    return pa.concat_tables(parts)


def check_file(storage: Storage, rel_path: str, keys: pa.Array, *,
               bloom: BloomFilter | None = None) -> tuple[pa.Array, int]:
    """(keys really stored in the file, number of bloom positives) for candidate ``keys``.

    The bloom filter (``bloom``, from the metadata table, or else the footer's) rules most keys
    out; the survivors are compared with the file's record-key column (read once), which removes
    the filter's false positives.
    """
    checked = lookup_file(storage, rel_path, keys, key_range=None, prune_by_ranges=False, bloom=bloom)
    return checked.present, checked.positives


def _in_range(keys: pa.Array, low: str | None, high: str | None) -> pa.Array:
    mask = None
    if low is not None:
        mask = pc.greater_equal(keys, pa.scalar(low, pa.string()))
    if high is not None:
        upper = pc.less_equal(keys, pa.scalar(high, pa.string()))
        mask = upper if mask is None else pc.and_(mask, upper)
    return keys if mask is None else keys.filter(mask)


@dataclass(frozen=True)
class FileCheck:
    """What the bloom index did with one base file: keys in its range, bloom positives, matches."""

    present: pa.Array
    candidates: int
    positives: int


def lookup_file(storage: Storage, rel_path: str, keys: pa.Array, *, key_range: tuple[str | None, str | None] | None,
                prune_by_ranges: bool, bloom: BloomFilter | None = None) -> FileCheck:
    """All four steps of the bloom index for one base file and distinct incoming ``keys``.

    A file whose remembered ``key_range`` holds none of the keys is ruled out without being
    opened; otherwise its footer is read once for both the range and the bloom filter, unless
    the range is known and the ``bloom`` filter given (the metadata table's).
    """
    empty = pa.array([], pa.string())
    if prune_by_ranges and key_range is not None:
        keys = _in_range(keys, *key_range)
        if not len(keys):
            return FileCheck(empty, 0, 0)
    with contextlib.ExitStack() as files:
        opened: list[pq.ParquetFile] = []

        def parquet() -> pq.ParquetFile:
            """The file, opened once for its footer and its keys (on S3: one GET of its tail)."""
            if not opened:
                opened.append(pq.ParquetFile(files.enter_context(storage.fs.open_input_file(storage.full(rel_path)))))
            return opened[0]

        if bloom is None or (prune_by_ranges and key_range is None):
            meta = parquet().metadata.metadata or {}
            if prune_by_ranges and key_range is None:
                keys = _in_range(keys, *_footer_range(meta))
                if not len(keys):
                    return FileCheck(empty, 0, 0)
            bloom = bloom or _footer_bloom(meta, rel_path)
        maybe = keys if bloom is None else keys.filter(pa.array(bloom.might_contain(keys)))
        if not len(maybe):
            return FileCheck(empty, len(keys), 0)
        stored = parquet().read(columns=[RECORD_KEY]).column(RECORD_KEY)
    return FileCheck(maybe.filter(pc.is_in(maybe, value_set=stored)), len(keys), len(maybe))


def check_file_candidates(batches: Iterable[pa.RecordBatch], storage: Storage,
                          blooms: Sequence[MdtSlice] = ()) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of the bloom check: candidate pairs grouped by file, matches and stats
    out. ``blooms``: the file groups of the metadata table's bloom_filters partition, which then
    give the filters (looked up by key) instead of the files' footers."""
    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    rows = pa.concat_tables(tables)
    paths = rows.column(PATH).combine_chunks().dictionary_encode()
    codes = paths.indices.to_numpy(zero_copy_only=False)
    keys = rows.column(KEY).combine_chunks()
    partitions = rows.column(PARTITION).combine_chunks()
    file_ids = rows.column(FILE_ID).combine_chunks()
    filters: dict[str, BloomFilter] = {}
    if blooms:
        firsts = [int(np.flatnonzero(codes == code)[0]) for code in range(len(paths.dictionary))]
        filters = filters_of(storage, blooms, [(partitions[i].as_py(), posixpath.basename(p))
                                               for i, p in zip(firsts, paths.dictionary.to_pylist())])
    for code, path in enumerate(paths.dictionary.to_pylist()):
        started = time.monotonic()
        idx = np.flatnonzero(codes == code)
        first = int(idx[0])
        file_keys = pc.unique(keys.take(pa.array(idx)))
        present, positives = check_file(storage, path, file_keys, bloom=filters.get(posixpath.basename(path)))
        n = len(present)
        partition, fid = partitions[first].as_py(), file_ids[first].as_py()
        elapsed = int((time.monotonic() - started) * 1000)
        if n:
            yield pa.RecordBatch.from_arrays([
                present, pa.array([partition] * n, pa.string()), pa.array([fid] * n, pa.string()),
                pa.array(np.zeros(n, dtype=bool)), pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64()),
                pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64())], schema=CHECK_SCHEMA)
        yield pa.RecordBatch.from_pylist([{
            KEY: None, PARTITION: partition, FILE_ID: fid, "is_stat": True, "candidates": len(file_keys),
            "bloom_positives": positives, "matches": n, "check_ms": elapsed}], schema=CHECK_SCHEMA)
