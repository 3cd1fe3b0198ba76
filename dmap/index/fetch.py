"""An index given as a URL (``s3://bucket/ref.dmap``, ``gs://``, ``https://``, ``file://``: any
file system fsspec opens), fetched once into a local cache on each host that maps with it.

Workers map an index's arrays from files (:mod:`dmap.index.zarr_direct`), so each process
that opens a URL (the client, and each worker, on whatever host it runs) works from a copy
in its host's cache: ``$DMAP_INDEX_CACHE``, else ``$XDG_CACHE_HOME/dmap/indexes``, else
``~/.cache/dmap/indexes``.  A copy is named by the URL and the digest of the index's metadata
(``zarr.json``), so an index rebuilt at the same URL is fetched again, and one host's worker
processes fetch it once between them (a lock); each copy is complete before it is renamed
into place, so a killed fetch leaves no index that looks whole.  A new build's copy and the
one before it are kept, the URL's older ones removed: a run still mapping the build before
(whose blocks a worker opens as it needs them) is not disturbed.  Copies of URLs no longer
used stay until their folders are deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import IndexFormatError

# The metadata file whose digest names a copy (dmap.index.store.index_identity digests it too).
METADATA = "zarr.json"


def cache_root() -> Path:
    """Where this host keeps its copies of indexes given as URLs."""
    if os.environ.get("DMAP_INDEX_CACHE"):
        return Path(os.environ["DMAP_INDEX_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dmap" / "indexes"


def fetched_index(url: str) -> str:
    """The local path of this host's copy of the index at ``url``, fetched first where there is
    none of its current build.

    Raises
    ------
    IndexFormatError
        In one line, where ``url`` cannot be read or holds no index's metadata.
    """
    import fsspec  # (a dependency of dask's: imported only for an index at a URL)

    try:
        fs, remote = fsspec.core.url_to_fs(url)
        remote = remote.rstrip("/")
        with fs.open(f"{remote}/{METADATA}", "rb") as f:
            metadata = f.read()
    except FileNotFoundError:
        raise IndexFormatError(f"index {url!r}: this host finds no {METADATA} there (no dmap index there, or the "
                               "URL cannot be reached from here); build one with 'dmap index REFERENCE -o INDEX' "
                               "and copy it there") from None
    except Exception as e:  # noqa: BLE001 - each fsspec back end raises its own: one line, whatever it is
        raise IndexFormatError(f"index {url!r} cannot be read: {type(e).__name__}: {e}") from None
    named = hashlib.sha1(url.encode()).hexdigest()[:12]
    key = f"{named}-{hashlib.sha1(metadata).hexdigest()[:12]}"
    root = cache_root()
    final = root / key / "index.dmap"
    if (final / METADATA).exists():
        return str(final)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise IndexFormatError(f"index {url!r} cannot be fetched: its cache {str(root)!r}: {e.strerror}; set "
                               "DMAP_INDEX_CACHE to a folder this process may write") from None
    with _locked(root / f"{key}.lock"):
        if not (final / METADATA).exists():  # another process of this host fetched it meanwhile
            _fetch(fs, remote, url, root, final, metadata)
            _drop_older(root, named, key)
    return str(final)


def _drop_older(root: Path, named: str, key: str) -> None:
    """Remove the copies of the URL named ``named`` but the new one (``key``) and the newest
    before it, and their locks: only what this module made, by their names."""
    others = sorted((p for p in root.glob(f"{named}-*") if p.is_dir() and p.name != key),
                    key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in others[1:]:
        shutil.rmtree(old, ignore_errors=True)
        with contextlib.suppress(OSError):
            (root / f"{old.name}.lock").unlink()


@contextlib.contextmanager
def _locked(path: Path):
    """Hold an exclusive lock on ``path`` (made if absent): one fetch per copy per host."""
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _fetch(fs, remote: str, url: str, root: Path, final: Path, metadata: bytes) -> None:
    """Copy every file under ``remote`` into a folder of ``root``, then rename it to ``final``:
    only where its metadata is still ``metadata`` (an index rebuilt during the copy is not one)."""
    tmp = Path(tempfile.mkdtemp(prefix=".fetching-", dir=root))
    try:
        files = [f for f in fs.find(remote) if f.rstrip("/") != remote]
        names = [f[len(remote):].lstrip("/") for f in files]
        if METADATA not in names:
            raise IndexFormatError(f"index {url!r} cannot be fetched: its files cannot be listed")
        for name, f in zip(names, files):
            target = tmp / "index.dmap" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(f, str(target))
        if (tmp / "index.dmap" / METADATA).read_bytes() != metadata:
            raise IndexFormatError(f"index {url!r} changed while this host fetched it; run again")
        final.parent.mkdir(parents=True, exist_ok=True)
        os.rename(tmp / "index.dmap", final)
    except IndexFormatError:
        raise
    except Exception as e:  # noqa: BLE001 - as in fetched_index
        raise IndexFormatError(f"index {url!r} cannot be fetched: {type(e).__name__}: {e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
