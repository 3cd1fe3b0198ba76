"""The ``dmap`` command: a thin layer over the library API."""

from __future__ import annotations

import errno
import gc
import logging
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from functools import wraps

import click

import dmap

from .cluster.config import read_cluster_file
from .errors import DmapError, DmapWarning, Interrupted, OutputError
from .index.store import DEFAULT_MAX_QUERY_LENGTH
from .io.output import FORMATS
from .mapping.pairs import ESTIMATE_PAIRS, PAIR_CAP
from .mapping.schedule import DEFAULT_APPROX_CHUNK_SIZE, DEFAULT_APPROX_GPU_CHUNK_SIZE, DEFAULT_CHUNK_SIZE
from .opencl.discovery import keep_signal_handlers


def _user_errors(f):
    """Turn DmapError into one 'dmap: error: ...' line and exit status 1; an
    interrupt (Ctrl-C, SIGTERM, ...: :data:`TERMINATION_SIGNALS`) into one line and 128 + the
    signal's number."""

    @wraps(f)
    def wrapper(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except OutputError as e:
            if e.errno == errno.EPIPE:  # the reader of a pipe went away (`dmap run ... | head`): as SIGPIPE would
                sys.exit(128 + signal.SIGPIPE)
            raise click.ClickException(str(e)) from None
        except DmapError as e:
            raise click.ClickException(str(e)) from None
        except KeyboardInterrupt as e:
            signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
            click.echo(f"dmap: stopped by {signal.Signals(signum).name}; no partial output file was left", err=True)
            sys.exit(128 + signum)

    return wrapper


def _show_warnings_as_lines() -> None:
    """A :class:`DmapWarning` is one ``dmap: warning: ...`` line on standard error."""
    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DmapWarning):
            click.echo(f"dmap: warning: {message}", err=True)
        else:
            default(message, category, filename, lineno, file, line)

    warnings.showwarning = show


# Signals whose default is to end the process, and which a scheduler or a user sends to end
# a command or to warn it of its end: SIGTERM (SLURM's time limit and scancel, timeout,
# workflow managers), SIGHUP (a closed terminal), SIGINT (Ctrl-C), SIGUSR1 and SIGUSR2
# (SLURM's --signal, SGE's -notify) and SIGXCPU (a CPU-time limit). Their default ends dmap
# at once, its temporary file left behind; dmap stops as at Ctrl-C. PoCL's LLVM would take
# SIGUSR1 and SIGXCPU for itself: their handlers are kept (dmap.opencl.discovery).
TERMINATION_SIGNALS = ("SIGTERM", "SIGHUP", "SIGINT", "SIGUSR1", "SIGUSR2", "SIGXCPU")


def _stop_on_termination() -> None:
    """The termination signals (:data:`TERMINATION_SIGNALS`) end a command as an exception, so
    that temporary files are removed.  Signals that come during that clean-up are ignored, so
    it runs to its end.  A signal the command was started ignoring stays ignored: ``nohup``'s
    SIGHUP, SIGINT for a shell's background job."""
    def stop(signum, frame):
        for s in signals:
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signum)

    signals = [s for s in (getattr(signal, name) for name in TERMINATION_SIGNALS)
               if signal.getsignal(s) in (signal.SIG_DFL, signal.default_int_handler)]
    for s in signals:
        signal.signal(s, stop)
    keep_signal_handlers({s: stop for s in signals if s in (signal.SIGUSR1, signal.SIGXCPU)})
    _signals_reach_the_main_thread(stop, signals)


# While a signal's handler has not run, the signal is sent to the main thread again this often.
SIGNAL_RESEND_SECONDS = 0.05


