"""Catalog calls and seconds per commit of a day-partitioned table synced to a Hive metastore and to
AWS Glue at once (both real servers on 127.0.0.1: Hive 2.3's metastore from PySpark's jars, moto).

The drone table (12 columns, a JSON payload, rows from pandas) gets ``--days`` day partitions in one
bulk load, then the commits users make: corrections to existing days, a new day, an
insert_overwrite of existing days, a delete_partition of 30 days, a load of 120 new days, a write
that adds a column, and corrections again with ``hoodie.datasource.meta_sync.condition.sync``.
Printed per commit and catalog: the partitions added/dropped, the calls by API (reads in
lower-case-led ``get``/``Get``, the rest writes), and the sync's seconds beside the write's.

The target (issue 31): one batched call per kind of partition change, none for a commit that
changes nothing in the catalog. A commit always moves ``last_commit_time_sync``, which Hudi writes
each time (one table update) unless ``condition.sync`` is on.

    python benchmarks/catalog_sync.py [--days 100] [--drones 20]
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
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from hms_server import HiveMetastoreServer  # noqa: E402
from s3server import ACCESS_KEY, REGION, SECRET_KEY, S3Server  # noqa: E402
from workload import day_name, pandas_frame, rows  # noqa: E402

import pyhudi  # noqa: E402

EVERY_NTH_MINUTE = 10  # 144 readings per drone and day keep 220 partitions quick to write


def options(hms: str, glue: str) -> dict[str, str]:
    return {"hoodie.table.name": "drones", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "day", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.meta.sync.enable": "true",
            "hoodie.meta.sync.client.tool.class": "org.apache.hudi.hive.HiveSyncTool,"
                                                  "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool",
            "hoodie.datasource.hive_sync.database": "bench", "hoodie.datasource.hive_sync.metastore.uris": hms,
            "hoodie.aws.glue.endpoint": glue, "hoodie.aws.glue.region": REGION,
            "hoodie.aws.access.key": ACCESS_KEY, "hoodie.aws.secret.key": SECRET_KEY,
            "hoodie.clean.automatic": "false"}


def describe(calls: dict[str, int]) -> tuple[str, str]:
    reads = {k: v for k, v in calls.items() if "get" in k.lower()}
    writes = {k: v for k, v in calls.items() if k not in reads}

    def text(c: dict[str, int]) -> str:
        return " ".join(f"{k}×{v}" for k, v in sorted(c.items())) or "-"
    return text(reads), text(writes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--drones", type=int, default=20)
    args = parser.parse_args()
    logging.getLogger("py4j").setLevel(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="pyhudi-sync-bench-"))
    (work / "hms").mkdir()
    hms = HiveMetastoreServer(work / "hms")
    moto = S3Server(work / "moto.log")
    spark = pyhudi.spark_session("local[2]", spark__sql__shuffle__partitions="8")
    spark.sparkContext.setLogLevel("ERROR")
    path = str(work / "drones")
    opts = options(hms.uri, moto.endpoint)
    n = args.days
    commits = [
        ("bulk load", lambda: rows(0, n, args.drones, every_nth_minute=EVERY_NTH_MINUTE), "bulk_insert", {}),
        *[(f"corrections to 10 days ({i})", lambda i=i: rows(n - 10, 10, args.drones, revision=i,
                                                              every_nth_minute=EVERY_NTH_MINUTE * 6), "upsert", {})
          for i in (1, 2, 3)],
        ("one new day", lambda: rows(n, 1, args.drones, every_nth_minute=EVERY_NTH_MINUTE), "upsert", {}),
        ("insert_overwrite of 5 days", lambda: rows(n - 5, 5, args.drones, revision=9,
                                                    every_nth_minute=EVERY_NTH_MINUTE * 6), "insert_overwrite", {}),
        ("delete_partition of 30 days", None, "delete_partition",
         {"hoodie.datasource.write.partitions.to.delete": ",".join(f"day={day_name(d)}" for d in range(30))}),
        ("120 new days", lambda: rows(n + 1, 120, args.drones, every_nth_minute=EVERY_NTH_MINUTE * 6), "upsert", {}),
        ("a new column", "column", "upsert", {}),
        ("corrections, condition.sync", lambda: rows(n - 10, 10, args.drones, revision=20,
                                                      every_nth_minute=EVERY_NTH_MINUTE * 6), "upsert",
         {"hoodie.datasource.meta_sync.condition.sync": "true", "hoodie.write.set.null.for.missing.columns": "true"}),
    ]
    print(f"{'commit':34} {'catalog':7} {'+parts':>6} {'-parts':>6}  {'write s':>7} {'sync s':>6}  "
          "calls: reads | writes")
    no_change_syncs: dict[str, list[float]] = {"hms": [], "glue": []}
    for label, make, operation, extra in commits:
        if make is None:
            df = spark.createDataFrame([], pandas_frame(spark, rows(0, 1, 1)).schema)
        elif make == "column":
            import pyarrow as pa
            table = rows(n - 3, 3, args.drones, revision=30, every_nth_minute=EVERY_NTH_MINUTE * 6)
            df = pandas_frame(spark, table.append_column("pilot", pa.array(["ana"] * table.num_rows)))
        else:
            df = pandas_frame(spark, make())
        started = time.perf_counter()
        result = pyhudi.write(df, path, {**opts, **extra, "hoodie.datasource.write.operation": operation})
        seconds = time.perf_counter() - started
        if "sync_error" in result.stats:
            raise SystemExit(f"sync failed: {result.stats['sync_error']}")
        for report in result.stats["catalog_sync"]:
            reads, writes = describe(report.get("calls", {}))
            print(f"{label:34} {report['catalog']:7} {report.get('added', 0):>6} {report.get('dropped', 0):>6}  "
                  f"{seconds:7.2f} {report['seconds']:6.3f}  {reads} | {writes}")
            if label.startswith("corrections to"):
                no_change_syncs[report["catalog"]].append(report["seconds"])
    for catalog, times in no_change_syncs.items():
        print(f"median sync of a commit that changes no partition, {catalog}: {statistics.median(times):.3f} s")
    spark.stop()
    hms.stop()
    moto.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
