"""The functions Dask runs: a chunk's reads read and parsed, searched and
located on a worker's device, then merged (dedup across blocks) and written
as SAM records (or BAM in BGZF blocks).  Graph construction is in pipeline.py; these functions only
compute.  The reads stay on the workers from the read to the records: the
client gets each chunk's finished bytes and counts (:class:`ChunkOutput`).
"""

from __future__ import annotations

import dataclasses
import os
import socket
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..alphabet import Alphabet
from ..approx.alignments import BlockAlignments, ChunkAlignments, align_block, merge_alignments, runs_of_each_k
from ..approx.candidates import Regions, candidate_regions
from ..approx.patterns import oriented_patterns
from ..approx.seeds import Seeds, pigeonhole_seeds
from ..approx.settings import Approximate
from ..format import bgzf
from ..format.bam import References, encode_records_device
from ..format.sam import (
    RecordTails,
    check_comments,
    contig_name_columns,
    format_alignment_records_device,
    format_pair_records_device,
    format_records_device,
    primaries,
)
from ..format.writer import Parts, write_at, write_part
from ..index.store import Index, open_index, unseen_index_error
from ..io.fastx import alphabet_mismatch, read_chunk
from ..io.pairs import PairChunk, count_records, read_pair_chunk
from ..io.splits import FileSplit, Source, is_url
from ..neighborhood.search import neighborhood_patterns, seed_and_filter, upload_neighborhood
from ..opencl.device import current_device, device_task
from ..reads import NO_GROUP, EncodedReads, FlatStrings, ReadChunk
from ..search.edits import SeedIntervals, search_with_edits
from ..search.exact import bad_queries, search_block
from ..search.hits import BlockHits, ChunkHits, merge_block_hits, unique_reads
from ..search.kmers import KmerTable, kmer_table, table_bytes
from ..search.locate import locate_rows, split_located
from .pairs import InsertBounds, pair_chunk

# The tasks that search on a device, as their Dask keys begin: one per (chunk, block), or one per
# chunk against a one-block index (task streams count them to see each worker's share).
DEVICE_TASKS = ("block_task", "chunk_task")


def cached_index(path: str) -> Index:
    """The index at ``path``, opened once per process while its metadata file stays the same
    (:func:`~dmap.index.store.open_index`: an in-process worker shares the client's); at a URL,
    this host's copy of it."""
    if is_url(path):
        return open_index(path)
    try:
        os.stat(os.path.join(path, "zarr.json"))
    except OSError as e:
        # The client opened the index when it planned the run: this worker does not see it.
        raise unseen_index_error(path, f"the worker on host {socket.gethostname()!r}", e.strerror) from None
    return open_index(path)


@dataclass
class ChunkSeeds:
    """What approximate mapping searches for a chunk's reads of one seed scheme: the chunk's reads
    as codes, the seeds (FM engine) or neighborhood patterns (``phash``) of those reads, the seeds
    as codes, the edits per seed, and each read's K (one for all, or by an error rate)."""

    reads: EncodedReads
    seeds: Seeds
    queries: EncodedReads | None  # the seeds' codes (FM engine)
    seed_edits: int = 0
    errors: np.ndarray | int = 0  # K of each of the chunk's reads, or of all


def read_task(index_path: str, source: Source | PairChunk, max_length: int, check_symbols: bool,
              strict: bool) -> ReadChunk:
    """A chunk of the input read and parsed on this worker (:func:`dmap.io.fastx.read_chunk`, or
    :func:`dmap.io.pairs.read_pair_chunk` for pairs)."""
    read = read_pair_chunk if isinstance(source, PairChunk) else read_chunk
    return read(source, cached_index(index_path).alphabet, max_length, check_symbols, strict)


def count_task(split: FileSplit) -> int:
    """The records that begin in a byte range of paired input (:func:`dmap.io.pairs.count_records`)."""
    return count_records(split)


