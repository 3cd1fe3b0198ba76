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
(:func:`record_starts`).  A worker's chunk is walked in lanes (:func:`_walk_lanes`):
the chunk is cut every 64 KiB, each lane begins at the first record found
after its cut and follows the records' lengths, all lanes a record at a time
together, and a lane is kept where the lane before it ends exactly at its
start.  Elsewhere (and where the lanes cannot tell) every offset where a length could begin (its high
byte, l_seq's and the name length say so) is checked at once, and the offsets
that follow one another by their lengths from the first record are the
records; an offset inside a record that passes the check by chance is dropped
where the walk from the record before it passes it by.  Either way every
record found passes the same checks of its fields.  A kernel
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
# A range of at least LANES_FROM lanes' bytes is walked in lanes of about LANE_BYTES each
# (:func:`_walk_lanes`), each lane starting at the first record found in the first WINDOW_BYTES
# after its nominal start.  A 200,000-read chunk (39 MB) took 34 ms in lanes of 64 KiB, 41 ms
# in lanes of 32 KiB and 38 ms in lanes of 128 KiB, against 60 ms with every offset checked.
LANE_BYTES = 1 << 16
WINDOW_BYTES = 1 << 11
LANES_FROM = 8
# At most this many lanes, longer ones where a range is longer: a step's arrays hold one
# element per lane, and numpy lets go of the interpreter's lock in an operation on more than
# 500 elements (NPY_BEGIN_THREADS_THRESHOLDED), so in each of a chunk's hundreds of steps the
# walk gave the lock up a dozen times and waited to take it back behind the other task threads.
# A 200,000-read chunk in 591 lanes took 10.9 s to read beside a thread busy in Python, 0.49 s
# alone; in 400 lanes 2.2 s and 0.44 s (docs/performance.md, "Unaligned BAM").
MAX_LANES = 400
# The first window of offsets :func:`first_record` checks (about 130 offsets pass
# :func:`_candidates`' first tests in 4 KiB of 100-bp reads); each next one is four times wider.
FIRST_WINDOW = 1 << 12
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


# A record's fixed fields (SAM spec 4.2), as :func:`fixed_fields` reads them.
FIXED_FIELDS = np.dtype({"names": ["block_size", "refID", "pos", "l_read_name", "mapq", "bin", "n_cigar_op", "flag",
                                   "l_seq", "next_refID", "next_pos", "tlen"],
                         "formats": ["<i4", "<i4", "<i4", "u1", "u1", "<u2", "<u2", "<u2", "<i4", "<i4", "<i4", "<i4"],
                         "offsets": [0, 4, 8, 12, 13, 14, 16, 18, 20, 24, 28, 32], "itemsize": FIXED})


def fixed_fields(data: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The fixed fields (:data:`FIXED_FIELDS`) of the records at offsets ``at`` of ``data``, each
    inside it: every offset is read as 36 raw bytes, as :func:`dmap.reads.words_at` reads words,
    and each record's are copied at once (0.02 µs a record; a gather per field took 0.016 µs
    each, a gather of the structured type 0.09 µs)."""
    data = np.ascontiguousarray(data)
    raw = np.ndarray((max(data.size - FIXED + 1, 0),), np.dtype((np.void, FIXED)), data, 0, (1,))
    return raw[at].view(FIXED_FIELDS)


def _int(data: np.ndarray, at: int) -> int:
    return int.from_bytes(data[at:at + 4].tobytes(), "little", signed=True)


def record_size(data: np.ndarray, at: int) -> int:
    """The ``block_size`` of the record at ``at`` (the bytes after the length itself)."""
    return _int(data, at)


def _checked(data: np.ndarray, at: np.ndarray, max_record: int) -> tuple[np.ndarray, np.ndarray]:
    """The offsets ``at`` (each with its fixed fields inside ``data``) whose fields agree with each
    other and with the record's length (:func:`_fields_agree`), and the offset after each of
    those records."""
    ok, size = _fields_agree(data, at, max_record)
    return at[ok], (at + 4 + size)[ok]


def _fields_agree(data: np.ndarray, at: np.ndarray, max_record: int) -> tuple[np.ndarray, np.ndarray]:
    """Whether the fields of the record at each offset ``at`` (its fixed fields inside ``data``)
    agree with each other and with its length, and each one's length (``block_size``).  A
    record that runs past the end of ``data`` is checked as far as ``data`` holds it.

    In few numpy operations: beside the other task threads each one on a long array gives the
    interpreter's lock up and waits to take it back (:data:`MAX_LANES`).  For a 200,000-read
    chunk's records beside a thread busy in Python, testing each field apart (68 operations)
    took 0.40-0.41 s, these 37 take 0.22 s (0.024 and 0.018-0.021 s alone)."""
    rec = fixed_fields(data, at)
    words = rec.view("<i4").reshape(-1, FIXED // 4)  # each record's nine 4-byte fields
    size, name_len = words[:, 0], rec["l_read_name"]
    # refID, pos, next_refID and next_pos at least -1; the length under max_record and 16 MiB,
    # l_seq from 0 to 16 MiB (as unsigned), the name not empty.
    ok = words[:, [1, 2, 6, 7]].min(axis=1) >= -1
    ok &= size <= min(max_record, (1 << 24) - 1)
    ok &= words[:, 5].view(np.uint32) < 1 << 24
    ok &= name_len > 0
    # The length fits all but the tags: 32 bytes, the name, the CIGAR, the bases (two a byte)
    # and their qualities: (3 l_seq + 1) // 2 is l_seq + (l_seq + 1) // 2.
    least = np.multiply(words[:, 5], 3, dtype=np.int64)
    least += 1
    least //= 2
    least += np.multiply(rec["n_cigar_op"], 4, dtype=np.int64)
    least += name_len
    least += 32
    ok &= size >= least
    # The name ends with a NUL byte and its first byte is printable ('!' to '~', as one unsigned
    # comparison) or is that NUL, where data holds them (a record at its end may run past it).
    last = data.size - 1
    nul = at + (FIXED - 1)
    nul += name_len
    ok &= (data[np.minimum(nul, last)] == 0) | (nul > last)
    first = at + FIXED
    ok &= (data[np.minimum(first, last)] - np.uint8(33) <= 126 - 33) | (name_len == 1) | (first > last)
    return ok, size


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
    # Offsets a window at a time, from a few records' bytes: the first one or few are in practice
    # the answer, and :func:`_checked` of a few hundred offsets holds the interpreter's lock
    # throughout, where that of a 64 KiB window's 2,000 gave it up in each of its operations
    # (:data:`MAX_LANES`).
    lo, width = pos, FIRST_WINDOW
    while True:
        hi = min(lo + width, data.size)
        at, _ = _candidates(data, lo, hi, max_record)
        for start in at.tolist():
            verdict = _chain_from(data, start, at_end, max_record)
            if verdict is None:
                return None
            if verdict:
                return start
        if hi >= data.size - FIXED:
            return data.size if at_end else None
        lo, width = hi, 4 * width


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
                  max_record: int, lane_bytes: int | None = None) -> np.ndarray:
    """The offsets of the records from ``first`` (a record's start) to ``stop`` (the start of the
    first record not taken, or where the file ends), without a Python step per record; with
    ``stop`` None, those that ``data`` holds whole.

    A long range with its end given (a worker's chunk) is walked in lanes (:func:`_walk_lanes`);
    where that cannot tell, and for the rest, every offset where a record may begin is checked
    and the chain of records is followed through them.  ``lane_bytes``: the lanes' length
    (default :data:`LANE_BYTES`, longer where the range would need over :data:`MAX_LANES`)."""
    whole = stop is None
    stop = data.size if stop is None else stop
    lane_bytes = lane_bytes or max(LANE_BYTES, -(-(stop - first) // MAX_LANES))
    if not whole and stop - first >= LANES_FROM * lane_bytes:
        walked = _walk_lanes(data, first, stop, max_record, lane_bytes)
        if walked is not None:
            return walked
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


def _walk_lanes(data: np.ndarray, first: int, stop: int, max_record: int, lane_bytes: int) -> np.ndarray | None:
    """:func:`record_starts` of the records from ``first`` to ``stop``, each record's length followed
    to the next in lanes that walk side by side: None where the records do not check out
    (damaged BAM, which the caller's own walk then names) or too many lanes began inside a
    record.

    Checking every offset of a chunk for a record (:func:`_candidates`) took 40% of reading a
    chunk of unaligned BAM, and the records are a chain: each one's length leads to the next.
    So the range is cut every ``lane_bytes``; each lane begins at the first record found near
    its cut (the offsets of its first :data:`WINDOW_BYTES` checked as :func:`_candidates`
    checks them, and the record its length leads to too) and follows the lengths, all lanes a
    record at a time together, until it reaches the next lane's start.  A lane is taken where
    the lane before it (the first begins at ``first``, a record) ends exactly at its start,
    which is then a record too; else the records from where that lane ended up to the next
    lane are walked one at a time.  Every record found is then checked as :func:`_candidates`
    checks offsets, so the records are those the offset check finds."""
    data = np.ascontiguousarray(data)  # (a chunk's bytes are: no copy) the lanes' windows are strided views
    words = words_at(data, "<i4")
    starts = np.concatenate([[first], _lane_starts(data, first, stop, max_record, lane_bytes)])
    ends = np.append(starts[1:], stop)
    n = starts.size
    final = np.full(n, -1, np.int64)  # where each lane ended: the first record at or past its end (-1: broke)
    counts = np.zeros(n, np.int64)  # the records each lane walked
    steps = []  # (lanes, their records) of each step
    lanes, at, end = np.arange(n), starts, ends
    while lanes.size:
        steps.append((lanes, at))
        counts[lanes] += 1
        inside = at < words.size  # a length to read (a record past that runs past data)
        size = words[np.where(inside, at, 0)].astype(np.int64)
        after = at + 4 + size
        fits = inside & (size >= 32) & (size <= max_record)
        going = fits & (after < end)
        if not going.all():
            stopped = ~going
            final[lanes[stopped]] = np.where(fits[stopped], after[stopped], -1)
            lanes, at, end = lanes[going], after[going], end[going]
        else:
            at = after
    taken = np.zeros(n, bool)
    walked: list[np.ndarray] = []  # records walked one at a time, where a lane began inside a record
    pos = first
    for k in range(n):
        if starts[k] == pos and final[k] >= 0:
            taken[k] = True
            pos = int(final[k])
            continue
        if len(walked) > n // 8:  # many lanes began inside records: the offset check is as fast
            return None
        one = []
        while pos < ends[k]:
            if pos >= words.size or not 32 <= (size := int(words[pos])) <= max_record:
                return None
            one.append(pos)
            pos += 4 + size
        walked.append(np.array(one, np.int64))
    if pos != stop:
        return None
    out_at = np.cumsum(np.where(taken, counts, 0)) - np.where(taken, counts, 0)  # each taken lane's first record
    records = np.empty(int(counts[taken].sum()), np.int64)
    for j, (lanes_j, at_j) in enumerate(steps):
        keep = taken[lanes_j]
        records[out_at[lanes_j[keep]] + j] = at_j[keep]
    if walked:  # (a chain's records ascend)
        records = np.sort(np.concatenate([records, *walked]), kind="stable")
    return records if _are_records(data, records, max_record) else None


def _lane_starts(data: np.ndarray, first: int, stop: int, max_record: int, lane_bytes: int) -> np.ndarray:
    """For :func:`_walk_lanes`: after every ``lane_bytes`` from ``first``, the first offset of the
    next :data:`WINDOW_BYTES` (before ``stop``) where a record may begin that checks out, as does
    the offset its length leads to; none for a window that has none."""
    window = min(WINDOW_BYTES, lane_bytes)
    rows = (stop - first - window - FIXED) // lane_bytes  # windows that end, their fields too, before stop
    if rows < 1:
        return np.zeros(0, np.int64)

    def view(shift: int) -> np.ndarray:  # byte `shift` of each offset of each window: no copy
        return np.lib.stride_tricks.as_strided(data[first + lane_bytes + shift:], (rows, window), (lane_bytes, 1))

    mask = (view(3) == 0) & (view(23) == 0) & (view(12) != 0)  # as _candidates' first tests
    row, col = np.nonzero(mask)
    found = first + (row + 1) * lane_bytes + col
    # Each offset's record and the one its length leads to, checked in one call.
    follows = found + 4 + words_at(data, "<i4")[found]
    inside = (follows > found) & (follows < data.size - FIXED)
    ok = _fields_agree(data, np.concatenate([found, follows[inside]]), max_record)[0]
    good = ok[:found.size] & inside
    good[inside] &= ok[found.size:]
    at = found[good]
    lane = (at - first) // lane_bytes
    return at[np.flatnonzero(np.diff(lane, prepend=-1))]  # the first of each window's


def _are_records(data: np.ndarray, at: np.ndarray, max_record: int) -> bool:
    """Whether every offset ``at`` (ascending) passes the checks of :func:`_candidates`."""
    if at.size and at[-1] >= data.size - FIXED:  # (_candidates' offsets end there)
        return False
    return bool(_fields_agree(data, at, max_record)[0].all())


def _damaged(path: str, where: str) -> InputFormatError:
    return InputFormatError(f"reads file {path!r} is not whole BAM (after {where}): a record's length "
                            "does not lead to the next record")


def read_records(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The records at ``starts`` that hold a read: not secondary or supplementary (which repeat one)."""
    return starts[(fixed_fields(data, starts)["flag"] & SECONDARY_OR_SUPPLEMENTARY) == 0]


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
    rec = fixed_fields(data, starts)
    name_len = rec["l_read_name"].astype(np.int64) - 1
    seq_len = rec["l_seq"].astype(np.int64)
    qual_at = starts + FIXED + name_len + 1 + 4 * rec["n_cigar_op"].astype(np.int64) + (seq_len + 1) // 2
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
    return bool((fixed_fields(data, starts)["flag"] & PAIRED).any())
