"""Shared fixtures: one local[2] SparkSession per test process (each pytest-xdist worker has its
own), and the interop tables."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

INTEROP = Path(__file__).resolve().parents[1].parent / "shared" / "interop"

#: Tests marked ``once`` run on the newest PySpark only (``.ci/run`` runs ``-m "not once"`` on 3.5).
#: Besides every test that starts no Spark, these: what they check (writers racing under locks and
#: optimistic concurrency, processes killed, leases, heartbeats, table services' retention rules,
#: file sizing, payload versions, retries against the object store, the in-memory models' random
#: operation sequences, the table version 8/9 format and its moves, damaged table properties, the
#: report) does not depend on the PySpark version, and the Spark calls they make are those the
#: tests kept on 3.5 make (the version 8/9 tables are written and read by the same pipeline and
#: readers as version 6 ones). The tests a pattern matches whose ids hold one of its ``keep``
#: strings stay on 3.5, so every write path (local, distributed, record index), merge-on-read and
#: copy-on-write reads, and each way of pruning still meet their checks there.
ONCE: dict[str, tuple[str, ...]] = {
    "test_concurrency.py::*": (),
    "test_table_services.py::*": (),
    "test_layout.py::*": (),
    "test_payload_versions.py::*": (),
    "test_object_storage.py::*": (),
    "test_clustering.py::test_clustering_beside_writers[*": (),
    "test_clustering.py::test_allowed_updates_make_the_clustering_fail_and_lose_nothing[*": (),
    "test_clustering.py::test_large_groups_are_ordered_by_spark_in_the_same_order[*": ("[COPY_ON_WRITE-x,y-z-order]",),
    "test_read_filters.py::*": ("[COP-day-mdt", "[MER-hive-nomdt",
                                "test_filter_after_a_commit_keeps_the_frames_snapshot"),
    "test_metadata_table.py::test_every_action_is_applied_and_the_table_stays_small[*": ("[MERGE_ON_READ]",),
    "test_time_travel.py::test_every_instant_reads_as_its_snapshot[*": (),
    "test_schema_evolution.py::test_random_schema_evolution_matches_model[*": (),
    "test_v9_*.py::*": (),
    "test_hudi1x_writes.py::*": (),
    "test_unsupported_1x.py::*": (),
    "test_table_version*.py::*": (),
    "test_table_properties.py::*": (),
    "test_report.py::*": (),
    "test_streaming.py::test_stream_survives_kills_and_lands_every_batch_once[*": (),
    "test_storage_lock.py::test_two_processes_occ_on_s3a_lose_no_committed_write": (),
    "test_storage_lock.py::test_lease_of_a_killed_holder_lapses_on_the_store_clock": (),
    "test_sync_model.py::test_catalog_partitions_follow_the_table": (),
    "test_model.py::test_random_operations_match_model*": (
        "match_model[SIMPLE:distributed]", "match_model[RECORD_INDEX]"),
    "test_mor.py::test_mor_random_operations_match_model*": (
        "match_model[SIMPLE:distributed]", "match_model[RECORD_INDEX]"),
    "test_cdc_query.py::test_cdc_query_over_every_range_equals_the_model[*": ("[MERGE_ON_READ]",),
    "test_object_storage_model.py::test_random_operations_on_s3a_match_model[*": ("[MERGE_ON_READ-SIMPLE]",),
    "test_payloads_spark.py::test_merge_on_read_matches_the_model_before_and_after_compaction[*": (
        "[OverwriteWithLatestAvroPayload]", "[DefaultHoodieRecordPayload]", "[PartialUpdateAvroPayload]"),
}
_SPARK_FIXTURES = {"spark", "s3_spark"}


def pytest_collection_modifyitems(config, items):
    """Mark ``once`` the tests that start no Spark and those :data:`ONCE` names."""
    for item in items:
        name = item.nodeid.split("/")[-1]
        listed = any(fnmatch.fnmatchcase(name, pattern) and not any(k in name for k in keep)
                     for pattern, keep in ONCE.items())
        if listed or not _SPARK_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.once)


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import pyhudi

    session = pyhudi.spark_session("local[2]", spark__sql__shuffle__partitions="2")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def interop_dir(tmp_path_factory) -> Path:
    if not INTEROP.is_dir():
        pytest.skip(f"{INTEROP} is absent (a clone outside the workplace has no shared/interop)")
    return INTEROP


@pytest.fixture(scope="module")
def v9_table(tmp_path_factory) -> Path:
    """A table Apache Hudi 1.1.1 wrote with a metadata table (files, column stats, record index),
    vendored from apache/hudi-rs (tests/data/hudi1x/README.md); tests that change it copy it first."""
    dest = tmp_path_factory.mktemp("mdt")
    with zipfile.ZipFile(Path(__file__).parent / "data" / "hudi1x" / "cow__v9_txns_simple_meta.zip") as z:
        z.extractall(dest)
    return dest / "v9_txns_simple_meta"


def unzip_table(zip_path: Path, dest: Path) -> Path:
    """Unpack an interop zip and return the table folder inside it (skipping macOS litter)."""
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(dest)
    shutil.rmtree(dest / "__MACOSX", ignore_errors=True)
    tables = [p for p in dest.iterdir() if (p / ".hoodie").is_dir()]
    assert len(tables) == 1, f"expected one table in {zip_path}, found {tables}"
    return tables[0]


def hudi_rs_rows(path: str | Path, *, as_of: str | None = None, start: str | None = None,
                 end: str | None = None, read_optimized: bool = False,
                 storage_options: dict[str, str] | None = None) -> list[dict]:
    """The snapshot (as of an instant, or of base files only), or an incremental pull ``(start,
    end]``, as hudi-rs reads it; an ``s3a://`` table through hudi-rs's own S3 client (``s3://``,
    ``storage_options`` by its names)."""
    import hudi

    options = hudi.HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true") \
        if read_optimized else None
    if start is not None:
        options = hudi.HudiReadOptions().with_query_type(hudi.HudiQueryType.Incremental).with_start_timestamp(start)
        if end is not None:
            options = options.with_end_timestamp(end)
    elif as_of is not None:
        options = hudi.HudiReadOptions().with_as_of_timestamp(as_of)
    uri = str(path)
    uri = uri.replace("s3a://", "s3://", 1) if "://" in uri else str(Path(uri).resolve())
    batches = hudi.HudiTable(uri, options=storage_options).read(options)
    if not batches:
        return []
    return pa.Table.from_batches(batches).to_pylist()


def spark_jobs_of(spark, group: str, action) -> int:
    """How many Spark jobs ``action()`` started (counted in job group ``group``)."""
    spark.sparkContext.setJobGroup(group, group)
    try:
        action()
    finally:
        spark.sparkContext.setJobGroup(None, None)
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def snapshot(folder: Path) -> dict[str, str]:
    """Every file (with a hash of its bytes) and folder under ``folder``."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), folder) + "/"] = ""
        for f in files:
            full = os.path.join(root, f)
            out[os.path.relpath(full, folder)] = hashlib.sha1(Path(full).read_bytes()).hexdigest()
    return out


