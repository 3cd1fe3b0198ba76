"""Error rates: parsed exactly, each read's K, and the longest read a run maps."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dmap.approx.settings import MAX_ERRORS_LIMIT, Approximate, longest_read, parse_error_rate
from dmap.errors import DmapError


@pytest.mark.parametrize("given, value", [
    ("0.05", Fraction(1, 20)), ("5%", Fraction(1, 20)), (" 4.5% ", Fraction(9, 200)), (0.29, Fraction(29, 100)),
    (Fraction(1, 3), Fraction(1, 3)),
])
def test_rates_are_parsed_exactly(given, value):
    assert parse_error_rate(given) == value


@pytest.mark.parametrize("given", ["", "x", "5%%", "0", "1", "100%", "-0.1", "0.0000001"])
def test_bad_rates_are_refused(given):
    with pytest.raises(DmapError, match="--error-rate"):
        parse_error_rate(given)


def test_each_reads_k_is_the_floor_of_rate_times_length():
    approx = Approximate(0, False, False, None, error_rate=parse_error_rate("0.29"))
    lengths = np.array([0, 3, 4, 99, 100, 101])
    # 0.29 * 100 is 28.999... in floating point: K must be 29
    assert approx.errors_of(lengths).tolist() == [0, 0, 1, 28, 29, 29]
    assert Approximate(3, False, False, None).errors_of(lengths).tolist() == [3] * 6


@pytest.mark.parametrize("max_query_length, rate, longest, k", [
    (80, "0.05", 77, 3),  # 77 + 3 = 80; 78 + 3 > 80
    (100, "0.01", 99, 0),  # 99 + 0; 100 would have K = 1
    (512, "0.1", 329, MAX_ERRORS_LIMIT),  # K = floor(0.1 m) at most 32: m at most 329
])
def test_longest_read_fits_the_overlap_and_the_limit(max_query_length, rate, longest, k):
    assert longest_read(max_query_length, parse_error_rate(rate)) == (longest, k)
