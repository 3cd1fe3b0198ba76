"""dmap.index.zarr_direct against zarr itself: the same values, or None."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from helpers import examples, random_contig, write_fasta
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec

import dmap
from dmap.index import zarr_direct
from dmap.index.store import BLOCK_ARRAYS

DTYPES = ["uint8", "uint32", "int64", "float32", "bool"]


def write(path, data, *, chunks, compressors=None, fill_value=0, **kwargs):
    array = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=chunks,
                              compressors=compressors, fill_value=fill_value, **kwargs)
    array[...] = data
    return str(path)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    dtype=st.sampled_from(DTYPES),
    length=st.integers(0, 300),
    chunk=st.integers(1, 120),
    compressed=st.booleans(),
    zeros=st.integers(0, 300),  # a run of fill values: Zarr writes no file for a chunk of them
    bounds=st.tuples(st.integers(-350, 350) | st.none(), st.integers(-350, 350) | st.none()),
    seed=st.integers(0, 2**32 - 1),
)
def test_reads_what_zarr_reads(tmp_path_factory, dtype, length, chunk, compressed, zeros, bounds, seed):
    data = (np.random.default_rng(seed).integers(0, 200, length) > 100) if dtype == "bool" else \
        np.random.default_rng(seed).integers(0, 200, length).astype(dtype)
    data[zeros // 2:zeros] = 0
    path = write(tmp_path_factory.mktemp("a") / "x", data, chunks=(chunk,),
                 compressors=ZstdCodec() if compressed else None)
    part = slice(*bounds)
    got = zarr_direct.read(path, part)
    expected = zarr.open_array(path, mode="r")[part]
    assert got is not None and got.dtype == expected.dtype and np.array_equal(got, expected)
    assert zarr_direct.array_info(path).nbytes == zarr.open_array(path, mode="r").nbytes


def test_what_lies_in_one_uncompressed_chunk_is_mapped_read_only(tmp_path):
    data = np.arange(1000, dtype=np.uint32)
    path = write(tmp_path / "x", data, chunks=(1000,))
    for part in [slice(None), slice(10, 20), slice(999, None)]:
        got = zarr_direct.read(path, part)
        assert np.array_equal(got, data[part]) and not got.flags.writeable
    path = write(tmp_path / "y", data, chunks=(300,))
    assert not zarr_direct.read(path, slice(300, 600)).flags.writeable
    # Across chunks of 1200 bytes (not whole pages, so they cannot lie back to back): a copy.
    assert zarr_direct.read(path, slice(299, 301)).flags.writeable
    path = write(tmp_path / "z", data, chunks=(1000,), compressors=ZstdCodec())
    assert zarr_direct.read(path).flags.writeable  # decompressed: a copy


def test_nonzero_fill_values_of_chunks_without_a_file(tmp_path):
    data = np.full(100, 7, dtype=np.int64)
    data[:10] = 1
    path = write(tmp_path / "x", data, chunks=(25,), fill_value=7)
    assert sorted(p.name for p in (tmp_path / "x" / "c").iterdir()) == ["0"]
    assert np.array_equal(zarr_direct.read(path), data)


@pytest.mark.parametrize("kind", ["gzip", "blosc", "zarr v2", "2-d", "sharded", "step", "not an array"])
def test_what_it_does_not_read_is_left_to_zarr(tmp_path, kind):
    data = np.arange(64, dtype=np.uint32)
    part = slice(None)
    if kind in ("gzip", "blosc"):
        path = write(tmp_path / "x", data, chunks=(16,), compressors=GzipCodec() if kind == "gzip" else BloscCodec())
    elif kind == "zarr v2":
        path = write(tmp_path / "x", data, chunks=(16,), zarr_format=2)
    elif kind == "2-d":
        path = write(tmp_path / "x", data.reshape(8, 8), chunks=(4, 4))
    elif kind == "sharded":
        path = write(tmp_path / "x", data, chunks=(8,), shards=(32,))
    elif kind == "step":
        path, part = write(tmp_path / "x", data, chunks=(16,)), slice(None, None, 2)
    else:
        zarr.open_group(str(tmp_path / "x"), mode="w")
        path = str(tmp_path / "x")
    assert zarr_direct.read(path, part) is None


@pytest.mark.parametrize("damage", ["cut short", "not zstd"])
def test_a_damaged_chunk_is_left_to_zarr(tmp_path, damage):
    path = write(tmp_path / "x", np.arange(64, dtype=np.uint32), chunks=(32,),
                 compressors=ZstdCodec() if damage == "not zstd" else None)
    chunk = tmp_path / "x" / "c" / "1"
    chunk.write_bytes(chunk.read_bytes()[:-4] if damage == "cut short" else b"garbage")
    assert zarr_direct.read(path) is None
    assert np.array_equal(zarr_direct.read(path, slice(0, 32)), np.arange(32))  # the other chunk is fine


def test_group_attributes(tmp_path):
    zarr.open_group(str(tmp_path / "g"), mode="w").attrs["dmap"] = {"a": [1, 2]}
    assert zarr_direct.group_attributes(str(tmp_path / "g")) == {"dmap": {"a": [1, 2]}}
    zarr.open_group(str(tmp_path / "v2"), mode="w", zarr_format=2)
    assert zarr_direct.group_attributes(str(tmp_path / "v2")) is None
    assert zarr_direct.group_attributes(str(tmp_path / "none")) is None


def test_every_array_of_an_index(tmp_path):
    """What dmap writes, this module reads: every array of an index of several blocks and contigs."""
    rng = np.random.default_rng(3)
    write_fasta(tmp_path / "ref.fa", [(f"c{i}", random_contig(rng, "dna", 300)) for i in range(3)])
    small_index_path = tmp_path / "idx"
    dmap.build_index(tmp_path / "ref.fa", small_index_path, max_query_length=30, block_length=200)
    idx = dmap.open_index(small_index_path)
    group = zarr.open_group(str(small_index_path), mode="r")
    names = [f"blocks/{b}/{name}" for b in range(idx.n_blocks) for name in BLOCK_ARRAYS]
    names += [f"blocks/{b}/reverse/{name}" for b in range(idx.n_blocks) for name in ("occ", "C")]
    for name in [*names, "reference"]:
        got = zarr_direct.read(str(small_index_path / name))
        assert got is not None and np.array_equal(got, group[name][...]), name


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(["uint8", "uint32", "int64"]), pages=st.integers(1, 3), n_chunks=st.integers(1, 5),
       tail=st.integers(1, 4096), zero_chunk=st.booleans(), bounds=st.tuples(st.floats(0, 1), st.floats(0, 1)))
def test_chunks_of_whole_pages_are_mapped_back_to_back(tmp_path_factory, dtype, pages, n_chunks, tail, zero_chunk,
                                                       bounds):
    """An index array stored as several chunk files of whole pages (as dmap writes a large reference's
    arrays: 16 M elements a chunk) is mapped as one read-only array, any slice of it, with the values
    zarr reads; a chunk of fill values only (no file) makes it a copy."""
    item = np.dtype(dtype).itemsize
    chunk = pages * 4096 // item
    data = np.random.default_rng(n_chunks).integers(1, 100, chunk * (n_chunks - 1) + tail).astype(dtype)
    if zero_chunk and n_chunks > 1:
        data[:chunk] = 0  # Zarr writes no file for it
    path = write(tmp_path_factory.mktemp("m") / "x", data, chunks=(chunk,))
    lo, hi = sorted(int(b * data.size) for b in bounds)
    for part in (slice(None), slice(lo, hi), slice(lo, None)):
        got = zarr_direct.read(path, part)
        assert np.array_equal(got, data[part]) and got.dtype == data.dtype
        start, stop, _ = part.indices(data.size)
        if got.size:  # a copy only where the slice takes elements of the chunk that has no file
            assert got.flags.writeable == (zero_chunk and n_chunks > 1 and start < min(stop, chunk))
