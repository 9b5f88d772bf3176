"""Every payload pyhudi implements, end to end: copy-on-write and merge-on-read tables written by
``pyhudi.write`` (upserts with duplicates, nulls, out-of-order ordering values and deletes of each
payload's kind, then the ``delete`` operation), read by ``pyhudi.read`` (merge-on-read: the Spark
join of base rows with the merged logs, and on PySpark 4 the ``format("hudi")`` data source, which
merges whole slices in executors), compacted, and compared with the per-record model of
``tests/test_payloads.py`` (Hudi's ``preCombine`` and ``combineAndGetUpdateValue``, cited there).

hudi-rs reads the base files pyhudi wrote (copy-on-write tables, and merge-on-read tables after
compaction, when no log is left): it does not implement these payloads' merges (it merges logs by
commit or event time only), so it is no oracle for a slice with logs.
"""

from __future__ import annotations

import pyarrow as pa
import pyspark
import pytest
from conftest import hudi_rs_rows
from pyspark.sql import types as T
from test_payloads import DEBEZIUM, PAYLOADS, SHORT, TOAST, combine_update, is_delete, pre_combine

import pyhudi
from pyhudi import config as C

SCHEMA = T.StructType([T.StructField("key", T.StringType()), T.StructField("part", T.StringType()),
                       T.StructField("ts", T.LongType()), T.StructField("a", T.LongType()),
                       T.StructField("s", T.StringType()), T.StructField("_hoodie_is_deleted", T.BooleanType()),
                       T.StructField("Op", T.StringType()), T.StructField("_change_operation_type", T.StringType()),
                       T.StructField("_event_lsn", T.LongType()), T.StructField("_event_seq", T.StringType())])
FIELDS = ["ts", "a", "s", "_hoodie_is_deleted", "Op", "_change_operation_type", "_event_lsn", "_event_seq"]


def row(key: str, ts: int, a: int | None, s: str | None, *, deleted: bool | None = False, op: str | None = "U",
        cdc: str = "u") -> dict:
    # the Debezium orderings follow ts: _event_lsn and the binlog position grow with it
    return {"key": key, "part": "p1" if key < "k5" else "p2", "ts": ts, "a": a, "s": s, "_hoodie_is_deleted": deleted,
            "Op": op, "_change_operation_type": cdc, "_event_lsn": ts * 10, "_event_seq": f"1.{ts}"}


FIRST = [row(f"k{i}", 5, i, f"s{i}", op="I", cdc="c") for i in range(1, 7)] + \
    [row("k9", 5, 9, "s9", op="I", cdc="c"), row("kx", 5, 10, "sx", op="I", cdc="c")]
SECOND = [
    row("k1", 6, None, "new1"), row("k1", 7, 70, None),  # duplicates: preCombine (PartialUpdate merges them)
    row("k2", 3, None, "old2"),  # older than the stored record
    row("k3", 8, None, None, deleted=True, op="D", cdc="d"),  # a delete for every payload
    row("k4", 9, 40, None, op="D"),  # a delete for AWSDmsAvroPayload only
    row("k5", 9, None, "d5", cdc="d"),  # a delete for the Debezium payloads only
    row("k6", 6, 60, TOAST),  # PostgresDebeziumAvroPayload keeps the stored value of a TOASTed column
    row("k7", 1, 7, None), row("k7", 1, 8, "x7"),  # a new key twice, equal ordering values: the later wins
    row("k8", 2, 8, "s8", deleted=True, op="D", cdc="d"),  # a new key deleted: nothing is inserted
    row("kx", 4, None, None, deleted=True, op="D", cdc="d"),  # a delete older than the stored record
    # PartialUpdateAvroPayload.preCombine folded in arrival order: "y" of the first version stays in the
    # merged record of the second, which then outranks the third's "x"
    row("kz", 1, None, "y"), row("kz", 2, None, None), row("kz", 1, 3, "x"),
]
DELETED = ["k9"]  # then the delete operation


