"""Building an index: default block lengths and the memory check."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import write_fasta

import dmap
from dmap.host import MemoryBudget
from dmap.index import sizes
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



@pytest.mark.parametrize("symbols,rate", [(1, 1), (1 << 26, 1), ((1 << 26) + 1, 2), (100_000_000, 2),
                                          (1 << 28, 4), (1 << 29, 8), (1 << 30, 16), (3_100_000_000, 16)])
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
