"""Reading references and reads from FASTA/FASTQ (plain or gzip) with dnaio.

Parsing is dnaio's; this module adds what a mapper needs on top: one clear
error per kind of bad input, symbol validation against the index alphabet,
and encoding of read chunks into the padded code matrix the kernels take.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import dnaio
import numpy as np

from .alphabet import INVALID, Alphabet
from .errors import InputFormatError

DEFAULT_CHUNK_SIZE = 50_000  # reads; chunk size vs speed and memory in docs/benchmarks.md


def _open(path: str | os.PathLike, what: str):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputFormatError(f"{what} file {path!r} does not exist")
    if os.path.isdir(path):
        raise InputFormatError(f"{what} path {path!r} is a directory, not a FASTA/FASTQ file")
    try:
        return dnaio.open(path, mode="r")
    except (dnaio.UnknownFileFormat, dnaio.FileFormatError, UnicodeDecodeError, OSError, EOFError) as e:
        raise InputFormatError(f"{what} file {path!r} is not FASTA or FASTQ: {e}") from None


def _records(path: str | os.PathLike, what: str) -> Iterator[dnaio.SequenceRecord]:
    reader = _open(path, what)
    try:
        n = 0
        for rec in reader:
            n += 1
            yield rec
        if n == 0:
            raise InputFormatError(f"{what} file {os.fspath(path)!r} is empty (no FASTA/FASTQ records)")
    except (dnaio.FileFormatError, UnicodeDecodeError, EOFError, OSError) as e:
        raise InputFormatError(f"{what} file {os.fspath(path)!r} is malformed: {e}") from None
    finally:
        reader.close()


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


@dataclass
class ReadChunk:
    """A chunk of reads, as parsed and as encoded for the device.

    ``codes`` holds all reads' codes back to back (read ``i`` is
    ``codes[offsets[i] : offsets[i] + lengths[i]]``): sending bytes as they
    are costs less than padding or packing them on the host.  ``first`` is
    the 0-based number of the chunk's first read in the input, so chunks can
    be put back in input order.
    """

    number: int
    first: int
    names: list[str]
    seqs: list[str]
    quals: list[str] | None
    codes: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    seq_bytes: np.ndarray  # the reads as given (ASCII), back to back like codes

    def __len__(self) -> int:
        return len(self.names)

    def encoded(self) -> EncodedReads:
        """What the device needs: codes only, cheap to send to a worker."""
        return EncodedReads(self.number, self.codes, self.offsets, self.lengths)


@dataclass
class EncodedReads:
    """The encoded part of a :class:`ReadChunk` (numpy arrays only)."""

    number: int
    codes: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return int(self.lengths.size)


def encode_reads(
    seqs: list[str], alphabet: Alphabet, names: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Encode reads into flat codes, offsets, lengths and the raw bytes (see :class:`ReadChunk`)."""
    lengths = np.fromiter(map(len, seqs), dtype=np.uint32, count=len(seqs))
    if int(lengths.sum(dtype=np.int64)) >= 2**31:  # offsets are uint32 on the device
        raise InputFormatError("a chunk of reads holds over 2 GiB of sequence; use a smaller --chunk-size")
    offsets = np.zeros(len(seqs), dtype=np.uint32)
    np.cumsum(lengths[:-1], out=offsets[1:])
    try:
        joined = np.frombuffer("".join(seqs).encode("ascii"), dtype=np.uint8)
    except UnicodeEncodeError:
        joined = np.frombuffer("".join(seqs).encode("utf-8", "replace"), dtype=np.uint8)
    codes = alphabet.read_table[joined]
    if joined.size != int(lengths.sum(dtype=np.int64)) or (codes == INVALID).any():
        at = int(np.flatnonzero(codes == INVALID)[0]) if (codes == INVALID).any() else 0
        read = int(np.searchsorted(offsets, at, side="right")) - 1
        bad = seqs[read][at - offsets[read]] if joined.size == lengths.sum() else "non-ASCII"
        raise InputFormatError(
            f"read {names[read]!r} contains the symbol {bad!r}, which is not in the index's {alphabet.name} alphabet"
        )
    return codes, offsets, lengths, joined


def iter_read_chunks(
    path: str | os.PathLike,
    alphabet: Alphabet,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    max_length: int | None = None,
    next_size: Callable[[int, int], int] | None = None,
) -> Iterator[ReadChunk]:
    """Parse reads in chunks of ``chunk_size``, validated and encoded.

    ``next_size(reads_done, bytes_done)``, if given, chooses the size of each
    chunk after the first (see :class:`dmap.schedule.GuidedChunks`);
    ``bytes_done`` counts the FASTA/FASTQ bytes of the reads parsed so far.

    Raises
    ------
    InputFormatError
        For a missing, empty or malformed file, a read with an unknown
        symbol, an empty read, or a read longer than ``max_length``.
    """
    if chunk_size < 1:
        raise InputFormatError(f"chunk size must be at least 1, not {chunk_size}")
    records = _records(path, "reads")
    number = first = bytes_done = 0
    size = chunk_size
    while True:
        # One pass that keeps only the strings: holding a chunk of record
        # objects made the garbage collector rescan them (2x slower).
        names: list[str] = []
        seqs: list[str] = []
        quals: list[str | None] = []
        add_name, add_seq, add_qual = names.append, seqs.append, quals.append
        for rec in itertools.islice(records, size):
            add_name(rec.id)
            add_seq(rec.sequence)
            add_qual(rec.qualities)
        if not names:
            return
        if quals[0] is None:  # FASTA
            quals = None
        codes, offsets, lengths, seq_bytes = encode_reads(seqs, alphabet, names)
        if not all(names):
            raise InputFormatError(f"reads {os.fspath(path)!r}: read number {first + names.index('') + 1} has no name")
        if (lengths == 0).any():
            raise InputFormatError(f"read {names[int(np.argmin(lengths))]!r} is empty")
        if max_length is not None and lengths.max() > max_length:
            i = int(np.argmax(lengths))
            raise InputFormatError(
                f"read {names[i]!r} is {lengths[i]} symbols long, longer than the index's maximum query length "
                f"{max_length}; rebuild the index with a larger --max-query-length"
            )
        yield ReadChunk(number, first, names, seqs, quals, codes, offsets, lengths, seq_bytes)  # type: ignore[arg-type]
        number += 1
        first += len(names)
        # Header, sequence (and '+' line and qualities) with their newlines.
        per_record = 6 if quals is not None else 2
        bytes_done += sum(map(len, names)) + int(lengths.sum()) * (2 if quals is not None else 1) \
            + per_record * len(names)
        if next_size is not None:
            size = max(1, next_size(first, bytes_done))
