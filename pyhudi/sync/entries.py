"""The catalog entries of a Hudi table, exactly as Hudi's sync tools write them.

Hudi's ``HiveSyncTool`` registers a copy-on-write table once and a merge-on-read table as a
read-optimized ``t_ro``, a snapshot ``t_rt`` and (by default) the snapshot again as ``t``; each
entry names Hudi's input formats, Hive's parquet serde, the Spark data source properties that let
Spark read it through the ``hudi`` source, and the last synced instant (docs/catalog-sync.md §2).
Writing the same entries means a later sync by Apache Hudi finds nothing to change, and engines
that read Hudi's registrations (Athena, Trino, Spark) read pyhudi's.
"""

from __future__ import annotations

import getpass
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.errors import HudiConfigError, HudiSchemaError, HudiUnsupportedError
from pyhudi.io.avro_schema import META_FIELDS
from pyhudi.sync.catalog import Column, PartitionEntry, StorageEntry, TableEntry
from pyhudi.sync.partitions import partition_location, partition_values
from pyhudi.table.table import HudiTable

__all__ = ["INPUT_FORMAT", "LAST_SYNC", "LAST_SYNC_COMPLETION", "OUTPUT_FORMAT", "REALTIME_INPUT_FORMAT", "SERDE",
           "SyncSettings", "SyncTarget", "check_schema_change", "hive_type", "spark_schema_json", "table_entry"]

INPUT_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
REALTIME_INPUT_FORMAT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
LAST_SYNC = "last_commit_time_sync"
LAST_SYNC_COMPLETION = "last_commit_completion_time_sync"
#: Hive's column type changes Hudi's sync applies (HiveSchemaUtil): anything else is refused
_WIDENINGS = {("int", "bigint"), ("float", "double")}


@dataclass(frozen=True)
class SyncTarget:
    """One catalog table a Hudi table is registered as: its name and whether it reads the
    read-optimized view (base files only) or the snapshot (``_rt``: base files merged with logs)."""

    name: str
    read_optimized: bool


@dataclass(frozen=True)
class SyncSettings:
    """The sync options of one table, resolved with Hudi's inferences (database from
    ``hoodie.database.name``, table name and partition fields from the table's properties)."""

    database: str
    table: str
    partition_fields: tuple[str, ...]
    extractor: str | None
    hive_style: bool
    decode: bool
    targets: tuple[SyncTarget, ...]
    support_timestamp: bool = False
    as_datasource: bool = True
    schema_threshold: int = 4000
    managed: bool = False
    omit_metadata_fields: bool = False
    auto_create_database: bool = True
    incremental: bool = True
    no_partition_metadata: bool = False
    conditional: bool = False
    recreate_on_error: bool = False
    table_properties: Mapping[str, str] = field(default_factory=dict)
    serde_properties: Mapping[str, str] = field(default_factory=dict)
    spark_version: str | None = None
    glue_metadata_listing: bool = False

    @classmethod
    def of(cls, table: HudiTable, cfg: HudiConfig, *, spark_version: str | None = None) -> SyncSettings:
        props = table.config
        database = cfg.get(C.SYNC_DATABASE) if cfg.is_set(C.SYNC_DATABASE) else \
            (props.props.get(P.DATABASE) or cfg.get(C.SYNC_DATABASE))
        name = cfg.get(C.SYNC_TABLE) or table.name
        fields = cfg.get(C.PARTITION_FIELDS) if cfg.is_set(C.PARTITION_FIELDS) else props.partition_fields
        decode = cfg.get(C.DECODE_PARTITION)
        return cls(
            database=database, table=name, partition_fields=tuple(fields),
            extractor=cfg.get(C.PARTITION_EXTRACTOR), hive_style=props.hive_style,
            decode=props.url_encode if decode is None else decode,
            targets=sync_targets(name, table.table_type, strategy=cfg.get(C.TABLE_STRATEGY),
                                 skip_ro_suffix=cfg.get(C.SKIP_RO_SUFFIX),
                                 snapshot_with_name=cfg.get(C.SNAPSHOT_WITH_TABLE_NAME)),
            support_timestamp=cfg.get(C.SUPPORT_TIMESTAMP), as_datasource=cfg.get(C.SYNC_AS_DATASOURCE),
            schema_threshold=cfg.get(C.SCHEMA_STRING_THRESHOLD), managed=cfg.get(C.CREATE_MANAGED_TABLE),
            omit_metadata_fields=cfg.get(C.OMIT_METADATA_FIELDS),
            auto_create_database=cfg.get(C.AUTO_CREATE_DATABASE), incremental=cfg.get(C.INCREMENTAL_SYNC),
            no_partition_metadata=cfg.get(C.NO_PARTITION_METADATA), conditional=cfg.get(C.CONDITIONAL_SYNC),
            recreate_on_error=cfg.get(C.RECREATE_ON_ERROR),
            table_properties=cfg.get(C.TABLE_PROPERTIES) or {}, serde_properties=cfg.get(C.SERDE_PROPERTIES) or {},
            spark_version=cfg.get(C.SPARK_VERSION) or spark_version,
            glue_metadata_listing=cfg.get(C.GLUE_METADATA_LISTING))

    def values(self, path: str) -> tuple[str, ...]:
        """The catalog values of a relative partition path (URL-decoded with ``decode``)."""
        values = partition_values(path, self.partition_fields, hive_style=self.hive_style, extractor=self.extractor)
        return tuple(unquote(v) for v in values) if self.decode else tuple(values)


