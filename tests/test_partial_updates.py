"""Hudi 1.x partial updates: log blocks of partial records (header ``IS_PARTIAL=true``).

What was checked against Hudi's source (the rules are cited where the model applies them):

* the block format: ``HoodieAppendHandle.getUpdatedHeader`` adds ``IS_PARTIAL`` =
  ``Boolean.toString(true)`` (``"true"``) to the data block's header; ``HeaderMetadataType``'s
  ordinal of ``IS_PARTIAL`` is 7 (``HoodieLogBlock.HeaderMetadataType``: INSTANT_TIME,
  TARGET_INSTANT_TIME, SCHEMA, COMMAND_BLOCK_TYPE, COMPACTED_BLOCK_TIMES, RECORD_POSITIONS,
  BLOCK_IDENTIFIER, IS_PARTIAL); the writer schema, hence the ``SCHEMA`` header, is
  ``hoodie.write.partial.update.schema`` (``MergeIntoHoodieTableCommand``:
  ``HoodieAvroUtils.generateProjectionSchema`` of the table schema over the assigned columns in
  table order) with the meta fields added (``HoodieWriteHandle``). ``TestPartialUpdateForMergeInto``
  checks exactly these columns in the blocks it writes (``validateLogBlock``).
* the merge: ``HoodieSparkRecordMerger.partialMerge`` / ``SparkRecordMergingUtils.mergePartialRecords``
  with ``PartialUpdateBufferedRecordMerger`` (``BufferedRecordMergerFactory``): see
  :mod:`pyhudi.read.partial` and :func:`_model` below.

hudi-rs (0.4) does not merge partial blocks (its reader has no IS_PARTIAL handling), so it is not
used as an oracle here.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyhudi.config.table import DEFAULT_PAYLOAD, OVERWRITE_PAYLOAD, PARTIAL_UPDATE_PAYLOAD
from pyhudi.errors import HudiUnsupportedError
from pyhudi.read.merge import LogScan, MergeSpec, merge_slice
from pyhudi.read.partial import PartialBlock

META = ["_hoodie_commit_time", "_hoodie_record_key"]
DATA = ["ts", "a", "b", "c"]
SCHEMA = pa.schema([("_hoodie_commit_time", pa.string()), ("_hoodie_record_key", pa.string()),
                    ("ts", pa.int64()), ("a", pa.int64()), ("b", pa.string()), ("c", pa.float64())])
KEYS = ["k0", "k1", "k2", "k3"]


def _rows(records: list[dict], columns: list[str]) -> pa.Table:
    """``records`` in SCHEMA (columns outside ``columns`` null, as a reader aligns a partial block)."""
    return pa.table({f.name: pa.array([r.get(f.name) if f.name in columns else None for r in records], f.type)
                     for f in SCHEMA}, schema=SCHEMA)


def _deletes(keys: list[str], orderings: list[int | None]) -> pa.Table:
    return pa.table({"record_key": pa.array(keys, pa.string()), "partition_path": pa.array([""] * len(keys)),
                     "ordering_is_default": pa.array([o is None or o == 0 for o in orderings]),
                     "ordering_value": pa.array([None if o is None else str(o) for o in orderings], pa.string())})


def _scan(blocks: list[tuple]) -> LogScan:
    """A LogScan of ``blocks``: ("data", instant, records, columns or None for whole) or
    ("delete", keys, orderings)."""
    scan = LogScan()
    for pos, block in enumerate(blocks):
        if block[0] == "data":
            _, instant, records, columns = block
            cols = META + (columns if columns is not None else DATA)
            recs = [{**r, "_hoodie_commit_time": instant} for r in records]
            scan.data.append((pos, _rows(recs, cols)))
            if columns is not None:
                scan.partial[pos] = PartialBlock(tuple(c for c in SCHEMA.names if c in cols), f"block {pos}")
        else:
            scan.deletes.append((pos, _deletes(block[1], block[2])))
        scan.log_records += len(block[2])
    return scan


def _model(base: dict[str, dict], blocks: list[tuple], ordered: bool) -> dict[str, dict]:
    """Hudi's partial merging of one file slice, record by record (a dict per record, the keys it holds).

    Log entries fold in log order, ``deltaMerge(new, existing)`` ->
    ``partialMerge(older=existing, newer=new)`` (``PartialUpdateBufferedRecordMerger``); a delete-block
    entry against the record before it keeps the record when the delete has a real ordering value
    and the record's is larger (``EventTimeRecordMerger.deltaMerge(DeleteRecord, ...)``); the log's
    result meets the base record by ``finalMerge`` -> ``partialMerge(base, log)``.
    """
    def partial_merge(older: dict | None, newer: dict) -> dict:
        if older is None or older.get("__deleted"):  # HoodieSparkRecordMerger: older deleted -> newer as is
            return newer
        if ordered and older["ts"] is not None and newer["ts"] is not None and older["ts"] > newer["ts"]:
            return {**newer, **older}  # mergePartialRecords(newer as older, older as newer): older's columns win
        return {**older, **newer}  # the newer record's columns overlay the older's (ties: newer)

    log: dict[str, dict] = {}
    for block in blocks:
        if block[0] == "data":
            _, instant, records, columns = block
            cols = columns if columns is not None else DATA
            for r in records:
                new = {"_hoodie_commit_time": instant, **{c: r.get(c) for c in cols}}
                log[r["_hoodie_record_key"]] = partial_merge(log.get(r["_hoodie_record_key"]), new)
        else:
            for key, order in zip(block[1], block[2]):
                old = log.get(key)
                if (ordered and old is not None and not old.get("__deleted") and order not in (None, 0)
                        and old["ts"] is not None and old["ts"] > order):
                    continue
                log[key] = {"__deleted": True}
    out = {k: dict(v) for k, v in base.items()}
    for key, rec in log.items():
        if rec.get("__deleted"):
            out.pop(key, None)  # partialMerge: a newer delete deletes
        else:
            out[key] = partial_merge(out.get(key), rec)
    return {k: {c: v.get(c) for c in ["_hoodie_commit_time", *DATA]} for k, v in out.items()}


def _merged(base: dict[str, dict], blocks: list[tuple], spec: MergeSpec) -> dict[str, dict]:
    base_table = _rows([{**r, "_hoodie_record_key": k, "_hoodie_commit_time": "0"} for k, r in base.items()],
                       SCHEMA.names) if base else None
    out, _ = merge_slice(base_table, _scan(blocks), SCHEMA, spec)
    return {r.pop("_hoodie_record_key"): r for r in out.to_pylist()}


def _full(base: dict[str, dict]) -> dict[str, dict]:
    return {k: {"_hoodie_commit_time": "0", **v} for k, v in base.items()}


SPEC = MergeSpec.of("ts", DEFAULT_PAYLOAD)


def test_partial_blocks_overlay_their_columns_in_log_order():
    """``TestPartialUpdateForMergeInto.testPartialUpdate``'s two statements (price/_ts, then
    description/_ts), here a/ts then b/ts: each overlays its columns on the record before it."""
    base = {"k0": {"ts": 1000, "a": 10, "b": "d1", "c": 1.0}, "k1": {"ts": 1200, "a": 20, "b": "d2", "c": 2.0},
            "k2": {"ts": 1250, "a": 30, "b": "d3", "c": 3.0}}
    blocks = [("data", "1", [{"_hoodie_record_key": "k0", "ts": 1001, "a": 12},
                             {"_hoodie_record_key": "k2", "ts": 1260, "a": 25}], ["ts", "a"]),
              ("data", "2", [{"_hoodie_record_key": "k0", "ts": 1023, "b": "u1"},
                             {"_hoodie_record_key": "k1", "ts": 1270, "b": "u2"}], ["ts", "b"])]
    got = _merged(base, blocks, SPEC)
    assert got == {"k0": {"_hoodie_commit_time": "2", "ts": 1023, "a": 12, "b": "u1", "c": 1.0},
                   "k1": {"_hoodie_commit_time": "2", "ts": 1270, "a": 20, "b": "u2", "c": 2.0},
                   "k2": {"_hoodie_commit_time": "1", "ts": 1260, "a": 25, "b": "d3", "c": 3.0}}
    assert got == _model(_full(base), blocks, True)


def test_a_larger_stored_ordering_keeps_its_columns_and_a_new_key_gets_nulls():
    base = {"k0": {"ts": 50, "a": 1, "b": "x", "c": 0.5}}
    blocks = [("data", "1", [{"_hoodie_record_key": "k0", "ts": 10, "a": 2},
                             {"_hoodie_record_key": "k9", "ts": 10, "a": 7}], ["ts", "a"])]
    got = _merged(base, blocks, SPEC)
    assert got["k0"] == {"_hoodie_commit_time": "0", "ts": 50, "a": 1, "b": "x", "c": 0.5}
    assert got["k9"] == {"_hoodie_commit_time": "1", "ts": 10, "a": 7, "b": None, "c": None}


def test_payload_classes_and_partial_blocks_without_the_ordering_field_are_refused():
    blocks = [("data", "1", [{"_hoodie_record_key": "k0", "ts": 1, "a": 2}], ["ts", "a"])]
    with pytest.raises(HudiUnsupportedError, match=r"IS_PARTIAL=true.*PartialUpdateAvroPayload.*partialMerge"):
        _merged({}, blocks, MergeSpec.of("ts", PARTIAL_UPDATE_PAYLOAD))
    with pytest.raises(HudiUnsupportedError, match=r"without the ordering field\(s\) ts"):
        _merged({}, [("data", "1", [{"_hoodie_record_key": "k0", "a": 2}], ["a"])], SPEC)
    # without an ordering field (commit-time ordering) the same block merges
    assert _merged({}, [("data", "1", [{"_hoodie_record_key": "k0", "a": 2}], ["a"])],
                   MergeSpec.of(None, OVERWRITE_PAYLOAD))["k0"]["a"] == 2


_columns = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2, unique=True)
_record = st.fixed_dictionaries({"_hoodie_record_key": st.sampled_from(KEYS), "ts": st.integers(0, 4),
                                 "a": st.integers(0, 99), "b": st.sampled_from(["x", "y", "z"]),
                                 "c": st.floats(0, 9, allow_nan=False)})


@st.composite
def _slices(draw):
    base = {k: {"ts": draw(st.integers(0, 4)), "a": draw(st.integers(0, 99)), "b": "base", "c": 0.0}
            for k in draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=3))}
    blocks: list[tuple] = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["partial", "partial", "whole", "delete"]))
        if kind == "delete":
            keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True))
            blocks.append(("delete", keys, [draw(st.one_of(st.none(), st.integers(0, 4))) for _ in keys]))
            continue
        records = draw(st.lists(_record, min_size=1, max_size=3, unique_by=lambda r: r["_hoodie_record_key"]))
        blocks.append(("data", str(i + 1), records, ["ts", *draw(_columns)] if kind == "partial" else None))
    if not any(b[0] == "data" and b[3] is not None for b in blocks):
        blocks.append(("data", "9", [{"_hoodie_record_key": "k0", "ts": 2, "a": 1}], ["ts", "a"]))
    return base, blocks


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_slices(), st.booleans())
def test_merge_slice_equals_the_model_of_hudis_partial_merge(case, ordered):
    """Random slices: partial blocks of different column subsets, whole blocks, deletes with and
    without ordering values in between, ordering ties (ts in 0..4)."""
    base, blocks = case
    spec = SPEC if ordered else MergeSpec.of(None, OVERWRITE_PAYLOAD)
    assert _merged(base, blocks, spec) == _model(_full(base), blocks, ordered)


def test_counts_and_no_python_loop_over_rows():
    """A slice of many keys merges in as many rounds as one key has log entries (not per row)."""
    n = 2000
    keys = [f"k{i:05d}" for i in range(n)]
    base = {k: {"ts": 1, "a": i, "b": "s", "c": 1.0} for i, k in enumerate(keys)}
    blocks = [("data", "1", [{"_hoodie_record_key": k, "ts": 2, "a": -1} for k in keys[::2]], ["ts", "a"]),
              ("delete", keys[1:10], [None] * 9)]
    got = _merged(base, blocks, SPEC)
    assert len(got) == n - 9 and got[keys[0]]["a"] == -1 and got[keys[0]]["b"] == "s"
    assert np.all([got[k]["a"] == i for i, k in enumerate(keys) if i % 2 and i >= 10])
