"""Reading reads: the numpy field splitter against dnaio, record by record, and the errors."""

import contextlib
import gzip
import mmap
import os
import re

import dnaio
import numpy as np
import pytest
from helpers import http_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmap.alphabet import get_alphabet
from dmap.errors import InputFormatError
from dmap.format import bgzf
from dmap.io import fastx, splits
from dmap.io.fastx import iter_read_chunks, split_fastq

DNA = get_alphabet("dna")


@st.composite
def fastq_files(draw):
    """FASTQ text with what real files hold: comments after the name (space or tab), '+' lines that
    repeat the name, CRLF line ends, a missing final newline, quality symbols across the range."""
    n = draw(st.integers(1, 25))
    crlf = draw(st.booleans())
    records = []
    for i in range(n):
        name = draw(st.text("abcXY019_:/.-|", min_size=1, max_size=20)) + str(i)
        comment = draw(st.sampled_from(["", " 1:N:0:ACGT", "\tBC:Z:AC", " x y"]))
        seq = draw(st.text("ACGTNacgtn", min_size=1, max_size=150))
        qual = "".join(draw(st.lists(st.sampled_from("!#+5?@I~"), min_size=len(seq), max_size=len(seq))))
        plus = "+" + (name + comment if draw(st.integers(0, 9)) == 0 else "")
        records.append([f"@{name}{comment}", seq, plus, qual])
    end = "\r\n" if crlf else "\n"
    text = end.join(end.join(r) for r in records)
    if draw(st.booleans()):
        text += end
    return text.encode()


def dnaio_records(path):
    with dnaio.open(path) as f:
        return [(r.id, r.sequence, r.qualities) for r in f]


def chunk_records(path, chunk_size, sizes=None, fastq=True):
    """Every record, in chunks of about ``chunk_size`` reads or of ``sizes`` in turn."""
    next_size = None if sizes is None else lambda done, _: sizes[len(seen) % len(sizes)]
    out, seen = [], []
    for chunk in iter_read_chunks(path, DNA, chunk_size, next_size=next_size):
        seen.append(len(chunk))
        out += list(zip(chunk.names, chunk.seqs, chunk.quals if fastq else [None] * len(chunk)))
    return out


def split_records(path, cuts, fastq=True, blocked=False):
    """Every record of the file (``blocked``: BGZF) read as the splits between ``cuts``, each read as a
    worker reads it."""
    size = os.path.getsize(path)
    with splits.open_reads(str(path)) as f:
        origin = splits._skip_head(np.frombuffer(f.read(splits.SNIFF_BYTES), np.uint8), str(path))
    first = 0 if blocked else origin
    bounds = [first] + sorted(c for c in cuts if first < c < size) + [size]
    out = []
    for k, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        chunk = fastx.read_chunk(splits.FileSplit(k, str(path), lo, hi, fastq, origin, size, blocked), DNA)
        out += list(zip(chunk.names, chunk.seqs, chunk.quals if fastq else [None] * len(chunk)))
    return out


def bgzf_blocks(text, cuts):
    """``text`` as BGZF whose blocks end at ``cuts``, as bgzip writes them (one block per 65,280 bytes)
    but with blocks as small as one byte, empty ones and the end-of-file block."""
    bounds = [0] + sorted(c for c in cuts if 0 <= c <= len(text)) + [len(text)]
    return b"".join(bgzf._block(text[a:b], 1) for a, b in zip(bounds, bounds[1:])) + bgzf.EOF


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fastq_files(), chunk_size=st.integers(1, 30), gz=st.booleans(),
       sizes=st.none() | st.lists(st.integers(1, 9), min_size=1, max_size=4))
def test_chunks_hold_what_dnaio_reads(tmp_path, text, chunk_size, gz, sizes):
    # Plain files are cut into byte ranges, gzip into blocks of whole records read in this process;
    # chunk sizes that change (as GuidedChunks makes them) change the cuts.
    path = tmp_path / ("r.fq.gz" if gz else "r.fq")
    path.write_bytes(gzip.compress(text) if gz else text)
    assert chunk_records(path, chunk_size, sizes) == dnaio_records(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fastq_files())
