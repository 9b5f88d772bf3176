"""Hudi's record payloads, column-wise (no Spark): the vectorised merges of :mod:`pyhudi.read.payloads`
and :func:`pyhudi.read.merge.merge_slice` against a plain per-record model of each payload's Java
methods, over random batches (duplicates, nulls, deletes, out-of-order ordering values).

The model follows Apache Hudi's source (hudi-common ``org.apache.hudi.common.model``):

* ``preCombine``: ``OverwriteWithLatestAvroPayload.preCombine`` (the larger ordering value, the
  incoming on ties), inherited by every payload but ``PartialUpdateAvroPayload.preCombine``
  (``mergeOldRecord(..., isPreCombining=true)``: the newer record's non-null fields over the other's).
* ``combineAndGetUpdateValue``: ``OverwriteWithLatestAvroPayload`` (incoming or delete),
  ``OverwriteNonDefaultsWithLatestAvroPayload.mergeRecords``/``setField`` (null keeps the stored
  value), ``PartialUpdateAvroPayload.mergeOldRecord``/``isRecordNewer``,
  ``DefaultHoodieRecordPayload.needUpdatingPersistedRecord``, ``EventTimeAvroPayload`` (a delete
  wins before the ordering check), ``AWSDmsAvroPayload.handleDeleteOperation`` (``Op = 'D'``),
  ``AbstractDebeziumAvroPayload.combineAndGetUpdateValue`` with
  ``PostgresDebeziumAvroPayload.shouldPickCurrentRecord`` (``_event_lsn``),
  ``mergeToastedValuesIfPresent`` (``__debezium_unavailable_value``) and
  ``MySqlDebeziumAvroPayload.shouldPickCurrentRecord`` (``_event_seq`` "file.pos" as numbers).
* deletes: ``BaseAvroPayload.isDeleteRecord`` (``_hoodie_is_deleted``),
  ``DefaultHoodieRecordPayload.isDeleteRecord(record, properties)`` (delete field/marker).
* log merging: ``HoodieMergedLogRecordScanner`` folds log records with ``preCombine`` and the base
  record with ``combineAndGetUpdateValue``; a delete block removes what came before it
  (``processNextDeletedRecord``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyhudi import config as C
from pyhudi.config.registry import HudiConfig
from pyhudi.config.support import merge_semantics
from pyhudi.errors import HudiConfigError, HudiError, HudiUnsupportedError
from pyhudi.read.merge import LogScan, merge_slice
from pyhudi.read.payloads import (
    DELETE,
    KEEP_STORED,
    MergeSpec,
    merge_stored,
    payload_deletes,
    precombine,
)
from pyhudi.write.handles import combine

KEY = "_hoodie_record_key"
DEL = "_hoodie_is_deleted"
SCHEMA = pa.schema([("_hoodie_commit_time", pa.string()), (KEY, pa.string()), ("ts", pa.int64()),
                    ("a", pa.int64()), ("s", pa.string()), (DEL, pa.bool_()), ("Op", pa.string()),
                    ("_change_operation_type", pa.string()), ("_event_lsn", pa.int64()),
                    ("_event_seq", pa.string())])
DATA = ["ts", "a", "s", DEL, "Op", "_change_operation_type", "_event_lsn", "_event_seq"]
TOAST = "__debezium_unavailable_value"

PAYLOADS = [C.OVERWRITE_PAYLOAD, C.DEFAULT_PAYLOAD, C.NON_DEFAULTS_PAYLOAD, C.PARTIAL_UPDATE_PAYLOAD,
            C.EVENT_TIME_PAYLOAD, C.AWS_DMS_PAYLOAD, C.MYSQL_DEBEZIUM_PAYLOAD, C.POSTGRES_DEBEZIUM_PAYLOAD]
SHORT = {p: p.rsplit(".", 1)[1] for p in PAYLOADS}
DEBEZIUM = (C.MYSQL_DEBEZIUM_PAYLOAD, C.POSTGRES_DEBEZIUM_PAYLOAD)


# ------------------------------------------------------------------------------------------------
# The model: one record at a time, as the Java methods read
# ------------------------------------------------------------------------------------------------
def is_delete(rec: dict, payload: str) -> bool:
    if rec[DEL] is True:  # BaseAvroPayload.isDeleteRecord
        return True
    if payload == C.AWS_DMS_PAYLOAD and rec["Op"] is not None and rec["Op"].upper() == "D":
        return True
    return payload in DEBEZIUM and (rec["_change_operation_type"] or "").lower() == "d"


def pre_combine(this: dict, old: dict, payload: str) -> dict:
    """``this.preCombine(old)``."""
    old_newer = old["ts"] > this["ts"]
    if payload != C.PARTIAL_UPDATE_PAYLOAD:
        return old if old_newer else this
    newer, other = (old, this) if old_newer else (this, old)
    out = {f: (newer[f] if newer[f] is not None else other[f]) for f in this}
    if old_newer and "_hoodie_commit_time" in this:  # mergeDisorderRecordsWithMetadata: the updating record's
        out["_hoodie_commit_time"] = this["_hoodie_commit_time"] or old["_hoodie_commit_time"]
    return out


def seq(rec: dict) -> tuple[int, int]:
    file, pos = rec["_event_seq"].split(".")
    return int(file), int(pos)


def combine_update(stored: dict, inc: dict, payload: str) -> dict | str | None:
    """``inc.combineAndGetUpdateValue(stored)``: "stored", the record to write, or None (delete)."""
    deleted = is_delete(inc, payload)
    if payload in (C.OVERWRITE_PAYLOAD, C.AWS_DMS_PAYLOAD):
        return None if deleted else inc
    if payload == C.NON_DEFAULTS_PAYLOAD:
        return None if deleted else {f: inc[f] if inc[f] is not None else stored[f] for f in inc}
    if payload == C.PARTIAL_UPDATE_PAYLOAD:
        if deleted:
            return None
        newer, other = (stored, inc) if stored["ts"] > inc["ts"] else (inc, stored)
        out = {f: newer[f] if newer[f] is not None else other[f] for f in inc}
        if "_hoodie_commit_time" in inc:  # mergeDisorderRecordsWithMetadata: the updating record's meta fields
            out["_hoodie_commit_time"] = inc["_hoodie_commit_time"]
        return out
    if payload == C.DEFAULT_PAYLOAD:
        if stored["ts"] is not None and stored["ts"] > inc["ts"]:
            return "stored"
        return None if deleted else inc
    if payload == C.EVENT_TIME_PAYLOAD:
        if deleted:
            return None
        return "stored" if stored["ts"] > inc["ts"] else inc
    if payload == C.POSTGRES_DEBEZIUM_PAYLOAD:
        if stored["_event_lsn"] is not None and inc["_event_lsn"] < stored["_event_lsn"]:
            return "stored"
        if deleted:
            return None
        return {f: stored[f] if inc[f] == TOAST else inc[f] for f in inc}
    assert payload == C.MYSQL_DEBEZIUM_PAYLOAD
    if stored["_event_seq"] is not None and seq(inc) <= seq(stored):
        return "stored"
    return None if deleted else inc


def model_slice(base: list[dict], blocks: list[tuple[str, Any]], payload: str) -> dict[str, dict]:
    """Base records merged with log blocks: ("data", records) or ("delete", keys) with natural order."""
    log: dict[str, dict] = {}
    base_alive = {r[KEY]: r for r in base}
    for kind, content in blocks:
        if kind == "delete":
            for k in content:
                log.pop(k, None)
                base_alive.pop(k, None)
            continue
        for rec in content:
            k = rec[KEY]
            log[k] = rec if k not in log else pre_combine(rec, log[k], payload)
    out = {}
    for k, rec in base_alive.items():
        if k not in log:
            out[k] = rec
            continue
        merged = combine_update(rec, log[k], payload)
        if merged == "stored":
            out[k] = rec
        elif merged is not None:
            out[k] = merged
    for k, rec in log.items():
        if k not in base_alive and not is_delete(rec, payload):
            out[k] = rec
    return out


# ------------------------------------------------------------------------------------------------
# Random records
# ------------------------------------------------------------------------------------------------
def record(draw: Any, key: str, commit: str) -> dict:
    ts = draw(st.integers(0, 4))
    return {"_hoodie_commit_time": commit, KEY: key, "ts": ts,
            "a": draw(st.one_of(st.none(), st.integers(0, 9))),
            "s": draw(st.sampled_from([None, "x", "y", TOAST])),
            DEL: draw(st.sampled_from([None, False, False, True])),
            "Op": draw(st.sampled_from([None, "I", "U", "D", "d"])),
            "_change_operation_type": draw(st.sampled_from(["c", "u", "u", "d"])),
            "_event_lsn": ts * 10 + draw(st.integers(0, 2)),
            "_event_seq": f"{draw(st.sampled_from(['1', '01', '2', '10']))}.{draw(st.integers(0, 12))}"}


@st.composite
def batches(draw: Any, commit: str = "c1", max_size: int = 12) -> list[dict]:
    n = draw(st.integers(0, max_size))
    return [record(draw, draw(st.sampled_from("abcde")), commit) for _ in range(n)]


def table(records: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(records, schema=SCHEMA)


def spec(payload: str) -> MergeSpec:
    return MergeSpec.of("ts", payload)


def by_key(t: pa.Table) -> dict[str, dict]:
    return {r[KEY]: r for r in t.to_pylist()}


FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------------
# (a) preCombine of an incoming batch
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("payload", PAYLOADS, ids=SHORT.get)
@FAST
@given(rows=batches())
def test_precombine_matches_the_model(payload: str, rows: list[dict]) -> None:
    expected: dict[str, dict] = {}
    for rec in rows:  # arrival order: each incoming record pre-combines with what came before
        k = rec[KEY]
        expected[k] = rec if k not in expected else pre_combine(rec, expected[k], payload)
    got = precombine(table(rows), spec(payload))
    assert by_key(got) == expected
    assert by_key(combine(table(rows), spec(payload))) == expected  # the write handles' combine


def test_partial_update_precombine_merges_fields_of_the_newer_record_first() -> None:
    # PartialUpdateAvroPayload.preCombine: the older-arriving record with the larger ordering value wins the
    # fields it has; the later one fills its nulls
    rows = table([{KEY: "k", "ts": 5, "a": None, "s": "old"}, {KEY: "k", "ts": 3, "a": 7, "s": None}])
    out = precombine(rows, spec(C.PARTIAL_UPDATE_PAYLOAD)).to_pylist()[0]
    assert (out["ts"], out["a"], out["s"]) == (5, 7, "old")


# ------------------------------------------------------------------------------------------------
# (b) an incoming record against the stored one
# ------------------------------------------------------------------------------------------------
@st.composite
def pairs(draw: Any) -> tuple[list[dict], list[dict]]:
    n = draw(st.integers(1, 10))
    stored = [record(draw, f"k{i}", "c1") for i in range(n)]
    incoming = [record(draw, f"k{i}", "c2") for i in range(n)]
    return stored, incoming


@pytest.mark.parametrize("payload", PAYLOADS, ids=SHORT.get)
@FAST
@given(both=pairs())
def test_merge_stored_matches_the_model(payload: str, both: tuple[list[dict], list[dict]]) -> None:
    stored, incoming = both
    s = spec(payload)
    inc = table(incoming)
    merged, take = merge_stored(table(stored), inc, payload_deletes(inc, s), s)
    rows = merged.to_pylist()
    for i, (old, new) in enumerate(zip(stored, incoming)):
        want = combine_update(old, new, payload)
        got = "stored" if take[i] == KEEP_STORED else None if take[i] == DELETE else rows[i]
        assert got == want, (SHORT[payload], old, new)


def test_a_delete_of_the_delete_operation_removes_the_stored_record_under_every_payload() -> None:
    # an empty payload (recordBytes.length == 0) gives Option.empty() first in every combineAndGetUpdateValue
    stored = table([{KEY: "k", "ts": 9, "_event_lsn": 90, "_event_seq": "9.9", "a": 1}])
    hard = table([{KEY: "k"}])
    for payload in PAYLOADS:
        _, take = merge_stored(stored, hard, pa.array([True]), spec(payload))
        assert take[0] == DELETE, SHORT[payload]


def test_mysql_debezium_compares_the_binlog_file_and_position_as_numbers() -> None:
    # MySqlDebeziumAvroPayload.shouldPickCurrentRecord: "10.3" is after "2.100" (a string comparison says otherwise)
    s = spec(C.MYSQL_DEBEZIUM_PAYLOAD)
    stored = table([{KEY: "k", "ts": 1, "_event_seq": "2.100", "a": 1}, {KEY: "j", "ts": 1, "_event_seq": "3.5"}])
    inc = table([{KEY: "k", "ts": 1, "_event_seq": "10.3", "a": 2}, {KEY: "j", "ts": 1, "_event_seq": "3.5"}])
    _, take = merge_stored(stored, inc, payload_deletes(inc, s), s)
    assert list(take) == [1, KEEP_STORED]  # an equal position keeps the stored record


def test_debezium_refuses_an_incoming_record_without_its_ordering_column() -> None:
    s = spec(C.POSTGRES_DEBEZIUM_PAYLOAD)
    inc = table([{KEY: "k", "ts": 1, "_change_operation_type": "u"}])
    with pytest.raises(HudiError, match="_event_lsn"):
        merge_stored(table([{KEY: "k", "ts": 1, "_event_lsn": 5}]), inc, payload_deletes(inc, s), s)


# ------------------------------------------------------------------------------------------------
# (c, d) merge-on-read slices: log records folded and merged with the base file (snapshot, compaction)
# ------------------------------------------------------------------------------------------------
@st.composite
def slices(draw: Any) -> tuple[list[dict], list[tuple[str, Any]]]:
    base_keys = draw(st.sets(st.sampled_from("abcde")))
    base = []
    for k in sorted(base_keys):
        rec = record(draw, k, "c0")
        rec.update({DEL: False, "Op": "I", "_change_operation_type": "c"})
        base.append(rec)
    blocks: list[tuple[str, Any]] = []
    for i in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 4)) == 0:
            blocks.append(("delete", sorted(draw(st.sets(st.sampled_from("abcde"), min_size=1)))))
        else:
            blocks.append(("data", draw(batches(commit=f"c{i + 1}", max_size=6))))
    return base, blocks


def deletes_table(keys: list[str]) -> pa.Table:
    return pa.table({"record_key": keys, "partition_path": [""] * len(keys),
                     "ordering_is_default": [True] * len(keys), "ordering_value": pa.nulls(len(keys), pa.string())})


@pytest.mark.parametrize("payload", PAYLOADS, ids=SHORT.get)
@FAST
@given(case=slices())
def test_merge_slice_matches_the_model(payload: str, case: tuple[list[dict], list[tuple[str, Any]]]) -> None:
    base, blocks = case
    scan = LogScan()
    for pos, (kind, content) in enumerate(blocks):
        if kind == "data":
            scan.data.append((pos, table(content)))
        else:
            scan.deletes.append((pos, deletes_table(content)))
    out, _ = merge_slice(table(base) if base else None, scan, SCHEMA, spec(payload))
    expected = model_slice(base, blocks, payload)
    # a record whose _hoodie_is_deleted is true is not returned (BaseAvroPayload: a delete)
    expected = {k: r for k, r in expected.items() if r[DEL] is not True}
    assert by_key(out) == expected


# ------------------------------------------------------------------------------------------------
# Deletes, options and refusals
# ------------------------------------------------------------------------------------------------
def test_delete_marker_replaces_is_deleted_for_default_payload() -> None:
    # DefaultHoodieRecordPayload.isDeleteRecord(record, properties): with the delete field set, only the marker counts
    s = MergeSpec.of("ts", C.DEFAULT_PAYLOAD, delete_field="Op", delete_marker="gone")
    rows = table([{KEY: "a", "Op": "gone", DEL: False}, {KEY: "b", "Op": "x", DEL: True}, {KEY: "c"}])
    assert payload_deletes(rows, s).to_pylist() == [True, False, False]


def test_payload_deletes_of_dms_and_debezium() -> None:
    rows = table([{KEY: "a", "Op": "D"}, {KEY: "b", "Op": "d"}, {KEY: "c", "_change_operation_type": "d"},
                  {KEY: "d", DEL: True}, {KEY: "e", "Op": "U", "_change_operation_type": "u"}])
    assert payload_deletes(rows, spec(C.AWS_DMS_PAYLOAD)).to_pylist() == [True, True, False, True, False]
    assert payload_deletes(rows, spec(C.POSTGRES_DEBEZIUM_PAYLOAD)).to_pylist() == [False, False, True, True, False]
    assert payload_deletes(rows, spec(C.OVERWRITE_PAYLOAD)).to_pylist() == [False, False, False, True, False]


def test_delete_marker_options_go_together_and_with_default_payload() -> None:
    with pytest.raises(HudiConfigError, match="must be set together"):
        HudiConfig.of({"hoodie.payload.delete.field": "Op"})
    with pytest.raises(HudiConfigError, match="DefaultHoodieRecordPayload only"):
        HudiConfig.of({"hoodie.payload.delete.field": "Op", "hoodie.payload.delete.marker": "D"})
    cfg = HudiConfig.of({"hoodie.payload.delete.field": "Op", "hoodie.payload.delete.marker": "D",
                         "hoodie.datasource.write.payload.class": C.DEFAULT_PAYLOAD})
    assert cfg.get(C.PAYLOAD_DELETE_MARKER) == "D"


def test_payload_type_names_the_payload_class() -> None:
    cfg = HudiConfig.of({"hoodie.datasource.write.payload.type": "PARTIAL_UPDATE_AVRO"})
    assert cfg.get(C.PAYLOAD_CLASS) == C.PARTIAL_UPDATE_PAYLOAD


CUSTOM = "com.example.MyPayload"


def test_an_unknown_payload_class_option_is_refused_naming_it_and_the_implemented_ones() -> None:
    with pytest.raises(HudiUnsupportedError) as err:
        HudiConfig.of({"hoodie.datasource.write.payload.class": CUSTOM})
    assert CUSTOM in str(err.value) and "PartialUpdateAvroPayload" in str(err.value)


def test_an_unknown_payload_class_of_a_table_is_refused_naming_it_and_the_implemented_ones() -> None:
    for props in ({"hoodie.compaction.payload.class": CUSTOM},
                  {"hoodie.table.version": "9", "hoodie.record.merge.mode": "CUSTOM",
                   "hoodie.table.legacy.payload.class": CUSTOM}):
        with pytest.raises(HudiUnsupportedError) as err:
            merge_semantics(props, "t")
        assert CUSTOM in str(err.value) and "MySqlDebeziumAvroPayload" in str(err.value)


@pytest.mark.parametrize("props, payload", [
    ({"hoodie.compaction.payload.class": C.PARTIAL_UPDATE_PAYLOAD}, C.PARTIAL_UPDATE_PAYLOAD),
    ({"hoodie.compaction.payload.class": "org.apache.hudi.payload.AWSDmsAvroPayload"}, C.AWS_DMS_PAYLOAD),
    # table version 8 (Hudi 1.0): a payload of its own is merged by the payload-based merger, mode CUSTOM
    ({"hoodie.table.version": "8", "hoodie.record.merge.mode": "CUSTOM",
      "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
      "hoodie.compaction.payload.class": C.MYSQL_DEBEZIUM_PAYLOAD}, C.MYSQL_DEBEZIUM_PAYLOAD),
    # table version 9 (Hudi 1.1, RFC-97): the legacy payload class with the partial-update mode it implies
    ({"hoodie.table.version": "9", "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
      "hoodie.table.partial.update.mode": "IGNORE_MARKERS",
      "hoodie.table.legacy.payload.class": C.POSTGRES_DEBEZIUM_PAYLOAD}, C.POSTGRES_DEBEZIUM_PAYLOAD),
])
def test_tables_of_implemented_payloads_merge_by_them(props: dict, payload: str) -> None:
    assert merge_semantics(props, "t") == payload


def test_partial_updates_of_no_implemented_payload_are_refused() -> None:
    with pytest.raises(HudiUnsupportedError, match="partial.update.mode=IGNORE_DEFAULTS"):
        merge_semantics({"hoodie.table.version": "9", "hoodie.record.merge.mode": "COMMIT_TIME_ORDERING",
                         "hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}, "t")


def test_several_ordering_fields_are_compared_left_to_right() -> None:
    # Hudi 1.x hoodie.table.ordering.fields: the first field decides, the next breaks its ties
    s = MergeSpec.of("ts,a", C.DEFAULT_PAYLOAD)
    rows = table([{KEY: "k", "ts": 2, "a": 9, "s": "first"}, {KEY: "k", "ts": 2, "a": 1, "s": "later"},
                  {KEY: "k", "ts": 1, "a": 99, "s": "older"}])
    assert precombine(rows, s).column("s").to_pylist() == ["first"]
    stored, inc = table([{KEY: "k", "ts": 2, "a": 5}]), table([{KEY: "k", "ts": 2, "a": 4}])
    assert merge_stored(stored, inc, pa.array([False]), s)[1][0] == KEEP_STORED
    scan = LogScan(data=[(0, rows)])
    assert merge_slice(stored, scan, SCHEMA, s)[0].column("s").to_pylist() == ["first"]


def test_tables_ordered_by_several_fields_read_but_are_not_written() -> None:
    from pyhudi.config.properties import TableConfig

    config = TableConfig({"hoodie.table.name": "t", "hoodie.table.version": "9",
                          "hoodie.table.ordering.fields": "ts,a", "hoodie.record.merge.mode": "EVENT_TIME_ORDERING"})
    assert config.merge_ordering_field == "ts,a" and config.payload_class == C.DEFAULT_PAYLOAD
    with pytest.raises(HudiUnsupportedError, match="hoodie.table.ordering.fields=ts,a"):
        config.check_writable("write", merges=True)


@pytest.mark.parametrize("payload, survives", [
    (C.DEFAULT_PAYLOAD, True),  # needUpdatingPersistedRecord: the larger stored record stays, also against a delete
    (C.POSTGRES_DEBEZIUM_PAYLOAD, True),  # shouldPickCurrentRecord before the delete
    (C.EVENT_TIME_PAYLOAD, False),  # EventTimeAvroPayload.combineAndGetUpdateValue: a delete before any ordering
    (C.AWS_DMS_PAYLOAD, False), (C.PARTIAL_UPDATE_PAYLOAD, False), (C.NON_DEFAULTS_PAYLOAD, False),
])
def test_a_delete_block_with_an_ordering_value_against_a_larger_base_record(payload: str, survives: bool) -> None:
    base = table([{KEY: "k", "ts": 5, "_event_lsn": 50, "a": 1}])
    scan = LogScan(deletes=[(0, pa.table({"record_key": ["k"], "partition_path": [""], "ordering_is_default": [False],
                                          "ordering_value": ["4"]}))])
    assert (merge_slice(base, scan, SCHEMA, spec(payload))[0].num_rows == 1) is survives
