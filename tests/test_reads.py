"""FlatStrings: many strings in one byte array, against Python lists."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dmap.reads import FlatStrings

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
