"""Change data files of CDC tables, written as Apache Hudi writes them.

Hudi behaviour followed (Apache Hudi master of 2024, the CDC writer of 0.13+), cited per test:

* ``HoodieMergeHandleFactory.create``: every merge of a file group on a table with
  ``hoodie.table.cdc.enabled`` is a ``HoodieMergeHandleWithChangeLog``; new file groups
  (``HoodieCreateHandle``) and merge-on-read log appends (``HoodieAppendHandle``) write no change
  data (``HoodieCDCExtractor.parseWriteStat`` infers BASE_FILE_INSERT / LOG_FILE for them).
* ``HoodieMergeHandleWithChangeLog.writeUpdateRecord`` / ``writeInsertRecord`` ->
  ``HoodieCDCLogger.put``: ``u`` (before, after), ``d`` (before), ``i`` (after); nothing for a
  stored record kept because the incoming one lost (``HoodieMergeHandle.writeUpdateRecord``
  returns false) or untouched.
* ``HoodieCDCUtils.schemaBySupplementalLoggingMode``: the three schemas; images are the table's
  records without meta fields (``HoodieCDCLogger``: ``removeMetadataFields``); ``ts_ms`` is the
  instant.
* ``HoodieWriteHandle.createLogWriter(instant, ".cdc")``: ``.{fileId}_{instant}.log.1_{token}.cdc``
  beside the base file, a CDC_DATA_BLOCK (type 6, ``HoodieCDCDataBlock``) with INSTANT_TIME and
  SCHEMA headers; ``HoodieCDCLogger.getCDCWriteStats`` -> ``HoodieWriteStat.cdcStats``
  (partition-relative path -> size); ``HoodieTableMetadataUtil`` lists them in ``files``;
  ``CleanPlanner.getCleanFileInfoForSlice`` deletes them with their slice; the CREATE marker of
  ``getLogCreationCallback`` makes a rollback delete them.
* ``HoodieAppendHandle.init`` on a CDC table: the delta write stat names the latest slice's base
  instant, base file and log files.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import hudi_rs_rows, kill_writer_on_failure, pyhudi_rows
from hypothesis import given, settings
from hypothesis import strategies as st

import pyhudi
from pyhudi.config import HudiConfig
from pyhudi.config.table import DEFAULT_PAYLOAD, OVERWRITE_PAYLOAD
from pyhudi.io.avro_schema import table_avro_schema
from pyhudi.io.base_file import parquet_settings
from pyhudi.io.cdc import LoggingMode, cdc_avro_schema, cdc_file_name, read_cdc_file
from pyhudi.io.file_names import parse_log_file
from pyhudi.io.log_format import BlockType, HeaderKey, read_log_file
from pyhudi.read.payloads import MergeSpec
from pyhudi.storage import Storage
from pyhudi.write.columns import IS_DELETE
from pyhudi.write.handles import create_handle, merge_handle
from pyhudi.write.plan import INSERT, UPDATE, WriteBucket, WriteContext
from pyhudi.write.task import TaskInfo

MODES = [m.value for m in LoggingMode]
DATA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string()),
                  ("payload", pa.string())])
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.table.cdc.enabled": "true",
        "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload"}
DDL = "id string, p string, ts long, v string, payload string"


# -- the handle alone: a model of what one merge logs ------------------------------------------
def _context(tmp: Path, mode: str, keep_larger: bool) -> tuple[Storage, WriteContext, pa.Schema]:
    from pyhudi.io.avro_schema import storage_schema

    file_schema = storage_schema(DATA)
    settings_ = parquet_settings(HudiConfig(), table_avro_schema(file_schema, "t", with_meta_fields=True),
                                 populate_meta_fields=True)
    ctx = WriteContext(storage=Storage(str(tmp)), instant_time="20240102000000000", settings=settings_,
                       storage_schema_ipc=file_schema.serialize().to_pybytes(),
                       merge_spec=MergeSpec.of("ts", DEFAULT_PAYLOAD if keep_larger else OVERWRITE_PAYLOAD),
                       max_file_size=1 << 27, compression_ratio=0.1, cdc_mode=mode)
    return ctx.storage, ctx, file_schema


def _incoming(rows: list[dict]) -> pa.Table:
    table = pa.Table.from_pylist([{k: r[k] for k in DATA.names} for r in rows], schema=DATA)
    return table.append_column("_hoodie_record_key", table.column("id")) \
        .append_column("_hoodie_partition_path", table.column("p")) \
        .append_column(IS_DELETE, pa.array([bool(r.get("delete")) for r in rows], pa.bool_()))


records = st.dictionaries(st.sampled_from([f"k{i:02d}" for i in range(16)]),
                          st.tuples(st.integers(0, 3), st.text("ab", max_size=3)), max_size=10)
incoming = st.dictionaries(st.sampled_from([f"k{i:02d}" for i in range(20)]),
                           st.tuples(st.integers(0, 3), st.text("xy", max_size=3), st.booleans()), max_size=10)


@settings(max_examples=12, deadline=None)
@given(stored=records.filter(bool), changes=incoming.filter(bool), mode=st.sampled_from(MODES),
       keep_larger=st.booleans())
def test_a_merge_logs_exactly_the_changes_it_made(tmp_path_factory, stored, changes, mode, keep_larger):
    """``HoodieMergeHandleWithChangeLog``: u/d/i for what the merge changed, nothing else; the images
    are the table records without meta fields (``HoodieCDCLogger.removeCommitMetadata``)."""
    tmp = tmp_path_factory.mktemp("h")
    storage, ctx, schema = _context(tmp, mode, keep_larger)
    old = [{"id": k, "p": "a", "ts": ts, "v": v, "payload": json.dumps({"k": k})}
           for k, (ts, v) in sorted(stored.items())]
    first = dataclasses.replace(ctx, instant_time="20240101000000000", cdc_mode=None)
    made = create_handle(storage, first, schema, WriteBucket(0, INSERT, "a", "fg"), _incoming(old), TaskInfo(0, 1, 0))
    assert made is not None and "cdc_stats" not in made  # HoodieCreateHandle logs nothing
    new = [{"id": k, "p": "a", "ts": ts, "v": v, "payload": "{}", "delete": d} for k, (ts, v, d) in changes.items()]
    bucket = WriteBucket(0, UPDATE, "a", "fg-0", made["path"], "20240101000000000")
    stats = merge_handle(storage, ctx, schema, bucket, _incoming(new), TaskInfo(3, 4, 0))

    image = ("id", "p", "ts", "v", "payload")
    expected = []
    for row in old:
        inc = changes.get(row["id"])
        if inc is None or (keep_larger and row["ts"] > inc[0]):
            continue
        if inc[2]:
            expected.append(("d", row["id"], tuple(row[c] for c in image), None))
        else:
            after = {"id": row["id"], "p": "a", "ts": inc[0], "v": inc[1], "payload": "{}"}
            expected.append(("u", row["id"], tuple(row[c] for c in image), tuple(after[c] for c in image)))
    for r in new:
        if r["id"] not in stored and not r["delete"]:
            expected.append(("i", r["id"], None, tuple(r[c] for c in image)))

    rel = f"a/{cdc_file_name('fg-0', ctx.instant_time, '3-4-0')}"
    assert json.loads(stats["cdc_stats"]) == {rel: os.path.getsize(tmp / rel)}  # written even when empty
    got = read_cdc_file(storage, rel).to_pylist()
    mode_ = LoggingMode.of(mode)
    assert all(tuple(g) == mode_.columns for g in got)
    if mode_ is LoggingMode.OP_KEY_ONLY:
        assert [(g["op"], g["record_key"]) for g in got] == [(e[0], e[1]) for e in expected]
    elif mode_ is LoggingMode.DATA_BEFORE:
        assert [(g["op"], g["record_key"], g["before"] and tuple(g["before"][c] for c in image)) for g in got] == \
            [e[:3] for e in expected]
    else:
        assert [(g["op"], g["ts_ms"], g["before"] and tuple(g["before"][c] for c in image),
                 g["after"] and tuple(g["after"][c] for c in image)) for g in got] == \
            [(e[0], ctx.instant_time, e[2], e[3]) for e in expected]
    blocks = read_log_file(storage, rel)
    assert [b.block_type for b in blocks] == [BlockType.CDC_DATA_BLOCK]
    assert set(blocks[0].header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
    assert json.loads(blocks[0].header[HeaderKey.SCHEMA]) == cdc_avro_schema(mode, ctx.settings.avro_schema)
    shutil.rmtree(tmp)


def test_the_schemas_are_hudis():
    """``HoodieCDCUtils``: OP_KEY_ONLY is the literal CDC_SCHEMA_OP_AND_RECORDKEY_STRING; the others
    are ``CDC`` records in the table's namespace with nullable images of the data columns only."""
    writer = table_avro_schema(pa.schema([("_hoodie_commit_time", pa.string()), ("id", pa.string())]), "t",
                               with_meta_fields=True)
    assert json.dumps(cdc_avro_schema("op_key_only", writer), separators=(",", ":")) == (
        '{"type":"record","name":"Record","fields":[{"name":"op","type":["string","null"]},'
        '{"name":"record_key","type":["string","null"]}]}')
    full = cdc_avro_schema("data_before_after", writer)
    assert (full["name"], full["namespace"]) == ("CDC", "hoodie.t")
    assert [f["name"] for f in full["fields"]] == ["op", "ts_ms", "before", "after"]
    image = full["fields"][2]["type"][1]
    assert [f["name"] for f in image["fields"]] == ["id"]
    assert full["fields"][3]["type"] == ["null", "hoodie.t.t_record"]
    assert [f["name"] for f in cdc_avro_schema("DATA_BEFORE", writer)["fields"]] == ["op", "record_key", "before"]
    with pytest.raises(pyhudi.HudiError, match="logging mode"):
        LoggingMode.of("everything")


