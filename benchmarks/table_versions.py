"""The daily drone upsert on table version 9 (Hudi 1.1's format) against version 6, same run.

Two tables per table type, one created with ``hoodie.write.table.version=9`` and one at 6 (the
default), get the same rows: a one-day bulk load, then the drone workload's daily upserts (a new
day plus corrections to a tenth of the day before, from a pandas frame, as ``drones.py`` and
``metadata_table.py`` write them), taking turns to go first so both see the same machine state.
Printed per table type: every day's times, the median of the later days and the ratio 9 / 6 (the
target: within 10 %). Version 9 writes Avro commit metadata and completion-time instant names; the
metadata table is off on both sides (``--metadata`` to keep it on both), so the figure is the cost
of the format, not of the metadata table.

    python benchmarks/table_versions.py [--drones 200] [--days 8] [--table-type COPY_ON_WRITE,MERGE_ON_READ]
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

sys.path.insert(0, str(Path(__file__).parent))

from workload import daily_batch, pandas_frame, rows  # noqa: E402

import pyhudi  # noqa: E402

VERSIONS = ("6", "9")
SKIP = 2  # the first upserts warm Spark and the Python workers up


def options(table_type: str, version: str, *, metadata: bool) -> dict[str, str]:
    return {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.parquet.compression.codec": "snappy", "hoodie.datasource.write.table.type": table_type,
            "hoodie.write.table.version": version, "hoodie.metadata.enable": str(metadata).lower()}


def daily_upserts(spark, work: Path, table_type: str, drones: int, days: int, *,  # type: ignore[no-untyped-def]
                  metadata: bool) -> tuple[float, float]:
    """Median seconds of the daily upsert at version 6 and at version 9."""
    paths = {v: str(work / f"{table_type}_v{v}") for v in VERSIONS}
    times: dict[str, list[float]] = {v: [] for v in VERSIONS}
    for v, path in paths.items():
        pyhudi.write(pandas_frame(spark, rows(0, 1, drones)), path,
                     {**options(table_type, v, metadata=metadata), "hoodie.datasource.write.operation": "bulk_insert"})
    for day in range(1, days):
        batch = daily_batch(day, drones)
        order = list(paths.items()) if day % 2 else list(paths.items())[::-1]
        for v, path in order:
            frame = pandas_frame(spark, batch)  # made outside the clock
            started = time.perf_counter()
            pyhudi.write(frame, path, options(table_type, v, metadata=metadata))
            times[v].append(time.perf_counter() - started)
    for v, path in paths.items():
        table = pyhudi.HudiTable(path)
        assert table.config.version == int(v), f"{path} is at version {table.config.version}"
    print(f"  {table_type} per day, v6/v9 (s): "
          + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(times["6"], times["9"], strict=True)))
    return statistics.median(times["6"][SKIP:]), statistics.median(times["9"][SKIP:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drones", type=int, default=200)
    parser.add_argument("--days", type=int, default=8)
    parser.add_argument("--table-type", default="COPY_ON_WRITE,MERGE_ON_READ")
    parser.add_argument("--metadata", action="store_true", help="keep the metadata table on both tables")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = pyhudi.spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="pyhudi_versions_bench_"))
    rows_per_day = daily_batch(1, args.drones).num_rows
    try:
        for table_type in args.table_type.split(","):
            v6, v9 = daily_upserts(spark, work, table_type, args.drones, args.days, metadata=args.metadata)
            print(f"[table versions] {table_type} daily upsert of {rows_per_day} rows ({args.drones} drones), "
                  f"median of days {SKIP + 1}-{args.days - 1}: version 6 {v6:.2f} s, version 9 {v9:.2f} s "
                  f"(9/6 = {v9 / v6:.3f}, {(v9 - v6) / v6 * 100:+.1f} %)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
