"""A block's neighborhood index: every window's position, findable by (seed, neighborhood).

Arrays of one block (the two-level table of the paper's Figure 7)::

    seed_vertex  uint32[n_seeds + 1]   seed s owns vertices [seed_vertex[s], seed_vertex[s+1])
    seed_family  uint32[n_seeds]       its Jenkins hash family J
    g            uint8[]               2 bits per vertex (see bdz.py)
    key          KEY[n_vertices + 1]   the neighborhood assigned to each vertex (checked on lookup)
    first        uint32[n_vertices + 2] its positions are positions[first[v]:first[v+1]]
    positions    uint32[n_windows]     block-local window starts, by vertex then position

The trailing entries are padding, so that a lookup in a seed with no
vertices reads in bounds (and finds an empty range).
"""

from __future__ import annotations

import numpy as np

from .bdz import PerfectHash, build_perfect_hash, lookup
from .params import NeighborhoodParams, reference_windows

ARRAYS = ("seed_vertex", "seed_family", "g", "key", "first", "positions")


def index_neighborhoods(text: np.ndarray, params: NeighborhoodParams) -> dict[str, np.ndarray]:
    """The neighborhood index arrays of one block's text (codes, separators = sigma)."""
    pos, seed, key = reference_windows(text, params)
    order = np.lexsort((pos, key, seed))
    pos, seed, key = pos[order], seed[order], key[order]
    new = np.ones(pos.size, dtype=bool)
    new[1:] = (seed[1:] != seed[:-1]) | (key[1:] != key[:-1])
    first_of = np.flatnonzero(new)
    count = np.diff(np.r_[first_of, pos.size])
    ph, vertex = build_perfect_hash(seed[first_of], key[first_of], params.n_seeds)
    nv = ph.n_vertices
    # Collision-free by construction; checked anyway, since every lookup relies on it.
    if (np.bincount(vertex, minlength=1).max(initial=0) > 1
            or not np.array_equal(lookup(ph, seed[first_of], key[first_of]), vertex)):
        raise AssertionError("perfect hash is not collision-free")
    stored = np.zeros(nv + 1, dtype=params.key_dtype)
    stored[vertex] = key[first_of]
    per_vertex = np.zeros(nv + 1, dtype=np.int64)
    per_vertex[vertex] = count
    first = np.zeros(nv + 2, dtype=np.uint32)
    np.cumsum(per_vertex, out=first[1:], dtype=np.int64)
    by_vertex = np.argsort(np.repeat(vertex, count), kind="stable")  # positions stay sorted within a vertex
    g = np.zeros((nv + 1 + 3) // 4, dtype=np.uint8)
    g[: ph.g.size] = ph.g
    return {"seed_vertex": ph.vertex_start, "seed_family": ph.family, "g": g, "key": stored, "first": first,
            "positions": pos[by_vertex].astype(np.uint32)}


def perfect_hash_of(arrays: dict[str, np.ndarray]) -> PerfectHash:
    return PerfectHash(arrays["seed_vertex"], arrays["seed_family"], arrays["g"])


def neighborhood_sizes(arrays: dict[str, np.ndarray], params: NeighborhoodParams) -> dict[str, int]:
    """Bytes of this neighborhood index against the two simpler layouts of the paper (Section II-B).

    ``offset_only``: a seed table and one 32-bit position per window.
    ``neighborhood_list``: the same, plus each window's packed neighborhood.
    """
    n = int(arrays["positions"].size)
    table = 4 * (params.n_seeds + 1)
    return {
        "windows": n,
        "offset_only": table + 4 * n,
        "neighborhood_list": table + 4 * n + n * params.key_dtype.itemsize,
        "perfect_hash": sum(int(arrays[a].nbytes) for a in ARRAYS),
    }
