"""SAM records formatted in Python, one string per record: the references that
``kernels/sam_records.cl`` is tested against byte for byte (the kernel writes the
same records from whole-array columns, with no Python object per record)."""

from __future__ import annotations

import numpy as np

from ..alphabet import reverse_complement
from ..approx.alignments import ChunkAlignments
from ..format.sam import UNMAPPED, RecordColumns, RecordTails, record_columns, seq_letters, translates_mapped
from ..reads import FlatStrings, ReadChunk
from ..search.hits import ChunkHits


def seq_qual_strings(chunk: ReadChunk) -> tuple[list[str], list[str], list[str], list[str]]:
    """Per read, SEQ as written unmapped (:func:`dmap.format.sam.seq_letters`; ``*`` when empty), mapped on
    the forward strand (:func:`dmap.format.sam.translates_mapped`) and on the reverse strand, and QUAL
    (Python formatters)."""
    letters = seq_letters(chunk.alphabet).tobytes().decode("latin-1")
    seqs = [s.translate(letters) if s else "*" for s in chunk.seqs]
    mapped = seqs if translates_mapped(chunk.alphabet) else chunk.seqs
    quals = chunk.quals if chunk.quals is not None else ["*"] * len(chunk)
    quals = [q if s else "*" for q, s in zip(quals, chunk.seqs)]
    return seqs, mapped, [reverse_complement(s) if chunk.alphabet == "dna" else s for s in seqs], quals


def read_ends(chunk: ReadChunk, tails: RecordTails) -> list[str]:
    """What ends each read's records: its header comment after a tab (with ``tails.comments``,
    where it has one), then its tail."""
    f = chunk.fields
    out = []
    for r in range(len(chunk)):
        comment = ""
        if tails.comments and f.comment_len[r]:
            at = int(f.comment_off[r])
            comment = "\t" + f.data[at:at + int(f.comment_len[r])].tobytes().decode("latin-1")
        out.append(comment + tails.for_read(r))
    return out


def format_records(chunk: ReadChunk, hits: ChunkHits, contig_names: list[str], max_hits: int | None = None,
                   tail: str | RecordTails = "", pick: np.ndarray | None = None) -> str:
    """SAM records of a chunk in Python: the reference for ``sam_records.cl``.
    ``tail`` ends every record (:attr:`ReadGroup.tag`), or each read's (:class:`RecordTails`);
    ``pick`` as in :func:`record_columns`."""
    cols = record_columns(hits, max_hits, pick)
    ends = read_ends(chunk, RecordTails.of(tail))
    names = chunk.names
    seqs, mapped, reverse, quals = seq_qual_strings(chunk)

    def record(r: int, f: int, c: int, p: int, q: int, k: int, x0: int) -> str:
        if f & 4:
            return f"{names[r]}{UNMAPPED}{seqs[r]}\t{quals[r]}{ends[r]}\n"
        if f & 256:
            seq_qual = "*\t*"
        elif f & 16:  # only DNA has a reverse strand
            seq_qual = f"{reverse[r]}\t{quals[r][::-1]}"
        else:
            seq_qual = f"{mapped[r]}\t{quals[r]}"
        return (f"{names[r]}\t{f}\t{contig_names[c]}\t{p}\t{q}\t{len(seqs[r])}M\t*\t0\t0\t{seq_qual}\tNM:i:0"
                f"\tNH:i:{k}\tX0:i:{x0}\tX1:i:0{ends[r]}\n")

    return "".join([
        record(*row) for row in zip(cols.read.tolist(), cols.flag.tolist(), cols.contig.tolist(), cols.pos.tolist(),
                                    cols.mapq.tolist(), cols.nh.tolist(), cols.x0.tolist())
    ])




