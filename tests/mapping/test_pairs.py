"""Paired-end reads against the brute-force oracle, and their SAM checked by samtools and Picard.

The oracle (dmap.testing.approx.brute_force_pairs) aligns each mate to every
contig by plain DP and joins every two alignments of a pair's mates that
face each other on one contig with an insert within bounds.  With ``--all``
dmap's proper pairs must be exactly those.  Blocks are small, so mates fall
in block overlaps and at contig ends.
"""

from __future__ import annotations

import gzip
import re
import subprocess
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pysam
import pytest
from cases import planted
from helpers import (
    alphabet_for,
    assert_clean_failure,
    dmap_cmd,
    examples,
    have,
    sam_body,
    samtools_quickcheck,
    write_fasta,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from readfiles import write_pairs

import dmap
from dmap.alphabet import reverse_complement
from dmap.format.sam import RecordTails, contig_name_columns, format_pair_records_device
from dmap.io.fastx import iter_contigs
from dmap.mapping.pairs import ESTIMATE_PAIRS, InsertBounds, MateAlignments, pair_chunk, proper_pairs
from dmap.reads import ReadChunk, ReadFields
from dmap.search.hits import ChunkHits
from dmap.testing.approx import brute_force_alignments, brute_force_pairs
from dmap.testing.sam import format_pair_records

LOW, HIGH = 100, 260  # the insert bounds the oracle cases are mapped with


def make_pairs(rng, contigs: list[tuple[str, str]], n: int, k: int) -> tuple[list[str], list[str]]:
    """Fragments of 40-330 symbols (around the bounds) from either strand, mates of 20-45 symbols
    with up to ``k`` edits, some mates of a repeat copy or beyond a contig's end, some pairs with
    one mate or both from nowhere."""
    first, second = [], []
    for i in range(n):
        name, seq = contigs[int(rng.integers(len(contigs)))]
        size = int(rng.integers(40, min(330, len(seq))))
        at = int(rng.integers(0, len(seq) - size + 1))
        frag = seq[at: at + size]
        a, b = frag[: int(rng.integers(20, 46))], reverse_complement(frag[-int(rng.integers(20, 46)):])
        if rng.random() < 0.5:
            a, b = b, a  # the fragment's other strand
        a, b = (planted(rng, x, int(rng.integers(0, k + 1)), "ACGT") for x in (a, b))
        if i % 11 == 0:
            b = "".join(rng.choice(list("ACGT"), size=len(b)))  # a mate from nowhere
        if i % 13 == 6:
            a, b = ("".join(rng.choice(list("ACGT"), size=len(x))) for x in (a, b))  # a pair from nowhere
        first.append(a)
        second.append(b)
    return first, second
def genome(rng) -> list[tuple[str, str]]:
    """Two contigs with a repeat (in both, and reverse-complemented) and a run of N."""
    a = "".join(rng.choice(list("ACGT"), size=1400))
    b = "".join(rng.choice(list("ACGT"), size=700))
    repeat = a[300:420]
    a = a[:900] + repeat + a[1020:1100] + "N" * 15 + a[1115:]
    b = b[:200] + reverse_complement(repeat) + b[320:]
    return [("chrA", a), ("chrB", b)]


def pair_case(tmp_path, seed: int, n: int, k: int, interleaved: bool = False):
    """A :func:`genome`, ``n`` :func:`make_pairs` written as r1.fq and r2.fq (and pairs.fq), and its
    index in ``idx`` (400-symbol blocks); the contigs as dmap reads them, and the mates."""
    rng = np.random.default_rng(seed)
    contigs = genome(rng)
    first, second = make_pairs(rng, contigs, n, k)
    write_fasta(tmp_path / "ref.fa", contigs)
    write_pairs(tmp_path, first, second)
    if interleaved:
        write_pairs(tmp_path, first, second, interleaved=True)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=60, block_length=400)
    contigs = [(name, seq.decode("latin-1")) for name, seq in iter_contigs(tmp_path / "ref.fa")]
    return idx, contigs, first, second


