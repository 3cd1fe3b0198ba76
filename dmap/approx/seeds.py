"""Pigeonhole seeds: K+1 non-overlapping pieces of each read.

An alignment with at most K edits (substitutions, insertions, deletions)
touches at most K of K+1 disjoint pieces of the read, so at least one piece
occurs exactly in the reference, on the alignment's diagonal.  Searching the
pieces with the exact kernel therefore finds every such alignment: full
sensitivity, no heuristic.  (A read symbol that matches nothing, such as N,
counts as an edit, so the argument holds for reads with N too.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fastx import EncodedReads


@dataclass
class Seeds:
    """The seeds of a chunk: seed ``s`` is ``read[offset : offset + length]`` of read ``read[s]``."""

    read: np.ndarray
    offset: np.ndarray
    length: np.ndarray

    def __len__(self) -> int:
        return int(self.read.size)

    def encoded(self, reads: EncodedReads) -> EncodedReads:
        """The seeds as queries for the exact kernel: views into the reads' codes, no copy."""
        return EncodedReads(reads.number, reads.codes,
                            (reads.offsets[self.read] + self.offset).astype(np.uint32), self.length.astype(np.uint32))


def pigeonhole_seeds(lengths: np.ndarray, max_errors: int) -> Seeds:
    """K+1 pieces of each read, as equal as possible.

    Reads of at most K symbols get no seeds: every position of the
    reference is within K edits of them, so they are reported unmapped.
    """
    k1 = max_errors + 1
    lengths = lengths.astype(np.int64)
    has = np.flatnonzero(lengths >= k1)
    read = np.repeat(has, k1)
    piece = np.tile(np.arange(k1), has.size)
    m = lengths[read]
    start = piece * m // k1
    stop = (piece + 1) * m // k1
    return Seeds(read, start.astype(np.uint32), (stop - start).astype(np.uint32))
