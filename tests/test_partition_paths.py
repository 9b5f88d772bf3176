"""Partition values that look like paths: what Hudi stores (nested folders, escaped or hive-style
names) reads back through pyhudi and hudi-rs and survives upserts, compaction and cleaning; what
cannot be a folder of the table is refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from conftest import hudi_rs_rows, pyhudi_rows, snapshot

import pyhudi
from pyhudi.keygen.paths import batch_problems

DEFAULT = "__HIVE_DEFAULT_PARTITION__"
SCHEMA = "k string, p string, v string, ts int"
URLENCODE = {"hoodie.datasource.write.partitionpath.urlencode": "true"}
HIVE = {"hoodie.datasource.write.hive_style_partitioning": "true"}

#: option set -> (options, partition values a table with those options takes)
ACCEPTED: dict[str, tuple[dict[str, str], list[str | None]]] = {
    # merge-on-read, compacted and cleaned after the upsert
    "plain": ({"hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.compact.inline": "true",
               "hoodie.compact.inline.max.delta.commits": "2"},
              ["a/b", "c/d/e", "x", "a b", "a=b", "a%b", "a%2Fb", "é/ü", "a:b", "_x", "a..b", "a.", "日本/東京",
               None, ""]),
    # the record index (metadata table) maps keys to these partitions
    "urlencode": ({**URLENCODE, "hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true"},
                  ["a/", "/a", "a//b", "a\\b", "a\x01b", "a\nb", "a\x00b", "a/../b", "%", ":=?", "é b"]),
    # no metadata table: partitions found by listing storage; bloom filters and key ranges find the keys
    "hive": ({**HIVE, "hoodie.index.type": "BLOOM", "hoodie.metadata.enable": "false"},
             ["a/b", "x=y", ".x", "..", ".hoodie", "a b", "a:b", None]),
    "hive_urlencode": ({**HIVE, **URLENCODE, "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"},
                       ["a/", "/a", "..", ".hoodie", "a\\b", "a\tb"]),
}

#: option set -> values refused in a table with those options (which holds partition "a/b")
REFUSED: dict[str, tuple[dict[str, str], list[str]]] = {
    "plain": ({}, ["a/", "/a", "a//b", ".", "..", "a/../b", "../x", "./x", ".hoodie", ".hoodie/x", ".hoodie_x",
                   "a/.hoodie_partition_metadata", ".x", "a/.x", "a\\b", "..\\x", "a\x01b", "a\nb", "a\x00b",
                   "a\x7fb", "a", "a/b/c"]),
    "urlencode": (URLENCODE, [".", "..", ".hoodie", ".x"]),
    "hive": (HIVE, ["a/", "a//b", "a/../b", "a/.hoodie", "a/.", "a\\b", "a\rb"]),
    # without a metadata table, the table's partitions are found by file-status calls
    "no_metadata_table": ({"hoodie.metadata.enable": "false"}, ["a", "a/b/c", "x/y", "a/"]),
}


def _escaped(value: str) -> str:
    """Hudi's PartitionPathEncodeUtils.escapePathName, written out for the model."""
    special = set(map(chr, range(0x20))) | set('"#%\'*/:=?\\\x7f{[]^')
    return "".join(f"%{ord(c):02X}" if c in special else c for c in value)


def expected_path(options: dict[str, str], value: str | None) -> str:
    path = DEFAULT if not value else _escaped(value) if options.get(URLENCODE_KEY) == "true" else value
    return f"p={path}" if options.get(HIVE_KEY) == "true" else path


URLENCODE_KEY, HIVE_KEY = next(iter(URLENCODE)), next(iter(HIVE))


def _options(extra: dict[str, str]) -> dict[str, str]:
    return {"hoodie.table.name": "paths", "hoodie.datasource.write.recordkey.field": "k",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
            **extra}


def _rows(rows: list[dict]) -> set[tuple]:
    return {(r["k"], r["p"], r["v"], r["ts"], r["_hoodie_partition_path"]) for r in rows}


@pytest.fixture(scope="module")
def accepted_tables(spark, tmp_path_factory):
    """Option set -> (table path, model rows, pyhudi's rows, hudi-rs's rows), built on first use: the
    values inserted, then all upserted (a second version of each key), so the index must find every
    one of them."""
    built: dict[str, tuple[str, set[tuple], list[dict], list[dict]]] = {}

    def get(name: str) -> tuple[str, set[tuple], list[dict], list[dict]]:
        if name not in built:
            extra, values = ACCEPTED[name]
            path = str(tmp_path_factory.mktemp(f"accepted_{name}") / "t")
            options = _options(extra)
            first = [(f"k{i}", v, "before", 1) for i, v in enumerate(values)]
            pyhudi.write(spark.createDataFrame(first, SCHEMA), path, options)
            second = [(f"k{i}", v, "after", 2) for i, v in enumerate(values)]
            result = pyhudi.write(spark.createDataFrame(second, SCHEMA), path, options)
            assert "service_error" not in result.stats, result.stats
            if extra.get("hoodie.compact.inline") == "true":
                assert result.stats.get("compactions"), result.stats
                cleaned = pyhudi.clean(path, {**options, "hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS",
                                              "hoodie.clean.fileversions.retained": "1"})
                assert sum(c.files_deleted for c in cleaned) >= len({expected_path(extra, v) for v in values})
            model = {(f"k{i}", v, "after", 2, expected_path(extra, v)) for i, v in enumerate(values)}
            built[name] = (path, model, pyhudi_rows(spark, path), hudi_rs_rows(path))
        return built[name]

    return get


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_values_read_back_by_both_readers(spark, accepted_tables, name):
    _path, model, ours, theirs = accepted_tables(name)
    assert _rows(ours) == model
    assert _rows(theirs) == model