def test_a_split_at_any_byte_reads_every_record_once(tmp_path, text):
    # Quality lines that start with '@' or '+', '+' lines that repeat the name, CRLF, no final
    # newline: wherever a file is cut, the worker on each side finds the same record boundary.
    path = tmp_path / "r.fq"
    path.write_bytes(text)
    want = dnaio_records(path)
    for cut in range(len(text) + 1):
        assert split_records(path, [cut]) == want, cut
    assert split_records(path, range(0, len(text), 7)) == want


def test_quality_lines_that_look_like_records(tmp_path):
    # Every quality line starts with '@' and the next with '+' ('+' lines repeating the name): only
    # a check of whole records tells a name line from a quality line.
    records = [f"@r{i}\nACGT\n+r{i}\n@+@I\n" if i % 2 else f"@r{i}\nACGT\n+\n+@II\n" for i in range(12)]
    text = "".join(records).encode()
    (tmp_path / "r.fq").write_bytes(text)
    want = dnaio_records(tmp_path / "r.fq")
    for cut in range(len(text) + 1):
        assert split_records(tmp_path / "r.fq", [cut]) == want, cut


def test_fasta_split_at_any_byte(tmp_path):
    text = b"\xef\xbb\xbf\n>a x\nACGT\nAC\n>b\nGG\n>c\nG\n>d desc\nTTTT\n\n\n"
    (tmp_path / "r.fa").write_bytes(text)
    want = [("a", "ACGTAC", None), ("b", "GG", None), ("c", "G", None), ("d", "TTTT", None)]
    for cut in range(len(text) + 1):
        assert split_records(tmp_path / "r.fa", [cut], fastq=False) == want, cut
    assert chunk_records(tmp_path / "r.fa", 1, fastq=False) == want


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fastq_files(), data=st.data())
def test_a_bgzf_file_split_at_any_byte_reads_every_record_once(tmp_path, text, data):
    # Blocks that end anywhere (in a name, between CR and LF, at a record's end), a block of one byte,
    # an empty block: wherever the compressed bytes are cut, the workers on each side start at the same
    # block and find the same record in the inflated bytes.
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8), "block ends")
    path = tmp_path / "r.fq.gz"
    path.write_bytes(bgzf_blocks(text, cuts))
    want = dnaio_records(path)
    size = os.path.getsize(path)
    for cut in range(size + 1):
        assert split_records(path, [cut], blocked=True) == want, cut
    assert split_records(path, range(0, size, 11), blocked=True) == want


def test_bgzf_fasta_with_blank_lines_split_at_any_byte(tmp_path):
    text = b"\xef\xbb\xbf\n\n>a x\nACGT\nAC\n>b\nGG\n>c\nG\n>d desc\nTTTT\n\n\n"
    path = tmp_path / "r.fa.gz"
    path.write_bytes(bgzf_blocks(text, [1, 2, 4, 5, 12, 13, 20, 30]))
    want = [("a", "ACGTAC", None), ("b", "GG", None), ("c", "G", None), ("d", "TTTT", None)]
    for cut in range(os.path.getsize(path) + 1):
        assert split_records(path, [cut], fastq=False, blocked=True) == want, cut
    assert chunk_records(path, 1, fastq=False) == want


def test_bgzip_files_are_split_by_the_workers(tmp_path):
    # htslib's bgzip (through pysam) writes 64 KiB blocks; the plan cuts the compressed bytes without
    # inflating more than the first blocks, and the chunks hold about the reads asked for.
    import pysam

    rng = np.random.default_rng(3)
    seqs = ["".join(rng.choice(list("ACGT"), 100)) for _ in range(4000)]
    text = "".join(f"@r{i} c\n{s}\n+\n{'I' * 100}\n" for i, s in enumerate(seqs)).encode()
    (tmp_path / "r.fq").write_bytes(text)
    pysam.tabix_compress(str(tmp_path / "r.fq"), str(tmp_path / "r.fq.gz"))
    plan = list(splits.plan_input([str(tmp_path / "r.fq.gz")], lambda *_: 500))
    assert all(isinstance(s, splits.FileSplit) and s.bgzf for s in plan) and len(plan) > 4
    chunks = list(iter_read_chunks(tmp_path / "r.fq.gz", DNA, 500))
    assert [r for c in chunks for r in zip(c.names, c.seqs)] == [(f"r{i}", s) for i, s in enumerate(seqs)]
    assert all(250 <= len(c) <= 1000 for c in chunks[:-1]), [len(c) for c in chunks]
    # bgzip files joined with cat (the end-of-file block in the middle) are BGZF still.
    (tmp_path / "two.fq.gz").write_bytes((tmp_path / "r.fq.gz").read_bytes() * 2)
    assert len(chunk_records(tmp_path / "two.fq.gz", 300)) == 8000


