"""The Spark side of a write: runs the write strategy the operation and index call for, then hands
the written files' metadata to the commit.

Every step on rows is a native Spark operation; the driver only collects small aggregates (the
partitions touched, counts per file group) and executor stats (one row per file). An upsert runs
three Spark jobs: affected partitions, the workload profile of the tagged records, and the write;
a partition-local write (:mod:`pyhudi.spark.local_write`) runs two, and at most one when the input
is small enough to write on the driver (:mod:`pyhudi.spark.small_write`,
``pyhudi.write.small.batch.bytes``). Where the partition-path check before the instant already
counted the input's rows per path (:attr:`WriteState.input_counts`), the first of those jobs is
not run; where it collected a small batch's prepared rows (:attr:`WriteState.collected`), the
driver write takes them.

The steps live in modules named after what they own: :mod:`pyhudi.spark.prepare` (keys and
de-duplication), :mod:`pyhudi.spark.tagging` (index lookups), :mod:`pyhudi.spark.sizing` (small
files, record size, bucket plan), :mod:`pyhudi.spark.routing` (rows to tasks), and the strategies
:mod:`pyhudi.spark.bulk_write`, :mod:`pyhudi.spark.local_write` and
:mod:`pyhudi.spark.planned_write`. They are functions of a :class:`~pyhudi.spark.state.WriteState`,
which a :class:`Pipeline` is, so none of them imports this module.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame

from pyhudi import config as C
from pyhudi.index import INDEX_STATS_KEY
from pyhudi.index.bloom_index import remember_ranges
from pyhudi.io.avro_schema import FILE_NAME, storage_schema
from pyhudi.metadata import column_stats
from pyhudi.metadata.table import RECORD_INDEX_PARTITION, MetadataTable
from pyhudi.spark.bulk_write import bulk_insert, deleted_partitions, replaced_groups
from pyhudi.spark.local_write import local_index, local_write
from pyhudi.spark.planned_write import bucket_write, tagged_write
from pyhudi.spark.record_index_job import keeps_record_index, write_changes
from pyhudi.spark.small_write import driver_write, is_small
from pyhudi.spark.state import WriteState
from pyhudi.spark.write_options import PREPPED_SUFFIX
from pyhudi.timeline.commit_metadata import CommitMetadata
from pyhudi.write.replace import DELETE_PARTITION
from pyhudi.write.result import OPERATION_TYPES, commit_metadata, record_run, written_files


@dataclass
class Pipeline(WriteState):
    """One write of a batch into an instant already requested.

    The fields of :class:`WriteState` say what is written where and hold what the steps gather
    (phases, index statistics, cached frames, touched partitions); the two below only the
    dispatch and the commit use."""

    extra_metadata: dict[str, str] = field(default_factory=dict)  # stored in the commit as given
    partitions_to_delete: tuple[str, ...] | None = None  # delete_partition with the option set
    #: rows keyed by their stored meta columns: the commit records Hudi's ``*_PREPPED`` operation
    #: type, as ``SparkRDDWriteClient.upsertPreppedRecords`` / ``deletePrepped`` / ``insertPreppedRecords`` do
    prepped: bool = False

    def run(self, data: DataFrame, *, operation: str, replace: str | None, schema_json: str,
            commit: Callable[..., None]) -> tuple[CommitMetadata, dict[str, Any]]:
        """Write the files of the requested instant, then hand its metadata to ``commit``.

        ``replace`` names a replace operation (:mod:`pyhudi.write.replace`): its new files are
        written as an insert, and the commit retires the file groups it replaces."""
        table = self.table
        try:
            ctx = self.context()
            bucket = self.cfg.get(C.INDEX_TYPE) == "BUCKET"
            located = self.prepped and FILE_NAME in data.columns and not bucket and replace is None \
                and operation in ("upsert", "delete")
            if not located and FILE_NAME in data.columns:
                data = data.drop(FILE_NAME)
            local = None if located else local_index(self.cfg, operation)
            replaced: dict[str, list[str]] | None
            if replace == DELETE_PARTITION:
                rows, replaced = [], deleted_partitions(self, data, self.partitions_to_delete)
            elif replace and bucket:  # new file groups named after the buckets, as Hudi's overwrite makes
                rows = bucket_write(self, data, "insert", ctx, fresh=True)
                replaced = replaced_groups(self, replace, self.touched_partitions)
            elif (operation == "bulk_insert" and not bucket) or replace:
                rows, replaced = bulk_insert(self, data, operation, ctx, replace)
            elif local is not None and (written := self._local_write(data)(self, data, operation, ctx,
                                                                           local)) is not None:
                rows, replaced = written, None
            elif bucket:
                rows, replaced = bucket_write(self, data, operation, ctx), None
            else:
                rows, replaced = tagged_write(self, data, operation, ctx), None
            op_type = replace or OPERATION_TYPES[operation] + (PREPPED_SUFFIX.upper() if self.prepped else "")
            meta = commit_metadata(rows, operation_type=op_type, schema_json=schema_json, replaced=replaced)
            prefix = self.cfg.get(C.COMMIT_METADATA_KEY_PREFIX)
            if prefix:  # Hudi's commitmeta.key.prefix: such options travel with the commit
                meta.extra_metadata.update({k: str(v) for k, v in self.cfg.raw.items() if k.startswith(prefix)})
            meta.extra_metadata.update(self.extra_metadata)
            if self.index_stats is not None:
                meta.extra_metadata[INDEX_STATS_KEY] = json.dumps(self.index_stats.to_dict(), sort_keys=True)
            record_run(meta, self.phases, self.cfg.raw)
            started = time.monotonic()
            index_files = None
            if keeps_record_index(self.cfg):
                index_files = {RECORD_INDEX_PARTITION: write_changes(
                    data.sparkSession, table, self.instant, rows, replaced, self.merge_spec(),
                    storage_schema(self.target_schema))}
                started = self.phase("record_index", started)
            log_stats = self.log_statistics(rows)
            commit(meta, written=index_files, records={column_stats.PARTITION: log_stats} if log_stats else None,
                   files=written_files(rows))
            remember_ranges(table.storage.base_uri, [(r["path"], r["min_key"], r["max_key"]) for r in rows])
            self.phase("commit", started)
            result: dict[str, Any] = dict(self.phases)
            if self.index_stats is not None:
                result["index"] = self.index_stats.to_dict()
            return meta, result
        finally:
            self.collected = None  # rows a path other than the driver write left
            for df in self._cached:
                df.unpersist()

    def _local_write(self, data: DataFrame) -> Callable[..., list[dict] | None]:
        """The partition-local write for ``data``: on the driver when the check before the instant
        collected it or it is small (:mod:`pyhudi.spark.small_write`), else in Spark tasks."""
        return driver_write if self.collected is not None or is_small(self.cfg, data) else local_write

    def log_statistics(self, rows: list[dict]) -> list[tuple[str, dict]]:
        """The column statistics the append handles computed for the log files they wrote. Blocks
        appended to an existing log file are kept only where the metadata table describes the
        file's earlier blocks (:func:`pyhudi.metadata.column_stats.appended_records`)."""
        fresh: list[tuple[str, dict]] = []
        appended: list[tuple[str, dict]] = []
        for row in rows:
            if row.get("column_stats"):
                (appended if (row.get("log_offset") or 0) > 0 else fresh).extend(
                    column_stats.decode(row["column_stats"]))
        if appended:
            recorded = MetadataTable(self.table.storage).read(column_stats.PARTITION, self.table.timeline,
                                                              key_prefixes=tuple(sorted({k for k, _r in appended})))
            fresh += column_stats.appended_records(appended, recorded)
        return fresh
