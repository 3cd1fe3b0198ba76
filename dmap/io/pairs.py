"""Paired-end input: two files read side by side (``R1.fq R2.fq``), or one file whose
records alternate between the mates (``--interleaved``).

Mates are matched by their order in the input, so a chunk must hold whole
pairs.  Files that workers can cut (uncompressed or BGZF,
:func:`dmap.io.splits.splittable`) are cut into byte ranges as single-end
input is; a byte range does not tell which pair its first record belongs
to, so the workers first count the records of every range of both files,
and each chunk then takes a range of pair numbers from the byte ranges that
hold them (:func:`plan_pair_splits`, :class:`PairSplit`).  Other input
(gzip, pipes) is read by the client as streams of whole records
(:func:`dmap.io.splits.stream_blocks`), the same number of records from
each file (an even number from an interleaved file) (:class:`PairBlock`).
A pair of files small enough for one range each is taken whole, its records
not counted: the worker that reads it checks that the two files hold as many.
A worker parses and checks either (:func:`read_pair_chunk`).

A run's pairs of files (lanes) are planned in turn, and a pair of files that
ends before its chunk is full leaves the rest of the chunk to the next
(:class:`PairGroup`), so that many small files cost a chunk's tasks per
chunk, not per pair of files (:func:`plan_pair_files`).  The first chunk
holds the input's first pairs, counted exactly, because the insert size is
estimated from them (:data:`dmap.mapping.pairs.ESTIMATE_PAIRS`): the same
pairs, and so the same output, whatever the chunk sizes and the files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..alphabet import Alphabet
from ..errors import InputFormatError
from ..reads import ReadChunk, ReadFields, words_at
from . import ubam
from .fastx import bytes_fields, check_named, checked_chunk, joined_fields, source_bytes, source_fields
from .splits import (
    COUNT_BLOCK,
    MAX_RECORD_BYTES,
    SNIFF_BYTES,
    BgzfStream,
    FileSplit,
    RawBlock,
    Sniffed,
    StreamBlocks,
    after_newlines,
    bam_record_start,
    bgzf_stream_chunks,
    check_path,
    newline_count,
    open_reads,
    plan_input,
    sniff,
    splittable,
    stream_blocks,
)
from .ubam import NO_EXTRAS, BamExtras


@dataclass
class PairBlock:
    """Whole pairs read by the client: the first mates' records and the second mates' (``second``
    None: ``first`` holds both, interleaved)."""

    number: int
    first: RawBlock | StreamBlocks  # (a BGZF stream's blocks: an interleaved BAM stream's pairs)
    second: RawBlock | None

    @property
    def path(self) -> str:
        return self.first.path


@dataclass(frozen=True)
class RecordRange:
    """Records ``skip`` to ``skip + count`` of those that begin in ``splits``, consecutive byte
    ranges of one file (:class:`dmap.io.splits.FileSplit`) that hold ``counts`` records each;
    ``count`` None: all of them (a small file taken whole, its records not counted before it
    is read)."""

    path: str
    splits: tuple[FileSplit, ...]
    skip: int
    count: int | None
    counts: tuple[int, ...] | None = None

    @property
    def cut_by_lines(self) -> bool:
        """Whether a worker cuts the records it takes out of the splits by counting lines
        (:func:`_range_parts`): counted FASTQ."""
        return self.count is not None and self.counts is not None and all(s.fastq_text for s in self.splits)

    def taken(self) -> tuple[int, int]:
        """Which of the records parsed from :func:`_range_parts`' bytes the range takes: the first, how many."""
        return (0, self.count) if self.cut_by_lines else (self.skip, self.count)


@dataclass(frozen=True)
class PairSplit:
    """Whole pairs that a worker reads from byte ranges of the input: ``count`` records of each
    file (``second`` None: ``first`` holds both mates, interleaved)."""

    number: int
    first: RecordRange
    second: RecordRange | None

    @property
    def path(self) -> str:
        return self.first.path


@dataclass(frozen=True)
class PairGroup:
    """A chunk of pairs that spans pairs of files: the last pairs of one and the first of the
    next (or several small pairs of files), read by one worker: plain FASTQ parts split into
    fields at once, anything else (or parts at fault) part by part, so an error names its files."""

    number: int
    parts: tuple[PairBlock | PairSplit, ...]  # at least two

    @property
    def path(self) -> str:
        """The first part's file (errors about the parts name their own)."""
        return self.parts[0].path


PairChunk = PairBlock | PairSplit | PairGroup


