"""Host wrapper of ``kernels/exact_search.cl``: intervals of exact matches."""

from __future__ import annotations

import numpy as np

from ..device import Device, DeviceBlock

# Queries advanced in step by one work-item (see exact_search.cl); measured in
# benchmarks/kernel_speed.py.
DEFAULT_BATCH = 16


def occ_defines(block: DeviceBlock) -> dict[str, int]:
    s = block.host.shape
    return {"SIGMA": s.sigma, "RATE": s.rate, "LAYOUT": 0 if s.layout == "interleaved" else 1}


def search_block(
    device: Device,
    block: DeviceBlock,
    codes: np.ndarray,
    lengths: np.ndarray,
    n_strands: int,
    batch: int = DEFAULT_BATCH,
) -> np.ndarray:
    """Backward-search every read (and its reverse complement) in one block.

    Parameters
    ----------
    codes, lengths
        Padded read codes ``(n, width)`` and read lengths, as in
        :class:`dmap.fastx.ReadChunk`.
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
    reads = device.upload(np.ascontiguousarray(codes, dtype=np.uint8))
    lens = device.upload(lengths.astype(np.uint32))
    out = np.empty((n_queries, 2), dtype=np.uint32)
    out_buf = cl.Buffer(device.context, cl.mem_flags.WRITE_ONLY, out.nbytes)
    shape = block.host.shape
    work_items = -(-n_queries // batch)
    kernel = cl.Kernel(prg, "exact_search")  # one per call: set_args is not thread-safe
    kernel.set_args(
        block.buffers["occ"], np.uint32(shape.n_periods), block.buffers["C"], np.uint32(shape.n_rows),
        reads, np.uint32(codes.shape[1]), lens, np.uint32(n_queries), out_buf,
    )
    cl.enqueue_nd_range_kernel(device.queue, kernel, (work_items,), None)
    cl.enqueue_copy(device.queue, out, out_buf)
    return out.reshape(n, n_strands, 2)
