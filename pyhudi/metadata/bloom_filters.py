"""The ``bloom_filters`` partition of the metadata table: the bloom filter of every base file.

A record (``HoodieMetadataBloomFilter``, keyed by :func:`pyhudi.metadata.keys.bloom_filter_key`)
holds the filter's type (``DYNAMIC_V0`` or ``SIMPLE``), the instant that wrote the file, the
filter serialized exactly as in the file's parquet footer (``org.apache.hudi.bloomfilter``, as
UTF-8 bytes), and a deletion flag. A later record of a key replaces the earlier one; a file the
cleaner or a rollback removed gets a deletion record (empty type and filter).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence

from pyhudi.io.base_file import BLOOM_FILTER_KEY, BLOOM_FILTER_TYPE_KEY
from pyhudi.io.bloom import DYNAMIC_V0, BloomFilter
from pyhudi.io.file_names import parse_base_file
from pyhudi.metadata.files import MdtSlice, decode_value, deleted_base_files, lookup_keys
from pyhudi.metadata.keys import bloom_filter_key, file_group_index
from pyhudi.read.skipping import footers
from pyhudi.storage import Storage

PARTITION = "bloom_filters"
FILE_GROUP_PREFIX = "bloom-filters-"
TYPE_BLOOM_FILTER = 4


def _record(partition: str, file_name: str, filter_type: str, instant: str, data: bytes,
            deleted: bool) -> tuple[str, dict]:
    key = bloom_filter_key(partition, file_name)
    return key, {"key": key, "type": TYPE_BLOOM_FILTER, "BloomFilterMetadata": {
        "type": filter_type, "timestamp": instant, "bloomFilter": data, "isDeleted": deleted}}


def base_file_records(storage: Storage, paths: Iterable[str]) -> list[tuple[str, dict]]:
    """Bloom-filter records of base files (paths relative to the table), from their footers; a
    file without a filter in its footer gets none."""
    wanted = [p for p in paths if p.endswith(".parquet")]
    out = []
    for rel, meta in footers(storage, wanted).items():
        kv = meta.metadata or {}
        serialized = kv.get(BLOOM_FILTER_KEY.encode())
        if not serialized:
            continue
        name = posixpath.basename(rel)
        parsed = parse_base_file(name)
        filter_type = (kv.get(BLOOM_FILTER_TYPE_KEY.encode()) or DYNAMIC_V0.encode()).decode()
        out.append(_record(posixpath.dirname(rel), name, filter_type, parsed.instant_time if parsed else "",
                           serialized, False))
    return out


def retired_records(files_records: Iterable[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """Deletion records for every base file a ``files``-partition record deletes."""
    return [_record(partition, name, "", "", b"", True) for partition, name in deleted_base_files(files_records)]


def latest(records: Iterable[tuple[str, dict]]) -> dict[str, dict]:
    """key -> the live filter record (a later record replaces an earlier one; deletions drop it)."""
    out: dict[str, dict] = {}
    for key, record in records:
        meta = record.get("BloomFilterMetadata")
        if meta is None:
            continue
        if meta.get("isDeleted"):
            out.pop(key, None)
        else:
            out[key] = record
    return out


def bloom_filter(record: dict) -> BloomFilter:
    """The filter a record holds."""
    meta = record["BloomFilterMetadata"]
    return BloomFilter.deserialize(bytes(meta["bloomFilter"]), meta.get("type") or None)


def filters_of(storage: Storage, slices: Sequence[MdtSlice],
               files: Iterable[tuple[str, str]]) -> dict[str, BloomFilter]:
    """file name -> its bloom filter, for (partition, file name) pairs, looked up by key in the
    partition's file groups (``slices``, in file-group order) through their HFile block indexes;
    a file without a live record is left out (its footer serves)."""
    keys: dict[int, dict[str, str]] = {}
    for partition, name in files:
        key = bloom_filter_key(partition, name)
        keys.setdefault(file_group_index(key, len(slices)) if len(slices) > 1 else 0, {})[key] = name
    out = {}
    for group, wanted in keys.items():
        for row, (value, schema) in lookup_keys(storage, slices[group], wanted).items():
            meta = decode_value(value, schema).get("BloomFilterMetadata")
            if meta and not meta.get("isDeleted") and meta.get("bloomFilter"):
                out[wanted[row.decode("utf-8")]] = BloomFilter.deserialize(bytes(meta["bloomFilter"]),
                                                                           meta.get("type") or None)
    return out
