"""The table lock: what serializes changes to the timeline when writers run side by side.

Under optimistic concurrency control a writer holds the lock twice, briefly: to start (roll back
failed writes, choose an instant time greater than every other, request it) and to commit (check
its instant is still pending, resolve conflicts, complete it); data files are written outside the
lock, so writers overlap for all but milliseconds. In single-writer mode a write holds it from
start to end (:func:`operation_hold`). Table services hold it while they change the timeline.
While this thread holds the lock, reads of the table's timeline and metadata-table folders are
remembered until a write changes them (:mod:`pyhudi.storage.memo`): nobody else changes them then.

Providers are named by Hudi's class names (``hoodie.write.lock.provider``):

* ``StorageBasedLockProvider`` (:mod:`pyhudi.transaction.storage_lock`): Hudi 1.1's lease in
  ``.hoodie/.locks/table_lock.json``, taken and renewed by conditional writes; the default on S3,
  and shared with Apache Hudi's writers.
* ``FileSystemBasedLockProvider``: the file ``lock`` in ``hoodie.write.lock.filesystem.path``
  (default ``.hoodie``), created exclusively, its holder's ``flock`` on it proving the holder
  alive: a lock left by a dead pyhudi process is broken at once, one another program left after
  ``hoodie.write.lock.filesystem.expire`` minutes if that is set.
* ``InProcessLockProvider``: a lock per table path shared by the threads of one process; on
  shared storage only when the user promises a single process (:func:`check_lock_choice`), and the
  default only where nothing better works (gs://, abfs://, hdfs://: one writer at a time).
* any Python class implementing :class:`LockProvider`, named by its dotted path.

:class:`TableLock` adds what every provider needs: re-entry by the thread that holds it (a write
start that rolls back a failed write takes the lock once), and Hudi's client retries
(``hoodie.write.lock.client.num_retries`` attempts, ``...client.wait_time_ms_between_retry``
apart, each waiting up to ``hoodie.write.lock.wait_time_ms``). Taking the lock also finishes an
interrupted update of ``hoodie.properties`` (:func:`~pyhudi.config.properties.recover_table_config`),
as Hudi's writers do before they change the config, so every writer and table service works on a
restored config. A lock held by a lease is checked again before an instant completes
(:meth:`TableLock.verify`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.config.properties import recover_table_config
from pyhudi.errors import HudiConfigError, HudiError, HudiLockError, HudiUnsupportedError
from pyhudi.storage import Storage, memo
from pyhudi.transaction.provider import BuiltInProvider, LockProvider, poll
from pyhudi.transaction.storage_lock import StorageBasedLockProvider

log = logging.getLogger("pyhudi")

_HUDI = "org.apache.hudi.client.transaction.lock."
FILE_SYSTEM = _HUDI + "FileSystemBasedLockProvider"
IN_PROCESS = _HUDI + "InProcessLockProvider"
STORAGE_BASED = _HUDI + "StorageBasedLockProvider"
_JVM_ONLY = ("ZookeeperBasedLockProvider", "DynamoDBBasedLockProvider", "HiveMetastoreBasedLockProvider",
             "ZookeeperBasedImplicitBasePathLockProvider")
LOCK_FILE = "lock"

#: the names code imports from here (providers are defined in pyhudi.transaction.provider)
__all__ = ["FILE_SYSTEM", "IN_PROCESS", "STORAGE_BASED", "FileSystemLockProvider", "InProcessLockProvider",
           "LockProvider", "StorageBasedLockProvider", "TableLock", "check_lock_choice", "operation_hold",
           "provider_class", "under_table_lock"]


_IN_PROCESS_LOCKS: dict[str, threading.Lock] = {}
_IN_PROCESS_GUARD = threading.Lock()


class InProcessLockProvider(BuiltInProvider):
    """One lock per table path for all threads of this process (Hudi's InProcessLockProvider)."""

    def __init__(self, table_path: str, options: Mapping[str, Any], *, storage: Storage | None = None) -> None:
        super().__init__(table_path, options, storage=storage)
        self._key = self.storage.uri()
        with _IN_PROCESS_GUARD:
            self._lock = _IN_PROCESS_LOCKS.setdefault(self._key, threading.Lock())
        self._max_pause = HudiConfig(dict(options)).get(C.LOCK_RETRY_WAIT_MS) / 1000.0

    @property
    def key(self) -> str:
        return "in-process:" + self._key

    def try_lock(self, timeout_s: float) -> bool:
        return self._lock.acquire(timeout=max(timeout_s, 0.0))

    def unlock(self) -> None:
        self._lock.release()


class FileSystemLockProvider(BuiltInProvider):
    """A lock file created exclusively (Hudi's FileSystemBasedLockProvider), local paths only.

    The file exists exactly while the lock is held, as Hudi's provider keeps it. Its creator also
    holds an advisory ``flock`` on it, which the kernel drops when the process dies however it
    dies: a waiter that can take that flock on a file pyhudi wrote knows the holder is gone and
    breaks the lock at once. A lock file another program wrote (Apache Hudi's Java writers take no
    flock) is broken only after ``hoodie.write.lock.filesystem.expire`` minutes, if that is set.
    """

    spans_processes = True

    def __init__(self, table_path: str, options: Mapping[str, Any], *, storage: Storage | None = None) -> None:
        super().__init__(table_path, options, storage=storage)
        cfg = HudiConfig(dict(options))
        folder = cfg.get(C.LOCK_FILESYSTEM_PATH)
        if folder:
            self.storage = Storage(folder, self.storage.options)
        self.rel = LOCK_FILE if folder else f".hoodie/{LOCK_FILE}"
        if not self.storage.is_local:
            raise HudiUnsupportedError(
                f"the file-system lock needs a local path ({self.storage.uri(self.rel)} is not): object stores "
                f"cannot hold an flock. Use {STORAGE_BASED} (S3), or a lock provider of your own "
                "(hoodie.write.lock.provider=your.module.YourLockProvider)")
        self.path = self.storage.full(self.rel)
        self.expire_s = cfg.get(C.LOCK_FILESYSTEM_EXPIRE) * 60.0
        self._max_pause = cfg.get(C.LOCK_RETRY_WAIT_MS) / 1000.0
        self._fd: int | None = None

    @property
    def key(self) -> str:
        return "file:" + self.path

    @staticmethod
    def _info() -> bytes:
        return json.dumps({"lockCreateTime": str(int(time.time() * 1000)),
                           "lockThreadName": threading.current_thread().name, "lockStacksInfo": [],
                           "owner": "pyhudi", "host": socket.gethostname(), "pid": os.getpid()}).encode()

    def _attempt(self) -> bool:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            self._break_if_abandoned()
            return False
        fcntl.flock(fd, fcntl.LOCK_EX)  # a waiter probing the new, still empty file lets go at once
        # not synced: the writers this lock serves share the machine's page cache, and a lock file
        # a power cut left empty or torn is broken after ten seconds (_abandoned)
        os.write(fd, self._info())
        self._fd = fd
        return True

    def _abandoned(self, content: bytes, age: float) -> bool:
        """Whether a lock file whose flock nobody holds has lost its holder."""
        try:
            info = json.loads(content)
        except ValueError:
            info = None
        if isinstance(info, dict) and info.get("owner") == "pyhudi":
            return True  # its holder would hold the flock while alive
        if not content.strip(b"\0") or info is None:
            # a creator between creating and flocking it, one that died there, or a file a power
            # cut left empty, zeroed or torn (its content is not synced; Hudi's writers write JSON)
            return age > 10.0
        return bool(self.expire_s) and age > self.expire_s

    def _break_if_abandoned(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # the holder is alive
            stat = os.fstat(fd)
            content = os.pread(fd, 65536, 0)
            if not self._abandoned(content, time.time() - stat.st_mtime):
                return
            try:
                if os.stat(self.path).st_ino != stat.st_ino:
                    return  # broken and re-taken meanwhile: not the file judged
            except FileNotFoundError:
                return
            os.unlink(self.path)
            log.warning("broke the abandoned lock %s (%s)", self.path, content.decode(errors="replace"))
        finally:
            os.close(fd)

    def try_lock(self, timeout_s: float) -> bool:
        return poll(self._attempt, timeout_s, self._max_pause)

    def unlock(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)

    def owner(self) -> str | None:
        try:
            with open(self.path, "rb") as f:
                content = f.read()
            age = time.time() - os.stat(self.path).st_mtime
        except FileNotFoundError:
            return None
        try:
            info = json.loads(content)
            return (f"process {info.get('pid')} on {info.get('host')} (thread {info.get('lockThreadName')}), "
                    f"for {age:.0f} s; lock file {self.path}")
        except ValueError:
            return (f"a writer that left no details, for {age:.0f} s; lock file {self.path} (if no writer runs, "
                    "delete it, or set hoodie.write.lock.filesystem.expire)")


def provider_class(name: str | None, storage: Storage) -> type[LockProvider]:
    """The provider class ``hoodie.write.lock.provider`` names, or the default for this storage:
    the file-system lock on local paths, the storage-based lock where files can be created
    exclusively (S3), the in-process lock elsewhere (gs://, abfs://, hdfs://: one writer at a time)."""
    if not name:
        if storage.is_local:
            return FileSystemLockProvider
        return StorageBasedLockProvider if storage.exclusive_create else InProcessLockProvider
    short = name.rsplit(".", 1)[-1]
    if name in (FILE_SYSTEM, "FileSystemBasedLockProvider"):
        return FileSystemLockProvider
    if name in (IN_PROCESS, "InProcessLockProvider"):
        return InProcessLockProvider
    if name in (STORAGE_BASED, "StorageBasedLockProvider"):
        return StorageBasedLockProvider
    if short in _JVM_ONLY:
        raise HudiUnsupportedError(
            f"hoodie.write.lock.provider={name} needs Apache Hudi's JVM client; use {STORAGE_BASED} (S3, local "
            f"paths), {FILE_SYSTEM} (local paths), {IN_PROCESS} (one process) or a Python class implementing "
            "pyhudi.transaction.lock.LockProvider")
    module, _, cls_name = name.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), cls_name) if module else None
    except ImportError as exc:
        raise HudiConfigError(f"hoodie.write.lock.provider={name}: cannot import {module} ({exc})") from None
    if not (isinstance(cls, type) and issubclass(cls, LockProvider)):
        raise HudiConfigError(f"hoodie.write.lock.provider={name} is not a subclass of "
                              "pyhudi.transaction.lock.LockProvider")
    return cls


