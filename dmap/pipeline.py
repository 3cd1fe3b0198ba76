"""Building and running the Dask graph of a mapping job.

For each read chunk ``i`` and index block ``b``::

    search(i, b) -> locate(i, b) --\\
                                    >-- merge(i) -> SAM text of chunk i
    search(i, b') -> locate(i, b') /

With ``max_errors`` K > 0 the searched queries are the reads' K+1 pigeonhole
seeds, and a ``verify(i, b)`` task after ``locate`` turns the seed hits into
candidate regions, runs Myers' kernel on them and traces the alignments
back; ``merge(i)`` then joins loci across blocks and ranks them.

``search`` and ``locate`` ask for the ``opencl`` resource, so they run only
on workers pinned to a device; ``merge`` (dedup across block overlaps, SAM
formatting) runs anywhere.  At most ``in_flight`` chunks are submitted at a
time (backpressure: memory stays bounded on any input size), and chunks are
written in input order.

The graph, its submission with backpressure and the writer that takes the
results in input order stay together here (about 440 lines) so that the
Dask side of dmap can be read in one place; what the tasks compute is in
:mod:`dmap.tasks`, and the results and settings have modules of their own.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import CancelledError

import numpy as np
from distributed import Client
from distributed.client import FutureCancelledError
from distributed.comm.core import CommClosedError

from . import sam
from .approx.alignments import ChunkAlignments
from .approx.settings import MAX_ERRORS_LIMIT, Approximate, approximate_settings
from .cluster import connect, embedded_client, require_device_workers
from .device import DEVICE_PLUGIN, DEVICE_RESOURCE
from .errors import ClusterError, DmapError, DmapWarning
from .fastx import iter_read_chunks
from .hits import ChunkHits
from .index.store import Index, open_index
from .mapq import name_hashes
from .neighborhood.search import neighborhood_patterns
from .output import Output
from .progress import Progress
from .reads import ReadChunk
from .result import MappingResult, collect_hits
from .sam_writer import SamWriter, prepare_device
from .schedule import DEFAULT_APPROX_CHUNK_SIZE, DEFAULT_CHUNK_SIZE, GuidedChunks
from .tasks import (
    edit_search_task,
    locate_task,
    merge_alignments_task,
    merge_task,
    neighborhood_task,
    search_task,
    verify_task,
)


@contextlib.contextmanager
def _client(client: Client | None, scheduler: str | None, processes: bool, threads: int | None = None) -> Client:
    if client is not None:
        yield client
    elif scheduler is not None:
        with connect(scheduler) as c:
            yield c
    else:
        with embedded_client(processes=processes, threads=threads) as c:
            yield c


def map_reads(
    index: str | os.PathLike | Index,
    reads: str | os.PathLike,
    *,
    sam_path: str | os.PathLike | None = None,
    client: Client | None = None,
    scheduler: str | None = None,
    max_hits: int | None = None,
    max_errors: int = 0,
    report_all: bool = False,
    eqx: bool = False,
    engine: str = "fm",
    delta: int = 1,
    neighborhood_errors: int | None = None,
    seed_edits: int | None = None,
    chunk_size: int | None = None,
    in_flight: int = 4,
    return_hits: bool = True,
    processes: bool = False,
    guided: bool = True,
    block_major: bool = True,
    strict: bool = False,
    read_group: str | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    argv: list[str] | None = None,
) -> MappingResult:
    """Map reads: every exact occurrence, or every locus within K edits (both strands for DNA).

    Parameters
    ----------
    index
        A dmap index (path or :class:`dmap.Index`).
    reads
        FASTQ or FASTA file, optionally gzip-compressed; a pipe, or ``"-"`` for standard input.
    sam_path
        Write SAM here: a file (written under a temporary name and renamed at
        the end; an existing file is replaced only if dmap wrote it), a FIFO
        or device, or ``"-"`` for standard output (see :mod:`dmap.output`).
    client, scheduler
        A Dask client, or a scheduler address to connect to; with neither, an
        embedded cluster with one worker per local OpenCL device is started.
    max_hits
        Report at most this many hits per read in the SAM (all are counted).
    max_errors
        K: 0 for exact matches; otherwise every locus where the read aligns
        with at most K edits (substitutions, insertions, deletions) is found
        (see :mod:`dmap.approx.alignments`), and the best ones reported.
    report_all
        With ``max_errors``: report every locus within K, not only the best.
    eqx
        With ``max_errors``: CIGAR with ``=``/``X`` instead of ``M``.
    engine
        Where candidates come from: ``"fm"`` (pigeonhole seeds on the
        FM-index: every locus within K is found) or ``"phash"`` (MAROSE's
        neighborhood index, built with ``dmap index --neighborhood``: a
        locus is found when one of the read's patterns, taken every
        ``delta`` symbols, matches its seed exactly and its neighborhood
        with at most ``neighborhood_errors`` substitutions).  Both verify
        with the same Myers kernel and write the same SAM.
    delta, neighborhood_errors
        ``engine="phash"`` only: the step between a read's patterns, and
        substitutions allowed in the neighborhood (default: the index's).
    seed_edits
        ``engine="fm"`` only: m, the edits each seed is searched with: 0
        for K+1 exact pieces, m >= 1 for K // (m+1) + 1 pieces searched by
        backtracking (Liu and Schmidt 2012).  Every locus within K is found either
        way; the default (None) picks per chunk what measured fastest
        (:func:`dmap.approx.seeds.choose_seed_edits`).
    chunk_size
        Reads per task (the largest chunk when ``guided``); by default
        200,000 for exact mapping and 50,000 with ``max_errors``.
    guided
        Shrink chunks toward the end of an uncompressed input so that devices
        of unequal speed finish together (:class:`dmap.schedule.GuidedChunks`;
        with one device worker the chunks only grow from a small first one).
    block_major
        Among the chunks in flight, run all of one block before the next
        (fewer block reloads when a device cannot hold every block).
    in_flight
        Chunks submitted at once (bounds memory).
    strict
        Stop with an error at the first read that cannot be searched (empty,
        longer than the index maps, a symbol outside the alphabet).  By
        default such a read is written unmapped and counted in
        :attr:`MappingResult.unmappable`.  In DNA reads any letter other
        than ACGT is an ``N`` and maps where the read's other bases allow.
    read_group
        A read group's header line in bwa's ``-R`` syntax
        (``'@RG\\tID:x\\tSM:y'``): written in the header, and its ID as
        ``RG:Z:`` on every record.
    threads
        For the embedded cluster: the cores it uses (:func:`dmap.cluster.embedded_client`).
    progress
        Reports the reads mapped as chunks are written (:class:`dmap.progress.Progress`).
    return_hits
        Keep the hits in the result (set False for large runs written to SAM).
    processes
        For the embedded cluster: threads in this process (False, the
        default: they start in well under a second and share reads without
        copies; the kernels release the interpreter lock), or one spawned
        process per device (True).

    Returns
    -------
    MappingResult
        Counts, timing and (``return_hits``) the hits.
    """
    if max_hits is not None and max_hits < 1:
        raise DmapError(f"--max-hits must be at least 1, not {max_hits}")
    if in_flight < 1:
        raise DmapError("in_flight must be at least 1")
    if threads is not None and (threads < 1 or client is not None or scheduler is not None):
        raise DmapError("--threads applies only to the embedded cluster (no --scheduler or --cluster), "
                        f"and must be at least 1, not {threads}")
    group = sam.ReadGroup.parse(read_group) if read_group is not None else None
    if not 0 <= max_errors <= MAX_ERRORS_LIMIT:
        raise DmapError(f"--max-errors must be between 0 and {MAX_ERRORS_LIMIT}, not {max_errors}")
    idx = open_index(index)
    approx = approximate_settings(idx, max_errors, report_all, eqx, max_hits, engine, delta, neighborhood_errors,
                                   seed_edits)
    if max_errors >= idx.meta.max_query_length:
        raise DmapError(f"--max-errors {max_errors} leaves no read length within the index's maximum query "
                        f"length {idx.meta.max_query_length}")
    contig_names = [c.name for c in idx.meta.contigs]
    if chunk_size is None:
        chunk_size = DEFAULT_CHUNK_SIZE if approx is None else DEFAULT_APPROX_CHUNK_SIZE
    schedule = GuidedChunks(reads, chunk_size) if guided else None
    # An alignment with K edits spans up to m + K reference symbols, and must fit in a block overlap.
    # Exact mapping checks the symbols of every chunk but the first in the search kernel.
    chunks = iter_read_chunks(reads, idx.alphabet, chunk_size, max_length=idx.meta.max_query_length - max_errors,
                              next_size=schedule, check_symbols=approx is not None, strict=strict)
    first = next(chunks, None)  # input errors surface before a cluster starts
    if first is not None:
        _warn_alphabet_mismatch(first, idx)
    chunks = _prepended([first], chunks) if first is not None else iter(())
    t0 = time.perf_counter()
    result = MappingResult()
    kept: list[tuple[ChunkHits, ReadChunk]] = []
    out = writer = None
    if sam_path is not None:
        out = Output(sam_path, inputs=[reads], index=idx.path)
        writer = SamWriter(out.file, contig_names, max_hits, device=prepare_device(), name=out.name,
                               read_group=group, after_failure=out.after_failure)
    try:
        if writer is not None:
            writer.write_header(sam.header(idx.meta, argv, group))
        if first is not None:  # no reads, no cluster: the SAM file is its header
            with _client(client, scheduler, processes, threads) as c:
                n_workers = require_device_workers(c)
                if schedule is not None:
                    schedule.n_workers = n_workers
                before = device_stats(c)
                try:
                    _run(c, idx, chunks, writer, in_flight, result, kept if return_hits else None, block_major,
                         approx, strict, progress)
                except BaseException:
                    if out is not None:
                        out.discard()  # at once: closing the cluster takes a while, and a SIGKILL may follow
                    raise
                after = device_stats(c)
                result.block_loads = {w: st["block_loads"] - before.get(w, {}).get("block_loads", 0)
                                      for w, st in after.items()}
                if approx is not None:
                    result.candidates = {k: _total(after, k) - _total(before, k) for k in ("seed hits", "regions")}
        if out is not None:
            out.commit()
            result.sam_path = out.target or out.name
    # Writes raise OutputError (SamWriter), so an OSError here is Dask's: e.g.
    # "Timed out trying to connect" to a scheduler that was killed.
    except (CommClosedError, FutureCancelledError, CancelledError, OSError) as e:
        reason = " ".join(str(e).split())  # Dask's messages span lines; the CLI prints one
        raise ClusterError(
            f"lost the Dask cluster during the run ({type(e).__name__}: {reason}); "
            + (out.after_failure if out is not None else "no output was written")
        ) from None
    finally:
        if out is not None:
            out.discard()  # after commit(): nothing left to do
    if return_hits:
        result.hits = collect_hits(kept, contig_names, approx is not None)
    result.seconds = time.perf_counter() - t0
    return result


def _warn_alphabet_mismatch(chunk: ReadChunk, idx: Index, sample: int = 1 << 16) -> None:
    """Warn when the first reads look like DNA against a protein or text index, or like
    protein against a DNA index: both map (nearly) nothing, without an error."""
    lengths = chunk.lengths[np.cumsum(chunk.lengths, dtype=np.int64) <= sample]
    if not lengths.sum():
        return
    starts = chunk.offsets[:lengths.size].astype(np.int64)
    at = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)]), lengths)
    seq = chunk.data[at + np.arange(at.size)]
    nucleotides = np.isin(seq, np.frombuffer(b"ACGTNacgtn", np.uint8)).mean()
    name = idx.alphabet.name
    if name != "dna" and nucleotides == 1.0:
        warnings.warn(f"the reads hold only A, C, G, T and N, as DNA does, but the index is of the {name} "
                      "alphabet: DNA reads map to a DNA index (built with 'dmap index REF -o INDEX')",
                      DmapWarning, stacklevel=3)
    elif name == "dna" and nucleotides < 0.5:
        warnings.warn(f"{100 * (1 - nucleotides):.0f}% of the first reads' symbols are not A, C, G, T or N, "
                      "as in protein or text, but the index is of DNA: they count as N and map nowhere "
                      "(build the index with --alphabet protein or text)", DmapWarning, stacklevel=3)


def _total(stats: dict[str, dict], key: str) -> int:
    """A candidate counter summed over the workers of :func:`device_stats`."""
    return sum(st["candidates"].get(key, 0) for st in stats.values())


def block_priority(block: int, chunk: int, window: int) -> int:
    """Dask priority (higher runs first): earlier windows of ``window`` chunks
    first, then lower blocks, then earlier chunks.

    Without the window, a chunk submitted late (when chunk 0 is written)
    would put its block-0 task ahead of the older chunks' last blocks and
    drag a device that holds one block back to block 0.
    """
    return -((chunk // window) * (1 << 48) + block * (1 << 32) + chunk)


def _worker_device_stats(dask_worker) -> dict | None:
    plugin = dask_worker.plugins.get(DEVICE_PLUGIN)
    return None if plugin is None else plugin.stats(str(dask_worker.name))


def device_stats(client: Client) -> dict[str, dict]:
    """Counters of each device worker, read now: device, block loads, queries
    searched, seconds per activity (the dashboard's dmap page shows the same)."""
    return {w: s for w, s in client.run(_worker_device_stats).items() if s is not None}


def block_loads(client: Client) -> dict[str, int]:
    """Index blocks each device worker has loaded since it started (blocks stay resident between tasks)."""
    return {w: s["block_loads"] for w, s in device_stats(client).items()}


def block_homes(client: Client, idx: Index) -> dict[int, str]:
    """Preferred worker of each block, or {} when every device can hold every block.

    When the index is larger than a device's block budget, block b prefers
    worker b mod n (BowMapCL's partitioned blocks), so each device loads only
    its share; otherwise any worker takes any block, which balances load best.
    """
    stats = device_stats(client)
    if len(stats) < 2 or idx.n_blocks < 2:
        return {}
    total = sum(idx.block_nbytes(b) for b in range(idx.n_blocks))
    if total <= min(s["block_budget"] for s in stats.values()):
        return {}
    workers = sorted(stats)
    return {b: workers[b % len(workers)] for b in range(idx.n_blocks)}


def _prepended(first: list, rest: Iterator):
    """The one item of ``first``, then those of ``rest``.  The list gives its item
    up, so nothing keeps the first chunk (and its checked symbols' codes) once
    it is written."""
    yield first.pop()
    yield from rest


def _run(client, idx, chunks, writer, in_flight, result, kept, block_major=True,
         approx: Approximate | None = None, strict: bool = False, progress: Progress | None = None) -> None:
    """Submit chunks from this thread; a writer thread takes results in input order.

    Reading/encoding the next chunks overlaps with formatting and writing
    the finished ones.  The queue holds at most ``in_flight`` chunks, so
    memory stays bounded whatever the input size.
    """
    path = idx.path
    dev = {DEVICE_RESOURCE: 1}
    home = block_homes(client, idx)
    done = object()
    pending: queue.Queue = queue.Queue(maxsize=in_flight)
    failure: list[BaseException] = []
    stopped = threading.Event()

    def submit(chunk: ReadChunk) -> None:
        encoded = chunk.encoded() if approx is not None else chunk.read_bytes()
        reads_f = client.scatter(encoded, hash=False)
        seed_edits = 0  # edits per FM seed: 0 for exact search (and for exact mapping)
        if approx is not None and approx.engine == "phash":
            seeds_f = client.scatter(neighborhood_patterns(encoded.lengths, approx.window, approx.delta), hash=False)
        elif approx is not None:
            seeds, seed_edits = approx.seeds_for(encoded.lengths)
            seeds_f, queries_f = client.scatter([seeds, seeds.encoded(encoded)], hash=False)
        located = []
        searched = chunk.searched
        for b in range(idx.n_blocks if len(encoded) else 0):  # a chunk of skipped reads alone needs no device
            # Block-major among the chunks in flight (BowMapCL 4.4.1): a device
            # works through one block for all of them before the next, so a
            # device that cannot hold every block reloads each once per
            # window of chunks instead of once per chunk.
            prio = block_priority(b, chunk.number, in_flight) if block_major else -chunk.number
            place = {"workers": [home[b]], "allow_other_workers": True} if home else {}
            task = dict(resources=dev, pure=False, priority=prio, **place)
            if approx is not None and approx.engine == "phash":
                loc = client.submit(neighborhood_task, path, b, reads_f, seeds_f, approx.neighborhood_errors, **task)
            else:
                if seed_edits:
                    s = client.submit(edit_search_task, path, b, queries_f, seed_edits, **task)
                else:
                    s = client.submit(search_task, path, b, queries_f if approx else reads_f, **task)
                loc = client.submit(locate_task, path, b, s, **task)
            if approx is not None:
                loc = client.submit(verify_task, path, b, reads_f, seeds_f, loc, approx.max_errors, approx.eqx, **task)
            located.append(loc)
        if approx is None:
            merged = client.submit(merge_task, path, len(chunk), located, searched, pure=False,
                                   priority=-chunk.number)
        else:
            f = chunk.fields
            hashes = name_hashes(f.data, f.name_off, f.name_len)
            merged = client.submit(merge_alignments_task, path, len(chunk), located, approx.max_errors,
                                   approx.report_all, approx.max_hits, searched,
                                   hashes if searched is None else hashes[searched], pure=False,
                                   priority=-chunk.number)
        pending.put((merged, chunk, time.perf_counter()))

    def write_in_order() -> None:
        bytes_done = 0
        try:
            while (item := pending.get()) is not done:
                if stopped.is_set():  # the submitter failed or was interrupted: drop the rest
                    continue
                fut, chunk, started = item
                hits: ChunkHits | ChunkAlignments = fut.result()
                if hits.bad.size:  # found by the search kernel (the first chunk's were found on the host)
                    if strict:
                        raise chunk.unknown_symbol_error(int(hits.bad[0]))
                    chunk.unmappable["unknown symbol"] = chunk.unmappable.get("unknown symbol", 0) + hits.bad.size
                for why, n in chunk.unmappable.items():
                    result.unmappable[why] = result.unmappable.get(why, 0) + n
                if writer is not None:
                    writer.write_records(chunk, hits)
                counts = hits.counts()
                result.n_reads += len(chunk)
                result.n_mapped += int((counts > 0).sum())
                result.n_hits += len(hits)
                result.chunk_seconds.append(time.perf_counter() - started)
                if progress is not None:
                    bytes_done += chunk.file_bytes
                    progress.update(result.n_reads, bytes_done)
                if kept is not None:
                    kept.append((hits, chunk))
        except BaseException as e:  # handed to the submitting thread
            failure.append(e)
            while pending.get() is not done:  # unblock the submitter
                pass

    thread = threading.Thread(target=write_in_order, name="dmap-sam-writer", daemon=True)
    thread.start()
    try:
        for chunk in chunks:
            if failure:
                break
            submit(chunk)
    except BaseException:
        stopped.set()
        raise
    finally:
        pending.put(done)
        thread.join()
    if failure:
        raise failure[0]