# -- whole writes on Spark ----------------------------------------------------------------------
def _row(i: str, p: str, ts: int, v: str) -> tuple:
    return (i, p, ts, v, json.dumps({"reading": v, "seq": ts}))


def _cdc_on_disk(path: str, instant: str) -> set[str]:
    out = set()
    for folder, _, names in os.walk(path):
        for name in names:
            parsed = parse_log_file(name)
            if parsed is not None and parsed.cdc and parsed.base_instant == instant:
                out.add(os.path.relpath(os.path.join(folder, name), path))
    return out


def _changes_of(path: str, result) -> list[tuple]:
    """(op, key, before, after) of every change record the write's cdcStats name, checked against
    the files on disk (names, sizes) first."""
    stats = {p: n for s in result.write_stats for p, n in (s.cdcStats or {}).items()}
    assert set(stats) == _cdc_on_disk(path, result.instant_time)
    storage = Storage(path)
    out = []
    versions: dict[tuple[str, str | None], list[int]] = {}
    for rel, size in sorted(stats.items()):
        assert os.path.getsize(os.path.join(path, rel)) == size
        parsed = parse_log_file(rel.rsplit("/", 1)[1])
        assert parsed is not None and parsed.base_instant == result.instant_time
        versions.setdefault((parsed.file_id, parsed.write_token), []).append(parsed.version)
        # the file belongs to the file group its merge rewrote, beside the new base file
        (stat,) = [s for s in result.write_stats if rel in (s.cdcStats or {})]
        assert stat.fileId == parsed.file_id and stat.path.rsplit("/", 1)[0] == rel.rsplit("/", 1)[0]
        for r in read_cdc_file(storage, rel).to_pylist():
            key = r.get("record_key") or (r["before"] or r["after"])["id"]
            out.append((r["op"], key, _img(r.get("before")), _img(r.get("after")), r.get("ts_ms")))
    # one task's files per file group, versions 1, 2, ... (rolled over with the same token)
    assert len(versions) == len({fid for fid, _ in versions})
    assert all(sorted(v) == list(range(1, len(v) + 1)) for v in versions.values())
    return sorted(out, key=lambda c: (c[1], c[0]))


