"""The AWS Glue catalog client (pyhudi.sync.glue) against moto's server on 127.0.0.1 (the session's
``s3_server``, which answers Glue's JSON API on the same endpoint).

Call counts are checked twice: the client's own counter, and the POST requests in the server's
log (every Glue call is one POST; a retried or unexpected call shows up there).
"""

from __future__ import annotations

import itertools
import json
import os
import time

import pytest

pytest.importorskip("moto.server")

from s3server import ACCESS_KEY, REGION, SECRET_KEY, free_port  # noqa: E402

from pyhudi.sync.catalog import Column, HudiCatalogError, PartitionEntry, StorageEntry, TableEntry  # noqa: E402
from pyhudi.sync.glue import GlueClient, GluePartitionError, glue_location  # noqa: E402

_NAMES = itertools.count(1)
PARQUET_IN = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
PARQUET_OUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


@pytest.fixture
def glue(s3_server) -> GlueClient:
    client = GlueClient(region=REGION, endpoint=s3_server.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY)
    yield client
    client.close()


def _posts(s3_server, mark: int) -> int:
    return s3_server.requests_since(mark).get("POST", 0)


def _table(database: str, *, base: str = "s3a://bucket/warehouse/t", keys: tuple[str, ...] = ("region", "day"),
           parameters: dict[str, str] | None = None) -> TableEntry:
    storage = StorageEntry(
        columns=(Column("_hoodie_commit_time", "string"), Column("id", "bigint"),
                 Column("attrs", "struct<a:int,b:array<string>>", "nested")),
        location=base, input_format=PARQUET_IN, output_format=PARQUET_OUT, serde=PARQUET_SERDE,
        serde_parameters={"path": base, "hoodie.query.as.ro.table": "false", "serialization.format": "1"})
    return TableEntry(database=database, name=f"t{next(_NAMES)}", storage=storage,
                      partition_keys=tuple(Column(k, "string") for k in keys),
                      parameters=parameters or {"EXTERNAL": "TRUE", "spark.sql.sources.provider": "hudi",
                                                "last_commit_time_sync": "20240101000000000"},
                      owner="hudi")


@pytest.fixture
def table(glue) -> TableEntry:
    database = f"db{next(_NAMES)}_{os.getpid()}"
    glue.create_database(database, description="pyhudi test")
    entry = _table(database)
    glue.create_table(entry)
    return entry


def _parts(table: TableEntry, n: int, *, prefix: str = "p") -> list[PartitionEntry]:
    base = table.storage.location
    return [PartitionEntry((f"{prefix}{i // 10}", f"2024-01-{i % 10:02d}"), f"{base}/{prefix}{i // 10}/{i % 10}")
            for i in range(n)]


def test_glue_location_rewrites_hadoop_schemes_only():
    assert glue_location("s3a://b/k") == "s3://b/k"
    assert glue_location("s3n://b/k") == "s3://b/k"
    assert glue_location("s3://b/s3a://x") == "s3://b/s3a://x"
    assert glue_location("hdfs://nn/p") == "hdfs://nn/p"


def test_database_create_is_idempotent_and_absence_is_false(glue, s3_server):
    name = f"db{next(_NAMES)}_{os.getpid()}"
    mark = s3_server.mark()
    assert not glue.database_exists(name)
    glue.create_database(name, description="d")
    glue.create_database(name, description="d")  # AlreadyExistsException is fine
    assert glue.database_exists(name)
    assert glue.calls == {"GetDatabase": 2, "CreateDatabase": 2}
    assert _posts(s3_server, mark) == 4
    assert glue.glue.get_database(Name=name)["Database"]["Description"] == "d"


def test_table_round_trip_equals_what_was_sent_with_s3_locations(glue, table):
    got = glue.get_table(table.database, table.name)
    expected = TableEntry(database=table.database, name=table.name,
                          storage=table.storage.at("s3://bucket/warehouse/t"),  # s3a:// sent as s3://
                          partition_keys=table.partition_keys, parameters=table.parameters,
                          table_type="EXTERNAL_TABLE", owner="hudi")
    assert got == expected
    # the serde's path parameter is sent as given (Spark reads it; only Locations are Glue's business)
    assert got is not None and got.storage.serde_parameters["path"] == "s3a://bucket/warehouse/t"
    # what moto adds on its own stays outside the entry: the table's parameters are exactly those sent
    raw = glue.glue.get_table(DatabaseName=table.database, Name=table.name)["Table"]
    assert raw["Parameters"] == dict(table.parameters)
    assert {"CreateTime", "DatabaseName", "CatalogId"} <= set(raw)
    assert glue.get_table(table.database, "absent") is None
    assert glue.get_table("absent_database", table.name) is None


