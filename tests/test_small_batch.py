"""The small-batch write (:mod:`pyhudi.spark.small_write`): the same writes run on the driver
(the default for small inputs) and on the two-job partition-local path
(``pyhudi.write.small.batch.bytes=0``) give the same rows, the same file layout and the same
commit metadata."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from conftest import hudi_rs_rows, snapshot, spark_jobs_of

from pyhudi.write.result import PHASES_KEY

SCHEMA = "key string, part string, ts long, at timestamp, v string"
BASE_NAME = re.compile(r"^[0-9a-f-]+-\d+_\d+-\d+-\d+_\d{17}\.parquet$")
LOG_NAME = re.compile(r"^\.[0-9a-f-]+-\d+_\d{17}\.log\.\d+_\d+-\d+-\d+$")
META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")


def batch(spark, keys, ts: int, tag: str, parts: int):
    """A frame of local data as pandas gives it (a LocalRelation: Spark knows its size; a frame
    of Python rows is an RDD of unknown size and takes the two-job path)."""
    import pandas as pd

    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    frame = pd.DataFrame([(f"k{k:04d}", f"p{k % parts}", ts, at + dt.timedelta(seconds=k), f"{tag}{k}")
                          for k in keys], columns=["key", "part", "ts", "at", "v"])
    return spark.createDataFrame(frame, SCHEMA)


def write_sequence(spark, path: str, table_type: str, index: str, partitioned: bool, threshold: str | None) -> None:
    import pyhudi

    opts = {"hoodie.table.name": "small", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.table.type": table_type,
            "hoodie.index.type": index, "hoodie.bucket.index.num.buckets": "2"}
    if partitioned:
        opts["hoodie.datasource.write.partitionpath.field"] = "part"
    else:
        opts["hoodie.datasource.write.keygenerator.class"] = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    if threshold is not None:
        opts["pyhudi.write.small.batch.bytes"] = threshold
    parts = 3 if partitioned else 1
    for keys, ts, tag, operation in ((range(0, 90), 1, "a", "insert"), (range(60, 120), 2, "b", "upsert"),
                                     (range(0, 100, 7), 3, "c", "delete")):
        pyhudi.write(batch(spark, keys, ts, tag, parts), path,
                     {**opts, "hoodie.datasource.write.operation": operation})


def commits(path: str) -> list[tuple]:
    """Per commit: operation type, path taken, and per partition the sorted stats of its files."""
    import pyhudi

    table = pyhudi.HudiTable(path)
    out = []
    for inst in table.timeline.completed_writes():
        meta = table.timeline.commit_metadata(inst)
        phases = json.loads(meta.extra_metadata[PHASES_KEY])
        files = {}
        for p, stats in meta.partition_to_write_stats.items():
            files[p] = sorted((s.path.endswith(".parquet"), s.numWrites, s.numInserts, s.numUpdateWrites,
                               s.numDeletes, s.prevCommit != "null") for s in stats)
            for s in stats:
                name = s.path.rsplit("/", 1)[-1]
                assert (BASE_NAME if name.endswith(".parquet") else LOG_NAME).match(name), name
        out.append((meta.operation_type, "collect" in phases, files))
    return out


def layout(path: str) -> dict[str, list[tuple[int, int]]]:
    """Per partition: (base files, log files) of each latest file slice, sorted."""
    import pyhudi

    groups: dict[str, list[tuple[int, int]]] = {}
    for piece in pyhudi.HudiTable(path).file_system_view().latest_slices():
        groups.setdefault(piece.partition_path, []).append((int(piece.base_file is not None), len(piece.log_files)))
    return {p: sorted(g) for p, g in groups.items()}


def rows(path: str) -> list[dict]:
    return sorted(({k: v for k, v in r.items() if k not in META} for r in hudi_rs_rows(path)),
                  key=lambda r: r["key"])


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("index", ["SIMPLE", "BLOOM", "BUCKET"])
@pytest.mark.parametrize("partitioned", [True, False])
def test_driver_and_two_job_paths_write_the_same_table(spark, tmp_path, table_type, index, partitioned):
    small, spread = str(tmp_path / "small"), str(tmp_path / "spread")
    write_sequence(spark, small, table_type, index, partitioned, None)
    write_sequence(spark, spread, table_type, index, partitioned, "0")
    on_driver, two_jobs = commits(small), commits(spread)
    assert [c[1] for c in on_driver] == [True] * 3 and [c[1] for c in two_jobs] == [False] * 3
    assert [(c[0], c[2]) for c in on_driver] == [(c[0], c[2]) for c in two_jobs]
    assert [c[0] for c in on_driver] == ["INSERT", "UPSERT", "DELETE"]
    assert layout(small) == layout(spread)
    got = rows(small)
    assert got == rows(spread)
    deleted = set(range(0, 100, 7))
    assert [r["key"] for r in got] == [f"k{k:04d}" for k in range(120) if k not in deleted]
    assert {r["v"][0] for r in got if r["key"] >= "k0060"} == {"b"}
    assert got[0]["at"] == dt.datetime(2026, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc)


def test_input_past_the_threshold_takes_the_two_job_path(spark, tmp_path):
    import pyhudi

    path = str(tmp_path / "t")
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
            "pyhudi.write.small.batch.bytes": "100"}
    pyhudi.write(batch(spark, range(50), 1, "a", 2), path, opts)
    pyhudi.write(batch(spark, range(2), 2, "b", 2), path, {**opts, "pyhudi.write.small.batch.bytes": "1000000"})
    assert [c[1] for c in commits(path)] == [False, True]
    assert len(rows(path)) == 50


def test_stream_micro_batches_from_files_are_written_on_the_driver(spark, tmp_path):
    """A file stream's micro-batch is a file scan whose size Spark knows: the sink's writes take
    the driver path, and every batch lands."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema

    from pyhudi.spark.streaming import HudiStreamSink

    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(2):
        pq.write_table(pa.table({"key": [f"k{k}" for k in range(i * 10, i * 10 + 20)], "part": ["p"] * 20,
                                 "ts": [i] * 20}), inputs / f"b{i}.parquet")
    path = str(tmp_path / "t")
    sink = HudiStreamSink(path, {"hoodie.table.name": "s", "hoodie.datasource.write.recordkey.field": "key",
                                 "hoodie.datasource.write.partitionpath.field": "part",
                                 "hoodie.datasource.write.precombine.field": "ts"})
    schema = from_arrow_schema(pq.read_schema(inputs / "b0.parquet"))
    query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(inputs)).writeStream
             .foreachBatch(sink).option("checkpointLocation", str(tmp_path / "chk")).start())
    query.processAllAvailable()
    query.stop()
    assert [c[1] for c in commits(path)] == [True, True]
    assert sorted((r["key"], r["ts"]) for r in rows(path)) == sorted(
        [(f"k{k}", 0) for k in range(10)] + [(f"k{k}", 1) for k in range(10, 30)])


