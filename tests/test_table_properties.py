"""A table whose ``hoodie.properties`` is missing, damaged or mid-update: refused or recovered.

Hudi's readers fall back on ``hoodie.properties.backup``, its writers restore the file from it; with
neither usable, every entry point refuses and leaves the table as it was. Results are checked
against an in-memory model and hudi-rs.
"""

from __future__ import annotations

import hashlib
import shutil
import zlib
from pathlib import Path

import pytest
from conftest import hudi_rs_rows, pyhudi_rows

import pyhudi
from pyhudi.cli import main as cli_main
from pyhudi.config import HudiConfig
from pyhudi.config import properties as P
from pyhudi.transaction.lock import TableLock

MOR = {
    "hoodie.table.name": "props", "hoodie.datasource.write.recordkey.field": "key",
    "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
}
#: what the user's write used: the same table, but as copy-on-write
COW = {**MOR, "hoodie.datasource.write.table.type": "COPY_ON_WRITE"}
SCHEMA = "key string, part string, ts long, val long"
FIRST = [("a", "p1", 1, 10), ("b", "p1", 1, 20), ("c", "p2", 1, 30)]
UPDATE = [("a", "p1", 2, 11), ("c", "p2", 2, 31)]
LATER = [("b", "p1", 3, 22), ("d", "p2", 3, 40)]
PROPS = ".hoodie/hoodie.properties"
BACKUP = ".hoodie/hoodie.properties.backup"


def _model(*batches: list[tuple]) -> dict[str, int]:
    out: dict[str, int] = {}
    for batch in batches:
        out.update({key: val for key, _part, _ts, val in batch})
    return out


@pytest.fixture(scope="module")
def pristine(spark, tmp_path_factory) -> Path:
    """A merge-on-read table with a metadata table: one insert, then updates in log files."""
    path = tmp_path_factory.mktemp("props") / "t"
    pyhudi.write(spark.createDataFrame(FIRST, SCHEMA), str(path), MOR)
    pyhudi.write(spark.createDataFrame(UPDATE, SCHEMA), str(path), MOR)
    table = pyhudi.HudiTable(str(path))
    assert any(s.log_files for s in table.file_system_view().latest_slices()), "updates went to log files"
    return path


@pytest.fixture()
def table_path(pristine, tmp_path) -> Path:
    dest = tmp_path / "t"
    shutil.copytree(pristine, dest)
    return dest


def _props(path: Path) -> Path:
    return path / PROPS


def _backup(path: Path) -> Path:
    return path / BACKUP


def _files(path: Path) -> dict[str, str]:
    """Every file of the table (timeline, data, metadata table) with a digest of its content."""
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file() and f.name != "lock"}


def _rows(spark, path: Path) -> dict[str, int]:
    return {r["key"]: r["val"] for r in pyhudi_rows(spark, path)}


def _refused(spark, path: Path, match: str) -> None:
    """Reads, writes, table services and the CLI all refuse the table, changing no file."""
    before = _files(path)
    err = pyhudi.HudiTablePropertiesError
    with pytest.raises(err, match=match):
        pyhudi.write(spark.createDataFrame(LATER, SCHEMA), str(path), COW)
    with pytest.raises(err, match=match):
        pyhudi.write(spark.createDataFrame(LATER, SCHEMA), str(path), MOR)
    with pytest.raises(err, match=match):
        pyhudi.read(spark, str(path))
    with pytest.raises(err, match=match):
        pyhudi.HudiTable(str(path))
    for service in (pyhudi.clean, pyhudi.archive, pyhudi.schedule_compaction, pyhudi.schedule_clustering,
                    pyhudi.create_savepoint, pyhudi.rollback, pyhudi.list_savepoints):
        with pytest.raises(err, match=match):
            service(str(path))
    with pytest.raises(err, match=match):
        pyhudi.restore(str(path), "20240101000000000")
    with pytest.raises(err, match=match):
        pyhudi.compact(spark, str(path))
    with pytest.raises(err, match=match):
        pyhudi.cluster(spark, str(path))
    assert _files(path) == before, "nothing was written or deleted"


def test_missing_properties_is_refused_everywhere(spark, table_path, capsys):
    """The user's case: a copy-on-write write over a merge-on-read table whose properties are gone
    re-created them from its options and lost the log-file updates."""
    _props(table_path).unlink()
    _refused(spark, table_path, r"hoodie\.properties does not exist, and there is no .*backup")
    assert cli_main(["show", "properties", "--path", str(table_path)]) == 2
    assert "hoodie.properties does not exist" in capsys.readouterr().err
    assert not _props(table_path).exists()


