"""Hudi MOR log files (table version 6): blocks, their framing, and the block kinds pyhudi writes.

A log file is a sequence of blocks; each starts with the magic ``#HUDI#`` and ends with a reverse
pointer, so both a forward scan and a writer that only looks at the file's tail can check it.
Layout of a block (big-endian)::

    magic "#HUDI#" | int64 blockSize | int32 logFormatVersion (1) | int32 blockType
    | header: int32 n, n x (int32 key, int32 len, utf-8) | int64 contentLength | content
    | footer (like header) | int64 reversePointer (= blockSize + 6, magic .. end of footer)

Content by block type: AVRO_DATA (``int32 3``, ``int32 count``, count x (``int32 len``, Avro
datum)), PARQUET_DATA (a whole parquet file), DELETE (``int32 3``, ``int32 len``, Avro
``HoodieDeleteRecordList``), COMMAND (empty; the header says what to roll back).

Damaged files -- the rule this module follows:

* Damage that runs to the end of the file (a writer died mid-block: short read, bad magic,
  ``blockSize`` past EOF, fields that do not add up, reverse-pointer mismatch) is dropped with a
  warning; the complete blocks before it are returned. That is what a crashed writer leaves, and
  its instant never completed, so nothing committed is lost.
* Damage followed by a *fully valid* block (Java writers append to an existing log file after a
  failed attempt, e.g. a rollback command block behind a half-written data block) becomes a
  ``CORRUPT_BLOCK`` LogBlock covering the damaged bytes, and reading continues with the valid block.
  Java does the same (it re-syncs on the next magic); raising instead would make such files
  unreadable for pyhudi while Hudi itself reads them. Readers skip CORRUPT blocks.
* A non-empty file that does not start with the magic is not a log file: HudiCorruptFileError.
  Well-framed blocks of an unknown type or log format version, and block contents pyhudi cannot
  decode (Kryo delete blocks of Hudi < 0.14, Avro data block versions other than 3) raise
  HudiUnsupportedError / HudiCorruptFileError naming the file and offset, never return nothing.

hudi-rs fails on any damaged block, so pyhudi's writers never leave damage behind a block:
they append to an existing log file only after :func:`has_valid_tail` says it ends cleanly, and
roll over to a new log version otherwise.
"""

from __future__ import annotations

import enum
import io
import json
import logging
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pyhudi.errors import HudiCorruptFileError, HudiError, HudiUnsupportedError
from pyhudi.io.avro_codec import (
    FlatField,
    avro_to_arrow_schema,
    decode_datums,
    encode_datums,
    encode_flat,
)
from pyhudi.io.base_file import AVRO_SCHEMA_KEY, ParquetSettings, align, open_parquet_writer
from pyhudi.io.hfile import CellColumns, write_hfile
from pyhudi.storage.fs import Storage

__all__ = [
    "BlockType", "HeaderKey", "ROLLBACK_COMMAND", "MAGIC", "LogBlock", "read_blocks", "read_log_file",
    "encode_block", "has_valid_tail", "avro_data_block", "parquet_data_block", "hfile_data_block",
    "data_block_records", "unsupported_in_data_table",
    "avro_to_arrow_schema", "delete_block", "delete_block_records", "rollback_block",
]

log = logging.getLogger(__name__)

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
#: content version of AVRO_DATA and DELETE blocks written since Hudi 0.14 (the only one hudi-rs reads)
BLOCK_CONTENT_VERSION = 3
ROLLBACK_COMMAND = "0"

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MIN_BLOCK_SIZE = 4 + 4 + 4 + 8 + 4 + 8  # version, type, empty header, content length, empty footer, pointer


class BlockType(enum.IntEnum):
    """``HoodieLogBlockType`` ordinals."""

    COMMAND_BLOCK = 0
    DELETE_BLOCK = 1
    CORRUPT_BLOCK = 2
    AVRO_DATA_BLOCK = 3
    HFILE_DATA_BLOCK = 4
    PARQUET_DATA_BLOCK = 5
    CDC_DATA_BLOCK = 6