def test_unowned_table_and_empty_comments_round_trip(glue, table):
    bare = TableEntry(database=table.database, name=f"bare{next(_NAMES)}", storage=table.storage.at("s3://b/x"),
                      partition_keys=(), parameters={}, owner="")
    glue.create_table(bare)
    assert glue.get_table(bare.database, bare.name) == bare


def test_create_existing_table_raises_naming_it(glue, table):
    with pytest.raises(HudiCatalogError, match=rf"CreateTable of {table.database}\.{table.name} at http://127"):
        glue.create_table(table)


def test_update_table_is_one_call_with_skip_archive(glue, table, s3_server):
    bodies: list[dict] = []
    glue.glue.meta.events.register("before-send.glue.UpdateTable",
                                   lambda request, **_: bodies.append(json.loads(request.body)))
    changed = TableEntry(database=table.database, name=table.name,
                         storage=StorageEntry(columns=(*table.storage.columns, Column("extra", "double")),
                                              location="s3://bucket/warehouse/t", input_format=PARQUET_IN,
                                              output_format=PARQUET_OUT, serde=PARQUET_SERDE,
                                              serde_parameters=table.storage.serde_parameters),
                         partition_keys=table.partition_keys,
                         parameters={**table.parameters, "last_commit_time_sync": "20240102000000000"}, owner="hudi")
    mark = s3_server.mark()
    glue.update_table(changed, cascade=True)
    assert glue.calls["UpdateTable"] == 1 and _posts(s3_server, mark) == 1
    assert glue.get_table(table.database, table.name) == changed
    # the request Glue received asks it to keep no archived version; moto records a version per
    # UpdateTable regardless (it ignores SkipArchive), so the flag is checked on the wire
    assert len(bodies) == 1 and bodies[0]["SkipArchive"] is True
    versions = glue.glue.get_table_versions(DatabaseName=table.database, TableName=table.name)["TableVersions"]
    assert len(versions) == 2
    archiving = GlueClient(region=REGION, endpoint=s3_server.endpoint, access_key=ACCESS_KEY,
                           secret_key=SECRET_KEY, skip_archive=False)
    archiving.glue.meta.events.register("before-send.glue.UpdateTable",
                                        lambda request, **_: bodies.append(json.loads(request.body)))
    archiving.update_table(changed, cascade=False)
    assert bodies[1]["SkipArchive"] is False


def test_update_absent_table_raises(glue, table):
    absent = TableEntry(database=table.database, name="absent", storage=table.storage, partition_keys=(),
                        parameters={})
    with pytest.raises(HudiCatalogError, match=r"UpdateTable of .*\.absent .*EntityNotFoundException"):
        glue.update_table(absent, cascade=False)


def test_drop_table_is_idempotent(glue, table):
    glue.drop_table(table.database, table.name)
    glue.drop_table(table.database, table.name)
    assert glue.get_table(table.database, table.name) is None
    assert glue.calls["DeleteTable"] == 2


