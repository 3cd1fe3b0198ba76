"""A small example to try dmap on: a 3-contig genome and reads from it.

``dmap.write_example(directory)`` writes ``genome.fa`` (470 kbp: two
chromosomes and a plasmid, with a tandem repeat, an assembly gap of ``N``
and a 2 kbp segmental duplication, the structures that make reads map more
than once or not at all) and ``reads.fq`` (20,000 100-bp reads, half
reverse-complemented, one in ten random so that it maps nowhere).  The
notebooks and ``make demo`` use it; it needs nothing but numpy.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

N_READS = 20_000
READ_LENGTH = 100


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
    bases = np.frombuffer(b"ACGT", np.uint8)
    contigs = {}
    for name, n in (("chr1", 300_000), ("chr2", 150_000), ("plasmid", 20_000)):
        seq = bases[rng.integers(0, 4, n)].copy()
        seq[1000:1300] = np.frombuffer(b"AC" * 150, np.uint8)  # a tandem repeat
        seq[5000:5500] = ord("N")  # an assembly gap
        contigs[name] = seq.tobytes().decode()
    # A segmental duplication: 2 kbp of chr1 copied into chr2.
    contigs["chr2"] = contigs["chr2"][:9000] + contigs["chr1"][20000:22000] + contigs["chr2"][11000:]
    genome, reads = out / "genome.fa", out / "reads.fq"
    with open(genome, "w") as f:
        for name, seq in contigs.items():
            f.write(f">{name}\n" + "\n".join(seq[i: i + 70] for i in range(0, len(seq), 70)) + "\n")
    comp = str.maketrans("ACGT", "TGCA")
    names = list(contigs)
    with open(reads, "w") as f:
        for i in range(N_READS):
            seq = contigs[names[i % 3]]
            at = int(rng.integers(0, len(seq) - READ_LENGTH))
            read = seq[at: at + READ_LENGTH]
            if "N" in read or i % 10 == 9:
                read = bases[rng.integers(0, 4, READ_LENGTH)].tobytes().decode()  # maps nowhere
            if i % 2:
                read = read.translate(comp)[::-1]
            f.write(f"@read{i}\n{read}\n+\n{'I' * READ_LENGTH}\n")
    return genome, reads
