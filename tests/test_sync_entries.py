"""The catalog entries of a table, against what Hudi's sync tools register (docs/catalog-sync.md §2)
and against Spark's own rendering of the same schema: the Spark schema JSON Spark writes for a data
source table, and Spark's type strings, which are Hive's for every type Hudi registers."""

from __future__ import annotations

import json

import pytest
from conftest import unzip_table
from pyspark.sql.types import StructType

import pyhudi
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiSchemaError
from pyhudi.sync.catalog import Column
from pyhudi.sync.entries import (
    INPUT_FORMAT,
    OUTPUT_FORMAT,
    REALTIME_INPUT_FORMAT,
    SERDE,
    SyncSettings,
    SyncTarget,
    check_schema_change,
    sync_targets,
    table_entry,
)
from pyhudi.sync.tool import check_sync_options


def _entry(table, options=None, *, target=None, kind="hms"):
    settings = SyncSettings.of(table, HudiConfig.of(options or {}), spark_version="4.3.0")
    last = table.timeline.completed_writes()[-1].timestamp
    return table_entry(table, settings, target or settings.targets[0], kind=kind, last_synced=last,
                       last_synced_completion=None), last


def _without_metadata(schema_json: str) -> dict:
    schema = json.loads(schema_json)
    for field in schema["fields"]:
        field["metadata"] = {}
    return schema


def test_entry_of_a_table_hudi_wrote_matches_hudi_and_spark(spark, interop_dir, tmp_path):
    path = unzip_table(interop_dir / "cow" / "v6_simplekeygen_nonhivestyle.zip", tmp_path)
    table = pyhudi.HudiTable(str(path))
    entry, last = _entry(table)
    location = "file:" + str(path.resolve())
    assert (entry.database, entry.name, entry.table_type) == ("default", "v6_simplekeygen_nonhivestyle",
                                                              "EXTERNAL_TABLE")
    assert (entry.storage.input_format, entry.storage.output_format, entry.storage.serde) == \
        (INPUT_FORMAT, OUTPUT_FORMAT, SERDE)
    assert entry.storage.location == location
    assert dict(entry.storage.serde_parameters) == {"path": location, "hoodie.query.as.ro.table": "false",
                                                    "serialization.format": "1"}
    params = dict(entry.parameters)
    text = params.pop("spark.sql.sources.schema.part.0")
    assert params == {"EXTERNAL": "TRUE", "spark.sql.sources.provider": "hudi", "spark.sql.create.version": "4.3.0",
                      "spark.sql.sources.schema.numParts": "1", "spark.sql.sources.schema.numPartCols": "1",
                      "spark.sql.sources.schema.partCol.0": "byteField", "last_commit_time_sync": last}
    # Spark's own JSON of the schema Spark reads, partition column last (Hudi's order)
    read = pyhudi.read(spark, str(path)).schema
    ordered = StructType([f for f in read.fields if f.name != "byteField"] + [read["byteField"]])
    assert _without_metadata(text) == json.loads(ordered.json())
    # the first field's metadata tells pyhudi's Spark source where the table is (Spark passes no options)
    assert json.loads(text)["fields"][0]["metadata"] == {"path": location, "hoodie.query.as.ro.table": "false"}
    # Hive types: Spark's type strings, which are Hive's, except timestamps (bigint without support_timestamp)
    expected = [Column(f.name, "bigint" if f.dataType.typeName() == "timestamp" else f.dataType.simpleString())
                for f in ordered.fields[:-1]]
    assert list(entry.storage.columns) == expected
    assert list(entry.partition_keys) == [Column("byteField", "int")]
    with_ts, _ = _entry(table, {"hoodie.datasource.hive_sync.support_timestamp": "true"})
    assert [c.type for c in with_ts.storage.columns] == [f.dataType.simpleString() for f in ordered.fields[:-1]]


