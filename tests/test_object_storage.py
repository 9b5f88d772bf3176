"""Tables on S3: moto's S3 server on 127.0.0.1 (tests/s3server.py), Spark without hadoop-aws."""

from __future__ import annotations

import os
import pickle

import pytest
from conftest import hudi_rs_rows

import pyhudi
from pyhudi.errors import HudiFileExistsError, HudiUnsupportedError
from pyhudi.storage import Storage, resolve_options


def rows(n, start=0, day="2026-11-01", tag="a"):
    return [(f"k{i:05d}", day, i, f"{tag}{i}") for i in range(start, start + n)]


OPTIONS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
           "hoodie.datasource.write.partitionpath.field": "day",
           "hoodie.datasource.write.precombine.field": "seq"}


def test_options_resolve_from_hadoop_conf_per_bucket_first_then_env():
    hadoop = {"fs.s3a.endpoint": "http://general:1", "fs.s3a.bucket.b1.endpoint": "http://b1:2",
              "spark.hadoop.fs.s3a.path.style.access": "true", "fs.s3a.connection.ssl.enabled": "false"}
    env = {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://env:3"}
    b1 = resolve_options("s3a://b1/t", None, hadoop, env)
    b2 = resolve_options("s3a://b2/t", None, hadoop, env)
    assert (b1.endpoint, b2.endpoint) == ("http://b1:2", "http://general:1")
    assert b1.region == "eu-west-1" and b1.path_style is True and b1.ssl is False
    explicit = resolve_options("s3://b1/t", {"aws_endpoint_url": "http://x:4", "aws_access_key_id": "k"}, hadoop, env)
    assert explicit.endpoint == "http://x:4" and explicit.access_key == "k"
    assert resolve_options("s3://b9/t", None, None, env).endpoint == "http://env:3"
    assert "secret" not in repr(resolve_options("s3://b/t", {"fs.s3a.secret.key": "secret"}, None, {}))


def test_unsupported_scheme_names_the_supported_ones():
    with pytest.raises(HudiUnsupportedError, match="s3a://.*gs://"):
        Storage("ftp://host/t")


def test_storage_keeps_the_users_scheme_and_pickles_with_its_options(s3_server, s3_bucket):
    options = resolve_options(f"s3a://{s3_bucket}/t", s3_server.storage_options)
    storage = Storage(f"s3a://{s3_bucket}/t", options)
    assert storage.uri(".hoodie/hoodie.properties") == f"s3a://{s3_bucket}/t/.hoodie/hoodie.properties"
    assert storage.child(".hoodie/metadata").options == options
    copy = pickle.loads(pickle.dumps(storage))
    copy.write_bytes("a/b.txt", b"x")
    assert storage.read_bytes("a/b.txt") == b"x"


def test_exclusive_create_is_one_conditional_put_and_refuses_the_second(s3_server, s3_bucket):
    storage = Storage(f"s3a://{s3_bucket}/t", resolve_options("s3a://b/t", s3_server.storage_options))
    mark = s3_server.mark()
    storage.create_new(".hoodie/001.commit.requested", b"")
    with pytest.raises(HudiFileExistsError):
        storage.create_new(".hoodie/001.commit.requested", b"other")
    assert s3_server.requests_since(mark, s3_bucket) == {"PUT": 2}
    storage.mkdirs(".hoodie/.aux")  # object stores have no folders: no request
    assert s3_server.requests_since(mark, s3_bucket) == {"PUT": 2}


def test_write_and_read_on_s3a_without_hadoop_aws(s3_spark, s3_server, s3_bucket):
    path = f"s3a://{s3_bucket}/tables/t"
    df = s3_spark.createDataFrame(rows(20), "key string, day string, seq long, v string")
    pyhudi.write(df, path, OPTIONS)
    pyhudi.write(s3_spark.createDataFrame(rows(5, tag="b"), "key string, day string, seq long, v string"),
                 path, OPTIONS)
    got = {r["key"]: r["v"] for r in pyhudi.read(s3_spark, path).collect()}
    assert len(got) == 20 and got["k00001"] == "b1" and got["k00010"] == "a10"
    assert len(hudi_rs_rows(path, storage_options=s3_server.storage_options)) == 20


# -- writes, services and the CLI on s3a:// (hudi-rs is the reader here) --------------------------

SCHEMA = "key string, day string, seq long, v string"


def rs_rows(server, path: str) -> dict[str, str]:
    """key -> v as hudi-rs reads the table (through its own S3 client)."""
    return {r["key"]: r["v"] for r in hudi_rs_rows(path, storage_options=server.storage_options)}


def s3_table(server, path: str) -> pyhudi.HudiTable:
    return pyhudi.HudiTable(path, storage_options=server.storage_options)


def driver_s3_client(spark, path: str, options: dict):
    """The boto3 client pyhudi's driver uses for writes of this table (botocore's event hooks reach it)."""
    from pyhudi.spark.storage_conf import table_storage
    from pyhudi.storage import s3

    return s3.client(table_storage(spark, path, options).options)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_kw):
        yield self.body


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_services_and_cli_on_s3a(s3_spark, s3_server, s3_bucket, table_type, capsys):
    path = f"s3a://{s3_bucket}/t"
    opts = {**OPTIONS, "hoodie.datasource.write.table.type": table_type, "hoodie.clean.commits.retained": "1",
            "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1",
            "hoodie.parquet.small.file.limit": "0"}  # MOR: updates go to log files, compaction has work
    expected: dict[str, str] = {}
    for round_ in range(4):
        batch = rows(6, start=round_ * 3, tag=f"r{round_}-")
        pyhudi.write(s3_spark.createDataFrame(batch, SCHEMA), path, opts)
        expected.update({r[0]: r[3] for r in batch})
    if table_type == "MERGE_ON_READ":
        assert pyhudi.compact(s3_spark, path, opts)
    pyhudi.clean(path, {**opts, **s3_server.storage_options})
    pyhudi.archive(path, {**opts, **s3_server.storage_options})
    assert rs_rows(s3_server, path) == expected
    table = s3_table(s3_server, path)
    assert table.timeline.completed_writes()
    from pyhudi.cli.main import main

    flags = [f"--storage-option=fs.s3a.{k}={v}" for k, v in (("endpoint", s3_server.endpoint),
                                                               ("access.key", "pyhudi-test"),
                                                               ("secret.key", "pyhudi-test-secret"))]
    assert main([*flags, "show", "timeline", "--path", path]) == 0
    assert main([*flags, "show", "file-groups", "--path", path]) == 0
    assert main([*flags, "metadata", "validate", "--path", path]) == 0
    out = capsys.readouterr().out
    assert "commit" in out and "2026-11-01" in out


