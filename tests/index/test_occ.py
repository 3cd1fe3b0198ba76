"""Occ layouts: numpy lookups against a plain cumulative count."""

import numpy as np
import pytest

from dmap.index.occ import build_occ, bwt_symbol, occ_lookup


@pytest.mark.parametrize("layout", ["interleaved", "bitmap"])
@pytest.mark.parametrize("sigma,rate", [(4, 1), (4, 3), (4, 4), (22, 1), (22, 2), (70, 1)])
@pytest.mark.parametrize("n", [1, 31, 32, 97, 1000])
def test_occ_lookup_matches_cumulative_count(layout, sigma, rate, n):
    rng = np.random.default_rng(n + sigma + rate)
    bwt = rng.integers(0, sigma + 1, size=n).astype(np.uint8)  # sigma = separator
    occ, shape = build_occ(bwt, layout, sigma, rate)
    i = np.arange(n + 1)
    for c in range(sigma):
        expected = np.concatenate([[0], np.cumsum(bwt == c)])
        assert (occ_lookup(occ, shape, np.full(i.size, c), i) == expected).all()
    assert (bwt_symbol(occ, shape, np.arange(n)) == bwt).all()


def test_interleaved_dna_line_is_one_cache_line():
    occ, shape = build_occ(np.zeros(10, dtype=np.uint8), "interleaved", 4, 3)
    assert shape.line_words * 4 == 64 and shape.period == 96
