"""What :func:`dmap.map_reads` returns: counts, timing and, on request, the hits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..approx.alignments import ChunkAlignments
from ..search.hits import ChunkHits

if TYPE_CHECKING:  # pairs.py imports the SAM formatter; the result needs only the type
    import pandas as pd

    from .pairs import InsertBounds


@dataclass
class Hits:
    """All hits of a mapping run, one entry per (read, contig, position, strand)."""

    read: np.ndarray  # 0-based read number in the input
    read_name: list[str]
    contig: list[str]
    position: np.ndarray  # 0-based leftmost position in the contig
    strand: np.ndarray  # '+' or '-'
    distance: np.ndarray | None = None  # edit distance (approximate mapping only)
    cigar: list[str] | None = None

    def __len__(self) -> int:
        return int(self.read.size)

    def to_pandas(self) -> pd.DataFrame:
        """The hits as a :class:`pandas.DataFrame` (pandas must be installed)."""
        import pandas as pd

        columns = {"read": self.read, "read_name": self.read_name, "contig": self.contig,
                   "position": self.position, "strand": self.strand}
        if self.distance is not None:
            columns.update(distance=self.distance, cigar=self.cigar)
        return pd.DataFrame(columns)


@dataclass
class MappingResult:
    """What :func:`map_reads` returns."""

    n_reads: int = 0
    n_mapped: int = 0
    n_hits: int = 0
    seconds: float = 0.0  # the whole of map_reads, the cluster's start and close included
    cluster_seconds: float = 0.0  # starting the embedded cluster, or connecting to the scheduler
    close_seconds: float = 0.0  # closing the embedded cluster, or the connection
    sam_path: str | None = None
    hits: Hits | None = None
    chunk_seconds: list[float] = field(default_factory=list)
    block_loads: dict[str, int] = field(default_factory=dict)  # index blocks each worker loaded in this run
    # approximate mapping: "seed hits" and candidate "regions" verified in this run, over all workers
    candidates: dict[str, int] = field(default_factory=dict)
    # reads written unmapped without a search, by reason (dmap.reads.UNMAPPABLE): empty, too long, unknown symbol
    unmappable: dict[str, int] = field(default_factory=dict)
    # paired-end reads: pairs reported as proper pairs, the insert bounds used (dmap.mapping.pairs.InsertBounds),
    # and the pairs with more proper pairs than were formed (dmap.mapping.pairs.PAIR_CAP)
    n_proper: int = 0
    insert: InsertBounds | None = None
    capped_pairs: int = 0

    @property
    def reads_per_second(self) -> float:
        """Reads mapped per second of the whole run (:attr:`seconds`)."""
        return self.n_reads / self.seconds if self.seconds else 0.0


def collect_hits(results: list[tuple[ChunkHits | ChunkAlignments, list[str], int]], contig_names: list[str],
                 approximate: bool) -> Hits:
    """The hits of a run from each chunk's hits, read names and number of its first read."""
    reads, names, contigs, pos, strand, dist, cigar = [], [], [], [], [], [], []
    for h, chunk_names, first in results:
        if approximate:
            dist.append(h.distance)
            cigar += h.cigar.tolist()
        reads.append(h.read + first)
        names += [chunk_names[i] for i in h.read.tolist()]
        contigs += [contig_names[c] for c in h.contig.tolist()]
        pos.append(h.position)
        strand.append(np.where(h.strand == 1, "-", "+"))
    cat = lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dtype=dt)  # noqa: E731
    return Hits(cat(reads, np.int64), names, contigs, cat(pos, np.int64), cat(strand, "<U1"),
                cat(dist, np.int64) if approximate else None, cigar if approximate else None)
