"""``spark.read.format("hudi")``: pyhudi's queries through Spark's Python data source API.

PySpark 4 lets a Python class be a Spark data source. :func:`register` adds ``hudi`` to a session;
then ``spark.read.format("hudi").options(**hudi_read_options).load(path)`` plans the query with
pyhudi (snapshot, ``read_optimized``, ``incremental`` with ``hoodie.datasource.read.begin/end.instanttime``,
time travel with ``as.of.instant``) and reads it split by file slice: each Spark task merges one
slice (base file and log blocks) with pyarrow and hands Spark Arrow batches. Filters Spark pushes
(PySpark 4.1+) prune partitions by their paths and files by their statistics before any file is
opened; Spark still applies every filter to the rows.

A slice without log files is streamed by parquet row group; Spark takes the Arrow batches as they
are (no per-row conversion in Python).

:func:`pyhudi.read` stays the fast path, and the gap is the API's, not this source's: Spark's
Python data source API (PySpark 4.3) hands ``reader()`` the full schema and has no column-pruning
hook, so every query, a ``count()`` included, gets every column of every row it reads through the
Python worker into the JVM, where Spark's native parquet reader (what :func:`pyhudi.read` plans
over) decodes only the columns the query needs, or none for a count. A bare Python source that
only reads the same parquet files with pyarrow and yields their Arrow batches
(``benchmarks/datasource.py``, "floor") takes 0.7-1.15x this source's time and 6-13x
:func:`pyhudi.read`'s on a group-by or count; see BENCHMARKS.md. Code that needs the speed reads with
:func:`pyhudi.read` (or registers its frame as a view for SQL).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import datasource as D
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiConfigError, HudiError, HudiUnsupportedError
from pyhudi.io.avro_schema import META_FIELDS
from pyhudi.io.base_file import align
from pyhudi.read import skipping as S
from pyhudi.read.cdc import CDC_COLUMNS
from pyhudi.read.merge import MergeSpec, SliceToRead, Visibility, base_file_row_groups, read_slice
from pyhudi.spark.base_files import spark_type
from pyhudi.spark.cdc import has_cdc_schema, read_source_split, source_splits
from pyhudi.spark.compat import arrow_schema
from pyhudi.spark.reader import plan_filtered, plan_query, schema_instant
from pyhudi.spark.storage_conf import hadoop_store_conf
from pyhudi.storage import Storage, resolve_options
from pyhudi.table.incremental import latest_offset, start_offset
from pyhudi.table.table import HudiTable, as_storage

NAME = "hudi"
#: options a catalog table's schema records for this source (see HudiDataSource._adopt_catalog_options)
CATALOG_OPTIONS = ("path", "hoodie.query.as.ro.table")


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("hudi")`` read Hudi tables through pyhudi (PySpark 4.0+), reaching
    their store with the session's settings as they are now (``spark.hadoop.fs.s3a.*``; a read's
    own options come first): the source runs in Python workers, which have no session to ask."""
    if not hasattr(spark, "dataSource"):
        raise HudiConfigError("spark.read.format('hudi') needs PySpark 4.0 or later (Spark's Python data source "
                              "API); on this PySpark use pyhudi.read(spark, path, options)")
    # Spark 4.1+ passes filters to Python sources only with this on (and refuses a source that
    # takes them while it is off)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(session_source(hadoop_store_conf(spark)))


def session_source(store_conf: dict[str, str]) -> type[HudiDataSource]:
    """:class:`HudiDataSource` carrying a session's store settings (its ``fs.s3a.*`` entries).

    The source is instantiated in Python workers, where there is no SparkSession to read them from,
    so they travel with the class: a class made here is not importable by name, and cloudpickle
    ships it by value, settings included. Options given to the read still come first.
    """
    return type("HudiSessionDataSource", (HudiDataSource,), {"store_conf": dict(store_conf)})