def insert_task(out: ChunkOutput) -> InsertBounds:
    """The insert bounds the first chunk of pairs used, for the others."""
    return out.insert


def first_pairs_insert_task(index_path: str, source: PairChunk, reading: dict, approx: Approximate | None,
                            settings: RecordSettings) -> InsertBounds:
    """The insert bounds of a run whose first pairs lie in several chunks (FASTQ and FASTA
    records share none): ``source``, those pairs planned as one chunk, mapped and paired as a
    first chunk is, so that the bounds come from the input's first pairs whatever their files.
    Its records are dropped: the chunks map these pairs again."""
    chunk = read_task(index_path, source, **reading)
    parts = [block_task(index_path, b, chunk, approx) for b in range(cached_index(index_path).n_blocks)]
    return finish_task(index_path, chunk, parts, dataclasses.replace(settings, parts=None, keep_hits=False)).insert


def chunk_seeds(chunk: ReadChunk, approx: Approximate) -> list[ChunkSeeds]:
    """The seeds (or neighborhood patterns) of a chunk's searched reads, one set per seed scheme
    among them, made once per chunk on a worker for all of its block tasks there
    (:meth:`dmap.reads.ReadChunk.derived`).

    Short reads may take seeds with an edit where long reads take exact pieces
    (:func:`dmap.approx.seeds.choose_seed_edits`); reads of one length make one
    set.  With an error rate each read has its own K (:meth:`Approximate.errors_of`),
    which its pieces, its candidate windows and its verification follow.
    """
    def make() -> list[ChunkSeeds]:
        reads = chunk.encoded()
        # One K stays a number: the windows and runs then take no per-read gather.
        errors = approx.errors_of(reads.lengths) if approx.error_rate is not None else approx.max_errors
        edits = approx.seed_edits_of(reads.lengths, np.broadcast_to(errors, reads.lengths.shape))
        sets = []
        for m in np.flatnonzero(np.bincount(edits, minlength=1)).tolist():  # the one or two schemes, no sort
            # The other reads' lengths as 0: they get no seeds or patterns in this set.
            lengths = reads.lengths if not edits.any() else np.where(edits == m, reads.lengths, 0)
            if approx.engine == "phash":
                sets.append(ChunkSeeds(reads, neighborhood_patterns(lengths, approx.window, approx.delta), None, 0,
                                       errors))
            else:
                seeds = pigeonhole_seeds(lengths, errors, m)
                sets.append(ChunkSeeds(reads, seeds, seeds.encoded(reads), m, errors))
        return sets

    return chunk.derived("seeds", make)  # one approximate setting per run


@device_task
def block_task(index_path: str, block: int, chunk: ReadChunk,
               approx: Approximate | None) -> BlockHits | BlockAlignments:
    """A chunk's work on one index block, on this worker's device: its reads (exact mapping) or
    seeds searched and located, or its neighborhood patterns looked up (``--engine phash``), and
    with ``approx`` the hits verified into alignments.

    One Dask task per (chunk, block), not one per step: the steps run back to
    back on the same block anyway, and each task costs the process that runs
    ``dmap run`` and the scheduler their bookkeeping (about a millisecond
    each, docs/performance.md "Client CPU"); so the seeds are made here too.
    """
    if approx is None:
        return locate(index_path, block, search(index_path, block, chunk))
    found = []
    for seeds in chunk_seeds(chunk, approx):
        if approx.engine == "phash":
            located = find_neighborhood(index_path, block, seeds, approx.neighborhood_errors)
        else:
            located = locate(index_path, block, search(index_path, block, seeds))
        found.append(verify(index_path, block, seeds, located, approx.eqx))
    return BlockAlignments.concat(found)