def _signals_reach_the_main_thread(handler: Callable, signals: list[int]) -> None:
    """Make sure that the main thread runs ``handler`` for ``signals`` however it is blocked.

    Python runs a signal's handler in the main thread, at its next bytecode.  The
    OS kernel hands a signal sent to the process to any of its threads: where
    that is one of Dask's, PoCL's or the inflater's, a main thread blocked in a
    system call (reading a pipe or FIFO whose writer has stalled, waiting for a
    lock) is not interrupted, and the run goes on until more input comes or a
    SIGKILL leaves its partial file behind.  Measured: 1 in 5 SIGTERMs sent to a
    run waiting on a FIFO went unanswered for 10 s.

    Python's C handler writes each signal's number into the wakeup file
    descriptor, from whichever thread took the signal.  A thread of dmap's reads
    the numbers and sends the signal again to the main thread itself, which
    interrupts its system call; until ``handler`` has run (it sets the signals
    to be ignored), each send trips the C handler again and is repeated every
    :data:`SIGNAL_RESEND_SECONDS`.
    """
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # the C handler must never block
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    main = threading.main_thread().ident

    def resend() -> None:
        last = 0.0
        while data := os.read(read_end, 512):
            for signum in set(data) & set(signals):
                time.sleep(max(0.0, last + SIGNAL_RESEND_SECONDS - time.monotonic()))
                if signal.getsignal(signum) is handler:
                    last = time.monotonic()
                    signal.pthread_kill(main, signum)

    threading.Thread(target=resend, name="dmap-signals", daemon=True).start()


def _quiet_dask_logs() -> None:
    """dmap reports failures itself in one line; Dask's client would log
    them again as tracebacks (e.g. when the scheduler goes away)."""
    # Importing distributed applies Dask's logging config, which sets levels
    # on child loggers: import it first (``dmap`` imports it lazily), then
    # quiet each one.
    import distributed  # noqa: F401

    for name in ["distributed", *logging.root.manager.loggerDict]:
        if name.startswith("distributed"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def _show_dmap_logs() -> None:
    """dmap's debug messages on stderr, from this process: the embedded cluster's
    workers run here (with ``--processes`` or a separate cluster, the workers'
    own messages stay in their processes)."""
    log = logging.getLogger("dmap")
    log.setLevel(logging.DEBUG)
    if not any(getattr(h, "dmap_cli", False) for h in log.handlers):  # once, however often run() is called
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        handler.dmap_cli = True
        log.addHandler(handler)


def _show_error(self: click.ClickException, file=None) -> None:
    """Every error is one ``dmap: error:`` line, so a pipeline's log keeps one line per failure; a
    mistyped command line (a usage error, exit status 2) points at the command's help instead of
    printing its usage."""
    ctx = getattr(self, "ctx", None)
    see = f"; see '{ctx.command_path} --help'" if ctx is not None else ""
    message = self.format_message()
    click.echo(f"dmap: error: {message.rstrip('.') if see else message}{see}", err=True)


click.ClickException.show = click.UsageError.show = _show_error


class _IndexGroup(click.Group):
    """``dmap index REF -o IDX`` builds; ``dmap index info IDX`` describes; ``dmap index cache`` lists
    or cleans the copies of URLs' indexes."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["build", *args]
        return super().parse_args(ctx, args)


_gc_paused = False  # set by console_main(gc_paused=True); see dmap/__main__.py


def _start_embedded_devices(threads: int | None) -> None:
    """Begin making the devices of the embedded cluster's in-process workers, which take them
    over, before Dask's imports (0.2-0.6 s of a run's start): their OpenCL contexts are made
    meanwhile (:func:`dmap.opencl.device.start_devices`). The devices are listed here, in the
    main thread, where OpenCL's first listing must be (:func:`keep_signal_handlers`)."""
    from .opencl.device import start_devices
    from .opencl.discovery import limit_cpu_threads, list_devices

    if threads is not None and threads > 0:
        limit_cpu_threads(threads)  # before OpenCL starts, as the embedded cluster would
    try:
        specs = [info.spec for info in list_devices()]
    except DmapError:  # no device: the run says so in its own words
        return
    start_devices(specs)


def startup_done() -> None:
    """Collect garbage again, if :func:`console_main` was told that collection is
    paused, and leave the objects made so far (modules, the cluster) out of it."""
    global _gc_paused
    if _gc_paused:
        _gc_paused = False
        gc.freeze()
        gc.enable()


@click.group()
@click.version_option(dmap.__version__, prog_name="dmap")
@click.pass_context
def main(ctx: click.Context) -> None:
    """dmap: FM-index read mapping on a Dask cluster of OpenCL devices."""
    if ctx.invoked_subcommand != "run":  # run() imports Dask first
        startup_done()


@main.group(cls=_IndexGroup)
def index() -> None:
    """Build (dmap index REFERENCE -o INDEX) or describe (dmap index info INDEX) an index; list or clean
    this host's copies of indexes given as URLs (dmap index cache list|clean)."""


