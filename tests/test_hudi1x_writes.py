"""pyhudi writes into tables Apache Hudi 1.0 and 1.1 wrote (tests/data/hudi1x): an upsert and a
delete with nothing but the operation given, so every setting comes from the table's own
``hoodie.properties`` (key generator type, ordering fields, merge mode, partitioning). Afterwards
pyhudi and hudi-rs read the same rows, and those rows are the table's rows before with the write
applied. A table with metadata-table indexes pyhudi does not maintain refuses the write, naming
the index, and keeps every file as it was.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import hudi_rs_rows, pyhudi_rows, unzip_table
from pyspark.sql import functions as F
from pyspark.sql import types as T
from test_hudi1x_reads import DATA, NO_META, TABLES, _canon

import pyhudi
from pyhudi.errors import HudiUnsupportedError
from pyhudi.io.avro_schema import META_FIELDS

#: the table without rows (nothing to update) and the one without meta columns (upserts need them)
SKIPPED = NO_META | {"cow__v8_empty"}


def _files(path: Path) -> dict[str, int]:
    return {str(p.relative_to(path)): p.stat().st_size for p in path.rglob("*") if p.is_file()}


def _plain(rows: list[dict]) -> list:
    return sorted((_canon({k: v for k, v in r.items() if k not in META_FIELDS}) for r in rows), key=repr)


def _bumped(df, field: str | None):
    """The rows with their ordering value raised, so the upsert wins under either merge mode."""
    if field is None or field not in df.columns:
        return df
    kind = df.schema[field].dataType
    if isinstance(kind, T.TimestampType):
        return df.withColumn(field, F.col(field) + F.expr("INTERVAL 1 SECOND"))
    if isinstance(kind, T.NumericType):
        return df.withColumn(field, (F.col(field) + F.lit(1)).cast(kind))
    return df


@pytest.mark.parametrize("name", [t for t in TABLES if t not in SKIPPED])
def test_pyhudi_upserts_and_deletes_in_a_table_hudi_1x_wrote(spark, tmp_path, name):
    path = unzip_table(DATA / f"{name}.zip", tmp_path / "src")
    work = tmp_path / "t"
    shutil.copytree(path, work)
    table = pyhudi.HudiTable(str(work))
    before = pyhudi.read(spark, str(work))
    key_cols = ["_hoodie_record_key", "_hoodie_partition_path"]
    # keys held once: some of these tables hold a key twice (Hudi's inserts do not look keys up),
    # and an upsert of one key rewrites every copy with the one winning row
    rows = before.orderBy(*key_cols).collect()
    count = Counter((r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in rows)
    picked = [r for r in rows if count[(r["_hoodie_record_key"], r["_hoodie_partition_path"])] == 1][:3]
    assert len(picked) >= 2
    data_cols = [c for c in before.columns if c not in META_FIELDS]
    upsert = _bumped(spark.createDataFrame(picked[:-1], before.schema).select(*data_cols),
                     table.config.merge_ordering_field)
    delete = spark.createDataFrame(picked[-1:], before.schema).select(*data_cols)
    original = pyhudi_rows(spark, work)
    if "secondary_index" in table.properties.get("hoodie.table.metadata.partitions", ""):
        files = _files(work)
        with pytest.raises(HudiUnsupportedError, match="secondary_index"):
            pyhudi.write(upsert, str(work), {"hoodie.datasource.write.operation": "upsert"})
        assert _files(work) == files
        return
    pyhudi.write(upsert, str(work), {"hoodie.datasource.write.operation": "upsert"})
    pyhudi.write(delete, str(work), {"hoodie.datasource.write.operation": "delete"})
    gone = {(r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in picked}
    kept = [r for r in original if (r["_hoodie_record_key"], r["_hoodie_partition_path"]) not in gone]
    expected = _plain(kept + [r.asDict(recursive=True) for r in upsert.collect()])
    ours, theirs = pyhudi_rows(spark, work), hudi_rs_rows(work)
    assert _plain(ours) == expected
    assert _plain(theirs) == expected
    new_commits = {r["_hoodie_commit_time"] for r in ours if r["_hoodie_record_key"] in
                   {p["_hoodie_record_key"] for p in picked[:-1]}}
    assert new_commits == {pyhudi.HudiTable(str(work)).timeline.completed_writes()[-2].timestamp}
