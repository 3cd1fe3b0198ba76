"""The reads as the pipeline holds them: a chunk's file bytes with the offsets of
each record's fields, and the views the kernels take.  No Python object per read:
names, sequences and qualities stay in the bytes they were read into (a FASTQ
piece mapped from the page cache, or a buffer dnaio's records were laid into).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .alphabet import INVALID, Alphabet, translate
from .errors import InputFormatError, UnknownSymbolError

# A record's read group where its RG tag names none of the run's (ReadFields.group; bam_reads.cl).
NO_GROUP = 0xFFFFFFFF


@dataclass
class ReadFields:
    """Records inside one byte buffer: where each record's name, sequence and quality lie.

    Offsets index ``data``; the quality of record ``i`` (FASTQ) is as long as
    its sequence.  Keeping the file's bytes and offsets, instead of one
    string per field, costs no Python object per read.
    """

    data: np.ndarray  # uint8
    name_off: np.ndarray
    name_len: np.ndarray
    seq_off: np.ndarray
    seq_len: np.ndarray
    qual_off: np.ndarray | None  # None for FASTA
    # Per record, its read group: an index into the run's read groups taken from BAM records'
    # RG tags (dmap.mapping.tasks.RecordSettings.group_tails), NO_GROUP where it names none of
    # them; None where the run takes no read groups from records.
    group: np.ndarray | None = None
    # Per record, where its header's comment lies in ``data`` (after the name and the space or
    # tab that ends it; from BAM, its tags as SAM text with -C) and its length, 0 for none; None
    # where the records have none (BAM without -C).
    comment_off: np.ndarray | None = None
    comment_len: np.ndarray | None = None

    # The columns of one value per record, and of those the offsets into ``data``.
    COLUMNS = ("name_off", "name_len", "seq_off", "seq_len", "qual_off", "group", "comment_off", "comment_len")
    OFFSETS = ("name_off", "seq_off", "qual_off", "comment_off")

    def __len__(self) -> int:
        return int(self.seq_off.size)

    def _each(self, change) -> ReadFields:
        """These fields with ``change`` made to each column present (``data`` shared)."""
        return ReadFields(self.data, **{c: None if getattr(self, c) is None else change(c, getattr(self, c))
                                        for c in self.COLUMNS})

    def take(self, lo: int, hi: int) -> ReadFields:
        """Records ``lo:hi`` (views; ``data`` is shared)."""
        return self._each(lambda _, a: a[lo:hi])

    def select(self, index: np.ndarray) -> ReadFields:
        """Records ``index``, in that order (``data`` is shared)."""
        return self._each(lambda _, a: a[index])

    def as_uint32(self) -> ReadFields:
        """The same fields with uint32 offsets, as the kernels take them."""
        if self.data.size >= 2**32:
            raise InputFormatError("a chunk of reads holds over 4 GiB; use a smaller --chunk-size")
        return self._each(lambda c, a: a if c == "group" else a.astype(np.uint32, copy=False))

    @classmethod
    def concat(cls, parts: list[ReadFields]) -> ReadFields:
        """One buffer holding the records of ``parts``, in order (without qualities where a part has
        none: FASTA and FASTQ records share no chunk, but may share the first pairs that the
        insert size is estimated from, :class:`dmap.io.pairs.FirstPairs`).  A column that only
        some parts have is NO_GROUP (``group``) or empty comments in the others."""
        if len(parts) == 1:
            return parts[0]
        shift = np.cumsum([0] + [p.data.size for p in parts[:-1]])
        absent = {"group": NO_GROUP, "comment_off": 0, "comment_len": 0}

        def joined(c: str) -> np.ndarray | None:
            if any(getattr(p, c) is None for p in parts) if c == "qual_off" else all(
                    getattr(p, c) is None for p in parts):
                return None
            columns = [np.full(len(p), absent[c], np.uint32) if getattr(p, c) is None else getattr(p, c) for p in parts]
            return np.concatenate([a + s for a, s in zip(columns, shift)] if c in cls.OFFSETS else columns)

        return cls(np.concatenate([p.data for p in parts]), **{c: joined(c) for c in cls.COLUMNS})

    @classmethod
    def from_strings(cls, names: list[str], seqs: list[str], quals: list[str] | None,
                     comments: list[str] | None = None) -> ReadFields:
        """Records given as strings (FASTA records, tests), laid out as names, sequences, qualities
        and comments."""
        strings = [names, seqs, quals, comments]
        columns = [flat_strings(col) if col is not None else None for col in strings]
        sizes = [0 if col is None else col[0].size for col in columns]
        starts = np.cumsum([0] + sizes[:-1])
        at = [None if col is None else col[1] + start for col, start in zip(columns, starts)]
        return cls(np.concatenate([col[0] for col in columns if col is not None]), at[0], columns[0][2], at[1],
                   columns[1][2], at[2], None, at[3], None if comments is None else columns[3][2])


def flat_strings(strings: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Strings back to back as bytes (UTF-8), with int64 offsets and lengths in bytes."""
    encoded = [x.encode("utf-8", "surrogateescape") for x in strings]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), segment_offsets(lengths), lengths


