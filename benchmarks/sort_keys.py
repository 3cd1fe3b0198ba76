"""Sorting by several integer keys: numpy's lexsort against dmap.order.lexsort (one packed key).

    python3 benchmarks/sort_keys.py [--n 71000] [--reads 50000] [--repeat 20]

Columns shaped like a chunk's alignments in the merge task (sorted by read,
positions along a 100 Mbp reference, distances 0-3, both strands), sorted
by (read, distance, position, strand) as dmap.approx.alignments ranks them.
Prints milliseconds per sort and checks that both give the same order.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dmap.order import lexsort


def per_call(f, repeat: int) -> float:
    f()
    t = time.perf_counter()
    for _ in range(repeat):
        f()
    return (time.perf_counter() - t) / repeat * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=71_000)
    ap.add_argument("--reads", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    read = np.sort(rng.integers(0, a.reads, a.n))
    keys = (rng.integers(0, 2, a.n), rng.integers(0, 100_000_000, a.n), rng.integers(0, 4, a.n), read)
    assert np.array_equal(np.lexsort(keys), lexsort(keys))
    print(f"{a.n} rows, 4 keys: numpy lexsort {per_call(lambda: np.lexsort(keys), a.repeat):.2f} ms, "
          f"packed {per_call(lambda: lexsort(keys), a.repeat):.2f} ms")


if __name__ == "__main__":
    main()
