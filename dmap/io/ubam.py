"""Reads from BAM: unaligned BAM (uBAM, as Ion Torrent's instruments, GATK's ``FastqToSam``
and ``samtools import`` write it), or aligned BAM whose reads are mapped again.

A BAM file is BGZF, so workers cut it as they cut ``bgzip``-compressed FASTQ
(:mod:`dmap.io.splits`): each worker inflates the blocks that begin in its byte
range and takes the records that begin in them.  BAM that workers cannot cut (from a
pipe or standard input, or in plain gzip) is inflated by the client, which cuts it
into blocks of whole reads (:func:`dmap.io.splits.stream_blocks`).  Where a record begins is not
marked in BAM: a record is its length (``block_size``) followed by its fields.
Both neighbours of a cut find the same first record after it by the same rule
(:func:`first_record`): the first offset where :data:`CHAIN` records in a row
have fields that agree with each other and with their lengths (or where the
records run to the end of the file), as Hadoop-BAM's ``BAMSplitGuesser`` does.

From there the records of a range are found without a Python step per record
(:func:`record_starts`): every offset where a length could begin (its high
byte, l_seq's and the name length say so) is checked at once, and the offsets
that follow one another by their lengths from the first record are the
records; an offset inside a record that passes the check by chance is dropped
where the walk from the record before it passes it by.  A kernel
(``kernels/bam_reads.cl``, :func:`dmap.io.ubam_reads.read_fields`) writes the reads as
:class:`ReadFields`: names as they are, sequences from BAM's 4-bit codes,
qualities plus 33.  An aligned record on the reverse strand holds the reverse
complement of its read, which is turned back, and secondary and supplementary
records (flags 0x100, 0x800), which repeat a read, are left out.  Of the tags, the
kernel reads what :class:`BamExtras` asks for: each record's ``RG`` looked up among the
run's read groups (where the headers name them and no ``-R`` or manifest gives others),
and with ``-C`` the others as SAM text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputFormatError
from ..reads import ReadFields, segment_offsets, words_at

MAGIC = b"BAM\x01"
# Bytes of a record before its read name: block_size, then refID, pos, l_read_name, mapq,
# bin, n_cigar_op, flag, l_seq, next_refID, next_pos, tlen.
FIXED = 36
# Bytes of a range looked at a step at a time for the offsets where a record may begin.
CANDIDATE_STEP = 1 << 22
# Records in a row that must check out after an offset for it to be taken as a record's start.
CHAIN = 4
SECONDARY_OR_SUPPLEMENTARY = 0x100 | 0x800
PAIRED = 0x1
MISSING_QUALITY = 0xFF
MAX_QUALITY = 93  # SAM's qualities are '!' to '~'


def is_bam(inflated_head: bytes) -> bool:
    """Whether a file's first inflated bytes are BAM's."""
    return inflated_head[:4] == MAGIC


def header_end(data: np.ndarray, path: str) -> int | None:
    """Where the header of the BAM whose first inflated bytes are ``data`` ends (its first record's
    offset); None where ``data`` ends inside the header."""
    at = 4
    if data.size < at + 4:
        return None
    at += 4 + _int(data, at)  # l_text, text
    if data.size < at + 4:
        return None
    n_ref = _int(data, at)
    at += 4
    if _int(data, 4) < 0 or n_ref < 0:
        raise InputFormatError(f"reads file {path!r} is not whole BAM: its header is damaged")
    for _ in range(n_ref):  # the references' names and lengths: one step per reference, read once per file
        if data.size < at + 4:
            return None
        at += 4 + _int(data, at) + 4
    return at if at <= data.size else None


def header_text(data: np.ndarray) -> str:
    """The SAM header text of the BAM whose first inflated bytes (its header whole) are ``data``."""
    return data[8:8 + _int(data, 4)].tobytes().decode("utf-8", "replace").rstrip("\0")


def read_group_lines(header: str) -> list[str]:
    """The ``@RG`` lines of a SAM header's text, in order."""
    return [line for line in header.splitlines() if line.startswith("@RG\t")]


@dataclass(frozen=True)
class BamExtras:
    """What a worker takes from each BAM record besides its read: the index of its ``RG`` tag among
    ``read_groups``, the run's read group IDs (:attr:`dmap.reads.ReadFields.group`), and with
    ``tags`` its other tags as SAM text, the read's comment (``-C``;
    :attr:`dmap.reads.ReadFields.comment_off`)."""

    read_groups: tuple[str, ...] = ()
    tags: bool = False


NO_EXTRAS = BamExtras()  # the reads alone


def _int(data: np.ndarray, at: int) -> int:
    return int.from_bytes(data[at:at + 4].tobytes(), "little", signed=True)


