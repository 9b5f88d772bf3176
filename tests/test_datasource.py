"""``spark.read.format("hudi")`` (PySpark 4's Python data source API) returns what pyhudi.read and
hudi-rs return: snapshot, read-optimized, incremental and time-travel queries, COW and MOR, with
filters pushed down."""

from __future__ import annotations

import pyspark
import pytest
from conftest import hudi_rs_rows, pyhudi_rows
from pyspark.sql import functions as F
from pyspark.sql import types as T

import pyhudi

pytestmark = pytest.mark.skipif(int(pyspark.__version__.split(".")[0]) < 4,
                                reason="Spark's Python data source API arrived in PySpark 4.0")

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("v", T.DoubleType())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}


def _rows(df):
    return sorted((r["id"], r["p"], r["ts"], r["v"]) for r in df.collect())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_spark_read_format_hudi_returns_what_pyhudi_reads(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    instants = []
    for n in range(3):
        rows = [(f"k{i}", f"p{i % 2}", n, float(i * n)) for i in range(n, 12)]
        instants.append(pyhudi.write(spark.createDataFrame(rows, SCHEMA), path, opts).instant_time)
    pyhudi.write(spark.createDataFrame([("k5", "p1", 9, 0.0)], SCHEMA), path,
                 {**opts, "hoodie.datasource.write.operation": "delete"})
    pyhudi.register(spark)
    snapshot = spark.read.format("hudi").load(path)
    assert _rows(snapshot) == _rows(pyhudi.read(spark, path))
    assert sorted((r["id"], r["ts"]) for r in snapshot.collect()) == \
        sorted((r["id"], r["ts"]) for r in hudi_rs_rows(path))
    for options in ({"hoodie.datasource.query.type": "read_optimized"},
                    {"hoodie.datasource.query.type": "incremental",
                     "hoodie.datasource.read.begin.instanttime": instants[0]},
                    {"as.of.instant": instants[1]}):
        theirs = spark.read.format("hudi").options(**options).load(path)
        assert _rows(theirs) == _rows(pyhudi.read(spark, path, options)), options
    filtered = spark.read.format("hudi").load(path).where((F.col("p") == "p0") & (F.col("ts") >= 1))
    assert _rows(filtered) == sorted(r for r in _rows(pyhudi.read(spark, path)) if r[1] == "p0" and r[2] >= 1)
    assert sorted(pyhudi_rows(spark, path), key=lambda r: r["id"])  # the table stays readable as before


def test_the_interop_tables_read_the_same_through_the_data_source(spark, interop_dir, tmp_path):
    """Every table Apache Hudi wrote in ../shared/interop: the rows pyhudi.read returns, and as
    many as hudi-rs returns."""
    from conftest import unzip_table

    zips = sorted(interop_dir.rglob("*.zip")) if interop_dir is not None else []
    if not zips:
        pytest.skip("no interop tables")
    pyhudi.register(spark)

    def rows(df):
        data = [c for c in df.columns if not c.startswith("_hoodie_")]
        return sorted(tuple(str(r[c]) for c in data) for r in df.collect())

    for i, z in enumerate(zips):
        path = str(unzip_table(z, tmp_path / str(i)))
        ours = spark.read.format("hudi").load(path)
        assert rows(ours) == rows(pyhudi.read(spark, path)), z
        assert ours.count() == len(hudi_rs_rows(path)), z
