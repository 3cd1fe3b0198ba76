"""Merging a chunk's block hits: overlap duplicates dropped, sorted by (read, contig, position, strand)."""

import numpy as np
import pytest

from dmap.search.hits import BlockHits, merge_block_hits


@pytest.mark.parametrize("scale", [1, 2**36])  # 2**36: the key no longer fits one int64 (lexsort path)
def test_merge_equals_a_plain_sort(scale):
    rng = np.random.default_rng(scale % 97)
    contig_offsets = np.array([0, 700, 1500, 2600], dtype=np.int64) * scale
    starts, own = [0, 1000 * scale, 2000 * scale], 1000 * scale
    parts, want = [], []
    for b, start in enumerate(starts):
        query = rng.integers(0, 2 * 300, size=400)
        position = rng.integers(0, own + 50, size=400)  # some in the overlap with the next block
        parts.append(BlockHits(b, start, own, query, position.astype(np.uint64)))
        for q, p in zip(query.tolist(), position.tolist()):
            if p < own:
                g = start + p
                c = int(np.searchsorted(contig_offsets, g, side="right")) - 1
                want.append((q // 2, c, g - int(contig_offsets[c]), q % 2))
    got = merge_block_hits(parts, 300, 2, contig_offsets)
    rows = list(zip(got.read.tolist(), got.contig.tolist(), got.position.tolist(), got.strand.tolist()))
    assert rows == sorted(want)