def segment_offsets(lengths: np.ndarray) -> np.ndarray:
    """Where each of segments of ``lengths``, laid back to back from 0, starts (int64)."""
    offsets = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    return offsets


def positions_where(data: np.ndarray, compare: np.ufunc, value: int, step: int = 1 << 22) -> np.ndarray:
    """The positions ``i`` of ``data`` where ``compare(data[i], value)`` (a numpy comparison such as
    ``np.equal``), compared ``step`` bytes at a time into one reused mask: a fresh mask of a
    chunk's size costs the OS kernel more to zero than the comparison itself (``clear_page_erms``
    took 4.4% of a 1M-read exact run's CPU under ``perf record``; a 50 MB chunk's newlines took
    20 ms against 40-99 ms)."""
    mask = np.empty(min(data.size, step), dtype=bool)
    pieces = [np.zeros(0, np.intp)]
    for start in range(0, data.size, step):
        piece = mask[:min(step, data.size - start)]
        compare(data[start:start + step], value, out=piece)
        found = np.flatnonzero(piece)
        found += start
        pieces.append(found)
    return pieces[1] if len(pieces) == 2 else np.concatenate(pieces)


def words_at(data: np.ndarray, dtype: str) -> np.ndarray:
    """Every byte offset of ``data`` (contiguous bytes) read as a little-endian ``dtype``
    (``"<i4"``, ``"<u8"``...): a view with a stride of one byte, no copy, one element per offset
    where a whole value begins (none where ``data`` is shorter than one).  A gather from it is
    one load per value, where assembling a value from its bytes took a gather, a conversion and
    a shift per byte (BAM's record lengths: 0.24 s against 0.03 s per million reads)."""
    dtype = np.dtype(dtype)
    data = np.ascontiguousarray(data)  # (a chunk's bytes always are: no copy)
    return np.ndarray((max(data.size - dtype.itemsize + 1, 0),), dtype, data, 0, (1,))


