"""The ``files`` partition of a metadata table: every partition of the data table and its files.

The metadata table (MDT) is a merge-on-read Hudi table under ``.hoodie/metadata`` whose base files
are HFiles and whose log files hold HFile data blocks. In its ``files`` partition each cell's row
is a record key and its value a ``HoodieMetadataRecord`` in Avro binary, its ``key`` field left
empty (the row holds it):

* ``__all_partitions__`` (type 1): the data table's partitions, as the keys of
  ``filesystemMetadata``;
* a partition path (type 2; ``.`` for a non-partitioned table): its files, ``filesystemMetadata``
  mapping a file name to ``{size, isDeleted}``.

Records of one key merge in instant order as ``HoodieMetadataPayload`` merges them: a deleted
file leaves the listing, a file seen again keeps the larger size (log files grow by appends).

The slice read is the latest base file of a completed MDT instant plus the log blocks written by
later MDT instants that completed; blocks of MDT instants whose data-table instant has not
completed (a write that failed after updating the MDT) are skipped as Hudi's reader skips them.
"""

from __future__ import annotations

import io
import json
import posixpath
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pyhudi.errors import HudiCorruptFileError
from pyhudi.io.file_names import parse_base_file, parse_log_file
from pyhudi.io.hfile import HFileReader
from pyhudi.io.log_format import BlockType, LogBlock, delete_block_records, read_blocks
from pyhudi.metadata.schema import RECORD_SCHEMA
from pyhudi.storage import Storage
from pyhudi.storage.fs import FileInfo
from pyhudi.storage.parsed import ParsedFiles

METADATA_FOLDER = ".hoodie/metadata"
FILES_PARTITION = "files"
ALL_PARTITIONS_KEY = "__all_partitions__"
NON_PARTITIONED_KEY = "."
TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2
#: instant times the MDT gives its partitions' initialization (below any real instant)
INIT_INSTANT_PREFIX = "00000000000000"


def is_own_instant(instant: str) -> bool:
    """Instants the MDT makes itself (initialization, compaction, clean, rollback): a data
    instant time plus a three-digit suffix, or the reserved all-zero times."""
    return instant.startswith(INIT_INSTANT_PREFIX) or len(instant) >= 20


@lru_cache(maxsize=8)
def _parsed_schema(schema_json: str) -> Any:
    import fastavro

    return fastavro.parse_schema(json.loads(schema_json))


def decode_records(reader: HFileReader, schema_json: str | None, *,
                   prefixes: tuple[str, ...] | None = None) -> Iterator[tuple[str, dict]]:
    """(record key, HoodieMetadataRecord) of every cell of an MDT HFile, or of those whose key
    starts with one of ``prefixes`` (found through the block index: other blocks are not read)."""
    import fastavro

    schema_text = schema_json or reader.file_info.get("schema", b"").decode()
    if not schema_text:
        raise HudiCorruptFileError(f"{reader.source} has no Avro schema to decode its records with")
    schema = _parsed_schema(schema_text)
    cells = reader.items() if prefixes is None else (
        cell for prefix in sorted(set(prefixes)) for cell in reader.prefix(prefix.encode("utf-8")))
    for row, value in cells:
        # a union of several records (a column statistic's wrapped value) decodes as (name, record)
        record: dict = fastavro.schemaless_reader(  # type: ignore[assignment,call-overload]
            io.BytesIO(value), schema, return_record_name=True, return_record_name_override=True)
        key = row.decode()
        record["key"] = key
        yield key, record


def partitions_record(added: Iterable[str], deleted: Iterable[str] = ()) -> tuple[str, dict]:
    """The ``__all_partitions__`` record of partitions created (or dropped) by one action."""
    entries = {name: {"size": 0, "isDeleted": False} for name in added}
    entries.update({name: {"size": 0, "isDeleted": True} for name in deleted})
    return ALL_PARTITIONS_KEY, {"key": ALL_PARTITIONS_KEY, "type": TYPE_PARTITION_LIST,
                                "filesystemMetadata": entries}


