"""Hudi features pyhudi does not implement are errors naming them, raised before any file is
written; only keys that are no Hudi option at all (typos) are warnings."""

from __future__ import annotations

import os
import shutil
import warnings

import pytest
from conftest import hudi_rs_rows, pyhudi_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("v", T.IntegerType())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}
ROWS = [("a", "x", 1, 1), ("b", "y", 1, 2), ("c", "x", 1, 3)]


def _files(path) -> dict[str, int]:
    """Every file under ``path`` with its size: a refused call must leave all of them as they were."""
    out = {}
    for d, _, names in os.walk(path):
        for n in names:
            full = os.path.join(d, n)
            out[os.path.relpath(full, path)] = os.path.getsize(full)
    return out


@pytest.fixture(scope="module")
def base_table(spark, tmp_path_factory):
    """A small copy-on-write table listed from storage (no metadata table), copied by tests that change it."""
    path = str(tmp_path_factory.mktemp("unsupported") / "t")
    pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), path,
                 {**OPTS, "hoodie.datasource.write.operation": "bulk_insert", "hoodie.metadata.enable": "false"})
    assert sorted((r["id"], r["p"], r["ts"], r["v"]) for r in hudi_rs_rows(path)) == sorted(ROWS)
    return path


def _copy(base: str, tmp_path) -> str:
    dest = str(tmp_path / "copy")
    shutil.copytree(base, dest)
    return dest


def _set_properties(path: str, changes: dict[str, str | None]) -> None:
    pyhudi.HudiTable(path).update_properties(changes)


# -- options ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("key, value", [
    ("hoodie.write.table.version", "7"),
    ("hoodie.index.type", "HBASE"),
    ("hoodie.table.base.file.format", "LANCE"),
    ("hoodie.table.base.file.format", "ORC"),
    ("hoodie.datasource.hive_sync.mode", "jdbc"),
    ("hoodie.bootstrap.base.path", "/src"),  # a Hudi key pyhudi does not declare at all
    ("hoodie.schema.on.read.enable", "true"),
    ("hoodie.datasource.write.drop.partition.columns", "true"),
    ("hoodie.record.merge.mode", "CUSTOM"),
    ("hoodie.write.record.merge.mode", "CUSTOM"),
    ("hoodie.datasource.write.payload.class", "org.apache.hudi.common.model.FirstValueAvroPayload"),
    ("hoodie.compaction.payload.class", "com.example.MyPayload"),
    ("hoodie.metrics.on", "true"),
    ("hoodie.avro.schema.externaltransformation", "true"),  # Spark lower-cases keys
    ("HOODIE.SCHEMA.ON.READ.ENABLE", "true"),
])
def test_an_unimplemented_hudi_option_is_an_error_naming_it(key, value):
    with pytest.raises(pyhudi.HudiUnsupportedOptionError) as err:
        HudiConfig.of({**OPTS, key: value})
    assert key.lower() in str(err.value).lower() and "pyhudi" in str(err.value)
    assert isinstance(err.value, pyhudi.HudiConfigError) and isinstance(err.value, pyhudi.HudiUnsupportedError)


def test_a_value_error_lists_what_pyhudi_implements():
    with pytest.raises(pyhudi.HudiUnsupportedOptionError, match=r"hoodie.write.table.version=7: .*only 6, 8 or 9"):
        HudiConfig.of({"hoodie.write.table.version": "7"})
    with pytest.raises(pyhudi.HudiUnsupportedOptionError,
                       match=r"EVENT_TIME_ORDERING, not 'custom'.*given as hoodie.record.merge.mode"):
        HudiConfig.of({"hoodie.record.merge.mode": "custom"})


def test_defaults_of_unimplemented_features_and_engine_tuning_are_accepted():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither error nor warning
        cfg = HudiConfig.of({**OPTS, "hoodie.table.cdc.enabled": "false", "hoodie.write.table.version": "6",
                             "hoodie.table.base.file.format": "parquet", "hoodie.datasource.hive_sync.enable": "false",
                             "hoodie.embed.timeline.server": "true",
                             "hoodie.write.markers.type": "TIMELINE_SERVER_BASED",
                             "hoodie.memory.merge.max.size": "1073741824", "hoodie.rollback.parallelism": "10"})
    assert cfg.get(C.CDC_ENABLED) is False and cfg.get(C.BASE_FILE_FORMAT) == "PARQUET"


