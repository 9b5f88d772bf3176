"""The archived timeline: Hudi 0.14's timeline Avro schemas, archiving instants, reading archives back."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import struct

import fastavro
import pytest

from pyhudi.errors import HudiError, HudiInstantNotFoundError, HudiUnsupportedError
from pyhudi.instant_time import format_instant
from pyhudi.io.log_format import BlockType, HeaderKey, read_log_file
from pyhudi.storage import Storage
from pyhudi.timeline import avro_records as A
from pyhudi.timeline.archive import (
    ARCHIVE_FOLDER,
    ArchivedTimeline,
    archive_file_name,
    archive_instants,
    commit_metadata_to_avro,
    list_archive_files,
)
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.instant import Instant, State
from pyhudi.timeline.timeline import Timeline

T = [f"2024010100000000{i}" for i in range(10)]


# -- a small table layout ----------------------------------------------------------------------
def _stat(partition: str, file_id: str, instant: str, **kw) -> WriteStat:
    return WriteStat(fileId=file_id, path=f"{partition}/{file_id}_0-1-2_{instant}.parquet", partitionPath=partition,
                     numWrites=kw.pop("numWrites", 5), numInserts=kw.pop("numInserts", 5), totalWriteBytes=1000,
                     fileSizeInBytes=1000, **kw)


def _commit(instant: str, *, compacted: bool = False, op: str = "UPSERT", replaced: dict | None = None) -> bytes:
    meta = CommitMetadata({"p1": [_stat("p1", f"f-{instant[-1]}", instant)],
                           "p2": [_stat("p2", f"g-{instant[-1]}", instant, numUpdateWrites=2)]},
                          operation_type=op, extra_metadata={"schema": '{"type":"record"}'}, compacted=compacted,
                          partition_to_replace_file_ids=replaced)
    return meta.to_json().encode()


def _workload(instant: str) -> bytes:
    """An inflight file: the workload profile Hudi writes (fileId placeholders, counts only)."""
    return CommitMetadata({"p1": [WriteStat(fileId="", path="", partitionPath="p1", numInserts=5)]},
                          operation_type="UPSERT").to_json().encode()


CLEANER_PLAN = {
    "earliestInstantToRetain": {"timestamp": T[0], "action": "commit", "state": "COMPLETED"},
    "lastCompletedCommitTimestamp": T[0], "policy": "KEEP_LATEST_COMMITS", "filesToBeDeletedPerPartition": {},
    "version": 2, "filePathsToBeDeletedPerPartition": {
        "p1": [{"filePath": "/t/p1/old.parquet", "isBootstrapBaseFile": False}]},
    "partitionsToBeDeleted": [],
}
CLEAN_METADATA = {
    "startCleanTime": T[2], "timeTakenInMillis": 12, "totalFilesDeleted": 1, "earliestCommitToRetain": T[0],
    "lastCompletedCommitTimestamp": T[0], "partitionMetadata": {"p1": {
        "partitionPath": "p1", "policy": "KEEP_LATEST_COMMITS", "deletePathPatterns": ["old.parquet"],
        "successDeleteFiles": ["old.parquet"], "failedDeleteFiles": [], "isPartitionDeleted": False}},
    "version": 2, "bootstrapPartitionMetadata": {},
}
ROLLBACK_PLAN = {"instantToRollback": {"commitTime": T[3], "action": "commit"}, "RollbackRequests": [], "version": 1}
ROLLBACK_METADATA = {
    "startRollbackTime": T[4], "timeTakenInMillis": 3, "totalFilesDeleted": 1, "commitsRollback": ["20231231"],
    "partitionMetadata": {"p1": {"partitionPath": "p1", "successDeleteFiles": ["/t/p1/x.parquet"],
                                 "failedDeleteFiles": [], "rollbackLogFiles": None, "logFilesFromFailedCommit": None}},
    "version": 1, "instantsRollback": [{"commitTime": "20231231", "action": "commit"}],
}
COMPACTION_PLAN = {"operations": [{"baseInstantTime": T[1], "deltaFilePaths": [".f-1_x.log.1_0-1-1"],
                                   "dataFilePath": "f-1_0-1-2_x.parquet", "fileId": "f-1", "partitionPath": "p1",
                                   "metrics": {"TOTAL_LOG_FILES": 1.0}, "bootstrapFilePath": None}],
                   "extraMetadata": None, "version": 2}
SAVEPOINT_METADATA = {"savepointedBy": "me", "savepointedAt": 1, "comments": "",
                      "partitionMetadata": {"p1": {"partitionPath": "p1", "savepointDataFile": ["a.parquet"]}},
                      "version": 1}


@pytest.fixture()
def table(tmp_path) -> tuple[Storage, Timeline]:
    storage = Storage(str(tmp_path / "t"))
    storage.mkdirs(".hoodie")
    tl = Timeline(storage)
    # T1 commit (requested empty, inflight workload, completed)
    tl.create_requested(T[1], "commit")
    tl.transition_inflight(T[1], "commit", _workload(T[1]))
    tl.complete(T[1], "commit", _commit(T[1]))
    # T2 clean (plan, plan copy, metadata)
    plan = A.write_record(A.CLEANER_PLAN, CLEANER_PLAN)
    tl.create_requested(T[2], "clean", plan)
    tl.transition_inflight(T[2], "clean", plan)
    tl.complete(T[2], "clean", A.write_record(A.CLEAN_METADATA, CLEAN_METADATA))
    # T3 deltacommit
    tl.create_requested(T[3], "deltacommit")
    tl.transition_inflight(T[3], "deltacommit", _workload(T[3]))
    tl.complete(T[3], "deltacommit", _commit(T[3]))
    # T4 rollback (plan, empty inflight, metadata)
    tl.create_requested(T[4], "rollback", A.write_record(A.ROLLBACK_PLAN, ROLLBACK_PLAN))
    tl.transition_inflight(T[4], "rollback")
    tl.complete(T[4], "rollback", A.write_record(A.ROLLBACK_METADATA, ROLLBACK_METADATA))
    # T5 compaction: plan with pyhudi's own (subset) schema, empty inflight, completes as a commit
    tl.create_requested(T[5], "compaction", A.write_record(A.COMPACTION_PLAN, COMPACTION_PLAN))
    tl.transition_inflight(T[5], "compaction")
    tl.complete(T[5], "commit", _commit(T[5], compacted=True, op="UNKNOWN"))
    # T6 insert_overwrite replacecommit
    tl.create_requested(T[6], "replacecommit", A.write_record(A.REQUESTED_REPLACE_METADATA, {
        "operationType": "INSERT_OVERWRITE", "clusteringPlan": None, "extraMetadata": None, "version": 1}))
    tl.transition_inflight(T[6], "replacecommit", _workload(T[6]))
    tl.complete(T[6], "replacecommit", _commit(T[6], op="INSERT_OVERWRITE", replaced={"p1": ["f-1"]}))
    # T7 commit, savepointed
    tl.create_requested(T[7], "commit")
    tl.transition_inflight(T[7], "commit", _workload(T[7]))
    tl.complete(T[7], "commit", _commit(T[7]))
    tl.transition_inflight(T[7], "savepoint")
    tl.complete(T[7], "savepoint", A.write_record(A.SAVEPOINT_METADATA, SAVEPOINT_METADATA))
    # T8 commit still pending
    tl.create_requested(T[8], "commit")
    tl.transition_inflight(T[8], "commit", _workload(T[8]))
    return storage, tl


def _names(storage: Storage) -> set[str]:
    return {i.name for i in storage.list_files(".hoodie")}


def _files_of(tl: Timeline, times: list[str]) -> set[str]:
    return {i.file_name() for i in tl.instant_files if i.timestamp in times}


# -- Task 1: schemas ---------------------------------------------------------------------------
def _field_names(schema: dict) -> list[str]:
    return [f["name"] for f in schema["fields"]]


def test_schemas_have_hudi_014_names_and_field_order():
    assert _field_names(A.ARCHIVED_META_ENTRY) == [
        "hoodieCommitMetadata", "hoodieCleanMetadata", "hoodieCompactionMetadata", "hoodieRollbackMetadata",
        "hoodieSavePointMetadata", "commitTime", "actionType", "version", "hoodieCompactionPlan", "hoodieCleanerPlan",
        "actionState", "hoodieReplaceCommitMetadata", "hoodieRequestedReplaceMetadata",
        "HoodieInflightReplaceMetadata", "hoodieIndexCommitMetadata", "stateTransitionTime"]
    assert _field_names(A.CLEANER_PLAN) == [
        "earliestInstantToRetain", "lastCompletedCommitTimestamp", "policy", "filesToBeDeletedPerPartition",
        "version", "filePathsToBeDeletedPerPartition", "partitionsToBeDeleted"]
    assert _field_names(A.CLEAN_METADATA) == [
        "startCleanTime", "timeTakenInMillis", "totalFilesDeleted", "earliestCommitToRetain",
        "lastCompletedCommitTimestamp", "partitionMetadata", "version", "bootstrapPartitionMetadata"]
    assert _field_names(A.RESTORE_PLAN) == ["instantsToRollback", "version", "savepointToRestoreTimestamp"]
    assert _field_names(A.RESTORE_METADATA) == [
        "startRestoreTime", "timeTakenInMillis", "instantsToRollback", "hoodieRestoreMetadata", "version",
        "restoreInstantInfo"]
    assert _field_names(A.SAVEPOINT_METADATA) == [
        "savepointedBy", "savepointedAt", "comments", "partitionMetadata", "version"]
    assert _field_names(A.COMMIT_METADATA) == ["partitionToWriteStats", "extraMetadata", "version", "operationType"]
    assert _field_names(A.WRITE_STAT)[:3] == ["fileId", "path", "prevCommit"]
    assert len(A.WRITE_STAT["fields"]) == 17
    for schema in (A.ARCHIVED_META_ENTRY, A.CLEANER_PLAN, A.CLEAN_METADATA, A.SAVEPOINT_METADATA, A.RESTORE_PLAN,
                   A.RESTORE_METADATA, A.COMMIT_METADATA, A.REPLACE_COMMIT_METADATA):
        assert schema["namespace"] == "org.apache.hudi.avro.model"
    assert A.SAVEPOINT_METADATA["name"] == "HoodieSavepointMetadata"
    assert A.RESTORE_PLAN["fields"][1]["default"] == 2


@pytest.mark.parametrize("name", ["ARCHIVED_META_ENTRY", "RESTORE_METADATA", "REPLACE_COMMIT_METADATA",
                                  "ROLLBACK_METADATA", "RESTORE_PLAN", "COMPACTION_METADATA"])
def test_named_types_are_defined_once_then_referenced_by_full_name(name):
    text = A.schema_json(getattr(A, name))
    fastavro.parse_schema(json.loads(text))
    defined = [m for m in ('"name":"HoodieWriteStat"', '"name":"HoodieInstantInfo"', '"name":"HoodieRollbackMetadata"',
                           '"name":"HoodieCommitMetadata"') if m in text]
    for marker in defined:
        assert text.count(marker) == 1, marker


def test_every_record_round_trips_through_an_avro_file():
    commit = commit_metadata_to_avro(_commit(T[1]))
    samples = {
        "CLEANER_PLAN": CLEANER_PLAN, "CLEAN_METADATA": CLEAN_METADATA, "SAVEPOINT_METADATA": SAVEPOINT_METADATA,
        "ROLLBACK_METADATA": ROLLBACK_METADATA, "ROLLBACK_PLAN": ROLLBACK_PLAN, "COMMIT_METADATA": commit,
        "REPLACE_COMMIT_METADATA": commit_metadata_to_avro(_commit(T[6], replaced={"p1": ["f"]}), replace=True),
        "RESTORE_PLAN": {"instantsToRollback": [{"commitTime": T[3], "action": "commit"}], "version": 1,
                         "savepointToRestoreTimestamp": T[1]},
        "RESTORE_METADATA": {"startRestoreTime": T[9], "timeTakenInMillis": 5, "instantsToRollback": [T[3]],
                             "hoodieRestoreMetadata": {T[3]: [ROLLBACK_METADATA]}, "version": 1,
                             "restoreInstantInfo": [{"commitTime": T[3], "action": "commit"}]},
        "COMPACTION_PLAN_FULL": {**COMPACTION_PLAN, "strategy": None, "preserveHoodieMetadata": False},
    }
    for name, record in samples.items():
        assert A.read_record(A.write_record(getattr(A, name), record)) == record, name
    # reading with a schema resolves: pyhudi's subset compaction plan reads as Hudi's full plan
    full = A.read_record(A.write_record(A.COMPACTION_PLAN, COMPACTION_PLAN), A.COMPACTION_PLAN_FULL)
    assert full["strategy"] is None and full["preserveHoodieMetadata"] is False
    assert full["operations"] == COMPACTION_PLAN["operations"]


def test_commit_metadata_converts_as_java_does():
    avro = commit_metadata_to_avro(_commit(T[5], compacted=True, op="UNKNOWN"))
    assert avro["operationType"] == "COMPACT" and avro["version"] is None
    assert avro["extraMetadata"] == {"schema": '{"type":"record"}', "ROLLING_STAT": ""}
    stat = avro["partitionToWriteStats"]["p2"][0]
    assert stat["numUpdateWrites"] == 2 and stat["totalLogFiles"] is None and stat["prevCommit"] == "null"
    assert [f["name"] for f in A.WRITE_STAT["fields"]] == list(stat)
    empty = commit_metadata_to_avro(b"")  # a requested commit file
    assert empty == {"partitionToWriteStats": {}, "extraMetadata": {"ROLLING_STAT": ""}, "version": None,
                     "operationType": "UNKNOWN"}


# -- Task 2: archiving -------------------------------------------------------------------------
def test_archive_moves_exactly_those_instants(table):
    storage, tl = table
    before = _names(storage)
    doomed = _files_of(tl, [T[1], T[2], T[4]])
    assert len(doomed) == 9
    res = archive_instants(storage, tl, [T[4], T[1], T[2]])
    assert res.archive_file == f"{ARCHIVE_FOLDER}/.commits_.archive.1_1-0-1"
    assert not res.appended and res.blocks == 1
    assert res.instant_times == [T[1], T[2], T[4]]
    assert _names(storage) == before - doomed
    assert {p.rsplit("/", 1)[-1] for p in res.deleted} == doomed
    assert [i.timestamp for i in tl.instants()][:1] == [T[3]]

    archived = ArchivedTimeline(storage)
    assert archived.instants() == [Instant(T[1], State.COMPLETED, "commit"), Instant(T[2], State.COMPLETED, "clean"),
                                   Instant(T[4], State.COMPLETED, "rollback")]
    assert len(archived.instant_files()) == 9
    meta = CommitMetadata.from_dict(archived.metadata(T[1]))
    original = CommitMetadata.from_json(_commit(T[1]))
    assert {p: [(s.fileId, s.path, s.numWrites, s.numUpdateWrites, s.fileSizeInBytes) for s in stats]
            for p, stats in meta.partition_to_write_stats.items()} == \
        {p: [(s.fileId, s.path, s.numWrites, s.numUpdateWrites, s.fileSizeInBytes) for s in stats]
         for p, stats in original.partition_to_write_stats.items()}
    assert archived.commit_metadata(T[1]).extra_metadata == original.extra_metadata
    assert archived.metadata(T[2]) == CLEAN_METADATA
    assert archived.metadata(T[4]) == ROLLBACK_METADATA
    assert archived.metadata(T[3]) is None  # still active
    # every state has its entry, with what Hudi puts there
    requested = archived.entry(T[2], state=State.REQUESTED).record
    assert requested["hoodieCleanerPlan"] == CLEANER_PLAN and requested["actionState"] == "REQUESTED"
    assert archived.entry(T[1], state=State.REQUESTED).record["hoodieCommitMetadata"]["partitionToWriteStats"] == {}
    inflight = archived.entry(T[1], state=State.INFLIGHT).record["hoodieCommitMetadata"]
    assert inflight["partitionToWriteStats"]["p1"][0]["fileId"] == ""
    assert archived.entry(T[4], state=State.INFLIGHT).record["hoodieRollbackMetadata"] is None
    entry = archived.entry(T[1])
    assert entry.record["version"] is None and entry.record["actionType"] == "commit"


def test_state_transition_time_is_the_file_mtime(table):
    storage, tl = table
    path = tl.path_of(Instant(T[1], State.COMPLETED, "commit"))
    os.utime(storage.full(path), ns=(1_700_000_000_123_000_000, 1_700_000_000_123_000_000))
    archive_instants(storage, tl, [T[1]])
    expected = format_instant(dt.datetime.fromtimestamp(1_700_000_000.123))
    assert ArchivedTimeline(storage).entry(T[1]).state_transition_time == expected
    archive_instants(storage, tl, [T[2]], utc=True)
    assert ArchivedTimeline(storage).entry(T[2]).state_transition_time is not None


def test_compaction_and_replace_entries(table):
    storage, tl = table
    archive_instants(storage, tl, [T[5], T[6]])
    archived = ArchivedTimeline(storage)
    assert [str(i) for i in archived.instant_files() if i.timestamp == T[5]] == [
        f"[{T[5]}__compaction__REQUESTED]", f"[{T[5]}__compaction__INFLIGHT]", f"[{T[5]}__commit__COMPLETED]"]
    plan = archived.entry(T[5], "compaction", State.REQUESTED).record["hoodieCompactionPlan"]
    assert plan["operations"] == COMPACTION_PLAN["operations"] and plan["preserveHoodieMetadata"] is False
    assert archived.entry(T[5], "compaction", State.INFLIGHT).record["hoodieCompactionPlan"] is None
    assert archived.metadata(T[5])["operationType"] == "COMPACT"
    assert archived.commit_metadata(T[5]).compacted
    replace = archived.metadata(T[6])
    assert replace["partitionToReplaceFileIds"] == {"p1": ["f-1"]}
    assert replace["operationType"] == "INSERT_OVERWRITE"
    assert archived.commit_metadata(T[6]).partition_to_replace_file_ids == {"p1": ["f-1"]}
    requested = archived.entry(T[6], state=State.REQUESTED).record["hoodieRequestedReplaceMetadata"]
    assert requested["operationType"] == "INSERT_OVERWRITE" and requested["clusteringPlan"] is None
    inflight = archived.entry(T[6], state=State.INFLIGHT).record
    assert inflight["HoodieInflightReplaceMetadata"]["partitionToWriteStats"]["p1"][0]["numInserts"] == 5
    assert [i.timestamp for i in archived.completed_writes()] == [T[5], T[6]]


def test_archiving_twice_rolls_over_to_the_next_file(table):
    storage, tl = table
    first = archive_instants(storage, tl, [T[1]])
    second = archive_instants(storage, tl, [T[2], T[3]])
    assert first.archive_file.endswith(archive_file_name(1)) and second.archive_file.endswith(archive_file_name(2))
    assert list_archive_files(storage) == [first.archive_file, second.archive_file]
    assert [i.timestamp for i in ArchivedTimeline(storage).instants()] == [T[1], T[2], T[3]]


def test_archiving_with_append_adds_blocks_to_the_latest_file(table):
    storage, tl = table
    first = archive_instants(storage, tl, [T[1]], append=True)  # nothing to append to yet
    second = archive_instants(storage, tl, [T[2], T[3]], append=True, batch_size=4)
    assert not first.appended and second.appended and second.archive_file == first.archive_file
    assert second.blocks == 2  # 6 entries in blocks of 4
    assert len(read_log_file(storage, first.archive_file)) == 3
    assert [i.timestamp for i in ArchivedTimeline(storage).instants()] == [T[1], T[2], T[3]]
    # a damaged tail is never appended to: the next run rolls over
    path = storage.full(first.archive_file)
    with open(path, "ab") as f:
        f.write(b"#HUDI#\x00\x00")
    third = archive_instants(storage, tl, [T[4]], append=True)
    assert not third.appended and third.archive_file.endswith(archive_file_name(2))


def test_a_truncated_archive_tail_is_tolerated(table, caplog):
    storage, tl = table
    archive_instants(storage, tl, [T[1], T[2]], batch_size=3)  # two blocks: T1's files, then T2's
    last = archive_instants(storage, tl, [T[3]])
    path = storage.full(last.archive_file)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 17)  # the writer died in the middle of its only block
    first_file = storage.full(list_archive_files(storage)[0])
    with open(first_file, "r+b") as f:
        size = os.path.getsize(first_file)
        f.truncate(size - 5)
    archived = ArchivedTimeline(storage)
    assert [i.timestamp for i in archived.instants()] == [T[1]]
    assert "interrupted write" in caplog.text


def test_the_archive_is_a_valid_hudi_log(table):
    storage, tl = table
    res = archive_instants(storage, tl, [T[1], T[2], T[4], T[5]], batch_size=10)
    blocks = read_log_file(storage, res.archive_file)
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA_BLOCK, BlockType.AVRO_DATA_BLOCK]
    reader = fastavro.parse_schema(json.loads(A.schema_json(A.ARCHIVED_META_ENTRY)))
    decoded = []
    for block in blocks:
        assert set(block.header) == {HeaderKey.SCHEMA} and block.footer == {}
        writer = fastavro.parse_schema(json.loads(block.schema))
        assert json.loads(block.schema)["name"] == "HoodieArchivedMetaEntry"
        version, count = struct.unpack_from(">ii", block.content, 0)
        assert version == 3
        pos = 8
        for _ in range(count):
            (n,) = struct.unpack_from(">i", block.content, pos)
            stream = io.BytesIO(block.content[pos + 4:pos + 4 + n])
            decoded.append(fastavro.schemaless_reader(stream, writer, reader))
            assert stream.tell() == n
            pos += 4 + n
        assert pos == len(block.content)
    assert len(decoded) == 12
    assert [(r["commitTime"], r["actionType"], r["actionState"]) for r in decoded[:3]] == [
        (T[1], "commit", "REQUESTED"), (T[1], "commit", "INFLIGHT"), (T[1], "commit", "COMPLETED")]


def test_deletion_order_is_crash_safe(table, monkeypatch):
    storage, tl = table
    order: list[str] = []
    real = Storage.delete

    def spy(self, rel):
        order.append(rel.rsplit("/", 1)[-1])
        return real(self, rel)

    monkeypatch.setattr(Storage, "delete", spy)
    archive_instants(storage, tl, [T[1], T[3], T[5]])
    completed = [n for n in order if not n.endswith((".requested", ".inflight"))]
    assert order[-3:] == completed == [f"{T[1]}.commit", f"{T[3]}.deltacommit", f"{T[5]}.commit"]


def test_a_crash_before_deletion_leaves_the_instants_active_and_rearchiving_deduplicates(table, monkeypatch):
    storage, tl = table

    def crash(self, rel):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(Storage, "delete", crash)
    with pytest.raises(KeyboardInterrupt):
        archive_instants(storage, tl, [T[1]])
    monkeypatch.undo()
    assert T[1] in [i.timestamp for i in tl.reload().instants()]
    archive_instants(storage, tl, [T[1]])
    assert len(list_archive_files(storage)) == 2
    archived = ArchivedTimeline(storage)
    assert archived.instants() == [Instant(T[1], State.COMPLETED, "commit")]
    assert len(archived.entries()) == 3


def test_what_cannot_be_archived(table):
    storage, tl = table
    names = _names(storage)
    with pytest.raises(HudiError, match="has not completed"):
        archive_instants(storage, tl, [T[8]])
    with pytest.raises(HudiError, match="savepointed"):
        archive_instants(storage, tl, [T[7]])
    with pytest.raises(HudiInstantNotFoundError):
        archive_instants(storage, tl, ["20990101000000000"])
    tl.create_requested(T[9], "restore", b"")
    tl.complete(T[9], "restore", b"")
    with pytest.raises(HudiUnsupportedError, match="restore"):
        archive_instants(storage, tl, [T[1], T[9]])
    assert _names(storage) == names | {f"{T[9]}.restore.requested", f"{T[9]}.restore"}
    assert list_archive_files(storage) == []
    assert ArchivedTimeline(storage).instants() == []


def test_an_empty_completed_file_is_archived_without_metadata(table):
    storage, tl = table
    storage.write_bytes(tl.path_of(Instant(T[3], State.COMPLETED, "deltacommit")), b"")
    archive_instants(storage, tl, [T[3]])
    archived = ArchivedTimeline(storage)
    assert archived.instants() == [Instant(T[3], State.COMPLETED, "deltacommit")]
    assert archived.metadata(T[3]) is None and archived.commit_metadata(T[3]) is None