def model(payload: str) -> dict[str, dict]:
    """The table after the writes: each batch pre-combined in arrival order
    (``hoodie.combine.before.upsert``), then each record against the stored one."""
    state: dict[str, dict] = {}
    for batch in (FIRST, SECOND):
        combined: dict[str, dict] = {}
        for rec in batch:
            k = rec["key"]
            combined[k] = rec if k not in combined else pre_combine(rec, combined[k], payload)
        for k, rec in combined.items():
            if k in state:
                out = combine_update(state[k], rec, payload)
                if out is None:
                    del state[k]
                elif out != "stored":
                    state[k] = out
            elif not is_delete(rec, payload):
                state[k] = rec
    for k in DELETED:
        state.pop(k, None)
    return {k: tuple(r[f] for f in FIELDS) for k, r in state.items()}


def _options(payload: str, table_type: str) -> dict:
    return {"hoodie.table.name": "payloads", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.payload.class": payload, "hoodie.metadata.enable": "false",
            "hoodie.compact.inline": "false"}


def _rows(df) -> dict[str, tuple]:
    return {r["key"]: tuple(r[f] for f in FIELDS) for r in df.collect()}


def _write(spark, path: str, rows: list[dict], options: dict, operation: str = "upsert") -> None:
    pyhudi.write(spark.createDataFrame(rows, SCHEMA), path, {**options, "hoodie.datasource.write.operation": operation})


def _has_logs(path: str) -> bool:
    table = pyhudi.HudiTable(path)
    return any(s.log_files for s in table.file_system_view().latest_slices())


def _rs(path: str) -> dict[str, tuple]:
    return {r["key"]: tuple(r[f] for f in FIELDS) for r in hudi_rs_rows(path)}


def _datasource(spark, path: str) -> dict[str, tuple] | None:
    if int(pyspark.__version__.split(".")[0]) < 4:
        return None  # the Python data source needs PySpark 4
    pyhudi.register(spark)
    return _rows(spark.read.format("hudi").load(path))


@pytest.mark.parametrize("payload", PAYLOADS, ids=SHORT.get)
def test_copy_on_write_matches_the_model(spark, tmp_path, payload):
    path = str(tmp_path / "cow")
    options = _options(payload, "COPY_ON_WRITE")
    for batch in (FIRST, SECOND):
        _write(spark, path, batch, options)
    _write(spark, path, [r for r in FIRST if r["key"] in DELETED], options, "delete")
    expected = model(payload)
    assert _rows(pyhudi.read(spark, path)) == expected
    assert _rs(path) == expected  # hudi-rs reads the base files the merge handles wrote


@pytest.mark.parametrize("payload", PAYLOADS, ids=SHORT.get)
def test_merge_on_read_matches_the_model_before_and_after_compaction(spark, tmp_path, payload):
    path = str(tmp_path / "mor")
    # a global index: the distributed write, whose duplicates are combined by Spark
    # (pyhudi.spark.prepare.deduplicate) rather than by the write handles of the copy-on-write test
    options = {**_options(payload, "MERGE_ON_READ"), "hoodie.index.type": "GLOBAL_SIMPLE"}
    for batch in (FIRST, SECOND):
        _write(spark, path, batch, options)
    _write(spark, path, [r for r in FIRST if r["key"] in DELETED], options, "delete")
    assert _has_logs(path)  # the second write's records and the delete are in log files
    expected = model(payload)
    assert _rows(pyhudi.read(spark, path)) == expected  # base rows joined with the merged logs by Spark
    via_source = _datasource(spark, path)  # whole slices merged in executors (pyhudi.read.merge.merge_slice)
    assert via_source is None or via_source == expected
    pyhudi.compact(spark, path, options)  # the same merge, written to new base files
    assert not _has_logs(path)
    assert _rows(pyhudi.read(spark, path)) == expected
    assert _rs(path) == expected


