"""CDC benchmark: the daily upsert with change data logging off against on, in each logging mode.

    .venv/bin/python benchmarks/cdc.py [--drones 100 --load-days 2 --days 20]
        [--modes off,op_key_only,data_before,data_before_after] [--table-type COPY_ON_WRITE]

The rows are :mod:`workload`'s drone readings (12 columns, a JSON payload): a bulk load of
``--load-days`` days, then ``--days`` daily upserts, each a new day plus corrections to every tenth
minute of the day before. The corrections rewrite the day before's file groups, so every upsert
merges files, and with CDC on writes a change data file per merged file group with one ``u``
record per correction (before and after images in ``data_before_after``).

The peer, in the same run on the same rows: delta-rs merging each daily batch (``MERGE`` on key and
day, with the batch's days as a literal filter) into a delta table without and with its change data
feed (``delta.enableChangeDataFeed``); and the change data of the last ``--read-days`` upserts read
back, by pyhudi's CDC query (``hoodie.datasource.query.incremental.format=cdc``, ``count()``) and by
delta-rs's ``load_cdf``.

One table per mode; the upserts of one day run on every table in turn, so load on the machine hits
all modes alike. Printed per mode: the median and total upsert time, the ratio to CDC off (the
issue's target: at most 1.20 for the daily upsert), and the change data bytes written. Data
generation and DataFrame creation are outside the clock.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload  # noqa: E402  (a sibling module of this script)
from deltalake import DeltaTable, write_deltalake  # noqa: E402

import pyhudi  # noqa: E402


def options(mode: str, table_type: str) -> dict[str, str]:
    opts = {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type, "hoodie.parquet.compression.codec": "snappy"}
    if mode != "off":
        opts.update({"hoodie.table.cdc.enabled": "true", "hoodie.table.cdc.supplemental.logging.mode": mode})
    return opts


def cdc_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(path) for n in names
               if n.endswith(".cdc"))


def handle_times(drones: int, modes: list[str], repeats: int = 9) -> dict[str, float]:
    """Median seconds of one merge handle (no Spark): a day's file group rewritten with the next
    batch's corrections to it, CDC off and in each mode -- the executor work CDC adds to."""
    import dataclasses

    import pyarrow as pa

    from pyhudi.config import HudiConfig
    from pyhudi.io.avro_schema import storage_schema, table_avro_schema
    from pyhudi.io.base_file import parquet_settings
    from pyhudi.storage import Storage
    from pyhudi.write.columns import IS_DELETE
    from pyhudi.write.handles import create_handle, merge_handle
    from pyhudi.write.plan import INSERT, UPDATE, WriteBucket, WriteContext
    from pyhudi.write.task import TaskInfo

    def prepared(table: pa.Table) -> pa.Table:
        return table.append_column("_hoodie_record_key", table.column("key")) \
            .append_column("_hoodie_partition_path", table.column("day")) \
            .append_column(IS_DELETE, pa.array([False] * table.num_rows))

    day = workload.rows(0, 1, drones)
    fixes = workload.rows(0, 1, drones, revision=1, every_nth_minute=10)
    file_schema = storage_schema(day.schema)
    cfg = HudiConfig.of({"hoodie.parquet.compression.codec": "snappy"})
    settings = parquet_settings(cfg, table_avro_schema(file_schema, "drones", with_meta_fields=True),
                                populate_meta_fields=True)
    root = tempfile.mkdtemp(prefix="pyhudi-cdc-handle-")
    try:
        ctx = WriteContext(storage=Storage(root), instant_time="20240101000000000", settings=settings,
                           storage_schema_ipc=file_schema.serialize().to_pybytes(), precombine_field="ts",
                           keep_larger_ordering=False, max_file_size=1 << 30, compression_ratio=0.1)
        made = create_handle(ctx.storage, ctx, file_schema, WriteBucket(0, INSERT, "d", "fg"), prepared(day),
                             TaskInfo(0, 0, 0))
        assert made is not None
        bucket = WriteBucket(0, UPDATE, "d", "fg-0", made["path"], ctx.instant_time)
        rows = prepared(fixes)
        runs: dict[str, list[float]] = {m: [] for m in modes}
        merge_handle(ctx.storage, ctx, file_schema, bucket, rows, TaskInfo(99, 1, 0))  # warm-up
        for r in range(repeats):  # modes interleaved, so machine load hits them alike
            for i, m in enumerate(modes):
                mine = dataclasses.replace(ctx, instant_time=f"2024010200000{i:04d}",
                                           cdc_mode=None if m == "off" else m.upper())
                started = time.perf_counter()
                merge_handle(ctx.storage, mine, file_schema, bucket, rows, TaskInfo(r, 1, 0))
                runs[m].append(time.perf_counter() - started)
        return {m: statistics.median(v) for m, v in runs.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drones", type=int, default=100)
    parser.add_argument("--load-days", type=int, default=2)
    parser.add_argument("--days", type=int, default=20, help="daily upserts after the load")
    parser.add_argument("--modes", default="off,op_key_only,data_before,data_before_after")
    parser.add_argument("--table-type", default="COPY_ON_WRITE")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--read-days", type=int, default=5, help="upserts whose change data is read back")
    parser.add_argument("--no-delta", action="store_true", help="leave out delta-rs")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    handle = handle_times(args.drones, modes)
    print(f"merge handle alone ({1440 * args.drones:,} stored rows, {144 * args.drones:,} corrections), median of 9:")
    for m in modes:
        print(f"  {m:<20}{handle[m]:>8.3f}s  ratio {handle[m] / handle[modes[0]]:.2f}")
    if args.days <= 0:
        return
    spark = pyhudi.spark_session(args.master, spark__sql__shuffle__partitions="2")
    root = tempfile.mkdtemp(prefix="pyhudi-cdc-bench-")
    try:
        paths = {m: os.path.join(root, m) for m in modes}
        load = workload.pandas_frame(spark, workload.rows(0, args.load_days, args.drones)).persist()
        load.count()
        for m in modes:
            pyhudi.write(load, paths[m], {**options(m, args.table_type),
                                          "hoodie.datasource.write.operation": "bulk_insert"})
        load.unpersist()
        peers = [] if args.no_delta else ["delta-rs", "delta-rs cdf"]
        for peer in peers:
            paths[peer] = os.path.join(root, peer.replace(" ", "_"))
            write_deltalake(paths[peer], workload.rows(0, args.load_days, args.drones), partition_by=["day"],
                            configuration={"delta.enableChangeDataFeed": str(peer.endswith("cdf")).lower()})
        times: dict[str, list[float]] = {m: [] for m in modes + peers}
        instants: dict[str, list[str]] = {m: [] for m in modes}
        for day in range(args.load_days, args.load_days + args.days):
            rows = workload.daily_batch(day, args.drones)
            batch = workload.pandas_frame(spark, rows).persist()
            batch.count()
            for m in modes[day % len(modes):] + modes[:day % len(modes)]:  # each mode goes first in turn
                started = time.perf_counter()
                res = pyhudi.write(batch, paths[m], {**options(m, args.table_type),
                                                     "hoodie.datasource.write.operation": "upsert"})
                times[m].append(time.perf_counter() - started)
                instants[m].append(res.instant_time)
            batch.unpersist()
            for peer in peers:
                started = time.perf_counter()
                delta_merge(paths[peer], rows)
                times[peer].append(time.perf_counter() - started)
            print(f"day {day}: " + "  ".join(f"{m} {times[m][-1]:.2f}s" for m in modes + peers), flush=True)
        rows = workload.daily_batch(args.load_days, args.drones).num_rows
        print(f"\n{args.table_type}, {args.drones} drones: load {args.load_days} days, {args.days} daily upserts of "
              f"{rows:,} rows ({rows - 1440 * args.drones:,} corrections)")
        base = statistics.median(times[modes[0]])
        print(f"{'mode':<20}{'median upsert s':>16}{'total s':>10}{'ratio':>8}{'cdc MB':>9}")
        for m in modes:
            med = statistics.median(times[m])
            print(f"{m:<20}{med:>16.2f}{sum(times[m]):>10.1f}{med / base:>8.2f}{cdc_bytes(paths[m]) / 1e6:>9.1f}")
        if peers:
            off = statistics.median(times[peers[0]])
            for peer in peers:
                med = statistics.median(times[peer])
                mb = cdf_bytes(paths[peer]) / 1e6
                print(f"{peer:<20}{med:>16.2f}{sum(times[peer]):>10.1f}{med / off:>8.2f}{mb:>9.1f}")
        read_back(spark, paths, instants, modes, peers, min(args.read_days, args.days))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()


def delta_merge(path: str, rows: pa.Table) -> None:
    """The daily batch merged into a delta table as the drone benchmark merges it (key and day, the
    batch's days as a literal filter so delta-rs prunes partitions)."""
    days = sorted(set(rows.column("day").to_pylist()))
    predicate = "t.key = s.key AND t.day = s.day AND t.day IN (" + ", ".join(f"'{d}'" for d in days) + ")"
    (DeltaTable(path).merge(rows, predicate=predicate, source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())


def cdf_bytes(path: str) -> int:
    """Bytes of delta-rs's change data files (``_change_data/`` folders)."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file() and "_change_data" in f.parts)


def read_back(spark, paths: dict[str, str], instants: dict[str, list[str]], modes: list[str], peers: list[str],
              days: int) -> None:
    """The change data of the last ``days`` upserts read back: pyhudi's CDC query (rows counted in
    Spark) on every table, delta-rs's ``load_cdf`` on its change data feed; median of 3."""
    print(f"\nchange data of the last {days} upserts read back (median of 3):")
    for m in modes:
        begin = instants[m][-days - 1] if days < len(instants[m]) else "000"  # (exclusive)
        opts = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.query.incremental.format": "cdc",
                "hoodie.datasource.read.begin.instanttime": begin}
        counts, secs = [], []
        for _ in range(3):
            started = time.perf_counter()
            counts.append(pyhudi.read(spark, paths[m], opts).count())
            secs.append(time.perf_counter() - started)
        print(f"  pyhudi {m:<20}{statistics.median(secs):>8.2f}s  {counts[0]:,} changes")
    if "delta-rs cdf" in peers:
        dt = DeltaTable(paths["delta-rs cdf"])
        start = dt.version() - days + 1
        counts, secs = [], []
        for _ in range(3):
            started = time.perf_counter()
            counts.append(dt.load_cdf(starting_version=start).read_all().num_rows)
            secs.append(time.perf_counter() - started)
        print(f"  delta-rs load_cdf{'':<13}{statistics.median(secs):>8.2f}s  {counts[0]:,} changes "
              "(update_preimage and update_postimage rows count separately)")


if __name__ == "__main__":
    main()
