"""Host wrapper of ``kernels/myers.cl``: edit distance at every end position of candidate regions."""

from __future__ import annotations

import numpy as np

from ..opencl.device import Device
from .patterns import DevicePatterns

COOPERATIVE_GROUP = 64  # work-items per group of the cooperative kernel (words x regions)


def region_offsets(lengths: np.ndarray) -> np.ndarray:
    """Where each region's distances start in the flat output."""
    out = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=out[1:])
    return out


def myers_distances(
    device: Device,
    text_buffer,
    patterns: DevicePatterns,
    sigma: int,
    region_start: np.ndarray,
    region_length: np.ndarray,
    region_pattern: np.ndarray,
    cooperative: bool = False,
) -> np.ndarray:
    """Semi-global edit distance of each region's pattern at each region end.

    Parameters
    ----------
    text_buffer
        Device buffer of the text (codes) the regions index into.
    patterns
        The patterns and their match masks on the device
        (:func:`dmap.approx.patterns.oriented_patterns` or ``upload_patterns``).
    region_start, region_length, region_pattern
        Each region's first text position, length and pattern number.
    cooperative
        Run ``myers_cooperative``: one work-item per 64-bit word of a
        pattern instead of one per region (Chacón et al. (2014)'s thread-cooperative
        scheme; see docs/performance.md for where it pays).

    Returns
    -------
    numpy.ndarray
        uint8, regions back to back: entry ``j`` of region ``r`` is the least
        edit distance of the pattern to a text substring ending at
        ``region_start[r] + j`` (capped at 255).
    """
    n = region_start.size
    total = int(region_length.sum())
    out = np.empty(total, dtype=np.uint8)
    if n == 0:
        return out
    words = patterns.words
    per_group = max(1, COOPERATIVE_GROUP // words)
    prg = device.program("myers.cl", {"SIGMA": sigma, "WORDS": words, "REGIONS_PER_GROUP": per_group})
    with device.timed("dmap-transfer"):
        regions = (region_start, region_length, region_pattern, region_offsets(region_length))
        bufs = [patterns.peq, patterns.length_buffer,
                *(device.upload(np.ascontiguousarray(a, dtype=np.uint32)) for a in regions)]
    out_buf = device.output(out)
    size = None
    if cooperative:
        local = per_group * words
        size = ((n + per_group - 1) // per_group * local,), (local,)
    device.run(prg, "myers_cooperative" if cooperative else "myers", [text_buffer, *bufs, np.uint32(n), out_buf],
               n, "dmap-verify-kernel", size=size)
    with device.timed("dmap-transfer"):
        device.read_back(out_buf, out)
    return out
