"""Object storage benchmark: requests and seconds per operation on an S3 API server, pyhudi
against delta-rs, on the same rows.

    .venv/bin/pip install -e '.[bench]'     # deltalake; moto[server] comes with the test extras
    .venv/bin/python benchmarks/object_storage.py [--drones 20 --days 5 --upserts 3]
        [--systems cow,mor,delta] [--trace]

It starts moto's S3 server (``moto[server]``, the one the tests use: ``tests/s3server.py``) on
127.0.0.1 and gives each system a bucket of its own, so the server's request log counts each one's
requests alone: GET, PUT, LIST (a GET of the bucket), HEAD, DELETE and POST (multipart uploads,
multi-object deletes), per operation.

The rows are :mod:`workload`'s drone telemetry (12 columns, a JSON payload): a bulk load of
``--days`` days, then ``--upserts`` daily batches (a new day and corrections to every tenth minute
of the day before). The table's "daily upsert" row is the last batch, when the table has history.

* pyhudi, copy-on-write and merge-on-read, Hudi's defaults (the metadata table on, inline clean and
  archival checks after every commit), through ``s3a://`` paths configured by the session's
  ``spark.hadoop.fs.s3a.*`` (Spark here has no hadoop-aws: pyhudi writes through boto3 and reads
  through pyarrow). Bulk load: ``bulk_insert``; upserts: ``upsert``; read planning: ``HudiTable``
  opened, the schema and the files of a snapshot query (``plan_query``, what ``pyhudi.read``
  plans with, without Spark); read: ``pyhudi.read(...).count()`` (if pyhudi.read cannot read
  ``s3a://`` in this build, ``spark.read.format("hudi")``, which reads through pyarrow); then
  compaction (MOR), a clean keeping 1 commit, clustering (Hudi's default plan strategy: every
  small file group) whose metadata-table delta commit also compacts the metadata table
  (``hoodie.metadata.compact.max.delta.commits=1``: Hudi archives nothing the latest compaction
  did not cover) and archival keeping 2-3 commits (the defaults keep 10 and 20-30 commits and
  compact the metadata table every 10 delta commits: nothing to do on a table this young).
* delta-rs (``deltalake``): ``write_deltalake`` partitioned by day; ``DeltaTable.merge`` on key and
  day (update all, insert all); read planning: ``DeltaTable`` loaded and its file list; read:
  ``to_pyarrow_dataset().count_rows()``; the service each Hudi one corresponds to: ``optimize.compact``
  (bin-packing small files, as clustering does), ``vacuum`` (retention 0, as the clean) and a
  checkpoint plus ``cleanup_metadata`` (as archival). Its S3 commits are conditional PUTs
  (``conditional_put=etag``: If-None-Match), no locking provider.

``--trace`` prints, per operation, the requests grouped by method and key shape (instant times,
file ids and days replaced by placeholders), to find where requests go. The summary checks the
targets of issue 29: an upsert makes no more requests than delta-rs's merge of the same batch, and
read planning with the metadata table lists no data partition.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
import workload  # noqa: E402  (a sibling module of this script)
from s3server import S3Server  # noqa: E402  (the tests' moto server)

import pyhudi  # noqa: E402

OPERATION = "hoodie.datasource.write.operation"
METHODS = ("GET", "PUT", "LIST", "HEAD", "DELETE", "POST")
#: the services' retention, small enough that a young table has something to clean and archive
CLEAN = {"hoodie.clean.commits.retained": "1"}
ARCHIVE = {**CLEAN, "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}
MDT_COMPACT = "hoodie.metadata.compact.max.delta.commits"


@dataclass
class Row:
    operation: str
    seconds: float
    requests: Counter[str]
    trace: list[Any] = field(default_factory=list)
    note: str = ""

    @property
    def total(self) -> int:
        return sum(self.requests.values())


_SHAPES = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(-\d+)?"), "<id>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}"), "<day>"),
    (re.compile(r"\d{17}|\d{14}"), "<t>"),
    (re.compile(r"\d+-\d+-\d+"), "<token>"),
    (re.compile(r"\.log\.\d+"), ".log.<n>"),
    (re.compile(r"part-\d+"), "part-<n>"),
    (re.compile(r"\d{20}"), "<v>"),
    (re.compile(r"files-\d{4}"), "files-<n>"),
]


def shape(key: str, table: str) -> str:
    """A key with what varies between files of one kind replaced by placeholders."""
    key = key[len(table) + 1:] if key.startswith(table + "/") else key
    for pattern, placeholder in _SHAPES:
        key = pattern.sub(placeholder, key)
    return key


class Meter:
    """Runs operations against one bucket and records their seconds and requests."""

    def __init__(self, server: S3Server, bucket: str, table: str) -> None:
        self.server, self.bucket, self.table = server, bucket, table
        self.rows: list[Row] = []

    def run(self, operation: str, fn: Callable[[], Any]) -> Any:
        mark = self.server.mark()
        started = time.perf_counter()
        note = ""
        result = None
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - printed in the table: the other rows still count
            note = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        seconds = time.perf_counter() - started
        log = self.server.request_log(mark, self.bucket)
        requests = Counter(r.method for r in log)
        self.rows.append(Row(operation, seconds, requests, log, note))
        return result

    def note(self, text: str) -> None:
        """A word on what the last operation did, unless it failed."""
        if not self.rows[-1].note:
            self.rows[-1].note = text

    def lists_of_data_partitions(self, operation: str) -> list[str]:
        """The prefixes of the data partitions ``operation`` listed (not .hoodie, not the table)."""
        row = next(r for r in self.rows if r.operation == operation)
        prefix = self.table + "/"
        return [r.key for r in row.trace if r.method == "LIST" and r.key.startswith(prefix)
                and not r.key[len(prefix):].startswith(".hoodie") and r.key.rstrip("/") != self.table]


def print_table(title: str, meter: Meter, *, trace: bool) -> None:
    print(f"\n[{title}]")
    print(f"  {'operation':<28} {'seconds':>8} " + " ".join(f"{m:>6}" for m in METHODS) + f" {'total':>6}")
    for row in meter.rows:
        print(f"  {row.operation:<28} {row.seconds:8.2f} " + " ".join(f"{row.requests.get(m, 0):6d}" for m in METHODS)
              + f" {row.total:6d}" + (f"  {row.note}" if row.note else ""))
        if trace:
            shapes = Counter((r.method, shape(r.key, meter.table)) for r in row.trace)
            for (method, key), n in sorted(shapes.items(), key=lambda kv: (-kv[1], kv[0])):
                print(f"      {n:5d} {method:<6} {key}")


# -- pyhudi ----------------------------------------------------------------------------------------
def hudi_options(server: S3Server, table_type: str) -> dict[str, str]:
    return {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type, **server.hadoop_conf}


def read_count(spark, path: str, opts: dict[str, str]) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """Rows of a snapshot read: pyhudi.read, or the data source where pyhudi.read cannot open s3a."""
    try:
        return pyhudi.read(spark, path, opts).count(), "pyhudi.read"
    except Exception as exc:  # noqa: BLE001 - Spark without hadoop-aws in a build where pyhudi.read needs it
        reason = str(exc).splitlines()[0][:80]
    pyhudi.register(spark)
    return (spark.read.format("hudi").options(**opts).load(path).count(),
            f'spark.read.format("hudi") (pyhudi.read failed: {reason})')


def plan(path: str, opts: dict[str, str]) -> int:
    """What pyhudi.read plans before Spark sees a file: the table, its schema, the slices to read."""
    from pyhudi.config import HudiConfig
    from pyhudi.spark.reader import plan_query

    table = pyhudi.HudiTable(path, storage_options=opts)
    table.arrow_schema()
    return len(plan_query(table, HudiConfig.of(opts)).slices)


def run_pyhudi(spark, server: S3Server, data: dict[str, Any], table_type: str) -> Meter:  # type: ignore[no-untyped-def]
    bucket = server.make_bucket(f"bench-{'cow' if table_type == 'COPY_ON_WRITE' else 'mor'}")
    path = f"s3a://{bucket}/drones"
    opts = hudi_options(server, table_type)
    meter = Meter(server, bucket, "drones")
    load = workload.pandas_frame(spark, data["load"])
    meter.run("bulk load", lambda: pyhudi.write(load, path, {**opts, OPERATION: "bulk_insert"}))
    for i, batch in enumerate(data["batches"]):
        df = workload.pandas_frame(spark, batch)
        meter.run(f"daily upsert {i + 1}", lambda df=df: pyhudi.write(
            df, path, {**opts, OPERATION: "upsert"}))
    meter.run("read planning", lambda: plan(path, opts))
    counted = meter.run("read (count)", lambda: read_count(spark, path, opts))
    if counted is not None:
        rows, how = counted
        meter.rows[-1].note = f"{rows:,} rows by {how}"
    if table_type == "MERGE_ON_READ":
        done = meter.run("compaction", lambda: pyhudi.compact(spark, path, opts))
        meter.note(f"{len(done or [])} plan(s)")
    cleaned = meter.run("clean", lambda: pyhudi.clean(path, {**opts, **CLEAN}))
    meter.note(f"{sum(c.files_deleted for c in cleaned or [])} files deleted")
    # Hudi archives nothing the metadata table's latest compaction has not covered, and a table this
    # young has none (the metadata table compacts every 10 delta commits): the clustering makes it due
    clustered = meter.run("clustering + MDT compaction",
                          lambda: pyhudi.cluster(spark, path, {**opts, MDT_COMPACT: "1"}))
    meter.note(f"{len(clustered or [])} plan(s)")
    archived = meter.run("archival", lambda: pyhudi.archive(path, {**opts, **ARCHIVE}))
    meter.note(f"{len(archived or [])} instants archived")
    return meter


# -- delta-rs --------------------------------------------------------------------------------------
def run_delta(server: S3Server, data: dict[str, Any]) -> Meter:
    from deltalake import DeltaTable, write_deltalake

    bucket = server.make_bucket("bench-delta")
    uri = f"s3://{bucket}/drones"
    so = {**server.storage_options, "conditional_put": "etag"}
    meter = Meter(server, bucket, "drones")
    meter.run("bulk load", lambda: write_deltalake(uri, data["load"], partition_by=["day"], storage_options=so))
    for i, batch in enumerate(data["batches"]):
        meter.run(f"daily upsert {i + 1}", lambda batch=batch: DeltaTable(uri, storage_options=so).merge(
            batch, predicate="t.key = s.key AND t.day = s.day", source_alias="s", target_alias="t")
            .when_matched_update_all().when_not_matched_insert_all().execute())
    meter.run("read planning", lambda: len(DeltaTable(uri, storage_options=so).file_uris()))
    rows = meter.run("read (count)", lambda: DeltaTable(uri, storage_options=so).to_pyarrow_dataset().count_rows())
    meter.note(f"{rows:,} rows by to_pyarrow_dataset().count_rows()" if rows is not None else "")
    vacuumed = meter.run("clean", lambda: DeltaTable(uri, storage_options=so).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False))
    meter.note(f"vacuum: {len(vacuumed or [])} files deleted")
    metrics = meter.run("clustering", lambda: DeltaTable(uri, storage_options=so).optimize.compact())
    meter.note(f"optimize.compact: {(metrics or {}).get('numFilesRemoved', '?')} files into "
               f"{(metrics or {}).get('numFilesAdded', '?')}")

    def archive() -> None:
        table = DeltaTable(uri, storage_options=so)
        table.create_checkpoint()
        table.cleanup_metadata()
    meter.run("archival", archive)
    meter.note("checkpoint + cleanup_metadata")
    return meter


def warm_up(spark, server: S3Server) -> None:  # type: ignore[no-untyped-def]
    """Spark's JVM and Python workers, boto3's clients: warm before the clock, on a bucket of their own."""
    bucket = server.make_bucket("bench-warmup")
    small = workload.rows(0, 2, 3)
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        path = f"s3a://{bucket}/{table_type}"
        opts = hudi_options(server, table_type)
        pyhudi.write(workload.pandas_frame(spark, small), path, {**opts, OPERATION: "bulk_insert"})
        pyhudi.write(workload.pandas_frame(spark, workload.daily_batch(2, 3)), path, {**opts, OPERATION: "upsert"})
        read_count(spark, path, opts)


def summary(meters: dict[str, Meter], upserts: int) -> None:
    print("\nagainst the targets (same run):")
    last = f"daily upsert {upserts}"
    delta = meters.get("delta-rs")
    merge = next((r for r in delta.rows if r.operation == last), None) if delta else None
    for name in ("pyhudi COW", "pyhudi MOR"):
        meter = meters.get(name)
        if meter is None:
            continue
        upsert = next(r for r in meter.rows if r.operation == last)
        if merge is not None:
            print(f"  {name} upsert: {upsert.total} requests, delta-rs merge of the same batch {merge.total} "
                  f"({upsert.total / max(merge.total, 1):.2f}x, target <= 1.0x); seconds {upsert.seconds:.2f} "
                  f"against {merge.seconds:.2f}")
        listed = meter.lists_of_data_partitions("read planning")
        print(f"  {name} read planning with the metadata table: {len(listed)} LIST of data partitions (target 0)"
              + (f": {listed[:3]}" if listed else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drones", type=int, default=20)
    parser.add_argument("--days", type=int, default=5)
    parser.add_argument("--upserts", type=int, default=3)
    parser.add_argument("--systems", default="cow,mor,delta", help="comma-separated: cow, mor, delta")
    parser.add_argument("--trace", action="store_true", help="print each operation's requests by key shape")
    args = parser.parse_args()
    systems = args.systems.split(",")
    data = {"load": workload.rows(0, args.days, args.drones),
            "batches": [workload.daily_batch(args.days + i, args.drones) for i in range(args.upserts)]}
    print(f"drones={args.drones} days={args.days}: load {data['load'].num_rows:,} rows, "
          f"{args.upserts} daily upserts of {data['batches'][0].num_rows:,} rows" if data["batches"] else "")
    server = S3Server(Path(tempfile.mkdtemp(prefix="pyhudi-s3-bench-")) / "requests.log")
    meters: dict[str, Meter] = {}
    try:
        spark = None
        if "cow" in systems or "mor" in systems:
            spark = pyhudi.spark_session()
            conf = spark.sparkContext._jsc.hadoopConfiguration()
            for key, value in server.hadoop_conf.items():
                conf.set(key, value)
            warm_up(spark, server)
        if "delta" in systems:
            meters["delta-rs"] = run_delta(server, data)
            print_table("delta-rs (deltalake)", meters["delta-rs"], trace=args.trace)
        for name, table_type in (("cow", "COPY_ON_WRITE"), ("mor", "MERGE_ON_READ")):
            if name in systems:
                label = f"pyhudi {name.upper()}"
                meters[label] = run_pyhudi(spark, server, data, table_type)
                print_table(f"{label} (metadata table on, Hudi defaults)", meters[label], trace=args.trace)
        summary(meters, args.upserts)
        if spark is not None:
            spark.stop()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