class HeaderKey(enum.IntEnum):
    """``HeaderMetadataType`` ordinals (keys of block headers and footers)."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


@dataclass(frozen=True)
class LogBlock:
    """One block as found in a file; ``content`` is still encoded (decode with the functions below)."""

    block_type: BlockType
    header: dict[int, str]
    content: bytes
    footer: dict[int, str]
    offset: int  # position of the block's magic in its file
    size: int  # bytes on disk, magic .. reverse pointer

    @property
    def instant_time(self) -> str | None:
        """The instant that wrote the block (data/delete) or the rollback instant (command)."""
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant_time(self) -> str | None:
        """For rollback command blocks: the instant whose blocks are void."""
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema(self) -> str | None:
        """Avro writer schema JSON of the block's records (incl. meta fields)."""
        return self.header.get(HeaderKey.SCHEMA)


# -- framing -------------------------------------------------------------------------------
def _encode_metadata(entries: Mapping[int, str] | None) -> bytes:
    items = list((entries or {}).items())
    out = [_I32.pack(len(items))]
    for key, value in items:
        raw = value.encode("utf-8")
        out.append(struct.pack(">ii", int(key), len(raw)))
        out.append(raw)
    return b"".join(out)


def encode_block(block_type: BlockType, header: Mapping[int, str], content: bytes,
                 footer: Mapping[int, str] | None = None) -> bytes:
    """The bytes of one complete block; header entries are written in the mapping's order."""
    return _frame(block_type, header, [content], footer)


def _frame(block_type: BlockType, header: Mapping[int, str], content: list[bytes],
           footer: Mapping[int, str] | None = None) -> bytes:
    """A block around content given in pieces (joined once: data blocks run to many megabytes)."""
    head = struct.pack(">ii", LOG_FORMAT_VERSION, int(block_type)) + _encode_metadata(header)
    content_length = sum(len(c) for c in content)
    tail = _encode_metadata(footer)
    body_length = len(head) + 8 + content_length + len(tail)
    return b"".join([MAGIC, _I64.pack(body_length + 8), head, _I64.pack(content_length), *content, tail,
                     _I64.pack(len(MAGIC) + 8 + body_length)])


class _Damage(Exception):
    """The bytes at an offset are not a complete, consistent block."""


def _read_metadata(data: bytes, pos: int, limit: int) -> tuple[dict[int, str], int]:
    if pos + 4 > limit:
        raise _Damage("header/footer runs past the block end")
    (count,) = _I32.unpack_from(data, pos)
    pos += 4
    if count < 0 or count * 8 > limit - pos:
        raise _Damage(f"implausible header/footer entry count {count}")
    entries: dict[int, str] = {}
    for _ in range(count):
        if pos + 8 > limit:
            raise _Damage("header/footer entry runs past the block end")
        key, length = struct.unpack_from(">ii", data, pos)
        pos += 8
        if length < 0 or pos + length > limit:
            raise _Damage("header/footer value runs past the block end")
        try:
            value = data[pos:pos + length].decode("utf-8")
        except UnicodeDecodeError as e:
            raise _Damage("header/footer value is not UTF-8") from e
        entries[HeaderKey(key) if key in HeaderKey._value2member_map_ else key] = value
        pos += length
    return entries, pos


