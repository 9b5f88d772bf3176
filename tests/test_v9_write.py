"""Writes that choose or change a table's version, and the tables they create, as Hudi 1.x's writers.

* ``hoodie.write.table.version`` on an existing table (docs/hudi-1x-format.md 6.1, 6.6): unset keeps
  the table's version; above it upgrades first (``hoodie.write.auto.upgrade``, default true; false
  keeps the table's version and logs it); below it downgrades first. Failed writes are rolled back
  and a merge-on-read table compacted before its timeline changes layout, as Hudi's
  ``rollbackFailedWritesAndCompact``; what still blocks the change refuses the write untouched.
* A new table's ``hoodie.properties`` at 8 and 9 has exactly the keys of the tables Hudi 1.0/1.1
  wrote (tests/data/hudi1x), for every key generator; the merge mode is inferred as Hudi infers it.
* ``hoodie.table.ordering.fields`` names the ordering field; options contradicting the table's merge
  mode or ordering field are refused (Hudi's ``validateTableConfig``).

Every write is checked against a plain model of the rows, read by hudi-rs.
"""

from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path

import pytest
from conftest import hudi_rs_rows
from pyspark.sql import types as T

import pyhudi
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.errors import HudiTableMismatchError, HudiUnsupportedError
from pyhudi.keygen.spec import resolve_keygen
from pyhudi.spark.write_options import creation_merge_mode, new_table_properties

DATA = Path(__file__).parent / "data" / "hudi1x"
SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("p", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("v", T.LongType())])
BASE = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.metadata.enable": "false"}
FIRST = [("a", "x", 5, 1), ("b", "y", 5, 2), ("c", "x", 5, 3)]
#: an upsert: a newer value for a, an older one for b (event time keeps b's stored row), a new d
SECOND = [("a", "x", 9, 10), ("b", "y", 1, 20), ("d", "y", 1, 4)]


def _model(*batches: list[tuple], event_time: bool | tuple[bool, ...] = True) -> list[tuple]:
    """The rows after the batches, each merged by event time (the larger ``ts`` wins) or commit time
    (the later write wins): ``event_time`` for all, or one flag per batch."""
    rows: dict[str, tuple] = {}
    flags = event_time if isinstance(event_time, tuple) else (event_time,) * len(batches)
    for batch, by_event in zip(batches, flags, strict=True):
        for r in batch:
            old = rows.get(r[0])
            if old is None or not by_event or r[2] >= old[2]:
                rows[r[0]] = r
    return sorted(rows.values())


def _read(path: Path) -> list[tuple]:
    return sorted((r["id"], r["p"], r["ts"], r["v"]) for r in hudi_rs_rows(path))


def _write(spark, path: Path, rows: list[tuple], **opts: str | None) -> None:
    options = {**BASE, **opts}
    pyhudi.write(spark.createDataFrame(rows, SCHEMA), str(path), {k: v for k, v in options.items() if v is not None})


def _version(path: Path) -> int:
    return pyhudi.HudiTable(str(path)).config.version


def _files(path: Path) -> dict[str, int]:
    return {os.path.relpath(os.path.join(d, n), path): os.path.getsize(os.path.join(d, n))
            for d, _, names in os.walk(path) for n in names}


# ---------------------------------------------------------------------------------------------
# hoodie.write.table.version on an existing table
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [8, 9])
def test_an_unset_write_version_keeps_the_tables_version(spark, tmp_path, version):
    _write(spark, tmp_path, FIRST, **{"hoodie.write.table.version": str(version)})
    _write(spark, tmp_path, SECOND)  # the option's default (6) must not move the table
    assert _version(tmp_path) == version
    assert _read(tmp_path) == _model(FIRST, SECOND)


@pytest.mark.parametrize("table_type, start, to", [("COPY_ON_WRITE", 6, 9), ("COPY_ON_WRITE", 8, 9),
                                                   ("MERGE_ON_READ", 6, 8)])
