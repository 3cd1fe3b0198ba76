"""Building an index: default block lengths, the memory check, and blocks sorted in parallel."""

from __future__ import annotations

import importlib.util
import json
import threading

import numpy as np
import pytest
from helpers import random_contig, write_fasta

import dmap
from dmap.host import MemoryBudget
from dmap.index import build, sizes
from dmap.index.occ import occ_bytes_per_symbol


@pytest.mark.parametrize("alphabet,sigma,expected", [("dna", 4, 1 << 29), ("protein", 22, 1 << 28),
                                                     ("text", 64, 1 << 26), ("text", 95, 1 << 26)])
def test_default_blocks_keep_the_occurrence_table_within_one_device_buffer(tmp_path, alphabet, sigma, expected):
    b = sizes.default_block_length(sigma, 1)
    rows = b + sizes.MAX_QUERY_LENGTH  # the longest overlap, and the sentinel's row
    assert b == expected and rows * occ_bytes_per_symbol(sigma, 1) <= sizes.MAX_DEVICE_BUFFER
    assert b == sizes.LONGEST_DEFAULT_BLOCK or (rows + b) * occ_bytes_per_symbol(sigma, 1) > sizes.MAX_DEVICE_BUFFER
    if alphabet != "text":  # a text index's sigma is the symbols its reference holds
        write_fasta(tmp_path / "ref.fa", [("a", "ACDEFGHIKLMNPQRSTVWY" if alphabet == "protein" else "ACGT")])
        assert dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", alphabet=alphabet).meta.block_length == b


def test_a_block_too_large_for_the_memory_is_refused_before_sorting(tmp_path, monkeypatch):
    write_fasta(tmp_path / "ref.fa", [("a", "ACGT" * 1000)])
    machine = sizes.memory_budget()
    monkeypatch.setattr(sizes, "memory_budget", lambda: MemoryBudget(machine.total, 10 * 4000))  # 10 bytes a symbol
    expected = r"block of 4000 symbols needs about 62.5 KiB of memory, but 39.1 KiB is available; .*, e.g. 1024$"
    with pytest.raises(dmap.InputFormatError, match=expected):
        dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.fa"]  # nothing half-written
    monkeypatch.setattr(sizes, "memory_budget", lambda: MemoryBudget(machine.total, 20 * 4000))
    assert dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx").n_blocks == 1



def _arrays(path) -> dict[str, bytes]:
    """Every file of an index folder, but the build's time in its metadata."""
    files = {}
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        data = f.read_bytes()
        if f.name == "zarr.json" and f.parent == path:
            meta = json.loads(data)
            meta["attributes"]["dmap"]["created_by"] = ""
            data = json.dumps(meta).encode()
        files[str(f.relative_to(path))] = data
    return files


@pytest.mark.parametrize("alphabet", ["dna", "protein"])
def test_blocks_sorted_in_parallel_make_the_index_one_thread_makes(tmp_path, alphabet):
    """Every array, checksum and metadata field the same, byte for byte, with 1, 2 or 5 sorts at
    once (more than the jobs of this reference: 2 per block), neighborhoods included."""
    rng = np.random.default_rng(3)
    write_fasta(tmp_path / "ref.fa", [(f"c{i}", random_contig(rng, alphabet, n)) for i, n in enumerate([700, 90, 450])])
    built = {}
    for threads in (1, 2, 5):
        out = tmp_path / f"t{threads}"
        nb = dmap.NeighborhoodSpec(4, 3, None, 1) if alphabet == "dna" else None
        idx = dmap.build_index(tmp_path / "ref.fa", out, alphabet=alphabet, block_length=300, max_query_length=40,
                               threads=threads, neighborhood=nb)
        assert idx.n_blocks == 5
        built[threads] = _arrays(out)
    assert built[1] == built[2] == built[5]
    assert any("/reverse/" in name for name in built[1])
    assert any("/neighborhood/" in name for name in built[1]) == (alphabet == "dna")


def test_sorts_run_at_once_as_the_memory_holds(tmp_path, monkeypatch):
    write_fasta(tmp_path / "ref.fa", [("a", "ACGT" * 1000)])
    machine = sizes.memory_budget()
    per_block = sizes.build_bytes_per_symbol(4, 1) * 1000
    for available, parallel in [(per_block, 1), (2.5 * per_block, 2), (100 * per_block, 8)]:
        monkeypatch.setattr(sizes, "memory_budget", lambda a=available: MemoryBudget(machine.total, int(a)))
        assert sizes.parallel_sorts(8, 10, 1000, sizes.build_bytes_per_symbol(4, 1)) == parallel
    assert sizes.parallel_sorts(8, 3, 1000, 16) == 3  # no more than the jobs
    with pytest.raises(dmap.InputFormatError, match="--threads must be at least 1, not 0"):
        dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", threads=0)