def test_cli_names_an_unsupported_scheme_without_a_traceback(capsys):
    from pyhudi.cli.main import main

    assert main(["show", "timeline", "--path", "ftp://host/t"]) == 2
    captured = capsys.readouterr()
    assert "s3a://" in captured.err + captured.out and "Traceback" not in captured.err


def test_killed_write_on_s3a_is_rolled_back_by_the_next_writer(s3_spark, s3_server, s3_bucket, monkeypatch):
    from pyhudi.timeline.timeline import Timeline
    from pyhudi.transaction.heartbeat import heartbeat_path

    path = f"s3a://{s3_bucket}/t"
    pyhudi.write(s3_spark.createDataFrame(rows(5), SCHEMA), path, OPTIONS)
    original = Timeline.complete

    def die(self, timestamp, action, content):
        if action == "commit" and self.storage.base_uri == path:
            raise KeyboardInterrupt  # the process is killed: no rollback runs
        return original(self, timestamp, action, content)

    def died(txn):  # its heartbeat stops; a dead writer's heartbeat is gone or old
        if txn.heartbeat is not None:
            txn.heartbeat.stop(delete=False)
            txn.table.storage.delete(heartbeat_path(txn.instant))

    monkeypatch.setattr(Timeline, "complete", die)
    monkeypatch.setattr("pyhudi.spark.writer._abort_quietly", died)
    with pytest.raises(KeyboardInterrupt):
        pyhudi.write(s3_spark.createDataFrame(rows(5, tag="lost"), SCHEMA), path, OPTIONS)
    monkeypatch.undo()
    assert rs_rows(s3_server, path) == {r[0]: r[3] for r in rows(5)}  # readers see the previous snapshot
    res = pyhudi.write(s3_spark.createDataFrame(rows(2, start=10), SCHEMA), path, OPTIONS)
    assert len(res.stats["rolled_back_instants"]) == 1
    assert rs_rows(s3_server, path) == {r[0]: r[3] for r in rows(5) + rows(2, start=10)}
    assert not s3_table(s3_server, path).timeline.pending()


