"""Frames Spark holds as Arrow on the driver (a pandas or Arrow frame past
``spark.sql.execution.arrow.localRelationThreshold``): their batches come to Python without a Spark
job (:func:`pyhudi.spark.local_batch.held_arrow`), are keyed with pyarrow
(:mod:`pyhudi.keygen.arrow_keys`) as Spark's expressions key them, and written on the driver; the
table is the one the two-job path writes."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal

import pandas as pd
import pyarrow as pa
import pyspark
import pytest
from conftest import snapshot, spark_jobs_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_small_batch import PARTITIONED, commits, layout, rows, write_sequence

THRESHOLD = "spark.sql.execution.arrow.localRelationThreshold"


@contextlib.contextmanager
def held_frames(spark, *, large_types: bool = False, batch_rows: int | None = None):
    """Every pandas frame made inside is held as Arrow batches (of ``batch_rows`` rows), not turned
    into a local relation."""
    confs = {THRESHOLD: "0"}
    if large_types:
        confs["spark.sql.execution.arrow.useLargeVarTypes"] = "true"
    if batch_rows is not None:
        confs["spark.sql.execution.arrow.maxRecordsPerBatch"] = str(batch_rows)
    before = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _plain_frame() -> pd.DataFrame:
    at = dt.datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=dt.timezone.utc)
    return pd.DataFrame({
        "s": ["a", "é/%", None, ""], "l": [1, -(2 ** 63), None, 7], "d": [1.5, float("nan"), None, -0.0],
        "b": [True, False, None, True], "bin": [b"\x00\xff", b"", None, b"x"],
        "day": [dt.date(2026, 1, 2), dt.date(1900, 1, 1), None, dt.date(2026, 1, 2)],
        "dec": [decimal.Decimal("12.34"), decimal.Decimal("-0.01"), None, decimal.Decimal("0")],
        "at": [at, at - dt.timedelta(days=20000), None, at]}, dtype=object)


SCHEMA = "s string, l long, d double, b boolean, bin binary, day date, dec decimal(10,2), at timestamp"


@pytest.mark.parametrize("kind", ["offsets32", "offsets64", "local"])
def test_a_held_frame_comes_to_python_as_toarrow_gives_it_without_a_spark_job(spark, kind):
    from pyhudi.spark.compat import collect_arrow
    from pyhudi.spark.local_batch import held_arrow

    rows = pd.concat([_plain_frame()] * 3, ignore_index=True)
    if kind == "local":  # a local relation: its rows turned into Arrow by the JVM
        frame = spark.createDataFrame(rows, SCHEMA)
        assert frame._jdf.queryExecution().analyzed().getClass().getSimpleName() == "LocalRelation"
    else:
        with held_frames(spark, large_types=kind == "offsets64"):
            frame = spark.createDataFrame(rows, SCHEMA)
    held = held_arrow(frame)
    assert held is not None and held.nbytes > 0
    got: list = []
    assert spark_jobs_of(spark, f"pyhudi-held-{kind}", lambda: got.append(held.fetch())) == 0
    expected = collect_arrow(frame)
    assert got[0].schema == expected.schema
    assert got[0].num_rows == 12

    def values(table):  # floats by repr: NaN equals itself, -0.0 differs from 0.0
        return [{k: repr(v) if isinstance(v, float) else v for k, v in r.items()} for r in table.to_pylist()]

    assert values(got[0]) == values(expected)


def test_one_row_batches_of_64_bit_offsets_are_read_right_or_not_at_all(spark):
    """A batch of one row with 64-bit offsets also validates read with 32-bit ones, as other
    strings: the two readings differ, and the rows are left to Spark."""
    from pyhudi.spark.local_batch import held_arrow

    with held_frames(spark, large_types=True, batch_rows=1):
        frame = spark.createDataFrame(pd.DataFrame({"k": [1, 2], "s": ["ab", "c"]}, dtype=object),
                                      "k long, s string")
    held = held_arrow(frame)
    assert held is not None
    if int(pyspark.__version__.split(".")[0]) < 4:  # (PySpark 3.5 sends 32-bit offsets whatever the option)
        return
    assert held.fetch() is None
    with held_frames(spark, large_types=True, batch_rows=1):  # empty strings read alike either way
        same = spark.createDataFrame(pd.DataFrame({"d": [float("nan"), 1.0], "s": ["", ""]}, dtype=object),
                                     "d double, s string")
    held = held_arrow(same)
    assert held is not None
    got = held.fetch()
    assert got is not None and got.column("s").to_pylist() == ["", ""] and got.num_rows == 2


def test_a_jvm_without_the_calls_a_fetch_needs_leaves_the_rows_to_spark(spark, tmp_path, monkeypatch):
    from py4j.protocol import Py4JError

    import pyhudi
    from pyhudi.spark import local_batch

    def missing(*_args):
        raise Py4JError("Method toBatchIterator does not exist")

    monkeypatch.setattr(local_batch, "arrow_batches", missing)
    path = str(tmp_path / "t")
    frame = _frame(spark, range(5), 1)
    held = local_batch.held_arrow(frame)
    assert held is not None and held.fetch() is None
    pyhudi.write(frame, path, PARTITIONED)
    assert sorted(r["key"] for r in rows(path)) == [f"k{k:04d}" for k in range(5)]


def test_batches_that_do_not_all_arrive_are_not_taken(spark, monkeypatch):
    from pyhudi.spark import local_batch

    with held_frames(spark, batch_rows=2):
        frame = spark.createDataFrame(_plain_frame(), SCHEMA)
    served = local_batch.serve_bytes
    monkeypatch.setattr(local_batch, "serve_bytes", lambda jvm, items: served(jvm, items)[:-1])
    held = local_batch.held_arrow(frame)
    assert held is not None and held.fetch() is None
    local = local_batch.held_arrow(spark.createDataFrame(_plain_frame(), SCHEMA))
    assert local is not None and local.fetch() is None


@pytest.mark.skipif(int(pyspark.__version__.split(".")[0]) < 4, reason="PySpark 4 makes frames from Arrow tables")
def test_a_frame_made_from_an_arrow_table_is_held(spark):
    from pyhudi.spark.compat import collect_arrow
    from pyhudi.spark.local_batch import held_arrow

    table = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "s": ["a", None, "c"]})
    with held_frames(spark):
        frame = spark.createDataFrame(table)
    held = held_arrow(frame)
    assert held is not None and not held.local
    assert held.fetch().equals(collect_arrow(frame))


def test_only_a_frame_exactly_as_held_is_taken(spark):
    from pyhudi.spark.local_batch import held_arrow

    local = spark.createDataFrame(_plain_frame(), SCHEMA)
    assert held_arrow(local) is not None  # a local relation
    assert held_arrow(local.select("s")) is None
    with held_frames(spark):
        held = spark.createDataFrame(_plain_frame(), SCHEMA)
        nested = spark.createDataFrame(pd.DataFrame({"a": [[1, 2]]}), "a array<long>")
    assert held_arrow(held) is not None
    assert held_arrow(held.select("s", "l")) is None  # a projection: Spark computes it
    assert held_arrow(held.where("l > 0")) is None
    assert held_arrow(nested) is None
    assert held_arrow(spark.range(3)) is None


# -- keys: pyarrow against Spark's expressions ---------------------------------------------------
_TEXT = st.one_of(st.none(), st.just(""), st.text(alphabet="ab/%=:,é \x01#?", max_size=4))
#: keys mostly present, so that most examples compare keys rather than one refusal
_KEY_TEXT = st.one_of(st.text(alphabet="ab/%=:,é \x01#?", min_size=1, max_size=4), _TEXT)
_ROWS = st.lists(st.tuples(_KEY_TEXT, st.one_of(st.integers(-(2 ** 63), 2 ** 63 - 1), st.none()), _TEXT,
                           st.one_of(st.none(), st.integers(-5, 5))), min_size=1, max_size=6)
_KEYGENS = {
    "simple": {"hoodie.datasource.write.recordkey.field": "k1", "hoodie.datasource.write.partitionpath.field": "p1"},
    "simple-int-hive-encoded": {
        "hoodie.datasource.write.recordkey.field": "k2", "hoodie.datasource.write.partitionpath.field": "p1",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.partitionpath.urlencode": "true"},
    "complex": {"hoodie.datasource.write.recordkey.field": "k1,k2",
                "hoodie.datasource.write.partitionpath.field": "p1,p2",
                "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
                "hoodie.datasource.write.partitionpath.urlencode": "true"},
    "complex-one-field": {"hoodie.datasource.write.recordkey.field": "k1",
                          "hoodie.datasource.write.partitionpath.field": "p2",
                          "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
                          "hoodie.datasource.write.hive_style_partitioning": "true"},
    "non-partitioned": {"hoodie.datasource.write.recordkey.field": "k2",
                        "hoodie.datasource.write.keygenerator.class":
                            "org.apache.hudi.keygen.NonpartitionedKeyGenerator"},
    "custom": {"hoodie.datasource.write.recordkey.field": "k1,k2",
               "hoodie.datasource.write.partitionpath.field": "p1:SIMPLE,p2:SIMPLE",
               "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator"},
}


@pytest.mark.parametrize("keygen", sorted(_KEYGENS))
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(values=_ROWS)
def test_pyarrow_keys_are_sparks(spark, keygen, values):
    """The record keys and partition paths of random rows (nulls, empty strings, characters a path
    escapes, extreme integers) as pyarrow makes them and as Spark's expressions make them, or the
    same refusal of a row without a key."""
    from pyhudi import HudiKeyError
    from pyhudi.config import HudiConfig
    from pyhudi.io.avro_schema import PARTITION_PATH, RECORD_KEY
    from pyhudi.keygen import arrow_keys
    from pyhudi.keygen.spec import resolve_keygen
    from pyhudi.spark.errors import translate
    from pyhudi.spark.keygen import key_columns
    from pyhudi.spark.local_batch import collect_local

    spec = resolve_keygen(HudiConfig({"hoodie.table.name": "t", **_KEYGENS[keygen]}))
    frame = spark.createDataFrame(pd.DataFrame(values, columns=["k1", "k2", "p1", "p2"], dtype=object),
                                  "k1 string, k2 long, p1 string, p2 int")
    table = pa.Table.from_pylist([dict(zip(["k1", "k2", "p1", "p2"], v)) for v in values],
                                 schema=pa.schema([("k1", pa.string()), ("k2", pa.int64()), ("p1", pa.string()),
                                                   ("p2", pa.int32())]))
    assert arrow_keys.renders(spec, table.schema)
    keyed = frame.select(*key_columns(frame, spec, key_col=RECORD_KEY, partition_col=PARTITION_PATH).values())
    try:
        expected = collect_local(keyed)
    except Exception as exc:  # noqa: BLE001 - the key generator's refusal
        refusal = translate(exc)
        assert isinstance(refusal, HudiKeyError), exc
        with pytest.raises(HudiKeyError) as got:
            arrow_keys.record_keys(table, spec)
        assert str(got.value) == str(refusal)
        return
    assert expected is not None
    assert arrow_keys.record_keys(table, spec).to_pylist() == expected.column(0).to_pylist()
    assert arrow_keys.partition_paths(table, spec).to_pylist() == expected.column(1).to_pylist()


def test_every_character_a_path_escapes_is_escaped_as_hudi_escapes_it():
    from pyhudi.config import HudiConfig
    from pyhudi.keygen import arrow_keys
    from pyhudi.keygen.spec import _ESCAPED, escape_partition_value, resolve_keygen

    spec = resolve_keygen(HudiConfig({"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "p",
                                      "hoodie.datasource.write.partitionpath.field": "p",
                                      "hoodie.datasource.write.partitionpath.urlencode": "true"}))
    values = ["".join(sorted(_ESCAPED)) + "aé%25", "%", "a/b"]
    got = arrow_keys.partition_paths(pa.table({"p": values}), spec).to_pylist()
    assert got == [escape_partition_value(v) for v in values]
    assert got[1] == "%25" and got[2] == "a%2Fb"


def test_timestamp_keys_and_generated_keys_are_left_to_spark():
    from pyhudi.config import HudiConfig
    from pyhudi.keygen import arrow_keys
    from pyhudi.keygen.spec import resolve_keygen

    schema = pa.schema([("k", pa.string()), ("d", pa.float64()), ("t", pa.int64())])
    assert not arrow_keys.renders(resolve_keygen(HudiConfig({
        "hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "d"})), schema)
    assert not arrow_keys.renders(resolve_keygen(HudiConfig({
        "hoodie.table.name": "t", "hoodie.datasource.write.partitionpath.field": "t"})), schema)
    assert not arrow_keys.renders(resolve_keygen(HudiConfig({
        "hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "k",
        "hoodie.datasource.write.partitionpath.field": "t",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd"})), schema)


# -- writes --------------------------------------------------------------------------------------
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize(("index", "partitioned"), [("SIMPLE", True), ("BLOOM", False), ("BUCKET", True)])
def test_held_frames_write_the_table_the_two_job_path_writes(spark, tmp_path, table_type, index, partitioned):
    """An insert, an upsert and a delete of held frames: the insert and the upsert keyed with
    pyarrow (no Spark job), the delete by Spark's projection (one); the table is the two-job path's."""
    held, spread = str(tmp_path / "held"), str(tmp_path / "spread")
    with held_frames(spark, batch_rows=7):
        jobs = spark_jobs_of(spark, f"pyhudi-held-{table_type}-{index}",
                             lambda: write_sequence(spark, held, table_type, index, partitioned, None))
    assert jobs == 1
    write_sequence(spark, spread, table_type, index, partitioned, "0")
    on_driver, two_jobs = commits(held), commits(spread)
    assert [c[1] for c in on_driver] == [True] * 3 and [c[1] for c in two_jobs] == [False] * 3
    assert [(c[0], c[2]) for c in on_driver] == [(c[0], c[2]) for c in two_jobs]
    assert layout(held) == layout(spread)
    assert rows(held) == rows(spread)


def _frame(spark, keys, ts, *, key=lambda k: f"k{k:04d}", extra=None):
    """Rows of ``keys`` written at ``ts`` (a list: per row, None for none)."""
    stamps = ts if isinstance(ts, list) else [ts] * len(keys)
    data = {"key": [key(k) for k in keys], "part": [f"p{k % 3}" for k in keys],
            "ts": pd.Series(stamps, dtype="Int64"), "at": [None] * len(keys),
            "v": [f"v{t}-{k}" for k, t in zip(keys, stamps)], **(extra or {})}
    schema = "key string, part string, ts long, at timestamp, v string" + (
        "".join(f", {c} boolean" for c in extra) if extra else "")
    return spark.createDataFrame(pd.DataFrame(data), schema)


@pytest.mark.parametrize("held", [True, False], ids=["held", "local"])
def test_rows_keyed_on_the_driver_are_those_sparks_projection_collects(spark, held):
    from pyhudi.config import HudiConfig
    from pyhudi.keygen.spec import resolve_keygen
    from pyhudi.read.payloads import MergeSpec
    from pyhudi.spark.compat import collect_arrow
    from pyhudi.spark.local_batch import held_arrow
    from pyhudi.spark.prepare import prepared
    from pyhudi.spark.small_write import keyed_on_driver

    spec = resolve_keygen(HudiConfig(PARTITIONED))
    with held_frames(spark) if held else contextlib.nullcontext():
        frame = _frame(spark, range(7), 3)
    merge = MergeSpec.of("ts", None)
    expected = collect_arrow(prepared(frame, spec, merge_spec=merge, ordering_field="ts", operation="upsert",
                                      instant=None))
    source = held_arrow(frame)
    assert source is not None
    got = keyed_on_driver(source, spec, merge_spec=merge, ordering_field="ts", operation="upsert")
    assert got is not None
    assert got.schema.equals(expected.schema) and got.equals(expected)


def test_an_upsert_of_a_held_frame_runs_no_spark_job(spark, tmp_path):
    import pyhudi

    path = str(tmp_path / "t")
    pyhudi.write(_frame(spark, range(30), 1), path, PARTITIONED)
    with held_frames(spark):
        upsert = _frame(spark, range(20, 50), 2)
    jobs = spark_jobs_of(spark, "pyhudi-held-upsert", lambda: pyhudi.write(upsert, path, PARTITIONED))
    assert jobs == 0
    got = {r["key"]: r["v"] for r in rows(path)}
    assert got == {f"k{k:04d}": f"v{1 if k < 20 else 2}-{k}" for k in range(50)}


@pytest.mark.parametrize("bad", ["key", "ordering"])
def test_a_held_frame_without_a_key_or_ordering_value_is_refused_before_anything_is_written(spark, tmp_path, bad):
    import pyhudi

    path = tmp_path / "t"
    pyhudi.write(_frame(spark, range(4), 1), str(path), PARTITIONED)
    before = snapshot(path)
    with held_frames(spark):
        frame = _frame(spark, range(3), 2, key=lambda k: None if k == 1 else f"k{k}") if bad == "key" else \
            _frame(spark, range(3), [2, None, 2])
    message = "record key field 'key' is null or empty" if bad == "key" else "precombine field 'ts'"
    with pytest.raises(pyhudi.HudiKeyError, match=message):
        pyhudi.write(frame, str(path), PARTITIONED)
    assert snapshot(path) == before


def test_of_two_versions_of_a_key_with_one_ordering_value_the_later_wins(spark, tmp_path):
    """Rows keep their order across the held batches: of versions with the same ordering value
    the last one in the frame wins, as Hudi's preCombine lets the later arrival win."""
    import pyhudi

    path = str(tmp_path / "t")
    pyhudi.write(_frame(spark, range(3), 1), path, PARTITIONED)
    with held_frames(spark, batch_rows=2):
        frame = spark.createDataFrame(pd.DataFrame({
            "key": ["k0000", "k0001", "k0000", "k0002", "k0000"], "part": ["p0", "p1", "p0", "p2", "p0"],
            "ts": [5, 5, 5, 5, 5], "at": [None] * 5, "v": ["a", "b", "c", "d", "e"]}, dtype=object),
            "key string, part string, ts long, at timestamp, v string")
    assert spark_jobs_of(spark, "pyhudi-held-order", lambda: pyhudi.write(frame, path, PARTITIONED)) == 0
    assert {r["key"]: r["v"] for r in rows(path)} == {"k0000": "e", "k0001": "b", "k0002": "d"}


