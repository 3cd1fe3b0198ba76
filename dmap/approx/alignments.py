"""From per-end distances to reported alignments.

A *locus* of a pattern is a maximal run of consecutive reference end
positions where it aligns with at most K edits; one alignment is reported
per locus, at its best end (least distance, leftmost among equals).  Two
loci whose best alignments start at the same position are one locus (the
better is kept), as RazerS 3 reports one match per start.  This is what the
oracle (:func:`dmap.testing.approx.brute_force_loci`) computes.

Blocks overlap, so each block keeps only the ends it *owns*: for a read of
length m, block b owns the ends in ``[start_b + m + K - 1, start_{b+1} + m + K - 1)``.
An alignment ending there is at most m + K long, so it lies wholly inside
block b (whose text reaches ``start_{b+1} + L - 1``, and m + K <= L), where
the block's distances are exact.  The owned ranges partition the reference,
so the merge task joins a locus split between two blocks by adjacency and
finds every locus exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ..index.store import contig_of
from ..mapq import primary_first, ranked
from ..opencl.device import BlockText, Device
from ..order import lexsort
from ..reads import FlatStrings
from .candidates import Regions
from .patterns import DevicePatterns
from .traceback import traceback_device
from .verify import FirstRuns, myers_distances, myers_runs, region_offsets


@dataclass
class BlockAlignments:
    """The best alignment of each locus piece a block owns (global coordinates)."""

    pattern: np.ndarray  # read * n_strands + strand
    start: np.ndarray
    end: np.ndarray  # last reference position (inclusive)
    distance: np.ndarray
    run_first: np.ndarray  # the owned run of ends this alignment is the best of
    run_last: np.ndarray
    cigar: FlatStrings
    md: FlatStrings

    @classmethod
    def empty(cls) -> BlockAlignments:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, z, z, z, FlatStrings.empty(), FlatStrings.empty())

    @classmethod
    def concat(cls, parts: list[BlockAlignments]) -> BlockAlignments:
        """The alignments of ``parts`` as one: several blocks', or one block's of several sets of
        reads (each seed scheme's, :func:`dmap.mapping.tasks.chunk_seeds`)."""
        if len(parts) < 2:
            return parts[0] if parts else cls.empty()
        cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
        return cls(*(cat(name) for name in ("pattern", "start", "end", "distance", "run_first", "run_last")),
                   FlatStrings.concat([p.cigar for p in parts]), FlatStrings.concat([p.md for p in parts]))

    def __len__(self) -> int:
        return int(self.pattern.size)


def best_of_runs(
    distances: np.ndarray,
    regions: Regions,
    pattern_length: np.ndarray,
    max_errors: int,
    own_from: int | None,
    own_until: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs of owned ends with distance <= K in each region, and the best end of each.

    ``own_from``/``own_until`` are the block-local owned range for a read of
    length 0 (``None``: unbounded); a pattern of length m owns them shifted
    by ``m + K - 1``.

    Returns
    -------
    region, end, distance, run_first, run_last, n_runs
        Per run: its region, best end, its distance, first and last end
        (block-local).
    """
    at = region_offsets(regions.length)
    # Only the ends within K are looked at: one pass over the distances finds
    # them, and each is mapped to its region by its offset (a region of
    # length 0 shares its offset with the next, and side="right" skips it).
    flat = np.flatnonzero(distances <= max_errors)
    region = np.searchsorted(at, flat, side="right") - 1
    end = regions.start[region] + (flat - at[region])
    shift = pattern_length[regions.pattern[region]].astype(np.int64) + max_errors - 1
    keep = np.ones(flat.size, dtype=bool)
    if own_from is not None:
        keep &= end >= own_from + shift
    if own_until is not None:
        keep &= end < own_until + shift
    idx = flat[keep]
    region, end = region[keep], end[keep]
    if idx.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z, z, 0
    # A run: consecutive ends of one region.
    new = np.ones(idx.size, dtype=bool)
    new[1:] = (np.diff(idx) != 1) | (region[1:] != region[:-1])
    run = np.cumsum(new) - 1
    n_runs = int(new.sum())
    dist = distances[idx].astype(np.int64)
    # Each run's best end: its least distance, leftmost among equals (ends rise within a run).
    lowest = np.minimum.reduceat(dist, np.flatnonzero(new))
    at_lowest = np.flatnonzero(dist == lowest[run])
    best = at_lowest[np.r_[True, run[at_lowest][1:] != run[at_lowest][:-1]]]
    run_first = end[new]
    run_last = end[np.r_[np.flatnonzero(new)[1:], idx.size] - 1]
    return region[best], end[best], dist[best], run_first, run_last, n_runs


def runs_from_first(
    first: FirstRuns,
    regions: Regions,
    pattern_length: np.ndarray,
    max_errors: int,
    own_from: int | None,
    own_until: int | None,
    distances_of: Callable[[np.ndarray], np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`best_of_runs`' result from the runs ``myers_lanes`` found (:class:`FirstRuns`).

    A region with one run is taken as the kernel found it; the few with more
    (repeats within a region's span) go through :func:`best_of_runs` on their
    distances, ``distances_of(regions)``: those regions' distances back to back.
    """
    one = np.flatnonzero(first.count == 1)
    start = regions.start[one]
    parts = [(one, start + first.best[one], first.distance[one].astype(np.int64), start + first.first[one],
              start + first.last[one])]
    many = np.flatnonzero(first.count > 1)
    if many.size:
        region, *rest, _ = best_of_runs(distances_of(many), regions.subset(many), pattern_length, max_errors,
                                        own_from, own_until)
        parts.append((many[region], *rest))
    return in_region_order(parts)


def in_region_order(
    parts: list[tuple[np.ndarray, ...]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Runs found for groups of regions, each part ``(region, end, dist, run_first, run_last)``,
    as one :func:`best_of_runs` result: by region, a region's runs kept in end order."""
    columns = [np.concatenate(c) for c in zip(*parts)]
    order = np.argsort(columns[0], kind="stable")
    region, end, dist, run_first, run_last = (c[order] for c in columns)
    return region, end, dist, run_first, run_last, int(order.size)


def verified_runs(
    device: Device,
    text: BlockText,
    patterns: DevicePatterns,
    sigma: int,
    regions: Regions,
    max_errors: int,
    own_from: int | None,
    own_until: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Myers' kernel over the regions, then :func:`best_of_runs`' result: the best end of
    each run of owned ends within K.

    The kernel finds each region's runs itself and writes no distances; it
    runs again, writing them, over the few regions with more than one run,
    and :func:`runs_from_first` completes those on the host.  On a GPU that
    kernel is the thread-cooperative one (a work-item per 64-bit word, paper
    001: 1.7-3.5x the per-region kernel on an H100); on a CPU ``myers_lanes``
    (four regions per work-item in vector lanes: 2.2-3.0x the per-region
    kernel on PoCL; docs/performance.md).
    """
    kernel = "myers_cooperative" if device.is_gpu else "myers_lanes"
    first = myers_runs(device, text.buffer, patterns, sigma, regions, max_errors, own_from, own_until, kernel=kernel)
    return runs_from_first(first, regions, patterns.lengths, max_errors, own_from, own_until, lambda which: (
        myers_distances(device, text.buffer, patterns, sigma, regions.subset(which), kernel=kernel)))


def runs_of_each_k(
    device: Device,
    text: BlockText,
    patterns: DevicePatterns,
    sigma: int,
    regions: Regions,
    errors: np.ndarray,
    own_from: int | None,
    own_until: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`verified_runs` of ``regions``, each region's runs within its own K (``errors``,
    one per region): the regions of each K verified together, their runs put back in region order.

    A run of ends within K is one locus, so each read is verified with its own K (an error
    rate's): a larger one could join two of its loci into one run.
    """
    ks = np.flatnonzero(np.bincount(errors))  # the few K, without a sort
    if ks.size == 1:
        return verified_runs(device, text, patterns, sigma, regions, int(ks[0]), own_from, own_until)
    parts = []
    for k in ks.tolist():
        which = np.flatnonzero(errors == k)
        region, *rest, _ = verified_runs(device, text, patterns, sigma, regions.subset(which), k, own_from,
                                         own_until)
        parts.append((which[region], *rest))
    return in_region_order(parts)


def align_block(
    device: Device,
    runs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int],
    regions: Regions,
    patterns: DevicePatterns,
    text: BlockText,
    letters: np.ndarray,
    sigma: int,
    max_errors: int,
    block_start: int,
    eqx: bool = False,
) -> BlockAlignments:
    """The block's alignments: the best end of each owned run (``runs``, from
    :func:`verified_runs`), traced back to CIGAR and MD.

    ``patterns`` (on the device) is indexed by ``regions.pattern``; ``text`` is the block's
    :class:`dmap.opencl.device.BlockText`; ``letters`` maps codes to reference
    symbols for MD.  The traceback runs in ``kernels/traceback.cl`` on
    ``device`` (tested against the numpy :func:`dmap.approx.traceback.traceback`).
    """
    region, end, dist, run_first, run_last, n = runs
    if n == 0:
        return BlockAlignments.empty()
    pattern = regions.pattern[region]
    start, d, _, cigar, md = traceback_device(device, text, patterns, pattern, end, regions.start[region],
                                              max_errors, sigma, letters, eqx, expect=dist, with_ops=False)
    if not np.array_equal(d, dist):
        raise AssertionError("traceback distance differs from Myers' distance")
    return BlockAlignments(pattern, start + block_start, end + block_start, dist,
                           run_first + block_start, run_last + block_start, cigar, md)


def _sorted_by(major: np.ndarray, minor: np.ndarray) -> bool:
    """Whether rows are in (major, minor) order."""
    if major.size < 2:
        return True
    dm = np.diff(major)
    return bool(((dm > 0) | ((dm == 0) & (np.diff(minor) >= 0))).all())


@dataclass
class ChunkAlignments:
    """A chunk's reported alignments, sorted by read, then rank (primary first)."""

    read: np.ndarray
    strand: np.ndarray
    contig: np.ndarray
    position: np.ndarray  # 0-based leftmost position in the contig
    distance: np.ndarray
    rank: np.ndarray  # 0 = primary
    mapq: np.ndarray  # per alignment (the read's MAPQ)
    n_found: np.ndarray  # per read: loci within K
    n_best: np.ndarray  # per read: loci at its least distance
    cigar: FlatStrings
    md: FlatStrings
    n_reads: int
    # As ChunkHits.bad; always empty here: approximate mapping checks symbols on the host.
    bad: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    span: np.ndarray | None = None  # reference symbols each alignment covers

    def counts(self) -> np.ndarray:
        """Reported alignments per read."""
        return np.bincount(self.read, minlength=self.n_reads)

    def renumbered(self, reads: np.ndarray | None, n_reads: int) -> ChunkAlignments:
        """As :meth:`dmap.search.hits.ChunkHits.renumbered`."""
        if reads is None:
            return self
        n_found, n_best = np.zeros(n_reads, dtype=self.n_found.dtype), np.zeros(n_reads, dtype=self.n_best.dtype)
        n_found[reads], n_best[reads] = self.n_found, self.n_best
        return replace(self, read=reads[self.read], n_found=n_found, n_best=n_best, n_reads=n_reads)

    def __len__(self) -> int:
        return int(self.read.size)


def merge_alignments(
    parts: list[BlockAlignments],
    n_reads: int,
    n_strands: int,
    contig_offsets: np.ndarray,
    report_all: bool = False,
    max_hits: int | None = None,
    primary: Callable[[np.ndarray], np.ndarray] | None = None,
) -> ChunkAlignments:
    """Join locus pieces across blocks, pick each locus's best, rank each read's loci.

    Loci whose best alignments start at the same reference position are one
    locus: the better (least distance, then leftmost end) is kept.

    By default the loci at the read's least distance are reported; with
    ``report_all`` every locus within K.  Ranking: distance, then contig,
    position, strand; among the loci at the least distance the primary is
    put first: ``primary`` maps each read's number of loci at its least
    distance to the one chosen (:func:`dmap.format.sam.primaries`: by a hash of
    the read name, where there is a tie; None: the first).  ``max_hits``
    caps the records per read.  MAPQ, X0 and X1: :mod:`dmap.mapq`.
    """
    joined = BlockAlignments.concat(parts)
    pattern, first, last = joined.pattern, joined.run_first, joined.run_last
    start, end, dist = joined.start, joined.end, joined.distance
    cigars, mds = joined.cigar, joined.md
    # One block's pieces come sorted by (pattern, first end); several blocks' are sorted here.
    if len(parts) == 1 and _sorted_by(pattern, first):
        order = np.arange(pattern.size)
    else:
        order = lexsort((first, pattern))
        pattern, first, last, start, end, dist = (a[order] for a in (pattern, first, last, start, end, dist))
    new = np.ones(order.size, dtype=bool)
    new[1:] = (pattern[1:] != pattern[:-1]) | (first[1:] != last[:-1] + 1)
    locus = np.cumsum(new) - 1
    # Each locus's best piece: its least distance, the leftmost end among equals (pieces
    # follow each other along the reference).
    pick = np.zeros(0, dtype=np.int64)
    if order.size:
        at_lowest = np.flatnonzero(dist == np.minimum.reduceat(dist, np.flatnonzero(new))[locus])
        pick = at_lowest[np.r_[True, locus[at_lowest][1:] != locus[at_lowest][:-1]]]
    # Loci whose best alignments start at the same place are one (they differ only past a
    # stretch of ends over K): the better is kept.
    # The order (pattern, start, dist, end), in two sorts whose keys pack into one int64 each
    # (dmap.order.lexsort): by (pattern, start), then by (that group, dist, end).
    if pick.size:
        pick = pick[lexsort((start[pick], pattern[pick]))]
        p, s = pattern[pick], start[pick]
        group = np.cumsum(np.r_[True, (p[1:] != p[:-1]) | (s[1:] != s[:-1])])
        pick = pick[lexsort((end[pick], dist[pick], group))]
    same = (pattern[pick][1:] == pattern[pick][:-1]) & (start[pick][1:] == start[pick][:-1])
    pick = pick[np.r_[True, ~same]] if pick.size else pick
    pattern, start, dist, span = pattern[pick], start[pick], dist[pick], end[pick] - start[pick] + 1
    src = order[pick]
    read, strand = pattern // n_strands, pattern % n_strands
    contig = contig_of(start, contig_offsets)
    position = start - contig_offsets[contig]
    # Contigs lie in order in the joined reference: (contig, position) sorts as start.
    rank_order = lexsort((strand, start, dist, read))
    read, strand, contig, position, dist, src, span = (a[rank_order] for a in (read, strand, contig, position, dist,
                                                                            src, span))
    rank, n_found, n_best, at_best, mapq = ranked(read, dist, n_reads)
    if primary is not None:
        rank = primary_first(rank, primary(n_best)[read])
        order = lexsort((rank, read))
        read, strand, contig, position, dist, src, rank, at_best, span = (
            a[order] for a in (read, strand, contig, position, dist, src, rank, at_best, span))
    keep = np.ones(read.size, dtype=bool) if report_all else at_best
    if max_hits is not None:
        keep &= rank < max_hits
    src = src[keep]
    return ChunkAlignments(
        read=read[keep], strand=strand[keep].astype(np.int8), contig=contig[keep], position=position[keep],
        distance=dist[keep], rank=rank[keep], mapq=mapq[read[keep]], n_found=n_found, n_best=n_best,
        cigar=cigars.take(src), md=mds.take(src), n_reads=n_reads, span=span[keep],
    )
