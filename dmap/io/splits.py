"""Cutting the reads input into chunks that the workers read.

A regular, uncompressed file is cut into byte ranges (:class:`FileSplit`):
the process that runs ``dmap run`` only does arithmetic on the file's size,
and the worker that gets a range maps it, starts at the first record that
begins in it and reads on to the end of the record that straddles its end
(:func:`record_start`: both neighbours of a cut find the same record
boundary, so every record is read exactly once, whatever the cuts).  This
is how Hadoop-BAM's ``FastqInputFormat`` splits FASTQ; dmap's check of the
record structure is stricter (below).

A ``bgzip``-compressed file (BGZF, a series of gzip members of at most
64 KiB) is cut the same way into ranges of its compressed bytes: the worker
starts at the first BGZF block that begins in its range, inflates the
blocks that begin there, and applies the same record rule to the inflated
bytes, reading on into the next blocks (:class:`_Inflated`).

Reads may also be URLs of any file system that fsspec knows (``file://``,
``s3://`` with s3fs, ``http(s)://`` with aiohttp, ...): their files are cut
the same way, and each worker fetches its own byte ranges
(:func:`url_fs`), as ``dask.bytes.read_bytes`` does.

A BGZF stream (BAM from ``samtools view -b`` or ``-u`` on a pipe, ``bgzip -c``
FASTQ on standard input) is read by the client, but not inflated: it cuts
the stream at its blocks (:class:`StreamBlocks`), whose headers and trailers
give their sizes, inflates only the first blocks after each cut to find the
next chunk's first record by the same rule, and hands each chunk's blocks on
compressed, with the few inflated bytes of its last record that lie past its
last block.  Workers inflate and decode them.

Any other input (plain gzip, or an uncompressed pipe or standard input) cannot be cut without
reading it: the client reads it as blocks of whole records
(:class:`RawBlock`, cut at the newlines of whole FASTQ records, before a
FASTA ``>``, or before a BAM record that holds a read, its inflated records
found by their lengths) and hands them on unparsed, so such input limits a
run to what one process can read and decompress.

Chunk sizes are chosen in reads (:class:`dmap.mapping.schedule.GuidedChunks`) and
turned into bytes with the bytes per record of the file's first 64 KiB, so
a split holds about the reads asked for; a block from a stream holds
exactly that many.  A chunk spans files where one ends before the chunk is
full (:class:`SourceGroup`): many small files cost a chunk's tasks and
kernel launches per chunk, not per file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import socket
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, NamedTuple

import numpy as np
from xopen import xopen

from ..errors import InputFormatError
from ..format import bgzf
from ..host import RecycledArrays
from . import ubam
from .mapfile import map_bytes

STDIN = "-"  # a reads path that means standard input
COMPRESSED = (".gz", ".bgz", ".bz2", ".xz", ".zst")
SNIFF_BYTES = 1 << 16  # the bytes per record are estimated from a file's first 64 KiB
SMALL_COMPRESSED = 4 << 20  # a compressed file up to this size is inflated without a thread of its own
# The longest record dmap reads (a record of a reads file, far longer than any index maps).
MAX_RECORD_BYTES = 4 << 20
# Records checked after a candidate FASTQ record start (see record_start).
CHAIN = 4
# Newlines are counted a block at a time, so that each block's comparison stays in the cache:
# a third faster than one pass over a 40 MB range.
COUNT_BLOCK = 1 << 20
_BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark, as some editors write
_BLANK = b"\n\r \t"  # the bytes of blank lines
_BLANK_CODES = frozenset(_BLANK)
_TEXT_STARTS = b"@>\xef" + _BLANK  # a FASTA/FASTQ file's first byte: no compressor's magic number begins so


class _Records:
    """What a part of the input says of its records' format (``fastq``, ``bam``: fields of the part)."""

    @property
    def fastq_text(self) -> bool:
        """Whether the records are FASTQ text (four lines each), which is counted and cut by lines."""
        return self.fastq and not self.bam


@dataclass(frozen=True)
class FileSplit(_Records):
    """Bytes ``start`` to ``end`` of a regular file, read by a worker: the records that begin in them
    (in a BGZF file, the records that begin in the blocks that begin in them)."""

    number: int  # the chunk's place in the run's output
    path: str
    start: int
    end: int
    fastq: bool
    origin: int  # where the file's first record begins (after a byte-order mark and blank lines; inflated)
    size: int  # the file's size when it was planned
    bgzf: bool = False  # the file is BGZF: start, end and size count its compressed bytes
    # The records it holds, estimated from the bytes per record of the file's first 64 KiB (planning).
    reads: float = field(default=0.0, compare=False)
    bam: bool = False  # the file is BAM (BGZF, records as dmap.io.ubam reads them; ``fastq``: they have qualities)
    extras: ubam.BamExtras = ubam.NO_EXTRAS  # BAM: what its records give besides their reads



@dataclass
class RawBlock(_Records):
    """Whole records read from a stream by the client, not parsed (BAM: inflated, not decoded)."""

    number: int
    path: str
    offset: int  # of the block's first byte in the (decompressed) stream
    data: np.ndarray
    fastq: bool
    bam: bool = False  # BAM records (``fastq``: they have qualities)
    extras: ubam.BamExtras = ubam.NO_EXTRAS  # BAM: what its records give besides their reads


@dataclass
class StreamBlocks(_Records):
    """Whole BGZF blocks of a stream, read by the client and not inflated (:class:`BgzfStream`):
    the records that begin in their inflated bytes from ``begin`` on, the last of them ending in
    ``tail``, the inflated bytes of the blocks after them up to the next chunk's first record."""

    number: int
    path: str
    offset: int  # of the first block in the (compressed) stream
    blocks: np.ndarray  # compressed
    begin: int  # where the first record begins in the blocks' inflated bytes
    tail: np.ndarray
    last: bool  # the stream ends with these blocks (FASTQ: blank lines after the last record are dropped)
    fastq: bool
    bam: bool = False
    extras: ubam.BamExtras = ubam.NO_EXTRAS


@dataclass(frozen=True)
class SourceGroup:
    """A chunk that spans files: the last records of one file and the first of the next (or
    several whole small files), read one after another by one worker.  Each part is read,
    parsed and checked as a chunk of its own file would be, so an error names its file."""

    number: int
    parts: tuple[FileSplit | RawBlock | StreamBlocks, ...]  # at least two, of one format, numbered as the group

    @property
    def fastq(self) -> bool:
        return self.parts[0].fastq

    @property
    def fastq_text(self) -> bool:
        return all(part.fastq_text for part in self.parts)

    @property
    def path(self) -> str:
        """The first part's file (errors about the parts name their own)."""
        return self.parts[0].path


Source = FileSplit | RawBlock | StreamBlocks | SourceGroup