class HudiDataSource(DataSource):
    """A Hudi table as a Spark data source (the ``path`` option or ``load(path)`` names it)."""

    #: the registering session's Hadoop store settings (see :func:`session_source`)
    store_conf: dict[str, str] = {}

    @classmethod
    def name(cls) -> str:
        return NAME

    def _path(self) -> str:
        path = self.options.get("path")
        if not path:
            raise HudiConfigError("spark.read.format('hudi') needs the table's path: .load(path)")
        return str(path)

    def _storage(self) -> Storage:
        """The table's storage: the read's options, then the session's settings, then the environment."""
        path = self._path()
        return Storage(path, resolve_options(path, self.options, self.store_conf))

    def schema(self) -> StructType:
        if has_cdc_schema(HudiConfig.of(self.options)):  # Hudi's CDCRelation.FULL_CDC_SPARK_SCHEMA
            return StructType([StructField(n, StringType()) for n in CDC_COLUMNS])
        table = HudiTable(self._storage())
        schema = table.arrow_schema(as_of=schema_instant(HudiConfig.of(self.options)))
        if schema is None:  # no completed write yet: the meta columns only, as pyhudi.read gives them
            return StructType([StructField(n, StringType()) for n in META_FIELDS])
        converted = spark_type(pa.struct(list(schema)))
        if isinstance(converted, StructType):
            return converted
        return from_arrow_schema(schema)  # types pyhudi does not map itself (timestamps, ...)

    def reader(self, schema: StructType) -> DataSourceReader:
        self._adopt_catalog_options(schema)
        return HudiReader(self._storage(), dict(self.options), schema)

    def _adopt_catalog_options(self, schema: StructType) -> None:
        """Take the path (and ``hoodie.query.as.ro.table``) of a catalog table from its schema.

        A catalog table whose provider is ``hudi`` (Hudi's sync registers them so) reaches this source
        with none of its options: Spark 4 hands a catalog table's schema to a Python source, not its
        storage properties, so the ``path`` serde property never arrives. pyhudi's sync therefore
        also records them in the first field's metadata of the schema it registers
        (:func:`pyhudi.sync.entries.spark_schema_json`); options given to the read come first.
        """
        if self.options.get("path") or not schema.fields:
            return
        recorded = {k: str(v) for k, v in schema.fields[0].metadata.items() if k in CATALOG_OPTIONS}
        if not recorded.get("path"):
            raise HudiConfigError(
                "this catalog table reaches spark's hudi source without its path: Spark passes a Python source "
                "no storage properties of catalog tables, and its schema does not record the path (it was "
                "registered by another tool); sync it once with pyhudi (pyhudi sync --path <table>) or read it "
                "with spark.read.format('hudi').load(<table path>)")
        self.options = {**recorded, **dict(self.options)}

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark's name)
        storage = self._storage()
        if HudiTable(storage).arrow_schema() is None:
            raise HudiConfigError(f"{self._path()} has no completed write yet, so its stream has no schema: start "
                                  "the stream after the table's first commit")
        return HudiStreamReader(storage, dict(self.options), schema)


class HudiUnsupportedReadError(HudiError):
    """A :class:`~pyhudi.errors.HudiUnsupportedError` of a read planned in Spark's Python data
    source worker, raised as an error Spark does not take for an unimplemented method."""


class HudiReader(DataSourceReader):
    """Plans the query on the driver (one partition per file slice) and merges slices in tasks."""

    def __init__(self, storage: str | Storage, options: dict[str, str], schema: StructType) -> None:
        self.storage = as_storage(storage, options)
        self.options = options
        self.schema_json = schema.json()
        self.predicates: list[S.Predicate] = []

    def pushFilters(self, filters: list[Any]) -> Any:  # noqa: N802 (Spark's name)
        """Keep the filters pyhudi can prune with; Spark still evaluates all of them."""
        for f in filters:
            pred = _predicate(f)
            if pred is not None:
                self.predicates.append(pred)
        return filters

    def partitions(self) -> Sequence[InputPartition]:
        try:
            return self._partitions()
        except HudiUnsupportedError as exc:
            # PySpark reads a NotImplementedError from partitions() as "no partitioning: read
            # once, without a partition", which would answer a refused read with no rows
            raise HudiUnsupportedReadError(f"HudiUnsupportedError: {exc}") from exc

    def _partitions(self) -> Sequence[InputPartition]:
        table = HudiTable(self.storage)
        cfg = HudiConfig.of(self.options)
        if has_cdc_schema(cfg):  # one partition per change split (pyhudi.spark.cdc)
            return [InputPartition(("cdc", value)) for value in source_splits(self.storage, self.options)] \
                or [InputPartition(None)]
        pred = _all(self.predicates)
        indexed = False  # the record index located the filter's keys: no statistics needed
        if pred is not None:
            files, indexed = plan_filtered(table, cfg, pred, StructType.fromJson(json.loads(self.schema_json)))
        else:
            files = plan_query(table, cfg)
        slices = list(files.slices)
        file_schema = table.arrow_schema(as_of=schema_instant(cfg))  # the schema the query reads
        if pred is not None and S.columns_of(pred) and cfg.get(C.DATA_SKIPPING) and not indexed:
            recorded = table.metadata_column_ranges(S.columns_of(pred), file_schema) if file_schema else None
            plain = [s.base_file.path for s in slices if s.base_file is not None and not (files.merged and s.log_files)]
            kept = set(S.skip_files(table.storage, pred, plain, known=recorded))
            slices = [s for s in slices if (files.merged and s.log_files) or s.base_file is None
                      or s.base_file.path in kept]
        if file_schema is None:
            return [InputPartition(None)]
        merges = files.merged and any(s.log_files for s in slices)  # the payload matters only then
        spec = MergeSpec.of(table.config.merge_ordering_field if merges else table.config.precombine_field,
                            (table.config.payload_class or cfg.get(C.PAYLOAD_CLASS)) if merges else None)
        commits = files.commit_filter if files.commit_times is None else frozenset(files.commit_times)
        shared = (table.storage, file_schema.serialize().to_pybytes() if file_schema else b"", spec,
                  files.view.visibility(), commits, self.schema_json)
        pieces = [s.to_read() if files.merged else dataclasses.replace(s.to_read(), log_files=()) for s in slices]
        return [InputPartition((piece, *shared)) for piece in pieces] or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:  # an empty query still needs one partition
            return
        if partition.value[0] == "cdc":
            yield from read_source_split(partition.value[1])
            return
        piece, storage, schema_ipc, spec, visibility, commit_filter, schema_json = partition.value
        yield from read_partition(piece, storage, schema_ipc, spec, visibility, commit_filter, schema_json)


