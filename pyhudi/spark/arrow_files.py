"""Base files read by pyarrow in Spark's executors, with as few requests as the store allows.

Where Spark cannot open a table's store, executors read its base files themselves
(:func:`pyhudi.spark.base_files.arrow_files_frame`), and merge-on-read merges read the record keys
of base files under log files (:mod:`pyhudi.spark.merged`). Both know each file's size from the
listing, which spares the HEAD request a plain open would send first; a small file on S3 is
fetched whole by one GET (:func:`fragment`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pyhudi.io.base_file import read_base_file
from pyhudi.io.reconcile import reconcile
from pyhudi.storage import Storage, s3

#: Rows per Arrow batch an executor hands Spark from a base file
BATCH_ROWS = 64 * 1024
#: Base files on S3 up to this size are fetched whole, by one GET
WHOLE_FILE_BYTES = 8 << 20
_FORMAT = ds.ParquetFileFormat(
    read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit="us"),
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True))


def fragment(storage: Storage, rel: str, size: int) -> ds.ParquetFileFragment:
    """A base file to scan (``size``: its size from the listing, 0 if unknown).

    Read in ranges it costs three GETs on an object store: the footer's tail, the whole footer
    (which Hudi's bloom filter makes larger than pyarrow's first read) and the wanted columns'
    chunks, fetched together; the known size spares the HEAD that would ask for it first. A file
    on S3 up to :data:`WHOLE_FILE_BYTES` is fetched whole instead: one GET costs less than three
    for a few MB more.
    """
    if storage.is_s3 and 0 < size <= WHOLE_FILE_BYTES:
        bucket, _, key = storage.full(rel).partition("/")
        got = s3.get(storage.options, bucket, key)
        if got is None:
            raise FileNotFoundError(f"base file {storage.uri(rel)} is gone")
        return _FORMAT.make_fragment(pa.BufferReader(got.body))
    return _FORMAT.make_fragment(storage.full(rel), storage.fs, file_size=size if size > 0 else None)


def read_columns(storage: Storage, rel: str, columns: Sequence[str], *, size: int | None) -> pa.Table:
    """Columns of one base file, as stored (local files as :func:`read_base_file` reads them)."""
    if storage.is_local:
        return read_base_file(storage, rel, list(columns))
    return fragment(storage, rel, size or 0).to_table(columns=list(columns), use_threads=False)


def read_as(storage: Storage, rel: str, target: pa.Schema, *, size: int = 0) -> Iterator[tuple[pa.Table, int]]:
    """The rows of one base file as ``target`` in batches, each with the position of its first row.

    Only ``target``'s columns the file holds are decoded; each batch is reconciled to ``target``
    by name (:func:`pyhudi.io.reconcile.reconcile`: absent columns null, older types widened).
    Top-level INT96 timestamps are UTC instants, as Spark reads them.
    """
    source = fragment(storage, rel, size)
    columns = [n for n in target.names if n in source.physical_schema.names]
    int96 = int96_columns(source.metadata) & set(columns)
    first = 0
    if not columns:  # none of the wanted columns was written yet: every row is all nulls
        total = source.metadata.num_rows
        while first < total:
            n = min(BATCH_ROWS, total - first)
            yield pa.Table.from_arrays([pa.nulls(n, f.type) for f in target], schema=target), first
            first += n
        return
    for batch in source.to_batches(columns=columns, batch_size=BATCH_ROWS, use_threads=False):
        rows = pa.Table.from_batches([batch])
        for c in int96:
            i = rows.schema.get_field_index(c)
            rows = rows.set_column(i, c, rows.column(i).cast(pa.timestamp("us", "UTC")))
        yield reconcile(rows, target, source=f"base file {rel}"), first
        first += batch.num_rows


def int96_columns(metadata: pq.FileMetaData) -> set[str]:
    """Top-level columns a parquet file stores as INT96 (legacy timestamps)."""
    schema = metadata.schema
    return {schema.column(i).path for i in range(len(schema)) if schema.column(i).physical_type == "INT96"}
