"""SAM records: the OpenCL formatter writes exactly what the Python reference writes;
the writer keeps a large output out of the page cache."""

import errno
import io
import os
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmap.alphabet import get_alphabet
from dmap.errors import OutputError
from dmap.format.sam import format_records_device, record_columns
from dmap.format.writer import PageCacheLimit, SamWriter
from dmap.mapq import mapping_quality
from dmap.reads import ReadChunk, ReadFields
from dmap.search.hits import ChunkHits
from dmap.testing.sam import format_records


def make_chunk(seqs, quals, names):
    dna = get_alphabet("dna")
    return ReadChunk(0, ReadFields.from_strings(names, seqs, quals), dna.read_table, dna.name)


@st.composite
def chunks_and_hits(draw):
    n = draw(st.integers(1, 30))
    # Empty reads and bytes SAM does not allow in SEQ ("1", "*") occur in reads written unmapped.
    seqs = draw(st.lists(st.text("ACGTNacgt", min_size=1, max_size=300) | st.sampled_from(["", "AC1T", "*"]),
                         min_size=n, max_size=n))
    names = [draw(st.text("abcXYZ0123_:/.-", min_size=1, max_size=40)) + str(i) for i in range(n)]
    with_qual = draw(st.booleans())
    quals = ["".join(draw(st.lists(st.sampled_from("!#5?IJ~"), min_size=len(s), max_size=len(s)))) for s in seqs] \
        if with_qual else None
    n_hits = draw(st.integers(0, 60))
    read = np.sort(np.array(draw(st.lists(st.integers(0, n - 1), min_size=n_hits, max_size=n_hits)), dtype=np.int64))
    hits = ChunkHits(
        read,
        np.array(draw(st.lists(st.integers(0, 1), min_size=n_hits, max_size=n_hits)), dtype=np.int8),
        np.array(draw(st.lists(st.integers(0, 2), min_size=n_hits, max_size=n_hits)), dtype=np.int64),
        np.array(draw(st.lists(st.integers(0, 4_000_000_000), min_size=n_hits, max_size=n_hits)), dtype=np.int64),
        n,
    )
    # An empty read, or one with a byte outside the alphabet, is never searched: it has no hit.
    searched = np.isin(hits.read, np.flatnonzero([s not in ("", "AC1T", "*") for s in seqs]))
    hits = ChunkHits(*[a[searched] for a in (hits.read, hits.strand, hits.contig, hits.position)], n)
    pick = np.array([draw(st.integers(0, max(int(c) - 1, 0))) for c in hits.counts()], dtype=np.int64)
    return make_chunk(seqs, quals, names), hits, draw(st.sampled_from([None, 1, 2, 5])), pick


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=chunks_and_hits())
def test_device_formatter_equals_python(device, case):
    chunk, hits, max_hits, pick = case
    contigs = ["chr1", "a_much_longer_contig_name|with:symbols", "c"]
    for tail in ("", "\tRG:Z:lane1"):
        want = format_records(chunk, hits, contigs, max_hits, tail, pick).encode()
        got = format_records_device(device, chunk, hits, contigs, max_hits, tail=tail, pick=pick)
        assert got.tobytes() == want
    assert b"\t\t" not in want and b"1" not in b"".join(line.split(b"\t")[9] for line in want.splitlines())


@settings(max_examples=100, deadline=None)
@given(case=chunks_and_hits())
def test_record_columns_against_a_loop_over_reads(case):
    """The picked hit first, then the others in order, capped at max_hits."""
    _, hits, max_hits, pick = case
    want = []
    for r in range(hits.n_reads):
        found = np.flatnonzero(hits.read == r)
        if found.size == 0:
            want.append((r, 4, 0, 0, 0, 0, 0))
            continue
        p = found[pick[r]]
        shown = ([p] + [i for i in found if i != p])[:max_hits]
        for k, i in enumerate(shown):
            flag = (16 if hits.strand[i] == 1 else 0) | (256 if k else 0)
            want.append((r, flag, hits.contig[i], hits.position[i] + 1, mapping_quality([found.size])[0],
                         len(shown), found.size))
    cols = record_columns(hits, max_hits, pick)
    got = zip(cols.read, cols.flag, cols.contig, cols.pos, cols.mapq, cols.nh, cols.x0)
    assert [tuple(map(int, row)) for row in got] == [tuple(map(int, row)) for row in want]


def test_record_fields():
    chunk = make_chunk(["ACGTT", "GGG"], ["ABCDE", "FGH"], ["r1", "r2"])
    hits = ChunkHits(np.array([0, 0]), np.array([1, 0], np.int8), np.array([0, 0]), np.array([9, 3]), 2)
    lines = format_records(chunk, hits, ["chr"]).splitlines()
    assert lines == [  # two equally good hits: MAPQ 0
        "r1\t16\tchr\t10\t0\t5M\t*\t0\t0\tAACGT\tEDCBA\tNM:i:0\tNH:i:2\tX0:i:2\tX1:i:0",
        "r1\t256\tchr\t4\t0\t5M\t*\t0\t0\t*\t*\tNM:i:0\tNH:i:2\tX0:i:2\tX1:i:0",
        "r2\t4\t*\t0\t0\t*\t*\t0\t0\tGGG\tFGH",
    ]
    picked = format_records(chunk, hits, ["chr"], tail="\tRG:Z:g", pick=np.array([1, 0])).splitlines()
    assert [line.split("\t")[:4] for line in picked] == [["r1", "0", "chr", "4"], ["r1", "272", "chr", "10"],
                                                         ["r2", "4", "*", "0"]]
    assert all(line.endswith("\tRG:Z:g") for line in picked)