def _parse_block(data: bytes, pos: int, source: str) -> LogBlock:
    """The block whose magic is at ``pos``; _Damage if it is not complete and consistent."""
    n = len(data)
    if data[pos:pos + 6] != MAGIC:
        raise _Damage("no #HUDI# magic" if n - pos >= 6 else "file ends inside a block's magic")
    if n - pos < 14:
        raise _Damage("file ends inside a block's size field")
    (block_size,) = _I64.unpack_from(data, pos + 6)
    end = pos + 14 + block_size
    if block_size < _MIN_BLOCK_SIZE:
        raise _Damage(f"blockSize {block_size} is too small for a block")
    if end > n:
        raise _Damage(f"blockSize {block_size} points {end - n} bytes past the end of the file")
    version, type_ordinal = struct.unpack_from(">ii", data, pos + 14)
    if version != LOG_FORMAT_VERSION:
        if end == n or data[end:end + 6] == MAGIC:
            raise HudiUnsupportedError(
                f"{source}: block at byte offset {pos} has log format version {version}; pyhudi reads "
                f"version {LOG_FORMAT_VERSION} (Hudi 0.x/1.x); compact the file group with Hudi first")
        raise _Damage(f"log format version {version}")
    limit = end - 8
    header, q = _read_metadata(data, pos + 22, limit)
    if q + 8 > limit:
        raise _Damage("contentLength runs past the block end")
    (content_length,) = _I64.unpack_from(data, q)
    q += 8
    if content_length < 0 or q + content_length > limit:
        raise _Damage(f"contentLength {content_length} runs past the block end")
    content = data[q:q + content_length]
    footer, q = _read_metadata(data, q + content_length, limit)
    if q != limit:
        raise _Damage(f"block fields end {limit - q} bytes before blockSize says")
    (pointer,) = _I64.unpack_from(data, limit)
    if pointer != limit - pos:
        raise _Damage(f"reverse pointer {pointer} does not match the block length {limit - pos}")
    if type_ordinal not in BlockType._value2member_map_:
        raise HudiUnsupportedError(f"{source}: block at byte offset {pos} has unknown block type {type_ordinal}; "
                                   "it was written by a newer Hudi than pyhudi supports")
    command = header.get(HeaderKey.COMMAND_BLOCK_TYPE)
    if type_ordinal == BlockType.COMMAND_BLOCK and command not in (None, ROLLBACK_COMMAND):
        # Hudi's log readers know the rollback command only and fail on any other ("not yet supported")
        raise HudiUnsupportedError(f"{source}: COMMAND_BLOCK at byte offset {pos} has command type {command}; "
                                   f"pyhudi (like Apache Hudi) knows only the rollback command ({ROLLBACK_COMMAND})")
    return LogBlock(BlockType(type_ordinal), header, bytes(content), footer, pos, end - pos)


def _next_valid(data: bytes, start: int, source: str) -> LogBlock | None:
    """The first complete block whose magic is at or after ``start`` (re-sync after damage)."""
    idx = data.find(MAGIC, start)
    while idx >= 0:
        try:
            return _parse_block(data, idx, source)
        except _Damage:
            idx = data.find(MAGIC, idx + 1)
    return None


def read_blocks(data: bytes, *, source: str) -> list[LogBlock]:
    """Every block of a log file's bytes, following the damage rule of the module docstring."""
    data = bytes(data)
    n = len(data)
    if n == 0:
        return []
    if data[:6] != MAGIC:
        if n < 6 and MAGIC.startswith(data):
            log.warning("%s: ignoring %d bytes of a block whose write was interrupted", source, n)
            return []
        raise HudiCorruptFileError(
            f"{source}: not a Hudi log file: byte offset 0 does not hold the #HUDI# magic; check that the path "
            "names a log file, or restore the file from a backup / roll back the instant that wrote it")
    blocks: list[LogBlock] = []
    pos = 0
    while pos < n:
        try:
            block = _parse_block(data, pos, source)
        except _Damage as damage:
            found = _next_valid(data, pos + 1, source)
            if found is None:
                log.warning("%s: ignoring the last %d bytes from byte offset %d (%s): an interrupted write",
                            source, n - pos, pos, damage)
                break
            log.warning("%s: bytes %d..%d are damaged (%s); a valid block follows, reading on",
                        source, pos, found.offset, damage)
            blocks.append(LogBlock(BlockType.CORRUPT_BLOCK, {}, data[pos:found.offset], {}, pos, found.offset - pos))
            block = found
        blocks.append(block)
        pos = block.offset + block.size
    return blocks


def read_log_file(storage: Storage, rel_path: str) -> list[LogBlock]:
    """Blocks of the log file ``rel_path`` of a table (see :func:`read_blocks`)."""
    return read_blocks(storage.read_bytes(rel_path), source=storage.full(rel_path))


