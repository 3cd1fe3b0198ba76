"""The seed search with edits (kernels/edit_seeds.cl) against its plain recursion and a DP oracle."""

import numpy as np
import pytest
from helpers import alphabet_for, examples, single_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmap.index.build import index_reverse_block
from dmap.search.edits import SeedIntervals, search_with_edits
from dmap.search.locate import locate_rows
from dmap.testing.search import edit_search_reference, edit_starts_brute_force


def oriented(seed: np.ndarray, strand: int) -> np.ndarray:
    """The pattern a query searches: the seed, or its reverse complement."""
    return seed if strand == 0 else np.where(seed < 4, 3 - seed, 255)[::-1]


def check_seeds(device, text: np.ndarray, alphabet, seeds: list[np.ndarray], max_edits: int, keep: int = 8,
                layout: str = "interleaved") -> SeedIntervals:
    """Kernel intervals == the recursion's, per query; located starts == the DP oracle's."""
    sigma = alphabet.sigma
    block = single_block(text, alphabet, layout)
    dblock = device.upload_block(block)
    reverse = device.upload_reverse(index_reverse_block(text, sigma, layout, block.shape.rate), block.shape)
    n_strands = alphabet.n_strands
    lengths = np.array([s.size for s in seeds])
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    found = search_with_edits(device, dblock, reverse, np.concatenate(seeds).astype(np.uint8), offsets, lengths,
                              n_strands, max_edits, keep=keep)
    query, rows = found.rows()
    positions = locate_rows(device, dblock, rows)
    for q in range(len(seeds) * n_strands):
        pattern = oriented(seeds[q // n_strands], q % n_strands)
        got = {(int(s), int(e)) for s, e in zip(found.sp[found.query == q], found.ep[found.query == q])}
        assert got == edit_search_reference(block, pattern, max_edits), q
        assert set(positions[query == q].tolist()) == edit_starts_brute_force(text, pattern, max_edits, sigma), q
    return found


def planted(rng, text: np.ndarray, n: int, sigma: int, max_len: int = 12) -> list[np.ndarray]:
    """Seeds copied from the text with 0-2 random edits (an N now and then), and random ones."""
    seeds = []
    for k in range(n):
        length = int(rng.integers(3, max_len + 1))
        at = int(rng.integers(0, max(1, text.size - length)))
        s = [int(c) if c < sigma else 0 for c in text[at : at + length]] or [0]
        for _ in range(int(rng.integers(0, 3))):
            j = int(rng.integers(0, len(s)))
            kind = rng.integers(3)
            if kind == 0:
                s[j] = int(rng.integers(0, sigma + 1 if k % 5 == 0 else sigma))  # sigma: an N in the read
            elif kind == 1 and len(s) > 3:
                del s[j]
            else:
                s.insert(j, int(rng.integers(0, sigma)))
        seeds.append(np.array(s, dtype=np.uint8) if k % 7 else rng.integers(0, sigma, size=length).astype(np.uint8))
    return seeds


@pytest.mark.parametrize("max_edits", [1, 2])
def test_dna_with_repeats_and_n(device, max_edits):
    rng = np.random.default_rng(max_edits)
    text = rng.integers(0, 4, size=160).astype(np.uint8)
    text[40:64] = np.tile([0, 1], 12)  # tandem repeat: many strings within reach
    text[90:94] = 4  # an N run: no string goes through it
    text[120:150] = text[10:40]  # a copy
    alphabet = alphabet_for("dna", [])
    check_seeds(device, text, alphabet, planted(rng, text, 14, 4), max_edits)


def test_overflow_runs_a_second_pass(device):
    """Queries with more intervals than the first pass keeps get all of them in the fill pass."""
    rng = np.random.default_rng(7)
    text = np.tile(np.array([0, 0, 1], dtype=np.uint8), 40)
    found = check_seeds(device, text, alphabet_for("dna", []), [np.array([0, 0, 1, 0, 0, 1, 2], np.uint8)]
                        + planted(rng, text, 4, 4), 2, keep=1)
    assert np.bincount(found.query).max() > 1


@pytest.mark.parametrize("alphabet_name", ["protein", "text"])
def test_other_alphabets_forward_only(device, alphabet_name):
    symbols = "ACDEFGHIKLMNPQRSTVWY" if alphabet_name == "protein" else "ab cd,.~EF"
    rng = np.random.default_rng(3)
    seq = "".join(rng.choice(list(symbols), size=150))
    alphabet = alphabet_for(alphabet_name, [("t", seq)])
    text = alphabet.reference_table[np.frombuffer(seq.encode(), np.uint8)]
    check_seeds(device, text, alphabet, planted(rng, text, 8, alphabet.sigma), 1, layout="bitmap")


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hypothesis_dna(device, data):
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = data.draw(st.integers(8, 120))
    text = rng.integers(0, data.draw(st.sampled_from([2, 4])), size=n).astype(np.uint8)
    if data.draw(st.booleans()):
        text[n // 3] = 4
    check_seeds(device, text, alphabet_for("dna", []), planted(rng, text, 5, 4, max_len=9),
                data.draw(st.integers(1, 2)), keep=data.draw(st.integers(1, 4)))


def test_search_refuses_zero_edits(device):
    with pytest.raises(ValueError, match="max_edits"):
        search_with_edits(device, None, None, np.zeros(1, np.uint8), np.zeros(1), np.ones(1), 1, 0)
