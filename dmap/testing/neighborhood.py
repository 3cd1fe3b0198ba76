"""Plain references for the neighborhood engine's tests and benchmarks.

:func:`brute_force_matches` is the oracle: a scan of every reference window
against every pattern.  :func:`lookup_tables` builds the two simpler
stores the paper compares the perfect hash with (binary search over sorted
neighborhoods, plain list scan), in the array layout the kernel reads.
"""

from __future__ import annotations

import numpy as np

from ..approx.patterns import pattern_matrix
from ..approx.seeds import Seeds
from ..neighborhood.params import NeighborhoodParams, reference_windows
from ..reads import EncodedReads


def brute_force_matches(text: np.ndarray, params: NeighborhoodParams, reads: EncodedReads, patterns: Seeds,
                        errors: int, n_strands: int) -> set[tuple[int, int]]:
    """``{(pattern * n_strands + strand, position)}``: windows whose seed's ``#`` symbols equal the
    pattern's and whose neighborhood has at most ``errors`` mismatches (a read ``N`` mismatches all)."""
    pos, _, _ = reference_windows(text, params)
    windows = text[pos[:, None] + np.arange(params.window)] if pos.size else np.zeros((0, params.window), np.uint8)
    is_seed = np.array([c == "#" for c in params.mask] + [False] * params.neighborhood_length)
    is_neighborhood = np.arange(params.window) >= params.span
    oriented = pattern_matrix(reads.codes, reads.offsets, reads.lengths, n_strands)  # padded per (read, strand)
    found = set()
    for p in range(len(patterns)):
        for s in range(n_strands):
            m, o = int(reads.lengths[patterns.read[p]]), int(patterns.offset[p])
            at = m - o - params.window if s else o  # the window's start in the oriented read
            pat = oriented[patterns.read[p] * n_strands + s, at:at + params.window]
            same = windows == pat
            ok = same[:, is_seed].all(axis=1) & ((~same[:, is_neighborhood]).sum(axis=1) <= errors)
            found |= {(p * n_strands + s, int(x)) for x in pos[ok]}
    return found


def lookup_tables(text: np.ndarray, params: NeighborhoodParams, method: str) -> dict[str, np.ndarray]:
    """A block's neighborhoods for the ``bsearch`` or ``list`` method, in the kernel's array names.

    ``bsearch``: per seed its distinct neighborhoods sorted, each with its
    position range.  ``list``: per seed its windows in position order, each
    with its neighborhood (the plain list of the paper).
    """
    pos, seed, key = reference_windows(text, params)
    if method == "list":
        order = np.lexsort((pos, seed))
        starts = np.searchsorted(seed[order], np.arange(params.n_seeds + 1))
        keys, first, positions = key[order], np.zeros(2, np.uint32), pos[order]
    else:
        order = np.lexsort((pos, key, seed))
        seed, key, positions = seed[order], key[order], pos[order]
        new = np.r_[True, (seed[1:] != seed[:-1]) | (key[1:] != key[:-1])]
        distinct = np.flatnonzero(new)
        starts = np.searchsorted(seed[distinct], np.arange(params.n_seeds + 1))
        keys, first = key[distinct], np.r_[distinct, positions.size]
    return {"seed_vertex": starts.astype(np.uint32), "seed_family": np.zeros(1, np.uint32),
            "g": np.zeros(1, np.uint8), "key": keys.astype(params.key_dtype),
            "first": np.asarray(first, dtype=np.uint32), "positions": positions.astype(np.uint32)}
