"""Reading paired-end input (dmap/io/pairs.py): two files or one interleaved file cut into byte
ranges, the ranges' records counted and joined into pairs, against the same files read as streams."""

import mmap

import pysam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from readfiles import DNA, write_pairs

from dmap.errors import InputFormatError
from dmap.io.pairs import PairSplit, plan_pairs, read_pair_chunk


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.tuples(st.integers(1, 300), st.integers(1, 30)), min_size=1, max_size=60),
       chunk=st.integers(1, 40), interleaved=st.booleans(), blocked=st.booleans())
def test_pairs_cut_by_bytes_are_the_pairs_read_as_streams(tmp_path, lengths, chunk, interleaved, blocked):
    """Paired files cut into byte ranges, their records counted, each chunk taking its pair numbers
    from the ranges that hold them, give the pairs in the order the streamed plan gives them,
    whatever the mates' lengths (the two files' ranges then fall at different pairs) and chunk
    sizes; also for bgzip files and one interleaved file."""
    first = ["A" * a for a, _ in lengths]
    second = ["C" * b for _, b in lengths]
    write_pairs(tmp_path, first, second, interleaved=interleaved)
    paths = [tmp_path / "pairs.fq"] if interleaved else [tmp_path / "r1.fq", tmp_path / "r2.fq"]
    if blocked:
        for path in paths:
            pysam.tabix_compress(str(path), str(path) + ".gz", force=True)
        paths = [f"{p}.gz" for p in paths]
    paths = [str(p) for p in paths] + ([None] if interleaved else [])
    split = list(plan_pairs(*paths, lambda *_: chunk, chunk_size=chunk))
    assert all(isinstance(s, PairSplit) for s in split)
    assert [s.number for s in split] == list(range(len(split)))
    stream = list(plan_pairs(*paths, lambda *_: chunk))  # no chunk_size: read as streams
    pairs = lambda plan: [(n, q) for b in plan for c in [read_pair_chunk(b, DNA)]  # noqa: E731
                          for n, q in zip(c.names, c.seqs)]
    assert pairs(split) == pairs(stream) == [(f"pair{i}", s) for i, (a, b) in enumerate(zip(first, second))
                                              for s in (a, b)]


def test_paired_files_that_cannot_be_mapped_are_read_as_streams(tmp_path, monkeypatch):
    """Where the file system refuses mmap, plan_input reads a file as a stream; so do paired
    files then, with the same pairs (not an error)."""
    first, second = ["ACGT" * 10] * 300, ["GGCC" * 9] * 300
    write_pairs(tmp_path, first, second)
    paths = [str(tmp_path / "r1.fq"), str(tmp_path / "r2.fq")]
    cut = list(plan_pairs(*paths, lambda *_: 100, chunk_size=100))

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(mmap, "mmap", refuse)
    streamed = list(plan_pairs(*paths, lambda *_: 100, chunk_size=100))
    assert all(isinstance(b, PairSplit) for b in cut) and not any(isinstance(b, PairSplit) for b in streamed)
    pairs = lambda plan: [n for b in plan for n in read_pair_chunk(b, DNA).names]  # noqa: E731
    assert pairs(streamed) == [f"pair{i // 2}" for i in range(600)]


@pytest.mark.parametrize("name", ["r1.fq", "r2.fq", "pairs.fq"])
def test_pairs_cut_by_bytes_check_the_counts(tmp_path, name):
    """A file of two with a record less, or an interleaved file with an odd number: one clear error."""
    first, second = ["ACGT" * 10] * 50, ["GGCC" * 9] * 50
    interleaved = name == "pairs.fq"
    write_pairs(tmp_path, first, second, interleaved=interleaved)
    text = (tmp_path / name).read_text().splitlines(keepends=True)
    (tmp_path / name).write_text("".join(text[:-4]))  # one record less
    paths = [str(tmp_path / "pairs.fq"), None] if interleaved else [str(tmp_path / "r1.fq"), str(tmp_path / "r2.fq")]
    words = "odd number of records" if interleaved else f"{name}' has fewer records than its mate file"
    with pytest.raises(InputFormatError, match=words):
        list(plan_pairs(*paths, lambda *_: 7, chunk_size=7))


def test_lists_of_paired_files_map_each_pair_of_files_in_turn(tmp_path):
    """Lanes (``a_1.fq,b_1.fq.gz`` with ``a_2.fq,b_2.fq.gz``): each file of first mates with its
    file of second mates, cut by bytes or read as a stream, the chunks numbered on across them."""
    import gzip

    from dmap.io.pairs import plan_pair_files

    first, second = [f"{'ACGT' * 5}{'A' * (i % 7)}" for i in range(90)], ["GGCC" * 6] * 90
    write_pairs(tmp_path, first, second)
    lanes = []
    for name in ("r1.fq", "r2.fq"):
        lines = (tmp_path / name).read_bytes().splitlines(keepends=True)
        (tmp_path / f"a_{name}").write_bytes(b"".join(lines[:4 * 50]))
        (tmp_path / f"b_{name}.gz").write_bytes(gzip.compress(b"".join(lines[4 * 50:])))
        lanes.append([str(tmp_path / f"a_{name}"), str(tmp_path / f"b_{name}.gz")])
    plan = list(plan_pair_files(*lanes, lambda *_: 16, chunk_size=16))
    assert [b.number for b in plan] == list(range(len(plan)))
    assert {b.first.path for b in plan if isinstance(b, PairSplit)} == {lanes[0][0]}
    chunks = [read_pair_chunk(b, DNA) for b in plan]
    assert [s for c in chunks for s in c.seqs] == [s for pair in zip(first, second) for s in pair]
    with pytest.raises(InputFormatError, match="2 files of first mates but 1 of second mates"):
        list(plan_pair_files(lanes[0], lanes[1][:1], lambda *_: 16))