def test_a_key_no_hudi_release_has_only_warns_where_a_hudi_key_fails():
    for typo, close in (("hoodie.table.cdc.enable", "hoodie.table.cdc.enabled"),
                        ("hoodie.datasource.write.recordkey.fields", "hoodie.datasource.write.recordkey.field")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            HudiConfig.of({typo: "1"})
        assert any(f"unknown option {typo}; did you mean {close}?" in str(w.message) for w in caught)
    with pytest.raises(pyhudi.HudiUnsupportedOptionError, match="hoodie.schema.on.read.enable"):
        HudiConfig.of({"hoodie.schema.on.read.enable": "1"})


def test_a_merge_mode_stands_for_its_payload_and_must_agree_with_one_given():
    assert HudiConfig.of({"hoodie.write.record.merge.mode": "EVENT_TIME_ORDERING"}).get(C.PAYLOAD_CLASS) == \
        "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    assert HudiConfig.of({"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"}).get(C.PAYLOAD_CLASS) == \
        "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
    with pytest.raises(pyhudi.HudiConfigError, match="contradict"):
        HudiConfig.of({"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING",
                       "hoodie.datasource.write.payload.class": C.DEFAULT_PAYLOAD})


def test_sync_settings_without_sync_and_defaults_of_unimplemented_features_are_accepted():
    """Pipelines pass catalog settings with sync off, and Hudi's defaults ask for nothing missing."""
    HudiConfig.of({"hoodie.datasource.hive_sync.enable": "false", "hoodie.datasource.hive_sync.database": "db",
                   "hoodie.datasource.hive_sync.mode": "hms", "hoodie.datasource.query.incremental.format":
                   "latest_state", "hoodie.metrics.on": "false", "hoodie.write.num.retries.on.conflict.failures": "0"})


@pytest.mark.parametrize("key, value", [("hoodie.write.table.version", "7"),
                                        ("hoodie.datasource.hive_sync.mode", "jdbc"),
                                        ("hoodie.bootstrap.base.path", "/src")])
def test_a_write_with_an_unimplemented_option_writes_nothing(spark, base_table, tmp_path, key, value):
    new = str(tmp_path / "new")
    df = spark.createDataFrame([("d", "x", 2, 4)], SCHEMA)
    with pytest.raises(pyhudi.HudiUnsupportedOptionError, match=key):
        pyhudi.write(df, new, {**OPTS, key: value})
    assert not os.path.exists(new)
    before = _files(base_table)
    with pytest.raises(pyhudi.HudiUnsupportedOptionError, match=key):
        pyhudi.write(df, base_table, {**OPTS, key: value})
    assert _files(base_table) == before


# -- column names ----------------------------------------------------------------------------------

def test_column_names_avro_cannot_hold_are_refused_before_writing(spark, base_table, tmp_path):
    new = str(tmp_path / "new")
    bad = spark.createDataFrame([("d", "x", 2, 4)], "id string, p string, ts long, `my-col` int")
    with pytest.raises(pyhudi.HudiSchemaError, match="'my-col'"):
        pyhudi.write(bad, new, OPTS)
    assert not os.path.exists(new)
    nested = spark.createDataFrame([("d", "x", 2, (1, 2))], "id string, p string, ts long, s struct<ok:int, `1st`:int>")
    with pytest.raises(pyhudi.HudiSchemaError, match=r"'s\.1st'"):
        pyhudi.write(nested, new, OPTS)
    assert not os.path.exists(new)
    before = _files(base_table)
    evolved = spark.createDataFrame([("d", "x", 2, 4, 5)], "id string, p string, ts long, v int, `new col` int")
    with pytest.raises(pyhudi.HudiSchemaError, match="'new col'"):
        pyhudi.write(evolved, base_table, OPTS)
    assert _files(base_table) == before


# -- tables ----------------------------------------------------------------------------------------

def test_a_hudi_1x_table_with_lance_base_files_is_refused_naming_lance(spark, v9_table, tmp_path):
    """The table as Hudi 1.x would leave it with hoodie.table.base.file.format=LANCE, listed from
    storage: its records are in .lance files pyhudi cannot read, so it must not read as 0 rows."""
    path = str(tmp_path / "lance")
    shutil.copytree(v9_table, path)
    for d, _, names in os.walk(path):
        if ".hoodie" not in d:
            for n in names:
                if n.endswith(".parquet"):
                    os.rename(os.path.join(d, n), os.path.join(d, n[:-len(".parquet")] + ".lance"))
    _set_properties(path, {P.BASE_FILE_FORMAT: "LANCE", P.METADATA_PARTITIONS: ""})
    before = _files(path)
    with pytest.raises(pyhudi.HudiUnsupportedError, match="LANCE"):
        pyhudi.read(spark, path)
    assert _files(path) == before


def test_a_base_file_of_another_format_among_parquet_files_is_refused(spark, base_table, tmp_path):
    path = _copy(base_table, tmp_path)
    part = os.path.join(path, "x")
    name = next(n for n in os.listdir(part) if n.endswith(".parquet"))
    os.rename(os.path.join(part, name), os.path.join(part, name.replace(".parquet", ".orc")))
    with pytest.raises(pyhudi.HudiUnsupportedError, match=r"\.orc is a ORC base file"):
        pyhudi.read(spark, path)


def test_a_table_version_pyhudi_cannot_know_is_refused(spark, base_table, tmp_path):
    path = _copy(base_table, tmp_path)
    _set_properties(path, {P.VERSION: "10"})
    with pytest.raises(pyhudi.HudiUnsupportedError, match="hoodie.table.version=10"):
        pyhudi.read(spark, path)
    with pytest.raises(pyhudi.HudiUnsupportedError, match="hoodie.table.version=10"):
        pyhudi.HudiTable(path)


MERGES = [
    ({P.PAYLOAD_CLASS: "com.example.MyPayload"}, "com.example.MyPayload"),
    ({P.MERGE_MODE: "CUSTOM"}, "hoodie.record.merge.mode=CUSTOM"),
]


@pytest.mark.parametrize("changes, named", [
    *MERGES, ({P.DROP_PARTITION_COLUMNS: "true"}, "hoodie.datasource.write.drop.partition.columns=true"),
])
def test_table_features_pyhudi_cannot_write_are_refused(spark, base_table, tmp_path, changes, named):
    """Writes merge records, so a payload pyhudi does not implement refuses them; a copy-on-write
    read merges nothing and reads the base files, except where their partition columns were dropped."""
    path = _copy(base_table, tmp_path)
    _set_properties(path, changes)
    before = _files(path)
    if P.DROP_PARTITION_COLUMNS in changes:
        with pytest.raises(pyhudi.HudiUnsupportedError, match=named):
            pyhudi.read(spark, path)
    else:
        assert sorted((r["id"], r["v"]) for r in pyhudi_rows(spark, path)) == [("a", 1), ("b", 2), ("c", 3)]
    with pytest.raises(pyhudi.HudiUnsupportedError, match=named):
        pyhudi.write(spark.createDataFrame([("d", "x", 2, 4)], SCHEMA), path, OPTS)
    assert _files(path) == before


@pytest.mark.parametrize("changes, named", MERGES)
def test_a_merge_pyhudi_does_not_implement_refuses_merged_reads(spark, tmp_path, changes, named):
    """A merge-on-read slice with log files would be merged by another payload's rules: refused;
    its base files alone (read_optimized) still read."""
    path = str(tmp_path / "mor")
    mor = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.metadata.enable": "false"}
    pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), path, {**mor, "hoodie.datasource.write.operation": "insert"})
    pyhudi.write(spark.createDataFrame([("a", "x", 2, 10)], SCHEMA), path, mor)
    merged = [("a", 10), ("b", 2), ("c", 3)]
    assert sorted((r["id"], r["v"]) for r in hudi_rs_rows(path)) == merged
    assert sorted((r["id"], r["v"]) for r in pyhudi_rows(spark, path)) == merged
    _set_properties(path, changes)
    with pytest.raises(pyhudi.HudiUnsupportedError, match=named):
        pyhudi.read(spark, path)
    ro = pyhudi.read(spark, path, {"hoodie.datasource.query.type": "read_optimized"})
    assert sorted((r["id"], r["v"]) for r in ro.collect()) == [("a", 1), ("b", 2), ("c", 3)]