def has_valid_tail(storage: Storage, rel_path: str) -> bool:
    """Whether a writer may append to the log file: its last block ends exactly at EOF.

    Reads only the trailing reverse pointer and the 14 bytes (magic, blockSize) it points to. An
    empty file counts as valid: appending to it yields a well-formed file.
    """
    size = storage.size(rel_path)
    if size == 0:
        return True
    if size < 14 + _MIN_BLOCK_SIZE:
        return False
    with storage.fs.open_input_file(storage.full(rel_path)) as f:
        (pointer,) = _I64.unpack(f.read_at(8, size - 8))
        start = size - 8 - pointer
        if start < 0 or pointer < 14:
            return False
        head = f.read_at(14, start)
    if len(head) != 14 or head[:6] != MAGIC:
        return False
    (block_size,) = _I64.unpack_from(head, 6)
    return start + 14 + block_size == size


# -- data blocks ---------------------------------------------------------------------------
def _data_header(instant_time: str, avro_schema: str, partial: bool) -> dict[int, str]:
    """A data block's header; a block of partial records also says ``IS_PARTIAL`` = ``"true"``
    (``HoodieAppendHandle.getUpdatedHeader``: ``Boolean.toString(true)``), its ``SCHEMA`` then
    being the meta fields and the updated columns only."""
    header: dict[int, str] = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: avro_schema}
    if partial:
        header[HeaderKey.IS_PARTIAL] = "true"
    return header


def avro_data_block(rows: pa.Table, avro_schema: str, instant_time: str, *, partial: bool = False) -> bytes:
    """An AVRO_DATA_BLOCK (content version 3) with ``rows`` encoded under ``avro_schema``.

    ``avro_schema`` is the writer schema incl. the five meta fields (it goes into the header, and
    readers decode with it); ``rows`` has those columns (missing nullable ones are written null).
    ``partial``: the rows are partial records (Hudi 1.x partial updates, see :func:`is_partial`).
    """
    content = [struct.pack(">ii", BLOCK_CONTENT_VERSION, rows.num_rows), encode_datums(rows, avro_schema)]
    header = _data_header(instant_time, avro_schema, partial)
    return _frame(BlockType.AVRO_DATA_BLOCK, header, content)


def parquet_data_block(rows: pa.Table, avro_schema: str, instant_time: str, *, compression: str = "gzip",
                       dictionary: bool = True, partial: bool = False) -> bytes:
    """A PARQUET_DATA_BLOCK: ``rows`` (aligned to ``avro_schema``) as one in-memory parquet file,
    with the codec and encodings of base files."""
    table = align(rows, avro_to_arrow_schema(avro_schema))
    sink = pa.BufferOutputStream()
    settings = ParquetSettings(avro_schema=avro_schema, codec=compression, dictionary=dictionary)
    # footer like Hudi's Avro parquet writer: readers resolve columns through parquet.avro.schema
    with open_parquet_writer(sink, table.schema, settings, table) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({AVRO_SCHEMA_KEY: avro_schema, "writer.model.name": "avro"})
    header = _data_header(instant_time, avro_schema, partial)
    return encode_block(BlockType.PARQUET_DATA_BLOCK, header, sink.getvalue().to_pybytes())


def hfile_data_block(cells: list[tuple[bytes, bytes]] | CellColumns, avro_schema: str, instant_time: str, *,
                     block_size: int = 1024 * 1024, codec: str = "GZ") -> bytes:
    """An HFILE_DATA_BLOCK, the metadata table's log block: an HFile of ``cells`` (record key,
    Avro binary of the record; pairs are sorted here, columns must come sorted), its file info
    naming the schema as Hudi's does."""
    ordered = cells if isinstance(cells, CellColumns) else sorted(cells)
    content = write_hfile(ordered, block_size=block_size, codec=codec,
                          file_info={"schema": avro_schema.encode("utf-8")})
    header: dict[int, str] = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: avro_schema}
    return encode_block(BlockType.HFILE_DATA_BLOCK, header, content)


def block_where(block: LogBlock) -> str:
    """Where ``block`` is in its file, for messages: its type and byte offset."""
    return f"{block.block_type.name} at byte offset {block.offset}"


