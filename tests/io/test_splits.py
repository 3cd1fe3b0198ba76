"""Cutting reads files into splits that workers read on their own: wherever a file is cut, the
workers on either side find the same record boundary (FASTQ, FASTA, BGZF, URLs), and a split's
records are read from a mapping of its own pages, or from a stream once."""

import contextlib
import gzip
import mmap
import os

import numpy as np
import pytest
from helpers import examples, http_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from readfiles import (
    DNA,
    bgzf_blocks,
    chunk_records,
    dnaio_records,
    fasta_files,
    fastq_files,
    split_records,
    stream_plan,
    stream_records,
    with_extra_subfield,
    write_as,
)

from dmap.errors import InputFormatError
from dmap.format import bgzf
from dmap.io import fastx, splits
from dmap.io.fastx import iter_read_chunks


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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


def test_a_bgzf_file_whose_headers_hold_another_subfield_is_split_by_the_workers(tmp_path):
    # The SAM specification lets a block's header hold extra subfields beside BC: the file is
    # still cut by the workers (not read as a plain gzip stream), wherever the cut falls.
    text = b"".join(b"@r%d\nACGTAC\n+\nIIIIII\n" % i for i in range(40))
    path = tmp_path / "r.fq.gz"
    path.write_bytes(with_extra_subfield(bgzf_blocks(text, range(0, len(text), 97))))
    want = dnaio_records(path)
    assert splits._bgzf_ratio(str(path)) is not None
    for cut in range(os.path.getsize(path) + 1):
        assert split_records(path, [cut], blocked=True) == want, cut


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


@pytest.mark.parametrize("block", [1, 7, 64, splits.COUNT_BLOCK])
def test_newlines_counted_a_block_at_a_time(monkeypatch, block):
    # A stream's block ends after its records' 4n-th newline, found without an array of every
    # newline's offset: counted a block at a time, the offsets taken in the block that holds it.
    monkeypatch.setattr(splits, "COUNT_BLOCK", block)
    rng = np.random.default_rng(block)
    for size in (0, 1, 5, 200, 1000):
        data = rng.choice(np.frombuffer(b"AC\n", np.uint8), size)
        newlines = np.flatnonzero(data == 10)
        assert splits.newline_count(data) == newlines.size
        for m in range(1, newlines.size + 2):
            want = (int(newlines[m - 1]) + 1, m) if m <= newlines.size else (None, newlines.size)
            assert splits.after_newlines(data, m) == want, (size, m)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fastq_files(), data=st.data())
def test_a_bgzf_stream_cut_at_its_blocks_reads_every_record_once(tmp_path, text, data):
    # `bgzip -c reads.fq | dmap run INDEX -`: the client cuts the stream between blocks that end
    # anywhere (in a name, between CR and LF, one byte long, empty), and the next chunk's first record
    # is found in the blocks after each cut; every record is read once, in order, whatever the chunks.
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8), "block ends")
    chunk = data.draw(st.integers(1, 6), "reads per chunk")
    path = tmp_path / "r.fq.gz"
    path.write_bytes(bgzf_blocks(text, cuts))
    got, plan = stream_records(path.read_bytes(), chunk)
    assert got == dnaio_records(path)
    assert all(isinstance(part, splits.StreamBlocks) for part in plan)


def test_a_bgzf_fasta_stream_with_blank_lines_at_every_block_end(tmp_path):
    text = b"\xef\xbb\xbf\n\n>a x\nACGT\nAC\n>b\nGG\n>c\nG\n>d desc\nTTTT\n\n\n"
    want = [("a", "ACGTAC", None), ("b", "GG", None), ("c", "G", None), ("d", "TTTT", None)]
    for cut in range(len(text) + 1):
        assert stream_records(bgzf_blocks(text, [cut, cut + 3]), 1, fastq=False)[0] == want, cut