def test_throttling_and_a_lost_connection_are_retried(s3_spark, s3_server, s3_bucket):
    import botocore.exceptions
    from botocore.awsrequest import AWSResponse

    path = f"s3a://{s3_bucket}/t"
    pyhudi.write(s3_spark.createDataFrame(rows(3), SCHEMA), path, OPTIONS)
    client = driver_s3_client(s3_spark, path, OPTIONS)
    seen: list[str] = []

    def flaky(request, **_kw):
        seen.append(request.url)
        if len(seen) % 3 == 1:
            body = b"<?xml version='1.0'?><Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>"
            return AWSResponse(request.url, 503, {"Content-Type": "application/xml"}, _Raw(body))
        if len(seen) % 3 == 2:
            raise botocore.exceptions.ConnectionClosedError(endpoint_url=request.url)
        return None

    client.meta.events.register("before-send.s3.PutObject", flaky)
    try:
        pyhudi.write(s3_spark.createDataFrame(rows(3, start=3), SCHEMA), path, OPTIONS)
    finally:
        client.meta.events.unregister("before-send.s3.PutObject", flaky)
    assert len(seen) >= 6  # every driver PUT of the commit failed twice before it went through
    assert rs_rows(s3_server, path) == {r[0]: r[3] for r in rows(6)}


def test_a_put_failing_mid_commit_leaves_the_table_consistent(s3_spark, s3_server, s3_bucket):
    from pyhudi.errors import HudiError

    path = f"s3a://{s3_bucket}/t"
    opts = {**OPTIONS, "fs.s3a.attempts.maximum": "2"}
    pyhudi.write(s3_spark.createDataFrame(rows(4), SCHEMA), path, opts)
    client = driver_s3_client(s3_spark, path, opts)

    def down(request, **_kw):  # the store fails every completion of an instant
        if request.url.split("?")[0].endswith(".commit"):
            body = b"<?xml version='1.0'?><Error><Code>InternalError</Code><Message>down</Message></Error>"
            return AWSResponse(request.url, 500, {"Content-Type": "application/xml"}, _Raw(body))
        return None

    from botocore.awsrequest import AWSResponse

    client.meta.events.register("before-send.s3.PutObject", down)
    try:
        with pytest.raises(HudiError):
            pyhudi.write(s3_spark.createDataFrame(rows(4, tag="x"), SCHEMA), path, opts)
    finally:
        client.meta.events.unregister("before-send.s3.PutObject", down)
    assert rs_rows(s3_server, path) == {r[0]: r[3] for r in rows(4)}
    pyhudi.write(s3_spark.createDataFrame(rows(1, start=9), SCHEMA), path, opts)
    assert rs_rows(s3_server, path) == {r[0]: r[3] for r in rows(4) + rows(1, start=9)}
    assert not s3_table(s3_server, path).timeline.pending()


def test_streaming_sink_writes_every_batch_once_to_s3a(s3_spark, s3_server, s3_bucket, tmp_path):
    import json

    path = f"s3a://{s3_bucket}/stream"
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    for batch in range(3):
        (incoming / f"b{batch}.json").write_text("\n".join(
            json.dumps({"key": k, "day": d, "seq": s + batch, "v": f"{v}-{batch}"})
            for k, d, s, v in rows(4, start=batch * 2)))
        os.utime(incoming / f"b{batch}.json", (1_700_000_000 + batch, 1_700_000_000 + batch))  # file order
    stream = s3_spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(incoming))
    query = pyhudi.write_stream(stream, path, OPTIONS, checkpoint_location=str(tmp_path / "chk"),
                                trigger={"availableNow": True})
    query.awaitTermination(180)
    assert query.exception() is None
    expected: dict[str, str] = {}
    for batch in range(3):
        expected.update({k: f"{v}-{batch}" for k, _d, _s, v in rows(4, start=batch * 2)})
    assert rs_rows(s3_server, path) == expected
    assert len(s3_table(s3_server, path).timeline.completed_writes()) == 3