def sync_targets(name: str, table_type: str, *, strategy: str = "ALL", skip_ro_suffix: bool = False,
                 snapshot_with_name: bool = True) -> tuple[SyncTarget, ...]:
    """The catalog tables of a Hudi table (docs/catalog-sync.md §2.1). With ``skip_ro_suffix`` the
    read-optimized table takes the bare name, so the snapshot is not registered under it as well:
    Hudi does, and each of its syncs then flips that one table between the two views."""
    if table_type != P.MERGE_ON_READ:
        return (SyncTarget(name, False),)
    if strategy == "RO":
        return (SyncTarget(name, True),)
    if strategy == "RT":
        return (SyncTarget(name, False),)
    ro = name if skip_ro_suffix else f"{name}_ro"
    targets = [SyncTarget(ro, True), SyncTarget(f"{name}_rt", False)]
    if snapshot_with_name and ro != name:
        targets.append(SyncTarget(name, False))
    return tuple(targets)


def _scalar(t: pa.DataType, *, support_timestamp: bool) -> tuple[str, str] | None:
    """(Hive type, Spark type) of a non-nested Arrow type, as Hudi registers the parquet type it
    writes for it (timestamps: Hive ``bigint`` unless ``support_timestamp``, Spark ``timestamp``);
    None for a nested type."""
    if pa.types.is_boolean(t):
        return "boolean", "boolean"
    if pa.types.is_integer(t):
        return ("bigint", "long") if t.bit_width == 64 else ("int", "integer")
    if pa.types.is_floating(t):
        return ("float", "float") if pa.types.is_float32(t) else ("double", "double")
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string", "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary", "binary"
    if pa.types.is_decimal(t):
        name = f"decimal({t.precision},{t.scale})"
        return name, name
    if pa.types.is_date(t):
        return "date", "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if support_timestamp else "bigint", "timestamp"
    if pa.types.is_time32(t):  # parquet INT32 TIME_MILLIS
        return "int", "integer"
    if pa.types.is_time64(t):  # parquet INT64 TIME_MICROS
        return "bigint", "long"
    return None


def hive_type(dtype: pa.DataType, *, support_timestamp: bool) -> str:
    """The Hive type of an Arrow type, as Hudi's ``HiveSchemaUtil`` gives it for the parquet type
    Hudi writes for it (lower case, no spaces)."""
    def of(t: pa.DataType) -> str:
        scalar = _scalar(t, support_timestamp=support_timestamp)
        if scalar is not None:
            return scalar[0]
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return f"array<{of(t.value_type)}>"
        if pa.types.is_map(t):
            return f"map<{of(t.key_type)},{of(t.item_type)}>"
        if pa.types.is_struct(t):
            return "struct<" + ",".join(f"{f.name.replace('-', '_')}:{of(f.type)}" for f in t) + ">"
        raise HudiSchemaError(f"column type {t} has no Hive type pyhudi registers")
    return of(dtype).lower()