def proper_pairs_of(sam_path, names: list[str]) -> set[tuple[int, int, int, int, int, int]]:
    """(pair, contig, first mate's start, strand, second mate's start, strand) of every proper pair."""
    out = set()
    with pysam.AlignmentFile(str(sam_path)) as f:
        for r in f:
            if r.is_proper_pair and r.is_read1:
                pair = int(r.query_name[4:])
                assert r.next_reference_id == r.reference_id
                out.add((pair, names.index(r.reference_name), r.reference_start, int(r.is_reverse),
                         r.next_reference_start, int(r.mate_is_reverse)))
    return out


def check_pairs_against_oracle(directory, client, seed: int, n: int, k: int, chunk_size: int,
                               error_rate: Fraction | None = None):
    """A :func:`pair_case` mapped with ``--all``: its proper pairs equal the oracle's, and its mate
    fields what samtools fixmate writes; returns the run's result and the oracle's pairs.  With
    ``error_rate`` each mate's K is floor(rate * its length), ``k`` only the edits planted."""
    idx, contigs, first, second = pair_case(directory, seed, n, k)
    errors = dict(error_rate=error_rate) if error_rate else dict(max_errors=k)
    res = dmap.map_reads(idx, directory / "r1.fq", directory / "r2.fq", sam_path=directory / "out.sam",
                         client=client, report_all=k > 0, chunk_size=chunk_size, min_insert=LOW,
                         max_insert=HIGH, **errors)
    alpha = alphabet_for("dna", contigs)
    ref = [alpha.reference_table[np.frombuffer(s.encode(), np.uint8)] for _, s in contigs]
    pats, ks = [], []
    for r in (x for pair in zip(first, second) for x in pair):
        codes = alpha.read_table[np.frombuffer(r.encode(), np.uint8)]
        pats += [codes, alpha.complement_codes(codes[::-1])]
        ks += [len(r) * error_rate.numerator // error_rate.denominator if error_rate else k] * 2
    expected = brute_force_pairs(brute_force_alignments(ref, pats, alpha.sigma, ks), LOW, HIGH)
    got = proper_pairs_of(directory / "out.sam", [n for n, _ in contigs])
    assert got == expected
    assert len({p for p, *_ in expected}) == res.n_proper
    assert res.n_reads == 2 * len(first)
    check_mate_fields(directory / "out.sam")
    return res, expected


@pytest.mark.parametrize("k", [0, 2])
def test_all_proper_pairs_equal_oracle(tmp_path, client, k):
    res, _ = check_pairs_against_oracle(tmp_path, client, 40 + k, 70, k, chunk_size=17)
    assert res.n_proper > 10  # the case holds proper pairs


def test_pairs_at_an_error_rate_equal_oracle(tmp_path, client):
    """Mates of 20-45 symbols at 8% have K of 1-3, each mate its own."""
    res, _ = check_pairs_against_oracle(tmp_path, client, 47, 70, 3, chunk_size=17, error_rate=Fraction(8, 100))
    assert res.n_proper > 10


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), k=st.integers(0, 3), chunk_size=st.integers(2, 40))
def test_random_pair_cases_equal_oracle(tmp_path, client, seed, n, k, chunk_size):
    """Small chunks of few pairs: some hold no alignment at all, or no proper pair."""
    check_pairs_against_oracle(Path(tempfile.mkdtemp(dir=tmp_path)), client, seed, n, k, chunk_size)


def check_mate_fields(path) -> None:
    """samtools fixmate changes no mate field (flags, RNEXT, PNEXT, TLEN, MC, MQ) of the primary records;
    ``fixmate -m`` adds ``MC:Z:*`` to a mapped record whose mate is unmapped, which dmap leaves out, as
    bwa does (and neither writes MC where both mates are unmapped)."""
    fixed = subprocess.run(f"samtools view -h {path} | samtools fixmate -m - - -O sam", shell=True,
                           capture_output=True, text=True, check=True).stdout
    tags = lambda f: {t[:2]: t for t in f[11:] if t[:2] in ("MC", "MQ")}  # noqa: E731
    # fixmate writes a secondary record as it comes, a primary with its mate: compare in one order.
    mate_unmapped = lambda flag: flag & 8 and not flag & 4  # noqa: E731
    before = sorted((f[:11], sorted({**tags(f), **({"MC": "MC:Z:*"} if mate_unmapped(int(f[1])) else {})}.values()))
                    for f in sam_body(open(path).read()) if not int(f[1]) & 256)
    after = sorted((f[:11], sorted(tags(f).values())) for f in sam_body(fixed) if not int(f[1]) & 256)
    assert before == after
    secondary = lambda text: sorted(f[:11] for f in sam_body(text) if int(f[1]) & 256)  # noqa: E731
    assert secondary(open(path).read()) == secondary(fixed)


