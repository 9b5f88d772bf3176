"""Upgrade and downgrade (pyhudi.services.table_version): every table Apache Hudi wrote in
shared/interop moved 6 -> 8 -> 9 and back reads the same through hudi-rs at each version, and
comes back with its instants and commit metadata as they were."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import hudi_rs_rows, unzip_table

import pyhudi
from pyhudi.cli.main import main as cli_main
from pyhudi.config import properties as P
from pyhudi.errors import HudiRetentionError, HudiUnsupportedError
from pyhudi.read.retention import Retention, cleaned_slices
from pyhudi.services.restore import archived_writes_after
from pyhudi.storage import Storage
from pyhudi.timeline.archive import ArchivedTimeline, has_archive, list_archive_files
from pyhudi.timeline.lsm_history import LSMHistory
from pyhudi.timeline.timeline import Timeline

COW = ["v6_empty", "v6_nonpartitioned", "v6_simplekeygen_nonhivestyle", "v6_simplekeygen_hivestyle_no_metafields"]


def _rows(path: Path) -> list[tuple]:
    return sorted(tuple(sorted((k, repr(v)) for k, v in r.items())) for r in hudi_rs_rows(path))


def _files(path: Path) -> dict[str, bytes]:
    out = {}
    for d, _, names in os.walk(path):
        for n in names:
            full = os.path.join(d, n)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = f.read()
    return out


def _metadata(path: Path, layout: int) -> dict:
    timeline = Timeline(Storage(str(path)), layout_version=layout)
    return {(i.timestamp, i.action): timeline.commit_metadata(i) for i in timeline.completed_writes()}


@pytest.mark.parametrize("name", COW)
def test_an_interop_table_moves_to_8_and_9_and_back_reading_the_same(interop_dir, tmp_path, name):
    path = unzip_table(interop_dir / "cow" / f"{name}.zip", tmp_path)
    before_rows = _rows(path)
    before_props = pyhudi.HudiTable(str(path)).properties
    before_names = sorted(p.name for p in (path / ".hoodie").iterdir() if p.is_file())
    before_meta = _metadata(path, 1)

    moved = pyhudi.upgrade(str(path), to=8)
    assert (moved.from_version, moved.to_version) == (6, 8)
    table = pyhudi.HudiTable(str(path))
    assert table.config.version == 8 and table.config.layout_version == 2
    props = table.properties
    assert props["hoodie.table.initial.version"] == "6" and props[P.MERGE_MODE] == "EVENT_TIME_ORDERING"
    assert props["hoodie.record.merge.strategy.id"] == "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
    assert props[P.KEYGEN_TYPE] in ("SIMPLE", "NON_PARTITION", "COMPLEX")
    timeline_files = [p.name for p in (path / ".hoodie" / "timeline").iterdir() if p.is_file()]
    assert len(timeline_files) == moved.instants_converted
    assert not [n for n in os.listdir(path / ".hoodie") if n.split(".")[0].isdigit()]  # nothing left in .hoodie/
    completed = table.timeline.completed()
    assert all(i.completion_time and i.completion_time >= i.timestamp for i in completed)
    assert _rows(path) == before_rows
    assert {k: (m.operation_type, sorted(s.path for s in m.write_stats())) for k, m in _metadata(path, 2).items()} \
        == {k: (m.operation_type, sorted(s.path for s in m.write_stats())) for k, m in before_meta.items()}

    pyhudi.upgrade(str(path), to=9)
    props = pyhudi.HudiTable(str(path)).properties
    assert props[P.VERSION] == "9" and P.PRECOMBINE_FIELD not in props
    assert "hoodie.record.merge.strategy.id" not in props
    if before_props.get(P.PRECOMBINE_FIELD):
        assert props["hoodie.table.ordering.fields"] == before_props[P.PRECOMBINE_FIELD]
    assert _rows(path) == before_rows

    back = pyhudi.downgrade(str(path), to=6)
    assert (back.from_version, back.to_version) == (9, 6)
    assert _rows(path) == before_rows
    after = pyhudi.HudiTable(str(path))
    assert after.config.version == 6 and after.config.layout_version == 1
    assert sorted(p.name for p in (path / ".hoodie").iterdir() if p.is_file()) == before_names
    assert not [p for p in (path / ".hoodie" / "timeline").iterdir() if p.is_file()]
    assert _metadata(path, 1).keys() == before_meta.keys()
    for key, meta in _metadata(path, 1).items():
        assert meta.write_stats() == before_meta[key].write_stats()
        assert meta.extra_metadata == before_meta[key].extra_metadata
    # Hudi's downgrade leaves the keys it has no handler for (the timeline path)
    changed = {k for k in set(before_props) | set(after.properties) if before_props.get(k) != after.properties.get(k)}
    assert changed <= {"hoodie.timeline.path", P.PAYLOAD_CLASS, P.KEYGEN_CLASS}, changed


def test_a_table_with_pending_instants_or_logs_to_compact_is_refused_unchanged(interop_dir, tmp_path):
    path = unzip_table(interop_dir / "mor" / "avro" / "v6_trips_8i1u.zip", tmp_path / "mor")
    before = _files(path)
    with pytest.raises(HudiUnsupportedError, match="log files.*Compact the table first"):
        pyhudi.upgrade(str(path), to=9)
    assert _files(path) == before
    cow = unzip_table(interop_dir / "cow" / "v6_nonpartitioned.zip", tmp_path / "cow")
    (cow / ".hoodie" / "20990101000000000.commit.requested").write_bytes(b"")
    before = _files(cow)
    with pytest.raises(HudiUnsupportedError, match="pending.*20990101000000000"):
        pyhudi.upgrade(str(cow), to=8)
    assert _files(cow) == before
    with pytest.raises(HudiUnsupportedError, match="a downgrade cannot take it to 8"):
        pyhudi.downgrade(str(cow), to=8)


def test_a_pyhudi_table_with_a_metadata_table_upgrades_and_keeps_reading(spark, tmp_path):
    path = str(tmp_path / "t")
    rows = [("a", "x", 1, 1), ("b", "y", 1, 2)]
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts"}
    pyhudi.write(spark.createDataFrame(rows, "id string, p string, ts long, v int"), path, opts)
    pyhudi.write(spark.createDataFrame([("a", "x", 2, 10)], "id string, p string, ts long, v int"), path, opts)
    before = sorted((r["id"], r["v"]) for r in hudi_rs_rows(path))
    moved = pyhudi.upgrade(path, to=9)
    assert moved.metadata_table_dropped and not (Path(path) / ".hoodie" / "metadata").exists()
    assert sorted((r["id"], r["v"]) for r in hudi_rs_rows(path)) == before == [("a", 10), ("b", 2)]
    got = sorted((r["id"], r["v"]) for r in pyhudi.read(spark, path).collect())
    assert got == before


def test_the_cli_moves_a_table(interop_dir, tmp_path, capsys):
    path = unzip_table(interop_dir / "cow" / "v6_nonpartitioned.zip", tmp_path)
    assert cli_main(["upgrade", "--path", str(path), "--to", "8"]) in (0, None)
    assert "table version 6 -> 8" in capsys.readouterr().out
    assert cli_main(["downgrade", "--path", str(path)]) in (0, None)
    assert "table version 8 -> 6" in capsys.readouterr().out
    shutil.rmtree(path)


ARCHIVING = {"hoodie.table.name": "arch", "hoodie.datasource.write.recordkey.field": "id",
             "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
             "hoodie.metadata.enable": "false", "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
             "hoodie.clean.commits.retained": "1"}


def _archiving_writes(spark, path: str, count: int = 8, **options: str) -> list[str]:
    """Commits: the first four insert one key each into a partition of its own (files that stay
    live while their commits are archived), the others update one key of a shared partition
    (versions the cleaner removes); every write cleans and archives inline."""
    times = []
    for i in range(count):
        row = (f"k{i}", f"p{i}", i, i) if i < 4 else ("h", "hot", i, 100 + i)
        times.append(pyhudi.write(spark.createDataFrame([row], "id string, p string, ts long, v int"), path,
                                  {**ARCHIVING, **options}).instant_time)
    return times


def _kv(path: str, **kw) -> list[tuple]:
    return sorted((r["id"], r["v"]) for r in hudi_rs_rows(path, **kw))


def test_a_table_with_an_archived_timeline_moves_to_9_and_back(spark, tmp_path):
    path = str(tmp_path / "arch")
    times = _archiving_writes(spark, path, **{"hoodie.keep.min.commits": "5", "hoodie.keep.max.commits": "6"})
    storage = Storage(path)
    v6 = ArchivedTimeline(storage)
    archived = [(i.timestamp, i.action) for i in v6.instants()]
    assert [t for t, a in archived if a == "commit"] == times[:2]
    rows = _kv(path)
    assert rows == [("h", 107), ("k0", 0), ("k1", 1), ("k2", 2), ("k3", 3)]
    # time travel to archived commits whose files are all still there
    as_of = {t: [(f"k{j}", j) for j in range(i + 1)] for i, t in enumerate(times[:4])}
    assert {t: _kv(path, as_of=t) for t in as_of} == as_of

    moved = pyhudi.upgrade(path, to=9)
    assert moved.archive_files_written >= 3
    assert not list_archive_files(storage) and has_archive(storage)
    history = LSMHistory(storage)
    assert [(i.timestamp, i.action) for i in history.instants()] == archived
    assert [r.completion_time for r in history.records()] == [
        v6.entry(t, a).state_transition_time for t, a in archived]
    assert _kv(path) == rows
    assert {t: _kv(path, as_of=t) for t in as_of} == as_of

    # archival of the version-9 table adds to the LSM history the upgrade wrote
    pyhudi.archive(path, ARCHIVING)
    grown = LSMHistory(storage)
    now_archived = [i.timestamp for i in grown.completed_writes()]
    assert len(now_archived) > 2 and now_archived == times[:len(now_archived)]
    assert set(history.instants()) < set(grown.instants())
    assert [i.timestamp for i in pyhudi.HudiTable(path).timeline.completed_writes()] == times[len(now_archived):]
    assert _kv(path) == rows
    assert {t: _kv(path, as_of=t) for t in as_of} == as_of

    back = pyhudi.downgrade(path, to=6)
    assert back.archive_files_written >= 1
    assert not list(Path(path, ".hoodie", "timeline", "history").iterdir())
    again = ArchivedTimeline(storage)
    assert [(i.timestamp, i.action) for i in again.instants()] == [(i.timestamp, i.action) for i in grown.instants()]
    for t, a in archived:  # what version 6 archived comes back as it was
        assert again.entry(t, a).record == v6.entry(t, a).record, (t, a)
    assert _kv(path) == rows
    assert {t: _kv(path, as_of=t) for t in as_of} == as_of


def test_retention_and_restore_consult_the_lsm_history_of_a_version_9_table(spark, tmp_path):
    path = str(tmp_path / "ret")
    times = _archiving_writes(spark, path, 11)
    storage = Storage(path)
    table = pyhudi.HudiTable(path)
    # a version of "h" that an archived clean removed: only the archived timeline knows it is gone
    v6 = ArchivedTimeline(storage)
    clean = next(i.timestamp for i in v6.instants() if i.action == "clean")
    gone = v6.metadata(clean, "clean")["partitionMetadata"]["hot"]["successDeleteFiles"][0]
    updated = gone.rsplit("_", 1)[1].split(".")[0]
    assert updated in times[4:] and not [s for s in cleaned_slices(storage, table.timeline) if s.needed_at(updated)]

    def answers(t: pyhudi.HudiTable) -> tuple:
        retention = Retention(t.storage, t.timeline)
        with pytest.raises(HudiRetentionError, match=f"as written at {updated}, which clean {clean} removed") as no:
            retention.check(updated)
        retention.check(times[3])  # every file it needs is still there
        return str(no.value), archived_writes_after(t, times[1])

    at_6 = answers(table)
    assert at_6[1] == [t for t in times[2:] if t in {i.timestamp for i in v6.instants()}] and at_6[1]
    pyhudi.upgrade(path, to=9)
    assert answers(pyhudi.HudiTable(path)) == at_6