def search(index_path: str, block: int, queries: ReadChunk | ChunkSeeds) -> np.ndarray | SeedIntervals:
    """Intervals of a chunk's reads (exact mapping) or seeds in one block, on this worker's device:
    exact intervals ``(n_queries, 2)``, or with seeds searched with edits, every string within
    that many edits of each (:func:`dmap.search.edits.search_with_edits`)."""
    index = cached_index(index_path)
    device = current_device()
    blk = device.block(index, block)
    ns = index.alphabet.n_strands
    if isinstance(queries, ReadChunk):  # reads: translated, checked and mostly located on the device
        reads = queries.read_bytes()
        found = search_block(device, blk, reads.data, reads.offsets, reads.lengths, ns, table=reads.table,
                             text=_early_stop_text(device, index, block), kmers=_kmer_table(device, index, block)
                             ) if len(reads) else np.zeros(0, np.int64)
        return found.reshape(-1, 2)
    q = queries.queries
    if queries.seed_edits:
        return search_with_edits(device, blk, device.reverse_occ(index, block), q.codes, q.offsets, q.lengths, ns,
                                 queries.seed_edits)
    found = (search_block(device, blk, q.codes, q.offsets, q.lengths, ns, kmers=_kmer_table(device, index, block))
             if len(q) else np.zeros(0, np.int64))
    return found.reshape(-1, 2)


@lru_cache(maxsize=8)
def _bytes_with_texts(index: Index) -> int:
    """Device bytes of every block of ``index`` with its text."""
    return sum(index.block_nbytes(b) + index.meta.blocks[b].length for b in range(index.n_blocks))


@lru_cache(maxsize=8)
def _bytes_with_tables(index: Index) -> int:
    """Device bytes of every block of ``index`` with its text and its k-mer table."""
    sigma = index.alphabet.sigma
    return _bytes_with_texts(index) + sum(table_bytes(index.meta.blocks[b].n_rows, sigma)
                                          for b in range(index.n_blocks))


def _early_stop_text(device, index: Index, block: int):
    """The block's text for the search kernel's early stop, or None (plain search) when the
    device cannot hold every block with its text: the texts would then evict blocks."""
    return device.block_text(index, block) if _bytes_with_texts(index) <= device.block_budget else None


def _kmer_table(device, index: Index, block: int) -> KmerTable | None:
    """The block's k-mer table, or None (the search from the first symbol) when the device
    cannot hold every block with its text and table: tables would then evict blocks."""
    return kmer_table(device, index, block) if _bytes_with_tables(index) <= device.block_budget else None