def reads_paths(reads: str | os.PathLike | list) -> list[str]:
    """The reads files of a run, in order: a path (``-`` for standard input), a list of paths,
    several paths joined by commas, or ``@FILE``: the paths that FILE lists, one per line (blank
    lines and lines starting with ``#`` skipped), for more files than a command line holds (a
    path that exists as it is is taken whole); each checked to exist."""
    if isinstance(reads, list | tuple):
        paths = [os.fspath(p) for p in reads]
    else:
        path = os.fspath(reads)
        if path.startswith("@") and path != "@" and not _exists(path):
            paths = _listed(path[1:])
        else:
            paths = [path] if path == STDIN or _exists(path) or "," not in path else path.split(",")
    if not paths or any(p == "" for p in paths):
        raise InputFormatError(f"no reads file in {reads!r}")
    if STDIN in paths and len(paths) > 1:
        raise InputFormatError("standard input ('-') can only be the one reads file")
    for path in paths:  # all of them before the first is mapped
        check_path(path, "reads")
    return paths


def _listed(list_path: str) -> list[str]:
    """The reads files that the text file ``list_path`` lists (see :func:`reads_paths`)."""
    try:
        with open(list_path, encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except FileNotFoundError:
        raise InputFormatError(f"list of reads files {list_path!r} (given as '@{list_path}') does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputFormatError(f"list of reads files {list_path!r} cannot be read: {e}") from None
    paths = [line for line in lines if line and not line.startswith("#")]
    if not paths:
        raise InputFormatError(f"list of reads files {list_path!r} lists no file")
    return paths


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL (``protocol://...``) for fsspec rather than a local path."""
    return "://" in path


def url_fs(path: str):
    """The fsspec file system of a reads URL and the path within it; one clear line where
    fsspec does not know the protocol or lacks the package that serves it (s3fs for ``s3://``)."""
    import fsspec.core

    try:
        return fsspec.core.url_to_fs(path)
    except (ImportError, ValueError) as e:
        raise InputFormatError(f"reads URL {path!r} cannot be opened: {e}") from None


def _url_info(path: str) -> dict | None:
    """What a URL's file system says of it (``size``, ``type``), None where there is nothing.
    One request (a HEAD over HTTP): fsspec's ``exists`` and ``isdir`` would fetch the file."""
    fs, inner = url_fs(path)
    try:
        return fs.info(inner)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise InputFormatError(f"reads URL {path!r} cannot be read: {e}") from None


def _exists(path: str) -> bool:
    return _url_info(path) is not None if is_url(path) else os.path.exists(path)


def check_path(path: str, what: str) -> None:
    """Refuse a missing file, a directory or a closed standard input with one clear line."""
    if path == STDIN:
        if sys.stdin is None:  # the descriptor was closed when Python started (dmap/__main__.py)
            raise InputFormatError(f"standard input ('-') is closed; give the {what} file's name instead")
        return
    if is_url(path):  # one request for both questions
        info = _url_info(path)
        missing, directory = info is None, info is not None and info.get("type") == "directory"
    else:
        missing, directory = not os.path.exists(path), os.path.isdir(path)
    if missing:
        raise InputFormatError(f"{what} file {path!r} does not exist")
    if directory:
        raise InputFormatError(f"{what} path {path!r} is a directory, not a file")


def open_reads(path: str, blocks: bool = False):
    """A binary reader of the reads file ``path`` (``-``: standard input; gzip etc. decompressed;
    a URL through fsspec); for a stream that :func:`sniff_bam` looked at, from its first byte again.

    With ``blocks``, a BGZF stream (:func:`is_pipe`) comes as a :class:`BgzfStream`, whose
    blocks the client hands on to the workers without inflating them."""
    looked = _looked_at.pop(path, None)
    if isinstance(looked, BgzfStream):
        return looked if blocks else looked.unread()
    if looked is not None:
        return looked
    try:
        if blocks and is_pipe(path):
            pipe = sys.stdin.buffer if path == STDIN else open(path, "rb")
            # A pipe's first write holds a block's header (18 bytes, more with other extra subfields);
            # a shorter one is read as any stream.
            if bgzf.is_bgzf(pipe.peek(BGZF_HEADER_PEEK)[:BGZF_HEADER_PEEK]):
                return BgzfStream(pipe, path)
            return xopen(pipe, "rb")
        if is_url(path):
            import fsspec

            # BAM is BGZF whatever its name says; fsspec infers compression from the suffix alone.
            return fsspec.open(path, "rb", compression="gzip" if path.endswith(".bam") else "infer").open()
        # A file is inflated in a thread of its own (ISA-L's igzip_threaded, through xopen), so that
        # parsing overlaps it; a small one in this thread, where starting the thread costs more
        # (2,000 gzip files of 100 reads: 0.46 s to plan, 0.1 s without the threads).
        small = path != STDIN and os.path.isfile(path) and os.path.getsize(path) < SMALL_COMPRESSED
        return xopen(path, "rb", threads=0 if small else None)
    except OSError as e:
        raise InputFormatError(f"reads file {path!r} cannot be read: {e}") from None


def fill(f: BinaryIO, view: memoryview, path: str) -> int:
    """Read from ``f`` until ``view`` is full or the file ends; the bytes read."""
    done = 0
    try:
        while done < len(view) and (got := f.readinto(view[done:])):
            done += got
    except (EOFError, OSError, *bgzf.INFLATE_ERRORS) as e:  # a damaged gzip stream
        raise InputFormatError(f"reads file {path!r} is malformed: {e}") from None
    return done


def _skip_head(head: np.ndarray, path: str) -> int:
    """Bytes before the first record of a file starting with ``head``: a byte-order mark,
    then blank lines; ``head.size`` when it holds nothing else."""
    skip = 0
    if head[:1].tobytes() == _BOM[:1]:
        if head[:3].tobytes() != _BOM:
            raise InputFormatError(f"reads file {path!r} is not FASTA or FASTQ: it starts with byte 0xEF")
        skip = 3
    rest = head[skip:].tobytes()
    return head.size - len(rest.lstrip(_BLANK))


def _record_format(first: int, path: str) -> bool:
    """True for FASTQ (``@``), False for FASTA (``>``); anything else is refused."""
    if first in (ord("@"), ord(">")):
        return first == ord("@")
    shown = repr(chr(first)) if 32 < first < 127 else f"byte 0x{first:02X}"
    raise InputFormatError(f"reads file {path!r} is not FASTA or FASTQ: its first record starts with "
                           f"{shown}, not '@' (FASTQ) or '>' (FASTA)")


def _bytes_per_record(head: np.ndarray, fastq: bool) -> float:
    """Bytes per record of the whole records at the start of ``head`` (which begins with a record)."""
    end, records = _whole_records(head, fastq, head.size)
    return max(1.0, end / records) if records else float(max(1, head.size))


def _plain_file(path: str, mappable: dict[int, bool]) -> tuple[np.ndarray, int] | None:
    """The first :data:`SNIFF_BYTES` and the size of a local, regular, uncompressed file that can be
    mapped, with one open and one read (no decompressor's sniffing: many small files are planned at
    a file's cost each); None for anything else.  ``mappable`` keeps the answer per file system."""
    if path == STDIN or is_url(path) or path.endswith(COMPRESSED):
        return None
    try:
        # Not opened unless regular: a named pipe opened and closed here would lose its writer's data.
        st = os.stat(path)
        # A file whose size is 0 but that holds bytes is not a plain file either (e.g. under /proc).
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return None
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # open_reads says why
    try:
        head = os.pread(fd, SNIFF_BYTES, 0)
        if not head or head[0] not in _TEXT_STARTS:  # compressed without its suffix, or not reads: xopen tells
            return None
        if st.st_dev not in mappable:
            try:
                map_bytes(fd, 0, 1)
                mappable[st.st_dev] = True
            except (OSError, ValueError):  # some file systems cannot map files
                mappable[st.st_dev] = False
        return (np.frombuffer(head, np.uint8), st.st_size) if mappable[st.st_dev] else None
    finally:
        os.close(fd)


def splittable(path: str) -> bool:
    """Whether ``path`` is a regular file (or a URL's file) that workers can cut: uncompressed, or BGZF."""
    if path == STDIN:  # a stream, even when redirected from a file (plan_input)
        return False
    regular = _url_size(path) is not None if is_url(path) else os.path.isfile(path)
    return regular and (not path.endswith(COMPRESSED) or _bgzf_ratio(path) is not None)


def _bgzf_ratio(path: str) -> float | None:
    """Compressed bytes per inflated byte of the first blocks of ``path`` (up to 256 KiB), if it is
    a regular, mappable BGZF file (``bgzip``) or a URL's BGZF file, that workers can cut; None for
    anything else."""
    if is_url(path):
        try:
            fs, inner = url_fs(path)
            head = fs.cat_file(inner, 0, 4 * bgzf.MAX_BLOCK)
        except OSError:
            return None
        return _inflated_ratio(head)
    if is_pipe(path):  # (opening a named pipe again would wait for a writer that has gone)
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.pread(fd, 4 * bgzf.MAX_BLOCK, 0)
        ratio = _inflated_ratio(head)
        if ratio is not None:
            map_bytes(fd, 0, 1)
        return ratio
    except (OSError, ValueError):  # some file systems cannot map files
        return None
    finally:
        os.close(fd)


def _inflated_ratio(head: bytes) -> float | None:
    """Compressed bytes per inflated byte of the whole BGZF blocks in ``head``; None if it is not BGZF."""
    if not bgzf.is_bgzf(head):
        return None
    try:
        sizes, inflated = bgzf.block_table(head)
    except ValueError:  # BGZF blocks, then bytes that are not: read as a stream, which says so
        return None
    return sum(sizes) / sum(inflated) if sizes and sum(inflated) else 1.0


def file_size(path: str) -> int:
    """The size in bytes of a reads file or a URL's file."""
    if is_url(path):
        return _url_size(path) or 0
    return os.path.getsize(path)


def _url_size(path: str) -> int | None:
    """The size of a URL's file, None for an empty one or where the server does not tell it
    (it is then read as a stream: nothing to cut)."""
    info = _url_info(path)
    return int(info["size"]) if info and info.get("size") else None


class Sniffed(NamedTuple):
    """What :func:`sniff` learns from a reads file's first bytes."""

    head: np.ndarray  # the file's (inflated) bytes from its first record on
    origin: int  # where that record begins
    fastq: bool  # FASTQ (or BAM: records with qualities), not FASTA
    per_record: float  # bytes per record
    bam: bool = False
    paired: bool = False  # BAM whose first records are mates of pairs (flag 0x1)
    header: str = ""  # BAM's SAM header text


def sniff(f: BinaryIO, path: str) -> Sniffed | None:
    """The start of a reads file that ``f`` reads (:func:`open_reads`), from its first record on,
    where that record begins, whether the file is FASTQ, and its bytes per record; None for a
    file without records."""
    head = np.zeros(SNIFF_BYTES, dtype=np.uint8)
    n = fill(f, memoryview(head), path)
    if ubam.is_bam(head[:n].tobytes()):
        return _sniff_bam(f, head[:n], path)
    return sniff_head(head[:n], path)


def _sniff_bam(f: BinaryIO, head: np.ndarray, path: str) -> Sniffed | None:
    """:func:`sniff` of a BAM file: its header read past (as far as it goes), and the bytes per
    record of the records that follow it in the next :data:`SNIFF_BYTES`."""
    while (origin := ubam.header_end(head, path)) is None or head.size < origin + SNIFF_BYTES:
        more = np.zeros(max(SNIFF_BYTES, head.size), dtype=np.uint8)
        got = fill(f, memoryview(more), path)
        if not got:
            break
        head = np.concatenate([head, more[:got]])
    if origin is None:
        raise InputFormatError(f"reads file {path!r} is not whole BAM: it ends inside its header")
    records = head[origin:]
    if not records.size:
        return None
    starts = ubam.record_starts(records, 0, None, path, "its header", MAX_RECORD_BYTES)
    if not starts.size:
        per_record = float(records.size)  # one record longer than what was read
    else:
        last = starts[-1]
        per_record = (last + 4 + ubam.record_size(records, last)) / starts.size
    return Sniffed(records, origin, True, per_record, True, ubam.paired(records, starts), ubam.header_text(head))


def sniff_bam(path: str) -> Sniffed | None:
    """What :func:`sniff` learns of ``path`` if it is BAM (whether its first records are pairs,
    its header), else None; before the run is planned, which reads the file again from its
    start, or a stream (:func:`is_pipe`) from the bytes looked at here (:func:`open_reads`)."""
    if not is_pipe(path):
        with open_reads(path) as f:
            sniffed = sniff(f, path)
    else:
        stream = open_reads(path, blocks=True)
        f = stream if isinstance(stream, BgzfStream) else _Recorded(stream)
        try:
            sniffed = sniff(f, path)
        except BaseException:
            f.close()
            raise
        _looked_at[path] = f.rewound() if isinstance(f, BgzfStream) else f.replayed()
    return sniffed if sniffed is not None and sniffed.bam else None


def is_pipe(path: str) -> bool:
    """Whether ``path`` is standard input, a pipe or a device: read once, from its start, by the client."""
    if path == STDIN:
        return True
    if is_url(path):
        return False
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


# Streams that sniff_bam looked at, each to be read again from its first byte (open_reads).
_looked_at: dict[str, _Replayed | BgzfStream] = {}


class _Recorded(io.RawIOBase):
    """A stream that keeps a copy of the bytes read from it, to be read again (:meth:`replayed`)."""

    def __init__(self, stream: BinaryIO):
        super().__init__()
        self.stream = stream
        self.seen = bytearray()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.stream.readinto(buffer)
        self.seen += memoryview(buffer).cast("B")[:n]
        return n

    def replayed(self) -> _Replayed:
        """The stream from its first byte, which this object hands over (its closing no longer closes it)."""
        stream, self.stream = self.stream, None
        return _Replayed(stream, bytes(self.seen))

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
        super().close()


class _Replayed(io.RawIOBase):
    """``head``, the bytes already read from ``stream``, then the rest of ``stream``."""

    def __init__(self, stream: BinaryIO, head: bytes):
        super().__init__()
        self.stream = stream
        self.head = memoryview(head)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not self.head:
            return self.stream.readinto(buffer)
        n = min(len(buffer), len(self.head))
        memoryview(buffer).cast("B")[:n] = self.head[:n]
        self.head = self.head[n:]
        return n

    def close(self) -> None:
        self.stream.close()
        super().close()


def sniff_head(head: np.ndarray, path: str) -> Sniffed | None:
    """:func:`sniff` of a file's first :data:`SNIFF_BYTES` (all of it, if shorter)."""
    if head[:4].tobytes() == b"CRAM":
        raise InputFormatError(f"reads file {path!r} is CRAM, not FASTA, FASTQ or BAM: convert it with "
                               f"'samtools fastq {os.path.basename(path)} > reads.fq'")
    origin = _skip_head(head, path)
    if origin == head.size:
        if head.size < SNIFF_BYTES:
            return None
        raise InputFormatError(f"reads file {path!r} is not FASTA or FASTQ: it starts with "
                               f"{SNIFF_BYTES} blank bytes")
    fastq = _record_format(int(head[origin]), path)
    return Sniffed(head[origin:], origin, fastq, _bytes_per_record(head[origin:], fastq))


def plan_input(paths: list[str], next_size: Callable[[int, int], int],
               extras: ubam.BamExtras = ubam.NO_EXTRAS) -> Iterator[Source]:
    """The chunks of the reads files ``paths`` (checked by :func:`reads_paths`), in order, numbered from 0.

    ``next_size(reads_done, bytes_done)`` chooses each chunk's reads
    (:class:`dmap.mapping.schedule.GuidedChunks`).  Regular files give
    :class:`FileSplit` s, planned without reading more than their first
    64 KiB; streams give :class:`RawBlock` s.  Empty files give nothing.
    A file that ends before its chunk holds the reads asked for leaves the
    rest of the chunk to the next file of the same format (FASTQ or FASTA),
    whatever their read groups: that chunk is a :class:`SourceGroup` of both
    parts (or of several small files).  ``extras``: what BAM files' records give
    besides their reads (:attr:`FileSplit.extras`).
    """
    done = [0, 0, 0]  # chunks, reads and bytes planned so far
    # Parts of the chunk being planned, whose files ended before it was full.
    held: list[FileSplit | RawBlock | StreamBlocks] = []
    held_size = [0.0, 0]  # their reads (estimated for a file's bytes) and bytes

    def wanted() -> int:
        """The reads that the chunk being planned still asks for."""
        return max(1, round(next_size(done[1], done[2]) - held_size[0]))

    def hold(part: FileSplit | RawBlock | StreamBlocks, reads: float, nbytes: int) -> None:
        held.append(part)
        held_size[0] += reads
        held_size[1] += nbytes

    def flush() -> Source:
        """The chunk of the held parts, planned: one part as it is, several as a group."""
        chunk = held[0] if len(held) == 1 else SourceGroup(done[0], tuple(held))
        done[:] = done[0] + 1, done[1] + round(held_size[0]), done[2] + held_size[1]
        held.clear()
        held_size[:] = 0.0, 0
        return chunk

    asked = [0]  # the reads the last block of a stream was asked for

    def ask() -> int:
        asked[0] = wanted()
        return asked[0]

    mappable: dict[int, bool] = {}  # per file system (_plain_file)
    held_kind: list = [None]  # the held parts' format
    for path in paths:
        plain = _plain_file(path, mappable)
        with open_reads(path, blocks=True) if plain is None else contextlib.nullcontext() as f:
            sniffed = sniff(f, path) if plain is None else sniff_head(plain[0], path)
            if sniffed is None:
                continue  # no records
            head, origin, fastq, per_record, bam = (sniffed.head, sniffed.origin, sniffed.fastq, sniffed.per_record,
                                                    sniffed.bam)
            # FASTQ and FASTA records do not share a chunk.
            if held and held_kind[0] != fastq:
                yield flush()
            held_kind[0] = fastq
            if path.endswith(COMPRESSED) or bam:  # BGZF is cut in its compressed bytes; other compression is a stream
                blocked = _bgzf_ratio(path) if path != STDIN else None
                size = None if blocked is None else file_size(path)
            elif path == STDIN:  # read from where it stands, by this process: workers cannot open it by name
                blocked, size = None, None
            elif plain is not None:
                blocked, size = None, plain[1]
            else:  # a URL's file is cut if its size is told; a local one _plain_file turned down is a stream
                blocked, size = None, _url_size(path) if is_url(path) else None
            if size is not None:
                # Plain bytes from the first record on; BGZF from its first block, in compressed bytes.
                at, per_byte = (origin, 1.0) if blocked is None else (0, blocked)
                per_read = per_record * per_byte  # the file's bytes per read
                while at < size:
                    # Asked once per range, in order: dmap.io.pairs cuts a second file of mates at the
                    # sizes it asked for the first.
                    target = max(1, round(wanted() * per_read))
                    end = min(size, at + target)
                    reads = (end - at) / per_read
                    hold(FileSplit(done[0], path, at, end, fastq, origin, size, blocked is not None, reads, bam,
                                   extras if bam else ubam.NO_EXTRAS), reads, end - at)
                    if end - at >= target:  # the chunk is full; else the next file goes on with it
                        yield flush()
                    at = end
                continue
            if isinstance(f, BgzfStream):  # cut at its blocks, which the workers inflate
                for part, reads in bgzf_stream_chunks(f, origin, fastq, bam, per_record, ask):
                    hold(dataclasses.replace(part, number=done[0], extras=extras if bam else ubam.NO_EXTRAS), reads,
                         part.blocks.size)
                    if not part.last or reads >= asked[0]:  # the stream's last blocks may leave room for the next file
                        yield flush()
                continue
            for offset, data, records in stream_blocks(f, path, head, origin, fastq, per_record, ask, bam):
                hold(RawBlock(done[0], path, offset, data, fastq, bam, extras if bam else ubam.NO_EXTRAS), records,
                     data.size)
                if records >= asked[0]:  # a block short of what it asked for is the stream's last
                    yield flush()
    if held:
        yield flush()


def stream_blocks(f: BinaryIO, path: str, head: np.ndarray, offset: int, fastq: bool, per_record: float,
                  wanted: Callable[[], int], bam: bool = False) -> Iterator[tuple[int, np.ndarray, int]]:
    """(offset, bytes, records) of consecutive blocks of ``wanted()`` whole records of a stream
    (fewer in the last), which has yielded ``head`` already.

    A FASTQ block ends after its records' fourth newlines (the stream is read
    from its start, so the newlines count its lines); a FASTA block ends
    before the ``>`` of the next record; a block of BAM (inflated) ends before
    the record of its ``wanted() + 1``-th read (:func:`_bam_block_end`).  Each
    block is a new array: the chunks in flight keep theirs.
    """
    carry = head
    at_end = False
    while carry.size or not at_end:
        n = wanted()
        size = max(carry.size + (0 if at_end else SNIFF_BYTES), int(n * per_record * 1.01) + SNIFF_BYTES)
        while True:
            buf = np.empty(size, dtype=np.uint8)
            buf[:carry.size] = carry
            got = carry.size if at_end else carry.size + fill(f, memoryview(buf)[carry.size:], path)
            at_end = at_end or got < size
            data = buf[:got]
            cut, records = (_bam_block_end(data, n, at_end, path, f"byte {offset}") if bam
                            else _block_end(data, fastq, n, at_end))
            if cut is not None:
                break
            if size > n * MAX_RECORD_BYTES:
                raise InputFormatError(f"reads file {path!r} holds a record over {MAX_RECORD_BYTES} bytes "
                                       "long, far longer than any index maps")
            carry, size = data, size * 2  # not one whole record yet: read on
        if cut:
            yield offset, data[:cut], records
        offset += cut
        carry = data[cut:]
        if at_end and (cut == 0 or (not bam and not records_end(carry, fastq))):
            return  # the rest is blank lines


def _block_end(data: np.ndarray, fastq: bool, n: int, at_end: bool) -> tuple[int | None, int]:
    """Where a block of ``n`` whole records of ``data`` ends (fewer at the stream's end), and its
    records; None when ``data`` holds fewer and more is to come.

    Never fewer short of the end: the two files of pairs are read a block of ``n`` records
    each, and an interleaved file's block must hold whole pairs, so a block cut where the
    bytes read ran out (reads longer than the stream's first ones) would part mates."""
    if at_end:  # the rest of the stream, where it holds at most n records
        if fastq:
            newlines = newline_count(data)
            if newlines // 4 <= n:  # (a last line without its newline counts)
                return records_end(data, True), newlines // 4 + int(data.size > 0 and data[-1] != 10)
        elif (starts := _fasta_starts(data)).size <= n:
            return records_end(data, False), starts.size
    end, whole = _whole_records(data, fastq, n)
    return (end, n) if whole == n else (None, 0)


def _bam_block_end(data: np.ndarray, n: int, at_end: bool, path: str, where: str) -> tuple[int | None, int]:
    """:func:`_block_end` of BAM records (inflated, from a record on): ``n`` reads, the records of
    the ``n + 1``-th read and any after it left to the next block, so that a pair's records stay
    together whatever secondary and supplementary records (which repeat a read) lie among them."""
    starts = ubam.record_starts(data, 0, None, path, where, MAX_RECORD_BYTES)  # the records held whole
    reads = ubam.read_records(data, starts)
    if reads.size > n:
        return int(reads[n]), n
    if not at_end:
        return None, 0
    _check_whole_bam(data, starts, path, where)
    return data.size, int(reads.size)


def _check_whole_bam(data: np.ndarray, starts: np.ndarray, path: str, where: str) -> None:
    """That the records at ``starts``, those ``data`` holds whole, end where a stream's last bytes ``data`` end."""
    end = int(starts[-1]) + 4 + ubam.record_size(data, int(starts[-1])) if starts.size else 0
    if end != data.size:
        raise InputFormatError(f"reads file {path!r} is not whole BAM (after {where}): it ends inside a record")


def _whole_records(data: np.ndarray, fastq: bool, most: int) -> tuple[int, int]:
    """Where the first whole records of ``data`` (which begins with a record), at most ``most``
    of them, end, and how many they are; a FASTA record is whole once the next one begins."""
    if fastq:
        end, lines = after_newlines(data, 4 * most)
        if end is not None:
            return end, most
        k = lines // 4  # data holds fewer (the stream's end, or a record longer than estimated)
        return (after_newlines(data, 4 * k)[0] if k else 0), k
    starts = _fasta_starts(data)
    k = min(most, max(starts.size - 1, 0))
    return (int(starts[k]) if k else 0), k


def newline_count(data: np.ndarray) -> int:
    """The newlines of ``data``, counted a block at a time (:data:`COUNT_BLOCK`)."""
    return sum(int(np.count_nonzero(data[k:k + COUNT_BLOCK] == 10)) for k in range(0, data.size, COUNT_BLOCK))


def after_newlines(data: np.ndarray, m: int) -> tuple[int | None, int]:
    """Where the ``m``-th newline of ``data`` is passed (the offset after it), or None where
    ``data`` holds fewer; and the newlines counted.  Counted a block at a time
    (:data:`COUNT_BLOCK`), without an array of every newline's offset: finding a stream
    block's end so took 14 ms per 200,000 FASTQ records, against 70 ms for every offset."""
    seen = 0
    for k in range(0, data.size, COUNT_BLOCK):
        block = data[k:k + COUNT_BLOCK]
        count = int(np.count_nonzero(block == 10))
        if seen + count >= m:  # the block of the newline sought: its offsets
            return k + int(np.flatnonzero(block == 10)[m - seen - 1]) + 1, m
        seen += count
    return None, seen


def _fasta_starts(data: np.ndarray) -> np.ndarray:
    """The offsets of the FASTA records of ``data``: its '>' at the start of a line."""
    starts = np.flatnonzero(data == ord(">"))
    return starts[(starts == 0) | (data[np.maximum(starts - 1, 0)] == 10)]


# The bytes of a BGZF stream looked at to tell it is one: a header with a few extra subfields.
BGZF_HEADER_PEEK = 256
# Compressed bytes read from a BGZF stream at a time.
STREAM_READ = 1 << 22


class BgzfStream(io.RawIOBase):
    """A BGZF stream read once, from a pipe: its whole blocks as they come, kept compressed from
    the first not yet taken (:meth:`take`); read inflated from its first byte by :func:`sniff`."""

    def __init__(self, pipe: BinaryIO, path: str):
        super().__init__()
        self.pipe, self.path = pipe, path
        # The compressed bytes from stream offset ``base`` on are ``buffer[lo:hi]``: the pipe is
        # read into this one buffer, reused once its blocks are taken, rather than into new
        # memory for each read (on a VM, fresh pages cost more than the copy out of them).
        self.buffer = np.empty(2 * STREAM_READ, dtype=np.uint8)
        self.lo = self.hi = 0
        self.base = 0
        self.sizes: list[int] = []  # the whole blocks in ``data``: their sizes,
        self.inflated: list[int] = []  # and their inflated sizes (each block's trailer)
        self.ended = False
        self._block, self._pending = 0, memoryview(b"")  # where readinto stands

    def readable(self) -> bool:
        return True

    def more(self) -> bool:
        """Read on until one more whole block is known; False where the stream has ended."""
        known = sum(self.sizes)
        while not self.ended:
            self._room()
            try:
                got = self.pipe.readinto(memoryview(self.buffer)[self.hi:self.hi + STREAM_READ])
            except OSError as e:
                raise InputFormatError(f"reads file {self.path!r} cannot be read: {e}") from None
            if not got:
                self.ended = True
                if known < self.hi - self.lo:
                    raise InputFormatError(f"reads file {self.path!r} is not whole BGZF: it ends inside the "
                                           f"block at byte {self.base + known}")
                return False
            self.hi += got
            try:
                sizes, inflated = bgzf.block_table(self.data, known, self.base)
            except ValueError as e:
                raise InputFormatError(f"reads file {self.path!r} is not whole BGZF: {e}") from None
            self.sizes += sizes
            self.inflated += inflated
            if sizes:
                return True
        return False

    @property
    def data(self) -> np.ndarray:
        """The compressed bytes held, from stream offset ``base`` on."""
        return self.buffer[self.lo:self.hi]

    def _room(self) -> None:
        """Room for one more read after the bytes held: those moved to the buffer's start, or
        into a buffer twice their size and a read's where the buffer cannot hold both (a chunk
        of many reads)."""
        if self.hi + STREAM_READ <= self.buffer.size:
            return
        held = self.hi - self.lo
        buffer = (self.buffer if held + STREAM_READ <= self.buffer.size
                  else np.empty(2 * (held + STREAM_READ), dtype=np.uint8))
        memoryview(buffer)[:held] = memoryview(self.buffer)[self.lo:self.hi]  # a memmove where they overlap
        self.buffer, self.lo, self.hi = buffer, 0, held

    def block(self, i: int) -> bytes:
        """The inflated bytes of the ``i``-th block held (:meth:`more` having read it)."""
        at = sum(self.sizes[:i])
        try:
            return bgzf.inflate_block(memoryview(self.data)[at:at + self.sizes[i]])
        except ValueError as e:
            raise InputFormatError(f"reads file {self.path!r} is not whole BGZF: the block at byte "
                                   f"{self.base + at} is damaged: {e}") from None

    def take(self, k: int) -> tuple[int, np.ndarray]:
        """The stream offset and the compressed bytes of the first ``k`` blocks held, which are let go."""
        n = sum(self.sizes[:k])
        offset, out = self.base, self.buffer[self.lo:self.lo + n].copy()
        del self.sizes[:k], self.inflated[:k]
        self.lo += n
        self.base += n
        self._block = max(0, self._block - k)
        return offset, out

    def readinto(self, buffer) -> int:
        while not self._pending:
            if self._block == len(self.sizes) and not self.more():
                return 0
            self._pending = memoryview(self.block(self._block))
            self._block += 1
        n = min(len(buffer), len(self._pending))
        memoryview(buffer).cast("B")[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def rewound(self) -> BgzfStream:
        """This stream, read again from its first byte (no block has been taken)."""
        self._block, self._pending = 0, memoryview(b"")
        return self

    def unread(self):
        """The stream from its first byte as :func:`open_reads` reads other streams (inflated by
        xopen), which this object hands over (its closing no longer closes it)."""
        pipe, self.pipe = self.pipe, None
        return xopen(io.BufferedReader(_Replayed(pipe, self.data.tobytes())), "rb")

    def close(self) -> None:
        if self.pipe is not None and self.pipe is not sys.stdin.buffer:
            self.pipe.close()
        super().close()


class _StreamAhead:
    """The inflated bytes of a :class:`BgzfStream` from its ``k``-th block held on, inflated as
    :func:`record_start` and :func:`bam_record_start` ask for them (as :class:`_Inflated` does)."""

    def __init__(self, stream: BgzfStream, k: int):
        self.stream, self.path, self.next = stream, stream.path, k
        self.first = stream.base + sum(stream.sizes[:k])
        self.parts: list[bytes] = []
        self.size = 0

    def upto(self, lo: int, hi: int) -> tuple[np.ndarray, bool]:
        """Inflated bytes ``lo`` to ``hi`` or to the end of the stream, and whether that is the end."""
        stream = self.stream
        while self.size < hi and (self.next < len(stream.sizes) or stream.more()):
            self.parts.append(stream.block(self.next))
            self.size += len(self.parts[-1])
            self.next += 1
        if len(self.parts) > 1:
            self.parts = [b"".join(self.parts)]
        data = np.frombuffer(self.parts[0], np.uint8) if self.parts else np.zeros(0, np.uint8)
        return data[lo:hi], stream.ended and self.next == len(stream.sizes) and hi >= self.size


def bgzf_stream_chunks(stream: BgzfStream, origin: int, fastq: bool, bam: bool, per_record: float,
                       wanted: Callable[[], int], rule: Callable[[_StreamAhead], int] | None = None,
                       ) -> Iterator[tuple[StreamBlocks, float]]:
    """The chunks of a BGZF stream, cut at its blocks, each of about ``wanted()`` reads (estimated
    from ``per_record``, inflated bytes per record), with its estimated reads; ``origin``: where
    the first record begins in the stream's inflated bytes (counted from the first block held).

    After each cut, the blocks that follow are inflated until the record rule of
    :func:`_inflated_split` (or ``rule``, given those bytes) finds the next chunk's
    first record: that is what the client inflates, about a block per chunk.  A
    record whose length spans blocks leaves them to the chunk it begins in."""
    begin = origin  # where the next chunk's first record begins, in its first block's inflated bytes on
    while True:
        while True:  # the blocks before that record are not the chunk's (the header, or a record's middle)
            if not stream.sizes and not stream.more():
                return
            if begin < stream.inflated[0]:
                break
            begin -= stream.inflated[0]
            stream.take(1)
        target = begin + max(1, wanted()) * per_record
        k = inflated = 0
        while inflated < target and (k < len(stream.sizes) or stream.more()):
            inflated += stream.inflated[k]
            k += 1
        tail, last, cut = np.zeros(0, np.uint8), True, 0
        if k < len(stream.sizes) or stream.more():
            ahead = _StreamAhead(stream, k)
            cut = (rule(ahead) if rule is not None else bam_record_start(ahead, 0) if bam
                   else record_start(ahead, 1, fastq, 0))
            data, at_end = ahead.upto(0, cut + 1)
            if cut < data.size or not at_end:  # a record begins after the cut: the next chunk's
                tail, last = data[:cut].copy(), False
            else:  # the rest of the stream ends this chunk's last record (or is blank lines)
                k = len(stream.sizes)
        inflated = sum(stream.inflated[:k])
        offset, blocks = stream.take(k)
        yield (StreamBlocks(0, stream.path, offset, blocks, begin, tail, last, fastq, bam),
               (inflated - begin + tail.size) / per_record)
        if last:
            return
        begin = cut


def stream_blocks_bytes(source: StreamBlocks) -> tuple[np.ndarray, str]:
    """The records of a chunk of a BGZF stream as bytes (inflated on the worker), and where they
    begin in the stream, in words."""
    where = f"the BGZF blocks at byte {source.offset}"
    try:
        parts, _ = bgzf.inflate_blocks(source.blocks, source.blocks.size, source.offset)
    except ValueError as e:
        raise InputFormatError(f"reads file {source.path!r} is not whole BGZF: {e}") from None
    size = sum(map(len, parts)) - source.begin + source.tail.size
    data, at, skip = INFLATED.take(max(size, 0)), 0, source.begin
    for part in (*parts, source.tail):
        piece = np.frombuffer(part, np.uint8)[skip:]
        skip = max(0, skip - len(part))
        data[at:at + piece.size] = piece
        at += piece.size
    if source.last and not source.bam:
        data = data[:records_end(data, source.fastq)]
    elif source.last:  # a stream cut short says so, where a file's last split would find no next record
        _check_whole_bam(data, ubam.record_starts(data, 0, None, source.path, where, MAX_RECORD_BYTES), source.path,
                         where)
    return data, where


class _File:
    """A regular reads file a worker reads: byte ranges mapped from the page cache (or
    read, where the file system cannot map files), or fetched from a URL's file system."""

    def __init__(self, split: FileSplit):
        self.path, self.size = split.path, split.size
        self.fd = self.fs = None
        try:
            if is_url(split.path):
                self.fs, self.inner = url_fs(split.path)
                size = _url_size(split.path) or 0
            else:
                self.fd = os.open(split.path, os.O_RDONLY)
                size = os.fstat(self.fd).st_size
        except (FileNotFoundError, PermissionError) as e:
            # The client found the file when it planned the run: this worker does not see it.
            raise InputFormatError(
                f"reads file {split.path!r} cannot be read by the worker on host {socket.gethostname()!r}: "
                f"{e.strerror}; the workers read the reads themselves: give a path every worker sees (a "
                "shared file system), or pipe the reads in ('-')") from None
        except OSError as e:
            raise InputFormatError(f"reads file {split.path!r} cannot be read: {e}") from None
        if size < split.size:
            self.close()
            raise InputFormatError(f"reads file {split.path!r} was cut short while dmap read it")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)

    def bytes(self, lo: int, hi: int) -> np.ndarray:
        """Bytes ``lo`` to ``hi`` (read-only where mapped)."""
        if hi <= lo:
            return np.empty(0, dtype=np.uint8)
        if self.fs is not None:
            try:
                got = self.fs.cat_file(self.inner, lo, hi)
            except OSError as e:
                raise InputFormatError(f"reads file {self.path!r} cannot be read: {e}") from None
            if len(got) < hi - lo:
                raise InputFormatError(f"reads file {self.path!r} was cut short while dmap read it")
            if len(got) > hi - lo:  # the whole file for a range: a server without byte ranges
                raise InputFormatError(f"reads URL {self.path!r}: the server does not serve byte ranges; "
                                       "download the file, or pipe it in ('curl ... | dmap run INDEX -')")
            return np.frombuffer(got, dtype=np.uint8)
        try:
            return map_bytes(self.fd, lo, hi - lo)
        except (OSError, ValueError):
            out = np.empty(hi - lo, dtype=np.uint8)
            got = os.preadv(self.fd, [memoryview(out)], lo)
            if got < out.size:
                raise InputFormatError(f"reads file {self.path!r} was cut short while dmap read it") from None
            return out

    def upto(self, lo: int, hi: int) -> tuple[np.ndarray, bool]:
        """Bytes ``lo`` to ``hi`` or to the end of the file, and whether that is the end."""
        return self.bytes(lo, min(hi, self.size)), hi >= self.size


# The inflated bytes of BGZF chunks, in memory that earlier chunks no longer use: a 200,000-read
# chunk of BAM inflates to 39 MB, and fresh pages for it took the OS kernel 7.6% of a 1M-read
# run's CPU to zero (perf record; docs/internals.md, "BAM as reads").
INFLATED = RecycledArrays()


class _Inflated:
    """The inflated bytes of a BGZF file from its block at ``first`` on, counted from there:
    the blocks are inflated as they are asked for."""

    def __init__(self, file: _File, first: int):
        self.file, self.path, self.first = file, file.path, first
        self.next = first  # the compressed offset of the next block to inflate
        self.data = np.empty(0, dtype=np.uint8)
        self.parts: list[bytes] = []  # inflated, not yet in ``data``
        self.size = 0  # bytes inflated

    def take(self, stop: int) -> None:
        """Inflate the blocks that begin before the compressed offset ``stop``."""
        if self.next >= min(stop, self.file.size):
            return
        try:
            parts, used = bgzf.inflate_blocks(self.file.bytes(self.next, min(self.file.size, stop + bgzf.MAX_BLOCK)),
                                              stop - self.next, self.next)
        except ValueError as e:
            raise InputFormatError(f"reads file {self.path!r} is not whole BGZF: {e}") from None
        self.parts += parts
        self.size += sum(map(len, parts))
        self.next += used

    def upto(self, lo: int, hi: int) -> tuple[np.ndarray, bool]:
        """Inflated bytes ``lo`` to ``hi`` or to the end of the file, and whether that is the end."""
        while self.size < hi and self.next < self.file.size:
            self.take(self.next + 1)
        if self.parts:  # one copy of what was inflated since the last call
            data = INFLATED.take(self.size)
            data[:self.data.size] = self.data
            at = self.data.size
            for part in self.parts:
                data[at:at + len(part)] = np.frombuffer(part, np.uint8)
                at += len(part)
            self.data, self.parts = data, []
        return self.data[lo:hi], self.next >= self.file.size and hi >= self.size


def first_block(file: _File, pos: int) -> int:
    """The offset of the first BGZF block of ``file`` that begins at or after ``pos`` (its size if none)."""
    window = file.bytes(pos, min(file.size, pos + 2 * bgzf.MAX_BLOCK))
    at = bgzf.find_block(window)
    if at is not None and at < bgzf.MAX_BLOCK:
        return pos + at
    if at is None and pos + window.size == file.size:
        return file.size  # the last block began before pos
    raise InputFormatError(f"reads file {file.path!r} is not BGZF after byte {pos}: no block begins there "
                           "(compress it with bgzip, or plain gzip to have it read whole)")


def record_start(file: _File | _Inflated, pos: int, fastq: bool, origin: int) -> int:
    """The offset of the first record that begins at or after ``pos`` (the file's size if none does).

    A FASTA record begins at a line starting with ``>``.  A FASTQ quality
    line may start with ``@`` (or a sequence line, in a text alphabet, with
    ``@`` or ``+``), so a line starting with ``@`` begins a record only if
    the lines from it form whole records: ``@`` name, sequence, ``+`` line,
    quality as long as the sequence, for :data:`CHAIN` records or up to the
    end of the file.  Reading on from a wrong line would need that many
    sequence lines in a row to look like names or ``+`` lines.
    """
    if pos <= origin:
        return origin
    window = SNIFF_BYTES
    while True:
        data, at_end = file.upto(pos - 1, pos + window)
        nl = np.flatnonzero(data == 10) + (pos - 1)  # newlines at pos - 1 or later: lines start after them
        found = _first_record(data, pos - 1, nl, at_end, fastq)
        if found is not None:
            return found
        if window > CHAIN * 4 * MAX_RECORD_BYTES:
            raise InputFormatError(f"reads file {file.path!r} holds a record over {MAX_RECORD_BYTES} bytes long "
                                   f"(after byte {pos}), far longer than any index maps, or is not FASTQ there")
        window *= 2


def _first_record(data: np.ndarray, base: int, nl: np.ndarray, at_end: bool, fastq: bool) -> int | None:
    """The first record start among the lines of ``data`` (file bytes from ``base``) that begin
    after its newlines ``nl``; the end of the file when there is none, or None when
    ``data`` is too short to tell."""
    end = base + data.size
    starts = nl + 1
    if at_end and (nl.size == 0 or nl[-1] != end - 1):
        nl = np.append(nl, end)  # the last line, without its newline
    else:
        starts = starts[:-1] if starts.size and starts[-1] == end else starts
    lines = min(starts.size, nl.size - 1 if not at_end else nl.size)  # lines with a known end
    if not fastq:
        first = starts[data[np.minimum(starts - base, data.size - 1)] == ord(">")] if starts.size else starts
        if first.size:
            return int(first[0])
        return end if at_end else None
    # Line j runs from starts[j] to nl[j + 1] (its newline); its first byte and length:
    first_byte = data[np.minimum(starts[:lines] - base, data.size - 1)]
    length = nl[1:lines + 1] - starts[:lines] if lines else np.zeros(0, np.int64)
    first_byte = np.where(length > 0, first_byte, 0)
    for j in range(lines):
        if first_byte[j] != ord("@"):
            continue
        ok = True
        for r in range(CHAIN):
            k = j + 4 * r
            if k >= lines:
                if not at_end or k < starts.size:
                    return None  # records beyond what was read
                break  # the file ends after whole records
            if k + 3 >= lines:
                ok = False  # a record cut short by the end of the file
                break
            if first_byte[k] != ord("@") or first_byte[k + 2] != ord("+") or length[k + 1] != length[k + 3]:
                ok = False
                break
        if ok:
            return int(starts[j])
    return end if at_end else None


def split_bytes(split: FileSplit) -> tuple[np.ndarray, str]:
    """The records of ``split`` as bytes, and where they begin in the file, in words (on the worker)."""
    file = _File(split)
    try:
        if split.bgzf:
            return _inflated_split(file, split)
        begin = record_start(file, split.start, split.fastq, split.origin)
        end = record_start(file, split.end, split.fastq, split.origin) if split.end < split.size else split.size
        data = file.bytes(begin, max(begin, end))
        if end == split.size:
            data = data[:records_end(data, split.fastq)]
        return data, f"byte {begin}"
    finally:
        file.close()


def _inflated_split(file: _File, split: FileSplit) -> tuple[np.ndarray, str]:
    """The records of a split of a BGZF file: those that begin in its blocks' inflated bytes.

    The rule of :func:`record_start` is applied to the bytes inflated from
    the split's first block on, at the start of every block that begins at
    or after a cut, so both neighbours of a cut find the same boundary:
    ``record_start(inflated, q + 1)`` looks at the lines that begin after a
    newline at ``q`` or later, which is how the next split, whose bytes
    begin at ``q``, looks for its first record.
    """
    first = 0 if split.start == 0 else first_block(file, split.start)
    inflated = _Inflated(file, first)
    inflated.take(split.end)
    own = inflated.size  # the inflated bytes of the blocks that begin in the split
    inflated.take(inflated.next + 1)  # and those of the next block, where its last record most often ends
    if split.bam:  # the record rule of BAM, whose records are not lines: at the blocks' first bytes
        begin = split.origin if split.start == 0 else bam_record_start(inflated, 0)
        end = max(begin, bam_record_start(inflated, own))
        return inflated.upto(begin, end)[0], f"the BGZF blocks at byte {first}"
    begin = split.origin if split.start == 0 else record_start(inflated, 1, split.fastq, 0)
    end = max(begin, record_start(inflated, own + 1, split.fastq, 0))
    data, at_end = inflated.upto(begin, end)
    if at_end and end >= inflated.size:
        data = data[:records_end(data, split.fastq)]
    return data, f"the BGZF blocks at byte {first}"


def bam_record_start(inflated: _Inflated, pos: int) -> int:
    """The offset of the first BAM record that begins at or after ``pos`` of ``inflated`` (its size
    if none does), by :func:`dmap.io.ubam.first_record`: the same for both neighbours of a cut."""
    window = SNIFF_BYTES
    while True:
        data, at_end = inflated.upto(pos, pos + window)
        found = ubam.first_record(data, 0, at_end, MAX_RECORD_BYTES)
        if found is not None:
            return pos + found
        if window > 2 * ubam.CHAIN * MAX_RECORD_BYTES:
            raise InputFormatError(f"reads file {inflated.path!r} is not whole BAM: no record begins in the "
                                   f"{window} bytes after the BGZF block at byte {inflated.first}")
        window *= 2


def records_end(data: np.ndarray, fastq: bool) -> int:
    """Where the last record of a file's last bytes ``data`` ends: blank lines after it are
    dropped (an editor may leave them), while the empty sequence and quality lines
    of an empty read still count.

    In FASTQ the line of the last non-blank byte is rounded up to a whole
    four-line record (counting the lines of ``data``, which begins at a
    record); a blank tail longer than 4 kB is left for the parser to refuse.
    """
    if data.size > 1 and data[-1] == 10 and data[-2] not in _BLANK_CODES:
        # Most files: one newline after the last record (what follows, without the passes over data).
        return data.size if fastq else data.size - 1
    tail = data[-4096:]
    text = len(tail.tobytes().rstrip(_BLANK))  # the tail's bytes up to its last that is not blank
    if not text:
        return 0 if tail.size == data.size else data.size
    last = data.size - tail.size + text - 1
    if not fastq:
        return last + 1
    newlines = np.flatnonzero(data == 10)
    lines = -(-(int(np.searchsorted(newlines, last)) + 1) // 4) * 4
    return int(newlines[lines - 1]) + 1 if lines <= newlines.size else data.size