@pytest.mark.parametrize("protocol", ["file", "http"])
@pytest.mark.parametrize("blocked", [False, True], ids=["plain", "bgzip"])
def test_a_url_is_cut_and_read_as_its_file_is(tmp_path, blocked, protocol):
    # A reads URL (fsspec's file://, or a local web server's http:// with byte ranges) is planned
    # from its size and first bytes, and each split fetched by byte ranges (fs.cat_file), as a
    # worker does: the same records as the local file.
    import pysam

    rng = np.random.default_rng(5)
    text = "".join(f"@r{i}\n{''.join(rng.choice(list('ACGT'), 60))}\n+\n{'+@I'[i % 3] * 60}\n"
                   for i in range(3000)).encode()
    (tmp_path / "r.fq").write_bytes(text)
    path = tmp_path / "r.fq"
    if blocked:
        pysam.tabix_compress(str(path), str(tmp_path / "r.fq.gz"))
        path = tmp_path / "r.fq.gz"
    with contextlib.ExitStack() as stack:
        base = stack.enter_context(http_server(tmp_path)) if protocol == "http" else tmp_path.as_uri()
        url = f"{base}/{path.name}"
        plan = list(splits.plan_input(splits.reads_paths(url), lambda *_: 400))
        assert len(plan) > 3 and all(isinstance(s, splits.FileSplit) and s.path == url and s.bgzf == blocked
                                     for s in plan)
        assert chunk_records(url, 400) == chunk_records(path, 400) == dnaio_records(tmp_path / "r.fq")
        with pytest.raises(InputFormatError, match="does not exist"):
            splits.reads_paths(f"{base}/missing.fq")
    with pytest.raises(InputFormatError, match="cannot be opened"):
        splits.reads_paths("nosuchprotocol://bucket/r.fq")


def test_a_server_without_byte_ranges_is_one_clear_error(tmp_path):
    (tmp_path / "r.fq").write_bytes(b"@r\nACGTACGT\n+\nIIIIIIII\n" * 5000)
    with http_server(tmp_path, ranges=False) as base:
        with pytest.raises(InputFormatError, match="does not serve byte ranges"):
            chunk_records(f"{base}/r.fq", 1000)


def test_damaged_bgzf_is_one_clear_error(tmp_path):
    # Damage past the first 64 KiB is found by the worker that inflates it, damage before by the client.
    # Random bases compress poorly: the client's look-ahead (xopen reads 1 MiB of compressed bytes) ends
    # far before the damaged block.
    seqs = np.random.default_rng(0).choice(list(b"ACGT"), (40_000, 100)).astype(np.uint8)
    text = b"".join(b"@r%d\n%s\n+\n%s\n" % (i, s.tobytes(), s.tobytes()) for i, s in enumerate(seqs))
    blocks = bgzf_blocks(text, range(0, len(text), 60_000))
    for block, error in [(100, r"is not whole BGZF: the BGZF block at byte \d+ is damaged"), (1, "is malformed")]:
        blob, at = bytearray(blocks), 0
        for _ in range(block):
            at += bgzf.block_size(blob, at)
        blob[at + 30] ^= 0xFF  # in the block's deflate data
        (tmp_path / "r.fq.gz").write_bytes(bytes(blob))
        with pytest.raises(InputFormatError, match=error):
            list(iter_read_chunks(tmp_path / "r.fq.gz", DNA, 100))
    (tmp_path / "cut.fq.gz").write_bytes(blocks[:-40])
    with pytest.raises(InputFormatError, match="is not whole BGZF: no whole BGZF block begins at byte"):
        list(iter_read_chunks(tmp_path / "cut.fq.gz", DNA, 100))


def test_a_chunk_holds_its_own_records_bytes(tmp_path):
    # A worker maps the range of its split's records and no more: the chunks in flight bound the memory.
    record = b"@r\nACGTACGT\n+\nIIIIIIII\n"
    (tmp_path / "r.fq").write_bytes(record * 1000)
    sizes = iter([7, 100, 3, 50, 201, 9, 300])
    chunks = list(iter_read_chunks(tmp_path / "r.fq", DNA, 1000, next_size=lambda *_: next(sizes, 1000)))
    assert [len(c) for c in chunks] == [7, 100, 3, 50, 201, 9, 300, 330]  # records of one size: exact
    for chunk in chunks:
        assert chunk.fields.data.size == len(chunk) * len(record)