@pytest.mark.parametrize("damage", ["empty", "truncated", "checksum cut", "renamed", "binary"])
def test_damaged_properties_without_backup_are_refused(spark, table_path, damage):
    props = _props(table_path)
    text = props.read_bytes()
    damaged, problem = {
        "empty": (b"", "is empty"),
        "truncated": (text[:len(text) // 2], "no hoodie.table.checksum.*truncated"),
        "checksum cut": (text.rstrip()[:-3], "hoodie.table.checksum=.* give .*damaged or truncated"),
        "renamed": (text.replace(b"hoodie.table.name=props", b"hoodie.table.name=other"), "damaged"),
        "binary": (b"\xff\xfe\x00garbage", "is not a text file"),
    }[damage]
    props.write_bytes(damaged)
    _refused(spark, table_path, problem)
    assert props.read_bytes() == damaged, "the damaged file is kept for repair"


def test_properties_and_backup_both_damaged_are_refused_and_kept(spark, table_path):
    _props(table_path).unlink()
    _backup(table_path).write_bytes(b"#Properties saved\nhoodie.table.name=props\n")
    _refused(spark, table_path, r"hoodie\.properties\.backup has no hoodie\.table\.checksum")
    assert _backup(table_path).exists(), "the damaged backup is kept (Hudi would delete it)"


@pytest.mark.parametrize("main_file", ["missing", "truncated"])
def test_backup_is_read_then_restored_by_the_next_write(spark, table_path, main_file):
    """A crash inside a config update leaves the backup, and no or a half-written hoodie.properties:
    reads use the backup, the next write restores hoodie.properties from it, then writes."""
    original = _props(table_path).read_bytes()
    _props(table_path).rename(_backup(table_path))
    if main_file == "truncated":
        _props(table_path).write_bytes(original[:-5])
    before = _files(table_path)
    assert pyhudi.HudiTable(str(table_path)).table_type == "MERGE_ON_READ"
    assert _rows(spark, table_path) == _model(FIRST, UPDATE)
    assert _files(table_path) == before, "reading changes nothing"

    pyhudi.write(spark.createDataFrame(LATER, SCHEMA), str(table_path), MOR)
    assert not _backup(table_path).exists()
    assert P.parse_properties(_props(table_path).read_text()) == P.parse_properties(original.decode())
    expected = _model(FIRST, UPDATE, LATER)
    assert _rows(spark, table_path) == expected
    assert {r["key"]: r["val"] for r in hudi_rs_rows(table_path)} == expected


def test_valid_properties_win_over_a_damaged_backup(spark, table_path):
    """A backup next to a valid hoodie.properties is a leftover of an update that wrote the new
    file: it is ignored, and the next writer deletes it, as Hudi does."""
    _backup(table_path).write_bytes(b"garbage")
    assert _rows(spark, table_path) == _model(FIRST, UPDATE)
    assert _backup(table_path).exists(), "reading changes nothing"
    pyhudi.write(spark.createDataFrame(LATER, SCHEMA), str(table_path), MOR)
    assert not _backup(table_path).exists()
    assert {r["key"]: r["val"] for r in hudi_rs_rows(table_path)} == _model(FIRST, UPDATE, LATER)


def test_update_writes_the_backup_first_and_removes_it(table_path, monkeypatch):
    """Hudi's order: backup (a new file), delete hoodie.properties, write it, check, delete backup."""
    from pyhudi.storage import Storage

    steps: list[tuple[str, str]] = []
    for name in ("write_bytes", "create_new", "delete"):
        real = getattr(Storage, name)

        def spy(self, rel, *args, _name=name, _real=real):
            if rel.startswith(PROPS):
                steps.append((_name, rel))
            return _real(self, rel, *args)

        monkeypatch.setattr(Storage, name, spy)
    table = pyhudi.HudiTable(str(table_path))
    old = dict(table.properties)
    table.update_properties({"hoodie.table.metadata.partitions": None})
    assert steps == [("create_new", BACKUP), ("delete", PROPS),
                     ("write_bytes", PROPS), ("delete", BACKUP)]
    assert not _backup(table_path).exists()
    stored = P.parse_properties(_props(table_path).read_text())
    assert stored == {k: v for k, v in old.items() if k != "hoodie.table.metadata.partitions"}
    assert stored["hoodie.table.checksum"] == str(zlib.crc32(b".props"))


def test_update_interrupted_after_the_backup_recovers(spark, table_path, monkeypatch):
    """A crash between deleting hoodie.properties and writing the new one: readers see the old
    config from the backup; taking the table lock restores it."""
    original = _props(table_path).read_bytes()

    def crash(storage, props):
        raise OSError("killed")

    monkeypatch.setattr(P, "store_table_config", crash)
    with pytest.raises(OSError, match="killed"):
        pyhudi.HudiTable(str(table_path)).update_properties({"hoodie.table.metadata.partitions": None})
    monkeypatch.undo()
    assert not _props(table_path).exists() and _backup(table_path).read_bytes() == original
    assert pyhudi.HudiTable(str(table_path)).properties["hoodie.table.metadata.partitions"] == "files"
    with TableLock(str(table_path), HudiConfig()).held():
        pass
    assert _props(table_path).read_bytes() == original and not _backup(table_path).exists()
    assert {r["key"]: r["val"] for r in hudi_rs_rows(table_path)} == _model(FIRST, UPDATE)


def test_a_table_is_created_only_where_there_is_no_timeline(spark, table_path, tmp_path):
    _props(table_path).unlink()
    with pytest.raises(pyhudi.HudiTablePropertiesError, match="holds a table already"):
        pyhudi.HudiTable.create(str(table_path), {"hoodie.table.name": "props"})
    assert not _props(table_path).exists()
    # a meta folder without instants (a creation that died before hoodie.properties) is no table
    fresh = tmp_path / "fresh"
    (fresh / ".hoodie" / ".aux").mkdir(parents=True)
    with pytest.raises(pyhudi.HudiTableNotFoundError):
        pyhudi.HudiTable(str(fresh))
    pyhudi.write(spark.createDataFrame(FIRST, SCHEMA), str(fresh), MOR)
    assert {r["key"]: r["val"] for r in hudi_rs_rows(fresh)} == _model(FIRST)
