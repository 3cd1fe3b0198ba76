"""A FASTQ file's reads cut to random lengths, as adapter and quality trimming (fastp,
Trimmomatic) leave second mates: the two files of a pair then hold records of other lengths,
so their byte ranges fall at other records.

    python3 benchmarks/trimmed_mates.py READS_2.fq TRIMMED_2.fq [--shortest 60] [--seed 1]

Each read keeps its first ``n`` bases and qualities, ``n`` drawn uniformly from ``--shortest``
to its length.  Used as the mates of an untrimmed file, and by ``allmap_vs_peers.py --trimmed`` for reads of many
lengths mapped at an error rate:

    python3 benchmarks/ab_packages.py exact_1000000_100_1.fq --mates TRIMMED_2.fq old=DIR new=DIR
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reads")
    ap.add_argument("out")
    ap.add_argument("--shortest", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    trim(args.reads, args.out, args.shortest, args.seed)


def trim(reads: str, out_path: str, shortest: int, seed: int = 1) -> None:
    """Write ``reads`` (FASTQ) to ``out_path``, each read cut to a length drawn from ``shortest`` to its own."""
    rng = np.random.default_rng(seed)
    with open(reads, "rb") as f, open(out_path, "wb") as out:
        while head := f.readline():
            seq, plus, qual = f.readline().rstrip(b"\n"), f.readline(), f.readline().rstrip(b"\n")
            n = int(rng.integers(min(shortest, len(seq)), len(seq) + 1))
            out.write(head + seq[:n] + b"\n" + plus + qual[:n] + b"\n")


if __name__ == "__main__":
    main()
