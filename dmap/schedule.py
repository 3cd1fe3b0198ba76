"""Guided chunk sizes (BowMapCL 4.3: dynamic load balancing).

Devices pull equal-size chunks as they free up; toward the end of the input
the chunks shrink, so a fast and a slow device finish close together instead
of the fast one idling while the slow one works through a last large chunk.
"""

from __future__ import annotations

import os

COMPRESSED = (".gz", ".bgz", ".bz2", ".xz", ".zst")


class GuidedChunks:
    """Next chunk size = reads left / (2 x workers), between ``min_size`` and ``max_size``.

    The reads left are estimated from the file size and the bytes per read
    seen so far, so this needs an uncompressed input; for compressed input
    every chunk is ``max_size``.
    """

    def __init__(self, path: str | os.PathLike, max_size: int, min_size: int = 1000):
        path = os.fspath(path)
        self.total_bytes = None if path.endswith(COMPRESSED) or not os.path.isfile(path) else os.path.getsize(path)
        self.max_size = max_size
        self.min_size = min(min_size, max_size)
        self.n_workers = 1  # set once the cluster is known

    def __call__(self, reads_done: int, bytes_done: int) -> int:
        if self.total_bytes is None or reads_done == 0:
            return self.max_size
        reads_left = max(self.total_bytes - bytes_done, 0) * reads_done / max(bytes_done, 1)
        return int(min(self.max_size, max(self.min_size, reads_left / (2 * self.n_workers))))