def _int32s(data: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian int32 at each offset ``at`` of ``data`` (as int64: sums of them do not wrap)."""
    return words_at(data, "<i4")[at].astype(np.int64)


def record_size(data: np.ndarray, at: int) -> int:
    """The ``block_size`` of the record at ``at`` (the bytes after the length itself)."""
    return _int(data, at)


def _uint16s(data: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian uint16 at each offset ``at`` of ``data`` (as int64)."""
    return words_at(data, "<u2")[at].astype(np.int64)


def _checked(data: np.ndarray, at: np.ndarray, max_record: int) -> tuple[np.ndarray, np.ndarray]:
    """The offsets ``at`` (each with its fixed fields inside ``data``, and past :func:`_candidates`'
    tests) whose fields agree with each other and with the record's length, and the offset after
    each of those records.  A record that runs past the end of ``data`` is checked as far as
    ``data`` holds it."""
    # One-byte tests first, each on the offsets the one before left: refID and next_refID at
    # least -1 (a high byte below 0x80, or -1's).
    for field in (7, 27):
        high = data[at + field]
        at = at[(high < 0x80) | (high == 0xFF)]
    # The name ends with a NUL byte, and its first byte is printable (where data holds them).
    name_len = data[at + 12].astype(np.int64)
    nul = at + FIXED + name_len - 1
    last = data.size - 1
    at = at[(nul > last) | (data[np.minimum(nul, last)] == 0)]
    name_len = data[at + 12].astype(np.int64)
    first = data[np.minimum(at + FIXED, last)]
    at = at[(name_len == 1) | (at + FIXED > last) | ((first >= 33) & (first <= 126))]
    # Then the fields that take four bytes each: the record's length fits its fields.
    size = _int32s(data, at)
    name_len = data[at + 12].astype(np.int64)
    seq_len = _int32s(data, at + 20)
    least = 32 + name_len + 4 * _uint16s(data, at + 16) + (seq_len + 1) // 2 + seq_len  # all but the tags
    ok = ((size >= least) & (size <= max_record) & (seq_len >= 0)
          & (_int32s(data, at + 4) >= -1) & (_int32s(data, at + 8) >= -1)
          & (_int32s(data, at + 24) >= -1) & (_int32s(data, at + 28) >= -1))
    return at[ok], (at + 4 + size)[ok]


def _candidates(data: np.ndarray, lo: int, hi: int, max_record: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_checked` of the offsets from ``lo`` to ``hi`` whose fixed fields lie inside ``data``
    and whose length's and ``l_seq``'s high bytes are 0 (a record is under 16 MiB) and name length
    is not."""
    hi = min(hi, data.size - FIXED)
    if hi <= lo:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # A step at a time into reused masks (as dmap.io.fastx._low_bytes): the length's high byte and
    # l_seq's are 0 and the name's length is not, a fifth of the offsets where the first alone is.
    step = min(hi - lo, CANDIDATE_STEP)
    mask, other = np.empty(step, dtype=bool), np.empty(step, dtype=bool)
    pieces = [np.zeros(0, np.int64)]
    for start in range(lo, hi, step):
        n = min(step, hi - start)
        found, test = mask[:n], other[:n]
        np.equal(data[start + 3:start + 3 + n], 0, out=found)
        np.equal(data[start + 23:start + 23 + n], 0, out=test)
        found &= test
        np.not_equal(data[start + 12:start + 12 + n], 0, out=test)
        found &= test
        pieces.append(np.flatnonzero(found) + start)
    return _checked(data, np.concatenate(pieces), max_record)


def first_record(data: np.ndarray, pos: int, at_end: bool, max_record: int) -> int | None:
    """The first offset at or after ``pos`` from which :data:`CHAIN` records in a row check out,
    or fewer that end where the file does (``data`` ends with the file where ``at_end``);
    ``data.size`` when ``at_end`` and there is none; None where ``data`` is too short to tell."""
    at, _ = _candidates(data, pos, data.size, max_record)
    for start in at.tolist():  # in practice the first, or one of the first few
        verdict = _chain_from(data, start, at_end, max_record)
        if verdict is None:
            return None
        if verdict:
            return start
    return data.size if at_end else None


def _chain_from(data: np.ndarray, start: int, at_end: bool, max_record: int) -> bool | None:
    """Whether records check out from ``start`` (see :func:`first_record`); None: more bytes needed."""
    k = start
    for _ in range(CHAIN):
        if k == data.size:
            return True if at_end else None
        if k + FIXED >= data.size:  # a record is longer than its fixed fields (:func:`_candidates`)
            return False if at_end else None
        checked, following = _candidates(data, k, k + 1, max_record)
        if not checked.size:
            return False
        k = int(following[0])
    return True


def record_starts(data: np.ndarray, first: int, stop: int | None, path: str, where: str,
                  max_record: int) -> np.ndarray:
    """The offsets of the records from ``first`` (a record's start) to ``stop`` (the start of the
    first record not taken, or where the file ends), without a Python step per record; with
    ``stop`` None, those that ``data`` holds whole."""
    whole = stop is None
    stop = data.size if stop is None else stop
    at, after = _candidates(data, first, stop, max_record)
    if first < stop and (not at.size or at[0] != first):
        raise _damaged(path, where)
    i = 0
    while True:
        follows = after[i:-1] == at[i + 1:]
        if follows.all():
            break
        j = i + int(np.argmin(follows))  # at[j] is a record: the next one starts at after[j]
        k = int(np.searchsorted(at, after[j]))
        if k >= at.size or at[k] != after[j]:
            if after[j] >= stop:  # the records end with at[j]; what follows is the next range's
                at, after = at[:j + 1], after[:j + 1]
                break
            raise _damaged(path, where)
        at, after = np.delete(at, np.s_[j + 1:k]), np.delete(after, np.s_[j + 1:k])  # offsets inside at[j]
        i = j
    if whole:
        return at[after <= data.size]
    if at.size and after[-1] != stop:
        raise _damaged(path, where)
    return at


def _damaged(path: str, where: str) -> InputFormatError:
    return InputFormatError(f"reads file {path!r} is not whole BAM (after {where}): a record's length "
                            "does not lead to the next record")


def read_name(data: np.ndarray, at: int) -> bytes:
    """The name of the record at ``at`` (without its NUL)."""
    return data[at + FIXED:at + FIXED + int(data[at + 12]) - 1].tobytes()


def read_records(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The records at ``starts`` that hold a read: not secondary or supplementary (which repeat one)."""
    return starts[(_uint16s(data, starts + 18) & SECONDARY_OR_SUPPLEMENTARY) == 0]


@dataclass
class Layout:
    """Where the reads' names, sequences, qualities and (``-C``) tags as text go: back to back, in
    that order."""

    name_off: np.ndarray
    name_len: np.ndarray
    seq_off: np.ndarray
    seq_len: np.ndarray
    qual_off: np.ndarray
    size: int
    comment_off: np.ndarray | None = None
    comment_len: np.ndarray | None = None

    def checked(self, out: np.ndarray, path: str, where: str, group: np.ndarray | None = None) -> ReadFields:
        """``out`` as the reads' fields (of the read groups ``group``), its qualities checked: '!' to
        '~' (a BAM quality over 93 is not SAM's)."""
        first = int(self.qual_off[0]) if self.qual_off.size else out.size
        quals = out[first:first + int(self.seq_len.sum())]
        if ((quals < 33) | (quals > 126)).any():
            raise InputFormatError(f"reads file {path!r} (after {where}) holds a quality over {MAX_QUALITY}; "
                                   "SAM's qualities are 0 to 93")
        return ReadFields(out, self.name_off, self.name_len, self.seq_off, self.seq_len, self.qual_off, group,
                          self.comment_off, self.comment_len)


def layout(data: np.ndarray, starts: np.ndarray, path: str, where: str,
           tag_len: np.ndarray | None = None) -> Layout:
    """The :class:`Layout` of the reads of the records at ``starts`` (and of their tags' text, of
    ``tag_len`` bytes each); a read without qualities (QUAL '*') is one clear error."""
    name_len = data[starts + 12].astype(np.int64) - 1
    seq_len = _int32s(data, starts + 20)
    qual_at = starts + FIXED + name_len + 1 + 4 * _uint16s(data, starts + 16) + (seq_len + 1) // 2
    missing = (seq_len > 0) & (data[np.minimum(qual_at, data.size - 1)] == MISSING_QUALITY)
    if missing.any():
        # FASTQ's records and BAM's share chunks, and a chunk's reads all have qualities or none.
        at, n = int(starts[missing][0]) + FIXED, int(name_len[missing][0])
        name = data[at:at + n].tobytes().decode("latin-1")
        raise InputFormatError(f"reads file {path!r} (after {where}) holds read {name[:40]!r} without qualities "
                               "(QUAL '*'); dmap reads BAM with qualities: convert it with 'samtools fasta'")
    names, bases = int(name_len.sum()), int(seq_len.sum())
    seq_off = segment_offsets(seq_len) + names
    size = names + 2 * bases
    if tag_len is None:
        return Layout(segment_offsets(name_len), name_len, seq_off, seq_len, seq_off + bases, size)
    tag_len = tag_len.astype(np.int64)
    return Layout(segment_offsets(name_len), name_len, seq_off, seq_len, seq_off + bases, size + int(tag_len.sum()),
                  segment_offsets(tag_len) + size, tag_len)


def records_of(data: np.ndarray, path: str, where: str, max_record: int) -> np.ndarray:
    """The offsets of the records that ``data`` holds, whole records from its first byte on."""
    return record_starts(data, 0, data.size, path, where, max_record)


def read_count(data: np.ndarray, starts: np.ndarray) -> int:
    """The reads of the records at ``starts``: those that are neither secondary nor supplementary."""
    return int(read_records(data, starts).size)


def paired(data: np.ndarray, starts: np.ndarray) -> bool:
    """Whether any of the records at ``starts`` is one of a pair (flag 0x1)."""
    return bool((_uint16s(data, starts + 18) & PAIRED).any())