class HudiStreamReader(DataSourceStreamReader):
    """``spark.readStream.format("hudi")``: the table's commits as a stream.

    An offset is ``{"instant": t}``, the last completed write a batch covers; each micro-batch is the
    incremental pull of ``(start, end]``, planned and read as :class:`HudiReader` reads it. The
    latest offset stops before a write that is still pending while later ones completed (Hudi's
    BLOCK policy for streams), so no commit is passed over. Spark keeps the offsets in the query's
    checkpoint, so a restarted query goes on where it stopped. The first start is
    ``hoodie.datasource.streaming.startOffset`` (earliest, latest or an instant).
    """

    def __init__(self, storage: str | Storage, options: dict[str, str], schema: StructType) -> None:
        self.storage = as_storage(storage, options)
        self.options = options
        self.schema = schema

    def initialOffset(self) -> dict:  # noqa: N802 (Spark's name)
        start = HudiConfig.of(self.options).get(C.STREAMING_START_OFFSET)
        return {"instant": start_offset(HudiTable(self.storage), start)}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:  # noqa: N802 (Spark's name)
        """The latest completed write, never below the batch's start (Spark 4.2+ passes it) or an
        explicit start instant: a latest offset below the start would become the next batch's
        start and let the stream go back before it."""
        floor = start["instant"] if start else ""
        configured = HudiConfig.of(self.options).get(C.STREAMING_START_OFFSET)
        if configured not in ("earliest", "latest"):
            floor = max(floor, configured)
        return {"instant": max(latest_offset(HudiTable(self.storage)), floor)}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if end["instant"] <= start["instant"]:
            return []
        pull = {**self.options, C.QUERY_TYPE.key: "incremental", C.BEGIN_INSTANT.key: start["instant"],
                C.END_INSTANT.key: end["instant"], C.TIMELINE_HOLES_POLICY.key: "BLOCK"}
        return HudiReader(self.storage, pull, self.schema).partitions()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:
            return
        if partition.value[0] == "cdc":
            yield from read_source_split(partition.value[1])
            return
        yield from read_partition(*partition.value)

    def commit(self, end: dict) -> None:
        """Nothing to release: the table keeps every commit the stream may still read."""


def read_partition(piece: SliceToRead, storage: Storage, schema_ipc: bytes, spec: MergeSpec, visibility: Visibility,
                   commit_filter: tuple[str, str] | frozenset[str] | None,
                   schema_json: str) -> Iterator[pa.RecordBatch]:
    """One file slice merged, in the query's columns, as Arrow batches; ``commit_filter``: the
    commit times an incremental pull keeps, a range ``(begin, end]`` or (timeline layout 2) a set."""
    file_schema = pa.ipc.read_schema(pa.py_buffer(schema_ipc))
    target = arrow_schema(StructType.fromJson(json.loads(schema_json)))
    if piece.base_file is not None and not piece.log_files:  # streamed by row group: nothing to merge
        parts: Iterator[pa.Table] = base_file_row_groups(storage, piece.base_file, file_schema)
    else:
        parts = iter([read_slice(storage, piece, file_schema, spec, visibility)[0]])
    kept = pa.array(sorted(commit_filter), pa.string()) if isinstance(commit_filter, frozenset) else None
    for rows in parts:
        if commit_filter is not None:
            times = rows.column("_hoodie_commit_time")
            if kept is not None:
                rows = rows.filter(pc.is_in(times, value_set=kept))
            else:
                begin, end = commit_filter
                rows = rows.filter(pc.and_(pc.greater(times, begin), pc.less_equal(times, end)))
        yield from align(rows, target).to_batches()


def _all(preds: list[S.Predicate]) -> S.Predicate | None:
    if not preds:
        return None
    return preds[0] if len(preds) == 1 else S.And(tuple(preds))


def _predicate(f: Any) -> S.Predicate | None:
    """A pushed Spark filter as a pyhudi predicate (None for filters pyhudi does not prune with)."""
    column = getattr(f, "attribute", None)
    if column is None or len(column) != 1:
        return None
    name = column[0]
    compare = {D.EqualTo: "=", D.GreaterThan: ">", D.GreaterThanOrEqual: ">=", D.LessThan: "<",
               D.LessThanOrEqual: "<="}
    for kind, op in compare.items():
        if type(f) is kind:
            return S.Compare(name, op, cast(Any, f).value)
    if isinstance(f, D.In):
        return S.In(name, tuple(f.value))
    if isinstance(f, D.IsNull):
        return S.IsNull(name)
    if isinstance(f, D.IsNotNull):
        return S.IsNotNull(name)
    if isinstance(f, D.StringStartsWith):
        return S.StartsWith(name, f.value)
    return None
