"""Reading paired-end input (dmap/io/pairs.py): two files or one interleaved file cut into byte
ranges, the ranges' records counted and joined into pairs, against the same files read as streams."""

import contextlib
import mmap
import re

import numpy as np
import pysam
import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from readfiles import DNA, bgzf_blocks, fasta_files, fastq_files, file_splits, write_as, write_pairs

from dmap.errors import InputFormatError
from dmap.io import pairs
from dmap.io.fastx import source_fields
from dmap.io.pairs import (
    FirstPairs,
    PairBlock,
    PairGroup,
    PairSplit,
    count_records,
    names_differ,
    plan_pair_files,
    plan_pairs,
    read_pair_chunk,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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
    split = list(plan_pairs(*paths, lambda *_: chunk, split=True))
    assert all(isinstance(s, PairSplit) for s in split)
    assert [s.number for s in split] == list(range(len(split)))
    stream = list(plan_pairs(*paths, lambda *_: chunk))  # not split: read as streams
    pairs = lambda plan: [(n, q) for b in plan for c in [read_pair_chunk(b, DNA)]  # noqa: E731
                          for n, q in zip(c.names, c.seqs)]
    assert pairs(split) == pairs(stream) == [(f"pair{i}", s) for i, (a, b) in enumerate(zip(first, second))
                                              for s in (a, b)]


def _mangled(text: bytes, how: str, at: int) -> bytes:
    """``text`` with one of its lines dropped, doubled, or a blank line before it (``at``: which)."""
    lines = text.split(b"\n")
    k = at % len(lines)
    if how == "drop":
        return b"\n".join(lines[:k] + lines[k + 1:])
    if how == "double":
        return b"\n".join(lines[:k + 1] + lines[k:])
    if how == "blank":
        return b"\n".join(lines[:k] + [b""] + lines[k:])
    return text


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fastq_files() | fasta_files(), how=st.sampled_from(["none", "drop", "double", "blank"]),
       at=st.integers(0, 200), cuts=st.lists(st.integers(0, 4000), max_size=4), blocked=st.booleans(),
       block=st.sampled_from([1, 2, 5, 64, 1 << 20]))
def test_a_byte_range_counts_the_records_its_worker_parses(tmp_path, monkeypatch, text, how, at, cuts, blocked,
                                                           block):
    """The count of a byte range's records, on which the pairs of every chunk rest, is the number
    of records the worker that maps the range parses from it, for every range that parses
    (FASTQ by its newlines, FASTA by its '>' lines, counted in blocks of any size); one that
    does not is one clear error, from the count or later from the parse."""
    monkeypatch.setattr(pairs, "COUNT_BLOCK", block)
    fastq = text.startswith(b"@")
    path = tmp_path / "reads.fq"
    text = _mangled(text, how, at)
    path.write_bytes(bgzf_blocks(text, cuts) if blocked else text)
    for split in file_splits(path, cuts, fastq, blocked):
        try:
            parsed = len(source_fields(split))
        except InputFormatError:
            with contextlib.suppress(InputFormatError):
                count_records(split)
            continue
        assert count_records(split) == parsed


@settings(max_examples=examples(300), deadline=None)
@given(base=st.binary(min_size=1, max_size=30), tail=st.binary(max_size=12),
       names=st.lists(st.tuples(*[st.integers(0, 60)] * 4, st.booleans()), max_size=8))
def test_mates_names_compare_as_bytes(base, tail, names):
    """Mates' names compared a word at a time differ exactly where their bytes differ: names of
    every length against every place in the buffer, its last bytes included, and equal names
    followed by other bytes (the buffer holds ``base`` twice, each copy followed by its own byte)."""
    data = base + b"\x01" + base + b"\x02" + tail
    size, half = len(data), len(base) + 1
    off_a = np.array([a % size for a, *_ in names], dtype=np.int64)
    len_a = np.array([x % (size - o + 1) for (_, _, x, _, _), o in zip(names, off_a)], dtype=np.int64)
    off_b, len_b = off_a.copy(), len_a.copy()
    for i, (a, b, x, y, copy) in enumerate(names):
        if copy:  # a name of the first base, and the same bytes in the second, which other bytes follow
            off_a[i] = a % (half - 1)
            off_b[i] = off_a[i] + half
            len_a[i] = len_b[i] = x % (half - off_a[i])
        else:
            off_b[i] = b % size
            len_b[i] = y % (size - off_b[i] + 1)
    got = names_differ(np.frombuffer(data, np.uint8), off_a, off_b, len_a, len_b)
    assert got.tolist() == [data[a:a + x] != data[b:b + y] for a, b, x, y in zip(off_a, off_b, len_a, len_b)]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.tuples(st.integers(0, 120), st.integers(0, 120)), min_size=1, max_size=50),
       chunk=st.integers(1, 30), crlf=st.booleans(), last_newline=st.booleans(), block=st.sampled_from([1, 7, 64]))