def test_interleaved_equals_two_files_and_gzip(tmp_path, client):
    """The same records from two files, gzip, one interleaved file, and lists of files (a run's
    lanes: each file of first mates with its file of second mates, plain or gzip)."""
    idx, _, _, _ = pair_case(tmp_path, 5, 60, 1, interleaved=True)
    for name in ("r1.fq", "r2.fq", "pairs.fq"):
        lines = (tmp_path / name).read_bytes().splitlines(keepends=True)
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(b"".join(lines)))
        (tmp_path / f"a_{name}").write_bytes(b"".join(lines[:4 * 22]))  # lanes: 22 pairs, then the rest
        (tmp_path / f"b_{name}.gz").write_bytes(gzip.compress(b"".join(lines[4 * 22:])))
    lanes = lambda name: f"{tmp_path / f'a_{name}'},{tmp_path / f'b_{name}.gz'}"  # noqa: E731
    runs = {"files": ((tmp_path / "r1.fq", tmp_path / "r2.fq"), {}),
            "gzip": ((tmp_path / "r1.fq.gz", tmp_path / "r2.fq.gz"), {}),
            "interleaved": ((tmp_path / "pairs.fq",), {"interleaved": True}),
            "lanes": ((lanes("r1.fq"), lanes("r2.fq")), {}),
            "interleaved lanes": ((lanes("pairs.fq"),), {"interleaved": True})}
    bodies = {}
    for label, (paths, extra) in runs.items():
        out = tmp_path / f"{label}.sam"
        # Bounds given: the first chunk need not hold the estimate's 10,000 pairs, so these 60 pairs
        # are mapped in chunks of 13 reads, cut differently in each form.
        dmap.map_reads(idx, *paths, sam_path=out, client=client, max_errors=1, chunk_size=13, min_insert=1,
                       max_insert=1000, **extra)
        bodies[label] = [line for line in out.read_text().splitlines() if not line.startswith("@")]
    assert (bodies["files"] == bodies["gzip"] == bodies["interleaved"] == bodies["lanes"]
            == bodies["interleaved lanes"])
    names = [line.split("\t")[0] for line in bodies["files"]]
    assert "pair0" in names and not any("/" in n for n in names)  # the /1 /2 suffixes dropped
