"""Random sequences of writes against a plain in-memory model, read back by pyhudi and hudi-rs.

The model is a dict from the record's identity (key, or key + partition for a non-global index)
to its row. Every write is followed by a full comparison through both readers, so a wrong merge,
a lost file group or a visible uncommitted file shows up as a diff.
"""

from __future__ import annotations

import itertools

import pytest
from conftest import hudi_rs_rows, pyhudi_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

import pyhudi
from pyhudi.cli.metadata import validate, validate_text

SCHEMA = T.StructType([
    T.StructField("key", T.StringType()), T.StructField("part", T.StringType()),
    T.StructField("ts", T.LongType()), T.StructField("val", T.DoubleType()),
    T.StructField("_hoodie_is_deleted", T.BooleanType()),
])
PARTS = ["2024-01-01", "2024-01-02", "2024-01-03"]
_counter = itertools.count()


def key_st():
    return st.integers(0, 40).map(lambda i: f"k{i:03d}")


#: (key, partition, value, soft-deleted via _hoodie_is_deleted)
row_st = st.tuples(key_st(), st.sampled_from(PARTS), st.floats(-1e6, 1e6, allow_nan=False),
                   st.sampled_from([False, False, False, True]))

op_st = st.one_of(
    st.tuples(st.just("bulk_insert"), st.lists(row_st, min_size=1, max_size=25)),
    st.tuples(st.just("insert"), st.lists(row_st, min_size=1, max_size=25)),
    st.tuples(st.just("upsert"), st.lists(row_st, min_size=1, max_size=25)),
    st.tuples(st.just("delete"), st.lists(row_st, min_size=1, max_size=10)),
    st.tuples(st.just("insert_overwrite"), st.lists(row_st, min_size=1, max_size=15)),
    st.tuples(st.just("delete_partition"), st.lists(row_st, min_size=1, max_size=2)),
    st.tuples(st.just("cluster"), st.sampled_from([[], [("val,ts", "z-order")], [("ts", "linear")],
                                                   [("val,ts", "hilbert")]])),
)

#: clustering: every file slice of these tests is small, so each run rewrites the whole table
CLUSTER_OPTIONS = {"hoodie.clustering.plan.strategy.max.bytes.per.group": str(200 * 1024)}


def run_clustering(spark, path: str, options: dict, how: list, *, storage_options: dict | None = None) -> None:
    """A clustering scheduled and run at once (the model does not change); BUCKET tables are not clustered."""
    if options.get("hoodie.index.type") == "BUCKET" or not pyhudi.HudiTable.exists(path,
                                                                                 storage_options=storage_options):
        return
    extra = {"hoodie.clustering.plan.strategy.sort.columns": how[0][0],
             "hoodie.layout.optimize.strategy": how[0][1]} if how else {}
    pyhudi.cluster(spark, path, {**options, **CLUSTER_OPTIONS, **extra})

SIZING = {
    "default": {},
    "tiny files": {"hoodie.index.bloom.num_entries": "50", "hoodie.parquet.max.file.size": "6000",
                   "hoodie.parquet.small.file.limit": "4000", "hoodie.copyonwrite.record.size.estimate": "300"},
    "no small files": {"hoodie.parquet.small.file.limit": "0", "hoodie.copyonwrite.insert.split.size": "7",
                       "hoodie.copyonwrite.insert.auto.split": "false"},
}


def _ident(key: str, part: str, global_index: bool):
    return key if global_index else (key, part)


def apply(model: dict, op: str, rows: list[tuple], global_index: bool, update_partition: bool) -> list[tuple]:
    """Apply an operation to the model; returns the batch actually sent (with ts assigned)."""
    batch = []
    for key, part, val, deleted in rows:
        batch.append((key, part, next(_counter), float(val), bool(deleted)))
    if op in ("bulk_insert", "insert"):
        # fresh identities only (Hudi does not look up existing keys on these paths), unique in batch
        seen, fresh = set(), []
        for r in batch:
            ident = _ident(r[0], r[1], global_index)
            existing_keys = {k if global_index else k[0] for k in model}
            if ident in model or ident in seen or r[0] in existing_keys and global_index:
                continue
            seen.add(ident)
            fresh.append(r)
        batch = fresh
        for r in batch:
            if not r[4]:
                model[_ident(r[0], r[1], global_index)] = r
    elif op == "upsert":
        latest: dict = {}
        for r in batch:  # combine: the largest ordering value wins inside one batch
            ident = _ident(r[0], r[1], global_index)
            if ident not in latest or r[2] > latest[ident][2]:
                latest[ident] = r
        for ident, r in latest.items():
            if global_index and ident in model and model[ident][1] != r[1] and not update_partition:
                r = (r[0], model[ident][1], r[2], r[3], r[4])  # updated in place, old partition kept
                r_store = (r[0], model[ident][1], r[2], r[3], r[4])
            else:
                r_store = r
            if r[4]:
                model.pop(ident, None)
            else:
                model[ident] = r_store
    elif op == "insert_overwrite":  # every partition with a record in the batch, soft-deleted or not
        batch = _overwriting(model, batch, global_index)
        touched = {r[1] for r in batch}
        for ident in [i for i, r in model.items() if r[1] in touched]:
            del model[ident]
        for r in batch:
            if not r[4]:
                model[_ident(r[0], r[1], global_index)] = r
    elif op == "delete_partition":  # the partitions of the batch's records are emptied
        touched = {r[1] for r in batch}
        for ident in [i for i, r in model.items() if r[1] in touched]:
            del model[ident]
    else:  # delete
        for r in batch:
            model.pop(_ident(r[0], r[1], global_index), None)
    return batch


