"""Approximate mapping end to end against the brute-force oracle.

The oracle (dmap.testing.approx.brute_force_loci) aligns every read and
its reverse complement to every contig by plain DP, with no index and no
seeds.  With ``report_all`` dmap must report exactly its loci; by default
exactly those at each read's least distance.  Blocks are small so that loci
fall in block overlaps and across block edges.
"""

from __future__ import annotations

import re
import subprocess
from fractions import Fraction

import numpy as np
import pysam
import pytest
from cases import found, make_case, oracle, planted, written
from helpers import examples, have, samtools_quickcheck, write_fasta, write_fastq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmap
from dmap.approx.settings import parse_error_rate
from dmap.mapq import name_hashes, tie_pick
from dmap.reads import ReadFields
from dmap.testing.approx import edit_distance, runs, semiglobal_row


def run_case(tmp_path, client, contigs, reads, alphabet, k, block_length, report_all=True, seed_edits=None,
             error_rate=None):
    written(tmp_path, contigs, reads)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", alphabet=alphabet, max_query_length=80,
                           block_length=block_length, overwrite=True)
    return dmap.map_reads(idx, tmp_path / "r.fq", sam_path=tmp_path / "out.sam", client=client,
                          max_errors=0 if error_rate else k, error_rate=error_rate, report_all=report_all,
                          chunk_size=17, seed_edits=seed_edits)


def rate_errors(reads, rate: Fraction) -> np.ndarray:
    """Each read's K at an error rate: floor(rate * length)."""
    return np.array([len(r) * rate.numerator // rate.denominator for r in reads], dtype=np.int64)


def check_against_oracle(tmp_path, client, contigs, reads, alphabet, k, block_length, seed_edits=None,
                         error_rate=None):
    """dmap's loci == the oracle's; ``seed_edits``: m for the seeds (None: dmap's choice); with
    ``error_rate`` (a Fraction) each read's K is its own and ``k`` is not used."""
    contigs = written(tmp_path, contigs, reads)
    ks = rate_errors(reads, error_rate) if error_rate else np.full(len(reads), k)
    expected, ref, pats, ns, alpha = oracle(contigs, reads, alphabet, ks)
    res = run_case(tmp_path, client, contigs, reads, alphabet, k, block_length, seed_edits=seed_edits,
                   error_rate=error_rate)
    got = found(res.hits, contigs, ns)
    assert {g[:4] for g in got} == expected
    for p, c, _, dist, pos, span in got:
        assert dist <= ks[p // ns] and edit_distance(pats[p], ref[c][pos : pos + span], alpha.sigma) == dist
    samtools_quickcheck(tmp_path / "out.sam")
    return res


@pytest.mark.parametrize("alphabet", ["dna", "protein", "text"])
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("seed_edits", [0, 1])  # K+1 exact pieces; K//2+1 pieces with one edit (Liu and Schmidt 2012)
def test_all_loci_equal_oracle(tmp_path, client, alphabet, k, seed_edits):
    rng = np.random.default_rng(["dna", "protein", "text"].index(alphabet) * 10 + k)
    contigs, reads = make_case(rng, alphabet, k)
    check_against_oracle(tmp_path, client, contigs, reads, alphabet, k, block_length=500, seed_edits=seed_edits)


@pytest.mark.parametrize("seed_edits", [0, 1, 2])
def test_tandem_repeats_and_block_edges(tmp_path, client, seed_edits):
    rng = np.random.default_rng(7)
    unit = "ACGTTGCA"
    genome = "".join(rng.choice(list("ACGT"), size=300)) + unit * 60 + "".join(rng.choice(list("ACGT"), size=300))
    contigs = [("rep", genome), ("tiny", "ACGTACGTTT")]
    reads = [planted(rng, genome[s : s + 40], int(rng.integers(0, 3)), "ACGT") for s in range(0, len(genome) - 40, 23)]
    reads += ["ACGTACGTTT", "ACGTACGAT", (unit * 6)[:45]]
    check_against_oracle(tmp_path, client, contigs, reads, "dna", 2, block_length=97, seed_edits=seed_edits)


def test_two_runs_of_ends_with_one_start_are_one_locus(tmp_path, client):
    """A read (the last 60 bases of one from mason_simulator, E. coli) whose last bases differ
    from the reference aligns within K at two runs of ends, and both best alignments start at the
    same place: one locus, one record, as RazerS 3 reports it."""
    read = "GGCGCAAGAATTGCGCTTCACGCATATCTACCTTCTGCACGATATCGCGATGGTGCAGGGT"
    around = ("GTAGTATGGCTCCCTTACCGTTGCGCTTGAGTACAGCACTGCCATACTGAATTTCATCGAACTGGCTCCGGCGCAAGAATTGCGCTTCACGCATAT"
              "CTACCTTCTGCACGATATCGCGATGGTGCATAGTTGGTTCTGTGTTGCCCTTGTAACTGTACCG")
    rng = np.random.default_rng(7)
    flank = lambda: "".join(rng.choice(list("ACGT"), size=300))  # noqa: E731
    contigs = [("c", flank() + around + flank())]
    code = {"A": 0, "C": 1, "G": 2, "T": 3}
    row = semiglobal_row(np.array([code[c] for c in read], np.uint8),
                         np.array([code[c] for c in contigs[0][1]], np.uint8), 4)
    assert len(runs(row, 3)) == 2  # the case holds what it is about
    res = check_against_oracle(tmp_path, client, contigs, [read], "dna", 3, block_length=500)
    assert res.n_hits == 1


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 4), block_length=st.integers(60, 900),
       seed_edits=st.sampled_from([None, 0, 1, 2]))
def test_random_cases_equal_oracle(tmp_path, client, seed, k, block_length, seed_edits):
    rng = np.random.default_rng(seed)
    contigs, reads = make_case(rng, "dna", k, n_reads=15)
    check_against_oracle(tmp_path, client, contigs, reads, "dna", k, block_length, seed_edits)


@pytest.mark.parametrize("alphabet", ["dna", "protein"])
@pytest.mark.parametrize("rate", ["0.07", "12.5%"])
def test_an_error_rate_gives_each_read_its_own_k(tmp_path, client, alphabet, rate):
    """Reads of 12-60 symbols at 7% have K of 0-4, at 12.5% 1-7: each read's loci are those within
    its own K (a run of ends within a larger K could join two of them), every K in one chunk."""
    rng = np.random.default_rng(["dna", "protein"].index(alphabet) * 10 + len(rate))
    contigs, reads = make_case(rng, alphabet, 5)
    error_rate = parse_error_rate(rate)
    assert len(set(rate_errors(reads, error_rate))) >= 4  # the case holds what it is about
    check_against_oracle(tmp_path, client, contigs, reads, alphabet, None, block_length=500, error_rate=error_rate)


@settings(max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), rate=st.sampled_from(["0.03", "0.05", "0.08", "0.1", "0.15"]),
       block_length=st.integers(60, 900), seed_edits=st.sampled_from([None, 0, 1]))
