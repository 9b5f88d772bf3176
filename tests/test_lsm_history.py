"""The LSM archived timeline of table versions 8 and 9 (pyhudi.timeline.lsm_history): the files as
Hudi 1.1 lays them out, crash safety of the version switch, compaction and cleaning, archiving from
a layout-2 timeline, and the conversion from and to version 6's archive log files."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from pyhudi.config.properties import store_table_config
from pyhudi.errors import HudiCorruptFileError
from pyhudi.storage import Storage
from pyhudi.timeline import avro_records as A
from pyhudi.timeline import commit_avro
from pyhudi.timeline import lsm_history as L
from pyhudi.timeline.archive import ArchivedTimeline, archive_instants, archived_timeline, has_archive
from pyhudi.timeline.commit_metadata import CommitMetadata, WriteStat
from pyhudi.timeline.instant import Instant, State
from pyhudi.timeline.layout_change import lsm_to_v6_archive, remove_old, v6_archive_to_lsm
from pyhudi.timeline.timeline import Timeline

FOLDER = ".hoodie/timeline/history"
T = [f"2024010100{i:07d}" for i in range(40)]


def _records(*times: str) -> list[L.LSMInstant]:
    return [L.LSMInstant(t, t[:-1] + "9", "commit", f"meta-{t}".encode(), None) for t in times]


def _names(storage: Storage) -> list[str]:
    return sorted(i.name for i in storage.list_files(FOLDER))


@pytest.fixture()
def storage(tmp_path) -> Storage:
    return Storage(str(tmp_path / "t"))


# -- files -----------------------------------------------------------------------------------------
def test_the_manifest_is_jacksons_pretty_json():
    assert L.manifest_json([]) == '{\n  "files" : [ ]\n}'
    text = L.manifest_json([("a_b_0.parquet", 12), ("c_d_1.parquet", 345)])
    assert text == ('{\n  "files" : [ {\n    "fileName" : "a_b_0.parquet",\n    "fileLen" : 12\n  }, '
                    '{\n    "fileName" : "c_d_1.parquet",\n    "fileLen" : 345\n  } ]\n}')
    assert L.parse_manifest(text) == (("a_b_0.parquet", 12), ("c_d_1.parquet", 345))


def test_a_batch_becomes_a_layer_zero_file_a_manifest_and_the_version(storage):
    records = _records(T[3], T[1], T[2])
    name = L.append(storage, records, folder=FOLDER)
    assert name == f"{T[1]}_{T[3]}_0.parquet"
    assert _names(storage) == sorted([name, "_version_", "manifest_1"])
    assert storage.read_bytes(f"{FOLDER}/_version_") == b"1"
    size = storage.size(f"{FOLDER}/{name}")
    assert storage.read_bytes(f"{FOLDER}/manifest_1").decode() == L.manifest_json([(name, size)])
    assert L.read_instants(storage, FOLDER) == sorted(records, key=lambda r: r.instant_time)
    # the file as parquet-avro writes HoodieLSMTimelineInstant: optional UTF8 strings, optional
    # binaries, a required int32, gzip, the Avro schema in the footer, no bloom filter
    pf = pq.ParquetFile(storage.full(f"{FOLDER}/{name}"))
    cols = {c.name: (c.physical_type, c.logical_type.type, c.max_definition_level) for c in pf.schema}
    assert cols == {"instantTime": ("BYTE_ARRAY", "STRING", 1), "completionTime": ("BYTE_ARRAY", "STRING", 1),
                    "action": ("BYTE_ARRAY", "STRING", 1), "metadata": ("BYTE_ARRAY", "NONE", 1),
                    "plan": ("BYTE_ARRAY", "NONE", 1), "version": ("INT32", "NONE", 0)}
    meta = pf.metadata.metadata
    assert set(meta) == {b"parquet.avro.schema", b"writer.model.name"} and meta[b"writer.model.name"] == b"avro"
    assert b'"name":"HoodieLSMTimelineInstant","namespace":"org.apache.hudi.avro.model"' in meta[b"parquet.avro.schema"]
    assert pf.metadata.row_group(0).column(0).compression == "GZIP"
    assert pf.read().column("instantTime").to_pylist() == [T[1], T[2], T[3]]


def test_the_version_file_is_the_switch(storage):
    first = L.append(storage, _records(T[1]), folder=FOLDER)
    # a writer that died after its manifest, before switching _version_: readers keep snapshot 1
    second = L.data_file_name(T[2], T[2], 0)
    storage.write_bytes(f"{FOLDER}/{second}", b"half a parquet file")
    storage.write_bytes(f"{FOLDER}/manifest_2", L.manifest_json([(first, 1), (second, 19)]).encode())
    assert [r.instant_time for r in L.read_instants(storage, FOLDER)] == [T[1]]
    # the next run writes the same batch again: the leftover file and manifest are replaced
    assert L.append(storage, _records(T[2]), folder=FOLDER) == second
    assert storage.read_bytes(f"{FOLDER}/_version_") == b"2"
    assert [r.instant_time for r in L.read_instants(storage, FOLDER)] == [T[1], T[2]]
    # a run that died after switching (before deleting the active files) is repeated: nothing new
    assert L.append(storage, _records(T[2]), folder=FOLDER) is None
    assert L.latest_version(storage, FOLDER) == 2
    # without _version_ (deleted and not yet recreated, as Java does it) readers take the newest manifest
    storage.delete(f"{FOLDER}/_version_")
    assert L.latest_version(storage, FOLDER) == 2
    assert [r.instant_time for r in L.read_instants(storage, FOLDER)] == [T[1], T[2]]


def test_full_layers_compact_into_the_next_and_cleaning_keeps_three_snapshots(storage):
    for i in range(4):
        L.append(storage, _records(T[2 * i], T[2 * i + 1]), folder=FOLDER)
        L.compact_and_clean(storage, folder=FOLDER, batch_size=2)
    # two layer-0 files made one layer-1 file, twice; the two layer-1 files made a layer-2 file
    manifest = L.read_manifest(storage, FOLDER)
    assert manifest.file_names == [f"{T[0]}_{T[7]}_2.parquet"]
    assert [r.instant_time for r in L.read_instants(storage, FOLDER)] == T[:8]
    # snapshots: 1 a, 2 ab, 3 L1(ab), 4 +c, 5 +cd, 6 L1(cd), 7 L2: the last run compacted two layers,
    # so 3 + 2 manifests stay, and only the files they list
    versions = L.snapshot_versions(storage, FOLDER)
    assert versions == [3, 4, 5, 6, 7]
    listed = {n for v in versions for n in L.read_manifest(storage, FOLDER, v).file_names}
    assert {n for n in _names(storage) if n.endswith(".parquet")} == listed
    assert f"{T[0]}_{T[1]}_0.parquet" not in listed


def test_a_batch_size_of_ten_compacts_the_ten_oldest_files(storage):
    for i in range(11):
        L.append(storage, _records(T[i]), folder=FOLDER)
        L.compact_and_clean(storage, folder=FOLDER)
    assert L.read_manifest(storage, FOLDER).file_names == [f"{T[0]}_{T[9]}_1.parquet", f"{T[10]}_{T[10]}_0.parquet"]
    assert [r.instant_time for r in L.read_instants(storage, FOLDER)] == T[:11]


# -- archiving a layout-2 timeline ------------------------------------------------------------------
def _commit(instant: str, op: str = "UPSERT", replaced: dict | None = None) -> bytes:
    stat = WriteStat(fileId=f"f{instant[-2:]}", path=f"p1/f{instant[-2:]}_0-1-2_{instant}.parquet",
                     partitionPath="p1", numWrites=3, numInserts=3)
    return CommitMetadata({"p1": [stat]}, operation_type=op, extra_metadata={"schema": "{}"},
                          partition_to_replace_file_ids=replaced).to_json().encode()


CLEANER_PLAN = {"earliestInstantToRetain": None, "lastCompletedCommitTimestamp": T[1], "policy": "KEEP_LATEST_COMMITS",
                "filesToBeDeletedPerPartition": {}, "version": 2, "filePathsToBeDeletedPerPartition": {
                    "p1": [{"filePath": "/t/p1/old.parquet", "isBootstrapBaseFile": False}]},
                "partitionsToBeDeleted": []}
CLEAN_METADATA = {"startCleanTime": T[2], "timeTakenInMillis": 1, "totalFilesDeleted": 1,
                  "earliestCommitToRetain": T[1], "lastCompletedCommitTimestamp": T[1], "partitionMetadata": {"p1": {
                      "partitionPath": "p1", "policy": "KEEP_LATEST_COMMITS", "deletePathPatterns": ["old.parquet"],
                      "successDeleteFiles": ["old.parquet"], "failedDeleteFiles": [], "isPartitionDeleted": False}},
                  "version": 2, "bootstrapPartitionMetadata": {}}
COMPACTION_PLAN = {"operations": [], "extraMetadata": None, "version": 2}


def _timeline(storage: Storage, layout: int) -> Timeline:
    store_table_config(storage, {"hoodie.table.name": "t", "hoodie.table.type": "MERGE_ON_READ",
                                 "hoodie.table.version": "8" if layout == 2 else "6",
                                 "hoodie.timeline.layout.version": str(layout),
                                 "hoodie.table.recordkey.fields": "id"})
    tl = Timeline(storage, layout_version=layout)
    tl.create_requested(T[1], "deltacommit")
    tl.transition_inflight(T[1], "deltacommit", _commit(T[1]))
    tl.complete(T[1], "deltacommit", _commit(T[1]))
    plan = A.write_record(A.CLEANER_PLAN, CLEANER_PLAN)
    tl.create_requested(T[2], "clean", plan)
    tl.transition_inflight(T[2], "clean", b"" if layout == 2 else plan)
    tl.complete(T[2], "clean", A.write_record(A.CLEAN_METADATA, CLEAN_METADATA))
    tl.create_requested(T[3], "compaction", A.write_record(A.COMPACTION_PLAN_FULL, COMPACTION_PLAN))
    tl.transition_inflight(T[3], "compaction")
    tl.complete(T[3], "commit", _commit(T[3], op="COMPACT"))
    tl.create_requested(T[4], "replacecommit", A.write_record(A.REQUESTED_REPLACE_METADATA, {
        "operationType": "INSERT_OVERWRITE", "clusteringPlan": None, "extraMetadata": None, "version": 1}))
    tl.transition_inflight(T[4], "replacecommit", _commit(T[4], op="INSERT_OVERWRITE"))
    tl.complete(T[4], "replacecommit", _commit(T[4], op="INSERT_OVERWRITE", replaced={"p1": ["f01"]}))
    tl.create_requested(T[5], "deltacommit")
    tl.transition_inflight(T[5], "deltacommit", _commit(T[5]))
    tl.complete(T[5], "deltacommit", _commit(T[5]))
    return tl.reload()


def test_archiving_a_layout_2_timeline_keeps_each_instants_metadata_and_plan(storage):
    tl = _timeline(storage, 2)
    files = {i: tl.read_bytes(i) for i in tl.instant_files}
    completed = {i.timestamp: i for i in tl.instant_files if i.is_completed}
    result = archive_instants(storage, tl, T[1:5])
    assert result.archive_file == f"{FOLDER}/{T[1]}_{T[4]}_0.parquet"
    assert [i.timestamp for i in tl.instant_files] == [T[5]] * 3  # every state of the archived instants went
    history = archived_timeline(storage)
    assert isinstance(history, L.LSMHistory) and has_archive(storage)
    by_time = {r.instant_time: r for r in history.records()}
    assert [(t, r.action, r.completion_time) for t, r in by_time.items()] == [
        (t, completed[t].action, completed[t].completion_time) for t in T[1:5]]
    for t in T[1:5]:  # the completed file's bytes, as they were on the active timeline
        assert by_time[t].metadata == files[completed[t]]

    def content(ts: str, state: State, action: str) -> bytes:
        return files[Instant(ts, state, action)]

    assert by_time[T[1]].plan is None
    assert by_time[T[2]].plan == content(T[2], State.REQUESTED, "clean")  # the cleaner plan
    assert by_time[T[3]].plan == content(T[3], State.REQUESTED, "compaction")
    assert by_time[T[4]].plan == content(T[4], State.INFLIGHT, "replacecommit")  # inflight wins over requested
    assert history.metadata(T[2], "clean")["earliestCommitToRetain"] == T[1]
    assert history.commit_metadata(T[4]).partition_to_replace_file_ids == {"p1": ["f01"]}
    assert [i.timestamp for i in history.completed_writes()] == [T[1], T[3], T[4]]


def test_a_v6_archive_becomes_the_lsm_history_and_comes_back(storage):
    tl = _timeline(storage, 1)
    archive_instants(storage, tl, T[1:5])
    before = ArchivedTimeline(storage)
    up = v6_archive_to_lsm(storage)
    assert sorted(up.written) == [f"{FOLDER}/{T[1]}_{T[4]}_0.parquet", f"{FOLDER}/_version_", f"{FOLDER}/manifest_1"]
    remove_old(storage, up)
    assert not storage.list_files(".hoodie/archived")
    history = L.LSMHistory(storage)
    completed = {e.instant.timestamp: e for e in before.entries() if e.instant.is_completed}
    assert [(r.instant_time, r.action, r.completion_time) for r in history.records()] == [
        (t, e.instant.action, e.state_transition_time) for t, e in completed.items()]
    # metadata as Hudi 1.x's Avro records: commit metadata read by the layout-2 decoder
    def stats(meta: CommitMetadata) -> list[tuple]:
        return [(s.path, s.prevCommit, s.numWrites, s.numInserts, s.numUpdateWrites) for s in meta.write_stats()]

    meta = commit_avro.decode(history.entry(T[1]).metadata, source="t")
    assert stats(meta) == stats(before.commit_metadata(T[1])) and meta.operation_type == "UPSERT"
    assert A.read_record(history.entry(T[2]).plan, A.CLEANER_PLAN) == CLEANER_PLAN
    assert A.read_record(history.entry(T[3]).plan, A.COMPACTION_PLAN_FULL)["operations"] == []
    assert history.commit_metadata(T[3]).compacted  # v6 archives have no field: told by the operation
    down = lsm_to_v6_archive(storage)
    assert down.written == (".hoodie/archived/.commits_.archive.1_1-0-1",)
    remove_old(storage, down)
    assert not storage.list_files(FOLDER)
    after = ArchivedTimeline(storage)
    assert after.instants() == before.instants()
    for t, e in completed.items():
        assert after.entry(t).record == e.record, t
    assert after.entry(T[2], "clean", State.REQUESTED).record["hoodieCleanerPlan"] == CLEANER_PLAN


def test_a_snapshot_whose_file_is_missing_is_reported(storage):
    name = L.append(storage, _records(T[1]), folder=FOLDER)
    storage.delete(f"{FOLDER}/{name}")
    with pytest.raises(HudiCorruptFileError, match=f"lists {name}, which is missing"):
        L.read_instants(storage, FOLDER)
