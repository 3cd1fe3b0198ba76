"""The functions Dask runs: search and locate on a worker's device, then
merge/dedup per chunk.  Graph construction is in pipeline.py; these
functions only compute.  Workers get only encoded reads (numpy arrays) and
return hit arrays: names, sequences and qualities stay with the client,
which writes the SAM.
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np

from .device import current_device
from .fastx import EncodedReads
from .hits import BlockHits, ChunkHits, merge_block_hits
from .index.store import Index
from .locate import expand_intervals, locate_rows
from .search.exact import search_block


@lru_cache(maxsize=8)
def _open(path: str, stamp: float) -> Index:
    return Index(path)


def cached_index(path: str) -> Index:
    """An opened index, reopened when its metadata file changes."""
    return _open(path, os.path.getmtime(os.path.join(path, "zarr.json")))


def n_strands(index: Index) -> int:
    return 2 if index.alphabet.has_reverse_complement else 1


def search_task(index_path: str, block: int, chunk: EncodedReads) -> np.ndarray:
    """Exact intervals ``(n_queries, 2)`` of a chunk in one block, on this worker's device."""
    index = cached_index(index_path)
    device = current_device()
    blk = device.block(index, block)
    return search_block(device, blk, chunk.codes, chunk.offsets, chunk.lengths, n_strands(index)).reshape(-1, 2)


def locate_task(index_path: str, block: int, intervals: np.ndarray) -> BlockHits:
    """Positions of every interval row, on this worker's device."""
    index = cached_index(index_path)
    device = current_device()
    blk = device.block(index, block)
    query, rows = expand_intervals(intervals)
    positions = locate_rows(device, blk, rows)
    return BlockHits(block, blk.start, blk.own_length, query, positions)


def merge_task(index_path: str, n_reads: int, parts: list[BlockHits]) -> ChunkHits:
    """Deduplicate a chunk's hits across block overlaps; contig coordinates."""
    index = cached_index(index_path)
    return merge_block_hits(parts, n_reads, n_strands(index), index.contig_offsets)
