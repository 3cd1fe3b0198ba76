"""Byte ranges of files mapped read-only into numpy arrays (``mmap``).

The array then lies in the page cache's own pages: reading a large input
copies it into new memory instead, whose fresh pages the kernel zeroes
first, and on the VM where dmap is measured such pages cost 1.5-3 ms per MB
(docs/performance.md, "Machine and setup").  FASTQ pieces
(:mod:`dmap.io.fastx`) and index arrays (:mod:`dmap.index.zarr_direct`) are mapped.
"""

from __future__ import annotations

import functools
import mmap

import numpy as np


def map_bytes(fd: int, offset: int, size: int) -> np.ndarray:
    """Bytes ``offset`` to ``offset + size`` of the open file ``fd``, read-only
    (``size`` > 0).  Raises OSError or ValueError where the file cannot be mapped.

    A file truncated while the array is in use makes a read of its lost
    pages end the process with SIGBUS, as in any program that maps a file.
    """
    start = offset - offset % mmap.ALLOCATIONGRANULARITY  # a mapping starts at a page
    data = mmap.mmap(fd, offset + size - start, access=mmap.ACCESS_READ, offset=start)
    return np.frombuffer(data, dtype=np.uint8)[offset - start:]


# mmap(2)'s constants on Linux (the same on x86-64 and ARM64).
_PROT_NONE, _PROT_READ = 0, 1
_MAP_SHARED, _MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS = 0x01, 0x02, 0x10, 0x20


@functools.lru_cache(maxsize=1)
def libc():
    """The C library through ctypes (errno kept), with ``mmap``'s and ``munmap``'s signatures set:
    for the calls Python's ``os`` lacks (here, and ``fstatfs`` in :mod:`dmap.format.writer`).

    The symbols the process has loaded (``CDLL(None)``), which hold the C library's: looking it
    up by name (``ctypes.util.find_library``) runs ``ldconfig -p`` in a subprocess, in the middle
    of every run that writes a file."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def map_files(pieces: list[tuple[int, int, int]]) -> np.ndarray:
    """Byte ranges of several open files, mapped read-only back to back as one array.

    ``pieces`` are ``(fd, offset, size)``; every piece but the last must end at
    a page boundary of its file's mapping (the chunk files of an index array
    hold whole pages), so that the next one follows it in memory.  This is how
    an index array stored as several Zarr chunk files lies in the page cache
    without being copied into fresh memory (0.6-1.1 s for a 100 Mbp index's
    390 MB on the VM where dmap is measured).  Unlike Python's ``mmap``, the
    mapping holds no file descriptor: the caller may close ``fd`` at once.
    Linux only; raises OSError or ValueError where the files cannot be mapped
    so (the caller reads them).
    """
    import ctypes
    import sys
    import weakref

    if not sys.platform.startswith("linux") or not pieces:
        raise OSError("contiguous mappings of several files need Linux")
    page = mmap.ALLOCATIONGRANULARITY
    spans = []  # (fd, aligned file offset, mapped bytes, skip of the first piece)
    for k, (fd, offset, size) in enumerate(pieces):
        start = offset - offset % page
        length = offset + size - start
        if size <= 0 or (k + 1 < len(pieces) and length % page) or (k > 0 and offset % page):
            raise ValueError("pieces of a contiguous mapping must meet at page boundaries")
        spans.append((fd, start, length))
    total = sum(length for _, _, length in spans)
    c = libc()
    base = c.mmap(None, total, _PROT_NONE, _MAP_PRIVATE | _MAP_ANONYMOUS, -1, 0)
    if base in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "cannot reserve address space for a mapping")
    at = 0
    for fd, start, length in spans:  # each file's pages over its part of the reservation
        got = c.mmap(base + at, length, _PROT_READ, _MAP_SHARED | _MAP_FIXED, fd, start)
        if got != base + at:
            err = ctypes.get_errno()
            c.munmap(base, total)
            raise OSError(err, "cannot map a reads or index file")
        at += length
    region = (ctypes.c_char * total).from_address(base)
    weakref.finalize(region, c.munmap, base, total)  # unmapped with the last array that uses it
    data = np.frombuffer(region, dtype=np.uint8)
    data.flags.writeable = False
    skip = pieces[0][1] - spans[0][1]
    return data[skip:skip + sum(size for _, _, size in pieces)]
