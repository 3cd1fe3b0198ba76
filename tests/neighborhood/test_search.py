"""The seed-and-filter kernel against a brute-force scan of every window."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmap.alphabet import NO_MATCH
from dmap.neighborhood.build import index_neighborhoods
from dmap.neighborhood.params import NeighborhoodParams
from dmap.neighborhood.search import count_matches, neighborhood_patterns, seed_and_filter, upload_neighborhood
from dmap.reads import EncodedReads
from dmap.testing.neighborhood import brute_force_matches, lookup_tables


def reads_from(rng, text: np.ndarray, sigma: int, n: int, n_strands: int) -> EncodedReads:
    """Reads copied from the text with 0-3 substitutions, some with an N, some reverse-complemented, some random."""
    reads = []
    for i in range(n):
        m = int(rng.integers(4, 45))
        at = int(rng.integers(0, text.size - m))
        r = text[at:at + m].copy() if i % 9 else rng.integers(0, sigma, m).astype(np.uint8)
        r[r >= sigma] = NO_MATCH
        for _ in range(int(rng.integers(0, 4))):
            r[rng.integers(0, m)] = rng.integers(0, sigma)
        if i % 5 == 0:
            r[rng.integers(0, m, int(rng.integers(1, 3)))] = NO_MATCH
        if n_strands == 2 and i % 2:
            r = np.where(r < 4, 3 - r, r)[::-1]
        reads.append(r.astype(np.uint8))
    lengths = np.array([r.size for r in reads], dtype=np.uint32)
    offsets = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.uint32)
    return EncodedReads(0, np.concatenate(reads), offsets, lengths)


def check(device, text, params, reads, n_strands, delta, errors, methods=("phash", "bsearch", "list")):
    patterns = neighborhood_patterns(reads.lengths, params.window, delta)
    expected = brute_force_matches(text, params, reads, patterns, errors, n_strands)
    for method in methods:
        store = index_neighborhoods(text, params) if method == "phash" else lookup_tables(text, params, method)
        dev_store = upload_neighborhood(device, store, method)
        query, position = seed_and_filter(device, dev_store, params, reads, patterns, errors, n_strands)
        got = list(zip(query.tolist(), position.tolist()))
        assert len(got) == len(set(got)), method  # no position reported twice for one query
        assert set(got) == expected, method
        counts = count_matches(device, dev_store, params, reads, patterns, errors, n_strands)
        assert counts.sum() == len(expected), method


@pytest.mark.parametrize("errors", [0, 1, 2])
@pytest.mark.parametrize("mask, ln", [("#####", 6), ("######-##", 7), ("##-#-#", 4)])
def test_dna_both_strands(device, errors, mask, ln):
    rng = np.random.default_rng(errors * 7 + ln)
    text = rng.integers(0, 4, 4000).astype(np.uint8)
    text[200:260] = np.tile([0, 1, 2], 20)  # tandem repeat
    text[1000:1100] = text[3000:3100]  # copied segment
    text[[500, 1500, 2500]] = 4  # N / contig separators
    params = NeighborhoodParams.create(4, mask.count("#"), ln, mask if "-" in mask else None, errors)
    check(device, text, params, reads_from(rng, text, 4, 60, 2), 2, 1, errors)


@pytest.mark.parametrize("sigma, name", [(22, "protein"), (40, "text")])
def test_other_alphabets(device, sigma, name):
    rng = np.random.default_rng(sigma)
    text = rng.integers(0, sigma, 3000).astype(np.uint8)
    text[100:160] = np.tile([1, 2], 30)
    text[[700, 1900]] = sigma
    for errors, ln in [(0, 5), (1, 4), (2, 3)]:
        params = NeighborhoodParams.create(sigma, 2, ln, None, errors)
        check(device, text, params, reads_from(rng, text, sigma, 40, 1), 1, 1, errors)


def test_many_hits_per_pattern_take_the_exact_pass(device):
    """A homopolymer makes one pattern hit hundreds of windows: more than a work-item keeps."""
    rng = np.random.default_rng(5)
    text = rng.integers(0, 4, 3000).astype(np.uint8)
    text[1000:1600] = 2
    params = NeighborhoodParams.create(4, 4, 4, None, 1)
    reads = EncodedReads(0, np.full(30, 2, np.uint8), np.array([0], np.uint32), np.array([30], np.uint32))
    check(device, text, params, reads, 2, 1, 1, methods=("phash",))


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), delta=st.integers(1, 4), errors=st.integers(0, 2),
       ls=st.integers(2, 6), ln=st.integers(1, 9))
def test_random_shapes_equal_brute_force(device, seed, delta, errors, ls, ln):
    rng = np.random.default_rng(seed)
    text = rng.integers(0, 4, 1500).astype(np.uint8)
    text[rng.integers(0, 1500, 5)] = 4
    params = NeighborhoodParams.create(4, ls, ln, None, errors)
    check(device, text, params, reads_from(rng, text, 4, 25, 2), 2, delta, errors, methods=("phash",))
