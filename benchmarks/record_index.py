"""The metadata table's indexes on the drone workload: global upserts and data skipping.

Global upserts: for each table size (``--sizes``, days of 200 drones: 10 days are 2.88M rows), the
rows are bulk-inserted once and the table copied for each global index: RECORD_INDEX (the
metadata table's record index), GLOBAL_BLOOM and GLOBAL_SIMPLE. Each copy then takes the same daily
batches (a new day plus corrections of every tenth minute of the day before, 316,800 rows, from a
pandas frame): one untimed (it rebuilds the metadata table without the record index for the other
two), then ``--upserts`` timed; printed are the median and the phases of the last one.

Data skipping: ``--skip-days`` days, with the drone keys and with hashed keys (in no order the
files follow), each bulk-inserted into files of at most 8 MB with the metadata table's column
statistics, once with the record index (``hoodie.index.type=RECORD_INDEX``) and once without, and
the same rows as plain Spark parquet partitioned by day. A point lookup by record key, an ``IN``
list of 20 keys spread over the days, and a one-hour filter on ``ts`` (none names the partition
column), each written ``.where(...)`` on the frame of a read: the files each query reads
(``inputFiles()``) and its median time to a count, through the record index (read with
``hoodie.metadata.record.index.enable=true``), the column statistics, with
``hoodie.enable.data.skipping=false``, and for plain Spark.

    python benchmarks/record_index.py [--sizes 10,30] [--upserts 3] [--skip-days 10] [--only upsert|skipping]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from timing import median_ms  # noqa: E402
from workload import START, daily_batch, day_name, pandas_frame, rows  # noqa: E402

import pyhudi  # noqa: E402

DRONES = 200
INDEXES = ("RECORD_INDEX", "GLOBAL_BLOOM", "GLOBAL_SIMPLE")


def options(**extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.parquet.compression.codec": "snappy", **extra}


def index_options(index: str) -> dict[str, str]:
    return options(**{"hoodie.index.type": index,
                      "hoodie.metadata.record.index.enable": str(index == "RECORD_INDEX").lower()})


def upserts(spark: Any, work: Path, days: int, count: int) -> dict[str, float]:
    load = rows(0, days, DRONES)
    seed = str(work / f"seed_{days}")
    started = time.perf_counter()
    # bloom filters in the footers (GLOBAL_BLOOM's), record index built by the load
    pyhudi.write(pandas_frame(spark, load), seed, {**index_options("GLOBAL_BLOOM"),
                                                   "hoodie.metadata.record.index.enable": "true",
                                                   "hoodie.datasource.write.operation": "bulk_insert"})
    print(f"\n[{days} days] bulk insert of {load.num_rows:,} rows with the record index: "
          f"{time.perf_counter() - started:.1f} s")
    del load
    paths = {}
    for index in INDEXES:
        paths[index] = str(work / f"{index}_{days}")
        shutil.copytree(seed, paths[index])
    shutil.rmtree(seed)
    times: dict[str, list[float]] = {index: [] for index in INDEXES}
    last: dict[str, dict] = {}
    for n in range(count + 1):
        batch = daily_batch(days + n, DRONES)
        order = INDEXES[n % 3:] + INDEXES[:n % 3]  # each index goes first in turn
        for index in order:
            frame = pandas_frame(spark, batch)
            started = time.perf_counter()
            res = pyhudi.write(frame, paths[index], index_options(index))
            if n:
                times[index].append(time.perf_counter() - started)
                last[index] = res.stats
    medians = {}
    for index in INDEXES:
        medians[index] = statistics.median(times[index])
        phases = {k: v for k, v in last[index].items() if k.endswith("_s") and isinstance(v, float) and v >= 0.05}
        print(f"  {index:<13} upsert of {daily_batch(days, DRONES).num_rows:,} rows: median "
              f"{medians[index]:.2f} s (" + ", ".join(f"{t:.2f}" for t in times[index]) + ") phases of the last: "
              + ", ".join(f"{k[:-2]} {v:.2f}" for k, v in phases.items()))
    for index in INDEXES:
        shutil.rmtree(paths[index], ignore_errors=True)
    return medians




def hashed_keys(load: Any) -> Any:
    """``load`` with keys in no order the files follow: each row's position scrambled into a
    64-bit number, zero-padded to 20 digits (as UUID keys would be)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    scrambled = np.arange(load.num_rows, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    text = pc.utf8_lpad(pa.array(scrambled).cast(pa.string()), width=20, padding="0")
    return load.set_column(load.schema.get_field_index("key"), "key", text)


def skipping(spark: Any, work: Path, days: int) -> None:
    for layout, load in (("drone keys (yyyyMMddHHmm_drone: files hold key ranges)", rows(0, days, DRONES)),
                         ("hashed keys (every file spans the key range)", hashed_keys(rows(0, days, DRONES)))):
        skipping_layout(spark, work, layout, load, days)


def skipping_layout(spark: Any, work: Path, layout: str, load: Any, days: int) -> None:
    from pyspark.sql import functions as F

    for name in ("skipping", "indexed", "plain"):
        shutil.rmtree(work / name, ignore_errors=True)
    path, indexed, plain = str(work / "skipping"), str(work / "indexed"), str(work / "plain")
    written = {"hoodie.datasource.write.operation": "bulk_insert", "hoodie.parquet.max.file.size": str(8 * 1024 * 1024),
               "hoodie.metadata.index.column.stats.enable": "true"}
    pyhudi.write(pandas_frame(spark, load), path, options(**written))
    pyhudi.write(pandas_frame(spark, load), indexed, options(**written, **{"hoodie.index.type": "RECORD_INDEX"}))
    pandas_frame(spark, load).write.partitionBy("day").parquet(plain)
    files = len(pyhudi.HudiTable(path).file_system_view().latest_base_files())
    plain_files = len(spark.read.parquet(plain).inputFiles())
    key = load.column("key")[load.num_rows // 2 + 123].as_py()
    spread = [load.column("key")[i].as_py() for i in range(4_321, load.num_rows, load.num_rows // 20)]
    hour_start = int(START.timestamp() * 1000) + (days // 2) * 86_400_000 + 13 * 3_600_000
    queries = {"point lookup by key": F.col("key") == key,
               f"{len(spread)} keys of every day (IN)": F.col("key").isin(*spread),
               f"one hour of ts ({day_name(days // 2)} 13:00-14:00)":
                   (F.col("ts") >= hour_start) & (F.col("ts") < hour_start + 3_600_000)}
    print(f"\n[data skipping, {layout}] {load.num_rows:,} rows in {files} base files ({days} days; plain Spark: "
          f"{plain_files} files); each query written .where(...) on the frame of a read")
    off = {"hoodie.enable.data.skipping": "false"}
    use_index = {"hoodie.metadata.record.index.enable": "true"}
    for name, condition in queries.items():
        ways = [
            ("pyhudi, record index (read option)", lambda c=condition: pyhudi.read(spark, indexed, use_index).where(c)),
            ("pyhudi, column stats", lambda c=condition: pyhudi.read(spark, path).where(c)),
            ("pyhudi, hoodie.enable.data.skipping=false", lambda c=condition: pyhudi.read(spark, path, off).where(c)),
            ("plain Spark parquet", lambda c=condition: spark.read.parquet(plain).where(c)),
        ]
        counts = {make().count() for _label, make in ways}
        assert len(counts) == 1, counts
        print(f"  {name} ({counts.pop():,} rows):")
        for label, make in ways:
            ms = median_ms(lambda m=make: m().count())
            print(f"    {label:<56} reads {len(make().inputFiles()):>4} files, {ms:7.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,30", help="table sizes in days, comma-separated")
    parser.add_argument("--upserts", type=int, default=3)
    parser.add_argument("--skip-days", type=int, default=10)
    parser.add_argument("--only", choices=["upsert", "skipping"])
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = pyhudi.spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="pyhudi_index_bench_"))
    try:
        if args.only != "skipping":
            results = {int(d): upserts(spark, work, int(d), args.upserts) for d in args.sizes.split(",")}
            print("\n[summary] median global upsert (s): " + "; ".join(
                f"{d} days: " + ", ".join(f"{i} {m[i]:.2f}" for i in INDEXES) for d, m in results.items()))
        if args.only != "upsert":
            skipping(spark, work, args.skip_days)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