def test_a_higher_write_version_upgrades_the_table_first(spark, tmp_path, table_type, start, to):
    opts = {"hoodie.datasource.write.table.type": table_type}
    _write(spark, tmp_path, FIRST, **opts, **{"hoodie.write.table.version": str(start)})
    _write(spark, tmp_path, SECOND, **opts)  # merge-on-read: a log file the upgrade must compact first
    if table_type == "MERGE_ON_READ":
        assert any(".log." in f for f in _files(tmp_path))
    third = [("c", "x", 7, 30)]
    _write(spark, tmp_path, third, **opts, **{"hoodie.write.table.version": str(to)})
    table = pyhudi.HudiTable(str(tmp_path))
    assert table.config.version == to and table.config.layout_version == 2
    assert table.properties["hoodie.table.initial.version"] == str(start)
    assert table.properties[P.MERGE_MODE] == "EVENT_TIME_ORDERING"
    if to == 9:
        assert table.properties["hoodie.table.ordering.fields"] == "ts" and P.PRECOMBINE_FIELD not in table.properties
    assert (tmp_path / ".hoodie" / "timeline").is_dir()
    actions = [i.action for i in table.timeline.completed()]
    if table_type == "MERGE_ON_READ":
        assert "commit" in actions, "the merge-on-read table is compacted before its timeline changes layout"
    # pyhudi's version 6 tables merge by commit time (OverwriteWithLatestAvroPayload); Hudi's upgrade
    # gives them event-time ordering (docs/hudi-1x-format.md 6.5)
    assert _read(tmp_path) == _model(FIRST, SECOND, third, event_time=(True, start >= 8, True))


def test_auto_upgrade_false_writes_the_tables_own_version_and_says_so(spark, tmp_path, caplog):
    _write(spark, tmp_path, FIRST)
    with caplog.at_level(logging.WARNING, logger="pyhudi"):
        _write(spark, tmp_path, SECOND, **{"hoodie.write.table.version": "9", "hoodie.write.auto.upgrade": "false"})
    assert _version(tmp_path) == 6 and not (tmp_path / ".hoodie" / "timeline").exists()
    assert "hoodie.write.auto.upgrade=false" in caplog.text and "version 6" in caplog.text
    assert _read(tmp_path) == _model(FIRST, SECOND, event_time=False)  # version 6: commit time, as before


@pytest.mark.parametrize("table_type, start, to", [("COPY_ON_WRITE", 9, 6), ("MERGE_ON_READ", 9, 8)])
def test_a_lower_write_version_downgrades_the_table_first_whatever_auto_upgrade_says(
        spark, tmp_path, table_type, start, to):
    opts = {"hoodie.datasource.write.table.type": table_type}
    _write(spark, tmp_path, FIRST, **opts, **{"hoodie.write.table.version": str(start)})
    _write(spark, tmp_path, SECOND, **opts, **{"hoodie.write.table.version": str(to),
                                               "hoodie.write.auto.upgrade": "false"})
    table = pyhudi.HudiTable(str(tmp_path))
    assert table.config.version == to
    if to == 6:
        assert table.config.layout_version == 1 and not any((tmp_path / ".hoodie" / "timeline").glob("*.*"))
        assert P.PRECOMBINE_FIELD in table.properties and "hoodie.table.ordering.fields" not in table.properties
    assert _read(tmp_path) == _model(FIRST, SECOND)


def test_a_failed_write_is_rolled_back_before_the_upgrade(spark, tmp_path, caplog):
    _write(spark, tmp_path, FIRST)
    # a writer that died after requesting its instant: pending, no heartbeat
    (tmp_path / ".hoodie" / "20200101000000000.commit.requested").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="pyhudi"):
        _write(spark, tmp_path, SECOND, **{"hoodie.write.table.version": "9"})
    assert _version(tmp_path) == 9 and "before changing the table version" in caplog.text
    assert _read(tmp_path) == _model(FIRST, SECOND)  # event time from the upgrade on


def test_what_blocks_the_change_refuses_the_write_with_nothing_changed(spark, tmp_path):
    _write(spark, tmp_path, FIRST)
    defs = tmp_path / ".hoodie" / ".index_defs"
    defs.mkdir()
    # a secondary index a user created with Hudi (pyhudi's own column_stats / record_index definitions
    # go with the metadata table: tests/test_payload_versions.py)
    (defs / "index.json").write_text('{"indexDefinitions": {"secondary_index_idx_a": '
                                      '{"indexName": "secondary_index_idx_a", "indexType": "secondary_index"}}}')
    before = _files(tmp_path)
    with pytest.raises(HudiUnsupportedError, match=r"index definitions.*secondary_index_idx_a.*nothing was changed"):
        _write(spark, tmp_path, SECOND, **{"hoodie.write.table.version": "9"})
    assert _files(tmp_path) == before and _version(tmp_path) == 6


# ---------------------------------------------------------------------------------------------
# The properties of a new table against Hudi 1.0 / 1.1's own
# ---------------------------------------------------------------------------------------------
#: keys a Hudi table records for what it has beyond a plain table (metadata table, indexes)
_TABLE_SPECIFIC = {"hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight",
                   "hoodie.table.index.defs.path"}