def _img(image: dict | None) -> tuple | None:
    return None if image is None else tuple(image[c] for c in ("id", "p", "ts", "v", "payload"))


def _expected(model: dict, rows: list[tuple], deletes: set[str], mode: str, instant: str,
              partitions_before: set[str]) -> list[tuple]:
    """What the write logs: updates the incoming record won (DefaultHoodieRecordPayload: the
    larger ts; equal -> incoming), deletes of stored keys, inserts into partitions that had a file
    group (merged into it as a small file; a new partition gets a new file group: no log)."""
    out = []
    for r in rows:
        old = model.get(r[0])
        if r[0] in deletes:
            if old is not None:
                out.append(("d", r[0], old, None, instant))
        elif old is None:
            if r[1] in partitions_before:
                out.append(("i", r[0], None, r, instant))
        elif r[2] >= old[2]:
            out.append(("u", r[0], old, r, instant))
    if mode == "OP_KEY_ONLY":
        out = [(o, k, None, None, None) for o, k, *_ in out]
    elif mode == "DATA_BEFORE":
        out = [(o, k, b, None, None) for o, k, b, *_ in out]
    return sorted(out, key=lambda c: (c[1], c[0]))


def _apply(model: dict, rows: list[tuple], deletes: set[str]) -> None:
    for r in rows:
        if r[0] in deletes:
            model.pop(r[0], None)
        elif r[0] not in model or r[2] >= model[r[0]][2]:
            model[r[0]] = r


