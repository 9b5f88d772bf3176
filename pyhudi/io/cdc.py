"""Change data files of a CDC table (``hoodie.table.cdc.enabled``): names, schemas, blocks.

What Apache Hudi writes, and pyhudi with it (Hudi 0.13+; master of 2024 checked):

* A write that rewrites a file group's base file with CDC on (``HoodieMergeHandleWithChangeLog``,
  chosen by ``HoodieMergeHandleFactory`` whenever ``HoodieTableConfig.isCDCEnabled``) also writes
  the changes it made into a log file of that file group named with the write's instant, version
  1, the task's write token and the suffix ``.cdc`` (``HoodieWriteHandle.createLogWriter(instant,
  HoodieCDCUtils.CDC_LOGFILE_SUFFIX)``, which ``HoodieLogFormat.WriterBuilder`` appends to the
  token): ``.{fileId}_{instant}.log.1_{token}.cdc`` (:func:`cdc_file_name`), then ``.log.2_...``
  and on where it rolls over past ``hoodie.logfile.max.size`` (:func:`pyhudi.write.cdc.write_cdc_file`).
* The file holds ``CDC_DATA_BLOCK`` s (``HoodieCDCDataBlock``, block type 6): Avro data blocks
  (content version 3, record count, length-prefixed datums) whose header has INSTANT_TIME and
  SCHEMA (``HoodieCDCLogger`` constructor), the schema being the mode's CDC schema.
* The schema of each ``hoodie.table.cdc.supplemental.logging.mode`` (``HoodieCDCUtils
  .schemaBySupplementalLoggingMode``): OP_KEY_ONLY ``Record{op, record_key}`` with ``["string",
  "null"]`` unions; DATA_BEFORE ``CDC{op, record_key, before}``; DATA_BEFORE_AFTER ``CDC{op,
  ts_ms, before, after}`` -- those with ``["null", T]`` unions, doc ``""`` and default null, the
  record named ``CDC`` in the table schema's namespace. ``before``/``after`` are the table's
  records WITHOUT the five meta fields (``HoodieCDCLogger``: ``removeMetadataFields`` of the
  writer schema; ``removeCommitMetadata`` of each image), nullable. ``ts_ms`` is the writing
  instant (``HoodieCDCLogger.getTransformer``: ``commitTime``), ``op`` one of ``i``, ``u``, ``d``
  (``HoodieCDCOperation``).

Encoding is column-wise (:func:`~pyhudi.io.avro_codec.encode_rows`): a nullable record is its
union branch byte followed, when present, by the record's own datum, so the images are encoded
once as table records and stitched behind the ``op``/key/``ts_ms`` bytes with Arrow kernels.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import HudiCorruptFileError, HudiError
from pyhudi.io.avro_codec import (
    avro_to_arrow_schema,
    decode_fields,
    encode_fastavro,
    encode_rows,
    flat_plan,
    load_schema,
)
from pyhudi.io.avro_schema import META_FIELDS
from pyhudi.io.file_names import parse_log_file
from pyhudi.io.log_format import (
    BLOCK_CONTENT_VERSION,
    BlockType,
    HeaderKey,
    LogBlock,
    data_block_records,
    encode_block,
    read_blocks,
)
from pyhudi.storage.fs import Storage

__all__ = [
    "CDC_SUFFIX", "OP", "TS_MS", "BEFORE", "AFTER", "RECORD_KEY", "INSERT", "UPDATE", "DELETE", "LoggingMode",
    "cdc_file_name", "is_cdc_file", "image_avro_schema", "cdc_avro_schema", "Changes", "cdc_blocks",
    "read_cdc_file", "cdc_records",
]

#: ``HoodieCDCUtils.CDC_LOGFILE_SUFFIX``
CDC_SUFFIX = ".cdc"
#: column names of change records (``HoodieCDCUtils``)
OP, TS_MS, BEFORE, AFTER, RECORD_KEY = "op", "ts_ms", "before", "after", "record_key"
#: ``HoodieCDCOperation`` values
INSERT, UPDATE, DELETE = "i", "u", "d"


class LoggingMode(str, enum.Enum):
    """``HoodieCDCSupplementalLoggingMode``: what a change data file holds besides ``op``."""

    OP_KEY_ONLY = "OP_KEY_ONLY"
    DATA_BEFORE = "DATA_BEFORE"
    DATA_BEFORE_AFTER = "DATA_BEFORE_AFTER"

    @classmethod
    def of(cls, value: str | LoggingMode) -> LoggingMode:
        """The mode of a property or option value, Hudi's lower-case names accepted (Hudi reads
        the property upper-cased: ``HoodieTableConfig.cdcSupplementalLoggingMode``)."""
        if isinstance(value, LoggingMode):
            return value
        try:
            return cls(str(value).strip().upper())
        except ValueError:
            raise HudiError(f"{value!r} is no CDC supplemental logging mode; use one of "
                            f"{', '.join(m.value for m in cls)} (or their lower-case names)") from None

    @property
    def columns(self) -> tuple[str, ...]:
        """The fields of the mode's change records, in the order Hudi's schema has them."""
        return {LoggingMode.OP_KEY_ONLY: (OP, RECORD_KEY), LoggingMode.DATA_BEFORE: (OP, RECORD_KEY, BEFORE),
                LoggingMode.DATA_BEFORE_AFTER: (OP, TS_MS, BEFORE, AFTER)}[self]


def cdc_file_name(file_id: str, instant: str, token: str, version: int = 1) -> str:
    """``.{fileId}_{instant}.log.{version}_{token}.cdc``: the change data file a write at
    ``instant`` makes for a file group (``HoodieLogFormat.WriterBuilder.build`` with a suffix)."""
    return f".{file_id}_{instant}.log.{version}_{token}{CDC_SUFFIX}"


def is_cdc_file(name: str) -> bool:
    parsed = parse_log_file(name.rsplit("/", 1)[-1])
    return parsed is not None and parsed.cdc


# -- schemas -------------------------------------------------------------------------------
def image_avro_schema(writer_schema: str | dict[str, Any]) -> dict[str, Any]:
    """The table's record schema without the five meta fields (``HoodieAvroUtils
    .removeMetadataFields``): the type of ``before`` and ``after``."""
    record = dict(load_schema(writer_schema))
    record["fields"] = [f for f in record["fields"] if f["name"] not in META_FIELDS]
    return record


def _nullable_string(name: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", "string"], "doc": "", "default": None}


def cdc_avro_schema(mode: LoggingMode | str, writer_schema: str | dict[str, Any]) -> dict[str, Any]:
    """The record schema of a mode's change data blocks (``HoodieCDCUtils.schemaBySupplementalLoggingMode``).

    ``writer_schema``: the table's record schema (with or without meta fields). In DATA_BEFORE_AFTER
    ``after`` names the image type ``before`` defined, as Avro's ``Schema.toString`` writes a named
    type used twice."""
    mode = LoggingMode.of(mode)
    if mode is LoggingMode.OP_KEY_ONLY:  # HoodieCDCUtils.CDC_SCHEMA_OP_AND_RECORDKEY_STRING, verbatim
        return {"type": "record", "name": "Record", "fields": [
            {"name": OP, "type": ["string", "null"]}, {"name": RECORD_KEY, "type": ["string", "null"]}]}
    image = image_avro_schema(writer_schema)
    namespace = image.get("namespace")
    name = image["name"] if "." in image["name"] or not namespace else f"{namespace}.{image['name']}"
    before = {"name": BEFORE, "type": ["null", image], "doc": "", "default": None}
    if mode is LoggingMode.DATA_BEFORE:
        fields = [_nullable_string(OP), _nullable_string(RECORD_KEY), before]
    else:
        fields = [_nullable_string(OP), _nullable_string(TS_MS), before,
                  {"name": AFTER, "type": ["null", name], "doc": "", "default": None}]
    out: dict[str, Any] = {"type": "record", "name": "CDC"}
    if namespace:
        out["namespace"] = namespace
    out["fields"] = fields
    return out


# -- encoding ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Changes:
    """The change records of one file group in one write, column-wise.

    ``op`` and ``record_key`` have one entry per change; ``before`` and ``after`` are tables of the
    image columns (meta columns are dropped) with one row per change, ``before_valid`` /
    ``after_valid`` saying which rows have that image (deletes have no after image, inserts no
    before image).
    """

    op: pa.Array
    record_key: pa.Array
    before: pa.Table
    before_valid: np.ndarray
    after: pa.Table
    after_valid: np.ndarray

    def __len__(self) -> int:
        return len(self.op)


_I32 = struct.Struct(">i")
_BRANCH_NULL, _BRANCH_VALUE = b"\x00", b"\x02"
_EMPTY = pa.scalar(b"", pa.large_binary())


def _datums(table: pa.Table, record: dict[str, Any]) -> pa.Array:
    """One Avro datum per row of ``table`` under ``record``, column-wise where the schema allows."""
    plan = flat_plan(record)
    if plan is not None:
        rows = encode_rows(table, plan)
        if rows is not None:
            return rows
        return pa.array([b""] * table.num_rows, pa.large_binary())
    # a schema whose fields share named types: whole records through fastavro, then cut apart
    data = encode_fastavro(table, record, length_prefix=True)
    out, pos = [], 0
    for _ in range(table.num_rows):
        (length,) = _I32.unpack_from(data, pos)
        out.append(data[pos + 4:pos + 4 + length])
        pos += 4 + length
    return pa.array(out, pa.large_binary())


def _string_datums(values: pa.Array, *, null_first: bool) -> pa.Array:
    """Datums of a nullable string union per row (``["null","string"]`` or ``["string","null"]``)."""
    record = {"type": "record", "name": "v", "fields": [
        {"name": "v", "type": ["null", "string"] if null_first else ["string", "null"]}]}
    return _datums(pa.table({"v": values.cast(pa.string())}), record)


def _image_datums(images: pa.Table, valid: np.ndarray, record: dict[str, Any]) -> pa.Array:
    """Per row: union branch 0 (null) or branch 1 followed by the image's record datum."""
    n = len(valid)
    present = np.flatnonzero(valid)
    if len(present) == 0:
        return pa.repeat(pa.scalar(_BRANCH_NULL, pa.large_binary()), n)
    columns = [f["name"] for f in record["fields"]]
    subset = images.select([c for c in columns if c in images.column_names]).take(pa.array(present))
    encoded = pc.binary_join_element_wise(pa.scalar(_BRANCH_VALUE, pa.large_binary()), _datums(subset, record), _EMPTY)
    if len(present) == n:
        return encoded
    index = np.full(n, -1, dtype=np.int64)
    index[present] = np.arange(len(present), dtype=np.int64)
    spread = pc.take(encoded, pa.array(index, mask=~valid))
    return pc.fill_null(spread, pa.scalar(_BRANCH_NULL, pa.large_binary()))