@pytest.mark.parametrize("operation", ["upsert", "bulk_insert"])
def test_the_partition_path_check_counts_the_rows_the_write_plans_with(spark, tmp_path, monkeypatch, operation):
    """A batch of Python rows (no size estimate: the distributed path) into a table partitioned by a
    free-form string: the partition-path check's job counts the rows per path before the instant,
    and the write plans with those counts instead of counting again. Without them (the check
    patched to count nothing) the same write runs more jobs and writes the same table."""
    import pyhudi
    from pyhudi.spark import writer

    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "part",
            "hoodie.datasource.write.operation": operation}
    rows = [(f"k{k}", f"p{k % 3}", 1, None, f"v{k}") for k in range(30)]
    jobs = {}
    for counted in (True, False):
        path = str(tmp_path / str(counted))
        pyhudi.write(spark.createDataFrame([("s", "p0", 1, None, "s")], SCHEMA), path, opts)
        if not counted:
            real = writer.check_partitions
            monkeypatch.setattr(writer, "check_partitions", lambda *a, real=real, **k: (real(*a, **k), None)[1])
        jobs[counted] = spark_jobs_of(spark, f"pyhudi-counted-{operation}-{counted}",
                                 lambda path=path: pyhudi.write(spark.createDataFrame(rows, SCHEMA), path, opts))
        monkeypatch.undo()
        got = sorted((r["key"], r["part"], r["v"]) for r in hudi_rs_rows(path))
        assert got == sorted([("s", "p0", "s")] + [(k, p, v) for k, p, _ts, _at, v in rows])
    assert jobs[True] < jobs[False], jobs


#: a table partitioned by a free-form string: the partition-path check counts the batch's paths
PARTITIONED = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
               "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "part"}


