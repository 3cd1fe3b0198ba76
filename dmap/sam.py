"""SAM output: header and records for exact hits.

Conventions (documented in the README):
* each read's hits are ordered by (contig, position, strand); the first is
  the primary record, the others are secondary (flag 0x100) with SEQ and
  QUAL ``*`` as minimap2 writes them;
* MAPQ from the number of hits n: 60 if n = 1, 3 if 2, 1 if 3-4, else 0;
* tags ``NM:i:0`` and ``NH:i:`` (records reported for the read);
* reverse-strand records have flag 16, reverse-complemented SEQ and
  reversed QUAL; unmapped reads have flag 4.
"""

from __future__ import annotations

import shlex
import sys

import numpy as np

from . import __version__
from .alphabet import reverse_complement
from .fastx import ReadChunk
from .hits import ChunkHits
from .index.store import IndexMeta


def header(meta: IndexMeta, argv: list[str] | None = None) -> str:
    """``@HD``, one ``@SQ`` per contig, and ``@PG``."""
    lines = ["@HD\tVN:1.6\tSO:unsorted"]
    lines += [f"@SQ\tSN:{c.name}\tLN:{c.length}" for c in meta.contigs]
    cl = shlex.join(argv if argv is not None else sys.argv)
    lines.append(f"@PG\tID:dmap\tPN:dmap\tVN:{__version__}\tCL:{cl}")
    return "\n".join(lines) + "\n"


def mapq(n_hits: int) -> int:
    if n_hits == 1:
        return 60
    if n_hits == 2:
        return 3
    if n_hits <= 4:
        return 1
    return 0


def format_records(chunk: ReadChunk, hits: ChunkHits, contig_names: list[str], max_hits: int | None = None) -> str:
    """SAM records of a chunk, reads in input order.

    Columns are computed with numpy and joined by one comprehension: a
    per-read loop with branches cost about twice as much.
    """
    n_reads = len(chunk)
    counts = hits.counts()
    # Rank of each hit within its read; keep the first max_hits.
    first_of_read = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(len(hits)) - first_of_read[hits.read]
    keep = rank < (max_hits if max_hits is not None else len(hits) + 1)
    read = np.concatenate([hits.read[keep], np.flatnonzero(counts == 0)])
    order = np.argsort(read, kind="stable")
    n_mapped = int(keep.sum())
    is_hit = order < n_mapped
    read = read[order]
    hit = np.where(is_hit, order, 0)
    primary = ~is_hit | (rank[keep][hit] == 0) if n_mapped else ~is_hit
    reverse = is_hit & (hits.strand[keep][hit] == 1) if n_mapped else is_hit
    flag = np.where(is_hit, np.where(reverse, 16, 0) | np.where(primary, 0, 256), 4)
    shown = np.minimum(counts, max_hits) if max_hits is not None else counts
    mapq_of_read = np.select([counts == 1, counts == 2, counts <= 4], [60, 3, 1], 0)
    names, seqs = chunk.names, chunk.seqs
    quals = chunk.quals if chunk.quals is not None else ["*"] * n_reads
    rname = np.array(contig_names + ["*"], dtype=object)
    contig = hits.contig[keep][hit] if n_mapped else np.zeros(read.size, dtype=np.int64)
    pos = hits.position[keep][hit] + 1 if n_mapped else np.zeros(read.size, dtype=np.int64)
    rows = zip(
        read.tolist(), flag.tolist(), rname[np.where(is_hit, contig, -1)].tolist(),
        np.where(is_hit, pos, 0).tolist(), np.where(is_hit, mapq_of_read[read], 0).tolist(),
        primary.tolist(), reverse.tolist(), shown[read].tolist(),
    )
    return "".join([
        f"{names[r]}\t{f}\t{c}\t{p}\t{q}\t{len(seqs[r])}M\t*\t0\t0\t"
        + (("*\t*" if not prim else f"{reverse_complement(seqs[r])}\t{quals[r][::-1]}" if rev else f"{seqs[r]}\t{quals[r]}")
           + f"\tNM:i:0\tNH:i:{k}\n")
        if f != 4 else f"{names[r]}\t4\t*\t0\t0\t*\t*\t0\t0\t{seqs[r]}\t{quals[r]}\n"
        for r, f, c, p, q, prim, rev, k in rows
    ])