def _record_datums(changes: Changes, mode: LoggingMode, instant: str, schema: dict[str, Any]) -> pa.Array:
    n = len(changes)
    if mode is LoggingMode.OP_KEY_ONLY:
        pieces = [_string_datums(changes.op, null_first=False), _string_datums(changes.record_key, null_first=False)]
    else:
        image = schema["fields"][2]["type"][1]
        pieces = [_string_datums(changes.op, null_first=True)]
        if mode is LoggingMode.DATA_BEFORE:
            pieces.append(_string_datums(changes.record_key, null_first=True))
        else:
            pieces.append(_string_datums(pa.repeat(pa.scalar(instant, pa.string()), n), null_first=True))
        pieces.append(_image_datums(changes.before, changes.before_valid, image))
        if mode is LoggingMode.DATA_BEFORE_AFTER:
            pieces.append(_image_datums(changes.after, changes.after_valid, image))
    return pc.binary_join_element_wise(*pieces, _EMPTY)


def _content_bytes(datums: pa.Array) -> bytes:
    """``int32 len, datum`` of every row, concatenated."""
    n = len(datums)
    if n == 0:
        return b""
    lengths = pc.binary_length(datums).to_numpy(zero_copy_only=False)
    prefix = np.asarray(lengths, dtype=">i4").view(np.uint8).reshape(n, 4)
    prefixes = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(np.arange(0, 4 * n + 1, 4,
                                     dtype=np.int64)), pa.py_buffer(np.ascontiguousarray(prefix))])
    joined = pc.binary_join_element_wise(prefixes, datums, _EMPTY)
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64, count=n + 1, offset=joined.offset * 8)
    return joined.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0])).to_pybytes()


