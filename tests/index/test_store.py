"""Index metadata: which format versions open, and what a reader refuses; positions to contigs."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import zarr
from helpers import examples, write_fasta
from hypothesis import given, settings
from hypothesis import strategies as st

import dmap
from dmap.index.store import FORMAT_VERSION, contig_of


@pytest.fixture()
def index_path(tmp_path):
    write_fasta(tmp_path / "ref.fa", [("a", "ACGTACGGTACCGATGCATGCAGTCAGTACGATCGATCAGCTAGCTAGCATCGACT")])
    dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=30,
                     neighborhood=dmap.NeighborhoodSpec(seed_length=3, neighborhood_length=4))
    return tmp_path / "idx"


def edit_meta(path, **changes):
    group = zarr.open_group(str(path), mode="r+")
    meta = dict(group.attrs["dmap"])
    for key, value in changes.items():
        if isinstance(value, dict):
            meta[key] = {**meta[key], **value}
        else:
            meta[key] = value
    group.attrs["dmap"] = meta


def test_current_and_versions_2_to_4_open(index_path):
    idx = dmap.open_index(index_path)
    assert idx.meta.format_version == FORMAT_VERSION == 5 and idx.load_reverse(0)["occ"].size
    contigs = idx.meta.contigs
    assert (contigs.names, contigs.lengths.tolist(), contigs.offsets.tolist()) == (["a"], [56], [0])
    meta = dict(zarr.open_group(str(index_path), mode="r").attrs["dmap"])
    # Versions up to 4 list the contigs in the metadata, and have no contigs/* arrays.
    assert "contigs" not in meta
    meta = {**meta, "contigs": [{"name": "a", "length": 56, "offset": 0}],
            "checksums": {k: v for k, v in meta["checksums"].items() if not k.startswith("contigs/")}}
    zarr.open_group(str(index_path), mode="r+").attrs["dmap"] = {**meta, "format_version": 4}
    shutil.rmtree(index_path / "contigs")
    assert dmap.open_index(index_path).meta.contigs == contigs
    meta.pop("reverse_index")  # a version-3 index: no reversed-text occ
    zarr.open_group(str(index_path), mode="r+").attrs["dmap"] = {**meta, "format_version": 3}
    idx = dmap.open_index(index_path)
    with pytest.raises(dmap.IndexFormatError, match="no reverse-text index.*rebuild"):
        idx.load_reverse(0)
    meta.pop("neighborhood")  # a version-2 index: the FM-index alone
    zarr.open_group(str(index_path), mode="r+").attrs["dmap"] = {**meta, "format_version": 2}
    idx = dmap.open_index(index_path)
    assert idx.neighborhood_params is None and idx.load_block(0).occ.size


def test_other_versions_are_refused_with_a_fix(index_path):
    edit_meta(index_path, format_version=1)
    with pytest.raises(dmap.IndexFormatError, match="version 1.*rebuild"):
        dmap.open_index(index_path)


@pytest.mark.parametrize("contigs", [[{"name": "a", "length": "many", "offset": 0}], [{"name": "a"}], None])
def test_damaged_contigs_in_the_metadata_are_one_clear_error(index_path, contigs):
    """A version-4 index lists its contigs in the metadata."""
    edit_meta(index_path, contigs=contigs, format_version=4)
    with pytest.raises(dmap.IndexFormatError, match="damaged metadata"):
        dmap.open_index(index_path)


@pytest.mark.parametrize("name", ["names", "lengths"])  # one contig's offsets, [0], are Zarr's fill: no chunk file
def test_a_damaged_contigs_array_is_a_damaged_index(index_path, name):
    chunk = index_path / "contigs" / name / "c" / "0"
    data = bytearray(chunk.read_bytes())
    data[0] ^= 1
    chunk.write_bytes(bytes(data))
    with pytest.raises(dmap.IndexFormatError, match=f"damaged: checksum of contigs/{name} does not match"):
        dmap.open_index(index_path)


def test_neighborhood_of_another_hash_function_is_refused(index_path):
    edit_meta(index_path, neighborhood={"hash_function": "jenkins-2mix"})
    with pytest.raises(dmap.IndexFormatError, match="jenkins-2mix.*rebuild"):
        _ = dmap.open_index(index_path).neighborhood_params


def test_blake2b_checksums_of_older_indexes_are_still_verified(tmp_path, monkeypatch):
    from dmap.index import build, store

    write_fasta(tmp_path / "ref.fa", [("a", "ACGTACGGTACCGATGCATGCAGTCAGTACGATCG" * 3)])
    with monkeypatch.context() as m:  # an index as dmap wrote them before CRC-32
        m.setattr(build, "checksum", lambda a: store.checksum(a, "blake2b"))
        dmap.build_index(tmp_path / "ref.fa", tmp_path / "old", max_query_length=30, block_length=40)
    old = dmap.open_index(tmp_path / "old")
    assert {c.partition(":")[0] for c in old.meta.checksums.values()} == {"blake2b"}
    assert "(blake2b)" in old.describe()
    for b in range(old.n_blocks):  # every array and text slice verifies
        old.load_block(b), old.block_text(b), old.load_reverse(b)
    new = dmap.build_index(tmp_path / "ref.fa", tmp_path / "new", max_query_length=30, block_length=40)
    assert {c.partition(":")[0] for c in new.meta.checksums.values()} == {"crc32"}
    text = old.meta.checksums["blocks/1/text"]
    edit_meta(tmp_path / "old", checksums={"blocks/1/text": text[:-1] + ("0" if text[-1] != "0" else "1")})
    with pytest.raises(dmap.IndexFormatError, match="damaged: checksum of blocks/1/text"):
        dmap.open_index(tmp_path / "old").block_text(1)
    edit_meta(tmp_path / "old", checksums={"blocks/1/text": "md5:00"})
    with pytest.raises(dmap.IndexFormatError, match="damaged: checksum of blocks/1/text"):
        dmap.open_index(tmp_path / "old").block_text(1)


def test_uncompressed_arrays_are_mapped_from_their_chunk_files(index_path):
    from dmap.index.store import BLOCK_ARRAYS

    idx = dmap.open_index(index_path)
    group = zarr.open_group(str(index_path), mode="r")
    block = idx.load_block(0)
    for name in BLOCK_ARRAYS:
        mapped, read = getattr(block, name), group[f"blocks/0/{name}"][...]
        assert mapped.dtype == read.dtype and (mapped == read).all()
        # The file's page cache, not a copy; Zarr writes no file for a chunk
        # of fill values (zeros), and reads those.
        on_disk = (index_path / "blocks" / "0" / name / "c" / "0").exists()
        assert mapped.flags.writeable != on_disk
    assert not block.occ.flags.writeable and not block.sa_samples.flags.writeable
    # So is a block's text, where it lies in one chunk of the reference.
    text = idx.block_text(0)
    assert not text.flags.writeable and (text == group["reference"][:text.size]).all()


def test_a_chunk_file_cut_short_is_a_damaged_index(index_path):
    chunk = index_path / "blocks" / "0" / "sa_samples" / "c" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-4])
    with pytest.raises(dmap.IndexFormatError, match="damaged"):
        dmap.open_index(index_path).load_block(0)


@pytest.mark.parametrize("damage", ["flip", "remove"])
def test_a_damaged_or_missing_chunk_file_fails_its_checksum(index_path, damage):
    chunk = index_path / "blocks" / "0" / "occ" / "c" / "0"
    if damage == "flip":
        data = bytearray(chunk.read_bytes())
        data[len(data) // 2] ^= 0xFF
        chunk.write_bytes(bytes(data))
    else:
        chunk.unlink()  # Zarr reads the fill value
    with pytest.raises(dmap.IndexFormatError, match="damaged: checksum of blocks/0/occ"):
        dmap.open_index(index_path).load_block(0)


def test_a_zstd_compressed_reference_of_older_indexes_is_still_read(index_path):
    from zarr.codecs import ZstdCodec

    idx = dmap.open_index(index_path)
    texts = [idx.block_text(b).copy() for b in range(idx.n_blocks)]
    group = zarr.open_group(str(index_path), mode="r+")
    reference = group["reference"][...]
    assert group["reference"].compressors == ()  # written uncompressed (older indexes: zstd)
    del group["reference"]
    group.create_array("reference", data=reference, chunks=(1 << 24,))  # as before: zstd, 16 M-symbol chunks
    assert group["reference"].compressors and isinstance(group["reference"].compressors[0], ZstdCodec)
    idx = dmap.open_index(index_path)
    assert all((idx.block_text(b) == texts[b]).all() for b in range(idx.n_blocks))


@settings(max_examples=examples(80), deadline=None)
@given(lengths=st.lists(st.integers(1, 50), min_size=1, max_size=20), data=st.data())
def test_contig_of_every_position(lengths, data):
    """Few contigs (compared against each start) and many (binary search) give each position's contig."""
    offsets = np.concatenate([[0], np.cumsum(lengths[:-1])]).astype(np.int64)
    positions = np.array(data.draw(st.lists(st.integers(0, sum(lengths) - 1), max_size=60)), dtype=np.int64)
    want = np.array([max(i for i, o in enumerate(offsets) if o <= p) for p in positions], dtype=np.int64)
    assert (contig_of(positions, offsets) == want).all()
    assert (contig_of(positions.astype(np.uint32), offsets) == want).all()
