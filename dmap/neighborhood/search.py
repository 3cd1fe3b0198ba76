"""Host side of ``kernels/neighborhood.cl``: a chunk's patterns looked up in one block.

One kernel pass finds each pattern's hits and appends them when there are
few (nearly always); patterns with more, or all when the output guess was
short, run again in an exact fill pass (no cap on hits per pattern, so
nothing is lost).  Hits come back as :class:`dmap.search.hits.BlockHits` whose
``query`` is ``pattern * n_strands + strand``, the same shape as the
FM-index engine's located seed hits, so candidate regions, verification
and merging are shared.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..approx.seeds import Seeds
from ..opencl.device import Device
from ..reads import EncodedReads
from .build import ARRAYS
from .params import NeighborhoodParams

METHODS = {"phash": 0, "bsearch": 1, "list": 2}


def neighborhood_patterns(lengths: np.ndarray, window: int, delta: int = 1) -> Seeds:
    """Patterns of each read: windows of ``window`` symbols at offsets 0, delta, 2*delta, ...

    A read shorter than ``window`` has none (it is reported unmapped).
    """
    lengths = lengths.astype(np.int64)
    per_read = np.where(lengths >= window, (lengths - window) // delta + 1, 0)
    read = np.repeat(np.arange(lengths.size), per_read)
    first = np.r_[0, np.cumsum(per_read)[:-1]]
    offset = (np.arange(read.size) - first[read]) * delta
    return Seeds(read, offset.astype(np.uint32), np.full(read.size, window, dtype=np.uint32))


@dataclass
class DeviceNeighborhood:
    """A block's neighborhood index (or a list/binary-search store for comparison) on a device."""

    buffers: dict
    nbytes: int
    method: str = "phash"


def upload_neighborhood(device: Device, arrays: dict[str, np.ndarray], method: str = "phash") -> DeviceNeighborhood:
    return DeviceNeighborhood({name: device.upload(arrays[name]) for name in ARRAYS},
                              sum(int(arrays[n].nbytes) for n in ARRAYS), method)


KEEP = 16  # hits a work-item holds privately in the one-pass kernel


def _program(device: Device, params: NeighborhoodParams, errors: int, n_strands: int, method: str):
    seed_mask = sum(1 << i for i, c in enumerate(params.mask) if c == "#")
    key_t = {2: "ushort", 4: "uint", 8: "ulong"}[params.key_dtype.itemsize]
    return device.program("neighborhood.cl", {
        "SIGMA": params.sigma, "BITS": params.bits, "LN": params.neighborhood_length, "SPAN": params.span,
        "SEED_MASK": f"{seed_mask}ul", "NS": n_strands, "E": errors, "KEY_T": key_t, "METHOD": METHODS[method],
        "KEEP": KEEP})


def _append_pass(device: Device, prg, store: DeviceNeighborhood, reads: EncodedReads, patterns: Seeds, n: int,
                 capacity: int):
    """The one-pass kernel: per-query counts and, while ``capacity`` lasts, the
    (query, position) pairs of queries with at most KEEP hits."""
    cl, mf = device.cl, device.cl.mem_flags
    with device.timed("dmap-transfer"):
        inputs = [device.upload(a) for a in (reads.codes, reads.offsets.astype(np.uint32),
                                             patterns.read.astype(np.uint32), patterns.offset.astype(np.uint32))]
        counts_buf = cl.Buffer(device.context, mf.WRITE_ONLY, 4 * n)
        total_buf = cl.Buffer(device.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(1, np.uint32))
        out_q = cl.Buffer(device.context, mf.WRITE_ONLY, 4 * max(capacity, 1))
        out_p = cl.Buffer(device.context, mf.WRITE_ONLY, 4 * max(capacity, 1))
    index_args = [store.buffers[name] for name in ARRAYS] + inputs + [np.uint32(store.method == "phash")]
    device.run(prg, "seed_and_filter_append",
               [*index_args, np.uint32(n), counts_buf, total_buf, np.uint32(capacity), out_q, out_p],
               n, "dmap-neighborhood-kernel")
    counts, total = np.empty(n, np.uint32), np.empty(1, np.uint32)
    with device.timed("dmap-transfer"):
        cl.enqueue_copy(device.queue, counts, counts_buf)
        cl.enqueue_copy(device.queue, total, total_buf)
    return counts, int(total[0]), out_q, out_p, index_args


# Hits per query of each device's last call, to size the next output (weak: devices come and go in tests).
_hits_per_query: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def seed_and_filter(
    device: Device,
    store: DeviceNeighborhood,
    params: NeighborhoodParams,
    reads: EncodedReads,
    patterns: Seeds,
    errors: int,
    n_strands: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Every window position of the block that some pattern matches.

    A pattern matches a window when its seed's ``#`` positions are equal and
    its neighborhood differs in at most ``errors`` positions.

    Returns
    -------
    query, position
        ``query = pattern * n_strands + strand`` and the block-local window
        start of every match, in no particular order.
    """
    cl = device.cl
    n = len(patterns) * n_strands
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.uint32)
    prg = _program(device, params, errors, n_strands, store.method)
    capacity = int(n * _hits_per_query.get(device, 1.0) * 1.25) + 1024
    counts, total, out_q, out_p, index_args = _append_pass(device, prg, store, reads, patterns, n, capacity)
    _hits_per_query[device] = max(float(counts.sum(dtype=np.int64)) / n, 0.01)
    if total <= capacity:
        query, position = np.empty(total, np.uint32), np.empty(total, np.uint32)
        if total:
            with device.timed("dmap-transfer"):
                cl.enqueue_copy(device.queue, query, out_q)
                cl.enqueue_copy(device.queue, position, out_p)
        rest = np.flatnonzero(counts > KEEP)
    else:  # the guess was short: every query again, exactly
        query, position = np.zeros(0, np.uint32), np.zeros(0, np.uint32)
        rest = np.flatnonzero(counts > 0)
    if rest.size:
        offsets = np.zeros(rest.size, dtype=np.uint64)
        np.cumsum(counts[rest][:-1], out=offsets[1:], dtype=np.uint64)
        more = np.empty(int(counts[rest].sum(dtype=np.int64)), dtype=np.uint32)
        with device.timed("dmap-transfer"):
            ids_buf, offsets_buf = device.upload(rest.astype(np.uint32)), device.upload(offsets)
            out_buf = device.output(more)
        device.run(prg, "seed_and_filter_fill", [*index_args, np.uint32(rest.size), ids_buf, offsets_buf, out_buf],
                   int(rest.size), "dmap-neighborhood-kernel")
        with device.timed("dmap-transfer"):
            device.read_back(out_buf, more)
        query = np.concatenate([query, np.repeat(rest.astype(np.uint32), counts[rest])])
        position = np.concatenate([position, more])
    return query.astype(np.int64), position


def count_matches(device: Device, store: DeviceNeighborhood, params: NeighborhoodParams, reads: EncodedReads,
                  patterns: Seeds, errors: int, n_strands: int) -> np.ndarray:
    """Matches per query only (the one-pass kernel with no output room): for benchmarks."""
    n = len(patterns) * n_strands
    if n == 0:
        return np.zeros(0, np.uint32)
    prg = _program(device, params, errors, n_strands, store.method)
    return _append_pass(device, prg, store, reads, patterns, n, 0)[0]