def cdc_blocks(changes: Changes, mode: LoggingMode | str, writer_schema: str | dict[str, Any], instant: str, *,
               max_block_size: int = 256 * 1024 * 1024) -> Iterator[bytes]:
    """The CDC_DATA_BLOCKs of ``changes`` (at least one, possibly empty, as ``HoodieCDCLogger.close``
    flushes one), each holding at most about ``max_block_size`` bytes of records
    (``hoodie.logfile.data.block.max.size``, ``HoodieCDCLogger.flushIfNeeded``)."""
    mode = LoggingMode.of(mode)
    schema = cdc_avro_schema(mode, writer_schema)
    header: dict[int, str] = {HeaderKey.INSTANT_TIME: instant,
                              HeaderKey.SCHEMA: json.dumps(schema, separators=(",", ":"))}
    datums = _record_datums(changes, mode, instant, schema) if len(changes) else pa.array([], pa.large_binary())
    n = len(datums)
    sizes = pc.binary_length(datums).to_numpy(zero_copy_only=False).astype(np.int64) + 4 if n else np.zeros(0)
    ends = np.cumsum(sizes)
    start = 0
    while True:
        limit = (ends[start - 1] if start else 0) + max_block_size
        stop = max(start + 1, int(np.searchsorted(ends, limit, side="right"))) if start < n else n
        piece = datums.slice(start, stop - start)
        content = struct.pack(">ii", BLOCK_CONTENT_VERSION, stop - start) + _content_bytes(piece)
        yield encode_block(BlockType.CDC_DATA_BLOCK, header, content)
        start = stop
        if start >= n:
            return


