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

hudi-rs reads the table pyhudi.merge writes with partial blocks and gives the same snapshot
(checked in the Spark test below).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from conftest import hudi_rs_rows
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
_record = st.fixed_dictionaries({"_hoodie_record_key": st.sampled_from(KEYS),
                                 "ts": st.one_of(st.integers(0, 4), st.integers(0, 4), st.none()),
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
    without ordering values in between, ordering ties (ts in 0..4) and missing ordering values
    (null: the newer record wins)."""
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


# -- Spark -------------------------------------------------------------------------------------
def _frame(spark, table: pa.Table):
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame(table.to_pylist(), from_arrow_schema(table.schema))


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(_slices(), st.booleans())
def test_the_spark_join_of_a_partial_slice_equals_the_slice_merge(spark, case, ordered):
    """The Spark join read (:func:`pyhudi.spark.merged.merged_records`, both its OverwriteWithLatest
    and its DefaultHoodieRecordPayload plans) over the log side of a slice with partial blocks
    (:func:`pyhudi.read.merge.partial_log_state`) gives what :func:`merge_slice` gives."""
    from pyhudi.read.merge import partial_log_state
    from pyhudi.spark.merged import BASE_ROW, BASE_SIZE, log_side_rows, log_side_schema, merged_records

    base, blocks = case
    spec = SPEC if ordered else MergeSpec.of(None, OVERWRITE_PAYLOAD)
    base_table = _rows([{**r, "_hoodie_record_key": k, "_hoodie_commit_time": "0"} for k, r in base.items()],
                       SCHEMA.names) if base else None
    expected, _ = merge_slice(base_table, _scan(blocks), SCHEMA, spec)
    state = partial_log_state(base_table, _scan(blocks), SCHEMA, spec)
    stored = base_table.column("_hoodie_record_key") if base_table is not None else None
    logs = _frame(spark, log_side_rows(state, "f1", stored, 1234, SCHEMA, log_side_schema(SCHEMA, spec)))
    base_df = None
    if base_table is not None:
        with_pos = base_table.append_column(BASE_ROW, pa.array(range(base_table.num_rows), pa.int64()))
        base_df = _frame(spark, with_pos.append_column(BASE_SIZE, pa.array([1234] * base_table.num_rows, pa.int64())))
    got = merged_records(base_df, logs, SCHEMA.names, spec).collect()
    assert sorted((r.asDict() for r in got), key=lambda r: r["_hoodie_record_key"]) == expected.to_pylist()


def _options(**extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "t", "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "",
            "hoodie.datasource.write.precombine.field": "_ts", "hoodie.metadata.enable": "false",
            "hoodie.write.table.version": "8", "hoodie.parquet.small.file.limit": "0", **extra}


def _log_blocks(path):
    from pathlib import Path

    from pyhudi.io.log_format import BlockType, read_blocks

    found = []
    for f in sorted(Path(path).rglob(".*.log.*")):
        found += [b for b in read_blocks(f.read_bytes(), source=str(f)) if b.block_type == BlockType.AVRO_DATA_BLOCK]
    return found


def _slice_merge_rows(path: str) -> list[dict]:
    """The snapshot as the executors' slice merge gives it (``read_slice``: pyhudi.read without stored
    keys, the data source, CDC, compaction)."""
    from pyhudi.read.merge import read_slice
    from pyhudi.table.table import HudiTable

    table = HudiTable(path)
    view = table.file_system_view()
    spec = MergeSpec.of(table.config.merge_ordering_field, table.config.payload_class)
    schema = table.arrow_schema()
    out: list[dict] = []
    for piece in view.latest_slices():
        out += read_slice(table.storage, piece.to_read(), schema, spec, view.visibility())[0].to_pylist()
    return out


def _sorted(rows) -> list[dict]:
    cols = ["id", "name", "price", "_ts", "description"]
    return sorted(({c: r[c] for c in cols} for r in rows), key=lambda r: r["id"])


def test_merge_into_a_v8_mor_table_writes_partial_blocks_read_everywhere_as_hudi_merges_them(spark, tmp_path):
    """``TestPartialUpdateForMergeInto.testPartialUpdate`` (MOR, Avro log blocks) with pyhudi.merge:
    each statement writes a log block of its assigned columns (``validateLogBlock``: the block's
    schema fields minus the meta fields are [price, _ts], then [_ts, description]; IS_PARTIAL=true),
    and the snapshot is Hudi's expected answer through the Spark join read, the datasource's slice
    merge (pyarrow), and after compaction."""
    import json

    import pyhudi
    from pyhudi.io.avro_schema import META_FIELDS
    from pyhudi.io.log_format import HeaderKey

    path = str(tmp_path / "t")
    rows = [(1, "a1", 10.0, 1000, "a1: desc1"), (2, "a2", 20.0, 1200, "a2: desc2"), (3, "a3", 30.0, 1250, "a3: desc3")]
    cols = "id int, name string, price double, _ts long, description string"
    pyhudi.write(spark.createDataFrame(rows, cols), path, _options())
    src = spark.createDataFrame([(1, "a1", 12.0, 1001), (3, "a3", 25.0, 1260)],
                                "id int, name string, price double, ts long")
    r1 = pyhudi.merge(spark, path, src, on="t.id = s.id").when_matched_update(
        set={"price": "s.price", "_ts": "s.ts"}).execute()
    assert r1.stats["partial_update"] is True
    src = spark.createDataFrame([(1, "a1: updated desc1", 1023), (2, "a2: updated desc2", 1270)],
                                "id int, description string, ts long")
    pyhudi.merge(spark, path, src, on="t.id = s.id").when_matched_update(
        set={"description": "s.description", "_ts": "s.ts"}).execute()
    blocks = _log_blocks(path)
    assert [b.header.get(HeaderKey.IS_PARTIAL) for b in blocks] == ["true", "true"]
    fields = [[f["name"] for f in json.loads(b.schema)["fields"]] for b in blocks]
    assert [f[:5] for f in fields] == [list(META_FIELDS)] * 2
    assert sorted(f[5:] for f in fields) == [["_ts", "description"], ["price", "_ts"]]
    expected = [{"id": 1, "name": "a1", "price": 12.0, "_ts": 1023, "description": "a1: updated desc1"},
                {"id": 2, "name": "a2", "price": 20.0, "_ts": 1270, "description": "a2: updated desc2"},
                {"id": 3, "name": "a3", "price": 25.0, "_ts": 1260, "description": "a3: desc3"}]
    assert _sorted(pyhudi.read(spark, path).collect()) == expected  # Spark join of base rows and log side
    assert _sorted(_slice_merge_rows(path)) == expected  # each slice merged by read_slice (pyarrow)
    assert _sorted(hudi_rs_rows(path)) == expected  # hudi-rs merges partial blocks too
    pyhudi.compact(spark, path)
    assert _sorted(pyhudi.read(spark, path).collect()) == expected  # compaction merged the slice (pyarrow)


def test_merge_writes_whole_records_where_partial_blocks_are_not_hudis_or_not_safe(spark, tmp_path):
    """Whole records: option off, version 6, the ordering field not assigned, or rows inserted."""
    import pyhudi
    from pyhudi.io.log_format import HeaderKey

    cols = "id int, name string, price double, _ts long, description string"
    rows = [(1, "a1", 10.0, 1000, "d1"), (2, "a2", 20.0, 1200, "d2")]
    cases = {"off": ({"hoodie.spark.sql.merge.into.partial.updates": "false"}, {"price": "s.price", "_ts": "s.ts"}),
             "v6": ({"hoodie.write.table.version": "6"}, {"price": "s.price", "_ts": "s.ts"}),
             "no_ordering": ({}, {"price": "s.price"})}
    src = spark.createDataFrame([(1, 12.0, 1001)], "id int, price double, ts long")
    for name, (extra, assign) in cases.items():
        path = str(tmp_path / name)
        pyhudi.write(spark.createDataFrame(rows, cols), path, _options(**extra))
        result = pyhudi.merge(spark, path, src, on="t.id = s.id").when_matched_update(set=assign).execute(
            {k: v for k, v in extra.items() if k.startswith("hoodie.spark")})
        assert result.stats["partial_update"] is False, name
        assert [b.header.get(HeaderKey.IS_PARTIAL) for b in _log_blocks(path)] == [None], name
    path = str(tmp_path / "insert")
    pyhudi.write(spark.createDataFrame(rows, cols), path, _options())
    src = spark.createDataFrame([(1, 12.0, 1001), (9, 1.0, 1)], "id int, price double, ts long")
    result = pyhudi.merge(spark, path, src, on="t.id = s.id").when_matched_update(
        set={"price": "s.price", "_ts": "s.ts"}).when_not_matched_insert(
        values={"id": "s.id", "price": "s.price", "_ts": "s.ts"}).execute()
    assert result.stats["partial_update"] is False


@pytest.mark.parametrize("kind", ["avro", "parquet"])
def test_a_partial_block_carries_is_partial_true_and_its_partial_schema(kind):
    """``HoodieAppendHandle.getUpdatedHeader``: IS_PARTIAL (header key 7, ``HeaderMetadataType``'s
    ordinal) = "true"; SCHEMA = the partial writer schema (meta fields + updated columns). The
    block's records decode to those columns only, and a reader aligns them to the table schema."""
    from pyhudi.io.avro_schema import table_avro_schema
    from pyhudi.io.log_format import (
        HeaderKey,
        avro_data_block,
        block_fields,
        data_block_records,
        is_partial,
        parquet_data_block,
        read_blocks,
    )

    rows = pa.table({"_hoodie_commit_time": ["1"], "_hoodie_commit_seqno": ["1_0_0"], "_hoodie_record_key": ["k"],
                     "_hoodie_partition_path": [""], "_hoodie_file_name": ["f"], "ts": [5], "a": [7], "b": ["x"]})
    partial = table_avro_schema(pa.schema([("ts", pa.int64()), ("a", pa.int64())]), "t", with_meta_fields=True)
    write = avro_data_block if kind == "avro" else parquet_data_block
    (block,) = read_blocks(write(rows, partial, "1", partial=True), source="x")
    assert int(HeaderKey.IS_PARTIAL) == 7 and block.header[HeaderKey.IS_PARTIAL] == "true" and is_partial(block)
    assert block.schema == partial
    assert block_fields(block, "test") == {"_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                    "_hoodie_partition_path", "_hoodie_file_name", "ts", "a"}
    assert data_block_records(block, SCHEMA).to_pylist() == [
        {"_hoodie_commit_time": "1", "_hoodie_record_key": "k", "ts": 5, "a": 7, "b": None, "c": None}]
    (whole,) = read_blocks(write(rows, partial, "1"), source="x")
    assert HeaderKey.IS_PARTIAL not in whole.header and not is_partial(whole)
