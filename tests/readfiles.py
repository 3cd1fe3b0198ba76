"""Reads files for the tests of reading and splitting them (tests/io): FASTQ as real files hold it
(a hypothesis strategy), the records dnaio reads, and the records dmap reads in chunks or in splits
cut at given bytes, as its workers read them."""

import contextlib
import gzip
import os
import threading

import dnaio
import numpy as np
from hypothesis import strategies as st

from dmap.alphabet import get_alphabet
from dmap.format import bgzf
from dmap.io import fastx, splits
from dmap.io.fastx import iter_read_chunks

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


@st.composite
def fasta_files(draw):
    """FASTA text: comments after the name, sequences wrapped at any width, blank lines at the end."""
    records = []
    for i in range(draw(st.integers(1, 12))):
        seq = draw(st.text("ACGTNacgtn", min_size=1, max_size=120))
        width = draw(st.integers(1, 80))
        lines = [seq[k:k + width] for k in range(0, len(seq), width)]
        records.append("\n".join([f">s{i}" + draw(st.sampled_from(["", " desc", "\tx"])), *lines]))
    return ("\n".join(records) + draw(st.sampled_from(["", "\n", "\n\n"]))).encode()


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


def file_splits(path, cuts, fastq=True, blocked=False) -> list[splits.FileSplit]:
    """The splits of the file (``blocked``: BGZF) between ``cuts``, as the client would plan them."""
    size = os.path.getsize(path)
    with splits.open_reads(str(path)) as f:
        origin = splits._skip_head(np.frombuffer(f.read(splits.SNIFF_BYTES), np.uint8), str(path))
    first = 0 if blocked else origin
    bounds = [first] + sorted(c for c in cuts if first < c < size) + [size]
    return [splits.FileSplit(k, str(path), lo, hi, fastq, origin, size, blocked)
            for k, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]


def split_records(path, cuts, fastq=True, blocked=False):
    """Every record of the file (``blocked``: BGZF) read as the splits between ``cuts``, each read as a
    worker reads it."""
    out = []
    for split in file_splits(path, cuts, fastq, blocked):
        chunk = fastx.read_chunk(split, DNA)
        out += list(zip(chunk.names, chunk.seqs, chunk.quals if fastq else [None] * len(chunk)))
    return out


def bgzf_blocks(text, cuts):
    """``text`` as BGZF whose blocks end at ``cuts``, as bgzip writes them (one block per 65,280 bytes)
    but with blocks as small as one byte, empty ones and the end-of-file block."""
    bounds = [0] + sorted(c for c in cuts if 0 <= c <= len(text)) + [len(text)]
    return b"".join(bgzf._block(text[a:b], 1) for a, b in zip(bounds, bounds[1:])) + bgzf.EOF


def with_extra_subfield(blocks: bytes) -> bytes:
    """BGZF ``blocks`` with a second extra subfield (``XY``, 2 bytes) before each one's ``BC``,
    which the SAM specification allows and few writers make: each header's XLEN and BSIZE grow by 6."""
    out, at = [], 0
    while at < len(blocks):
        xlen = int.from_bytes(blocks[at + 10:at + 12], "little")
        size = int.from_bytes(blocks[at + 16:at + 18], "little") + 1
        assert xlen == 6 and blocks[at + 12:at + 14] == b"BC"
        out += [blocks[at:at + 10], (xlen + 6).to_bytes(2, "little"), b"XY\x02\x00ab", blocks[at + 12:at + 16],
                (size + 6 - 1).to_bytes(2, "little"), blocks[at + 18:at + size]]
        at += size
    return b"".join(out)


def write_pairs(directory, first: list[str], second: list[str], interleaved: bool = False) -> None:
    """Pairs as r1.fq and r2.fq in ``directory`` (``interleaved``: as pairs.fq), named pair0/1, pair0/2, ..."""
    names = [f"pair{i}" for i in range(len(first))]
    recs = [[f"@{n}/{m}\n{s}\n+\n{'I' * len(s)}\n" for n, s in zip(names, mates)]
            for m, mates in ((1, first), (2, second))]
    if interleaved:
        (directory / "pairs.fq").write_text("".join(a + b for a, b in zip(*recs)))
    else:
        (directory / "r1.fq").write_text("".join(recs[0]))
        (directory / "r2.fq").write_text("".join(recs[1]))


def write_as(path, text: bytes, kind: str):
    """``text`` written to ``path`` plain, bgzip-compressed (cut by the workers) or gzip-compressed
    (read by the client as a stream); the path written."""
    path = path.with_name(path.name + {"plain": "", "bgzf": ".gz", "gzip": ".gz"}[kind])
    path.write_bytes({"plain": text, "bgzf": bgzf_blocks(text, [len(text) // 2]),
                      "gzip": gzip.compress(text)}[kind])
    return path


@contextlib.contextmanager
def piped(data: bytes):
    """``data`` on a pipe that a thread writes: the path (``/dev/fd/N``) to read it from as a stream."""
    read_end, write_end = os.pipe()

    def feed() -> None:
        with open(write_end, "wb") as f, contextlib.suppress(BrokenPipeError):  # the reader stopped early
            f.write(data)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        yield f"/dev/fd/{read_end}"
    finally:
        os.close(read_end)
        feeder.join()


def stream_plan(data: bytes, chunk_size: int, extras=None) -> list:
    """The chunks that the client plans of ``data`` read from a pipe, ``chunk_size`` reads asked for each."""
    with piped(data) as path:
        return list(splits.plan_input([path], lambda *_: chunk_size, *([extras] if extras else [])))


def stream_records(data: bytes, chunk_size: int, fastq=True):
    """Every record of ``data`` read from a pipe in chunks of about ``chunk_size`` reads, each read as a
    worker reads it; and the chunks."""
    plan = stream_plan(data, chunk_size)
    out = []
    for part in plan:
        chunk = fastx.read_chunk(part, DNA)
        out += list(zip(chunk.names, chunk.seqs, chunk.quals if fastq else [None] * len(chunk)))
    return out, plan
