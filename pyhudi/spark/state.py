"""What one write knows and what it gathers while it runs.

The write strategies (:mod:`pyhudi.spark.bulk_write`, :mod:`pyhudi.spark.local_write`,
:mod:`pyhudi.spark.planned_write`) and their steps are functions of a :class:`WriteState`, so they
live in modules of their own without importing :mod:`pyhudi.spark.pipeline`, which runs them. Every
attribute a step sets is a field here: the phase timings, the index statistics and the DataFrames
cached for the write are reported or released by :meth:`pyhudi.spark.pipeline.Pipeline.run`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config.properties import MERGE_ON_READ
from pyhudi.errors import HudiConfigError
from pyhudi.io.avro_schema import META_FIELDS, storage_schema, table_avro_schema
from pyhudi.io.base_file import parquet_settings
from pyhudi.keygen.spec import KeyGenSpec
from pyhudi.read.merge import MergeSpec
from pyhudi.spark.index import IndexStats
from pyhudi.table.table import HudiTable
from pyhudi.timeline.timeline import commit_action_for
from pyhudi.write.plan import WriteContext


def global_index(cfg: HudiConfig) -> bool:
    """Whether the options' index matches keys across partitions."""
    index_type = cfg.get(C.INDEX_TYPE)
    return bool(index_type.startswith("GLOBAL_") or index_type == "RECORD_INDEX")


def merge_spec_of(cfg: HudiConfig, ordering_field: str | None) -> MergeSpec:
    """How a write's records merge: the payload class, the ordering field(s) and the delete
    field/marker of the options."""
    return MergeSpec.of(ordering_field, cfg.get(C.PAYLOAD_CLASS), delete_field=cfg.get(C.PAYLOAD_DELETE_FIELD),
                        delete_marker=cfg.get(C.PAYLOAD_DELETE_MARKER))


@dataclass
class WriteState:
    """The table, options and instant of one write, and the state its steps collect."""

    table: HudiTable
    cfg: HudiConfig
    spec: KeyGenSpec
    instant: str
    target_schema: pa.Schema
    ordering_field: str | None
    is_deleted_column: bool
    touched_partitions: tuple[str, ...] = ()  # partitions a bucket write had records for
    #: the input's rows per partition path, counted by the partition-path check before the instant
    #: (:func:`~pyhudi.spark.keygen.check_partitions`); None where no check counted them
    input_counts: dict[str, int] | None = None
    #: the prepared rows (:func:`pyhudi.spark.prepare.prepared`) of a small batch, collected by
    #: the check before the instant (:func:`pyhudi.spark.small_write.collect_prepared`); the driver
    #: write takes them (and lets go of them) instead of collecting again. None where no check
    #: collected them
    collected: pa.Table | None = None
    collected_s: float = 0.0  # the seconds of that check: the driver write's collect phase
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase, and a few sizes
    index_stats: IndexStats | None = None  # how the index found stored records, for the commit
    _cached: list[DataFrame] = field(default_factory=list)  # unpersisted when the write ends

    @property
    def is_global(self) -> bool:
        """Whether the index matches keys across partitions (de-duplication then ignores the partition)."""
        return global_index(self.cfg)

    @property
    def is_mor(self) -> bool:
        return self.table.table_type == MERGE_ON_READ

    @property
    def write_action(self) -> str:
        """``deltacommit`` on merge-on-read tables, ``commit`` on copy-on-write ones."""
        return commit_action_for(self.table.table_type)

    def merge_spec(self) -> MergeSpec:
        """How this write's records merge (:func:`merge_spec_of`; shipped to the executors in
        :meth:`context`)."""
        return merge_spec_of(self.cfg, self.ordering_field)

    def phase(self, name: str, started: float) -> float:
        """Record the seconds since ``started`` as phase ``name``; the time now, to start the next."""
        now = time.monotonic()
        self.phases[f"{name}_s"] = round(now - started, 3)
        return now

    def persist(self, df: DataFrame) -> DataFrame:
        """``df`` cached for the jobs of this write, and released when it ends."""
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._cached.append(df)
        return df

    def keep_cached(self, df: DataFrame) -> None:
        """Release ``df``, cached by a step elsewhere, when the write ends."""
        self._cached.append(df)

    def context(self) -> WriteContext:
        """What the executors' write handles need: file settings, schema, sizes and stats columns."""
        cfg = self.cfg
        file_schema = storage_schema(self.target_schema)
        settings = parquet_settings(cfg, table_avro_schema(file_schema, self.table.name, with_meta_fields=True),
                                    populate_meta_fields=cfg.get(C.POPULATE_META_FIELDS))
        return WriteContext(
            storage=self.table.storage, instant_time=self.instant, settings=settings,
            storage_schema_ipc=file_schema.serialize().to_pybytes(),
            merge_spec=self.merge_spec(),
            max_file_size=cfg.get(C.PARQUET_MAX_FILE_SIZE), compression_ratio=cfg.get(C.PARQUET_COMPRESSION_RATIO),
            log_block_format=cfg.get(C.LOGFILE_DATA_BLOCK_FORMAT), log_max_size=cfg.get(C.LOGFILE_MAX_SIZE),
            log_block_max_size=cfg.get(C.LOGFILE_DATA_BLOCK_MAX_SIZE),
            append_in_place=cfg.get(C.WRITE_CONCURRENCY_MODE) != C.OCC,
            log_column_stats=bool(cfg.get(C.METADATA_ENABLE) and cfg.get(C.METADATA_COLUMN_STATS_ENABLE)),
            stats_columns=tuple(cfg.get(C.METADATA_COLUMN_STATS_COLUMNS)),
            cdc_mode=self.table.config.cdc_logging_mode,
            partial_update_schema=self._partial_update_schema(file_schema))

    def _partial_update_schema(self, file_schema: pa.Schema) -> str | None:
        """The writer schema of partial-update log blocks (``hoodie.write.partial.update.schema``, an
        Avro record of the updated columns; Hudi's ``HoodieWriteHandle`` adds the meta fields), or
        None. Only merge-on-read tables of version 8+ have such blocks (Hudi 1.x)."""
        text = self.cfg.get(C.WRITE_PARTIAL_UPDATE_SCHEMA)
        if not text:
            return None
        key = C.WRITE_PARTIAL_UPDATE_SCHEMA.key
        if not self.is_mor or self.table.config.version < 8:
            raise HudiConfigError(f"{key} is set, but partial-update log blocks exist only in merge-on-read tables of "
                                  f"version 8+ (Hudi 1.x); {self.table.path} is not one: unset it")
        try:
            names = [f["name"] for f in json.loads(text)["fields"]]
        except (ValueError, TypeError, KeyError):
            raise HudiConfigError(f"{key} is not an Avro record schema: {text[:200]!r}") from None
        unknown = [n for n in names if n not in file_schema.names]
        if unknown or not names:
            raise HudiConfigError(f"{key} names no column or columns the table does not have: {unknown}")
        kept = pa.schema([f for f in file_schema if f.name in names and f.name not in META_FIELDS])
        return table_avro_schema(kept, self.table.name, with_meta_fields=True)