def test_options_shape_the_entry(interop_dir, tmp_path):
    path = unzip_table(interop_dir / "cow" / "v6_simplekeygen_hivestyle_no_metafields.zip", tmp_path)
    table = pyhudi.HudiTable(str(path))
    entry, _ = _entry(table, {
        "hoodie.datasource.hive_sync.database": "lake", "hoodie.datasource.hive_sync.table": "people",
        "hoodie.datasource.hive_sync.create_managed_table": "true",
        "hoodie.datasource.hive_sync.omit_metadata_fields": "true",
        "hoodie.datasource.hive_sync.schema_string_length_thresh": "100",
        "hoodie.datasource.hive_sync.table_properties": "owner.team=drones\nretention=30",
        "hoodie.datasource.hive_sync.serde_properties": "custom=1"}, kind="glue")
    assert (entry.database, entry.name, entry.table_type) == ("lake", "people", "MANAGED_TABLE")
    params = entry.parameters
    assert "EXTERNAL" not in params and params["owner.team"] == "drones" and params["retention"] == "30"
    assert params["hudi.metadata-listing-enabled"] == "FALSE"  # Glue only
    assert entry.storage.serde_parameters["custom"] == "1"
    parts = int(params["spark.sql.sources.schema.numParts"])
    assert parts > 1 and all(len(params[f"spark.sql.sources.schema.part.{i}"]) <= 100 for i in range(parts))
    schema = json.loads("".join(params[f"spark.sql.sources.schema.part.{i}"] for i in range(parts)))
    assert not any(f["name"].startswith("_hoodie") for f in schema["fields"])
    assert not any(c.name.startswith("_hoodie") for c in entry.storage.columns)
    assert schema["fields"][-1]["name"] == "byteField"
    bare, _ = _entry(table, {"hoodie.datasource.hive_sync.sync_as_datasource": "false"})
    assert not any(k.startswith("spark.sql") for k in bare.parameters)
    assert dict(bare.storage.serde_parameters) == {"serialization.format": "1"}


def test_merge_on_read_tables_and_names():
    assert sync_targets("t", "COPY_ON_WRITE") == (SyncTarget("t", False),)
    assert sync_targets("t", "MERGE_ON_READ") == (SyncTarget("t_ro", True), SyncTarget("t_rt", False),
                                                  SyncTarget("t", False))
    assert sync_targets("t", "MERGE_ON_READ", snapshot_with_name=False) == (SyncTarget("t_ro", True),
                                                                            SyncTarget("t_rt", False))
    # the read-optimized table takes the bare name: the snapshot is not registered under it as well
    assert sync_targets("t", "MERGE_ON_READ", skip_ro_suffix=True) == (SyncTarget("t", True),
                                                                       SyncTarget("t_rt", False))
    assert sync_targets("t", "MERGE_ON_READ", strategy="RO") == (SyncTarget("t", True),)
    assert sync_targets("t", "MERGE_ON_READ", strategy="RT") == (SyncTarget("t", False),)


def test_merge_on_read_entries(interop_dir, tmp_path):
    path = unzip_table(interop_dir / "mor" / "parquet" / "v6_simplekeygen_nonhivestyle.zip", tmp_path)
    table = pyhudi.HudiTable(str(path))
    settings = SyncSettings.of(table, HudiConfig.of({}))
    ro, rt, snapshot = (table_entry(table, settings, t, kind="hms", last_synced=None, last_synced_completion=None)
                        for t in settings.targets)
    assert (ro.name, rt.name, snapshot.name) == (f"{table.name}_ro", f"{table.name}_rt", table.name)
    assert ro.storage.input_format == INPUT_FORMAT
    assert rt.storage.input_format == snapshot.storage.input_format == REALTIME_INPUT_FORMAT
    assert [e.storage.serde_parameters["hoodie.query.as.ro.table"] for e in (ro, rt, snapshot)] == \
        ["true", "false", "false"]


