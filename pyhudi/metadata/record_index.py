"""The ``record_index`` partition of the metadata table: where every record key lives.

A record (``HoodieRecordIndexInfo``, type 5) is keyed by the record key itself and holds the
key's data partition, its file group and the instant that put it there, as Hudi 0.14 encodes
them: a file id ``<uuid>-<n>`` as the UUID's two 64-bit halves plus ``n`` (encoding 0), any other
file id as a string (encoding 1), the instant as epoch milliseconds. A key is stored in file group
``record-index-<i>-0`` with ``i`` = Java ``String.hashCode`` of the key modulo the group count,
which is fixed when the partition is created (:func:`file_group_count`, Hudi's sizing options).

Every write adds one log file per file group it has changes for: an HFile data block of the keys
it inserted or moved, and a delete block of the keys it deleted. A lookup reads, per file group,
only the data blocks the HFile block indexes point its keys to (:func:`lookup`). The values of
all keys of one file are the same bytes, so encoding and decoding work per file, not per key.

Everything here is plain pyarrow and reads or encodes only; :mod:`pyhudi.commit.record_index_build`
writes the partition's base files, :mod:`pyhudi.spark.record_index_job` distributes the work.
"""

from __future__ import annotations

import io
import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.io.avro_schema import RECORD_KEY
from pyhudi.io.hfile import CellColumns
from pyhudi.io.keys import first_of_runs
from pyhudi.metadata.files import MdtSlice, _parsed_schema, decode_value, lookup_keys, merge_slice
from pyhudi.metadata.keys import file_group_indexes
from pyhudi.metadata.schema import RECORD_SCHEMA
from pyhudi.read.merge import MergeSpec, SliceToRead, Visibility, read_slice, scan_logs
from pyhudi.storage import Storage

PARTITION = "record_index"
FILE_GROUP_PREFIX = "record-index-"
TYPE_RECORD_INDEX = 5
#: bytes Hudi assumes one record index entry takes (RECORD_INDEX_AVERAGE_RECORD_SIZE)
AVERAGE_RECORD_SIZE = 48
ENCODING_UUID, ENCODING_STRING = 0, 1

#: columns of a table of record locations
KEY, LOCATION_PARTITION, LOCATION_FILE, DELETE, RANK, GROUP = (
    "key", "partition", "file_id", "is_delete", "rank", "group")
LOCATIONS = pa.schema([(KEY, pa.string()), (LOCATION_PARTITION, pa.string()), (LOCATION_FILE, pa.string()),
                       (DELETE, pa.bool_()), (RANK, pa.int8()), (GROUP, pa.int32())])
#: rank of a change: a key a write (re)located wins over its deletion from another file group
RANK_DELETE, RANK_LOCATE = 0, 1


def file_group_count(records: int, *, min_count: int, max_count: int, max_group_bytes: int,
                     growth_factor: float) -> int:
    """Hudi's ``estimateFileGroupCount``: enough groups for ``records`` times the growth factor
    at :data:`AVERAGE_RECORD_SIZE` bytes each, within [min, max]; min when min equals max."""
    if min_count == max_count and min_count > 0:
        return min_count
    expected = math.ceil(records * growth_factor)
    per_group = max(1, max_group_bytes // AVERAGE_RECORD_SIZE)
    estimate = expected // per_group
    return max(min_count, min(max_count, estimate))


def instant_millis(instant: str, *, utc: bool) -> int:
    """``parseDateFromInstantTime``: epoch milliseconds of an instant time (second-granularity
    times read as their last millisecond), in the timeline's time zone."""
    digits = instant[:17] if len(instant) >= 17 else instant[:14] + "999"
    try:
        parsed = datetime.strptime(digits[:14], "%Y%m%d%H%M%S").replace(microsecond=int(digits[14:17]) * 1000)
    except ValueError:  # the reserved all-zero times of an empty table's initialization
        return 0
    if utc:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return int(parsed.timestamp() * 1000)


def encode_file_id(file_id: str) -> dict:
    """The file-id fields of a ``HoodieRecordIndexInfo``."""
    head, _, tail = file_id.rpartition("-")
    candidates = [(file_id, -1)] if len(file_id) == 36 else []
    if tail.isdigit() and len(head) == 36:
        candidates.append((head, int(tail)))
    for text, index in candidates:
        try:
            u = uuid.UUID(text)
        except ValueError:
            continue
        if str(u) != text:  # only the canonical spelling decodes back to the same file id
            continue
        hi, lo = (u.int >> 64), u.int & ((1 << 64) - 1)
        return {"fileIdHighBits": hi - (1 << 64) if hi >= 1 << 63 else hi,
                "fileIdLowBits": lo - (1 << 64) if lo >= 1 << 63 else lo,
                "fileIndex": index, "fileId": "", "fileIdEncoding": ENCODING_UUID}
    return {"fileIdHighBits": -1, "fileIdLowBits": -1, "fileIndex": -1, "fileId": file_id,
            "fileIdEncoding": ENCODING_STRING}


def decode_file_id(info: dict) -> str:
    """The file id a ``HoodieRecordIndexInfo`` names."""
    if int(info.get("fileIdEncoding") or 0) == ENCODING_STRING:
        return str(info.get("fileId") or "")
    hi, lo = int(info["fileIdHighBits"]) % (1 << 64), int(info["fileIdLowBits"]) % (1 << 64)
    text = str(uuid.UUID(int=(hi << 64) | lo))
    index = info.get("fileIndex")
    return text if index is None or int(index) == -1 else f"{text}-{int(index)}"


@lru_cache(maxsize=65536)
def location_value(partition: str, file_id: str, instant_ms: int, schema: str = RECORD_SCHEMA) -> bytes:
    """The HFile value of a record index entry: the Avro binary of its ``HoodieMetadataRecord``
    (``key`` left empty, as Hudi writes it) in ``schema`` (the MDT's version's). The same for
    every key of one file."""
    import fastavro

    record = {"key": "", "type": TYPE_RECORD_INDEX, "filesystemMetadata": None,
              "recordIndexMetadata": {"partitionName": partition, "instantTime": instant_ms,
                                      **encode_file_id(file_id)}}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _parsed_schema(schema), record)
    return buf.getvalue()


