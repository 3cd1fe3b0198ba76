"""How an index is sized: the default block length, the SA sample rate, and the memory
a block's build needs (checked before sorting starts)."""

from __future__ import annotations

from ..errors import InputFormatError
from ..host import format_bytes, memory_budget
from .occ import occ_bytes_per_symbol
from .store import MAX_QUERY_LENGTH

# Every read is searched in every block, so mapping time grows with the
# number of blocks: a 3.1 Gbp reference mapped 2.2x faster in 6 blocks of
# 2^29 than in 12 of 2^28 (docs/performance.md), for 8.2 GB of build memory
# instead of 4.4 GB.  Larger alphabets get shorter blocks by default, so
# that one block's occurrence table stays within MAX_DEVICE_BUFFER.
LONGEST_DEFAULT_BLOCK = 1 << 29
# The smallest per-buffer limit met so far (PoCL on some machines; GPUs
# allow a quarter of their memory).
MAX_DEVICE_BUFFER = 1 << 31
# S, the SA sampling: one SA value every S rows.  A row reached by an LF
# step is sampled with chance 1/S, so a locate walk takes about S-1 LF steps
# (geometric: with S = 16, mean 15 and p99 71), and a work-item advancing
# 16 walks in step waits for the longest.  Against 32 (bowtie's and bwa's
# default), 16 mapped exact reads 20% faster for 0.125 more bytes per symbol;
# on E. coli, keeping every SA value (S = 1: no walks at all) mapped 10M reads
# in 25-35% less time than S = 16 (docs/performance.md, "SA sample rate").  So
# by default a reference keeps every SA value while they take at most
# SA_SAMPLE_BUDGET bytes (64 M symbols), and S doubles beyond that, up to 8
# from 512 M symbols (a human genome: 0.5 bytes per symbol).  Not 16: with
# -e 3 every seed hit in a repeat family is located, and 1M mason reads on a
# 1 Gbp reference with repeats mapped in 19.4-20.7 s with S = 8 against
# 23.0-24.0 s with S = 16 (alternating), for 8% more index.  S = 4 took
# 16.7-17.9 s against S = 8's 18.3-19.3 s, for another 0.5 GB of memory.
# On a 3.1 Gbp one, 53.1 s against 60.9 s with S = 16 (docs/performance.md,
# "SA sample rate").
SA_SAMPLE_BUDGET = 1 << 28
MAX_DEFAULT_SA_SAMPLE_RATE = 8
# Each block's SA must stay int32 and its occ table under PoCL's per-buffer cap.
MAX_BLOCK_LENGTH = (1 << 30) - 1


def default_sa_sample_rate(text_length: int) -> int:
    """S for a reference of ``text_length`` symbols: the smallest power of two
    whose SA samples (4 bytes each) fit SA_SAMPLE_BUDGET, at most MAX_DEFAULT_SA_SAMPLE_RATE."""
    rate = 1
    while rate < MAX_DEFAULT_SA_SAMPLE_RATE and 4 * text_length > SA_SAMPLE_BUDGET * rate:
        rate *= 2
    return rate


def build_bytes_per_symbol(sigma: int, rate: int) -> float:
    """Peak build memory per symbol of the block being built: the int32
    suffix array, BWT, text and sorting space, plus an occurrence table's
    worth.  Measured 15.3-16.2 bytes for DNA and 19.3 for protein
    (docs/performance.md); this gives 16 and 20.5."""
    return 15 + occ_bytes_per_symbol(sigma, rate)


def default_block_length(sigma: int, rate: int) -> int:
    """The longest power of two up to LONGEST_DEFAULT_BLOCK whose occurrence table, with the longest
    overlap, fits MAX_DEVICE_BUFFER."""
    longest = MAX_DEVICE_BUFFER / occ_bytes_per_symbol(sigma, rate) - MAX_QUERY_LENGTH
    return min(LONGEST_DEFAULT_BLOCK, 1 << (int(longest).bit_length() - 1))


def check_build_memory(longest_block: int, per_symbol: float) -> None:
    """Refuse, before sorting, a block this machine cannot build (instead of being killed
    mid-build): the memory available is the machine's, or less under a memory limit such as a
    SLURM job's (:func:`dmap.host.memory_budget`)."""
    budget = memory_budget()
    need = int(per_symbol * longest_block)
    if need > budget.available:
        fits = 1 << max(int(budget.available // per_symbol).bit_length() - 2, 0)  # with room to spare
        raise InputFormatError(
            f"building a block of {longest_block} symbols needs about {format_bytes(need)} of memory, but "
            f"{budget.describe_available()}; pass a smaller --block-length, e.g. {fits}"
        )


def parallel_sorts(threads: int, sorts: int, longest_block: int, per_symbol: float) -> int:
    """How many of a build's ``sorts`` (a block's text and its reverse, each sorted and indexed
    on its own) run at once: at most ``threads``, and no more than the memory available holds,
    each taking what :func:`check_build_memory` counts for one block (which refuses a block that
    does not fit once)."""
    fit = int(memory_budget().available // max(per_symbol * longest_block, 1))
    return max(1, min(threads, sorts, fit))
