"""SAM output: header and records for exact hits and for approximate alignments.

Conventions (documented in docs/sam.md):
* each read's hits are ordered by (contig, position, strand); one of them,
  chosen by a hash of the read's name (:mod:`dmap.mapq`), is the primary
  record and comes first, the others are secondary (flag 0x100) with SEQ
  and QUAL ``*`` as minimap2 writes them;
* MAPQ and the tags X0 (best alignments) and X1 (others) as in :mod:`dmap.mapq`;
* tags ``NM:i:0`` and ``NH:i:`` (records reported for the read), and
  ``RG:Z:`` with a read group;
* reverse-strand records have flag 16, reverse-complemented SEQ and
  reversed QUAL; unmapped reads have flag 4, and an empty read SEQ and QUAL
  ``*``.  A byte SAM does not allow in SEQ (a digit, say, in a read written
  unmapped) is written ``N``.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._version import __version__
from ..alphabet import _DNA_COMPLEMENT
from ..approx.alignments import ChunkAlignments
from ..errors import DmapError, InputFormatError
from ..index.store import IndexMeta
from ..mapq import mapping_quality, name_hashes, primary_first, tie_pick
from ..reads import FlatStrings, ReadChunk, flat_strings, positions_where, words_at
from ..search.hits import ChunkHits
from .tags import WRITTEN_TAGS

if TYPE_CHECKING:
    from ..opencl.device import Device


def header(meta: IndexMeta, argv: list[str] | None = None, read_groups: Sequence[ReadGroup] = (),
           comments: list[str] | tuple[str, ...] = ()) -> str:
    """``@HD``, one ``@SQ`` per contig, an ``@RG`` line per read group (each once), ``@PG``, and a
    ``@CO`` line per comment (e.g. the insert size of pairs)."""
    lines = ["@HD\tVN:1.6\tSO:unsorted"]
    lines += [f"@SQ\tSN:{name}\tLN:{length}" for name, length in zip(meta.contigs.names,
                                                                      meta.contigs.lengths.tolist())]
    lines += list(dict.fromkeys(group.line for group in read_groups))
    # A tab or newline in an argument (a file name) would end the field or the line.
    cl = shlex.join(map(_utf8, argv if argv is not None else sys.argv)).replace("\t", "\\t").replace("\n", "\\n")
    lines.append(f"@PG\tID:dmap\tPN:dmap\tVN:{__version__}\tCL:{cl}")
    lines += [f"@CO\t{c}" for c in comments]
    return "\n".join(lines) + "\n"


def _utf8(arg: str) -> str:
    """A command-line argument as UTF-8 text: the bytes of a file name that are not UTF-8 (which
    Python's argv holds as lone surrogates) as ``\\xNN`` escapes, for SAM's header (UTF-8 text)."""
    return os.fsencode(arg).decode("utf-8", "backslashreplace")


NONE = 0xFFFFFFFF  # RNAME or RNEXT '*' in a record column of pairs
# An unmapped record's fields between QNAME and SEQ (FLAG 4, no position, no
# CIGAR, no mate); kernels/sam_records.cl writes the same.
UNMAPPED = "\t4\t*\t0\t0\t*\t*\t0\t0\t"


@dataclass(frozen=True)
class ReadGroup:
    """A read group: its ``@RG`` header line and the ``RG:Z:`` tag of every record.

    Parsed from bwa's ``-R`` syntax: ``'@RG\\tID:x\\tSM:y'``, where ``\\t``
    (backslash, t) stands for a tab and a real tab is accepted too.
    """

    line: str
    id: str

    @classmethod
    def parse(cls, text: str) -> ReadGroup:
        line = text.replace("\\t", "\t")
        fields = line.split("\t")
        if fields[0] != "@RG" or len(fields) < 2:
            raise DmapError(f"read group '{text}' must start with '@RG\\t', e.g. '@RG\\tID:lane1\\tSM:sample1'")
        if any(c in line for c in "\n\r") or "\\n" in text:
            raise DmapError(f"read group '{text}' holds a line break; it must be one header line")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # bytes that are not UTF-8, which argv holds as lone surrogates
            raise DmapError(f"read group '{_utf8(text)}' is not UTF-8 text, as SAM's header must be") from None
        tags = {}
        for f in fields[1:]:
            if len(f) < 3 or f[2] != ":" or not f[:2].isalnum() or not f[3:]:
                raise DmapError(f"read group '{text}': field {f!r} is not TAG:VALUE with a two-letter tag")
            if f[:2] in tags:
                raise DmapError(f"read group '{text}' has the tag {f[:2]} twice")
            tags[f[:2]] = f[3:]
        if "ID" not in tags:
            raise DmapError(f"read group '{text}' has no ID; e.g. '@RG\\tID:lane1\\tSM:sample1'")
        return cls(line, tags["ID"])

    @property
    def tag(self) -> str:
        """What every record ends with."""
        return f"\tRG:Z:{self.id}"


@dataclass(frozen=True)
class RecordTails:
    """What ends each read's records: ``strings[of_read[r]]`` for read ``r`` (a read group's
    ``RG:Z`` tag, :attr:`ReadGroup.tag`, or nothing); with ``of_read`` None, ``strings[0]`` for
    every read.  A chunk may hold the reads of several files, each of its own read group.  With
    ``comments`` (-C), each read's header comment (a BAM record's tags but ``RG``) comes first,
    after a tab, where it has one (:attr:`dmap.reads.ReadFields.comment_off`; checked by
    :func:`check_comments`)."""

    strings: tuple[str, ...] = ("",)
    of_read: np.ndarray | None = None
    comments: bool = False

    @classmethod
    def of(cls, tail: str | RecordTails) -> RecordTails:
        """``tail`` as tails: one string ends every record."""
        return tail if isinstance(tail, RecordTails) else cls((tail,))

    def for_read(self, read: int) -> str:
        """The string that ends read ``read``'s records (after its comment, with ``comments``)."""
        return self.strings[0 if self.of_read is None else int(self.of_read[read])]


