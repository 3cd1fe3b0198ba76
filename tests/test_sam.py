"""SAM records: the OpenCL formatter writes exactly what the Python reference writes."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmap.alphabet import get_alphabet
from dmap.fastx import ReadChunk, ReadFields
from dmap.hits import ChunkHits
from dmap.sam import format_records, format_records_device, mapq


def make_chunk(seqs, quals, names):
    dna = get_alphabet("dna")
    return ReadChunk(0, 0, ReadFields.from_strings(names, seqs, quals), dna.read_table, dna.name)


@st.composite
def chunks_and_hits(draw):
    n = draw(st.integers(1, 30))
    seqs = draw(st.lists(st.text("ACGTNacgt", min_size=1, max_size=300), min_size=n, max_size=n))
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
    return make_chunk(seqs, quals, names), hits, draw(st.sampled_from([None, 1, 2, 5]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=chunks_and_hits())
def test_device_formatter_equals_python(device, case):
    chunk, hits, max_hits = case
    contigs = ["chr1", "a_much_longer_contig_name|with:symbols", "c"]
    want = format_records(chunk, hits, contigs, max_hits).encode()
    assert format_records_device(device, chunk, hits, contigs, max_hits).tobytes() == want


def test_record_fields():
    chunk = make_chunk(["ACGTT", "GGG"], ["ABCDE", "FGH"], ["r1", "r2"])
    hits = ChunkHits(np.array([0, 0]), np.array([1, 0], np.int8), np.array([0, 0]), np.array([9, 3]), 2)
    lines = format_records(chunk, hits, ["chr"]).splitlines()
    assert lines == [
        "r1\t16\tchr\t10\t3\t5M\t*\t0\t0\tAACGT\tEDCBA\tNM:i:0\tNH:i:2",
        "r1\t256\tchr\t4\t3\t5M\t*\t0\t0\t*\t*\tNM:i:0\tNH:i:2",
        "r2\t4\t*\t0\t0\t*\t*\t0\t0\tGGG\tFGH",
    ]


@pytest.mark.parametrize("n,expected", [(1, 60), (2, 3), (3, 1), (4, 1), (5, 0), (500, 0)])
def test_mapq(n, expected):
    assert mapq(n) == expected
