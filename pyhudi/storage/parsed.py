"""What the process made of files it read lately, kept by the files' identity.

Planning and committing read the same timeline and metadata-table files over and over; parsing
them again each time (a commit's JSON, an HFile's records) is most of the cost. Entries are keyed
by what the listing said of the file (path, size, modification time, and whatever else the reader
varies), so a file written again under the same name is read afresh. A write and the clean beside
it (``hoodie.clean.async``) read them on two threads, so every access takes a lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class ParsedFiles(Generic[V]):
    """The ``size`` most recently used parsed files, shared by the threads of the process."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._guard = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._guard:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: Hashable, value: V) -> None:
        with self._guard:
            self._entries[key] = value
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._guard:
            self._entries.clear()
