"""Reading the Zarr arrays that dmap writes, without importing zarr.

``import zarr`` takes about 0.1 s, a sixteenth of mapping a million reads
against E. coli end to end (docs/performance.md), and mapping
needs none of Zarr's generality: it reads whole FM-index arrays, stored
uncompressed in chunks of 16 M elements, and slices of the ``reference``
(uncompressed; older indexes hold it zstd-compressed).
This module reads exactly what :mod:`dmap.index.build` writes through zarr:
Zarr format 3, one dimension, a regular chunk grid, the default chunk keys,
the ``bytes`` codec in this machine's byte order, optionally followed by
``zstd``, in a local directory.  For anything else (another codec, sharding,
Zarr format 2, a file of the wrong size, damaged data) it answers None and
the caller reads the array with zarr, which also gives the error message
where the data are damaged.  ``tests/index/test_zarr_direct.py`` checks it
against zarr.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

import numpy as np

from ..io.mapfile import map_bytes, map_files


def _metadata(path: str, node_type: str) -> dict | None:
    try:
        with open(os.path.join(path, "zarr.json"), "rb") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("zarr_format") != 3 or meta.get("node_type") != node_type:
        return None
    return meta


def group_attributes(path: str) -> dict | None:
    """The attributes of the Zarr format 3 group at ``path``, or None."""
    meta = _metadata(path, "group")
    attributes = meta and meta.get("attributes", {})
    return attributes if isinstance(attributes, dict) else None


@dataclass(frozen=True)
class ArrayInfo:
    """A 1-D Zarr array that this module can read."""

    path: str
    length: int
    dtype: np.dtype
    chunk_length: int
    separator: str
    fill_value: int | float
    compressed: bool  # bytes, then zstd

    @property
    def nbytes(self) -> int:
        return self.length * self.dtype.itemsize

    def chunk_path(self, i: int) -> str:
        return os.path.join(self.path, f"c{self.separator}{i}")


def array_info(path: str) -> ArrayInfo | None:
    """What :func:`read` needs to know of the array at ``path``, or None where it cannot read it."""
    meta = _metadata(path, "array")
    try:
        (length,) = meta["shape"]
        grid, keys, codecs = meta["chunk_grid"], meta["chunk_key_encoding"], meta["codecs"]
        (chunk_length,) = grid["configuration"]["chunk_shape"]
        separator = keys.get("configuration", {}).get("separator", "/")
        dtype = np.dtype(meta["data_type"])
        fill_value = meta["fill_value"]
        endian = codecs[0].get("configuration", {}).get("endian", sys.byteorder)
    except (TypeError, KeyError, ValueError, IndexError, AttributeError):  # meta None, or not a 1-D array of numbers
        return None
    if (
        grid.get("name") != "regular"
        or keys.get("name") != "default"
        or separator not in ("/", ".")
        or meta.get("storage_transformers")
        or dtype.kind not in "biuf"
        or type(fill_value) not in (bool, int, float)
        or codecs[0].get("name") != "bytes"
        or (dtype.itemsize > 1 and endian != sys.byteorder)
        or [codec.get("name") for codec in codecs[1:]] not in ([], ["zstd"])
        or not (isinstance(length, int) and isinstance(chunk_length, int) and length >= 0 and chunk_length > 0)
    ):
        return None
    return ArrayInfo(path, length, dtype, chunk_length, separator, fill_value, compressed=len(codecs) == 2)


def read(path: str, part: slice = slice(None)) -> np.ndarray | None:
    """Elements ``part`` (a slice with step 1) of the 1-D array at ``path``, or None.

    Uncompressed elements (FM-index arrays, a block's text) are
    memory-mapped from their chunk files, read-only, those of several
    chunks back to back: Zarr would read them into new memory and copy
    them again, and on a CPU device the kernels read them in place (for
    E. coli, 28 MB of fresh pages per run; for a 100 Mbp reference 390 MB,
    docs/performance.md).  Other reads return new, writable arrays.
    """
    info = array_info(path)
    if info is None:
        return None
    start, stop, step = part.indices(info.length)
    if step != 1:
        return None
    stop = max(start, stop)
    if stop == start:
        return np.empty(0, dtype=info.dtype)
    first, last = start // info.chunk_length, (stop - 1) // info.chunk_length
    try:
        if not info.compressed:
            mapped = _mapped(info, first, last, start, stop)
            if mapped is not None:
                return mapped
        out = np.empty(stop - start, dtype=info.dtype)
        for i in range(first, last + 1):
            lo = i * info.chunk_length
            a, b = max(start, lo), min(stop, lo + info.chunk_length)
            if not _read_chunk(info, i, a - lo, out[a - start:b - start]):
                return None
    except (OSError, ValueError, RuntimeError):  # numcodecs raises RuntimeError for a damaged frame
        return None
    return out


def _mapped(info: ArrayInfo, first: int, last: int, start: int, stop: int) -> np.ndarray | None:
    """Elements ``start:stop`` of the array, mapped from the files of uncompressed
    chunks ``first`` to ``last``, which hold them (back to back where there are
    several: :func:`dmap.io.mapfile.map_files`); None where a file is missing or
    has the wrong size, or the files cannot be mapped so."""
    size = info.chunk_length * info.dtype.itemsize
    files = []
    try:
        for i in range(first, last + 1):
            try:
                files.append(open(info.chunk_path(i), "rb"))
            except FileNotFoundError:
                return None
            if os.fstat(files[-1].fileno()).st_size != size:
                return None
        item = info.dtype.itemsize
        pieces = []
        for k, f in enumerate(files):
            lo = (first + k) * info.chunk_length
            a, b = max(start, lo), min(stop, lo + info.chunk_length)
            pieces.append((f.fileno(), (a - lo) * item, (b - a) * item))
        # map_files' mappings hold no file descriptor, where Python's mmap keeps one open per
        # array: a worker keeps the blocks it mapped against resident, and one that mapped
        # against 25 small indexes held 1,086 open files, towards the process's limit.
        try:
            return map_files(pieces).view(info.dtype)
        except (OSError, ValueError):  # not Linux, or chunks that do not end at a page boundary
            if len(pieces) == 1:
                return map_bytes(*pieces[0]).view(info.dtype)
            return None  # read
    finally:
        for f in files:
            f.close()


def _read_chunk(info: ArrayInfo, i: int, skip: int, into: np.ndarray) -> bool:
    """Put chunk ``i``'s elements from ``skip`` on into ``into``; False where
    its file is not a chunk of this array."""
    size = info.chunk_length * info.dtype.itemsize
    try:
        f = open(info.chunk_path(i), "rb")
    except FileNotFoundError:  # Zarr writes no file for a chunk of fill values only
        into[:] = info.fill_value
        return True
    with f:
        if not info.compressed:
            # Only the elements wanted: a block's text takes L-1 symbols of the next chunk.
            if os.fstat(f.fileno()).st_size != size:
                return False
            f.seek(skip * info.dtype.itemsize)
            return f.readinto(memoryview(into).cast("B")) == into.nbytes
        data = f.read()
    from numcodecs.zstd import Zstd  # what zarr itself decompresses with

    data = Zstd().decode(data)
    if len(data) != size:
        return False
    into[:] = np.frombuffer(data, dtype=info.dtype)[skip:skip + into.size]
    return True
