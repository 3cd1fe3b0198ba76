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
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from ..index.store import contig_of
from ..search.hits import BlockHits
from .seeds import Seeds

if TYPE_CHECKING:
    from ..opencl.device import Device


@dataclass
class Regions:
    """Candidate regions of one block: block-local ``[start, start + length)`` of ``pattern``."""

    pattern: np.ndarray  # read * n_strands + strand
    start: np.ndarray
    length: np.ndarray

    def __len__(self) -> int:
        return int(self.pattern.size)

    def subset(self, which: np.ndarray) -> Regions:
        """The regions ``which`` (indices or a mask), in that order."""
        return Regions(self.pattern[which], self.start[which], self.length[which])


@dataclass
class QueryWindows:
    """Per query (seed * n_strands + strand), computed once for the few hundred thousand
    queries rather than per hit: its pattern, and its window ``[pos - back, pos - back + span)``
    around a hit at ``pos``."""

    back: np.ndarray
    span: np.ndarray
    pattern: np.ndarray

    @classmethod
    def of(cls, seeds: Seeds, read_length: np.ndarray, n_strands: int, max_errors: int | np.ndarray) -> QueryWindows:
        """The windows of ``seeds``' queries: K one for all reads, or each read's (``max_errors[read]``)."""
        # On the reverse strand the pattern is the reverse complement: the seed sits at
        # m - offset - length in it.
        if np.ndim(max_errors):
            max_errors = np.asarray(max_errors, dtype=np.int64)[seeds.read][:, None]
        m = read_length[seeds.read].astype(np.int64)
        offset = seeds.offset.astype(np.int64)
        back = np.empty((seeds.read.size, n_strands), dtype=np.int64)
        back[:, 0] = offset
        if n_strands == 2:
            back[:, 1] = m - offset - seeds.length
        return cls((back + max_errors).ravel(), np.repeat(m + 2 * np.ravel(max_errors), n_strands),
                   (seeds.read.astype(np.int64)[:, None] * n_strands + np.arange(n_strands)).ravel())


def candidate_regions(
    hits: BlockHits,
    seeds: Seeds,
    read_length: np.ndarray,
    n_strands: int,
    max_errors: int | np.ndarray,
    block_length: int,
    contig_offsets: np.ndarray,
    contig_lengths: np.ndarray,
    device: Device | None = None,
) -> Regions:
    """Merged, clipped candidate regions of a block's located seed hits, sorted by (pattern, start).

    ``max_errors`` is K, one for all reads or each read's (an error rate's).
    Each hit's window and sort keys are made on ``device`` (``kernels/candidates.cl``, one
    pass), or with ``device`` None in numpy (the kernel's reference); the sort and merge
    are numpy's either way.
    """
    if hits.query.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return Regions(z, z, z)
    windows = QueryWindows.of(seeds, read_length, n_strands, max_errors)
    # One sort key across patterns, pattern * stride + an end, so that a running maximum
    # never crosses from one pattern into the next.
    stride = np.int64(block_length + 1)
    keys = _window_keys if device is None else partial(_window_keys_device, device)
    key_lo, key_hi = keys(hits, windows, block_length, contig_offsets, contig_lengths, stride)
    order = np.argsort(key_lo, kind="stable")  # hits come nearly sorted: timsort's runs
    key_lo, key_hi = key_lo[order], key_hi[order]
    reach = np.maximum.accumulate(key_hi)
    new = np.ones(key_lo.size, dtype=bool)
    new[1:] = key_lo[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.r_[first[1:], key_lo.size] - 1
    patt = key_lo[first] // stride
    start = key_lo[first] - patt * stride
    stop = reach[last] - patt * stride
    return Regions(patt, start, stop - start)


def _window_keys(hits: BlockHits, windows: QueryWindows, block_length: int, contig_offsets: np.ndarray,
                 contig_lengths: np.ndarray, stride: np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Each hit's window, clipped to its contig and the block, as (pattern * stride + start,
    pattern * stride + end)."""
    query = hits.query
    pos = hits.position.astype(np.int64)
    lo = pos - windows.back[query]
    hi = lo + windows.span[query]
    pattern = windows.pattern[query] * stride
    contig = contig_of(pos + hits.start, contig_offsets)
    contig_lo = contig_offsets[contig] - hits.start
    lo = np.maximum(lo, np.maximum(contig_lo, 0))
    hi = np.minimum(hi, np.minimum(contig_lo + contig_lengths[contig], block_length))
    return pattern + lo, pattern + hi


def _window_keys_device(device: Device, hits: BlockHits, windows: QueryWindows, block_length: int,
                        contig_offsets: np.ndarray, contig_lengths: np.ndarray,
                        stride: np.int64) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_window_keys` by ``kernels/candidates.cl``."""
    n = int(hits.query.size)
    key_lo, key_hi = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    prg = device.program("candidates.cl", {})
    with device.timed("dmap-transfer"):
        ins = [device.upload(np.ascontiguousarray(a, dtype=dt)) for a, dt in (
            (hits.query, np.int64), (hits.position, np.uint32))]
        per_query = [device.upload(a) for a in (windows.back, windows.span, windows.pattern)]
        contigs = [device.upload(np.ascontiguousarray(a, dtype=np.int64)) for a in (
            contig_offsets, np.asarray(contig_offsets) + np.asarray(contig_lengths))]
    outs = [device.output(key_lo), device.output(key_hi)]
    device.run(prg, "hit_windows", [*ins, np.uint32(n), *per_query, *contigs, np.uint32(len(contig_offsets)),
                                    np.int64(hits.start), np.int64(block_length), stride, *outs],
               n, "dmap-verify-kernel")
    with device.timed("dmap-transfer"):
        for host, buf in zip((key_lo, key_hi), outs):
            device.read_back(buf, host)
    return key_lo, key_hi