def test_partitions_add_get_update_drop_idempotent(glue, table, s3_server):
    parts = _parts(table, 5)
    glue.add_partitions(table, parts)
    glue.add_partitions(table, parts[:3])  # a re-run sync: AlreadyExistsException counts as added
    everything = glue.get_partitions(table)
    assert everything == {p.values: glue_location(p.location) for p in parts}
    assert all(loc.startswith("s3://bucket/") for loc in everything.values())
    # a partition carries the table's descriptor at its own location
    raw = glue.glue.get_partition(DatabaseName=table.database, TableName=table.name,
                                  PartitionValues=list(parts[0].values))["Partition"]
    assert raw["StorageDescriptor"]["Columns"] == [{"Name": c.name, "Type": c.type, "Comment": c.comment}
                                                   for c in table.storage.columns]
    assert raw["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"] == PARQUET_SERDE
    # by values: only those that exist; a key asked twice is sent once
    sent: list[dict] = []
    glue.glue.meta.events.register("before-send.glue.BatchGetPartition",
                                   lambda request, **_: sent.append(json.loads(request.body)))
    some = glue.get_partitions(table, [parts[1].values, ("nope", "x"), parts[1].values])
    assert [len(body["PartitionsToGet"]) for body in sent] == [2]
    assert some == {parts[1].values: "s3://bucket/warehouse/t/p0/1"}
    assert glue.get_partitions(table, []) == {}
    moved = [PartitionEntry(p.values, p.location + "_v2") for p in parts[:2]]
    glue.update_partitions(table, moved)
    assert glue.get_partitions(table, [p.values for p in moved]) == {
        p.values: glue_location(p.location) for p in moved}
    mark = s3_server.mark()
    glue.drop_partitions(table, [parts[0].values, parts[0].values, ("gone", "x")])  # absent: counts as dropped
    glue.drop_partitions(table, [parts[0].values])
    assert _posts(s3_server, mark) == 2
    assert set(glue.get_partitions(table)) == {p.values for p in parts[1:]}
    assert glue.calls == {"CreateDatabase": 1, "CreateTable": 1, "BatchCreatePartition": 2, "GetPartitions": 2,
                          "BatchGetPartition": 2, "BatchUpdatePartition": 1, "BatchDeletePartition": 2}
    before = sum(glue.calls.values())
    glue.add_partitions(table, [])
    glue.update_partitions(table, [])
    glue.drop_partitions(table, [])
    assert sum(glue.calls.values()) == before  # nothing to do: no call


def test_250_partitions_in_glue_batches(glue, table, s3_server):
    parts = _parts(table, 250)
    mark = s3_server.mark()
    glue.add_partitions(table, parts)
    assert glue.calls["BatchCreatePartition"] == 3 and _posts(s3_server, mark) == 3
    assert len(glue.get_partitions(table)) == 250
    mark = s3_server.mark()
    glue.update_partitions(table, [PartitionEntry(p.values, p.location + "x") for p in parts])
    assert glue.calls["BatchUpdatePartition"] == 3 and _posts(s3_server, mark) == 3
    mark = s3_server.mark()
    assert len(glue.get_partitions(table, [p.values for p in parts])) == 250
    assert glue.calls["BatchGetPartition"] == 1 and _posts(s3_server, mark) == 1
    mark = s3_server.mark()
    glue.drop_partitions(table, [p.values for p in parts])
    assert glue.calls["BatchDeletePartition"] == 10 and _posts(s3_server, mark) == 10
    assert glue.get_partitions(table) == {}


def test_get_partitions_beyond_one_batch_get(glue, table, s3_server):
    keys = [(f"r{i}", "d") for i in range(1001)]
    glue.add_partitions(table, [PartitionEntry(k, f"s3://bucket/w/{i}") for i, k in enumerate(keys)])
    assert glue.calls["BatchCreatePartition"] == 11
    mark = s3_server.mark()
    assert len(glue.get_partitions(table, keys)) == 1001
    assert glue.calls["BatchGetPartition"] == 2 and _posts(s3_server, mark) == 2


def test_special_characters_in_values(glue, table):
    values = [("a/b", "x=y"), ("50%", "é ü"), ("a, b", " padded "), ("quote'\"", "__HIVE_DEFAULT_PARTITION__"),
              ("tab\there", "日本")]
    parts = [PartitionEntry(v, f"s3://bucket/w/{i}") for i, v in enumerate(values)]
    glue.add_partitions(table, parts)
    assert glue.get_partitions(table) == {p.values: p.location for p in parts}
    assert glue.get_partitions(table, values) == {p.values: p.location for p in parts}
    glue.drop_partitions(table, values[:3])
    assert set(glue.get_partitions(table)) == set(values[3:])


