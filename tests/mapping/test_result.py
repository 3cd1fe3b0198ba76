"""What map_reads returns: its hits are numpy columns that hold the run's SAM records (read
names and CIGARs included, across chunks and blocks), and a DataFrame of them."""

import numpy as np
import pysam
import pytest
from helpers import random_contig, sample_reads, write_fasta, write_fastq

import dmap
from dmap.reads import STRINGS, FlatStrings


@pytest.mark.parametrize("errors", [0, 2])
def test_hits_hold_the_records_of_the_sam(tmp_path, client, errors):
    rng = np.random.default_rng(40 + errors)
    contigs = [(f"chr{i}", random_contig(rng, "dna", n)) for i, n in enumerate([700, 90, 400])]
    write_fasta(tmp_path / "ref.fa", contigs)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", block_length=150, max_query_length=40)
    reads = sample_reads(rng, contigs, 150, 20, 30, "dna")
    # Names of many lengths, up to the longest SAM takes.
    names = [f"r{i}" + "x" * (5 * (i % 7)) for i in range(len(reads))]
    names[3] = "n" * 254
    write_fastq(tmp_path / "r.fq", reads, names)
    res = dmap.map_reads(idx, tmp_path / "r.fq", sam_path=tmp_path / "o.sam", client=client, chunk_size=25,
                         max_errors=errors, report_all=bool(errors))
    hits = res.hits
    with pysam.AlignmentFile(str(tmp_path / "o.sam")) as f:
        want = sorted((r.query_name, r.reference_name, r.reference_start, "-" if r.is_reverse else "+",
                       r.cigarstring if errors else None) for r in f if not r.is_unmapped)
    cigars = hits.cigar.tolist() if errors else [None] * len(hits)
    got = sorted(zip(hits.read_name.tolist(), hits.contig.tolist(), hits.position.tolist(), hits.strand.tolist(),
                     cigars))
    assert got == want and len(hits) == res.n_hits > len(reads) // 2
    assert hits.read_name.tolist() == [names[i] for i in hits.read.tolist()]
    # No Python object per hit: names and CIGARs are packed bytes until asked for as strings.
    assert isinstance(hits.names, FlatStrings) and hits.read_name.dtype == hits.contig.dtype == STRINGS
    assert (hits.cigars is not None) == bool(errors) == (hits.distance is not None)

    table = hits.to_pandas()
    assert list(table.columns) == ["read", "read_name", "contig", "position", "strand"] + (
        ["distance", "cigar"] if errors else [])
    assert table.contig.cat.categories.tolist() == ["chr0", "chr1", "chr2"]
    for column in table.columns:
        assert table[column].tolist() == getattr(hits, column).tolist()


def test_a_run_without_hits_gives_empty_columns(tmp_path, client):
    write_fasta(tmp_path / "ref.fa", [("chr", "ACGTTGCAAGGCTTAACCGT" * 5)])
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx")
    write_fastq(tmp_path / "r.fq", ["GGGGGGGGGGGGGGGGGGGG"])
    for errors in (0, 1):
        hits = dmap.map_reads(idx, tmp_path / "r.fq", client=client, max_errors=errors).hits
        assert len(hits) == 0 and hits.read_name.tolist() == hits.contig.tolist() == []
        assert len(hits.to_pandas()) == 0 and (hits.cigar is None) == (errors == 0)