def _snapshot(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(r[c] for c in ("id", "p", "ts", "v", "payload")) for r in rows)


@pytest.mark.parametrize("mode", MODES)
def test_copy_on_write_upserts_and_deletes_log_their_changes(spark, tmp_path, mode):
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.table.cdc.supplemental.logging.mode": mode.lower(),  # Hudi's lower-case spelling
            "hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.clean.fileversions.retained": "1"}
    model: dict[str, tuple] = {}
    steps = [
        ([_row(f"k{i}", "p1" if i % 2 else "p2", 1, f"a{i}") for i in range(6)], set(), "upsert"),
        # updates (k2's loses: smaller ts), an insert into p1 (merged into its small file group), a new
        # partition p3 (a new file group: no change data), a delete of k3 via _hoodie_is_deleted
        ([_row("k1", "p1", 2, "b1"), _row("k2", "p2", 0, "b2"), _row("k4", "p2", 5, "b4"), _row("k7", "p1", 1, "a7"),
          _row("k8", "p3", 1, "a8"), _row("k3", "p1", 9, "gone")], {"k3"}, "upsert"),
        ([_row("k5", "p1", 9, ""), _row("k99", "p1", 9, "")], {"k5", "k99"}, "delete"),
    ]
    previous = None
    for rows, deletes, operation in steps:
        cols = ["id", "p", "ts", "v", "payload"]
        if operation == "upsert" and deletes:
            df = spark.createDataFrame([(*r, r[0] in deletes) for r in rows], DDL + ", _hoodie_is_deleted boolean")
        else:
            df = spark.createDataFrame(rows, DDL).select(*cols)
        before = {r[1] for r in model.values()}
        result = pyhudi.write(df, path, {**opts, "hoodie.datasource.write.operation": operation})
        expected = _expected(model, rows, deletes if operation == "upsert" else {r[0] for r in rows},
                             mode, result.instant_time, before)
        _apply(model, rows, deletes if operation == "upsert" else {r[0] for r in rows})
        assert _changes_of(path, result) == expected
        if previous is not None:
            # KEEP_LATEST_FILE_VERSIONS=1: a slice the previous write made and this one superseded went,
            # its change data with it; the others stay
            rewritten = {(s.partitionPath, s.fileId) for s in result.write_stats}
            for s in previous.write_stats:
                for rel in s.cdcStats or {}:
                    assert os.path.exists(os.path.join(path, rel)) != ((s.partitionPath, s.fileId) in rewritten)
        previous = result
        assert _snapshot(hudi_rs_rows(path)) == sorted(model.values())
        assert _snapshot(pyhudi_rows(spark, path)) == sorted(model.values())
    props = open(os.path.join(path, ".hoodie", "hoodie.properties")).read()
    assert "hoodie.table.cdc.enabled=true" in props and f"hoodie.table.cdc.supplemental.logging.mode={mode}" in props
    table = pyhudi.HudiTable(path)
    listing = table.metadata_listing()
    assert listing is not None
    on_disk = {os.path.relpath(os.path.join(d, n), path) for d, _, ns in os.walk(path) for n in ns
               if n.endswith(".cdc")}
    assert on_disk
    listed = {f"{p}/{n}" for p, names in listing.files.items() for n in names if n.endswith(".cdc")}
    assert listed == on_disk  # HoodieTableMetadataUtil lists change data files; the clean's record drops them
    for piece in table.file_system_view().latest_slices():
        assert all(lf.base_instant == piece.base_instant for lf in piece.cdc_files)
        assert not any(lf.name.endswith(".cdc") for lf in piece.log_files)


