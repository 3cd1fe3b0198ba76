"""Alphabets' byte-to-code tables, and the lookup that applies them two bytes at a time."""

import re

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from dmap.alphabet import INVALID, Alphabet, get_alphabet, translate
from dmap.errors import InputFormatError
from dmap.io.fastx import encode_reference

ALPHABETS = [get_alphabet("dna"), get_alphabet("protein"), Alphabet.for_text(b"abcdefghij ,.ABC")]
TABLES = [t for a in ALPHABETS for t in (a.read_table, a.reference_table)]


@settings(max_examples=examples(200), deadline=None)
@given(data=st.binary(max_size=300), table=st.sampled_from(TABLES), start=st.integers(0, 1), rows=st.integers(1, 3))
def test_translate_is_the_table_lookup(data, table, start, rows):
    """Every length (odd ones end in a byte looked up alone), a start at an odd address, 2-D."""
    raw = np.frombuffer(data, dtype=np.uint8)[start:]
    assert np.array_equal(translate(table, raw), table[raw])
    assert np.array_equal(translate(table, raw[::-1]), table[raw[::-1]])
    block = np.resize(raw, (rows, raw.size)) if raw.size else raw.reshape(rows, 0)
    assert np.array_equal(translate(table, block), table[block])


def test_translate_every_byte_pair():
    table = get_alphabet("dna").read_table
    pairs = np.arange(1 << 16, dtype=np.uint16).view(np.uint8)
    assert np.array_equal(translate(table, pairs), table[pairs])


@pytest.mark.parametrize("alphabet", ALPHABETS, ids=lambda a: a.name)
def test_a_reference_symbol_outside_the_alphabet_is_named(alphabet):
    good = bytes(alphabet.symbols)
    assert np.array_equal(encode_reference("c", good * 3, alphabet), alphabet.reference_table[np.frombuffer(
        good * 3, np.uint8)])
    # A printable one where there is one (a text alphabet takes every printable byte).
    bad = next(b for b in [*range(ord("0"), 127), *range(256)] if alphabet.reference_table[b] == INVALID)
    with pytest.raises(InputFormatError, match=re.escape(f"contig 'c' contains the symbol {chr(bad)!r}, which")):
        encode_reference("c", good + bytes([bad, bad]) + good, alphabet)
