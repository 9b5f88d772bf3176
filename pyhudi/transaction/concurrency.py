"""The concurrency options of one writer: single-writer or optimistic, and what happens to failed
writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyhudi import config as C
from pyhudi.config import OCC, HudiConfig
from pyhudi.transaction.heartbeat import HeartbeatPolicy


@dataclass(frozen=True)
class Concurrency:
    """The concurrency options of one writer, with Hudi's inference of the failed-writes policy."""

    mode: str
    failed_writes: str
    heartbeat: HeartbeatPolicy
    by_bucket: bool

    @classmethod
    def of(cls, cfg: HudiConfig) -> Concurrency:
        mode = cfg.get(C.WRITE_CONCURRENCY_MODE)
        policy = cfg.get(C.FAILED_WRITES_POLICY) if cfg.is_set(C.FAILED_WRITES_POLICY) else (
            "LAZY" if mode == OCC else "EAGER")
        strategy = cfg.get(C.CONFLICT_RESOLUTION_STRATEGY) if cfg.is_set(C.CONFLICT_RESOLUTION_STRATEGY) else (
            C.CONFLICT_STRATEGIES[1] if cfg.get(C.INDEX_TYPE) == "BUCKET" else C.CONFLICT_STRATEGIES[0])
        return cls(mode, policy, HeartbeatPolicy.of(cfg), strategy == C.CONFLICT_STRATEGIES[1])

    @property
    def optimistic(self) -> bool:
        return self.mode == OCC