def test_mates_cut_from_their_ranges_by_newlines(tmp_path, monkeypatch, lengths, chunk, crlf, last_newline, block):
    """Trimmed mates (of other lengths than their first mates, even empty) put a chunk's mates a
    few records into one byte range and most of the way through the next: the records are cut
    out by counting newlines, in blocks of any size, CRLF line ends and a last line without its
    newline included, and they are the pairs the files hold."""
    monkeypatch.setattr(pairs, "COUNT_BLOCK", block)
    end = "\r\n" if crlf else "\n"
    last_newline = last_newline or 0 in lengths[-1]  # an empty last quality line needs its newline
    for m, name in ((0, "r1.fq"), (1, "r2.fq")):
        text = end.join(f"@pair{i}/{m + 1}{end}{'ACGT'[i % 4] * n[m]}{end}+{end}{'I' * n[m]}"
                        for i, n in enumerate(lengths))
        (tmp_path / name).write_bytes((text + (end if last_newline else "")).encode())
    paths = [str(tmp_path / "r1.fq"), str(tmp_path / "r2.fq")]
    reads = lambda plan: [(n, q) for b in plan for c in [read_pair_chunk(b, DNA, strict=False)]  # noqa: E731
                          for n, q in zip(c.names, c.seqs)]
    assert reads(plan_pairs(*paths, lambda *_: chunk, split=True)) == reads(plan_pairs(*paths, lambda *_: chunk)) == [
        (f"pair{i}", "ACGT"[i % 4] * n) for i, both in enumerate(lengths) for n in both]


def test_paired_files_that_cannot_be_mapped_are_read_as_streams(tmp_path, monkeypatch):
    """Where the file system refuses mmap, plan_input reads a file as a stream; so do paired
    files then, with the same pairs (not an error)."""
    first, second = ["ACGT" * 10] * 300, ["GGCC" * 9] * 300
    write_pairs(tmp_path, first, second)
    paths = [str(tmp_path / "r1.fq"), str(tmp_path / "r2.fq")]
    cut = list(plan_pairs(*paths, lambda *_: 100, split=True))

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(mmap, "mmap", refuse)
    streamed = list(plan_pairs(*paths, lambda *_: 100, split=True))
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
        list(plan_pairs(*paths, lambda *_: 7, split=True))


def test_lists_of_paired_files_map_each_pair_of_files_in_turn(tmp_path):
    """Lanes (``a_1.fq,b_1.fq.gz`` with ``a_2.fq,b_2.fq.gz``): each file of first mates with its
    file of second mates, cut by bytes or read as a stream, the chunks numbered on across them."""
    import gzip

    first, second = [f"{'ACGT' * 5}{'A' * (i % 7)}" for i in range(90)], ["GGCC" * 6] * 90
    write_pairs(tmp_path, first, second)
    lanes = []
    for name in ("r1.fq", "r2.fq"):
        lines = (tmp_path / name).read_bytes().splitlines(keepends=True)
        (tmp_path / f"a_{name}").write_bytes(b"".join(lines[:4 * 50]))
        (tmp_path / f"b_{name}.gz").write_bytes(gzip.compress(b"".join(lines[4 * 50:])))
        lanes.append([str(tmp_path / f"a_{name}"), str(tmp_path / f"b_{name}.gz")])
    plan = list(plan_pair_files(*lanes, lambda *_: 16, split=True))
    assert [b.number for b in plan] == list(range(len(plan)))
    assert {b.first.path for b in plan if isinstance(b, PairSplit)} == {lanes[0][0]}
    chunks = [read_pair_chunk(b, DNA) for b in plan]
    assert [s for c in chunks for s in c.seqs] == [s for pair in zip(first, second) for s in pair]
    with pytest.raises(InputFormatError, match="2 files of first mates but 1 of second mates"):
        list(plan_pair_files(lanes[0], lanes[1][:1], lambda *_: 16))