# -- decoding ------------------------------------------------------------------------------
def _mode_of(block: LogBlock, source: str) -> LoggingMode:
    if block.schema is None:
        raise HudiCorruptFileError(f"{source}: CDC_DATA_BLOCK at byte offset {block.offset} has no SCHEMA header")
    names = tuple(f["name"] for f in load_schema(block.schema)["fields"])
    for mode in LoggingMode:
        if names == mode.columns:
            return mode
    raise HudiCorruptFileError(f"{source}: CDC_DATA_BLOCK at byte offset {block.offset} has fields {names}, "
                               "which are no CDC logging mode's")


def cdc_records(block: LogBlock, *, source: str = "cdc file") -> tuple[LoggingMode, pa.Table]:
    """The change records of one CDC_DATA_BLOCK: its mode and a table of the mode's columns
    (``before``/``after`` as struct columns of the image schema, null where absent)."""
    if block.block_type != BlockType.CDC_DATA_BLOCK:
        raise HudiError(f"{source}: {block.block_type.name} at byte offset {block.offset} is not a CDC data block")
    mode = _mode_of(block, source)
    record = load_schema(block.schema or "")
    fast = _decode_columnwise(block, record, source)
    if fast is not None:
        return mode, fast
    # the content is an Avro data block's: decode it as one (per record where the images share named types)
    table = data_block_records(dataclasses.replace(block, block_type=BlockType.AVRO_DATA_BLOCK), source=source)
    return mode, table.select(list(mode.columns))