@index.command("build")
@click.argument("reference", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), help="Index directory to create.")
@click.option("--alphabet", type=click.Choice(["dna", "protein", "text"]), default="dna", show_default=True)
@click.option("--max-query-length", "-L", type=int, default=DEFAULT_MAX_QUERY_LENGTH, show_default=True,
              help="Longest read the index can map (blocks overlap by L-1).")
@click.option("--block-length", "-B", type=int, default=None,
              help="Reference symbols per index block [default: 2^29 for DNA; for larger alphabets, "
                   "shorter so that a block's occurrence table stays within 2 GiB].")
@click.option("--occ-layout", type=click.Choice(["interleaved", "bitmap"]), default="interleaved", show_default=True,
              help="interleaved: one cache line per Occ lookup; bitmap: the BowMapCL paper's layout.")
@click.option("--occ-sample-rate", "-R", type=int, default=None,
              help="32-bit bitmap words per symbol between counts [default: 1].")
@click.option("--sa-sample-rate", "-S", type=int, default=None,
              help="Keep one suffix-array value every S rows [default: 1 up to 64 M symbols, then doubling "
                   "with the reference's size, up to 8 from 512 M].")
@click.option("--neighborhood", is_flag=True,
              help="Also build MAROSE's neighborhood index (perfect hashes) for 'dmap run --engine phash'.")
@click.option("--seed-length", type=int, default=8, show_default=True,
              help="--neighborhood: symbols of each seed that must match.")
@click.option("--neighborhood-length", type=int, default=7, show_default=True,
              help="--neighborhood: symbols stored after each seed.")
@click.option("--spaced-seed", default=None, metavar="MASK",
              help="--neighborhood: seed shape, '#' must match and '-' is a wildcard, e.g. '######-##'.")
@click.option("--max-errors-in-neighborhood", type=int, default=1, show_default=True,
              help="--neighborhood: substitutions allowed in the neighborhood at search time (0-2).")
@click.option("-t", "--threads", type=int, default=None,
              help="Suffix sorts at once: each block's text and its reverse are sorted apart, in threads, as "
                   "many at once as the memory available holds [default: the cores this process may run on, as "
                   "SLURM, taskset or a container's cpuset allow].")
@click.option("--overwrite", is_flag=True, help="Replace an existing dmap index at OUTPUT (nothing else).")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary on standard error; errors only.")
@_user_errors
def index_build(reference, output, alphabet, max_query_length, block_length, occ_layout, occ_sample_rate,
                sa_sample_rate, neighborhood, seed_length, neighborhood_length, spaced_seed,
                max_errors_in_neighborhood, threads, overwrite, quiet) -> None:
    """Build the blocked FM-index of REFERENCE (FASTA, optionally .gz)."""
    nb = dmap.NeighborhoodSpec(seed_length, neighborhood_length, spaced_seed, max_errors_in_neighborhood)
    idx = dmap.build_index(
        reference, output, alphabet=alphabet, max_query_length=max_query_length, block_length=block_length,
        occ_layout=occ_layout, occ_sample_rate=occ_sample_rate, sa_sample_rate=sa_sample_rate,
        neighborhood=nb if neighborhood else None, overwrite=overwrite, progress=not quiet, threads=threads,
    )
    m = idx.meta
    if not quiet:
        click.echo(f"dmap: indexed {m.text_length} symbols in {len(m.contigs)} contigs, {len(m.blocks)} blocks "
                   f"-> {output}", err=True)


@index.group("cache")
def index_cache() -> None:
    """This host's copies of indexes given as URLs (in $DMAP_INDEX_CACHE, else ~/.cache/dmap/indexes)."""


@index_cache.command("list")
@_user_errors
def index_cache_list() -> None:
    """List the copies, least recently used first: last use, size, whether a process of this
    host holds one (maps it, or a standing worker may map it again), URL and folder."""
    from .host import format_bytes
    from .index.fetch import cached_copies

    click.echo("last used\tsize\tin use\turl\tpath")
    for c in cached_copies():
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.last_used))
        click.echo(f"{used}\t{format_bytes(c.nbytes)}\t{'yes' if c.in_use else 'no'}\t{c.url or '?'}\t{c.path}")


@index_cache.command("clean")
@click.option("--unused-for", "unused_days", type=click.FloatRange(min=0), default=None, metavar="DAYS",
              help="Only copies that no run has looked up for DAYS days [default: every copy not in use].")