def files_record(partition: str, added: Mapping[str, int], deleted: Iterable[str] = ()) -> tuple[str, dict]:
    """The record of one partition's files written (name -> size) and deleted by one action."""
    key = partition or NON_PARTITIONED_KEY
    entries = {name: {"size": int(size), "isDeleted": False} for name, size in added.items()}
    entries.update({name: {"size": 0, "isDeleted": True} for name in deleted})
    return key, {"key": key, "type": TYPE_FILE_LIST, "filesystemMetadata": entries}


def deleted_base_files(records: Iterable[tuple[str, dict]]) -> Iterator[tuple[str, str]]:
    """(partition, file name) of every base file ``files``-partition records delete: the files
    whose index entries (column statistics, bloom filters) retire with them."""
    for key, record in records:
        if record.get("type") != TYPE_FILE_LIST:
            continue
        partition = "" if key == NON_PARTITIONED_KEY else key
        for name, info in (record.get("filesystemMetadata") or {}).items():
            if info.get("isDeleted") and name.endswith(".parquet"):
                yield partition, name


def encode_records(records: Iterable[tuple[str, dict]], schema_json: str) -> list[tuple[bytes, bytes]]:
    """HFile cells of records: the key as row, the Avro binary with ``key`` left empty as value
    (as Hudi writes them), sorted by key."""
    import fastavro

    schema = _parsed_schema(schema_json)
    cells = []
    for key, record in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, {**record, "key": ""})
        cells.append((key.encode("utf-8"), buf.getvalue()))
    return sorted(cells)


@dataclass
class FileListing:
    """Partitions and their files (name -> size) as the ``files`` partition records them."""

    partitions: set[str] = field(default_factory=set)
    files: dict[str, dict[str, int]] = field(default_factory=dict)

    def apply(self, key: str, record: dict) -> None:
        entries = record.get("filesystemMetadata") or {}
        kind = record.get("type")
        if kind == TYPE_PARTITION_LIST:
            for name, info in entries.items():
                (self.partitions.discard if info.get("isDeleted") else self.partitions.add)(name)
            return
        if kind != TYPE_FILE_LIST:
            return
        partition = "" if key == NON_PARTITIONED_KEY else key
        files = self.files.setdefault(partition, {})
        if not files:  # the partition's first record (the base file's): taken whole
            files.update((name, int(info.get("size") or 0)) for name, info in entries.items()
                         if not info.get("isDeleted"))
            return
        for name, info in entries.items():
            if info.get("isDeleted"):
                files.pop(name, None)
            else:
                files[name] = max(int(info.get("size") or 0), files.get(name, 0))

    def partition_files(self, partition: str) -> dict[str, int]:
        return dict(self.files.get(partition, {}))


def read_files_partition(storage: Storage, *, mdt_completed: dict[str, str | None],
                         data_completed: set[str] | None = None, archived_before: str | None = None,
                         listed: list[FileInfo] | None = None) -> FileListing:
    """The listing the ``files`` partition holds (see :func:`read_partition` for the arguments)."""
    listing = FileListing()
    for key, record in read_partition(storage, FILES_PARTITION, mdt_completed=mdt_completed,
                                      data_completed=data_completed, archived_before=archived_before,
                                      listed=listed):
        listing.apply(key, record)
    return listing


@dataclass(frozen=True)
class MdtSlice:
    """The latest slice of one MDT file group, as readers merge it: its base file (a path
    relative to the data table, with what the listing said of it) and its log files, with the
    instants whose log blocks count (completed MDT instants of completed data instants)."""

    partition: str
    file_id: str
    base_instant: str
    base: tuple[str, FileInfo] | None
    logs: tuple[tuple[str, FileInfo], ...]
    visible: frozenset[str]


