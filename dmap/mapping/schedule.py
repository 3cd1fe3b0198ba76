"""Guided chunk sizes (BowMapCL 4.3: dynamic load balancing).

Devices pull equal-size chunks as they free up; toward the end of the input
the chunks shrink, so a fast and a slow device finish close together instead
of the fast one idling while the slow one works through a last large chunk.

The first chunks are small and grow: the first chunk is read, checked and
searched before anything else can start, so a small one puts the devices to
work sooner, while large chunks later cost less per read.  They double up to
half the largest size, then grow as a tenth of the reads done: the last
chunk's formatting and writing overlap nothing, so a run's last chunk stays a
small share of it.  Exact mapping's chunks reach 100,000 reads after 200,000
and 200,000 after 2M: at 10M reads, 8.39 -> 8.01 s against chunks of at most
100,000, the same as 200,000 from the start, while a 1M-read run keeps its
chunks (docs/performance.md).

With one worker there is nothing to balance, so the chunks do not shrink:
shrinking to the minimum size added about nine small chunks to a 1M-read
run, each with its Dask tasks and kernel launches: 0.07-0.16 CPU-seconds and
0.15-0.19 s of the run (docs/performance.md).

Blocks are placed here too: the priority of a (chunk, block) task
(:func:`block_priority`) and the worker a block prefers when the devices
cannot hold every block (:func:`block_homes`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..io.splits import file_size, splittable

if TYPE_CHECKING:  # `dmap --help` imports this module: Dask and Zarr stay out of its start
    from distributed import Client

    from ..index.store import Index

# The largest chunk of reads in exact mapping (chunks grow to it, see
# GuidedChunks).  Each chunk costs tens of milliseconds beyond its reads
# (Dask tasks, kernel launches, buffers), and a launch's last work-groups
# leave cores idle: on one warm cluster, 10M reads mapped in 11.6 s with
# 100,000-read chunks against 14.4 s with 50,000.  Chunks of 200,000,
# reached after 2M reads: 10M reads 8.39 -> 8.01 s against 100,000, for
# 687 MB of peak RSS instead of 442 MB.  Approximate mapping
# holds about 4x as much per read in flight (seeds, candidates, alignments)
# and keeps 50,000.  Chunk size against speed and memory: docs/performance.md.
DEFAULT_CHUNK_SIZE = 200_000
DEFAULT_APPROX_CHUNK_SIZE = 50_000
# Approximate mapping where every device is a GPU: there a chunk's kernels take little time and
# its host work (Dask's tasks, kernel launches, the interpreter lock a worker's threads share)
# weighs more: 500,000 pairs at -e 3 on an H200, embedded, mapped in 2.12 s with chunks of
# 200,000 against 2.93 s with 50,000 (3 of 3 alternating runs), at 1.16 against 0.88 GB of
# peak RSS (docs/performance.md, "GPU").
DEFAULT_APPROX_GPU_CHUNK_SIZE = 200_000


# Reads in the first chunk: it is read, searched and formatted before any
# record can be written, so a small one starts the output sooner (a
# 1M-read run writes its first records 0.09-0.12 s after the mapping
# starts; docs/performance.md "Exact mapping end to end").
FIRST_CHUNK_SIZE = 25_000


class GuidedChunks:
    """Next chunk size = reads left / (2 x workers), between ``min_size`` and ``max_size``,
    and at most the reads done so far and the larger of ``max_size / 2`` and a
    tenth of the reads done (at least ``first_size``); with one worker, no shrinking.

    The bounds by the reads done make the sizes grow from ``first_size``,
    doubling, up to ``max_size / 2``, and then by a tenth a chunk up to
    ``max_size``.  The reads left are estimated from the file size and the
    bytes per read seen so far (compressed bytes of a BGZF file), so
    shrinking needs input that workers cut (:func:`dmap.io.splits.splittable`);
    other input grows to ``max_size`` and stays there.
    """

    def __init__(self, paths: str | os.PathLike | list, max_size: int, min_size: int = 1000,
                 first_size: int = FIRST_CHUNK_SIZE):
        paths = [os.fspath(p) for p in (paths if isinstance(paths, list | tuple) else [paths])]
        plain = all(splittable(p) for p in paths)
        self.total_bytes = sum(file_size(p) for p in paths) if plain else None
        self.max_size = max_size
        self.min_size = min(min_size, max_size)
        self.first_size = min(first_size, max_size)
        self.n_workers = 1  # set once the cluster is known

    def __call__(self, reads_done: int, bytes_done: int) -> int:
        grown = min(reads_done, max(self.max_size // 2, reads_done // 10))
        size = min(self.max_size, max(self.first_size, grown))
        if self.total_bytes is None or reads_done == 0 or self.n_workers == 1:
            return size
        reads_left = max(self.total_bytes - bytes_done, 0) * reads_done / max(bytes_done, 1)
        return int(min(size, max(self.min_size, reads_left / (2 * self.n_workers))))


def block_priority(block: int, chunk: int, window: int) -> int:
    """Dask priority (higher runs first): earlier windows of ``window`` chunks
    first, then lower blocks, then earlier chunks.

    Without the window, a chunk submitted late (when chunk 0 is written)
    would put its block-0 task ahead of the older chunks' last blocks and
    drag a device that holds one block back to block 0.
    """
    return -((chunk // window) * (1 << 48) + block * (1 << 32) + chunk)


def block_homes(client: Client, idx: Index) -> dict[int, str]:
    """Preferred worker of each block, or {} when every device can hold every block.

    When the index is larger than a device's block budget, block b prefers
    worker b mod n (BowMapCL's partitioned blocks), so each device loads only
    its share; otherwise any worker takes any block, which balances load best.
    """
    from ..cluster.worker import device_stats

    stats = device_stats(client)
    if len(stats) < 2 or idx.n_blocks < 2:
        return {}
    total = sum(idx.block_nbytes(b) for b in range(idx.n_blocks))
    if total <= min(s["block_budget"] for s in stats.values()):
        return {}
    workers = sorted(stats)
    return {b: workers[b % len(workers)] for b in range(idx.n_blocks)}