@pytest.mark.parametrize(("name", "value"), [(n, v) for n, (_o, vs) in ACCEPTED.items() for v in vs],
                         ids=lambda x: repr(x))
def test_accepted_value_lives_in_its_folder(spark, accepted_tables, name, value):
    """The value's files are in the folder its partition path names, inside the table, and the
    upsert replaced its record there (one version of the key, in both readers)."""
    path, _model, ours, theirs = accepted_tables(name)
    options = ACCEPTED[name][0]
    partition = expected_path(options, value)
    folder = Path(path) / partition
    assert folder.resolve().is_relative_to(Path(path).resolve()) and folder.resolve() != Path(path).resolve()
    assert (folder / ".hoodie_partition_metadata").is_file()
    assert any(f.suffix == ".parquet" for f in folder.iterdir())
    key = f"k{ACCEPTED[name][1].index(value)}"
    for rows in (ours, theirs):
        mine = [r for r in rows if r["k"] == key]
        assert [(r["p"], r["v"], r["_hoodie_partition_path"]) for r in mine] == [(value, "after", partition)]


@pytest.fixture(scope="module")
def refusing_tables(spark, tmp_path_factory):
    """Option set -> path of a table holding partitions "a/b" and "x"."""
    built: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in built:
            path = str(tmp_path_factory.mktemp(f"refusing_{name}") / "t")
            rows = [("k1", "a/b", "v", 1), ("k2", "x", "v", 1)]
            pyhudi.write(spark.createDataFrame(rows, SCHEMA), path, _options(REFUSED[name][0]))
            built[name] = path
        return built[name]

    return get


@pytest.mark.parametrize(("name", "value"), [(n, v) for n, (_o, vs) in REFUSED.items() for v in vs],
                         ids=lambda x: repr(x))
def test_refused_value_leaves_table_as_it_was(spark, refusing_tables, name, value):
    path = refusing_tables(name)
    before = snapshot(Path(path).parent)  # the table and its surroundings (a '..' would write there)
    df = spark.createDataFrame([("k9", value, "v", 1), ("k2", "x", "v", 2)], SCHEMA)
    operations = ("upsert", "bulk_insert", "insert_overwrite") if value == "a/" else ("upsert",)
    for operation in operations:
        options = {**_options(REFUSED[name][0]), "hoodie.datasource.write.operation": operation}
        with pytest.raises(pyhudi.HudiPartitionPathError) as err:
            pyhudi.write(df, path, options)
        message = str(err.value)
        assert repr(expected_path(REFUSED[name][0], value)) in message
        assert "urlencode" in message and "nothing was written" in message
        assert snapshot(Path(path).parent) == before


def test_refused_first_write_creates_no_table(spark, tmp_path):
    path = tmp_path / "t"
    df = spark.createDataFrame([("k1", "a/", "v", 1)], SCHEMA)
    with pytest.raises(pyhudi.HudiPartitionPathError, match="'a/'"):
        pyhudi.write(df, str(path), _options({}))
    assert list(tmp_path.iterdir()) == []


def test_partitions_nesting_in_one_batch_are_refused(spark, tmp_path):
    df = spark.createDataFrame([("k1", "m", "v", 1), ("k2", "m/n", "v", 1)], SCHEMA)
    with pytest.raises(pyhudi.HudiPartitionPathError, match="'m' holds 'm/n'"):
        pyhudi.write(df, str(tmp_path / "t"), _options({}))
    assert list(tmp_path.iterdir()) == []


def test_complex_key_path_is_checked_as_a_whole(spark, tmp_path):
    """Each field is one part of the path: a value's trailing '/' makes an empty folder name."""
    df = spark.createDataFrame([("k1", "a/", "v", 1)], SCHEMA)
    options = {**_options({}), "hoodie.datasource.write.partitionpath.field": "p,v",
               "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator"}
    with pytest.raises(pyhudi.HudiPartitionPathError, match="'a//v'"):
        pyhudi.write(df, str(tmp_path / "t"), options)
    assert list(tmp_path.iterdir()) == []


def test_timestamp_output_format_is_checked(spark, tmp_path):
    df = spark.createDataFrame([("k1", "v", 1_700_000_000)], "k string, v string, ts long")
    options = {"hoodie.table.name": "ts", "hoodie.datasource.write.recordkey.field": "k",
               "hoodie.datasource.write.partitionpath.field": "ts",
               "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
               "hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
               "hoodie.keygen.timebased.output.dateformat": "yyyy//MM",
               "hoodie.keygen.timebased.output.timezone": "UTC"}
    with pytest.raises(pyhudi.HudiPartitionPathError, match="'1970//01'"):
        pyhudi.write(df, str(tmp_path / "t"), options)
    assert list(tmp_path.iterdir()) == []


def test_batch_problems_name_each_kind_once():
    lines = batch_problems(pa.array(["ok", "a/", "..", "a\\b", "n", "n/m", "2024/01/02", "2024/01/03"]))
    assert len(lines) == 4
    assert "'a/'" in lines[0] and "'..'" in lines[1] and "'a\\\\b'" in lines[2] and "'n' holds 'n/m'" in lines[3]
    assert batch_problems(pa.array(["x", "a/b", "c/d/e", DEFAULT, "a b", "é/ü", "a.", "a..b", "p=.x"])) == []