def test_the_model_tells_the_payloads_apart():
    """The batches above are built so that each payload ends elsewhere (a test that cannot fail
    for one payload's rule would pass another's)."""
    outcomes = {p: model(p) for p in PAYLOADS}
    assert len({repr(sorted(o.items())) for o in outcomes.values()}) == len(PAYLOADS)
    assert "k3" not in outcomes[C.OVERWRITE_PAYLOAD] and "k8" not in outcomes[C.OVERWRITE_PAYLOAD]
    assert "k4" not in outcomes[C.AWS_DMS_PAYLOAD] and all("k5" not in outcomes[p] for p in DEBEZIUM)


# -- PartialUpdateAvroPayload's preCombine in Spark, folded batch by batch -------------------------
def _sorted_versions(rows: list[dict]):
    """``rows`` as :func:`pyhudi.spark.prepare.deduplicate` hands them to its fold: with arrival
    order, record group and delete flag, sorted by record and arrival."""
    from pyhudi.spark.prepare import _GROUP
    from pyhudi.write.columns import ARRIVAL, IS_DELETE

    table = pa.Table.from_pylist([{**r, _GROUP: r["key"], ARRIVAL: i, IS_DELETE: bool(r["_hoodie_is_deleted"])}
                                  for i, r in enumerate(rows)])
    return table.sort_by([(_GROUP, "ascending"), (ARRIVAL, "ascending")])


def test_partial_update_fold_streams_batches_and_equals_the_whole_fold():
    """``PartialUpdateAvroPayload.preCombine`` is a left fold over a record's versions in arrival
    order (``HoodieWriteHelper.deduplicateRecords`` reduces pairs with ``preCombine``), so folding
    batch by batch, a record open at a batch's end carried as its folded row, gives the whole
    fold's records. The fold yields a batch's finished records before it reads past the next
    batch: a task holds a batch and a row, not its Spark partition."""
    from pyhudi.read.payloads import MergeSpec, precombine
    from pyhudi.spark.prepare import _GROUP, fold_sorted_runs
    from pyhudi.write.columns import ARRIVAL, IS_DELETE

    rows = SECOND + [row("kz", 0, 5, None), row("k1", 9, None, None, deleted=True), row("kz", 3, None, "z")]
    table = _sorted_versions(rows)
    spec = MergeSpec.of("ts", C.PARTIAL_UPDATE_PAYLOAD)
    whole = precombine(table, spec, rank=table.column(ARRIVAL).to_numpy(), delete_flag=IS_DELETE, key=_GROUP)
    assert whole.num_rows == len({r["key"] for r in rows}) < len(rows)
    for size in (1, 2, 3, 5, len(rows)):
        pulled = []

        def batches(size=size, pulled=pulled):
            for batch in table.to_batches(max_chunksize=size):
                pulled.append(batch.num_rows)
                yield batch

        out = fold_sorted_runs(batches(), spec)
        first = next(out)
        assert first.num_rows and len(pulled) <= 2 + 3 // size  # kz's versions span at most this many batches
        folded = pa.Table.from_batches([first, *out])
        assert folded.sort_by(_GROUP).to_pylist() == whole.sort_by(_GROUP).to_pylist(), size


@pytest.mark.parametrize("rows_per_batch", [1, 2])
def test_partial_update_duplicates_spanning_arrow_batches(spark, tmp_path, rows_per_batch):
    """The Spark-side fold (``pyhudi.spark.prepare.deduplicate``, a global index's distributed
    write) with Arrow batches of one or two rows, so a key's versions span batches: the table still
    equals the model of ``PartialUpdateAvroPayload`` (``preCombine`` in arrival order, then
    ``combineAndGetUpdateValue`` against the stored record)."""
    payload = C.PARTIAL_UPDATE_PAYLOAD
    path = str(tmp_path / "mor")
    options = {**_options(payload, "MERGE_ON_READ"), "hoodie.index.type": "GLOBAL_SIMPLE"}
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, str(rows_per_batch))
    try:
        for batch in (FIRST, SECOND):
            _write(spark, path, batch, options)
        _write(spark, path, [r for r in FIRST if r["key"] in DELETED], options, "delete")
    finally:
        spark.conf.set(key, before)
    assert _rows(pyhudi.read(spark, path)) == model(payload)
