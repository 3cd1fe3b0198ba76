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
import hashlib
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from exact_vs_bowtie import DMAP, compile_dmap, ecoli_reference, measure, simulated_reads


def records_digest(path: Path) -> str:
    """The SHA-256 of a SAM file's records (its header, which names the command, left out)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for line in f:
            if not line.startswith(b"@"):
                h.update(line)
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/dmap-bench")
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--max-errors", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    work = Path(args.work)
    ref = ecoli_reference(work)
    index = work / "ecoli.dmap"
    if not index.exists():
        subprocess.run([DMAP, "index", str(ref), "-o", str(index), "-q"], check=True)
    fastq = simulated_reads(work, ref, args.reads, 100, args.max_errors)
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
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
    for k in range(args.repeat):
        for name in (list(commands) if k % 2 == 0 else list(commands)[::-1]):
            outputs[name].unlink(missing_ok=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            r = measure(["bash", "-o", "pipefail", "-c", commands[name]], [fastq, bam, index])
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            times[name].append((r["wall"], after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime))
    same = len({records_digest(path) for path in outputs.values()}) == 1
    print(f"# {args.reads:,} 100-bp E. coli reads, {'exact' if not args.max_errors else f'-e {args.max_errors}'}; "
          f"FASTQ {fastq.stat().st_size / 1e6:.0f} MB, BAM {bam.stat().st_size / 1e6:.0f} MB; medians of "
          f"{args.repeat}; the same records from all three: {same}")
    print("\n| command | wall s | CPU s |")
    print("|---|---|---|")
    for name in commands:
        wall = statistics.median(w for w, _ in times[name])
        cpu = statistics.median(c for _, c in times[name])
        print(f"| {labels[name]} | {wall:.2f} | {cpu:.2f} |")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