def test_low_bytes():
    data = np.frombuffer(bytes(range(256)) * 2, np.uint8)
    expected = [i for i, b in enumerate(data) if b <= 32 or b >= 128]  # control bytes and non-ASCII
    positions, values = fastx._low_bytes(data)
    assert positions.tolist() == expected and values.tolist() == [data[i] for i in expected]


def test_plain_records_take_the_numpy_path():
    data = np.frombuffer(b"@r1 c\nACGT\n+\nIIII\n@r2\tx\nAC\n+\n!!\n", np.uint8)
    f = split_fastq(data)
    assert f is not None
    assert bytes(data[f.name_off[1]: f.name_off[1] + f.name_len[1]]) == b"r2"
    assert list(f.seq_len) == [4, 2]
    # Anything unusual is left to dnaio.
    for odd in (b"@r1\nACGT\n+r1\nIIII\n", "@r\xe9\nA\n+\nI\n".encode("latin-1"), b"@r1\nACGT\n+\nIII\n",
                b"@r1\nACGT\n+\nIIII\n\n"):
        assert split_fastq(np.frombuffer(odd, np.uint8)) is None


def test_fasta_reads(tmp_path):
    (tmp_path / "r.fa").write_text(">a x\nACGT\nAC\n>b\nGG\n")
    [chunk] = list(iter_read_chunks(tmp_path / "r.fa", DNA, 10))
    assert (chunk.names, chunk.seqs, chunk.quals) == (["a", "b"], ["ACGTAC", "GG"], None)


@pytest.mark.parametrize("bad", [
    b"@r3\nACGT\n+\nIII\n",  # quality length
    b"@r3\nACGT\n+\nIIII\n@r4\nAC",  # truncated
    b"@r3\nACGT\n+r9\nIIII\n",  # '+' line names another read
])
def test_errors_in_later_chunks_are_dnaios(tmp_path, bad):
    # A malformed record found in a later chunk is dnaio's error, with where its chunk begins.
    path = tmp_path / "r.fq"
    good = b"@r1\nACGT\n+\nIIII\n@r2\nACGT\n+\nIIII\n"
    path.write_bytes(good + bad)
    with pytest.raises(dnaio.FileFormatError) as want:
        dnaio_records(path)
    with pytest.raises(InputFormatError) as e:
        list(iter_read_chunks(path, DNA, 1))
    # The chunk holding the bad record begins at it, or at a record before it when that one's
    # end cannot be told apart from the damage; the line is counted from there.
    found = re.fullmatch(rf"reads file {re.escape(repr(str(path)))} is malformed: (.*) \(line (\d+) of the "
                         r"records from byte (\d+)\)", str(e.value), re.DOTALL)
    assert found and found[1] == want.value.message, str(e.value)
    assert want.value.line + 1 == int(found[2]) + good.count(b"\n", 0, int(found[3])), str(e.value)


def test_a_record_longer_than_the_limit_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(splits, "MAX_RECORD_BYTES", 64)
    path = tmp_path / "r.fq"
    path.write_bytes(b"@r1\nACGT\n+\nIIII\n@r2\n" + b"A" * 100 + b"\n+\n" + b"I" * 100 + b"\n")
    with pytest.raises(InputFormatError, match="holds a record over 64 bytes long"):
        list(iter_read_chunks(path, DNA, 10))
    with pytest.raises(InputFormatError, match="holds a record over 64 bytes long"):
        list(iter_read_chunks(path, DNA, 1))


