"""The metadata table's record index on Spark: key lookups and updates, one task per file group.

* **Lookup** (``hoodie.index.type=RECORD_INDEX``): the incoming keys alone are shuffled to their
  record index file group (Java ``String.hashCode`` of the key, computed in executors), and each
  task looks its keys up in its file group's latest slice through the HFile block indexes: only
  the data blocks that can hold the keys are read, so the cost follows the batch, not the table.
  The keys found come back and are broadcast to the incoming rows, which are never shuffled for
  the lookup; the tasks also count repeated keys, so a batch without any skips de-duplication.
* **Update** (every write while the partition exists): each data file group the write changed is
  read back (its key column, before and after) in an executor, which emits the keys the write
  located there and the keys it removed; the changes are shuffled by record index file group and
  each task writes one log file (an HFile data block and a delete block) for the delta commit the
  driver completes with the data instant.
* **Creation**: every live key of the table, located, written as one base file per file group.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyhudi import config as C
from pyhudi.commit.metadata_writer import MetadataWriter
from pyhudi.commit.record_index_build import write_groups
from pyhudi.config import HudiConfig
from pyhudi.io.avro_schema import RECORD_KEY
from pyhudi.io.file_names import log_path_order, parse_log_file
from pyhudi.metadata import record_index as R
from pyhudi.metadata.keys import file_group_id
from pyhudi.metadata.table import Builder
from pyhudi.read.merge import MergeSpec, SliceToRead, key_columns
from pyhudi.spark.index import EXISTING_PP, EXISTING_RK
from pyhudi.spark.worker import map_in_arrow, per_item
from pyhudi.storage import Storage
from pyhudi.table.fs_view import FileSystemView
from pyhudi.table.table import HudiTable
from pyhudi.timeline.commit_metadata import WriteStat
from pyhudi.write.columns import FILE_ID
from pyhudi.write.handles import collect_batches

log = logging.getLogger("pyhudi")

LOCATIONS_DDL = "key string, partition string, file_id string, is_delete boolean, rank tinyint, group int"
WRITTEN_DDL = "stat string"
T = TypeVar("T")


def keeps_record_index(cfg: HudiConfig) -> bool:
    """Whether a write keeps the ``record_index`` partition (Hudi keeps it for RECORD_INDEX)."""
    return bool(cfg.get(C.METADATA_ENABLE)) and (
        bool(cfg.get(C.METADATA_RECORD_INDEX_ENABLE)) or cfg.get(C.INDEX_TYPE) == "RECORD_INDEX")


def sizing(cfg: HudiConfig) -> R.Sizing:
    return R.Sizing(cfg.get(C.METADATA_RECORD_INDEX_MIN_GROUPS), cfg.get(C.METADATA_RECORD_INDEX_MAX_GROUPS),
                    cfg.get(C.METADATA_RECORD_INDEX_MAX_GROUP_SIZE), cfg.get(C.METADATA_RECORD_INDEX_GROWTH))


def _with_group(df: DataFrame, groups: int, key_col: str | None = None) -> DataFrame:
    """``df`` plus the record index file group of each key (``key_col``, by default the first
    column), computed in executors by a vectorized UDF that receives the key column alone (the
    other columns never pass through Python)."""
    key_col = key_col or df.columns[0]

    @F.pandas_udf("int")  # type: ignore[call-overload]
    def group_of(keys: pd.Series) -> pd.Series:
        return pd.Series(R.file_group_indexes(pa.array(keys, pa.string()), groups).astype("int32"))

    return df.withColumn(R.GROUP, group_of(F.col(key_col)))


def _per_item(spark: SparkSession, storage: Storage, items: list[T], key_schema: pa.Schema,
              emit: Callable[[Storage, T, pa.Schema], pa.Table], ddl: str) -> DataFrame:
    """The rows ``emit`` makes of each item (a data file slice or file group), in executors."""
    return per_item(spark, storage, items, key_schema, lambda st, item, schema: emit(st, item, schema).to_batches(),
                    ddl)


def _per_group(located: DataFrame, count: int, storage: Storage,
               write: Callable[[MetadataWriter, int, pa.Table], WriteStat]) -> list[WriteStat]:
    """Rows shuffled by record index file group (a few groups per task, as many tasks as cores),
    each group's rows (without the group column) handed to ``write``, which writes its file; the
    files' stats."""
    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = collect_batches(batches)
        if rows is None:
            return
        groups = rows.column(R.GROUP).to_numpy()
        mdt = MetadataWriter(storage)
        stats = [write(mdt, group, rows.filter(pa.array(groups == group)).drop_columns([R.GROUP]))
                 for group in np.unique(groups).tolist()]
        yield pa.RecordBatch.from_arrays([pa.array([json.dumps(dataclasses.asdict(s)) for s in stats])],
                                         names=["stat"])

    tasks = min(count, located.sparkSession.sparkContext.defaultParallelism)
    rows = map_in_arrow(located.repartition(tasks, F.col(R.GROUP)), body, WRITTEN_DDL).collect()
    return [WriteStat(**json.loads(r["stat"])) for r in rows]


