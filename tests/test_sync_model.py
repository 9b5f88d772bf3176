"""Catalog sync after every write, to a real Hive metastore and a real Glue (moto) at once: random
sequences of upserts, deletes, overwrites, delete_partition, inline clustering, cleans, rollbacks
and failed syncs end with each catalog table's partitions equal to the table's live partitions, as hudi-rs
lists them (its latest file slices), and with the calls the sync promises."""

from __future__ import annotations

import itertools
import uuid

import boto3
import hudi
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from s3server import ACCESS_KEY, REGION, SECRET_KEY

import pyhudi
from pyhudi.sync.hms import HiveMetastoreClient

SCHEMA = "key string, payload string, ts long, region string, day string"
REGIONS = ("eu", "us")
DAYS = ("2024-01-01", "2024-01-02")
PARTITIONS = [(r, d) for r in REGIONS for d in DAYS]
_NAMES = itertools.count()

ops = st.one_of(
    st.tuples(st.just("upsert"), st.sets(st.sampled_from(PARTITIONS), min_size=1), st.integers(1, 4)),
    st.tuples(st.just("delete"), st.sets(st.sampled_from(PARTITIONS), min_size=1), st.integers(1, 4)),
    st.tuples(st.just("insert_overwrite"), st.sets(st.sampled_from(PARTITIONS), min_size=1), st.integers(1, 2)),
    st.tuples(st.just("insert_overwrite_table"), st.sets(st.sampled_from(PARTITIONS), min_size=1), st.just(1)),
    st.tuples(st.just("delete_partition"), st.sets(st.sampled_from(PARTITIONS), min_size=1), st.just(0)),
    st.tuples(st.just("clean"), st.just(frozenset()), st.just(0)),
    st.tuples(st.just("rollback"), st.just(frozenset()), st.just(0)),
    st.tuples(st.just("failed_sync"), st.sets(st.sampled_from(PARTITIONS), min_size=1), st.integers(1, 2)),
)


def _options(name: str, table_type: str, hms_uri: str, glue_endpoint: str) -> dict[str, str]:
    return {
        "hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "key,region",
        "hoodie.datasource.write.partitionpath.field": "region,day",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.table.type": table_type,
        "hoodie.clean.commits.retained": "1", "hoodie.cleaner.commits.retained": "1",
        "hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "3",
        "hoodie.datasource.meta.sync.enable": "true",
        "hoodie.meta.sync.client.tool.class": "org.apache.hudi.hive.HiveSyncTool,"
                                              "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool",
        "hoodie.datasource.hive_sync.database": "lake", "hoodie.datasource.hive_sync.metastore.uris": hms_uri,
        "hoodie.aws.glue.endpoint": glue_endpoint, "hoodie.aws.glue.region": REGION,
        "hoodie.aws.access.key": ACCESS_KEY, "hoodie.aws.secret.key": SECRET_KEY,
    }


def _rows(keys: list[str], parts: set[tuple[str, str]], ts: int) -> list[tuple]:
    return [(k, f'{{"n": {i}}}', ts, region, day) for i, (k, (region, day)) in
            enumerate(itertools.product(keys, sorted(parts)))]


def live_partitions(path: str) -> set[tuple[str, ...]]:
    """The table's live partitions as catalog values, from hudi-rs's latest file slices."""
    slices = hudi.HudiTable(path).get_file_slices()
    return {tuple(seg.split("=", 1)[1] for seg in s.partition_path.split("/")) for s in slices}


def glue_partitions(glue, name: str) -> set[tuple[str, ...]]:
    pages = glue.get_paginator("get_partitions").paginate(DatabaseName="lake", TableName=name)
    return {tuple(p["Values"]) for page in pages for p in page["Partitions"]}


def hms_partitions(uri: str, name: str) -> set[tuple[str, ...]]:
    client = HiveMetastoreClient(uri)
    table = client.get_table("lake", name)
    assert table is not None, f"lake.{name} is not in the metastore"
    return set(client.get_partitions(table))


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(table_type=st.sampled_from(["COPY_ON_WRITE", "MERGE_ON_READ"]), steps=st.lists(ops, min_size=2, max_size=6))
@example(table_type="MERGE_ON_READ", steps=[
    ("upsert", {PARTITIONS[1], PARTITIONS[2]}, 2), ("failed_sync", {PARTITIONS[3]}, 1),
    ("delete_partition", {PARTITIONS[0]}, 0), ("insert_overwrite", {PARTITIONS[1]}, 1)])
@example(table_type="COPY_ON_WRITE", steps=[
    ("upsert", {PARTITIONS[1], PARTITIONS[2], PARTITIONS[3]}, 3), ("insert_overwrite_table", {PARTITIONS[3]}, 1),
    ("clean", frozenset(), 0), ("upsert", {PARTITIONS[0]}, 1), ("rollback", frozenset(), 0)])
@example(table_type="COPY_ON_WRITE", steps=[  # the only commit rolled back: no partition is live
    ("rollback", frozenset(), 0), ("delete", {PARTITIONS[0]}, 1), ("rollback", frozenset(), 0),
    ("clean", frozenset(), 0)])
