"""Timing shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def median_ms(fn: Callable[[], Any], repeats: int = 5) -> float:
    """The median time of ``repeats`` runs of ``fn`` in milliseconds, after one untimed run (the
    first run compiles Spark's code and warms caches)."""
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)
