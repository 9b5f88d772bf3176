"""ComplexKeyGenerator with one record key field keys records as the table stores them (HUDI-7001).

Hudi 0.14.0 and earlier, 0.14.2/0.15.1/1.0.3 and 1.1 by default write ``_hoodie_record_key`` as
``id:a``; 0.14.1, 0.15.0 and 1.0.0-1.0.2 as the bare ``a``. An upsert keyed the other way finds
none of the stored records and duplicates them, so pyhudi reads a stored key before it writes and
keys as the table does; a new table gets ``id:a`` unless ``hoodie.write.complex.keygen.new.encoding``
is true. Every expected key below is spelled out, and hudi-rs reads every table written.
"""

from __future__ import annotations

import os
import shutil

import pyarrow.parquet as pq
import pytest
from conftest import hudi_rs_rows, pyhudi_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.keygen.encoding import MAX_COMMITS_SEARCHED, resolve_encoding, stored_key
from pyhudi.keygen.spec import COMPLEX, KeyGenSpec

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("q", T.StringType()), T.StructField("ts", T.LongType()),
                       T.StructField("v", T.IntegerType())])
#: one record key field, two partition fields: Hudi (and pyhudi) infer ComplexKeyGenerator
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p,q", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.metadata.enable": "false"}
NEW = "hoodie.write.complex.keygen.new.encoding"
VALIDATION = "hoodie.write.complex.keygen.validation.enable"
ROWS = [("a", "x", "1", 1, 1), ("b", "y", "1", 1, 2)]
UPDATE = [("a", "x", "1", 2, 10)]


def _files(path) -> dict[str, int]:
    out = {}
    for d, _, names in os.walk(path):
        for n in names:
            full = os.path.join(d, n)
            out[os.path.relpath(full, path)] = os.path.getsize(full)
    return out


