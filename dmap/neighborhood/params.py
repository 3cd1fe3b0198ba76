"""Parameters of a neighborhood index, and how windows become (seed, key) pairs.

A *window* at reference position p is ``span`` seed symbols followed by
``LN`` neighborhood symbols.  The seed is read at the mask's ``#``
positions (``-`` positions are wildcards: a spaced seed), as one integer in
base sigma, first ``#`` most significant.  The neighborhood is packed into
one integer *key*, ``bits`` per symbol, first symbol most significant.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..errors import InputFormatError

MAX_SEED_TABLE = 1 << 24  # seeds per block table (sigma ** weight): 64 MiB of offsets at most
MAX_NEIGHBORHOOD_ERRORS = 2  # as in the paper: |Pi(b)| grows as LN ** E
# Names the vertex hash (bdz.jenkins3 and kernels/neighborhood.cl); an index
# built with another one must be rebuilt, since its families would not peel.
HASH_FUNCTION = "jenkins-mix1-cb"


def bits_per_symbol(sigma: int) -> int:
    return max(1, int(sigma - 1).bit_length())


@dataclass(frozen=True)
class NeighborhoodSpec:
    """What a user asks for (``dmap index --neighborhood``); the alphabet completes it."""

    seed_length: int = 8
    neighborhood_length: int = 7
    spaced_seed: str | None = None
    max_errors: int = 1


@dataclass(frozen=True)
class NeighborhoodParams:
    """What a neighborhood index was built with (stored in the index metadata).

    Parameters
    ----------
    mask
        Seed shape: ``#`` must match, ``-`` is a wildcard (``"########"`` is
        a contiguous seed of length 8).
    neighborhood_length
        LN, the right neighborhood's length.
    max_errors
        E, the default number of substitutions allowed in the neighborhood
        at search time (0 to 2).
    sigma
        Alphabet size of the index.
    """

    mask: str
    neighborhood_length: int
    max_errors: int
    sigma: int
    hash_function: str = HASH_FUNCTION

    @property
    def span(self) -> int:
        return len(self.mask)

    @property
    def weight(self) -> int:
        return self.mask.count("#")

    @property
    def window(self) -> int:
        """Symbols a pattern covers: the seed's span plus the neighborhood."""
        return self.span + self.neighborhood_length

    @property
    def bits(self) -> int:
        return bits_per_symbol(self.sigma)

    @property
    def n_seeds(self) -> int:
        return self.sigma ** self.weight

    @property
    def key_dtype(self) -> np.dtype:
        used = self.bits * self.neighborhood_length
        return np.dtype(np.uint16 if used <= 16 else np.uint32 if used <= 32 else np.uint64)

    @property
    def seed_positions(self) -> np.ndarray:
        return np.array([i for i, c in enumerate(self.mask) if c == "#"], dtype=np.int64)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> NeighborhoodParams:
        return cls(**d)

    @classmethod
    def create(cls, sigma: int, seed_length: int, neighborhood_length: int, spaced_seed: str | None = None,
               max_errors: int = 1) -> NeighborhoodParams:
        """Validated parameters, with a clear error for each bad value."""
        if seed_length < 1:
            raise InputFormatError(f"--seed-length must be at least 1, not {seed_length}")
        mask = spaced_seed if spaced_seed is not None else "#" * seed_length
        if not mask or set(mask) - {"#", "-"} or mask[0] != "#" or mask[-1] != "#":
            raise InputFormatError(f"--spaced-seed {mask!r}: use '#' (must match) and '-' (any symbol), "
                                   "starting and ending with '#', e.g. '######-##'")
        if len(mask) > 64:
            raise InputFormatError(f"--spaced-seed {mask!r} is longer than 64 positions")
        if mask.count("#") != seed_length:
            raise InputFormatError(f"--spaced-seed {mask!r} has {mask.count('#')} '#' positions but --seed-length "
                                   f"is {seed_length}; they must agree")
        if sigma ** seed_length > MAX_SEED_TABLE:
            raise InputFormatError(f"--seed-length {seed_length} gives {sigma}**{seed_length} seeds per block, more "
                                   f"than {MAX_SEED_TABLE}; use a shorter seed")
        bits = bits_per_symbol(sigma)
        if not 1 <= neighborhood_length <= 64 // bits:
            raise InputFormatError(f"--neighborhood-length must be between 1 and {64 // bits} for this alphabet "
                                   f"({bits} bits per symbol in a 64-bit key), not {neighborhood_length}")
        if not 0 <= max_errors <= MAX_NEIGHBORHOOD_ERRORS:
            raise InputFormatError(f"--max-errors-in-neighborhood must be between 0 and {MAX_NEIGHBORHOOD_ERRORS}, "
                                   f"not {max_errors}")
        return cls(mask, neighborhood_length, max_errors, sigma)


def reference_windows(text: np.ndarray, params: NeighborhoodParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every indexable window of a block's text: ``(position, seed, key)``.

    A window with a code >= sigma anywhere (a contig separator or a
    reference ``N``, even under a wildcard) is not indexed: no alignment
    crosses a contig, and a reference ``N`` matches nothing.
    """
    n = text.size - params.window + 1
    if n <= 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z.astype(np.uint64)
    bad = np.zeros(text.size + 1, dtype=np.int64)
    np.cumsum(text >= params.sigma, out=bad[1:])
    pos = np.flatnonzero(bad[params.window:params.window + n] == bad[:n])
    seed = np.zeros(pos.size, dtype=np.int64)
    for i in params.seed_positions.tolist():
        seed = seed * params.sigma + text[pos + i]
    key = np.zeros(pos.size, dtype=np.uint64)
    for j in range(params.neighborhood_length):
        key = (key << np.uint64(params.bits)) | text[pos + params.span + j].astype(np.uint64)
    return pos, seed, key
