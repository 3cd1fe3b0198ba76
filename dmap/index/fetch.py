"""An index given as a URL (``s3://bucket/ref.dmap``, ``gs://``, ``https://``, ``file://``: any
file system fsspec opens), fetched once into a local cache on each host that maps with it.

Workers map an index's arrays from files (:mod:`dmap.index.zarr_direct`), so each process
that opens a URL (the client, and each worker, on whatever host it runs) works from a copy
in its host's cache: ``$DMAP_INDEX_CACHE``, else ``$XDG_CACHE_HOME/dmap/indexes``, else
``~/.cache/dmap/indexes``.  A copy is named by the URL and the digest of the index's metadata
(``zarr.json``), so an index rebuilt at the same URL is fetched again, and one host's worker
processes fetch it once between them (a lock); each copy is complete before it is renamed
into place, so a killed fetch leaves no index that looks whole.

Each process holds a shared lock on the copy it maps of each URL (its newest: a standing
worker lets the build before go when a run brings a new one), so that nothing removes a copy
that a process of its host may still read blocks from.  A new build's copy and the one before
it are kept, the URL's older ones removed unless a process holds them.  ``dmap index cache``
lists a host's copies (:func:`cached_copies`) and removes those that no process holds
(:func:`remove_copies`), or only those unused for some days: a URL no longer mapped leaves its
copies until then.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import IndexFormatError

# The metadata file whose digest names a copy (dmap.index.store.index_identity digests it too).
METADATA = "zarr.json"
# Beside a copy's index, the URL it was fetched from (for dmap index cache).
URL_FILE = "url"
# Where a copy is fetched before it is renamed into place: this, its copy's folder name, "-", random letters.
FETCHING = ".fetching-"
# This process's shared locks on the copies it maps: (cache, URL) -> (copy's folder name, open lock file).
_held: dict[tuple[str, str], tuple[str, int]] = {}


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
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise IndexFormatError(f"index {url!r} cannot be fetched: its cache {str(root)!r}: {e.strerror}; set "
                               "DMAP_INDEX_CACHE to a folder this process may write") from None
    while True:
        if not (final / METADATA).exists():
            with _locked(root / f"{key}.lock"):
                if not (final / METADATA).exists():  # another process of this host fetched it meanwhile
                    _fetch(fs, remote, url, root, final, metadata)
                    _drop_older(root, named, key)
        if _hold(url, root, key):
            break  # (else `dmap index cache clean` removed it meanwhile: fetched again)
    with contextlib.suppress(OSError):  # (a cache this process may only read)
        os.utime(root / key)  # its last use, for `dmap index cache clean --unused-for`
    return str(final)


def _hold(url: str, root: Path, key: str) -> bool:
    """Take (or keep) this process's shared lock on the copy ``key`` of ``url``, letting go of
    the one it held on the URL's build before.  False where the copy is gone by the time the
    lock is taken (removed by another process, which held the lock exclusively to do so)."""
    held = _held.get((str(root), url))
    if held is not None and held[0] == key:
        return True
    try:
        fd = _lock(root / f"{key}.lock", fcntl.LOCK_SH)
    except PermissionError:  # a cache this process may only read (filled by another user): none removes it
        return (root / key / "index.dmap" / METADATA).exists()
    if fd is None or not (root / key / "index.dmap" / METADATA).exists():
        if fd is not None:
            os.close(fd)
        return False
    if held is not None:
        os.close(held[1])  # the build before: another process's run may still hold it
    _held[str(root), url] = (key, fd)
    return True


def _lock(path: Path, how: int) -> int | None:
    """A descriptor of the lock file ``path`` (made if absent) holding ``how`` (``fcntl.LOCK_SH``,
    ``LOCK_EX``, with ``LOCK_NB`` or not), or None where the file was replaced while the lock was
    awaited: a process removed the copy and its lock file (:func:`_remove`)."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)  # (flock needs no write access)
    try:
        fcntl.flock(fd, how)
        if os.fstat(fd).st_ino == os.stat(path).st_ino:
            return fd
    except FileNotFoundError:
        pass
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def _remove(root: Path, key: str) -> bool:
    """Remove the copy ``key`` and its lock file where no process holds it; False where one does.

    The lock file goes too, while this process holds it exclusively: a process that opened it
    before then finds it replaced (:func:`_lock`) and looks for the copy again."""
    path = root / f"{key}.lock"
    try:
        fd = _lock(path, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    if fd is None:
        return False  # (replaced meanwhile: another process removed it, or fetches it again)
    try:
        shutil.rmtree(root / key, ignore_errors=True)
        with contextlib.suppress(OSError):
            path.unlink()
        return True
    finally:
        os.close(fd)


def _drop_older(root: Path, named: str, key: str) -> None:
    """Remove the copies of the URL named ``named`` but the new one (``key``), the newest before
    it and those that a process holds: only what this module made, by their names."""
    others = sorted((p for p in root.glob(f"{named}-*") if p.is_dir() and p.name != key),
                    key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in others[1:]:
        _remove(root, old.name)


@dataclass(frozen=True)
class CachedCopy:
    """One copy in this host's cache of indexes fetched from URLs."""

    url: str  # where it was fetched from ("" for a copy fetched before the URL was kept beside it)
    path: str  # the index's folder
    nbytes: int  # its files' sizes, summed
    last_used: float  # when a process last looked it up (seconds since the epoch)
    in_use: bool  # whether a process of this host holds it (maps it, or may map it again)


def cached_copies(root: Path | None = None) -> list[CachedCopy]:
    """This host's copies of indexes fetched from URLs, least recently used first."""
    root = cache_root() if root is None else root
    found = []
    for folder in root.glob("*-*"):
        index = folder / "index.dmap"
        if not folder.is_dir() or folder.name.startswith(".") or not (index / METADATA).exists():
            continue
        try:
            url = (folder / URL_FILE).read_text().strip()
        except OSError:
            url = ""
        nbytes = sum(f.stat().st_size for f in index.rglob("*") if f.is_file())
        found.append(CachedCopy(url, str(index), nbytes, folder.stat().st_mtime, _in_use(root / f"{folder.name}.lock")))
    return sorted(found, key=lambda c: c.last_used)


def _in_use(lock: Path) -> bool:
    """Whether a process holds the lock file ``lock`` (shared, or exclusively while it fetches)."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def remove_copies(unused_days: float | None = None, root: Path | None = None) -> tuple[list[CachedCopy], int]:
    """Remove this host's copies that no process holds (with ``unused_days``, only those that
    none has looked up for that many days), and what is left of fetches that were killed or failed.
    Returns the copies removed and the number of those kept because a process holds them."""
    root = cache_root() if root is None else root
    since = None if unused_days is None else time.time() - unused_days * 86400
    removed, kept = [], 0
    for copy in cached_copies(root):
        if since is not None and copy.last_used > since:
            continue
        if _remove(root, Path(copy.path).parent.name):
            removed.append(copy)
        else:
            kept += 1
    for partial in root.glob(f"{FETCHING}*"):  # a fetch killed before its rename, unless one holds its copy's lock
        key = partial.name[len(FETCHING):].rpartition("-")[0]
        if (since is None or partial.stat().st_mtime <= since) and not _in_use(root / f"{key}.lock"):
            shutil.rmtree(partial, ignore_errors=True)
    for lock in root.glob("*.lock"):  # of no copy (a fetch that failed), unless a process holds it
        if not (root / lock.name[:-len(".lock")]).exists():
            _remove(root, lock.name[:-len(".lock")])
    return removed, kept


@contextlib.contextmanager
def _locked(path: Path):
    """Hold an exclusive lock on ``path`` (made if absent): one fetch per copy per host."""
    fd = None
    while fd is None:
        fd = _lock(path, fcntl.LOCK_EX)
    try:
        yield
    finally:
        os.close(fd)


def _fetch(fs, remote: str, url: str, root: Path, final: Path, metadata: bytes) -> None:
    """Copy every file under ``remote`` into a folder of ``root``, then rename it to ``final``:
    only where its metadata is still ``metadata`` (an index rebuilt during the copy is not one)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{FETCHING}{final.parent.name}-", dir=root))  # (remove_copies reads the name)
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
        (final.parent / URL_FILE).write_text(url + "\n")
        os.rename(tmp / "index.dmap", final)
    except IndexFormatError:
        raise
    except Exception as e:  # noqa: BLE001 - as in fetched_index
        raise IndexFormatError(f"index {url!r} cannot be fetched: {type(e).__name__}: {e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
