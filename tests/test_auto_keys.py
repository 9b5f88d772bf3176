"""Auto-generated record keys (Apache Hudi 0.14+): writes without a record key field.

What Hudi does, from its source (master of mid-2024) and docs (docs/key_generation, "from 0.14.0
Hudi can automatically generate record keys"):

* The key: ``HoodieRecord.generateSequenceId(instantTime, partitionId, recordIndex)`` =
  ``<instant>_<partitionId>_<recordIndex>``, made by ``AutoRecordGenWrapperKeyGenerator`` with the
  write's instant, the Spark partition index of the task keying the rows (``TaskContext
  .getPartitionId`` in ``HoodieCreateRecordUtils`` and ``HoodieDatasetBulkInsertHelper``) and the
  row's position in that task from 0 (``rowId++``). The instant makes keys unique across commits.
* The partition path: the key generator the partition fields give
  (``KeyGenUtils.inferKeyGeneratorTypeForAutoKeyGen``: none -> NON_PARTITION, one -> SIMPLE,
  several -> COMPLEX), recorded as the table's key generator; ``hoodie.table.recordkey.fields`` is
  not recorded (``HoodieTableMetaClient`` builder's ``setRecordKeyFields(null)``), which is how later
  writes know (``AutoRecordKeyGenerationUtils.shouldAutoGenerateRecordKeys``).
* ``HoodieSparkSqlWriter.deduceOperation``: without a record key and an operation, bulk_insert.
* ``AutoRecordKeyGenerationUtils.mayBeValidateParamsForAutoGenerationOfRecordKeys``: refuses
  ``hoodie.combine.before.insert``, ``hoodie.datasource.write.insert.drop.duplicates`` and
  ``hoodie.populate.meta.fields=false`` ("... is not supported with auto generation of record
  keys"); a precombine field is ignored with a warning.
* ``HoodieWriterUtils.validateTableConfig``: a record key field given to a table without one is a
  conflict ("RecordKey").
* Upserts and deletes: Hudi updates such a table only through rows carrying their stored
  ``_hoodie_record_key`` (``canDoPreppedWrites``) or Spark SQL; pyhudi writes those as prepped
  writes (tests/test_prepped_writes.py) and refuses an upsert or delete of rows without it (a keyed
  upsert would give every row a fresh key and duplicate the records).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import hudi_rs_rows

import pyhudi
from pyhudi.config import properties as P
from pyhudi.errors import HudiConfigError, HudiTableMismatchError, HudiUnsupportedError
from pyhudi.keygen.spec import resolve_keygen

KEY = re.compile(r"^(\d{17})_(\d+)_(\d+)$")


def _rows(path: Path) -> list[dict]:
    return hudi_rs_rows(path)


def _check_keys(rows: list[dict]) -> dict[str, list[tuple[int, int]]]:
    """Every key is ``<its commit time>_<partition>_<row>``, the keys are unique, and within one
    commit and Spark partition the row numbers are 0..n-1; returns (partition, row) per commit."""
    keys = [r["_hoodie_record_key"] for r in rows]
    assert len(set(keys)) == len(keys)
    found: dict[str, list[tuple[int, int]]] = {}
    for r in rows:
        m = KEY.match(r["_hoodie_record_key"])
        assert m, r["_hoodie_record_key"]
        assert m.group(1) == r["_hoodie_commit_time"]
        found.setdefault(m.group(1), []).append((int(m.group(2)), int(m.group(3))))
    for pairs in found.values():
        for part in {p for p, _ in pairs}:
            assert sorted(i for p, i in pairs if p == part) == list(range(sum(1 for p, _ in pairs if p == part)))
    return found


@pytest.fixture(scope="module")
def auto_table(spark, tmp_path_factory):
    """A MOR table written twice without a record key: first with no operation (bulk_insert), then
    with insert; the input ``spark.range(6, numPartitions=2)``: partition 0 holds x=0..2, 1 x=3..5."""
    path = tmp_path_factory.mktemp("auto") / "t"
    df = spark.range(0, 6, numPartitions=2).selectExpr("id as x", "concat('p', cast(id % 2 as string)) as region",
                                                         "cast(null as long) as ts")
    options = {"hoodie.table.name": "auto", "hoodie.datasource.write.partitionpath.field": "region",
               "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    first = pyhudi.write(df, str(path), options)
    second = pyhudi.write(df, str(path), {**options, "hoodie.datasource.write.operation": "insert"})
    return path, df, options, first, second


def test_keys_are_hudis_instant_partition_row_and_unique_across_commits(auto_table):
    path, _, _, first, second = auto_table
    assert (first.operation, second.operation) == ("bulk_insert", "insert")  # deduceOperation
    rows = _rows(path)
    assert len(rows) == 12
    found = _check_keys(rows)
    assert set(found) == {first.instant_time, second.instant_time}
    # the exact numbering: partition index of the input, position within it
    for r in rows:
        assert r["_hoodie_record_key"].split("_", 1)[1] == f"{r['x'] // 3}_{r['x'] % 3}"
        assert r["_hoodie_partition_path"] == f"p{r['x'] % 2}"


def test_the_table_records_no_key_fields_and_the_inferred_key_generator(auto_table):
    path = auto_table[0]
    props = pyhudi.HudiTable(str(path)).properties
    assert P.RECORD_KEY_FIELDS not in props
    assert props[P.KEYGEN_CLASS] == "org.apache.hudi.keygen.SimpleKeyGenerator"
    assert props[P.PARTITION_FIELDS] == "region"
    inferred = {fields: resolve_keygen(pyhudi.config.HudiConfig.of(
        {"hoodie.datasource.write.partitionpath.field": fields})).class_name for fields in ("", "a", "a,b")}
    assert inferred == {"": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
                        "a": "org.apache.hudi.keygen.SimpleKeyGenerator",
                        "a,b": "org.apache.hudi.keygen.ComplexKeyGenerator"}


@pytest.mark.parametrize("operation", ["upsert", "delete"])
def test_upserts_and_deletes_are_refused_with_nothing_written(auto_table, operation):
    path, df, options, _, _ = auto_table
    before = sorted(p.name for p in (path / ".hoodie").iterdir())
    with pytest.raises(HudiUnsupportedError, match=f"operation {operation} is not supported with auto generation"):
        pyhudi.write(df, str(path), {**options, "hoodie.datasource.write.operation": operation})
    assert sorted(p.name for p in (path / ".hoodie").iterdir()) == before


def test_a_record_key_field_for_a_table_without_one_is_a_conflict(auto_table):
    path, df, options, _, _ = auto_table
    with pytest.raises(HudiTableMismatchError, match="recordkey.field.*auto-generated"):
        pyhudi.write(df, str(path), {**options, "hoodie.datasource.write.recordkey.field": "x"})


@pytest.mark.parametrize("option, value, error", [
    ("hoodie.combine.before.insert", "true", HudiConfigError),
    ("hoodie.datasource.write.insert.drop.duplicates", "true", HudiConfigError),
    ("hoodie.populate.meta.fields", "false", HudiConfigError),
    ("hoodie.index.type", "BUCKET", HudiUnsupportedError),
])
def test_options_hudi_refuses_with_generated_keys(spark, tmp_path, option, value, error):
    df = spark.range(2).selectExpr("id as x")
    with pytest.raises(error, match=f"{option}.* is not supported with auto generation of record keys"):
        pyhudi.write(df, str(tmp_path / "t"), {"hoodie.table.name": "t", option: value,
                                              "hoodie.datasource.write.operation": "insert"})
    assert not (tmp_path / "t").exists()


def test_a_non_partitioned_bulk_insert_ignores_the_precombine_field(spark, tmp_path):
    """Hudi warns that the precombine field is ignored: a null ordering value is no error, and
    duplicates of every column stay (each row is its own record)."""
    path = tmp_path / "t"
    df = spark.createDataFrame([(1, None), (1, None), (2, 5)], "x int, ts long")
    result = pyhudi.write(df, str(path), {"hoodie.table.name": "t", "hoodie.datasource.write.precombine.field": "ts",
                                          "hoodie.datasource.write.operation": "bulk_insert"})
    rows = _rows(path)
    assert sorted(r["x"] for r in rows) == [1, 1, 2]
    assert {r["_hoodie_partition_path"] for r in rows} == {""}
    assert set(_check_keys(rows)) == {result.instant_time}
    assert pyhudi.HudiTable(str(path)).properties[P.KEYGEN_CLASS] == "org.apache.hudi.keygen.NonpartitionedKeyGenerator"


def test_keys_are_the_same_when_the_rows_are_keyed_again(spark):
    """A retried task keys the same input partition again: the expression depends only on the
    partition index and the row's position in it, so a second evaluation gives the same keys."""
    from pyhudi.config import HudiConfig
    from pyhudi.spark.keygen import key_columns

    spec = resolve_keygen(HudiConfig.of({"hoodie.datasource.write.partitionpath.field": "p"}))
    df = spark.range(0, 50, numPartitions=3).selectExpr("id as x", "cast(id % 4 as string) as p")
    keyed = df.withColumns(key_columns(df, spec, key_col="k", partition_col="pp", instant="20240101000000000"))
    first = sorted((r["x"], r["k"]) for r in keyed.collect())
    assert first == sorted((r["x"], r["k"]) for r in keyed.collect())
    sizes = [len(range(50)[i * 50 // 3:(i + 1) * 50 // 3]) for i in range(3)]  # spark.range's split
    expected = [f"20240101000000000_{i}_{j}" for i, n in enumerate(sizes) for j in range(n)]
    assert [k for _, k in first] == expected
