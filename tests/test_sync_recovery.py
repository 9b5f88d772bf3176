"""Catalog sync when things go wrong, against the suite's Hive metastore and Glue (moto): a sync that
fails between its partition calls and its table update, a rollback of a synced commit, a catalog
whose settings are wrong, comments users gave columns in the catalog, and concurrent syncs."""

from __future__ import annotations

import itertools

import boto3
import pytest
from conftest import hudi_rs_rows, pyhudi_rows
from s3server import ACCESS_KEY, REGION, SECRET_KEY

import pyhudi
from pyhudi.config import HudiConfig
from pyhudi.sync.catalog import HudiCatalogError
from pyhudi.sync.hms import HiveMetastoreClient
from pyhudi.sync.tool import catalog_clients, sync_catalogs

SCHEMA = "key string, payload string, ts long, region string"
_NAMES = itertools.count()


class FailsOnce:
    """A real catalog client whose chosen method fails once (a catalog that refuses one call, or
    a process killed at that point)."""

    def __init__(self, inner, method: str) -> None:
        self.inner, self.method, self.kind, self.calls = inner, method, inner.kind, inner.calls

    def __getattr__(self, name):
        if name == self.method:
            self.method = ""

            def refuse(*args, **kwargs):
                raise HudiCatalogError(f"{name} refused (test)")
            return refuse
        return getattr(self.inner, name)


def _options(name: str, hms: str, glue: str) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "region",
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.hive_sync.database": "recovery",
            "hoodie.datasource.hive_sync.metastore.uris": hms,
            "hoodie.meta.sync.client.tool.class": "org.apache.hudi.hive.HiveSyncTool,"
                                                  "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool",
            "hoodie.aws.glue.endpoint": glue, "hoodie.aws.glue.region": REGION,
            "hoodie.aws.access.key": ACCESS_KEY, "hoodie.aws.secret.key": SECRET_KEY}