@lru_cache(maxsize=65536)
def location_of(value: bytes, schema_json: str = RECORD_SCHEMA) -> tuple[str, str]:
    """(data partition, file id) of a record index value."""
    info = decode_value(value, schema_json).get("recordIndexMetadata") or {}
    return str(info.get("partitionName") or ""), decode_file_id(info)


def entry(value: bytes) -> dict:
    """The whole ``HoodieRecordIndexInfo`` of a value (validation, tests)."""
    return dict(decode_value(value, RECORD_SCHEMA).get("recordIndexMetadata") or {})


def cells(locations: pa.Table, instant_ms: int, *, schema: str = RECORD_SCHEMA) -> CellColumns:
    """HFile cells (key, value) of located keys (columns :data:`KEY`, :data:`LOCATION_PARTITION`,
    :data:`LOCATION_FILE`), sorted by key; a value is encoded once per file, in ``schema``."""
    if locations.num_rows == 0:
        return CellColumns(pa.array([], pa.binary()), pa.array([], pa.binary()))
    ordered = locations.take(pc.sort_indices(locations, sort_keys=[(KEY, "ascending"),
                                                                   (LOCATION_PARTITION, "ascending")]))
    # a key that several partitions hold (a table without a global index) is recorded once
    ordered = ordered.filter(pa.array(first_of_runs(ordered.column(KEY).combine_chunks())))
    pairs = pc.binary_join_element_wise(ordered.column(LOCATION_PARTITION).cast(pa.string()), "\x00",
                                        ordered.column(LOCATION_FILE).cast(pa.string()), "")
    encoded = pc.dictionary_encode(pairs).combine_chunks()
    values = pa.array([location_value(*str(p).split("\x00", 1), instant_ms, schema)
                       for p in encoded.dictionary.to_pylist()], pa.binary())
    return CellColumns(ordered.column(KEY).combine_chunks().cast(pa.binary()), values.take(encoded.indices))


# -- lookups -----------------------------------------------------------------------------------
def lookup(storage: Storage, piece: MdtSlice, keys: Iterable[str]) -> dict[str, tuple[str, str]]:
    """key -> (data partition, file id) of the keys the file group holds, through the block
    indexes of its base file and log blocks: only the data blocks that can hold the keys are read."""
    return {k.decode("utf-8"): location_of(v, schema) for k, (v, schema) in lookup_keys(storage, piece, keys).items()}


def merged_locations(storage: Storage, piece: MdtSlice) -> dict[str, tuple[str, str]]:
    """Every key a file group holds, with its (data partition, file id)."""
    return {k.decode("utf-8"): location_of(v, schema)
            for k, (v, schema) in merge_slice(storage, piece, lambda reader: reader.items(), None).items()}


def merged_cells(storage: Storage, piece: MdtSlice) -> list[tuple[bytes, bytes]]:
    """Every live (key, value) of a file group's latest slice, sorted: what a compaction writes."""
    merged = merge_slice(storage, piece, lambda reader: reader.items(), None)
    return sorted((k, v) for k, (v, _schema) in merged.items())


# -- what a write changes ------------------------------------------------------------------------
@dataclass(frozen=True)
class KeyChange:
    """One data file group a write changed, as shipped to an executor: the slice before the write
    (None for a new file group) and what the write wrote (a new base file, or log files whose
    blocks of ``instant`` it appended). A file group an overwrite replaced has no new files."""

    partition_path: str
    file_id: str
    instant: str
    old: SliceToRead | None
    new_base: str | None
    new_logs: tuple[str, ...]


