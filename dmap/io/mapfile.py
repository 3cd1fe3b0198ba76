"""Byte ranges of files mapped read-only into numpy arrays (``mmap``).

The array then lies in the page cache's own pages: reading a large input
copies it into new memory instead, whose fresh pages the kernel zeroes
first, and on the VM where dmap is measured such pages cost 1.5-3 ms per MB
(docs/performance.md, "Machine and setup").  FASTQ pieces
(:mod:`dmap.io.fastx`) and index arrays (:mod:`dmap.index.zarr_direct`) are mapped.
"""

from __future__ import annotations

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
