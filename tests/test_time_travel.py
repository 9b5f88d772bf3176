"""Time travel and incremental pulls against a model that remembers every snapshot, with cleaning.

The model keeps, after each commit, the table it should be (key -> (row, commit time that wrote
it)). Every instant is then read back as of itself, and pairs of instants incrementally, by pyhudi
and by hudi-rs. With a small retention, the cleaner removes old slices as the writes go on: an
instant the cleaner no longer covers must fail with HudiRetentionError (never return partial
rows), and every instant from the earliest commit it retains on must still read exactly.
"""

from __future__ import annotations

import itertools

import pytest
from conftest import hudi_rs_rows
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

import pyhudi
from pyhudi.errors import HudiRetentionError
from pyhudi.timeline.archive import ArchivedTimeline
from pyhudi.timeline.avro_records import read_record
from pyhudi.timeline.instant import CLEAN

SCHEMA = T.StructType([
    T.StructField("key", T.StringType()), T.StructField("part", T.StringType()),
    T.StructField("ts", T.LongType()), T.StructField("val", T.DoubleType()),
])
PARTS = ["2024-01-01", "2024-01-02"]
_ts = itertools.count()

#: (key, value); a key always lives in the same partition here (moves are the index tests' subject)
row_st = st.tuples(st.integers(0, 15).map(lambda i: f"k{i:02d}"), st.integers(-1000, 1000).map(float))
op_st = st.one_of(
    st.tuples(st.just("upsert"), st.lists(row_st, min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.lists(row_st, min_size=1, max_size=4)),
)


def base_options(table_type: str) -> dict:
    return {
        "hoodie.table.name": "tt", "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
    }


def apply(model: dict, op: str, rows: list[tuple], instant: str) -> list[tuple]:
    """Apply a write to the model (key -> (row, commit time)); returns the batch to send."""
    batch = [(k, PARTS[int(k[1:]) % 2], next(_ts), v) for k, v in rows]
    for r in batch:  # ts grows, so the last row of a key is the one its combine keeps
        if op == "delete":
            model.pop(r[0], None)
        else:
            model[r[0]] = (r, instant)
    return batch


def latest_clean_ectr(table) -> str | None:
    """The earliest commit the newest clean retains (that clean may be archived already)."""
    records = [read_record(table.timeline.read_bytes(c)) for c in table.timeline.completed([CLEAN])]
    archived = ArchivedTimeline(table.storage)
    records += [archived.metadata(i.timestamp, CLEAN) for i in archived.instants()
                if i.action == CLEAN and i.is_completed]
    ectrs = [r["earliestCommitToRetain"] for r in records if r and r.get("earliestCommitToRetain")]
    return max(ectrs, default=None)


def rows_of(df) -> list[tuple]:
    return sorted((r["key"], r["ts"], r["val"], r["_hoodie_commit_time"]) for r in df.collect())


def expected(snapshot: dict, begin: str | None = None) -> list[tuple]:
    return sorted((r[0], r[2], r[3], t) for r, t in snapshot.values() if begin is None or t > begin)


def rs_rows(path: str, **kw) -> list[tuple]:
    return sorted((r["key"], r["ts"], r["val"], r["_hoodie_commit_time"]) for r in hudi_rs_rows(path, **kw))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])  # a shrink costs minutes of Spark writes; the example prints
@given(ops=st.lists(op_st, min_size=3, max_size=6))
def test_every_instant_reads_as_its_snapshot(spark, tmp_path_factory, table_type, ops):
    path = str(tmp_path_factory.mktemp("tt") / "t")
    options = {**base_options(table_type), "hoodie.clean.commits.retained": "2",
               "hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4",
               "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"}
    model: dict = {}
    snapshots: list[tuple[str, dict]] = []
    for op, rows in [("upsert", [("k00", 1.0)])] + ops:
        pending: dict = dict(model)
        batch = apply(pending, op, rows, "NEXT")
        if not batch:
            continue
        res = pyhudi.write(spark.createDataFrame(batch, SCHEMA), path,
                           {**options, "hoodie.datasource.write.operation": op})
        model = {k: (r, res.instant_time if t == "NEXT" else t) for k, (r, t) in pending.items()}
        snapshots.append((res.instant_time, dict(model)))
    table = pyhudi.HudiTable(path)
    writes = [i.timestamp for i in table.timeline.completed_writes()]
    latest_ectr = latest_clean_ectr(table)
    readable = []
    for instant, snap in snapshots:
        try:
            got = rows_of(pyhudi.read(spark, path, {"as.of.instant": instant}))
        except HudiRetentionError:
            assert latest_ectr is not None and instant < latest_ectr, f"{instant} is retained yet refused"
            continue
        assert got == expected(snap), f"time travel to {instant}"
        readable.append((instant, snap))
        if instant in writes:  # hudi-rs knows only the active timeline
            assert rs_rows(path, as_of=instant) == expected(snap), f"hudi-rs time travel to {instant}"
    assert readable and readable[-1][0] == snapshots[-1][0]
    # incremental pulls: from the start, and between every pair of readable instants
    pairs = [("000", readable[0][0])] + [(a[0], b[0]) for i, a in enumerate(readable) for b in readable[i:]]
    by_instant = dict(snapshots)
    first_active = table.timeline.first_data_instant_time()
    for begin, end in pairs:
        opts = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": begin,
                "hoodie.datasource.read.end.instanttime": end}
        try:
            got = rows_of(pyhudi.read(spark, path, opts))
        except HudiRetentionError:  # Hudi's rule: a pull from before the active timeline has no metadata
            # (a pull from the beginning is the snapshot as of its end, readable here)
            assert begin != "000" and begin < first_active, f"pull ({begin}, {end}] of readable instants refused"
            continue
        want = expected(by_instant[end], None if begin == "000" else begin)
        assert got == want, f"incremental ({begin}, {end}]"
        if begin != "000" and begin in writes:
            assert rs_rows(path, start=begin, end=end) == want, f"hudi-rs incremental ({begin}, {end}]"
