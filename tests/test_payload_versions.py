"""The six payloads Hudi 1.1 deprecates (RFC-97) on tables of versions 8 and 9, written by pyhudi
as Apache Hudi writes them, and a version change of a table whose metadata table pyhudi keeps.

``hoodie.properties`` (each key checked against the Hudi class that writes it):

* version 8, created: ``HoodieTableMetaClient.TableBuilder.build`` stores the merge trio of
  ``HoodieTableConfig.inferMergingConfigsForPreV9Table``: a payload of its own gives the CUSTOM mode
  (``inferRecordMergeModeFromPayloadClass``), the payload class, and the payload-based strategy
  ``00000000-...`` (``HoodieRecordMerger.getRecordMergeStrategyId``).
* 6 -> 8: ``SevenToEightUpgradeHandler.upgradeMergeMode`` (``isCustomPayloadClass``: the payload
  stays, CUSTOM, ``PAYLOAD_BASED_MERGE_STRATEGY_UUID``).
* 8 -> 9 and version 9 created (``HoodieTableConfig.inferMergingConfigsForV9TableCreation``, which
  "fits the same behavior of upgrade from 8 to 9"): ``EightToNineUpgradeHandler`` —
  ``reconcileMergeModeConfig`` (EventTime, MySqlDebezium, PartialUpdate, PostgresDebezium:
  EVENT_TIME_ORDERING + ``eeb8d96f-...``; AWSDms, OverwriteNonDefaults: COMMIT_TIME_ORDERING +
  ``ce9acb64-...``; a table not CUSTOM before loses its strategy id), ``reconcilePartialUpdateModeConfig``
  (OverwriteNonDefaults, PartialUpdate: IGNORE_DEFAULTS; PostgresDebezium: FILL_UNAVAILABLE),
  ``reconcileMergePropertiesConfig`` (``hoodie.record.merge.property.`` + AWSDms Op/D, Debezium
  ``_change_operation_type``/d, Postgres' unavailable value ``__debezium_unavailable_value``),
  ``reconcilePayloadClassConfig`` (``hoodie.table.legacy.payload.class``), ``reconcileOrderingFieldsConfig``
  (MySQL ``_event_bin_file,_event_pos``, Postgres ``_event_lsn``).
* 9 -> 8: ``NineToEightDowngradeHandler.reconcileMergeConfigs`` (payload class back, CUSTOM +
  payload-based strategy, merge properties removed) and ``reconcileOrderingFieldsConfig`` (MySQL:
  ``_event_seq``); 8 -> 6: ``EightToSevenDowngradeHandler`` (merge mode and strategy removed).

EventTimeAvroPayload is refused at version 8: Hudi 1.0 records it as EVENT_TIME_ORDERING (whose
merges are DefaultHoodieRecordPayload's) and the 6 -> 8 upgrade replaces it. MySqlDebeziumAvroPayload
is refused at version 9, ordered there by two fields (binlog file and position), with which pyhudi
does not write (it reads such tables). A PostgresDebeziumAvroPayload table of version 9 orders by
``_event_lsn``, so its writers name that field (Hudi rejects a writer whose ordering field differs).

The rows: each payload's table written at 6, created at 9 (merge-on-read, the second write in log
files), created at 8 and moved 8 -> 9 -> 6, reads the rows of tests/test_payloads_spark.py's model
(Hudi's ``preCombine`` / ``combineAndGetUpdateValue``, cited there) through pyhudi and hudi-rs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import hudi_rs_rows
from pyspark.sql import types as T
from test_payloads import SHORT
from test_payloads_spark import FIELDS, FIRST, SCHEMA, SECOND

import pyhudi
from pyhudi.config.table import (
    AWS_DMS_PAYLOAD,
    EVENT_TIME_PAYLOAD,
    MYSQL_DEBEZIUM_PAYLOAD,
    NON_DEFAULTS_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    POSTGRES_DEBEZIUM_PAYLOAD,
)
from pyhudi.errors import HudiUnsupportedError
from pyhudi.services.table_version import creation_properties, property_changes

SIX = [NON_DEFAULTS_PAYLOAD, PARTIAL_UPDATE_PAYLOAD, EVENT_TIME_PAYLOAD, AWS_DMS_PAYLOAD, MYSQL_DEBEZIUM_PAYLOAD,
       POSTGRES_DEBEZIUM_PAYLOAD]
EVENT, COMMIT = "EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"
EVENT_ID, COMMIT_ID, PAYLOAD_ID = ("eeb8d96f-b1e4-49fd-bbf8-28ac514178e5", "ce9acb64-bde0-424c-9b91-f6ebba25356d",
                                   "00000000-0000-0000-0000-000000000000")
MP = "hoodie.record.merge.property."
DEBEZIUM_DELETE = {MP + "hoodie.payload.delete.field": "_change_operation_type",
                   MP + "hoodie.payload.delete.marker": "d"}
#: what EightToNineUpgradeHandler records for each payload (see the module docstring)
V9 = {
    NON_DEFAULTS_PAYLOAD: {"hoodie.record.merge.mode": COMMIT, "hoodie.record.merge.strategy.id": COMMIT_ID,
                           "hoodie.table.partial.update.mode": "IGNORE_DEFAULTS", "hoodie.table.ordering.fields": "ts"},
    PARTIAL_UPDATE_PAYLOAD: {"hoodie.record.merge.mode": EVENT, "hoodie.record.merge.strategy.id": EVENT_ID,
                             "hoodie.table.partial.update.mode": "IGNORE_DEFAULTS",
                             "hoodie.table.ordering.fields": "ts"},
    EVENT_TIME_PAYLOAD: {"hoodie.record.merge.mode": EVENT, "hoodie.table.ordering.fields": "ts"},
    AWS_DMS_PAYLOAD: {"hoodie.record.merge.mode": COMMIT, "hoodie.record.merge.strategy.id": COMMIT_ID,
                      MP + "hoodie.payload.delete.field": "Op", MP + "hoodie.payload.delete.marker": "D",
                      "hoodie.table.ordering.fields": "ts"},
    MYSQL_DEBEZIUM_PAYLOAD: {"hoodie.record.merge.mode": EVENT, "hoodie.record.merge.strategy.id": EVENT_ID,
                             **DEBEZIUM_DELETE, "hoodie.table.ordering.fields": "_event_bin_file,_event_pos"},
    POSTGRES_DEBEZIUM_PAYLOAD: {"hoodie.record.merge.mode": EVENT, "hoodie.record.merge.strategy.id": EVENT_ID,
                                "hoodie.table.partial.update.mode": "FILL_UNAVAILABLE",
                                MP + "hoodie.write.partial.update.unavailable.value": "__debezium_unavailable_value",
                                **DEBEZIUM_DELETE, "hoodie.table.ordering.fields": "_event_lsn"},
}
MERGE_KEYS = ("hoodie.record.merge.mode", "hoodie.record.merge.strategy.id", "hoodie.compaction.payload.class",
              "hoodie.table.legacy.payload.class", "hoodie.table.partial.update.mode", "hoodie.table.precombine.field",
              "hoodie.table.ordering.fields", "hoodie.compaction.record.merger.strategy")


def _merge_props(props: dict) -> dict:
    return {k: v for k, v in props.items() if k in MERGE_KEYS or k.startswith(MP)}


def _v6(payload: str) -> dict:
    return {"hoodie.table.name": "t", "hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "6",
            "hoodie.compaction.payload.class": payload, "hoodie.table.precombine.field": "ts",
            "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator"}


def _apply(props: dict, changes: dict) -> dict:
    out = dict(props)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


@pytest.mark.parametrize("payload", SIX, ids=SHORT.get)
def test_properties_of_each_payload_at_8_and_9_are_hudis(payload):
    v6 = _v6(payload)
    v9 = {**V9[payload], "hoodie.table.legacy.payload.class": payload}
    if payload == MYSQL_DEBEZIUM_PAYLOAD:
        with pytest.raises(HudiUnsupportedError, match="MySqlDebeziumAvroPayload at table version 9.*_event_bin_file"):
            creation_properties(v6, 9, merge_mode=None)
    else:
        assert _merge_props(creation_properties(v6, 9, merge_mode=None)) == v9
    if payload == EVENT_TIME_PAYLOAD:
        for make in (lambda: creation_properties(v6, 8, merge_mode=None), lambda: property_changes(v6, 6, 8),
                     lambda: property_changes(v6, 6, 9)):
            with pytest.raises(HudiUnsupportedError, match="EventTimeAvroPayload cannot be at table version 8"):
                make()
        at9 = creation_properties(v6, 9, merge_mode=None)
        with pytest.raises(HudiUnsupportedError, match="EventTimeAvroPayload"):
            property_changes(at9, 9, 8)
        # 9 -> 6 in one change passes 8 without stopping there: the payload comes back
        assert _merge_props(_apply(at9, property_changes(at9, 9, 6))) == {
            "hoodie.compaction.payload.class": payload, "hoodie.table.precombine.field": "ts"}
        return
    v8 = {"hoodie.record.merge.mode": "CUSTOM", "hoodie.record.merge.strategy.id": PAYLOAD_ID,
          "hoodie.compaction.payload.class": payload, "hoodie.table.precombine.field": "ts"}
    created8 = creation_properties(v6, 8, merge_mode=None)
    assert _merge_props(created8) == v8
    upgraded8 = _apply(v6, property_changes(v6, 6, 8))  # (pyhudi also writes the strategy's version-6 name)
    assert _merge_props(upgraded8) == {**v8, "hoodie.compaction.record.merger.strategy": PAYLOAD_ID}
    for start in (created8, upgraded8):
        if payload == MYSQL_DEBEZIUM_PAYLOAD:
            with pytest.raises(HudiUnsupportedError, match="MySqlDebeziumAvroPayload at table version 9"):
                property_changes(start, 8, 9)
            at9 = {**{k: v for k, v in start.items() if k not in MERGE_KEYS}, **v9}  # as Hudi 1.1 upgrades it
        else:
            at9 = _apply(start, property_changes(start, 8, 9))
        assert _merge_props(at9) == v9
        back8 = _apply(at9, property_changes(at9, 9, 8))
        seq = {"hoodie.table.precombine.field": "_event_seq"} if payload == MYSQL_DEBEZIUM_PAYLOAD else \
            {"hoodie.table.precombine.field": "_event_lsn"} if payload == POSTGRES_DEBEZIUM_PAYLOAD else {}
        assert _merge_props(back8) == {**v8, **seq}
        back6 = _apply(back8, property_changes(back8, 8, 6))
        assert _merge_props(back6) == {"hoodie.compaction.payload.class": payload,
                                       "hoodie.table.precombine.field": "ts", **seq}


# ---------------------------------------------------------------------------------------------
# The rows, written at each version
# ---------------------------------------------------------------------------------------------
#: MySQL's version-9 ordering fields (the binlog file and position, of which _event_seq is "file.pos")
WIDE = T.StructType([*SCHEMA.fields, T.StructField("_event_bin_file", T.StringType()),
                     T.StructField("_event_pos", T.LongType())])


def _df(spark, rows: list[dict]):
    wide = [{**r, "_event_bin_file": r["_event_seq"].split(".")[0], "_event_pos": int(r["_event_seq"].split(".")[1])}
            for r in rows]
    return spark.createDataFrame(wide, WIDE)


def _write(spark, path: str, rows: list[dict], payload: str, version: int, *, ordering: str = "ts",
           table_type: str = "COPY_ON_WRITE") -> None:
    pyhudi.write(_df(spark, rows), path, {
        "hoodie.datasource.write.table.type": table_type, "hoodie.compact.inline": "false",
        "hoodie.table.name": "payloads", "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": ordering,
        "hoodie.datasource.write.payload.class": payload, "hoodie.metadata.enable": "false",
        "hoodie.write.table.version": str(version), "hoodie.datasource.write.operation": "upsert"})


def _rows(spark, path: str) -> dict[str, tuple]:
    return {r["key"]: tuple(r[f] for f in FIELDS) for r in pyhudi.read(spark, path).collect()}


def _rs(path: str) -> dict[str, tuple]:
    return {r["key"]: tuple(r[f] for f in FIELDS) for r in hudi_rs_rows(path)}


def _props(path: str) -> dict:
    return _merge_props(pyhudi.HudiTable(path).properties)


@pytest.mark.parametrize("payload", SIX, ids=SHORT.get)
def test_each_payload_merges_the_same_at_versions_6_8_and_9(spark, tmp_path, payload):
    at6, at9, at8 = (str(tmp_path / n) for n in ("v6", "v9", "v8"))
    ordering9 = "_event_lsn" if payload == POSTGRES_DEBEZIUM_PAYLOAD else "ts"
    for batch in (FIRST, SECOND):
        _write(spark, at6, batch, payload, 6)
    expected = _rows(spark, at6)
    if payload == MYSQL_DEBEZIUM_PAYLOAD:
        with pytest.raises(HudiUnsupportedError, match="MySqlDebeziumAvroPayload at table version 9"):
            _write(spark, at9, FIRST, payload, 9)
    else:
        for batch in (FIRST, SECOND):  # merge-on-read: the second batch's records merge from its log files
            _write(spark, at9, batch, payload, 9, ordering=ordering9, table_type="MERGE_ON_READ")
        assert _props(at9) == {**V9[payload], "hoodie.table.legacy.payload.class": payload}
        assert any(s.log_files for s in pyhudi.HudiTable(at9).file_system_view().latest_slices())
        assert _rows(spark, at9) == expected  # (hudi-rs merges logs by event time only: no oracle here)
    if payload == EVENT_TIME_PAYLOAD:
        with pytest.raises(HudiUnsupportedError, match="EventTimeAvroPayload cannot be at table version 8"):
            _write(spark, at8, FIRST, payload, 8)
        return
    for batch in (FIRST, SECOND):
        _write(spark, at8, batch, payload, 8)
    assert _props(at8)["hoodie.record.merge.mode"] == "CUSTOM"
    assert _rows(spark, at8) == expected == _rs(at8)
    if payload != MYSQL_DEBEZIUM_PAYLOAD:
        pyhudi.upgrade(at8, to=9)
        assert _props(at8) == {**V9[payload], "hoodie.table.legacy.payload.class": payload}
        assert _rows(spark, at8) == expected
    pyhudi.downgrade(at8, to=6)
    assert pyhudi.HudiTable(at8).properties["hoodie.compaction.payload.class"] == payload
    assert _rows(spark, at8) == expected == _rs(at8)


def test_a_version_6_table_moves_6_8_9_and_back_merging_the_same(spark, tmp_path):
    """One payload through every step with a write at each version: the upgrade 6 -> 8 of
    ``SevenToEightUpgradeHandler`` and 8 -> 9, downgrades 9 -> 8 -> 6."""
    payload, moved, ref = PARTIAL_UPDATE_PAYLOAD, str(tmp_path / "moved"), str(tmp_path / "ref")
    third = [dict(r, ts=r["ts"] + 20, s=None) for r in FIRST[:3]]
    for batch in (FIRST, SECOND, third):
        _write(spark, ref, batch, payload, 6)
    _write(spark, moved, FIRST, payload, 6)
    _write(spark, moved, SECOND, payload, 8)  # upgrades 6 -> 8 first
    assert _props(moved)["hoodie.record.merge.strategy.id"] == PAYLOAD_ID
    _write(spark, moved, third, payload, 9)  # 8 -> 9
    assert _props(moved)["hoodie.table.partial.update.mode"] == "IGNORE_DEFAULTS"
    pyhudi.downgrade(moved, to=6)  # 9 -> 8 -> 6
    assert pyhudi.HudiTable(moved).properties["hoodie.compaction.payload.class"] == payload
    assert _rows(spark, moved) == _rows(spark, ref) == _rs(moved)


def test_a_table_whose_metadata_table_pyhudi_keeps_moves_6_8_6(spark, tmp_path):
    """pyhudi's metadata table writer defines column_stats and record_index in
    ``.hoodie/.index_defs/index.json`` on a version-8 table; a downgrade drops the metadata table
    with them (``EightToSevenDowngradeHandler`` keeps no other index's partitions), while a
    secondary index definition a user made with Hudi is still refused (tests/test_v9_write.py)."""
    path = str(tmp_path / "t")
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.metadata.enable": "true", "hoodie.metadata.record.index.enable": "true",
            "hoodie.metadata.index.column.stats.enable": "true"}
    schema = "id string, p string, ts long, v int"
    pyhudi.write(spark.createDataFrame([("a", "x", 1, 1), ("b", "y", 1, 2)], schema), path, opts)
    pyhudi.upgrade(path, to=8)
    pyhudi.write(spark.createDataFrame([("a", "x", 2, 10), ("c", "y", 1, 3)], schema), path,
                 {**opts, "hoodie.write.table.version": "8"})
    defs = Path(path) / ".hoodie" / ".index_defs" / "index.json"
    assert set(json.loads(defs.read_text())["indexDefinitions"]) == {"column_stats", "record_index"}
    before = sorted((r["id"], r["v"]) for r in hudi_rs_rows(path))
    moved = pyhudi.downgrade(path, to=6)
    assert moved.metadata_table_dropped and not defs.exists()
    assert "hoodie.table.index.defs.path" not in pyhudi.HudiTable(path).properties
    assert sorted((r["id"], r["v"]) for r in hudi_rs_rows(path)) == before == [("a", 10), ("b", 2), ("c", 3)]
    assert sorted((r["id"], r["v"]) for r in pyhudi.read(spark, path).collect()) == before
