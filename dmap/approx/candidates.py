"""Seed hits -> candidate regions of the reference, one set per (read, strand).

A seed found at text position p on strand s puts the read's start on the
diagonal d (p minus the seed's offset in the oriented read).  An alignment
with at most K edits through that seed starts in [d-K, d+K] and ends before
d+m+K, so the window [d-K, d+m+K) holds it whole.  Windows of one pattern
that overlap or touch are merged into one region (the dedup of candidates on
nearby diagonals), and clipped to the seed's contig and to the block: an
alignment never spans two contigs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..index.store import contig_of
from ..search.hits import BlockHits
from .seeds import Seeds


@dataclass
class Regions:
    """Candidate regions of one block: block-local ``[start, start + length)`` of ``pattern``."""

    pattern: np.ndarray  # read * n_strands + strand
    start: np.ndarray
    length: np.ndarray

    def __len__(self) -> int:
        return int(self.pattern.size)


def candidate_regions(
    hits: BlockHits,
    seeds: Seeds,
    read_length: np.ndarray,
    n_strands: int,
    max_errors: int,
    block_length: int,
    contig_offsets: np.ndarray,
    contig_lengths: np.ndarray,
) -> Regions:
    """Merged, clipped candidate regions of a block's located seed hits, sorted by (pattern, start)."""
    if hits.query.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return Regions(z, z, z)
    # (Shift and mask for two strands: int64 division is a slow pass over every hit.)
    seed, strand = (hits.query >> 1, hits.query & 1) if n_strands == 2 else (hits.query, np.zeros_like(hits.query))
    read = seeds.read[seed]
    m = read_length[read].astype(np.int64)
    offset = seeds.offset[seed].astype(np.int64)
    # On the reverse strand the pattern is the reverse complement: the seed
    # sits at m - offset - length in it.
    offset = np.where(strand == 1, m - offset - seeds.length[seed].astype(np.int64), offset)
    pos = hits.position.astype(np.int64)
    diagonal = pos - offset
    lo, hi = diagonal - max_errors, diagonal + m + max_errors
    contig = contig_of(pos + hits.start, contig_offsets)
    contig_lo = contig_offsets[contig] - hits.start
    lo = np.maximum(lo, np.maximum(contig_lo, 0))
    hi = np.minimum(hi, np.minimum(contig_lo + contig_lengths[contig], block_length))
    pattern = read * n_strands + strand
    # One sort key across patterns, so a running maximum never crosses from
    # one pattern into the next.
    span = np.int64(block_length + 1)
    key_lo, key_hi = pattern * span + lo, pattern * span + hi
    order = np.argsort(key_lo, kind="stable")
    key_lo, key_hi = key_lo[order], key_hi[order]
    reach = np.maximum.accumulate(key_hi)
    new = np.ones(key_lo.size, dtype=bool)
    new[1:] = key_lo[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.r_[first[1:], key_lo.size] - 1
    patt = key_lo[first] // span
    start = key_lo[first] - patt * span
    stop = reach[last] - patt * span
    return Regions(patt, start, stop - start)