@dataclass(frozen=True)
class FirstPairs:
    """The input's first pairs as one chunk, whatever their format, for the insert size alone:
    planned (by :func:`plan_pair_files`) before the chunks that hold them, where those are
    several because FASTQ and FASTA records do not share a chunk."""

    source: PairGroup

Counter = Callable[[list[FileSplit]], Iterator[int]]



def count_records(split: FileSplit) -> int:
    """The records that begin in ``split``: as many as the worker that maps them parses from it,
    wherever it parses.

    A FASTQ record is four lines, in every form the parsers take (:func:`dmap.io.fastx.split_fastq`
    and dnaio alike), so a FASTQ range's newlines count its records at a quarter of the cost
    of parsing it (6-9 ms against 28 ms per 200,000 records).  Lines that are not whole
    records cannot parse: the range is parsed then, which says what is wrong with it.  A FASTA
    record is a ``>`` line and its sequence lines, so its ``>`` lines count them.  BAM's records
    are found as the worker finds them (:func:`dmap.io.ubam.record_starts`), and not decoded.
    """
    data, where = source_bytes(split)
    if split.bam:
        return ubam.read_count(data, ubam.records_of(data, split.path, where, MAX_RECORD_BYTES))
    if not split.fastq:
        records = int(data.size > 0)  # the range begins at a record's '>' line; the others follow a newline
        for k in range(0, data.size - 1, COUNT_BLOCK):
            end = min(k + COUNT_BLOCK, data.size - 1)
            records += int(np.count_nonzero((data[k:end] == 10) & (data[k + 1:end + 1] == ord(">"))))
        return records
    lines = newline_count(data) + int(data.size > 0 and data[-1] != 10)  # the file's last line may lack its newline
    return lines // 4 if lines % 4 == 0 else len(source_fields(split))


def local_counts(splits: list[FileSplit]) -> Iterator[int]:
    """The records of each split, counted in this process."""
    return map(count_records, splits)


class _Cursor:
    """Record numbers of one file's splits, from their counts, which are asked for as needed."""

    def __init__(self, path: str, splits: list[FileSplit], counts: Iterator[int]):
        self.path, self.splits, self.counts = path, splits, counts
        self.first = [0]  # record number of each split's first record, as far as counted
        self.at = 0  # the first split that may hold the records asked for (they are asked in order)

    def known(self, j: int) -> bool:
        """Whether split ``j`` exists, its count asked for as needed."""
        while len(self.first) <= j + 1 and len(self.first) <= len(self.splits):
            self.first.append(self.first[-1] + next(self.counts))
        return j < len(self.splits)

    def take(self, start: int, n: int) -> RecordRange | None:
        """Records ``start`` to ``start + n`` (n > 0; ``start`` never less than the last call's),
        or None where the file ends before them."""
        j = self.at
        while self.known(j) and self.first[j + 1] <= start:
            j += 1
        self.at = j
        k = j
        while self.known(k) and self.first[k + 1] < start + n:
            k += 1
        if not self.known(k):
            return None
        return RecordRange(self.path, tuple(self.splits[j:k + 1]), start - self.first[j], n,
                           tuple(int(b - a) for a, b in zip(self.first[j:k + 1], self.first[j + 1:k + 2])))

    def total(self) -> int:
        """All the file's records (every count asked for)."""
        self.known(len(self.splits))
        return self.first[-1]


def byte_ranges(path: str, next_size: Callable[[int, int], int],
                extras: BamExtras = NO_EXTRAS) -> list[FileSplit] | None:
    """The byte ranges :func:`dmap.io.splits.plan_input` cuts ``path`` into, of about
    ``next_size(records_done, bytes_done)`` records each (BAM's records giving ``extras``), or None
    where it would read the file as a stream (compressed but not BGZF,
    a pipe, a file system that cannot map files, a URL whose size is not told): only its first
    block is then read."""
    plan = plan_input([path], next_size, extras)
    head = next(plan, None)
    if head is not None and not isinstance(head, FileSplit):
        plan.close()
        return None
    return [] if head is None else [head, *plan]


