"""Cases for approximate mapping tests (both engines): reads with planted
edits, the brute-force oracle's loci, and the loci dmap reported."""

from __future__ import annotations

import re

import numpy as np
from helpers import alphabet_for, random_contig, write_fasta, write_fastq

from dmap.alphabet import reverse_complement
from dmap.io.fastx import iter_contigs
from dmap.testing.approx import brute_force_loci

SYMBOLS = {"dna": "ACGT", "protein": "ACDEFGHIKLMNPQRSTVWY", "text": "abcdefghij ,.ABC"}


def planted(rng, seq: str, n_edits: int, symbols: str, where: str = "anywhere") -> str:
    """``seq`` with ``n_edits`` random substitutions/insertions/deletions (at its ends with ``where='ends'``)."""
    s = list(seq)
    for _ in range(n_edits):
        if where == "ends":
            at = int(rng.choice([0, 1, len(s) - 1, len(s)]))
        else:
            at = int(rng.integers(0, len(s) + 1))
        at = min(at, len(s))
        kind = int(rng.integers(3))
        if kind == 0 and at < len(s):
            s[at] = str(rng.choice(list(symbols)))
        elif kind == 1:
            s.insert(at, str(rng.choice(list(symbols))))
        elif at < len(s) and len(s) > 2:
            del s[at]
    return "".join(s)


def make_case(rng, alphabet: str, k: int, n_reads: int = 40):
    contigs = [(f"c{i}", random_contig(rng, alphabet, int(rng.integers(200, 1200)))) for i in range(3)]
    symbols = SYMBOLS[alphabet]
    reads = []
    for i in range(n_reads):
        _, seq = contigs[int(rng.integers(len(contigs)))]
        m = int(rng.integers(max(k + 2, 12), 60))
        kind = i % 5
        at = {0: 0, 1: max(0, len(seq) - m)}.get(kind, int(rng.integers(0, max(1, len(seq) - m))))
        r = seq[at : at + m]
        if kind == 4:
            r = "".join(rng.choice(list(symbols), size=m))  # most likely nowhere
        r = planted(rng, r, int(rng.integers(0, k + 2)), symbols, "ends" if i % 3 == 0 else "anywhere")
        if alphabet == "dna" and i % 2:
            r = reverse_complement(r)
        if alphabet == "dna" and i % 11 == 4:
            r = r[:3] + "N" + r[4:]
        reads.append(r.upper() if alphabet == "dna" else r)
    return contigs, reads


def oracle(contigs, reads, alphabet, k):
    """The oracle's loci of ``reads`` within ``k`` edits: one K for all, or a sequence of each read's."""
    alpha = alphabet_for(alphabet, contigs)
    ref = [alpha.reference_table[np.frombuffer(s.encode(), np.uint8)] for _, s in contigs]
    pats = []
    n_strands = alpha.n_strands
    for r in reads:
        c = alpha.read_table[np.frombuffer(r.encode(), np.uint8)]
        pats.append(c)
        if n_strands == 2:
            pats.append(alpha.complement_codes(c[::-1]))
    ks = np.broadcast_to(np.asarray(k), (len(reads),))
    loci = brute_force_loci(ref, pats, alpha.sigma, np.repeat(ks, n_strands))
    # reads of at most K symbols align everywhere; dmap reports them unmapped
    return {lc for lc in loci if len(reads[lc[0] // n_strands]) > ks[lc[0] // n_strands]}, ref, pats, n_strands, alpha


def found(hits, contigs, n_strands):
    names = [c for c, _ in contigs]
    out = set()
    for row in hits.to_pandas().itertuples():
        span = sum(int(n) for n, op in re.findall(r"(\d+)([MD=X])", row.cigar))
        out.add((row.read * n_strands + (row.strand == "-"), names.index(row.contig), row.position + span - 1,
                 row.distance, row.position, span))
    return out


def written(tmp_path, contigs, reads):
    """Write the reference and reads; the contigs as dmap reads them back (FASTA drops trailing spaces of lines)."""
    write_fasta(tmp_path / "ref.fa", contigs)
    write_fastq(tmp_path / "r.fq", reads)
    return [(name, seq.decode("latin-1")) for name, seq in iter_contigs(tmp_path / "ref.fa")]


