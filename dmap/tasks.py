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

from .approx.alignments import BlockAlignments, ChunkAlignments, align_block, merge_alignments
from .approx.candidates import Regions, candidate_regions
from .approx.patterns import pattern_matrix
from .approx.seeds import Seeds
from .approx.verify import myers_distances
from .device import current_device
from .hits import BlockHits, ChunkHits, merge_block_hits
from .index.store import Index
from .locate import locate_rows, split_located
from .neighborhood.search import seed_and_filter, upload_neighborhood
from .reads import EncodedReads, ReadBytes
from .search.edits import SeedIntervals, search_with_edits
from .search.exact import bad_queries, search_block


@lru_cache(maxsize=8)
def _open(path: str, stamp: float) -> Index:
    return Index(path)


def cached_index(path: str) -> Index:
    """An opened index, reopened when its metadata file changes."""
    return _open(path, os.path.getmtime(os.path.join(path, "zarr.json")))


def search_task(index_path: str, block: int, chunk: EncodedReads | ReadBytes) -> np.ndarray:
    """Exact intervals ``(n_queries, 2)`` of a chunk (reads or seeds) in one block, on this worker's device."""
    index = cached_index(index_path)
    device = current_device()
    blk = device.block(index, block)
    if isinstance(chunk, ReadBytes):  # reads: translated, checked and mostly located on the device
        found = search_block(device, blk, chunk.data, chunk.offsets, chunk.lengths, index.alphabet.n_strands,
                             table=chunk.table, text=_early_stop_text(device, index, block))
    else:
        found = search_block(device, blk, chunk.codes, chunk.offsets, chunk.lengths, index.alphabet.n_strands)
    return found.reshape(-1, 2)


@lru_cache(maxsize=8)
def _bytes_with_texts(index: Index) -> int:
    """Device bytes of every block of ``index`` with its text."""
    return sum(index.block_nbytes(b) + index.meta.blocks[b].length for b in range(index.n_blocks))


def _early_stop_text(device, index: Index, block: int):
    """The block's text for the search kernel's early stop, or None (plain search) when the
    device cannot hold every block with its text: the texts would then evict blocks."""
    return device.block_text(index, block) if _bytes_with_texts(index) <= device.block_budget else None


def edit_search_task(index_path: str, block: int, seeds: EncodedReads, max_edits: int) -> SeedIntervals:
    """Intervals of every string within ``max_edits`` edits of each seed in one block, on this worker's device."""
    index = cached_index(index_path)
    device = current_device()
    return search_with_edits(device, device.block(index, block), device.reverse_occ(index, block), seeds.codes,
                             seeds.offsets, seeds.lengths, index.alphabet.n_strands, max_edits)