@pytest.fixture
def table(spark, tmp_path, hms_server, s3_server):
    name = f"t{next(_NAMES)}"
    opts = _options(name, hms_server.uri, s3_server.endpoint)
    path = str(tmp_path / name)

    def write(rows, operation="upsert", **extra):
        df = spark.createDataFrame(rows, SCHEMA)
        return pyhudi.write(df, path, {**opts, "hoodie.datasource.write.operation": operation, **extra})

    glue = boto3.client("glue", endpoint_url=s3_server.endpoint, region_name=REGION,
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def catalogs():
        """Each catalog's partitions and sync point (the table itself read by hudi-rs and pyhudi alike)."""
        def rows(found):
            return sorted((r["key"], r["payload"], r["ts"], r["region"]) for r in found)
        assert rows(hudi_rs_rows(path)) == rows(pyhudi_rows(spark, path))
        client = HiveMetastoreClient(hms_server.uri)
        entry = client.get_table("recovery", name)
        pages = glue.get_paginator("get_partitions").paginate(DatabaseName="recovery", TableName=name)
        glue_table = glue.get_table(DatabaseName="recovery", Name=name)["Table"]
        return {"hms": (set(client.get_partitions(entry)), entry.parameters["last_commit_time_sync"]),
                "glue": ({tuple(p["Values"]) for page in pages for p in page["Partitions"]},
                         glue_table["Parameters"]["last_commit_time_sync"])}
    return name, path, opts, write, catalogs, glue


def _sync(path, opts, *, fail: str | None = None):
    cfg = HudiConfig.of(opts)
    clients = catalog_clients(cfg)
    if fail:
        clients = [FailsOnce(c, fail) for c in clients]
    return sync_catalogs(pyhudi.HudiTable(path), cfg, clients=clients)


def test_a_sync_that_failed_after_its_drops_is_caught_up(table):
    _name, path, opts, write, catalogs, _glue = table
    write([("a", "x", 1, "eu"), ("b", "x", 1, "us")])
    _sync(path, opts)
    write([], "delete_partition", **{"hoodie.datasource.write.partitions.to.delete": "region=us"})
    failed = _sync(path, opts, fail="update_table")  # the drop went through, the sync point did not
    assert all(r.error and "update_table refused" in r.error for r in failed)
    assert {k: v[0] for k, v in catalogs().items()} == {"hms": {("eu",)}, "glue": {("eu",)}}
    write([("c", "x", 3, "us")])  # region=us again, live as it was at the recorded sync point
    reports = _sync(path, opts)
    assert not any(r.error for r in reports)
    assert {k: v[0] for k, v in catalogs().items()} == {"hms": {("eu",), ("us",)}, "glue": {("eu",), ("us",)}}


def test_a_rolled_back_commit_takes_its_partitions_out_of_the_catalog(table):
    _name, path, opts, write, catalogs, _glue = table
    first = write([("a", "x", 1, "eu")]).instant_time
    _sync(path, opts)
    write([("b", "x", 2, "us")])
    _sync(path, opts)
    assert {k: v[0] for k, v in catalogs().items()} == {"hms": {("eu",), ("us",)}, "glue": {("eu",), ("us",)}}
    pyhudi.rollback(path)
    _sync(path, opts)
    assert catalogs() == {"hms": ({("eu",)}, first), "glue": ({("eu",)}, first)}


def test_a_catalog_with_bad_settings_fails_alone(table):
    _name, path, opts, write, catalogs, _glue = table
    result = write([("a", "x", 1, "eu")], **{"hoodie.datasource.meta.sync.enable": "true",
                                             "hoodie.aws.glue.endpoint": "not a url"})
    errors = {r["catalog"]: r.get("error") for r in result.stats["catalog_sync"]}
    assert errors["hms"] is None and errors["glue"], result.stats
    assert "glue" in result.stats["sync_error"] and "hms" not in result.stats["sync_error"]
    assert pyhudi.HudiTable(path).timeline.completed_writes()  # the commit stands


def test_comments_and_descriptions_given_in_the_catalog_survive_syncs(table):
    name, path, opts, write, _catalogs, glue = table
    write([("a", "x", 1, "eu")])
    _sync(path, opts)
    client = HiveMetastoreClient(opts["hoodie.datasource.hive_sync.metastore.uris"])
    entry = client.get_table("recovery", name)
    noted = tuple(c.__class__(c.name, c.type, "the reading as JSON") if c.name == "payload" else c
                  for c in entry.storage.columns)
    client.update_table(entry.__class__(**{**entry.__dict__, "storage": entry.storage.__class__(
        **{**entry.storage.__dict__, "columns": noted})}), cascade=False)
    glue_table = glue.get_table(DatabaseName="recovery", Name=name)["Table"]
    columns = [{**c, "Comment": "the reading as JSON"} if c["Name"] == "payload" else c
               for c in glue_table["StorageDescriptor"]["Columns"]]
    glue.update_table(DatabaseName="recovery", TableInput={
        "Name": name, "Description": "drone readings", "TableType": glue_table["TableType"],
        "Parameters": glue_table["Parameters"],
        "PartitionKeys": glue_table["PartitionKeys"],
        "StorageDescriptor": {**glue_table["StorageDescriptor"], "Columns": columns}})
    write([("b", "x", 2, "us")])
    _sync(path, opts)
    hms_comment = {c.name: c.comment for c in client.get_table("recovery", name).storage.columns}["payload"]
    glue_after = glue.get_table(DatabaseName="recovery", Name=name)["Table"]
    glue_columns = glue_after["StorageDescriptor"]["Columns"]
    assert glue_after.get("Description") == "drone readings"  # fields the sync does not set stay
    assert hms_comment == "the reading as JSON"
    assert {c["Name"]: c.get("Comment") for c in glue_columns}["payload"] == "the reading as JSON"


def test_an_older_snapshot_never_moves_the_sync_point_back(table):
    _name, path, opts, write, catalogs, _glue = table
    write([("a", "x", 1, "eu")])
    old = pyhudi.HudiTable(path)  # a writer that read the table before the next commit
    old.timeline.completed_writes()
    latest = write([("b", "x", 2, "us")]).instant_time
    _sync(path, opts)
    cfg = HudiConfig.of(opts)
    sync_catalogs(old, cfg)  # its sync runs late
    assert catalogs() == {"hms": ({("eu",), ("us",)}, latest), "glue": ({("eu",), ("us",)}, latest)}
