"""Tables on S3: moto's S3 server on 127.0.0.1 (tests/s3server.py), Spark without hadoop-aws."""

from __future__ import annotations

import pickle

import pytest

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
    import hudi

    batches = hudi.HudiTable(path.replace("s3a://", "s3://"), options=s3_server.storage_options).read_snapshot()
    assert sum(b.num_rows for b in batches) == 20
