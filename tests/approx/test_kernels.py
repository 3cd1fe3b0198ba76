"""The verification kernels against plain dynamic programming."""

from __future__ import annotations

import numpy as np
import pytest

from dmap.alphabet import NO_MATCH
from dmap.approx.alignments import best_of_runs, runs_from_first
from dmap.approx.candidates import Regions
from dmap.approx.patterns import match_masks, oriented_patterns, pattern_matrix, pattern_rows, upload_patterns
from dmap.approx.traceback import OP_INS, OP_MATCH, PAD, cigar_and_md, traceback, traceback_device
from dmap.approx.verify import MYERS_KERNELS, RUN_KERNELS, myers_distances, myers_runs, region_offsets
from dmap.opencl.device import BlockText
from dmap.testing.approx import edit_distance, semiglobal_row

LENGTHS = list(range(1, 131)) + [191, 192, 255, 256, 257, 300, 383, 384, 385, 511, 512]


def mutated(rng, pattern: np.ndarray, sigma: int, n_edits: int) -> np.ndarray:
    s = list(pattern.tolist())
    for _ in range(n_edits):
        at = int(rng.integers(0, len(s) + 1))
        kind = int(rng.integers(3))
        if kind == 0 and at < len(s):
            s[at] = int(rng.integers(0, sigma + 1))  # sigma: a symbol that matches nothing
        elif kind == 1:
            s.insert(at, int(rng.integers(0, sigma)))
        elif at < len(s) and len(s) > 1:
            del s[at]
    return np.array(s, dtype=np.uint8)