@pytest.mark.parametrize("interleaved", [False, True])
def test_streamed_pairs_whose_reads_grow_keep_their_mates_together(tmp_path, interleaved):
    """A stream is read a block of records at a time, its bytes guessed from its first reads: where
    later reads are longer, a block waits for its records rather than end short, which would part
    an interleaved file's mates, or give the two files' blocks different counts."""
    first = ["ACGT"[i % 4] * (20 if i < 600 else 400) for i in range(3000)]
    second = ["GC"[i % 2] * (20 if i < 1500 else 400) for i in range(3000)]
    firsts, seconds, want = write_lanes_of(tmp_path, first, second, interleaved)
    plan = list(plan_pair_files(firsts, seconds, lambda *_: 2000, split=True))
    assert all(isinstance(b, PairBlock | PairGroup) for b in plan)  # (gzip: read as a stream)
    chunks = [read_pair_chunk(b, DNA) for b in plan]
    assert [(n, s) for c in chunks for n, s in zip(c.names, c.seqs)] == want


def write_lanes_of(tmp_path, first, second, interleaved):
    """The pairs of ``first`` and ``second`` mates as gzip files (streams): of both mates in turn, or
    one of each mate; and the pairs' (name, sequence) in input order."""
    import gzip

    text = pair_records(first, second)
    want = [(f"pair{i}", s) for i, pair in enumerate(zip(first, second)) for s in pair]
    if interleaved:
        lines = [t.splitlines(keepends=True) for t in text]
        joined = b"".join(b"".join(lines[m][4 * i: 4 * i + 4]) for i in range(len(first)) for m in (0, 1))
        (tmp_path / "pairs.fq.gz").write_bytes(gzip.compress(joined))
        return [str(tmp_path / "pairs.fq.gz")], None, want
    for m in (0, 1):
        (tmp_path / f"r{m + 1}.fq.gz").write_bytes(gzip.compress(text[m]))
    return [str(tmp_path / "r1.fq.gz")], [str(tmp_path / "r2.fq.gz")], want


def pair_records(first: list[str], second: list[str], start: int = 0) -> tuple[bytes, bytes]:
    """Pairs ``start``, ``start + 1``, ... as the FASTQ text of their first and their second mates."""
    return tuple("".join(f"@pair{start + i}/{m}\n{s}\n+\n{'I' * len(s)}\n" for i, s in enumerate(mates)).encode()
                 for m, mates in ((1, first), (2, second)))


def write_lanes(tmp_path, lanes, interleaved=False):
    """Pairs of files (or interleaved files) of ``lanes``' (pairs, kind) in turn, the mates of pair i
    ``ACGT``-like sequences of their own; the paths of first and of second mates (None:
    interleaved) and the pairs' (name, sequence) of both mates in input order."""
    firsts, seconds, want, at = [], [], [], 0
    for k, (n, kind) in enumerate(lanes):
        first = ["ACGT"[i % 4] * (5 + (at + i) % 7) for i in range(n)]
        second = ["GC"[i % 2] * (3 + (at + i) % 5) for i in range(n)]
        text = pair_records(first, second, at)
        want += [(f"pair{at + i}", s) for i, pair in enumerate(zip(first, second)) for s in pair]
        if interleaved:
            lines = [t.splitlines(keepends=True) for t in text]
            joined = b"".join(b"".join(lines[m][4 * i: 4 * i + 4]) for i in range(n) for m in (0, 1))
            firsts.append(str(write_as(tmp_path / f"l{k}.fq", joined, kind)))
        else:
            firsts.append(str(write_as(tmp_path / f"l{k}_1.fq", text[0], kind)))
            seconds.append(str(write_as(tmp_path / f"l{k}_2.fq", text[1], kind)))
        at += n
    return firsts, None if interleaved else seconds, want


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lanes=st.lists(st.tuples(st.integers(0, 12), st.sampled_from(["plain", "bgzf", "gzip"])), min_size=1,
                      max_size=6),
       chunk=st.integers(2, 40), grow=st.booleans(), interleaved=st.booleans(), cut=st.booleans(),
       first_pairs=st.integers(0, 30))