#: what each block type pyhudi does not read in a data table's log files is, for the error naming it
_NOT_READ = {
    BlockType.HFILE_DATA_BLOCK: "records in an HFile (Hudi writes them for HFile tables; pyhudi reads data tables' "
                                "Avro and parquet data blocks only)",
    BlockType.CDC_DATA_BLOCK: "change data, which belongs in a .cdc file, not among a file slice's records",
}


def unsupported_in_data_table(block: LogBlock, source: str) -> HudiUnsupportedError:
    """The error for a visible block of a data table's log file that holds records pyhudi cannot
    read as the table's: naming the block type, the file and the offset. Skipping it would drop the
    records it holds from every read, compaction and clustering."""
    what = _NOT_READ.get(block.block_type, "a block pyhudi does not read in a data table")
    return HudiUnsupportedError(
        f"{source}: {block_where(block)} (instant {block.instant_time}) holds {what}; pyhudi does not read it, and "
        "leaving its records out would give a partial answer. Compact the file group with Apache Hudi, or use "
        "Apache Hudi's own Spark bundle for this table")


def is_partial(block: LogBlock) -> bool:
    """Whether a data block holds partial records (Hudi 1.x partial updates: the ``IS_PARTIAL``
    header, ``HoodieAppendHandle`` with ``hoodie.write.partial.update.schema``; the block's schema
    is the meta fields and the updated columns only, and a record overlays just those on the record
    before it: :mod:`pyhudi.read.partial`)."""
    return str(block.header.get(HeaderKey.IS_PARTIAL, "")).strip().lower() == "true"


def block_fields(block: LogBlock, source: str) -> set[str]:
    """The top-level field names of a data block's ``SCHEMA`` header (a partial block's columns)."""
    try:
        return {f["name"] for f in json.loads(block.schema or "").get("fields", [])}
    except (ValueError, TypeError, KeyError, AttributeError):
        raise HudiCorruptFileError(
            f"{source}: {block_where(block)} has a SCHEMA header that is not an Avro record schema") from None


def _avro_records(block: LogBlock, source: str) -> pa.Table:
    content = block.content
    if block.schema is None:
        raise HudiCorruptFileError(
            f"{source}: {block_where(block)} has no SCHEMA header; its records cannot be decoded")
    if len(content) < 8:
        raise HudiCorruptFileError(f"{source}: {block_where(block)} content is {len(content)} bytes, too short")
    version, count = struct.unpack_from(">ii", content, 0)
    if version != BLOCK_CONTENT_VERSION:
        raise HudiUnsupportedError(
            f"{source}: {block_where(block)} has content version {version}; pyhudi reads version 3 (Hudi >= 0.7); "
            "compact the file group with Hudi to rewrite it")
    if count < 0 or count * 4 > len(content) - 8:
        raise HudiCorruptFileError(f"{source}: {block_where(block)} claims {count} records in {len(content)} bytes")
    starts: list[int] = []
    ends: list[int] = []
    pos, total = 8, len(content)
    unpack = _I32.unpack_from
    try:
        for _ in range(count):  # sequential by nature: each length says where the next one is
            (length,) = unpack(content, pos)
            starts.append(pos + 4)
            pos += 4 + length
            ends.append(pos)
    except struct.error:
        raise HudiCorruptFileError(
            f"{source}: {block_where(block)} ends after {len(starts)} of {count} records") from None
    begin, end = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
    if (end < begin).any() or pos != total:
        raise HudiCorruptFileError(f"{source}: {block_where(block)} record lengths do not add up to its content")
    return decode_datums(content, begin, end, block.schema, source=f"{source}: {block_where(block)}")


