"""FlatStrings: many strings in one byte array, against Python lists."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmap.reads import STRINGS, FlatStrings, words_at

texts = st.lists(st.text(alphabet="0123456789MIDX=^ACGTN", max_size=12), max_size=20)


@given(st.lists(texts, max_size=4), st.data())
def test_concat_and_take_are_list_operations(parts, data):
    joined = FlatStrings.concat([FlatStrings.of(p) for p in parts])
    flat = [x for p in parts for x in p]
    assert joined.tolist() == flat and len(joined) == len(flat)
    index = np.array(data.draw(st.lists(st.integers(0, max(len(flat) - 1, 0)), max_size=30 if flat else 0)),
                     dtype=np.int64)
    taken = joined.take(index)
    assert taken.tolist() == [flat[i] for i in index.tolist()]
    # packed: the strings lie in order with no gaps
    assert taken.data.size == int(taken.lengths.sum())
    assert np.array_equal(taken.offsets, np.concatenate([[0], np.cumsum(taken.lengths)[:-1]]).astype(np.int64)
                          if len(taken) else taken.offsets)


def test_empty():
    assert FlatStrings.concat([]).tolist() == [] and FlatStrings.empty().take(np.zeros(0, np.int64)).tolist() == []


@given(st.lists(st.text(max_size=30).map(lambda s: s.rstrip("\0")), max_size=40))
def test_to_numpy_holds_the_same_strings(strings):
    flat = FlatStrings.of(strings)
    array, fixed = flat.to_numpy(), flat.to_numpy(fixed_width=True)
    assert array.dtype == STRINGS and array.tolist() == strings
    assert fixed.dtype.kind == "U" and fixed.tolist() == strings


def test_to_numpy_replaces_bytes_that_are_not_utf8():
    flat = FlatStrings.packed(np.frombuffer(b"r1\xffr2", dtype=np.uint8), np.array([3, 2]))
    assert flat.to_numpy().tolist() == flat.to_numpy(fixed_width=True).tolist() == ["r1\ufffd", "r2"]


@given(st.data())
def test_gathered_strings_may_lie_anywhere_in_the_bytes(data):
    raw = data.draw(st.binary(min_size=1, max_size=60))
    spans = data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 8)), max_size=20))
    offsets = np.array([o for o, _ in spans], dtype=np.int64)
    lengths = np.array([min(n, len(raw) - o) for o, n in spans], dtype=np.int64)
    got = FlatStrings.gathered(np.frombuffer(raw, dtype=np.uint8), offsets, lengths)
    assert got.data.tobytes() == b"".join(raw[o: o + n] for o, n in zip(offsets.tolist(), lengths.tolist()))
    assert got.lengths.tolist() == lengths.tolist()


@pytest.mark.parametrize("dtype", ["<i4", "<u2", "<u8"])
def test_words_at_reads_a_value_at_every_byte_offset(dtype):
    rng = np.random.default_rng(3)
    width = np.dtype(dtype).itemsize
    for size in (0, width - 1, width, 37):
        data = rng.integers(0, 256, size, dtype=np.uint8)
        words = words_at(data[1:] if size else data, dtype)  # a view that starts at an odd offset too
        raw = (data[1:] if size else data).tobytes()
        assert words.tolist() == [np.frombuffer(raw[k:k + width], dtype)[0] for k in range(len(raw) - width + 1)]