class _Chunks:
    """The chunks of paired input being planned, numbered from 0.  A pair of files that ends
    before its chunk is full leaves the rest of the chunk to the next pair of files: the parts
    are held (:meth:`add`) until the chunk is full, and then planned as one chunk, a
    :class:`PairGroup` where there are several.  The first chunk holds at least ``first_pairs``
    pairs, counted exactly (all the input's where it has fewer), unless a change of format
    ends it first: the chunks that hold those pairs are then held back until they are planned,
    and come after their :class:`FirstPairs`."""

    def __init__(self, next_size: Callable[[int, int], int], first_pairs: int = 0):
        self.next_size = next_size
        self.least = 2 * first_pairs  # reads of the first chunk, at least
        self.done = [0, 0, 0]  # chunks, reads and bytes planned so far
        self.held: list[PairBlock | PairSplit] = []
        self.held_reads, self.held_bytes = 0.0, 0
        self.fastq: bool | None = None  # the held parts' format: FASTQ or not
        # The chunks planned before the first `first_pairs` pairs were (None after them).
        self.leading: list[PairChunk] | None = [] if first_pairs else None

    @property
    def number(self) -> int:
        """The number of the chunk being planned."""
        return self.done[0]

    def wanted(self) -> int:
        """The reads (both mates) that the chunk being planned still asks for: the schedule's size
        (for the first chunk, at least ``first_pairs``' reads) less what is held; at least a pair's."""
        size = self.next_size(self.done[1], self.done[2])
        if self.done[0] == 0:
            size = max(size, self.least)
        return max(2, round(size - self.held_reads))

    @property
    def counted(self) -> bool:
        """Whether the pairs planned next must be counted, not estimated: the input's first
        ``first_pairs``."""
        return self.done[1] + self.held_reads < self.least

    def start(self, fastq: bool) -> Iterator[PairChunk | FirstPairs]:
        """Before a pair of files of FASTQ (or FASTA): FASTQ and FASTA records do not share a chunk."""
        if self.held and fastq != self.fastq:
            yield from self.flush()
        self.fastq = fastq

    def add(self, part: PairBlock | PairSplit, reads: float, nbytes: int,
            full: bool) -> Iterator[PairChunk | FirstPairs]:
        """Hold ``part`` (``reads`` reads in ``nbytes`` bytes), and plan its chunk if ``full``."""
        self.held.append(part)
        self.held_reads += reads
        self.held_bytes += nbytes
        if full and (self.done[0] > 0 or self.held_reads >= self.least):
            yield from self.flush()

    def flush(self) -> Iterator[PairChunk | FirstPairs]:
        """The chunk of the held parts, if any: one part as it is, several as a group."""
        if not self.held:
            return
        chunk = self.held[0] if len(self.held) == 1 else PairGroup(self.done[0], tuple(self.held))
        self.done[:] = self.done[0] + 1, self.done[1] + round(self.held_reads), self.done[2] + self.held_bytes
        self.held.clear()
        self.held_reads, self.held_bytes = 0.0, 0
        if self.leading is None:
            yield chunk
            return
        self.leading.append(chunk)
        if self.done[1] >= self.least:
            yield from self._first_pairs()

    def finish(self) -> Iterator[PairChunk | FirstPairs]:
        """The chunks still held at the end of the input."""
        yield from self.flush()
        if self.leading:
            yield from self._first_pairs()

    def _first_pairs(self) -> Iterator[PairChunk | FirstPairs]:
        """The chunks that hold the first pairs, after their :class:`FirstPairs` where they are several."""
        leading, self.leading = self.leading, None
        if len(leading) > 1:
            parts = [part for chunk in leading for part in (chunk.parts if isinstance(chunk, PairGroup) else (chunk,))]
            yield FirstPairs(PairGroup(0, tuple(parts)))
        yield from leading


def plan_pair_splits(first: str, second: str | None, plans: list[list[FileSplit]], count: Counter,
                     chunks: _Chunks, asked: list[int]) -> Iterator[PairChunk | FirstPairs]:
    """The chunks of paired input from the byte ranges of its files (:func:`byte_ranges`;
    ``second`` None: ``first`` interleaved), the first file's cut at ``asked`` records each.

    Mates pair by their order, so a chunk must know where its pairs begin in
    record numbers: every range's records are counted first (``count``: on
    the workers, all ranges at once, as :class:`dmap.mapping.pipeline` does;
    here by default), and each chunk then takes the records of a range of
    pair numbers from the ranges that hold them, in both files.  A first
    mates' range is one chunk; its second mates lie in one or two ranges of
    the other file, which its worker parses to take them.  The last range
    may leave the rest of its chunk to the next pair of files (``chunks``).
    """
    paths = [first] if second is None else [first, second]
    cursors = [_Cursor(p, plan, count(plan)) for p, plan in zip(paths, plans)]
    taken = 0  # records of the first file planned
    for j in range(len(plans[0])):
        if not cursors[0].known(j):
            break
        end = cursors[0].first[j + 1]
        if second is None:
            end += end % 2  # whole pairs: an odd count ends with a first mate, whose mate is in the next range
        if end <= taken:
            continue  # a range without a record's start (or only a second mate's)
        ranges = [c.take(taken, end - taken) for c in cursors]
        if ranges[-1] is None:
            raise _short(second or first, first, second)
        nbytes = sum(split.end - split.start for r in ranges if r is not None for split in r.splits)
        # A range is cut as full; the last one holds what is left of its file.
        full = j + 1 < len(plans[0]) or end - taken >= asked[j]
        part = PairSplit(chunks.number, ranges[0], ranges[1] if second is not None else None)
        yield from chunks.add(part, (end - taken) * len(paths), nbytes, full)
        taken = end
    if second is not None and cursors[1].total() != taken:
        raise _short(first, first, second)


