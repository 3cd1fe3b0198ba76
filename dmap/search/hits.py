"""Hits of one read chunk: merging block results, dropping overlap duplicates,
and mapping positions from the joined reference to contigs.

Pure numpy, no device: this is what the Dask dedup task runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..index.store import contig_of
from ..order import lexsort


@dataclass
class BlockHits:
    """Located hits of one (chunk, block) task.

    ``query`` is ``read * n_strands + strand``; ``position`` is block-local.
    """

    block: int
    start: int  # block start in the joined reference
    own_length: int  # positions [0, own_length) belong to this block
    query: np.ndarray
    position: np.ndarray
    bad: np.ndarray | None = None  # reads holding a symbol outside the alphabet (found by the search kernel)


@dataclass
class ChunkHits:
    """Deduplicated hits of a chunk, sorted by (read, contig, position, strand)."""

    read: np.ndarray  # chunk-local read number
    strand: np.ndarray  # 0 forward, 1 reverse complement
    contig: np.ndarray  # contig number
    position: np.ndarray  # 0-based leftmost position in the contig
    n_reads: int
    bad: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # see BlockHits.bad

    def counts(self) -> np.ndarray:
        """Hits per read."""
        return np.bincount(self.read, minlength=self.n_reads)

    def renumbered(self, reads: np.ndarray | None, n_reads: int) -> ChunkHits:
        """The hits of a chunk whose searched reads were ``reads`` (chunk-local
        numbers, ascending; None: all ``n_reads``), numbered in the whole chunk."""
        if reads is None:
            return self
        return ChunkHits(reads[self.read], self.strand, self.contig, self.position, n_reads, reads[self.bad])

    def __len__(self) -> int:
        return int(self.read.size)


def unique_reads(reads: np.ndarray) -> np.ndarray:
    """``np.unique(reads)``, with an empty array (the usual case: reads with a symbol outside the
    alphabet) returned as it is.  numpy 2's ``unique`` asks ``np.ma.is_masked``, and the first
    call imports ``numpy.ma``: 6.7 ms inside the first search task of every run (``-X importtime``)."""
    return np.unique(reads) if reads.size else reads


def merge_block_hits(parts: list[BlockHits], n_reads: int, n_strands: int, contig_offsets: np.ndarray) -> ChunkHits:
    """Merge the hits of all blocks for one chunk.

    Blocks overlap by L-1 symbols, so a hit in the overlap is found by both
    neighbours.  A hit is kept only by the block whose own region
    ``[start, start + own_length)`` contains its first position: every hit
    of a read no longer than L lies wholly inside that block, so each is
    reported exactly once (the rule of BowMapCL 4.4.1, made independent of
    the read length).
    """
    query, glob = [], []
    bad = [p.bad for p in parts if p.bad is not None]
    for p in parts:
        own = p.position < p.own_length
        query.append(p.query[own])
        glob.append(p.position[own].astype(np.int64) + p.start)
    q = np.concatenate(query) if query else np.zeros(0, dtype=np.int64)
    g = np.concatenate(glob) if glob else np.zeros(0, dtype=np.int64)
    read, strand = q // n_strands, q % n_strands
    # Contigs lie in order in the joined reference, so (contig, position)
    # sorts as the joined position g.
    order = lexsort((strand, g, read))
    read, strand, g = read[order], strand[order], g[order]
    contig = contig_of(g, contig_offsets)
    position = g - contig_offsets[contig]
    return ChunkHits(read.astype(np.int64), strand.astype(np.int8), contig.astype(np.int64),
                     position.astype(np.int64), n_reads,
                     unique_reads(np.concatenate(bad)) if bad else np.zeros(0, dtype=np.int64))
