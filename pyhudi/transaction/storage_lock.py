"""Apache Hudi 1.1's storage-based lock (``StorageBasedLockProvider``): a lease in a file of the
table, taken and renewed by conditional writes, so that writers in any process, pyhudi's and
Apache Hudi's, exclude each other on an object store with nothing but the store.

The file is ``<table>/.hoodie/.locks/table_lock.json`` with Hudi's JSON,
``{"expired":false,"validUntil":<ms since the epoch>,"owner":"<uuid>"}`` (compact, in this order,
as Hudi's Jackson mapper writes it; one owner id per provider). A writer

* takes the lock when the file is absent (a create-if-absent write, ``If-None-Match: *``), says
  ``expired`` (released), or its ``validUntil`` passed more than 500 ms ago (its holder died): then
  by a write conditioned on the entity tag it read (``If-Match``), so of writers racing for it
  exactly one wins;
* renews the lease every ``hoodie.write.lock.storage.renew.interval.secs`` from a daemon thread, to
  ``hoodie.write.lock.storage.validity.timeout.secs`` ahead, each renewal conditioned on the tag
  of its last write: a renewal refused because the file changed means another writer took over;
* releases it by writing ``expired: true`` (same owner and validUntil) conditioned on its tag; the
  file stays (S3 has no conditional delete).

Time. Hudi compares ``validUntil`` with the reading machine's clock. pyhudi stamps and judges it on
the store's clock (the ``Date`` of the store's answer), so a machine whose clock is off neither
steals a live lease nor keeps a dead one; Hudi's 500 ms allowance stays for Hudi's writers, whose
clocks may differ a little from the store's. The ``Date`` counts whole seconds, so the holder counts
its lease from before the request that stamped it, less that second and the allowance: it never
believes it holds a lease others already take for lapsed.

A lapsed lease. Renewals that keep failing (the store unreachable) or one that finds the lock taken
over end the hold: :meth:`StorageBasedLockProvider.still_held` turns False once less than one renew
interval of the lease is left, and the commit point
(:meth:`~pyhudi.transaction.lock.TableLock.verify`) then refuses to complete an instant.

Stores. S3 and S3-compatible stores that honour conditional writes, through
:mod:`pyhudi.storage.s3`; local paths, with the same file, exclusive creation by ``link`` and an
atomic compare-and-replace under an ``flock`` of the lock folder. pyarrow offers no conditional
write on gs://, abfs:// or hdfs://, so there the provider is refused.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.errors import HudiError, HudiLockError, HudiUnsupportedError
from pyhudi.storage import Storage, s3
from pyhudi.transaction.provider import BuiltInProvider, poll

log = logging.getLogger("pyhudi")

#: the lock file, relative to the table's base path (Hudi: ``LOCKS_FOLDER_NAME`` + ``table_lock.json``)
LOCK_FILE = ".hoodie/.locks/table_lock.json"
#: how far a reader's clock may be behind the writer's before a lease counts as lapsed (Hudi's constant)
CLOCK_DRIFT_MS = 500
#: the resolution of the store's clock (the HTTP ``Date`` header)
_STORE_CLOCK_RESOLUTION_S = 1.0
#: how long a release waits for a renewal in flight (Hudi's ``DEFAULT_STOP_HEARTBEAT_TIMEOUT_MS``)
_STOP_RENEWAL_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class LockData:
    """The content of the lock file (Hudi's ``StorageLockData``)."""

    expired: bool
    valid_until: int  # ms since the epoch
    owner: str

    def encode(self) -> bytes:
        """Hudi's bytes: compact JSON, fields in the order of its ``@JsonCreator``, no newline."""
        return json.dumps({"expired": self.expired, "validUntil": self.valid_until, "owner": self.owner},
                          separators=(",", ":")).encode()

    @classmethod
    def decode(cls, body: bytes, shown: str) -> LockData:
        """Parse the file as Hudi does: the three fields required, others ignored."""
        try:
            doc = json.loads(body)
            expired, valid_until, owner = doc["expired"], doc["validUntil"], doc["owner"]
            ok = isinstance(expired, bool) and isinstance(valid_until, int) and not isinstance(valid_until, bool) \
                and isinstance(owner, str)
        except (ValueError, TypeError, KeyError):
            ok = False
        if not ok:
            raise HudiLockError(
                f"the lock file {shown} is not Hudi's storage lock ({body[:200]!r}); if no writer of the table "
                "runs, delete it")
        return cls(expired, valid_until, owner)


@dataclass(frozen=True)
class LockFile:
    """The lock file as read or written: its data, bytes, version (S3: the entity tag) and the
    store's time when it was read or when the lease in it was stamped (ms since the epoch)."""

    data: LockData
    body: bytes
    version: str
    store_time_ms: int

    @property
    def live(self) -> bool:
        """Whether its lease still excludes others (Hudi's ``isLockStillValid``, on the store's clock)."""
        return not self.data.expired and self.store_time_ms <= self.data.valid_until + CLOCK_DRIFT_MS

    def describe(self) -> str:
        left_s = (self.data.valid_until - self.store_time_ms) / 1000.0
        state = "released" if self.data.expired else (
            f"its lease runs {left_s:.0f} s more" if self.live else f"its lease lapsed {-left_s:.0f} s ago")
        return f"owner {self.data.owner} ({state}, by the store's clock)"


class _Files(abc.ABC):
    """The lock file on one store: read, create if absent, replace if unchanged, the store's clock."""

    shown: str

    @abc.abstractmethod
    def read(self) -> LockFile | None: ...

    @abc.abstractmethod
    def create(self, body: bytes) -> str | None:
        """Write the file if absent: its new version, None if it exists."""

    @abc.abstractmethod
    def replace(self, body: bytes, version: str) -> str | None:
        """Write the file if its version is still ``version``: its new version, None if it changed."""

    @abc.abstractmethod
    def now_ms(self) -> int: ...


class _S3Files(_Files):
    """On S3: one GET to read, PUTs with ``If-None-Match: *`` or ``If-Match: <etag>`` to write."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.bucket, _, self.key = storage.full(LOCK_FILE).partition("/")
        self.shown = storage.uri(LOCK_FILE)

    def read(self) -> LockFile | None:
        state = s3.get(self.storage.options, self.bucket, self.key)
        if state is None:
            return None
        return LockFile(LockData.decode(state.body, self.shown), state.body, state.etag, state.store_time_ms)

    def create(self, body: bytes) -> str | None:
        try:
            return s3.put(self.storage.options, self.bucket, self.key, body, if_none_match=True)
        except s3.PreconditionFailed:
            return None

    def replace(self, body: bytes, version: str) -> str | None:
        try:
            return s3.put(self.storage.options, self.bucket, self.key, body, if_match=version)
        except s3.PreconditionFailed:
            return None

    def now_ms(self) -> int:
        return self.storage.now_ms()


class _LocalFiles(_Files):
    """On a local path: the version is the file's inode, mtime and a hash of its bytes; creating
    links a complete temporary file under the name (refused if it exists), replacing renames one
    over it after comparing the version, both under an ``flock`` of the lock folder."""

    def __init__(self, storage: Storage) -> None:
        self.path = storage.full(LOCK_FILE)
        self.folder = os.path.dirname(self.path)
        self.shown = self.path

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        os.makedirs(self.folder, exist_ok=True)
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # drops the flock

    def read(self) -> LockFile | None:
        try:
            with open(self.path, "rb") as f:
                body = f.read()
                stat = os.fstat(f.fileno())
        except FileNotFoundError:
            return None
        version = f"{stat.st_ino}-{stat.st_mtime_ns}-{hashlib.sha256(body).hexdigest()[:16]}"
        return LockFile(LockData.decode(body, self.shown), body, version, self.now_ms())

    def _temporary(self, body: bytes) -> str:
        tmp = os.path.join(self.folder, f".table_lock.json.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def _version(self, body: bytes) -> str | None:
        current = self.read()
        return current.version if current is not None and current.body == body else None

    def create(self, body: bytes) -> str | None:
        with self._exclusive():
            tmp = self._temporary(body)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                return None
            finally:
                os.unlink(tmp)
            return self._version(body)

    def replace(self, body: bytes, version: str) -> str | None:
        with self._exclusive():
            current = self.read()
            if current is None or current.version != version:
                return None
            os.replace(self._temporary(body), self.path)
            return self._version(body)

    def now_ms(self) -> int:
        return int(time.time() * 1000)


def _files_of(storage: Storage) -> _Files:
    if storage.is_local:
        return _LocalFiles(storage)
    if storage.is_s3 and storage.options.conditional_create:
        return _S3Files(storage)
    why = ("fs.s3a.create.conditional.enabled=false says this store does not honour conditional writes"
           if storage.is_s3 else "pyarrow offers no conditional write there")
    raise HudiUnsupportedError(
        f"the storage-based lock cannot work on {storage.uri()}: {why}. Run one writer at a time "
        "(hoodie.write.concurrency.mode=SINGLE_WRITER without hoodie.write.lock.provider), or name a lock of your "
        "own (hoodie.write.lock.provider=your.module.YourLockProvider)")


#: providers holding a lease, released (best effort) when the interpreter exits, as Hudi's shutdown hook does
_HOLDING: weakref.WeakSet[StorageBasedLockProvider] = weakref.WeakSet()


class StorageBasedLockProvider(BuiltInProvider):
    """Hudi's ``StorageBasedLockProvider`` on S3 and local paths (see the module's description)."""

    spans_processes = True

    def __init__(self, table_path: str, options: Mapping[str, Any], *, storage: Storage | None = None) -> None:
        super().__init__(table_path, options, storage=storage)
        cfg = HudiConfig(dict(options))
        self.validity_s, self.renew_s = C.storage_lock_timing(cfg.get(C.LOCK_STORAGE_VALIDITY_S),
                                                              cfg.get(C.LOCK_STORAGE_RENEW_S))
        self.owner_id = str(uuid.uuid4())
        self.files = _files_of(self.storage)
        self._max_pause = cfg.get(C.LOCK_RETRY_WAIT_MS) / 1000.0
        self._guard = threading.Lock()
        self._held: LockFile | None = None  # this provider's last write while it holds the lock
        self._lease_end = 0.0  # time.monotonic() until which the lease is surely this provider's
        self._lost: str | None = None  # why the hold ended before the release
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def key(self) -> str:
        return "storage:" + self.files.shown

    # -- taking it ------------------------------------------------------------------------------
    def try_lock(self, timeout_s: float) -> bool:
        return poll(self._attempt, timeout_s, self._max_pause)

    def _attempt(self) -> bool:
        """One pass of Hudi's ``tryLock``: read the file, and take the lock if it is free."""
        started = time.monotonic()
        try:
            current = self.files.read()
            if current is not None and current.live and current.data.owner != self.owner_id:
                return False
            now_ms = current.store_time_ms if current is not None else self.files.now_ms()
            data = LockData(False, now_ms + self.validity_s * 1000, self.owner_id)
            body = data.encode()
            version = self.files.create(body) if current is None else self.files.replace(body, current.version)
            version = version or self._landed(body)
        except HudiError:
            raise
        except Exception as exc:  # the store's client retried already
            raise HudiLockError(f"could not reach the lock file {self.files.shown}: {exc}") from exc
        if not version:
            return False  # another writer won the race
        self._hold(LockFile(data, body, version, now_ms), started)
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew_loop, args=(self._stop, threading.current_thread()),
                                         name=f"pyhudi-lock-renewal-{self.owner_id[:6]}", daemon=True)
        self._renewer.start()
        _HOLDING.add(self)
        return True

    def _landed(self, body: bytes) -> str | None:
        """The file's version if it holds exactly ``body``: a conditional write whose answer was lost
        lands, and the client's retry of it is refused (Hudi's RFC-91-2 "ghost lock")."""
        current = self.files.read()
        return current.version if current is not None and current.body == body else None

    def _hold(self, written: LockFile, started: float) -> None:
        lease_s = (written.data.valid_until - written.store_time_ms) / 1000.0
        with self._guard:
            self._held = written
            self._lease_end = started + lease_s - _STORE_CLOCK_RESOLUTION_S - CLOCK_DRIFT_MS / 1000.0
            self._lost = None

    # -- keeping it -----------------------------------------------------------------------------
    def still_held(self) -> bool:
        """Held, not taken over, with at least one renew interval of the lease left."""
        with self._guard:
            return self._held is not None and self._lost is None \
                and time.monotonic() < self._lease_end - self.renew_s

    def _lose(self, why: str) -> None:
        with self._guard:
            self._lost = why
        log.error("lost the storage lock %s: %s", self.files.shown, why)

    def _renew_loop(self, stop: threading.Event, holder: threading.Thread) -> None:
        while not stop.wait(self.renew_s):
            if not holder.is_alive():
                log.warning("the thread holding the storage lock %s ended without releasing it; its lease "
                            "lapses in %s s", self.files.shown, self.validity_s)
                return
            if not self._renew(stop):
                return

    def _renew(self, stop: threading.Event) -> bool:
        """Push the lease ahead (Hudi's ``renewLock``); False when the hold is over."""
        with self._guard:
            held = self._held
        if held is None or stop.is_set():
            return False
        started = time.monotonic()
        try:
            now_ms = self.files.now_ms()
            data = LockData(False, now_ms + self.validity_s * 1000, self.owner_id)
            body = data.encode()
            version = self.files.replace(body, held.version)
            if not version:
                current = self.files.read()
                if current is not None and current.body == body:
                    version = current.version  # it landed; the answer was lost
                elif current is not None and current.version == held.version:
                    return True  # unchanged: a conflicting request in flight (S3's 409); next time
                else:
                    self._lose("another writer took it over: " + (current.describe() if current else "it was deleted"))
                    return False
        except HudiLockError as exc:
            self._lose(str(exc))
            return False
        except Exception as exc:
            if time.monotonic() >= self._lease_end:
                self._lose(f"renewals failed until the lease lapsed ({exc})")
                return False
            log.warning("could not renew the storage lock %s, %.0f s of its lease left: %s", self.files.shown,
                        self._lease_end - time.monotonic(), exc)
            return True
        with self._guard:
            if self._held is not held:
                return False  # released meanwhile
        self._hold(LockFile(data, body, version, now_ms), started)
        return True

    # -- releasing it ---------------------------------------------------------------------------
    def unlock(self) -> None:
        """Stop renewing, then mark the lease expired (Hudi's ``unlock``). A release that fails
        is logged, not raised: the instant it guarded is complete, and the lease lapses by itself."""
        self._stop.set()
        renewer, self._renewer = self._renewer, None
        if renewer is not None and renewer is not threading.current_thread():
            renewer.join(_STOP_RENEWAL_TIMEOUT_S)
        with self._guard:
            held, lost, self._held = self._held, self._lost, None
        _HOLDING.discard(self)
        if held is None:
            return
        if lost is not None:
            log.warning("released the storage lock %s, which was lost before: %s", self.files.shown, lost)
            return
        try:
            self._expire(held)
        except Exception:
            log.exception("could not release the storage lock %s; other writers wait until its lease lapses "
                          "(validUntil %d)", self.files.shown, held.data.valid_until)

    def _expire(self, held: LockFile) -> None:
        body = LockData(True, held.data.valid_until, self.owner_id).encode()
        version = held.version
        for _ in range(3):
            if self.files.replace(body, version):
                return
            current = self.files.read()
            if current is None or current.body == body:
                return
            if current.data.owner != self.owner_id or current.data.expired:
                log.warning("the storage lock %s was taken over before its release: %s", self.files.shown,
                            current.describe())
                return
            version = current.version  # a renewal of ours landed meanwhile
        raise HudiLockError(f"the lock file {self.files.shown} kept changing while being released")

    def owner(self) -> str | None:
        try:
            current = self.files.read()
        except Exception:
            return None
        if current is None:
            return None
        return (f"{current.describe()}; lock file {self.files.shown} (a writer that died holds it until its "
                "lease lapses)")


@atexit.register
def _release_at_exit() -> None:
    for provider in list(_HOLDING):
        with contextlib.suppress(Exception):
            provider.unlock()