#: keys the Spark data source writer records and Spark SQL's CREATE TABLE (which made the samples) does not
_DATASOURCE_ONLY = {"hoodie.table.base.file.format", "hoodie.table.timeline.timezone"}
_TS = {"hoodie.keygen.timebased.timestamp.type": "DATE_STRING",
       "hoodie.keygen.timebased.input.dateformat": "yyyy-MM-dd'T'HH:mm:ss.SSSZ",
       "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd/HH"}
#: sample table -> the options a pyhudi write creating its like is given
SAMPLES = {
    "cow__v8_simplekeygen_nonhivestyle": {"hoodie.datasource.write.partitionpath.field": "byteField",
                                          "hoodie.datasource.write.precombine.field": "longField"},
    "cow__v8_complexkeygen_hivestyle": {"hoodie.datasource.write.recordkey.field": "id,name",
                                        "hoodie.datasource.write.partitionpath.field": "byteField,shortField",
                                        "hoodie.datasource.write.precombine.field": "longField"},
    "cow__v8_nonpartitioned": {"hoodie.datasource.write.partitionpath.field": "",
                               "hoodie.datasource.write.precombine.field": "longField"},
    "cow__v8_empty": {"hoodie.datasource.write.partitionpath.field": "",
                      "hoodie.datasource.write.precombine.field": None},  # no ordering field
    "cow__v9_txns_simple_nometa": {"hoodie.datasource.write.precombine.field": None,
                                   "hoodie.table.ordering.fields": "txn_ts"},
    "mor__v9_txns_simple_nometa": {"hoodie.datasource.write.table.type": "MERGE_ON_READ"},
    "cow__v9_txns_complex_nometa": {"hoodie.datasource.write.recordkey.field": "txn_id,account_id"},
    "mor__v9_txns_nonpart_nometa": {"hoodie.datasource.write.table.type": "MERGE_ON_READ",
                                    "hoodie.datasource.write.partitionpath.field": ""},
    "cow__v9_timebasedkeygen_nonhivestyle": {"hoodie.datasource.write.partitionpath.field": "ts_str",
                                             "hoodie.datasource.write.keygenerator.type": "TIMESTAMP", **_TS},
    "mor__v9_timebasedkeygen_nonhivestyle": {"hoodie.datasource.write.partitionpath.field": "ts_str",
                                             "hoodie.datasource.write.table.type": "MERGE_ON_READ",
                                             "hoodie.datasource.write.keygenerator.type": "TIMESTAMP", **_TS},
}


def sample_properties(name: str) -> dict[str, str]:
    """The hoodie.properties of the sample table ``name``, read from its zip."""
    with zipfile.ZipFile(DATA / f"{name}.zip") as z:
        member = next(n for n in z.namelist() if n.endswith(".hoodie/hoodie.properties") and "metadata" not in n
                      and not n.startswith("__MACOSX"))
        return P.parse_properties(z.read(member).decode("utf-8"))


def created_properties(version: int, **opts: str | None) -> dict[str, str]:
    """The hoodie.properties a pyhudi write with ``opts`` creates a table with (no Spark needed)."""
    options = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "txn_id",
               "hoodie.datasource.write.partitionpath.field": "region", "hoodie.datasource.write.precombine.field":
               "txn_ts", "hoodie.write.table.version": str(version), "hoodie.database.name": "default", **opts}
    cfg = HudiConfig.of({k: v for k, v in options.items() if v is not None})
    return new_table_properties(cfg, resolve_keygen(cfg), '{"type":"record","name":"t","fields":[]}')


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_new_table_has_the_keys_and_values_hudi_1x_writes(name):
    theirs = sample_properties(name)
    version = int(theirs[P.VERSION])
    mine = created_properties(version, **SAMPLES[name])
    assert (set(mine) | {P.CHECKSUM}) - _DATASOURCE_ONLY == set(theirs) - _TABLE_SPECIFIC, name
    same = [P.VERSION, P.LAYOUT_VERSION, "hoodie.table.initial.version", "hoodie.timeline.path",
            "hoodie.timeline.history.path", P.ARCHIVE_FOLDER, P.TYPE, P.KEYGEN_TYPE, P.MERGE_MODE,
            P.PAYLOAD_CLASS, "hoodie.record.merge.strategy.id", "hoodie.table.format", P.DROP_PARTITION_COLUMNS,
            P.URL_ENCODE, *_TS]
    for key in same:
        assert mine.get(key) == theirs.get(key), key
    assert bool(mine.get(P.PRECOMBINE_FIELD)) == bool(theirs.get(P.PRECOMBINE_FIELD))
    assert bool(mine.get("hoodie.table.ordering.fields")) == bool(theirs.get("hoodie.table.ordering.fields"))