def _keys(spark, path: str) -> list[tuple[str, int]]:
    ours = sorted((r["_hoodie_record_key"], r["v"]) for r in pyhudi_rows(spark, path))
    assert ours == sorted((r["_hoodie_record_key"], r["v"]) for r in hudi_rs_rows(path))
    return ours


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_new_table_keys_field_colon_value_and_upserts_find_its_records(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), path, opts)
    assert pyhudi.HudiTable(path).config.keygen_class == "org.apache.hudi.keygen.ComplexKeyGenerator"
    assert _keys(spark, path) == [("id:a", 1), ("id:b", 2)]
    pyhudi.write(spark.createDataFrame(UPDATE, SCHEMA), path, opts)
    assert _keys(spark, path) == [("id:a", 10), ("id:b", 2)]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_table_of_bare_keys_is_written_with_bare_keys(spark, tmp_path, table_type):
    """A table written as 0.14.1-1.0.2 write it (here by new.encoding=true): later writes that do
    not say anything key as it does, from its base files or (merge-on-read) its log blocks."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), path, {**opts, NEW: "true"})
    assert _keys(spark, path) == [("a", 1), ("b", 2)]
    pyhudi.write(spark.createDataFrame(UPDATE, SCHEMA), path, opts)
    assert _keys(spark, path) == [("a", 10), ("b", 2)]
    found = stored_key(pyhudi.HudiTable(path), "id")
    assert found is not None and found.key == "a"
    assert (".log." in found.path) == (table_type == "MERGE_ON_READ")  # the latest commit wrote a log file
    pyhudi.write(spark.createDataFrame([("b", "y", "1", 3, 20), ("c", "x", "2", 3, 3)], SCHEMA), path, opts)
    assert _keys(spark, path) == [("a", 10), ("b", 20), ("c", 3)]
    pyhudi.write(spark.createDataFrame([("c", "x", "2", 4, 0)], SCHEMA), path,
                 {**opts, "hoodie.datasource.write.operation": "delete"})
    assert _keys(spark, path) == [("a", 10), ("b", 20)]


def test_an_encoding_asked_for_against_the_stored_keys_is_refused(spark, tmp_path):
    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), path, OPTS)
    before = _files(path)
    with pytest.raises(pyhudi.HudiTableMismatchError) as err:
        pyhudi.write(spark.createDataFrame(UPDATE, SCHEMA), path, {**OPTS, NEW: "true"})
    text = str(err.value)
    assert f"{NEW}=true" in text and ("'id:a'" in text or "'id:b'" in text), text
    assert ".parquet" in text and "HUDI-7001" in text, text
    assert _files(path) == before
    pyhudi.write(spark.createDataFrame(UPDATE, SCHEMA), path, {**OPTS, NEW: "false"})  # agrees: written
    assert _keys(spark, path) == [("id:a", 10), ("id:b", 2)]


def test_validation_off_writes_what_the_option_says(spark, tmp_path):
    """Turning the check off is the user's repair tool: the keys are what they asked for, even
    where the table holds the other encoding (here: a second record of key a)."""
    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), path, OPTS)
    pyhudi.write(spark.createDataFrame(UPDATE, SCHEMA), path, {**OPTS, NEW: "true", VALIDATION: "false"})
    assert _keys(spark, path) == [("a", 10), ("id:a", 1), ("id:b", 2)]
    found = stored_key(pyhudi.HudiTable(path), "id")
    assert found is not None and found.key == "a"  # what the latest commit wrote
    held = pq.read_table(os.path.join(path, found.path), columns=["_hoodie_record_key"]).column(0).to_pylist()
    assert sorted(held) == ["a", "id:a"]  # a file of both encodings: its footer's bounds do not tell


def test_a_table_whose_keys_cannot_be_read_is_refused_unless_validation_is_off(spark, tmp_path):
    """Without a readable stored key the encoding is unknown: refused, as Hudi refuses; with the
    check off the write keys as new.encoding says."""
    path = str(tmp_path / "t")
    pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), path, OPTS)
    for d, _, names in os.walk(path):
        for n in names:
            if n.endswith(".parquet"):
                os.remove(os.path.join(d, n))  # as if removed behind the table's back
    before = _files(path)
    with pytest.raises(pyhudi.HudiTableMismatchError, match=f"none of its last {MAX_COMMITS_SEARCHED} commits"):
        pyhudi.write(spark.createDataFrame(UPDATE, SCHEMA), path, OPTS)
    assert _files(path) == before
    res = pyhudi.write(spark.createDataFrame([("c", "z", "9", 1, 3)], SCHEMA), path,
                       {**OPTS, VALIDATION: "false", "hoodie.datasource.write.operation": "bulk_insert"})
    assert res.instant_time is not None
    rows = [r for r in hudi_rs_rows(path) if r["_hoodie_commit_time"] == res.instant_time]
    assert [r["_hoodie_record_key"] for r in rows] == ["id:c"]


def test_several_key_fields_and_other_key_generators_are_untouched(spark, tmp_path):
    several, simple = str(tmp_path / "several"), str(tmp_path / "simple")
    pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), several,
                 {**OPTS, "hoodie.datasource.write.recordkey.field": "id,q", NEW: "true"})
    assert _keys(spark, several) == [("id:a,q:1", 1), ("id:b,q:1", 2)]
    pyhudi.write(spark.createDataFrame(ROWS, SCHEMA), simple,
                 {**OPTS, "hoodie.datasource.write.partitionpath.field": "p"})
    assert pyhudi.HudiTable(simple).config.keygen_class == "org.apache.hudi.keygen.SimpleKeyGenerator"
    assert _keys(spark, simple) == [("a", 1), ("b", 2)]


def test_a_version_9_table_keys_field_colon_value_whatever_the_option(v9_table, tmp_path):
    """Hudi 1.1 writes field:value into version 9 tables always (and no stored key is read)."""
    path = str(tmp_path / "v9")
    shutil.copytree(v9_table, path)
    spec = KeyGenSpec(kind=COMPLEX, record_key_fields=("txn_id",), partition_fields=("region",), field_prefixed=False)
    resolved = resolve_encoding(pyhudi.HudiTable(path), spec, HudiConfig.of({NEW: "true"}))
    assert resolved.field_prefixed is True


def test_the_options_are_declared_with_hudis_defaults():
    cfg = HudiConfig.of({})
    assert cfg.get(C.COMPLEX_KEYGEN_NEW_ENCODING) is False and cfg.get(C.COMPLEX_KEYGEN_VALIDATION) is True
    assert C.COMPLEX_KEYGEN_NEW_ENCODING.key == NEW and C.COMPLEX_KEYGEN_VALIDATION.key == VALIDATION
    assert HudiConfig.of({NEW: "TRUE"}).get(C.COMPLEX_KEYGEN_NEW_ENCODING) is True
    with pytest.raises(pyhudi.HudiConfigError, match=NEW):
        HudiConfig.of({NEW: "maybe"})
