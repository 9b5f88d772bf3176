"""What a lock holder has read of a table's metadata folders, remembered until it lets go.

Between taking the table lock and releasing it, one operation opens the table, its timeline and its
metadata table several times over (the write's checks, its start, its commit, the clean and the
archival after it), each handle listing the timeline and reading ``hoodie.properties`` again. On
local disk that costs microseconds; on an object store each is a request, and together they were
most of a commit's requests.

While the lock is held nobody else changes those folders: every writer changes the timeline and
the metadata table only under the lock (the one exception, a writer turning its own requested
instant inflight, changes nothing a lock holder decides on). So while this thread holds the lock,
:class:`~pyhudi.storage.fs.Storage` answers listings and reads of the folders in
:data:`FOLDERS` from what it read before in the same hold (:func:`lookup`), and every write,
delete or append through any ``Storage`` of the process forgets what it changes (:func:`forget`),
so this process's own changes are always read back from the store. Executors never write these
folders (their files are data files, markers and record-index logs), and a memo dies with its
lock hold: the next hold reads everything afresh.
"""

from __future__ import annotations

import contextlib
import posixpath
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from pyhudi.storage.options import StorageOptions


class Store(Protocol):
    """What the memo asks of a :class:`~pyhudi.storage.fs.Storage` (which imports this module)."""

    options: StorageOptions

    def full(self, rel: str) -> str: ...

#: folders of a table (relative to its base path) only the driver writes, and only under the lock:
#: the timeline (layouts 1 and 2), the metadata table's root, its timeline and its ``files`` partition
FOLDERS = (".hoodie", ".hoodie/timeline", ".hoodie/metadata", ".hoodie/metadata/.hoodie",
           ".hoodie/metadata/.hoodie/timeline", ".hoodie/metadata/files")


@dataclass
class ReadMemo:
    """Listings and file contents of one table's :data:`FOLDERS`, as read during one lock hold."""

    options: StorageOptions
    folders: frozenset[str]  # full paths
    listings: dict[str, list[Any]] = field(default_factory=dict)  # FileInfo of each folder
    dirs: dict[str, list[str]] = field(default_factory=dict)
    contents: dict[str, bytes | None] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def covers(self, storage: Store, folder: str) -> bool:
        return folder in self.folders and storage.options == self.options

    def forget(self, path: str, *, tree: bool = False) -> None:
        """Drop what a change of ``path`` (a file; with ``tree``, a folder and all below) makes stale."""
        folder = posixpath.dirname(path)
        with self.guard:
            self.contents.pop(path, None)
            self.listings.pop(folder, None)
            self.dirs.pop(posixpath.dirname(folder), None)  # a folder may have appeared
            self.dirs.pop(folder, None)
            if tree:
                prefix = path.rstrip("/") + "/"
                for table in (self.listings, self.dirs, self.contents):
                    for key in [k for k in table if k == path or k.startswith(prefix)]:
                        del table[key]


#: memos of lock holds now open, per holding thread; every memo of the process, for forget()
_BY_THREAD: dict[int, list[ReadMemo]] = {}
_OPEN: list[ReadMemo] = []
_GUARD = threading.Lock()


@contextlib.contextmanager
def remembering(storage: Store) -> Iterator[ReadMemo]:
    """Remember reads of the table at ``storage``'s metadata folders in this thread until the
    block ends (the table lock's outermost hold)."""
    memo = ReadMemo(storage.options, frozenset(storage.full(f) for f in FOLDERS))
    me = threading.get_ident()
    with _GUARD:
        _BY_THREAD.setdefault(me, []).append(memo)
        _OPEN.append(memo)
    try:
        yield memo
    finally:
        with _GUARD:
            mine = _BY_THREAD.get(me, [])
            if memo in mine:
                mine.remove(memo)
            if not mine:
                _BY_THREAD.pop(me, None)
            if memo in _OPEN:
                _OPEN.remove(memo)


def lookup(storage: Store, folder: str) -> ReadMemo | None:
    """The memo of this thread's lock hold that covers ``folder`` (a full path), if any."""
    if not _OPEN:
        return None
    with _GUARD:
        mine = list(_BY_THREAD.get(threading.get_ident(), ()))
    return next((m for m in mine if m.covers(storage, folder)), None)


def forget(storage: Store, path: str, *, tree: bool = False) -> None:
    """A write, delete or append of ``path`` (a full path) by any thread: every open memo drops
    what it makes stale."""
    if not _OPEN:
        return
    with _GUARD:
        memos = [m for m in _OPEN if m.options == storage.options]
    for memo in memos:
        memo.forget(path, tree=tree)
