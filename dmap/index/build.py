"""Building the blocked FM-index (BowMapCL 4.4) into a Zarr group.

Memory is bounded by the block length, not the reference: the reference is
streamed once into the Zarr ``reference`` array, and each block is then read
back, indexed (suffix array by pydivsufsort, int32 per block) and written.
A block's text and its reverse are sorted and indexed apart, and such jobs of
all blocks run in threads, as many at once as there are cores and as the memory
available holds (:func:`dmap.index.sizes.parallel_sorts`): a sort lets go of
the interpreter's lock.
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import partial

import numpy as np
import pydivsufsort
import zarr

from .._version import __version__
from ..alphabet import TEXT_ALLOWED, Alphabet, get_alphabet
from ..errors import DmapWarning, InputFormatError, OutputError
from ..host import allowed_cores
from ..io.fastx import encode_reference, iter_contigs
from ..io.partial import hold_folder, partial_name, release_folder, remove_abandoned
from ..io.splits import STDIN
from ..neighborhood.build import index_neighborhoods
from ..neighborhood.params import NeighborhoodParams, NeighborhoodSpec
from ..progress import Progress
from .occ import LAYOUTS, build_occ, default_rate
from .sizes import (
    MAX_BLOCK_LENGTH,
    build_bytes_per_symbol,
    check_build_memory,
    default_block_length,
    default_sa_sample_rate,
    parallel_sorts,
)
from .store import (
    DEFAULT_MAX_QUERY_LENGTH,
    MAX_QUERY_LENGTH,
    Block,
    Contig,
    Contigs,
    Index,
    IndexMeta,
    checksum,
    is_index,
    refuse_url,
)

_ZARR_CHUNK = 1 << 24


def _text_alphabet(reference: str | os.PathLike) -> Alphabet:
    # The symbols are found in a first pass over the reference, which a pipe cannot give twice.
    path = os.fspath(reference)
    if path == STDIN or (os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path)):
        raise InputFormatError(f"reference {path!r} is not a regular file: the text alphabet reads "
                               "the reference twice (first to find its symbols), so save it to a file first")
    present = np.zeros(256, dtype=bool)
    for _, seq in iter_contigs(reference):
        present[np.frombuffer(seq, dtype=np.uint8)] = True
    bad = np.flatnonzero(present & ~np.isin(np.arange(256), np.frombuffer(TEXT_ALLOWED, np.uint8)))
    if bad.size:
        raise InputFormatError(f"reference contains the byte {int(bad[0]):#04x}, which is not printable text")
    return Alphabet.for_text(bytes(np.flatnonzero(present).astype(np.uint8)))


def _joined_codes(reference, alphabet: Alphabet) -> Iterator[tuple[str, np.ndarray]]:
    """Each contig's codes; contigs are later joined with one separator each."""
    for name, seq in iter_contigs(reference):
        if not seq:
            raise InputFormatError(f"contig {name!r} in the reference is empty")
        yield name, encode_reference(name, seq, alphabet)


def _write(group: zarr.Group, name: str, data: np.ndarray) -> str:
    """Write an uncompressed array (FM-index arrays barely compress) and return its checksum."""
    chunks = (min(max(data.size, 1), _ZARR_CHUNK),)
    group.create_array(name, data=data, chunks=chunks, compressors=None)
    return checksum(data)


def _stream_reference(reference, alphabet: Alphabet, group: zarr.Group) -> tuple[list[Contig], int]:
    """Write the joined reference codes into ``group['reference']``.

    Uncompressed, so that mapping reads a block's text in place (memory-mapped,
    see ``zarr_direct.py``) where it lies in one chunk file: decompressing
    E. coli's 4.9 MB from zstd took 0.03-0.08 s of every run, into fresh
    memory, for 0.7 bytes per symbol less on disk (docs/performance.md).
    A reference shorter than one chunk gets a chunk of its own length: Zarr writes an edge chunk at full length.
    """
    arr = None
    contigs: list[Contig] = []
    pending: list[np.ndarray] = []
    pending_size = offset = 0
    sep = np.array([alphabet.separator], dtype=np.uint8)
    for name, codes in _joined_codes(reference, alphabet):
        if contigs:
            pending.append(sep)
            pending_size += 1
            offset += 1
        contigs.append(Contig(name, int(codes.size), offset))
        pending.append(codes)
        offset += codes.size
        pending_size += codes.size
        if pending_size >= _ZARR_CHUNK * 4:
            arr = _append_reference(group, arr, pending)
            pending, pending_size = [], 0
    _append_reference(group, arr, pending)
    return contigs, offset


