"""What the metadata table buys and costs: read planning on 10,000 files, and the daily upsert.

Planning: the drone rows of 100 days (10 drones), bulk-inserted with a small
``hoodie.parquet.max.file.size``: about 10,000 files in 100 partitions. The same table is
planned from its metadata table, from a storage listing (a copy whose ``hoodie.properties`` does
not declare the metadata table), and by plain Spark (``spark.read.parquet`` of the folder, which
lists it too). Printed, as medians of repeated runs on a new table handle each time: the file
list alone, the file-system view (what every read and write plans from), and ``pyhudi.read`` up
to a DataFrame.

Write cost: the daily upsert (a new day plus corrections of the day before, from a pandas frame)
on a 12-day table, with the metadata table (the default) and with ``hoodie.metadata.enable=false``,
same rows, same run, taking turns to go first; the median of the later days.

    python benchmarks/metadata_table.py [--drones 200] [--days 10] [--files-per-day 100]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from timing import median_ms as _median_ms  # noqa: E402
from workload import daily_batch, pandas_frame, rows  # noqa: E402

import pyhudi  # noqa: E402
from pyhudi.config import properties as P  # noqa: E402
from pyhudi.metadata.files import clear_cache  # noqa: E402
from pyhudi.metadata.table import MetadataTable  # noqa: E402
from pyhudi.table.fs_view import FileSystemView  # noqa: E402

REPEATS = 7


def median_ms(fn: Callable[[], Any], repeats: int = REPEATS) -> float:
    return _median_ms(fn, repeats)




def options(**extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.parquet.compression.codec": "snappy", **extra}


def planning(spark, work: Path, files_per_day: int) -> None:  # type: ignore[no-untyped-def]
    days = 100
    path = str(work / "many_files")
    load = rows(0, days, 10)
    size = load.nbytes // 6 // (days * files_per_day)  # these rows take about a sixth of their Arrow bytes
    started = time.perf_counter()
    pyhudi.write(pandas_frame(spark, load), path, options(**{
        "hoodie.datasource.write.operation": "bulk_insert", "hoodie.parquet.max.file.size": str(size)}))
    load_s = time.perf_counter() - started
    listed = str(work / "many_files_listed")
    shutil.copytree(path, listed)
    pyhudi.HudiTable(listed).update_properties({P.METADATA_PARTITIONS: None})

    def view(p: str, *, mdt: bool) -> int:
        table = pyhudi.HudiTable(p)
        listing = table.metadata_listing() if mdt else None
        assert (listing is not None) == mdt
        v = FileSystemView(table.storage, table.timeline, listing=listing)
        return len(v.latest_base_files())

    count = view(path, mdt=True)
    assert count == view(listed, mdt=False), "the metadata table and the listing disagree"
    parts = len(pyhudi.HudiTable(path).file_system_view().partitions)
    def file_list(p: str, *, mdt: bool, cold: bool = False) -> int:
        table = pyhudi.HudiTable(p)
        if cold:
            clear_cache()
        if mdt:
            listing = MetadataTable(table.storage).listing(table.timeline)
            return sum(len(files) for files in listing.files.values())
        return len(table.storage.walk_files(""))

    list_cold = median_ms(lambda: file_list(path, mdt=True, cold=True))
    list_mdt = median_ms(lambda: file_list(path, mdt=True))
    list_storage = median_ms(lambda: file_list(listed, mdt=False))
    with_mdt = median_ms(lambda: view(path, mdt=True))
    by_listing = median_ms(lambda: view(listed, mdt=False))
    read_mdt = median_ms(lambda: pyhudi.read(spark, path))
    read_listing = median_ms(lambda: pyhudi.read(spark, listed))
    plain = median_ms(lambda: spark.read.option("recursiveFileLookup", "true").parquet(listed))
    mdt = MetadataTable(pyhudi.HudiTable(path).storage)
    base = mdt.base_instant()
    print(f"\n[planning] {count} files in {parts} partitions (bulk_insert of {load.num_rows} rows in "
          f"{load_s:.1f} s); metadata table base file {base}")
    print(f"  the file list: metadata table {list_cold:.1f} ms read cold, {list_mdt:.1f} ms with its files "
          f"decoded earlier in the process; storage listing {list_storage:.1f} ms ({list_storage / list_cold:.1f}x "
          f"and {list_storage / list_mdt:.1f}x)")
    print(f"  file-system view (file list + {count} file groups built): metadata table {with_mdt:.1f} ms, "
          f"storage listing {by_listing:.1f} ms ({by_listing / with_mdt:.1f}x)")
    print(f"  pyhudi.read to a DataFrame: metadata table {read_mdt:.0f} ms, storage listing {read_listing:.0f} ms; "
          f"plain Spark spark.read.parquet of the folder (lists it) {plain:.0f} ms")
    skipping(spark, path, listed, load)


def skipping(spark, path: str, listed: str, load) -> None:  # type: ignore[no-untyped-def]
    """A point lookup by record key: base files pruned by the metadata table's column statistics
    (footers never opened) against pruning by footers read cold and cached."""
    from pyspark.sql import functions as F

    from pyhudi.read import skipping as footer_cache

    started = time.perf_counter()  # the next write builds the column_stats partition from every footer
    pyhudi.write(pandas_frame(spark, load.slice(0, 1)), path,
                 options(**{"hoodie.metadata.index.column.stats.enable": "true"}))
    build_s = time.perf_counter() - started
    key = load.column("key")[load.num_rows // 2].as_py()

    def lookup(p: str, *, cold: bool = False) -> int:
        if cold:
            footer_cache._FOOTERS.clear()
        return len(pyhudi.read(spark, p, filters=F.col("key") == key).inputFiles())

    files = lookup(path)
    assert files == lookup(listed)
    with_stats = median_ms(lambda: lookup(path))
    footers_cold = median_ms(lambda: lookup(listed, cold=True), repeats=3)
    footers_warm = median_ms(lambda: lookup(listed))
    print(f"  point lookup by key (reads {files} file): column stats from the metadata table {with_stats:.0f} ms, "
          f"footers {footers_cold:.0f} ms read cold / {footers_warm:.0f} ms cached; building the column_stats "
          f"partition from {len(pyhudi.HudiTable(path).file_system_view().latest_base_files())} footers "
          f"(one write) {build_s:.1f} s")


def write_cost(spark, work: Path, drones: int, days: int) -> None:  # type: ignore[no-untyped-def]
    results: dict[str, list[float]] = {"on": [], "off": []}
    paths = {mode: str(work / f"daily_{mode}") for mode in results}
    for mode, path in paths.items():
        opts = options(**{"hoodie.metadata.enable": "true" if mode == "on" else "false"})
        pyhudi.write(pandas_frame(spark, rows(0, 1, drones)), path,
                     {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    for day in range(1, days):
        batch = daily_batch(day, drones)
        order = list(paths.items()) if day % 2 else list(paths.items())[::-1]
        for mode, path in order:  # alternate which goes first, so both see the same machine state
            opts = options(**{"hoodie.metadata.enable": "true" if mode == "on" else "false"})
            started = time.perf_counter()
            pyhudi.write(pandas_frame(spark, batch), path, opts)
            results[mode].append(time.perf_counter() - started)
    on = statistics.median(results["on"][2:])
    off = statistics.median(results["off"][2:])
    print("  per day, on/off (s): " + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(results["on"], results["off"])))
    mdt = MetadataTable(pyhudi.HudiTable(paths["on"]).storage)
    instants = mdt.timeline.reload().instants()
    print(f"\n[write cost] daily upsert of {daily_batch(days, drones).num_rows} rows ({drones} drones), "
          f"median of days 3-{days - 1}: with the metadata table {on:.2f} s, without {off:.2f} s "
          f"({(on - off) / off * 100:+.1f} %); metadata table timeline: {len(instants)} instants "
          f"({sum(1 for i in instants if i.action == 'commit')} compactions)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drones", type=int, default=200)
    parser.add_argument("--days", type=int, default=12)
    parser.add_argument("--files-per-day", type=int, default=100)
    parser.add_argument("--only", choices=["planning", "write"], help="run one of the two parts")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = pyhudi.spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="pyhudi_mdt_bench_"))
    try:
        if args.only != "write":
            planning(spark, work, args.files_per_day)
        if args.only != "planning":
            write_cost(spark, work, args.drones, args.days)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
