"""Building and running the Dask graph of a mapping job.

For each chunk ``i`` of the input and index block ``b``::

               /-- block(i, b)  --\\
    read(i) --<                    >-- finish(i) -> SAM records of chunk i -- [summary(i), write(i)]
               \\-- block(i, b') --/

``read`` parses a byte range of the reads file on a worker (or a block of
whole records that the client read from a stream, :mod:`dmap.io.splits`;
for paired byte ranges, after ``count`` tasks counted their records), and
``finish`` merges the hits (dedup across block overlaps; with ``-e K``,
joining loci across blocks and ranking them) and formats the records there
too: the client plans the chunks and writes the finished bytes in input
order, and never holds a read, a hit or a record of its own.  ``summary``
and ``write`` put the records into a regular output file at the offset the
client reserves for them.

``block(i, b)`` does a chunk's device work on one block: the reads (exact
mapping) or their K+1 pigeonhole seeds (``max_errors`` K > 0) searched and
located, and with K the seed hits turned into candidate regions, verified
by Myers' kernel and traced back.  ``block`` and ``finish`` (whose SAM
kernel runs on the device) ask for the ``opencl`` resource, so they run
only on workers pinned to a device.  At most ``in_flight`` chunks are
submitted at a time (backpressure: memory stays bounded on any input size),
and chunks are written in input order.

Against an index of one block there is nothing to share between blocks, and
``read``, ``block`` and ``finish`` are one task, ``chunk(i)``
(:func:`dmap.mapping.tasks.chunk_task`): a task's hand-offs through the
scheduler cost more than its CPU suggests (1M exact reads 0.97 against 1.05 s
end to end, 18 of 18 alternating pairs, docs/performance.md).

The graph, its submission with backpressure and the writer that takes the
results in input order stay together here (about 570 lines, 120 of them
:func:`map_reads`' documentation of the public API) so that the Dask side of
dmap can be read in one place; what the tasks compute is in
:mod:`dmap.mapping.tasks`, and the results and settings have modules of their own.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import CancelledError
from fractions import Fraction

import dask
from distributed import Client
from distributed import wait as wait_for
from distributed.client import FutureCancelledError
from distributed.comm.core import CommClosedError
from distributed.scheduler import KilledWorker, NoValidWorkerError, NoWorkerError

from ..approx.alignments import ChunkAlignments
from ..approx.settings import MAX_ERRORS_LIMIT, approximate_settings, longest_read, parse_error_rate
from ..cluster.client import client_for, require_device_workers, require_same_code, require_same_index
from ..cluster.worker import device_stats, run_on_workers
from ..errors import ClusterError, DeviceError, DmapError, DmapWarning, OutputError
from ..format import bam, bgzf, sam
from ..format.writer import Parts, SamWriter, direct_writes
from ..index.store import Index, index_identity, open_index
from ..io import ubam
from ..io.output import Output, record_format
from ..io.pairs import FirstPairs, PairChunk, PairGroup, count_records, plan_pair_files
from ..io.splits import (
    STDIN,
    FileSplit,
    Sniffed,
    Source,
    SourceGroup,
    is_pipe,
    is_url,
    plan_input,
    reads_paths,
    sniff_bam,
)
from ..opencl.device import DEVICE_RESOURCE, DEVICE_SHARE
from ..progress import Progress
from ..reads import FlatStrings
from ..search.hits import ChunkHits
from .pairs import ESTIMATE_PAIRS, InsertBounds, insert_bounds
from .result import MappingResult, collect_hits
from .schedule import (
    DEFAULT_APPROX_CHUNK_SIZE,
    DEFAULT_APPROX_GPU_CHUNK_SIZE,
    DEFAULT_CHUNK_SIZE,
    GuidedChunks,
    block_homes,
    block_priority,
)
from .tasks import (
    ChunkOutput,
    OutputNotSeen,
    RecordSettings,
    WorkerWriteError,
    block_task,
    chunk_task,
    count_task,
    finish_task,
    first_pairs_insert_task,
    insert_task,
    read_task,
    summary_task,
    write_at_task,
)


def map_reads(
    index: str | os.PathLike | Index,
    reads: str | os.PathLike | list,
    mates: str | os.PathLike | list | None = None,
    *,
    interleaved: bool = False,
    min_insert: int | None = None,
    max_insert: int | None = None,
    sam_path: str | os.PathLike | None = None,
    output_format: str | None = None,
    client: Client | None = None,
    scheduler: str | None = None,
    max_hits: int | None = None,
    max_errors: int = 0,
    error_rate: float | str | Fraction | None = None,
    report_all: bool = False,
    eqx: bool = False,
    engine: str = "fm",
    delta: int = 1,
    neighborhood_errors: int | None = None,
    seed_edits: int | None = None,
    chunk_size: int | None = None,
    in_flight: int | None = None,
    return_hits: bool = True,
    processes: bool = False,
    guided: bool = True,
    block_major: bool = True,
    strict: bool = False,
    read_group: str | list[str] | None = None,
    append_comment: bool = False,
    unmapped: bool = True,
    threads: int | None = None,
    workers_per_device: int = 1,
    dashboard: bool | int = False,
    progress: Progress | None = None,
    argv: list[str] | None = None,
) -> MappingResult:
    """Map reads: every exact occurrence, or every locus within K edits (both strands for DNA).

    Parameters
    ----------
    index
        A dmap index (path or :class:`dmap.Index`).
    reads
        FASTQ or FASTA file, optionally gzip-compressed; a pipe, or ``"-"`` for standard input; or
        several files, mapped as one run in order (a list, or paths joined by commas).
    mates
        The second mates of paired-end reads, in the order of their first mates in
        ``reads`` (one file each, given as ``reads`` is; :func:`dmap.read_manifest` reads both,
        and the read groups, from one file; :mod:`dmap.mapping.pairs` says what is reported).  The result's
        hits are then each mate's alignments (every locus within K), read ``2i`` and ``2i + 1``
        being pair ``i``'s mates.
    interleaved
        ``reads`` holds paired-end reads, the two mates of each pair one after the other.
    min_insert, max_insert
        Pairs: the inserts of a proper pair, from the forward mate's first base to the
        reverse mate's last (both or neither); by default estimated from the first
        :data:`dmap.mapping.pairs.ESTIMATE_PAIRS` pairs (whatever the chunks).
    sam_path
        Write SAM here: a file (written under a temporary name and renamed at
        the end; an existing file is replaced only if dmap wrote it), a FIFO
        or device, or ``"-"`` for standard output (see :mod:`dmap.io.output`).
    output_format
        ``"sam"``, ``"bam"`` (BGZF-compressed, :mod:`dmap.format.bam`; DNA indexes
        only) or ``"sam.gz"`` (SAM text in BGZF blocks, as ``bgzip`` writes it); by
        default chosen by ``sam_path``'s name (:func:`dmap.io.output.record_format`):
        BAM for ``.bam``, BGZF-compressed SAM for ``.gz`` or ``.bgz``, else SAM.
    client, scheduler
        A Dask client, or a scheduler address to connect to; with neither, an
        embedded cluster with one worker per local OpenCL device is started.
    max_hits
        Report at most this many hits per read in the SAM (all are counted).
    max_errors
        K: 0 for exact matches; otherwise every locus where the read aligns
        with at most K edits (substitutions, insertions, deletions) is found
        (see :mod:`dmap.approx.alignments`), and the best ones reported.
    error_rate
        Instead of ``max_errors``: each read's K is floor(rate x its length), as
        Yara's ``-e`` and RazerS 3's ``-i`` take it, so that reads trimmed to
        different lengths allow the same share of edits (``0.05`` or ``"5%"``).
        Reads too long for the index at their K (m + K symbols over its maximum
        query length, or K over 32) are written unmapped.
    report_all
        With ``max_errors`` or ``error_rate``: report every locus within K, not only the best.
    eqx
        With ``max_errors`` or ``error_rate``: CIGAR with ``=``/``X`` instead of ``M``.
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
        way; the default (None) picks for each read, by its length, what measured fastest
        (:func:`dmap.approx.seeds.choose_seed_edits`).
    chunk_size
        Reads per task (the largest chunk when ``guided``); by default
        200,000 for exact mapping and 50,000 with ``max_errors`` or ``error_rate`` (200,000 where
        every device is a GPU).
    guided
        Shrink chunks toward the end of an uncompressed input so that devices
        of unequal speed finish together (:class:`dmap.mapping.schedule.GuidedChunks`;
        with one device worker the chunks only grow from a small first one).
    block_major
        Among the chunks in flight, run all of one block before the next
        (fewer block reloads when a device cannot hold every block).
    in_flight
        Chunks submitted at once (bounds memory); default two per device
        worker and two per device task one worker runs at once, at least 4,
        so that every worker has a chunk to start while another's results
        are written.
    strict
        Stop with an error at the first read that cannot be searched (empty,
        longer than the index maps, a symbol outside the alphabet).  By
        default such a read is written unmapped and counted in
        :attr:`MappingResult.unmappable`.  In DNA reads any letter other
        than ACGT is an ``N`` and maps where the read's other bases allow.
    read_group
        A read group's header line in bwa's ``-R`` syntax
        (``'@RG\\tID:x\\tSM:y'``): written in the header, and its ID as
        ``RG:Z:`` on every record; or a list of them, one per reads file (per
        pair of files for paired-end reads), each file's records tagged with
        its own (:func:`dmap.format.sam.read_groups`).  Without it, reads
        from BAM files whose headers name read groups keep their records'
        (:func:`_bam_read_groups`).
    append_comment
        End each read's records with its FASTQ or FASTA header's comment (what follows its name
        and a space or tab), as ``bwa mem -C``; it must be SAM tags (``BC:Z:ACGT``), else the run
        stops at the first read whose comment is not (:func:`dmap.format.sam.check_comments`).
        A BAM record's comment is its tags but ``RG`` (:class:`dmap.io.ubam.BamExtras`).
    unmapped
        Write a record for each read that maps nowhere (default), as SAM wants every read once;
        False leaves them out, and pairs where neither mate maps, as ``bowtie2 --no-unal`` does
        (a pair with one mate mapped keeps both records).  The counts still count them.
    threads
        For the embedded cluster: the cores it uses (:func:`dmap.cluster.client.embedded_client`).
    dashboard
        For the embedded cluster: serve the Dask dashboard, with the dmap page at ``/dmap``,
        on 127.0.0.1:8787 (True) or that port (0: any free one) while the run lasts;
        ``progress`` tells its address.
    progress
        Reports the reads mapped as chunks are written (:class:`dmap.progress.Progress`).
    return_hits
        Keep the hits in the result (set False for large runs written to SAM).
    processes
        For the embedded cluster: threads in this process (False, the
        default: they start in well under a second and share reads without
        copies; the kernels release the interpreter lock), or one spawned
        process per device (True).
    workers_per_device
        For the embedded cluster: that many spawned worker processes share
        each device (implies ``processes``).  Each reads, merges and formats
        its own chunks, so a GPU host's cores serve its GPU.  On an H100 with
        16 cores, 10M exact reads took 7.2 s with 8 against 9.0 s with one;
        each worker process's start (imports, context, index) is paid in the
        run, which a standing cluster of 8 does not pay: 3.6 s
        (docs/performance.md, "GPU").

    Returns
    -------
    MappingResult
        Counts, timing and (``return_hits``) the hits.
    """
    _check_options(max_hits, in_flight, max_errors, mates is not None and interleaved,
                   client is None and scheduler is None, workers_per_device, threads, dashboard)
    paired = mates is not None or interleaved
    insert = insert_bounds(paired, min_insert, max_insert)
    idx = open_index(index, refresh=True)  # (an index at a URL: this host's copy of its current build)
    if paired and idx.alphabet.n_strands != 2:
        raise DmapError(f"paired-end reads need a DNA index (both strands); this index is of {idx.alphabet.name}")
    # The longest read searched: an alignment with K edits spans up to m + K reference symbols,
    # and must fit in a block overlap.
    max_length = idx.meta.max_query_length - max_errors
    if error_rate is not None:
        if max_errors:
            raise DmapError("give either --max-errors or --error-rate, not both")
        error_rate = parse_error_rate(error_rate)
        max_length, max_errors = longest_read(idx.meta.max_query_length, error_rate)
    approx = approximate_settings(idx, max_errors, report_all, eqx, max_hits, engine, delta, neighborhood_errors,
                                   seed_edits, error_rate)
    if max_errors >= idx.meta.max_query_length:
        raise DmapError(f"--max-errors {max_errors} leaves no read length within the index's maximum query "
                        f"length {idx.meta.max_query_length}")
    contig_names = idx.meta.contigs.names
    fmt = record_format(sam_path, output_format, idx.alphabet.name) if sam_path is not None else "sam"
    chunk_given = chunk_size is not None
    if chunk_size is None:
        chunk_size = DEFAULT_CHUNK_SIZE if approx is None else DEFAULT_APPROX_CHUNK_SIZE
        # The embedded cluster's devices are known before it starts, so all its chunks take the
        # size for GPUs, pairs' byte ranges (cut before the cluster starts) included; a running
        # cluster's devices are known once connected, for the chunks planned from then on.
        if approx is not None and client is None and scheduler is None and _local_gpus_only():
            chunk_size = DEFAULT_APPROX_GPU_CHUNK_SIZE
    if chunk_size < 1:
        raise DmapError(f"--chunk-size must be at least 1, not {chunk_size}")
    firsts = _absolute(reads_paths(reads))
    seconds = _absolute(reads_paths(mates)) if mates is not None else None
    paths = firsts + (seconds or [])
    # (A pipe is looked at here and read again from the bytes looked at: it may be BAM, whatever its name.)
    bams = {p: b for p in paths if (p.lower().endswith(".bam") or is_pipe(p)) and (b := sniff_bam(p)) is not None}
    if not paired:
        for path in (p for p, b in bams.items() if b.paired):
            warnings.warn(f"reads file {path!r} holds pairs (flag 0x1), mapped here as single reads; "
                          "--interleaved maps them as pairs", DmapWarning, stacklevel=2)
    if read_group is not None:
        groups = sam.read_groups(read_group, len(firsts))
        tails, record_groups = _tails(firsts, groups), ()
    else:
        groups, tails, record_groups = _bam_read_groups(firsts, bams)
    # What workers take from BAM records besides their reads: read groups, and with -C their tags.
    extras = ubam.BamExtras(record_groups, append_comment)
    schedule = GuidedChunks(paths, chunk_size) if guided else None
    # Planning reads each file's first 64 KiB: a missing file or one that is not FASTA/FASTQ is
    # an error before a cluster starts.
    counts = WorkerCounts()  # paired byte ranges: their records counted on the workers, once there are some
    # The insert size is estimated from the first pairs: those the first chunk holds or, where FASTQ
    # and FASTA files cut them across chunks, those of the FirstPairs planned before them.
    sources = (plan_pair_files(firsts, seconds, schedule or (lambda *_: chunk_size), counts, split=True,
                               first_pairs=ESTIMATE_PAIRS if insert is None else 0, extras=extras)
               if paired else plan_input(paths, schedule or (lambda *_: chunk_size), extras))
    first = next(sources, None)
    first_pairs = None
    if isinstance(first, FirstPairs):
        first_pairs, first = first.source, next(sources, None)
    no_reads = first is None
    sources = _prepended([first], sources) if not no_reads else iter(())
    del first  # _prepended's list alone holds the first chunk, and gives it up once it is submitted
    # Exact mapping checks the symbols of every chunk but the first in the search kernel.
    reading = dict(max_length=max_length, check_symbols=approx is not None, strict=strict)
    settings = RecordSettings(max_hits, groups[0].tag if groups and tails is None else "", approx, strict,
                              return_hits, format=fmt, insert=insert,
                              group_tails=tuple(sam.ReadGroup("", name).tag for name in record_groups),
                              comments=append_comment, unmapped=unmapped)
    parts = None
    t0 = time.perf_counter()
    result = MappingResult()
    kept: list[tuple[ChunkHits | ChunkAlignments, FlatStrings, int]] = []
    out = writer = None
    if sam_path is not None:
        out = Output(sam_path, inputs=paths, index=idx.path)
        writer = SamWriter(out.file, name=out.name, after_failure=out.after_failure, direct=out.tmp is not None)
    def write_header(bounds: InsertBounds | None) -> None:
        """The header, once the insert bounds of pairs are known (from the first chunk, which holds the
        first pairs)."""
        if writer is not None:
            text = sam.header(idx.meta, argv, groups or (), [bounds.describe()] if bounds is not None else [])
            head = (bam.header(text, contig_names, idx.meta.contigs.lengths.tolist()) if fmt == "bam"
                    else text.encode())
            writer.write(head if fmt == "sam" else bgzf.compress(head))

    try:
        if no_reads:  # no reads, no cluster: the SAM file is its header
            write_header(insert)
        else:
            started = time.perf_counter()
            with client_for(client, scheduler, processes, threads, workers_per_device, dashboard) as c:
                result.cluster_seconds = time.perf_counter() - started
                if dashboard is not False and progress is not None:
                    link = c.dashboard_link
                    progress.note(f"dmap: the dashboard is at {link}, the devices at {link.rsplit('/', 1)[0]}/dmap")
                slots = require_device_workers(c)
                n_workers = len(slots)
                counts.client = c
                # Workers in other processes write the records themselves; those in this
                # process (the embedded cluster) hand them over in memory, without a copy.
                apart = any(pid != os.getpid() for pid in run_on_workers(c, os.getpid).values())  # other processes
                if writer is not None and apart:
                    parts = Parts.create(out.tmp)
                    settings = dataclasses.replace(settings, parts=parts, in_place=out.tmp is not None)
                if schedule is not None:
                    schedule.n_workers = n_workers
                # Two chunks per worker, and two per device task that one worker runs at once:
                # an embedded GPU worker of 8 threads mapped 10M reads in 4.44 s with 16 chunks in
                # flight against 4.70 s with 4 (H100 host, docs/performance.md).
                in_flight = in_flight or max(4, 2 * n_workers, 2 * max(slots))
                before = device_stats(c, idx.source)
                require_same_code(before)
                require_same_index(before, idx.source, index_identity(idx.path))
                gpus = [st["gpu"] for st in before.values()]
                if approx is not None and not chunk_given and all(gpus):
                    # (the planner's next chunks take it: `schedule`, or the closure over chunk_size)
                    chunk_size = DEFAULT_APPROX_GPU_CHUNK_SIZE
                    if schedule is not None:
                        schedule.max_size = chunk_size
                if not direct_writes(gpus):
                    settings = dataclasses.replace(settings, direct=False)
                    if writer is not None:
                        writer.through_page_cache()
                try:
                    # A chunk of a stream is sent with its task (_run's submit): as large as Dask warns of.
                    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1 TiB"}):
                        _run(c, idx, sources, writer, in_flight, result, kept if return_hits else None,
                             block_major, reading, settings, progress, write_header, tails, first_pairs, apart)
                except BaseException:
                    if out is not None:
                        out.discard()  # at once: closing the cluster takes a while, and a SIGKILL may follow
                    raise
                after = device_stats(c)
                result.block_loads = {w: st["block_loads"] - before.get(w, {}).get("block_loads", 0)
                                      for w, st in after.items()}
                if approx is not None:
                    result.candidates = {k: _total(after, k) - _total(before, k) for k in ("seed hits", "regions")}
                closing = time.perf_counter()
            result.close_seconds = time.perf_counter() - closing
        if out is not None:
            if fmt != "sam":
                writer.write_end(bgzf.EOF)
            writer.finish()
            out.commit()
            result.sam_path = out.target or out.name
    except RUN_FAILURES as e:
        error = run_error(e, out, writer)
        if error is None:
            raise
        raise error from None
    finally:
        if writer is not None:
            writer.close()
        if out is not None:
            out.discard()  # after commit(): nothing left to do
        if parts is not None:
            parts.remove()
    if return_hits:
        result.hits = collect_hits(kept, contig_names, approx is not None)
    result.seconds = time.perf_counter() - t0
    return result


def _check_options(max_hits: int | None, in_flight: int | None, max_errors: int, mates_and_interleaved: bool,
                   embedded: bool, workers_per_device: int, threads: int | None, dashboard: bool | int) -> None:
    """Refuse options of :func:`map_reads` that contradict each other or are out of range, in one line."""
    if max_hits is not None and max_hits < 1:
        raise DmapError(f"--max-hits must be at least 1, not {max_hits}")
    if in_flight is not None and in_flight < 1:
        raise DmapError("in_flight must be at least 1")
    if workers_per_device < 1 or (workers_per_device > 1 and not embedded):
        raise DmapError("--workers-per-device applies only to the embedded cluster (no --scheduler or "
                        f"--cluster), and must be at least 1, not {workers_per_device}")
    if threads is not None and (threads < 1 or not embedded):
        raise DmapError("--threads applies only to the embedded cluster (no --scheduler or --cluster), "
                        f"and must be at least 1, not {threads}")
    if dashboard is not False and not embedded:
        raise DmapError("--dashboard applies only to the embedded cluster (no --scheduler or --cluster); "
                        "a running cluster's scheduler serves its own dashboard")
    if not 0 <= max_errors <= MAX_ERRORS_LIMIT:
        raise DmapError(f"--max-errors must be between 0 and {MAX_ERRORS_LIMIT}, not {max_errors}")
    if mates_and_interleaved:
        raise DmapError("give either a second reads file or --interleaved, not both")


# What a run's cluster or its workers' writes may raise, which run_error turns into one line.
RUN_FAILURES = (RuntimeError, NoWorkerError, NoValidWorkerError, KilledWorker, WorkerWriteError, CommClosedError,
                FutureCancelledError, CancelledError, OSError)


def run_error(e: BaseException, out: Output | None, writer: SamWriter | None) -> Exception | None:
    """The one-line error for ``e`` (one of :data:`RUN_FAILURES`) that ended a run, naming what the
    run leaves of its output ``out``; None where ``e`` is not the cluster's (a bug's RuntimeError)."""
    def cluster_failure(message: str) -> ClusterError:
        return ClusterError(f"{message}; " + (out.after_failure if out is not None else "no output was written"))

    if isinstance(e, RuntimeError):
        if not str(e).startswith(SCHEDULER_CANNOT_LOAD):
            return None
        cause = f"{type(e.__cause__).__name__}: {e.__cause__}" if e.__cause__ is not None else "no reason given"
        return cluster_failure(f"the Dask scheduler cannot load dmap's tasks ({cause}); run the scheduler where the "
                               "same dmap is installed as here")
    if isinstance(e, NoWorkerError | NoValidWorkerError):
        # A scheduler started with distributed.scheduler.no-workers-timeout fails the tasks that
        # waited that long for a worker (docs/cluster.md).
        return cluster_failure(f"no worker could run dmap's tasks ({_one_line(e)})")
    if isinstance(e, KilledWorker):
        # The scheduler gives a task up once that many workers died running it: a Nanny
        # restarts a worker past 95% of its memory limit, and the OOM killer or a crashing
        # driver end one without a word.
        deaths = e.allowed_failures + 1
        return cluster_failure(f"workers died running one of the run's tasks, {deaths} time{'s' * (deaths > 1)} (out "
                               f"of memory, or killed; the last was {e.last_worker.address}, whose log may say why)")
    if isinstance(e, WorkerWriteError):  # the output's part, or its part file, on a worker
        name = out.name if e.path == writer.path else e.path
        return OutputError.writing(name, e.error, out.after_failure)
    # Writes raise OutputError (SamWriter), so an OSError here is Dask's: e.g.
    # "Timed out trying to connect" to a scheduler that was killed.
    return cluster_failure(f"lost the Dask cluster during the run ({type(e).__name__}: {_one_line(e)})")


def _source_paths(source: Source | PairChunk) -> list[str]:
    """The reads files (first mates' files) of a chunk's parts."""
    return [part.path for part in source.parts] if isinstance(source, SourceGroup | PairGroup) else [source.path]


def _bam_read_groups(firsts: list[str], bams: dict[str, Sniffed]
                     ) -> tuple[list[sam.ReadGroup] | None, dict[str, str] | None, tuple[str, ...]]:
    """The read groups of a run given none (no ``-R``, no manifest), from the headers of its BAM
    files, as GATK's unaligned BAM and a sequencing centre's merged lanes hold them: the ``@RG``
    lines of the run's header, what ends each file's records (:func:`_tails`), and the IDs that
    the records' ``RG`` tags are looked up among (:attr:`dmap.io.ubam.BamExtras.read_groups`).

    Only where every reads file (first mates' file) is BAM whose header names read groups: the
    header then holds them all.  A read gets its record's group where its ``RG`` tag names
    one; else its file's one group, where its header names one, and no group where it names
    several.  Where no file names several, no tag is read: each file's reads get its read group.
    Elsewhere a BAM that names read groups gets a warning, and the run has none.

    Raises
    ------
    DmapError
        When a header's ``@RG`` line is not one that ``-R`` takes (no ID, say), or two files name
        one ID with different lines.
    """
    lines = {p: ubam.read_group_lines(b.header) for p, b in bams.items()}
    if not firsts or not all(lines.get(p) for p in firsts):
        for path, found in lines.items():
            if found:
                warnings.warn(f"reads file {path!r} names {len(found)} read group(s) in its header, which dmap "
                              "takes only where every reads file is BAM naming read groups: give read groups "
                              "with -R or --manifest", DmapWarning, stacklevel=3)
        return None, None, ()
    groups: dict[str, sam.ReadGroup] = {}
    for path in firsts:
        for line in lines[path]:
            try:
                group = sam.ReadGroup.parse(line)
            except DmapError as e:
                raise DmapError(f"reads file {path!r}: its header's {e}") from None
            if groups.setdefault(group.id, group).line != group.line:
                raise DmapError(f"reads files name read group {group.id!r} with two different @RG lines; an ID "
                                "names one read group: give read groups with -R or --manifest")
    several = any(len(lines[p]) > 1 for p in firsts)
    tails = {p: sam.ReadGroup.parse(lines[p][0]).tag if len(lines[p]) == 1 else "" for p in firsts}
    return list(groups.values()), tails, tuple(groups) if several else ()


def _tails(firsts: list[str], groups: list[sam.ReadGroup] | None) -> dict[str, str] | None:
    """What ends each record, by reads file (first mates' file of a pair), where the files have
    read groups of their own; None where every record ends alike (``RecordSettings.tail``).

    Raises
    ------
    DmapError
        When one file is listed twice with two read groups.
    """
    if not groups or len({g.id for g in groups}) == 1:
        return None
    tails: dict[str, str] = {}
    for path, group in zip(firsts, groups):
        if tails.setdefault(path, group.tag) != group.tag:
            raise DmapError(f"reads file {path!r} is listed twice, with two read groups")
    return tails


def _absolute(paths: list[str]) -> list[str]:
    """Reads paths as workers open them, in working directories of their own."""
    return [p if p == STDIN or is_url(p) else os.path.abspath(p) for p in paths]


def _one_line(error: BaseException) -> str:
    """An exception's message on one line: Dask's span several, and the CLI prints one."""
    return " ".join(str(error).split())


# How Dask's scheduler says it cannot unpickle the tasks it is sent (distributed.scheduler's
# update_graph): its environment lacks dmap, or has another one.
SCHEDULER_CANNOT_LOAD = "Error during deserialization of the task graph"

# Counting a byte range's records (paired input) runs ahead of every chunk's tasks: chunks are
# planned from the counts (block_priority's values are at most 1).
COUNT_PRIORITY = 1 << 60


class WorkerCounts:
    """Records per byte range of paired input (:func:`dmap.io.pairs.plan_pair_splits`' ``count``):
    counted in this process until ``client`` is set (the first chunk is planned before the
    cluster starts, to find empty input), then on the workers, every remaining range of the
    file submitted at once, ahead of the mapping tasks."""

    def __init__(self) -> None:
        self.client: Client | None = None

    def __call__(self, splits: list[FileSplit]) -> Iterator[int]:
        futures, base = None, 0
        for k, split in enumerate(splits):
            if futures is None and self.client is not None:
                futures, base = self.client.map(count_task, splits[k:], pure=False, priority=COUNT_PRIORITY,
                                                 resources={DEVICE_RESOURCE: 0}), k
            if futures is None:
                yield count_records(split)
            else:
                yield futures[k - base].result()
                futures[k - base] = None  # its result is all that is kept


def _total(stats: dict[str, dict], key: str) -> int:
    """A candidate counter summed over the workers of :func:`device_stats`."""
    return sum(st["candidates"].get(key, 0) for st in stats.values())


def _prepended(first: list, rest: Iterator):
    """The one item of ``first``, then those of ``rest``.  The list gives its item
    up, so nothing keeps the first chunk (and its checked symbols' codes) once
    it is written."""
    yield first.pop()
    yield from rest


def _local_gpus_only() -> bool:
    """Whether every OpenCL device of this machine, those the embedded cluster runs on, is a GPU."""
    from ..opencl.discovery import list_devices

    try:
        return all("GPU" in info.type for info in list_devices())
    except DeviceError:  # none: the cluster's start says so
        return False


def _run(client, idx, sources, writer, in_flight, result, kept, block_major, reading: dict,
         settings: RecordSettings, progress: Progress | None = None, write_header=None,
         tails: dict[str, str] | None = None, first_pairs: PairGroup | None = None, apart: bool = False) -> None:
    """Submit chunks from this thread; a writer thread takes results in input order.

    ``tails``: where reads files have read groups of their own, what ends their reads' records,
    by file (a chunk may span files of several read groups: :attr:`RecordSettings.tails`).
    ``first_pairs``: where FASTQ and FASTA files cut the input's first pairs across chunks, those
    pairs, mapped first for the insert bounds of every chunk (:class:`dmap.io.pairs.FirstPairs`).
    ``apart``: the workers run in processes of their own, not in this one.

    Planning the next chunks overlaps with writing the finished ones.  The
    queue holds at most ``in_flight`` chunks, so memory stays bounded
    whatever the input size.
    """
    path = idx.source  # what workers open: a path, or a URL whose copy each host fetches
    dev = {DEVICE_RESOURCE: DEVICE_SHARE}  # BUFFER_SETS device tasks at once per worker
    home = block_homes(client, idx)
    approx = settings.approx
    done = object()
    pending: queue.Queue = queue.Queue(maxsize=in_flight)
    failure: list[BaseException] = []
    stopped = threading.Event()

    def submit_blocks(source, number: int, settings: RecordSettings):
        """A chunk's read task, a task per index block, and the task that merges their hits."""
        # Reading first: a chunk's other tasks wait for it.  Reading takes no device, but asks for
        # none of it on a device worker: a task with a resource restriction is sent to a worker as
        # soon as it is submitted, where Dask would hold back tasks without dependencies (its
        # queuing of root tasks) and feed the device one chunk at a time, undoing block-major order.
        chunk = client.submit(read_task, path, source, **reading, pure=False, resources={DEVICE_RESOURCE: 0},
                              priority=block_priority(0, number, in_flight) + 1 if block_major else -number)
        located = []
        for b in range(idx.n_blocks):
            # Block-major among the chunks in flight (BowMapCL 4.4.1): a device
            # works through one block for all of them before the next, so a
            # device that cannot hold every block reloads each once per
            # window of chunks instead of once per chunk.
            prio = block_priority(b, number, in_flight) if block_major else -number
            place = {"workers": [home[b]], "allow_other_workers": True} if home else {}
            located.append(client.submit(block_task, path, b, chunk, approx, resources=dev, pure=False,
                                         priority=prio, **place))
        return client.submit(finish_task, path, chunk, located, settings, insert[0], resources=dev, pure=False,
                             priority=-number)

    def submit(source: Source) -> None:
        number = source.number
        pairs = isinstance(source, PairChunk)
        chunk_settings = settings if tails is None else dataclasses.replace(
            settings, tails={p: tails[p] for p in _source_paths(source)})  # the chunk's files' alone
        # A chunk read here from a stream carries its bytes in its task, not scattered to a worker: the
        # scheduler keeps a task's arguments and reruns it elsewhere if its worker dies, where data
        # scattered to that worker would be lost with it (and a stream cannot be read again).
        # Against one block nothing is shared between blocks: one task per chunk.  But where the
        # workers are processes of their own, a chunk of pairs submitted before the first pairs'
        # insert bounds are known is three tasks even then: reading and searching need no bounds,
        # merging does, so only its merge waits for them instead of all of it (with 16 threads
        # most of a 1M-read run's chunks are in flight while the first is mapped alone for them).
        # Workers in this process share its interpreter lock with the scheduler and this thread,
        # and there the two more tasks cost more than the wait (docs/performance.md, "GPU").
        waits = apart and pairs and insert[0] is not None and not insert[0].done()
        if idx.n_blocks == 1 and not waits:
            finished = client.submit(chunk_task, path, source, reading, approx, chunk_settings, insert[0],
                                     resources=dev, pure=False, priority=-number)
        else:
            finished = submit_blocks(source, number, chunk_settings)
        if pairs and insert[0] is None and settings.insert is None:
            insert[0] = client.submit(insert_task, finished, pure=False, priority=-number)  # chunk 0's estimate
        # Written in place, the records stay on the worker: this process gets the counts alone.
        summary = client.submit(summary_task, finished, pure=False, priority=-number) if settings.in_place else None
        pending.put((finished, summary, time.perf_counter()))

    placed: list = []  # (write_at_task, finish_task, offset) of the chunks being written in place
    insert: list = [None]  # pairs: the future of the first chunk's insert bounds, for the others
    if first_pairs is not None:
        insert[0] = client.submit(first_pairs_insert_task, path, first_pairs, reading, approx, settings,
                                  resources=dev, pure=False, priority=1)

    def place(wait: bool) -> None:
        """Take the finished writes in place (all of them with ``wait``); a chunk whose worker
        did not see the output file is written here."""
        while placed and (wait or placed[0][0].done()):
            written, fut, offset = placed.pop(0)
            if wait:
                wait_for(written)
            if written.status == "finished":  # its result (None) is not fetched
                continue
            try:
                written.result()  # raises what the task raised (or its cancellation)
            except OutputNotSeen:
                writer.write_at(offset, fut.result().records)

    def write_in_order() -> None:
        bytes_done = 0
        ended = False  # the submitter's last item was taken: nothing more will come
        try:
            while (item := pending.get()) is not done:
                if stopped.is_set():  # the submitter failed or was interrupted: drop the rest
                    continue
                fut, summary, started = item
                chunk: ChunkOutput = (summary or fut).result()
                if chunk.number == 0 and write_header is not None:
                    write_header(chunk.insert)
                    result.insert = chunk.insert
                if chunk.warning is not None:
                    warnings.warn(chunk.warning, DmapWarning, stacklevel=2)
                for why, n in chunk.unmappable.items():
                    result.unmappable[why] = result.unmappable.get(why, 0) + n
                if writer is not None and settings.in_place:
                    offset = writer.reserve(chunk.nbytes)
                    placed.append((client.submit(write_at_task, fut, settings.parts, writer.path, offset,
                                                 settings.direct, pure=False, priority=-chunk.number), fut, offset))
                    place(wait=False)
                elif writer is not None and chunk.part is not None:
                    writer.write_part(chunk.part, chunk.nbytes)
                elif writer is not None:
                    writer.write(chunk.records)
                if kept is not None:
                    kept.append((chunk.hits, chunk.names, result.n_reads))
                result.n_reads += chunk.n_reads
                result.n_mapped += chunk.n_mapped
                result.n_hits += chunk.n_hits
                result.n_proper += chunk.n_proper
                result.capped_pairs += chunk.capped_pairs
                result.chunk_seconds.append(time.perf_counter() - started)
                if progress is not None:
                    bytes_done += chunk.file_bytes
                    progress.update(result.n_reads, bytes_done)
            ended = True
            place(wait=True)  # the last writes in place: a failure may surface only here
        except BaseException as e:  # handed to the submitting thread
            failure.append(e)
            while not ended and pending.get() is not done:  # unblock the submitter
                pass

    thread = threading.Thread(target=write_in_order, name="dmap-sam-writer", daemon=True)
    thread.start()
    try:
        for source in sources:
            if failure:
                break
            submit(source)
    except BaseException:
        # An interrupt, or a chunk that could not be planned.  The writer may be waiting for a
        # chunk that never comes (a cluster whose workers are gone): do not wait for it.  Closing
        # the client cancels that chunk, and the writer then ends on the queue's last item.
        stopped.set()
        while True:
            try:
                pending.get_nowait()
            except queue.Empty:
                break
        pending.put_nowait(done)
        raise
    pending.put(done)
    thread.join()
    if failure:
        raise failure[0]
