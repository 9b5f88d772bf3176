"""Column-wise helpers on record-key arrays: order checks and runs of equal keys.

Writers and readers ask two questions of key arrays again and again: are there duplicates, and
where does each run of one key start once sorted. Hashing a few hundred thousand strings costs
several times more than comparing neighbours, and most key arrays arrive sorted (bulk-loaded
files, keys that grow with time), so these answer from comparisons.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def keys_ascending(keys: pa.Array | pa.ChunkedArray) -> bool:
    """Whether ``keys`` are strictly increasing: sorted input (the common case) has no duplicates
    and needs no sort, which a comparison of neighbours tells for a fraction of a hash's cost."""
    n = len(keys)
    if n < 2:
        return True
    flat = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    return bool(pc.all(pc.less(flat.slice(0, n - 1), flat.slice(1))).as_py())


def first_of_runs(sorted_keys: pa.Array) -> np.ndarray:
    """Mask of the first element of every run of equal values in a sorted array."""
    n = len(sorted_keys)
    first = np.ones(n, dtype=bool)
    if n > 1:
        first[1:] = pc.not_equal(sorted_keys.slice(1), sorted_keys.slice(0, n - 1)).to_numpy(
            zero_copy_only=False)
    return first


def unique_keys(keys: pa.Array) -> bool:
    """Whether ``keys`` holds no value twice (a sort when they are not ascending already)."""
    if keys_ascending(keys):
        return True
    return bool(first_of_runs(keys.take(pc.sort_indices(keys))).all())
