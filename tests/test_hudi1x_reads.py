"""Every table of version 8 and 9 that Apache Hudi wrote in hudi-rs's test data reads as hudi-rs
reads it (the oracle): snapshot, read-optimized, time travel, incremental pulls, filters.

The tables (``tests/data/hudi1x``, see its README) cover copy-on-write and merge-on-read, simple,
complex, non-partitioned and timestamp-based keys, tables with and without meta columns or a
metadata table (record index, secondary indexes, partition stats), updates, deletes, insert
overwrite, compaction, clustering and a rollback. The SQL that made each table sits next to its
zip; some final rows it states are asserted literally, independent of both readers.
"""

from __future__ import annotations

import datetime as dt
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyspark
import pytest
from conftest import hudi_rs_rows, pyhudi_rows, unzip_table

import pyhudi
from pyhudi.config.properties import TableConfig
from pyhudi.errors import HudiConfigError, HudiRetentionError, HudiUnsupportedError
from pyhudi.io.avro_schema import META_FIELDS
from pyhudi.keygen.spec import partition_values_in_paths

DATA = Path(__file__).parent / "data" / "hudi1x"
TABLES = sorted(p.stem for p in DATA.glob("*.zip") if "lance" not in p.stem)
MOR = [t for t in TABLES if "mor__" in t]
NO_META = {"cow__v8_simplekeygen_hivestyle_no_metafields"}
#: tables with compaction, clustering, insert overwrite, a rollback, timestamp keys, two versions
HISTORY = ["trips__mor__v8_trips_8i3u1d", "mor__v9_txns_simple_meta", "cow__v9_txns_simple_overwrite",
           "mor__v9_nonpartitioned_rollback", "cow__v8_nonpartitioned", "mor__v9_timebasedkeygen_nonhivestyle",
           "cow__v9_txns_complex_nometa"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """name -> the unzipped table (each unzipped once per module, on first use)."""
    unzipped: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in unzipped:
            unzipped[name] = unzip_table(DATA / f"{name}.zip", tmp_path_factory.mktemp(name))
        return unzipped[name]
    return get


def _canon(value: Any) -> Any:
    """A value both readers' rows compare by: structs and maps as sorted pairs (Spark gives dicts,
    pyarrow maps as lists of pairs), timestamps as naive UTC."""
    if isinstance(value, dict):
        return tuple(sorted((k, _canon(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(e, tuple) and len(e) == 2 for e in value):
            return tuple(sorted((_canon(k), _canon(v)) for k, v in value))
        return tuple(_canon(e) for e in value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def _rows(rows: list[dict], *, drop: tuple[str, ...] = ()) -> list[tuple]:
    return sorted((_canon({k: v for k, v in r.items() if k not in drop}) for r in rows), key=repr)


def _ours(spark, path: Path, name: str, **options: str) -> list[tuple]:
    """pyhudi's rows; hudi-rs leaves out the meta columns of a table that does not populate them."""
    return _rows(pyhudi_rows(spark, path, options=options or None), drop=META_FIELDS if name in NO_META else ())


def _writes(path: Path) -> list[tuple[str, str]]:
    """(requested, completion) time of every completed write, in completion order."""
    writes = pyhudi.HudiTable(str(path)).timeline.completed_writes()
    return sorted(((w.timestamp, w.completion_time or w.timestamp) for w in writes), key=lambda w: w[1])


# -- snapshot and read-optimized ----------------------------------------------------------------
@pytest.mark.parametrize("name", TABLES)
def test_snapshot_equals_hudi_rs(spark, table, name):
    path = table(name)
    ours, theirs = _ours(spark, path, name), _rows(hudi_rs_rows(path))
    assert ours == theirs
    if name in NO_META:  # the meta columns are there, null where Hudi did not populate them
        assert {r["_hoodie_record_key"] for r in pyhudi_rows(spark, path)} == {None}


@pytest.mark.parametrize("name", MOR)
def test_read_optimized_equals_hudi_rs(spark, table, name):
    path = table(name)
    ours = _ours(spark, path, name, **{"hoodie.datasource.query.type": "read_optimized"})
    assert ours == _rows(hudi_rs_rows(path, read_optimized=True))


@pytest.mark.skipif(int(pyspark.__version__.split(".")[0]) < 4,
                    reason="Spark's Python data source API arrived in PySpark 4.0")
def test_spark_data_source_reads_a_v9_mor_table(spark, table):
    path = table("mor__v9_txns_simple_meta")
    pyhudi.register(spark)
    snapshot = [r.asDict(recursive=True) for r in spark.read.format("hudi").load(str(path)).collect()]
    assert _rows(snapshot) == _rows(hudi_rs_rows(path))
    (begin, _), (end, _) = _writes(path)[2], _writes(path)[5]  # requested times: the range is of completions
    pull = spark.read.format("hudi").option("hoodie.datasource.query.type", "incremental") \
        .option("hoodie.datasource.read.begin.instanttime", begin) \
        .option("hoodie.datasource.read.end.instanttime", end).load(str(path))
    assert _rows([r.asDict(recursive=True) for r in pull.collect()]) == _rows(hudi_rs_rows(path, start=begin, end=end))


# -- time travel and incremental pulls ----------------------------------------------------------
@pytest.mark.parametrize("name", HISTORY)
def test_time_travel_to_every_write_equals_hudi_rs(spark, table, name):
    path = table(name)
    for requested, _ in _writes(path):
        ours = _ours(spark, path, name, **{"as.of.instant": requested})
        assert ours == _rows(hudi_rs_rows(path, as_of=requested)), requested


@pytest.mark.parametrize("name", HISTORY)
def test_incremental_pulls_equal_hudi_rs(spark, table, name):
    """Each write's own pull between consecutive completion times, then one over several writes,
    then one whose bounds are requested times (Hudi 1.x ranges on completion time)."""
    path = table(name)
    done = [c for _, c in _writes(path)]
    windows = [*zip(["000", *done], done), (done[0], done[-1])]
    if len(done) > 2:
        windows.append((_writes(path)[1][0], _writes(path)[-1][0]))
    for begin, end in windows:
        ours = _ours(spark, path, name, **{"hoodie.datasource.query.type": "incremental",
                                           "hoodie.datasource.read.begin.instanttime": begin,
                                           "hoodie.datasource.read.end.instanttime": end})
        assert ours == _rows(hudi_rs_rows(path, start=begin, end=end)), (begin, end)


def test_an_incremental_range_is_of_completion_times(spark, table):
    """A write belongs to ``(begin, end]`` by its completion time: a begin at its requested time
    still pulls it, a begin at its completion time does not."""
    path = table("cow__v8_nonpartitioned")
    (t1, c1), (t2, c2) = _writes(path)

    def pulled(begin: str, end: str | None = None) -> set[str]:
        opts = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": begin,
                **({"hoodie.datasource.read.end.instanttime": end} if end else {})}
        return {r["_hoodie_commit_time"] for r in pyhudi_rows(spark, path, options=opts)}

    assert pulled(t1) == {t1, t2} and pulled(c1) == {t2} and pulled("000", c1) == {t1}
    assert pulled("000", t2) == {t1}  # t2 had not completed by its own requested time
    assert pyhudi.HudiTable(str(path)).timeline.layout_version == 2
    from pyhudi.table.incremental import latest_offset

    assert latest_offset(pyhudi.HudiTable(str(path))) == c2  # a stream reads up to the last completion


def test_time_travel_reads_the_schema_as_of_the_instant(spark, table):
    """A Spark SQL UPDATE of a timestamp-keyed table rewrote the partition column ``ts_millis`` as
    a string: read now it is a string in every file (integers read as their digits), read as of the
    first commit it is the long the SQL inserted (as Hudi's time travel reads the schema of the
    instant; hudi-rs reads the latest schema)."""
    path = table("cow__v9_timebasedkeygen_epochmillis")
    first = _writes(path)[0][0]
    latest = {r["txn_id"]: r["ts_millis"] for r in pyhudi_rows(spark, path)}
    assert latest["TXN-002"] == "1705315500000" and latest["TXN-005"] == "1705485600000"
    then = {r["txn_id"]: r["ts_millis"] for r in pyhudi_rows(spark, path, options={"as.of.instant": first})}
    assert then == {"TXN-001": 1705311000000, "TXN-002": 1705315500000, "TXN-003": 1705367700000,
                    "TXN-004": 1705397400000}


# -- what the SQL says, independent of both readers ---------------------------------------------
TXNS = ["cow__v9_txns_simple_meta", "cow__v9_txns_simple_nometa", "cow__v9_txns_complex_meta",
        "cow__v9_txns_complex_nometa", "mor__v9_txns_simple_meta", "mor__v9_txns_simple_nometa",
        "mor__v9_txns_complex_meta", "mor__v9_txns_complex_nometa"]


@pytest.mark.parametrize("name", TXNS)
def test_txns_tables_hold_what_their_sql_leaves(spark, table, name):
    """INSERT 8, UPDATE TXN-001/005/007, DELETE TXN-002/005, INSERT OVERWRITE of eu with TXN-011/012,
    more inserts, compaction, clustering, TXN-017/018 last (``<name>.sql``)."""
    rows = {r["txn_id"]: r for r in pyhudi_rows(spark, table(name))}
    assert sorted(rows) == ["TXN-001", "TXN-003", "TXN-007", "TXN-008", "TXN-011", "TXN-012", "TXN-013",
                            "TXN-014", "TXN-015", "TXN-016", "TXN-017", "TXN-018"]
    assert rows["TXN-001"]["txn_type"] == "reversal" and rows["TXN-001"]["txn_ts"] == 1700100000001
    assert rows["TXN-007"]["fee_amount"] == Decimal("75.00")
    assert sorted(k for k, r in rows.items() if r["region"] == "eu") == ["TXN-011", "TXN-012", "TXN-018"]
    if "complex" in name:
        assert rows["TXN-001"]["_hoodie_record_key"] == f"txn_id:TXN-001,account_id:{rows['TXN-001']['account_id']}"


def test_tables_of_version_8_hold_what_their_sql_leaves(spark, table):
    by_id = {r["id"]: r for r in pyhudi_rows(spark, table("cow__v8_nonpartitioned"))}
    assert {i: (r["name"], r["isActive"]) for i, r in by_id.items()} == {
        1: ("Alice", False), 2: ("Bob", False), 3: ("Carol", True), 4: ("Diana", True)}
    assert by_id[1]["decimalField"] == Decimal("12345.67890") and by_id[1]["dateField"] == dt.date(2023, 4, 1)
    assert pyhudi.read(spark, str(table("cow__v8_empty"))).count() == 0


def test_a_rolled_back_write_is_not_read(spark, table):
    """The first insert (TXN-001..003) was rolled back after the second (TXN-002 again) was written;
    a third insert followed (``mor__v9_nonpartitioned_rollback.sql``)."""
    path = table("mor__v9_nonpartitioned_rollback")
    timeline = pyhudi.HudiTable(str(path)).timeline
    assert len(timeline.completed(["rollback"])) == 1 and len(timeline.completed_writes()) == 2
    assert sorted(r["txn_id"] for r in pyhudi_rows(spark, path)) == ["TXN-001", "TXN-002", "TXN-002", "TXN-003"]


# -- filters: partition pruning and data skipping ------------------------------------------------
@pytest.mark.parametrize("name,where,keep", [
    ("cow__v9_timebasedkeygen_epochmillis", "ts_millis = '1705311000000'", lambda r: r["ts_millis"] == "1705311000000"),
    ("mor__v9_timebasedkeygen_nonhivestyle", "ts_str >= '2024-01-16'", lambda r: r["ts_str"] >= "2024-01-16"),
    ("cow__v9_txns_simple_meta", "region = 'us'", lambda r: r["region"] == "us"),
    ("mor__v9_txns_simple_meta", "amount > 1000", lambda r: r["amount"] > 1000),
    ("mor__v9_txns_complex_meta", "txn_id = 'TXN-015'", lambda r: r["txn_id"] == "TXN-015"),
    ("trips__mor__v8_trips_8i3u1d", "city = 'chennai'", lambda r: r["city"] == "chennai"),
])
def test_filtered_reads_keep_exactly_the_matching_rows(spark, table, name, where, keep):
    """Partition paths of a timestamp key generator hold formatted times, not the column's values,
    so they must not prune; metadata-table column statistics prune files."""
    path = table(name)
    expected = _rows([r for r in pyhudi_rows(spark, path) if keep(r)])
    assert expected and _rows(pyhudi_rows(spark, path, filters=where)) == expected


# -- file slicing by completion time -------------------------------------------------------------
def test_a_log_file_extends_the_slice_its_delta_commit_completed_in(spark, table, tmp_path):
    """Version 8 names a log file after the delta commit that wrote it, and the log extends the
    newest slice whose base instant is not after that commit's *completion*: a delta commit
    requested before a compaction but completed after it belongs to the compacted slice."""
    path = tmp_path / "late"
    shutil.copytree(table("trips__mor__v8_trips_8i3u1d"), path)
    timeline = path / ".hoodie" / "timeline"
    (timeline / "20251220210128625_20251220210129197.deltacommit").rename(
        timeline / "20251220210128625_20251220210129500.deltacommit")  # after compaction 20251220210129235
    import hudi

    theirs = {(s.partition_path, s.file_id): (s.creation_instant_time, sorted(s.log_file_names))
              for s in hudi.HudiTable(str(path)).get_file_slices()}
    ours = {(s.partition_path, s.file_id): (s.base_instant, sorted(lf.name for lf in s.log_files))
            for s in pyhudi.HudiTable(str(path)).file_system_view().latest_slices()}
    assert ours == theirs
    assert any("20251220210128625.log" in name for _, logs in ours.values() for name in logs)
    assert _ours(spark, path, "late") == _rows(hudi_rs_rows(path))


# -- what pyhudi refuses -------------------------------------------------------------------------
def test_a_lance_table_is_refused_by_name(spark, tmp_path):
    path = unzip_table(DATA / "cow__v9_lance_nonpartitioned.zip", tmp_path)
    with pytest.raises(HudiUnsupportedError, match="LANCE"):
        pyhudi.read(spark, str(path))


def test_an_incremental_pull_of_a_table_without_meta_columns_is_refused(spark, table):
    with pytest.raises(HudiConfigError, match="hoodie.populate.meta.fields"):
        pyhudi_rows(spark, table("cow__v8_simplekeygen_hivestyle_no_metafields"),
                    options={"hoodie.datasource.query.type": "incremental",
                             "hoodie.datasource.read.begin.instanttime": "000"})


def _config(**props: str) -> TableConfig:
    return TableConfig({"hoodie.table.name": "t", "hoodie.table.version": "9", **props})


def test_merge_settings_of_hudi_1x_tables():
    """COMMIT_TIME_ORDERING ignores an ordering field (the later write wins); partial updates and
    merge properties of no implemented payload are refused, not merged by a guess."""
    assert _config(**{"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING",
                      "hoodie.table.ordering.fields": "ts"}).merge_ordering_field is None
    assert _config(**{"hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
                      "hoodie.table.ordering.fields": "ts"}).merge_ordering_field == "ts"
    assert _config(**{"hoodie.table.version": "6", "hoodie.table.precombine.field": "ts"}).merge_ordering_field == "ts"
    # several ordering fields are compared left to right (reads; writes refuse them: tests/test_payloads.py)
    assert _config(**{"hoodie.table.ordering.fields": "a,b"}).merge_ordering_field == "a,b"
    with pytest.raises(HudiUnsupportedError, match="hoodie.table.partial.update.mode=IGNORE_DEFAULTS"):
        _ = _config(**{"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}).payload_class
    with pytest.raises(HudiUnsupportedError, match="hoodie.record.merge.property.hoodie.payload.delete.field"):
        _ = _config(**{"hoodie.record.merge.property.hoodie.payload.delete.field": "op"}).payload_class


def test_partition_paths_of_timestamp_and_custom_keys_hold_no_values():
    def values_in_paths(**props: str) -> bool:
        return partition_values_in_paths(_config(**props).props)

    assert not values_in_paths(**{"hoodie.table.keygenerator.type": "TIMESTAMP"})
    assert not values_in_paths(**{"hoodie.table.keygenerator.type": "CUSTOM",
                                  "hoodie.table.partition.fields": "region:SIMPLE,ts:TIMESTAMP"})
    assert values_in_paths(**{"hoodie.table.keygenerator.type": "SIMPLE", "hoodie.table.partition.fields": "region"})


def test_queries_before_an_lsm_archived_timeline(spark, table, tmp_path):
    """Archival of version 8+ moves instants into the LSM timeline (``.hoodie/timeline/history``):
    the latest snapshot still reads (older files are committed), a time travel before the active
    timeline reads as of that instant (the archived cleans say what is gone), and a pull reaching
    there is refused, since it ranges on completion times pyhudi takes from the active timeline."""
    path = tmp_path / "archived"
    shutil.copytree(table("cow__v8_nonpartitioned"), path)
    (t1, _), (t2, c2) = _writes(path)
    as_of_t1 = sorted(r["id"] for r in hudi_rs_rows(path, as_of=t1))
    timeline = path / ".hoodie" / "timeline"
    for f in timeline.glob(f"{t1}*"):
        f.unlink()
    (timeline / "history" / "manifest_1").write_text('{"files" : [ ]}')
    (timeline / "history" / "_version_").write_text("1")
    assert len(pyhudi_rows(spark, path)) == 4
    assert sorted(r["id"] for r in pyhudi_rows(spark, path, options={"as.of.instant": t1})) == as_of_t1
    assert len(pyhudi_rows(spark, path, options={"as.of.instant": t2})) == 4
    with pytest.raises(HudiRetentionError, match="archived"):
        pyhudi_rows(spark, path, options={"hoodie.datasource.query.type": "incremental",
                                          "hoodie.datasource.read.begin.instanttime": t1})
    pulled = pyhudi_rows(spark, path, options={"hoodie.datasource.query.type": "incremental",
                                               "hoodie.datasource.read.begin.instanttime": "000"})
    assert len(pulled) == 4  # from the beginning: the snapshot as of the last completion
