"""Reading references and reads from FASTA/FASTQ (plain or gzip) with dnaio.

References are parsed record by record by dnaio.  FASTQ reads are read in
pieces of whole four-line records; a piece of plain FASTQ is split into
fields with numpy (no Python object per read: that was most of the host's
time), and any other piece is parsed by dnaio, so dnaio stays the judge of
what is valid.  On top: one clear error per kind of bad input, symbol
checks against the index alphabet, and read chunks of a chosen size whose
bytes go to the device as they are.

One module of about 510 lines: the FASTQ fast path, its piece reader and
the FASTA/dnaio fallback share private helpers and limits (``PIECE_BYTES``)
that only this reader uses.  The read types it yields are in
:mod:`dmap.reads`.
"""

from __future__ import annotations

import io
import itertools
import os
import stat
from collections.abc import Callable, Iterator

import dnaio
import numpy as np
from xopen import xopen

from .alphabet import INVALID, Alphabet
from .errors import InputFormatError
from .mapfile import map_bytes
from .reads import MAX_NAME_LENGTH, ReadChunk, ReadFields, reads_with_unknown_symbols
from .schedule import DEFAULT_CHUNK_SIZE

STDIN = "-"  # a reads path that means standard input


def _check_path(path: str, what: str) -> None:
    if path == STDIN:
        return
    if not os.path.exists(path):
        raise InputFormatError(f"{what} file {path!r} does not exist")
    if os.path.isdir(path):
        raise InputFormatError(f"{what} path {path!r} is a directory, not a FASTA/FASTQ file")


def _open(source, what: str, name: str):
    """dnaio's reader of ``source``: a path, or a binary stream named ``name``."""
    try:
        return dnaio.open(source, mode="r")
    except (dnaio.UnknownFileFormat, dnaio.FileFormatError, UnicodeDecodeError, OSError, EOFError) as e:
        raise InputFormatError(f"{what} file {name!r} is not FASTA or FASTQ: {e}") from None


def _records(source, what: str, name: str | None = None) -> Iterator[dnaio.SequenceRecord]:
    """The records of ``source``: a path, or a binary stream named ``name``."""
    if name is None:
        name = os.fspath(source)
        _check_path(name, what)
    reader = _open(source, what, name)
    try:
        n = 0
        for rec in reader:
            n += 1
            yield rec
        if n == 0:
            raise InputFormatError(f"{what} file {name!r} is empty (no FASTA/FASTQ records)")
    except (dnaio.FileFormatError, UnicodeDecodeError, EOFError, OSError) as e:
        raise InputFormatError(f"{what} file {name!r} is malformed: {e}") from None
    finally:
        reader.close()


class _Prefixed(io.RawIOBase):
    """A binary stream whose first bytes were read already: those bytes, then the rest."""

    def __init__(self, head: bytes, rest):
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n], self._head = self._head[:n], self._head[n:]
            return n
        return self._rest.readinto(b)


def _first_bad_symbol(seq_bytes: np.ndarray, table: np.ndarray) -> str | None:
    bad = np.flatnonzero(table[seq_bytes] == INVALID)
    if bad.size == 0:
        return None
    return repr(chr(seq_bytes[bad[0]]))


def iter_contigs(path: str | os.PathLike) -> Iterator[tuple[str, bytes]]:
    """Yield ``(name, sequence bytes)`` for each record of a reference FASTA.

    The name is the first word of the header line.  Duplicate or empty names
    are errors, because SAM identifies contigs by name.
    """
    seen: set[str] = set()
    for rec in _records(path, "reference"):
        name = rec.name.split(maxsplit=1)[0] if rec.name.strip() else ""
        if not name:
            raise InputFormatError(f"reference {os.fspath(path)!r}: a record has an empty name")
        if name in seen:
            raise InputFormatError(f"reference {os.fspath(path)!r}: contig name {name!r} occurs twice")
        seen.add(name)
        yield name, rec.sequence.encode("latin-1")


def encode_reference(name: str, seq: bytes, alphabet: Alphabet) -> np.ndarray:
    """Reference bytes -> codes; unknown symbols are an error naming the contig."""
    raw = np.frombuffer(seq, dtype=np.uint8)
    codes = alphabet.reference_table[raw]
    bad = _first_bad_symbol(raw, alphabet.reference_table)
    if bad is not None:
        raise InputFormatError(
            f"contig {name!r} contains the symbol {bad}, which is not in the {alphabet.name} alphabet "
            f"(use --alphabet protein or --alphabet text for other sequences)"
        )
    return codes