def _spark_type(dtype: pa.DataType) -> Any:
    """Spark's JSON form of an Arrow type (what ``DataType.json`` gives)."""
    scalar = _scalar(dtype, support_timestamp=True)
    if scalar is not None:
        return scalar[1]
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return {"type": "array", "elementType": _spark_type(dtype.value_type),
                "containsNull": dtype.value_field.nullable}
    if pa.types.is_map(dtype):
        return {"type": "map", "keyType": _spark_type(dtype.key_type), "valueType": _spark_type(dtype.item_type),
                "valueContainsNull": dtype.item_field.nullable}
    if pa.types.is_struct(dtype):
        return {"type": "struct", "fields": [_spark_field(f) for f in dtype]}
    raise HudiSchemaError(f"column type {dtype} has no Spark type pyhudi registers")


def _spark_field(f: pa.Field) -> dict[str, Any]:
    return {"name": f.name, "type": _spark_type(f.type), "nullable": f.nullable, "metadata": {}}


def spark_schema_json(data: list[pa.Field], partition: list[pa.Field], *,
                      source_options: Mapping[str, str] | None = None) -> str:
    """The Spark schema Hudi records in ``spark.sql.sources.schema.part.N``: data columns, then the
    partition columns (Spark requires them last), compact JSON as Spark writes it.

    ``source_options`` go into the first field's metadata: Spark 4 gives a Python data source a
    catalog table's schema but none of its storage properties, so this is how pyhudi's ``hudi``
    source learns the table's path when a query names the catalog table (Hudi writes empty
    metadata; a JVM reader ignores the entries)."""
    fields = [_spark_field(f) for f in [*data, *partition]]
    if source_options and fields:
        fields[0]["metadata"] = dict(source_options)
    return json.dumps({"type": "struct", "fields": fields}, separators=(",", ":"))


def _columns(table: HudiTable, settings: SyncSettings) -> tuple[list[pa.Field], list[pa.Field]]:
    """(data columns, partition columns) of the latest schema: partition fields leave the data
    columns; one missing from the schema becomes a non-null string, as Hudi registers it."""
    if table.config.base_file_format != "PARQUET":
        raise HudiUnsupportedError(
            f"{table.path} keeps {table.config.base_file_format} base files; pyhudi registers parquet tables only "
            "(Hudi's sync registers this one with its own input format)")
    schema = table.arrow_schema()
    if schema is None:
        raise HudiConfigError(f"{table.path} has no completed write yet: sync it after its first commit")
    fields = [f for f in schema if not (settings.omit_metadata_fields and f.name in META_FIELDS)]
    by_name = {f.name: f for f in fields}
    parts = [by_name.get(name) or pa.field(name, pa.string(), nullable=False) for name in settings.partition_fields]
    return [f for f in fields if f.name not in settings.partition_fields], parts


def table_location(table: HudiTable) -> str:
    """The table's location as Hadoop qualifies it: ``file:/abs/path`` for local tables (what Spark
    and Hive write for them), the base URI otherwise."""
    if table.storage.is_local:
        return "file:" + os.path.abspath(table.base_path)
    return table.path.rstrip("/")