@_user_errors
def index_cache_clean(unused_days: float | None) -> None:
    """Remove the copies that no process of this host holds; runs fetch them again when they need them."""
    from .host import format_bytes
    from .index.fetch import remove_copies

    removed, kept = remove_copies(unused_days)
    freed = format_bytes(sum(c.nbytes for c in removed))
    click.echo(f"dmap: removed {len(removed)} cached index cop{'y' if len(removed) == 1 else 'ies'} ({freed}); "
               f"{kept} in use kept", err=True)


@index.command("info")
@click.argument("index_path", type=click.Path())
@_user_errors
def index_info(index_path: str) -> None:
    """Print an index's metadata."""
    click.echo(dmap.open_index(index_path).describe())


@main.command()
@click.argument("index_path", metavar="INDEX", type=click.Path())
@click.argument("reads", type=click.Path(dir_okay=False), required=False)
@click.argument("mates", type=click.Path(dir_okay=False), required=False)
@click.option("-o", "--output", default="-", show_default=True, type=click.Path(dir_okay=False),
              help="SAM, BAM or compressed SAM (.sam.gz) file to write, or '-' for standard output (a FIFO or "
                   "device is written in place; an existing file only if dmap wrote it).")
@click.option("-O", "--output-format", type=click.Choice(FORMATS), default=None,
              help="SAM text, BAM (DNA only), or SAM text in BGZF blocks as bgzip writes it (sam.gz) [default: "
                   "BAM for an output ending .bam, sam.gz for .gz or .bgz, else SAM; .cram is refused].")
@click.option("--max-hits", "-k", type=int, default=None, help="Report at most K hits per read [default: all].")
@click.option("--chunk-size", type=int, default=None,
              help=f"Most reads per task; chunks grow to it (the first chunk of pairs holds the first "
                   f"{ESTIMATE_PAIRS:,} pairs, which the insert size is estimated from) [default: "
                   f"{DEFAULT_CHUNK_SIZE}; {DEFAULT_APPROX_CHUNK_SIZE} with -e or --error-rate, on GPUs "
                   f"{DEFAULT_APPROX_GPU_CHUNK_SIZE}].")
@click.option("--scheduler", default=None, help="Dask scheduler address (tcp://HOST:PORT) of a running cluster.")
@click.option("--cluster", "cluster_file", default=None, type=click.Path(dir_okay=False),
              help="cluster.yaml describing the cluster.")
@click.option("--max-errors", "-e", type=int, default=0, show_default=True,
              help="K: find every locus within K edits (substitutions, insertions, deletions); 0 = exact matches.")
@click.option("--error-rate", default=None, metavar="RATE",
              help="Instead of -e: each read's K is floor(RATE x its length), as Yara's -e and RazerS 3's -i "
                   "take it: 0.05 or 5%.  Reads too long for the index at their K are written unmapped.")
@click.option("--all", "report_all", is_flag=True,
              help="With -e or --error-rate: report every locus within K, not only those at the best distance.")
@click.option("--eqx", is_flag=True, help="With -e or --error-rate: CIGAR with =/X instead of M.")
@click.option("--engine", type=click.Choice(["fm", "phash"]), default="fm", show_default=True,
              help="Candidates from FM-index seeds (every locus within K) or the neighborhood index "
                   "(MAROSE; needs 'dmap index --neighborhood').")
@click.option("--delta", type=int, default=1, show_default=True,
              help="--engine phash: a pattern every DELTA read positions.")
@click.option("--neighborhood-errors", type=int, default=None,
              help="--engine phash: substitutions allowed in a neighborhood [default: the index's].")
@click.option("--seed-edits", default="auto", show_default=True,
              type=click.Choice(["auto", "0", "1", "2", "3"]),
              help="--engine fm: edits per seed: 0 = K+1 exact pieces, M = K//(M+1)+1 pieces searched with up to "
                   "M edits (Liu and Schmidt 2012); auto picks what measured fastest for the read length.  Every locus "
                   "within K is found either way.")
@click.option("--no-guided", "fixed_chunks", is_flag=True,
              help="Equal chunks to the end (default: chunks shrink toward the end so devices finish together).")
@click.option("-v", "--verbose", is_flag=True,
              help="Show Dask's log messages and dmap's own (e.g. OpenCL compiler output), and where the "
                   "run's time went: starting, the cluster, mapping; CPU and peak memory.")
