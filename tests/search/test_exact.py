"""The exact-search kernel against the numpy backward search and a brute-force scan."""

import numpy as np
import pytest
from conftest import alphabet_for, single_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmap.alphabet import reverse_complement
from dmap.fastx import encode_reads
from dmap.locate import expand_intervals, locate_rows, locate_rows_numpy
from dmap.search.exact import search_block
from dmap.search.reference import backward_search_numpy, brute_force_hits


def kernel_hits(device, block, alphabet, reads, batch=16):
    codes, offsets, lengths, _ = encode_reads(reads, alphabet, reads)
    n_strands = 2 if alphabet.has_reverse_complement else 1
    dblock = device.upload_block(block)
    intervals = search_block(device, dblock, codes, offsets, lengths, n_strands, batch=batch)
    assert (intervals == backward_search_numpy(block, codes, offsets, lengths, n_strands)).all()
    query, rows = expand_intervals(intervals.reshape(-1, 2))
    positions = locate_rows(device, dblock, rows)
    assert (positions == locate_rows_numpy(block, rows)).all()
    return {(int(q) // n_strands, "t", int(p), int(q) % n_strands) for q, p in zip(query, positions)}


dna_text = st.text(alphabet="ACGTNacgt", min_size=1, max_size=300)
dna_read = st.text(alphabet="ACGTN", min_size=1, max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=dna_text, reads=st.lists(dna_read, min_size=1, max_size=20), data=st.data())
def test_kernel_equals_brute_force_dna(device, text, reads, data):
    # Half the reads are substrings of the text, to exercise real hits.
    for k in range(len(reads) // 2):
        i = data.draw(st.integers(0, len(text) - 1))
        j = data.draw(st.integers(i + 1, min(len(text), i + 12)))
        reads[k] = text[i:j].upper()
    alphabet = alphabet_for("dna", [("t", text)])
    codes = alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)]
    layout = data.draw(st.sampled_from(["interleaved", "bitmap"]))
    block = single_block(codes, alphabet, layout, sa_rate=data.draw(st.integers(1, 9)))
    assert kernel_hits(device, block, alphabet, reads) == brute_force_hits([("t", text)], reads, alphabet)


@pytest.mark.parametrize("alphabet_name", ["protein", "text"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_kernel_equals_brute_force_other_alphabets(device, alphabet_name, data):
    symbols = "ACDEFGHIKLMNPQRSTVWYX" if alphabet_name == "protein" else "ab cd,.~EF"
    text = data.draw(st.text(alphabet=symbols, min_size=1, max_size=200))
    reads = data.draw(st.lists(st.text(alphabet=symbols, min_size=1, max_size=8), min_size=1, max_size=10))
    reads += [text[i : i + 5] for i in range(0, len(text), 37)]
    alphabet = alphabet_for(alphabet_name, [("t", text)])
    codes = alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)]
    block = single_block(codes, alphabet, data.draw(st.sampled_from(["interleaved", "bitmap"])))
    assert kernel_hits(device, block, alphabet, reads) == brute_force_hits([("t", text)], reads, alphabet)


@pytest.mark.parametrize("batch", [1, 4, 16, 32])
def test_batch_sizes_agree(device, batch):
    """Mixed lengths in one batch: each query stops at its own length."""
    rng = np.random.default_rng(batch)
    text = "".join(rng.choice(list("ACGT"), size=5000))
    reads = [text[i : i + int(rng.integers(1, 40))] for i in rng.integers(0, 4900, size=101)]
    reads += [reverse_complement(r) for r in reads[:20]]
    alphabet = alphabet_for("dna", [("t", text)])
    block = single_block(alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)], alphabet)
    assert kernel_hits(device, block, alphabet, reads, batch) == brute_force_hits([("t", text)], reads, alphabet)


def test_tandem_repeat_with_hundreds_of_hits(device):
    text = "ACG" * 400 + "T" + "CA" * 300
    reads = ["ACGACGACG", "CACACA", "GTGTG", "CGT", "ACGTCA"]
    alphabet = alphabet_for("dna", [("t", text)])
    block = single_block(alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)], alphabet, sa_rate=32)
    got = kernel_hits(device, block, alphabet, reads)
    assert got == brute_force_hits([("t", text)], reads, alphabet)
    assert len(got) > 600