def table_entry(table: HudiTable, settings: SyncSettings, target: SyncTarget, *, kind: str,
                last_synced: str | None, last_synced_completion: str | None) -> TableEntry:
    """The entry of ``target`` (docs/catalog-sync.md §2.3-2.4), with the last synced instant."""
    data, partition = _columns(table, settings)
    location = table_location(table)
    serde = dict(settings.serde_properties)
    if settings.as_datasource:
        serde.update({"path": location, "hoodie.query.as.ro.table": str(target.read_optimized).lower()})
    serde.setdefault("serialization.format", "1")
    storage = StorageEntry(
        columns=tuple(Column(f.name, hive_type(f.type, support_timestamp=settings.support_timestamp)) for f in data),
        location=location, input_format=INPUT_FORMAT if target.read_optimized or table.table_type != P.MERGE_ON_READ
        else REALTIME_INPUT_FORMAT, output_format=OUTPUT_FORMAT, serde=SERDE, serde_parameters=serde)
    params: dict[str, str] = {} if settings.managed else {"EXTERNAL": "TRUE"}
    if settings.as_datasource:
        params["spark.sql.sources.provider"] = "hudi"
        if settings.spark_version:
            params["spark.sql.create.version"] = settings.spark_version
        text = spark_schema_json(data, partition, source_options={
            "path": location, "hoodie.query.as.ro.table": str(target.read_optimized).lower()})
        parts = max(1, math.ceil(len(text) / settings.schema_threshold))
        params["spark.sql.sources.schema.numParts"] = str(parts)
        for i in range(parts):
            params[f"spark.sql.sources.schema.part.{i}"] = text[i * settings.schema_threshold:
                                                                (i + 1) * settings.schema_threshold]
        if partition:
            params["spark.sql.sources.schema.numPartCols"] = str(len(partition))
            for i, f in enumerate(partition):
                params[f"spark.sql.sources.schema.partCol.{i}"] = f.name
    if kind == "glue":
        params["hudi.metadata-listing-enabled"] = str(settings.glue_metadata_listing).upper()
    params.update(settings.table_properties)
    if last_synced:
        params[LAST_SYNC] = last_synced
    if last_synced_completion:
        params[LAST_SYNC_COMPLETION] = last_synced_completion
    keys = tuple(Column(f.name, hive_type(f.type, support_timestamp=settings.support_timestamp)) for f in partition)
    return TableEntry(database=settings.database, name=target.name, storage=storage, partition_keys=keys,
                      parameters=params, table_type="MANAGED_TABLE" if settings.managed else "EXTERNAL_TABLE",
                      owner=_owner())


def partition_entry(table: HudiTable, settings: SyncSettings, path: str) -> PartitionEntry:
    """The catalog partition of a relative partition path."""
    return PartitionEntry(settings.values(path), partition_location(table_location(table), path))


def catalog_types(columns: tuple[Column, ...]) -> dict[str, str]:
    """Column name -> type of catalog columns, lower-cased and without spaces, so that types compare
    however the catalog spells them."""
    return {c.name.lower(): c.type.lower().replace(" ", "") for c in columns}


def check_schema_change(remote: TableEntry, desired: TableEntry) -> bool:
    """Whether the columns changed; a change Hudi's sync would refuse raises (a type narrowed or
    replaced: readers of the catalog would misread the files already written)."""
    keys = catalog_types(remote.partition_keys)
    for col in desired.partition_keys:
        if keys.get(col.name.lower(), col.type) != col.type or len(keys) != len(desired.partition_keys):
            raise HudiSchemaError(
                f"{desired.database}.{desired.name}: the catalog partitions it by "
                f"{[f'{c.name} {c.type}' for c in remote.partition_keys]}, the table by "
                f"{[f'{c.name} {c.type}' for c in desired.partition_keys]}; a catalog cannot change partition columns: "
                "drop the catalog table to register it afresh")
    old = catalog_types(remote.storage.columns)
    for col in desired.storage.columns:
        before = old.get(col.name.lower())
        now = col.type.lower()
        if before is None or before == now:
            continue
        if (before, now) in _WIDENINGS or (before.startswith("struct<") and now.startswith("struct<")):
            continue
        raise HudiSchemaError(
            f"{desired.database}.{desired.name}: column {col.name} is {before} in the catalog and {now} in the table; "
            "Hive and Glue readers cannot take that change (only int→bigint, float→double and struct changes are "
            "synced, as Hudi syncs them): drop the catalog table to register it afresh")
    return [(c.name.lower(), c.type.lower().replace(" ", "")) for c in remote.storage.columns] != \
        [(c.name.lower(), c.type) for c in desired.storage.columns] or \
        [(c.name.lower(), c.type.lower()) for c in remote.partition_keys] != \
        [(c.name.lower(), c.type) for c in desired.partition_keys]


def _owner() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (containers): Hive accepts none
        return ""