def test_a_held_frame_past_its_threshold_takes_the_two_job_path(spark, tmp_path):
    import pyhudi

    path = str(tmp_path / "t")
    pyhudi.write(_frame(spark, range(6), 1), path, PARTITIONED)
    with held_frames(spark):
        frame = _frame(spark, range(3, 9), 2)
    pyhudi.write(frame, path, {**PARTITIONED, "pyhudi.write.small.batch.held.bytes": "1"})
    assert [c[1] for c in commits(path)] == [True, False]
    assert {r["key"]: r["v"] for r in rows(path)} == {f"k{k:04d}": f"v{1 if k < 3 else 2}-{k}" for k in range(9)}


def test_a_held_frame_with_a_delete_column_is_keyed_by_spark(spark, tmp_path):
    """``_hoodie_is_deleted`` marks deletes by an expression of Spark's: the rows are keyed and
    collected by one Spark job, and the deletes applied."""
    import pyhudi

    path = str(tmp_path / "t")
    pyhudi.write(_frame(spark, range(6), 1), path, PARTITIONED)
    with held_frames(spark):
        frame = _frame(spark, range(4), 2, extra={"_hoodie_is_deleted": [k % 2 == 0 for k in range(4)]})
    jobs = spark_jobs_of(spark, "pyhudi-held-deletes", lambda: pyhudi.write(frame, path, PARTITIONED))
    assert jobs == 1
    assert sorted(r["key"] for r in rows(path)) == ["k0001", "k0003", "k0004", "k0005"]
