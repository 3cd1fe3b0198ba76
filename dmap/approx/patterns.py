"""Reads as verification patterns: a padded code matrix and Myers' match masks.

Mapping builds them on the device (:func:`oriented_patterns`,
``kernels/patterns.cl``); :func:`pattern_rows` and :func:`match_masks` are
their numpy references, and :func:`upload_patterns` puts a host matrix on a
device for the kernels' tests and benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..alphabet import NO_MATCH

if TYPE_CHECKING:
    from ..opencl.device import Device

WORD = 64


def n_words(max_length: int) -> int:
    """64-bit words holding a pattern of ``max_length`` symbols."""
    return max(1, -(-int(max_length) // WORD))


def pattern_matrix(codes: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, n_strands: int) -> np.ndarray:
    """``(n_reads * n_strands, width)`` codes, padded with NO_MATCH.

    Pattern ``read * n_strands + strand``: strand 1 is the reverse
    complement (DNA codes 0-3; NO_MATCH stays NO_MATCH), the sequence that
    aligns to the forward reference when the read comes from the reverse
    strand.
    """
    n = lengths.size
    patterns = np.arange(n * n_strands)
    return pattern_rows(codes, offsets, lengths, patterns, n_strands)


def pattern_rows(codes: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, patterns: np.ndarray,
                 n_strands: int) -> np.ndarray:
    """Rows ``patterns`` (``read * n_strands + strand``) of :func:`pattern_matrix`, made
    alone: verification needs only the (read, strand) pairs that have candidates."""
    read, reverse = patterns // n_strands, patterns % n_strands == 1
    m = lengths[read].astype(np.int64)
    width = n_words(m.max(initial=1)) * WORD
    pad = np.full(width, NO_MATCH, dtype=np.uint8)
    # Each row is a window of the reads' codes: forward rows of the codes as they are,
    # reverse rows of the codes reversed, where read i ends at len - offset - length.
    # Whole windows are copied, then what lies past each read's end is masked.
    out = np.empty((read.size, width), dtype=np.uint8)
    first = offsets[read].astype(np.int64)
    for rows, source, starts, table in ((~reverse, codes, first, None),
                                        (reverse, codes[::-1], codes.size - first - m, _COMPLEMENT)):
        rows = np.flatnonzero(rows)
        if rows.size:
            windows = np.lib.stride_tricks.sliding_window_view(np.concatenate([source, pad]), width)
            block = windows[starts[rows]]
            out[rows] = block if table is None else table[block]
    shortest = int(m.min(initial=width))
    if shortest == int(m.max(initial=0)):  # reads of one length (the usual case): one slice
        out[:, shortest:] = NO_MATCH
    else:
        out[np.arange(width)[None, :] >= m[:, None]] = NO_MATCH
    return out


# Codes of the reverse strand: DNA 0-3 complemented, anything else matches nothing.
_COMPLEMENT = np.full(256, NO_MATCH, dtype=np.uint8)
_COMPLEMENT[:4] = np.arange(3, -1, -1)


def match_masks(patterns: np.ndarray, sigma: int) -> np.ndarray:
    """Myers' Peq: ``(n_patterns, sigma, words)`` uint64, bit i of symbol c set where pattern[i] == c."""
    n, width = patterns.shape
    out = np.empty((n, sigma, width // 8), dtype=np.uint8)
    for c in range(sigma):  # a symbol at a time: no (n, sigma, width) temporary
        out[:, c] = np.packbits(patterns == c, axis=-1, bitorder="little")
    return out.view("<u8").reshape(n, sigma, width // WORD)


@dataclass
class DevicePatterns:
    """Patterns on a device: ``rows`` (n, width) codes padded with NO_MATCH and ``peq``
    (n, sigma, width // 64) match masks, as :func:`pattern_rows` and :func:`match_masks`
    make them; ``lengths`` on the host and as ``length_buffer``."""

    rows: object
    peq: object
    lengths: np.ndarray
    length_buffer: object
    width: int

    @property
    def words(self) -> int:
        return self.width // WORD

    def __len__(self) -> int:
        return int(self.lengths.size)


def oriented_patterns(device: Device, codes: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, which: np.ndarray,
                      n_strands: int, sigma: int) -> DevicePatterns:
    """Patterns ``which`` (``read * n_strands + strand``) of reads given by ``codes``/``offsets``/``lengths``,
    made on ``device`` by ``kernels/patterns.cl``: row ``i`` is :func:`pattern_rows`' row ``i``."""
    which = np.asarray(which, dtype=np.int64)
    m = lengths[which // n_strands].astype(np.uint32)
    width = n_words(m.max(initial=1)) * WORD
    n = int(which.size)
    prg = device.program("patterns.cl", {"SIGMA": sigma, "WIDTH": width, "N_STRANDS": n_strands,
                                         "NO_MATCH": NO_MATCH})
    rows, peq = device.buffer(n * width), device.buffer(n * sigma * width // 8)
    with device.timed("dmap-transfer"):
        ins = [device.upload(np.ascontiguousarray(a, dtype=dt)) for a, dt in (
            (codes, np.uint8), (offsets, np.uint32), (lengths, np.uint32), (which, np.uint32))]
        length_buffer = device.upload(m)
    if n:
        device.run(prg, "oriented_patterns", [*ins, np.uint32(n), rows, peq], n, "dmap-verify-kernel")
    return DevicePatterns(rows, peq, m, length_buffer, width)


def upload_patterns(device: Device, patterns: np.ndarray, lengths: np.ndarray, sigma: int) -> DevicePatterns:
    """A host pattern matrix (:func:`pattern_matrix`; rows padded to whole words here) and its
    match masks on ``device``."""
    n, width = patterns.shape
    padded = np.full((n, n_words(width) * WORD), NO_MATCH, dtype=np.uint8)
    padded[:, :width] = patterns
    m = np.asarray(lengths).astype(np.uint32)
    return DevicePatterns(device.upload(padded), device.upload(match_masks(padded, sigma)), m, device.upload(m),
                          padded.shape[1])
