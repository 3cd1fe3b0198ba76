"""An index given as a URL (dmap.index.fetch): each host maps its own copy, fetched once per
build, and the records are those of the index's path."""

import fcntl
import os
import subprocess
import sys
import time

import pytest
from helpers import dmap_cmd, genome_case, http_server, without_pg

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


@pytest.fixture
def holder():
    """Other processes that open an index (a URL's copy: held while they live) and wait for stdin to close."""
    started = []

    def hold(url):
        p = subprocess.Popen([sys.executable, "-c", "import sys, dmap; dmap.open_index(sys.argv[1]); print('ready', "
                              "flush=True); sys.stdin.read()", url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        started.append(p)
        assert p.stdout.readline() == "ready\n"
        return p

    yield hold
    for p in started:
        p.stdin.close()
        p.wait(timeout=60)


def listed(cache):
    r = dmap_cmd("index", "cache", "list")
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header.split("\t") == ["last used", "size", "in use", "url", "path"]
    return {row.split("\t")[3]: row.split("\t") for row in rows}


def test_the_cache_lists_its_copies_and_cleans_those_no_process_holds(tmp_path, cache, holder):
    """`dmap index cache list` names each copy's URL, size and whether a process holds it;
    `clean` removes the others (with --unused-for, only those unused that long), and the next
    run fetches a removed copy again."""
    for name, seed in (("a", 12), ("b", 13)):
        (tmp_path / name).mkdir()
        genome_case(tmp_path / name, seed, 3000, 40, 0)
    url_a, url_b = (tmp_path / "a" / "idx").as_uri(), (tmp_path / "b" / "idx").as_uri()
    held = holder(url_a)
    holder(url_b).stdin.close()  # (b's holder exits: b is in the cache, held by none)
    for _ in range(600):
        if listed(cache)[url_b][2] == "no":
            break
        time.sleep(0.1)
    rows = listed(cache)
    assert rows[url_a][2] == "yes" and rows[url_b][2] == "no"
    size = sum(f.stat().st_size for f in (tmp_path / "a" / "idx").rglob("*") if f.is_file())
    assert rows[url_a][1] == dmap.host.format_bytes(size) and os.path.isdir(rows[url_a][4])
    r = dmap_cmd("index", "cache", "clean", "--unused-for", "1")
    assert r.returncode == 0 and "removed 0 cached index copies (0 bytes); 0 in use kept" in r.stderr
    day_ago = time.time() - 2 * 86400
    for row in rows.values():
        os.utime(os.path.dirname(row[4]), (day_ago, day_ago))
    r = dmap_cmd("index", "cache", "clean", "--unused-for", "1")
    assert r.returncode == 0 and "removed 1 cached index copy" in r.stderr and "1 in use kept" in r.stderr
    assert list(listed(cache)) == [url_a]
    held.stdin.close()
    held.wait(timeout=60)
    # What fetches leave before their rename: one killed (removed), one under way (its lock held: kept).
    for key in ("killed0000-00", "underway00-00"):
        (cache / f".fetching-{key}-x1y2z3w4" / "index.dmap").mkdir(parents=True)
    with open(cache / "underway00-00.lock", "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = dmap_cmd("index", "cache", "clean")
        assert r.returncode == 0 and "removed 1 cached index copy" in r.stderr and "0 in use kept" in r.stderr
        assert sorted(p.name for p in cache.iterdir()) == [".fetching-underway00-00-x1y2z3w4", "underway00-00.lock"]
    assert dmap_cmd("index", "cache", "clean").returncode == 0
    assert list(cache.iterdir()) == []  # the fetch's leftovers, and its lock file
    assert dmap.open_index(url_b, refresh=True).n_blocks >= 1 and list(listed(cache)) == [url_b]


def test_a_new_build_leaves_the_copies_that_processes_hold(tmp_path, cache, holder):
    """A URL's builds before the newest two go when a new one is fetched, but not one that a
    process still holds (a run mapping it); a process lets its copy go when it moves on."""
    genome_case(tmp_path, 14, 3000, 40, 0)
    url = (tmp_path / "idx").as_uri()
    first = holder(url)
    (first_copy,) = copies(cache)
    for length in (70, 80, 90):  # three more builds
        dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", overwrite=True, max_query_length=length)
        dmap.open_index(url, refresh=True)
    assert first_copy in copies(cache) and len(copies(cache)) == 3  # the held one, the newest two
    first.stdin.close()
    first.wait(timeout=60)
    dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", overwrite=True, max_query_length=60)
    dmap.open_index(url, refresh=True)
    assert first_copy not in copies(cache) and len(copies(cache)) == 2