def locate_task(index_path: str, block: int, intervals: np.ndarray | SeedIntervals) -> BlockHits:
    """Positions of every interval row (of :func:`search_task` or :func:`edit_search_task`), on this worker's device."""
    index = cached_index(index_path)
    device = current_device()
    blk = device.block(index, block)
    if isinstance(intervals, SeedIntervals):
        query, rows = intervals.rows()
        return BlockHits(block, blk.start, blk.own_length, query, locate_rows(device, blk, rows))
    ns = index.alphabet.n_strands
    bad = np.unique(bad_queries(intervals) // ns)
    if bad.size:  # reads with a symbol outside the alphabet: no hits on any strand, and reported
        intervals = intervals.copy()
        intervals[(bad[:, None] * ns + np.arange(ns)).ravel()] = 0
    # Queries the search kernel located itself need no walk here.
    located, positions, query, rows = split_located(intervals)
    return BlockHits(block, blk.start, blk.own_length, np.concatenate([located, query]),
                     np.concatenate([positions, locate_rows(device, blk, rows)]),
                     bad=bad)


def neighborhood_task(index_path: str, block: int, reads: EncodedReads, patterns: Seeds, errors: int) -> BlockHits:
    """Window positions matching a chunk's patterns (seed exact, neighborhood within ``errors``) in one block."""
    index = cached_index(index_path)
    device = current_device()
    store = device.neighborhood(index, block, upload_neighborhood)
    query, positions = seed_and_filter(device, store, index.neighborhood_params, reads, patterns, errors,
                                       index.alphabet.n_strands)
    # (read, strand) pairs, as exact search counts them
    device.queries_searched += int(reads.lengths.size) * index.alphabet.n_strands
    return BlockHits(block, index.meta.blocks[block].start, index.own_length(block), query, positions)


def merge_task(index_path: str, n_reads: int, parts: list[BlockHits], searched: np.ndarray | None = None) -> ChunkHits:
    """Deduplicate a chunk's hits across block overlaps; contig coordinates.

    ``searched``: the chunk-local numbers of the reads that were searched
    (:attr:`dmap.reads.ReadChunk.searched`), None for all ``n_reads``.
    """
    index = cached_index(index_path)
    n = n_reads if searched is None else searched.size
    return merge_block_hits(parts, n, index.alphabet.n_strands, index.contig_offsets).renumbered(searched, n_reads)


def verify_task(index_path: str, block: int, reads: EncodedReads, seeds: Seeds, located: BlockHits,
                max_errors: int, eqx: bool = False) -> BlockAlignments:
    """Candidate regions of a block's seed hits, verified by Myers' kernel, traced back to alignments.

    ``seeds`` and ``located`` come from either engine: FM-index seeds
    (search + locate) or neighborhood patterns (:func:`neighborhood_task`).
    """
    index = cached_index(index_path)
    device = current_device()
    meta = index.meta
    ns = index.alphabet.n_strands
    regions = candidate_regions(located, seeds, reads.lengths, ns, max_errors, meta.blocks[block].length,
                                index.contig_offsets, np.array([c.length for c in meta.contigs], dtype=np.int64))
    device.candidates["seed hits"] += int(located.query.size)
    device.candidates["regions"] += len(regions)
    if len(regions) == 0:
        return BlockAlignments.empty()
    text = device.block_text(index, block)
    # Patterns only for the (read, strand) pairs with candidates, renumbered densely.
    used, dense = np.unique(regions.pattern, return_inverse=True)
    both = pattern_matrix(reads.codes, reads.offsets[used // ns], reads.lengths[used // ns], ns)
    patterns = both[np.arange(used.size) * ns + used % ns]
    lengths = reads.lengths[used // ns]
    local = Regions(dense, regions.start, regions.length)
    sigma = index.alphabet.sigma
    # Paper 001's thread-cooperative kernel (a work-item per 64-bit word) on a GPU:
    # 1.7-3.5x the per-region kernel on an H100, 0.6-0.8x on PoCL (docs/performance.md).
    dist = myers_distances(device, text.buffer, patterns, lengths, sigma, local.start, local.length, local.pattern,
                           cooperative=device.is_gpu)
    last = block == index.n_blocks - 1
    with device.timed("dmap-traceback"):
        found = align_block(device, dist, local, patterns, lengths, text, reference_letters(index.alphabet), sigma,
                            max_errors, located.start, None if block == 0 else 0,
                            None if last else located.own_length, eqx)
    found.pattern = used[found.pattern]
    return found


def merge_alignments_task(index_path: str, n_reads: int, parts: list[BlockAlignments], max_errors: int,
                          report_all: bool, max_hits: int | None, searched: np.ndarray | None = None,
                          name_hash: np.ndarray | None = None) -> ChunkAlignments:
    """A chunk's alignments: loci joined across blocks, best per locus, ranked per read
    (``searched`` as in :func:`merge_task`; ``name_hash`` of the searched reads, to choose
    a primary among equals)."""
    index = cached_index(index_path)
    n = n_reads if searched is None else searched.size
    return merge_alignments(parts, n, index.alphabet.n_strands, index.contig_offsets, max_errors, report_all,
                            max_hits, name_hash).renumbered(searched, n_reads)


@lru_cache(maxsize=8)
def _letters(symbols: bytes, sigma: int, unknown: int) -> np.ndarray:
    out = np.full(256, unknown, dtype=np.uint8)
    out[:sigma] = np.frombuffer(symbols[:sigma], dtype=np.uint8)
    return out


def reference_letters(alphabet) -> np.ndarray:
    """Code -> reference symbol (ASCII) for MD tags; codes that match nothing print as N (X for protein)."""
    return _letters(bytes(alphabet.symbols), alphabet.sigma, ord("X" if alphabet.name == "protein" else "N"))
