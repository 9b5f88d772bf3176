"""Parquet base files with Hudi's footer: Avro schema, record-key range and bloom filter.

A base file is what every Hudi reader understands without Hudi: plain parquet whose first five
columns are the meta fields. The footer entries are what makes it a *Hudi* file: Java resolves
columns through ``parquet.avro.schema``, and the BLOOM index prunes files by
``hoodie_min/max_record_key`` and ``org.apache.hudi.bloomfilter``.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.io.avro_schema import COMMIT_SEQNO, RECORD_KEY
from pyhudi.io.bloom import DYNAMIC_V0, BloomFilter
from pyhudi.io.reconcile import reconcile
from pyhudi.storage import Storage

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
    bloom_filter: bool = True  # Hudi's enableBloomFilter: meta fields and (the option or a BLOOM index)
    bloom_num_entries: int = 60000
    bloom_fpp: float = 1e-9
    bloom_type: str = DYNAMIC_V0
    bloom_max_entries: int = 100000


def parquet_settings(cfg: HudiConfig, avro_schema: str, *, populate_meta_fields: bool) -> ParquetSettings:
    """The base-file settings a write (or a compaction) takes from its ``hoodie.*`` options."""
    return ParquetSettings(
        avro_schema=avro_schema, codec=cfg.get(C.PARQUET_COMPRESSION_CODEC).replace("uncompressed", "none"),
        block_size=cfg.get(C.PARQUET_BLOCK_SIZE), page_size=cfg.get(C.PARQUET_PAGE_SIZE),
        dictionary=cfg.get(C.PARQUET_DICTIONARY_ENABLED), populate_meta_fields=populate_meta_fields,
        bloom_filter=cfg.get(C.PARQUET_BLOOM_FILTER_ENABLED) or "BLOOM" in cfg.get(C.INDEX_TYPE),
        bloom_num_entries=cfg.get(C.BLOOM_NUM_ENTRIES), bloom_fpp=cfg.get(C.BLOOM_FPP),
        bloom_type=cfg.get(C.BLOOM_FILTER_TYPE), bloom_max_entries=cfg.get(C.BLOOM_DYNAMIC_MAX_ENTRIES))


@dataclass(frozen=True)
class WrittenFile:
    path: str
    num_rows: int
    size: int
    min_key: str | None
    max_key: str | None


def align(table: pa.Table, schema: pa.Schema, *, source: str = "rows") -> pa.Table:
    """``table`` with exactly ``schema``'s columns: by name at every level, missing ones null,
    types widened (:func:`pyhudi.io.reconcile.reconcile`)."""
    return reconcile(table, schema, source=source)


def footer_metadata(settings: ParquetSettings, keys: pa.ChunkedArray | pa.Array,
                    bloom: BloomFilter | None = None) -> dict[str, str]:
    """The Hudi footer entries of a base file holding ``keys``; ``bloom`` is their filter when the
    caller built it already (:class:`BaseFileWriter` builds it beside the parquet encoding)."""
    meta = {AVRO_SCHEMA_KEY: settings.avro_schema, "writer.model.name": "avro"}
    if not settings.populate_meta_fields:
        return meta
    if len(keys):
        bounds = pc.min_max(keys)
        meta[MIN_KEY] = bounds["min"].as_py()
        meta[MAX_KEY] = bounds["max"].as_py()
    if not settings.bloom_filter:
        return meta
    if bloom is None:
        bloom = new_bloom_filter(settings)
        bloom.add_keys(keys)
    meta[BLOOM_FILTER_KEY] = bloom.serialize()
    if settings.bloom_type == DYNAMIC_V0:
        meta[BLOOM_FILTER_TYPE_KEY] = DYNAMIC_V0
    return meta


def new_bloom_filter(settings: ParquetSettings) -> BloomFilter:
    return BloomFilter(num_entries=settings.bloom_num_entries, fpp=settings.bloom_fpp,
                       filter_type=settings.bloom_type, max_entries=settings.bloom_max_entries)


#: Columns unique per record whatever the data: a dictionary never pays off for them.
UNIQUE_META_COLUMNS = (COMMIT_SEQNO, RECORD_KEY)
#: Share of distinct values in a sample above which a string column is written without dictionary
HIGH_CARDINALITY = 0.5
_SAMPLE_ROWS = 8192


def column_encodings(schema: pa.Schema, sample: pa.Table | None, *,
                     dictionary: bool) -> tuple[list[str], dict[str, str]]:
    """Which columns get a dictionary, and which strings are written ``DELTA_BYTE_ARRAY``.

    Record keys, sequence numbers and other near-unique strings (ids, timestamps as text) defeat a
    dictionary: parquet builds one until it overflows, then falls back to PLAIN, paying the time
    of both and compressing poorly. ``DELTA_BYTE_ARRAY`` stores each value as the length of the
    prefix it shares with the previous one plus the rest, so keys that cluster (Hudi's are sorted
    or monotonically increasing in most tables) shrink several times, and it is never much larger
    than PLAIN. Every parquet reader in the Hudi ecosystem (parquet-mr, Spark's vectorized reader,
    arrow-rs in hudi-rs) reads it. Near-unique numbers (measurements, coordinates) are written PLAIN
    without the dictionary attempt, as parquet-mr ends up writing them. Low-cardinality columns
    keep the dictionary, as parquet-mr writes them for Hudi.
    """
    delta: dict[str, str] = {}
    plain: set[str] = set()
    head = sample.slice(0, _SAMPLE_ROWS) if sample is not None else None

    def near_unique(name: str) -> bool:
        if head is None or not head.num_rows or name not in head.column_names:
            return False
        column = head.column(name)
        valid = len(column) - column.null_count
        return bool(valid) and pc.count_distinct(column, mode="only_valid").as_py() > HIGH_CARDINALITY * valid

    for f in schema:
        if _bytes(f.type):
            if f.name in UNIQUE_META_COLUMNS or near_unique(f.name):
                delta[f.name] = "DELTA_BYTE_ARRAY"
        elif (pa.types.is_floating(f.type) or pa.types.is_integer(f.type)) and near_unique(f.name):
            plain.add(f.name)
    with_dictionary = [f.name for f in schema if f.name not in delta and f.name not in plain] if dictionary else []
    return with_dictionary, delta


#: which columns are written with a dictionary, and which strings ``DELTA_BYTE_ARRAY``
Encodings = tuple[list[str], dict[str, str]]
_DICTIONARY_PAGES = frozenset({"PLAIN_DICTIONARY", "RLE_DICTIONARY"})


def stored_encodings(metadata: pq.FileMetaData, schema: pa.Schema, *, dictionary: bool) -> Encodings | None:
    """The encodings pyhudi chose for a base file's columns, read from its first row group, for the
    file rewritten with rows merged in: :func:`column_encodings` would choose them again from a
    sample of mostly the same rows. None, to sample afresh, where the choice may not fit: a file
    another writer wrote (parquet-mr writes no DELTA_BYTE_ARRAY), a first row group smaller than
    the sample (a file started by a few rows), columns other than ``schema``'s (nested ones, an
    evolved schema), or no dictionary in the file where ``dictionary`` asks for one."""
    if metadata.num_row_groups == 0 or not (metadata.created_by or "").startswith("parquet-cpp-arrow"):
        return None
    group = metadata.row_group(0)
    if group.num_rows < _SAMPLE_ROWS:
        return None
    stored = {group.column(i).path_in_schema: set(group.column(i).encodings) for i in range(group.num_columns)}
    if set(stored) != set(schema.names):
        return None
    delta = {f.name: "DELTA_BYTE_ARRAY" for f in schema if _bytes(f.type) and (
        "DELTA_BYTE_ARRAY" in stored[f.name] or f.name in UNIQUE_META_COLUMNS)}
    with_dictionary = [f.name for f in schema if stored[f.name] & _DICTIONARY_PAGES and f.name not in delta]
    if dictionary and not with_dictionary:
        return None
    return with_dictionary, delta


def _bytes(kind: pa.DataType) -> bool:
    """Whether parquet stores ``kind`` as byte arrays (which DELTA_BYTE_ARRAY encodes)."""
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
                or pa.types.is_large_binary(kind))


def open_parquet_writer(sink: pa.NativeFile, schema: pa.Schema, settings: ParquetSettings,
                        sample: pa.Table | None, *, encodings: Encodings | None = None) -> pq.ParquetWriter:
    """A parquet writer with Hudi's codec level and encodings chosen from ``sample`` (the first rows),
    or ``encodings`` as given (:func:`stored_encodings`).

    It writes the page index (column and offset indexes), as parquet-mr does for Hudi: with keys
    sorted in a file, a reader looking up one key reads the one page whose range holds it.
    """
    if encodings is None:
        with_dictionary, delta = column_encodings(schema, sample, dictionary=settings.dictionary)
    else:
        with_dictionary, delta = (encodings[0] if settings.dictionary else []), encodings[1]
    return pq.ParquetWriter(
        sink, schema, compression=settings.codec, use_dictionary=with_dictionary or False,
        column_encoding=delta or None, compression_level=HUDI_CODEC_LEVELS.get(settings.codec),
        data_page_size=settings.page_size, store_schema=False, write_statistics=True, write_page_index=True)


def encoded_record_size(rows: pa.Table, settings: ParquetSettings) -> float:
    """Bytes a record of ``rows`` (base-file rows) takes in a base file written with ``settings``:
    ``rows`` written as a whole file in memory (its small footer included; the bloom filter a
    base file also carries is not)."""
    sink = pa.BufferOutputStream()
    writer = open_parquet_writer(sink, rows.schema, settings, rows)
    writer.write_table(rows)
    writer.close()
    return sink.tell() / max(1, rows.num_rows)


class BaseFileWriter:
    """Streams row groups into one base file; the footer (bloom filter, key range) is added on close.

    The bloom filter takes the keys of each write in a second thread while parquet encodes the rows
    (both release the GIL for most of their work), so a task writing one large file uses two cores
    when it has them. Keys enter the filter in write order, which a dynamic filter depends on.
    """

    def __init__(self, storage: Storage, rel_path: str, schema: pa.Schema, settings: ParquetSettings, *,
                 encodings: Encodings | None = None) -> None:
        """``encodings``: the columns' encodings, where not chosen from the first rows written."""
        self.rel_path = rel_path
        self._encodings = encodings
        self.settings = settings
        self._sink = storage.open_output(rel_path)
        self._schema = schema
        self._writer: pq.ParquetWriter | None = None  # opened on the first rows: encodings follow them
        self._key_range: tuple[str, str] | None = None  # smallest and largest record key written
        self.num_rows = 0
        self._bloom = new_bloom_filter(settings) if settings.populate_meta_fields and settings.bloom_filter else None
        self._bloom_thread: ThreadPoolExecutor | None = None
        self._bloom_done: list[Future[None]] = []

    def _open(self, sample: pa.Table | None) -> pq.ParquetWriter:
        if self._writer is None:
            self._writer = open_parquet_writer(self._sink, self._schema, self.settings, sample,
                                               encodings=self._encodings)
        return self._writer

    @property
    def bytes_written(self) -> int:
        return int(self._sink.tell())

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        keys = table.column(RECORD_KEY)
        if self._bloom is not None:
            if self._bloom_thread is None:
                self._bloom_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pyhudi-bloom")
            self._bloom_done.append(self._bloom_thread.submit(self._bloom.add_keys, keys))
        row_bytes = max(1, table.nbytes // table.num_rows)
        self._open(table).write_table(table, row_group_size=max(1, self.settings.block_size // row_bytes))
        # only the key range is kept: the key column of a batch Spark sent is a view of the whole
        # batch's buffer, and keeping it would keep every row of the file in memory until close
        if keys.null_count < len(keys):
            bounds = pc.min_max(keys)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            self._key_range = (low, high) if self._key_range is None else \
                (min(self._key_range[0], low), max(self._key_range[1], high))
        self.num_rows += table.num_rows

    def _finish_bloom(self) -> None:
        try:
            for done in self._bloom_done:
                done.result()
        finally:
            if self._bloom_thread is not None:
                self._bloom_thread.shutdown()
                self._bloom_thread = None

    def close(self) -> WrittenFile:
        self._finish_bloom()
        meta = footer_metadata(self.settings, pa.array(self._key_range or [], pa.string()), self._bloom)
        writer = self._open(None)
        writer.add_key_value_metadata(meta)
        writer.close()
        size = self._sink.tell()
        self._sink.close()
        return WrittenFile(self.rel_path, self.num_rows, int(size), meta.get(MIN_KEY), meta.get(MAX_KEY))

    def abort(self) -> None:
        try:
            try:
                self._finish_bloom()
            except Exception:  # the write failed already; the filter no longer matters
                pass
            if self._writer is not None:
                self._writer.close()
        finally:
            # an object-store upload offers abort(): nothing of the failed file reaches the store
            getattr(self._sink, "abort", self._sink.close)()


def write_base_file(storage: Storage, rel_path: str, table: pa.Table, settings: ParquetSettings) -> WrittenFile:
    """Write one complete base file (meta columns first) and return its size and key range."""
    writer = BaseFileWriter(storage, rel_path, table.schema, settings)
    writer.write(table)
    return writer.close()


def read_base_file(storage: Storage, rel_path: str, columns: list[str] | None = None) -> pa.Table:
    """A base file's rows (``columns``: only those; all of them: :func:`read_base_file_and_metadata`)."""
    if columns is None:
        return read_base_file_and_metadata(storage, rel_path)[0]
    with storage.fs.open_input_file(storage.full(rel_path)) as f:
        return pq.read_table(f, columns=columns)


def read_base_file_and_metadata(storage: Storage, rel_path: str) -> tuple[pa.Table, pq.FileMetaData]:
    """A base file's rows and its parquet metadata. A whole file on a remote store is fetched by
    one GET, where reading its footer first and its columns next would take two."""
    if not storage.is_local:
        parquet = pq.ParquetFile(pa.BufferReader(storage.read_bytes(rel_path)))
        return parquet.read(), parquet.metadata
    with storage.fs.open_input_file(storage.full(rel_path)) as f:
        parquet = pq.ParquetFile(f)
        return parquet.read(), parquet.metadata


def read_footer(storage: Storage, rel_path: str) -> dict[str, str]:
    with storage.fs.open_input_file(storage.full(rel_path)) as f:
        md = pq.read_metadata(f).metadata or {}
    return {k.decode(): v.decode() for k, v in md.items()}