def locate(index_path: str, block: int, intervals: np.ndarray | SeedIntervals) -> BlockHits:
    """Positions of every interval row (of :func:`search`), on this worker's device."""
    index = cached_index(index_path)
    device = current_device()
    blk = device.block(index, block)
    if isinstance(intervals, SeedIntervals):
        query, rows = intervals.rows()
        return BlockHits(block, blk.start, blk.own_length, query, locate_rows(device, blk, rows))
    ns = index.alphabet.n_strands
    bad = unique_reads(bad_queries(intervals) // ns)
    if bad.size:  # reads with a symbol outside the alphabet: no hits on any strand, and reported
        intervals = intervals.copy()
        intervals[(bad[:, None] * ns + np.arange(ns)).ravel()] = 0
    # Queries the search kernel located itself need no walk here.
    located, positions, query, rows = split_located(intervals)
    return BlockHits(block, blk.start, blk.own_length, np.concatenate([located, query]),
                     np.concatenate([positions, locate_rows(device, blk, rows)]),
                     bad=bad)


def find_neighborhood(index_path: str, block: int, seeds: ChunkSeeds, errors: int) -> BlockHits:
    """Window positions matching a chunk's patterns (seed exact, neighborhood within ``errors``) in one block."""
    reads, patterns = seeds.reads, seeds.seeds
    index = cached_index(index_path)
    device = current_device()
    store = device.neighborhood(index, block, upload_neighborhood)
    query, positions = seed_and_filter(device, store, index.neighborhood_params, reads, patterns, errors,
                                       index.alphabet.n_strands)
    # (read, strand) pairs, as exact search counts them (the neighborhood engine makes one set per chunk)
    device.tally("queries_searched", int(reads.lengths.size) * index.alphabet.n_strands)
    return BlockHits(block, index.meta.blocks[block].start, index.own_length(block), query, positions)


def verify(index_path: str, block: int, chunk_seeds: ChunkSeeds, located: BlockHits,
           eqx: bool = False) -> BlockAlignments:
    """Candidate regions of a block's seed hits, verified by Myers' kernel, traced back to alignments.

    ``seeds`` and ``located`` come from either engine: FM-index seeds
    (search + locate) or neighborhood patterns (:func:`find_neighborhood`).
    Each read's regions are verified with its own K
    (:func:`dmap.approx.alignments.runs_of_each_k`),
    and traced back with the band of the largest: an optimal alignment of
    d <= K edits stays within d diagonals of its end's, so every cell the
    traceback visits holds the same value in either band, and each
    alignment is the one its own K gives (docs/approximate.md).
    """
    reads, seeds, errors = chunk_seeds.reads, chunk_seeds.seeds, chunk_seeds.errors
    index = cached_index(index_path)
    device = current_device()
    meta = index.meta
    ns = index.alphabet.n_strands
    regions = candidate_regions(located, seeds, reads.lengths, ns, errors, meta.blocks[block].length,
                                meta.contigs.offsets, meta.contigs.lengths, device)
    device.tally("candidates", int(located.query.size), "seed hits")
    device.tally("candidates", len(regions), "regions")
    if len(regions) == 0:
        return BlockAlignments.empty()
    text = device.block_text(index, block)
    # Patterns only for the (read, strand) pairs with candidates, renumbered densely
    # (regions come sorted by pattern), made on the device.
    first = np.r_[True, regions.pattern[1:] != regions.pattern[:-1]]
    used, dense = regions.pattern[first], np.cumsum(first) - 1
    sigma = index.alphabet.sigma
    patterns = oriented_patterns(device, reads.codes, reads.offsets, reads.lengths, used, ns, sigma)
    local = Regions(dense, regions.start, regions.length)
    last = block == index.n_blocks - 1
    own_from, own_until = None if block == 0 else 0, None if last else located.own_length
    region_errors = np.broadcast_to(errors, reads.lengths.shape)[regions.pattern // ns]
    runs = runs_of_each_k(device, text, patterns, sigma, local, region_errors, own_from, own_until)
    with device.timed("dmap-traceback"):
        found = align_block(device, runs, local, patterns, text, reference_letters(index.alphabet), sigma,
                            int(region_errors.max()), located.start, eqx)
    found.pattern = used[found.pattern]
    return found


@dataclass(frozen=True)
class RecordSettings:
    """How the chunks' records are written (from :func:`dmap.map_reads`' options)."""

    max_hits: int | None
    tail: str  # ends every record: the read group's tag (dmap.format.sam.ReadGroup.tag), or ""
    approx: Approximate | None
    strict: bool
    keep_hits: bool  # return the hits and read names too (MappingResult.hits)
    parts: Parts | None = None  # where workers that see it write their records (dmap.format.writer.Parts)
    # The output is a regular file that the workers that see it write into, each chunk at its offset
    # (write_at_task): the records are then kept on the worker, not written to a part file.
    in_place: bool = False
    # "sam"; "bam": records encoded as BAM (dmap.format.bam); "sam.gz": SAM text.  Both of the
    # latter in whole BGZF blocks (dmap.format.bgzf), which concatenate in the output.
    format: str = "sam"
    insert: InsertBounds | None = None  # pairs: the user's insert bounds (None: estimated from the first pairs)
    direct: bool = True  # records written in place go to a local disk with O_DIRECT (dmap.format.writer.direct_writes)
    # Where reads files have read groups of their own: what ends the records of each of the chunk's
    # files (instead of `tail`), by path (ReadChunk.files).
    tails: dict[str, str] | None = None
    # Where the read groups come from BAM records' RG tags: what ends the records of a read of each
    # group (ReadFields.group), before its file's tail (a read whose tag names none of them).
    group_tails: tuple[str, ...] = ()
    # Each read's FASTQ or FASTA comment (a BAM record's tags but RG) ends its records, before its
    # tail (bwa mem -C).
    comments: bool = False
    # Records for reads that map nowhere (pairs: where neither mate maps); without, none (--no-unmapped).
    unmapped: bool = True


@dataclass
class ChunkOutput:
    """What a chunk sends back to the client: its SAM records (or BGZF blocks of BAM records), ready to
    be written, and its counts."""

    number: int
    records: np.ndarray  # uint8; empty when they are in ``part``
    part: str | None  # the part file holding the records (dmap.format.writer.Parts)
    nbytes: int  # of the records
    n_reads: int
    n_mapped: int
    n_hits: int
    file_bytes: int
    unmappable: dict[str, int] = field(default_factory=dict)
    hits: ChunkHits | ChunkAlignments | None = None  # with RecordSettings.keep_hits
    names: FlatStrings | None = None  # with keep_hits, the read name of each hit
    warning: str | None = None  # chunk 0: the reads do not look like the index's alphabet
    insert: InsertBounds | None = None  # pairs: the insert bounds used
    n_proper: int = 0  # pairs: reported as proper pairs (their primary records)
    capped_pairs: int = 0  # pairs: with more proper pairs than dmap.mapping.pairs.PAIR_CAP


@device_task
def finish_task(index_path: str, chunk: ReadChunk, parts: list[BlockHits | BlockAlignments],
                settings: RecordSettings, insert: InsertBounds | None = None) -> ChunkOutput:
    """A chunk's hits merged across blocks (:func:`dmap.search.hits.merge_block_hits`, or
    :func:`dmap.approx.alignments.merge_alignments` ranking loci) and written as SAM records.

    A chunk of pairs is paired (:func:`dmap.mapping.pairs.pair_chunk`) with the insert bounds
    ``insert`` (those of the first chunk's output), or the user's, or, for the first chunk, its
    own estimate from the input's first pairs, which it holds."""
    index = cached_index(index_path)
    searched = chunk.searched
    n = len(chunk) if searched is None else searched.size
    ns = index.alphabet.n_strands
    approx = settings.approx
    if approx is None:
        hits = merge_block_hits(parts, n, ns, index.meta.contigs.offsets)
    else:  # pairs are formed from every locus of each mate
        hits = merge_alignments(parts, n, ns, index.meta.contigs.offsets, approx.report_all or chunk.paired,
                                None if chunk.paired else approx.max_hits,
                                lambda n_best: primaries(chunk, n_best, searched))
    hits = hits.renumbered(searched, len(chunk))
    unmappable = dict(chunk.unmappable)
    if hits.bad.size:  # found by the search kernel (chunk 0's were found when it was read)
        if settings.strict:
            raise chunk.unknown_symbol_error(int(hits.bad[0]))
        unmappable["unknown symbol"] = unmappable.get("unknown symbol", 0) + int(hits.bad.size)
    counts = hits.counts()
    paired = None
    if chunk.paired:
        paired = pair_chunk(chunk, hits, insert or settings.insert, index.meta.contigs.offsets,
                            approx is None or approx.report_all, settings.max_hits)
        insert = paired[2]
    to_part = settings.parts is not None and not settings.in_place and settings.parts.usable()
    records = _records(index, chunk, hits, settings, paired, kept=not to_part)
    part = None
    if to_part:
        try:
            part, records = write_part(settings.parts, chunk.number, records), np.zeros(0, np.uint8)
        except OSError as e:
            raise WorkerWriteError.of(settings.parts.path(chunk.number), e) from None
    return ChunkOutput(chunk.number, records, part, int(records.size) if part is None else os.path.getsize(part),
                       len(chunk), int((counts > 0).sum()),
                       len(hits), chunk.file_bytes, unmappable,
                       hits if settings.keep_hits else None, chunk.names_of(hits.read) if settings.keep_hits else None,
                       alphabet_mismatch(chunk, index.alphabet.name) if chunk.number == 0 else None,
                       insert, _proper_primaries(paired[0].flag) if paired else 0, paired[3] if paired else 0)


def chunk_task(index_path: str, source: Source | PairChunk, reading: dict, approx: Approximate | None,
               settings: RecordSettings, insert: InsertBounds | None = None) -> ChunkOutput:
    """A chunk against a one-block index, in one task: :func:`read_task`, :func:`block_task` and
    :func:`finish_task` in turn, as three tasks would run them on one worker.

    Each task costs the scheduler and the worker their bookkeeping (``benchmarks/task_overhead.py``:
    12 chunks of no-op tasks took 29-45 CPU-ms as three tasks each, 14-19 as one), which a
    chunk of a one-block index, with nothing to share between blocks, does not need."""
    chunk = read_task(index_path, source, **reading)
    return finish_task(index_path, chunk, [block_task(index_path, 0, chunk, approx)], settings, insert)


def _proper_primaries(flag: np.ndarray) -> int:
    """Pairs whose primary records are a proper pair (their first mates' records counted)."""
    return int(((flag & (2 | 64 | 256)) == (2 | 64)).sum())


def summary_task(out: ChunkOutput) -> ChunkOutput:
    """A chunk's output without its records, for the client (they stay on the worker until
    :func:`write_at_task` writes them)."""
    return dataclasses.replace(out, records=out.records[:0])


class WorkerWriteError(Exception):
    """Raised on a worker whose write of a chunk's records failed (a full disk): the client
    reports it as the output's error.  A plain OSError would read there as a Dask
    connection that broke (:class:`distributed.comm.core.CommClosedError` is one)."""

    def __init__(self, path: str, errno: int | None, strerror: str):
        # The arguments as they are given: they are what pickle hands back to __init__.
        super().__init__(path, errno, strerror)
        self.path = path

    @classmethod
    def of(cls, path: str, error: OSError) -> WorkerWriteError:
        return cls(path, error.errno, error.strerror or str(error))

    @property
    def error(self) -> OSError:
        """The worker's OSError, rebuilt from what crossed the wire."""
        return OSError(self.args[1], self.args[2])


class OutputNotSeen(Exception):
    """Raised by :func:`write_at_task` on a worker that does not see the run's files (another
    host without the shared file system): the client then writes that chunk's records itself."""


def write_at_task(out: ChunkOutput, parts: Parts, path: str, offset: int, direct: bool = True) -> None:
    """Write a chunk's records into the output file ``path`` at ``offset``.

    A write that succeeds returns nothing, so the client learns it from the task's state
    alone, without fetching a result: a round trip per chunk less (with ``-e 3``, the
    client's CPU per extra million reads went from 0.103 to 0.058 s,
    ``benchmarks/ab_client.py``, docs/performance.md "Client CPU").  Where this worker
    does not see the run's files it raises
    :class:`OutputNotSeen` instead, the exception the client looks for.
    """
    if not parts.usable():
        raise OutputNotSeen(f"this worker (process {os.getpid()}) does not see the run's directory "
                            f"{parts.directory}; the client writes the chunk")
    try:
        write_at(path, offset, out.records, direct=direct)
    except OSError as e:
        raise WorkerWriteError.of(path, e) from None


@lru_cache(maxsize=8)
def _name_columns(index: Index) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The index's contig names as the SAM kernel takes them (a draft assembly has hundreds of
    thousands of contigs: made once per index)."""
    return contig_name_columns(index.meta.contigs.names)


@lru_cache(maxsize=8)
def _references(index: Index) -> References:
    """The index's contig names as BAM looks them up, made once per index and only for BAM:
    sorting a million names takes 0.13 s."""
    return References.of(index.meta.contigs.names)


def _records(index: Index, chunk: ReadChunk, hits: ChunkHits | ChunkAlignments, settings: RecordSettings,
             paired: tuple | None = None, kept: bool = True) -> np.ndarray:
    """A chunk's records as bytes: SAM (formatted by ``sam_records.cl`` on this worker's device),
    or, by ``settings.format``, those records encoded as BAM or left as text, in BGZF blocks.
    ``paired``: the record columns and strings of a chunk of pairs
    (:func:`dmap.mapping.pairs.pair_chunk`).  Unless ``kept``
    (the task writes them to a part file itself), SAM records may lie in the device's scratch
    memory (:meth:`Device.host_array <dmap.opencl.device.Device.host_array>`)."""
    columns = _name_columns(index)
    device = current_device()
    compressed = settings.format != "sam"
    scratch = compressed or not kept  # the records are compressed or written before the task ends
    tail = _record_tails(chunk, settings)
    unmapped = settings.unmapped
    if paired is not None:
        text = format_pair_records_device(device, chunk, paired[0], paired[1], columns, tail, scratch, unmapped)
    elif isinstance(hits, ChunkAlignments):
        text = format_alignment_records_device(device, chunk, hits, columns, tail, scratch, unmapped)
    else:
        text = format_records_device(device, chunk, hits, index.meta.contigs.names, settings.max_hits, columns,
                                     tail=tail, pick=primaries(chunk, hits.counts()), scratch=scratch,
                                     unmapped=unmapped)
    if not compressed:
        return text
    records = encode_records_device(device, text, _references(index)) if settings.format == "bam" else text
    return np.frombuffer(bgzf.compress(records), np.uint8)


def _record_tails(chunk: ReadChunk, settings: RecordSettings) -> str | RecordTails:
    """What ends the records of ``chunk``'s reads: one tail, or where its files have read groups of
    their own (``settings.tails``), each read's file's; a read whose BAM record's RG tag names one
    of the run's read groups (``settings.group_tails``), that group's; and with
    ``settings.comments``, each read's FASTQ or FASTA comment before it."""
    if settings.tails is None:
        strings, of_read = (settings.tail,), None
    else:
        strings = tuple(dict.fromkeys(settings.tails[path] for path, _ in chunk.files))
        number = {tail: k for k, tail in enumerate(strings)}
        of_read = None if len(strings) == 1 else np.repeat(
            [number[settings.tails[path]] for path, _ in chunk.files], [n for _, n in chunk.files])
    group = chunk.fields.group
    if settings.group_tails and group is not None and (tagged := group != NO_GROUP).any():
        # The group tails follow the files' in the strings; group g is string len(strings) + g.
        of_read = np.zeros(len(chunk), np.int64) if of_read is None else of_read.astype(np.int64)
        of_read[tagged] = len(strings) + group[tagged].astype(np.int64)
        strings += settings.group_tails
    if settings.comments and chunk.fields.comment_len is not None and chunk.fields.comment_len.any():
        check_comments(chunk)
        return RecordTails(strings, of_read, comments=True)
    return strings[0] if of_read is None else RecordTails(strings, of_read)


@lru_cache(maxsize=8)
def _letters(symbols: bytes, sigma: int, unknown: int) -> np.ndarray:
    out = np.full(256, unknown, dtype=np.uint8)
    out[:sigma] = np.frombuffer(symbols[:sigma], dtype=np.uint8)
    return out


def reference_letters(alphabet: Alphabet) -> np.ndarray:
    """Code -> reference symbol (ASCII) for MD tags; codes that match nothing print as N (X for protein)."""
    return _letters(bytes(alphabet.symbols), alphabet.sigma, ord("X" if alphabet.name == "protein" else "N"))