def _overwriting(model: dict, batch: list[tuple], global_index: bool) -> list[tuple]:
    """The rows of an insert_overwrite the model can follow: soft-deleted rows (they only name a
    partition to empty), one live row per identity (an insert keeps duplicates), and, under a
    global index, no live key the table keeps in a partition the batch does not replace (Hudi
    would then hold the key twice)."""
    deleted = [r for r in batch if r[4]]
    live = list({_ident(r[0], r[1], global_index): r for r in batch if not r[4]}.values())
    while global_index:
        touched = {r[1] for r in live + deleted}
        kept = [r for r in live if r[0] not in model or model[r[0]][1] in touched]
        if len(kept) == len(live):
            break
        live = kept
    return deleted + live


def check(spark, path: str, model: dict, global_index: bool, update_partition: bool, *, hudi_rs: bool = True) -> None:
    expected = sorted((r[0], r[2], r[3]) for r in model.values())
    table = pyhudi.HudiTable(path)
    assert table.metadata_listing() is not None, "the metadata table is kept and usable (the default)"
    in_step = validate(table)
    assert in_step.agrees, validate_text(in_step)
    ours = pyhudi_rows(spark, path)
    assert sorted((r["key"], r["ts"], r["val"]) for r in ours) == expected
    for r in ours:
        assert r["_hoodie_record_key"] == r["key"]
        if not (global_index and not update_partition):
            assert r["_hoodie_partition_path"] == r["part"]
    if not hudi_rs:
        return
    theirs = hudi_rs_rows(path)
    assert sorted((r["key"], r["ts"], r["val"]) for r in theirs) == expected


#: ":distributed" runs the index with pyhudi.write.partition.local=false: Hudi's chain of Spark
#: stages, which pyhudi takes for SIMPLE, BLOOM and BUCKET only when a partition gets very many records
INDEXES = ["SIMPLE", "SIMPLE:distributed", "GLOBAL_SIMPLE", "BLOOM", "BLOOM:distributed", "GLOBAL_BLOOM", "BUCKET",
           "BUCKET:distributed", "RECORD_INDEX"]


def index_options(param: str) -> tuple[str, dict[str, str]]:
    """(index type, options) of an :data:`INDEXES` entry."""
    index, _, mode = param.partition(":")
    options = {"hoodie.index.type": index}
    if mode == "distributed":
        options["pyhudi.write.partition.local"] = "false"
    return index, options


# derandomized: every index type gets the very same sequences, so they must all build the same table
@pytest.mark.parametrize("index", INDEXES)
@settings(max_examples=7, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(op_st, min_size=1, max_size=4), sizing=st.sampled_from(sorted(SIZING)),
       update_partition=st.booleans())
def test_random_operations_match_model(spark, tmp_path_factory, index, ops, sizing, update_partition):
    run_model(spark, tmp_path_factory, index, ops, sizing, update_partition, version="6")


# table version 9 (Hudi 1.1's format): the first sequences of the same strategy, every index
@pytest.mark.parametrize("index", INDEXES)
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(op_st, min_size=1, max_size=4), sizing=st.sampled_from(sorted(SIZING)),
       update_partition=st.booleans())
def test_random_operations_match_model_on_version_9(spark, tmp_path_factory, index, ops, sizing, update_partition):
    run_model(spark, tmp_path_factory, index, ops, sizing, update_partition, version="9")


def run_model(spark, tmp_path_factory, index: str, ops: list, sizing: str, update_partition: bool, *,
              version: str) -> None:
    """One random sequence of operations on a copy-on-write table of ``version``, each checked."""
    path = str(tmp_path_factory.mktemp("model") / "t")
    index, index_opts = index_options(index)
    global_index = index.startswith("GLOBAL_") or index == "RECORD_INDEX"
    options = {
        "hoodie.table.name": "model", "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
        **index_opts, "hoodie.simple.index.update.partition.path": str(update_partition).lower(),
        "hoodie.bloom.index.update.partition.path": str(update_partition).lower(),
        "hoodie.bucket.index.num.buckets": "3", "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.index.bloom.filter.enable": "true",
        # the record index maps a key to one place: it is kept for tables whose keys are unique
        "hoodie.metadata.record.index.enable": str(global_index).lower(),
        "hoodie.record.index.update.partition.path": str(update_partition).lower(),
        "hoodie.metadata.record.index.min.filegroup.count": "3", "hoodie.metadata.compact.max.delta.commits": "3",
        "hoodie.write.table.version": version, **SIZING[sizing],
    }
    model: dict = {}
    for op, rows in ops:
        if op == "cluster":
            run_clustering(spark, path, options, rows)
            if pyhudi.HudiTable.exists(path):
                check(spark, path, model, global_index, update_partition)
            continue
        batch = apply(model, op, rows, global_index, update_partition)
        if not batch:
            continue
        df = spark.createDataFrame(batch, SCHEMA)
        res = pyhudi.write(df, path, {**options, "hoodie.datasource.write.operation": op})
        if not pyhudi.HudiTable.exists(path):  # a delete before the first write creates nothing
            assert op in ("delete", "delete_partition") and not model
            continue
        table = pyhudi.HudiTable(path)
        assert table.config.version == int(version)
        assert res.instant_time is None or table.timeline.is_completed(res.instant_time)
        check(spark, path, model, global_index, update_partition)