def split_fastq(data: np.ndarray, low: tuple[np.ndarray, np.ndarray] | None = None,
                newlines: np.ndarray | None = None) -> ReadFields | None:
    """The fields of plain four-line FASTQ records, found with numpy.

    Returns None for anything but the plain form (a non-ASCII byte, a
    ``+`` line that repeats the name, a record out of shape): the caller
    then lets dnaio parse the buffer, so dnaio stays the judge of what is
    valid.  Like dnaio, a name ends at the first space or tab, a line's
    trailing ``\\r`` is dropped, and the last line may lack its newline.
    ``low``: :func:`_low_bytes` of ``data``, and ``newlines`` the positions
    in it of the newlines, if known.
    """
    if data.size == 0:
        return None
    # One pass (_low_bytes) finds every newline, space and tab, other control
    # bytes and any byte that is not ASCII: no pass of its own for each.
    low, low_bytes = _low_bytes(data) if low is None else low
    if (low_bytes >= 128).any():
        return None
    nl = low[low_bytes == 10] if newlines is None else newlines
    if nl.size == 0 or nl[-1] != data.size - 1:
        nl = np.append(nl, data.size)
    if nl.size % 4:
        return None
    starts = np.empty_like(nl)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    ends = nl
    if (low_bytes == 13).any():  # drop "\r" before "\n" (five passes over the newlines; most files have none)
        ends = nl - ((nl > starts) & (data[np.maximum(nl - 1, 0)] == 13))
    head, seq, plus, qual = (starts[k::4] for k in range(4))
    seq_len = ends[1::4] - seq
    if ((data[head] != ord("@")).any() or (data[plus] != ord("+")).any() or (ends[2::4] - plus != 1).any()
            or (ends[3::4] - qual != seq_len).any()):
        return None
    name = head + 1
    spaces = low[(low_bytes == 32) | (low_bytes == 9)]
    if spaces.size:
        at = np.searchsorted(spaces, name)
        first_space = np.append(spaces, data.size)[at]
        name_end = np.minimum(first_space, ends[::4])
    else:
        name_end = ends[::4]
    return ReadFields(data, name, name_end - name, seq, seq_len, qual)


def _parse_with_dnaio(data: np.ndarray, path: str, lines_before: int) -> ReadFields:
    """Records of a buffer parsed by dnaio, whose errors name the line in the whole file."""
    try:
        records = list(dnaio.open(io.BytesIO(data.tobytes()), fileformat="fastq"))
    except dnaio.FileFormatError as e:
        if e.line is not None:
            e.line += lines_before
        raise InputFormatError(f"reads file {path!r} is malformed: {e}") from None
    except UnicodeDecodeError as e:
        raise InputFormatError(f"reads file {path!r} is malformed: {e}") from None
    return ReadFields.from_strings([r.id for r in records], [r.sequence for r in records],
                                   [r.qualities for r in records])


PIECE_BYTES = 4 << 20  # FASTQ is read in pieces of whole records of at most this size
_BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark


def _read_fields(path: str | os.PathLike, chunk_size: int,
                 wanted: Callable[[], int] | None = None) -> Iterator[ReadFields]:
    """All records of a reads file (``-``: standard input), a piece at a time.

    ``wanted()``, if given, says how many records the consumer needs next
    (FASTQ pieces are cut to it, see :func:`_fastq_pieces`).

    The file is opened once and read once, so a pipe works too (``-``,
    ``<(zcat reads.fq.gz)``).  FASTQ (its first byte is ``@``) goes through
    :func:`split_fastq`, falling back to dnaio piece by piece; anything else
    (FASTA, multi-line and rare for reads) is dnaio's to read or reject.
    """
    path = os.fspath(path)
    _check_path(path, "reads")
    try:
        f = xopen(path, "rb")
    except OSError as e:
        raise InputFormatError(f"reads file {path!r} cannot be read: {e}") from None
    with f:
        head = np.zeros(1, dtype=np.uint8)
        if not _fill(f, memoryview(head), path):
            return  # no reads: a SAM file of its header alone
        skipped = 0
        if head[0] == _BOM[0]:  # a UTF-8 byte-order mark, as some editors write: skipped
            rest = np.zeros(len(_BOM), dtype=np.uint8)
            n = _fill(f, memoryview(rest[1:]), path)
            if rest[1:1 + n].tobytes() != _BOM[1:]:
                raise InputFormatError(f"reads file {path!r} is not FASTA or FASTQ: it starts with byte 0xEF")
            skipped = len(_BOM)
            if not _fill(f, memoryview(head), path):
                return
        while head[0] in _BLANK:  # blank lines before the first record (or only blank lines: no reads)
            skipped += 1
            if not _fill(f, memoryview(head), path):
                return
        if head[0] != ord("@"):
            records = _records(io.BufferedReader(_Prefixed(head.tobytes(), f)), "reads", path)
            while batch := list(itertools.islice(records, chunk_size)):
                yield ReadFields.from_strings([r.id for r in batch], [r.sequence for r in batch], None)
            return
        lines = 0
        for data, low, newlines in _fastq_pieces(f, path, head, wanted, skipped):
            fields = split_fastq(data, low, newlines)
            if fields is None:
                fields = _parse_with_dnaio(data, path, lines)
            lines += 4 * len(fields)
            yield fields


