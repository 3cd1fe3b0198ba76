"""Paired-end input: two files read side by side (``R1.fq R2.fq``), or one file whose
records alternate between the mates (``--interleaved``).

Mates are matched by their order in the input, so a chunk must hold whole
pairs: the client reads both files as streams of whole records
(:func:`dmap.io.splits.stream_blocks`), the same number of records from each
(an even number from an interleaved file), and a worker parses and checks
them (:func:`read_pair_chunk`).  Cutting two files by bytes would not tell
which record of one file pairs with a record in the middle of the other
without reading both up to there, so paired input, like compressed input,
is read by the process that runs ``dmap run``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..alphabet import Alphabet
from ..errors import InputFormatError
from ..mapq import name_hashes
from ..reads import ReadChunk, ReadFields
from .fastx import checked_chunk, source_fields
from .splits import RawBlock, check_path, open_reads, sniff, stream_blocks


@dataclass
class PairBlock:
    """Whole pairs read by the client: the first mates' records and the second mates' (``second``
    None: ``first`` holds both, interleaved)."""

    number: int
    first: RawBlock
    second: RawBlock | None

    @property
    def path(self) -> str:
        return self.first.path


def plan_pairs(first: str, second: str | None, next_size: Callable[[int, int], int]) -> Iterator[PairBlock]:
    """The chunks of paired input, in order, numbered from 0: ``first`` and ``second`` read side
    by side, or ``first`` interleaved (``second`` None).  ``next_size(reads_done, bytes_done)``
    chooses each chunk's reads (two per pair).

    Raises
    ------
    InputFormatError
        When one file of two ends before the other, or an interleaved file holds an odd
        number of records.
    """
    for path in (first, second):
        if path is not None:
            check_path(path, "reads")
    done = [0, 0, 0]  # chunks, reads and bytes planned so far
    pairs = [0]  # the pairs of the block being read (both files' readers ask for it)

    def wanted() -> int:
        return pairs[0] if second is not None else 2 * pairs[0]

    with contextlib.ExitStack() as stack:
        streams, fastq = [], []
        for path in (first, second) if second is not None else (first,):
            f = stack.enter_context(open_reads(path))
            sniffed = sniff(f, path)
            fastq.append(sniffed is not None and sniffed[2])
            streams.append(iter(()) if sniffed is None else stream_blocks(f, path, sniffed[0], sniffed[1],
                                                                          sniffed[2], sniffed[3], wanted))
        while True:
            pairs[0] = max(1, next_size(done[1], done[2]) // 2)
            blocks = [next(s, None) for s in streams]
            if all(b is None for b in blocks):
                return
            if any(b is None for b in blocks):
                short = (first, second)[blocks.index(None)]
                raise InputFormatError(f"reads file {short!r} has fewer records than its mate file: "
                                       "paired files must hold the mates of each pair in the same order")
            counts = [records for _, _, records in blocks]
            if second is not None and counts[0] != counts[1]:
                short = first if counts[0] < counts[1] else second
                raise InputFormatError(f"reads file {short!r} has fewer records than its mate file: "
                                       "paired files must hold the mates of each pair in the same order")
            if second is None and counts[0] % 2:
                raise InputFormatError(f"reads file {first!r} holds an odd number of records; an interleaved "
                                       "file holds the two mates of each pair one after the other")
            raw = [RawBlock(done[0], path, offset, data, is_fastq)
                   for path, (offset, data, _), is_fastq in zip((first, second), blocks, fastq)]
            yield PairBlock(done[0], raw[0], raw[1] if second is not None else None)
            done[:] = done[0] + 1, done[1] + 2 * pairs[0], done[2] + sum(b[1].size for b in blocks)


def read_pair_chunk(block: PairBlock, alphabet: Alphabet, max_length: int | None = None,
                    check_symbols: bool = True, strict: bool = True) -> ReadChunk:
    """The reads of a chunk of pairs, interleaved (read ``2i`` and ``2i + 1`` are pair ``i``), their
    names without a ``/1`` or ``/2`` suffix, checked as :func:`dmap.io.fastx.read_chunk` checks
    single reads.

    Raises
    ------
    InputFormatError
        When the names of a pair's mates differ other than by the suffix (naming the record),
        and as :func:`dmap.io.fastx.read_chunk`.
    """
    fields = source_fields(block.first)
    if block.second is not None:
        second = source_fields(block.second)
        if len(fields) != len(second):
            raise InputFormatError(f"reads files {block.first.path!r} and {block.second.path!r} hold "
                                   "different numbers of records")
        n = len(fields)
        fields = ReadFields.concat([fields, second])
        order = np.empty(2 * n, dtype=np.int64)
        order[0::2], order[1::2] = np.arange(n), np.arange(n, 2 * n)
        fields = fields.select(order)
    fields = _strip_mate_suffixes(fields, block)
    chunk = ReadChunk(block.number, fields, alphabet.read_table, alphabet.name, paired=True)
    return checked_chunk(chunk, block.path, max_length, check_symbols, strict)


def _strip_mate_suffixes(fields: ReadFields, block: PairBlock) -> ReadFields:
    """Names of interleaved mates with ``/1`` and ``/2`` dropped, checked to be the same per pair."""
    data, off, length = fields.data, fields.name_off.astype(np.int64), fields.name_len.astype(np.int64).copy()
    mate = np.arange(length.size) % 2
    suffix = (length >= 2) & (data[np.maximum(off + length - 2, 0)] == ord("/")) & (
        data[np.maximum(off + length - 1, 0)] == ord("1") + mate)
    both = suffix[0::2] & suffix[1::2]  # only where both mates carry it
    length[0::2] -= 2 * both
    length[1::2] -= 2 * both
    a, b = slice(0, None, 2), slice(1, None, 2)
    differ = (length[a] != length[b]) | (name_hashes(data, off[a], length[a]) != name_hashes(data, off[b], length[b]))
    if differ.any():
        i = int(np.argmax(differ))
        names = [data[o: o + n].tobytes().decode("latin-1") for o, n in
                 ((off[2 * i], fields.name_len[2 * i]), (off[2 * i + 1], fields.name_len[2 * i + 1]))]
        where = (f"files {block.first.path!r} and {block.second.path!r}" if block.second is not None
                 else f"file {block.first.path!r}")
        raise InputFormatError(f"reads {where}: the mates {names[0]!r} and {names[1]!r} have different names; "
                               "the two mates of a pair must be named alike (a /1 and /2 suffix may differ)")
    return ReadFields(data, fields.name_off, length.astype(fields.name_len.dtype), fields.seq_off, fields.seq_len,
                      fields.qual_off)