@click.option("--processes", is_flag=True,
              help="Embedded cluster: one spawned worker process per device instead of threads in this process.")
@click.option("--workers-per-device", type=click.IntRange(min=1), default=1, show_default=True,
              help="Embedded cluster: spawned worker processes sharing each device, each with its own "
                   "interpreter, OpenCL context and index, which take seconds to start: on a 16-core GPU host 8 "
                   "mapped 10M reads in 6.5 s, one in-process worker of 8 threads (the default) in 3.7 s.")
@click.option("--dashboard", type=click.IntRange(0, 65535), is_flag=False, flag_value=8787, default=None,
              metavar="[PORT]",
              help="Embedded cluster: serve the Dask dashboard, with the dmap page at /dmap, on 127.0.0.1:PORT "
                   "while the run lasts; its address is printed [PORT: 8787; 0: any free port].")
@click.option("-t", "--threads", type=int, default=None,
              help="Embedded cluster: use N cores.  PoCL's CPU device runs its kernels on N cores; each "
                   "device worker has min(N, 2) task threads on a CPU device, and N/2 (2 to 8, shared among "
                   "the GPUs, one per 2 GB of a GPU's memory) on a GPU [default: the cores this process may "
                   "run on, as SLURM, taskset or a container's cpuset allow].")
@click.option("-R", "--read-group", multiple=True, metavar="LINE",
              help="Read group header line, as bwa's: '@RG\\tID:lane1\\tSM:sample1' (\\t for a tab).  Its ID "
                   "tags every record (RG:Z).  Repeated, one per reads file (per pair of files), in order: each "
                   "file's records get their own.  Without it, reads from BAM files whose headers name read "
                   "groups keep their records' (RG tags).")
@click.option("-C", "--append-comment", is_flag=True,
              help="Append each read's FASTQ/FASTA comment (the header after its name) to its records, as bwa mem "
                   "-C: it must be SAM tags, e.g. @r1 BC:Z:ACGT (samtools fastq -T writes them so).  From BAM "
                   "reads: each record's tags (but RG).")
@click.option("--no-unmapped", is_flag=True,
              help="Leave out the records of reads that map nowhere (of pairs: where neither mate maps), as "
                   "bowtie2 --no-unal; by default every read has a record.")
@click.option("--manifest", type=click.Path(dir_okay=False), default=None,
              help="A tab-separated file listing the reads files instead of READS and MATES, one per line: the "
                   "reads file, its mates' file or '-', and optionally its read group (ID:lane1<TAB>SM:s1, or "
                   "just the ID), as STAR's --readFilesManifest.")
@click.option("--interleaved", is_flag=True,
              help="READS holds paired-end reads, the two mates of each pair one after the other.")
@click.option("--min-insert", type=int, default=None,
              help="Pairs: the shortest insert of a proper pair (from the forward mate's first base to the reverse "
                   f"mate's last) [default: estimated from the first {ESTIMATE_PAIRS:,} pairs].")
@click.option("--max-insert", type=int, default=None, help="Pairs: the longest insert of a proper pair.")
@click.option("--strict", is_flag=True,
              help="Stop at the first read that cannot be searched (empty, longer than the index maps, a symbol "
                   "outside the alphabet) instead of writing it unmapped.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary on standard error; errors only.")