# The types of SAM tags that a comment appended to its read's records (-C) may hold: SAM's own,
# every one of which BAM output encodes too (dmap.format.bam), and those of a B tag's values.
COMMENT_TYPES = b"AifZHB"
ARRAY_TYPES = b"cCsSiIf"


def check_comments(chunk: ReadChunk) -> None:
    """Refuse a read's header comment that ``-C`` cannot append to its records: one that is not
    SAM tags (``BC:Z:ACGT``, tab-separated, as ``samtools fastq -T`` writes them), each field
    ``TG:T:VALUE`` with a letter and a letter or digit and a type of :data:`COMMENT_TYPES`,
    or a tag that dmap writes itself
    (:data:`dmap.format.tags.WRITTEN_TAGS`: it would stand twice on a record).  Whole-array:
    the tabs are found in one pass over the chunk's bytes, and each field's first bytes
    checked at once.

    Raises
    ------
    InputFormatError
        Naming the first read whose comment is refused, and why.
    """
    f = chunk.fields
    data = f.data
    c_off, c_len = f.comment_off.astype(np.int64), f.comment_len.astype(np.int64)
    has = np.flatnonzero(c_len > 0)
    if not has.size:
        return
    # The tabs inside comments: those before the end of the last comment that starts before them.
    order = has[np.argsort(c_off[has], kind="stable")]
    tabs = positions_where(data, np.equal, ord("\t"))
    k = np.searchsorted(c_off[order], tabs, side="right") - 1
    inside = (k >= 0) & (tabs < (c_off + c_len)[order[np.maximum(k, 0)]])
    tabs = tabs[inside]
    reads = np.concatenate([has, order[k[inside]]])  # each field's read
    starts = np.concatenate([c_off[has], tabs + 1])
    # Each field's first five bytes, from one 8-byte word (read where a whole one lies in data;
    # bytes past its end read as 0, which no test takes).
    padded = data if data.size >= 8 else np.concatenate([data, np.zeros(8 - data.size, np.uint8)])
    at = np.minimum(starts, padded.size - 8)
    word = words_at(padded, "<u8")[at] >> (8 * (starts - at)).astype(np.uint64)
    b = [((word >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.uint8) for j in range(6)]
    letter = lambda x: ((x | 32) >= ord("a")) & ((x | 32) <= ord("z"))  # noqa: E731
    digit = lambda x: (x >= ord("0")) & (x <= ord("9"))  # noqa: E731
    # The five bytes lie in the field (none of them can be a tab) and in its comment.
    tag = ((starts + 5 <= (c_off + c_len)[reads]) & letter(b[0]) & (letter(b[1]) | digit(b[1]))
           & (b[2] == ord(":")) & (b[4] == ord(":")))
    typed = np.isin(b[3], np.frombuffer(COMMENT_TYPES, np.uint8))
    # An array's values' type, the byte after "TG:B:" (in its comment: ends holds no tab).
    typed &= (b[3] != ord("B")) | ((starts + 6 <= (c_off + c_len)[reads])
                                   & np.isin(b[5], np.frombuffer(ARRAY_TYPES, np.uint8)))
    # Tags dmap writes itself would stand twice on a record (RG would also name a read group
    # that the header lacks: read groups come with their @RG lines, from -R, --manifest or BAM).
    written = np.frombuffer("".join(WRITTEN_TAGS).encode(), "<u2")
    twice = np.isin(b[0].astype(np.uint16) | b[1].astype(np.uint16) << 8, written)
    bad = ~(tag & typed) | twice
    if not bad.any():
        return
    i = int(np.argmax(bad))
    read = int(reads[i])
    text = lambda o, n: data[o:o + n].tobytes().decode("latin-1")  # noqa: E731
    name, comment = text(int(chunk.fields.name_off[read]), int(chunk.fields.name_len[read])), text(
        int(c_off[read]), int(c_len[read]))
    if twice[i]:
        which = bytes([b[0][i], b[1][i]]).decode()
        raise InputFormatError(
            f"read {name!r} has the tag {which} in its comment {comment[:60]!r}, which dmap writes itself"
            + (" with its @RG header line: give read groups with -R or --manifest" if which == "RG" else "")
            + f"; leave {', '.join(WRITTEN_TAGS)} out of the comments")
    raise InputFormatError(
        f"read {name!r} has the comment {comment[:60]!r}, which is not SAM tags (TG:T:VALUE, tab-separated); "
        "--append-comment appends comments that are, such as 'BC:Z:ACGT' (samtools fastq -T writes them so)")


def read_groups(lines: str | Sequence[str] | None, n_files: int) -> list[ReadGroup] | None:
    """The read group of each of a run's ``n_files`` reads files (pairs of files for paired-end
    reads), in order: one line for all of them, or one per file; None without any.

    Raises
    ------
    DmapError
        For a malformed line (:meth:`ReadGroup.parse`), as many lines as neither 1 nor
        ``n_files``, or one ID given with two different lines.
    """
    if lines is None or isinstance(lines, str):
        lines = [] if lines is None else [lines]
    groups = [ReadGroup.parse(line) for line in lines]
    if not groups:
        return None
    if len(groups) not in (1, n_files):
        raise DmapError(f"{len(groups)} read groups for {n_files} reads files (or pairs of files): give one "
                        "for them all, or one for each, in their order")
    by_id: dict[str, str] = {}
    for group in groups:
        if by_id.setdefault(group.id, group.line) != group.line:
            raise DmapError(f"read group ID {group.id!r} is given with two different lines; an ID names one "
                            "read group")
    return groups * n_files if len(groups) == 1 else groups


def seq_letters(alphabet: str) -> np.ndarray:
    """byte -> byte written in SEQ: SAM allows letters, '=' and '.'; any other byte is written N.
    Text keeps its printable bytes (its SEQ is outside SAM's rules anyway), but a tab or other
    control byte, which would break the record, is written N too."""
    allowed = np.zeros(256, dtype=bool)
    if alphabet == "text":
        allowed[32:127] = True
    else:
        allowed[np.frombuffer(b"=.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", np.uint8)] = True
    return np.where(allowed, np.arange(256), ord("N")).astype(np.uint8)


def translates_mapped(alphabet: str) -> bool:
    """Whether mapped reads' SEQ goes through :func:`seq_letters`: not for DNA, whose
    mapped reads hold letters alone (any other byte stops a read's search)."""
    return alphabet != "dna"


def primaries(chunk: ReadChunk, n_best: np.ndarray, reads: np.ndarray | None = None) -> np.ndarray:
    """Per read, which of its ``n_best`` equally good alignments is the primary
    (:func:`dmap.mapq.tie_pick`); names are hashed only for reads with a tie.
    ``reads``: the chunk's read of each entry of ``n_best`` (default: entry i is read i)."""
    pick = np.zeros(n_best.size, dtype=np.int64)
    tied = np.flatnonzero(n_best > 1)
    if tied.size:
        f = chunk.fields
        rows = tied if reads is None else reads[tied]
        pick[tied] = tie_pick(name_hashes(f.data, f.name_off[rows], f.name_len[rows]), n_best[tied])
    return pick


@dataclass
class RecordColumns:
    """One entry per SAM record, in output order (reads in input order)."""

    read: np.ndarray  # chunk-local read number
    flag: np.ndarray
    contig: np.ndarray  # contig number (0 for unmapped records; unused there)
    pos: np.ndarray  # 1-based POS (0 for unmapped)
    mapq: np.ndarray
    nh: np.ndarray  # records reported for the read
    x0: np.ndarray  # hits of the read (all equally good)
    # Approximate mapping only (None for exact hits: NM and X1 are 0, CIGAR is <length>M):
    nm: np.ndarray | None = None  # edit distance
    x1: np.ndarray | None = None  # alignments found past the read's least distance
    alignment: np.ndarray | None = None  # the record's CIGAR and MD in ChunkAlignments (unmapped: 0)
    # Pairs only (dmap.mapping.pairs.pair_record_columns); contig is NONE there for RNAME '*':
    rnext: np.ndarray | None = None  # the mate's contig (written '=' when this record's), or NONE for '*'
    pnext: np.ndarray | None = None
    tlen: np.ndarray | None = None  # int64
    mate_alignment: np.ndarray | None = None  # the mate's CIGAR (MC tag) in ChunkAlignments, if flag 8 is clear
    mate_mapq: np.ndarray | None = None  # the MQ tag, if flag 8 is clear

    @property
    def paired(self) -> bool:
        return self.rnext is not None

    def without_unmapped(self) -> RecordColumns:
        """These records but those of reads that map nowhere (of pairs: where neither mate
        maps), as ``bowtie2 --no-unal`` leaves them out."""
        gone = (self.flag & 4) != 0
        if self.paired:
            gone &= (self.flag & 8) != 0
        if not gone.any():
            return self
        keep = ~gone
        return RecordColumns(**{f.name: None if (a := getattr(self, f.name)) is None else a[keep]
                                for f in dataclasses.fields(self)})


def _places(read: np.ndarray, counts: np.ndarray, shown: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where records go, for hits sorted by read (``counts`` per read, ``shown`` of them written):
    each hit's rank among its read's, each read's first record (a read with none shown has one,
    unmapped), and the read of every record."""
    first_hit = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=first_hit[1:])
    records = np.maximum(shown, 1)
    first_record = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(records[:-1], out=first_record[1:])
    return np.arange(read.size) - first_hit[read], first_record, np.repeat(np.arange(counts.size), records)


def record_columns(hits: ChunkHits, max_hits: int | None = None, pick: np.ndarray | None = None) -> RecordColumns:
    """Flags, positions, MAPQ, NH and X0 of every record of a chunk.

    A read has one record per reported hit (its hits are sorted, and hit
    ``pick[read]`` (:func:`primaries`; default the first) is the primary,
    written first), or one unmapped record.  Each hit's record is placed
    directly: the read's first record plus the hit's rank (sorting the
    reads with the unmapped ones took 35% more time).
    """
    counts = hits.counts()
    shown = counts if max_hits is None else np.minimum(counts, max_hits)
    rank, first_record, record_read = _places(hits.read, counts, shown)
    if pick is not None:
        rank = primary_first(rank, pick[hits.read])
    keep = slice(None) if max_hits is None else rank < max_hits
    read, rank = hits.read[keep], rank[keep]
    at = first_record[read] + rank
    n = record_read.size
    flag = np.full(n, 4, dtype=np.uint32)  # unmapped, where no hit is placed
    flag[at] = (hits.strand[keep] == 1) * np.uint32(16) | (rank > 0) * np.uint32(256)  # reverse; secondary
    contig, pos, mapq = (np.zeros(n, dtype=np.uint32) for _ in range(3))
    contig[at] = hits.contig[keep]
    pos[at] = hits.position[keep] + 1
    mapq[at] = mapping_quality(counts)[read]
    return RecordColumns(read=record_read, flag=flag, contig=contig, pos=pos, mapq=mapq,
                         nh=shown[record_read].astype(np.uint32), x0=counts[record_read].astype(np.uint32))


def _digits(x: np.ndarray) -> np.ndarray:
    """Decimal digits of each (non-negative) number.

    One comparison per digit of the largest: the columns have few digits
    (flags, MAPQ, NH, read lengths), and for 100,000 records this took
    0.75 ms against 3.9 ms for a binary search over the powers of ten.
    """
    out = np.ones(x.shape, dtype=np.int64)
    top, power = int(x.max(initial=0)), 10
    while power <= top:
        out += x >= power
        power *= 10
    return out


def record_lengths(cols: RecordColumns, name_len: np.ndarray, seq_len: np.ndarray, rname_len: np.ndarray,
                   has_qual: bool, tail: int | np.ndarray = 0,
                   strings: tuple[FlatStrings, FlatStrings] | None = None) -> np.ndarray:
    """Byte length of each record exactly as ``sam_records.cl`` writes it (``tail``: bytes that end
    each, or each record's; ``strings``: the CIGAR and MD strings ``cols.alignment`` indexes, for
    approximate mapping)."""
    r = cols.read
    n = r.size
    L = seq_len[r].astype(np.int64)
    qual = L if has_qual else np.ones_like(L)
    unmapped = name_len[r] + len(UNMAPPED) + np.where(L == 0, 3, L + 1 + qual) + tail + 1
    secondary = (cols.flag & 256) != 0
    seq_qual = np.where(secondary, 3, L + 1 + qual)
    if strings is None:
        cigar = _digits(L) + 1
        tags = len("\tNM:i:0\tNH:i:") + _digits(cols.nh) + len("\tX0:i:") + _digits(cols.x0) + len("\tX1:i:0")
    else:
        # Unmapped records index alignment 0, which exists unless no read has an alignment.
        cigar, md_len = (x.lengths[cols.alignment] if len(x) else np.zeros(n, np.int64) for x in strings)
        nm = _digits(cols.nm)
        tags = (len("\tNM:i:") + nm + len("\tMD:Z:") + md_len + len("\tAS:i:") + nm
                + (cols.nm > 0) + len("\tNH:i:") + _digits(cols.nh) + len("\tX0:i:") + _digits(cols.x0)
                + len("\tX1:i:") + _digits(cols.x1))
    if cols.paired:
        return _pair_lengths(cols, name_len[r], L, np.where(L == 0, 3, L + 1 + qual), seq_qual, rname_len, cigar,
                             tags, tail, strings[0])
    mapped = (name_len[r] + 1 + _digits(cols.flag) + 1 + rname_len[cols.contig] + 1 + _digits(cols.pos) + 1
              + _digits(cols.mapq) + 1 + cigar + len("\t*\t0\t0\t") + seq_qual + tags + tail + 1)
    return np.where((cols.flag & 4) != 0, unmapped, mapped)


def _pair_lengths(cols: RecordColumns, name_len: np.ndarray, L: np.ndarray, unmapped_seq_qual: np.ndarray,
                  seq_qual: np.ndarray, rname_len: np.ndarray, cigar: np.ndarray, tags: np.ndarray,
                  tail: int | np.ndarray, cigars: FlatStrings) -> np.ndarray:
    """:func:`record_lengths` of the records of pairs: RNAME or RNEXT ``*`` (NONE) and ``=``,
    PNEXT, a signed TLEN, and ``MC``/``MQ`` where the mate is mapped."""
    none = cols.contig == NONE
    rname = np.where(none, 1, rname_len[np.where(none, 0, cols.contig)])
    rnext = np.where((cols.rnext == NONE) | (cols.rnext == cols.contig), 1,
                     rname_len[np.where(cols.rnext == NONE, 0, cols.rnext)])
    mate = np.where((cols.flag & 8) != 0, 0, len("\tMC:Z:") + cigars.lengths[cols.mate_alignment]
                    + len("\tMQ:i:") + _digits(cols.mate_mapq)) if len(cigars) else 0
    head = name_len + 1 + _digits(cols.flag) + 1 + rname + 1 + _digits(cols.pos) + 1
    nexts = rnext + 1 + _digits(cols.pnext) + 1
    unmapped = head + len("0\t*\t") + nexts + len("0\t") + unmapped_seq_qual + mate + tail + 1
    mapped = (head + _digits(cols.mapq) + 1 + cigar + 1 + nexts + _digits(np.abs(cols.tlen)) + (cols.tlen < 0) + 1
              + seq_qual + tags + mate + tail + 1)
    return np.where((cols.flag & 4) != 0, unmapped, mapped)


_COMPLEMENT = np.frombuffer(bytes(range(256)).translate(_DNA_COMPLEMENT), dtype=np.uint8)


def contig_name_columns(contig_names: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contig names as the SAM kernel takes them: bytes, uint32 offsets and lengths."""
    data, offsets, lengths = flat_strings(contig_names)
    return data, offsets.astype(np.uint32), lengths.astype(np.uint32)


def format_records_device(device: Device, chunk: ReadChunk, hits: ChunkHits, contig_names: list[str],
                          max_hits: int | None = None,
                          name_columns: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                          tail: str | RecordTails = "", pick: np.ndarray | None = None,
                          scratch: bool = False, unmapped: bool = True) -> np.ndarray:
    """SAM records of a chunk, written by ``kernels/sam_records.cl``: the bytes of
    :func:`dmap.testing.sam.format_records` as a uint8 array, at a third of the host CPU time
    (building each line in Python was the largest host cost of a run).

    ``name_columns``: :func:`contig_name_columns` of ``contig_names``, made
    once per index by the caller (a draft assembly has hundreds of thousands
    of contigs).  ``tail`` and ``pick`` as in :func:`dmap.testing.sam.format_records`.
    ``scratch``: the records may lie in the device's scratch memory, and without ``unmapped``
    reads that map nowhere have none (:func:`_write_records`).
    """
    return _write_records(device, chunk, record_columns(hits, max_hits, pick),
                          name_columns or contig_name_columns(contig_names), tail, scratch=scratch, unmapped=unmapped)


def alignment_record_columns(alns: ChunkAlignments) -> RecordColumns:
    """The record columns of a chunk's alignments, as :func:`dmap.testing.sam.format_alignment_records` writes them:
    each read's alignments in their order (the first primary, the others secondary), or one
    unmapped record."""
    counts = alns.counts()
    read = alns.read
    within, first_record, record_read = _places(read, counts, counts)  # the alignment's place among its read's
    at = first_record[read] + within
    n = record_read.size
    flag = np.full(n, 4, dtype=np.uint32)  # unmapped, where no alignment is placed
    flag[at] = (alns.strand == 1) * np.uint32(16) | (within > 0) * np.uint32(256)
    contig, pos, mapq, nm, alignment = (np.zeros(n, dtype=np.uint32) for _ in range(5))
    contig[at], pos[at], mapq[at] = alns.contig, alns.position + 1, alns.mapq
    nm[at], alignment[at] = alns.distance, np.arange(read.size)
    u32 = lambda a: a[record_read].astype(np.uint32)  # noqa: E731
    return RecordColumns(read=record_read, flag=flag, contig=contig, pos=pos, mapq=mapq, nh=u32(counts),
                         x0=u32(alns.n_best), nm=nm, x1=u32(alns.n_found - alns.n_best), alignment=alignment)


def format_alignment_records_device(device: Device, chunk: ReadChunk, alns: ChunkAlignments,
                                    name_columns: tuple[np.ndarray, np.ndarray, np.ndarray],
                                    tail: str | RecordTails = "", scratch: bool = False,
                                    unmapped: bool = True) -> np.ndarray:
    """The bytes of :func:`dmap.testing.sam.format_alignment_records`, written by ``kernels/sam_records.cl``
    with the alignments' CIGAR and MD strings as they are, no Python string per record
    (``scratch`` and ``unmapped`` as in :func:`_write_records`)."""
    return _write_records(device, chunk, alignment_record_columns(alns), name_columns, tail, (alns.cigar, alns.md),
                          scratch, unmapped)


def format_pair_records_device(device: Device, chunk: ReadChunk, cols: RecordColumns,
                               strings: tuple[FlatStrings, FlatStrings],
                               name_columns: tuple[np.ndarray, np.ndarray, np.ndarray], tail: str | RecordTails = "",
                               scratch: bool = False, unmapped: bool = True) -> np.ndarray:
    """The records of a chunk of pairs (``cols`` from :func:`dmap.mapping.pairs.pair_record_columns`,
    ``strings`` the CIGAR and MD strings they index), by ``sam_records.cl``; the reference is
    :func:`dmap.testing.sam.format_pair_records` (``scratch`` and ``unmapped`` as in :func:`_write_records`)."""
    return _write_records(device, chunk, cols, name_columns, tail, strings, scratch, unmapped)


def _write_records(device: Device, chunk: ReadChunk, cols: RecordColumns,
                   name_columns: tuple[np.ndarray, np.ndarray, np.ndarray], tail: str | RecordTails,
                   strings: tuple[FlatStrings, FlatStrings] | None = None, scratch: bool = False,
                   unmapped: bool = True) -> np.ndarray:
    """``cols`` as SAM records by ``sam_records.cl`` (``strings``: CIGAR and MD of approximate alignments;
    ``tail``: what ends each read's records; without ``unmapped``, the records of reads that map
    nowhere left out, :meth:`RecordColumns.without_unmapped`).

    With ``scratch``, inside :meth:`Device.scratch <dmap.opencl.device.Device.scratch>`, the
    records lie in the device's pooled host memory (:meth:`~dmap.opencl.device.Device.host_array`),
    valid until the block ends: for a caller that writes them out before."""
    if not unmapped:
        cols = cols.without_unmapped()
    n = cols.read.size
    if n == 0:
        return np.zeros(0, dtype=np.uint8)
    f = chunk.fields
    has_qual = f.qual_off is not None
    rnames, rname_off, rname_len = name_columns
    tails = RecordTails.of(tail)
    tail_data, tail_off, tail_len = flat_strings(list(tails.strings))
    per_read = tails.of_read is not None
    # What ends each record: its read's tail, after a tab and its comment with -C.
    ends_with = tail_len[tails.of_read[cols.read]] if per_read else int(tail_len[0])
    if tails.comments:
        comment = f.comment_len[cols.read].astype(np.int64)
        ends_with = ends_with + comment + (comment > 0)
    ends = np.cumsum(record_lengths(cols, f.name_len, f.seq_len, rname_len, has_qual, ends_with, strings),
                     dtype=np.uint64)
    starts = np.zeros(n, dtype=np.uint64)
    starts[1:] = ends[:-1]
    letters = seq_letters(chunk.alphabet)
    columns = [cols.read.astype(np.uint32), cols.flag, cols.contig, cols.pos, cols.mapq, cols.nh, cols.x0]
    approx = mates = None  # the kernel reads neither: one small buffer stands for each column
    if strings is not None:
        cigars, mds = strings
        approx = [_nonempty(a) for a in (
            cols.nm, cols.x1, cols.alignment, cigars.data, cigars.offsets.astype(np.uint64),
            cigars.lengths.astype(np.uint32), mds.data, mds.offsets.astype(np.uint64), mds.lengths.astype(np.uint32))]
    if cols.paired:
        mates = [cols.rnext, cols.pnext, cols.tlen.astype(np.int64), cols.mate_alignment, cols.mate_mapq]
    out = device.host_array(int(ends[-1])) if scratch else device.recycled_array(int(ends[-1]))
    # Names, sequences and qualities all lie in the chunk's bytes, sent once.
    # The buffers must outlive the kernels: OpenCL kernels need not retain their arguments.
    with device.timed("dmap-transfer"):
        args = [device.upload(a) for a in (f.data, f.name_off, f.name_len, f.seq_off, f.seq_len,
                                           f.qual_off if has_qual else f.seq_off)]
        args += [np.uint32(has_qual)]
        args += [device.upload(a) for a in (rnames, rname_off, rname_len, letters, _COMPLEMENT[letters])]
        args += [np.uint32(translates_mapped(chunk.alphabet))]
        # OpenCL buffers are never empty: no tail is one zero byte, no read's tail one index.
        args += [device.upload(a) for a in (tail_data if tail_data.size else np.zeros(1, np.uint8),
                                            tail_off.astype(np.uint32), tail_len.astype(np.uint32),
                                            tails.of_read.astype(np.uint32) if per_read else np.zeros(1, np.uint32))]
        args += [np.uint32(per_read)]
        # (no comments: one zero stands for each column, which the kernel does not read)
        args += [device.upload(a) for a in ((f.comment_off, f.comment_len) if tails.comments
                                            else (np.zeros(1, np.uint32),) * 2)]
        unused = device.upload(np.zeros(1, dtype=np.uint64)) if approx is None or mates is None else None
        args += [device.upload(a) for a in columns]
        args += [unused] * 9 if approx is None else [device.upload(a) for a in approx]
        args += [unused] * 5 if mates is None else [device.upload(a) for a in mates]
        args.append(device.upload(starts))
        out_buf = device.output(out)  # on a CPU the kernel writes into `out` itself
    defines = {"APPROX": int(strings is not None), "PAIRED": int(cols.paired), "COMMENTS": int(tails.comments)}
    device.run(device.program("sam_records.cl", defines), "sam_records", [*args, np.uint32(n), out_buf], n,
               "dmap-records-kernel")
    with device.timed("dmap-transfer"):
        device.read_back(out_buf, out)
    return out


def _nonempty(a: np.ndarray) -> np.ndarray:
    """``a``, or one zero of its type where it is empty (an OpenCL buffer cannot be; no record reads it)."""
    return a if a.size else np.zeros(1, dtype=a.dtype)