def test_catalog_partitions_follow_the_table(spark, tmp_path_factory, hms_server, s3_server, table_type, steps):
    name = f"model_{next(_NAMES)}_{uuid.uuid4().hex[:6]}"
    path = str(tmp_path_factory.mktemp("sync") / name)
    opts = _options(name, table_type, hms_server.uri, s3_server.endpoint)
    names = [name] if table_type == "COPY_ON_WRITE" else [f"{name}_ro", f"{name}_rt", name]
    glue = boto3.client("glue", endpoint_url=s3_server.endpoint, region_name=REGION,
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    keys = [f"k{i}" for i in range(4)]
    written = pyhudi.write(spark.createDataFrame(_rows(keys[:2], {PARTITIONS[0]}, 1), SCHEMA), path, opts)
    assert "sync_error" not in written.stats, written.stats
    for ts, (op, parts, n) in enumerate(steps, start=2):
        if op == "clean":
            pyhudi.clean(path, opts)  # no sync: the next one must still drop what the clean emptied
            continue
        if op == "rollback":
            if pyhudi.HudiTable(path).timeline.completed_writes():
                pyhudi.rollback(path, options=opts)  # the latest commit, synced: its partitions must go again
            continue
        write_opts = dict(opts)
        failing = op == "failed_sync"
        if failing:
            write_opts.update({"hoodie.datasource.hive_sync.metastore.uris": "thrift://127.0.0.1:9",
                               "hoodie.aws.glue.endpoint": "http://127.0.0.1:9"})
            op = "upsert"
        if op == "delete_partition":
            parts = {p for p in parts if p in live_partitions(path)}
            if not parts:
                continue  # Hudi refuses to delete partitions the table does not have
            spark_df = spark.createDataFrame([], SCHEMA)
            write_opts["hoodie.datasource.write.partitions.to.delete"] = ",".join(
                f"region={r}/day={d}" for r, d in sorted(parts))
        else:
            spark_df = spark.createDataFrame(_rows(keys[:n], parts, ts), SCHEMA)
        result = pyhudi.write(spark_df, path, {**write_opts, "hoodie.datasource.write.operation": op})
        if failing:
            # the commit stands; both catalogs report the failure and keep their previous state
            assert "sync_error" in result.stats and "hms" in result.stats["sync_error"], result.stats
            assert "glue" in result.stats["sync_error"], result.stats
            continue
        assert "sync_error" not in result.stats, result.stats
        if result.instant_time is None:
            continue  # nothing to write (a delete on an empty table): no commit, no sync
        live = live_partitions(path)
        for table_name in names:
            assert hms_partitions(hms_server.uri, table_name) == live, (table_name, steps)
            assert glue_partitions(glue, table_name) == live, (table_name, steps)
    reports = pyhudi.sync_catalog(path, opts)
    assert {r.catalog for r in reports} == {"hms", "glue"}
    live = live_partitions(path)
    for table_name in names:
        assert hms_partitions(hms_server.uri, table_name) == live, (table_name, steps)
        assert glue_partitions(glue, table_name) == live, (table_name, steps)
    # a re-run with nothing new makes no catalog write
    for report in pyhudi.sync_catalog(path, opts):
        writes = {k: v for k, v in report.calls.items() if "get" not in k.lower()}
        assert writes == {}, report



def test_a_table_on_s3_registers_in_glue_at_its_s3_location(s3_spark, s3_server, s3_bucket):
    """Glue holds ``s3://`` where the table is ``s3a://`` (as Hudi registers it); later syncs see
    the same location, not a moved table, and keep the partitions."""
    path = f"s3a://{s3_bucket}/drones"
    opts = {**_options("on_s3", "COPY_ON_WRITE", "thrift://127.0.0.1:9", s3_server.endpoint),
            "hoodie.meta.sync.client.tool.class": "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool",
            "hoodie.datasource.hive_sync.database": "s3lake", **s3_server.storage_options}
    for ts, parts in ((1, {PARTITIONS[0]}), (2, {PARTITIONS[0], PARTITIONS[3]})):
        result = pyhudi.write(s3_spark.createDataFrame(_rows(["k0", "k1"], parts, ts), SCHEMA), path, opts)
        assert "sync_error" not in result.stats, result.stats
    report = result.stats["catalog_sync"][0]
    assert "created" not in report and report["added"] == 1, report  # not re-registered as moved
    glue = boto3.client("glue", endpoint_url=s3_server.endpoint, region_name=REGION,
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    table = glue.get_table(DatabaseName="s3lake", Name="on_s3")["Table"]
    assert table["StorageDescriptor"]["Location"] == f"s3://{s3_bucket}/drones"
    pages = glue.get_paginator("get_partitions").paginate(DatabaseName="s3lake", TableName="on_s3")
    locations = sorted(p["StorageDescriptor"]["Location"] for page in pages for p in page["Partitions"])
    assert locations == [f"s3://{s3_bucket}/drones/region=eu/day=2024-01-01",
                         f"s3://{s3_bucket}/drones/region=us/day=2024-01-02"]