def _one_format(paths: list[str], fastq: list[bool | None]) -> bool:
    """Whether a pair of files (``paths``, FASTQ or not each; None: empty) is FASTQ; one error line
    where one file is FASTQ and the other FASTA (a chunk's records have qualities or none)."""
    kinds = {f for f in fastq if f is not None}
    if len(kinds) > 1:
        name = lambda f: "FASTQ" if f else "FASTA"  # noqa: E731
        raise InputFormatError(f"reads files {paths[0]!r} ({name(fastq[0])}) and {paths[1]!r} ({name(fastq[1])}) "
                               "hold the two mates of each pair in different formats; give both as FASTQ "
                               "or both as FASTA")
    return kinds.pop() if kinds else True


def _short(path: str, first: str, second: str | None) -> InputFormatError:
    """The error of paired input whose file ``path`` ends first (``second`` None: an interleaved
    file with an odd number of records)."""
    if second is None:
        return InputFormatError(f"reads file {first!r} holds an odd number of records; an interleaved "
                                "file holds the two mates of each pair one after the other")
    return InputFormatError(f"reads file {path!r} has fewer records than its mate file: "
                            "paired files must hold the mates of each pair in the same order")


def _after_lines(data: np.ndarray, lines: int) -> int | None:
    """Where the first ``lines`` lines of ``data`` end (after their last newline; its size where
    the last of them is the file's last line, without one); None where it holds fewer."""
    if lines == 0:
        return 0
    end, seen = after_newlines(data, lines)
    if end is not None:
        return end
    return data.size if seen + 1 == lines and data.size and data[-1] != 10 else None


def _range_parts(r: RecordRange) -> list[tuple[FileSplit, np.ndarray, str]]:
    """Each split of a record range with the bytes of its records that the range takes, and where
    its bytes begin, in words.

    A range's mates seldom begin and end where its splits do: trimmed reads
    make the two files' byte ranges fall at other records, so a chunk takes
    a few records of one split and most of the next.  In FASTQ, whose every
    record is four lines, the records taken are cut out by counting
    newlines, so only they are parsed; other splits are taken whole, and the
    records cut from their fields (:func:`range_fields`).
    """
    out = []
    for i, split in enumerate(r.splits):
        data, where = source_bytes(split)
        if r.cut_by_lines:
            first = r.skip if i == 0 else 0
            stop = min(r.counts[i], r.skip + r.count - sum(r.counts[:i]))
            if first > 0 or stop < r.counts[i]:
                lo = _after_lines(data, 4 * first)
                size = None if lo is None else _after_lines(data[lo:], 4 * (stop - first))  # from lo on, not again
                if size is None:
                    raise InputFormatError(f"reads file {r.path!r} changed while dmap read it")
                data = data[lo:lo + size]
        out.append((split, data, where))
    return out


def range_fields(source: RawBlock | StreamBlocks | RecordRange) -> ReadFields:
    """The records of a raw block (or a BGZF stream's blocks), or of a record range (parsed from its splits)."""
    if isinstance(source, RawBlock | StreamBlocks):
        return source_fields(source)
    if not source.splits:  # an empty file, whose mate file is not
        return ReadFields.from_strings([], [], [])
    parts = []
    for split, data, where in _range_parts(source):
        try:
            parts.append(bytes_fields(split, data, where))
        except InputFormatError:
            source_fields(split)  # the whole split, whose error names its lines
            raise
    fields = ReadFields.concat(parts)
    if source.count is None:
        return fields
    skip, count = source.taken()
    if len(fields) < skip + count:
        raise InputFormatError(f"reads file {source.path!r} changed while dmap read it")
    return fields if (skip, count) == (0, len(fields)) else fields.select(np.arange(skip, skip + count))


