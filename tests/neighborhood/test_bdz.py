"""The perfect hash: collision-free on every key of every seed, absent keys rejected."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from dmap.errors import InputFormatError
from dmap.neighborhood.bdz import LOAD, build_perfect_hash, lookup
from dmap.neighborhood.build import index_neighborhoods, neighborhood_sizes, perfect_hash_of
from dmap.neighborhood.params import NeighborhoodParams, reference_windows


def repetitive_text(rng, n: int, sigma: int) -> np.ndarray:
    """Random codes with tandem repeats, a long copied segment, a homopolymer run and separators."""
    t = rng.integers(0, sigma, n).astype(np.uint8)
    t[100:400] = np.tile(rng.integers(0, sigma, 3), 100)
    t[1000:1600] = t[2000:2600]
    t[3000:3100] = 0
    t[rng.integers(0, n, 20)] = sigma  # N / contig separators
    return t


@pytest.mark.parametrize("sigma, mask, ln", [(4, "########", 7), (4, "######-##", 6), (4, "####", 16),
                                             (22, "###", 4), (60, "##", 3)])
@pytest.mark.parametrize("kind", ["random", "repetitive"])
def test_collision_free_on_every_key(sigma, mask, ln, kind):
    rng = np.random.default_rng(sigma + ln)
    text = repetitive_text(rng, 5000, sigma) if kind == "repetitive" else rng.integers(0, sigma, 5000).astype(np.uint8)
    params = NeighborhoodParams.create(sigma, mask.count("#"), ln, mask if "-" in mask else None, 1)
    arrays = index_neighborhoods(text, params)
    ph = perfect_hash_of(arrays)
    pos, seed, key = reference_windows(text, params)
    v = lookup(ph, seed, key)
    # every window's (seed, key) lands on a vertex holding that key, whose positions include the window
    assert np.array_equal(arrays["key"][v].astype(np.uint64), key)
    first = arrays["first"]
    for p, vv in zip(pos[:500].tolist(), v[:500].tolist()):
        assert p in arrays["positions"][first[vv]:first[vv + 1]]
    # distinct (seed, key) pairs get distinct vertices; every window is stored once
    pairs = np.unique(np.stack([seed, key.astype(np.int64)], axis=1), axis=0)
    assert np.unique(lookup(ph, pairs[:, 0], pairs[:, 1].astype(np.uint64))).size == len(pairs)
    assert np.array_equal(np.sort(arrays["positions"]), np.sort(pos).astype(np.uint32))
    # each seed's hypergraph has |V| >= 1.23 |E|
    n_keys = np.bincount(pairs[:, 0], minlength=params.n_seeds)
    assert (np.diff(ph.vertex_start.astype(np.int64)) >= LOAD * n_keys).all()
    sizes = neighborhood_sizes(arrays, params)
    assert sizes["offset_only"] < sizes["neighborhood_list"] <= sizes["perfect_hash"] + sizes["windows"] * 8


def test_absent_keys_are_rejected():
    rng = np.random.default_rng(3)
    text = rng.integers(0, 4, 20000).astype(np.uint8)
    params = NeighborhoodParams.create(4, 6, 8, None, 1)
    arrays = index_neighborhoods(text, params)
    ph = perfect_hash_of(arrays)
    _, seed, key = reference_windows(text, params)
    present = set(zip(seed.tolist(), key.tolist()))
    q_seed = rng.integers(0, params.n_seeds, 20000)
    q_key = rng.integers(0, 1 << 16, 20000).astype(np.uint64)
    absent = np.array([(s, k) not in present for s, k in zip(q_seed.tolist(), q_key.tolist())])
    v = lookup(ph, q_seed[absent], q_key[absent])
    stored = arrays["key"][np.maximum(v, 0)].astype(np.uint64)
    count = arrays["first"][np.maximum(v, 0) + 1] - arrays["first"][np.maximum(v, 0)]
    # the hash sends absent keys to some vertex: only the stored-key check rejects them
    assert ((v < 0) | (stored != q_key[absent]) | (count == 0)).all()


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**40)), min_size=1, max_size=300, unique=True))
def test_any_key_set_hashes_without_collisions(pairs):
    seed = np.array([s for s, _ in pairs], dtype=np.int64)
    key = np.array([k for _, k in pairs], dtype=np.uint64)
    ph, vertex = build_perfect_hash(seed, key, 6)
    assert np.array_equal(lookup(ph, seed, key), vertex)
    assert np.unique(vertex).size == vertex.size
    lo, hi = ph.vertex_start[seed].astype(np.int64), ph.vertex_start[seed + 1].astype(np.int64)
    assert ((vertex >= lo) & (vertex < hi)).all()


@pytest.mark.parametrize("kwargs, message", [
    (dict(seed_length=0, neighborhood_length=4), "--seed-length"),
    (dict(seed_length=8, neighborhood_length=4, spaced_seed="#####-##"), "'#' positions"),
    (dict(seed_length=2, neighborhood_length=4, spaced_seed="#x#"), "--spaced-seed"),
    (dict(seed_length=2, neighborhood_length=4, spaced_seed="-##"), "--spaced-seed"),
    (dict(seed_length=13, neighborhood_length=4), "shorter seed"),
    (dict(seed_length=8, neighborhood_length=33), "--neighborhood-length"),
    (dict(seed_length=8, neighborhood_length=7, max_errors=3), "--max-errors-in-neighborhood"),
])
def test_bad_parameters_are_clear_errors(kwargs, message):
    with pytest.raises(InputFormatError, match=message):
        NeighborhoodParams.create(4, **kwargs)