def test_chunks_of_pairs_span_pairs_of_files_and_read_every_pair_once(tmp_path, lanes, chunk, grow, interleaved, cut,
                                                                      first_pairs):
    """A pair of files that ends before its chunk is full leaves the rest of the chunk to the next:
    every pair, in order, once, whatever the chunk sizes (``grow``: growing with the reads done,
    as GuidedChunks' do) and the mix of plain and bgzip files (cut by the workers, or taken
    whole), gzip (read by the client) and empty files; the chunks and their parts numbered in
    order; the first chunk holds at least ``first_pairs`` pairs (the insert size's sample), or
    all of them."""
    for old in tmp_path.glob("l*"):
        old.unlink()
    firsts, seconds, want = write_lanes(tmp_path, lanes, interleaved)
    size = (lambda done, _: chunk + done // 3) if grow else (lambda *_: chunk)
    plan = list(plan_pair_files(firsts, seconds, size, split=cut, first_pairs=first_pairs))
    assert [c.number for c in plan] == list(range(len(plan)))
    assert all(p.number == c.number for c in plan if isinstance(c, PairGroup) for p in c.parts)
    chunks = [read_pair_chunk(c, DNA) for c in plan]
    assert [(n, s) for r in chunks for n, s in zip(r.names, r.seqs)] == want
    assert not chunks or len(chunks[0]) >= min(2 * first_pairs, len(want))


@pytest.mark.parametrize("kinds", [["plain"], ["gzip"], ["plain", "bgzf", "gzip"]], ids="-".join)
def test_small_pairs_of_files_share_chunks(tmp_path, kinds):
    """50 pairs of files of 5 pairs in chunks of 20 reads: 25 chunks, not 50.  Plain files and
    streams give chunks of exactly 20 reads (a small file's records are estimated from its bytes,
    all of which its first 64 KiB hold); bgzip's from its compressed bytes."""
    firsts, seconds, want = write_lanes(tmp_path, [(5, kinds[k % len(kinds)]) for k in range(50)])
    plan = list(plan_pair_files(firsts, seconds, lambda *_: 20, split=True))
    assert all(isinstance(c, PairGroup) for c in plan)
    chunks = [read_pair_chunk(c, DNA) for c in plan]
    if "bgzf" in kinds:
        assert 20 <= len(chunks) <= 30 and all(10 <= len(c) <= 30 for c in chunks[:-1]), [len(c) for c in chunks]
    else:
        assert [len(c) for c in chunks] == [20] * 25
    assert [(n, s) for c in chunks for n, s in zip(c.names, c.seqs)] == want


def test_fastq_and_fasta_pairs_do_not_share_a_chunk(tmp_path):
    (tmp_path / "a_1.fq").write_bytes(b"@p0/1\nACGT\n+\nIIII\n")
    (tmp_path / "a_2.fq").write_bytes(b"@p0/2\nGGCC\n+\nIIII\n")
    (tmp_path / "b_1.fa").write_bytes(b">p1/1\nACGT\n")
    (tmp_path / "b_2.fa").write_bytes(b">p1/2\nGGCC\n")
    (tmp_path / "c_1.fa").write_bytes(b">p2/1\nAC\nGT\n")
    (tmp_path / "c_2.fa").write_bytes(b">p2/2\nTTTT\n")
    firsts, seconds = ([str(tmp_path / f"{x}_{m}.{e}") for x, e in (("a", "fq"), ("b", "fa"), ("c", "fa"))]
                       for m in (1, 2))
    chunks = [read_pair_chunk(c, DNA) for c in plan_pair_files(firsts, seconds, lambda *_: 100, split=True)]
    assert [(c.names, c.quals is not None) for c in chunks] == [
        (["p0", "p0"], True), (["p1", "p1", "p2", "p2"], False)]
    # The insert size's first pairs span both formats: read together, without qualities.
    plan = list(plan_pair_files(firsts, seconds, lambda *_: 100, split=True, first_pairs=3))
    assert isinstance(plan[0], FirstPairs) and len(plan) == 3
    first = read_pair_chunk(plan[0].source, DNA)
    assert first.names == ["p0", "p0", "p1", "p1", "p2", "p2"] and first.quals is None
    assert first.seqs == ["ACGT", "GGCC", "ACGT", "GGCC", "ACGT", "TTTT"]


@pytest.mark.parametrize("fault", ["fewer", "names", "nameless"])
def test_an_error_in_a_chunk_that_spans_pairs_of_files_names_its_files(tmp_path, fault):
    """Small files are taken whole, their records not counted before a worker reads them: the
    worker checks the mates, and its error names the files of the part at fault."""
    firsts, seconds, _ = write_lanes(tmp_path, [(3, "plain"), (3, "plain")])
    text = open(seconds[1], "rb").read()
    if fault == "fewer":
        open(seconds[1], "wb").write(text[: text.index(b"@pair5")])
        error = f"reads file {seconds[1]!r} has fewer records than its mate file"
    elif fault == "names":
        open(seconds[1], "wb").write(text.replace(b"@pair4/2", b"@other/2"))
        error = f"reads files {firsts[1]!r} and {seconds[1]!r}: the mates 'pair4/1' and 'other/2'"
    else:
        open(seconds[1], "wb").write(text.replace(b"@pair4/2", b"@"))
        error = f"reads file {seconds[1]!r}: a read has no name (the read after 'pair3/2')"
    [chunk] = plan_pair_files(firsts, seconds, lambda *_: 100, split=True)
    assert isinstance(chunk, PairGroup)
    with pytest.raises(InputFormatError, match=re.escape(error)):
        read_pair_chunk(chunk, DNA)


@pytest.mark.parametrize("first_pairs", [0, 100], ids=["taken whole", "counted"])
@pytest.mark.parametrize("empty", ["l1_1.fq", "l1_2.fq"])
def test_a_pair_of_files_with_one_file_empty_is_one_clear_error(tmp_path, empty, first_pairs):
    """One file of a pair empty, the other not (a truncated download): the error names the empty
    file, whether its pair of files is counted while planning or taken whole and checked by its
    worker."""
    firsts, seconds, _ = write_lanes(tmp_path, [(3, "plain"), (3, "plain"), (3, "plain")])
    (tmp_path / empty).write_bytes(b"")
    with pytest.raises(InputFormatError, match=re.escape(f"reads file {str(tmp_path / empty)!r} has fewer records")):
        for chunk in plan_pair_files(firsts, seconds, lambda *_: 100, split=True, first_pairs=first_pairs):
            read_pair_chunk(chunk, DNA)


@pytest.mark.parametrize("kind", ["plain", "gzip"])
def test_mates_in_fastq_and_fasta_are_one_clear_error(tmp_path, kind):
    """First mates as FASTQ and second mates as FASTA: a chunk's records have qualities or none,
    so this is one error line naming both files, cut by the workers or read as streams."""
    first = write_as(tmp_path / "r1.fq", b"@p0/1\nACGT\n+\nIIII\n@p1/1\nACGA\n+\nIIII\n", kind)
    second = write_as(tmp_path / "r2.fa", b">p0/2\nGGCC\n>p1/2\nGGCA\n", kind)
    with pytest.raises(InputFormatError, match=re.escape(f"reads files {str(first)!r} (FASTQ) and {str(second)!r} "
                                                         "(FASTA) hold the two mates")):
        list(plan_pairs(str(first), str(second), lambda *_: 100, split=True))


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 5), min_size=1, max_size=6), chunk=st.integers(2, 30), cut=st.booleans(),
       interleaved=st.booleans())
def test_a_chunk_of_pairs_knows_the_file_of_each_read(tmp_path, sizes, chunk, cut, interleaved):
    """Pairs of files share chunks whatever their read groups, and a chunk says which pair of
    files each read came from (ReadChunk.files: the first mates' file), read joined or part by part."""
    for old in tmp_path.glob("l*"):
        old.unlink()
    firsts, seconds, want = write_lanes(tmp_path, [(n, "plain" if cut else "gzip") for n in sizes], interleaved)
    chunks = [read_pair_chunk(c, DNA) for c in plan_pair_files(firsts, seconds, lambda *_: chunk, split=cut)]
    assert [(n, s) for r in chunks for n, s in zip(r.names, r.seqs)] == want
    lane = {f"pair{sum(sizes[:k]) + i}": k for k, n in enumerate(sizes) for i in range(n)}
    for r in chunks:
        assert sum(n for _, n in r.files) == len(r)
        assert [firsts.index(p) for p, n in r.files for _ in range(n)] == [lane[name] for name in r.names]