def test_a_local_batch_is_written_without_a_spark_job(spark, tmp_path, monkeypatch):
    """A small pandas frame is a local relation: its rows, keyed, come to the driver without a
    Spark job, once for the partition-path check and the write, so the whole upsert runs no Spark
    job. With local relations collected by Spark jobs (the row limit at 0), the same write runs
    jobs and writes the same table."""
    import pyhudi
    from pyhudi.spark import local_batch, small_write

    jobs, default = {}, local_batch.LOCAL_ROWS
    for limit in (default, 0):
        monkeypatch.setattr(local_batch, "LOCAL_ROWS", limit)
        if limit == 0:  # (nor read as Arrow the driver holds, test_held_arrow)
            monkeypatch.setattr(small_write, "held_arrow", lambda df: None)
        path = str(tmp_path / str(limit))
        pyhudi.write(batch(spark, range(40), 1, "a", 3), path, PARTITIONED)
        upsert = batch(spark, range(20, 60), 2, "b", 3)
        jobs[limit] = spark_jobs_of(spark, f"pyhudi-local-count-{limit}",
                                    lambda path=path, upsert=upsert: pyhudi.write(upsert, path, PARTITIONED))
        assert [c[1] for c in commits(path)] == [True, True]
        got = rows(path)
        assert [(r["key"], r["part"], r["v"]) for r in got] == [
            (f"k{k:04d}", f"p{k % 3}", f"{'a' if k < 20 else 'b'}{k}") for k in range(60)]
    assert jobs[default] == 0 < jobs[0], jobs


def test_a_local_batch_with_a_bad_partition_path_is_refused_before_anything_is_written(spark, tmp_path):
    import pandas as pd

    import pyhudi

    path = tmp_path / "t"
    pyhudi.write(batch(spark, range(4), 1, "a", 2), str(path), PARTITIONED)
    before = snapshot(path)
    bad = spark.createDataFrame(pd.DataFrame({"key": ["k9", "k1"], "part": ["p0/", "p1"], "ts": [2, 2],
                                              "at": [None, None], "v": ["x", "y"]}), SCHEMA)
    assert bad._jdf.queryExecution().optimizedPlan().getClass().getSimpleName() == "LocalRelation"

    def refused() -> None:
        with pytest.raises(pyhudi.HudiPartitionPathError, match="'p0/'"):
            pyhudi.write(bad, str(path), PARTITIONED)

    assert spark_jobs_of(spark, "pyhudi-local-refusal", refused) == 0
    assert snapshot(path) == before


@pytest.mark.parametrize(("values", "keep"), [(["a", "b", "a", None, "a"], "true"), (["x"] * 3, "true"),
                                           (["a", "b"], "false")], ids=["mixed", "one-path", "empty"])
def test_local_and_spark_path_counts_agree(spark, monkeypatch, values, keep):
    """The driver's count of a local relation's paths and the Spark job's count give the same
    rows per path, a null path and an empty batch (a filter that keeps no row) included."""
    import pandas as pd

    from pyhudi.spark import keygen, local_batch

    frame = spark.createDataFrame(pd.DataFrame({"path": pd.Series(values, dtype=object)}), "path string")
    paths = frame.where(keep)
    on_driver: dict = {}
    group = f"pyhudi-local-counts-{len(values)}-{keep}"
    assert spark_jobs_of(spark, group, lambda: on_driver.update(keygen._path_counts(paths))) == 0
    monkeypatch.setattr(local_batch, "LOCAL_ROWS", -1)
    assert keygen._path_counts(paths) == on_driver
    assert on_driver == ({v: values.count(v) for v in set(values)} if keep == "true" else {})


#: every column type a local batch brings to the driver as Python values, a null in each
_VALUES = """SELECT * FROM VALUES
    ('a', 1L, 2, 3S, 4Y, 1.5D, 2.5F, true, X'00ff', DATE'2026-01-02', 12.34BD, TIMESTAMP'2026-01-02 03:04:05.123456'),
    ('é', -9223372036854775808L, -2, -3S, -4Y, double('NaN'), -0.0F, false, X'', DATE'1900-01-01', -0.01BD,
     TIMESTAMP'1960-06-30 23:59:59.999999'),
    (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
    AS t(s, l, i, sh, b, d, f, bo, bin, dt, dec, ts)"""


@pytest.mark.parametrize(("extra", "jobs"), [(None, 0), ("named_struct('x', l)", 1), ("make_date(10000, 1, 1)", 0),
                                            ("timestamp_ntz'1969-12-31 23:59:59.5'", 0)],
                         ids=["plain", "nested", "date-past-python", "timestamp-ntz"])
