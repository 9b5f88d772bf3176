"""``spark.read.format("hudi")`` (PySpark 4's Python data source) against ``pyhudi.read``, and
queries written the Spark way (``.where(...)``) against plain Spark parquet of the same rows.

The drone rows of ``--days`` days (200 drones) bulk-inserted, then, medians of five runs after a
warm-up:

1. three queries through ``pyhudi.read`` and ``spark.read.format("hudi")``: a count of every
   row, the rows of one day (``day = ...``, a partition filter) counted, and ``avg(speed)`` per day;
2. queries written with ``.where(...)`` on ``pyhudi.read(spark, p)`` (re-planned with pyhudi's
   pruning, :mod:`pyhudi.spark.query`), on ``spark.read.format("hudi").load(p)`` (filters pushed
   to the source) and on ``spark.read.parquet`` of the same rows written by plain Spark
   partitioned by day: a point lookup of one key (collected), one day's rows counted, and
   ``avg(speed)`` per day over the rows of every day.

    /path/to/pyspark4-venv/bin/python benchmarks/datasource.py [--days 10]

On PySpark 3.5 (no Python data sources) the ``format("hudi")`` columns are left out.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from timing import median_ms  # noqa: E402
from workload import day_name, pandas_frame, rows  # noqa: E402

import pyhudi  # noqa: E402


def floor_source():  # type: ignore[no-untyped-def]
    """The least any Python data source does for these reads: one task per parquet file, the
    file read whole by pyarrow and handed to Spark as Arrow batches of the query's schema (no
    timeline, no planning, no merge): the floor of ``spark.read.format("hudi")``."""
    import pyarrow.parquet as pq
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    class FloorReader(DataSourceReader):
        def __init__(self, files: list[str], schema: StructType) -> None:
            self.files, self.schema_json = files, schema.json()

        def partitions(self):  # type: ignore[no-untyped-def]
            return [InputPartition(f) for f in self.files]

        def read(self, partition):  # type: ignore[no-untyped-def]
            import json

            target = to_arrow_schema(StructType.fromJson(json.loads(self.schema_json)), timezone="UTC")
            table = pq.read_table(partition.value, columns=target.names, pre_buffer=True)
            yield from table.cast(target).to_batches(max_chunksize=1 << 20)

    class Floor(DataSource):
        @classmethod
        def name(cls) -> str:
            return "pyhudi_floor"

        def schema(self):  # type: ignore[no-untyped-def]
            import json

            return StructType.fromJson(json.loads(self.options["schema"]))

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return FloorReader(self.options["files"].split(","), schema)

    return Floor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = pyhudi.spark_session()
    pyhudi.register(spark)
    work = Path(tempfile.mkdtemp(prefix="pyhudi_ds_bench_"))
    try:
        path = str(work / "t")
        load = rows(0, args.days, 200)
        pyhudi.write(pandas_frame(spark, load), path, {
            "hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.operation": "bulk_insert"})
        plain = str(work / "plain")
        pandas_frame(spark, load).write.partitionBy("day").parquet(plain)
        from pyspark.sql import functions as F

        day = day_name(args.days // 2)
        key = load.column("key")[load.num_rows // 2 + 17].as_py()
        source = hasattr(spark, "dataSource")  # PySpark 4
        queries = {
            "count of every row": lambda df: df.count(),
            f"rows of {day} (partition filter)": lambda df: df.where(F.col("day") == day).count(),
            "avg(speed) per day": lambda df: df.groupBy("day").agg(F.avg("speed")).collect(),
        }
        print(f"{load.num_rows:,} rows, {args.days} days, PySpark {spark.version}")
        floor = None
        if source:
            spark.dataSource.register(floor_source())
            files = [f.removeprefix("file://") for f in pyhudi.read(spark, path).inputFiles()]
            schema = spark.read.format("hudi").load(path).schema.json()

            def floor() -> Any:
                return spark.read.format("pyhudi_floor").options(files=",".join(files), schema=schema).load()
        for name, query in queries.items():
            ours = median_ms(lambda q=query: q(pyhudi.read(spark, path)))
            theirs = median_ms(lambda q=query: q(spark.read.format("hudi").load(path))) if source else float("nan")
            least = median_ms(lambda q=query: q(floor())) if floor is not None else float("nan")
            print(f"  {name:<40} pyhudi.read {ours:7.0f} ms   spark.read.format('hudi') {theirs:7.0f} ms "
                  f"({theirs / ours:4.1f}x)   floor: a bare Python source of the same files {least:7.0f} ms")
        where = {
            f"point lookup key = {key}": lambda df: df.where(F.col("key") == key).collect(),
            f"rows of {day} counted": lambda df: df.where(F.col("day") == day).count(),
            "avg(speed) per day": lambda df: df.groupBy("day").agg(F.avg("speed")).collect(),
        }
        print("  queries written with .where(...) (target: pyhudi.read(p).where <= plain Spark):")
        for name, query in where.items():
            spark_ms = median_ms(lambda q=query: q(spark.read.parquet(plain)))
            ours = median_ms(lambda q=query: q(pyhudi.read(spark, path)))
            theirs = median_ms(lambda q=query: q(spark.read.format("hudi").load(path))) if source else float("nan")
            print(f"  {name:<40} plain Spark {spark_ms:7.0f} ms   pyhudi.read(p).where {ours:7.0f} ms "
                  f"({ours / spark_ms:4.2f}x)   format('hudi').load(p).where {theirs:7.0f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