def pyhudi_rows(spark, path: str | Path, **kw) -> list[dict]:
    import pyhudi

    return [r.asDict(recursive=True) for r in pyhudi.read(spark, str(path), **kw).collect()]


def kill_writer_on_failure(monkeypatch) -> None:
    """Make a failing write behave as a killed process: no rollback, its heartbeat stopped and expired."""
    from pyhudi.transaction.heartbeat import heartbeat_path

    def died(txn):
        if txn.heartbeat is not None:
            txn.heartbeat.stop(delete=False)
            os.utime(txn.table.storage.full(heartbeat_path(txn.instant)), (0, 0))

    monkeypatch.setattr("pyhudi.spark.writer._abort_quietly", died)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """moto's S3 server on 127.0.0.1, started for this test session (tests/s3server.py)."""
    pytest.importorskip("moto.server")
    from s3server import S3Server

    server = S3Server(tmp_path_factory.mktemp("moto") / "requests.log")
    yield server
    server.stop()


_BUCKETS = iter(range(1, 1_000_000))


@pytest.fixture
def s3_spark(spark, s3_server):
    """The session SparkSession with the S3 server in its Hadoop configuration, as a user sets
    ``spark.hadoop.fs.s3a.*`` (Spark here has no hadoop-aws jar: pyhudi reads through pyarrow)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in s3_server.hadoop_conf.items():
        conf.set(key, value)
    return spark


@pytest.fixture
def s3_bucket(s3_server) -> str:
    """A fresh, empty bucket on the S3 server."""
    return s3_server.make_bucket(f"pyhudi-test-{next(_BUCKETS)}-{os.getpid()}")


@pytest.fixture(scope="session")
def hms_server(tmp_path_factory):
    """Hive 2.3's metastore from PySpark's jars on 127.0.0.1, started for this test session
    (tests/hms_server.py)."""
    if shutil.which("java") is None:
        if os.environ.get("CI"):
            pytest.fail("java is not on PATH: CI must run the Hive metastore tests (Java 17 runs the metastore)")
        pytest.skip("java is not on PATH: the Hive metastore tests need a JVM to run the metastore")
    from hms_server import HiveMetastoreServer

    server = HiveMetastoreServer(tmp_path_factory.mktemp("hms"))
    yield server
    server.stop()