def test_merge_on_read_logs_small_file_merges_only_and_names_the_slice(spark, tmp_path):
    """MOR (table version 8): a small file group without logs takes inserts through a merge, which
    logs; an update appended to the log writes no change data, and its stat names the slice
    (``HoodieAppendHandle.init``)."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.write.table.version": "8",
            "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE"}
    first = pyhudi.write(spark.createDataFrame([_row("a", "p", 1, "x"), _row("b", "p", 1, "y")], DDL), path, opts)
    assert not any(s.cdcStats for s in first.write_stats)  # HoodieCreateHandle: inferred as BASE_FILE_INSERT
    second = pyhudi.write(spark.createDataFrame([_row("a", "p", 2, "x2"), _row("c", "p", 1, "z")], DDL), path, opts)
    assert _changes_of(path, second) == [("u", "a", _row("a", "p", 1, "x"), None, None),
                                         ("i", "c", None, None, None)]
    (merged,) = second.write_stats
    timeline = pyhudi.HudiTable(path).timeline
    stored = timeline.commit_metadata(
        next(i for i in timeline.completed_writes() if i.timestamp == second.instant_time))
    assert [s.cdcStats for s in stored.write_stats()] == [merged.cdcStats]  # layout 2: Avro commit metadata
    third = pyhudi.write(spark.createDataFrame([_row("b", "p", 3, "y3")], DDL), path, opts)
    (appended,) = third.write_stats
    assert appended.logVersion is not None and not appended.cdcStats
    assert _cdc_on_disk(path, third.instant_time) == set()
    assert appended.prevCommit == second.instant_time
    assert appended.baseFile == merged.path.rsplit("/", 1)[1]
    assert appended.logFiles == [appended.path.rsplit("/", 1)[1]]
    want = [_row("a", "p", 2, "x2"), _row("b", "p", 3, "y3"), _row("c", "p", 1, "z")]
    assert _snapshot(hudi_rs_rows(path)) == want
    assert _snapshot(pyhudi_rows(spark, path)) == want


def test_a_failed_writes_change_data_is_rolled_back(spark, tmp_path, monkeypatch):
    """The change data file has a CREATE marker (``HoodieWriteHandle.getLogCreationCallback``): the
    rollback of the failed write deletes it with the base file. (Hudi's distributed write chain here,
    not the partition-local one the other tests take.)"""
    from pyhudi.timeline.timeline import Timeline

    path = str(tmp_path / "t")
    opts = {**OPTS, "pyhudi.write.partition.local": "false"}
    pyhudi.write(spark.createDataFrame([_row("a", "p", 1, "x"), _row("b", "p", 1, "y")], DDL), path, opts)

    def die(self, *a, **k):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(Timeline, "complete", die)
    kill_writer_on_failure(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        pyhudi.write(spark.createDataFrame([_row("a", "p", 2, "x2")], DDL), path, opts)
    monkeypatch.undo()
    (failed,) = pyhudi.HudiTable(path).timeline.pending()
    left = _cdc_on_disk(path, failed.timestamp)
    assert len(left) == 1
    assert _snapshot(hudi_rs_rows(path)) == [_row("a", "p", 1, "x"), _row("b", "p", 1, "y")]
    res = pyhudi.write(spark.createDataFrame([_row("b", "p", 2, "y2")], DDL), path, opts)
    assert res.stats["rolled_back_instants"]
    assert _cdc_on_disk(path, failed.timestamp) == set()
    assert _changes_of(path, res) == [("u", "b", _row("b", "p", 1, "y"), _row("b", "p", 2, "y2"), res.instant_time)]


def test_a_write_cannot_ask_for_change_data_the_table_does_not_log(spark, tmp_path):
    path = str(tmp_path / "t")
    plain = {k: v for k, v in OPTS.items() if k != "hoodie.table.cdc.enabled"}
    pyhudi.write(spark.createDataFrame([_row("a", "p", 1, "x")], DDL), path, plain)
    with pytest.raises(pyhudi.HudiTableMismatchError, match="hoodie.table.cdc.enabled"):
        pyhudi.write(spark.createDataFrame([_row("a", "p", 2, "x")], DDL), path, OPTS)
    with pytest.raises(pyhudi.HudiConfigError, match="supplemental.logging.mode"):
        pyhudi.write(spark.createDataFrame([_row("a", "p", 2, "x")], DDL), str(tmp_path / "u"),
                     {**OPTS, "hoodie.table.cdc.supplemental.logging.mode": "all_of_it"})
    assert np.array_equal(np.sort(np.array([r["ts"] for r in hudi_rs_rows(path)])), np.array([1]))


def test_compaction_logs_its_changes_where_the_index_writes_inserts_to_logs(spark, tmp_path):
    """``HoodieMergeHandleFactory.create`` (compactor path): with CDC on and an index that yields pure
    log files (BUCKET, ``HoodieWriteConfig.isYieldingPureLogForMor``) the compaction merge is a
    ``HoodieMergeHandleWithChangeLog``: its commit names a change data file of the slice's changes."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.index.type": "BUCKET",
            "hoodie.bucket.index.num.buckets": "1"}
    pyhudi.write(spark.createDataFrame([_row("a", "p", 1, "x"), _row("b", "p", 1, "y")], DDL), path, opts)
    df = spark.createDataFrame([(*_row("a", "p", 2, "x2"), False), (*_row("c", "p", 1, "z"), False),
                                (*_row("b", "p", 5, ""), True)], DDL + ", _hoodie_is_deleted boolean")
    second = pyhudi.write(df, path, opts)
    assert all(s.logVersion is not None and not s.cdcStats for s in second.write_stats)  # LOG_FILE: inferred
    (instant,) = pyhudi.compact(spark, path, opts)
    meta = pyhudi.HudiTable(path).timeline.commit_metadata(
        next(i for i in pyhudi.HudiTable(path).timeline.completed_writes() if i.timestamp == instant))
    compacted = type("R", (), {"write_stats": meta.write_stats(), "instant_time": instant})()
    assert _changes_of(path, compacted) == [
        ("u", "a", _row("a", "p", 1, "x"), _row("a", "p", 2, "x2"), instant),
        ("d", "b", _row("b", "p", 1, "y"), None, instant),
        ("i", "c", None, _row("c", "p", 1, "z"), instant)]
    want = [_row("a", "p", 2, "x2"), _row("c", "p", 1, "z")]
    assert _snapshot(hudi_rs_rows(path)) == want
    assert _snapshot(pyhudi_rows(spark, path)) == want