def _low_bytes(data: np.ndarray, scratch: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the newlines, spaces, tabs (and other bytes <= 32) and of
    the bytes that are not ASCII (>= 128) in ``data``, and those bytes.

    Compared as signed bytes, both kinds are <= 32, so one pass finds them.

    ``scratch``: a bool array at least as long as ``data`` to compare into.
    A new array of a chunk's size comes as fresh pages, which the kernel
    zeroes: that was 6% of a mapping run's CPU time (docs/performance.md).
    """
    mask = np.less_equal(data.view(np.int8), 32, out=None if scratch is None else scratch[:data.size])
    positions = np.flatnonzero(mask)
    return positions, data[positions]


def _fastq_pieces(
    f, path: str, head: np.ndarray, wanted: Callable[[], int] | None = None, start: int = 0
) -> Iterator[tuple[np.ndarray, tuple[np.ndarray, np.ndarray], np.ndarray]]:
    """Pieces of whole four-line records, each with its :func:`_low_bytes` and its newlines.

    Each piece ends after a multiple of four lines (the last piece: at the
    end of the file).  The newlines that place that end are the ones
    :func:`split_fastq` splits fields at, so finding whole records costs no
    pass of its own: ``dnaio.read_chunks`` counted them with ``bytes.count``
    while holding the GIL, 0.07-0.28 s per million reads (docs/performance.md).
    Every piece has a buffer of its own, as chunks keep their bytes: a mapped
    range of the file (:class:`_MappedFile`) or, from a pipe or a compressed
    file, a new array.
    ``head``: the file's first bytes, read already, after ``start`` bytes
    skipped (a byte-order mark).  Blank lines at the end of the file are
    dropped, as a text editor may leave them.

    With ``wanted``, a piece holds at most ``wanted()`` records, in a buffer
    sized for them from the most bytes per record of any piece so far (at
    least PIECE_BYTES), so that a chunk is one piece: joining pieces into chunks
    copied every read's bytes once more, into fresh pages (docs/performance.md).
    The records read beyond go on to the next piece.
    """
    mapped = _MappedFile.of(f, path)
    carry = head if mapped is None else head[:0]  # a mapped file's pieces start at `offset`, the head included
    offset = start
    record_bytes = 0  # the most bytes per record in a piece so far
    scratch = np.empty(0, dtype=bool)  # for _low_bytes, reused from piece to piece
    while True:
        records = wanted() if wanted is not None else 0
        # 1% more than the wanted records would take at the most bytes per record
        # so far, so that slightly longer ones still fit; any beyond are carried over.
        size = max(PIECE_BYTES, records * record_bytes * 101 // 100, carry.size + 1)
        if mapped is not None:
            data = mapped.piece(offset, size)
            n = data.size
        else:
            buf = np.empty(size, dtype=np.uint8)
            buf[:carry.size] = carry
            n = carry.size + _fill(f, memoryview(buf)[carry.size:], path)
            data = buf[:n]
        if scratch.size < n:
            scratch = np.empty(size, dtype=bool)
        low, low_bytes = _low_bytes(data, scratch)
        newlines = low[low_bytes == 10]
        if n < size:  # the end of the file: blank lines after the last record are dropped
            n = _records_end(data, newlines)
            data, newlines = data[:n], newlines[newlines < n]
            k = int(np.searchsorted(low, n))
            low, low_bytes = low[:k], low_bytes[:k]
        complete = newlines.size // 4 * 4
        whole = min(complete, 4 * records) if records else complete
        if n < size and whole == complete:  # the end of the file, all of it wanted
            if n:
                _check_record_lengths(newlines[3:whole:4], n, path)
                yield data, (low, low_bytes), newlines
            return
        end = int(newlines[whole - 1]) + 1 if whole else 0
        _check_record_lengths(newlines[3:whole:4], end, path)
        record_bytes = max(record_bytes, -(-end // (whole // 4)))
        k = int(np.searchsorted(low, end))
        yield data[:end], (low[:k], low_bytes[:k]), newlines[:whole]
        if mapped is not None:
            offset += end
        else:
            carry = data[end:]


class _MappedFile:
    """An uncompressed regular file whose pieces are mapped (mmap), not read.

    A piece then lies in the page cache's own pages: ``readinto`` copied the
    file into new buffers, whose fresh pages the kernel zeroed first, and on
    the VM where dmap is measured (memory that a guest frees goes back to the
    host) that was 0.15-0.2 s of system time per million 100-bp reads
    (docs/performance.md).  Each piece maps only its own range, so
    the process holds the pages of the chunks in flight, not the whole file.

    :meth:`piece` checks the file's size before it maps a piece, so a file cut
    short between pieces is an error that says so.  One cut short while a
    chunk of it is still in flight would end the run with SIGBUS, as it would
    any program that maps its input.
    """

    def __init__(self, fd: int, size: int, path: str):
        self.fd, self.size, self.path = fd, size, path

    @classmethod
    def of(cls, f, path: str) -> _MappedFile | None:
        """``f`` (from :func:`xopen`), if it reads a regular file as it is (not a
        pipe, not gzip) whose size is known and which can be mapped; else None,
        and the file is read instead."""
        raw = getattr(f, "raw", None)
        if not isinstance(raw, io.FileIO):
            return None
        st = os.fstat(raw.fileno())
        # A file whose first byte was read but whose size is 0 is not a plain
        # file (e.g. under /proc), and some file systems cannot map files.
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return None
        try:
            map_bytes(raw.fileno(), 0, 1)
        except (OSError, ValueError):
            return None
        return cls(raw.fileno(), st.st_size, path)

    def piece(self, offset: int, size: int) -> np.ndarray:
        """Bytes ``offset`` to ``offset + size`` (fewer at the end), read-only."""
        size = min(size, self.size - offset)
        if size <= 0:
            return np.empty(0, dtype=np.uint8)
        try:
            if os.fstat(self.fd).st_size < offset + size:
                raise InputFormatError(f"reads file {self.path!r} was cut short while dmap read it")
            return map_bytes(self.fd, offset, size)
        except OSError as e:
            raise InputFormatError(f"reads file {self.path!r} cannot be read: {e}") from None


_BLANK = np.frombuffer(b"\n\r \t", np.uint8)


def _records_end(data: np.ndarray, newlines: np.ndarray) -> int:
    """Where the last four-line record of the file's last piece ``data`` ends: blank
    lines after it are dropped (an editor may leave them), while the empty
    sequence and quality lines of an empty read still count.

    The line of the last non-blank byte is rounded up to a whole record;
    a blank tail longer than 4 kB is left for the parser to refuse.
    """
    tail = data[-4096:]
    text = np.flatnonzero(~np.isin(tail, _BLANK))
    if not text.size:
        return 0 if tail.size == data.size else data.size
    last = data.size - tail.size + int(text[-1])
    lines = -(-(int(np.searchsorted(newlines, last)) + 1) // 4) * 4
    return int(newlines[lines - 1]) + 1 if lines <= newlines.size else data.size


def _check_record_lengths(ends: np.ndarray, end: int, path: str) -> None:
    """Refuse a piece ``[0, end)`` holding no record, or one over PIECE_BYTES.

    ``ends``: the fourth newline of each whole record; after the last of
    them, the piece may end with a record that lacks its final newline.
    """
    if not end or np.diff(ends, prepend=-1, append=end - 1).max() > PIECE_BYTES:
        raise InputFormatError(f"reads file {path!r} holds a record over {PIECE_BYTES} bytes long, "
                               "far longer than any index maps")


def _fill(f, view: memoryview, path: str) -> int:
    """Read from ``f`` until ``view`` is full or the file ends; the bytes read."""
    done = 0
    try:
        while done < len(view) and (got := f.readinto(view[done:])):
            done += got
    except (EOFError, OSError) as e:  # a damaged gzip stream
        raise InputFormatError(f"reads file {path!r} is malformed: {e}") from None
    return done


class _Pending:
    """Records parsed but not yet handed out, in file order."""

    def __init__(self):
        self.pieces: list[ReadFields] = []
        self.n = 0

    def add(self, piece: ReadFields) -> None:
        if len(piece):
            self.pieces.append(piece)
            self.n += len(piece)

    def take(self, n: int) -> ReadFields:
        """The next ``n`` records (fewer if fewer are pending), in one buffer."""
        parts = []
        while n > 0 and self.pieces:
            k = min(n, len(self.pieces[0]))
            parts.append(self.pieces[0].take(0, k))
            self.pieces[0] = self.pieces[0].take(k, len(self.pieces[0]))
            if not len(self.pieces[0]):
                self.pieces.pop(0)
            n -= k
            self.n -= k
        return ReadFields.concat(parts)


def iter_read_chunks(
    path: str | os.PathLike,
    alphabet: Alphabet,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    max_length: int | None = None,
    next_size: Callable[[int, int], int] | None = None,
    check_symbols: bool = True,
    strict: bool = True,
) -> Iterator[ReadChunk]:
    """Parse reads in chunks of ``chunk_size``, validated.

    ``next_size(reads_done, bytes_done)``, if given, chooses the size of each
    chunk, the first included (see :class:`dmap.schedule.GuidedChunks`);
    ``bytes_done`` counts the FASTA/FASTQ bytes of the reads parsed so far.
    With ``check_symbols`` False, only the first chunk's symbols are checked
    here; the exact search kernel checks the others (see
    :class:`UnknownSymbolError`), which saves a pass over every read.

    With ``strict`` False, a read that is empty, longer than ``max_length``
    or holds a symbol outside the alphabet is marked skipped in its chunk
    (:meth:`ReadChunk.skip`), to be written unmapped; with ``strict`` it is
    an error.  An empty input yields no chunk.

    Raises
    ------
    InputFormatError
        For a missing or malformed file, a read without a name or with one
        longer than SAM allows, and (``strict``) a read with an unknown
        symbol, an empty read, or a read longer than ``max_length``.
    """
    if chunk_size < 1:
        raise InputFormatError(f"chunk size must be at least 1, not {chunk_size}")
    pending = _Pending()
    number = first = bytes_done = 0
    size = chunk_size if next_size is None else max(1, next_size(0, 0))
    source = _read_fields(path, chunk_size, wanted=lambda: max(size - pending.n, 1))
    while True:
        while pending.n < size and (piece := next(source, None)) is not None:
            pending.add(piece)
        if pending.n == 0:
            return
        chunk = ReadChunk(number, first, pending.take(size), alphabet.read_table, alphabet.name)
        n = len(chunk)
        fields = chunk.fields
        lengths = fields.seq_len
        if (fields.name_len == 0).any():
            raise InputFormatError(f"reads {os.fspath(path)!r}: read number "
                                   f"{first + int(np.argmin(fields.name_len)) + 1} has no name")
        if fields.name_len.max() > MAX_NAME_LENGTH:
            i = int(np.argmax(fields.name_len))
            raise InputFormatError(f"read {chunk.names[i][:40]!r}... has a name of {fields.name_len[i]} characters; "
                                   f"SAM allows at most {MAX_NAME_LENGTH}: shorten the names (e.g. with seqkit "
                                   "replace) and run again")
        empty = lengths == 0
        too_long = lengths > max_length if max_length is not None else None
        if strict:
            if empty.any():
                raise InputFormatError(f"read {chunk.names[int(np.argmax(empty))]!r} is empty")
            if too_long is not None and too_long.any():
                i = int(np.argmax(lengths))
                raise InputFormatError(
                    f"read {chunk.names[i]!r} is {lengths[i]} symbols long, longer than the index's maximum query "
                    f"length {max_length}; rebuild the index with a larger --max-query-length"
                )
            if check_symbols or number == 0:
                chunk.check_symbols()
        else:
            chunk.skip(empty, "empty")
            if too_long is not None:
                chunk.skip(too_long, "too long")
            if check_symbols or number == 0:
                unknown = reads_with_unknown_symbols(chunk.codes, chunk.offsets, lengths)
                if unknown is not None:
                    chunk.skip(unknown, "unknown symbol")
        yield chunk
        number += 1
        first += n
        bytes_done += chunk.file_bytes
        if next_size is not None:
            size = max(1, next_size(first, bytes_done))
