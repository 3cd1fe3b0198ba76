"""What ``-C`` (each read's FASTQ comment, or a BAM record's tags, on its records) costs, side by
side in one run.

    python3 benchmarks/append_comment.py [--reads 1000000] [--repeat 5] [--work /tmp/dmap-bench]

E. coli reads (``../shared/bench/make_reads.py``) whose headers carry two SAM tags, as
``samtools fastq -T RX,BC`` writes a UMI and a barcode (``@r1 BC:Z:ACGTACGT<TAB>RX:Z:AACCGGTT``),
and the unaligned BAM that ``samtools import -T '*'`` makes of them (the tags in its records).
In alternating rounds:

    dmap run INDEX reads.fq -o fq.sam                  (the comments dropped)
    dmap run INDEX reads.fq -C -o fq_c.sam             (the comments on the records)
    dmap run INDEX reads.bam -o bam.sam                (the tags dropped)
    dmap run INDEX reads.bam -C -o bam_c.sam           (the tags on the records)

Prints the median wall time and CPU seconds (user + system of every process) of each, the
output's size, and checks that the FASTQ and the BAM give the same records, with and without -C.
"""

from __future__ import annotations

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


def commented(fastq: Path) -> tuple[Path, Path]:
    """``fastq`` with two tags in each header, and its unaligned BAM (made once, beside it)."""
    out = fastq.with_name(fastq.stem + "_tags.fq")
    if not out.exists():
        with open(fastq, "rb") as f, open(out.with_suffix(".tmp"), "wb") as g:
            for k, line in enumerate(f):
                g.write(line[:-1] + b" BC:Z:ACGTACGT\tRX:Z:AACCGGTT\n" if k % 4 == 0 else line)
        out.with_suffix(".tmp").rename(out)
    bam = out.with_suffix(".bam")
    if not bam.exists():
        subprocess.run(["samtools", "import", "-T", "*", "-0", str(out), "-o", str(bam)], check=True)
    return out, bam


def main() -> None:
    args = ecoli_arguments(__doc__, repeat=5, errors=False).parse_args()
    work = Path(args.work)
    index, plain = ecoli_case(work, args.reads)
    fastq, bam = commented(plain)
    compile_dmap()
    run = f"{DMAP} run {index} -q"
    names = {"fq": (fastq, ""), "fq_c": (fastq, "-C"), "bam": (bam, ""), "bam_c": (bam, "-C")}
    outputs = {name: work / f"{name}.sam" for name in names}
    commands = {name: f"{run} {reads} {option} -o {outputs[name]}" for name, (reads, option) in names.items()}
    times = shell_rounds(commands, [fastq, bam, index], outputs, args.repeat)
    same = (alignment_digest(outputs["fq"]) == alignment_digest(outputs["bam"])
            and alignment_digest(outputs["fq_c"]) == alignment_digest(outputs["bam_c"]))
    print(f"# {args.reads:,} exact 100-bp E. coli reads, two tags each; medians of {args.repeat}; the FASTQ and "
          f"the BAM give the same records: {same}")
    print_times(times, {name: f"`dmap run INDEX reads.{'fq' if reads == fastq else 'bam'}{' -C' if option else ''}`"
                        for name, (reads, option) in names.items()}, outputs, same)


if __name__ == "__main__":
    main()