def _record_bounds(content: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    if len(content) < 8:
        raise HudiCorruptFileError(f"{where}: content is {len(content)} bytes, too short")
    version, count = struct.unpack_from(">ii", content, 0)
    if version != BLOCK_CONTENT_VERSION or count < 0 or count * 4 > len(content) - 8:
        raise HudiCorruptFileError(f"{where}: content version {version} with {count} records is not a CDC block's")
    starts = np.empty(count, dtype=np.int64)
    ends = np.empty(count, dtype=np.int64)
    pos = 8
    try:
        for i in range(count):  # sequential by nature: each length says where the next record is
            (length,) = _I32.unpack_from(content, pos)
            starts[i] = pos + 4
            pos += 4 + length
            ends[i] = pos
    except struct.error:
        raise HudiCorruptFileError(f"{where}: ends inside its records") from None
    if pos != len(content) or (ends < starts).any():
        raise HudiCorruptFileError(f"{where}: record lengths do not add up to its content")
    return starts, ends


def _decode_columnwise(block: LogBlock, record: dict[str, Any], source: str) -> pa.Table | None:
    """The block's records decoded column-wise: the string fields, then each image as its union
    branch and, where present, the table record's fields -- None when the image schema has no
    column-wise plan."""
    fields = record["fields"]
    image = next((f["type"][1] for f in fields if isinstance(f["type"], list) and isinstance(f["type"][1], dict)),
                 None)
    image_plan = flat_plan(image) if image is not None else None
    if image is not None and image_plan is None:
        return None
    where = f"{source}: CDC_DATA_BLOCK at byte offset {block.offset}"
    data = block.content
    starts, ends = _record_bounds(data, where)
    buf = np.frombuffer(data, dtype=np.uint8)
    pos = starts.copy()
    n = len(pos)
    columns: list[pa.Array] = []
    names: list[str] = []
    try:
        for f in fields:
            if isinstance(f["type"], list) and f["type"] in (["null", "string"], ["string", "null"]):
                plan = flat_plan({"type": "record", "name": "x", "fields": [f]})
                assert plan is not None
                columns += decode_fields(data, pos, ends, plan, pa.schema([(f["name"], pa.string())]))
            else:  # a nullable image: ["null", record] (or the record's name)
                assert image is not None and image_plan is not None
                branch = buf[np.minimum(pos, max(len(buf) - 1, 0))] if n else np.zeros(0, np.uint8)
                if ((branch != 0) & (branch != 2)).any() or (pos >= ends).any():
                    raise HudiCorruptFileError(f"{where}: bad union branch in field {f['name']}")
                valid = branch == 2
                pos += 1
                at = pos[valid]
                arrow = avro_to_arrow_schema(image)
                values = decode_fields(data, at, ends[valid], image_plan, arrow)
                pos[valid] = at
                struct_ = pa.StructArray.from_arrays(values, fields=list(arrow)) if values else \
                    pa.array([{}] * int(valid.sum()), pa.struct(list(arrow)))
                index = np.cumsum(valid) - 1
                columns.append(pc.take(struct_, pa.array(index, mask=~valid)) if n else
                               pa.array([], pa.struct(list(arrow))))
            names.append(f["name"])
        if (pos != ends).any():
            raise HudiCorruptFileError(f"{where}: records have bytes left after the last field")
    except HudiCorruptFileError:
        raise
    except Exception as e:  # noqa: BLE001 -- any decoding failure means the bytes are not these records
        raise HudiCorruptFileError(f"{where}: records do not decode with the block's schema ({e})") from e
    return pa.Table.from_arrays(columns, names=names)


def read_cdc_file(storage: Storage, rel_path: str) -> pa.Table:
    """Every change record of the change data file ``rel_path`` (relative to the table), in the
    order written: the columns of its mode (``op``, ``record_key`` / ``ts_ms``, ``before``,
    ``after``; images are struct columns of the table schema without meta fields)."""
    source = storage.full(rel_path)
    blocks = [b for b in read_blocks(storage.read_bytes(rel_path), source=source)
              if b.block_type != BlockType.CORRUPT_BLOCK]
    if not blocks:
        raise HudiCorruptFileError(f"{source}: holds no CDC data block; the write that made it did not finish")
    tables = []
    modes = set()
    for block in blocks:
        mode, table = cdc_records(block, source=source)
        modes.add(mode)
        tables.append(table)
    if len(modes) > 1:
        raise HudiCorruptFileError(f"{source}: blocks of several CDC logging modes ({sorted(m.value for m in modes)})")
    if len({t.schema for t in tables}) > 1:
        target = tables[-1].schema
        tables = [t.cast(target) if t.schema != target else t for t in tables]
    return pa.concat_tables(tables)


def image_arrow_schema(writer_schema: str | dict[str, Any]) -> pa.Schema:
    """The Arrow schema of ``before``/``after`` images (the table's columns without meta fields)."""
    return avro_to_arrow_schema(image_avro_schema(writer_schema))
