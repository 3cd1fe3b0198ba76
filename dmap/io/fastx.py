"""Parsing FASTA/FASTQ: references record by record with dnaio, reads a chunk at a time.

A chunk of reads (:mod:`dmap.io.splits`: a byte range of a file or a block
of a stream, whole records either way) is parsed where it is read, on a
worker: four-line FASTQ records and FASTA records of one sequence line are
split into fields with numpy (no Python object per read: that was most of
the host's time), and anything else is parsed by dnaio, so dnaio stays the
judge of what is valid.  On top: one
clear error per kind of bad input and symbol checks against the index
alphabet.  The read types are in :mod:`dmap.reads`.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator

import dnaio
import numpy as np

from ..alphabet import INVALID, Alphabet, translate
from ..errors import InputFormatError
from ..mapping.schedule import DEFAULT_CHUNK_SIZE
from ..reads import (
    MAX_NAME_LENGTH,
    ReadChunk,
    ReadFields,
    positions_where,
    ragged_positions,
    reads_with_unknown_symbols,
)
from . import splits, ubam_reads
from .splits import (
    FileSplit,
    RawBlock,
    Source,
    SourceGroup,
    StreamBlocks,
    check_path,
    plan_input,
    reads_paths,
    split_bytes,
    stream_blocks_bytes,
)


def _open(source, what: str, name: str):
    """dnaio's reader of ``source``: a path, or a binary stream named ``name``."""
    try:
        return dnaio.open(source, mode="r")
    except (dnaio.UnknownFileFormat, dnaio.FileFormatError, UnicodeDecodeError, OSError, EOFError) as e:
        raise InputFormatError(f"{what} file {name!r} is not FASTA or FASTQ: {e}") from None


def _records(source, what: str, name: str | None = None) -> Iterator[dnaio.SequenceRecord]:
    """The records of ``source``: a path, a URL (fsspec), or a binary stream named ``name``."""
    stream = None
    if name is None:
        name = os.fspath(source)
        check_path(name, what)
        if splits.is_url(name):
            source = stream = splits.open_reads(name)
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
        if stream is not None:
            stream.close()


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
    codes = translate(alphabet.reference_table, raw)
    if codes.size and codes.max() == INVALID:  # every other code is at most the separator's
        bad = chr(raw[np.argmax(codes == INVALID)])
        raise InputFormatError(
            f"contig {name!r} contains the symbol {bad!r}, which is not in the {alphabet.name} alphabet "
            f"(use --alphabet protein or --alphabet text for other sequences)"
        )
    return codes


def split_fastq(data: np.ndarray) -> ReadFields | None:
    """The fields of plain four-line FASTQ records, found with numpy.

    Returns None for anything but the plain form (a non-ASCII byte, a
    space or control byte in a quality, a ``+`` line that is neither empty
    nor its header's repeat, a record out of shape): the caller
    then lets dnaio parse the buffer, so dnaio stays the judge of what is
    valid.  Like dnaio, a name ends at the first space or tab, a line's
    trailing ``\\r`` is dropped, and the last line may lack its newline.
    """
    lines = _lines(data, 4)
    if lines is None:
        return None
    low, low_bytes, nl_at, starts, ends, dropped = lines
    # A quality line holds no space, tab or other control byte but the "\r" of its line end: between
    # its record's last two newlines none of the low bytes.  Records with one are left to dnaio and
    # the check of its records (_check_qualities).  A sequence may hold them (text reads; an odd DNA
    # read), and a header line ends its name at the first space or tab.
    if (nl_at[3::4] - nl_at[2::4] - 1 - dropped[3::4]).any():
        return None
    head, seq, plus, qual = (starts[k::4] for k in range(4))
    seq_len = ends[1::4] - seq
    if ((data[head] != ord("@")).any() or (data[plus] != ord("+")).any() or (ends[3::4] - qual != seq_len).any()
            or not _plus_lines_repeat_headers(data, head, ends[::4], plus, ends[2::4])):
        return None
    name, name_len = _names(data, low, low_bytes, head, ends[::4])
    return ReadFields(data, name, name_len, seq, seq_len, qual, None, *_comments(name, name_len, ends[::4]))


