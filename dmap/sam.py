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


def format_records(
    chunk: ReadChunk, hits: ChunkHits, contig_names: list[str], max_hits: int | None = None
) -> str:
    """SAM records of a chunk, reads in input order."""
    counts = hits.counts()
    out: list[str] = []
    append = out.append
    h = 0
    reads, strands, contigs, positions = (
        hits.read.tolist(), hits.strand.tolist(), hits.contig.tolist(), hits.position.tolist()
    )
    quals = chunk.quals
    for i, (name, seq) in enumerate(zip(chunk.names, chunk.seqs)):
        qual = quals[i] if quals is not None else "*"
        n = int(counts[i])
        if n == 0:
            append(f"{name}\t4\t*\t0\t0\t*\t*\t0\t0\t{seq}\t{qual}\n")
            continue
        shown = n if max_hits is None else min(n, max_hits)
        q = mapq(n)
        cigar = f"{len(seq)}M"
        tags = f"NM:i:0\tNH:i:{shown}"
        for k in range(h, h + shown):
            rev = strands[k] == 1
            flag = 16 if rev else 0
            if k == h:
                # Only DNA has a reverse strand (n_strands is 1 otherwise).
                s = reverse_complement(seq) if rev else seq
                ql = qual[::-1] if (rev and qual != "*") else qual
            else:
                flag |= 256
                s = ql = "*"
            append(f"{name}\t{flag}\t{contig_names[contigs[k]]}\t{positions[k] + 1}\t{q}\t{cigar}\t*\t0\t0\t{s}\t{ql}\t{tags}\n")
        h += n
    return "".join(out)
