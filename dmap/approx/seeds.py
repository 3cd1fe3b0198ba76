"""Pigeonhole seeds: pieces of each read, searched exactly or with edits.

An alignment with at most K edits (substitutions, insertions, deletions)
spreads them over the read's disjoint pieces, so with p = K // (m+1) + 1
pieces at least one piece carries at most m edits: searching every piece
with up to m edits (m = 0: exactly, the K+1 pieces of the classic
pigeonhole; m >= 1: Liu and Schmidt (2012)'s seeds with errors) therefore finds every
such alignment, on its diagonal give or take the piece's own edits.  Full
sensitivity, no heuristic.  (A read symbol that matches nothing, such as
N, counts as an edit, so the argument holds for reads with N too.)

Fewer, longer pieces hit fewer places but cost a search with backtracking;
:func:`choose_seed_edits` picks m by what measured fastest
(benchmarks/seed_schemes.py, docs/performance.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..reads import EncodedReads


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


def n_pieces(max_errors: int, seed_edits: int) -> int:
    """Pieces that guarantee one with at most ``seed_edits`` of ``max_errors`` edits."""
    return max_errors // (seed_edits + 1) + 1


def pigeonhole_seeds(lengths: np.ndarray, max_errors: int | np.ndarray, seed_edits: int = 0) -> Seeds:
    """K // (m+1) + 1 pieces of each read, as equal as possible; K one for all reads, or each read's.

    Reads of at most K symbols get no seeds: every position of the
    reference is within K edits of them, so they are reported unmapped.
    With m >= 1 every piece must be longer than m (a piece of m symbols
    is within m edits of anything); :func:`choose_seed_edits` sees to it.
    """
    lengths = lengths.astype(np.int64)
    k = np.broadcast_to(np.asarray(max_errors, dtype=np.int64), lengths.shape)
    has = np.flatnonzero(lengths > k)
    k1 = k[has] // (seed_edits + 1) + 1  # pieces of each read with seeds
    if seed_edits and (lengths[has] < k1 * (seed_edits + 1)).any():
        short = int(np.argmax(lengths[has] < k1 * (seed_edits + 1)))
        raise ValueError(f"reads of {int(lengths[has][short])} symbols are too short for {int(k1[short])} pieces "
                         f"with {seed_edits} edits each")
    read = np.repeat(has, k1)
    pieces = np.repeat(k1, k1)
    piece = np.arange(read.size) - np.repeat(np.cumsum(k1) - k1, k1)
    m = lengths[read]
    start = piece * m // pieces
    stop = (piece + 1) * m // pieces
    return Seeds(read, start.astype(np.uint32), (stop - start).astype(np.uint32))


def selective_length(text_length: int, sigma: int, n_strands: int) -> float:
    """log_sigma(n_strands * text_length): pieces shorter than this occur by chance.

    A random piece of l symbols is expected at about n_strands * text_length
    / sigma**l places; below this length that is more than one.
    """
    return math.log(max(n_strands * text_length, 2)) / math.log(max(sigma, 2))


def choose_seed_edits(max_errors: int, lengths: np.ndarray, can_edit: bool = True,
                      requested: int | None = None, chance_length: float = 0.0) -> np.ndarray:
    """Edits per seed (m) of each read, by its length.

    With no request: m = 1 where the read's K+1 exact pieces would be more
    than a symbol shorter than ``chance_length`` (:func:`selective_length`
    of the reference), so that each would hit the reference at about 4 or
    more random places, and locating those hits would cost more than the
    search with one edit; else exact pieces.  This is what measured fastest on
    E. coli for reads of 36-150 symbols and K of 1-4 (pieces of 10 symbols
    against a chance length of 11.6: m = 1; 12: m = 0) and on a 100 Mbp
    reference (pieces of 13 against 13.8: exact pieces 2.9x faster, the
    search with an edit costing more on a larger reference)
    (benchmarks/seed_schemes.py, docs/performance.md "Seeds with edits");
    m = 2 was faster only for 36-bp reads with K=4, by 1.1x.

    ``requested`` (``--seed-edits``) is used for every read long enough for
    its pieces (more than m symbols each); shorter reads take exact pieces,
    which find the same loci.  Each read is judged by its own length, so
    that trimmed reads of many lengths each get the scheme that suits them
    (a chunk maps each scheme's reads as a group, :func:`dmap.mapping.tasks.chunk_seeds`).
    ``can_edit`` is False for an index without the reversed-text occ
    (format version < 4).  Reads of at most K symbols (no seeds) get 0.
    """
    lengths = lengths.astype(np.int64)
    if not can_edit or max_errors == 0:
        return np.zeros(lengths.size, dtype=np.int64)
    if requested is None:
        m = (lengths // n_pieces(max_errors, 0) < chance_length - 1).astype(np.int64)
    else:
        m = np.full(lengths.size, requested, dtype=np.int64)
    fits = lengths >= np.array([n_pieces(max_errors, e) * (e + 1) for e in range(int(m.max(initial=0)) + 1)])[m]
    return np.where(fits & (lengths > max_errors), m, 0)