def split_fasta(data: np.ndarray) -> ReadFields | None:
    """The fields of FASTA records of one sequence line each, as reads are written, found with
    numpy (dnaio made a Python object per read).

    Returns None for anything else (a sequence over several lines or none, a space or control
    byte in a sequence, whose trailing ones dnaio drops, a non-ASCII byte): dnaio parses those.
    """
    lines = _lines(data, 2)
    if lines is None:
        return None
    low, low_bytes, nl_at, starts, ends, dropped = lines
    head, seq = starts[0::2], starts[1::2]
    if ((nl_at[1::2] - nl_at[0::2] - 1 - dropped[1::2]).any() or (data[head] != ord(">")).any()
            or (data[np.minimum(seq, data.size - 1)] == ord(">")).any()):  # a record without a sequence line
        return None
    name, name_len = _names(data, low, low_bytes, head, ends[::2])
    return ReadFields(data, name, name_len, seq, ends[1::2] - seq, None, None, *_comments(name, name_len, ends[::2]))


def _lines(data: np.ndarray, per_record: int) -> tuple[np.ndarray, ...] | None:
    """The lines of ``data``, whole records of ``per_record`` lines, and its low bytes: the low
    bytes' places and values (:func:`_low_bytes`), each newline's place among them, where each
    line starts and ends (without a "\\r" before its newline), and 1 where that "\\r" was dropped.
    None where ``data`` is empty, holds a non-ASCII byte or its lines do not make whole records."""
    if data.size == 0:
        return None
    # One pass (_low_bytes) finds every newline, space and tab, other control
    # bytes and any byte that is not ASCII: no pass of its own for each.
    low, low_bytes = _low_bytes(data)
    if (low_bytes >= 128).any():
        return None
    nl_at = np.flatnonzero(low_bytes == 10)  # the newlines' places among the low bytes
    nl = low[nl_at]
    if nl.size == 0 or nl[-1] != data.size - 1:  # the last line may lack its newline
        nl = np.append(nl, data.size)
        nl_at = np.append(nl_at, low.size)
    if nl.size % per_record:
        return None
    starts = np.empty_like(nl)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    ends, dropped = nl, np.zeros(nl.size, np.int8)
    if (low_bytes == 13).any():  # drop "\r" before "\n" (five passes over the newlines; most files have none)
        dropped = ((nl > starts) & (data[np.maximum(nl - 1, 0)] == 13)).astype(np.int8)
        ends = nl - dropped
    return low, low_bytes, nl_at, starts, ends, dropped


