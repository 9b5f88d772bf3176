"""Bloom filter benchmark: build and probe seconds for 1M record keys.

    .venv/bin/python benchmarks/bloom.py [--keys 1000000 --repeat 3]

Every base file write builds a filter over its record keys and every BLOOM-index lookup probes
one, so both paths matter. Two key shapes are measured: drone-like keys such as
``202611210930_drone0042`` (one byte length, the common case of generated keys) and random-length
keys of 1..40 bytes (exercises the grouping by length). Each runs for SIMPLE and DYNAMIC_V0 with
Hudi's defaults (60000 entries, fpp 1e-9: 30 hashes over 2,587,966 bits; DYNAMIC_V0 then spreads
1M keys over 2 rows). Columns:

* build: ``add_keys`` of all keys into an empty filter;
* probe present: ``might_contain`` of the same keys (every hash of every key must be checked);
* probe absent: ``might_contain`` of as many fresh keys against a filter holding 60000 keys, the
  load it is sized for (what an index lookup against one file's filter sees).

Times are CPU seconds (``time.process_time``; numpy runs these single-threaded), best of
``--repeat``, with the wall seconds of that run.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from pyhudi.io.bloom import DYNAMIC_V0, SIMPLE, BloomFilter


def drone_keys(n: int, salt: int = 0) -> pa.Array:
    """Keys like ``202611210930_drone0042`` (a minute and one of 10000 drones), all 22 bytes."""
    i = np.arange(n, dtype=np.int64) + salt * n
    minute, drone = i // 10000, i % 10000
    day, hm = minute // 1440, minute % 1440
    stamp = 202601010000 + (day // 28 % 12) * 1000000 + (day % 28) * 10000 + (hm // 60) * 100 + hm % 60
    return pa.array([f"{s}_drone{d:04d}" for s, d in zip(stamp.tolist(), drone.tolist())], pa.string())


def random_keys(n: int, seed: int) -> pa.Array:
    """Printable ASCII keys of uniformly random length 1..40 bytes."""
    rng = np.random.default_rng(seed)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(rng.integers(1, 41, n), out=offsets[1:])
    data = rng.integers(33, 127, int(offsets[-1]), dtype=np.uint8)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def best(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the run with the least CPU time among ``repeat`` calls."""
    runs = []
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        fn()
        runs.append((time.process_time() - cpu, time.perf_counter() - wall))
    return min(runs)


def built(keys: pa.Array, filter_type: str) -> BloomFilter:
    bloom = BloomFilter(filter_type=filter_type)
    bloom.add_keys(keys)
    return bloom


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.keys
    print(f"keys={n:,} repeat={args.repeat} cores={os.cpu_count()}  (CPU s / wall s)")
    shapes = {"drone": (drone_keys(n), drone_keys(n, salt=1)),
              "random 1..40": (random_keys(n, 1), random_keys(n, 2))}
    print(f"{'keys':<14}{'type':<12}{'build':>17}{'probe present':>17}{'probe absent':>17}")
    for shape, (keys, fresh) in shapes.items():
        for ftype in (SIMPLE, DYNAMIC_V0):
            full = built(keys, ftype)
            loaded = built(keys[:60000], ftype)
            assert full.might_contain(keys).all()
            times = [best(lambda: built(keys, ftype), args.repeat),  # noqa: B023 - called right here
                     best(lambda: full.might_contain(keys), args.repeat),  # noqa: B023
                     best(lambda: loaded.might_contain(fresh), args.repeat)]  # noqa: B023
            print(f"{shape:<14}{ftype:<12}" + "".join(f"{cpu:8.3f} /{wall:6.3f}" for cpu, wall in times))


if __name__ == "__main__":
    main()
