"""Reading the Zarr arrays that dmap writes, without importing zarr.

``import zarr`` takes about 0.1 s, a sixteenth of mapping a million reads
against E. coli end to end (docs/benchmarks.md, session 18), and mapping
needs none of Zarr's generality: it reads whole FM-index arrays, each stored
as one uncompressed chunk, and slices of the zstd-compressed ``reference``.
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

from ..mapfile import map_bytes


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

    A whole array stored as one uncompressed chunk is memory-mapped from its
    chunk file, read-only: Zarr would read it into new memory and copy it
    again, and on a CPU device the kernels read the array in place (for
    E. coli, 28 MB of fresh pages per run, docs/benchmarks.md, session 17).
    Other reads return new, writable arrays.
    """
    info = array_info(path)
    if info is None:
        return None
    start, stop, step = part.indices(info.length)
    if step != 1:
        return None
    stop = max(start, stop)
    try:
        if start == 0 and stop == info.length == info.chunk_length and not info.compressed:
            mapped = _mapped(info.chunk_path(0), info.nbytes)
            if mapped is not None:
                return mapped.view(info.dtype)
        out = np.empty(stop - start, dtype=info.dtype)
        for i in range(start // info.chunk_length, -(-stop // info.chunk_length)):
            lo = i * info.chunk_length
            a, b = max(start, lo), min(stop, lo + info.chunk_length)
            try:
                values = _chunk(info, i)
            except FileNotFoundError:  # Zarr writes no file for a chunk of fill values only
                out[a - start:b - start] = info.fill_value
                continue
            if values is None:
                return None
            out[a - start:b - start] = values[a - lo:b - lo]
    except (OSError, ValueError, RuntimeError):  # numcodecs raises RuntimeError for a damaged frame
        return None
    return out


def _mapped(path: str, size: int) -> np.ndarray | None:
    """The file at ``path`` mapped, where it holds ``size`` bytes (and exists)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return None
    with f:
        if os.fstat(f.fileno()).st_size != size:
            return None
        return map_bytes(f.fileno(), 0, size)


def _chunk(info: ArrayInfo, i: int) -> np.ndarray | None:
    """Chunk ``i``'s values, or None where its file is not a chunk of this array."""
    with open(info.chunk_path(i), "rb") as f:
        data = f.read()
    if info.compressed:
        from numcodecs.zstd import Zstd  # what zarr itself decompresses with

        data = Zstd().decode(data)
    if len(data) != info.chunk_length * info.dtype.itemsize:
        return None
    return np.frombuffer(data, dtype=info.dtype)