def check_lock_choice(storage: Storage, cfg: HudiConfig, cls: type[LockProvider]) -> None:
    """Refuse lock set-ups under which writers in two processes could both commit unseen:
    optimistic concurrency control where files cannot be created exclusively (every writer's
    instants and log files rest on that), and the in-process lock on shared storage, which
    excludes nothing outside this process, unless the user promises one process
    (``pyhudi.write.lock.single.process``). In single-writer mode the in-process lock is refused
    only where a lock that works across processes exists (S3): there a second writer must be seen."""
    occ = cfg.get(C.WRITE_CONCURRENCY_MODE) == C.OCC
    if occ and not storage.exclusive_create:
        why = ("fs.s3a.create.conditional.enabled=false says this store does not honour conditional writes"
               if storage.is_s3 else "pyarrow offers no exclusive create there")
        raise HudiConfigError(
            f"optimistic concurrency control on {storage.uri()} needs files created only-if-absent, and {why}: "
            "writers side by side would overwrite each other's instants and log files. Run one writer at a time "
            "(hoodie.write.concurrency.mode=SINGLE_WRITER)")
    if cls is not InProcessLockProvider or storage.is_local or cfg.get(C.LOCK_SINGLE_PROCESS):
        return
    if occ or (cfg.get(C.LOCK_PROVIDER) and storage.exclusive_create):
        raise HudiConfigError(
            f"{IN_PROCESS} cannot exclude writers in other processes, and {storage.uri()} is shared storage: two "
            f"processes writing it would lose each other's commits. Remove hoodie.write.lock.provider (the default "
            f"there is {STORAGE_BASED}), or, if every writer of the table runs in this one process, set "
            f"{C.LOCK_SINGLE_PROCESS.key}=true")


