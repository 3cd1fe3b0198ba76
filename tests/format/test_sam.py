"""SAM records: the OpenCL formatter writes exactly what the Python reference writes."""


import numpy as np
import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmap.alphabet import get_alphabet
from dmap.approx.alignments import ChunkAlignments
from dmap.format.sam import (
    RecordTails,
    contig_name_columns,
    format_alignment_records_device,
    format_records_device,
    record_columns,
)
from dmap.mapq import mapping_quality
from dmap.reads import FlatStrings, ReadChunk, ReadFields, flat_strings
from dmap.search.hits import ChunkHits
from dmap.testing.sam import format_alignment_records, format_records


def make_chunk(seqs, quals, names, comments=None):
    dna = get_alphabet("dna")
    return ReadChunk(0, ReadFields.from_strings(names, seqs, quals, comments), dna.read_table, dna.name)


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
    # Header comments (-C), none for some reads.
    kinds = st.sampled_from(["", "BC:Z:ACGT", "RX:Z:A-C\tQX:Z:I#", "XI:i:-7"])
    comments = draw(st.lists(kinds, min_size=n, max_size=n))
    return make_chunk(seqs, quals, names, comments), hits, draw(st.sampled_from([None, 1, 2, 5])), pick


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=chunks_and_hits())
def test_device_formatter_equals_python(device, case):
    chunk, hits, max_hits, pick = case
    contigs = ["chr1", "a_much_longer_contig_name|with:symbols", "c"]
    # Reads of several files in one chunk, each file's read group its own (one without any).
    per_read = RecordTails(("\tRG:Z:lane1", "", "\tRG:Z:a_longer_read_group_id"),
                           np.arange(len(chunk)) * 3 // max(len(chunk), 1))
    commented = RecordTails(per_read.strings, per_read.of_read, comments=True)  # -C: each read's comment first
    for tail in ("", "\tRG:Z:lane1", per_read, commented):
        want = format_records(chunk, hits, contigs, max_hits, tail, pick).encode()
        got = format_records_device(device, chunk, hits, contigs, max_hits, tail=tail, pick=pick)
        assert got.tobytes() == want
    assert b"\t\t" not in want and b"1" not in b"".join(line.split(b"\t")[9] for line in want.splitlines())


@settings(max_examples=examples(100), deadline=None)
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


@pytest.mark.parametrize("dtype", [np.uint32, np.int64])
def test_digits_count_decimal_digits(dtype):
    from dmap.format.sam import _digits

    values = [0, 1, 9, 10, 11, 99, 100, 999, 1000, 4_938_920, 999_999_999, 1_000_000_000, 2**32 - 1]
    x = np.array(values, dtype=dtype)
    assert _digits(x).tolist() == [len(str(v)) for v in values]
    assert _digits(np.zeros(0, dtype=dtype)).size == 0


def test_alignment_records_device_equal_python(device):
    """Approximate alignments' records (CIGAR, MD, NM/AS, secondaries, an unmapped read, the
    reverse strand), with one tail for all reads and with each read's own."""
    chunk = make_chunk(["ACGTACGTAA", "GGGGCCCC", "ACGTTTGCA", "TTAACCGG"], ["IIIIIIIIII", "!!!!!!!!", "ABCDEFGHI",
                                                                           "########"], ["r0", "r1", "r2", "r3"])
    cigars, mds = (FlatStrings(*flat_strings(x)) for x in (["10M", "4M1I5M", "9M", "8M"],
                                                          ["10", "9", "3A5", "8"]))
    alns = ChunkAlignments(read=np.array([0, 0, 2, 3]), strand=np.array([0, 1, 1, 0], np.int8),
                           contig=np.array([0, 1, 0, 2]), position=np.array([5, 100, 7, 0]),
                           distance=np.array([0, 1, 1, 0]), rank=np.array([0, 1, 0, 0]),
                           mapq=np.array([3, 3, 60, 60]), n_found=np.array([2, 0, 1, 1]), n_best=np.array([1, 0, 1, 1]),
                           cigar=cigars, md=mds, n_reads=4)
    contigs = ["chr1", "chr2", "c"]
    for tail in ("", "\tRG:Z:x", RecordTails(("\tRG:Z:x", "\tRG:Z:y"), np.array([0, 1, 1, 0]))):
        want = format_alignment_records(chunk, alns, contigs, tail)
        got = format_alignment_records_device(device, chunk, alns, contig_name_columns(contigs), tail)
        assert got.tobytes().decode() == want
    assert [line.rsplit("\t", 1)[1] for line in want.splitlines()] == ["RG:Z:x", "RG:Z:x", "RG:Z:y", "RG:Z:y",
                                                                       "RG:Z:x"]


@pytest.mark.parametrize("comment, ok", [
    ("BC:Z:ACGT", True), ("BC:Z:", True), ("b1:i:-5\tXA:A:q", True), ("XB:B:c,1,2\tXF:f:1.5\tXH:H:1AE3", True),
    ("XF:f:1.5", True), ("XB:B:f,1.5", True), ("1:N:0:ACGT", False), ("XB:B:", False), ("XB:B:q,1", False),
    ("BC:Z", False), ("B:Z:x", False), ("BCZ:ACGT", False), ("BC:Q:x", False),
    ("\tBC:Z:x", False), ("BC:Z:x\t", False), ("BC:Z:x\t\tRX:Z:y", False),
    ("BC:Z:x RX:Z:y", True),  # a space inside a Z value is SAM's
    ("BC:Z:x\tRG:Z:lane1", False),  # read groups are dmap's to write, with their @RG lines
    ("NM:i:0", False), ("BC:Z:x\tX0:i:1", False),  # as are these: they would stand twice
])
def test_check_comments_takes_sam_tags_alone(comment, ok):
    """-C's comments: SAM tags (TG:T:VALUE, tab-separated), every type of which SAM and BAM output
    write; anything else is one error naming the read (whose neighbours' comments are fine)."""
    from dmap.errors import InputFormatError
    from dmap.format.sam import check_comments

    chunk = make_chunk(["ACGT"] * 3, ["IIII"] * 3, ["a", "b", "c"], ["", comment, "RX:Z:A"])
    if ok:
        check_comments(chunk)
    else:
        with pytest.raises(InputFormatError, match="read 'b' has "):
            check_comments(chunk)


@settings(max_examples=examples(200), deadline=None)
@given(comments=st.lists(st.lists(st.one_of(
    st.builds("{}{}:{}:{}".format, st.sampled_from("aZRNX1:"), st.sampled_from("bYGM02:\t"),
              st.sampled_from("AiZfHBQ:"), st.text("AZ1:icf \t", max_size=4)),
    st.text("AZ1:iBf\t x", max_size=8)), max_size=3).map("\t".join), min_size=1, max_size=6))
def test_check_comments_against_a_regular_expression(comments):
    """check_comments (whole-array, on a chunk's bytes) accepts exactly the comments whose every
    tab-separated field a regular expression takes for a SAM tag."""
    import re

    from dmap.errors import InputFormatError
    from dmap.format.sam import ARRAY_TYPES, COMMENT_TYPES, check_comments
    from dmap.format.tags import WRITTEN_TAGS

    types, arrays = COMMENT_TYPES.decode().replace("B", ""), ARRAY_TYPES.decode()
    field = re.compile(rf"(?!{'|'.join(WRITTEN_TAGS)})[A-Za-z][A-Za-z0-9]:([{types}]:.*|B:[{arrays}].*)", re.S)
    want = all(not c or all(field.fullmatch(f) for f in c.split("\t")) for c in comments)
    chunk = make_chunk(["ACGT"] * len(comments), None, [f"r{i}" for i in range(len(comments))], comments)
    try:
        check_comments(chunk)
        got = True
    except InputFormatError:
        got = False
    assert got == want


def test_written_tags_are_the_records_kernels():
    """dmap.format.tags.WRITTEN_TAGS (what a read's own tags may not bring along) names every tag
    that sam_records.cl writes, and RG."""
    import re
    from pathlib import Path

    from dmap.format.tags import WRITTEN_TAGS

    source = (Path(__file__).parents[2] / "kernels" / "sam_records.cl").read_text()
    assert set(re.findall(r"\\t([A-Z][A-Z0-9]):[A-Za-z]:", source)) | {"RG"} == set(WRITTEN_TAGS)