def ragged_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1`` of every segment, concatenated
    (int64): where to gather many fields of one byte buffer, or scatter them into one."""
    starts, lengths = starts.astype(np.int64, copy=False), lengths.astype(np.int64, copy=False)
    ends = np.cumsum(lengths)
    # A running sum of steps: 1 within a segment and, at each segment's first position, the jump
    # from the previous segment's end.  For a million read names, 0.05-0.12 s against 0.06-0.87 s
    # for repeating each segment's shift over its positions (np.repeat and np.arange).
    step = np.ones(int(ends[-1]) if ends.size else 0, dtype=np.int64)
    some = lengths > 0
    first, at, stop = starts[some], (ends - lengths)[some], (starts + lengths)[some]
    if at.size:
        step[at[0]] = first[0]
        step[at[1:]] = first[1:] - stop[:-1] + 1
    return np.cumsum(step, out=step)


def padded_rows(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """The segments of ``data`` (uint8) as rows of ``width`` bytes (at least the longest
    segment), zero-padded."""
    rows = np.zeros((lengths.size, width), dtype=np.uint8)
    # Row-major order of the mask is the segments' order.
    rows[np.arange(width) < lengths[:, None]] = data[ragged_positions(starts, lengths)]
    return rows


# Variable-width strings in a numpy array (numpy 2): what FlatStrings.to_numpy gives.
STRINGS = np.dtypes.StringDType()


@dataclass
class FlatStrings:
    """Many short strings (CIGARs, MD tags) back to back in one byte array, with int64 offsets
    and lengths: gathered, joined and written in bulk, with no Python object per string.
    ``data`` holds the strings in order with no gaps (every constructor here packs them)."""

    data: np.ndarray  # uint8
    offsets: np.ndarray
    lengths: np.ndarray

    @classmethod
    def empty(cls) -> FlatStrings:
        """No strings."""
        z = np.zeros(0, dtype=np.int64)
        return cls(np.zeros(0, dtype=np.uint8), z, z)

    @classmethod
    def of(cls, strings: list[str]) -> FlatStrings:
        """``strings`` (Python strings, UTF-8) packed."""
        return cls(*flat_strings(strings))

    @classmethod
    def packed(cls, data: np.ndarray, lengths: np.ndarray) -> FlatStrings:
        """Strings of ``lengths`` lying in ``data`` in order with no gaps."""
        lengths = lengths.astype(np.int64, copy=False)
        return cls(data, segment_offsets(lengths), lengths)

    @classmethod
    def concat(cls, parts: list[FlatStrings]) -> FlatStrings:
        """The strings of ``parts``, one after another, packed."""
        if not parts:
            return cls.empty()
        return cls.packed(np.concatenate([p.data for p in parts]), np.concatenate([p.lengths for p in parts]))

    @classmethod
    def gathered(cls, data: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> FlatStrings:
        """The strings of ``lengths`` bytes at ``offsets`` in ``data`` (in any order, overlapping
        or apart: read names in a chunk's bytes), packed."""
        return cls.packed(data[ragged_positions(offsets, lengths)], lengths)

    def take(self, index: np.ndarray) -> FlatStrings:
        """The strings at ``index``, in that order, packed."""
        return FlatStrings.gathered(self.data, self.offsets[index], self.lengths[index])

    def tolist(self) -> list[str]:
        """The strings as Python strings (for tests and small outputs, not a hot path)."""
        raw = self.data.tobytes()
        return [raw[o: o + n].decode("utf-8", "surrogateescape")
                for o, n in zip(self.offsets.tolist(), self.lengths.tolist())]

    def to_numpy(self, fixed_width: bool = False) -> np.ndarray:
        """The strings as a numpy array of :class:`numpy.dtypes.StringDType` or, with
        ``fixed_width``, of fixed-width strings (``"U"``, which pandas takes as a string column
        without a Python object per string).

        ASCII strings (read names, CIGARs) are made without a Python object per string: laid
        out at a fixed width and cast, a cast that copies bytes without checking them as UTF-8.
        Other strings take a slow path, one Python string each, where bytes that are not UTF-8
        become U+FFFD.  NUL bytes ending a string are dropped (numpy's fixed-width bytes pad
        with them).
        """
        width = max(int(self.lengths.max()), 1) if len(self) else 1
        dtype = f"U{width}" if fixed_width else STRINGS
        if not (self.data < 0x80).all():
            raw = self.data.tobytes()
            return np.array([raw[o: o + n].decode("utf-8", "replace").rstrip("\0")
                             for o, n in zip(self.offsets.tolist(), self.lengths.tolist())], dtype=dtype)
        rows = padded_rows(self.data, self.offsets, self.lengths, width)
        return rows.view(f"S{width}").ravel().astype(dtype)

    def __len__(self) -> int:
        return int(self.lengths.size)


def reads_with_unknown_symbols(codes: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """Per read, whether it holds an INVALID code; None when no read does."""
    bad = codes == INVALID
    if not bad.any():
        return None
    # logical_or.reduceat over [start, end) pairs: element 2i is "read i holds a bad code".
    # reduceat takes no index past the end, so a read ending with the codes is cut one short
    # and its last code added after (copying the codes to pad them cost a pass per chunk).
    ends = (offsets + lengths).astype(np.int64)
    bounds = np.minimum(np.stack([offsets.astype(np.int64), ends], axis=1).ravel(), bad.size - 1)
    per_read = np.logical_or.reduceat(bad, bounds)[::2]
    per_read |= (ends == bad.size) & bad[-1]
    per_read &= lengths > 0
    return per_read if per_read.any() else None


def first_unknown_symbol(codes: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> tuple[int, int] | None:
    """(read, position in ``codes``) of the first INVALID code inside a read, or None."""
    per_read = reads_with_unknown_symbols(codes, offsets, lengths)
    if per_read is None:
        return None
    read = int(np.argmax(per_read))
    start = int(offsets[read])
    return read, start + int(np.argmax(codes[start: start + int(lengths[read])] == INVALID))


# SAM's limit on a read name (QNAME): a longer one makes a file that samtools refuses.
MAX_NAME_LENGTH = 254
# Why a read is written unmapped without being searched (MappingResult.unmappable counts them).
UNMAPPABLE = ("empty", "too long", "unknown symbol")


@dataclass
class ReadChunk:
    """A chunk of reads: the file's bytes and where each field lies in them.

    ``number`` is the chunk's place in the input, so chunks can be put
    back in input order.  ``names``, ``seqs`` and
    ``quals`` are built on first use (the exact path never needs them: the
    SAM kernel reads ``data`` directly).
    """

    number: int
    fields: ReadFields
    table: np.ndarray  # byte -> code (Alphabet.read_table)
    alphabet: str  # its name, for error messages
    # Reads that are written unmapped without a search (empty, longer than
    # the index maps, a symbol outside the alphabet), or None; and how many
    # of each kind of UNMAPPABLE.
    skipped: np.ndarray | None = None
    unmappable: dict[str, int] = field(default_factory=dict)
    paired: bool = False  # reads 2i and 2i + 1 are the mates of pair i (dmap.io.pairs)
    # The reads files its reads came from, in order, and how many reads each gave (a chunk may
    # span files): what ends a read's records may depend on its file (dmap.format.sam.RecordTails).
    files: tuple[tuple[str, int], ...] = ()

    def __post_init__(self):
        self.fields = self.fields.as_uint32()

    def skip(self, reads: np.ndarray, why: str) -> None:
        """Leave the reads of the bool mask ``reads`` out of the search, as ``why`` (one of UNMAPPABLE)."""
        reads = reads & ~self.skipped if self.skipped is not None else reads
        n = int(reads.sum())
        if n:
            self.unmappable[why] = self.unmappable.get(why, 0) + n
            self.skipped = reads if self.skipped is None else self.skipped | reads

    @property
    def file_bytes(self) -> int:
        """About how many bytes of the reads file the chunk's records took: header,
        sequence (and '+' line and qualities) with their newlines."""
        f = self.fields
        fastq = f.qual_off is not None
        return (int(f.name_len.sum(dtype=np.int64)) + int(f.seq_len.sum(dtype=np.int64)) * (1 + fastq)
                + (6 if fastq else 2) * len(f))

    @property
    def searched(self) -> np.ndarray | None:
        """Chunk-local numbers of the reads that go to the device, or None for all of them."""
        return None if self.skipped is None else np.flatnonzero(~self.skipped)

    def _searched(self, a: np.ndarray) -> np.ndarray:
        return a if self.skipped is None else a[~self.skipped]

    def __len__(self) -> int:
        return len(self.fields)

    @property
    def data(self) -> np.ndarray:
        """The chunk's bytes, as read (uint8): names, sequences and qualities lie in them."""
        return self.fields.data

    @property
    def offsets(self) -> np.ndarray:
        """Each read's sequence offset in :attr:`data`."""
        return self.fields.seq_off

    @property
    def lengths(self) -> np.ndarray:
        """Each read's length."""
        return self.fields.seq_len

    def _strings(self, offsets: np.ndarray, lengths: np.ndarray) -> list[str]:
        raw = self.fields.data.tobytes()
        return [raw[o: o + n].decode("latin-1") for o, n in zip(offsets.tolist(), lengths.tolist())]

    @cached_property
    def names(self) -> list[str]:
        """Read names as Python strings (tests and notebooks; the records are formatted from :attr:`data`)."""
        return self._strings(self.fields.name_off, self.fields.name_len)

    def names_of(self, reads: np.ndarray) -> FlatStrings:
        """The names of chunk-local ``reads`` (in that order, repeats kept), packed."""
        f = self.fields
        return FlatStrings.gathered(f.data, f.name_off[reads], f.name_len[reads])

    @cached_property
    def seqs(self) -> list[str]:
        """Sequences as Python strings (as :attr:`names`)."""
        return self._strings(self.fields.seq_off, self.fields.seq_len)

    @cached_property
    def quals(self) -> list[str] | None:
        """Quality strings (as :attr:`names`), or None for FASTA."""
        f = self.fields
        return None if f.qual_off is None else self._strings(f.qual_off, f.seq_len)

    def derived(self, key: object, make: Callable[[], object]) -> object:
        """``make()``, made once per chunk object for ``key``: what the several block tasks of a
        chunk on one worker derive from it alike (its seeds).  Not pickled with the chunk."""
        store = self.__dict__.setdefault("_derived", {})
        if key not in store:
            store[key] = make()
        return store[key]

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_derived"}

    def read_bytes(self) -> ReadBytes:
        """What the exact search kernel takes: the bytes as read, translated on the device
        (the skipped reads left out)."""
        return ReadBytes(self.number, self.data, self._searched(self.offsets), self._searched(self.lengths),
                         self.table)

    @cached_property
    def codes(self) -> np.ndarray:
        """``data`` translated to codes (the sequences' offsets hold there too); made once per chunk."""
        # A lookup in numpy runs without the interpreter lock, where bytes.translate holds it: on a
        # 16-core GPU host that lock bounds a run.
        return translate(self.table, self.data)

    def encoded(self) -> EncodedReads:
        """The reads as codes, for the seeds of approximate mapping (the skipped reads left out)."""
        return EncodedReads(self.number, self.codes, self._searched(self.offsets), self._searched(self.lengths))

    def check_symbols(self) -> None:
        """Raise :class:`InputFormatError` naming the first read with a symbol outside the alphabet."""
        found = first_unknown_symbol(self.codes, self.offsets, self.lengths)
        if found is not None:
            raise UnknownSymbolError(found[0], chr(self.data[found[1]])).naming(self.names, self.alphabet)

    def unknown_symbol_error(self, read: int) -> InputFormatError:
        """The error naming ``read`` and its first symbol outside the alphabet."""
        seq = self.data[int(self.offsets[read]): int(self.offsets[read]) + int(self.lengths[read])]
        symbol = chr(seq[np.argmax(self.table[seq] == INVALID)])
        return UnknownSymbolError(read, symbol).naming(self.names, self.alphabet)


@dataclass
class ReadBytes:
    """A chunk's sequences as read from the file, with the byte -> code table the kernel applies."""

    number: int
    data: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    table: np.ndarray

    def __len__(self) -> int:
        return int(self.lengths.size)


@dataclass
class EncodedReads:
    """Reads (or seeds) as codes: ``codes[offsets[i] : offsets[i] + lengths[i]]`` (numpy arrays only)."""

    number: int
    codes: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return int(self.lengths.size)


def encode_reads(
    seqs: list[str], alphabet: Alphabet, names: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Encode reads into flat codes, offsets, lengths and the raw bytes (tests and benchmarks)."""
    fields = ReadFields.from_strings(names, seqs, None)
    chunk = ReadChunk(0, fields, alphabet.read_table, alphabet.name)
    chunk.check_symbols()
    enc = chunk.encoded()
    lo = int(fields.seq_off[0]) if len(fields) else 0
    hi = lo + int(fields.seq_len.sum())
    return (enc.codes[lo:hi], (fields.seq_off - lo).astype(np.uint32), fields.seq_len.astype(np.uint32),
            fields.data[lo:hi])
