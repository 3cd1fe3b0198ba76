"""Host wrapper of ``kernels/myers.cl``: edit distance at every end position of candidate regions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..opencl.device import Device
from .candidates import Regions
from .patterns import DevicePatterns

if TYPE_CHECKING:
    import pyopencl as cl

COOPERATIVE_GROUP = 64  # work-items per group of the cooperative kernel (words x regions)
# Regions per work-item of myers_lanes: the 64-bit lanes of an AVX2 register.  Eight
# (AVX-512) measured no faster on the AMD EPYC this was tuned on (benchmarks/myers_gcups.py).
LANES = 4
# The kernels of myers.cl, all with the same output: a work-item per region; four regions per
# work-item in vector lanes (a CPU); a work-item per 64-bit word of a pattern (a GPU).
MYERS_KERNELS = ("myers", "myers_lanes", "myers_cooperative")
# Those that can also find each region's runs themselves (RUNS): the one a CPU and the one a GPU uses.
RUN_KERNELS = ("myers_lanes", "myers_cooperative")


def region_offsets(lengths: np.ndarray) -> np.ndarray:
    """Where each region's distances start in the flat output."""
    out = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=out[1:])
    return out


# Owned-range bounds that bound nothing (a first or last block).
UNBOUNDED = 1 << 62


@dataclass
class FirstRuns:
    """Each region's runs of owned ends within K, as ``myers_lanes`` finds them (``RUNS``).

    ``count`` runs (255: that many or more); of the first run, its best end
    (least distance, leftmost), that distance, and its first and last end, all
    ends as offsets into the region.
    """

    count: np.ndarray
    best: np.ndarray
    distance: np.ndarray
    first: np.ndarray
    last: np.ndarray


def myers_distances(
    device: Device,
    text_buffer: cl.Buffer,
    patterns: DevicePatterns,
    sigma: int,
    regions: Regions,
    kernel: str = "myers",
) -> np.ndarray:
    """Semi-global edit distance of each region's pattern at each region end.

    Parameters
    ----------
    text_buffer
        Device buffer of the text (codes) the regions index into.
    patterns
        The patterns and their match masks on the device
        (:func:`dmap.approx.patterns.oriented_patterns` or ``upload_patterns``).
    regions
        Each region's pattern number, first text position and length.
    kernel
        One of :data:`MYERS_KERNELS`: ``myers``, a work-item per region;
        ``myers_lanes``, four regions per work-item in the lanes of 64-bit
        vectors (a CPU's SIMD units); ``myers_cooperative``, a work-item per
        64-bit word of a pattern (Chacón et al. (2014)'s thread-cooperative
        scheme, for a GPU).  See docs/performance.md for where each pays.

    Returns
    -------
    numpy.ndarray
        uint8, regions back to back: entry ``j`` of region ``r`` is the least
        edit distance of the pattern to a text substring ending at
        ``regions.start[r] + j`` (capped at 255).
    """
    return _myers(device, text_buffer, patterns, sigma, regions, kernel)[0]


def myers_runs(
    device: Device,
    text_buffer: cl.Buffer,
    patterns: DevicePatterns,
    sigma: int,
    regions: Regions,
    max_errors: int,
    own_from: int | None,
    own_until: int | None,
    kernel: str = "myers_lanes",
) -> FirstRuns:
    """Each region's :class:`FirstRuns`, from ``myers_lanes`` or ``myers_cooperative``
    (which write no distances then).

    ``own_from``/``own_until``: the block-local owned range of a read of length 0
    (None: unbounded), as :func:`dmap.approx.alignments.best_of_runs` takes them.
    """
    if kernel not in RUN_KERNELS:
        raise ValueError(f"{kernel!r} does not find runs: one of {RUN_KERNELS}")
    return _myers(device, text_buffer, patterns, sigma, regions, kernel, (max_errors, own_from, own_until))[1]


def _myers(device: Device, text_buffer: cl.Buffer, patterns: DevicePatterns, sigma: int, regions: Regions, kernel: str,
           runs: tuple[int, int | None, int | None] | None = None) -> tuple[np.ndarray, FirstRuns | None]:
    if kernel not in MYERS_KERNELS:
        raise ValueError(f"unknown Myers kernel {kernel!r}")
    n = len(regions)
    out = np.empty(0 if runs is not None else int(regions.length.sum()), dtype=np.uint8)
    first = None if runs is None else FirstRuns(*(np.zeros(n, dtype=t) for t in (
        np.uint8, np.uint32, np.uint8, np.uint32, np.uint32)))
    if n == 0:
        return out, first
    words = patterns.words
    per_group = max(1, COOPERATIVE_GROUP // words)
    defines = {"SIGMA": sigma, "WORDS": words, "REGIONS_PER_GROUP": per_group, "LANES": LANES,
               "RUNS": int(runs is not None)}
    prg = device.program("myers.cl", defines)
    with device.timed("dmap-transfer"):
        columns = (regions.start, regions.length, regions.pattern, region_offsets(regions.length))
        bufs = [patterns.peq, patterns.length_buffer,
                *(device.upload(np.ascontiguousarray(a, dtype=np.uint32)) for a in columns)]
    out_buf = device.output(out)
    args = [text_buffer, *bufs, np.uint32(n), out_buf]
    size = None
    if kernel == "myers_cooperative":
        local = per_group * words
        size = ((n + per_group - 1) // per_group * local,), (local,)
    if kernel in RUN_KERNELS:
        max_errors, own_from, own_until = (0, None, None) if runs is None else runs
        # (without RUNS the kernel takes the run buffers but never writes them)
        run_hosts = list(vars(first).values()) if first is not None else [np.zeros(1, np.uint32)] * 5
        run_bufs = [device.output(a) for a in run_hosts]
        args += [np.uint32(max_errors), np.int64(-UNBOUNDED if own_from is None else own_from),
                 np.int64(UNBOUNDED if own_until is None else own_until), *run_bufs]
    items = (n + LANES - 1) // LANES if kernel == "myers_lanes" else n
    device.run(prg, kernel, args, items, "dmap-verify-kernel", size=size)
    with device.timed("dmap-transfer"):
        device.read_back(out_buf, out)
        if first is not None:
            for host, buf in zip(run_hosts, run_bufs):
                device.read_back(buf, host)
    return out, first