def test_insert_size_is_estimated_from_the_first_pairs(tmp_path, client):
    """The estimate comes from the input's first ESTIMATE_PAIRS pairs, whatever the chunk size and
    the files the pairs come in (the first chunk holds them; where read groups cut them across
    chunks, they are mapped apart for it): pairs after them, of another library's inserts, change
    neither the estimate nor any record."""
    rng = np.random.default_rng(9)
    seq = "".join(rng.choice(list("ACGT"), size=30000))
    n = ESTIMATE_PAIRS + 600
    first, second, sizes = [], [], []
    for i in range(n):
        size = int(rng.normal(250, 20) if i < ESTIMATE_PAIRS else rng.normal(600, 20))
        sizes.append(size)
        at = int(rng.integers(0, len(seq) - size))
        first.append(seq[at: at + 50])
        second.append(reverse_complement(seq[at + size - 50: at + size]))
    write_fasta(tmp_path / "ref.fa", [("chr", seq)])
    write_pairs(tmp_path, first, second)
    for m in (1, 2):  # the same pairs as lanes: 3,000 pairs plain, then the rest gzip-compressed
        lines = (tmp_path / f"r{m}.fq").read_bytes().splitlines(keepends=True)
        (tmp_path / f"a{m}.fq").write_bytes(b"".join(lines[:4 * 3000]))
        (tmp_path / f"b{m}.fq.gz").write_bytes(gzip.compress(b"".join(lines[4 * 3000:])))
        # Lanes of read groups of their own, which share chunks.
        (tmp_path / f"x{m}.fq").write_bytes(b"".join(lines[:4 * 40]))
        (tmp_path / f"y{m}.fq").write_bytes(b"".join(lines[4 * 40:]))
        # A FASTA lane first: FASTQ and FASTA records share no chunk, so the first chunk holds its 40
        # pairs alone, and the estimate's pairs are mapped apart (FirstPairs).
        (tmp_path / f"x{m}.fa").write_bytes(b"".join(b">" + lines[i][1:] + lines[i + 1] for i in range(0, 4 * 40, 4)))
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=60)
    runs = {"chunks of 100": ((tmp_path / "r1.fq", tmp_path / "r2.fq"), 100),
            "chunks of 7,000": ((tmp_path / "r1.fq", tmp_path / "r2.fq"), 7000),
            "lanes": tuple([tuple(f"{tmp_path / f'a{m}.fq'},{tmp_path / f'b{m}.fq.gz'}" for m in (1, 2)), 3000]),
            "read groups": tuple([tuple(f"{tmp_path / f'x{m}.fq'},{tmp_path / f'y{m}.fq'}" for m in (1, 2)), 3000]),
            "fasta first": tuple([tuple(f"{tmp_path / f'x{m}.fa'},{tmp_path / f'y{m}.fq'}" for m in (1, 2)), 3000])}
    texts = {}
    for label, (paths, chunk_size) in runs.items():
        out = tmp_path / f"{label}.sam"
        groups = ["@RG\tID:x", "@RG\tID:y"] if label == "read groups" else None
        res = dmap.map_reads(idx, *paths, sam_path=out, client=client, chunk_size=chunk_size, read_group=groups)
        texts[label] = [line for line in out.read_text().splitlines() if not line.startswith(("@PG", "@RG"))]
    assert texts["chunks of 100"] == texts["chunks of 7,000"] == texts["lanes"]
    assert [re.sub(r"\tRG:Z:[xy]$", "", line) for line in texts["read groups"]] == texts["lanes"]
    # The same bounds, pairs, flags and places; the FASTA lane's records have QUAL '*'.
    assert [line.split("\t")[:10] for line in texts["fasta first"]] == [line.split("\t")[:10]
                                                                      for line in texts["lanes"]]
    ins = res.insert
    assert ins.estimated and 240 <= ins.median <= 260 and 15 <= ins.sd <= 25
    assert ins.low < 200 and 300 < ins.high < 500  # the first pairs' spread, not the last pairs'
    assert res.n_proper == sum(ins.low <= size <= ins.high for size in sizes) > ESTIMATE_PAIRS - 10
    header = [line for line in texts["lanes"] if line.startswith("@CO")]
    assert header == [f"@CO\t{ins.describe()}"]
    assert f"of the first {ESTIMATE_PAIRS:,}:" in header[0]
    flagstat = subprocess.run(["samtools", "flagstat", str(tmp_path / "lanes.sam")], capture_output=True,
                              text=True, check=True).stdout
    assert f"{2 * res.n_proper} + 0 properly paired" in flagstat


