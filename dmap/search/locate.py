"""SA conversion (locate): BWT rows -> positions in a block's text.

``locate_rows`` runs ``kernels/locate.cl`` on the device; ``locate_rows_numpy``
is the plain numpy LF-walk it is tested against.
"""

from __future__ import annotations

import numpy as np

from ..index.occ import bwt_symbol, occ_lookup
from ..index.store import BlockArrays
from ..opencl.device import Device, DeviceBlock
from .exact import LOCATED

# Rows walked in step by one work-item (benchmarks/kernel_speed.py).
LOCATE_BATCH = 16


def expand_intervals(intervals: np.ndarray, max_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows of every interval, flattened.

    Parameters
    ----------
    intervals
        ``(n_queries, 2)`` ``[sp, ep)`` pairs.
    max_rows
        Keep at most this many rows per query (the first ones).

    Returns
    -------
    query, rows
        For each row to locate, the query it belongs to and the BWT row.
    """
    sp = intervals[:, 0].astype(np.int64)
    count = intervals[:, 1].astype(np.int64) - sp
    if max_rows is not None:
        count = np.minimum(count, max_rows)
    query = np.repeat(np.arange(len(sp)), count)
    first = np.zeros(len(sp), dtype=np.int64)
    np.cumsum(count[:-1], out=first[1:])
    rows = sp[query] + (np.arange(query.size) - first[query])
    return query, rows.astype(np.uint32)


def split_located(found: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split the exact search kernel's ``(n_queries, 2)`` results (with the early stop on).

    Returns
    -------
    located, positions, query, rows
        The queries the kernel located itself (``(position, LOCATED)``) and
        their positions; then, for every row of the other intervals, its
        query and BWT row, still to be located.
    """
    located = np.flatnonzero(found[:, 1] == LOCATED)
    walk = found.copy()
    walk[located] = 0
    query, rows = expand_intervals(walk)
    return located, found[located, 0], query, rows


def locate_rows(device: Device, block: DeviceBlock, rows: np.ndarray, batch: int = LOCATE_BATCH) -> np.ndarray:
    """Text positions (block-local) of BWT ``rows``, on the device."""
    if rows.size == 0:
        return np.zeros(0, dtype=np.uint32)
    prg = device.program("locate.cl", {**block.shape.defines, "SA_RATE": block.sa_sample_rate, "BATCH": batch})
    with device.timed("dmap-transfer"):
        rows_buf = device.upload(rows.astype(np.uint32))
    out = np.empty(rows.size, dtype=np.uint32)
    out_buf = device.output(out)
    b = block.buffers
    device.run(prg, "locate", [
        b["occ"], np.uint32(block.shape.n_periods), b["C"], b["sa_samples"], b["boundary_rows"],
        b["boundary_pos"], np.uint32(block.n_boundary), rows_buf, np.uint32(rows.size), out_buf,
    ], -(-rows.size // batch), "dmap-locate-kernel")
    with device.timed("dmap-transfer"):
        device.read_back(out_buf, out)
    return out


def locate_rows_numpy(block: BlockArrays, rows: np.ndarray) -> np.ndarray:
    """Reference LF-walk in numpy, all rows in step."""
    r = rows.astype(np.int64)
    pos = np.full(r.size, -1, dtype=np.int64)
    steps = 0
    todo = np.arange(r.size)
    while todo.size:
        cur = r[todo]
        sampled = cur % block.sa_sample_rate == 0
        pos[todo[sampled]] = block.sa_samples[cur[sampled] // block.sa_sample_rate].astype(np.int64) + steps
        c = bwt_symbol(block.occ, block.shape, cur)
        boundary = ~sampled & (c >= block.shape.sigma)
        at = np.searchsorted(block.boundary_rows, cur[boundary])
        pos[todo[boundary]] = block.boundary_pos[at].astype(np.int64) + steps
        walk = ~sampled & ~boundary
        todo, cur, c = todo[walk], cur[walk], c[walk]
        r[todo] = block.C[c].astype(np.int64) + occ_lookup(block.occ, block.shape, c, cur)
        steps += 1
    return pos.astype(np.uint32)
