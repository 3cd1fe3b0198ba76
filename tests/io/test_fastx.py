"""Reading reads: the numpy field splitter against dnaio, record by record, and the errors
(splitting files into byte ranges: test_splits.py)."""

import gzip
import io
import re

import dnaio
import numpy as np
import pytest
from helpers import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from readfiles import DNA, chunk_records, dnaio_records, fastq_files

from dmap.errors import InputFormatError
from dmap.io import fastx, splits
from dmap.io.fastx import iter_read_chunks, split_fastq


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fastq_files(), chunk_size=st.integers(1, 30), gz=st.booleans(),
       sizes=st.none() | st.lists(st.integers(1, 9), min_size=1, max_size=4))
def test_chunks_hold_what_dnaio_reads(tmp_path, text, chunk_size, gz, sizes):
    # Plain files are cut into byte ranges, gzip into blocks of whole records read in this process;
    # chunk sizes that change (as GuidedChunks makes them) change the cuts.
    path = tmp_path / ("r.fq.gz" if gz else "r.fq")
    path.write_bytes(gzip.compress(text) if gz else text)
    assert chunk_records(path, chunk_size, sizes) == dnaio_records(path)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=fastq_files(), chunk_size=st.integers(1, 30), fasta=st.booleans(), wrapped=st.booleans())
def test_header_comments_are_what_dnaio_reads_after_the_name(tmp_path, text, chunk_size, fasta, wrapped):
    """Each read's comment (ReadFields.comment_off and comment_len, which -C appends): its header
    after the name and the space or tab that ends it, as dnaio's ``name`` holds it after ``id``;
    in FASTQ and FASTA, one-line (split with numpy) and wrapped (parsed by dnaio)."""
    path = tmp_path / ("r.fa" if fasta else "r.fq")
    if fasta:
        lines = text.decode().splitlines()
        text = "".join(f">{lines[i][1:]}\n" + (f"{lines[i + 1][:3]}\n{lines[i + 1][3:]}\n" if wrapped else
                                                f"{lines[i + 1]}\n") for i in range(0, len(lines) - 3, 4)).encode()
        assume(text)
    path.write_bytes(text)
    with dnaio.open(path) as f:
        want = [r.name[len(r.id) + 1:] for r in f]
    got = []
    for chunk in iter_read_chunks(path, DNA, chunk_size):
        f = chunk.fields
        got += [f.data[o:o + n].tobytes().decode() for o, n in zip(f.comment_off.tolist(), f.comment_len.tolist())]
    assert got == want


@pytest.mark.parametrize("step", [fastx.LOW_BYTES_STEP, 7, 256, 512])
def test_low_bytes(monkeypatch, step):
    # Found a step at a time: across the steps' edges, a last step that is cut short, one step.
    monkeypatch.setattr(fastx, "LOW_BYTES_STEP", step)
    data = np.frombuffer(bytes(range(256)) * 2, np.uint8)
    expected = [i for i, b in enumerate(data) if b <= 32 or b >= 128]  # control bytes and non-ASCII
    positions, values = fastx._low_bytes(data)
    assert positions.tolist() == expected and values.tolist() == [data[i] for i in expected]
    positions, values = fastx._low_bytes(data[:0])
    assert positions.size == values.size == 0


def test_plain_records_take_the_numpy_path():
    data = np.frombuffer(b"@r1 c\nACGT\n+\nIIII\n@r2\tx\nAC\n+\n!!\n", np.uint8)
    f = split_fastq(data)
    assert f is not None
    assert bytes(data[f.name_off[1]: f.name_off[1] + f.name_len[1]]) == b"r2"
    assert list(f.seq_len) == [4, 2]
    # '+' lines that repeat the header, as SRA's fastq-dump writes them.
    f = split_fastq(np.frombuffer(b"@SRR1.1 a length=4\nACGT\n+SRR1.1 a length=4\nIIII\n@r2\nAC\n+r2\n!!", np.uint8))
    assert f is not None and list(f.name_len) == [6, 2]
    # Anything unusual is left to dnaio.
    for odd in (b"@r1\nACGT\n+r2\nIIII\n", b"@r1 c\nACGT\n+r1\nIIII\n", b"@r1\nACGT\n+r1 \nIIII\n",
                "@r\xe9\nA\n+\nI\n".encode("latin-1"), b"@r1\nACGT\n+\nIII\n",
                b"@r1\nACGT\n+\nIIII\n\n", b"@r1\r\nACGT\r\n+\r\nII\rI\r\n",
                b"@r1 c\nACGT\n+\nIIII\n@r2\nAC\n+\n!\x01"):
        assert split_fastq(np.frombuffer(odd, np.uint8)) is None
    # Spaces, tabs and "\r" anywhere but in a quality: a text read may hold spaces.
    f = split_fastq(np.frombuffer(b"@r1 c d\r\nAC T\r\n+\r\nIIII\r\n@r2\t\x01x\nA\tC\n+\n!!!\r", np.uint8))
    assert f is not None and list(f.name_len) == [2, 2] and list(f.seq_len) == [4, 3]