def pairs(rng, sigma: int):
    """(pattern, text) pairs: every length, texts holding a mutated copy amid noise."""
    for m in LENGTHS:
        pattern = rng.integers(0, sigma, size=m).astype(np.uint8)
        if m % 7 == 3:
            pattern[rng.integers(0, m)] = NO_MATCH
        core = mutated(rng, pattern, sigma, max(1, m // 12))
        text = np.concatenate([rng.integers(0, sigma + 1, size=int(rng.integers(0, 20))), core,
                               rng.integers(0, sigma + 1, size=int(rng.integers(0, 20)))]).astype(np.uint8)
        yield pattern, text


@pytest.mark.parametrize("kernel", MYERS_KERNELS)
@pytest.mark.parametrize("sigma", [4, 20, 60])
def test_myers_kernel_equals_dp_on_every_length(device, sigma, kernel):
    rng = np.random.default_rng(sigma)
    cases = list(pairs(rng, sigma))
    lengths = np.array([p.size for p, _ in cases])
    codes = np.concatenate([p for p, _ in cases])
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    patterns = pattern_matrix(codes, offsets, lengths, 1)
    text = np.concatenate([t for _, t in cases])
    starts = np.r_[0, np.cumsum([t.size for _, t in cases])[:-1]]
    region_length = np.array([t.size for _, t in cases])
    got = myers_distances(device, device.upload(text), upload_patterns(device, patterns, lengths, sigma), sigma,
                          Regions(np.arange(len(cases)), starts, region_length), kernel=kernel)
    for k, (p, t) in enumerate(cases):
        expected = np.minimum(semiglobal_row(p, t, sigma), 255)
        assert np.array_equal(got[starts[k] : starts[k] + t.size], expected), f"pattern length {p.size}"


@pytest.mark.parametrize("kernel", MYERS_KERNELS)
def test_myers_kernels_on_mixed_regions(device, kernel):
    """Regions as verification makes them: several per pattern, patterns of one to three
    words side by side (the lanes of myers_lanes mix them), regions of length 0 and of
    hundreds of symbols, a count that is no multiple of the lanes.  Every end is the DP's."""
    rng = np.random.default_rng(5)
    sigma = 4
    lengths = rng.integers(1, 190, 37)
    codes = rng.integers(0, sigma, int(lengths.sum())).astype(np.uint8)
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    patterns = pattern_matrix(codes, offsets, lengths, 1)
    text = rng.integers(0, sigma + 1, 5000).astype(np.uint8)
    n = 203
    pattern = np.sort(rng.integers(0, lengths.size, n))
    length = np.where(rng.random(n) < 0.1, 0, rng.integers(1, 400, n))
    start = rng.integers(0, text.size - length)
    got = myers_distances(device, device.upload(text), upload_patterns(device, patterns, lengths, sigma), sigma,
                          Regions(pattern, start, length), kernel=kernel)
    at = 0
    for r in range(n):
        p = codes[offsets[pattern[r]] : offsets[pattern[r]] + lengths[pattern[r]]]
        expected = np.minimum(semiglobal_row(p, text[start[r] : start[r] + length[r]], sigma), 255)
        assert np.array_equal(got[at : at + length[r]], expected), f"region {r}"
        at += length[r]


@pytest.mark.parametrize("kernel", RUN_KERNELS)
@pytest.mark.parametrize("max_errors", [0, 2, 5])
def test_kernel_finds_the_runs_best_of_runs_finds(device, max_errors, kernel):
    """A kernel's own runs, completed by runs_from_first, equal best_of_runs on the distances,
    for every owned range (none, either side, both, empty), on text of short tandem repeats
    (regions with many runs) and random text (most with one or none)."""
    rng = np.random.default_rng(max_errors)
    sigma = 4
    lengths = rng.integers(3, 150, 41)
    codes = rng.integers(0, sigma, int(lengths.sum())).astype(np.uint8)
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    pattern_codes = [codes[o : o + m] for o, m in zip(offsets, lengths)]
    unit = rng.integers(0, sigma, 3).astype(np.uint8)
    text = np.concatenate([np.tile(unit, 700), rng.integers(0, sigma + 1, 3000).astype(np.uint8)])
    n = 301
    pattern = np.sort(rng.integers(0, lengths.size, n))
    length = np.where(rng.random(n) < 0.05, 0, rng.integers(1, 300, n))
    start = rng.integers(0, text.size - length)
    for r in rng.choice(n, 60, replace=False):  # a copy of the pattern, or of the repeat, in the region
        p = pattern_codes[pattern[r]]
        if length[r] >= p.size and start[r] >= 2100:
            text[start[r] : start[r] + p.size] = p
    for r in range(n):  # short repeats matched by short patterns
        if r % 5 == 0:
            pattern_codes[pattern[r]][:] = np.resize(unit, pattern_codes[pattern[r]].size)
    codes = np.concatenate(pattern_codes)
    patterns = upload_patterns(device, pattern_matrix(codes, offsets, lengths, 1), lengths, sigma)
    regions = Regions(pattern, start, length)
    text_buffer = device.upload(text)
    dist = myers_distances(device, text_buffer, patterns, sigma, regions)
    at = region_offsets(length)
    for own_from, own_until in [(None, None), (1000, None), (None, 4000), (500, 2500), (3000, 3000)]:
        expected = best_of_runs(dist, regions, lengths, max_errors, own_from, own_until)
        first = myers_runs(device, text_buffer, patterns, sigma, regions, max_errors, own_from, own_until, kernel)
        got = runs_from_first(first, regions, lengths, max_errors, own_from, own_until, lambda which: np.concatenate(
            [dist[at[r] : at[r] + length[r]] for r in which]))
        assert got[5] == expected[5]
        for a, b in zip(got[:5], expected[:5]):
            assert np.array_equal(a, b)
        if own_from is None and own_until is None:  # both ways were taken
            assert (first.count > 1).any() and (first.count == 1).any()


@pytest.fixture
def poisoned(device, monkeypatch):
    """The device, its :meth:`~dmap.opencl.device.Device.buffer` filled with 0xA5 bytes: a pooled
    buffer holds an earlier task's bytes, so a kernel must write all that it reads back."""
    fresh = type(device).buffer

    def buffer(self, nbytes):
        made = fresh(self, nbytes)
        self.cl.enqueue_copy(self.queue, made, np.full(made.size, 0xA5, dtype=np.uint8))
        return made

    monkeypatch.setattr(type(device), "buffer", buffer)
    return device


@pytest.mark.parametrize("sigma, n_strands", [(4, 2), (4, 1), (20, 1)], ids=["dna", "one-strand", "protein"])
def test_patterns_kernel_equals_numpy(poisoned, sigma, n_strands):
    """Rows and match masks built on the device are pattern_rows' and match_masks', for reads of
    every length up to two words, symbols that match nothing, and any subset of (read, strand)."""
    device = poisoned
    rng = np.random.default_rng(sigma + n_strands)
    lengths = rng.integers(1, 140, 300)
    codes = rng.integers(0, sigma, int(lengths.sum())).astype(np.uint8)
    codes[rng.random(codes.size) < 0.02] = NO_MATCH
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    for which in (np.arange(lengths.size * n_strands), np.sort(rng.choice(lengths.size * n_strands, 77, False)),
                  np.flatnonzero(lengths < 64)[:5] * n_strands):
        got = oriented_patterns(device, codes, offsets, lengths, which, n_strands, sigma)
        rows = pattern_rows(codes, offsets, lengths, which, n_strands)
        back = np.empty_like(rows)
        masks = np.empty((which.size, sigma, rows.shape[1] // 64), dtype=np.uint64)
        device.cl.enqueue_copy(device.queue, back, got.rows)
        device.cl.enqueue_copy(device.queue, masks, got.peq)
        assert np.array_equal(back, rows) and np.array_equal(masks, match_masks(rows, sigma))
        assert np.array_equal(got.lengths, lengths[which // n_strands])


def test_pattern_matrix_reverse_complement():
    codes = np.array([0, 1, 2, 3, NO_MATCH, 0, 0], dtype=np.uint8)
    p = pattern_matrix(codes, np.array([0, 5]), np.array([5, 2]), 2)
    assert p.shape == (4, 64)
    assert p[0, :5].tolist() == [0, 1, 2, 3, NO_MATCH] and p[1, :5].tolist() == [NO_MATCH, 0, 1, 2, 3]
    assert p[3, :2].tolist() == [3, 3] and (p[:, 5:] == NO_MATCH).all()
    masks = match_masks(p, 4)
    assert masks[0, 0, 0] == 1 and masks[0, 3, 0] == 8 and masks[1, 0, 0] == 2


@pytest.mark.parametrize("k, m", [(1, 70), (3, 70), (6, 70), (2, 150), (4, 37)])
def test_traceback_kernel_equals_numpy_and_alignments_are_optimal(poisoned, k, m):
    """Alignments of patterns of 37-150 symbols (16-symbol blocks and a tail), with symbols that
    match nothing in pattern and text, the last one ending at the text's end; CIGAR (M and =/X)
    and MD equal the numpy reference's (the kernels' buffers filled with other bytes first)."""
    device = poisoned
    rng = np.random.default_rng(k * 1000 + m)
    sigma, n = 4, 60
    letters = np.full(256, ord("N"), dtype=np.uint8)
    letters[:4] = np.frombuffer(b"ACGT", dtype=np.uint8)
    pats, ends, starts = [], [], []
    text = np.zeros(0, dtype=np.uint8)
    for a in range(n):
        p = rng.integers(0, sigma, size=m).astype(np.uint8)
        if a % 4 == 1:
            p[rng.integers(0, m)] = NO_MATCH
        core = mutated(rng, p, sigma, int(rng.integers(0, k + 1)))
        tail = 0 if a == n - 1 else k
        region = np.concatenate([rng.integers(0, 4, size=int(rng.integers(0, 2 * k + 1))), core,
                                 rng.integers(0, 4, size=tail)]).astype(np.uint8)
        row = semiglobal_row(p, region, sigma)
        best = int(np.argmin(row))
        if row[best] > k:
            continue
        pats.append(p)
        starts.append(text.size)
        ends.append(text.size + best)
        text = np.concatenate([text, region])
    patterns = np.stack(pats)
    end, min_start = np.array(ends), np.array(starts)
    s_np, d_np, ops_np = traceback(patterns, m, text, end, min_start, k, sigma)
    host = BlockText(text, device.upload(text), text.nbytes)
    on_device, rows = upload_patterns(device, patterns, np.full(len(pats), m), sigma), np.arange(len(pats))
    s, d, ops, cigar_strings, md_strings = traceback_device(device, host, on_device, rows, end, min_start, k, sigma,
                                                            letters)
    cigars, mds = cigar_strings.tolist(), md_strings.tolist()
    assert np.array_equal(s, s_np) and np.array_equal(d, d_np)
    # Given the distances (as Myers' kernel gives them), alignments without an indel skip the DP:
    # the same alignments.
    fast = traceback_device(device, host, on_device, rows, end, min_start, k, sigma, letters, expect=d_np)
    assert all(np.array_equal(x, y) for x, y in zip(fast[:3], (s, d, ops)))
    assert (fast[3].tolist(), fast[4].tolist()) == (cigars, mds)
    eqx = traceback_device(device, host, on_device, rows, end, min_start, k, sigma, letters, eqx=True, expect=d_np)
    assert np.array_equal(eqx[2], ops) and eqx[4].tolist() == mds
    assert np.array_equal(ops[:, : ops_np.shape[1]], ops_np) and (ops[:, ops_np.shape[1] :] == PAD).all()
    for a in range(len(pats)):
        assert s[a] >= min_start[a]
        assert edit_distance(patterns[a], text[s[a] : end[a] + 1], sigma) == d[a]
        assert d[a] == semiglobal_row(patterns[a], text[min_start[a] : end[a] + 1], sigma)[-1]
        used = ops[a][ops[a] != PAD]
        assert (used != OP_INS).sum() == end[a] + 1 - s[a]  # ops that consume the reference
        assert (used != OP_MATCH).sum() == d[a]  # the ops cost the distance
        reference = letters[text[s[a] : end[a] + 1]]
        assert (cigars[a], mds[a]) == cigar_and_md(ops[a], reference)
        assert eqx[3].tolist()[a] == cigar_and_md(ops[a], reference, eqx=True)[0]
    assert ends[-1] == text.size - 1 or d[-1] > 0  # the last alignment reaches the text's end (or ends early)


def test_cigar_and_md_conventions():
    M, X, I, D = 0, 1, 2, 3  # noqa: E741
    ops = np.array([M, M, X, X, M, D, D, X, I, M, PAD], dtype=np.uint8)
    ref = np.frombuffer(b"ACGTACGTAC", dtype=np.uint8)[:9]
    assert cigar_and_md(ops, ref) == ("5M2D1M1I1M", "2G0T1^CG0T1")
    assert cigar_and_md(ops, ref, eqx=True)[0] == "2=2X1=2D1X1I1="