def test_the_client_inflates_a_block_per_chunk_of_a_bgzf_stream(tmp_path, monkeypatch):
    # htslib's bgzip writes 64 KiB blocks: the client reads their sizes from their headers and
    # trailers and inflates only the first blocks after each cut, and the chunks hold about the
    # reads asked for; the workers inflate the rest.
    import pysam

    rng = np.random.default_rng(4)
    seqs = ["".join(rng.choice(list("ACGT"), 100)) for _ in range(20_000)]
    text = "".join(f"@r{i} c\n{s}\n+\n{'I' * 100}\n" for i, s in enumerate(seqs)).encode()
    (tmp_path / "r.fq").write_bytes(text)
    pysam.tabix_compress(str(tmp_path / "r.fq"), str(tmp_path / "r.fq.gz"))
    inflated, real = [0], bgzf.inflate_block

    def counted(block):
        out = real(block)
        inflated[0] += len(out)
        return out

    monkeypatch.setattr(bgzf, "inflate_block", counted)
    plan = stream_plan((tmp_path / "r.fq.gz").read_bytes(), 4000)
    assert all(isinstance(part, splits.StreamBlocks) for part in plan) and len(plan) >= 4
    assert inflated[0] < 0.2 * len(text), (inflated[0], len(text))  # the first 64 KiB, and a block per cut
    monkeypatch.undo()
    chunks = [fastx.read_chunk(part, DNA) for part in plan]
    assert [r for c in chunks for r in zip(c.names, c.seqs)] == [(f"r{i}", s) for i, s in enumerate(seqs)]
    assert all(2000 <= len(c) <= 8000 for c in chunks[:-1]), [len(c) for c in chunks]
    # bgzip files joined with cat (the end-of-file block in the middle) are one stream still.
    got, _ = stream_records((tmp_path / "r.fq.gz").read_bytes() * 2, 3000)
    assert len(got) == 40_000


@pytest.mark.parametrize("read_size", [64, 5000, splits.STREAM_READ])
@pytest.mark.parametrize("extra", [False, True], ids=["bgzip", "extra-subfield"])
def test_a_bgzf_stream_read_in_any_size_of_read(tmp_path, monkeypatch, read_size, extra):
    # The client reads a BGZF stream into one buffer it reuses: reads smaller than a block, and
    # chunks many reads long, move the bytes held to its start or into a larger buffer. Blocks
    # whose header holds a subfield beside BC are read by the specification's rule.
    text = b"".join(b"@r%d\n%s\n+\n%s\n" % (i, b"ACGT" * (1 + i % 7), b"I" * 4 * (1 + i % 7)) for i in range(3000))
    blocks = bgzf_blocks(text, range(0, len(text), 3000))
    blocks = with_extra_subfield(blocks) if extra else blocks
    monkeypatch.setattr(splits, "STREAM_READ", read_size)
    (tmp_path / "r.fq").write_bytes(text)
    want = dnaio_records(tmp_path / "r.fq")
    for chunk in (7, 400, 5000):
        got, plan = stream_records(blocks, chunk)
        assert got == want, chunk
        assert all(isinstance(part, splits.StreamBlocks) for part in plan)


@pytest.mark.parametrize("damage, words", [
    (lambda b: b[:-40], "it ends inside the block at byte"),  # cut inside the last data block
    (lambda b: b[:-28] + b"garbage at the end of the stream" + b[-28:], "no BGZF block begins at byte"),
    (lambda b: b[:100] + bytes([b[100] ^ 0xFF]) + b[101:], "is damaged"),  # inside the first block's data
])
def test_a_damaged_bgzf_stream_is_one_clear_error(tmp_path, damage, words):
    text = b"".join(b"@r%d\nACGTACGTAC\n+\nIIIIIIIIII\n" % i for i in range(3000))
    blocks = damage(bgzf_blocks(text, range(0, len(text), 5000)))
    with pytest.raises(InputFormatError, match=words):
        stream_records(blocks, 500)


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


def test_a_worker_that_does_not_see_the_file_says_so(tmp_path):
    """The client planned the split; the worker reading it finds no file there (another host
    without the shared file system): the error names the host and what to do."""
    import socket

    record = b"@r\nACGTACGT\n+\nIIIIIIII\n"
    path = tmp_path / "r.fq"
    path.write_bytes(record * 10)
    split = next(splits.plan_input([str(path)], lambda *_: 100))
    path.unlink()
    with pytest.raises(InputFormatError) as e:
        splits.split_bytes(split)
    assert str(e.value) == (f"reads file {str(path)!r} cannot be read by the worker on host "
                            f"{socket.gethostname()!r}: No such file or directory; the workers read the reads "
                            "themselves: give a path every worker sees (a shared file system), or pipe the reads "
                            "in ('-')")


def test_a_file_that_cannot_be_mapped_is_read(tmp_path, monkeypatch):
    # Some file systems refuse mmap: the reads are then read into arrays, with the same records.
    record = b"@r\nACGTACGT\n+\nIIIIIIII\n"
    path = tmp_path / "r.fq"
    path.write_bytes(record * 5000)
    want = chunk_records(path, 1000)

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(mmap, "mmap", refuse)
    chunks = list(iter_read_chunks(path, DNA, 1000))
    assert all(c.fields.data.flags.writeable for c in chunks)
    assert [r for c in chunks for r in zip(c.names, c.seqs, c.quals)] == want


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(st.tuples(fastq_files() | fasta_files() | st.just(b""),
                                st.sampled_from(["plain", "bgzf", "gzip"])), min_size=1, max_size=6),
       chunk_size=st.integers(1, 40))