# (provider key) -> (holding thread, depth, the provider that took it, the hold's read memo):
# re-entry by the holder
_HELD: dict[str, tuple[int, int, LockProvider, contextlib.ExitStack]] = {}
_HELD_GUARD = threading.Lock()


class TableLock:
    """The lock of one table for one writer: re-entrant per thread, with Hudi's client retries."""

    def __init__(self, table: str | Storage, cfg: HudiConfig) -> None:
        self.storage = table if isinstance(table, Storage) else Storage(table)
        self.cfg = cfg
        cls = provider_class(cfg.get(C.LOCK_PROVIDER), self.storage)
        check_lock_choice(self.storage, cfg, cls)
        # pyhudi's own providers reach the store with the table's settings; others get the path
        self.provider = cls(self.storage.uri(), cfg.raw, storage=self.storage) if issubclass(cls, BuiltInProvider) \
            else cls(self.storage.uri(), cfg.raw)

    def acquire(self) -> None:
        key, me = self.provider.key, threading.get_ident()
        with _HELD_GUARD:
            holder = _HELD.get(key)
            if holder is not None and holder[0] == me:
                _HELD[key] = (me, holder[1] + 1, holder[2], holder[3])
                return
        wait_s = self.cfg.get(C.LOCK_WAIT_MS) / 1000.0
        retries = self.cfg.get(C.LOCK_CLIENT_NUM_RETRIES)
        pause_s = self.cfg.get(C.LOCK_CLIENT_RETRY_WAIT_MS) / 1000.0
        for attempt in range(retries + 1):
            if self.provider.try_lock(wait_s):
                reads = contextlib.ExitStack()
                reads.enter_context(memo.remembering(self.storage))
                with _HELD_GUARD:
                    _HELD[key] = (me, 1, self.provider, reads)
                try:
                    recover_table_config(self.storage)
                except BaseException:
                    self.release()
                    raise
                return
            if attempt < retries:
                time.sleep(pause_s)
        owner = self.provider.owner()
        raise HudiLockError(
            f"could not take the lock of {self.provider.table_path} ({type(self.provider).__name__}) in "
            f"{retries + 1} attempts of {wait_s:.0f} s" + (f"; it is held by {owner}" if owner else "")
            + ". Retry when the other writer is done, or raise hoodie.write.lock.client.num_retries / "
            "hoodie.write.lock.wait_time_ms")

    def release(self) -> None:
        key = self.provider.key
        with _HELD_GUARD:
            holder = _HELD.get(key)
            if holder is None or holder[0] != threading.get_ident():
                raise HudiError(f"the lock of {self.provider.table_path} is not held by this thread")
            if holder[1] > 1:
                _HELD[key] = (holder[0], holder[1] - 1, holder[2], holder[3])
                return
            del _HELD[key]
        holder[3].close()
        holder[2].unlock()

    def held_for_operation(self) -> bool:
        """Whether this thread holds the lock already, by a lock that excludes other processes:
        a whole operation's hold (:func:`operation_hold`), under which nobody else can roll its
        instant back, so that a write needs no heartbeat to be seen alive."""
        with _HELD_GUARD:
            holder = _HELD.get(self.provider.key)
        return holder is not None and holder[0] == threading.get_ident() and holder[2].spans_processes

    def verify(self) -> None:
        """Raise :class:`HudiLockError` if this thread holds the lock but no longer surely (a lease
        whose renewals failed, or that another writer took over): completing an instant then could
        race the writer that holds it now. A lock this thread does not hold is its caller's business."""
        with _HELD_GUARD:
            holder = _HELD.get(self.provider.key)
        if holder is None or holder[0] != threading.get_ident() or holder[2].still_held():
            return
        owner = holder[2].owner()
        raise HudiLockError(
            f"the lock of {self.provider.table_path} ({type(holder[2]).__name__}) is no longer surely held by this "
            "writer: its lease lapsed or was taken over" + (f" (now: {owner})" if owner else "")
            + "; nothing was completed. Check the store's availability and run the operation again")

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()