def latest_slices(storage: Storage, partition: str, *, mdt_completed: dict[str, str | None],
                  data_completed: set[str] | None = None, archived_before: str | None = None,
                  listed: list[FileInfo] | None = None) -> list[MdtSlice]:
    """The latest slice of every file group of an MDT partition (see :func:`read_partition`)."""
    folder = f"{METADATA_FOLDER}/{partition}"
    groups: dict[str, tuple[list[tuple[str, str, FileInfo]], list[tuple[str, FileInfo, str]]]] = {}
    for info in storage.list_files(folder) if listed is None else listed:
        if info.name.endswith(".hfile") and (parsed := parse_base_file(info.name)) is not None:
            groups.setdefault(parsed.file_id, ([], []))[0].append((parsed.instant_time, info.name, info))
        elif (log_name := parse_log_file(info.name)) is not None:
            groups.setdefault(log_name.file_id, ([], []))[1].append((info.name, info, log_name.base_instant))
    by_completion = any(done is not None for done in mdt_completed.values())
    first_active = min(mdt_completed, default="")
    out = []
    for file_id in sorted(groups):
        all_bases, logs = groups[file_id]
        # a base file of an archived MDT instant (older than its active timeline) is committed
        bases = [b for b in all_bases if b[0] in mdt_completed or b[0] < first_active]
        if all_bases and not bases:
            raise HudiCorruptFileError(f"file group {file_id} of the metadata table of {storage.base_uri} has no base "
                                       "file of a completed instant (compacted and cleaned while being read?)")
        base_instant, base = "", None
        if bases:
            base_instant, name, info = max(bases, key=lambda b: b[:2])
            base = (posixpath.join(folder, name), info)

        def visible(instant: str, base_instant: str = base_instant) -> bool:
            completed_at = mdt_completed[instant]
            if completed_at is not None and completed_at <= base_instant:
                return False  # completed before the compaction that made the base file was planned
            if data_completed is None or instant in data_completed or is_own_instant(instant):
                return True
            return archived_before is not None and instant < archived_before

        own_logs = tuple(sorted((posixpath.join(folder, name), info) for name, info, slice_instant in logs
                                # version 6: a log file of an older slice was compacted into the base file
                                if by_completion or not base_instant or slice_instant == base_instant))
        out.append(MdtSlice(partition, file_id, base_instant, base, own_logs,
                            frozenset(i for i in mdt_completed if visible(i))))
    return out


def read_partition(storage: Storage, partition: str, *, mdt_completed: dict[str, str | None],
                   data_completed: set[str] | None = None, archived_before: str | None = None,
                   key_prefixes: tuple[str, ...] | None = None,
                   listed: list[FileInfo] | None = None) -> list[tuple[str, dict]]:
    """The records of an MDT partition in the order they merge: per file group, its latest
    completed base file, then the log blocks written after it by completed instants.

    ``mdt_completed``: completed instants of the MDT's timeline, each with its completion time
    (table version 8 and later; None in version 6). ``data_completed``: completed instants of the
    data table; MDT records of other instants (except the MDT's own instants) are ignored, unless
    older than ``archived_before``, the data table's first active instant (archived, hence
    completed). ``key_prefixes``: only records whose key starts with one of them (the statistics
    of some columns), looked up in base files through their block index.

    Which log blocks follow the base file depends on the table version: in version 6 a log file
    names the base instant of its slice; from version 8 a log file belongs to the newest slice
    whose (compaction) instant is older than its delta commit's completion. ``listed``: the
    partition's files as listed just before (default: list them now).
    """
    out: list[tuple[str, dict]] = []
    for piece in latest_slices(storage, partition, mdt_completed=mdt_completed, data_completed=data_completed,
                               archived_before=archived_before, listed=listed):
        if piece.base is not None:
            out.extend(_decoded(storage, *piece.base, key_prefixes)[0][2])
        blocks = []
        for rel, info in piece.logs:
            for instant, position, records in _decoded(storage, rel, info, key_prefixes):
                if instant in piece.visible:
                    blocks.append((instant, rel, position, records))
        for *_order, records in sorted(blocks, key=lambda b: b[:3]):
            out.extend(records)
    return out


#: decoded records of MDT files read lately: (path, size, mtime, key prefixes) -> [(instant, block position, records)]
_DECODED: ParsedFiles[list[tuple[str, int, list[tuple[str, dict]]]]] = ParsedFiles(32)


