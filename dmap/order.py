"""Sort orders of whole arrays: the ranking and dedup steps sort by several integer keys.

``np.lexsort`` sorts once per key; with the keys packed into one int64 a
single stable ``argsort`` does the same work, and numpy's stable sort
(timsort) runs in nearly linear time on the nearly sorted columns the
pipeline hands it (alignments come per read, along the reference): 71,000
rows shaped like a 50,000-read chunk's alignments sort by 4 keys in 12.2 ms
with ``np.lexsort`` and 0.64 ms packed (``python3 benchmarks/sort_keys.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def lexsort(keys: Sequence[np.ndarray]) -> np.ndarray:
    """``np.lexsort(keys)``: the stable order by the last key, then the one before it, and so on.

    Integer (or boolean) keys that are all non-negative and fit together in
    63 bits are packed into one int64 key (the last key in the high bits)
    and sorted once; others go to ``np.lexsort``.  The order is the same.
    """
    keys = [np.asarray(k) for k in keys]
    n = keys[0].size if keys else 0
    if n == 0 or any(k.dtype.kind not in "biu" for k in keys):
        return np.lexsort(keys) if keys else np.zeros(0, dtype=np.int64)
    bits = []
    for k in keys:
        if k.dtype.kind == "i" and int(k.min()) < 0:
            return np.lexsort(keys)
        bits.append(int(k.max()).bit_length())
    if sum(bits) > 63:
        return np.lexsort(keys)
    packed = np.zeros(n, dtype=np.int64)
    shift = 0
    for k, b in zip(keys, bits):  # the first key is the least significant
        if b:
            packed |= k.astype(np.int64) << np.int64(shift)
        shift += b
    return np.argsort(packed, kind="stable")