# -- change data rolled over into several files ----------------------------------------------------
#: blocks of a few records, and a file rolls over after every block or two
TINY = {"hoodie.logfile.data.block.max.size": "600", "hoodie.logfile.max.size": "1000"}


def test_change_data_rolls_over_at_the_log_file_max_size_and_every_file_is_named(tmp_path):
    """``HoodieCDCLogger.flushIfNeeded`` appends a block once its records reach
    ``hoodie.logfile.data.block.max.size``; ``HoodieLogFormatWriter.appendBlocks`` ->
    ``rolloverIfNeeded`` then rolls a file larger than ``hoodie.logfile.max.size`` over to the next
    version (``HoodieLogFile.rollOver``: same file id and instant, version + 1, the rollover write
    token, which ``HoodieLogFormat.WriterBuilder.build`` suffixed with ``.cdc``); no file is opened
    after the last block; ``getCDCWriteStats`` names every file a block went to, with its size."""
    from pyhudi.io.cdc import Changes
    from pyhudi.write.cdc import write_cdc_file

    n = 40
    after = pa.table({"id": [f"k{i:02}" for i in range(n)], "v": [f"value-{i}" * 3 for i in range(n)]})
    changes = Changes(pa.array(["i"] * n), after.column("id").combine_chunks(), after.slice(0, 0).select([]),
                      np.zeros(n, bool), after, np.ones(n, bool))
    schema = json.dumps({"type": "record", "name": "r", "namespace": "ns", "fields": [
        {"name": "id", "type": "string"}, {"name": "v", "type": ["null", "string"], "default": None}]})
    storage = Storage(str(tmp_path))
    args = dict(partition="p", file_id="fg-0", instant="20240102000000000", token="1-2-3", writer_schema=schema)
    one = write_cdc_file(storage, changes, mode="OP_KEY_ONLY", **args)
    only = "p/.fg-0_20240102000000000.log.1_1-2-3.cdc"  # Hudi's defaults: 256 MB blocks, 1 GB files
    assert one == {only: os.path.getsize(tmp_path / only)}
    stats = write_cdc_file(storage, changes, mode="DATA_BEFORE_AFTER", max_file_size=1000, max_block_size=600, **args)
    names = [cdc_file_name("fg-0", "20240102000000000", "1-2-3", v) for v in range(1, len(stats) + 1)]
    assert sorted(stats) == sorted(f"p/{name}" for name in names) and len(stats) > 2
    records = []
    for version, name in enumerate(names, 1):
        size = os.path.getsize(tmp_path / "p" / name)
        assert stats[f"p/{name}"] == size
        assert size > 1000 or version == len(names)  # closed only past the threshold; the last may be small
        blocks = read_log_file(storage, f"p/{name}")
        assert all(b.block_type == BlockType.CDC_DATA_BLOCK for b in blocks) and 1 <= len(blocks) <= 2
        assert blocks[-1].offset <= 1000  # it took its last block while not past the threshold
        records += read_cdc_file(storage, f"p/{name}").to_pylist()
    assert [r["after"]["id"] for r in records] == after.column("id").to_pylist()  # in order, none twice
    assert {r["op"] for r in records} == {"i"} and all(r["ts_ms"] == "20240102000000000" for r in records)