def plan_pair_files(firsts: list[str], seconds: list[str] | None, next_size: Callable[[int, int], int],
                    count: Counter | None = None, split: bool = False,
                    first_pairs: int = 0, extras: BamExtras = NO_EXTRAS) -> Iterator[PairChunk | FirstPairs]:
    """The chunks of paired input given as lists of files (a run's lanes: ``a_1.fq,b_1.fq`` and
    ``a_2.fq,b_2.fq``), in order, numbered from 0: each pair of files in turn, read side by side
    (``seconds`` None: each of ``firsts`` interleaved).

    ``next_size(reads_done, bytes_done)`` chooses each chunk's reads (two
    per pair).  With ``split``, files that workers can cut are planned as
    byte ranges of those sizes (:func:`plan_pair_splits`, their records
    counted by ``count``); a pair of files of one range each
    is taken whole, its records not counted.  Other input (or where either
    file is such) is read here as streams (:class:`PairBlock`).  A pair of
    files that ends before its chunk is full leaves the rest of the chunk to
    the next (:class:`PairGroup`), whatever their read groups: many small
    files cost a chunk's tasks per chunk, not per pair of files.  The first
    chunk holds at least ``first_pairs`` pairs (all the input's where it has
    fewer), whatever the chunk sizes and the files: the insert size is
    estimated from them.  Where FASTQ and FASTA files cut those pairs across
    chunks, a :class:`FirstPairs` holding them comes first, then their chunks.
    BAM records give ``extras`` besides their reads (:attr:`dmap.io.splits.FileSplit.extras`).

    Raises
    ------
    InputFormatError
        When the lists are not as long as each other, when one file of two ends
        before the other, or an interleaved file holds an odd number of records.
    """
    if seconds is not None and len(seconds) != len(firsts):
        raise InputFormatError(f"{len(firsts)} files of first mates but {len(seconds)} of second mates: the "
                               "two lists pair their files in order, a file of second mates for each of first")
    for path in firsts + (seconds or []):  # every file before the first is mapped
        check_path(path, "reads")
    chunks = _Chunks(next_size, first_pairs)
    for k, first in enumerate(firsts):
        yield from _plan_pair(first, None if seconds is None else seconds[k], chunks, count, split, extras)
    yield from chunks.finish()


def plan_pairs(first: str, second: str | None, next_size: Callable[[int, int], int],
               count: Counter | None = None, split: bool = False) -> Iterator[PairChunk]:
    """The chunks of one pair of files (``second`` None: ``first`` interleaved), as
    :func:`plan_pair_files` plans them."""
    return plan_pair_files([first], None if second is None else [second], next_size, count, split)


