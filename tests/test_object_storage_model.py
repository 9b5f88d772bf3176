"""Random sequences of writes on s3a:// (moto's S3 server) against the in-memory model of
tests/test_model.py, read back by pyhudi and by hudi-rs through its own S3 client."""

from __future__ import annotations

import itertools

import pytest
from conftest import hudi_rs_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_model import SCHEMA, apply, op_st, run_clustering

import pyhudi
from pyhudi.cli.metadata import validate, validate_text

_tables = itertools.count()

CASES = [("COPY_ON_WRITE", "BLOOM"), ("MERGE_ON_READ", "SIMPLE"), ("MERGE_ON_READ", "RECORD_INDEX")]


def _check(spark, server, path: str, model: dict) -> None:
    expected = sorted((r[0], r[2], r[3]) for r in model.values())
    table = pyhudi.HudiTable(path, storage_options=server.storage_options)
    in_step = validate(table)
    assert in_step.agrees, validate_text(in_step)
    ours = [r.asDict() for r in pyhudi.read(spark, path).collect()]
    assert sorted((r["key"], r["ts"], r["val"]) for r in ours) == expected
    theirs = hudi_rs_rows(path, storage_options=server.storage_options)
    assert sorted((r["key"], r["ts"], r["val"]) for r in theirs) == expected


@pytest.mark.parametrize(("table_type", "index"), CASES)
@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(op_st, min_size=2, max_size=4))
def test_random_operations_on_s3a_match_model(s3_spark, s3_server, s3_bucket, table_type, index, ops):
    path = f"s3a://{s3_bucket}/model-{next(_tables)}"
    global_index = index == "RECORD_INDEX"
    options = {
        "hoodie.table.name": "model", "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type, "hoodie.index.type": index,
        "hoodie.metadata.record.index.enable": str(global_index).lower(),
        "hoodie.metadata.record.index.min.filegroup.count": "2", "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.compact.max.delta.commits": "3", "hoodie.parquet.small.file.limit": "0",
    }
    model: dict = {}
    for op, rows in ops:
        if op == "cluster":
            if pyhudi.HudiTable.exists(path, storage_options=s3_server.storage_options):
                run_clustering(s3_spark, path, options, rows, storage_options=s3_server.storage_options)
                _check(s3_spark, s3_server, path, model)
            continue
        batch = apply(model, op, rows, global_index, False)
        if not batch:
            continue
        df = s3_spark.createDataFrame(batch, SCHEMA)
        pyhudi.write(df, path, {**options, "hoodie.datasource.write.operation": op})
        if not pyhudi.HudiTable.exists(path, storage_options=s3_server.storage_options):
            assert op in ("delete", "delete_partition") and not model
            continue
        _check(s3_spark, s3_server, path, model)
