"""What every lock provider is: the interface custom providers implement, and the base of pyhudi's
own providers (:mod:`pyhudi.transaction.lock`, :mod:`pyhudi.transaction.storage_lock`), which
reach the store with the table's :class:`~pyhudi.storage.Storage`.

It is a module of its own so that the providers and :class:`~pyhudi.transaction.lock.TableLock`,
which chooses among them, import it without importing each other.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping
from typing import Any

from pyhudi.storage import Storage


class LockProvider(abc.ABC):
    """A lock shared by every writer of one table (the interface custom providers implement).

    ``__init__(table_path, options)`` receives the table's base path and the write options (a
    mapping of ``hoodie.*`` keys). ``try_lock`` waits up to ``timeout_s`` and says whether it got
    the lock; ``unlock`` releases it. Re-entry and retries are handled by the caller, so a provider
    never sees two ``try_lock`` calls from one holder.
    """

    def __init__(self, table_path: str, options: Mapping[str, Any]) -> None:
        self.table_path = table_path
        self.options = options

    @abc.abstractmethod
    def try_lock(self, timeout_s: float) -> bool: ...

    @abc.abstractmethod
    def unlock(self) -> None: ...

    def owner(self) -> str | None:
        """Who holds the lock now, for error messages (None when unknown)."""
        return None

    def still_held(self) -> bool:
        """Whether the lock this provider took is still its own, with time to spare for what the
        holder does next. A lock that others can take over (a lease that lapsed) says False, and
        the commit point then refuses to complete an instant; locks without leases are held until
        released."""
        return True

    @property
    def key(self) -> str:
        """What the lock protects; holders with equal keys exclude each other."""
        return self.table_path

    #: whether holders in other processes (and machines) are excluded too; a provider of unknown
    #: reach (a user's) is taken not to
    spans_processes = False


def poll(attempt: Callable[[], bool], timeout_s: float, max_pause_s: float) -> bool:
    """Call ``attempt`` until it returns True or ``timeout_s`` passes, backing off from 10 ms."""
    deadline = time.monotonic() + timeout_s
    pause = 0.01
    while True:
        if attempt():
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, max_pause_s)


class BuiltInProvider(LockProvider):
    """pyhudi's own providers: they get the table's :class:`Storage` (with its store settings)."""

    def __init__(self, table_path: str, options: Mapping[str, Any], *, storage: Storage | None = None) -> None:
        super().__init__(table_path, options)
        self.storage = storage if storage is not None else Storage(table_path)
