"""BGZF blocks inflated by a worker: all of a range's blocks in one call, the same bytes as block by block."""

import numpy as np
import pytest

from dmap.format import bgzf


def blocks_of(data: bytes) -> np.ndarray:
    return np.frombuffer(bgzf.compress(data) + bgzf.EOF, np.uint8)


@pytest.fixture(scope="module")
def text() -> bytes:
    rng = np.random.default_rng(7)
    reads = ["".join(rng.choice(list("ACGTN"), 1 + i % 150)) for i in range(4000)]
    return "".join(f"@r{i}\n{s}\n+\n{'I' * len(s)}\n" for i, s in enumerate(reads)).encode()


@pytest.mark.parametrize("stop", [0, 1, bgzf.BLOCK_DATA, 100_000, 10**9])
def test_blocks_inflate_in_one_call_to_what_they_inflate_to_one_by_one(text, monkeypatch, stop):
    # One call into the inflater for the whole run of blocks: a call per block takes the
    # interpreter's lock back once per block, behind every other task thread.
    data = blocks_of(text)
    calls, real = [], bgzf.gzip_members
    monkeypatch.setattr(bgzf, "gzip_members", lambda b: calls.append(len(b)) or real(b))
    parts, end = bgzf.inflate_blocks(data, min(stop, data.size))
    want, want_end = bgzf._inflate_each(data, min(stop, data.size), 0)
    assert b"".join(parts) == b"".join(want) and end == want_end
    assert len(calls) == (1 if end else 0)
    if stop >= data.size:
        assert b"".join(parts) == text and end == data.size


def test_a_damaged_block_is_named_by_its_offset(text):
    data = blocks_of(text).copy()
    starts = [0]
    while starts[-1] < data.size:
        starts.append(starts[-1] + bgzf.block_size(data, starts[-1]))
    third = starts[2]
    data[third + 40] ^= 0xFF  # inside the third block's deflate data
    with pytest.raises(ValueError, match=f"the BGZF block at byte {1000 + third} is damaged"):
        bgzf.inflate_blocks(data, data.size, base=1000)
    # Blocks before it inflate.
    parts, end = bgzf.inflate_blocks(data, third)
    assert end == third and b"".join(parts) == text[:2 * bgzf.BLOCK_DATA]


def test_a_block_cut_short_is_named_by_its_offset(text):
    data = blocks_of(text)
    second = bgzf.block_size(data, 0)
    with pytest.raises(ValueError, match=f"no whole BGZF block begins at byte {second}"):
        bgzf.inflate_blocks(data[:second + 100], second + 1)
