"""Spark SQL on tables pyhudi synced to the Hive metastore: a Spark session with Hive support,
pointed at the suite's metastore, queries them by name and gets the Hudi snapshot (the read-optimized
view for ``_ro``), not every file version, through pyhudi's ``hudi`` source (PySpark 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import hudi_rs_rows

import pyhudi

SCHEMA = "key string, payload string, ts long, region string"
PROCESS = Path(__file__).parent / "hive_spark_process.py"


def _options(name: str, table_type: str, uri: str) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "region",
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.table.type": table_type,
            "hoodie.compact.inline": "false", "hoodie.datasource.meta.sync.enable": "true",
            "hoodie.datasource.hive_sync.database": "sql", "hoodie.datasource.hive_sync.metastore.uris": uri}


def _ask(uri: str, warehouse: Path, queries: list[str]) -> list:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(PROCESS), uri, str(warehouse), json.dumps(queries)],
                          capture_output=True, text=True, timeout=600, env=env)
    for line in done.stdout.splitlines():
        if line.startswith("ANSWERS "):
            return json.loads(line[len("ANSWERS "):])
    raise AssertionError(f"the Hive Spark process answered nothing:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")


def _rows(rows: list[dict], columns=("key", "payload", "ts", "region")) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in rows)


@pytest.fixture(scope="module")
def synced(spark, hms_server, tmp_path_factory):
    """A copy-on-write and a merge-on-read table, each written twice (the second write updates keys
    and adds a partition; on merge-on-read the updates stay in log files), synced after each write."""
    root = tmp_path_factory.mktemp("sql")
    paths = {}
    for name, table_type in (("cow", "COPY_ON_WRITE"), ("mor", "MERGE_ON_READ"), ("plain", "COPY_ON_WRITE")):
        path = str(root / name)
        opts = _options(name, table_type, hms_server.uri)
        if name == "plain":  # a Hive table only (no Spark data source properties): Spark lists its partitions
            opts["hoodie.datasource.hive_sync.sync_as_datasource"] = "false"
        first = [(f"k{i}", f'{{"v": {i}}}', 1, "eu" if i % 2 else "us") for i in range(6)]
        second = [("k1", '{"v": 100}', 2, "eu"), ("k2", '{"v": 200}', 2, "us"), ("k9", '{"v": 9}', 2, "asia")]
        for rows in (first, second):
            result = pyhudi.write(spark.createDataFrame(rows, SCHEMA), path, opts)
            assert "sync_error" not in result.stats, result.stats
        paths[name] = path
    return paths, root


def test_spark_sql_reads_the_synced_snapshot(synced, hms_server):
    paths, root = synced
    answers = _ask(hms_server.uri, root / "warehouse", [
        "table:sql.cow", "SELECT region, count(*) AS n FROM sql.cow GROUP BY region",
        "table:sql.mor_rt", "table:sql.mor", "table:sql.mor_ro", "SELECT key FROM sql.mor_rt WHERE region = 'eu'",
        "SHOW PARTITIONS sql.plain", "DESCRIBE FORMATTED sql.plain"])
    if pyhudi.HudiTable(paths["cow"]) and not _python_sources():
        # PySpark 3.5 has no Python data sources: the catalog holds the tables and their partitions,
        # but Spark cannot resolve the provider hudi without Hudi's own Spark bundle
        assert answers[-2] == [{"partition": "region=asia"}, {"partition": "region=eu"}, {"partition": "region=us"}]
        assert "hudi" in answers[0]["error"].lower(), answers[0]
        return
    errors = [a for a in answers if isinstance(a, dict)]
    assert not errors, errors
    cow, counts, mor_rt, mor, mor_ro, eu_keys, partitions, described = answers
    assert _rows(cow) == _rows(hudi_rs_rows(paths["cow"]))
    assert len(cow) == 7 and {r["key"]: r["payload"] for r in cow}["k1"] == '{"v": 100}'  # the snapshot
    assert sorted((r["region"], r["n"]) for r in counts) == [("asia", 1), ("eu", 3), ("us", 3)]
    assert _rows(mor_rt) == _rows(mor) == _rows(hudi_rs_rows(paths["mor"]))
    assert _rows(mor_ro) == _rows(hudi_rs_rows(paths["mor"], read_optimized=True)) != _rows(mor_rt)
    assert sorted(r["key"] for r in eu_keys) == ["k1", "k3", "k5"]
    assert partitions == [{"partition": "region=asia"}, {"partition": "region=eu"}, {"partition": "region=us"}]
    info = {r["col_name"]: r["data_type"] for r in described}
    assert info["InputFormat"] == "org.apache.hudi.hadoop.HoodieParquetInputFormat"
    assert info["Serde Library"] == "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
    assert info["Type"] == "EXTERNAL" and info["Location"] == "file:" + paths["plain"]
    # columns as the catalog orders them: the partition column last
    assert list(cow[0])[-1] == "region" and list(cow[0])[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno",
                                                                 "_hoodie_record_key", "_hoodie_partition_path",
                                                                 "_hoodie_file_name"]


def _python_sources() -> bool:
    from pyspark.sql import SparkSession

    return hasattr(SparkSession, "dataSource")
