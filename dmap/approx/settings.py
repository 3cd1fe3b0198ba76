"""The settings of approximate mapping (``map_reads(max_errors=K)``), checked against the index."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import DmapError
from ..index.store import Index
from ..neighborhood.params import MAX_NEIGHBORHOOD_ERRORS
from ..search.edits import MAX_SEED_EDITS
from .seeds import choose_seed_edits, selective_length

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
    seed_edits: int | None = None  # engine "fm": edits per seed, None to choose per read
    can_edit: bool = False  # the index has the reversed-text occ that seeds with edits need
    chance_length: float = 0.0  # pieces shorter than this hit the reference by chance
    error_rate: Fraction | None = None  # K of each read: floor(rate * its length); max_errors is the run's largest

    def errors_of(self, lengths: np.ndarray) -> np.ndarray:
        """K of each read: ``max_errors``, or with an error rate floor(rate * length), in exact
        integer arithmetic (so that 0.29 * 100 is 29, not the 28.999... of a float)."""
        if self.error_rate is None:
            return np.full(lengths.size, self.max_errors, dtype=np.int64)
        return lengths.astype(np.int64) * self.error_rate.numerator // self.error_rate.denominator

    def seed_edits_of(self, lengths: np.ndarray, errors: np.ndarray) -> np.ndarray:
        """The FM engine's edits per seed (m) of each read, for its K (:func:`choose_seed_edits`);
        0 with the neighborhood engine, which has no seeds."""
        if self.engine != "fm":
            return np.zeros(lengths.size, dtype=np.int64)
        if self.error_rate is None:  # one K
            return choose_seed_edits(self.max_errors, lengths, self.can_edit, self.seed_edits, self.chance_length)
        m = np.zeros(lengths.size, dtype=np.int64)
        for k in np.flatnonzero(np.bincount(errors)):  # the few K of a chunk, without a sort
            these = errors == k
            m[these] = choose_seed_edits(int(k), lengths[these], self.can_edit, self.seed_edits, self.chance_length)
        return m


def parse_error_rate(rate: float | str | Fraction) -> Fraction:
    """An error rate as an exact fraction: ``0.05``, ``"0.05"`` or ``"5%"`` (Yara's ``-e 5``)."""
    text = str(rate).strip()
    try:
        value = Fraction(text[:-1]) / 100 if text.endswith("%") else Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise DmapError(f"--error-rate takes a fraction such as 0.05, or a percentage such as 5%, "
                        f"not {text!r}") from None
    if not 0 < value < 1:
        raise DmapError(f"--error-rate must be above 0 and below 1 (100%), not {text}")
    if value.denominator > 10**6:  # K = length * numerator // denominator stays well within int64
        raise DmapError(f"--error-rate takes at most six decimal places, not {text}")
    return value


def longest_read(max_query_length: int, error_rate: Fraction) -> tuple[int, int]:
    """The longest read a run at ``error_rate`` maps, and its K.

    A read of m symbols with K edits spans up to m + K reference symbols,
    which must fit in the index's maximum query length (the blocks' overlap),
    and K is at most :data:`MAX_ERRORS_LIMIT`; K grows with m, so the reads
    up to one length fit and longer ones do not (they are written unmapped).
    """
    m = np.arange(max_query_length + 1, dtype=np.int64)
    k = m * error_rate.numerator // error_rate.denominator
    fits = np.flatnonzero((m + k <= max_query_length) & (k <= MAX_ERRORS_LIMIT))
    return int(fits[-1]), int(k[fits[-1]])


def approximate_settings(idx: Index, max_errors: int, report_all: bool, eqx: bool, max_hits: int | None,
                          engine: str, delta: int, neighborhood_errors: int | None,
                          seed_edits: int | None = None, error_rate: Fraction | None = None) -> Approximate | None:
    """Validated settings of seed-and-verify mapping, or None for exact FM-index mapping.

    With ``error_rate``, ``max_errors`` is the largest K of the run's reads
    (:func:`longest_read`), and each read is mapped with its own.
    """
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
        if not max_errors and error_rate is None:
            if report_all or eqx:
                raise DmapError("--all and --eqx apply only with --max-errors K (-e K) or --error-rate: exact "
                                "mapping reports every hit, and its CIGAR is all matches")
            return None
        chance = selective_length(idx.meta.text_length, idx.alphabet.sigma, idx.alphabet.n_strands)
        return Approximate(max_errors, report_all, eqx, max_hits, seed_edits=seed_edits,
                           can_edit=idx.meta.reverse_index, chance_length=chance, error_rate=error_rate)
    params = idx.neighborhood_params
    if params is None:
        raise DmapError(f"index {idx.path!r} has no neighborhood index for --engine phash; rebuild it with "
                        "'dmap index REFERENCE -o INDEX --neighborhood'")
    if delta < 1:
        raise DmapError(f"--delta must be at least 1, not {delta}")
    e = params.max_errors if neighborhood_errors is None else neighborhood_errors
    if not 0 <= e <= MAX_NEIGHBORHOOD_ERRORS:
        raise DmapError(f"--neighborhood-errors must be between 0 and {MAX_NEIGHBORHOOD_ERRORS}, not {e}")
    return Approximate(max_errors, report_all, eqx, max_hits, engine, delta, e, params.window, error_rate=error_rate)
