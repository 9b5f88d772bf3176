"""Merged reads of merge-on-read file slices, distributed over executors.

Each Spark task receives a few file slices (frozen :class:`SliceToRead` plans) and merges each
one's base file with its log blocks using :mod:`pyhudi.read.merge` (pyarrow, vectorised). Slices
without log files never come here: Spark's native parquet reader serves them faster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pyhudi.io.avro_schema import PARTITION_PATH, RECORD_KEY
from pyhudi.io.base_file import align
from pyhudi.read.merge import MergeSpec, SliceToRead, Visibility, read_slice
from pyhudi.spark.worker import map_in_arrow
from pyhudi.storage import Storage


def spread(spark: SparkSession, count: int) -> DataFrame:
    """``count`` row ids spread over enough partitions that every core gets slices."""
    parallelism = spark.sparkContext.defaultParallelism
    return spark.range(0, count, numPartitions=max(1, min(count, parallelism * 2)))


def _merge_slices(spark: SparkSession, base_uri: str, slices: list[SliceToRead], read_schema: pa.Schema,
                  spec: MergeSpec, visibility: Visibility, out: pa.Schema, out_ddl: T.StructType | str,
                  emit: Callable[[SliceToRead, pa.Table], pa.Table]) -> DataFrame:
    """Merge each slice in an executor (``read_schema`` columns) and return ``emit``'s rows of it."""
    schema_ipc = read_schema.serialize().to_pybytes()
    pieces = list(slices)

    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = Storage(base_uri)
        schema = pa.ipc.read_schema(pa.py_buffer(schema_ipc))
        for batch in batches:
            for i in batch.column(0).to_pylist():
                merged, _counts, _scan = read_slice(storage, pieces[i], schema, spec, visibility)
                if merged.num_rows:
                    yield from emit(pieces[i], merged).cast(out).to_batches()

    return map_in_arrow(spread(spark, len(pieces)), body, out_ddl)


def read_merged(spark: SparkSession, base_uri: str, slices: list[SliceToRead], file_schema: pa.Schema,
                out_schema: T.StructType, spec: MergeSpec, visibility: Visibility) -> DataFrame:
    """The merged records of ``slices`` as a DataFrame of ``out_schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(out_schema)
    return _merge_slices(spark, base_uri, slices, file_schema, spec, visibility, target, out_schema,
                         lambda _piece, merged: align(merged, target))


def merged_keys(spark: SparkSession, base_uri: str, slices: list[SliceToRead], key_schema: pa.Schema,
                spec: MergeSpec, visibility: Visibility, *, names: tuple[str, str, str]) -> DataFrame:
    """(record key, partition path, file id) of every record alive in ``slices`` after merging.

    Index lookups on merge-on-read tables use this for slices with log files: a key deleted by a
    log block is gone even though the base file still holds it. ``key_schema`` is
    :func:`pyhudi.spark.index.key_read_schema`.
    """
    key_col, part_col, fid_col = names
    out = pa.schema([(key_col, pa.string()), (part_col, pa.string()), (fid_col, pa.string())])

    def keys(piece: SliceToRead, merged: pa.Table) -> pa.Table:
        return pa.Table.from_arrays([merged.column(RECORD_KEY), merged.column(PARTITION_PATH),
                                     pa.array([piece.file_id] * merged.num_rows, pa.string())], schema=out)

    ddl = f"{key_col} string, {part_col} string, {fid_col} string"
    return _merge_slices(spark, base_uri, slices, key_schema, spec, visibility, out, ddl, keys)