def test_refused_partitions_are_named_and_the_rest_written(glue, table, s3_server):
    good = _parts(table, 150)
    bad = [PartitionEntry(("", "2024-01-01"), "s3://bucket/w/empty"),
           PartitionEntry(("x" * 1025, "d"), "s3://bucket/w/long"),
           PartitionEntry(("only-one",), "s3://bucket/w/one")]
    mark = s3_server.mark()
    with pytest.raises(GluePartitionError) as err:
        glue.add_partitions(table, [*good[:70], *bad, *good[70:]])
    assert [f.values for f in err.value.failures] == [b.values for b in bad]
    assert "3 of 153 partitions refused" in str(err.value) and "['only-one']" in str(err.value)
    assert f"{table.database}.{table.name}" in str(err.value) and s3_server.endpoint in str(err.value)
    assert isinstance(err.value, HudiCatalogError)
    assert _posts(s3_server, mark) == 2  # the good ones went out in two batches
    assert set(glue.get_partitions(table)) == {p.values for p in good}


def test_update_of_absent_partitions_reports_each_after_all_batches(glue, table):
    parts = _parts(table, 120)
    glue.add_partitions(table, parts[:100])
    moved = [PartitionEntry(p.values, "s3://bucket/moved/" + "/".join(p.values)) for p in parts]
    with pytest.raises(GluePartitionError) as err:
        glue.update_partitions(table, moved)
    assert sorted(f.values for f in err.value.failures) == sorted(p.values for p in parts[100:])
    assert {f.code for f in err.value.failures} == {"EntityNotFoundException"}
    assert "20 of 120 partitions refused" in str(err.value) and "(and 10 more)" in str(err.value)
    assert glue.calls["BatchUpdatePartition"] == 2
    # the existing ones moved despite the refusals
    assert glue.get_partitions(table, [p.values for p in parts[:100]]) == {
        p.values: p.location for p in moved[:100]}


def test_partition_calls_on_an_absent_table_raise(glue, table):
    gone = TableEntry(database=table.database, name="gone", storage=table.storage,
                      partition_keys=table.partition_keys, parameters={})
    with pytest.raises(HudiCatalogError, match=r"BatchCreatePartition of .*\.gone .*EntityNotFoundException"):
        glue.add_partitions(gone, _parts(table, 150))
    assert glue.calls["BatchCreatePartition"] == 1  # a whole-call failure stops at once
    with pytest.raises(HudiCatalogError, match="GetPartitions"):
        glue.get_partitions(gone)


def test_parameters_glue_refuses_are_not_sent(glue, table):
    unnamed_key = TableEntry(database=table.database, name="unnamed", storage=table.storage,
                             partition_keys=(Column("", "string"),), parameters={})
    refused = r"(?s)CreateTable of .*\.unnamed .* not sent: .*PartitionKeys\[0\]\.Name"
    with pytest.raises(HudiCatalogError, match=refused):
        glue.create_table(unnamed_key)
    assert glue.get_table(table.database, "unnamed") is None


def test_catalog_id_is_sent(s3_server, table):
    bodies: list[dict] = []
    client = GlueClient(region=REGION, endpoint=s3_server.endpoint, access_key=ACCESS_KEY,
                        secret_key=SECRET_KEY, catalog_id="123456789012")
    client.glue.meta.events.register("before-send.glue.*", lambda request, **_: bodies.append(json.loads(request.body)))
    assert client.get_table(table.database, table.name) is not None
    assert bodies == [{"CatalogId": "123456789012", "DatabaseName": table.database, "Name": table.name}]
    assert "catalog 123456789012" in client.where


def test_unreachable_endpoint_fails_fast_and_clearly():
    endpoint = f"http://127.0.0.1:{free_port()}"
    client = GlueClient(region=REGION, endpoint=endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY)
    start = time.monotonic()
    with pytest.raises(HudiCatalogError, match=rf"GetDatabase of db at {endpoint} failed: .*hoodie.aws.glue.endpoint"):
        client.database_exists("db")
    assert time.monotonic() - start < 10
    assert client.calls == {"GetDatabase": 1}


def test_invalid_endpoint_or_missing_region_fail_at_construction(monkeypatch):
    with pytest.raises(HudiCatalogError, match="hoodie.aws.glue.endpoint"):
        GlueClient(region=REGION, endpoint="not a url")
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    with pytest.raises(HudiCatalogError, match="hoodie.aws.glue.region"):
        GlueClient(endpoint="http://127.0.0.1:1")
