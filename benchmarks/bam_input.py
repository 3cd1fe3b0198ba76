"""Reads from unaligned BAM, read by dmap's workers, against the same reads as FASTQ and against
``samtools fastq`` piped into dmap, side by side in one run.

    python3 benchmarks/bam_input.py [--reads 1000000] [--max-errors 0] [--repeat 3] [--work /tmp/dmap-bench]

In alternating rounds, on E. coli reads (``../shared/bench/make_reads.py``; with
``--max-errors K``, K substitutions per read and ``-e K``), made unaligned BAM once by
``samtools import -0 READS.fq -o READS.bam``:

    dmap run INDEX READS.fq -o fastq.sam                           (FASTQ, cut by the workers)
    dmap run INDEX READS.bam -o bam.sam                            (BAM, cut and decoded by the workers)
    samtools fastq READS.bam | dmap run INDEX - -o pipe.sam        (BAM made FASTQ by samtools, a stream)

Prints the median wall time and CPU seconds (user + system of every process) of each,
and checks that the three hold the same records.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from exact_vs_bowtie import DMAP, alignment_digest, compile_dmap, ecoli_case, median_times, shell_rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/dmap-bench")
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--max-errors", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    work = Path(args.work)
    index, fastq = ecoli_case(work, args.reads, args.max_errors)
    bam = fastq.with_suffix(".bam")
    if not bam.exists():
        subprocess.run(["samtools", "import", "-0", str(fastq), "-o", str(bam)], check=True)
    compile_dmap()
    run = f"{DMAP} run {index}" + (f" -e {args.max_errors}" if args.max_errors else "") + " -q"
    outputs = {name: work / f"{name}.sam" for name in ("fastq", "bam", "pipe")}
    commands = {"fastq": f"{run} {fastq} -o {outputs['fastq']}",
                "bam": f"{run} {bam} -o {outputs['bam']}",
                "pipe": f"samtools fastq {bam} 2>/dev/null | {run} - -o {outputs['pipe']}"}
    labels = {"fastq": "`dmap run INDEX reads.fq`", "bam": "`dmap run INDEX reads.bam`",
              "pipe": "`samtools fastq reads.bam \\| dmap run INDEX -`"}
    times = shell_rounds(commands, [fastq, bam, index], outputs, args.repeat)
    same = len({alignment_digest(path) for path in outputs.values()}) == 1
    print(f"# {args.reads:,} 100-bp E. coli reads, {'exact' if not args.max_errors else f'-e {args.max_errors}'}; "
          f"FASTQ {fastq.stat().st_size / 1e6:.0f} MB, BAM {bam.stat().st_size / 1e6:.0f} MB; medians of "
          f"{args.repeat}; the same records from all three: {same}")
    print("\n| command | wall s | CPU s |")
    print("|---|---|---|")
    for name in commands:
        wall, cpu = median_times(times[name])
        print(f"| {labels[name]} | {wall:.2f} | {cpu:.2f} |")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