def test_random_error_rates_equal_oracle(tmp_path, client, seed, rate, block_length, seed_edits):
    rng = np.random.default_rng(seed)
    contigs, reads = make_case(rng, "dna", 4, n_reads=15)
    check_against_oracle(tmp_path, client, contigs, reads, "dna", None, block_length, seed_edits,
                         error_rate=Fraction(rate))


def test_reads_too_long_for_their_k_are_written_unmapped(tmp_path, client):
    """At 5% an index of 80-symbol queries maps reads of up to 77 symbols (77 + 3 edits): a read of
    78 is written unmapped, and counted."""
    genome = "".join(np.random.default_rng(2).choice(list("ACGT"), size=400))
    reads = [genome[10:87], genome[100:178]]
    write_fasta(tmp_path / "ref.fa", [("c", genome)])
    write_fastq(tmp_path / "r.fq", reads)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=80)
    res = dmap.map_reads(idx, tmp_path / "r.fq", client=client, error_rate="5%")
    assert list(res.hits.read) == [0] and res.unmappable == {"too long": 1}


def test_default_reports_the_best_loci_with_mapq(tmp_path, client):
    rng = np.random.default_rng(3)
    contigs, reads = make_case(rng, "dna", 3)
    expected, *_ = oracle(written(tmp_path, contigs, reads), reads, "dna", 3)
    res = run_case(tmp_path, client, contigs, reads, "dna", 3, 400, report_all=False)
    best: dict[int, int] = {}
    for p, _, _, d in expected:
        best[p // 2] = min(best.get(p // 2, 99), d)
    want = {lc for lc in expected if lc[3] == best[lc[0] // 2]}
    assert {g[:4] for g in found(res.hits, contigs, 2)} == want
    n_loci = {r: sum(1 for lc in expected if lc[0] // 2 == r) for r in best}
    seen = set()
    for rec in pysam.AlignmentFile(str(tmp_path / "out.sam")):
        r = int(rec.query_name[4:])
        if rec.is_unmapped:
            assert r not in best
            continue
        assert rec.is_secondary == (r in seen)
        seen.add(r)
        assert rec.get_tag("NM") == best[r] and rec.get_tag("AS") == -best[r]
        if not rec.is_secondary and n_loci[r] == 1:
            assert rec.mapping_quality == 60
        if sum(1 for lc in want if lc[0] // 2 == r) > 1:
            assert rec.mapping_quality == 0


@pytest.mark.skipif(not have("samtools"), reason="samtools is not installed")
def test_md_and_nm_agree_with_samtools_calmd(tmp_path, client):
    rng = np.random.default_rng(11)
    contigs, reads = make_case(rng, "dna", 4)
    run_case(tmp_path, client, contigs, reads, "dna", 4, 600)
    out = subprocess.run(["samtools", "calmd", str(tmp_path / "out.sam"), str(tmp_path / "ref.fa")],
                         capture_output=True, check=True).stdout
    (tmp_path / "calmd.sam").write_bytes(out)
    ours = {(r.query_name, r.flag, r.reference_start): (r.get_tag("NM"), r.get_tag("MD"))
            for r in pysam.AlignmentFile(str(tmp_path / "out.sam")) if not r.is_unmapped}
    theirs = {(r.query_name, r.flag, r.reference_start): (r.get_tag("NM"), r.get_tag("MD"))
              for r in pysam.AlignmentFile(str(tmp_path / "calmd.sam")) if not r.is_unmapped}
    assert ours and ours == theirs


def test_eqx_and_max_hits(tmp_path, client):
    genome = "".join(np.random.default_rng(5).choice(list("ACGT"), size=400))
    contigs = [("a", genome), ("b", genome)]  # every locus twice
    reads = [genome[100:150], genome[10:40][:12] + "T" + genome[10:40][13:]]
    write_fasta(tmp_path / "ref.fa", contigs)
    write_fastq(tmp_path / "r.fq", reads)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=80)
    res = dmap.map_reads(idx, tmp_path / "r.fq", sam_path=tmp_path / "o.sam", client=client, max_errors=2, eqx=True,
                         max_hits=1)
    recs = [r for r in pysam.AlignmentFile(str(tmp_path / "o.sam"))]
    assert len(recs) == 2 and all(not r.is_secondary for r in recs)
    # Of the two equally good copies, the one the read name's hash picks is the primary (dmap.mapq).
    names = ReadFields.from_strings(["read0", "read1"], ["A", "A"], None)
    picks = tie_pick(name_hashes(names.data, names.name_off, names.name_len), np.array([2, 2]))
    assert list(res.hits.contig) == [["a", "b"][p] for p in picks] and "50=" in res.hits.cigar
    assert all(set(re.findall(r"[A-Z=]", c)) <= {"=", "X", "I", "D"} for c in res.hits.cigar)


@pytest.mark.parametrize("gpu, kernel", [(True, "myers_cooperative"), (False, "myers_lanes")], ids=["gpu", "cpu"])
def test_verify_kernel_suits_the_device(tmp_path, client, monkeypatch, gpu, kernel):
    """A GPU verifies with myers_cooperative, a CPU with myers_lanes (each the faster there),
    each finding the runs itself; the loci stay the oracle's.  The CPU device here is made to
    say whether it is a GPU."""
    import dmap.approx.alignments as alignments
    from dmap.opencl.device import Device

    used = []
    distances, runs = alignments.myers_distances, alignments.myers_runs

    def spy_distances(*args, kernel="myers", **kwargs):
        used.append(kernel)
        return distances(*args, kernel=kernel, **kwargs)

    def spy_runs(*args, kernel="myers_lanes", **kwargs):
        used.append(kernel)
        return runs(*args, kernel=kernel, **kwargs)

    monkeypatch.setattr(Device, "is_gpu", property(lambda self: gpu))
    monkeypatch.setattr(alignments, "myers_distances", spy_distances)
    monkeypatch.setattr(alignments, "myers_runs", spy_runs)
    rng = np.random.default_rng(11)
    contigs, reads = make_case(rng, "dna", 3)
    check_against_oracle(tmp_path, client, contigs, reads, "dna", 3, block_length=500)
    assert used and set(used) == {kernel}
