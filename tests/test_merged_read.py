"""Merge-on-read snapshots merged by Spark give what the slice merge gives (random slices, with and
without a filter)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from test_merge import SCHEMA, deletes

from pyhudi.read.merge import LOG_DELETE_ORDER, LOG_RECORD, LogScan, MergeSpec, log_state, merge_slice
from pyhudi.spark.merged import (
    BASE_ROW,
    BASE_SIZE,
    FILE_ID,
    LOG_BASE_ROW,
    LOG_BASE_SIZE,
    LOG_FILE_ID,
    filters_reach_base_files,
    log_side_rows,
    log_side_schema,
    merged_records,
)
from pyhudi.spark.positions import replaced_filter, replaced_rows

KEYS = ["a", "b", "c", "d"]
WITH_FLAG = SCHEMA.append(pa.field("_hoodie_is_deleted", pa.bool_()))


def records(items: list[tuple[str, int, bool]], tag: str) -> pa.Table:
    return pa.Table.from_pylist([{"_hoodie_commit_time": tag, "_hoodie_record_key": k, "ts": ts,
                                  "val": f"{tag}-{k}-{ts}", "_hoodie_is_deleted": gone} for k, ts, gone in items],
                                schema=WITH_FLAG)


record = st.tuples(st.sampled_from(KEYS), st.integers(0, 4), st.sampled_from([False, False, False, True]))
block = st.one_of(
    st.tuples(st.just("data"), st.lists(record, max_size=4)),
    st.tuples(st.just("delete"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True),
              st.one_of(st.none(), st.integers(0, 4).map(str))))


def frame(spark, table: pa.Table):
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame(table.to_pylist(), from_arrow_schema(table.schema))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 4)), max_size=4, unique_by=lambda r: r[0]),
       blocks=st.lists(block, min_size=1, max_size=4), keep_larger=st.booleans(), has_base=st.booleans(),
       with_names=st.booleans())
def test_spark_merge_equals_slice_merge(spark, base, blocks, keep_larger, has_base, with_names):
    spec = MergeSpec("ts", keep_larger_ordering=keep_larger)
    base_table = records([(k, ts, False) for k, ts in base], "0") if has_base else None
    scan = LogScan()
    for pos, b in enumerate(blocks):
        if b[0] == "data":
            scan.data.append((pos, records(b[1], str(pos + 1))))
        else:
            scan.deletes.append((pos, deletes(*b[1], ordering=b[2])))
    expected, _ = merge_slice(base_table, scan, WITH_FLAG, spec)

    state = log_state(scan, WITH_FLAG, spec)
    side = log_side_schema(WITH_FLAG, spec)
    names = WITH_FLAG.names
    stored = base_table.column("_hoodie_record_key") if base_table is not None else None
    logs = frame(spark, log_side_rows(state, "f1", stored, 1234, WITH_FLAG, side))
    base_df = None
    if base_table is not None:
        base_df = frame(spark, base_table.append_column(BASE_ROW, pa.array(range(base_table.num_rows), pa.int64()))) \
            .withColumn(BASE_SIZE, F.lit(1234).cast("long"))
        if with_names:  # base files of equal sizes: the file name tells them apart
            base_df = base_df.withColumn(FILE_ID, F.lit("f1_0-1-2_001.parquet"))
    out = merged_records(base_df, logs, names, spec)
    def rows(records):
        return sorted((r["_hoodie_record_key"], r["ts"], r["val"]) for r in records)

    assert rows(out.collect()) == rows(expected.to_pylist())
    # a filter on the merged records gives the merged records that pass it (Spark pushes it into
    # the base side where the payload allows)
    assert rows(out.where("ts >= 2").collect()) == rows(r for r in expected.to_pylist() if r["ts"] >= 2)
    if base_df is not None and filters_reach_base_files(spec):
        # the replaced base rows as bitmaps, where no log delete's ordering value decides: the same
        bitmaps = replaced_rows(logs.where(F.col(LOG_BASE_ROW).isNotNull()), file_id=LOG_FILE_ID,
                                size=LOG_BASE_SIZE, row=LOG_BASE_ROW, ordering=True)
        deciding = any(not r[LOG_RECORD] and r[LOG_DELETE_ORDER] is not None
                       for r in logs.where(F.col(LOG_BASE_ROW).isNotNull()).collect())
        assert (bitmaps is None) == deciding
        if bitmaps is not None:
            replaced = replaced_filter(bitmaps, size=BASE_SIZE, row=BASE_ROW,
                                       file_name=FILE_ID if with_names else None)
            by_bitmap = merged_records(base_df, logs, names, spec, replaced=replaced)
            assert rows(by_bitmap.collect()) == rows(expected.to_pylist())


def test_base_files_of_equal_size_are_told_apart_by_name(spark):
    """Two base files of the same size hold records at the same positions; a log record of one file
    replaces its record only."""
    spec = MergeSpec("ts")
    side = log_side_schema(WITH_FLAG, spec)
    update = LogScan(data=[(0, records([("a", 3, False)], "2"))])
    stored = pa.chunked_array([pa.array(["a", "b"])])
    logs = frame(spark, log_side_rows(log_state(update, WITH_FLAG, spec), "fa", stored, 100, WITH_FLAG, side))
    parts = []
    for fid, keys in (("fa", ["a", "b"]), ("fb", ["c", "d"])):
        rows = records([(k, 1, False) for k in keys], "1").append_column(BASE_ROW, pa.array([0, 1], pa.int64()))
        parts.append(frame(spark, rows).withColumn(BASE_SIZE, F.lit(100).cast("long"))
                     .withColumn(FILE_ID, F.lit(f"{fid}_0-1-2_1.parquet")))
    out = merged_records(parts[0].unionByName(parts[1]), logs, WITH_FLAG.names, spec)
    assert sorted((r["_hoodie_record_key"], r["ts"]) for r in out.collect()) == \
        [("a", 3), ("b", 1), ("c", 1), ("d", 1)]
    without_names = merged_records(parts[0].unionByName(parts[1]).drop(FILE_ID), logs, WITH_FLAG.names, spec)
    assert len(without_names.collect()) == 3  # what the name prevents: "c" taken for "a"