@pytest.mark.parametrize("name", ["r.fq", "r.fa"])
def test_reads_from_a_pipe_are_read_once(tmp_path, name):
    # A pipe can be read only once, as '<(zcat reads.fq.gz)' gives it (/dev/fd/N): the format is told
    # from the same stream.
    text = (b"@r1 x\nACGT\n+\nIIII\n@r2\nGGCA\n+\nIIII\n" if name.endswith("fq")
            else b">r1 x\nAC\nGT\n>r2\nGGCA\n")
    (tmp_path / name).write_bytes(text)
    read_end, write_end = os.pipe()
    os.write(write_end, text)
    os.close(write_end)
    try:
        [(names, seqs, quals)] = [(c.names, c.seqs, c.quals) for c in iter_read_chunks(f"/dev/fd/{read_end}", DNA, 10)]
    finally:
        os.close(read_end)
    want = dnaio_records(tmp_path / name)
    assert (names, seqs) == ([r[0] for r in want], [r[1] for r in want])
    assert quals == ([r[2] for r in want] if name.endswith("fq") else None)


def test_unknown_symbol_names_the_read(tmp_path):
    (tmp_path / "r.fq").write_bytes(b"@r1\nACGT\n+\nIIII\n@r2\nAC7T\n+\nIIII\n")
    with pytest.raises(InputFormatError, match="read 'r2' contains the symbol '7'"):
        list(iter_read_chunks(tmp_path / "r.fq", DNA, 10))


def test_reads_that_cannot_be_searched_are_skipped_unless_strict(tmp_path):
    """Not strict: an empty read, a read too long and one with a symbol outside the alphabet
    are left out of what goes to the device, and counted; the others keep their numbers."""
    (tmp_path / "r.fq").write_bytes(b"@a\nACGT\n+\nIIII\n@e\n\n+\n\n@s\nAC7T\n+\nIIII\n"
                                    b"@l\nACGTACGTAC\n+\nIIIIIIIIII\n@j\nACJT\n+\nIIII\n")
    (chunk,) = iter_read_chunks(tmp_path / "r.fq", DNA, 10, max_length=8, strict=False)
    assert chunk.skipped.tolist() == [False, True, True, True, False]  # J is an N in DNA reads
    assert chunk.unmappable == {"empty": 1, "too long": 1, "unknown symbol": 1}
    assert chunk.searched.tolist() == [0, 4] and chunk.read_bytes().lengths.tolist() == [4, 4]
    assert len(chunk.encoded()) == 2


@pytest.mark.parametrize("gz", [False, True])
def test_a_plain_file_is_mapped_a_split_at_a_time(tmp_path, gz):
    # A regular, uncompressed file's chunks lie in the page cache (read-only mappings, each of its own
    # split's pages, so that the chunks in flight bound the memory); gzip is read into new arrays.
    record = b"@r\nACGTACGT\n+\nIIIIIIII\n"
    path = tmp_path / ("r.fq.gz" if gz else "r.fq")
    path.write_bytes(gzip.compress(record * 3000) if gz else record * 3000)
    chunks = list(iter_read_chunks(path, DNA, 1000))
    assert [len(c) for c in chunks] == [1000, 1000, 1000]
    for chunk in chunks:
        data = chunk.fields.data
        assert data.flags.writeable == gz
        if not gz:
            mapping = data.base.base.obj
            assert isinstance(mapping, mmap.mmap)
            assert len(mapping) < data.size + mmap.ALLOCATIONGRANULARITY
    assert [r for c in chunks for r in zip(c.names, c.seqs, c.quals)] == [("r", "ACGTACGT", "IIIIIIII")] * 3000


def test_a_file_cut_short_while_read_is_an_error(tmp_path):
    record = b"@r\nACGTACGT\n+\nIIIIIIII\n"
    path = tmp_path / "r.fq"
    path.write_bytes(record * 200_000)
    chunks = iter_read_chunks(path, DNA, 100_000)
    first = next(chunks)
    end = first.fields.data.size
    del first  # its pages past the new end would be gone
    os.truncate(path, end)
    with pytest.raises(InputFormatError, match="was cut short while dmap read it"):
        next(chunks)


def test_a_file_that_cannot_be_mapped_is_read(tmp_path, monkeypatch):
    # Some file systems refuse mmap: the reads are then read into arrays, with the same records.
    record = b"@r\nACGTACGT\n+\nIIIIIIII\n"
    path = tmp_path / "r.fq"
    path.write_bytes(record * 5000)
    want = chunk_records(path, 1000)

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")

    import mmap

    monkeypatch.setattr(mmap, "mmap", refuse)
    chunks = list(iter_read_chunks(path, DNA, 1000))
    assert all(c.fields.data.flags.writeable for c in chunks)
    assert [r for c in chunks for r in zip(c.names, c.seqs, c.quals)] == want
