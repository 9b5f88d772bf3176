"""The read memo of a lock hold (pyhudi.storage.memo): while this thread holds the table lock, the
timeline and metadata-table folders are listed and read once, and every write forgets what it
changes, so the holder always sees this process's own changes and never a stale listing."""

from __future__ import annotations

import threading

import pytest

from pyhudi.config import HudiConfig
from pyhudi.storage import Storage
from pyhudi.storage import fs as storage_fs
from pyhudi.transaction.lock import TableLock


@pytest.fixture
def counted(monkeypatch):
    """Storage listings and reads that reach the file system, by folder / path."""
    calls: list[tuple[str, str]] = []
    list_files, read = storage_fs.Storage._list_files, storage_fs.Storage._read_or_none

    def counting_list(self, folder):
        calls.append(("list", folder))
        return list_files(self, folder)

    def counting_read(self, rel):
        calls.append(("read", self.full(rel)))
        return read(self, rel)

    monkeypatch.setattr(storage_fs.Storage, "_list_files", counting_list)
    monkeypatch.setattr(storage_fs.Storage, "_read_or_none", counting_read)
    return calls


def _table(tmp_path) -> Storage:
    storage = Storage(str(tmp_path / "t"))
    storage.write_bytes(".hoodie/hoodie.properties", b"hoodie.table.name=t\n")
    storage.write_bytes("p1/f.parquet", b"x")
    return storage


def _names(storage: Storage, rel: str) -> set[str]:
    """The files of a folder but the file-system lock's own (``.hoodie/lock``, held meanwhile)."""
    return {f.name for f in storage.list_files(rel)} - {"lock"}


def test_a_hold_lists_and_reads_the_timeline_once_and_sees_its_own_writes(tmp_path, counted):
    storage = _table(tmp_path)
    other = Storage(storage.uri())  # another handle of the same table: the memo is the table's
    with TableLock(storage, HudiConfig()).held():
        assert _names(storage, ".hoodie") == {"hoodie.properties"}
        assert _names(other, ".hoodie") == {"hoodie.properties"}
        assert other.read_bytes(".hoodie/hoodie.properties") == storage.read_bytes(".hoodie/hoodie.properties")
        assert not storage.exists(".hoodie/hoodie.properties.backup")  # from the listing
        assert storage.read_bytes_or_none(".hoodie/1.commit") is None  # absent from the listing: not read
        assert [c for c in counted if c[1].endswith(".hoodie")] == [("list", storage.full(".hoodie"))]
        assert [c for c in counted if c[0] == "read"] == [("read", storage.full(".hoodie/hoodie.properties"))]
        other.create_new(".hoodie/1.commit.requested", b"")  # written through another handle
        assert _names(storage, ".hoodie") == {"hoodie.properties", "1.commit.requested"}
        storage.write_bytes(".hoodie/hoodie.properties", b"hoodie.table.name=u\n")
        assert other.read_bytes(".hoodie/hoodie.properties") == b"hoodie.table.name=u\n"
        storage.delete(".hoodie/1.commit.requested")
        assert _names(storage, ".hoodie") == {"hoodie.properties"}
        # data folders are not remembered: executors write there
        assert _names(storage, "p1") == {"f.parquet"}
        assert _names(storage, "p1") == {"f.parquet"}
        assert counted.count(("list", storage.full("p1"))) == 2
    counted.clear()
    _names(storage, ".hoodie")
    _names(storage, ".hoodie")
    assert counted == [("list", storage.full(".hoodie"))] * 2  # no hold, no memo


def test_writes_of_other_threads_are_forgotten_and_their_reads_not_remembered(tmp_path, counted):
    storage = _table(tmp_path)
    with TableLock(storage, HudiConfig()).held():
        assert _names(storage, ".hoodie/metadata/files") == set()
        seen: list[set[str]] = []

        def other_thread() -> None:
            storage.create_new(".hoodie/metadata/files/.files-0000-0_1.log.1_0-0-0", b"log")
            seen.append(_names(storage, ".hoodie/metadata/files"))
            seen.append(_names(storage, ".hoodie/metadata/files"))

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert seen == [{".files-0000-0_1.log.1_0-0-0"}] * 2
        assert counted.count(("list", storage.full(".hoodie/metadata/files"))) == 3  # theirs: not remembered
        assert _names(storage, ".hoodie/metadata/files") == {".files-0000-0_1.log.1_0-0-0"}
        assert counted.count(("list", storage.full(".hoodie/metadata/files"))) == 4
        storage.delete_dir(".hoodie/metadata")
        assert _names(storage, ".hoodie/metadata/files") == set()
        assert storage.list_dirs(".hoodie/metadata") == []


def test_the_memo_lives_as_long_as_the_outermost_hold(tmp_path, counted):
    storage = _table(tmp_path)
    lock = TableLock(storage, HudiConfig())
    with lock.held():
        _names(storage, ".hoodie")
        with lock.held():  # re-entry: the same hold
            _names(storage, ".hoodie")
        _names(storage, ".hoodie")
    with lock.held():  # a new hold reads afresh
        _names(storage, ".hoodie")
    assert counted.count(("list", storage.full(".hoodie"))) == 2
