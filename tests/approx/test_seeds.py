"""Pigeonhole pieces and the choice of edits per seed."""

import numpy as np
import pytest

from dmap.approx.seeds import choose_seed_edits, n_pieces, pigeonhole_seeds, selective_length


@pytest.mark.parametrize("k, m, pieces", [(1, 0, 2), (3, 0, 4), (3, 1, 2), (4, 1, 3), (4, 2, 2), (2, 2, 1)])
def test_enough_pieces_that_one_has_at_most_m_edits(k, m, pieces):
    assert n_pieces(k, m) == pieces
    assert pieces * (m + 1) > k  # K edits cannot give every piece m+1


def test_pieces_tile_each_read():
    lengths = np.array([40, 3, 101, 9])
    seeds = pigeonhole_seeds(lengths, 3, 1)
    assert list(np.unique(seeds.read)) == [0, 2, 3]  # the 3-symbol read is within 3 edits of everywhere
    for r in (0, 2, 3):
        mine = seeds.read == r
        assert seeds.length[mine].sum() == lengths[r] and seeds.offset[mine][0] == 0
        assert (np.diff(seeds.offset[mine]) == seeds.length[mine][:-1]).all()
    with pytest.raises(ValueError, match="too short"):
        pigeonhole_seeds(np.array([5]), 4, 2)


def test_choice_follows_the_measured_rule():
    ecoli = selective_length(4_641_652, 4, 2)
    assert 11.5 < ecoli < 11.7
    choose = lambda k, lengths, **kw: choose_seed_edits(k, np.array(lengths), **kw).tolist()  # noqa: E731
    assert choose(3, [40] * 5, chance_length=ecoli) == [1] * 5  # exact pieces of 10 hit by chance
    assert choose(3, [100] * 5, chance_length=ecoli) == [0] * 5  # pieces of 25 are selective
    assert choose(2, [36] * 5, chance_length=ecoli) == [0] * 5  # pieces of 12: just selective
    # 100 Mbp: pieces of 13 against a chance length of 13.8 hit ~3 random places; exact pieces measured faster
    assert choose(2, [40] * 5, chance_length=selective_length(100_000_003, 4, 2)) == [0] * 5
    assert choose(3, [40, 100], chance_length=ecoli) == [1, 0]  # each read by its own length (trimmed reads)
    assert choose(0, [40], chance_length=ecoli) == [0]
    assert choose(3, [40], can_edit=False, chance_length=ecoli) == [0]  # format < 4
    assert choose(3, [40], requested=2) == [2]
    assert choose(3, [40, 5], requested=2) == [2, 0]  # a read too short for 2 pieces of 3+ takes exact pieces
    assert choose(3, [3, 0], chance_length=ecoli) == [0, 0]  # reads of at most K symbols have no seeds
    assert choose(3, [], chance_length=ecoli) == []


def test_pieces_of_each_reads_own_k_are_those_of_its_k_alone():
    """With a K per read (an error rate's), each read gets the pieces it gets with that K for all."""
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 120, size=60)
    ks = rng.integers(0, 6, size=60)
    for m in (0, 1):
        fits = choose_seed_edits(5, lengths, requested=m) == m  # reads long enough for m with K = 5
        mine = np.where(fits, lengths, 0)
        both = pigeonhole_seeds(mine, ks, m)
        for r in range(lengths.size):
            alone = pigeonhole_seeds(mine[r : r + 1], ks[r], m)
            at = both.read == r
            assert both.offset[at].tolist() == alone.offset.tolist()
            assert both.length[at].tolist() == alone.length.tolist()
