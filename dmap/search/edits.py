"""Host wrapper of ``kernels/edit_seeds.cl``: seeds searched with up to m edits.

Paper 004's seed generation with errors, as a depth-first search on the
FM-index pruned by a lower bound from the reversed text's FM-index.  The
kernel finds every text string within ``max_edits`` Levenshtein edits of
each seed (see the kernel for the exact rules); the result is the BWT
intervals of those strings, which locate turns into positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..opencl.device import Device, DeviceBlock, ReverseOcc
from .locate import expand_intervals

# Intervals a query may write in the first pass.  Measured on E. coli
# (benchmarks/seed_schemes.py): most seeds with one edit give 1-3 intervals;
# the rare query with more runs again in a second pass with room for all.
FIRST_PASS_KEEP = 8
MAX_SEED_EDITS = 3  # the stack and the search grow fast beyond this


@dataclass
class SeedIntervals:
    """BWT intervals ``[sp, ep)`` found for queries (seed * n_strands + strand)."""

    query: np.ndarray
    sp: np.ndarray
    ep: np.ndarray

    def __len__(self) -> int:
        return int(self.query.size)

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Every (query, BWT row) once: the intervals of one query nest or repeat
        (a seed matched exactly, and with its last symbol as an insertion), and
        a row is one position, located once."""
        which, rows = expand_intervals(np.stack([self.sp, self.ep], axis=1))
        query = self.query[which].astype(np.int64)
        rows = rows.astype(np.int64)
        key = np.unique((query << 32) | rows)
        return key >> 32, (key & 0xFFFFFFFF).astype(np.uint32)


def search_with_edits(
    device: Device,
    block: DeviceBlock,
    reverse: ReverseOcc,
    codes: np.ndarray,
    offsets: np.ndarray,
    lengths: np.ndarray,
    n_strands: int,
    max_edits: int,
    keep: int = FIRST_PASS_KEEP,
) -> SeedIntervals:
    """Every interval of text strings within ``max_edits`` edits of each seed, on both strands.

    Parameters
    ----------
    block, reverse
        The block's FM-index and its reversed text's occurrence table.
    codes, offsets, lengths
        Seeds back to back, as in :class:`dmap.reads.EncodedReads`.
    n_strands
        1 (forward only) or 2 (also the reverse complement, DNA).
    max_edits
        m, 1 to :data:`MAX_SEED_EDITS`.

    Returns
    -------
    SeedIntervals
        Query ``q`` is seed ``q // n_strands`` on strand ``q % n_strands``.
    """
    if not 1 <= max_edits <= MAX_SEED_EDITS:
        raise ValueError(f"max_edits must be between 1 and {MAX_SEED_EDITS}, not {max_edits}")
    n_queries = len(lengths) * n_strands
    if n_queries == 0:
        z = np.zeros(0, dtype=np.uint32)
        return SeedIntervals(z, z, z)
    # Seed lengths rounded up, so that a few programs serve every chunk.
    max_len = -(-int(lengths.max()) // 32) * 32
    prg = device.program("edit_seeds.cl", {**block.shape.defines, "N_STRANDS": n_strands, "MAX_LEN": max_len,
                                           "MAX_EDITS": max_edits})
    with device.timed("dmap-transfer"):
        seeds = device.upload(np.ascontiguousarray(codes, dtype=np.uint8))
        offs = device.upload(offsets.astype(np.uint32))
        lens = device.upload(lengths.astype(np.uint32))
    index_args = (block.buffers["occ"], np.uint32(block.shape.n_periods), block.buffers["C"],
                  np.uint32(block.shape.n_rows), reverse.buffers["occ"], reverse.buffers["C"], seeds, offs, lens)
    count = np.empty(n_queries, dtype=np.uint32)
    out = np.empty((n_queries * keep, 2), dtype=np.uint32)
    count_buf, out_buf = device.output(count), device.output(out)
    device.run(prg, "edit_seeds_first", [*index_args, np.uint32(n_queries), np.uint32(keep), count_buf, out_buf],
               n_queries, "dmap-search-kernel")
    with device.timed("dmap-transfer"):
        device.read_back(count_buf, count)
        device.read_back(out_buf, out)
    device.tally("queries_searched", n_queries)
    kept = np.minimum(count, keep).astype(np.int64)
    query = np.repeat(np.arange(n_queries, dtype=np.int64), kept)
    slot = query * keep + np.arange(query.size) - np.repeat(np.cumsum(kept) - kept, kept)
    intervals = [(query, out[slot])]
    again = np.flatnonzero(count > keep)
    if again.size:
        total = count[again].astype(np.int64)
        first = np.zeros(again.size, dtype=np.int64)
        np.cumsum(total[:-1], out=first[1:])
        more = np.empty((int(total.sum()), 2), dtype=np.uint32)
        more_buf = device.output(more)
        with device.timed("dmap-transfer"):
            again_buf, first_buf = device.upload(again.astype(np.uint32)), device.upload(first.astype(np.uint32))
        device.run(prg, "edit_seeds_fill", [*index_args, again_buf, np.uint32(again.size), first_buf, more_buf],
                   int(again.size), "dmap-search-kernel")
        with device.timed("dmap-transfer"):
            device.read_back(more_buf, more)
        # Those queries' first-pass slots are a prefix of what the fill pass wrote.
        keep_first = np.isin(query, again, invert=True)
        intervals = [(query[keep_first], out[slot[keep_first]]), (np.repeat(again, total), more)]
    query = np.concatenate([q for q, _ in intervals])
    both = np.concatenate([iv for _, iv in intervals])
    return SeedIntervals(query.astype(np.uint32), both[:, 0], both[:, 1])
