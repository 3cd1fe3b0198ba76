"""The exact-search kernel against the numpy backward search and a brute-force scan."""

import numpy as np
import pytest
from helpers import alphabet_for, examples, kernel_hits, single_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmap.alphabet import reverse_complement
from dmap.opencl.device import BlockText
from dmap.reads import encode_reads
from dmap.search.exact import BAD_READ, LOCATED, bad_queries, early_stop_length, plain_reads, search_block
from dmap.testing.search import brute_force_hits

dna_text = st.text(alphabet="ACGTNacgt", min_size=1, max_size=300)
dna_read = st.text(alphabet="ACGTN", min_size=1, max_size=12)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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
    assert kernel_hits(device, block, codes, alphabet, reads) == brute_force_hits([("t", text)], reads, alphabet)


@pytest.mark.parametrize("alphabet_name", ["protein", "text"])
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_kernel_equals_brute_force_other_alphabets(device, alphabet_name, data):
    symbols = "ACDEFGHIKLMNPQRSTVWYX" if alphabet_name == "protein" else "ab cd,.~EF"
    text = data.draw(st.text(alphabet=symbols, min_size=1, max_size=200))
    reads = data.draw(st.lists(st.text(alphabet=symbols, min_size=1, max_size=8), min_size=1, max_size=10))
    reads += [text[i : i + 5] for i in range(0, len(text), 37)]
    alphabet = alphabet_for(alphabet_name, [("t", text)])
    codes = alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)]
    block = single_block(codes, alphabet, data.draw(st.sampled_from(["interleaved", "bitmap"])))
    assert kernel_hits(device, block, codes, alphabet, reads) == brute_force_hits([("t", text)], reads, alphabet)


@pytest.mark.parametrize("batch", [1, 4, 16, 32])
def test_batch_sizes_agree(device, batch):
    """Mixed lengths in one batch: each query stops at its own length."""
    rng = np.random.default_rng(batch)
    text = "".join(rng.choice(list("ACGT"), size=5000))
    reads = [text[i : i + int(rng.integers(1, 40))] for i in rng.integers(0, 4900, size=101)]
    reads += [reverse_complement(r) for r in reads[:20]]
    alphabet = alphabet_for("dna", [("t", text)])
    codes = alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)]
    block = single_block(codes, alphabet)
    assert kernel_hits(device, block, codes, alphabet, reads, batch) == brute_force_hits([("t", text)], reads, alphabet)


def test_tandem_repeat_with_hundreds_of_hits(device):
    text = "ACG" * 400 + "T" + "CA" * 300
    reads = ["ACGACGACG", "CACACA", "GTGTG", "CGT", "ACGTCA"]
    alphabet = alphabet_for("dna", [("t", text)])
    codes = alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)]
    block = single_block(codes, alphabet, sa_rate=32)
    got = kernel_hits(device, block, codes, alphabet, reads)
    assert got == brute_force_hits([("t", text)], reads, alphabet)
    assert len(got) > 600


def test_early_stop_on_long_unique_reads(device):
    """Reads far longer than the early-stop suffix, from both strands, some with one mismatch near
    their start (the part only the text comparison sees), some crossing a contig junction or an N."""
    rng = np.random.default_rng(7)
    contigs = [("a", "".join(rng.choice(list("ACGT"), size=3000))), ("b", "".join(rng.choice(list("ACGT"), size=2000)))]
    contigs[1] = ("b", contigs[1][1][:500] + "N" + contigs[1][1][501:])
    text = contigs[0][1] + "$" + contigs[1][1]
    reads = []
    for _ in range(300):
        i = int(rng.integers(0, len(text) - 100))
        r = text[i : i + int(rng.integers(20, 100))]
        if rng.random() < 0.3:  # a mismatch in the first symbols
            k = int(rng.integers(0, 5))
            r = r[:k] + "ACGT"[("ACGT".index(r[k]) + 1) % 4 if r[k] in "ACGT" else 0] + r[k + 1:]
        reads.append(reverse_complement(r) if rng.random() < 0.5 else r)
    reads = [r.replace("$", "A") for r in reads]
    alphabet = alphabet_for("dna", contigs)
    codes = np.concatenate([alphabet.reference_table[np.frombuffer(s.encode(), np.uint8)] for _, s in contigs[:1]]
                           + [np.array([alphabet.separator], np.uint8)]
                           + [alphabet.reference_table[np.frombuffer(contigs[1][1].encode(), np.uint8)]])
    block = single_block(codes, alphabet, sa_rate=8)
    assert early_stop_length(block.shape.n_rows, 4) < 20
    got = kernel_hits(device, block, codes, alphabet, reads)
    assert got == brute_force_hits([("t", text.replace("$", "N"))], reads, alphabet)
    assert len(got) > 150
    _, offsets, lengths, raw = encode_reads(reads, alphabet, reads)
    found = search_block(device, device.upload_block(block), raw, offsets, lengths, 2, table=alphabet.read_table,
                         text=BlockText(codes, device.upload(codes), codes.nbytes))
    assert (found[..., 1] == LOCATED).sum() > 100  # the early stop did the work


@pytest.mark.parametrize("length", [15, 16, 17, 31, 32, 33, 48, 100])
def test_plain_reads_compared_sixteen_bases_at_a_time(device, length):
    """Plain reads (only A, C, G, T, either case) are checked and compared with the text 16 bases
    at a time: one mismatch at any position, on either strand, must still lose the hit, and reads
    with an N or shorter than 16 bases take the table one symbol at a time."""
    rng = np.random.default_rng(length)
    text = "".join(rng.choice(list("ACGT"), size=4000))
    reads = []
    for i in rng.integers(0, len(text) - length, size=6):
        read = text[i : i + length]
        n_at = read.index("A") if "A" in read[: length - 10] else 0  # an N read as A would match
        reads += [read, read.lower(), read[:n_at] + "N" + read[n_at + 1 :]]
        for k in range(length):  # the one mismatch, at each position
            reads.append(read[:k] + "ACGT"[("ACGT".index(read[k]) + 1 + k % 3) % 4] + read[k + 1 :])
    reads += [reverse_complement(r) for r in reads]
    alphabet = alphabet_for("dna", [("t", text)])
    codes = alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)]
    block = single_block(codes, alphabet, sa_rate=4)
    got = kernel_hits(device, block, codes, alphabet, reads)
    assert got == brute_force_hits([("t", text)], reads, alphabet)
    assert len(got) >= 4 * 6  # each read and its lowercase copy, on both strands
    assert plain_reads(alphabet.read_table, 4)
    assert not plain_reads(None, 4) and not plain_reads(alphabet_for("protein", [("t", "ACDE")]).read_table, 22)


def test_unknown_symbol_found_on_the_device(device):
    """A read with a byte outside the alphabet gets BAD_READ on both strands; N and other letters are N."""
    alphabet = alphabet_for("dna", [("t", "ACGTACGT")])
    block = single_block(alphabet.reference_table[np.frombuffer(b"ACGTACGT", np.uint8)], alphabet)
    raw = np.frombuffer(b"ACGTNNAC7GTACJT", np.uint8)
    found = search_block(device, device.upload_block(block), raw, np.array([0, 6, 11], np.uint32),
                         np.array([6, 5, 4], np.uint32), 2, table=alphabet.read_table)
    assert bad_queries(found.reshape(-1, 2)).tolist() == [2]  # read 1's forward strand
    assert (found[0] != BAD_READ).all() and (found[2] != BAD_READ).all()
    assert found[1, 1, 0] == found[1, 1, 1]  # its reverse strand: no match
