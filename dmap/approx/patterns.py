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
    patterns = np.arange(n * n_strands)
    return pattern_rows(codes, offsets, lengths, patterns, n_strands)


def pattern_rows(codes: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, patterns: np.ndarray,
                 n_strands: int) -> np.ndarray:
    """Rows ``patterns`` (``read * n_strands + strand``) of :func:`pattern_matrix`, made
    alone: verification needs only the (read, strand) pairs that have candidates."""
    read, reverse = patterns // n_strands, patterns % n_strands == 1
    m = lengths[read].astype(np.int32)[:, None]
    width = n_words(m.max(initial=1)) * WORD
    j = np.arange(width, dtype=np.int32)[None, :]
    # Reads back to back, then `width` NO_MATCH symbols that indices past a
    # read's end land in: no clipping pass needed.
    padded = np.concatenate([codes, np.full(width, NO_MATCH, dtype=np.uint8)])
    inside = j < m
    step = np.where(reverse, -1, 1).astype(np.int32)[:, None]
    first = (offsets[read].astype(np.int64) + np.where(reverse, lengths[read] - 1, 0)).astype(np.int32)[:, None]
    out = padded[np.where(inside, first + step * j, codes.size)]
    if reverse.any():
        rows = out[reverse]
        out[reverse] = np.where(rows < 4, 3 - rows, NO_MATCH)
    return out


def match_masks(patterns: np.ndarray, sigma: int) -> np.ndarray:
    """Myers' Peq: ``(n_patterns, sigma, words)`` uint64, bit i of symbol c set where pattern[i] == c."""
    n, width = patterns.shape
    eq = patterns[:, None, :] == np.arange(sigma, dtype=np.uint8)[None, :, None]
    return np.packbits(eq, axis=-1, bitorder="little").view("<u8").reshape(n, sigma, width // WORD)