def test_a_merge_mode_of_a_newer_table_is_its_payload(base_table, tmp_path):
    path = _copy(base_table, tmp_path)
    _set_properties(path, {P.MERGE_MODE: "EVENT_TIME_ORDERING"})
    assert pyhudi.HudiTable(path).config.payload_class == "org.apache.hudi.common.model.DefaultHoodieRecordPayload"


def test_a_cdc_table_of_an_unknown_logging_mode_reads_its_snapshot_but_refuses_writes(spark, base_table, tmp_path):
    path = _copy(base_table, tmp_path)
    _set_properties(path, {P.CDC_ENABLED: "true", "hoodie.table.cdc.supplemental.logging.mode": "EVERYTHING"})
    assert sorted(r["id"] for r in pyhudi_rows(spark, path)) == ["a", "b", "c"]
    assert sorted(r["id"] for r in hudi_rs_rows(path)) == ["a", "b", "c"]
    before = _files(path)
    with pytest.raises(pyhudi.HudiUnsupportedError, match="hoodie.table.cdc.supplemental.logging.mode=EVERYTHING"):
        pyhudi.write(spark.createDataFrame([("d", "x", 2, 4)], SCHEMA), path, OPTS)
    assert _files(path) == before


def test_change_data_files_are_not_log_files_of_a_slice(spark, base_table, tmp_path):
    """A CDC-enabled table keeps change data beside the data files as ``.log.N_token.cdc``; Hudi's
    readers leave them out of file slices, so must pyhudi (their blocks are no table records)."""
    path = _copy(base_table, tmp_path)
    part = os.path.join(path, "x")
    base = next(n for n in os.listdir(part) if n.endswith(".parquet"))
    fid, _token, instant = base[:-len(".parquet")].split("_")
    cdc = f".{fid}_{instant}.log.1_0-1-0.cdc"
    open(os.path.join(part, cdc), "wb").close()
    slices = [s for s in pyhudi.HudiTable(path).file_system_view().latest_slices() if s.file_id == fid]
    assert slices and all(lf.name != cdc for s in slices for lf in s.log_files)
