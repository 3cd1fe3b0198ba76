"""BAM and compressed SAM written by dmap's workers against dmap's SAM piped into samtools, side by
side in one run.

    python3 benchmarks/bam_output.py [--reads 1000000] [--max-errors 0] [--repeat 3] [--work /tmp/dmap-bench]

In rounds (the order reversed every other one), on E. coli reads (``../shared/bench/make_reads.py``;
with ``--max-errors K``, K substitutions per read and ``-e K``):

    dmap run INDEX READS -o dmap.bam                                   (BAM from the workers)
    dmap run INDEX READS | samtools view -b -@ 2 -o samtools.bam       (SAM, made BAM by samtools)
    dmap run INDEX READS -o dmap.sam.gz                                (SAM in BGZF blocks, from the workers)
    dmap run INDEX READS | samtools view -h --output-fmt sam.gz -@ 2 -o samtools.sam.gz
    dmap run INDEX READS -o dmap.sam                                   (SAM, for reference)

Prints the median wall time, CPU seconds (user + system of every process)
and output size of each, and checks that dmap's and samtools' files of each
format hold the same records (``samtools view`` of each).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from exact_vs_bowtie import DMAP, compile_dmap, ecoli_arguments, ecoli_case, print_times, shell_rounds


def records_digest(path: Path) -> str:
    view = subprocess.run(["samtools", "view", str(path)], capture_output=True, check=True).stdout
    return hashlib.sha256(view).hexdigest()


def main() -> None:
    args = ecoli_arguments(__doc__).parse_args()
    work = Path(args.work)
    index, reads = ecoli_case(work, args.reads, args.max_errors)
    compile_dmap()
    run = f"{DMAP} run {index} {reads} -q" + (f" -e {args.max_errors}" if args.max_errors else "")
    to_bam, to_gz = "dmap | samtools view -b -@ 2", "dmap | samtools view --output-fmt sam.gz -@ 2"
    outputs = {"dmap -o out.bam": work / "dmap.bam", to_bam: work / "samtools.bam",
               "dmap -o out.sam.gz": work / "dmap.sam.gz", to_gz: work / "samtools.sam.gz",
               "dmap -o out.sam": work / "dmap.sam"}
    commands = {"dmap -o out.bam": f"{run} -o {outputs['dmap -o out.bam']}",
                to_bam: f"{run} | samtools view -b -@ 2 -o {outputs[to_bam]}",
                "dmap -o out.sam.gz": f"{run} -o {outputs['dmap -o out.sam.gz']}",
                to_gz: f"{run} | samtools view -h --output-fmt sam.gz -@ 2 -o {outputs[to_gz]}",
                "dmap -o out.sam": f"{run} -o {outputs['dmap -o out.sam']}"}
    times = shell_rounds(commands, [reads, index], outputs, args.repeat)
    same = all(records_digest(outputs[ours]) == records_digest(outputs[theirs])
               for ours, theirs in (("dmap -o out.bam", to_bam), ("dmap -o out.sam.gz", to_gz)))
    print(f"# {args.reads:,} 100-bp E. coli reads, {'exact' if not args.max_errors else f'-e {args.max_errors}'}; "
          f"medians of {args.repeat}; the same records in dmap's and samtools' files of each format: {same}")
    print_times(times, {name: f"`{name}`" for name in commands}, outputs, same)


if __name__ == "__main__":
    main()