@pytest.mark.parametrize("copies", [False, True])
def test_pair_records_kernel_equals_python(device, monkeypatch, copies):
    """Proper pairs (with a repeat: secondary pairs), mates on two contigs, one mate unmapped, both
    unmapped: sam_records.cl writes what the Python reference writes, byte for byte; also where the
    device gets copies in pooled buffers and the records come back in pinned memory (a GPU's way)."""
    names = ["p0", "p0", "p1", "p1", "p2", "p2", "p3", "p3"]
    seqs = ["ACGTAC", "GGCATT", "ACGTAC", "TTAGGC", "ACGTAC", "", "CCCCAA", "GGTTTT"]
    fields = ReadFields.from_strings(names, seqs, ["IIIIII", "FFFFFF", "IIIIII", "FFFFFF", "IIIIII", "", "!!!!!!",
                                                   "######"])
    chunk = ReadChunk(0, fields, np.arange(256, dtype=np.uint8), "dna", paired=True)
    # read, strand, contig, position: pair 0 proper twice (mate 2 in a repeat), pair 1 on two contigs,
    # pair 2's second mate unmapped, pair 3 unmapped.
    hits = ChunkHits(np.array([0, 1, 1, 2, 3, 4]), np.array([0, 1, 1, 0, 1, 1], dtype=np.int8),
                     np.array([0, 0, 0, 0, 1, 1]), np.array([10, 150, 200, 5, 40, 70]), 8)
    cols, strings, bounds, capped = pair_chunk(chunk, hits, InsertBounds(100, 300),
                                               np.array([0, 1000, 2000]), report_all=True, max_hits=None)
    assert bounds == InsertBounds(100, 300) and capped == 0
    contigs = ["chrA", "chrB"]
    want = format_pair_records(chunk, cols, *strings, contigs, "\tRG:Z:x")
    if copies:
        monkeypatch.setattr(device, "zero_copy", False)
    with device.scratch():
        got = format_pair_records_device(device, chunk, cols, strings, contig_name_columns(contigs), "\tRG:Z:x",
                                         scratch=copies).tobytes()
    assert got.decode() == want
    # Pairs of two files in one chunk, each of its own read group.
    tails = RecordTails(("\tRG:Z:x", "\tRG:Z:lane2"), np.array([0, 0, 0, 0, 1, 1, 1, 1]))
    with device.scratch():
        got = format_pair_records_device(device, chunk, cols, strings, contig_name_columns(contigs), tails,
                                         scratch=copies).tobytes()
    assert got.decode() == format_pair_records(chunk, cols, *strings, contigs, tails)
    assert {(f[0], f[-1]) for f in sam_body(got.decode())} == {
        ("p0", "RG:Z:x"), ("p1", "RG:Z:x"), ("p2", "RG:Z:lane2"), ("p3", "RG:Z:lane2")}
    body = sam_body(want)
    assert [int(f[1]) for f in body] == [99, 355, 147, 403, 97, 145, 89, 165, 77, 141]
    assert body[0][6] == "=" and body[0][7] == body[2][3] and int(body[0][8]) == -int(body[2][8]) > 0
    assert body[4][6:9] == ["chrB", "41", "0"]
    assert body[7][2:4] == ["chrB", "71"] and body[7][6:8] == ["=", "71"]  # an unmapped mate lies at its mate
    assert body[9][2:4] == ["*", "0"] and body[9][6:8] == ["*", "0"]


@pytest.mark.skipif(not have("PicardCommandLine"), reason="Picard (Debian picard-tools) is not installed")
def test_picard_and_samtools_accept_pairs(tmp_path):
    rng = np.random.default_rng(3)
    contigs = genome(rng)
    first, second = make_pairs(rng, contigs, 50, 2)
    first[3] = ""  # an empty mate is written unmapped
    write_fasta(tmp_path / "ref.fa", contigs)
    write_pairs(tmp_path, first, second)
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-L", "60").returncode == 0
    for fmt in ("sam", "bam"):
        out = tmp_path / f"o.{fmt}"
        r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r1.fq", tmp_path / "r2.fq", "-e", "2", "-o", out,
                     "-R", "@RG\\tID:l\\tSM:s\\tPL:ILLUMINA", "--min-insert", "100", "--max-insert", "260")
        assert r.returncode == 0, r.stderr
        assert "pairs properly paired" in r.stderr
        v = subprocess.run(["PicardCommandLine", "ValidateSamFile", "-I", str(out), "-MODE", "VERBOSE",
                            "-IGNORE_WARNINGS", "true"], capture_output=True, text=True, timeout=300)
        assert v.returncode == 0 and "No errors found" in v.stdout + v.stderr, v.stdout + v.stderr
    check_mate_fields(tmp_path / "o.sam")


