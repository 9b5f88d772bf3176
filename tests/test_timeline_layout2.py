"""Timeline layout 2 (table versions 8 and 9), written: completed instants named with their
completion time, commit metadata as Hudi 1.x's Avro records (docs/hudi-1x-format.md section 2)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import fastavro
import pytest
from conftest import hudi_rs_rows

from pyhudi.storage import Storage
from pyhudi.timeline import commit_avro
from pyhudi.timeline.avro_records import REQUESTED_REPLACE_METADATA_FULL, write_record
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.instant import COMMIT, DELTA_COMMIT, REPLACE_COMMIT, State, parse_instant_file
from pyhudi.timeline.timeline import Timeline


def _record(data: bytes) -> tuple[dict, dict]:
    reader = fastavro.reader(io.BytesIO(data))
    return reader.writer_schema, next(iter(reader))


def _shape(schema: Any) -> Any:
    """A schema's names, field order and types, without Java's ``avro.java.string`` notes."""
    if isinstance(schema, list):
        return [_shape(s) for s in schema]
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record":
            return (schema["name"].rsplit(".", 1)[-1], [(f["name"], _shape(f["type"])) for f in schema["fields"]])
        if kind == "array":
            return ("array", _shape(schema["items"]))
        if kind == "map":
            return ("map", _shape(schema["values"]))
        return _shape(kind)
    return schema.rsplit(".", 1)[-1] if isinstance(schema, str) else schema


def _commit_files(table: Path) -> list[Path]:
    return sorted(p for p in (table / ".hoodie" / "timeline").iterdir()
                  if (inst := parse_instant_file(p.name)) is not None and inst.is_completed
                  and inst.action in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT))


def test_commit_metadata_encodes_as_apache_hudi_1x_writes_it(v9_table):
    """Every completed commit of a table Hudi 1.1 wrote, decoded and encoded again, has Hudi's
    record layout (names, field order, types) and the values pyhudi keeps."""
    files = _commit_files(v9_table)
    assert {parse_instant_file(p.name).action for p in files} == {COMMIT, REPLACE_COMMIT}  # type: ignore[union-attr]
    kept = {f.name for f in WriteStat.__dataclass_fields__.values()}
    for path in files:
        data = path.read_bytes()
        replace = path.name.endswith(".replacecommit")
        theirs_schema, theirs = _record(data)
        ours_schema, ours = _record(commit_avro.encode(commit_avro.decode(data, source=path.name), replace=replace))
        assert _shape(ours_schema) == _shape(theirs_schema), path.name
        assert ours["version"] is None and theirs["version"] is None
        for key in ("compacted", "extraMetadata", "operationType"):
            assert ours[key] == theirs[key], (path.name, key)
        if replace:
            assert ours["partitionToReplaceFileIds"] == theirs["partitionToReplaceFileIds"]
        assert ours["partitionToWriteStats"].keys() == theirs["partitionToWriteStats"].keys()
        for partition, stats in theirs["partitionToWriteStats"].items():
            for mine, their in zip(ours["partitionToWriteStats"][partition], stats, strict=True):
                assert {k: mine[k] for k in kept if k in mine} == {k: their[k] for k in kept if k in their}, path.name


def test_hudi_rs_reads_a_table_whose_commits_pyhudi_encoded(v9_table, tmp_path):
    table = tmp_path / "t"
    shutil.copytree(v9_table, table)
    before = sorted(hudi_rs_rows(table), key=lambda r: r["txn_id"])
    for path in _commit_files(table):
        data = path.read_bytes()
        path.write_bytes(commit_avro.encode(commit_avro.decode(data, source=path.name),
                                            replace=path.name.endswith(".replacecommit")))
    assert sorted(hudi_rs_rows(table), key=lambda r: r["txn_id"]) == before
    assert before  # the table has rows


def test_layout_2_transitions_name_completions_and_store_avro(tmp_path):
    storage = Storage(str(tmp_path / "t"))
    timeline = Timeline(storage, layout_version=2)
    meta = CommitMetadata({"p": [WriteStat("f1", "p/f1_0-1-2_001.parquet", "p", numWrites=3, numInserts=3)]},
                          operation_type="UPSERT", extra_metadata={"schema": "{}"})
    timeline.create_requested("20260101000000001", COMMIT)
    timeline.transition_inflight("20260101000000001", COMMIT, meta.to_json().encode())
    done = timeline.complete("20260101000000001", COMMIT, meta.to_json().encode())
    names = sorted(p.name for p in (tmp_path / "t" / ".hoodie" / "timeline").iterdir())
    assert names[:2] == ["20260101000000001.commit.requested", "20260101000000001.inflight"]
    assert done.completion_time is not None and done.completion_time > "20260101000000001"
    assert names[2] == f"20260101000000001_{done.completion_time}.commit"
    assert (tmp_path / "t" / ".hoodie" / "timeline" / names[0]).read_bytes() == b""
    schema, record = _record((tmp_path / "t" / ".hoodie" / "timeline" / names[2]).read_bytes())
    assert schema["name"].endswith("HoodieCommitMetadata") and record["operationType"] == "UPSERT"
    assert record["partitionToWriteStats"]["p"][0]["numInserts"] == 3
    reread = Timeline(storage, layout_version=2)
    (inst,) = reread.completed()
    assert inst.completion_time == done.completion_time
    assert reread.commit_metadata(inst).write_stats()[0].numInserts == 3

    # a replace commit completes as HoodieReplaceCommitMetadata; undone, its inflight file is
    # HoodieCommitMetadata again, as Java reads an inflight replace commit
    replace = CommitMetadata({}, operation_type="INSERT_OVERWRITE", partition_to_replace_file_ids={"p": ["f1"]})
    timeline.create_requested("20260101000000002", REPLACE_COMMIT, b"")
    timeline.transition_inflight("20260101000000002", REPLACE_COMMIT, b"")
    second = timeline.complete("20260101000000002", REPLACE_COMMIT, replace.to_json().encode())
    assert second.completion_time is not None and second.completion_time > done.completion_time  # type: ignore[operator]
    schema, record = _record(storage.read_bytes(timeline.path_of(second)))
    assert schema["name"].endswith("HoodieReplaceCommitMetadata")
    assert record["partitionToReplaceFileIds"] == {"p": ["f1"]}
    timeline.revert_to_inflight(second)
    inflight = second.with_state(State.INFLIGHT)
    schema, record = _record(storage.read_bytes(timeline.path_of(inflight)))
    assert schema["name"].endswith("HoodieCommitMetadata") and "partitionToReplaceFileIds" not in record
    assert not storage.exists(f".hoodie/timeline/20260101000000002_{second.completion_time}.replacecommit")


@pytest.mark.parametrize("layout", [1, 2])
def test_a_requested_write_stays_empty_and_plans_stay_as_given(tmp_path, layout):
    storage = Storage(str(tmp_path / "t"))
    timeline = Timeline(storage, layout_version=layout)
    # a delete_partition's requested record (an overwrite's becomes Hudi 1.x's all-null record)
    plan = write_record(REQUESTED_REPLACE_METADATA_FULL, {
        "operationType": "DELETE_PARTITION", "clusteringPlan": None, "extraMetadata": {}, "version": 1})
    timeline.create_requested("20260101000000003", REPLACE_COMMIT, plan)
    assert storage.read_bytes(timeline.path_of(timeline.instant_files[0])) == plan
