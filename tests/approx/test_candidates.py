"""Candidate regions from located seed hits, against a per-hit reference."""

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from dmap.approx.candidates import candidate_regions
from dmap.approx.seeds import pigeonhole_seeds
from dmap.search.hits import BlockHits


def regions_by_hand(hits, seeds, lengths, n_strands, k, block_length, contig_offsets, contig_lengths):
    """Each hit's window [diagonal - K, diagonal + m + K), clipped to its contig and the block,
    then the windows of each (read, strand) merged where they overlap or touch, one hit at a time."""
    windows: dict[int, list[tuple[int, int]]] = {}
    for q, p in zip(hits.query.tolist(), hits.position.tolist()):
        seed, strand = divmod(q, n_strands)
        read, m = int(seeds.read[seed]), int(lengths[seeds.read[seed]])
        offset = int(seeds.offset[seed])
        if strand:
            offset = m - offset - int(seeds.length[seed])
        contig = int(np.searchsorted(contig_offsets, p + hits.start, side="right")) - 1
        lo = max(p - offset - k, contig_offsets[contig] - hits.start, 0)
        hi = min(p - offset + m + k, contig_offsets[contig] + contig_lengths[contig] - hits.start, block_length)
        windows.setdefault(read * n_strands + strand, []).append((lo, hi))
    out = []
    for pattern in sorted(windows):
        merged: list[list[int]] = []
        for lo, hi in sorted(windows[pattern]):
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        out += [(pattern, lo, hi - lo) for lo, hi in merged]
    return out


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_strands=st.sampled_from([1, 2]), k=st.integers(0, 4),
       n_contigs=st.sampled_from([1, 3, 12]), block_start=st.sampled_from([0, 700]))
def test_regions_equal_the_per_hit_reference(device, seed, n_strands, k, n_contigs, block_start):
    """Random hits of random pieces, many near each other (merging), near contig and block
    edges (clipping), on one or two strands, with one contig, a few (compared one by one)
    and more (searched); reads shorter than K get no pieces.  The numpy function and the
    device's windows (candidates.cl) both equal the reference."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 60, 30)
    seeds = pigeonhole_seeds(lengths, k)
    total = 3000
    contig_offsets = np.r_[0, np.sort(rng.choice(np.arange(1, total), n_contigs - 1, replace=False))].astype(np.int64)
    contig_lengths = np.diff(np.r_[contig_offsets, total])
    block_length = total - block_start - int(rng.integers(0, 300))
    n = int(rng.integers(1, 400)) if len(seeds) else 0
    query = rng.integers(0, max(len(seeds), 1) * n_strands, n)
    # Hits in clusters (windows that overlap) and at the block's ends.
    position = np.where(rng.random(n) < 0.5, rng.integers(0, block_length, n),
                        rng.choice([0, 5, block_length - 1, block_length // 2], n) + rng.integers(-3, 4, n))
    position = np.clip(position, 0, block_length - 1)
    hits = BlockHits(0, block_start, block_length, query.astype(np.int64), position.astype(np.uint32))
    got = candidate_regions(hits, seeds, lengths, n_strands, k, block_length, contig_offsets, contig_lengths)
    expected = regions_by_hand(hits, seeds, lengths, n_strands, k, block_length, contig_offsets, contig_lengths)
    assert list(zip(got.pattern.tolist(), got.start.tolist(), got.length.tolist())) == expected
    on_device = candidate_regions(hits, seeds, lengths, n_strands, k, block_length, contig_offsets,
                                  contig_lengths, device)
    assert all(np.array_equal(getattr(got, f), getattr(on_device, f)) for f in ("pattern", "start", "length"))


@pytest.mark.parametrize("n_strands", [1, 2])
def test_no_hits_no_regions(device, n_strands):
    seeds = pigeonhole_seeds(np.array([40, 50]), 2)
    hits = BlockHits(0, 0, 100, np.zeros(0, np.int64), np.zeros(0, np.uint32))
    assert len(candidate_regions(hits, seeds, np.array([40, 50]), n_strands, 2, 100, np.zeros(1, np.int64),
                                 np.array([100]))) == 0
    assert len(candidate_regions(hits, seeds, np.array([40, 50]), n_strands, 2, 100, np.zeros(1, np.int64),
                                 np.array([100]), device)) == 0