@pytest.mark.parametrize("case, words", [
    ("odd", ["odd number of records"]),
    ("short", ["fewer records than its mate file"]),
    ("names", ["'pair1/1' and 'other/2'", "different names"]),
    ("insert", ["--min-insert and --max-insert together"]),
    ("both", ["not both"]),
    ("lanes", ["2 files of first mates but 1 of second mates"]),
])
def test_bad_pairs_get_one_line(tmp_path, case, words):
    write_fasta(tmp_path / "ref.fa", [("chr", "ACGTTGCATGCAAGTCCGATGACTGACTAGCTAGCTAGGATCGATCGGATC")])
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-L", "20").returncode == 0
    first, second = ["GCATGCAAG", "CTAGCTAG", "GATCGATC"], ["ACTAGCTA", "CGATGACTG", "TTGCATG"]
    write_pairs(tmp_path, first, second, interleaved=True)
    write_pairs(tmp_path, first, second)
    args = {"odd": ["--interleaved"], "insert": ["--min-insert", "10"], "both": ["--interleaved"]}.get(case, [])
    reads = [tmp_path / "r1.fq", tmp_path / "r2.fq"]
    if case == "lanes":
        reads = [f"{tmp_path / 'r1.fq'},{tmp_path / 'r1.fq'}", tmp_path / "r2.fq"]
    if case == "odd":
        text = (tmp_path / "pairs.fq").read_text().splitlines(keepends=True)
        (tmp_path / "pairs.fq").write_text("".join(text[:-4]))
        reads = [tmp_path / "pairs.fq"]
    elif case == "short":
        text = (tmp_path / "r2.fq").read_text().splitlines(keepends=True)
        (tmp_path / "r2.fq").write_text("".join(text[:-4]))
    elif case == "names":
        (tmp_path / "r2.fq").write_text((tmp_path / "r2.fq").read_text().replace("@pair1/2", "@other/2"))
    out = tmp_path / "o.sam"
    assert_clean_failure(dmap_cmd("run", tmp_path / "idx", *reads, "-o", out, *args), out, *words)


def test_pairs_of_a_repeat_are_capped_and_counted():
    """A pair whose mates lie in a tandem repeat: every forward copy of mate 1 faces many reverse
    copies of mate 2.  At most ``cap`` pairs are formed, all are counted, and the pair says so."""
    copies = 30  # mate 1 forward at 0, 10, ..., mate 2 reverse at 100, 110, ... (spans 10)
    read = np.r_[np.zeros(copies, int), np.ones(copies, int), 2, 3]
    strand = np.r_[np.zeros(copies, int), np.ones(copies, int), 0, 1]
    position = np.r_[np.arange(copies) * 10, 100 + np.arange(copies) * 10, 5000, 5200]
    n = read.size
    aln = MateAlignments(read, strand, np.zeros(n, int), position, np.full(n, 10), np.zeros(n, int),
                         np.zeros(n, int), np.ones(n, bool), np.zeros(n, int))
    bounds = InsertBounds(1, 10_000)
    every = proper_pairs(aln, 2, bounds, np.array([0]))
    # mate 1 (forward) at p faces mate 2 at q when p <= q: at one position the forward mate 1 leads
    facing = sum(1 for p in range(copies) for q in range(copies) if p * 10 <= 100 + q * 10)
    assert (every.n_found[0], len(every), every.capped.tolist()) == (facing, facing + 1, [False, False])
    capped = proper_pairs(aln, 2, bounds, np.array([0]), cap=50)
    assert (capped.pair == 0).sum() == 50 and capped.n_found[0] == facing and capped.capped.tolist() == [True, False]
    assert (capped.pair == 1).sum() == 1 and capped.n_found[1] == 1


def test_interleaved_pairs_from_standard_input(tmp_path):
    """``zcat pairs.fq.gz | dmap run IDX - --interleaved``: the same records as from the file."""
    rng = np.random.default_rng(11)
    contigs = genome(rng)
    first, second = make_pairs(rng, contigs, 30, 0)
    write_fasta(tmp_path / "ref.fa", contigs)
    write_pairs(tmp_path, first, second, interleaved=True)
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-L", "60").returncode == 0
    piped = dmap_cmd("run", tmp_path / "idx", "-", "--interleaved", stdin=(tmp_path / "pairs.fq").read_text())
    from_file = dmap_cmd("run", tmp_path / "idx", tmp_path / "pairs.fq", "--interleaved")
    assert piped.returncode == from_file.returncode == 0, piped.stderr + from_file.stderr
    assert sam_body(piped.stdout) == sam_body(from_file.stdout) and len(sam_body(piped.stdout)) >= 60