def _names(data: np.ndarray, low: np.ndarray, low_bytes: np.ndarray, head: np.ndarray,
           head_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each name starts (after its header's '@' or '>') and its length: up to the first
    space or tab of the header line, as dnaio's ``id``."""
    name = head + 1
    spaces = low[(low_bytes == 32) | (low_bytes == 9)]
    if not spaces.size:
        return name, head_end - name
    first_space = np.append(spaces, data.size)[np.searchsorted(spaces, name)]
    return name, np.minimum(first_space, head_end) - name


def _comments(name: np.ndarray, name_len: np.ndarray, head_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each header's comment starts (after the space or tab that ends its name, as dnaio's
    ``name`` holds it after its ``id``) and its length, 0 for none."""
    end = name + name_len
    off = np.where(end < head_end, end + 1, head_end)
    return off, head_end - off


def _plus_lines_repeat_headers(data: np.ndarray, head: np.ndarray, head_end: np.ndarray, plus: np.ndarray,
                               plus_end: np.ndarray) -> bool:
    """Whether every '+' line is empty or repeats its record's header, as dnaio requires (SRA's
    ``fastq-dump`` repeats them).  Lines are compared 8 bytes at a time: a line of 60 bytes in 8
    whole-array steps, where dnaio made a Python object per read (12x the time of plain records)."""
    length = plus_end - plus - 1
    named = np.flatnonzero(length)
    if not named.size:
        return True
    length = length[named]
    first, second = head[named] + 1, plus[named] + 1
    if (length != head_end[named] - first).any():
        return False
    # The words of a line that ends within 7 bytes of the buffer's end (its last record's, at most)
    # would run past it: such lines are compared as bytes.
    near_end = int(np.searchsorted(plus_end[named], data.size - 7, side="right"))
    for a, b, n in zip(first[near_end:].tolist(), second[near_end:].tolist(), length[near_end:].tolist()):
        if data[a:a + n].tobytes() != data[b:b + n].tobytes():
            return False
    first, second, length = first[:near_end], second[:near_end], length[:near_end]
    if not near_end:
        return True
    words = np.ndarray((data.size - 7,), dtype="<u8", buffer=data, strides=(1,))  # the 8 bytes from each byte on
    for k in range(0, int(length.max()), 8):
        live = length > k
        if not live.all():
            first, second, length = first[live], second[live], length[live]
        differ = words[first + k] ^ words[second + k]
        short = length - k < 8  # a line's last word: only its own bytes count (little-endian: the low ones)
        if short.any():
            differ[short] &= (np.uint64(1) << ((length[short] - k) * 8).astype(np.uint64)) - np.uint64(1)
        if differ.any():
            return False
    return True


def _parse_with_dnaio(data: np.ndarray, fastq: bool, path: str, where: str) -> ReadFields:
    """Records of a buffer of whole records parsed by dnaio; its errors name the file and where the
    buffer begins in it (``where``, e.g. "byte 1234")."""
    try:
        records = list(dnaio.open(io.BytesIO(data.tobytes()), fileformat="fastq" if fastq else "fasta"))
    except dnaio.FileFormatError as e:
        at = "" if e.line is None else f"line {e.line + 1} of "
        raise InputFormatError(f"reads file {path!r} is malformed: {e.message} ({at}the records from "
                               f"{where})") from None
    except (UnicodeDecodeError, EOFError) as e:
        raise InputFormatError(f"reads file {path!r} is malformed: {e} (the records from {where})") from None
    return ReadFields.from_strings([r.id for r in records], [r.sequence for r in records],
                                   [r.qualities for r in records] if fastq else None,
                                   [r.name[len(r.id) + 1:] for r in records])


def _check_qualities(fields: ReadFields, path: str, where: str) -> None:
    """Refuse a quality that holds a space or a control byte (dnaio passes them on): FASTQ's and
    SAM's qualities are '!' to '~', and a tab would cut a SAM record into other fields."""
    if fields.qual_off is None or not len(fields):
        return
    low = np.flatnonzero(fields.data < ord("!"))
    record = np.maximum(np.searchsorted(fields.qual_off, low, side="right") - 1, 0)
    inside = (low >= fields.qual_off[record]) & (low < fields.qual_off[record] + fields.seq_len[record])
    if inside.any():
        at = int(np.argmax(inside))
        i, byte = int(record[at]), int(fields.data[low[at]])
        what = {32: "a space", 9: "a tab"}.get(byte, f"the control byte 0x{byte:02x}")
        name = fields.data[fields.name_off[i]:fields.name_off[i] + fields.name_len[i]].tobytes().decode("latin-1")
        raise InputFormatError(f"reads file {path!r} is malformed: the quality of read {_shown(name)} holds "
                               f"{what}; qualities are '!' to '~' (the records from {where})")


# Bytes of a chunk compared at a time by _low_bytes.
LOW_BYTES_STEP = 1 << 22


def _low_bytes(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the newlines, spaces, tabs (and other bytes <= 32) and of
    the bytes that are not ASCII (>= 128) in ``data``, and those bytes.

    Compared as signed bytes, both kinds are <= 32, so one pass finds them,
    :data:`LOW_BYTES_STEP` bytes at a time (:func:`dmap.reads.positions_where`).
    """
    positions = positions_where(data.view(np.int8), np.less_equal, 32, LOW_BYTES_STEP)
    return positions, data[positions]


def source_fields(source: Source) -> ReadFields:
    """The records of a chunk of the input (:mod:`dmap.io.splits`), parsed where the chunk is read:
    four-line FASTQ by :func:`split_fastq`, one-line FASTA by :func:`split_fasta`, anything else by
    dnaio."""
    return source_records(source)[0]


def source_records(source: Source) -> tuple[ReadFields, tuple[tuple[str, int], ...]]:
    """The records of a chunk of the input (as :func:`source_fields`), and its reads files with
    how many records each gave, in order (:attr:`dmap.reads.ReadChunk.files`)."""
    if isinstance(source, SourceGroup):
        return _group_fields(source)
    fields = bytes_fields(source, *source_bytes(source))
    return fields, ((source.path, len(fields)),)


def source_bytes(source: FileSplit | RawBlock | StreamBlocks) -> tuple[np.ndarray, str]:
    """A chunk's (or a part's) records as bytes, and where they begin in their file, in words."""
    if isinstance(source, FileSplit):
        return split_bytes(source)
    if isinstance(source, StreamBlocks):
        return stream_blocks_bytes(source)
    return source.data, f"byte {source.offset}"


def bytes_fields(source: FileSplit | RawBlock | StreamBlocks, data: np.ndarray, where: str) -> ReadFields:
    """The records of ``data``, whole records of ``source``'s bytes (see :func:`source_fields`)."""
    if getattr(source, "bam", False):
        return ubam_reads.read_fields(data, source.path, where, splits.MAX_RECORD_BYTES, source.extras)
    fields = split_fastq(data) if source.fastq else split_fasta(data)
    if fields is None:
        if data.size == 0:
            return ReadFields.from_strings([], [], [] if source.fastq else None)
        fields = _parse_with_dnaio(data, source.fastq, source.path, where)
        _check_qualities(fields, source.path, where)
    if len(fields) and fields.seq_len.max() > splits.MAX_RECORD_BYTES:
        raise InputFormatError(f"reads file {source.path!r} holds a record over {splits.MAX_RECORD_BYTES} bytes "
                               f"long (after {where}), far longer than any index maps")
    return fields


def joined_fields(parts: list[np.ndarray]) -> tuple[ReadFields, np.ndarray] | None:
    """The records of FASTQ ``parts`` (whole records each) joined into one buffer and split into
    fields at once, and the number of records of each part; None where they are not plain
    four-line FASTQ, or hold a read without a name or a record over
    :data:`dmap.io.splits.MAX_RECORD_BYTES`: parse them part by part then, so that every error
    comes from its own part.  Many small parts cost as many numpy calls as one large one."""
    # A part's last line may lack its newline (the end of its file).
    ends = [np.frombuffer(b"\n", np.uint8) if data.size and data[-1] != 10 else data[:0] for data in parts]
    fields = split_fastq(np.concatenate([a for data, end in zip(parts, ends) for a in (data, end)]))
    if fields is None or (fields.name_len == 0).any() or (fields.seq_len > splits.MAX_RECORD_BYTES).any():
        return None
    # A part's records are those whose name (after its '@') begins at or after the part's first byte.
    starts = np.cumsum([0] + [data.size + end.size for data, end in zip(parts[:-1], ends[:-1])])
    first = np.searchsorted(fields.name_off, starts)
    return fields, np.diff(first, append=len(fields))


def _group_fields(group: SourceGroup) -> tuple[ReadFields, tuple[tuple[str, int], ...]]:
    """The records of a chunk that spans files, and each part's file and records: plain FASTQ
    parts joined (:func:`joined_fields`); anything else, or a read without a name, parsed part by
    part, so that dnaio's records and every error come from the part's own file."""
    parts = [source_bytes(part) for part in group.parts]
    if group.fastq_text:
        joined = joined_fields([data for data, _ in parts])
        if joined is not None:
            return joined[0], tuple((part.path, int(n)) for part, n in zip(group.parts, joined[1]))
    each = [bytes_fields(part, data, where) for part, (data, where) in zip(group.parts, parts)]
    for part, fields in zip(group.parts, each):
        check_named(fields, part.path)
    return (ReadFields.concat([f for f in each if len(f)] or each[:1]),
            tuple((part.path, len(fields)) for part, fields in zip(group.parts, each)))


def read_chunk(source: Source, alphabet: Alphabet, max_length: int | None = None, check_symbols: bool = True,
               strict: bool = True) -> ReadChunk:
    """The reads of one chunk of the input, parsed and checked (on the worker that reads it).

    With ``check_symbols`` False, only chunk 0's symbols are checked here;
    the exact search kernel checks the others (see
    :class:`dmap.errors.UnknownSymbolError`), which saves a pass over every read.

    With ``strict`` False, a read that is empty, longer than ``max_length``
    or holds a symbol outside the alphabet is marked skipped in its chunk
    (:meth:`ReadChunk.skip`), to be written unmapped; with ``strict`` it is
    an error.

    Raises
    ------
    InputFormatError
        For a malformed file, a read without a name or with one longer
        than SAM allows, and (``strict``) a read with an unknown symbol, an
        empty read, or a read longer than ``max_length``.
    """
    fields, files = source_records(source)
    chunk = ReadChunk(source.number, fields, alphabet.read_table, alphabet.name, files=files)
    return checked_chunk(chunk, source.path, max_length, check_symbols, strict)


def _shown(name: str, most: int = 40) -> str:
    """A read's name as an error message quotes it: its first ``most`` characters, so that a
    name as long as SAM allows (254) or longer keeps the message to a line."""
    return repr(name) if len(name) <= most else f"{name[:most]!r}..."


def check_named(fields: ReadFields, path: str) -> None:
    """Refuse a read without a name (of the reads file ``path``), naming the read before it."""
    if len(fields) and (fields.name_len == 0).any():
        after = int(np.argmin(fields.name_len))
        where = ""
        if after:
            start = int(fields.name_off[after - 1])
            before = fields.data[start:start + int(fields.name_len[after - 1])].tobytes().decode("latin-1")
            where = f" (the read after {_shown(before)})"
        raise InputFormatError(f"reads file {path!r}: a read has no name{where}")


def checked_chunk(chunk: ReadChunk, path: str, max_length: int | None, check_symbols: bool,
                  strict: bool) -> ReadChunk:
    """``chunk`` (of the reads file ``path``) checked as :func:`read_chunk` describes."""
    fields = chunk.fields
    lengths = fields.seq_len
    check_named(fields, path)
    if len(chunk) and fields.name_len.max() > MAX_NAME_LENGTH:
        i = int(np.argmax(fields.name_len))
        raise InputFormatError(f"read {_shown(chunk.names[i])} has a name of {fields.name_len[i]} characters; "
                               f"SAM allows at most {MAX_NAME_LENGTH}: shorten the names (e.g. with seqkit "
                               "replace) and run again")
    empty = lengths == 0
    too_long = lengths > max_length if max_length is not None else None
    if strict:
        if empty.any():
            raise InputFormatError(f"read {_shown(chunk.names[int(np.argmax(empty))])} is empty")
        if too_long is not None and too_long.any():
            i = int(np.argmax(lengths))
            raise InputFormatError(
                f"read {_shown(chunk.names[i])} is {lengths[i]} symbols long; this run maps reads of at most "
                f"{max_length} (the index's maximum query length, less the edits allowed); rebuild the index with "
                "a larger --max-query-length, or allow fewer edits"
            )
        if check_symbols or chunk.number == 0:
            chunk.check_symbols()
    else:
        chunk.skip(empty, "empty")
        if too_long is not None:
            chunk.skip(too_long, "too long")
        if check_symbols or chunk.number == 0:
            unknown = reads_with_unknown_symbols(chunk.codes, chunk.offsets, lengths)
            if unknown is not None:
                chunk.skip(unknown, "unknown symbol")
    return chunk


def alphabet_mismatch(chunk: ReadChunk, alphabet: str, sample: int = 1 << 16) -> str | None:
    """A warning when a chunk's first reads look like DNA against a protein or text index, or like
    protein against a DNA index: both map (nearly) nothing, without an error."""
    lengths = chunk.lengths[np.cumsum(chunk.lengths, dtype=np.int64) <= sample]
    if not lengths.sum():
        return None
    seq = chunk.data[ragged_positions(chunk.offsets[:lengths.size], lengths)]
    nucleotides = np.isin(seq, np.frombuffer(b"ACGTNacgtn", np.uint8)).mean()
    if alphabet != "dna" and nucleotides == 1.0:
        return (f"the reads hold only A, C, G, T and N, as DNA does, but the index is of the {alphabet} "
                "alphabet: DNA reads map to a DNA index (built with 'dmap index REF -o INDEX')")
    if alphabet == "dna" and nucleotides < 0.5:
        return (f"{100 * (1 - nucleotides):.0f}% of the first reads' symbols are not A, C, G, T or N, "
                "as in protein or text, but the index is of DNA: they count as N and map nowhere "
                "(build the index with --alphabet protein or text)")
    return None


def iter_read_chunks(
    paths: str | os.PathLike | list,
    alphabet: Alphabet,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    max_length: int | None = None,
    next_size: Callable[[int, int], int] | None = None,
    check_symbols: bool = True,
    strict: bool = True,
) -> Iterator[ReadChunk]:
    """The chunks of the reads files ``paths`` read in this process, in order: the chunks
    of :func:`dmap.io.splits.plan_input`, each read by :func:`read_chunk`, as workers read them.

    ``next_size(reads_done, bytes_done)``, if given, chooses about how many
    reads each chunk holds (see :class:`dmap.mapping.schedule.GuidedChunks`), else
    ``chunk_size``.  An empty input yields no chunk.
    """
    if chunk_size < 1:
        raise InputFormatError(f"chunk size must be at least 1, not {chunk_size}")
    for source in plan_input(reads_paths(paths), next_size or (lambda *_: chunk_size)):
        chunk = read_chunk(source, alphabet, max_length, check_symbols, strict)
        if len(chunk):
            yield chunk