@_user_errors
def run(index_path, reads, mates, output, output_format, max_hits, chunk_size, scheduler, cluster_file, max_errors,
        error_rate, report_all, eqx, engine, delta, neighborhood_errors, seed_edits, fixed_chunks, verbose, processes,
        workers_per_device, dashboard, threads, read_group, append_comment, no_unmapped, manifest, interleaved,
        min_insert, max_insert, strict, quiet) -> None:
    """Map READS (FASTQ/FASTA, optionally .gz, or BAM; '-' for standard input) against INDEX (a folder, or a
    URL such as s3://bucket/ref.dmap, fetched once per host into DMAP_INDEX_CACHE) and write SAM
    or BAM (to standard output without -o).  Several single-end files map as one run, in order, given as
    one comma-separated list: a.fq,b.fq.gz, or as @FILE, a file that lists them one per line (for more
    files than a command line holds).  Paired-end reads: READS and MATES (R1.fq R2.fq), or READS
    --interleaved; lanes as two lists, each file of first mates with its file of second mates:
    a_1.fq,b_1.fq a_2.fq,b_2.fq (or @firsts.txt @seconds.txt).  Or --manifest: files and read groups
    listed in one file."""
    from .io.manifest import read_manifest
    from .io.splits import reads_paths

    # The reads are listed and checked first, before OpenCL's and Dask's imports (0.3-0.4 s), so that a
    # mistyped path is one line at once.
    # Parsed once: a list given as @FILE, or a manifest, may be a pipe (@<(ls *.fq)), which reads once.
    if manifest is not None:
        if reads is not None or read_group:
            raise DmapError("give the reads files and their read groups in --manifest, or as READS [MATES] and "
                            "-R, not both")
        listed = read_manifest(manifest)
        reads, mates, read_group = listed.reads, listed.mates, listed.read_groups or ()
    elif reads is None:
        raise DmapError("no reads: give READS [MATES] or --manifest FILE (see dmap run --help)")
    else:
        reads = reads_paths(reads)
        mates = reads_paths(mates) if mates else None
    if scheduler is None and cluster_file is None and not processes and workers_per_device == 1:
        _start_embedded_devices(threads)
    if verbose:
        _show_dmap_logs()
    else:
        _quiet_dask_logs()
    from .mapping.pipeline import map_reads  # distributed, zarr, pyopencl: the bulk of the start
    from .progress import Progress, input_size

    startup_done()
    started_in = _seconds_since_start()
    in_flight = None
    if cluster_file is not None:
        if scheduler is not None:
            raise DmapError("give --scheduler or --cluster, not both")
        cfg = read_cluster_file(cluster_file)
        scheduler, in_flight = cfg.scheduler_address, cfg.in_flight
        chunk_size = chunk_size or cfg.chunk_size
    inputs = reads + mates if mates else reads
    progress = None if quiet else Progress("reads", "mapped", input_size(inputs))
    try:
        res = map_reads(index_path, reads, mates, interleaved=interleaved, min_insert=min_insert,
                        max_insert=max_insert, sam_path=output, output_format=output_format, max_hits=max_hits,
                        max_errors=max_errors, error_rate=error_rate,
                        report_all=report_all, eqx=eqx, engine=engine, delta=delta,
                        neighborhood_errors=neighborhood_errors,
                        seed_edits=None if seed_edits == "auto" else int(seed_edits),
                        chunk_size=chunk_size, in_flight=in_flight,
                        scheduler=scheduler, return_hits=False, processes=processes, guided=not fixed_chunks,
                        strict=strict, read_group=list(read_group) or None, append_comment=append_comment,
                        unmapped=not no_unmapped, threads=threads,
                        dashboard=False if dashboard is None else dashboard,
                        workers_per_device=workers_per_device, progress=progress, argv=sys.argv)
    finally:
        if progress is not None:
            progress.close()
    if quiet:
        return
    candidates = (f"; {res.candidates['regions'] / max(res.n_reads, 1):.2f} candidate regions per read"
                  if res.candidates else "")
    click.echo(
        f"dmap: {res.n_reads} reads, {res.n_mapped} mapped, {res.n_hits} hits in {res.seconds:.2f} s "
        f"({res.reads_per_second:,.0f} reads/s) -> {res.sam_path}; index blocks loaded: "
        f"{sum(res.block_loads.values())} on {len(res.block_loads)} worker(s){candidates}", err=True,
    )
    if verbose:
        click.echo(_time_line(started_in, res), err=True)
    if res.insert is not None:
        click.echo(f"dmap: {res.insert.describe()}; {res.n_proper} of {res.n_reads // 2} pairs properly paired "
                   f"({100 * res.n_proper / max(res.n_reads // 2, 1):.2f}%)", err=True)
    if res.capped_pairs:
        click.echo(f"dmap: {res.capped_pairs} pairs had more than {PAIR_CAP} proper pairs; the first {PAIR_CAP} "
                   "of each were ranked", err=True)
    if res.unmappable:
        kinds = ", ".join(f"{n} {why}" for why, n in res.unmappable.items())
        click.echo(f"dmap: {sum(res.unmappable.values())} reads written unmapped without a search ({kinds}); "
                   "--strict stops at the first instead", err=True)


