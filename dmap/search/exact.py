"""Host wrapper of ``kernels/exact_search.cl``: intervals of exact matches."""

from __future__ import annotations

import numpy as np

from ..device import Device, DeviceBlock

# Queries advanced in step by one work-item (see exact_search.cl) and the
# work-group size, as measured fastest with benchmarks/kernel_speed.py
# (docs/benchmarks.md).
DEFAULT_BATCH = 16
WORK_GROUP = 128


def launch_size(work_items: int) -> tuple[tuple[int], tuple[int]]:
    """Global and local sizes: the global size rounded up to whole groups."""
    return (-(-work_items // WORK_GROUP) * WORK_GROUP,), (WORK_GROUP,)


def occ_defines(block: DeviceBlock) -> dict[str, int]:
    s = block.shape
    return {"SIGMA": s.sigma, "RATE": s.rate, "LAYOUT": 0 if s.layout == "interleaved" else 1}


def search_block(
    device: Device,
    block: DeviceBlock,
    codes: np.ndarray,
    offsets: np.ndarray,
    lengths: np.ndarray,
    n_strands: int,
    batch: int = DEFAULT_BATCH,
) -> np.ndarray:
    """Backward-search every read (and its reverse complement) in one block.

    Parameters
    ----------
    codes, offsets, lengths
        Reads back to back, as in :class:`dmap.fastx.ReadChunk`.
    n_strands
        1 (forward only) or 2 (also the reverse complement, DNA).

    Returns
    -------
    numpy.ndarray
        ``(n, n_strands, 2)`` uint32: the BWT rows ``[sp, ep)`` matching
        each read on each strand (``sp == ep`` when there is none).
    """
    n = len(lengths)
    if n == 0:
        return np.zeros((0, n_strands, 2), dtype=np.uint32)
    cl = device.cl
    prg = device.program("exact_search.cl", {**occ_defines(block), "BATCH": batch, "N_STRANDS": n_strands})
    n_queries = n * n_strands
    with device.timed("dmap-transfer"):
        reads = device.upload(np.ascontiguousarray(codes, dtype=np.uint8))
        offs = device.upload(offsets.astype(np.uint32))
        lens = device.upload(lengths.astype(np.uint32))
    out = np.empty((n_queries, 2), dtype=np.uint32)
    out_buf = cl.Buffer(device.context, cl.mem_flags.WRITE_ONLY, out.nbytes)
    shape = block.shape
    work_items = -(-n_queries // batch)
    kernel = cl.Kernel(prg, "exact_search")  # one per call: set_args is not thread-safe
    kernel.set_args(
        block.buffers["occ"], np.uint32(shape.n_periods), block.buffers["C"], np.uint32(shape.n_rows),
        reads, offs, lens, np.uint32(n_queries), out_buf,
    )
    with device.timed("dmap-search-kernel"):
        cl.enqueue_nd_range_kernel(device.queue, kernel, *launch_size(work_items)).wait()
    with device.timed("dmap-transfer"):
        cl.enqueue_copy(device.queue, out, out_buf)
    device.queries_searched += n_queries
    return out.reshape(n, n_strands, 2)
