"""Paired-end reads: proper pairs from each mate's alignments, the insert size, and the
SAM records of a pair.

A chunk of pairs holds its reads interleaved (:func:`dmap.io.fastx.read_pair_chunk`):
read ``2i`` is the first mate of pair ``i``, read ``2i + 1`` the second.  Each
mate is mapped as a single read (every locus within K), and this module joins
them:

* a **proper pair** is two alignments of the two mates on one contig, on
  opposite strands and facing each other (FR): the forward mate starts first
  (at the same position, the forward mate is the first one, as samtools
  fixmate checks), and the insert, from the forward mate's first base to the
  reverse mate's last, lies within the bounds (:class:`InsertBounds`);
* a pair's score is the sum of its mates' edit distances; by default the
  pairs at the least score are reported (one primary, by a hash of the
  name, :mod:`dmap.mapq`), with ``--all`` every proper pair;
* a pair with no proper pair has each mate reported with its own best
  alignments (or all, with ``--all``), and the mate fields say where the
  other mate's primary lies.

No Python object per pair: proper pairs are found by one sort and two
binary searches over the whole chunk (:func:`proper_pairs`).  Expanding the
pairs of a repeat could take any memory, so at most :data:`PAIR_CAP` are
formed per read pair; those capped are counted and reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from ..approx.alignments import ChunkAlignments
from ..errors import DmapError
from ..format.sam import NONE, RecordColumns, primaries
from ..mapq import mapping_quality, primary_first, ranked
from ..order import lexsort
from ..reads import FlatStrings, ReadChunk
from ..search.hits import ChunkHits

# Most proper pairs formed for one read pair (the others are counted, not formed).
PAIR_CAP = 10_000
# The insert size is estimated from the input's first pairs, this many (all where fewer): the same
# pairs whatever the chunks and the files they come in, so the output is too.  The first chunk
# holds them (dmap.io.pairs.plan_pair_files' ``first_pairs``).
ESTIMATE_PAIRS = 10_000
# Confidently placed pairs needed among them to estimate the insert size; with fewer the default
# bounds hold.
MIN_ESTIMATE_PAIRS = 20
DEFAULT_BOUNDS = (1, 1000)
# Bounds from the estimate: the quartiles widened by this many interquartile ranges (as bwa mem).
IQR_WIDTH = 3
MAX_INSERT = 1_000_000  # inserts longer than this are not counted in the estimate


@dataclass(frozen=True)
class InsertBounds:
    """The inserts of a proper pair, ``low`` to ``high`` inclusive; where dmap estimated them, the
    confidently placed pairs it found (``pairs``; None: the user's bounds) and, where they were
    enough, their median and standard deviation."""

    low: int
    high: int
    pairs: int | None = None
    median: float | None = None
    sd: float | None = None

    @property
    def estimated(self) -> bool:
        return self.median is not None

    def describe(self) -> str:
        """One line for standard error and the SAM header's ``@CO``."""
        if self.estimated:
            return (f"insert size estimated from {self.pairs} confidently placed pairs of the first "
                    f"{ESTIMATE_PAIRS:,}: median {self.median:.0f}, sd {self.sd:.1f}; proper pairs have inserts "
                    f"{self.low}-{self.high}")
        if self.pairs is not None:
            return (f"insert size: only {self.pairs} confidently placed pairs of the first {ESTIMATE_PAIRS:,}, "
                    f"too few to estimate; proper pairs have inserts {self.low}-{self.high} "
                    "(set --min-insert/--max-insert)")
        return f"insert size: proper pairs have inserts {self.low}-{self.high}"


def insert_bounds(paired: bool, low: int | None, high: int | None) -> InsertBounds | None:
    """The user's insert bounds of pairs, checked; None to estimate them."""
    if (low is not None or high is not None) and not paired:
        raise DmapError("--min-insert and --max-insert apply to paired-end reads only")
    if (low is None) != (high is None):
        raise DmapError("give --min-insert and --max-insert together (or neither: they are estimated)")
    if low is None:
        return None
    if not 1 <= low <= high:
        raise DmapError(f"the insert bounds must satisfy 1 <= --min-insert <= --max-insert, not {low} and {high}")
    return InsertBounds(low, high)


@dataclass
class MateAlignments:
    """Every alignment of a chunk's mates, sorted by read (``read`` ``2i`` and ``2i + 1`` are pair ``i``).

    ``rank`` orders a read's alignments (0: its primary), ``best`` marks those
    at its least distance; ``mapq`` is per alignment (its read's).
    """

    read: np.ndarray
    strand: np.ndarray
    contig: np.ndarray
    position: np.ndarray  # 0-based leftmost
    span: np.ndarray  # reference symbols covered
    distance: np.ndarray
    rank: np.ndarray
    best: np.ndarray
    mapq: np.ndarray

    def __len__(self) -> int:
        return int(self.read.size)


@dataclass
class Pairs:
    """Proper pairs of a chunk, sorted by pair, then rank (0: the primary pair)."""

    pair: np.ndarray
    first: np.ndarray  # the first mate's alignment (index into MateAlignments)
    second: np.ndarray
    score: np.ndarray  # sum of the two edit distances
    rank: np.ndarray
    n_found: np.ndarray  # per pair: proper pairs, counted beyond the cap too
    n_best: np.ndarray  # per pair: proper pairs at its least score
    mapq: np.ndarray  # per pair
    capped: np.ndarray  # per pair: more proper pairs than PAIR_CAP

    def __len__(self) -> int:
        return int(self.pair.size)


def insert_of(aln: MateAlignments, forward: np.ndarray, reverse: np.ndarray) -> np.ndarray:
    """The insert of each (forward, reverse) alignment pair: the forward mate's first base to the
    reverse mate's last, inclusive."""
    return aln.position[reverse] + aln.span[reverse] - aln.position[forward]


def proper_pairs(aln: MateAlignments, n_pairs: int, bounds: InsertBounds, contig_offsets: np.ndarray,
                 primary: Callable[[np.ndarray], np.ndarray] | None = None, cap: int = PAIR_CAP) -> Pairs:
    """Every proper pair (module docstring) of a chunk's mates, ranked.

    The reverse alignments are sorted by (pair, mate, last base in the joined
    reference); each forward alignment finds the reverse ones of its other
    mate whose last base gives an insert within bounds by two binary
    searches, and the matches are expanded with one ``repeat``.
    ``primary`` maps each pair's number of best pairs to the one chosen as
    primary (:func:`dmap.format.sam.primaries`; None: the first).
    """
    pair_of, mate = aln.read // 2, aln.read % 2
    glob = contig_offsets[aln.contig].astype(np.int64) + aln.position
    fwd = np.flatnonzero(aln.strand == 0)
    rev = np.flatnonzero(aln.strand == 1)
    # Keys spaced so that no window reaches another (pair, mate)'s keys.
    space = int(glob.max(initial=0)) + int(aln.span.max(initial=0)) + bounds.high + 2
    last = glob[rev] + aln.span[rev] - 1
    rkey = (pair_of[rev] * 2 + mate[rev]) * space + last
    order = np.argsort(rkey, kind="stable")
    rev, rkey = rev[order], rkey[order]
    base = (pair_of[fwd] * 2 + 1 - mate[fwd]) * space + glob[fwd]
    lo = np.searchsorted(rkey, base + bounds.low - 1, side="left")
    hi = np.searchsorted(rkey, base + bounds.high - 1, side="right")
    count = hi - lo
    found = np.bincount(pair_of[fwd], weights=count, minlength=n_pairs).astype(np.int64)
    # At most `cap` formed per pair: each forward alignment takes what its pair has left.
    before = np.cumsum(count) - count
    start_of_pair = np.zeros(n_pairs + 1, dtype=np.int64)
    np.add.at(start_of_pair, pair_of[fwd] + 1, count)
    np.cumsum(start_of_pair, out=start_of_pair)
    taken_before = before - start_of_pair[pair_of[fwd]] if fwd.size else before
    count = np.clip(cap - taken_before, 0, count)
    f = np.repeat(fwd, count)
    r = rev[np.repeat(lo - np.cumsum(count) + count, count) + np.arange(int(count.sum()))]
    # One contig, and the forward mate first (at one position: the first mate forward).
    keep = (aln.contig[f] == aln.contig[r]) & ((aln.position[f] < aln.position[r])
                                                | ((aln.position[f] == aln.position[r]) & (mate[f] == 0)))
    f, r = f[keep], r[keep]
    if keep.size and not keep.all():
        found -= np.bincount(pair_of[np.repeat(fwd, count)][~keep], minlength=n_pairs)
    pair = pair_of[f]
    first = np.where(mate[f] == 0, f, r)
    second = np.where(mate[f] == 0, r, f)
    score = aln.distance[f] + aln.distance[r]
    order = lexsort((aln.strand[first], aln.position[first], aln.contig[first], score, pair))
    pair, first, second, score = pair[order], first[order], second[order], score[order]
    rank, n_found, n_best, _, mapq = ranked(pair, score, n_pairs)
    if primary is not None:
        rank = primary_first(rank, primary(n_best)[pair])
        order = lexsort((rank, pair))
        pair, first, second, score, rank = (a[order] for a in (pair, first, second, score, rank))
    return Pairs(pair, first, second, score, rank, np.maximum(found, n_found), n_best, mapq, found > cap)


def estimate_insert(aln: MateAlignments, n_pairs: int, n_found: np.ndarray) -> InsertBounds:
    """Insert bounds from the pairs among the first :data:`ESTIMATE_PAIRS` whose two mates each have
    one alignment (``n_found`` per read), on one contig and facing each other: the quartiles widened
    by :data:`IQR_WIDTH` interquartile ranges; :data:`DEFAULT_BOUNDS` when fewer than
    :data:`MIN_ESTIMATE_PAIRS` such pairs."""
    unique = (n_found[aln.read] == 1) & (aln.read < 2 * ESTIMATE_PAIRS)
    one = np.flatnonzero(unique)
    pair_of = aln.read[one] // 2
    both = np.bincount(pair_of, minlength=n_pairs) == 2
    one = one[both[pair_of]]
    # Sorted by read: the two mates of a pair follow each other.
    a, b = one[0::2], one[1::2]
    facing = (aln.contig[a] == aln.contig[b]) & (aln.strand[a] != aln.strand[b])
    a, b = a[facing], b[facing]
    fwd, rev = np.where(aln.strand[a] == 0, a, b), np.where(aln.strand[a] == 0, b, a)
    inserts = insert_of(aln, fwd, rev)
    inserts = inserts[(aln.position[fwd] <= aln.position[rev]) & (inserts > 0) & (inserts <= MAX_INSERT)]
    if inserts.size < MIN_ESTIMATE_PAIRS:
        return InsertBounds(*DEFAULT_BOUNDS, pairs=int(inserts.size))
    q1, median, q3 = np.percentile(inserts, [25, 50, 75])
    iqr = q3 - q1
    return InsertBounds(max(1, int(np.floor(q1 - IQR_WIDTH * iqr))), int(np.ceil(q3 + IQR_WIDTH * iqr)),
                        pairs=int(inserts.size), median=float(median), sd=float(inserts.std()))


def pair_record_columns(aln: MateAlignments, pairs: Pairs, n_reads: int, n_best: np.ndarray, n_found: np.ndarray,
                        report_all: bool, max_hits: int | None) -> RecordColumns:
    """The SAM record columns of a chunk of pairs, mates in input order.

    A pair with reported proper pairs (its best, or all with ``report_all``;
    at most ``max_hits``) gets one record per reported pair for each mate,
    the primary pair first.  Any other read gets its own reported
    alignments (as a single read), mate fields pointing at its mate's
    primary, or one unmapped record, placed at its mate's primary if that
    is mapped (samtools fixmate's convention).  ``n_best``/``n_found`` per
    read give X0 and X1.
    """
    n_pairs = n_reads // 2
    least = np.full(n_pairs, np.iinfo(np.int64).max)
    np.minimum.at(least, pairs.pair, pairs.score)
    reported = np.ones(len(pairs), dtype=bool) if report_all else pairs.score == least[pairs.pair]
    if max_hits is not None:
        reported &= pairs.rank < max_hits
    p = np.flatnonzero(reported)
    paired = np.zeros(n_pairs, dtype=bool)
    paired[pairs.pair[p]] = True
    # Records of proper pairs: mate 1 then mate 2 of each reported pair.
    own = np.concatenate([pairs.first[p], pairs.second[p]])
    mate = np.concatenate([pairs.second[p], pairs.first[p]])
    read = np.concatenate([2 * pairs.pair[p], 2 * pairs.pair[p] + 1])
    key = np.concatenate([pairs.rank[p], pairs.rank[p]])
    # Reads of the other pairs: their own alignments, mate fields from the mate's primary.
    primary = np.full(n_reads, -1, dtype=np.int64)
    primary[aln.read[aln.rank == 0]] = np.flatnonzero(aln.rank == 0)
    single = ~paired[aln.read // 2] & (aln.best | report_all)
    if max_hits is not None:
        single &= aln.rank < max_hits
    s = np.flatnonzero(single)
    shown = np.bincount(np.concatenate([read, aln.read[s]]), minlength=n_reads)
    u = np.flatnonzero(shown == 0)  # unmapped reads
    own = np.concatenate([own, s, np.full(u.size, -1)])
    mate = np.concatenate([mate, primary[aln.read[s] ^ 1], primary[u ^ 1]])
    read = np.concatenate([read, aln.read[s], u])
    key = np.concatenate([key, aln.rank[s], np.zeros(u.size, dtype=np.int64)])
    proper = np.concatenate([np.ones(2 * p.size, dtype=bool), np.zeros(s.size + u.size, dtype=bool)])
    order = lexsort((key, read))
    own, mate, read, key, proper = own[order], mate[order], read[order], key[order], proper[order]
    mapped, mate_mapped = own >= 0, mate >= 0
    if len(aln) == 0:  # no read of the chunk aligned: the gathers below, masked where unmapped, need a row
        aln = MateAlignments(*(np.zeros(1, getattr(aln, f.name).dtype) for f in fields(aln)))
    o, m = np.maximum(own, 0), np.maximum(mate, 0)
    # Flags: paired, proper, unmapped, mate unmapped, reverse, mate reverse, first/second, secondary.
    flag = (1 | proper * 2 | ~mapped * 4 | ~mate_mapped * 8 | (mapped & (aln.strand[o] == 1)) * 16
            | (mate_mapped & (aln.strand[m] == 1)) * 32 | np.where(read % 2 == 0, 64, 128)
            | (mapped & (key > 0)) * 256).astype(np.uint32)
    # Where a record lies: its alignment; an unmapped read at its mate's primary; else nowhere.
    contig = np.where(mapped, aln.contig[o], np.where(mate_mapped, aln.contig[m], NONE)).astype(np.uint32)
    pos = np.where(mapped, aln.position[o] + 1, np.where(mate_mapped, aln.position[m] + 1, 0)).astype(np.uint32)
    rnext = np.where(mate_mapped, aln.contig[m], np.where(mapped, aln.contig[o], NONE)).astype(np.uint32)
    pnext = np.where(mate_mapped, aln.position[m] + 1, np.where(mapped, aln.position[o] + 1, 0)).astype(np.uint32)
    # TLEN as samtools computes it: the mate's 5' end minus this one's (the 5' end of a reverse
    # alignment is one past its last base), for two mapped mates on one contig.
    five = lambda i: np.where(aln.strand[i] == 1, aln.position[i] + aln.span[i], aln.position[i])  # noqa: E731
    same = mapped & mate_mapped & (aln.contig[o] == aln.contig[m])
    tlen = np.where(same, five(m) - five(o), 0).astype(np.int64)
    pair_mapq = pairs.mapq
    mapq = np.where(proper, pair_mapq[read // 2], np.where(mapped, aln.mapq[o], 0)).astype(np.uint32)
    mate_mapq = np.where(proper, pair_mapq[read // 2], np.where(mate_mapped, aln.mapq[m], 0)).astype(np.uint32)
    records = np.bincount(read, minlength=n_reads)
    u32 = lambda a: a[read].astype(np.uint32)  # noqa: E731
    return RecordColumns(read=read, flag=flag, contig=contig, pos=pos, mapq=mapq, nh=u32(records), x0=u32(n_best),
                         nm=np.where(mapped, aln.distance[o], 0).astype(np.uint32), x1=u32(n_found - n_best),
                         alignment=o.astype(np.uint32), rnext=rnext, pnext=pnext, tlen=tlen,
                         mate_alignment=m.astype(np.uint32), mate_mapq=mate_mapq)


def mate_alignments(chunk: ReadChunk, found: ChunkHits | ChunkAlignments
                    ) -> tuple[MateAlignments, tuple[FlatStrings, FlatStrings], np.ndarray, np.ndarray]:
    """Every alignment of a chunk's mates (exact hits, or every locus within K), with their CIGAR
    and MD strings, and per read the alignments at its least distance and all of them.

    Exact hits become alignments at distance 0 with CIGAR ``<length>M`` and MD
    ``<length>``, their primary chosen as for single reads.
    """
    if isinstance(found, ChunkAlignments):
        least = np.full(found.n_reads, np.iinfo(np.int64).max)
        np.minimum.at(least, found.read, found.distance)
        aln = MateAlignments(found.read, found.strand, found.contig, found.position, found.span, found.distance,
                             found.rank, found.distance == least[found.read], found.mapq)
        return aln, (found.cigar, found.md), found.n_best, found.n_found
    counts = found.counts()
    first = np.cumsum(counts) - counts
    rank = primary_first(np.arange(len(found)) - first[found.read], primaries(chunk, counts)[found.read])
    order = lexsort((rank, found.read))
    read = found.read[order]
    length = chunk.lengths[read].astype(np.int64)
    sizes, which = np.unique(length, return_inverse=True)  # few read lengths: one string each
    cigar = FlatStrings.of([f"{n}M" for n in sizes.tolist()]).take(which)
    md = FlatStrings.of([str(n) for n in sizes.tolist()]).take(which)
    aln = MateAlignments(read, found.strand[order], found.contig[order], found.position[order], length,
                         np.zeros(read.size, dtype=np.int64), rank[order], np.ones(read.size, dtype=bool),
                         mapping_quality(counts)[read])
    return aln, (cigar, md), counts, counts


def pair_chunk(chunk: ReadChunk, found: ChunkHits | ChunkAlignments, bounds: InsertBounds | None,
               contig_offsets: np.ndarray, report_all: bool, max_hits: int | None
               ) -> tuple[RecordColumns, tuple[FlatStrings, FlatStrings], InsertBounds, int]:
    """A chunk of pairs from its mates' alignments: the record columns, the CIGAR and MD strings they
    index, the insert bounds used (when ``bounds`` is None, estimated from this chunk, the first, which
    holds the input's first :data:`ESTIMATE_PAIRS` pairs), and the
    pairs whose proper pairs were capped at :data:`PAIR_CAP`."""
    aln, strings, n_best, n_found = mate_alignments(chunk, found)
    n_pairs = len(chunk) // 2
    if bounds is None:
        bounds = estimate_insert(aln, n_pairs, n_found)
    pairs = proper_pairs(aln, n_pairs, bounds, contig_offsets,
                         lambda best: primaries(chunk, best, 2 * np.arange(n_pairs)))
    cols = pair_record_columns(aln, pairs, len(chunk), n_best, n_found, report_all, max_hits)
    return cols, strings, bounds, int(pairs.capped.sum())