def data_block_records(block: LogBlock, arrow_schema: pa.Schema | None = None, *, source: str = "log file") -> pa.Table:
    """The records of an AVRO_DATA, PARQUET_DATA or CDC_DATA block as Arrow (a CDC block is an Avro
    data block of change records: Hudi's ``HoodieCDCDataBlock extends HoodieAvroDataBlock``).

    With ``arrow_schema`` the result has exactly its columns in its order (missing ones null,
    others cast: int -> long after schema evolution...). Without it, the columns and types are those
    of the block's Avro schema (:func:`avro_to_arrow_schema`).
    """
    if block.block_type in (BlockType.AVRO_DATA_BLOCK, BlockType.CDC_DATA_BLOCK):
        table = _avro_records(block, source)
    elif block.block_type == BlockType.PARQUET_DATA_BLOCK:
        try:
            table = pq.read_table(pa.BufferReader(block.content))
        except (pa.ArrowInvalid, OSError) as e:
            raise HudiCorruptFileError(f"{source}: {block_where(block)} is not a readable parquet file ({e})") from e
        if arrow_schema is None and block.schema is not None:
            arrow_schema = avro_to_arrow_schema(block.schema)
        table = table.replace_schema_metadata(None)
    else:
        raise HudiError(f"{source}: {block_where(block)} is not a data block")
    return table if arrow_schema is None else align(table, arrow_schema, source=f"{source}: {block_where(block)}")


# -- delete blocks -------------------------------------------------------------------------
def _wrapper(name: str, value_type: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "org.apache.hudi.avro.model",
            "fields": [{"name": "value", "type": value_type}]}


#: ``orderingVal`` union of Hudi 0.14/0.15 (and 1.0) delete records: null or one value wrapper
_ORDERING_WRAPPERS = [
    _wrapper("BooleanWrapper", "boolean"), _wrapper("IntWrapper", "int"), _wrapper("LongWrapper", "long"),
    _wrapper("FloatWrapper", "float"), _wrapper("DoubleWrapper", "double"), _wrapper("BytesWrapper", "bytes"),
    _wrapper("StringWrapper", "string"), _wrapper("DateWrapper", "int"),
    _wrapper("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
    _wrapper("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
    _wrapper("TimestampMicrosWrapper", "long"),
]
_NUMERIC_WRAPPERS = {"IntWrapper", "LongWrapper", "FloatWrapper", "DoubleWrapper"}
_DELETE_LIST_SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "HoodieDeleteRecordList", "namespace": "org.apache.hudi.avro.model",
    "fields": [{"name": "deleteRecordList", "type": {"type": "array", "items": {
        "type": "record", "name": "HoodieDeleteRecord", "fields": [
            {"name": "recordKey", "type": ["null", "string"], "default": None},
            {"name": "partitionPath", "type": ["null", "string"], "default": None},
            {"name": "orderingVal", "type": ["null", *_ORDERING_WRAPPERS], "default": None},
        ]}}}],
})
#: a delete record as a flat datum: two nullable strings, then union branch 2 (IntWrapper) and int 0
_DELETE_PLAN = [FlatField("recordKey", "string", None, 0), FlatField("partitionPath", "string", None, 0),
                FlatField("branch", "int", None, -1), FlatField("value", "int", None, -1)]