def _keys(table: pa.Table) -> pa.Array:
    return table.column(RECORD_KEY).combine_chunks().cast(pa.string())


def changed_locations(storage: Storage, change: KeyChange, key_schema: pa.Schema, spec: MergeSpec,
                      committed: Visibility) -> pa.Table:
    """The record index changes of one file group (:data:`LOCATIONS` without the group): keys a
    new base file gained (inserted or moved in), keys it lost (deleted or moved out), keys a log
    block of the write holds (located here; mostly updates in place, which change nothing) and
    keys a delete block of the write deletes. ``committed`` tells what was visible before."""
    located: list[pa.Array] = []
    deleted: list[pa.Array] = []
    if change.new_base is not None or change.old is not None:
        old = _keys(read_slice(storage, change.old, key_schema, spec, committed)[0]) if change.old else None
        new = _keys(read_slice(storage, SliceToRead(change.partition_path, change.file_id, change.new_base, ()),
                               key_schema, spec, committed)[0]) if change.new_base else None
        if new is not None:
            located.append(new if old is None else new.filter(pc.invert(pc.is_in(new, value_set=old))))
        if old is not None:
            deleted.append(old if new is None else old.filter(pc.invert(pc.is_in(old, value_set=new))))
    if change.new_logs:
        scan = scan_logs(storage, change.new_logs, key_schema, Visibility(frozenset({change.instant})))
        located += [_keys(t) for _pos, t in scan.data]
        deleted += [t.column("record_key").combine_chunks().cast(pa.string()) for _pos, t in scan.deletes]
    parts = [_at(keys, change.partition_path, change.file_id, deleted=is_delete)
             for arrays, is_delete in ((located, False), (deleted, True)) for keys in arrays if len(keys)]
    return pa.concat_tables(parts) if parts else empty_locations()


def _at(keys: pa.Array, partition: str, file_id: str, *, deleted: bool) -> pa.Table:
    """``keys`` as changes of one file group: located there, or deleted from it."""
    n = len(keys)
    return pa.table({KEY: keys, LOCATION_PARTITION: pa.repeat(pa.scalar(partition), n),
                     LOCATION_FILE: pa.repeat(pa.scalar(file_id), n), DELETE: pa.repeat(pa.scalar(deleted), n),
                     RANK: pa.repeat(pa.scalar(RANK_DELETE if deleted else RANK_LOCATE, pa.int8()), n)})


def empty_locations() -> pa.Table:
    """A table of no changes (:data:`LOCATIONS` without the group)."""
    return LOCATIONS.remove(LOCATIONS.get_field_index(GROUP)).empty_table()


def slice_locations(storage: Storage, piece: SliceToRead, key_schema: pa.Schema, spec: MergeSpec,
                    committed: Visibility) -> pa.Table:
    """Every live key of a data file slice, located there (a partition's initialization)."""
    keys = _keys(read_slice(storage, piece, key_schema, spec, committed)[0])
    return _at(keys, piece.partition_path, piece.file_id, deleted=False)


def with_groups(locations: pa.Table, count: int) -> pa.Table:
    """``locations`` plus the file group of each key."""
    groups = file_group_indexes(locations.column(KEY), count).astype(np.int32)
    return locations.append_column(GROUP, pa.array(groups, pa.int32()))


def resolve(changes: pa.Table) -> tuple[pa.Table, list[str]]:
    """One change per key: (keys located, with their location; keys deleted). A key a write
    located somewhere wins over its deletion elsewhere (a move between partitions)."""
    if changes.num_rows == 0:
        return changes, []
    order = pc.sort_indices(changes, sort_keys=[(KEY, "ascending"), (RANK, "descending"),
                                                 (LOCATION_PARTITION, "descending")])
    ordered = changes.take(order)
    winners = ordered.filter(pa.array(first_of_runs(ordered.column(KEY).combine_chunks())))
    is_delete = winners.column(DELETE).combine_chunks()
    return winners.filter(pc.invert(is_delete)), winners.filter(is_delete).column(KEY).to_pylist()


# -- building the partition ------------------------------------------------------------------------
@dataclass(frozen=True)
class Sizing:
    """Hudi's record index sizing options (``hoodie.metadata.record.index.*``)."""

    min_count: int = 10
    max_count: int = 10000
    max_group_bytes: int = 1024 * 1024 * 1024
    growth_factor: float = 2.0

    def groups(self, records: int) -> int:
        return file_group_count(records, min_count=self.min_count, max_count=self.max_count,
                                max_group_bytes=self.max_group_bytes, growth_factor=self.growth_factor)
