"""Mapping quality and the choice of a primary among equals: one home for exact and approximate mapping.

MAPQ depends only on the alignments found, never on the search's K:

* 0 when two or more alignments share the best edit distance (a tie: the
  read's origin cannot be told);
* 60 when the best is the only alignment found;
* otherwise ``min(60, 20 * gap)``, ``gap`` being the second best distance
  minus the best: a second locus one edit worse gives 20, two edits 40,
  three or more 60.

A read found with one locus at 1 edit and another at 2 so has MAPQ 20 with
``-e 2``, ``-e 3`` or ``-e 6``; with ``-e 1`` only the first is found and it
is 60.  As in bwa, X0 counts the best alignments and X1 the others found.

Among equally good alignments the primary is chosen by a hash of the read's
name (:func:`tie_pick`): random-looking, so the reads of a repeat spread
over its copies instead of piling onto the leftmost, and reproducible, so a
rerun writes the same file.
"""

from __future__ import annotations

import numpy as np

UNIQUE = 60  # the MAPQ of a read with one alignment found
PER_EDIT = 20  # MAPQ per edit between the best and the second best alignment
NO_SECOND = -1  # gap of a read with no second alignment


def mapping_quality(n_best: np.ndarray, gap: np.ndarray | None = None) -> np.ndarray:
    """MAPQ per read from the number of alignments at its best distance and the
    gap to the second best distance (:data:`NO_SECOND` or None: none found)."""
    n_best = np.asarray(n_best)
    gap = np.full(n_best.shape, NO_SECOND) if gap is None else np.asarray(gap)
    q = np.where(gap == NO_SECOND, UNIQUE, np.minimum(UNIQUE, PER_EDIT * gap))
    return np.where(n_best > 1, 0, q).astype(np.int64)


def ranked(group: np.ndarray, score: np.ndarray, n_groups: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Entries sorted by (group, score), such as a read's alignments by edit distance or a pair's
    pairs by summed distance: each entry's rank in its group, per group the entries and those at
    its least score, which entries are at it, and the group's MAPQ (:func:`mapping_quality`,
    the gap being the next score past the least)."""
    n_found = np.bincount(group, minlength=n_groups)
    rank = np.arange(group.size) - (np.cumsum(n_found) - n_found)[group]
    least = np.zeros(n_groups, dtype=np.int64)
    least[group[rank == 0]] = score[rank == 0]
    at_best = score == least[group]
    n_best = np.bincount(group[at_best], minlength=n_groups)
    gap = np.full(n_groups, NO_SECOND, dtype=np.int64)
    past = rank == n_best[group]
    gap[group[past]] = score[past] - least[group[past]]
    return rank, n_found, n_best, at_best, mapping_quality(n_best, gap)


# FNV-1a's 64-bit constants, applied a byte position at a time over all names at once.
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def name_hashes(data: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """FNV-1a (64 bit) of each name ``data[offsets[i] : offsets[i] + lengths[i]]``.

    One numpy step per byte position of the longest name (at most 254),
    over the names still that long: no Python object per read.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    h = np.full(offsets.size, _FNV_OFFSET, dtype=np.uint64)
    for i in range(int(lengths.max(initial=0))):
        live = np.flatnonzero(lengths > i)
        h[live] = (h[live] ^ data[offsets[live] + i].astype(np.uint64)) * _FNV_PRIME
    return h


def tie_pick(hashes: np.ndarray, n_best: np.ndarray) -> np.ndarray:
    """Which of each read's ``n_best`` equally good alignments is its primary (0-based)."""
    n = np.maximum(np.asarray(n_best, dtype=np.uint64), np.uint64(1))
    return ((hashes >> np.uint64(17)) % n).astype(np.int64)  # high bits: FNV's low bits mix least


def primary_first(rank: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """Ranks with the picked alignment of each read (``pick``, given per alignment) moved to the front."""
    return np.where(rank == pick, 0, rank + (rank < pick))