def test_a_local_batch_comes_to_the_driver_as_toarrow_gives_it(spark, extra, jobs):
    """collect_local's table equals toArrow's, value for value and type for type; plain columns,
    timestamps with or without time zone and dates Python cannot hold come without a Spark job, a
    nested column through toArrow's job."""
    import pyarrow as pa

    from pyhudi.spark.compat import collect_arrow
    from pyhudi.spark.local_batch import collect_local

    frame = spark.sql(_VALUES).selectExpr("*", "s AS `odd name`", *([f"{extra} AS extra"] if extra else []))
    got: list = []
    group = f"pyhudi-collect-local-{jobs}-{extra}"
    assert spark_jobs_of(spark, group, lambda: got.append(collect_local(frame))) == jobs
    expected = collect_arrow(frame)
    assert got[0].schema == expected.schema
    if extra:  # (a date past year 9999 has no Python value either: compared as days)
        as_stored = got[0].column("extra").cast(pa.int32()) if "date" in extra else got[0].column("extra")
        assert as_stored.equals(expected.column("extra").cast(as_stored.type))

    def values(table):  # floats by repr: NaN equals itself, -0.0 differs from 0.0
        return [{k: repr(v) if isinstance(v, float) else v for k, v in row.items()}
                for row in table.drop_columns(["extra"] if extra else []).to_pylist()]

    assert values(got[0]) == values(expected)


@pytest.mark.parametrize("keyed_by", ["pyarrow", "spark"])
def test_a_local_batch_with_a_null_key_is_refused_before_anything_is_written(spark, tmp_path, monkeypatch, keyed_by):
    """The key of a small local batch is computed before the instant (with pyarrow, or as the
    optimizer folds Spark's projection of the batch): a null key is refused with the key error, and
    the table is as it was."""
    import pandas as pd

    from pyhudi.spark import small_write

    if keyed_by == "spark":
        monkeypatch.setattr(small_write, "held_arrow", lambda df: None)

    import pyhudi

    path = tmp_path / "t"
    pyhudi.write(batch(spark, range(4), 1, "a", 2), str(path), PARTITIONED)
    before = snapshot(path)
    bad = spark.createDataFrame(pd.DataFrame({"key": ["k9", None], "part": ["p0", "p1"], "ts": [2, 2],
                                              "at": [None, None], "v": ["x", "y"]}), SCHEMA)
    with pytest.raises(pyhudi.HudiKeyError, match="record key field 'key' is null or empty"):
        pyhudi.write(bad, str(path), PARTITIONED)
    assert snapshot(path) == before


def test_keys_built_for_one_write_are_not_reused_for_another_shape(spark, tmp_path, monkeypatch):
    """The keying columns of Spark's projection are built once per input shape and reused: batches
    of the same schema written with another record key, ordering field or operation get their own,
    and a null key in a later batch of a reused shape is still refused. (Held rows keyed with
    pyarrow are turned off: they build no columns.)"""
    import pandas as pd

    from pyhudi.spark import small_write

    monkeypatch.setattr(small_write, "held_arrow", lambda df: None)

    import pyhudi

    def frame(keys):
        return spark.createDataFrame(pd.DataFrame({"key": keys, "part": ["p0"] * len(keys), "ts": [1] * len(keys),
                                                   "at": [None] * len(keys), "v": [f"v{k}" for k in keys]}), SCHEMA)

    by_key, by_v = str(tmp_path / "key"), str(tmp_path / "v")
    for _ in range(2):  # the second round takes the columns the first built
        pyhudi.write(frame(["a", "b"]), by_key, PARTITIONED)
        pyhudi.write(frame(["a", "b"]), by_v, {**PARTITIONED, "hoodie.datasource.write.recordkey.field": "v"})
    assert sorted(r["_hoodie_record_key"] for r in hudi_rs_rows(by_key)) == ["a", "b"]
    assert sorted(r["_hoodie_record_key"] for r in hudi_rs_rows(by_v)) == ["va", "vb"]
    pyhudi.write(frame(["a"]), by_key, {**PARTITIONED, "hoodie.datasource.write.operation": "delete"})
    assert [r["_hoodie_record_key"] for r in hudi_rs_rows(by_key)] == ["b"]
    with pytest.raises(pyhudi.HudiKeyError, match="record key field 'key' is null or empty"):
        pyhudi.write(frame(["c", None]), by_key, PARTITIONED)


