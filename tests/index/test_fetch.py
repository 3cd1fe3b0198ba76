"""An index given as a URL (dmap.index.fetch): each host maps its own copy, fetched once per
build, and the records are those of the index's path."""

import os

import pytest
from helpers import genome_case, http_server, without_pg

import dmap
from dmap.errors import IndexFormatError


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """This test's own cache of fetched indexes (DMAP_INDEX_CACHE)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("DMAP_INDEX_CACHE", str(folder))
    return folder


def copies(cache):
    return sorted(p.name for p in cache.iterdir() if p.is_dir())


@pytest.mark.parametrize("protocol", ["file", "http"])
def test_an_index_at_a_url_maps_as_its_path(tmp_path, client, cache, protocol):
    """file:// (fsspec's local files) and http:// (a web server's directory listing): the same
    records as the index's path; the copy is fetched once and then reused, and a new build at
    the URL is fetched again: its copy and the one before are kept, older ones removed."""
    genome_case(tmp_path, 9, 4000, 50, 60)
    dmap.map_reads(tmp_path / "idx", tmp_path / "r.fq", sam_path=tmp_path / "path.sam", client=client)
    with (http_server(tmp_path) if protocol == "http" else _files(tmp_path)) as base:
        url = f"{base}/idx"
        dmap.map_reads(url, tmp_path / "r.fq", sam_path=tmp_path / "url.sam", client=client)
        assert without_pg((tmp_path / "url.sam").read_bytes()) == without_pg((tmp_path / "path.sam").read_bytes())
        (copy,) = copies(cache)
        stamp = os.stat(cache / copy / "index.dmap" / "zarr.json").st_ino
        dmap.map_reads(url, tmp_path / "r.fq", sam_path=tmp_path / "again.sam", client=client)
        assert copies(cache) == [copy] and os.stat(cache / copy / "index.dmap" / "zarr.json").st_ino == stamp
        assert dmap.open_index(url).source == url and dmap.open_index(url).path == str(cache / copy / "index.dmap")
        # A new build at the URL (another reference): a copy of its own, and its records.
        (tmp_path / "other").mkdir()
        genome_case(tmp_path / "other", 10, 3000, 50, 0)
        dmap.build_index(tmp_path / "other" / "ref.fa", tmp_path / "idx", overwrite=True)
        dmap.map_reads(url, tmp_path / "r.fq", sam_path=tmp_path / "new.sam", client=client)
        assert len(copies(cache)) == 2 and copy in copies(cache)
        dmap.map_reads(tmp_path / "idx", tmp_path / "r.fq", sam_path=tmp_path / "newpath.sam", client=client)
        assert without_pg((tmp_path / "new.sam").read_bytes()) == without_pg((tmp_path / "newpath.sam").read_bytes())
        # A third build: the first one's copy goes.
        dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", overwrite=True, max_query_length=80)
        dmap.map_reads(url, tmp_path / "r.fq", sam_path=tmp_path / "third.sam", client=client)
        assert len(copies(cache)) == 2 and copy not in copies(cache)
        assert sorted(p.name for p in cache.glob("*.lock")) == [f"{c}.lock" for c in copies(cache)]


def _files(directory):
    import contextlib

    return contextlib.nullcontext(directory.as_uri())


def test_a_url_without_an_index_is_one_clear_line(tmp_path, cache):
    for url in ((tmp_path / "nothing").as_uri(), "http://127.0.0.1:9/idx"):  # nothing listens on port 9
        with pytest.raises(IndexFormatError, match="this host finds no zarr.json there"):
            dmap.open_index(url)
    assert not cache.exists() or copies(cache) == []


def test_a_fetch_leaves_no_copy_that_looks_whole(tmp_path, cache, monkeypatch):
    """A fetch that fails midway (the connection lost at the fifth file) leaves no copy in place:
    a copy is renamed there when complete, and the next run fetches it whole."""
    import fsspec.implementations.local as local

    genome_case(tmp_path, 11, 2000, 40, 0)
    url = (tmp_path / "idx").as_uri()
    real, calls = local.LocalFileSystem.get_file, []

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise ConnectionResetError("connection lost")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(local.LocalFileSystem, "get_file", failing)
    with pytest.raises(IndexFormatError, match="cannot be fetched: ConnectionResetError: connection lost"):
        dmap.open_index(url)
    assert copies(cache) == [] and not [p for p in cache.iterdir() if p.name.startswith(".fetching")]
    monkeypatch.setattr(local.LocalFileSystem, "get_file", real)
    assert dmap.open_index(url, refresh=True).n_blocks >= 1 and len(copies(cache)) == 1
