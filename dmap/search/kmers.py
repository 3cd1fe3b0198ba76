"""Host wrapper of ``kernels/kmers.cl``: every short string's BWT interval, looked up by the search.

Backward search spends two dependent random memory loads per symbol (the
Occ counts at both ends of the interval).  Its first steps are the same
for every query that ends with the same symbols, so a block keeps the
interval of every string of up to ``depth`` symbols, built once on the
device when the block is first searched: the exact-search kernel then
starts each query from its last ``depth`` symbols in one load.  (Most
FM-index mappers keep such a table; BWA-MEM2 and GPU FM-index searches
among them.)  The depth stops where strings stop being frequent
(log_sigma of the block's rows) or where the table would pass
:data:`MAX_TABLE_BYTES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..index.occ import occ_bytes_per_symbol, occ_lookup
from ..index.store import BlockArrays, Index
from ..opencl.device import Device, DeviceBlock

# A table pays while it stays well below the occurrence table whose steps it
# replaces.  Measured on the 2-core VM (benchmarks/kernel_speed.py
# --kmer-depth, docs/performance.md "k-mer table"): E. coli's 4.7 MiB occ, which
# its caches hold, gained 27% on 40-bp reads' 13-bp pieces and 10% on 100-bp
# reads at depth 8 or 9 (0.7, 2.7 MiB) and lost at depth 10 (10.7 MiB); the
# 100 Mbp block's 95 MiB occ gained 28% and 19% at depth 11 (43 MiB), built
# in 0.07 s.  So at most half the occ's bytes, and at most MAX_TABLE_BYTES.
OCC_SHARE = 0.5
MAX_TABLE_BYTES = 64 << 20
ENTRY_BYTES = 8  # (sp, ep), two uint32


@dataclass
class KmerTable:
    """A block's k-mer interval table on a device: levels 0..``depth`` back to back (``kmers.cl``)."""

    buffer: object
    depth: int
    nbytes: int


def level_offset(level: int, sigma: int) -> int:
    """Where strings of ``level`` symbols start in the table: 1 + sigma + ... + sigma**(level-1)."""
    return sum(sigma**j for j in range(level))


def kmer_depth(n_rows: int, sigma: int, max_bytes: int | None = None) -> int:
    """The deepest table worth keeping: strings no longer than log_sigma(n_rows) (longer
    ones mostly occur once or never, where the search dies or stops early anyway),
    within ``max_bytes`` (by default :data:`OCC_SHARE` of the block's occurrence table,
    at most :data:`MAX_TABLE_BYTES`).  0: no table."""
    if max_bytes is None:
        # The rate hardly changes the occ's size; R = 1 is the default.
        max_bytes = min(int(OCC_SHARE * n_rows * occ_bytes_per_symbol(sigma, 1)), MAX_TABLE_BYTES)
    if sigma < 2:
        return 0
    depth = int(math.floor(math.log(max(n_rows, 1), sigma) + 1e-9))
    while depth > 0 and level_offset(depth + 1, sigma) * ENTRY_BYTES > max_bytes:
        depth -= 1
    return depth


def build_kmer_table(device: Device, block: DeviceBlock, depth: int | None = None) -> KmerTable:
    """The table of ``block`` on ``device``, one kernel launch per level.

    ``depth`` defaults to :func:`kmer_depth` of the block.
    """
    shape = block.shape
    sigma = shape.sigma
    if depth is None:
        depth = kmer_depth(shape.n_rows, sigma)
    n = level_offset(depth + 1, sigma)
    mf = device.cl.mem_flags
    buffer = device.cl.Buffer(device.context, mf.READ_WRITE, n * ENTRY_BYTES)
    device.cl.enqueue_copy(device.queue, buffer, np.array([0, shape.n_rows], dtype=np.uint32))
    if depth:
        prg = device.program("kmers.cl", block.shape.defines)
        b = block.buffers
        for level in range(1, depth + 1):
            n_prev = sigma ** (level - 1)
            device.run(prg, "kmer_level", [b["occ"], np.uint32(shape.n_periods), b["C"], buffer,
                                           np.uint32(level_offset(level - 1, sigma)), np.uint32(n_prev),
                                           np.uint32(level_offset(level, sigma))], sigma * n_prev)
    else:
        device.queue.finish()
    return KmerTable(buffer, depth, n * ENTRY_BYTES)


def table_bytes(n_rows: int, sigma: int) -> int:
    """Device bytes of a block's table at its :func:`kmer_depth`."""
    return level_offset(kmer_depth(n_rows, sigma) + 1, sigma) * ENTRY_BYTES


def kmer_table(device: Device, index: Index, number: int) -> KmerTable:
    """Block ``number``'s table on ``device``, built on first use and cached like the block."""
    blk = device.block(index, number)
    depth = kmer_depth(blk.shape.n_rows, blk.shape.sigma)
    return device.derived((index.uid, number, "kmers"), level_offset(depth + 1, blk.shape.sigma) * ENTRY_BYTES,
                          lambda: build_kmer_table(device, blk, depth))


def kmer_table_numpy(block: BlockArrays, depth: int) -> np.ndarray:
    """``(entries, 2)`` uint32: the table of :func:`build_kmer_table`, level by level in numpy."""
    sigma = block.shape.sigma
    levels = [np.array([[0, block.shape.n_rows]], dtype=np.int64)]
    for _ in range(depth):
        prev = levels[-1]
        c = np.repeat(np.arange(sigma), len(prev))
        sp, ep = np.tile(prev[:, 0], sigma), np.tile(prev[:, 1], sigma)
        alive = sp < ep
        base = block.C[c].astype(np.int64)
        sp = np.where(alive, base + occ_lookup(block.occ, block.shape, c, sp), sp)
        ep = np.where(alive, base + occ_lookup(block.occ, block.shape, c, ep), ep)
        levels.append(np.stack([sp, ep], axis=1))
    return np.concatenate(levels).astype(np.uint32)