def test_a_small_batch_read_from_files_is_collected_once_before_the_instant(spark, tmp_path):
    """A small batch that is no local relation (a micro-batch read from files) into a table
    partitioned by a free-form string: the input check collects its keyed rows by one Spark job,
    counts and checks their paths, and the write takes them, so the write runs that one job; the
    check counting its own way (as the two-job path does) runs more, and the table is the same."""
    import pyhudi

    source = str(tmp_path / "batch")
    batch(spark, range(20, 60), 2, "b", 3).write.parquet(source)
    jobs = {}
    for limit in ("67108864", "0"):
        path = str(tmp_path / limit)
        pyhudi.write(batch(spark, range(40), 1, "a", 3), path, PARTITIONED)
        files = spark.read.parquet(source)
        options = {**PARTITIONED, "pyhudi.write.small.batch.bytes": limit}
        jobs[limit] = spark_jobs_of(spark, f"pyhudi-file-batch-{limit}",
                                    lambda path=path, files=files, options=options: pyhudi.write(files, path, options))
        assert [(r["key"], r["part"], r["v"]) for r in rows(path)] == [
            (f"k{k:04d}", f"p{k % 3}", f"{'a' if k < 20 else 'b'}{k}") for k in range(60)]
    assert jobs["67108864"] == 1 < jobs["0"], jobs


def test_a_small_batch_that_cannot_be_read_is_refused_before_anything_is_written(spark, tmp_path):
    """The input check reads a small batch read from files before the instant: a file gone since
    the batch was planned fails that read, which is a HudiCommitError saying nothing was written,
    and the table is as it was."""
    import shutil

    import pyhudi

    source, path = tmp_path / "batch", tmp_path / "t"
    batch(spark, range(20, 60), 2, "b", 3).write.parquet(str(source))
    pyhudi.write(batch(spark, range(40), 1, "a", 3), str(path), PARTITIONED)
    before = snapshot(path)
    files = spark.read.parquet(str(source))
    shutil.rmtree(source)
    with pytest.raises(pyhudi.HudiCommitError, match="nothing was written"):
        pyhudi.write(files, str(path), PARTITIONED)
    assert snapshot(path) == before


def test_a_merged_base_file_keeps_the_encodings_of_the_file_it_rewrites(spark, tmp_path, monkeypatch):
    """The merge handle writes the new base file with the old one's column encodings (read from
    its footer, no sample taken): a dictionary for the repeated partition, DELTA_BYTE_ARRAY for the
    unique keys. With the dictionary switched off the merged file has none, and switched on again
    the next merge samples and has one again."""
    import pyarrow.parquet as pq

    import pyhudi
    from pyhudi.io import base_file

    def encodings(path):
        group = pq.read_metadata(path).row_group(0)
        return {group.column(i).path_in_schema: set(group.column(i).encodings) for i in range(group.num_columns)}

    def newest():
        return max((tmp_path / "t" / "p0").glob("*.parquet"), key=lambda p: p.name.rsplit("_", 1)[1])

    sampled = []
    real = base_file.column_encodings
    monkeypatch.setattr(base_file, "column_encodings", lambda *a, **k: sampled.append(1) or real(*a, **k))
    path = str(tmp_path / "t")
    opts = {"hoodie.table.name": "enc", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "part",
            "hoodie.cleaner.commits.retained": "5"}
    rows = 9000  # past the 8,192 rows sampled: a file of fewer is sampled again when merged
    pyhudi.write(batch(spark, range(rows), 1, "a", 1), path, {**opts, "hoodie.datasource.write.operation": "insert"})
    first, taken = newest(), len(sampled)
    pyhudi.write(batch(spark, range(0, rows, 3), 2, "b", 1), path, opts)
    assert len(sampled) == taken and newest() != first
    assert encodings(newest()) == encodings(first)
    assert "DELTA_BYTE_ARRAY" in encodings(first)["_hoodie_record_key"] and "RLE_DICTIONARY" in encodings(first)["part"]
    pyhudi.write(batch(spark, range(0, rows, 5), 3, "c", 1), path,
                 {**opts, "hoodie.parquet.dictionary.enabled": "false"})
    assert not any(enc & {"RLE_DICTIONARY", "PLAIN_DICTIONARY"} for enc in encodings(newest()).values())
    assert "DELTA_BYTE_ARRAY" in encodings(newest())["_hoodie_record_key"]
    pyhudi.write(batch(spark, range(0, rows, 7), 4, "d", 1), path, opts)
    assert "RLE_DICTIONARY" in encodings(newest())["part"]
    expected = {k: f"d{k}" if k % 7 == 0 else f"c{k}" if k % 5 == 0 else f"b{k}" if k % 3 == 0 else f"a{k}"
                for k in range(rows)}
    assert {r["key"]: r["v"] for r in hudi_rs_rows(path)} == {f"k{k:04d}": v for k, v in expected.items()}
