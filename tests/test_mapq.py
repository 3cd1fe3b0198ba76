"""dmap.mapq: MAPQ from the alignments found (never from K), and the primary among equals chosen by name."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dmap.mapq import NO_SECOND, mapping_quality, name_hashes, primary_first, tie_pick
from dmap.reads import ReadFields


def test_mapping_quality():
    n_best = np.array([1, 2, 1, 1, 1, 1, 5])
    gap = np.array([NO_SECOND, NO_SECOND, 1, 2, 3, 7, 1])
    assert mapping_quality(n_best, gap).tolist() == [60, 0, 20, 40, 60, 60, 0]
    assert mapping_quality(np.array([1, 2, 3])).tolist() == [60, 0, 0]  # exact hits: all equally good


@given(st.lists(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=254),
                min_size=1, max_size=50))
def test_name_hashes_are_fnv1a_of_each_name(names):
    def fnv1a(data: bytes) -> int:
        h = 0xCBF29CE484222325
        for b in data:
            h = ((h ^ b) * 0x100000001B3) % 2**64
        return h

    fields = ReadFields.from_strings(names, ["A"] * len(names), None)
    got = name_hashes(fields.data, fields.name_off, fields.name_len)
    assert got.tolist() == [fnv1a(n.encode()) for n in names]


def test_ties_spread_over_the_copies_reproducibly():
    """Reads of a repeat with 4 copies: each copy is the primary of about a quarter of them."""
    names = [f"read{i}" for i in range(4000)]
    fields = ReadFields.from_strings(names, ["A"] * len(names), None)
    picks = tie_pick(name_hashes(fields.data, fields.name_off, fields.name_len), np.full(len(names), 4))
    counts = np.bincount(picks, minlength=4)
    assert counts.min() > 800, counts
    again = tie_pick(name_hashes(fields.data, fields.name_off, fields.name_len), np.full(len(names), 4))
    assert np.array_equal(picks, again)
    assert tie_pick(np.array([123], dtype=np.uint64), np.array([1])).tolist() == [0]


def test_primary_first():
    assert primary_first(np.array([0, 1, 2, 3]), np.full(4, 2)).tolist() == [1, 2, 0, 3]
    assert primary_first(np.array([0, 1]), np.zeros(2, dtype=np.int64)).tolist() == [0, 1]
