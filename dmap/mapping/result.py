"""What :func:`dmap.map_reads` returns: counts, timing and, on request, the hits."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..approx.alignments import ChunkAlignments
from ..reads import STRINGS, FlatStrings
from ..search.hits import ChunkHits

if TYPE_CHECKING:  # pairs.py imports the SAM formatter; the result needs only the type
    import pandas as pd

    from .pairs import InsertBounds


@dataclass
class Hits:
    """All hits of a mapping run, one entry per (read, contig, position, strand), as numpy arrays.

    Read names and CIGARs stay packed in one byte array each (:class:`dmap.reads.FlatStrings`)
    and contigs are numbers, so a run's hits cost no Python object per hit: :attr:`read_name`,
    :attr:`contig` and :attr:`cigar` make string arrays when asked for, and :meth:`to_pandas`
    gives the contig column as a categorical.
    """

    read: np.ndarray  # int64: 0-based read number in the input
    contig_id: np.ndarray  # int64: the contig's number, in contig_names
    position: np.ndarray  # int64: 0-based leftmost position in the contig
    strand: np.ndarray  # '+' or '-'
    contig_names: list[str]  # the index's contigs, in order
    names: FlatStrings  # the read name of each hit
    distance: np.ndarray | None = None  # edit distance (approximate mapping only)
    cigars: FlatStrings | None = None  # the CIGAR of each hit (approximate mapping only)

    def __len__(self) -> int:
        return int(self.read.size)

    @cached_property
    def read_name(self) -> np.ndarray:
        """The read name of each hit (numpy strings)."""
        return self.names.to_numpy()

    @cached_property
    def contig(self) -> np.ndarray:
        """The contig name of each hit (numpy strings)."""
        return np.asarray(self.contig_names, dtype=STRINGS)[self.contig_id]

    @cached_property
    def cigar(self) -> np.ndarray | None:
        """The CIGAR of each hit (numpy strings), or None for exact mapping."""
        return None if self.cigars is None else self.cigars.to_numpy()

    def to_pandas(self) -> pd.DataFrame:
        """The hits as a :class:`pandas.DataFrame` (pandas must be installed): read, read_name,
        contig (categorical, of all the index's contigs), position, strand and, for approximate
        mapping, distance and cigar."""
        import pandas as pd

        # Fixed-width numpy strings become pandas' string columns directly (numpy's variable-width
        # strings would become columns of Python objects).
        columns = {"read": self.read, "read_name": self.names.to_numpy(fixed_width=True),
                   "contig": pd.Categorical.from_codes(self.contig_id, categories=self.contig_names),
                   "position": self.position, "strand": self.strand}
        if self.distance is not None:
            columns.update(distance=self.distance, cigar=self.cigars.to_numpy(fixed_width=True))
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


def collect_hits(results: list[tuple[ChunkHits | ChunkAlignments, FlatStrings, int]], contig_names: list[str],
                 approximate: bool) -> Hits:
    """The hits of a run from each chunk's hits, the read name of each hit and the number of the
    chunk's first read."""
    cat = lambda xs, dt: np.concatenate(xs).astype(dt, copy=False) if xs else np.zeros(0, dtype=dt)  # noqa: E731
    hits = [h for h, _, _ in results]
    return Hits(cat([h.read + first for h, _, first in results], np.int64), cat([h.contig for h in hits], np.int64),
                cat([h.position for h in hits], np.int64),
                np.where(cat([h.strand for h in hits], np.int8) == 1, "-", "+"), list(contig_names),
                FlatStrings.concat([names for _, names, _ in results]),
                cat([h.distance for h in hits], np.int64) if approximate else None,
                FlatStrings.concat([h.cigar for h in hits]) if approximate else None)
