"""Host wrapper of ``kernels/exact_search.cl``: intervals of exact matches."""

from __future__ import annotations

import math

import numpy as np

from ..alphabet import INVALID
from ..opencl.device import BlockText, Device, DeviceBlock
from .kmers import KmerTable

# Queries advanced in step by one work-item (see exact_search.cl), as
# measured fastest with benchmarks/kernel_speed.py (docs/performance.md).
DEFAULT_BATCH = 16
BAD_READ = 0xFFFFFFFF  # the interval of a read with an unknown symbol (exact_search.cl)
LOCATED = 0xFFFFFFFE  # (position, LOCATED): a query the kernel located itself (exact_search.cl)
_IDENTITY = np.arange(256, dtype=np.uint8)
_DNA_BYTES = np.frombuffer(b"ACGTacgt", dtype=np.uint8)
# Early stop once a suffix this much longer than log_sigma(rows) has one row:
# on a strand the read is not from, a suffix that long matches anywhere with
# probability about sigma**-4 (4 measured best among 2-8, docs/performance.md).
EARLY_STOP_MARGIN = 4


def plain_reads(table: np.ndarray | None, sigma: int) -> bool:
    """Whether the kernel may take plain DNA reads 16 bases at a time
    (PLAIN_READS in exact_search.cl): the reads are bytes, and the table
    gives A, C, G, T (either case) the codes the kernel computes from their bits."""
    if table is None:
        return False
    bit_codes = ((_DNA_BYTES >> 1) ^ (_DNA_BYTES >> 2)) & 3
    return sigma == 4 and np.array_equal(table[_DNA_BYTES], bit_codes)


def early_stop_length(n_rows: int, sigma: int) -> int:
    """Shortest unique suffix at which the search kernel stops and verifies against the text."""
    return math.ceil(math.log(max(n_rows, 2), max(sigma, 2))) + EARLY_STOP_MARGIN


def search_block(
    device: Device,
    block: DeviceBlock,
    codes: np.ndarray,
    offsets: np.ndarray,
    lengths: np.ndarray,
    n_strands: int,
    batch: int = DEFAULT_BATCH,
    table: np.ndarray | None = None,
    text: BlockText | None = None,
    kmers: KmerTable | None = None,
) -> np.ndarray:
    """Backward-search every read (and its reverse complement) in one block.

    Parameters
    ----------
    codes, offsets, lengths
        Read ``i`` is ``codes[offsets[i] : offsets[i] + lengths[i]]``.
    n_strands
        1 (forward only) or 2 (also the reverse complement, DNA).
    table
        byte -> code, applied on the device: ``codes`` may then be the
        reads' bytes as read (:class:`dmap.reads.ReadBytes`).  None when
        ``codes`` are codes already.
    text
        The block's text on the device: turns the early stop on (see
        ``exact_search.cl``), and a query found at a single position is
        returned as ``(position, LOCATED)`` instead of its interval.
    kmers
        The block's k-mer table (:func:`dmap.search.kmers.kmer_table`):
        each query's first steps in one lookup; the same results.

    Returns
    -------
    numpy.ndarray
        ``(n, n_strands, 2)`` uint32: the BWT rows ``[sp, ep)`` matching
        each read on each strand (``sp == ep`` when there is none), or with
        ``text``, ``(position, LOCATED)`` for a query the kernel located.
        A read holding a byte that ``table`` maps to INVALID has
        ``(BAD_READ, BAD_READ)`` on its forward strand (:func:`bad_queries`)
        and no match on the other.
    """
    n = len(lengths)
    if n == 0:
        return np.zeros((0, n_strands, 2), dtype=np.uint32)
    shape = block.shape
    min_suffix = early_stop_length(shape.n_rows, shape.sigma) if text is not None else 0
    depth = 0 if kmers is None else kmers.depth
    if min_suffix:  # no early stop may fall inside the lookup (exact_search.cl)
        depth = min(depth, min_suffix - 1)
    prg = device.program("exact_search.cl", {**block.shape.defines, "BATCH": batch, "N_STRANDS": n_strands,
                                             "INVALID": INVALID, "SA_RATE": block.sa_sample_rate,
                                             "MIN_SUFFIX": min_suffix, "CHECK_SYMBOLS": int(table is not None),
                                             "PLAIN_READS": int(plain_reads(table, shape.sigma)),
                                             "KMER_DEPTH": depth})
    if table is None:
        table = _IDENTITY
    n_queries = n * n_strands
    with device.timed("dmap-transfer"):
        reads = device.upload(np.ascontiguousarray(codes, dtype=np.uint8))
        offs = device.upload(offsets.astype(np.uint32))
        lens = device.upload(lengths.astype(np.uint32))
        table_buf = device.upload(table)
    out = np.empty((n_queries, 2), dtype=np.uint32)
    out_buf = device.output(out)
    work_items = -(-n_queries // batch)
    b = block.buffers
    device.run(prg, "exact_search", [
        b["occ"], np.uint32(shape.n_periods), b["C"], np.uint32(shape.n_rows), b["sa_samples"], b["boundary_rows"],
        b["boundary_pos"], np.uint32(block.n_boundary), text.buffer if text is not None else b["C"],
        reads, offs, lens, table_buf, kmers.buffer if depth else b["C"], np.uint32(n_queries), out_buf,
    ], work_items, "dmap-search-kernel")
    with device.timed("dmap-transfer"):
        device.read_back(out_buf, out)
    device.tally("queries_searched", n_queries)
    return out.reshape(n, n_strands, 2)


def bad_queries(found: np.ndarray) -> np.ndarray:
    """The queries of :func:`search_block`'s ``(n_queries, 2)`` results whose read holds
    a symbol outside the alphabet (the kernel checks them: no pass on the host)."""
    return np.flatnonzero(found[:, 0] == BAD_READ)
