"""Merging a file slice (no Spark): ordering, payload semantics, deletes, visibility."""

from __future__ import annotations

import pyarrow as pa

from pyhudi.read.merge import LogScan, MergeSpec, Visibility, merge_slice

SCHEMA = pa.schema([("_hoodie_commit_time", pa.string()), ("_hoodie_record_key", pa.string()),
                    ("ts", pa.int64()), ("val", pa.string())])


def rows(*items: tuple[str, str, int, str]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in items], schema=SCHEMA)


def deletes(*keys: str, ordering: str | None = None) -> pa.Table:
    return pa.table({"record_key": list(keys), "partition_path": ["p"] * len(keys),
                     "ordering_is_default": [ordering is None] * len(keys),
                     "ordering_value": [ordering] * len(keys)})


EVENT_TIME = MergeSpec("ts")


def merged(base, data=(), dels=(), spec=EVENT_TIME) -> dict:
    scan = LogScan(data=list(data), deletes=list(dels))
    out, _ = merge_slice(base, scan, SCHEMA, spec)
    return {r["_hoodie_record_key"]: (r["ts"], r["val"]) for r in out.to_pylist()}


BASE = rows(("1", "a", 5, "base-a"), ("1", "b", 5, "base-b"), ("1", "c", 5, "base-c"))


def test_log_record_replaces_base_regardless_of_ordering():
    # OverwriteWithLatestAvroPayload: the merged log record wins even with a smaller ordering value
    assert merged(BASE, [(0, rows(("2", "a", 1, "log-a")))])["a"] == (1, "log-a")


def test_default_payload_keeps_a_larger_base_record():
    spec = MergeSpec.of("ts", "org.apache.hudi.common.model.DefaultHoodieRecordPayload")
    out = merged(BASE, [(0, rows(("2", "a", 1, "log-a"), ("2", "b", 9, "log-b")))], spec=spec)
    assert out["a"] == (5, "base-a") and out["b"] == (9, "log-b")


def test_among_log_records_the_larger_ordering_wins_and_ties_go_to_the_later():
    data = [(0, rows(("2", "a", 7, "first"), ("2", "b", 7, "first"))), (1, rows(("3", "a", 6, "second"),
                                                                             ("3", "b", 7, "second")))]
    out = merged(BASE, data)
    assert out["a"] == (7, "first") and out["b"] == (7, "second")


def test_delete_removes_earlier_records_but_not_later_ones():
    data = [(0, rows(("2", "a", 6, "upd"))), (2, rows(("4", "b", 8, "again")))]
    out = merged(BASE, data, [(1, deletes("a", "b"))])
    assert "a" not in out and out["b"] == (8, "again") and out["c"] == (5, "base-c")


def test_delete_with_a_real_ordering_value_loses_to_larger_records():
    out = merged(BASE, (), [(0, deletes("a", ordering="4")), (1, deletes("b", ordering="6"))])
    assert out["a"] == (5, "base-a") and "b" not in out


def test_soft_deleted_records_are_dropped():
    schema = SCHEMA.append(pa.field("_hoodie_is_deleted", pa.bool_()))
    base = pa.Table.from_pylist([{"_hoodie_record_key": "a", "ts": 1, "_hoodie_is_deleted": False},
                                 {"_hoodie_record_key": "b", "ts": 1, "_hoodie_is_deleted": False}], schema=schema)
    log = pa.Table.from_pylist([{"_hoodie_record_key": "a", "ts": 2, "_hoodie_is_deleted": True}], schema=schema)
    out, counts = merge_slice(base, LogScan(data=[(0, log)]), schema, MergeSpec("ts"))
    assert out.column("_hoodie_record_key").to_pylist() == ["b"]
    assert counts.deleted == 1


def test_visibility_bounds():
    vis = Visibility(frozenset({"100", "200", "300"}), archived_before="050", as_of="250", before=None)
    assert vis.sees("100") and vis.sees("200") and vis.sees("040")
    assert not vis.sees("300") and not vis.sees("150") and not vis.sees(None)
    assert not Visibility(frozenset({"100", "200"}), before="200").sees("200")