def test_lists_of_pair_files_from_pipes(tmp_path):
    """``dmap run IDX @<(ls *_1.fq) @<(ls *_2.fq)``: each list is a pipe, read once, and the run
    gives the records of the same files listed by commas."""
    import shlex
    import sys

    rng = np.random.default_rng(12)
    contigs = genome(rng)
    first, second = make_pairs(rng, contigs, 40, 0)
    write_fasta(tmp_path / "ref.fa", contigs)
    write_pairs(tmp_path, first, second)
    lanes = {1: [], 2: []}
    for m in (1, 2):
        lines = (tmp_path / f"r{m}.fq").read_text().splitlines(keepends=True)
        for k in range(4):
            (tmp_path / f"l{k}_{m}.fq").write_text("".join(lines[40 * k: 40 * (k + 1)]))
            lanes[m].append(str(tmp_path / f"l{k}_{m}.fq"))
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-L", "60").returncode == 0
    listed = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} -m dmap run {tmp_path / 'idx'} "
                             + " ".join(f"@<(printf '%s\\n' {' '.join(lanes[m])})" for m in (1, 2))],
                            capture_output=True, text=True, timeout=120)
    commas = dmap_cmd("run", tmp_path / "idx", ",".join(lanes[1]), ",".join(lanes[2]))
    assert listed.returncode == commas.returncode == 0, listed.stderr + commas.stderr
    assert sam_body(listed.stdout) == sam_body(commas.stdout) and len(sam_body(listed.stdout)) >= 80


def test_max_hits_keeps_that_many_pairs_and_the_primary_first(tmp_path, client):
    idx, _, first, _ = pair_case(tmp_path, 42, 70, 2)
    counts = {}
    for hits in (None, 1):
        out = tmp_path / f"out{hits}.sam"
        dmap.map_reads(idx, tmp_path / "r1.fq", tmp_path / "r2.fq", sam_path=out, client=client, max_errors=2,
                       report_all=True, max_hits=hits, min_insert=LOW, max_insert=HIGH)
        body = sam_body(out.read_text())
        counts[hits] = {}
        for f in body:
            counts[hits][(f[0], int(f[1]) & 192)] = counts[hits].get((f[0], int(f[1]) & 192), 0) + 1
        primaries = [f for f in body if not int(f[1]) & 256]
        assert len(primaries) == 2 * len(first)  # one primary record per mate
    assert max(counts[1].values()) == 1 and max(counts[None].values()) > 1  # a repeat gave several
    assert counts[1].keys() == counts[None].keys()


def test_the_insert_line_says_whether_the_bounds_were_estimated():
    """The user's bounds, an estimate, and an estimate that found too few pairs (none at all: reads
    from another genome) each say so, on stderr and in the @CO line."""
    assert InsertBounds(100, 200).describe() == "insert size: proper pairs have inserts 100-200"
    assert InsertBounds(1, 1000, pairs=0).describe().startswith(
        f"insert size: only 0 confidently placed pairs of the first {ESTIMATE_PAIRS:,}, too few to estimate")
    assert InsertBounds(150, 450, pairs=900, median=300, sd=30).describe().startswith(
        f"insert size estimated from 900 confidently placed pairs of the first {ESTIMATE_PAIRS:,}: median 300")


@pytest.mark.parametrize("k", [0, 2])
def test_chunks_of_pairs_from_nowhere_are_written_unmapped(tmp_path, client, k):
    """Pairs from another genome: a chunk in which no mate aligns is written, each mate unmapped
    (flags 77 and 141); chunks of one pair each give the same records as one chunk of all."""
    rng = np.random.default_rng(9)
    contigs = genome(rng)
    first, second = make_pairs(rng, contigs, 4, k)
    nowhere = lambda: "".join(rng.choice(list("ACGT"), size=40))  # noqa: E731
    first, second = first + [nowhere() for _ in range(4)], second + [nowhere() for _ in range(4)]
    write_fasta(tmp_path / "ref.fa", contigs)
    write_pairs(tmp_path, first, second)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=60, block_length=400)
    bodies = []
    for chunk_size in (2, 100):
        out = tmp_path / f"out{chunk_size}.sam"
        res = dmap.map_reads(idx, tmp_path / "r1.fq", tmp_path / "r2.fq", sam_path=out, client=client,
                             max_errors=k, chunk_size=chunk_size, min_insert=LOW, max_insert=HIGH)
        samtools_quickcheck(out)
        bodies.append(sam_body(out.read_text()))
        assert res.n_reads == 16
    assert bodies[0] == bodies[1]
    flags = {f[0]: set() for f in bodies[0]}
    for f in bodies[0]:
        flags[f[0]].add(int(f[1]))
    assert all(flags[f"pair{i}"] == {77, 141} for i in range(4, 8))
    check_mate_fields(tmp_path / "out2.sam")