def _zigzag_varint(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _string_array(values: pa.Array | pa.ChunkedArray | list[str]) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return values.cast(pa.string()) if isinstance(values, pa.Array) else pa.array(values, pa.string())


def delete_block(record_keys: pa.Array | list[str], partition_paths: pa.Array | list[str], instant_time: str,
                 *, avro_schema: str | None = None) -> bytes:
    """A DELETE_BLOCK (content version 3) deleting the given keys, ordering value ``IntWrapper(0)``.

    Each record is ``recordKey``, ``partitionPath``, then union branch 2 with int 0 (bytes ``04 00``):
    Java 0.14/0.15 decode it as IntWrapper(0) ("no ordering: the delete wins by commit order") and
    hudi-rs, whose union differs, as integer 0 with the same meaning. ``avro_schema`` (the table's
    writer schema) goes into the SCHEMA header as Spark writers do; readers do not need it.
    """
    keys, paths = _string_array(record_keys), _string_array(partition_paths)
    if len(keys) != len(paths):
        raise ValueError(f"{len(keys)} record keys but {len(paths)} partition paths")
    n = len(keys)
    rows = pa.table({"recordKey": keys, "partitionPath": paths,
                     "branch": pa.array(np.full(n, 2, np.int32)), "value": pa.array(np.zeros(n, np.int32))})
    payload = (_zigzag_varint(n) + encode_flat(rows, _DELETE_PLAN, length_prefix=False) if n else b"") + b"\x00"
    header: dict[int, str] = {HeaderKey.INSTANT_TIME: instant_time}
    if avro_schema is not None:
        header[HeaderKey.SCHEMA] = avro_schema
    content = struct.pack(">ii", BLOCK_CONTENT_VERSION, len(payload)) + payload
    return encode_block(BlockType.DELETE_BLOCK, header, content)


def delete_block_records(block: LogBlock, *, source: str = "log file") -> pa.Table:
    """Deleted keys of a DELETE_BLOCK: record_key, partition_path, ordering_is_default, ordering_value.

    ``ordering_is_default`` is true when the delete carries no ordering value or a numeric 0 (the
    delete then wins over earlier records regardless of their ordering field); ``ordering_value``
    is the unwrapped value as ``str()``, null when absent.
    """
    if block.block_type != BlockType.DELETE_BLOCK:
        raise HudiError(f"{source}: {block_where(block)} is not a delete block")
    content = block.content
    if len(content) < 8:
        raise HudiCorruptFileError(f"{source}: {block_where(block)} content is {len(content)} bytes, too short")
    version, length = struct.unpack_from(">ii", content, 0)
    if version in (1, 2):
        raise HudiUnsupportedError(
            f"{source}: {block_where(block)} has content version {version} (Kryo-serialized keys, Hudi < 0.14), which "
            "only Java can decode; compact the file group with Hudi 0.14+ before reading it with pyhudi")
    if version != BLOCK_CONTENT_VERSION:
        raise HudiUnsupportedError(f"{source}: {block_where(block)} has unknown content version {version}")
    if length < 0 or 8 + length > len(content):
        raise HudiCorruptFileError(f"{source}: {block_where(block)} payload length {length} exceeds its content")
    stream = io.BytesIO(content[8:8 + length])
    problem = "bytes left over"
    try:
        decoded = fastavro.schemaless_reader(stream, _DELETE_LIST_SCHEMA, None, return_record_name=True)
    except (EOFError, ValueError, LookupError, OverflowError, UnicodeDecodeError) as e:
        decoded, problem = None, str(e)
    if not isinstance(decoded, dict) or stream.tell() != length:
        raise HudiCorruptFileError(
            f"{source}: {block_where(block)} is not a Hudi 0.14/0.15 HoodieDeleteRecordList ({problem}); the file is "
            "damaged, or it comes from Hudi >= 1.1 whose delete records pyhudi does not read")
    keys: list[str | None] = []
    paths: list[str | None] = []
    defaults: list[bool] = []
    values: list[str | None] = []
    for rec in decoded["deleteRecordList"]:
        keys.append(rec["recordKey"])
        paths.append(rec["partitionPath"])
        ordering = rec["orderingVal"]
        if ordering is None:
            defaults.append(True)
            values.append(None)
            continue
        name, wrapped = ordering
        value = wrapped["value"]
        defaults.append(name.rsplit(".", 1)[-1] in _NUMERIC_WRAPPERS and value == 0)
        values.append(str(value))
    return pa.table({"record_key": pa.array(keys, pa.string()), "partition_path": pa.array(paths, pa.string()),
                     "ordering_is_default": pa.array(defaults, pa.bool_()),
                     "ordering_value": pa.array(values, pa.string())})


# -- command blocks ------------------------------------------------------------------------
def rollback_block(rollback_instant: str, target_instant: str) -> bytes:
    """A COMMAND_BLOCK voiding the blocks of ``target_instant`` in its file slice.

    Header order is the one Java writes (INSTANT_TIME, COMMAND_BLOCK_TYPE, TARGET_INSTANT_TIME),
    so the bytes equal a Hudi-written rollback block.
    """
    header: dict[int, str] = {HeaderKey.INSTANT_TIME: rollback_instant, HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND,
              HeaderKey.TARGET_INSTANT_TIME: target_instant}
    return encode_block(BlockType.COMMAND_BLOCK, header, b"")
