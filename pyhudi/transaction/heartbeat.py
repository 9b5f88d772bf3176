"""Writer heartbeats: ``.hoodie/.heartbeat/<instant>``, touched while a write is in progress.

A pending instant on the timeline says a write started, not that it still runs. Hudi tells the
two apart by a heartbeat file per instant whose modification time the writer refreshes every
``hoodie.client.heartbeat.interval_in_ms``; once it is older than interval x
``hoodie.client.heartbeat.tolerable.misses`` (or missing) the write counts as failed and may be
rolled back. A live heartbeat protects a write from every rollback of failed writes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from pyhudi import config as C
from pyhudi.config import HudiConfig
from pyhudi.storage import Storage
from pyhudi.timeline.instant import Instant

log = logging.getLogger("pyhudi")

HEARTBEAT_FOLDER = ".hoodie/.heartbeat"


def heartbeat_path(instant: str) -> str:
    return f"{HEARTBEAT_FOLDER}/{instant}"


@dataclass(frozen=True)
class HeartbeatPolicy:
    """When a heartbeat counts as expired."""

    interval_ms: int
    tolerable_misses: int

    @classmethod
    def of(cls, cfg: HudiConfig) -> HeartbeatPolicy:
        return cls(cfg.get(C.HEARTBEAT_INTERVAL_MS), cfg.get(C.HEARTBEAT_TOLERABLE_MISSES))

    @property
    def max_age_s(self) -> float:
        return self.interval_ms * self.tolerable_misses / 1000.0


def heartbeat_age(storage: Storage, instant: str, *, now: float | None = None) -> float | None:
    """Seconds since the instant's writer last touched its heartbeat; None when it has none."""
    mtime_ns = storage.mtime_ns(heartbeat_path(instant))
    if mtime_ns is None:
        return None
    # the store's clock stamped the file: its clock, not this machine's, tells the age
    return max(0.0, (storage.now_ms() / 1000.0 if now is None else now) - mtime_ns / 1e9)


def is_alive(storage: Storage, instant: str, policy: HeartbeatPolicy) -> bool:
    """Whether the write of ``instant`` still runs, as far as its heartbeat tells."""
    age = heartbeat_age(storage, instant)
    return age is not None and age <= policy.max_age_s


def live_instants(storage: Storage, instants: Iterable[Instant], policy: HeartbeatPolicy) -> list[Instant]:
    """Those of ``instants`` (pending ones) whose writer still runs."""
    return [i for i in instants if is_alive(storage, i.timestamp, policy)]


class Heartbeat:
    """The heartbeat of one write: a daemon thread touching the file until :meth:`stop`.

    The first beat is written before :meth:`start` returns, so the instant never shows on the
    timeline without a live heartbeat beside it.
    """

    def __init__(self, storage: Storage, instant: str, policy: HeartbeatPolicy) -> None:
        self.storage = storage
        self.instant = instant
        self.policy = policy
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        self.storage.touch(heartbeat_path(self.instant))

    def start(self) -> Heartbeat:
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"pyhudi-heartbeat-{self.instant}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        interval = self.policy.interval_ms / 1000.0
        while not self._stop.wait(interval):
            try:
                self.beat()
            except Exception:  # a missed beat is tolerated; many in a row expire the write
                log.warning("could not write the heartbeat of %s", self.instant, exc_info=True)

    def stop(self, *, delete: bool = True) -> None:
        """Stop beating and delete the file (the instant is completed or rolled back)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if delete:
            self.storage.discard(heartbeat_path(self.instant))