def _seconds_since_start() -> float | None:
    """Seconds since this process started (the interpreter's start and the imports, when called
    once they are done), from Linux's /proc to 10 ms; None elsewhere.  (psutil's start time counts
    from the boot time in whole seconds.)"""
    import time

    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime: clock ticks after boot
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, AttributeError, ValueError, IndexError):
        return None


def _time_line(started_in: float | None, res) -> str:
    """Where a run's time went, for ``dmap run -v``: as bwa ends with its real and CPU time, with
    the parts a short run spends around the mapping (docs/performance.md measures them)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    mapping = res.seconds - res.cluster_seconds - res.close_seconds
    start = f"{started_in:.2f} s to start (interpreter, imports), " if started_in is not None else ""
    return (f"dmap: time: {start}cluster "
            f"{res.cluster_seconds:.2f} s up and {res.close_seconds:.2f} s down, mapping {mapping:.2f} s; "
            f"CPU {usage.ru_utime + usage.ru_stime:.2f} s (user {usage.ru_utime:.2f} s, system "
            f"{usage.ru_stime:.2f} s), peak RSS {usage.ru_maxrss >> 10} MiB (this process)")  # ru_maxrss: KiB


@main.group()
def cluster() -> None:
    """Start (up) or stop (down) the cluster described by cluster.yaml."""


@cluster.command("up")
@click.argument("cluster_file", type=click.Path(dir_okay=False), default="cluster.yaml")
@_user_errors
def cluster_up(cluster_file: str) -> None:
    """Start the scheduler and one worker per configured OpenCL device (over ssh on other hosts)."""
    from .cluster.launch import cluster_up as up

    state = up(cluster_file)
    click.echo(f"scheduler  {state.scheduler_address}")
    click.echo(f"dashboard  {state.dashboard or '(none: set scheduler.dashboard)'}")
    click.echo(f"workers    {len(state.pids) - 1} here; logs in {state.log_dir}")
    for r in state.remote:
        click.echo(f"workers    {len(r['pids'])} on {r['host']}; logs there in {r['log_dir']}")
    click.echo(f"map with   dmap run INDEX READS -o OUT.sam --cluster {cluster_file}")


@cluster.command("down")
@click.argument("cluster_file", type=click.Path(dir_okay=False), default="cluster.yaml")
@_user_errors
def cluster_down(cluster_file: str) -> None:
    """Stop what 'dmap cluster up' started."""
    from .cluster.launch import cluster_down as down

    state, unreached = down(cluster_file)
    click.echo(f"stopped the scheduler at {state.scheduler_address} and {state.n_workers} workers")
    for line in unreached:
        click.echo(f"dmap: warning: {line}", err=True)


@main.command()
@_user_errors
def devices() -> None:
    """List the OpenCL devices and how workers are pinned to them."""
    from .opencl.discovery import list_devices

    for d in list_devices():
        click.echo(
            f"{d.spec}\t{d.name} [{d.type}] on {d.platform}: {d.compute_units} compute units, "
            f"{d.global_mem >> 20} MiB global, {d.local_mem >> 10} KiB local, max buffer {d.max_alloc >> 20} MiB, "
            f"{d.version} -> worker 'dmap-{d.spec}' (--dmap-device {d.spec})"
            + (f"; splits into up to {d.max_split} workers (--dmap-device {d.spec}/N:K)" if d.max_split > 1 else "")
        )


def console_main(gc_paused: bool = False) -> None:
    """The ``dmap`` command: :func:`main`, then an immediate exit.

    ``gc_paused``: the caller disabled garbage collection for the start
    (``dmap/__main__.py``); :func:`startup_done` turns it back on.

    When :func:`main` returns, the output is written and renamed and the
    cluster is shut down.  Python's own teardown after that (finalizers of
    PoCL, zarr and Dask, freeing every module) took 0.08-0.3 s of a run here
    (docs/performance.md) and does nothing a finished command needs.
    """
    global _gc_paused
    _gc_paused = gc_paused
    _stop_on_termination()
    _show_warnings_as_lines()
    try:
        main()
        code = 0
    except SystemExit as e:  # click ends every command with one
        code = e.code
    if not isinstance(code, int):
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: the descriptor was closed when dmap started (`dmap ... >&-`)
                stream.flush()
        except (OSError, ValueError):  # a reader that went away, a descriptor closed since; a closed stream
            pass
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    console_main()
