"""dmap.order.lexsort against numpy's lexsort: the same order on every input."""

import numpy as np
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dmap.order import lexsort

INTS = st.sampled_from([np.int64, np.uint32, np.int8, np.uint64, np.bool_])


@st.composite
def key_sets(draw):
    n = draw(st.integers(0, 40))
    keys = []
    for _ in range(draw(st.integers(1, 5))):
        dtype = draw(INTS)
        if dtype is np.bool_:
            keys.append(draw(hnp.arrays(dtype, n)))
        else:
            info = np.iinfo(dtype)
            # Small ranges make ties (the stable order matters); wide ones overflow 63 bits.
            top = draw(st.sampled_from([1, 3, 1000, int(info.max)]))
            low = draw(st.sampled_from([0, -5])) if info.min < 0 else 0
            keys.append(draw(hnp.arrays(dtype, n, elements=st.integers(low, min(top, int(info.max))))))
    return keys


@settings(max_examples=examples(300), deadline=None)
@given(key_sets())
def test_lexsort_is_numpys_order(keys):
    assert np.array_equal(lexsort(keys), np.lexsort(keys))


def test_lexsort_packs_nearly_sorted_columns():
    rng = np.random.default_rng(0)
    read = np.sort(rng.integers(0, 50_000, 70_000))
    start = rng.integers(0, 3_100_000_000, read.size)
    dist = rng.integers(0, 4, read.size)
    strand = rng.integers(0, 2, read.size)
    keys = (strand, start, dist, read)  # 1 + 32 + 2 + 16 bits: packed
    assert np.array_equal(lexsort(keys), np.lexsort(keys))
    wide = (strand, start, dist, read * 2**20)  # 36 bits of read: numpy's lexsort
    assert np.array_equal(lexsort(wide), np.lexsort(wide))
