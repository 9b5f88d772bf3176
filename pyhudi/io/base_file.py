"""Parquet base files with Hudi's footer: Avro schema, record-key range and bloom filter.

A base file is what every Hudi reader understands without Hudi: plain parquet whose first five
columns are the meta fields. The footer entries are what makes it a *Hudi* file: Java resolves
columns through ``parquet.avro.schema``, and the BLOOM index prunes files by
``hoodie_min/max_record_key`` and ``org.apache.hudi.bloomfilter``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyhudi.io.avro_schema import COMMIT_SEQNO, RECORD_KEY
from pyhudi.io.bloom import DYNAMIC_V0, build_filter
from pyhudi.storage import Storage

if TYPE_CHECKING:
    from pyhudi.config import HudiConfig

BLOOM_FILTER_KEY = "org.apache.hudi.bloomfilter"
BLOOM_FILTER_TYPE_KEY = "hoodie_bloom_filter_type_code"
MIN_KEY = "hoodie_min_record_key"
MAX_KEY = "hoodie_max_record_key"
AVRO_SCHEMA_KEY = "parquet.avro.schema"


#: Compression levels of Hudi's parquet writer (parquet-mr on Hadoop): zlib's default 6 and
#: parquet-mr's zstd level 3. Arrow's own defaults differ (gzip 9 is several times slower).
HUDI_CODEC_LEVELS = {"gzip": 6, "zstd": 3}


@dataclass(frozen=True)
class ParquetSettings:
    """How base files are written; picklable, shipped to executors with every write plan."""

    avro_schema: str  # with meta fields, for the footer
    codec: str = "gzip"
    block_size: int = 120 * 1024 * 1024
    page_size: int = 1024 * 1024
    dictionary: bool = True
    populate_meta_fields: bool = True
    bloom_num_entries: int = 60000
    bloom_fpp: float = 1e-9
    bloom_type: str = DYNAMIC_V0
    bloom_max_entries: int = 100000


def parquet_settings(cfg: HudiConfig, avro_schema: str, *, populate_meta_fields: bool) -> ParquetSettings:
    """The base-file settings a write (or a compaction) takes from its ``hoodie.*`` options."""
    from pyhudi import config as C

    return ParquetSettings(
        avro_schema=avro_schema, codec=cfg.get(C.PARQUET_COMPRESSION_CODEC).replace("uncompressed", "none"),
        block_size=cfg.get(C.PARQUET_BLOCK_SIZE), page_size=cfg.get(C.PARQUET_PAGE_SIZE),
        dictionary=cfg.get(C.PARQUET_DICTIONARY_ENABLED), populate_meta_fields=populate_meta_fields,
        bloom_num_entries=cfg.get(C.BLOOM_NUM_ENTRIES), bloom_fpp=cfg.get(C.BLOOM_FPP),
        bloom_type=cfg.get(C.BLOOM_FILTER_TYPE), bloom_max_entries=cfg.get(C.BLOOM_DYNAMIC_MAX_ENTRIES))


@dataclass(frozen=True)
class WrittenFile:
    path: str
    num_rows: int
    size: int
    min_key: str | None
    max_key: str | None


def align(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns: missing ones null, others cast (safe promotions)."""
    columns = []
    for f in schema:
        idx = table.schema.get_field_index(f.name)
        if idx < 0:
            columns.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(idx)
        if col.type != f.type:
            col = _cast(col, f.type)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


def _cast(col: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    if pa.types.is_struct(target) and pa.types.is_struct(col.type):
        # nested structs may gain fields across schema versions: rebuild field by field
        chunks = []
        for chunk in col.chunks:
            parts = []
            for f in target:
                i = chunk.type.get_field_index(f.name)
                child = chunk.field(i) if i >= 0 else pa.nulls(len(chunk), f.type)
                parts.append(_cast(pa.chunked_array([child], child.type), f.type).combine_chunks()
                             if child.type != f.type else child)
            chunks.append(pa.StructArray.from_arrays(parts, fields=list(target), mask=chunk.is_null()))
        return pa.chunked_array(chunks, target)
    return col.cast(target)


def footer_metadata(settings: ParquetSettings, keys: pa.ChunkedArray | pa.Array) -> dict[str, str]:
    meta = {AVRO_SCHEMA_KEY: settings.avro_schema, "writer.model.name": "avro"}
    if not settings.populate_meta_fields:
        return meta
    if len(keys):
        bounds = pc.min_max(keys)
        meta[MIN_KEY] = bounds["min"].as_py()
        meta[MAX_KEY] = bounds["max"].as_py()
    bloom = build_filter(keys, num_entries=settings.bloom_num_entries, fpp=settings.bloom_fpp,
                         filter_type=settings.bloom_type, max_entries=settings.bloom_max_entries)
    meta[BLOOM_FILTER_KEY] = bloom.serialize()
    if settings.bloom_type == DYNAMIC_V0:
        meta[BLOOM_FILTER_TYPE_KEY] = DYNAMIC_V0
    return meta


class BaseFileWriter:
    """Streams row groups into one base file; the footer (bloom filter, key range) is added on close."""

    def __init__(self, storage: Storage, rel_path: str, schema: pa.Schema, settings: ParquetSettings) -> None:
        self.rel_path = rel_path
        self.settings = settings
        self._sink = storage.open_output(rel_path)
        # unique per row: a dictionary attempt only costs time before parquet falls back to plain
        dictionary: bool | list[str] = settings.dictionary and [
            f.name for f in schema if f.name not in (COMMIT_SEQNO, RECORD_KEY)]
        self._writer = pq.ParquetWriter(
            self._sink, schema, compression=settings.codec, use_dictionary=dictionary,
            compression_level=HUDI_CODEC_LEVELS.get(settings.codec),
            data_page_size=settings.page_size, store_schema=False, write_statistics=True)
        self._keys: list[pa.ChunkedArray] = []
        self.num_rows = 0

    @property
    def bytes_written(self) -> int:
        return int(self._sink.tell())

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        row_bytes = max(1, table.nbytes // table.num_rows)
        self._writer.write_table(table, row_group_size=max(1, self.settings.block_size // row_bytes))
        self._keys.append(table.column(RECORD_KEY))
        self.num_rows += table.num_rows

    def close(self) -> WrittenFile:
        chunks = [c for k in self._keys for c in k.chunks]
        keys = pa.chunked_array(chunks, pa.string()) if chunks else pa.chunked_array([], pa.string())
        meta = footer_metadata(self.settings, keys)
        self._writer.add_key_value_metadata(meta)
        self._writer.close()
        size = self._sink.tell()
        self._sink.close()
        return WrittenFile(self.rel_path, self.num_rows, int(size), meta.get(MIN_KEY), meta.get(MAX_KEY))

    def abort(self) -> None:
        try:
            self._writer.close()
        finally:
            self._sink.close()


def write_base_file(storage: Storage, rel_path: str, table: pa.Table, settings: ParquetSettings) -> WrittenFile:
    """Write one complete base file (meta columns first) and return its size and key range."""
    writer = BaseFileWriter(storage, rel_path, table.schema, settings)
    writer.write(table)
    return writer.close()


def read_base_file(storage: Storage, rel_path: str, columns: list[str] | None = None) -> pa.Table:
    with storage.fs.open_input_file(storage.full(rel_path)) as f:
        return pq.read_table(f, columns=columns)


def read_footer(storage: Storage, rel_path: str) -> dict[str, str]:
    with storage.fs.open_input_file(storage.full(rel_path)) as f:
        md = pq.read_metadata(f).metadata or {}
    return {k.decode(): v.decode() for k, v in md.items()}