@dataclass
class Located:
    """What the record index holds of a batch's keys: their stored locations (:data:`EXISTING_RK`,
    :data:`EXISTING_PP`, ``FILE_ID``), how many there are, and how many incoming rows repeat a
    key; ``cached`` is the persisted lookup output to unpersist when the write is done."""

    existing: DataFrame
    found: int
    duplicates: int
    cached: DataFrame


def locate(table: HudiTable, keyed: DataFrame) -> Located | None:
    """Look the record keys of ``keyed`` up in the record index: only the key column is shuffled
    (by record index file group, a few groups per task) and only the keys found come back; each
    task reads of its file groups the data blocks its keys can be in. None when the table has no
    usable record index."""
    slices = table.record_index_slices()
    if slices is None:
        return None
    storage = table.storage
    by_group = {int(s.file_id.split("-")[-2]): s for s in slices}
    names = [EXISTING_RK, EXISTING_PP, FILE_ID, "found", "duplicates"]

    def body(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = collect_batches(batches)
        if rows is None:
            return
        groups = rows.column(R.GROUP).to_numpy()
        found: dict[str, tuple[str, str]] = {}
        repeated = 0
        for group in np.unique(groups).tolist():
            keys = rows.column(RECORD_KEY).filter(pa.array(groups == group)).combine_chunks()
            unique = pc.unique(keys)
            repeated += len(keys) - len(unique)
            found.update(R.lookup(storage, by_group[group], unique.to_pylist()))
        yield pa.RecordBatch.from_arrays(
            [pa.array(list(found), pa.string()), pa.array([p for p, _f in found.values()], pa.string()),
             pa.array([f for _p, f in found.values()], pa.string()), pa.nulls(len(found), pa.int64()),
             pa.nulls(len(found), pa.int64())], names=names)
        yield pa.RecordBatch.from_arrays(  # the task's counts, in a row of their own
            [pa.nulls(1, pa.string()), pa.nulls(1, pa.string()), pa.nulls(1, pa.string()),
             pa.array([len(found)], pa.int64()), pa.array([repeated], pa.int64())], names=names)

    keys = _with_group(keyed.select(F.col(RECORD_KEY)), len(slices))
    tasks = min(len(slices), keyed.sparkSession.sparkContext.defaultParallelism)
    out = map_in_arrow(keys.repartition(tasks, F.col(R.GROUP)), body,
                       f"{EXISTING_RK} string, {EXISTING_PP} string, {FILE_ID} string, found long, "
                       "duplicates long").persist()
    counts = out.where(F.col(EXISTING_RK).isNull()).select("found", "duplicates").collect()  # computes `out`
    return Located(out.where(F.col(EXISTING_RK).isNotNull()).drop("found", "duplicates"),
                   sum(r["found"] for r in counts), sum(r["duplicates"] for r in counts), out)


# -- updates -----------------------------------------------------------------------------------------
def key_changes(table: HudiTable, view: FileSystemView, instant: str, rows: list[dict],
                replaced: dict[str, list[str]] | None) -> list[R.KeyChange]:
    """The data file groups a write changed (its stats rows), with their slices before it."""
    written: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    for r in rows:
        if not r.get("path"):
            continue
        bases, logs = written.setdefault((r["partition_path"], r["file_id"]), ([], []))
        (logs if parse_log_file(r["path"].rsplit("/", 1)[-1]) is not None else bases).append(r["path"])
    before = {(s.partition_path, s.file_id): s for s in view.latest_slices()}

    def old(key: tuple[str, str]) -> SliceToRead | None:
        s = before.get(key)
        if s is None:
            return None
        return s.to_read()

    out = [R.KeyChange(p, f, instant, old((p, f)) if bases else None, max(bases) if bases else None,
                       tuple(sorted(set(logs), key=log_path_order)))
           for (p, f), (bases, logs) in sorted(written.items())]
    for partition, ids in sorted((replaced or {}).items()):
        out += [R.KeyChange(partition, f, instant, old((partition, f)), None, ())
                for f in ids if (partition, f) not in written and (partition, f) in before]
    return out


def write_changes(spark: SparkSession, table: HudiTable, instant: str, rows: list[dict],
                  replaced: dict[str, list[str]] | None, spec: MergeSpec, schema: pa.Schema) -> list[WriteStat]:
    """Write the record index log files of a write (its stats ``rows``; ``replaced`` file groups
    of an overwrite; ``schema`` of the files it wrote) before the instant completes; their stats
    go into the MDT delta commit."""
    slices = table.record_index_slices()
    if slices is None:
        return []
    partitions = sorted({r["partition_path"] for r in rows} | set(replaced or {}))
    view = table.file_system_view(partitions=partitions)
    changes = key_changes(table, view, instant, rows, replaced)
    if not changes:
        return []
    committed = view.visibility()
    storage = table.storage
    count = len(slices)
    bases = {int(s.file_id.split("-")[-2]): s.base_instant for s in slices}
    utc = table.config.utc_timeline

    def locate(storage: Storage, change: R.KeyChange, key_schema: pa.Schema) -> pa.Table:
        return R.with_groups(R.changed_locations(storage, change, key_schema, spec, committed), count)

    def write(mdt: MetadataWriter, group: int, changed: pa.Table) -> WriteStat:
        located, deleted = R.resolve(changed)
        cells = R.cells(located, R.instant_millis(instant, utc=utc), schema=mdt.record_schema)
        return mdt.write_log_cells(instant, R.PARTITION, file_group_id(R.FILE_GROUP_PREFIX, group), bases[group],
                                   cells, deleted)

    located = _per_item(spark, storage, changes, key_columns(schema, spec), locate, LOCATIONS_DDL)
    return _per_group(located, count, storage, write)


# -- creation ----------------------------------------------------------------------------------------
def builder(spark: SparkSession, table: HudiTable, cfg: HudiConfig, spec: MergeSpec) -> Builder:
    """Creates the partition from every live key of the table, read and written in executors."""
    rule = sizing(cfg)

    def build(instant: str) -> list[WriteStat]:
        view = FileSystemView(table.storage, table.timeline.reload())  # the MDT is being rebuilt: list storage
        schema = table.arrow_schema()
        pieces = [s.to_read() for s in view.latest_slices()]
        mdt = MetadataWriter(table.storage)
        instant_ms = R.instant_millis(instant[:17], utc=table.config.utc_timeline)
        if schema is None or not pieces:
            count = rule.groups(0)
            return write_groups(mdt, instant, R.with_groups(R.empty_locations(), count), count,
                                  instant_ms=instant_ms)
        committed = view.visibility()
        storage = table.storage

        def locate(storage: Storage, piece: SliceToRead, key_schema: pa.Schema) -> pa.Table:
            found = R.slice_locations(storage, piece, key_schema, spec, committed)
            return found.select([R.KEY, R.LOCATION_PARTITION, R.LOCATION_FILE])

        located = _per_item(spark, storage, pieces, key_columns(schema, spec), locate,
                            "key string, partition string, file_id string").persist()
        try:
            count = rule.groups(located.count())

            def write(mdt: MetadataWriter, group: int, rows: pa.Table) -> WriteStat:
                return mdt.write_base_cells(instant, R.PARTITION, file_group_id(R.FILE_GROUP_PREFIX, group),
                                            R.cells(rows, instant_ms, schema=mdt.record_schema))

            written = _per_group(_with_group(located, count), count, storage, write)
        finally:
            located.unpersist()
        stats = {s.fileId: s for s in written}
        for g in range(count):  # every file group gets a base file, empty or not
            group_id = file_group_id(R.FILE_GROUP_PREFIX, g)
            if group_id not in stats:
                stats[group_id] = mdt.write_base_cells(instant, R.PARTITION, group_id, [])
        log.info("record index of %s: %d keys in %d file groups", table.path,
                 sum(s.numWrites for s in stats.values()), count)
        return [stats[k] for k in sorted(stats)]

    return build