def test_chunks_span_files_and_read_every_record_once(tmp_path, files, chunk_size):
    # A file that ends before its chunk is full leaves the rest of the chunk to the next file of its
    # format: the records of every file, in order, once each, whatever the chunk size and the mix
    # of FASTQ and FASTA, plain and bgzip files (cut by the workers), gzip (read by the client) and
    # empty files.
    for old in tmp_path.glob("f*"):
        old.unlink()
    paths = [write_as(tmp_path / f"f{k}.{'fa' if text.startswith(b'>') else 'fq'}", text, kind)
             for k, (text, kind) in enumerate(files)]
    want = [r for p in paths if p.stat().st_size and dnaio_records(p) for r in dnaio_records(p)]
    got = []
    for chunk in iter_read_chunks([str(p) for p in paths], DNA, chunk_size):
        got += list(zip(chunk.names, chunk.seqs, chunk.quals or [None] * len(chunk)))
    assert got == want


@pytest.mark.parametrize("kinds", [["plain"], ["gzip"], ["plain", "bgzf", "gzip"]], ids="-".join)
def test_small_files_share_chunks(tmp_path, kinds):
    # 50 files of 10 reads in chunks of 25: 20 chunks, not 50 (a chunk per file cost its tasks and
    # kernel launches per file).  Records of one size in plain files, or streams (whose records are
    # counted), give chunks of exactly 25; bgzip's reads are estimated from its compressed bytes.
    record = b"@r%03d\nACGTACGT\n+\nIIIIIIII\n"
    paths = [str(write_as(tmp_path / f"f{k:02d}.fq", b"".join(record % (10 * k + i) for i in range(10)),
                          kinds[k % len(kinds)])) for k in range(50)]
    plan = list(splits.plan_input(paths, lambda *_: 25))
    assert [s.number for s in plan] == list(range(len(plan)))
    assert all(isinstance(s, splits.SourceGroup) and all(p.number == s.number for p in s.parts) for s in plan)
    chunks = list(iter_read_chunks(paths, DNA, 25))
    if "bgzf" in kinds:
        assert 18 <= len(chunks) <= 22 and all(15 <= len(c) <= 35 for c in chunks[:-1]), [len(c) for c in chunks]
    else:
        assert [len(c) for c in chunks] == [25] * 20
    assert [n for c in chunks for n in c.names] == [f"r{i:03d}" for i in range(500)]


def test_fastq_and_fasta_files_do_not_share_a_chunk(tmp_path):
    (tmp_path / "a.fq").write_bytes(b"@a1\nACGT\n+\nIIII\n@a2\nACGT\n+\nIIII\n")
    (tmp_path / "b.fa").write_bytes(b">b1\nACGT\n>b2\nAC\nGT\n")
    (tmp_path / "c.fq").write_bytes(b"@c1\nACGT\n+\nIIII\n")
    (tmp_path / "d.fq").write_bytes(b"@d1\nACGT\n+\nIIII\n")
    paths = [str(tmp_path / n) for n in ("a.fq", "b.fa", "c.fq", "d.fq")]
    chunks = list(iter_read_chunks(paths, DNA, 100))
    assert [(c.names, c.quals is not None) for c in chunks] == [
        (["a1", "a2"], True), (["b1", "b2"], False), (["c1", "d1"], True)]


@pytest.mark.parametrize("bad, error", [
    (b"@d1\nACGT\n+\nIIII\n@\nACGT\n+\nIIII\n", "{path!r}: a read has no name \\(the read after 'd1'\\)"),
    (b"@d1\nACGT\n+\nIII\n", "reads file {path!r} is malformed"),
])
def test_an_error_in_a_chunk_that_spans_files_names_its_file(tmp_path, bad, error):
    (tmp_path / "a.fq").write_bytes(b"@a1\nACGT\n+\nIIII\n")
    (tmp_path / "b.fq").write_bytes(bad)
    paths = [str(tmp_path / "a.fq"), str(tmp_path / "b.fq")]
    [chunk] = splits.plan_input(paths, lambda *_: 100)
    assert isinstance(chunk, splits.SourceGroup)
    with pytest.raises(InputFormatError, match=error.format(path=paths[1])):
        list(iter_read_chunks(paths, DNA, 100))