def _plan_pair(first: str, second: str | None, chunks: _Chunks, count: Counter | None,
               split: bool, extras: BamExtras = NO_EXTRAS) -> Iterator[PairChunk | FirstPairs]:
    """The parts of one pair of files, held in ``chunks`` (see :func:`plan_pair_files`)."""
    paths = [p for p in (first, second) if p is not None]
    per_record = len(paths)  # reads per record of the first file: its mate is in the other file, or a record
    if split and all(splittable(p) for p in paths):
        asked: list[int] = []  # records of each range of the first file, as the schedule chooses them

        def cut_first(_: int, bytes_done: int) -> int:
            """The records of the first file's next range (asked once per range, in order): what the
            chunk being planned still asks for, then the schedule's size where each range before
            it fills its chunk."""
            if not asked:
                reads = chunks.wanted()
            else:
                done = round(chunks.done[1] + chunks.held_reads + per_record * sum(asked))
                reads = chunks.next_size(done, chunks.done[2] + chunks.held_bytes + len(paths) * bytes_done)
            asked.append(max(1, reads // per_record))
            return asked[-1]

        cuts = itertools.count()

        def cut_second(_: int, __: int) -> int:
            """The second file's ranges, cut at the first's records, so that a chunk's mates lie in
            one or two of them."""
            k = next(cuts)
            return asked[min(k, len(asked) - 1)] if asked else max(1, chunks.wanted() // per_record)

        plans = [byte_ranges(p, cut, extras) for p, cut in zip(paths, (cut_first, cut_second))]
        if all(plan is not None for plan in plans):
            if not any(plans):
                return
            yield from chunks.start(_one_format(paths, [plan[0].fastq if plan else None for plan in plans]))
            if all(len(plan) <= 1 for plan in plans) and not chunks.counted:  # whole: the worker checks their counts
                ranges = [RecordRange(p, tuple(plan), 0, None) for p, plan in zip(paths, plans)]
                records = round(plans[0][0].reads) if plans[0] else 0
                part = PairSplit(chunks.number, ranges[0], ranges[1] if second is not None else None)
                nbytes = sum(s.end - s.start for plan in plans for s in plan)
                # (An empty first file asked for nothing: its worker finds the second file longer.)
                yield from chunks.add(part, records * per_record, nbytes, bool(asked) and records >= asked[0])
                return
            yield from plan_pair_splits(first, second, plans, count or local_counts, chunks, asked)
            return
    pairs = [0]  # the pairs of the block being read (both files' readers ask for it)

    def wanted() -> int:
        return pairs[0] if second is not None else 2 * pairs[0]

    with contextlib.ExitStack() as stack:
        streams, fastq, bam = [], [], []
        blocked = None  # an interleaved BAM stream of pairs: cut at its BGZF blocks once the first pairs are planned
        for path in paths:
            f = stack.enter_context(open_reads(path, blocks=second is None))
            sniffed = sniff(f, path)
            if isinstance(f, BgzfStream):
                if sniffed is not None and sniffed.bam:
                    blocked = f, sniffed
                else:  # FASTQ: mates told apart by their order alone, counted by the client from the inflated stream
                    f = stack.enter_context(f.unread())
                    sniffed = sniff(f, path)
            fastq.append(None if sniffed is None else sniffed.fastq)
            bam.append(sniffed is not None and sniffed.bam)
            streams.append(iter(()) if sniffed is None else stream_blocks(f, path, sniffed.head, sniffed.origin,
                                                                          sniffed.fastq, sniffed.per_record, wanted,
                                                                          sniffed.bam))
        started = False
        after = None if blocked is None else blocked[1].origin  # the inflated offset after the blocks read
        while True:
            if blocked is not None and not chunks.counted:
                if not started:
                    yield from chunks.start(True)
                yield from _blocked_pairs(*blocked, after, chunks, extras)
                return
            pairs[0] = max(1, chunks.wanted() // 2)
            blocks = [next(s, None) for s in streams]
            if all(b is None for b in blocks):
                return
            after = blocks[0][0] + blocks[0][1].size if blocks[0] is not None else after
            if any(b is None for b in blocks):
                raise _short((first, second)[blocks.index(None)], first, second)
            counts = [records for _, _, records in blocks]
            if second is not None and counts[0] != counts[1]:
                raise _short(first if counts[0] < counts[1] else second, first, second)
            if second is None and counts[0] % 2:
                raise _short(first, first, None)
            if not started:
                yield from chunks.start(_one_format(paths, fastq))
                started = True
            raw = [RawBlock(chunks.number, path, offset, data, is_fastq, is_bam, extras if is_bam else NO_EXTRAS)
                   for path, (offset, data, _), is_fastq, is_bam in zip(paths, blocks, fastq, bam)]
            part = PairBlock(chunks.number, raw[0], raw[1] if second is not None else None)
            yield from chunks.add(part, counts[0] * per_record, sum(b[1].size for b in blocks), counts[0] >= wanted())


def _blocked_pairs(stream: BgzfStream, sniffed: Sniffed, begin: int, chunks: _Chunks,
                   extras: BamExtras) -> Iterator[PairChunk | FirstPairs]:
    """The pairs of an interleaved BAM stream from its inflated offset ``begin`` on, cut at its
    BGZF blocks (:func:`dmap.io.splits.bgzf_stream_chunks`) and held in ``chunks``: each cut
    moved on to a pair's first record (:func:`_pair_start`), so that a pair's mates share a
    chunk.  The client does not inflate the stream but after each cut; the worker checks the
    mates' names and count as for any pairs."""
    asked = [0]

    def wanted() -> int:
        asked[0] = max(2, chunks.wanted())
        return asked[0]

    for part, reads in bgzf_stream_chunks(stream, begin, True, True, sniffed.per_record, wanted, _pair_start):
        part = dataclasses.replace(part, number=chunks.number, extras=extras)
        yield from chunks.add(PairBlock(chunks.number, part, None), reads, part.blocks.size,
                              not part.last or reads >= asked[0])


def _pair_start(ahead) -> int:
    """The first record of a BAM stream's inflated bytes ``ahead`` (:class:`dmap.io.splits._StreamAhead`,
    from a block on) that begins a pair of interleaved mates; the end of the stream where none does.

    From the record rule's first record (:func:`dmap.io.splits.bam_record_start`), the first
    two reads (records that are not secondary or supplementary) are a pair where they are
    named alike (:func:`_mate_names`); otherwise the first is the second mate of a pair that
    began before, and the pair begins with the second.  Mates in
    either order, with or without mate flags, so stay together as they do when the client
    counts them."""
    first = bam_record_start(ahead, 0)
    window = SNIFF_BYTES
    while True:
        data, at_end = ahead.upto(0, first + window)
        if first >= data.size:
            return data.size
        starts = ubam.record_starts(data, first, None, ahead.path, f"the BGZF blocks at byte {ahead.first}",
                                   MAX_RECORD_BYTES)
        reads = ubam.read_records(data, starts)
        if reads.size >= 2:
            two = reads[:2]
            differ, _ = _mate_names(data, two + ubam.FIXED, ubam.fixed_fields(data, two)["l_read_name"] - 1)
            return int(two[1] if differ[0] else two[0])
        if at_end:  # one read left: the second mate of the pair before
            return data.size
        window *= 2


def read_pair_chunk(block: PairChunk, alphabet: Alphabet, max_length: int | None = None,
                    check_symbols: bool = True, strict: bool = True) -> ReadChunk:
    """The reads of a chunk of pairs, interleaved (read ``2i`` and ``2i + 1`` are pair ``i``), their
    names without a ``/1`` or ``/2`` suffix, checked as :func:`dmap.io.fastx.read_chunk` checks
    single reads.

    Raises
    ------
    InputFormatError
        When the names of a pair's mates differ other than by the suffix (naming the record),
        when one file of two ends first or an interleaved file holds an odd number of
        records, and as :func:`dmap.io.fastx.read_chunk`.
    """
    parts = block.parts if isinstance(block, PairGroup) else (block,)
    joined = _joined_pair_fields(block) if isinstance(block, PairGroup) else None
    if joined is not None:
        fields, reads = joined
    else:
        each = [_pair_fields(part) for part in parts]
        fields, reads = ReadFields.concat([f for f in each if len(f)] or each[:1]), [len(f) for f in each]
    chunk = ReadChunk(block.number, fields, alphabet.read_table, alphabet.name, paired=True,
                      files=tuple((part.path, int(n)) for part, n in zip(parts, reads)))
    return checked_chunk(chunk, block.path, max_length, check_symbols, strict)


def _joined_pair_fields(group: PairGroup) -> tuple[ReadFields, list[int]] | None:
    """The records of a group of plain FASTQ parts, each mate's files joined and split into fields
    at once (:func:`_joined_mates`: a small pair of files' records cost as many numpy calls as a
    large one's), interleaved and their names checked, and each part's reads; None where they
    are not such, or a part's mates do not match: :func:`_pair_fields` then reads part by part,
    and its errors name the part's files."""
    first = _joined_mates([part.first for part in group.parts])
    if group.parts[0].second is None:
        if first is None or any(n % 2 for n in first[1]):
            return None
        fields, reads = first[0], first[1]
    else:
        second = _joined_mates([part.second for part in group.parts])
        if first is None or second is None or first[1] != second[1]:
            return None
        fields, reads = _interleaved(first[0], second[0]), [2 * n for n in first[1]]
    try:
        return _strip_mate_suffixes(fields, group.parts[0]), reads
    except InputFormatError:
        return None  # read part by part: the error names the part's files


def _joined_mates(ranges: list[RawBlock | StreamBlocks | RecordRange]) -> tuple[ReadFields, list[int]] | None:
    """The records of one file of mates of each of a group's parts, in order, split into fields at
    once (:func:`dmap.io.fastx.joined_fields`), and how many each part has; None where they are
    not plain FASTQ or a file changed (read part by part then, which says so)."""
    # Each range's sources: a block read by the client, or the byte ranges of a record range.
    sources = [list(r.splits) if isinstance(r, RecordRange) else [r] for r in ranges]
    flat = [s for each in sources for s in each]
    if not flat or not all(s.fastq_text for s in flat):
        return None
    parts = []
    for r in ranges:
        try:
            parts += [data for _, data, _ in _range_parts(r)] if isinstance(r, RecordRange) else [source_bytes(r)[0]]
        except InputFormatError:
            return None  # a file changed: read part by part, which says so
    joined = joined_fields(parts)
    if joined is None:
        return None
    fields, counts = joined
    index, at, k = [], 0, 0  # at: the range's first record in fields; k: its first source
    for r, each in zip(ranges, sources):
        total = int(counts[k:k + len(each)].sum())
        skip, count = r.taken() if isinstance(r, RecordRange) and r.count is not None else (0, total)
        if skip + count > total:
            return None
        index.append(np.arange(at + skip, at + skip + count))
        at, k = at + total, k + len(each)
    return fields.select(np.concatenate(index)), [len(i) for i in index]


def _pair_fields(part: PairBlock | PairSplit) -> ReadFields:
    """The records of one pair of files' part of a chunk, interleaved and their names checked."""
    fields = range_fields(part.first)
    check_named(fields, part.first.path)  # here, so that the error names this part's file
    if part.second is not None:
        second = range_fields(part.second)
        check_named(second, part.second.path)
        if len(fields) != len(second):
            shorter = part.first.path if len(fields) < len(second) else part.second.path
            raise _short(shorter, part.first.path, part.second.path)
        fields = _interleaved(fields, second)
    elif len(fields) % 2:
        raise _short(part.first.path, part.first.path, None)
    return _strip_mate_suffixes(fields, part)


def _interleaved(first: ReadFields, second: ReadFields) -> ReadFields:
    """The records of two files of mates (as many in each), pair by pair: first mate, second mate."""
    n = len(first)
    order = np.empty(2 * n, dtype=np.int64)
    order[0::2], order[1::2] = np.arange(n), np.arange(n, 2 * n)
    return ReadFields.concat([first, second]).select(order)


def names_differ(data: np.ndarray, off_a: np.ndarray, off_b: np.ndarray, len_a: np.ndarray,
                 len_b: np.ndarray) -> np.ndarray:
    """Per pair ``i``, whether the names ``data[off_a[i]:][:len_a[i]]`` and ``data[off_b[i]:][:len_b[i]]``
    differ, compared eight bytes at a time.

    Every byte offset of ``data`` is read as a little-endian 64-bit word (:func:`dmap.reads.words_at`,
    no copy), so a name of up to 8 bytes is one gather per mate; a word's bytes past the
    name are shifted out.  The mates' names lie a file apart, so each gather misses the cache: a
    name read whole in one costs a third of a byte-wise hash's passes (14 against 37 ms per
    200,000 pairs).
    """
    n = np.minimum(len_a, len_b).astype(np.int64)
    differ = len_a != len_b
    last = data.size - 8  # the last offset a whole word starts at
    words = words_at(data, "<u8") if last >= 0 else np.zeros(1, np.dtype("<u8"))
    for p in range(0, int(n.max(initial=0)), 8):
        live = np.flatnonzero(n > p)
        at_a, at_b, left = off_a[live] + p, off_b[live] + p, n[live] - p
        whole = (at_a <= last) & (at_b <= last)  # a word past the end of data: compared byte by byte below
        shift = (8 * np.maximum(8 - left, 0)).astype(np.uint64)
        at_a, at_b = np.where(whole, at_a, 0), np.where(whole, at_b, 0)
        differ[live] |= whole & (((words[at_a] ^ words[at_b]) << shift) != 0)
        for i in live[~whole]:  # at most the last few names of data
            k = min(int(n[i]) - p, 8)
            differ[i] |= data[off_a[i] + p:off_a[i] + p + k].tobytes() != data[off_b[i] + p:off_b[i] + p + k].tobytes()
    return differ


def _mate_names(data: np.ndarray, off: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rule mates are held to, for interleaved mates (read ``2i`` and ``2i + 1`` are pair ``i``)
    named by bytes ``off`` to ``off + length`` of ``data``: whether each pair's names differ once a
    ``/1`` and ``/2`` suffix is dropped where both mates carry it, and the names' lengths without it."""
    length = length.astype(np.int64)  # (a copy)
    mate = np.arange(length.size) % 2
    suffix = (length >= 2) & (data[np.maximum(off + length - 2, 0)] == ord("/")) & (
        data[np.maximum(off + length - 1, 0)] == ord("1") + mate)
    both = suffix[0::2] & suffix[1::2]  # only where both mates carry it
    length[0::2] -= 2 * both
    length[1::2] -= 2 * both
    a, b = slice(0, None, 2), slice(1, None, 2)
    return names_differ(data, off[a], off[b], length[a], length[b]), length


def _strip_mate_suffixes(fields: ReadFields, block: PairBlock | PairSplit) -> ReadFields:
    """Names of interleaved mates with ``/1`` and ``/2`` dropped, checked to be the same per pair."""
    data, off = fields.data, fields.name_off.astype(np.int64)
    differ, length = _mate_names(data, off, fields.name_len)
    if differ.any():
        i = int(np.argmax(differ))
        names = [data[o: o + n].tobytes().decode("latin-1") for o, n in
                 ((off[2 * i], fields.name_len[2 * i]), (off[2 * i + 1], fields.name_len[2 * i + 1]))]
        where = (f"files {block.first.path!r} and {block.second.path!r}" if block.second is not None
                 else f"file {block.first.path!r}")
        raise InputFormatError(f"reads {where}: the mates {names[0]!r} and {names[1]!r} have different names; "
                               "the two mates of a pair must be named alike (a /1 and /2 suffix may differ)")
    return dataclasses.replace(fields, name_len=length.astype(fields.name_len.dtype))