def test_unmapped_records_of_odd_reads():
    """An empty read has SEQ and QUAL '*'; a byte SAM does not allow in SEQ is written N."""
    chunk = make_chunk(["", "AC1T", "ACGT"], ["", "ABCD", "ABCD"], ["e", "d", "ok"])
    lines = format_records(chunk, ChunkHits(*[np.zeros(0, dtype=np.int64)] * 4, 3), ["chr"]).splitlines()
    assert [line.split("\t")[9:] for line in lines] == [["*", "*"], ["ACNT", "ABCD"], ["ACGT", "ABCD"]]


def _resident_bytes(path) -> int:
    """Bytes of ``path`` in the page cache, as util-linux's fincore counts them."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def test_a_large_output_leaves_only_its_tail_in_the_page_cache(tmp_path):
    if shutil.which("fincore") is None:
        pytest.skip("util-linux's fincore is not installed")
    probe = tmp_path / "probe"
    with open(probe, "wb") as f:
        f.write(b"x" * (1 << 20))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if _resident_bytes(probe):
        pytest.skip("this file system keeps written pages cached whatever the advice (tmpfs)")
    pieces = [bytes([65 + i]) * 300_000 for i in range(20)]
    path = tmp_path / "out.sam"
    with open(path, "wb") as f:
        limit = PageCacheLimit(f, keep=1 << 20)
        for piece in pieces:
            f.write(piece)
            f.flush()
            # Between two chunks of a real run the disk has time to take the
            # earlier ones; here fsync makes sure of it, so that what is
            # dropped does not depend on how busy the disk is.
            os.fsync(f.fileno())
            limit.wrote(f.tell())
        assert _resident_bytes(path) <= (1 << 20) + 300_000 + 4096
    assert path.read_bytes() == b"".join(pieces)


def test_a_pipe_is_written_without_page_cache_advice():
    read_end, write_end = os.pipe()
    with open(write_end, "wb") as w, open(read_end, "rb") as r:
        assert PageCacheLimit(w).fd is None
        SamWriter(w).write(b"@HD\tVN:1.6\n")
        w.flush()
        assert r.read(11) == b"@HD\tVN:1.6\n"


def test_a_failed_write_is_an_output_error_naming_the_output():
    """Not a plain OSError, which the pipeline takes for a Dask cluster that went away."""
    class Full(io.RawIOBase):
        def writable(self):
            return True

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    writer = SamWriter(Full(), name="/data/out.sam")
    with pytest.raises(OutputError, match="cannot write '/data/out.sam': No space left on device"):
        writer.write(b"@HD\tVN:1.6\n")


@pytest.mark.parametrize("dtype", [np.uint32, np.int64])
def test_digits_count_decimal_digits(dtype):
    from dmap.format.sam import _digits

    values = [0, 1, 9, 10, 11, 99, 100, 999, 1000, 4_938_920, 999_999_999, 1_000_000_000, 2**32 - 1]
    x = np.array(values, dtype=dtype)
    assert _digits(x).tolist() == [len(str(v)) for v in values]
    assert _digits(np.zeros(0, dtype=dtype)).size == 0


def test_parts_are_used_by_other_processes_that_see_them(tmp_path):
    """A worker in the client's process hands its records over in memory; one elsewhere writes a
    part file only where it sees the run's marker (a directory of the same name on another host
    lacks it)."""
    import multiprocessing

    from dmap.format.writer import Parts

    parts = Parts.create(str(tmp_path / "out.sam.partial-1"))
    assert os.path.dirname(parts.directory) == str(tmp_path) and not parts.usable()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(parts.usable)
        os.unlink(os.path.join(parts.directory, parts.marker))
        assert not pool.apply(parts.usable)
    parts.remove()
    assert os.listdir(tmp_path) == []


def test_chunks_written_in_place_and_copied_from_parts(tmp_path):
    """The header through the file object, then chunks at reserved offsets in any order and from
    part files: the bytes in order."""
    from dmap.format.writer import write_at

    path = tmp_path / "out.sam"
    chunks = [b"r1\tx\n" * 3, b"", b"r2\ty\n", b"r3\tzz\n" * 100]
    with open(path, "wb") as f:
        writer = SamWriter(f)
        writer.write(b"@HD\tVN:1.6\n")
        offsets = [writer.reserve(len(c)) for c in chunks]
        for offset, c in reversed(list(zip(offsets, chunks))):
            write_at(str(path), offset, np.frombuffer(c, np.uint8))
    assert path.read_bytes() == b"@HD\tVN:1.6\n" + b"".join(chunks)
    read_end, write_end = os.pipe()
    with open(write_end, "wb") as w, open(read_end, "rb") as r:
        writer = SamWriter(w)
        writer.write(b"@HD\n")
        for k, c in enumerate(chunks):
            (tmp_path / f"{k}.part").write_bytes(c)
            writer.write_part(str(tmp_path / f"{k}.part"), len(c))
        w.close()
        assert r.read() == b"@HD\n" + b"".join(chunks)
    assert not list(tmp_path.glob("*.part"))