def operation_hold(storage: Storage, cfg: HudiConfig) -> contextlib.AbstractContextManager[None]:
    """The lock a whole write holds, from its first read of the table to its last post-commit
    service, in single-writer mode (none under optimistic concurrency control, whose writers
    overlap and hold the lock only to start and to commit).

    One writer at a time is what single-writer mode means; holding the lock throughout makes a
    second one wait its turn instead of finding a live write and failing, takes the lock once per
    write where its steps took it four times, and lets the whole write read the timeline and the
    metadata table once (the read memo of a hold, :mod:`pyhudi.storage.memo`): on an object store,
    where each of those is a request, that is most of what a small commit costs."""
    if cfg.get(C.WRITE_CONCURRENCY_MODE) == C.OCC:
        return contextlib.nullcontext()
    return TableLock(storage, cfg).held()


F = TypeVar("F", bound=Callable[..., Any])


def under_table_lock(fn: F) -> F:
    """Run a table service (first argument: the table) holding the table's lock.

    The lock options come from the first :class:`HudiConfig` among the arguments, else defaults.
    """
    @functools.wraps(fn)
    def wrapper(table: Any, *args: Any, **kwargs: Any) -> Any:
        cfg = next((a for a in (*args, *kwargs.values()) if isinstance(a, HudiConfig)), None) or HudiConfig()
        with TableLock(table.storage, cfg).held():
            return fn(table, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