@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize("opts, mode", [
    ({}, "EVENT_TIME_ORDERING"),  # an ordering field and nothing else
    ({"hoodie.datasource.write.precombine.field": None}, "COMMIT_TIME_ORDERING"),  # no ordering field
    ({"hoodie.write.record.merge.mode": "COMMIT_TIME_ORDERING"}, "COMMIT_TIME_ORDERING"),
    ({"hoodie.record.merge.mode": "EVENT_TIME_ORDERING", "hoodie.datasource.write.precombine.field": None},
     "EVENT_TIME_ORDERING"),
    ({"hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"},
     "COMMIT_TIME_ORDERING"),
    ({"hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
      "hoodie.datasource.write.precombine.field": None}, "EVENT_TIME_ORDERING"),
])
def test_the_merge_mode_of_a_new_table_is_inferred_as_hudi_1x_does(version, opts, mode):
    options = {**BASE, "hoodie.write.table.version": str(version), **opts}
    cfg = HudiConfig.of({k: v for k, v in options.items() if v is not None})
    assert creation_merge_mode(cfg) == mode
    props = new_table_properties(cfg, resolve_keygen(cfg), "{}")
    assert props[P.MERGE_MODE] == mode
    ordering = "ts" if options["hoodie.datasource.write.precombine.field"] else None
    if version == 8:
        payload = "DefaultHoodieRecordPayload" if mode == "EVENT_TIME_ORDERING" else "OverwriteWithLatestAvroPayload"
        assert props[P.PAYLOAD_CLASS].endswith(payload) and "hoodie.record.merge.strategy.id" in props
        assert props.get(P.PRECOMBINE_FIELD) == ordering
    else:
        assert P.PAYLOAD_CLASS not in props and "hoodie.record.merge.strategy.id" not in props
        assert props.get("hoodie.table.ordering.fields") == ordering


@pytest.mark.parametrize("version", [8, 9])
def test_merge_mode_and_ordering_field_of_a_new_table_decide_its_upserts(spark, tmp_path, version):
    """Commit-time ordering named by the mode: the later write wins although its ordering value is
    smaller; the table created with hoodie.table.ordering.fields records the field."""
    _write(spark, tmp_path, FIRST, **{"hoodie.write.table.version": str(version),
                                      "hoodie.write.record.merge.mode": "COMMIT_TIME_ORDERING",
                                      "hoodie.datasource.write.precombine.field": None,
                                      "hoodie.table.ordering.fields": "ts"})
    props = pyhudi.HudiTable(str(tmp_path)).properties
    assert props[P.MERGE_MODE] == "COMMIT_TIME_ORDERING"
    assert props.get("hoodie.table.ordering.fields" if version == 9 else P.PRECOMBINE_FIELD) == "ts"
    _write(spark, tmp_path, SECOND, **{"hoodie.datasource.write.precombine.field": None})
    assert _read(tmp_path) == _model(FIRST, SECOND, event_time=False)


@pytest.mark.parametrize("version", [8, 9])
def test_the_ordering_fields_option_orders_an_event_time_table(spark, tmp_path, version):
    opts = {"hoodie.write.table.version": str(version), "hoodie.datasource.write.precombine.field": None,
            "hoodie.table.ordering.fields": "ts"}
    _write(spark, tmp_path, FIRST, **opts)
    assert pyhudi.HudiTable(str(tmp_path)).properties[P.MERGE_MODE] == "EVENT_TIME_ORDERING"
    _write(spark, tmp_path, SECOND, **opts)
    assert _read(tmp_path) == _model(FIRST, SECOND)


@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize("opts, named", [
    ({"hoodie.write.record.merge.mode": "COMMIT_TIME_ORDERING"}, "hoodie.write.record.merge.mode"),
    ({"hoodie.table.ordering.fields": "v"}, "hoodie.datasource.write.precombine.field"),
    ({"hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"},
     "hoodie.datasource.write.payload.class"),
])
def test_options_contradicting_the_tables_merge_config_are_refused(spark, tmp_path, version, opts, named):
    _write(spark, tmp_path, FIRST, **{"hoodie.write.table.version": str(version)})
    before = _files(tmp_path)
    with pytest.raises(HudiTableMismatchError, match=named):
        _write(spark, tmp_path, SECOND, **{"hoodie.datasource.write.precombine.field": None, **opts})
    assert _files(tmp_path) == before
