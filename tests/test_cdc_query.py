"""CDC queries (``hoodie.datasource.query.incremental.format=cdc``) as Apache Hudi answers them.

Hudi's behaviour followed (cited from its source, master of mid-2024):

- columns ``op``, ``ts_ms``, ``before``, ``after``, all strings (``CDCRelation.FULL_CDC_SPARK_SCHEMA``,
  ``HoodieCDCUtils.CDC_COLUMNS``); ``ts_ms`` is the instant time of the split
  (``CDCFileGroupIterator.resetRecordFormat``); ops 'i', 'u', 'd' (``HoodieCDCOperation``);
- the range: begin exclusive, end inclusive (``CDCRelation``: ``InstantRange.RangeType.OPEN_CLOSED``);
  commits, delta commits and replace commits whose operation yields changes
  (``HoodieCDCExtractor.initInstantAndCommitMetadata``, ``WriteOperationType.yieldChanges``): a
  compaction is no change;
- one split per (instant, file group) with its inference case (``HoodieCDCExtractor.parseWriteStat``,
  ``HoodieCDCInferenceCase``); images read from file slices are every table column, meta columns
  included (``InternalRowToJsonStringConverter``), images from CDC files the columns without meta
  fields (``HoodieCDCLogger``: ``removeMetadataFields``; ``HoodieCDCUtils.recordToJson``);
- an upsert of a record is 'u' even when its values are unchanged (``HoodieMergeHandleWithChangeLog
  .writeUpdateRecord`` logs every update; ``CDCFileGroupIterator.loadNextLogRecord`` compares whole
  records, whose commit time changed); insert_overwrite and delete_partition delete every record of the
  replaced file groups ('d') and insert the new ones ('i') (``REPLACE_COMMIT``, ``BASE_FILE_INSERT``);
- the three CDC file layouts (``HoodieCDCUtils.schemaBySupplementalLoggingMode``) and how each gets
  its images (``CDCFileGroupIterator.loadNext``, case ``AS_IS``).

Where Hudi refuses a table without CDC logging ("It isn't a CDC hudi table",
``CDCRelation.getCDCRelation``), pyhudi answers from the file slices, and says clearly when it
cannot (slices cleaned, instants archived): those tests are at the end.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pyarrow as pa
import pyspark
import pytest
from conftest import hudi_rs_rows
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import pyhudi
from pyhudi.errors import HudiConfigError, HudiRetentionError
from pyhudi.io.avro_codec import encode_datums
from pyhudi.io.log_format import BLOCK_CONTENT_VERSION, BlockType, HeaderKey, encode_block
from pyhudi.read.cdc import CDCSplit, InferenceCase, records_json, split_changes
from pyhudi.table.cdc import plan_cdc, read_cdc
from pyhudi.table.table import HudiTable
from pyhudi.timeline.commit_metadata import WriteStat

SCHEMA = "key string, part string, ts long, val string"
DATA = ("key", "part", "ts", "val")
PARTS = ("p0", "p1")
KEYS = tuple(f"k{i}" for i in range(6))  # k<i> always lives in partition p<i % 2>
CDC = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.query.incremental.format": "cdc"}
SPARK4 = int(pyspark.__version__.split(".")[0]) >= 4


def options(table_type: str, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type, "hoodie.clean.automatic": "false", **extra}


def write(spark, path: str, rows: list[tuple], opts: dict, operation: str = "upsert", **extra: str) -> str:
    res = pyhudi.write(spark.createDataFrame(rows, SCHEMA), path,
                       {**opts, **extra, "hoodie.datasource.write.operation": operation})
    return res.instant_time


def changes(rows: list[dict], *, data_only: bool = False) -> set[tuple]:
    """CDC rows as a comparable set: (op, ts_ms, key, before, after), the images parsed; with
    ``data_only`` the images keep only the data columns (images from .cdc files have no meta columns)."""
    kept = DATA if data_only else (*DATA, "_hoodie_commit_time", "_hoodie_record_key")

    def image(text: str | None) -> tuple | None:
        if text is None:
            return None
        d = json.loads(text)
        return tuple(sorted((k, d[k]) for k in d if k in kept))
    out = set()
    for r in rows:
        img = json.loads(r["before"] or r["after"])
        out.add((r["op"], r["ts_ms"], img["key"], image(r["before"]), image(r["after"])))
    return out


# -- the model ---------------------------------------------------------------------------------------
def record(key: str, ts: int, val: str, commit: str) -> tuple:
    part = PARTS[int(key[1:]) % 2]
    return tuple(sorted({"key": key, "part": part, "ts": ts, "val": val, "_hoodie_commit_time": commit,
                         "_hoodie_record_key": key}.items()))


class Model:
    """The table as a dict, and the change log Hudi defines for each commit."""

    def __init__(self) -> None:
        self.state: dict[str, tuple] = {}
        self.log: list[tuple[str, set[tuple]]] = []  # (instant, changes)

    def apply(self, op: str, arg, instant: str) -> None:
        out: set[tuple] = set()
        if op == "upsert":
            for key, ts, val in arg:
                new = record(key, ts, val, instant)
                old = self.state.get(key)
                out.add(("u" if old else "i", instant, key, old, new))
                self.state[key] = new
        elif op == "delete":
            for key in arg:
                if key in self.state:
                    out.add(("d", instant, key, self.state.pop(key), None))
        elif op == "insert_overwrite":  # every record of the overwritten partitions goes, the new ones come
            parts = {PARTS[int(k[1:]) % 2] for k, _, _ in arg}
            for key in [k for k, r in self.state.items() if dict(r)["part"] in parts]:
                out.add(("d", instant, key, self.state.pop(key), None))
            for key, ts, val in arg:
                self.state[key] = record(key, ts, val, instant)
                out.add(("i", instant, key, None, self.state[key]))
        elif op == "delete_partition":
            for key in [k for k, r in self.state.items() if dict(r)["part"] == arg]:
                out.add(("d", instant, key, self.state.pop(key), None))
        self.log.append((instant, out))

    def between(self, begin: str, end: str, when: dict[str, str] | None = None, *,
                data_only: bool = False) -> set[tuple]:
        """The changes of the commits in (begin, end]: of instant times, or of the completion times
        ``when`` gives (timeline layout 2); ``data_only``: images of the data columns only."""
        def image(rec: tuple | None) -> tuple | None:
            return None if rec is None or not data_only else tuple(kv for kv in rec if kv[0] in DATA)

        return {(op, t, key, image(b) if data_only else b, image(a) if data_only else a)
                for t, cs in self.log if begin < (when or {}).get(t, t) <= end for op, _, key, b, a in cs}


rows_of = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(1, 3), st.sampled_from(["a", "b"])),
                   min_size=1, max_size=4, unique_by=lambda r: r[0])
operation = st.one_of(
    st.tuples(st.just("upsert"), rows_of), st.tuples(st.just("upsert"), rows_of),
    st.tuples(st.just("delete"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("insert_overwrite"), rows_of),
    st.tuples(st.just("delete_partition"), st.sampled_from(PARTS)))

_COMPACTING = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"}


def _logging(mode: str) -> dict[str, str]:
    return {"hoodie.table.cdc.enabled": "true", "hoodie.table.cdc.supplemental.logging.mode": mode}


#: name -> (table type, write options); tables with CDC logging answer updates from their .cdc files
#: (AS_IS), the others from the file slices
TABLES = {"COPY_ON_WRITE": ("COPY_ON_WRITE", {}),
          # MOR: inline compaction every 2 delta commits, so that later changes read compacted slices
          "MERGE_ON_READ": ("MERGE_ON_READ", _COMPACTING),
          # table version 9: a log file per delta commit, ranges of completion times
          "MERGE_ON_READ-v9": ("MERGE_ON_READ", {**_COMPACTING, "hoodie.write.table.version": "9"}),
          # CDC logging on, in each of Hudi's supplemental logging modes
          "COPY_ON_WRITE-cdc-data_before_after": ("COPY_ON_WRITE", _logging("data_before_after")),
          "COPY_ON_WRITE-cdc-data_before": ("COPY_ON_WRITE", _logging("data_before")),
          "COPY_ON_WRITE-cdc-op_key_only": ("COPY_ON_WRITE", _logging("op_key_only")),
          "MERGE_ON_READ-cdc-data_before_after": ("MERGE_ON_READ", {**_COMPACTING, **_logging("data_before_after")})}


@pytest.mark.parametrize("table_type", list(TABLES))
def test_cdc_query_over_every_range_equals_the_model(spark, tmp_path_factory, table_type):
    """Random upserts, deletes, insert_overwrites and delete_partitions; the CDC query of every
    (begin, end] of the instants (plain Python) equals the model's change log, and the whole range
    read through pyhudi.read (Spark executors) equals it too."""
    base = tmp_path_factory.mktemp(f"cdc_model_{table_type}")
    runs: list[str] = []
    compactions: list[int] = []  # per run, the writes that are no change of the model (compactions)

    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck),
              phases=(Phase.explicit, Phase.reuse, Phase.generate))  # (shrinking costs Spark writes)
    @given(first=rows_of, ops=st.lists(operation, min_size=2, max_size=3))
    def run(first, ops):
        path = str(base / f"t{len(runs)}")
        runs.append(path)
        kind, extra = TABLES[table_type]
        opts = options(kind, **extra)
        model = Model()
        merged = False  # an upsert or delete changed stored records (a merge, which logs them on CDC tables)
        for op, arg in [("upsert", first), *ops]:
            merged |= op in ("upsert", "delete") and bool(model.log) and any(
                k in model.state for k in (arg if op == "delete" else [r[0] for r in arg]))
            if op == "delete":
                rows = [(k, PARTS[int(k[1:]) % 2], 9, "x") for k in arg]
                model.apply(op, arg, write(spark, path, rows, opts, "delete"))
            elif op == "delete_partition":
                if not any(dict(r)["part"] == arg for r in model.state.values()):
                    continue  # (a partition without records may not exist: refused, nothing written)
                model.apply(op, arg, write(spark, path, [], opts, "delete_partition",
                                           **{"hoodie.datasource.write.partitions.to.delete": arg}))
            else:
                # the ordering value grows with every write: see test_a_lower_ordering_value_in_a_later_log
                arg = [(k, 10 * len(model.log) + ts, v) for k, ts, v in arg]
                rows = [(k, PARTS[int(k[1:]) % 2], ts, v) for k, ts, v in arg]
                model.apply(op, arg, write(spark, path, rows, opts, op))
        table = HudiTable(path)
        logged = table.config.cdc_enabled
        assert logged == ("-cdc-" in table_type)
        if logged and kind == "COPY_ON_WRITE" and merged:  # the merges' changes came from .cdc files (AS_IS)
            assert any(s.cdcStats for i in table.timeline.completed_writes()
                       for s in table.timeline.commit_metadata(i).write_stats()), "no .cdc file was written"
        when = {i.timestamp: i.completion_time or i.timestamp for i in table.timeline.completed_writes()}
        instants = [when[t] for t, _ in model.log]
        bounds = ["000", *instants]
        for i, begin in enumerate(bounds):
            for end in instants[i:]:
                got = changes(read_cdc(table, begin, end).to_pylist(), data_only=logged)
                assert got == model.between(begin, end, when, data_only=logged), (begin, end)
        # the snapshot the changes lead to, as hudi-rs reads the table
        assert {r["key"]: (r["ts"], r["val"]) for r in hudi_rs_rows(path)} == \
            {k: (dict(r)["ts"], dict(r)["val"]) for k, r in model.state.items()}
        df = pyhudi.read(spark, path, {**CDC, "hoodie.datasource.read.begin.instanttime": "000"})
        assert df.columns == ["op", "ts_ms", "before", "after"]
        assert changes([r.asDict() for r in df.collect()], data_only=logged) == \
            model.between("000", instants[-1], when, data_only=logged)
        compactions.append(len(table.timeline.completed_writes()) - len(instants))
        shutil.rmtree(path)

    run()
    if TABLES[table_type][0] == "MERGE_ON_READ":  # the runs met compactions, which yield no change
        assert any(compactions), compactions


def test_a_lower_ordering_value_in_a_later_log_is_no_change(spark, tmp_path):
    """A MOR delta commit whose record has a lower ordering value than the slice's earlier log record
    of the key: the merged slice keeps the earlier record (log records precombine by ordering value,
    HoodieMergedLogRecordScanner), so pyhudi reports no change, as its snapshot shows none. (Hudi's
    CDCFileGroupIterator.loadNextLogRecord would emit 'u' with the incoming record as after image,
    which the table never holds.) A higher value is a change."""
    path = str(tmp_path / "t")
    mor = options("MERGE_ON_READ")
    write(spark, path, [("k0", "p0", 1, "a")], mor)
    write(spark, path, [("k0", "p0", 5, "b")], mor)
    low = write(spark, path, [("k0", "p0", 3, "c")], mor)
    high = write(spark, path, [("k0", "p0", 7, "d")], mor)
    table = HudiTable(path)
    assert read_cdc(table, "000", low).num_rows == 2 and not [r for r in read_cdc(table, "000").to_pylist()
                                                              if r["ts_ms"] == low]
    (row,) = [r for r in read_cdc(table, low).to_pylist()]
    assert (row["op"], row["ts_ms"], json.loads(row["before"])["val"], json.loads(row["after"])["val"]) == \
        ("u", high, "b", "d")


def test_splits_follow_hudis_inference_cases(spark, tmp_path):
    """The cases HoodieCDCExtractor.parseWriteStat gives each write of a MOR table, and the
    BASE_FILE_UPDATE pyhudi adds for a rewritten base file without a CDC file."""
    path = str(tmp_path / "t")
    mor = options("MERGE_ON_READ")
    c1 = write(spark, path, [("k0", "p0", 1, "a"), ("k2", "p0", 1, "a"), ("k1", "p1", 1, "a")], mor)
    c2 = write(spark, path, [("k0", "p0", 2, "b")], mor)  # an update: a log file
    c3 = write(spark, path, [("k3", "p1", 3, "c")], mor, "insert_overwrite")
    plan = plan_cdc(HudiTable(path), "000")
    cases = sorted((s.instant, s.case.value, s.partition_path) for s in plan.splits)
    assert cases == [(c1, "BASE_FILE_INSERT", "p0"), (c1, "BASE_FILE_INSERT", "p1"), (c2, "LOG_FILE", "p0"),
                     (c3, "BASE_FILE_INSERT", "p1"), (c3, "REPLACE_COMMIT", "p1")]
    log_split = next(s for s in plan.splits if s.case == InferenceCase.LOG_FILE)
    assert log_split.cdc_files[0].split("/")[-1].startswith(".") and log_split.before == log_split.after
    # COW: an update rewrites the base file, which Hudi cannot read without a CDC file
    cow_path = str(tmp_path / "cow")
    cow = options("COPY_ON_WRITE")
    write(spark, cow_path, [("k0", "p0", 1, "a"), ("k2", "p0", 1, "a")], cow)
    u = write(spark, cow_path, [("k0", "p0", 2, "b")], cow)
    (split,) = [s for s in plan_cdc(HudiTable(cow_path), "000").splits if s.instant == u]
    assert split.case == InferenceCase.BASE_FILE_UPDATE and split.before.base_file != split.after.base_file
    rows = read_cdc(HudiTable(cow_path), "000", u).to_pylist()
    update = next(r for r in rows if r["op"] == "u")
    assert json.loads(update["before"])["val"] == "a" and json.loads(update["after"])["val"] == "b"
    # compact JSON of every column, meta columns first (InternalRowToJsonStringConverter)
    assert update["after"].startswith('{"_hoodie_commit_time":"' + u + '","_hoodie_commit_seqno":')
    assert list(json.loads(update["after"]))[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno",
                                                      "_hoodie_record_key", "_hoodie_partition_path",
                                                      "_hoodie_file_name"]


def test_a_write_statistic_with_cdc_files_is_read_as_is():
    """parseWriteStat: cdcStats present makes the split AS_IS over exactly those files."""
    from pyhudi.table.cdc import _split_of_stat

    stat = WriteStat(fileId="f1", path="p0/f1_0-1-1_002.parquet", partitionPath="p0", prevCommit="null",
                     numWrites=2, numInserts=2, cdcStats={"p0/.f1_002.log.1_0-1-1.cdc": 120})
    with pytest.raises(HudiRetentionError, match="p0/f1_0-1-1_002.parquet"):  # the file must exist
        _split_of_stat("002", stat, "UPSERT", {}, [])
    stat = WriteStat(fileId="f1", path="", partitionPath="p0", cdcStats={"p0/.f1_002.log.1_0-1-1.cdc": 120})
    split = _split_of_stat("002", stat, "UPSERT", {}, [])
    assert split.case == InferenceCase.AS_IS and split.cdc_files == ("p0/.f1_002.log.1_0-1-1.cdc",)


# -- AS_IS: CDC files in each supplemental logging mode --------------------------------------------
DATA_AVRO = {"type": "record", "name": "t_record", "namespace": "hoodie.t", "fields": [
    {"name": "key", "type": ["null", "string"], "default": None},
    {"name": "part", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": ["null", "long"], "default": None},
    {"name": "val", "type": ["null", "string"], "default": None}]}
_NULLABLE_DATA = ["null", DATA_AVRO]


def cdc_schema(mode: str) -> dict:
    """HoodieCDCUtils.schemaBySupplementalLoggingMode of the data schema (meta fields removed)."""
    op = {"name": "op", "type": ["null", "string"], "default": None}
    if mode == "op_key_only":  # CDC_SCHEMA_OP_AND_RECORDKEY
        return {"type": "record", "name": "Record", "fields": [{"name": "op", "type": ["string", "null"]},
                                                               {"name": "record_key", "type": ["string", "null"]}]}
    key = {"name": "record_key", "type": ["null", "string"], "default": None}
    before = {"name": "before", "type": _NULLABLE_DATA, "default": None}
    if mode == "data_before":
        return {"type": "record", "name": "CDC", "namespace": "hoodie.t", "fields": [op, key, before]}
    ts = {"name": "ts_ms", "type": ["null", "string"], "default": None}
    after = {"name": "after", "type": ["null", "hoodie.t.t_record"], "default": None}
    return {"type": "record", "name": "CDC", "namespace": "hoodie.t", "fields": [op, ts, before, after]}


def cdc_file(tmp: Path, name: str, mode: str, rows: list[dict], instant: str) -> str:
    """A .cdc log file of one CDC_DATA_BLOCK (an Avro data block: HoodieCDCDataBlock extends
    HoodieAvroDataBlock), written with io.log_format.encode_block."""
    schema = cdc_schema(mode)
    table = pa.Table.from_pylist(rows, schema=_arrow_of(mode))
    content = struct.pack(">ii", BLOCK_CONTENT_VERSION, table.num_rows) + encode_datums(table, schema)
    block = encode_block(BlockType.CDC_DATA_BLOCK, {HeaderKey.INSTANT_TIME: instant,
                                                    HeaderKey.SCHEMA: json.dumps(schema)}, content)
    (tmp / name).write_bytes(block)
    return name


def _arrow_of(mode: str) -> pa.Schema:
    data = pa.struct([("key", pa.string()), ("part", pa.string()), ("ts", pa.int64()), ("val", pa.string())])
    if mode == "op_key_only":
        return pa.schema([("op", pa.string()), ("record_key", pa.string())])
    if mode == "data_before":
        return pa.schema([("op", pa.string()), ("record_key", pa.string()), ("before", data)])
    return pa.schema([("op", pa.string()), ("ts_ms", pa.string()), ("before", data), ("after", data)])


def _img(key: str, ts: int, val: str) -> dict:
    return {"key": key, "part": "p0", "ts": ts, "val": val}


@pytest.fixture(scope="module")
def two_versions(spark, tmp_path_factory):
    """A COW file group at two instants: k0 and k1 written at c1; at c2 k0 updated, k1 deleted, k2 inserted."""
    path = str(tmp_path_factory.mktemp("as_is") / "t")
    cow = options("COPY_ON_WRITE")
    c1 = write(spark, path, [("k0", "p0", 1, "a"), ("k1", "p0", 1, "a")], cow)
    write(spark, path, [("k1", "p0", 1, "a")], cow, "delete")
    c2 = write(spark, path, [("k0", "p0", 2, "b"), ("k2", "p0", 2, "n")], cow)
    table = HudiTable(path)
    split = next(s for s in plan_cdc(table, "000").splits if s.instant == c2)
    return table, c1, c2, split


@pytest.mark.parametrize("mode", ["data_before_after", "data_before", "op_key_only"])
def test_as_is_cdc_files_in_every_logging_mode(two_versions, mode):
    """CDCFileGroupIterator.loadNext (AS_IS): data_before_after takes both images from the file;
    data_before the before image from it and the after image from the slice the commit wrote;
    op_key_only both images from the slices. ts_ms is the split's instant in every mode."""
    table, c1, c2, inferred = two_versions
    folder = Path(table.storage.full("p0"))
    if mode == "data_before_after":
        rows = [{"op": "u", "ts_ms": "ignored", "before": _img("k0", 1, "a"), "after": _img("k0", 2, "b")},
                {"op": "i", "ts_ms": "ignored", "before": None, "after": _img("k2", 2, "n")}]
    elif mode == "data_before":
        rows = [{"op": "u", "record_key": "k0", "before": _img("k0", 1, "a")},
                {"op": "i", "record_key": "k2", "before": None}]
    else:
        rows = [{"op": "u", "record_key": "k0"}, {"op": "i", "record_key": "k2"}]
    name = cdc_file(folder, f".{inferred.file_id}_{c2}.log.1_0-1-1.cdc", mode, rows, c2)
    split = CDCSplit(c2, InferenceCase.AS_IS, "p0", inferred.file_id, (f"p0/{name}",),
                     before=inferred.before, after=inferred.after)
    context = plan_cdc(table, "000").context
    out = split_changes(table.storage, split, context).to_pylist()
    assert [r["op"] for r in out] == ["u", "i"] and {r["ts_ms"] for r in out} == {c2}
    update, insert = out
    assert insert["before"] is None
    assert json.loads(update["after"])["val"] == "b" and json.loads(insert["after"])["key"] == "k2"
    assert json.loads(update["before"])["val"] == "a"
    if mode == "data_before_after":  # Avro's GenericData.toString of the data columns only
        assert update["before"] == '{"key": "k0", "part": "p0", "ts": 1, "val": "a"}'
        assert update["after"] == '{"key": "k0", "part": "p0", "ts": 2, "val": "b"}'
    elif mode == "data_before":  # before from the file (no meta columns), after from the new base file
        assert "_hoodie_commit_time" not in json.loads(update["before"])
        assert json.loads(update["after"])["_hoodie_commit_time"] == c2
    else:  # op_key_only: both from the slices
        assert json.loads(update["before"])["_hoodie_commit_time"] == c1
        assert json.loads(update["after"])["_hoodie_commit_time"] == c2
    # planned end to end: the commit's write statistic names the CDC file (cdcStats), so the
    # split is AS_IS over it (HoodieCDCExtractor.parseWriteStat)
    commit = Path(table.storage.full(f".hoodie/{c2}.commit"))
    original = commit.read_text()
    doc = json.loads(original)
    (stat,) = doc["partitionToWriteStats"]["p0"]
    stat["cdcStats"] = {f"p0/{name}": (folder / name).stat().st_size}
    try:
        commit.write_text(json.dumps(doc))
        fresh = HudiTable(table.path)
        (planned,) = [s for s in plan_cdc(fresh, "000").splits if s.instant == c2]
        assert planned.case == InferenceCase.AS_IS and planned.cdc_files == (f"p0/{name}",)
        assert changes([r for r in read_cdc(fresh, "000").to_pylist() if r["ts_ms"] == c2]) == changes(out)
    finally:
        commit.write_text(original)
        (folder / name).unlink()


