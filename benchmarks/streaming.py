"""Structured Streaming on the drone workload: micro-batch latency of the sink, rows/s of the sources.

A table holds one day of readings (200 drones, 288,000 rows, bulk-inserted). A file stream then
delivers ``--batches`` parquet files of 10,000 rows each, one per micro-batch: 8,000 new readings
and 2,000 corrections of the day before (updates). Printed per table type (COW, MOR with the
sink's asynchronous compaction every 5 delta commits):

- the sink's write time per micro-batch (``pyhudi.write`` inside ``foreachBatch``) and Spark's
  trigger time per batch (reading the file too), median and p90 over the batches after the first two;
- the same stream written by plain Spark's parquet file sink (append only: no keys, no updates), the floor;
  both sinks write ``--codec`` parquet (default snappy, Spark's default; Hudi's is gzip);
- the table read back as a stream from the earliest commit: rows/s of ``CommitStream`` (any
  PySpark) and of ``spark.readStream.format("hudi")`` (PySpark 4), against Spark's parquet file
  source reading the stream's input files, every column of each batch materialized; then the
  last commit alone, as a downstream that keeps up pulls it.

    python benchmarks/streaming.py [--batches 12]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))

from workload import pandas_frame, rows  # noqa: E402

import pyhudi  # noqa: E402

DRONES = 200
NEW, UPDATES = 8000, 2000


#: the parquet codec of both sinks (``--codec``): the same bytes on both sides
CODEC = {"codec": "snappy"}


def options(table_type: str) -> dict[str, str]:
    return {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type, "hoodie.parquet.compression.codec": CODEC["codec"]}


def write_inputs(directory: Path, batches: int) -> pa.Schema:
    """``batches`` parquet files of 10,000 rows: new readings of day 1, corrections of day 0."""
    fresh = rows(1, 1, DRONES)
    corrections = rows(0, 1, DRONES, revision=1)
    directory.mkdir(parents=True)
    for i in range(batches):
        part = pa.concat_tables([fresh.slice(i * NEW, NEW), corrections.slice(i * 7 * UPDATES, UPDATES)])
        path = directory / f"batch-{i:04d}.parquet"
        pq.write_table(part, path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return fresh.schema


def spread(values: list[float]) -> str:
    steady = sorted(values[2:]) or sorted(values)
    p90 = steady[min(len(steady) - 1, int(round(0.9 * (len(steady) - 1))))]
    return f"median {statistics.median(steady):6.0f} ms, p90 {p90:6.0f} ms"


def trigger_ms(query: Any) -> list[float]:
    return [float(p["durationMs"]["triggerExecution"]) for p in query.recentProgress
            if p["numInputRows"] > 0]


def sink_run(spark: Any, work: Path, inputs: Path, schema: pa.Schema, table_type: str) -> str:
    from pyspark.sql.pandas.types import from_arrow_schema

    from pyhudi.spark.streaming import HudiStreamSink

    path = str(work / f"table-{table_type}")
    pyhudi.write(pandas_frame(spark, rows(0, 1, DRONES)), path,
                 {**options(table_type), "hoodie.datasource.write.operation": "bulk_insert"})
    sink = HudiStreamSink(path, options(table_type))
    stream = spark.readStream.schema(from_arrow_schema(schema)).option("maxFilesPerTrigger", 1).parquet(str(inputs))
    query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(work / f"chk-{table_type}")).start()
    query.processAllAvailable()
    query.stop()
    compactions = [r.compaction for r in sink.reports if r.compaction]
    waited = time.monotonic()
    sink.wait_for_services()
    writes = [r.seconds * 1000 for r in sink.reports]
    print(f"  {table_type:<14} pyhudi sink: write {spread(writes)}; trigger {spread(trigger_ms(query))}"
          f"  ({len(writes)} batches, {len(compactions)} async compactions, "
          f"{time.monotonic() - waited:.1f} s waited for the last after the stream)")
    return path


def plain_run(spark: Any, work: Path, inputs: Path, schema: pa.Schema) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    stream = spark.readStream.schema(from_arrow_schema(schema)).option("maxFilesPerTrigger", 1).parquet(str(inputs))
    query = (stream.writeStream.format("parquet").option("path", str(work / "plain"))
             .option("compression", CODEC["codec"]).option("checkpointLocation", str(work / "chk-plain")).start())
    query.processAllAvailable()
    query.stop()
    print(f"  {'plain Spark':<14} parquet sink (append): trigger {spread(trigger_ms(query))}")


def timed_rows(run: Any) -> tuple[int, float]:
    """Rows a stream delivers and the seconds it takes, every column of each batch materialized
    (Spark's noop sink); the count that tells the rows is taken outside the timing."""
    counted: list[int] = []
    untimed = 0.0

    def keep(df: Any, _batch_id: int) -> None:
        nonlocal untimed
        df.write.format("noop").mode("overwrite").save()
        before = time.monotonic()
        counted.append(df.count())
        untimed += time.monotonic() - before

    started = time.monotonic()
    run(keep)
    return sum(counted), time.monotonic() - started - untimed


def source_run(spark: Any, work: Path, path: str, name: str, *, start: str = "earliest") -> None:
    where = {"hoodie.datasource.streaming.startOffset": start}

    def poller(keep: Any) -> None:
        stream = pyhudi.commit_stream(spark, path, where, checkpoint_location=str(work / f"poll-{name}-{start}"))
        stream.process_available(keep)

    def spark_source(keep: Any) -> None:
        query = (spark.readStream.format("hudi").options(**where).load(path).writeStream.foreachBatch(keep)
                 .option("checkpointLocation", str(work / f"src-{name}-{start}")).start())
        query.processAllAvailable()
        query.stop()

    runs = {"CommitStream": poller}
    if hasattr(spark, "dataSource"):
        runs["readStream.format('hudi')"] = spark_source
    for label, run in runs.items():
        n, seconds = timed_rows(run)
        print(f"  {name:<14} {label:<27} {n:>9,} rows in {seconds:5.2f} s: {n / seconds:>9,.0f} rows/s")


def plain_source(spark: Any, work: Path, inputs: Path, schema: pa.Schema) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    def run(keep: Any) -> None:
        query = (spark.readStream.schema(from_arrow_schema(schema)).parquet(str(inputs)).writeStream
                 .foreachBatch(keep).option("checkpointLocation", str(work / "src-plain")).start())
        query.processAllAvailable()
        query.stop()

    n, seconds = timed_rows(run)
    print(f"  {'plain Spark':<14} {'parquet file source':<27} {n:>9,} rows in {seconds:5.2f} s: "
          f"{n / seconds:>9,.0f} rows/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--codec", default="snappy", help="parquet codec of both sinks (Hudi's default is gzip, "
                                                          "Spark's snappy)")
    args = parser.parse_args()
    CODEC["codec"] = args.codec
    logging.basicConfig(level=logging.WARNING)
    spark = pyhudi.spark_session()
    if hasattr(spark, "dataSource"):
        pyhudi.register(spark)
    work = Path(tempfile.mkdtemp(prefix="pyhudi_stream_bench_"))
    try:
        inputs = work / "in"
        schema = write_inputs(inputs, args.batches)
        print(f"PySpark {spark.version}; {args.batches} micro-batches of {NEW + UPDATES:,} rows "
              f"({NEW:,} new, {UPDATES:,} updates) into a table of {1440 * DRONES:,} rows; {args.codec} parquet")
        print("Micro-batch latency")
        plain_run(spark, work, inputs, schema)
        tables = {t: sink_run(spark, work, inputs, schema, t) for t in ("COPY_ON_WRITE", "MERGE_ON_READ")}
        print("Reading the table as a stream from its first commit")
        for table_type, path in tables.items():
            source_run(spark, work, path, table_type)
        plain_source(spark, work, inputs, schema)
        print("Pulling the last micro-batch's commit alone (a downstream that keeps up)")
        for table_type, path in tables.items():
            writes = pyhudi.HudiTable(path).timeline.completed_writes()
            source_run(spark, work, path, table_type, start=writes[-2].timestamp)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
