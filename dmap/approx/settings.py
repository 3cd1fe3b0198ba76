"""The settings of approximate mapping (``map_reads(max_errors=K)``), checked against the index."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DmapError
from ..index.store import Index
from ..neighborhood.params import MAX_NEIGHBORHOOD_ERRORS
from ..search.edits import MAX_SEED_EDITS
from .seeds import Seeds, choose_seed_edits, pigeonhole_seeds, selective_length

MAX_ERRORS_LIMIT = 32  # distances are kept in one byte; seeds shorter than ~3 symbols hit everywhere anyway


@dataclass
class Approximate:
    """Settings of approximate mapping (``map_reads(max_errors=K)``)."""

    max_errors: int
    report_all: bool
    eqx: bool
    max_hits: int | None
    engine: str = "fm"
    delta: int = 1
    neighborhood_errors: int = 0
    window: int = 0  # a neighborhood pattern's span
    seed_edits: int | None = None  # engine "fm": edits per seed, None to choose per chunk
    can_edit: bool = False  # the index has the reversed-text occ that seeds with edits need
    chance_length: float = 0.0  # pieces shorter than this hit the reference by chance

    def seeds_for(self, lengths: np.ndarray) -> tuple[Seeds, int]:
        """The FM engine's seeds of a chunk and the edits each is searched with."""
        m = choose_seed_edits(self.max_errors, lengths, self.can_edit, self.seed_edits, self.chance_length)
        return pigeonhole_seeds(lengths, self.max_errors, m), m


def approximate_settings(idx: Index, max_errors: int, report_all: bool, eqx: bool, max_hits: int | None,
                          engine: str, delta: int, neighborhood_errors: int | None,
                          seed_edits: int | None = None) -> Approximate | None:
    """Validated settings of seed-and-verify mapping, or None for exact FM-index mapping."""
    if engine not in ("fm", "phash"):
        raise DmapError(f"unknown --engine {engine!r}; choose fm or phash")
    if engine == "phash" and seed_edits is not None:
        raise DmapError("--seed-edits applies only to --engine fm")
    if engine == "fm":
        if delta != 1 or neighborhood_errors is not None:
            raise DmapError("--delta and --neighborhood-errors apply only to --engine phash")
        if seed_edits is not None:
            if not 0 <= seed_edits <= MAX_SEED_EDITS:
                raise DmapError(f"--seed-edits must be between 0 and {MAX_SEED_EDITS}, not {seed_edits}")
            if seed_edits and not idx.meta.reverse_index:
                raise DmapError(f"index {idx.path!r} (format version {idx.meta.format_version}) has no reversed-text "
                                "index for --seed-edits; rebuild it with this dmap, or use --seed-edits 0")
        if not max_errors:
            if report_all or eqx:
                raise DmapError("--all and --eqx apply only with --max-errors K (-e K): exact mapping reports "
                                "every hit, and its CIGAR is all matches")
            return None
        chance = selective_length(idx.meta.text_length, idx.alphabet.sigma, idx.alphabet.n_strands)
        return Approximate(max_errors, report_all, eqx, max_hits, seed_edits=seed_edits,
                           can_edit=idx.meta.reverse_index, chance_length=chance)
    params = idx.neighborhood_params
    if params is None:
        raise DmapError(f"index {idx.path!r} has no neighborhood index for --engine phash; rebuild it with "
                        "'dmap index REFERENCE -o INDEX --neighborhood'")
    if delta < 1:
        raise DmapError(f"--delta must be at least 1, not {delta}")
    e = params.max_errors if neighborhood_errors is None else neighborhood_errors
    if not 0 <= e <= MAX_NEIGHBORHOOD_ERRORS:
        raise DmapError(f"--neighborhood-errors must be between 0 and {MAX_NEIGHBORHOOD_ERRORS}, not {e}")
    return Approximate(max_errors, report_all, eqx, max_hits, engine, delta, e, params.window)
