"""The k-mer interval table against numpy, and the search with it against the search without."""

import numpy as np
import pytest
from helpers import alphabet_for, examples, single_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmap.opencl.device import BlockText
from dmap.reads import encode_reads
from dmap.search.exact import early_stop_length, search_block
from dmap.search.kmers import ENTRY_BYTES, build_kmer_table, kmer_depth, kmer_table_numpy, level_offset
from dmap.testing.search import backward_search_numpy


def table_on_host(device, table):
    out = np.empty((table.nbytes // ENTRY_BYTES, 2), dtype=np.uint32)
    device.cl.enqueue_copy(device.queue, out, table.buffer)
    return out


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_table_equals_numpy(device, data):
    """Every level, dead intervals included, for DNA with N runs and contig separators, and other alphabets."""
    name = data.draw(st.sampled_from(["dna", "protein", "text"]))
    symbols = {"dna": "ACGTNacgt", "protein": "ACDEFGHIKLMNPQRSTVWYX", "text": "ab cd,.~"}[name]
    contigs = [(f"c{i}", data.draw(st.text(alphabet=symbols, min_size=1, max_size=400)))
               for i in range(data.draw(st.integers(1, 3)))]
    alphabet = alphabet_for(name, contigs)
    parts = []
    for _, s in contigs:
        parts += [alphabet.reference_table[np.frombuffer(s.encode(), np.uint8)], np.array([alphabet.separator],
                                                                                          np.uint8)]
    codes = np.concatenate(parts[:-1])
    block = single_block(codes, alphabet, data.draw(st.sampled_from(["interleaved", "bitmap"])))
    depth = data.draw(st.integers(0, 5 if alphabet.sigma <= 4 else 2))
    table = build_kmer_table(device, device.upload_block(block), depth)
    assert table.depth == depth and table.nbytes == level_offset(depth + 1, alphabet.sigma) * ENTRY_BYTES
    assert (table_on_host(device, table) == kmer_table_numpy(block, depth)).all()


def test_depth_follows_the_block_and_the_byte_limit():
    assert level_offset(0, 4) == 0 and level_offset(3, 4) == 1 + 4 + 16
    # Half the occ's bytes (1 byte per row for DNA): E. coli's 4.9M rows take depth 8 (0.7 MiB; 9 is 2.7 MiB),
    # 100 Mbp depth 11 (45 MiB), 1 Gbp is held to 64 MiB (11 as well).
    assert [kmer_depth(n, 4) for n in (4_938_921, 100_000_004, 10**9)] == [8, 11, 11]
    assert kmer_depth(300, 4, max_bytes=1 << 20) == 4  # log4(300): longer strings mostly occur once or never
    assert kmer_depth(300, 4, max_bytes=level_offset(3, 4) * ENTRY_BYTES) == 2
    assert kmer_depth(300, 4) == 1 and kmer_depth(2, 4) == 0 and kmer_depth(10**6, 1) == 0
    assert kmer_depth(10**8, 24) == 5  # protein: 63 MiB, within MAX_TABLE_BYTES


@pytest.mark.parametrize("depth", [1, 3, 6, 11])
def test_search_with_the_table_equals_the_search_without(device, depth):
    """Reads shorter and longer than the table, with an N at every position of their last
    symbols, on both strands; a table deeper than the early stop's suffix is cut to below it."""
    rng = np.random.default_rng(depth)
    text = "".join(rng.choice(list("ACGT"), size=3000)) + "ACGT" * 50
    reads = [text[i : i + int(n)] for i, n in zip(rng.integers(0, 2900, size=80), rng.integers(1, 40, size=80))]
    reads += ["ACGT" * 6, "AC", "A", "TTTTTTTTTTTTTTTT"]
    for k in range(1, 15):
        read = text[100:130]
        reads.append(read[: len(read) - k] + "N" + read[len(read) - k + 1 :])
    alphabet = alphabet_for("dna", [("t", text)])
    codes = alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)]
    block = single_block(codes, alphabet)
    dblock = device.upload_block(block)
    table = build_kmer_table(device, dblock, depth)
    read_codes, offsets, lengths, raw = encode_reads(reads, alphabet, reads)
    want = backward_search_numpy(block, read_codes, offsets, lengths, 2)
    assert (search_block(device, dblock, read_codes, offsets, lengths, 2, kmers=table) == want).all()
    assert (search_block(device, dblock, raw, offsets, lengths, 2, table=alphabet.read_table, kmers=table)
            == want).all()
    assert (want[..., 1] > want[..., 0]).sum() > 80
    text_on_device = BlockText(codes, device.upload(codes), codes.nbytes)
    assert (depth >= early_stop_length(block.shape.n_rows, 4)) == (depth == 11)  # 11: cut to below the stop
    stopped = search_block(device, dblock, raw, offsets, lengths, 2, table=alphabet.read_table, text=text_on_device)
    assert (search_block(device, dblock, raw, offsets, lengths, 2, table=alphabet.read_table, text=text_on_device,
                         kmers=table) == stopped).all()