@settings(max_examples=examples(200), deadline=None)
@given(header=st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=40),
       plus=st.sampled_from(["empty", "same", "changed", "longer", "shorter"]), at=st.integers(0, 39),
       crlf=st.booleans(), last=st.booleans())
def test_plus_lines_are_judged_as_dnaio_judges_them(header, plus, at, crlf, last):
    # The '+' line is empty or repeats the header, compared 8 bytes at a time: a change in any
    # byte of any word, the last one partly the line's, is found.
    assume(not header.startswith(" "))
    second = {"empty": "", "same": header, "longer": header + "x", "shorter": header[:-1]}.get(plus)
    if second is None:
        i = at % len(header)
        second = header[:i] + chr(33 + (ord(header[i]) - 32) % 94) + header[i + 1:]
    end = "\r\n" if crlf else "\n"
    record = end.join([f"@{header}", "ACGT", f"+{second}", "IIII"]) + end
    text = (record + ("" if last else f"@x{end}A{end}+{end}I{end}")).encode()
    try:
        want = [r.name for r in dnaio.open(io.BytesIO(text), fileformat="fastq")]
    except dnaio.FileFormatError:
        want = None
    fields = split_fastq(np.frombuffer(text, np.uint8))
    assert (fields is not None) <= (want is not None)
    assert (fields is not None) == (second in ("", header))
    if fields is not None:
        names = [bytes(fields.data[a:a + n]).decode() for a, n in zip(fields.name_off, fields.name_len)]
        assert names == [w.split()[0] if w.split() else "" for w in want]


@pytest.mark.parametrize("byte, says", [(b" ", "a space"), (b"\t", "a tab"), (b"\x01", "the control byte 0x01"),
                                        (b"\r", "the control byte 0x0d")])
@pytest.mark.parametrize("gz", [False, True])
def test_a_quality_with_a_space_or_control_byte_is_refused(tmp_path, byte, says, gz):
    # FASTQ's and SAM's qualities are '!' to '~'; dnaio passes other bytes on, and a tab would
    # cut the SAM record into other fields.  In a later chunk too, and from a stream.
    text = b"@r1\nACGT\n+\nIIII\n" * 3 + b"@r2 x\nACGT\n+\nII" + byte + b"I\n@r3\nACGT\n+\nIIII\n"
    path = tmp_path / ("r.fq.gz" if gz else "r.fq")
    path.write_bytes(gzip.compress(text) if gz else text)
    for chunk_size in (1, 2, 10):
        with pytest.raises(InputFormatError, match=f"is malformed: the quality of read 'r2' holds {says}; "):
            list(iter_read_chunks(path, DNA, chunk_size))


def test_a_space_in_a_sequence_is_an_odd_read(tmp_path):
    (tmp_path / "r.fq").write_bytes(b"@a\nACGT\n+\nIIII\n@b x\nAC T\n+\nIIII\n")
    (chunk,) = iter_read_chunks(tmp_path / "r.fq", DNA, 10, strict=False)
    assert chunk.names == ["a", "b"] and chunk.skipped.tolist() == [False, True]
    assert chunk.unmappable == {"unknown symbol": 1}


@settings(max_examples=examples(150), deadline=None)
@given(records=st.lists(st.tuples(st.text("abc019_:. \t", min_size=0, max_size=12),
                                  st.lists(st.text("ACGTNacgt \t", max_size=30), min_size=0, max_size=3)),
                        min_size=1, max_size=8),
       crlf=st.booleans(), final_newline=st.booleans())
def test_fasta_records_are_split_as_dnaio_reads_them(records, crlf, final_newline):
    # Reads as FASTA: a sequence line each, split with numpy; sequences over several lines or
    # none, or with spaces and tabs (which dnaio drops at a line's end), are dnaio's.
    end = "\r\n" if crlf else "\n"
    text = end.join(end.join([f">{header}", *lines]) for header, lines in records)
    text = (text + (end if final_newline else "")).encode()
    want = [(r.id, r.sequence) for r in dnaio.open(io.BytesIO(text), fileformat="fasta")]
    fields = fastx.split_fasta(np.frombuffer(text, np.uint8))
    if all(len(lines) == 1 and re.fullmatch(r"\S+", lines[0]) for _, lines in records):
        assert fields is not None
    if fields is not None:  # (also for a text that reads as such records, e.g. one with an empty line)
        got = [(bytes(fields.data[a:a + n]).decode(), bytes(fields.data[b:b + m]).decode())
               for a, n, b, m in zip(fields.name_off, fields.name_len, fields.seq_off, fields.seq_len)]
        assert got == want and fields.qual_off is None


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