def _append_reference(group: zarr.Group, arr: zarr.Array | None, pending: list[np.ndarray]) -> zarr.Array:
    """Append ``pending`` to ``group['reference']``, made at the first call:
    the whole reference when it is shorter than one chunk, and a chunk's
    length then."""
    data = np.concatenate(pending) if pending else np.zeros(0, dtype=np.uint8)
    if arr is None:
        chunk = min(max(data.size, 1), _ZARR_CHUNK)
        arr = group.create_array("reference", shape=(0,), dtype="uint8", chunks=(chunk,), compressors=None)
    if data.size:
        arr.append(data)
    return arr


def _bwt(text: np.ndarray, sigma: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Suffix array (with the sentinel row 0), BWT and C array of ``text``."""
    n = text.size
    # int32 throughout (blocks are < 2**30 symbols) keeps a block's build
    # under ~16 bytes per symbol.
    sa = pydivsufsort.divsufsort(np.ascontiguousarray(text).copy())
    sa_full = np.empty(n + 1, dtype=np.int32)
    sa_full[0] = n
    sa_full[1:] = sa
    del sa
    bwt = text[sa_full - 1]  # position -1 wraps to the last symbol; fixed just below
    bwt[sa_full == 0] = sigma  # the sentinel counts as no symbol
    counts = np.bincount(text, minlength=sigma + 1)[:sigma]
    C = np.empty(sigma + 1, dtype=np.uint32)
    C[0] = 1  # row 0 is the sentinel suffix, smaller than every symbol
    np.cumsum(counts, out=C[1:])
    C[1:] += 1
    return sa_full, bwt, C


def index_reverse_block(text: np.ndarray, sigma: int, layout: str, occ_rate: int) -> dict[str, np.ndarray]:
    """Occurrence table and C array of the reversed block text.

    Backward search on the reversed text extends a pattern to the *right*,
    which is what the lower bound on the edits a pattern prefix needs is
    computed with (Liu and Schmidt 2012; :mod:`dmap.search.edits`).  No suffix-array
    samples: the bound only counts, it never locates.
    """
    _, bwt, C = _bwt(np.ascontiguousarray(text[::-1]), sigma)
    occ, _ = build_occ(bwt, layout, sigma, occ_rate)
    return {"occ": occ, "C": C}


def index_block(text: np.ndarray, sigma: int, layout: str, occ_rate: int, sa_rate: int) -> dict[str, np.ndarray]:
    """FM-index arrays of one block's codes (separators/N coded ``sigma``).

    BWT row 0 is the implicit sentinel suffix (position n); rows 1..n are the
    suffix array order of ``text``.
    """
    n = text.size
    sa_full, bwt, C = _bwt(text, sigma)
    occ, _ = build_occ(bwt, layout, sigma, occ_rate)
    # A locate LF-walk stops at a sampled row or where the previous symbol is
    # a separator/sentinel (LF is undefined there).  Only rows whose own
    # suffix starts with a real symbol can be reached, so store just those.
    starts_real = np.zeros(n + 1, dtype=bool)
    starts_real[1:] = text[sa_full[1:]] < sigma
    boundary = np.flatnonzero((bwt >= sigma) & starts_real)
    return {
        "occ": occ,
        "C": C,
        "sa_samples": sa_full[::sa_rate].astype(np.uint32),
        "boundary_rows": boundary.astype(np.uint32),
        "boundary_pos": sa_full[boundary].astype(np.uint32),
    }


def build_index(
    reference: str | os.PathLike,
    output: str | os.PathLike,
    *,
    alphabet: str = "dna",
    max_query_length: int = DEFAULT_MAX_QUERY_LENGTH,
    block_length: int | None = None,
    occ_layout: str = "interleaved",
    occ_sample_rate: int | None = None,
    sa_sample_rate: int | None = None,
    neighborhood: NeighborhoodSpec | None = None,
    overwrite: bool = False,
    progress: bool = False,
    threads: int | None = None,
) -> Index:
    """Build a blocked FM-index of a FASTA reference.

    Parameters
    ----------
    reference
        FASTA file (optionally gzip-compressed); names are the first word of
        each header.
    output
        Directory to create.  It is written under a temporary name and renamed
        at the end, so a failed build leaves nothing behind.
    alphabet
        ``"dna"`` (ACGT, case-insensitive; N and IUPAC codes never match),
        ``"protein"`` or ``"text"`` (the printable symbols of the reference).
    max_query_length
        L: the longest read the index can map; blocks overlap by L-1.
    block_length
        B: reference symbols per block (each block's own region); by
        default 2^29 for DNA, and shorter for larger alphabets so that a
        block's occurrence table stays within 2 GiB (:func:`default_block_length`).
    occ_layout, occ_sample_rate
        Occurrence-table layout (``"interleaved"`` or the paper's
        ``"bitmap"``) and R, the number of 32-bit bitmap words per symbol
        between count samples.
    sa_sample_rate
        S: one suffix-array value is stored for every S BWT rows; by
        default 1 (every value) up to 64 M symbols, doubling for larger
        references up to 8 from 512 M (:func:`default_sa_sample_rate`).
    neighborhood
        Also build MAROSE's neighborhood index (for ``map_reads(engine="phash")``)
        with these seed and neighborhood lengths.
    overwrite
        Replace an existing index at ``output`` (anything else there is never replaced).
    progress
        Report the symbols indexed on standard error after each block
        (:class:`dmap.progress.Progress`).
    threads
        Suffix sorts to run at once (each block's text and its reverse are sorted apart), as
        many as the memory available holds; by default one per core this process may run on
        (:func:`dmap.host.allowed_cores`: SLURM's, ``taskset``'s or a container's).

    Returns
    -------
    Index
        The new index, opened for reading.
    """
    refuse_url(os.fspath(output))
    output = os.path.abspath(os.fspath(output))
    if alphabet not in ("dna", "protein", "text"):
        raise InputFormatError(f"unknown alphabet {alphabet!r}; choose dna, protein or text")
    if occ_layout not in LAYOUTS:
        raise InputFormatError(f"unknown occ layout {occ_layout!r}; choose {' or '.join(LAYOUTS)}")
    if not 1 <= max_query_length <= MAX_QUERY_LENGTH:
        raise InputFormatError(f"--max-query-length must be between 1 and {MAX_QUERY_LENGTH}, not {max_query_length}")
    if (sa_sample_rate is not None and sa_sample_rate < 1) or (occ_sample_rate is not None and occ_sample_rate < 1):
        raise InputFormatError("sample rates must be at least 1")
    if threads is not None and threads < 1:
        raise InputFormatError(f"--threads must be at least 1, not {threads}")
    _check_replaceable(reference, output, overwrite)

    alpha = _text_alphabet(reference) if alphabet == "text" else get_alphabet(alphabet)
    if alpha.sigma == 0:
        raise InputFormatError("the reference has no searchable symbols")
    rate = occ_sample_rate or default_rate(occ_layout, alpha.sigma)
    if block_length is None:
        block_length = default_block_length(alpha.sigma, rate)
    if not 1 <= block_length <= MAX_BLOCK_LENGTH - max_query_length:
        raise InputFormatError(f"--block-length must be between 1 and {MAX_BLOCK_LENGTH - max_query_length}")
    nb_params = None
    if neighborhood is not None:
        nb_params = NeighborhoodParams.create(alpha.sigma, **vars(neighborhood))
        if nb_params.window > max_query_length:
            raise InputFormatError(f"a seed of span {nb_params.span} plus a neighborhood of "
                                   f"{nb_params.neighborhood_length} is longer than --max-query-length "
                                   f"{max_query_length}")
    for left in remove_abandoned(output, lambda _: False):
        warnings.warn(f"removed {left}, the temporary folder of a build of the same index that was killed",
                      DmapWarning, stacklevel=2)
    tmp = partial_name(output)
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.time()
    lock = None
    try:
        group = zarr.open_group(tmp, mode="w")
        lock = hold_folder(tmp)
        contigs, n = _stream_reference(reference, alpha, group)
        sa_sample_rate = sa_sample_rate or default_sa_sample_rate(n)
        check_build_memory(min(block_length + max_query_length - 1, n), build_bytes_per_symbol(alpha.sigma, rate))
        ref = group["reference"]
        checksums: dict[str, str] = {"reference": checksum(ref[...])}
        contig_columns = Contigs.of(contigs)
        for name, data in contig_columns.arrays().items():
            checksums[f"contigs/{name}"] = _write(group.require_group("contigs"), name, data)
        spans = [(start, min(start + block_length + max_query_length - 1, n)) for start in range(0, n, block_length)]
        parallel = parallel_sorts(threads or allowed_cores() or os.cpu_count() or 1, 2 * len(spans),
                                  max(end - start for start, end in spans), build_bytes_per_symbol(alpha.sigma, rate))
        for b in range(len(spans)):  # made here: threads making one group at once would race
            group.require_group(f"blocks/{b}/reverse")

        def forward(b: int) -> dict[str, str]:
            text = ref[slice(*spans[b])]
            sums = {f"blocks/{b}/text": checksum(text)}  # the block's slice of `reference`
            for name, data in index_block(text, alpha.sigma, occ_layout, rate, sa_sample_rate).items():
                sums[f"blocks/{b}/{name}"] = _write(group[f"blocks/{b}"], name, data)
            return sums

        def reverse(b: int) -> dict[str, str]:
            # The block's text is read again (about a second for 2^29 symbols) rather than held
            # between the two jobs, which would keep a text per waiting job in memory.
            arrays = index_reverse_block(ref[slice(*spans[b])], alpha.sigma, occ_layout, rate)
            return {f"blocks/{b}/reverse/{name}": _write(group[f"blocks/{b}/reverse"], name, data)
                    for name, data in arrays.items()}

        # A line per block (a block takes minutes at the default length), redrawn on a terminal.
        bar = Progress("symbols", "indexed", total_bytes=n, interval=0, whole="reference") if progress else None

        def indexed(blocks_done: int) -> None:
            """Report the symbols of the first ``blocks_done`` blocks as indexed."""
            if bar is not None:
                symbols = n if blocks_done == len(spans) else spans[blocks_done][0]
                bar.update(symbols, symbols)

        def sorted_jobs(done: int) -> None:
            if nb_params is None and done % 2 == 0:  # a block's two jobs are done (with neighborhoods,
                indexed(done // 2)  # a block is indexed once they are)

        jobs = [job for b in range(len(spans)) for job in (partial(forward, b), partial(reverse, b))]
        for job_checksums in _sorted_in_parallel(jobs, parallel, sorted_jobs):
            checksums.update(job_checksums)
        if nb_params is not None:  # a block at a time: its neighborhoods take far more memory than a sort
            for b, span in enumerate(spans):
                nb = group.require_group(f"blocks/{b}/neighborhood")
                for name, data in index_neighborhoods(ref[slice(*span)], nb_params).items():
                    checksums[f"blocks/{b}/neighborhood/{name}"] = _write(nb, name, data)
                indexed(b + 1)
        if bar is not None:
            bar.close()
        blocks = [Block(start, end - start, end - start + 1) for start, end in spans]
        meta = IndexMeta(
            alphabet=alpha.to_metadata(),
            contigs=contig_columns,
            text_length=n,
            max_query_length=max_query_length,
            block_length=block_length,
            occ_layout=occ_layout,
            occ_sample_rate=rate,
            sa_sample_rate=sa_sample_rate,
            blocks=blocks,
            checksums=checksums,
            neighborhood=None if nb_params is None else nb_params.to_json(),
            reverse_index=True,
            created_by=f"dmap {__version__} in {time.time() - t0:.1f} s",
        )
        group.attrs["dmap"] = meta.to_json()
        release_folder(tmp, lock)
        lock = None
        _replace(tmp, output)
    except OSError as e:  # a full disk, a directory that cannot be written
        shutil.rmtree(tmp, ignore_errors=True)
        raise OutputError(f"cannot write the index {output!r}: {e.strerror or e}; no index was written") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if lock is not None:
            os.close(lock)
    return Index(output)


def _sorted_in_parallel(jobs: list[Callable[[], dict[str, str]]], parallel: int,
                        done: Callable[[int], object]) -> list[dict[str, str]]:
    """Run ``jobs`` (each sorts and indexes a block or its reverse, writes its arrays and gives
    their checksums), ``parallel`` at once, in threads: pydivsufsort and numpy let go of the
    interpreter's lock.  The checksums come in the jobs' order, whatever order they finish
    in, so an index is the same whatever ``parallel``; ``done(k)`` is called as the first ``k``
    jobs are done.  On an error or an interrupt the jobs not started are dropped and those
    running are waited for (a sort cannot be stopped), so nothing writes into the index's
    folder once it is removed."""
    pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="dmap-index")
    try:
        futures = [pool.submit(job) for job in jobs]
        first_undone = 0
        for future in as_completed(futures):
            future.result()  # its error, at once
            while first_undone < len(futures) and futures[first_undone].done():
                first_undone += 1
                done(first_undone)
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _check_replaceable(reference: str | os.PathLike, output: str, overwrite: bool) -> None:
    """Refuse an ``output`` that exists, unless it is a dmap index and ``overwrite`` is set:
    ``--overwrite`` replaces an index dmap built, never another directory or file."""
    if not os.path.lexists(output):
        return
    if not is_index(output):
        raise InputFormatError(f"{output!r} exists and is not a dmap index; dmap replaces only an index it built: "
                               "remove it or choose another name")
    if not overwrite:
        raise InputFormatError(f"index {output!r} already exists; remove it or pass --overwrite")
    reference = os.fspath(reference)
    if reference != "-" and os.path.commonpath([os.path.realpath(reference), os.path.realpath(output)]) \
            == os.path.realpath(output):
        raise InputFormatError(f"the reference {reference!r} lies inside the index {output!r} it would replace")


def _replace(tmp: str, output: str) -> None:
    """Move the finished index ``tmp`` to ``output``; an old index there is moved aside first
    and removed only once the new one is in place."""
    old = None
    if os.path.lexists(output):
        old = f"{output}.old-{os.getpid()}"
        os.rename(output, old)
    try:
        os.rename(tmp, output)
    except OSError:
        if old is not None:
            os.rename(old, output)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