@pytest.mark.parametrize("name", ["reads.fq", "reads.fq.gz"])
def test_a_named_pipe_is_opened_once(tmp_path, monkeypatch, name):
    # A FIFO (mkfifo) is read as a stream. Opening it to look at it and closing it again would leave
    # its writer without a reader: its pending write fails (EPIPE) and the records are lost, or
    # (a name that says gzip: looked at for BGZF blocks) the next open waits for a writer gone.
    import gzip
    import threading

    record = b"@r\nACGTACGTAC\n+\nIIIIIIIIII\n"
    fifo = tmp_path / name
    os.mkfifo(fifo)
    opened, real_open = [], os.open

    def recorded_open(path, *args, **kwargs):
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", recorded_open)
    failure = []

    def feed() -> None:
        try:
            with open(fifo, "wb") as f:
                # 1.4 MB (plain): the writer waits on a full pipe
                f.write(gzip.compress(record * 50_000) if name.endswith(".gz") else record * 50_000)
        except OSError as e:
            failure.append(e)

    writer = threading.Thread(target=feed)
    writer.start()
    n = sum(len(c) for c in iter_read_chunks(str(fifo), DNA, 20_000))
    writer.join(timeout=60)
    assert failure == [] and n == 50_000
    assert str(fifo) not in opened  # read through xopen's one open, never opened by os.open to look at


def test_reads_listed_in_a_file(tmp_path, monkeypatch):
    """``@FILE`` lists reads files one per line (blank lines and ``#`` comments skipped; paths as
    written, relative to the working directory): more files than one argument holds.  A file that
    exists under the name ``@...`` is a reads file; a missing or empty list is one clear error."""
    monkeypatch.chdir(tmp_path)
    for k in range(3000):  # their comma-separated list: 3000 x 60 bytes, over Linux's 128 KiB per argument
        (tmp_path / f"{'cell' * 10}{k:05d}.fq").write_bytes(b"@r\nACGT\n+\nIIII\n")
    names = sorted(p.name for p in tmp_path.glob("cell*.fq"))
    assert len(",".join(str(tmp_path / n) for n in names)) > 128 * 1024
    (tmp_path / "cells.txt").write_text("# plate 1\n\n" + "\n".join(names) + "\n")
    assert splits.reads_paths("@cells.txt") == names
    assert sum(len(c) for c in iter_read_chunks("@cells.txt", DNA, 1000)) == 3000
    (tmp_path / "@odd.fq").write_bytes(b"@r\nACGT\n+\nIIII\n")
    assert splits.reads_paths("@odd.fq") == ["@odd.fq"]
    with pytest.raises(InputFormatError, match="list of reads files 'missing.txt' \\(given as '@missing.txt'\\) "
                                               "does not exist"):
        splits.reads_paths("@missing.txt")
    (tmp_path / "empty.txt").write_text("# nothing yet\n\n")
    with pytest.raises(InputFormatError, match="list of reads files 'empty.txt' lists no file"):
        splits.reads_paths("@empty.txt")
    (tmp_path / "typo.txt").write_text(f"{names[0]}\nnot-there.fq\n")
    with pytest.raises(InputFormatError, match="reads file 'not-there.fq' does not exist"):
        splits.reads_paths("@typo.txt")


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 7), min_size=1, max_size=8), chunk_size=st.integers(1, 30),
       gzipped=st.booleans())
def test_a_chunk_knows_the_file_of_each_read(tmp_path, sizes, chunk_size, gzipped):
    """Small files share chunks whatever their read groups, and a chunk says which file each of
    its reads came from (ReadChunk.files, whose read groups end the reads' records)."""
    for old in tmp_path.glob("g*"):
        old.unlink()
    paths = []
    for k, n in enumerate(sizes):
        text = b"".join(b"@f%dr%d\nACGT\n+\nIIII\n" % (k, i) for i in range(n))
        path = tmp_path / (f"g{k}.fq.gz" if gzipped else f"g{k}.fq")
        path.write_bytes(gzip.compress(text) if gzipped else text)
        paths.append(str(path))
    chunks = [fastx.read_chunk(c, DNA) for c in splits.plan_input(paths, lambda *_: chunk_size)]
    names = [n for c in chunks for n in c.names]
    assert names == [f"f{k}r{i}" for k, n in enumerate(sizes) for i in range(n)]
    for chunk in chunks:
        assert sum(n for _, n in chunk.files) == len(chunk)
        of_read = [path for path, n in chunk.files for _ in range(n)]
        assert [paths.index(p) for p in of_read] == [int(name[1:name.index("r")]) for name in chunk.names]
    full = [n for n in sizes if n]
    if len(full) > 1 and full[0] < chunk_size:  # a small first file shares its chunk with the next
        assert len(chunks[0].files) > 1