def format_alignment_records(chunk: ReadChunk, alns: ChunkAlignments, contig_names: list[str],
                             tail: str | RecordTails = "") -> str:
    """SAM records of a chunk mapped with ``--max-errors K``, in Python: the reference for
    :func:`format_alignment_records_device`.

    Each read's reported alignments in rank order (the first is primary,
    the others secondary, flag 0x100, with SEQ and QUAL ``*``), unmapped
    reads with flag 4.  Tags: ``NM`` (edit distance), ``MD``, ``AS`` (minus
    the edit distance: higher is better), ``NH`` (records of the read),
    ``X0`` and ``X1`` (alignments found at the best distance, and others:
    :mod:`dmap.mapq`), and ``tail`` (:attr:`ReadGroup.tag`, or each read's).
    """
    ends = read_ends(chunk, RecordTails.of(tail))
    names = chunk.names
    seqs, mapped, reverse, quals = seq_qual_strings(chunk)
    cigars, mds = alns.cigar.tolist(), alns.md.tolist()
    x0, x1 = alns.n_best.tolist(), (alns.n_found - alns.n_best).tolist()
    counts = alns.counts()
    first = np.zeros(len(chunk), dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    strand, contig = alns.strand.tolist(), alns.contig.tolist()
    pos, dist, mq = alns.position.tolist(), alns.distance.tolist(), alns.mapq.tolist()
    lines = []
    for r in range(len(chunk)):
        n = int(counts[r])
        if n == 0:
            lines.append(f"{names[r]}{UNMAPPED}{seqs[r]}\t{quals[r]}{ends[r]}\n")
            continue
        for a in range(first[r], first[r] + n):
            flag = (16 if strand[a] else 0) | (256 if a > first[r] else 0)
            if flag & 256:
                seq_qual = "*\t*"
            elif flag & 16:
                seq_qual = f"{reverse[r]}\t{quals[r][::-1]}"
            else:
                seq_qual = f"{mapped[r]}\t{quals[r]}"
            d = dist[a]
            lines.append(f"{names[r]}\t{flag}\t{contig_names[contig[a]]}\t{pos[a] + 1}\t{mq[a]}\t{cigars[a]}"
                         f"\t*\t0\t0\t{seq_qual}\tNM:i:{d}\tMD:Z:{mds[a]}\tAS:i:{-d}\tNH:i:{n}"
                         f"\tX0:i:{x0[r]}\tX1:i:{x1[r]}{ends[r]}\n")
    return "".join(lines)


def format_pair_records(chunk: ReadChunk, cols: RecordColumns, cigar: FlatStrings, md: FlatStrings,
                        contig_names: list[str], tail: str | RecordTails = "") -> str:
    """SAM records of a chunk of pairs from their columns
    (:func:`dmap.mapping.pairs.pair_record_columns`), in Python: mate fields (RNEXT ``=``
    on the record's own contig), ``MC`` and ``MQ`` where the mate is mapped, and an
    unmapped mate placed at its mate's position."""
    ends = read_ends(chunk, RecordTails.of(tail))
    names = chunk.names
    seqs, mapped, reverse, quals = seq_qual_strings(chunk)
    cigars, mds = cigar.tolist(), md.tolist()
    none = int(np.uint32(0xFFFFFFFF))
    lines = []
    for i, r in enumerate(cols.read.tolist()):
        f, c, rn = int(cols.flag[i]), int(cols.contig[i]), int(cols.rnext[i])
        rname = "*" if c == none else contig_names[c]
        rnext = "*" if rn == none else "=" if rn == c else contig_names[rn]
        mate = "" if f & 8 else f"\tMC:Z:{cigars[cols.mate_alignment[i]]}\tMQ:i:{cols.mate_mapq[i]}"
        fields = f"{names[r]}\t{f}\t{rname}\t{cols.pos[i]}"
        if f & 4:
            lines.append(f"{fields}\t0\t*\t{rnext}\t{cols.pnext[i]}\t0\t{seqs[r]}\t{quals[r]}{mate}{ends[r]}\n")
            continue
        if f & 256:
            seq_qual = "*\t*"
        elif f & 16:
            seq_qual = f"{reverse[r]}\t{quals[r][::-1]}"
        else:
            seq_qual = f"{mapped[r]}\t{quals[r]}"
        a, d = int(cols.alignment[i]), int(cols.nm[i])
        lines.append(f"{fields}\t{cols.mapq[i]}\t{cigars[a]}\t{rnext}\t{cols.pnext[i]}\t{cols.tlen[i]}"
                     f"\t{seq_qual}\tNM:i:{d}\tMD:Z:{mds[a]}\tAS:i:{-d}\tNH:i:{cols.nh[i]}\tX0:i:{cols.x0[i]}"
                     f"\tX1:i:{cols.x1[i]}{mate}{ends[r]}\n")
    return "".join(lines)
