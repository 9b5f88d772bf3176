"""Merged reads of merge-on-read file slices, distributed over executors.

Each Spark task receives a few file slices (frozen :class:`SliceToRead` plans) and merges each
one's base file with its log blocks using :mod:`pyhudi.read.merge` (pyarrow, vectorised). Slices
without log files never come here: Spark's native parquet reader serves them faster.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pyhudi.io.avro_schema import IS_DELETED_FIELD, PARTITION_PATH, RECORD_KEY
from pyhudi.io.base_file import align
from pyhudi.read.merge import MergeSpec, SliceToRead, Visibility, read_slice
from pyhudi.storage import Storage


def _spread(spark: SparkSession, count: int) -> DataFrame:
    """``count`` row ids spread over enough partitions that every core gets slices."""
    parallelism = spark.sparkContext.defaultParallelism
    return spark.range(0, count, numPartitions=max(1, min(count, parallelism * 2)))


def read_merged(spark: SparkSession, base_uri: str, slices: list[SliceToRead], file_schema: pa.Schema,
                out_schema: T.StructType, spec: MergeSpec, visibility: Visibility) -> DataFrame:
    """The merged records of ``slices`` as a DataFrame of ``out_schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(out_schema)
    file_ipc = file_schema.serialize().to_pybytes()
    pieces = list(slices)

    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = Storage(base_uri)
        schema = pa.ipc.read_schema(pa.py_buffer(file_ipc))
        for batch in batches:
            for i in batch.column(0).to_pylist():
                merged, _counts, _scan = read_slice(storage, pieces[i], schema, spec, visibility)
                if merged.num_rows:
                    yield from align(merged, target).to_batches()

    return _spread(spark, len(pieces)).mapInArrow(body, out_schema)


def merged_keys(spark: SparkSession, base_uri: str, slices: list[SliceToRead], file_schema: pa.Schema,
                spec: MergeSpec, visibility: Visibility, *, names: tuple[str, str, str]) -> DataFrame:
    """(record key, partition path, file id) of every record alive in ``slices`` after merging.

    Index lookups on merge-on-read tables use this for slices with log files: a key deleted by a
    log block is gone even though the base file still holds it.
    """
    wanted = [RECORD_KEY, PARTITION_PATH]
    for extra in (spec.ordering_field, IS_DELETED_FIELD):
        if extra and extra in file_schema.names and extra not in wanted:
            wanted.append(extra)
    sub = pa.schema([file_schema.field(n) for n in wanted])
    sub_ipc = sub.serialize().to_pybytes()
    pieces = list(slices)
    key_col, part_col, fid_col = names
    out = pa.schema([(key_col, pa.string()), (part_col, pa.string()), (fid_col, pa.string())])

    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = Storage(base_uri)
        schema = pa.ipc.read_schema(pa.py_buffer(sub_ipc))
        for batch in batches:
            for i in batch.column(0).to_pylist():
                piece = pieces[i]
                merged, _counts, _scan = read_slice(storage, piece, schema, spec, visibility)
                if merged.num_rows:
                    yield pa.RecordBatch.from_arrays(
                        [merged.column(RECORD_KEY).combine_chunks(), merged.column(PARTITION_PATH).combine_chunks(),
                         pa.array([piece.file_id] * merged.num_rows, pa.string())], schema=out)

    ddl = f"{key_col} string, {part_col} string, {fid_col} string"
    return _spread(spark, len(pieces)).mapInArrow(body, ddl)