def test_a_failed_sort_leaves_no_index_and_no_thread_writing(tmp_path, monkeypatch):
    """A job that fails stops the build with its error: the jobs not started are dropped, those
    running finish before the index's folder is removed, and nothing is left."""
    write_fasta(tmp_path / "ref.fa", [("a", "ACGT" * 500)])
    reverse = build.index_reverse_block
    started = []

    def failing(text, *args):
        started.append(text.size)
        if len(started) == 2:
            raise MemoryError("no room to sort")
        return reverse(text, *args)

    monkeypatch.setattr(build, "index_reverse_block", failing)
    with pytest.raises(MemoryError, match="no room to sort"):
        dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", block_length=100, max_query_length=10, threads=2)
    assert len(started) < 20  # the jobs after the failure were dropped
    assert not [t for t in threading.enumerate() if t.name.startswith("dmap-index")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.fa"]


@pytest.mark.parametrize("symbols,rate", [(1, 1), (1 << 26, 1), ((1 << 26) + 1, 2), (100_000_000, 2),
                                          (1 << 28, 4), (1 << 29, 8), (1 << 30, 8), (3_100_000_000, 8)])
def test_default_sa_sample_rate_keeps_every_value_of_small_references(symbols, rate):
    assert sizes.default_sa_sample_rate(symbols) == rate
    # Within the budget, or at the largest default rate.
    assert 4 * symbols <= sizes.SA_SAMPLE_BUDGET * rate or rate == sizes.MAX_DEFAULT_SA_SAMPLE_RATE
    assert rate == 1 or 4 * symbols > sizes.SA_SAMPLE_BUDGET * (rate // 2)  # and no sparser than it needs


def test_the_sa_sample_rate_is_recorded_and_an_explicit_one_kept(tmp_path):
    write_fasta(tmp_path / "ref.fa", [("a", "ACGTTGCA" * 100)])
    assert dmap.build_index(tmp_path / "ref.fa", tmp_path / "default").meta.sa_sample_rate == 1
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "sparse", sa_sample_rate=16)
    assert idx.meta.sa_sample_rate == 16 and idx.load_block(0).sa_samples.size == -(-(800 + 1) // 16)


def test_a_reference_url_is_read_as_its_file(tmp_path):
    """A reference given as a URL (fsspec: a web server's http://, gzip or not) builds the index its
    file builds: the same reference, contigs and checksums."""
    import gzip

    from helpers import http_server

    write_fasta(tmp_path / "ref.fa", [("c1", "ACGTTGCA" * 40), ("c2", "GGATCCAT" * 25)])
    (tmp_path / "ref.fa.gz").write_bytes(gzip.compress((tmp_path / "ref.fa").read_bytes()))
    want = dmap.build_index(tmp_path / "ref.fa", tmp_path / "local", max_query_length=20, progress=False).meta
    with http_server(tmp_path) as base:
        for name in ("ref.fa", "ref.fa.gz"):
            got = dmap.build_index(f"{base}/{name}", tmp_path / name.replace(".", "_"), max_query_length=20,
                                   progress=False).meta
            assert got.contigs.names == want.contigs.names and got.checksums == want.checksums, name


@pytest.mark.parametrize("command", ["build", "open"])
def test_an_index_url_is_one_clear_error(tmp_path, monkeypatch, command):
    """An index is built on a file system: building one at a URL is refused in one line, and does
    not write a folder named after it ('s3:/bucket/...') under the working directory.  Opening
    one that this host cannot read (s3fs not installed) is one line too (dmap.index.fetch)."""
    write_fasta(tmp_path / "ref.fa", [("c1", "ACGTTGCA" * 40)])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DMAP_INDEX_CACHE", str(tmp_path / "cache"))
    says = "'s3://bucket/x.dmap' is a URL; dmap writes" if command == "build" else "'s3://bucket/x.dmap' cannot be"
    with pytest.raises(dmap.errors.IndexFormatError, match=says):
        if command == "build":
            dmap.build_index(tmp_path / "ref.fa", "s3://bucket/x.dmap", progress=False)
        else:
            pytest.importorskip("fsspec")
            if importlib.util.find_spec("s3fs") is not None:
                pytest.skip("s3fs is installed: the URL would be fetched")
            dmap.open_index("s3://bucket/x.dmap")
    assert not (tmp_path / "s3:").exists()
