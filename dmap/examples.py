"""A small example to try dmap on: a 3-contig genome and reads from it.

``dmap.write_example(directory)`` writes ``genome.fa`` (470 kbp: two
chromosomes and a plasmid, with a tandem repeat, an assembly gap of ``N``
and a 2 kbp segmental duplication, the structures that make reads map more
than once or not at all) and ``reads.fq`` (20,000 100-bp reads, half
reverse-complemented, one in ten random so that it maps nowhere);
``dmap.write_example_pairs(directory)`` writes paired-end reads of the same
genome (``reads_1.fq``, ``reads_2.fq``).  The notebooks and ``make demo``
use them; they need nothing but numpy.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .alphabet import reverse_complement

N_READS = 20_000
N_PAIRS = 10_000
READ_LENGTH = 100
FRAGMENT = (300, 30)  # the example pairs' fragment length: mean and standard deviation


def _contigs(rng: np.random.Generator) -> dict[str, str]:
    """The example genome's contigs, drawn from ``rng``."""
    bases = np.frombuffer(b"ACGT", np.uint8)
    contigs = {}
    for name, n in (("chr1", 300_000), ("chr2", 150_000), ("plasmid", 20_000)):
        seq = bases[rng.integers(0, 4, n)].copy()
        seq[1000:1300] = np.frombuffer(b"AC" * 150, np.uint8)  # a tandem repeat
        seq[5000:5500] = ord("N")  # an assembly gap
        contigs[name] = seq.tobytes().decode()
    # A segmental duplication: 2 kbp of chr1 copied into chr2.
    contigs["chr2"] = contigs["chr2"][:9000] + contigs["chr1"][20000:22000] + contigs["chr2"][11000:]
    return contigs


def _random_read(rng: np.random.Generator) -> str:
    """A read from nowhere in the genome."""
    return np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, READ_LENGTH)].tobytes().decode()


def write_example(directory: str | os.PathLike, seed: int = 7) -> tuple[Path, Path]:
    """Write ``genome.fa`` and ``reads.fq`` into ``directory`` (made if missing).

    Returns
    -------
    tuple of Path
        The genome and the reads.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    contigs = _contigs(rng)
    genome, reads = out / "genome.fa", out / "reads.fq"
    with open(genome, "w") as f:
        for name, seq in contigs.items():
            f.write(f">{name}\n" + "\n".join(seq[i: i + 70] for i in range(0, len(seq), 70)) + "\n")
    names = list(contigs)
    with open(reads, "w") as f:
        for i in range(N_READS):
            seq = contigs[names[i % 3]]
            at = int(rng.integers(0, len(seq) - READ_LENGTH))
            read = seq[at: at + READ_LENGTH]
            if "N" in read or i % 10 == 9:
                read = _random_read(rng)  # maps nowhere
            if i % 2:
                read = reverse_complement(read)
            f.write(f"@read{i}\n{read}\n+\n{'I' * READ_LENGTH}\n")
    return genome, reads


def write_example_pairs(directory: str | os.PathLike, seed: int = 7) -> tuple[Path, Path]:
    """Write ``reads_1.fq`` and ``reads_2.fq`` into ``directory`` (made if missing): paired-end
    reads of the genome that :func:`write_example` writes with the same ``seed``.

    :data:`N_PAIRS` pairs of 100-bp mates from the two ends of fragments of
    300 +- 30 bp, facing each other (FR, as Illumina's paired-end reads), the
    first mate from either strand; in one pair in ten the second mate is
    random, so that the pair is not proper.

    Returns
    -------
    tuple of Path
        The files of first and of second mates.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    contigs = _contigs(rng)
    names = list(contigs)
    first, second = out / "reads_1.fq", out / "reads_2.fq"
    with open(first, "w") as f1, open(second, "w") as f2:
        for i in range(N_PAIRS):
            seq = contigs[names[i % 3]]
            size = int(np.clip(rng.normal(*FRAGMENT), 2 * READ_LENGTH, 500))
            at = int(rng.integers(0, len(seq) - size))
            fragment = seq[at: at + size]
            if i % 2:
                fragment = reverse_complement(fragment)  # the first mate on the reverse strand
            mates = [fragment[:READ_LENGTH], reverse_complement(fragment[-READ_LENGTH:])]
            if i % 10 == 9:
                mates[1] = _random_read(rng)
            for f, m, read in ((f1, 1, mates[0]), (f2, 2, mates[1])):
                f.write(f"@pair{i}/{m}\n{read}\n+\n{'I' * READ_LENGTH}\n")
    return first, second
