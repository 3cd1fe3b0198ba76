"""Reads as verification patterns: a padded code matrix and Myers' match masks."""

from __future__ import annotations

import numpy as np

from ..alphabet import NO_MATCH

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
    width = n_words(lengths.max(initial=1)) * WORD
    j = np.arange(width, dtype=np.int32)
    # Reads back to back, then `width` NO_MATCH symbols that indices past a
    # read's end (or before the first read) land in: no clipping pass needed.
    padded = np.concatenate([codes, np.full(width, NO_MATCH, dtype=np.uint8)])
    pad = codes.size
    start = offsets.astype(np.int32)[:, None]
    m = lengths.astype(np.int32)[:, None]
    inside = j[None, :] < m
    out = np.empty((n, n_strands, width), dtype=np.uint8)
    out[:, 0] = padded[np.where(inside, start + j[None, :], pad)]
    if n_strands == 2:
        c = padded[np.where(inside, start + m - 1 - j[None, :], pad)]
        out[:, 1] = np.where(c < 4, 3 - c, NO_MATCH)
    return out.reshape(n * n_strands, width)


def match_masks(patterns: np.ndarray, sigma: int) -> np.ndarray:
    """Myers' Peq: ``(n_patterns, sigma, words)`` uint64, bit i of symbol c set where pattern[i] == c."""
    n, width = patterns.shape
    eq = patterns[:, None, :] == np.arange(sigma, dtype=np.uint8)[None, :, None]
    return np.packbits(eq, axis=-1, bitorder="little").view("<u8").reshape(n, sigma, width // WORD)