def test_schema_changes_hudi_allows_and_refuses(interop_dir, tmp_path):
    path = unzip_table(interop_dir / "cow" / "v6_simplekeygen_nonhivestyle.zip", tmp_path)
    entry, _ = _entry(pyhudi.HudiTable(str(path)))
    assert not check_schema_change(entry, entry)

    def with_columns(columns):
        return entry.__class__(**{**entry.__dict__, "storage": entry.storage.__class__(
            **{**entry.storage.__dict__, "columns": tuple(columns)})})
    cols = list(entry.storage.columns)
    index = next(i for i, c in enumerate(cols) if c.name == "longField")
    narrower = with_columns([*cols[:index], Column("longField", "int"), *cols[index + 1:]])
    assert check_schema_change(narrower, entry)  # int -> bigint: allowed, a change
    assert check_schema_change(with_columns(cols[:-1]), entry)  # an added column
    as_string = with_columns([*cols[:index], Column("longField", "string"), *cols[index + 1:]])
    with pytest.raises(HudiSchemaError, match="longField is string in the catalog and bigint"):
        check_schema_change(as_string, entry)


def test_partition_values_by_extractor_and_decoding(interop_dir, tmp_path):
    path = unzip_table(interop_dir / "cow" / "v6_simplekeygen_hivestyle_no_metafields.zip", tmp_path)
    table = pyhudi.HudiTable(str(path))
    settings = SyncSettings.of(table, HudiConfig.of({}))
    assert settings.values("byteField=10") == ("10",)
    multi = SyncSettings.of(table, HudiConfig.of({
        "hoodie.datasource.hive_sync.partition_extractor_class": "org.apache.hudi.hive.MultiPartKeysValueExtractor",
        "hoodie.datasource.hive_sync.partition_fields": "y,m,d", "hoodie.meta.sync.decode_partition": "true"}))
    assert multi.values("y=2024/m=01/d=a%2Fb") == ("2024", "01", "a/b")
    day = SyncSettings.of(table, HudiConfig.of({
        "hoodie.datasource.hive_sync.partition_extractor_class": "SlashEncodedDayPartitionValueExtractor"}))
    assert day.values("2024/01/02") == ("2024-01-02",)
    none = SyncSettings.of(table, HudiConfig.of({
        "hoodie.datasource.hive_sync.partition_fields": "",
        "hoodie.datasource.hive_sync.partition_extractor_class": "NonPartitionedExtractor"}))
    assert none.partition_fields == () and none.values("") == ()


def test_unimplemented_sync_settings_are_refused():
    for key, value in (("hoodie.datasource.hive_sync.mode", "jdbc"), ("hoodie.datasource.hive_sync.use_jdbc", "true"),
                       ("hoodie.meta.sync.client.tool.class", "org.apache.hudi.sync.datahub.DataHubSyncTool"),
                       ("hoodie.datasource.hive_sync.bucket_sync", "true"),
                       ("hoodie.datasource.meta.sync.glue.partition_index_fields.enable", "true"),
                       ("hoodie.aws.role.arn", "arn:aws:iam::1:role/x")):
        with pytest.raises(pyhudi.HudiUnsupportedOptionError, match=key):
            HudiConfig.of({key: value})
    with pytest.raises(pyhudi.HudiConfigError, match="not a Hudi sync tool"):
        HudiConfig.of({"hoodie.meta.sync.client.tool.class": "com.example.MySync"})
    # without a mode, Hudi syncs through the JDBC URL it is given; pyhudi would use the metastore
    jdbc = {"hoodie.datasource.hive_sync.jdbcurl": "jdbc:hive2://hs2:10000"}
    with pytest.raises(pyhudi.HudiUnsupportedOptionError, match="hive_sync.mode=hms"):
        check_sync_options(HudiConfig.of(jdbc))
    check_sync_options(HudiConfig.of({**jdbc, "hoodie.datasource.hive_sync.mode": "hms"}))
