"""``engine="phash"`` end to end: what it reports agrees with the FM-index engine.

The FM-index engine is itself checked against the brute-force oracle
(tests/approx); the neighborhood engine is a filter, so it must report a
subset of the same loci with the same alignments, and it must find every
read that occurs with at most E substitutions in one of its patterns
(here: reads copied exactly, at contig ends and across block edges).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from cases import make_case, written
from helpers import examples, samtools_quickcheck
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmap
from dmap.alphabet import reverse_complement

SPECS = {
    "dna": dmap.NeighborhoodSpec(seed_length=5, neighborhood_length=5, max_errors=1),
    "protein": dmap.NeighborhoodSpec(seed_length=2, neighborhood_length=3, max_errors=1),
    "text": dmap.NeighborhoodSpec(seed_length=2, neighborhood_length=3, max_errors=2),
}


def alignments(hits) -> dict:
    return {(r.read, r.strand, r.contig, r.position): (r.distance, r.cigar) for r in hits.to_pandas().itertuples()}


def run_both(tmp_path, client, contigs, reads, alphabet, k, block_length, spec, error_rate=None, **phash_options):
    """Both engines' alignments of ``reads`` within ``k`` edits, or with ``error_rate`` each read's K."""
    written(tmp_path, contigs, reads)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", alphabet=alphabet, max_query_length=80,
                           block_length=block_length, neighborhood=spec, overwrite=True)
    errors = dict(error_rate=error_rate) if error_rate else dict(max_errors=k)
    fm = dmap.map_reads(idx, tmp_path / "r.fq", client=client, report_all=True, chunk_size=17, **errors)
    ph = dmap.map_reads(idx, tmp_path / "r.fq", sam_path=tmp_path / "out.sam", client=client, report_all=True,
                        chunk_size=17, engine="phash", **errors, **phash_options)
    samtools_quickcheck(tmp_path / "out.sam")
    return alignments(fm.hits), alignments(ph.hits)


@pytest.mark.parametrize("alphabet", ["dna", "protein", "text"])
def test_phash_reports_a_subset_of_fm_with_the_same_alignments(tmp_path, client, alphabet):
    rng = np.random.default_rng(["dna", "protein", "text"].index(alphabet) + 40)
    contigs, reads = make_case(rng, alphabet, 2)
    # exact copies: at contig starts and ends, and (blocks of 150) across block edges
    exact = [seq[:30] for _, seq in contigs] + [seq[-25:] for _, seq in contigs]
    exact += [seq[at - 12 : at + 13] for _, seq in contigs for at in range(150, len(seq) - 13, 150)]
    if alphabet == "dna":
        exact = [e if i % 2 else reverse_complement(e) for i, e in enumerate(exact)]
    exact = [e for e in exact if "N" not in e.upper()]
    reads = reads + exact
    fm, ph = run_both(tmp_path, client, contigs, reads, alphabet, 2, 150, SPECS[alphabet])
    assert ph.items() <= fm.items()
    mapped = {read for read, *_ in ph}
    assert all(len(reads) - len(exact) + i in mapped for i in range(len(exact)))
    assert len(ph) >= 0.5 * len(fm)  # the filter finds most loci of these reads, not a handful


def test_phash_with_an_error_rate_reports_a_subset_of_fm(tmp_path, client):
    """Each read's K of the rate (reads of 12-60 symbols at 6%: 0-3) bounds both engines alike."""
    contigs, reads = make_case(np.random.default_rng(44), "dna", 3)
    fm, ph = run_both(tmp_path, client, contigs, reads, "dna", None, 150, SPECS["dna"], error_rate="0.06")
    assert ph.items() <= fm.items() and len(ph) >= 0.5 * len(fm)
    assert all(distance <= len(reads[read]) * 6 // 100 for (read, *_), (distance, _) in fm.items())


@settings(max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), alphabet=st.sampled_from(["dna", "protein", "text"]), k=st.integers(1, 3),
       neighborhood_length=st.integers(2, 6), stored_errors=st.integers(0, 2), block_length=st.integers(60, 900),
       delta=st.integers(1, 3), data=st.data())
def test_random_specs_report_a_subset_of_fm(tmp_path, client, seed, alphabet, k, neighborhood_length, stored_errors,
                                            block_length, delta, data):
    """Any seed and neighborhood shape, stored and searched errors, and delta: the filter reports
    only loci of the FM-index engine, with the same alignments.  Seeds are as long as an
    alphabet's table of every seed allows (at most 2**24 entries: 6 DNA symbols, 5 others)."""
    seed_length = data.draw(st.integers(1, 6 if alphabet == "dna" else 5), label="seed_length")
    errors = data.draw(st.integers(0, stored_errors), label="neighborhood_errors")
    spec = dmap.NeighborhoodSpec(seed_length=seed_length, neighborhood_length=neighborhood_length,
                                 max_errors=stored_errors)
    contigs, reads = make_case(np.random.default_rng(seed), alphabet, k, n_reads=20)
    fm, ph = run_both(Path(tempfile.mkdtemp(dir=tmp_path)), client, contigs, reads, alphabet, k, block_length, spec,
                      delta=delta, neighborhood_errors=errors)
    assert ph.items() <= fm.items()


def test_spaced_seed_delta_and_neighborhood_errors(tmp_path, client):
    rng = np.random.default_rng(7)
    contigs, reads = make_case(rng, "dna", 3, n_reads=50)
    spec = dmap.NeighborhoodSpec(seed_length=6, neighborhood_length=6, spaced_seed="###-###", max_errors=1)
    fm, ph2 = run_both(tmp_path, client, contigs, reads, "dna", 3, 400, spec, delta=2, neighborhood_errors=2)
    assert ph2.items() <= fm.items()
    res0 = dmap.map_reads(tmp_path / "idx", tmp_path / "r.fq", client=client, max_errors=3, report_all=True,
                          engine="phash", delta=2, neighborhood_errors=0)
    ph0 = alignments(res0.hits)
    assert ph0.items() <= ph2.items()  # fewer degenerated neighborhoods, fewer candidates
    assert 0 < res0.candidates["regions"] <= res0.candidates["seed hits"]


def test_engine_errors_are_clear(tmp_path, client):
    contigs, reads = make_case(np.random.default_rng(1), "dna", 1, n_reads=5)
    written(tmp_path, contigs, reads)
    plain = dmap.build_index(tmp_path / "ref.fa", tmp_path / "plain", max_query_length=80)
    with pytest.raises(dmap.DmapError, match="no neighborhood index"):
        dmap.map_reads(plain, tmp_path / "r.fq", client=client, max_errors=1, engine="phash")
    with pytest.raises(dmap.DmapError, match="only to --engine phash"):
        dmap.map_reads(plain, tmp_path / "r.fq", client=client, max_errors=1, delta=3)
    nb = dmap.build_index(tmp_path / "ref.fa", tmp_path / "nb", max_query_length=80, neighborhood=SPECS["dna"])
    for options, message in [(dict(delta=0), "--delta"), (dict(neighborhood_errors=3), "--neighborhood-errors"),
                             (dict(engine="bwt"), "unknown --engine")]:
        with pytest.raises(dmap.DmapError, match=message):
            dmap.map_reads(nb, tmp_path / "r.fq", client=client, max_errors=1, **{"engine": "phash", **options})
    with pytest.raises(dmap.InputFormatError, match="longer than --max-query-length"):
        dmap.build_index(tmp_path / "ref.fa", tmp_path / "x", max_query_length=8, neighborhood=SPECS["dna"])
    assert not (tmp_path / "x").exists()
