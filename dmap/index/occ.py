"""Occurrence-table layouts: how ``Occ(c, i)`` (count of symbol ``c`` in
``BWT[0:i]``) is stored, built in numpy and looked up in numpy.

Both layouts are flat ``uint32`` arrays so a kernel takes one buffer; the
OpenCL lookups in ``kernels/occ.cl`` mirror :func:`occ_lookup` here.

``interleaved`` (default)
    One *line* per ``32*R`` BWT positions: ``sigma`` counts (occurrences
    before the line) followed by ``R`` 32-bit bitmap words per symbol.  One
    lookup reads one line: for DNA with R=1 a line is 8 words = 32 bytes,
    so it never straddles a 64-byte cache line.  The search is bound by
    memory latency, and this touches one line per lookup where the paper's
    layout touches two.  R=1 measured fastest (docs/performance.md).

``bitmap`` (BowMapCL 4.4.2)
    ``sigma`` rows of counts sampled every ``32*R`` positions, then ``sigma``
    rows of 1-bit-per-position bitmaps.  A lookup reads a count and up to
    ``R`` bitmap words in another part of memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LAYOUTS = ("interleaved", "bitmap")
LAYOUT_IDS = {"interleaved": 0, "bitmap": 1}


def default_rate(layout: str, sigma: int) -> int:
    """Default R: 1 (one popcount per lookup) measured fastest for both layouts."""
    return 1


def occ_bytes_per_symbol(sigma: int, rate: int) -> float:
    """Occurrence-table bytes per BWT row, either layout: sigma counts and sigma*R bitmap words per 32*R rows."""
    return 4 * sigma * (1 + rate) / (32 * rate)


@dataclass(frozen=True)
class OccShape:
    """Sizes a lookup needs (kernel arguments/defines are derived from it)."""

    layout: str
    sigma: int
    rate: int  # R: 32-bit words per symbol between counts
    n_rows: int  # BWT length (block text length + 1)

    @property
    def defines(self) -> dict[str, int]:
        """The compile-time defines of ``kernels/occ.cl`` for this table."""
        return {"SIGMA": self.sigma, "RATE": self.rate, "LAYOUT": LAYOUT_IDS[self.layout]}

    @property
    def period(self) -> int:
        """BWT positions covered by one count sample / line."""
        return 32 * self.rate

    @property
    def n_periods(self) -> int:
        # +1 so that Occ(c, n_rows) has a line/sample to read.
        return self.n_rows // self.period + 1

    @property
    def line_words(self) -> int:
        return self.sigma * (1 + self.rate)

    @property
    def n_words(self) -> int:
        """Bitmap words per symbol in the bitmap layout."""
        return self.n_periods * self.rate


def _bitmaps(bwt: np.ndarray, shape: OccShape) -> tuple[np.ndarray, np.ndarray]:
    """Per-symbol bitmaps ``(sigma, n_periods, R)`` and exclusive counts ``(sigma, n_periods)``."""
    total = shape.n_periods * shape.period
    padded = np.full(total, 255, dtype=np.uint8)
    padded[: bwt.size] = bwt
    bits = np.empty((shape.sigma, shape.n_periods, shape.rate), dtype=np.uint32)
    counts = np.empty((shape.sigma, shape.n_periods), dtype=np.uint32)
    for c in range(shape.sigma):
        eq = padded == c
        # Bit j of word w is BWT position 32*w + j (little-endian bit order).
        packed = np.packbits(eq.reshape(-1, 32), axis=1, bitorder="little")
        bits[c] = packed.view("<u4").reshape(shape.n_periods, shape.rate)
        per_period = eq.reshape(shape.n_periods, shape.period).sum(axis=1, dtype=np.uint32)
        counts[c, 0] = 0
        np.cumsum(per_period[:-1], out=counts[c, 1:])
        del eq, packed
    return bits, counts


def build_occ(bwt: np.ndarray, layout: str, sigma: int, rate: int) -> tuple[np.ndarray, OccShape]:
    """Build the flat occurrence array for a BWT given as codes.

    Codes ``>= sigma`` (sentinel, separators, never-matching symbols) are
    counted for no symbol.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown occ layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    shape = OccShape(layout, sigma, rate, int(bwt.size))
    bits, counts = _bitmaps(bwt, shape)
    if layout == "interleaved":
        lines = np.empty((shape.n_periods, shape.line_words), dtype=np.uint32)
        lines[:, :sigma] = counts.T
        lines[:, sigma:] = bits.transpose(1, 0, 2).reshape(shape.n_periods, sigma * rate)
        return lines.ravel(), shape
    return np.concatenate([counts.ravel(), bits.ravel()]), shape


_POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint32)


def _popcount32(w: np.ndarray) -> np.ndarray:
    w = w.astype(np.uint32)
    return (
        _POPCOUNT8[w & 0xFF] + _POPCOUNT8[(w >> 8) & 0xFF] + _POPCOUNT8[(w >> 16) & 0xFF] + _POPCOUNT8[w >> 24]
    )


def _low_mask(nbits: np.ndarray) -> np.ndarray:
    """Masks with the lowest ``nbits`` (0..32) bits set."""
    nb = nbits.astype(np.uint64)
    return ((np.uint64(1) << nb) - np.uint64(1)).astype(np.uint32)


def occ_lookup(occ: np.ndarray, shape: OccShape, c: np.ndarray, i: np.ndarray) -> np.ndarray:
    """Vectorised ``Occ(c, i)``: occurrences of code ``c`` in ``BWT[0:i]``.

    ``c`` must be searchable codes (< sigma).  This is the numpy twin of
    ``occ()`` in ``kernels/occ.cl``.
    """
    c = np.asarray(c, dtype=np.int64)
    i = np.asarray(i, dtype=np.int64)
    period = i // shape.period
    off = i - period * shape.period  # 0 .. 32R-1
    if shape.layout == "interleaved":
        base = period * shape.line_words
        total = occ[base + c].astype(np.uint32)
        words_at = base + shape.sigma + c * shape.rate
    else:
        total = occ[c * shape.n_periods + period].astype(np.uint32)
        words_at = shape.sigma * shape.n_periods + c * shape.n_words + period * shape.rate
    for w in range(shape.rate):
        nbits = np.clip(off - 32 * w, 0, 32)
        total = total + _popcount32(occ[words_at + w] & _low_mask(nbits))
    return total


def bwt_symbol(occ: np.ndarray, shape: OccShape, i: np.ndarray) -> np.ndarray:
    """Code of ``BWT[i]`` recovered from the bitmaps (``sigma`` if none is set)."""
    i = np.asarray(i, dtype=np.int64)
    period = i // shape.period
    off = i - period * shape.period
    word, bit = off // 32, (off % 32).astype(np.uint32)
    out = np.full(i.shape, shape.sigma, dtype=np.int64)
    for c in range(shape.sigma):
        if shape.layout == "interleaved":
            at = period * shape.line_words + shape.sigma + c * shape.rate + word
        else:
            at = shape.sigma * shape.n_periods + c * shape.n_words + period * shape.rate + word
        out[((occ[at] >> bit) & 1).astype(bool)] = c
    return out