def test_json_rendering_is_column_wise_and_exact():
    table = pa.table({"s": ["a\"b\\c\n", None, "\x01"], "i": [1, None, 3], "f": [1.5, 2.0, None],
                      "b": [True, False, None], "l": [[1, 2], None, []]})
    compact = records_json(table, spaced=False).to_pylist()
    assert [json.loads(t) for t in compact] == [
        {"s": "a\"b\\c\n", "i": 1, "f": 1.5, "b": True, "l": [1, 2]},
        {"s": None, "i": None, "f": 2.0, "b": False, "l": None},
        {"s": "\x01", "i": 3, "f": None, "b": None, "l": []}]
    assert compact[1] == '{"s":null,"i":null,"f":2,"b":false,"l":null}'
    assert records_json(table.select(["i"]), spaced=True).to_pylist()[0] == '{"i": 1}'
    special = records_json(pa.table({"f": [float("nan"), float("inf"), -float("inf")]}), spaced=False)
    assert special.to_pylist() == ['{"f":NaN}', '{"f":Infinity}', '{"f":-Infinity}']


# -- Spark: data source and streaming -----------------------------------------------------------------
@pytest.fixture(scope="module")
def small_mor(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cdc_spark") / "t")
    mor = options("MERGE_ON_READ")
    c1 = write(spark, path, [("k0", "p0", 1, "a"), ("k1", "p1", 1, "a")], mor)
    c2 = write(spark, path, [("k0", "p0", 2, "b"), ("k3", "p1", 2, "n")], mor)
    c3 = write(spark, path, [("k1", "p1", 1, "a")], mor, "delete")
    return path, [c1, c2, c3]


def test_cdc_through_pyhudi_read_with_a_range_and_filters(spark, small_mor):
    path, (c1, c2, c3) = small_mor
    opts = {**CDC, "hoodie.datasource.read.begin.instanttime": c1, "hoodie.datasource.read.end.instanttime": c2}
    got = {(r.op, r.ts_ms, json.loads(r.after)["key"]) for r in pyhudi.read(spark, path, opts).collect()}
    assert got == {("u", c2, "k0"), ("i", c2, "k3")}
    deletes = pyhudi.read(spark, path, {**CDC, "hoodie.datasource.read.begin.instanttime": "000"},
                          filters="op = 'd'").collect()
    assert [(r.ts_ms, json.loads(r.before)["key"], r.after) for r in deletes] == [(c3, "k1", None)]
    with pytest.raises(HudiConfigError, match="incremental.format"):
        pyhudi.read(spark, path, {**CDC, "hoodie.datasource.query.incremental.format": "changes",
                                  "hoodie.datasource.read.begin.instanttime": "000"})


@pytest.mark.skipif(not SPARK4, reason="spark.read.format('hudi') needs PySpark 4")
def test_cdc_through_the_spark_data_source_and_its_stream(spark, small_mor, tmp_path):
    """spark.read.format("hudi") with the CDC options (CDCRelation), and readStream in the cdc
    format (HoodieStreamSource: isCDCQuery, FULL_CDC_SPARK_SCHEMA)."""
    path, instants = small_mor
    pyhudi.register(spark)
    expected = changes(read_cdc(HudiTable(path), "000").to_pylist())
    df = spark.read.format("hudi").options(**CDC, **{"hoodie.datasource.read.begin.instanttime": "000"}).load(path)
    assert df.columns == ["op", "ts_ms", "before", "after"]
    assert changes([r.asDict() for r in df.collect()]) == expected
    batches: list = []
    query = (spark.readStream.format("hudi").options(**{"hoodie.datasource.query.incremental.format": "cdc",
                                                        "hoodie.datasource.streaming.startOffset": instants[0]})
             .load(path).writeStream.foreachBatch(lambda b, _i: batches.extend(r.asDict() for r in b.collect()))
             .option("checkpointLocation", str(tmp_path / "chk")).start())
    query.processAllAvailable()
    query.stop()
    assert changes(batches) == {c for c in expected if c[1] > instants[0]}


def test_cdc_commit_stream(spark, small_mor, tmp_path):
    """pyhudi's polling stream in the cdc format hands each new range's changes on (every PySpark)."""
    path, instants = small_mor
    seen: list = []
    stream = pyhudi.commit_stream(spark, path, {"hoodie.datasource.query.incremental.format": "cdc"},
                                  checkpoint_location=str(tmp_path / "chk"))
    assert stream.process_available(lambda df, _i: seen.extend(r.asDict() for r in df.collect())) == 1
    assert changes(seen) == changes(read_cdc(HudiTable(path), "000").to_pylist())


# -- where a table without CDC logging cannot answer ----------------------------------------------------
def test_a_cleaned_previous_slice_is_a_clear_error(spark, tmp_path):
    """Keeping two file versions, the cleaner removes c1's slice: the changes of c1 and c2 need it
    (c2's before images), those of c3 do not."""
    path = str(tmp_path / "t")
    cow = options("COPY_ON_WRITE")
    c1 = write(spark, path, [("k0", "p0", 1, "a")], cow)
    c2 = write(spark, path, [("k0", "p0", 2, "b")], cow)
    c3 = write(spark, path, [("k0", "p0", 3, "c")], cow)
    pyhudi.clean(path, {"hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.clean.fileversions.retained": "2"})
    table = HudiTable(path)
    (fid,) = [g.file_id for g in table.file_system_view().file_groups()]
    with pytest.raises(HudiRetentionError, match=f"instant {c1} in file group {fid} of partition 'p0'.*"
                                                 f"slice written at {c1}, which clean"):
        read_cdc(table, "000")
    with pytest.raises(HudiRetentionError, match=f"instant {c2} in file group {fid}"):
        read_cdc(table, c1)
    (row,) = read_cdc(table, c2).to_pylist()
    assert (row["op"], json.loads(row["before"])["val"], json.loads(row["after"])["val"]) == ("u", "b", "c")
    assert row["ts_ms"] == c3


def test_a_range_reaching_archived_instants_is_a_clear_error(spark, tmp_path):
    path = str(tmp_path / "t")
    # (without a metadata table, whose compaction archival would wait for)
    cow = options("COPY_ON_WRITE", **{"hoodie.archive.automatic": "false", "hoodie.metadata.enable": "false"})
    instants = [write(spark, path, [(f"k{i}", "p0", i, "a")], cow, "insert") for i in range(4)]
    archived = pyhudi.archive(path, {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                     "hoodie.clean.commits.retained": "1"})
    assert archived
    table = HudiTable(path)
    with pytest.raises(HudiRetentionError, match="archived instants"):
        read_cdc(table, "000")
    first = table.timeline.first_data_instant_time()
    assert {json.loads(r["after"])["key"] for r in read_cdc(table, first).to_pylist()} == \
        {f"k{i}" for i, t in enumerate(instants) if t > first}