def _decoded(storage: Storage, rel: str, info: FileInfo,
             prefixes: tuple[str, ...] | None = None) -> list[tuple[str, int, list[tuple[str, dict]]]]:
    """The records of an MDT base HFile (one entry) or of a log file's HFile data blocks (those
    whose key starts with one of ``prefixes``, if given).

    Every planning reads the same base file and logs, so their decoded records are kept per
    process, keyed by path, size and modification time as the listing saw them: a log file Hudi
    appended to, or a name written again after its delta commit was rolled back, is read afresh."""
    key = (storage.full(rel), info.size, info.mtime_ns, prefixes)
    found = _DECODED.get(key)
    if found is not None:
        return found
    data = storage.read_bytes(rel)
    name = posixpath.basename(rel)
    if name.endswith(".hfile"):
        out = [("", 0, list(decode_records(HFileReader(data, source=name), None, prefixes=prefixes)))]
    else:
        out = [(block.instant_time or "", position,
                list(decode_records(HFileReader(block.content, source=name), block.schema, prefixes=prefixes)))
               for position, block in enumerate(read_blocks(data, source=name))
               if block.block_type == BlockType.HFILE_DATA_BLOCK]
    if len(data) == info.size:  # the listing's size: the file did not grow meanwhile
        _DECODED.put(key, out)
    return out


def clear_cache() -> None:
    """Forget decoded MDT files (benchmarks measure cold reads with it)."""
    _DECODED.clear()


#: key -> (value, the Avro schema it is written in)
Cells = dict[bytes, tuple[bytes, str]]


def _log_blocks(storage: Storage, piece: MdtSlice) -> list[tuple[str, str, int, LogBlock]]:
    """The data and delete blocks of a slice's log files that readers trust, in merge order."""
    blocks = []
    for rel, _info in piece.logs:
        for position, block in enumerate(read_blocks(storage.read_bytes(rel), source=rel)):
            if block.instant_time in piece.visible and block.block_type in (
                    BlockType.HFILE_DATA_BLOCK, BlockType.DELETE_BLOCK):
                blocks.append((block.instant_time or "", rel, position, block))
    blocks.sort(key=lambda b: b[:3])
    return blocks


def merge_slice(storage: Storage, piece: MdtSlice, read: Callable[[HFileReader], Iterable[tuple[bytes, bytes]]],
                wanted: set[bytes] | None) -> Cells:
    """A file group's slice merged cell by cell, without decoding a record: its base file's cells,
    then its log blocks in order (data blocks replace a key's value, delete blocks drop it).
    ``read`` picks the cells of each HFile (all of them, or some keys through the block index);
    ``wanted``: the keys asked for (None: all)."""
    found: dict[bytes, tuple[bytes, str] | None] = {}
    if piece.base is not None:
        reader = HFileReader(storage.read_bytes(piece.base[0]), source=piece.base[0])
        schema = reader.file_info.get("schema", RECORD_SCHEMA.encode()).decode()
        found.update((k, (v, schema)) for k, v in read(reader))
    for _instant, rel, _pos, block in _log_blocks(storage, piece):
        if block.block_type == BlockType.HFILE_DATA_BLOCK:
            schema = block.schema or RECORD_SCHEMA
            found.update((k, (v, schema)) for k, v in read(HFileReader(block.content, source=rel)))
        else:
            for key in delete_block_records(block, source=rel).column("record_key").to_pylist():
                b = key.encode("utf-8")
                if wanted is None or b in wanted:
                    found[b] = None
    return {k: v for k, v in found.items() if v is not None}


def lookup_keys(storage: Storage, piece: MdtSlice, keys: Iterable[str]) -> Cells:
    """The cells of ``keys`` a file group holds, found through the block indexes of its base file
    and log blocks: only the data blocks that can hold the keys are read."""
    rows = sorted({k.encode("utf-8") for k in keys})
    return merge_slice(storage, piece, lambda reader: reader.get_many(rows).items(), set(rows))


def decode_value(value: bytes, schema_json: str) -> dict:
    """A ``HoodieMetadataRecord`` from an HFile value, in the schema it was written in."""
    import fastavro

    return fastavro.schemaless_reader(io.BytesIO(value), _parsed_schema(schema_json))  # type: ignore[return-value,call-overload]
