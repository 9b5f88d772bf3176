"""Request economy on S3 (moto's server, tests/s3server.py): what a write, a read plan and the
storage primitives ask the store for, counted from the server's request log."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pyhudi
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiError, HudiFileExistsError
from pyhudi.storage import Storage, resolve_options, s3, s3_files

OPTIONS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
           "hoodie.datasource.write.partitionpath.field": "day",
           "hoodie.datasource.write.precombine.field": "seq"}
SCHEMA = "key string, day string, seq long, v string"


def rows(n, day, tag, start=0):
    return [(f"k{i:04d}", day, i, f"{tag}{i}") for i in range(start, start + n)]


def storage(server, bucket) -> Storage:
    uri = f"s3a://{bucket}/t"
    return Storage(uri, resolve_options(uri, server.storage_options))


def head_then_get(log) -> list[str]:
    """Keys one operation probed with a HEAD and then read with a GET."""
    headed: set[str] = set()
    out = []
    for r in log:
        if r.method == "HEAD":
            headed.add(r.key)
        elif r.method == "GET" and r.key in headed:
            out.append(r.key)
    return out


def test_upsert_makes_no_probe_before_a_read_no_folder_marker_no_multipart(s3_spark, s3_server, s3_bucket):
    path = f"s3a://{s3_bucket}/t"
    opts = {**OPTIONS, **s3_server.hadoop_conf}
    days = ["2026-01-01", "2026-01-02"]
    pyhudi.write(s3_spark.createDataFrame(rows(20, days[0], "a") + rows(20, days[1], "a"), SCHEMA), path, opts)
    mark = s3_server.mark()
    pyhudi.write(s3_spark.createDataFrame(rows(5, days[1], "b") + rows(5, "2026-01-03", "b"), SCHEMA), path, opts)
    log = s3_server.request_log(mark, s3_bucket)
    assert log, "the upsert went to the server"
    assert head_then_get(log) == []
    assert [r.key for r in log if r.method == "PUT" and r.key.endswith("/")] == []  # no folder markers
    assert [r for r in log if r.method == "POST" and "uploads" in r.query] == []  # one PUT per file
    assert [r.key for r in log if r.method == "DELETE" and r.key.endswith("/")] == []
    # the metadata table answers where the files are: no data partition is listed
    assert [r.key for r in log if r.method == "LIST" and not r.key.startswith("t/.hoodie/")] == []


def test_a_single_writer_upsert_takes_the_lock_once_and_reads_the_timeline_once_per_change(
        s3_spark, s3_server, s3_bucket):
    """Single-writer mode: the write holds the storage lock from its first read of the table to
    its last service, and reads the timeline and the metadata table once in that hold, again only
    after it changed them (pyhudi.storage.memo); it writes no heartbeat, since nobody can roll it
    back while it holds the lock."""
    path = f"s3a://{s3_bucket}/t"
    opts = {**OPTIONS, **s3_server.hadoop_conf}
    days = ["2026-01-01", "2026-01-02"]
    for tag in ("a", "b"):
        pyhudi.write(s3_spark.createDataFrame(rows(20, days[0], tag) + rows(20, days[1], tag), SCHEMA), path, opts)
    mark = s3_server.mark()
    pyhudi.write(s3_spark.createDataFrame(rows(5, days[1], "c") + rows(5, "2026-01-03", "c"), SCHEMA), path, opts)
    log = s3_server.request_log(mark, s3_bucket)

    def count(method: str, key: str) -> int:
        return sum(1 for r in log if r.method == method and r.key == key)

    assert count("PUT", "t/.hoodie/.locks/table_lock.json") == 2  # taken once, released once
    assert count("GET", "t/.hoodie/.locks/table_lock.json") == 1
    assert [r.key for r in log if ".heartbeat" in r.key] == []
    # the table opened before the hold (the options' check), then once in it
    assert count("GET", "t/.hoodie/hoodie.properties") == 2
    assert count("GET", "t/.hoodie/metadata/.hoodie/hoodie.properties") == 1
    # the timeline: before the hold, at its start, at the commit, for the services after it
    assert count("LIST", "t/.hoodie/") == 4
    # the metadata table's timeline: at the start, for the services after the delta commit
    assert count("LIST", "t/.hoodie/metadata/.hoodie/") == 2
    assert count("LIST", "t/.hoodie/metadata/files/") == 1
    assert [r.key for r in log if r.method == "HEAD"] == ["t/2026-01-03/.hoodie_partition_metadata"]  # new partition
    assert len(log) <= 40, [(r.method, r.key) for r in log]


def test_read_planning_with_the_metadata_table_lists_no_data_partition(s3_spark, s3_server, s3_bucket):
    from pyhudi.spark.reader import plan_query

    path = f"s3a://{s3_bucket}/t"
    opts = {**OPTIONS, **s3_server.hadoop_conf}
    pyhudi.write(s3_spark.createDataFrame(rows(10, "2026-01-01", "a") + rows(10, "2026-01-02", "a"), SCHEMA),
                 path, opts)
    mark = s3_server.mark()
    table = pyhudi.HudiTable(path, storage_options=opts)
    table.arrow_schema()
    planned = plan_query(table, HudiConfig.of(opts))
    log = s3_server.request_log(mark, s3_bucket)
    assert sorted(s.partition_path for s in planned.slices) == ["2026-01-01", "2026-01-02"]
    listed = [r.key for r in log if r.method == "LIST"]
    assert listed and all(key.startswith("t/.hoodie/") for key in listed), listed
    assert head_then_get(log) == []
    # hoodie.properties, the timeline, the metadata table's config, timeline and files partition,
    # its log file, the commit that holds the schema: one request each
    assert len(log) <= 8, [(r.method, r.key) for r in log]


def test_archival_asks_the_metadata_table_which_replaced_groups_are_left(s3_spark, s3_server, s3_bucket):
    """A replace commit whose replaced file groups still have files stays on the active timeline;
    which are left, the metadata table says: archival lists no data partition."""
    path = f"s3a://{s3_bucket}/t"
    opts = {**OPTIONS, **s3_server.hadoop_conf}
    for n in range(3):
        pyhudi.write(s3_spark.createDataFrame(rows(4, "2026-01-01", f"r{n}", start=4 * n), SCHEMA), path, opts)
    # the clustering's metadata delta commit compacts the metadata table: archival may go up to it
    assert pyhudi.cluster(s3_spark, path, {**opts, "hoodie.metadata.compact.max.delta.commits": "1"})
    replace = pyhudi.HudiTable(path, storage_options=opts).timeline.completed_writes()[-1]
    mark = s3_server.mark()
    archived = pyhudi.archive(path, {**opts, "hoodie.clean.commits.retained": "1", "hoodie.keep.min.commits": "1",
                                     "hoodie.keep.max.commits": "2"})
    log = s3_server.request_log(mark, s3_bucket)
    assert archived and replace.timestamp not in archived
    assert replace in pyhudi.HudiTable(path, storage_options=opts).timeline.completed_writes()
    assert [r.key for r in log if r.method == "LIST" and not r.key.startswith("t/.hoodie/")] == []
    assert head_then_get(log) == []


def test_probes_reads_and_deletes_are_one_request_each(s3_server, s3_bucket):
    store = storage(s3_server, s3_bucket)
    store.write_bytes("a/b/one.txt", b"1")
    store.write_bytes("a/b/two.txt", b"2")

    def requests(fn):
        mark = s3_server.mark()
        result = fn()
        return result, [(r.method, r.key) for r in s3_server.request_log(mark, s3_bucket)]

    assert requests(lambda: store.exists("a/b/missing.txt")) == (False, [("HEAD", "t/a/b/missing.txt")])
    assert requests(lambda: store.read_bytes("a/b/one.txt")) == (b"1", [("GET", "t/a/b/one.txt")])
    assert requests(lambda: store.read_bytes_or_none("a/b/none.txt")) == (None, [("GET", "t/a/b/none.txt")])
    with pytest.raises(FileNotFoundError):
        store.read_bytes("a/b/none.txt")
    assert requests(lambda: store.is_dir("a")) == (True, [("LIST", "t/a/")])
    assert requests(lambda: store.discard("a/b/one.txt")) == (None, [("DELETE", "t/a/b/one.txt")])
    assert store.delete("a/b/one.txt") is False
    # a folder: one listing and one multi-object delete; no marker of the parent put back
    _, sent = requests(lambda: store.delete_dir("a/b"))
    assert sent == [("LIST", "t/a/b/"), ("POST", "")]
    assert store.list_files("a/b") == [] and not store.is_dir("a")
    with pytest.raises(HudiError, match="refusing"):  # never a whole bucket
        s3.delete_prefix(store.options, s3_bucket, "")


def test_parquet_reads_ask_no_size_first(s3_server, s3_bucket):
    import numpy as np

    store = storage(s3_server, s3_bucket)
    n = 300_000  # incompressible values: a file larger than the first read's tail
    table = pa.table({"key": np.random.default_rng(1).integers(0, 2**62, n), "v": np.arange(n)})
    for name, rows in (("large.parquet", table), ("small.parquet", table.slice(0, 1000))):
        sink = io.BytesIO()
        pq.write_table(rows, sink, compression="none")
        store.write_bytes(name, sink.getvalue())
    assert store.size("large.parquet") > s3_files.TAIL_BYTES > store.size("small.parquet")
    for name, rows, columns, gets in (("large.parquet", n, None, 2), ("large.parquet", n, ["key"], 2),
                                      ("small.parquet", 1000, None, 1)):
        mark = s3_server.mark()
        with store.fs.open_input_file(store.full(name)) as f:
            assert pq.read_table(f, columns=columns).num_rows == rows
        sent = [r.method for r in s3_server.request_log(mark, s3_bucket)]
        assert sent == ["GET"] * gets, (name, columns, sent)  # the footer with the size, then the columns
    mark = s3_server.mark()
    with store.fs.open_input_file(store.full("large.parquet")) as f:
        assert pq.read_metadata(f).num_rows == n
    assert [r.method for r in s3_server.request_log(mark, s3_bucket)] == ["GET"]
    store.write_bytes("empty", b"")
    with store.fs.open_input_file(store.full("empty")) as f:
        assert f.size() == 0 and f.read() == b""
    with pytest.raises(FileNotFoundError):
        store.fs.open_input_file(store.full("absent")).size()


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_kw):
        yield self.data


def test_throttling_and_timeouts_are_retried_and_a_lost_create_says_so(s3_server, s3_bucket, monkeypatch):
    from botocore.awsrequest import AWSResponse
    from botocore.exceptions import ReadTimeoutError

    store = storage(s3_server, s3_bucket)
    client = s3.client(store.options)
    faults: list[str] = []

    def inject(request, **_kw):
        if not faults:
            return None
        fault = faults.pop(0)
        if fault == "slowdown":
            return AWSResponse(request.url, 503, {}, _Body(
                b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"))
        if fault == "lost":  # the store took the request, its answer never came
            s3_server.client().put_object(Bucket=s3_bucket, Key="t/.hoodie/1.commit.requested", Body=b"",
                                          IfNoneMatch="*")
        raise ReadTimeoutError(endpoint_url=request.url)

    monkeypatch.setattr("botocore.retries.standard.ExponentialBackoff.delay_amount", lambda self, context: 0.0)
    client.meta.events.register("before-send.s3", inject)
    try:
        faults[:] = ["slowdown", "timeout"]
        store.write_bytes("x.txt", b"x")
        faults[:] = ["slowdown"]
        assert store.read_bytes("x.txt") == b"x"
        assert faults == []
        # a create whose first attempt succeeded unseen: the retry is refused, and the error says why
        faults[:] = ["lost"]
        with pytest.raises(HudiFileExistsError, match="answer was lost"):
            store.create_new(".hoodie/1.commit.requested", b"")
    finally:
        client.meta.events.unregister("before-send.s3", inject)
