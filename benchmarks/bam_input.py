"""Reads from unaligned BAM, read by dmap's workers, against the same reads as FASTQ and against
``samtools fastq`` piped into dmap, side by side in one run.

    python3 benchmarks/bam_input.py [--reads 1000000] [--max-errors 0] [--repeat 3] [--lanes 4] [--work /tmp/dmap-bench]

In alternating rounds, on E. coli reads (``../shared/bench/make_reads.py``; with
``--max-errors K``, K substitutions per read and ``-e K``), made unaligned BAM once by
``samtools import -0 READS.fq -o READS.bam``:

    dmap run INDEX READS.fq -o fastq.sam                           (FASTQ, cut by the workers)
    dmap run INDEX READS.bam -o bam.sam                            (BAM, cut and decoded by the workers)
    samtools fastq READS.bam | dmap run INDEX - -o pipe.sam        (BAM made FASTQ by samtools, a stream)
    dmap run INDEX - -o stdin.sam < READS.bam                      (BAM on standard input: the client cuts its
                                                                    BGZF blocks, the workers inflate them)
    samtools view -u READS.bam | dmap run INDEX - -o view.sam      (uncompressed BAM from samtools, a stream)

With ``--lanes N``, the reads are cut into N lanes instead, each imported with a read group of
its own (``samtools import -r ID:Lk``) and merged into one BAM (``samtools cat``, the header
naming them all), and two runs of it alternate:

    dmap run INDEX LANES.bam -o lanes.sam                          (each read's group from its RG tag)
    dmap run INDEX LANES.bam -R '@RG\tID:x' -o one.sam             (one read group: no tag read)

Prints the median wall time and CPU seconds (user + system of every process) of each,
and checks that they hold the same records (but their RG tags).
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

from exact_vs_bowtie import (
    DMAP,
    alignment_digest,
    compile_dmap,
    ecoli_arguments,
    ecoli_case,
    print_times,
    shell_rounds,
)


def main() -> None:
    ap = ecoli_arguments(__doc__)
    ap.add_argument("--lanes", type=int, default=0, help="merged lanes, each its read group, against -R")
    args = ap.parse_args()
    work = Path(args.work)
    index, fastq = ecoli_case(work, args.reads, args.max_errors)
    compile_dmap()
    run = f"{DMAP} run {index}" + (f" -e {args.max_errors}" if args.max_errors else "") + " -q"
    if args.lanes:
        lanes(work, index, fastq, run, args)
        return
    bam = fastq.with_suffix(".bam")
    if not bam.exists():
        subprocess.run(["samtools", "import", "-0", str(fastq), "-o", str(bam)], check=True)
    outputs = {name: work / f"{name}.sam" for name in ("fastq", "bam", "pipe", "stdin", "view")}
    commands = {"fastq": f"{run} {fastq} -o {outputs['fastq']}",
                "bam": f"{run} {bam} -o {outputs['bam']}",
                "pipe": f"samtools fastq {bam} 2>/dev/null | {run} - -o {outputs['pipe']}",
                "stdin": f"{run} - -o {outputs['stdin']} < {bam}",
                "view": f"samtools view -u {bam} | {run} - -o {outputs['view']}"}
    labels = {"fastq": "`dmap run INDEX reads.fq`", "bam": "`dmap run INDEX reads.bam`",
              "pipe": "`samtools fastq reads.bam \\| dmap run INDEX -`", "stdin": "`dmap run INDEX - < reads.bam`",
              "view": "`samtools view -u reads.bam \\| dmap run INDEX -`"}
    times = shell_rounds(commands, [fastq, bam, index], outputs, args.repeat)
    same = len({alignment_digest(path) for path in outputs.values()}) == 1
    print(f"# {args.reads:,} 100-bp E. coli reads, {'exact' if not args.max_errors else f'-e {args.max_errors}'}; "
          f"FASTQ {fastq.stat().st_size / 1e6:.0f} MB, BAM {bam.stat().st_size / 1e6:.0f} MB; medians of "
          f"{args.repeat}; the same records from all five: {same}")
    print_times(times, labels, same=same)


def merged_lanes(work: Path, fastq: Path, n: int) -> Path:
    """``fastq`` cut into ``n`` lanes of as many reads, each imported with its read group (``Lk``),
    merged into one BAM whose header names them all (made once)."""
    bam = work / f"{fastq.stem}_{n}_lanes.bam"
    if bam.exists():
        return bam
    lines = fastq.read_bytes().splitlines(keepends=True)
    per_lane = -(-len(lines) // 4 // n) * 4
    parts = []
    for k in range(n):
        part = work / f"{fastq.stem}_lane{k}.fq"
        part.write_bytes(b"".join(lines[k * per_lane:(k + 1) * per_lane]))
        parts.append(part.with_suffix(".bam"))
        subprocess.run(["samtools", "import", "-0", str(part), "-r", f"ID:L{k}", "-r", "SM:s", "-r", "PL:ILLUMINA",
                        "-o", str(parts[-1])], check=True)
        part.unlink()
    header = subprocess.run(["samtools", "view", "-H", str(parts[0])], capture_output=True, text=True,
                            check=True).stdout
    groups = "".join(f"@RG\tID:L{k}\tSM:s\tPL:ILLUMINA\n" for k in range(n))
    (work / "lanes_header.sam").write_text(re.sub(r"@RG\t[^\n]*\n", "", header) + groups)
    subprocess.run(["samtools", "cat", "-h", str(work / "lanes_header.sam"), "-o", str(bam), *map(str, parts)],
                   check=True)
    for part in parts:
        part.unlink()
    return bam


def lanes(work: Path, index: Path, fastq: Path, run: str, args: argparse.Namespace) -> None:
    """``--lanes``: the merged lanes mapped with each read's group from its tag, against one ``-R``."""
    bam = merged_lanes(work, fastq, args.lanes)
    outputs = {name: work / f"{name}.sam" for name in ("lanes", "one")}
    commands = {"lanes": f"{run} {bam} -o {outputs['lanes']}",
                "one": f"{run} {bam} -R '@RG\\tID:x' -o {outputs['one']}"}
    times = shell_rounds(commands, [bam, index], outputs, args.repeat)
    same = len({alignment_digest(path, without_tag=b"\tRG:Z:") for path in outputs.values()}) == 1
    print(f"# {args.reads:,} 100-bp E. coli reads in {args.lanes} lanes of one BAM ({bam.stat().st_size / 1e6:.0f} "
          f"MB), {'exact' if not args.max_errors else f'-e {args.max_errors}'}; medians of {args.repeat}; the "
          f"same records but their RG tags: {same}")
    print_times(times, {"lanes": "`dmap run INDEX lanes.bam` (RG tags read)",
                        "one": "`dmap run INDEX lanes.bam -R '@RG\\tID:x'`"}, same=same)


if __name__ == "__main__":
    main()