def test_rolled_over_change_data_is_queried_listed_cleaned_and_rolled_back(spark, tmp_path, monkeypatch):
    """A table whose merges roll their change data over into several files per file group and
    write: the CDC query reads every file of ``cdcStats`` (``HoodieCDCExtractor.parseWriteStat``:
    AS_IS over ``getCdcStats().keySet()``) and answers as the table written with one file does;
    the metadata table lists every file (``HoodieTableMetadataUtil`` adds each ``cdcStats`` path);
    the cleaner deletes them all with their slice; a failed write's rollback deletes them all by
    their CREATE markers."""
    from pyhudi.table.cdc import read_cdc
    from pyhudi.timeline.timeline import Timeline

    opts = {**OPTS, "hoodie.clean.automatic": "false"}
    first = [_row(f"k{i:02}", "p", 1, f"a{i}") for i in range(30)]
    second = [_row(f"k{i:02}", "p", 2, f"b{i}") for i in range(0, 30, 2)] + \
        [_row(f"n{i}", "p", 1, f"n{i}") for i in range(5)]
    gone = {"k01", "k03"}
    flagged = DDL + ", _hoodie_is_deleted boolean"
    answers = {}
    for name, extra in (("one", {}), ("rolled", TINY)):
        path = str(tmp_path / name)
        base = pyhudi.write(spark.createDataFrame(first, DDL), path, {**opts, **extra})
        df = spark.createDataFrame([(*r, False) for r in second] + [(*_row(k, "p", 9, ""), True) for k in gone],
                                   flagged)
        res = pyhudi.write(df, path, {**opts, **extra})
        (stat,) = res.write_stats
        assert (len(stat.cdcStats) > 2) == (name == "rolled")
        changes = _changes_of(path, res)  # every file named, sized, versions 1..n of one token
        assert len(changes) == 15 + 5 + 2
        table = pyhudi.HudiTable(path)
        answers[name] = sorted((r["op"], r["before"], r["after"])
                               for r in read_cdc(table, base.instant_time, res.instant_time).to_pylist())
        listing = table.metadata_listing()
        assert listing is not None
        assert {f"p/{n}" for n in listing.files["p"] if n.endswith(".cdc")} == set(stat.cdcStats)
        cdc_files = [lf.name for lf in table.file_system_view().latest_slices()[0].cdc_files]
        assert [f"p/{n}" for n in cdc_files] == sorted(stat.cdcStats, key=lambda p: parse_log_file(
            p.split("/")[1]).version)  # the slice's change data, in version order
    assert answers["one"] == answers["rolled"] and len(answers["one"]) == 22
    path = str(tmp_path / "rolled")
    rolled = _cdc_on_disk(path, res.instant_time)
    assert len(rolled) > 2

    def die(self, *a, **k):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(Timeline, "complete", die)
    kill_writer_on_failure(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        pyhudi.write(spark.createDataFrame([(*_row(f"k{i:02}", "p", 5, "c"), False) for i in range(30)], flagged), path,
                     {**opts, **TINY, "pyhudi.write.partition.local": "false"})
    monkeypatch.undo()
    (failed,) = pyhudi.HudiTable(path).timeline.pending()
    assert len(_cdc_on_disk(path, failed.timestamp)) > 2
    last = pyhudi.write(spark.createDataFrame([(*_row("k00", "p", 7, "d"), False)], flagged), path,
                        {**opts, **TINY, "hoodie.clean.automatic": "true",
                         "hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.clean.fileversions.retained": "1"})
    assert last.stats["rolled_back_instants"]
    assert _cdc_on_disk(path, failed.timestamp) == set()  # the rollback deleted every file by its marker
    assert _cdc_on_disk(path, res.instant_time) == set()  # the cleaner deleted the superseded slice's files
    assert _changes_of(path, last)[0][:2] == ("u", "k00")


def test_merge_on_read_appends_split_their_data_blocks_at_the_block_max_size(spark, tmp_path):
    """``hoodie.logfile.data.block.max.size`` sizes the append handle's data blocks too
    (``HoodieAppendHandle.flushToDiskIfRequired``: a block once the records reach it): one write's
    updates of a file group go into several blocks of its log file, and both readers merge them all."""
    path = str(tmp_path / "t")
    opts = {k: v for k, v in OPTS.items() if k != "hoodie.table.cdc.enabled"}
    opts.update({"hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.logfile.data.block.max.size": "2000"})
    pyhudi.write(spark.createDataFrame([_row(f"k{i:02}", "p", 1, "a") for i in range(40)], DDL), path, opts)
    res = pyhudi.write(spark.createDataFrame([_row(f"k{i:02}", "p", 2, f"b{i}") for i in range(40)], DDL), path, opts)
    (stat,) = res.write_stats
    blocks = read_log_file(Storage(path), stat.path)
    assert len(blocks) > 2 and all(b.block_type == BlockType.AVRO_DATA_BLOCK for b in blocks)
    assert all(b.header[HeaderKey.INSTANT_TIME] == res.instant_time for b in blocks)
    want = sorted(_row(f"k{i:02}", "p", 2, f"b{i}") for i in range(40))
    assert _snapshot(hudi_rs_rows(path)) == want
    assert _snapshot(pyhudi_rows(spark, path)) == want
