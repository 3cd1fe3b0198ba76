"""The approximate mapper's oracle (:mod:`dmap.testing.approx`) against the definitions it
computes, cell by cell in plain Python: the tests of every approximate search path rest on it."""

from __future__ import annotations

import numpy as np
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from dmap.testing.approx import edit_distance, semiglobal_row

SIGMA = 3  # codes 3 and 4 stand for N and a separator: they match nothing, themselves included


def plain_edit_distance(a: list[int], b: list[int]) -> int:
    """Levenshtein's recurrence, one cell at a time."""
    d = [[i + j if i == 0 or j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            same = a[i - 1] == b[j - 1] and a[i - 1] < SIGMA
            d[i][j] = min(d[i - 1][j - 1] + (not same), d[i - 1][j] + 1, d[i][j - 1] + 1)
    return d[len(a)][len(b)]


codes = st.lists(st.integers(0, SIGMA + 1), max_size=12)


@settings(max_examples=examples(300), deadline=None)
@given(a=codes, b=codes)
def test_edit_distance_is_levenshteins(a, b):
    assert edit_distance(np.array(a, np.uint8), np.array(b, np.uint8), SIGMA) == plain_edit_distance(a, b)


@settings(max_examples=examples(300), deadline=None)
@given(pattern=codes, text=codes)
def test_semiglobal_row_is_the_least_distance_to_a_substring_ending_at_each_position(pattern, text):
    expected = [min(plain_edit_distance(pattern, text[start : end + 1]) for start in range(end + 2))
                for end in range(len(text))]
    got = semiglobal_row(np.array(pattern, np.uint8), np.array(text, np.uint8), SIGMA)
    assert got.tolist() == expected
