"""Paired-end reads: dmap -e K against Yara, bwa mem and bowtie2, side by side in one run.

    python3 benchmarks/pairs_vs_peers.py [--pairs 500000] [--length 100] [--errors 3] [--refs ecoli synth]
                                         [--threads 2] [--repeat 1] [--work /tmp/dmap-bench]
    python3 benchmarks/pairs_vs_peers.py --error-rate 5 --trimmed 40 --refs ecoli   # trimmed mates, a rate

Pairs come from ``mason_simulator -ir REF -n N --illumina-read-length L -o r1.fq -or r2.fq
-oa truth.sam`` (seed 1: fragments of 300 +- 30 bp, its Illumina error profile), on
E. coli and the 100 Mbp synthetic reference (``make_ref.py --size 100000000
--contigs 4 --seed 5``).  In alternating order:

    dmap run INDEX r1.fq r2.fq -e K -o OUT              insert bounds estimated from the first chunk
    yara_mapper -e PCT -y full -t T INDEX r1.fq r2.fq -o OUT
    bwa mem -t T REF r1.fq r2.fq -o OUT
    bowtie2 -p T -x REF -1 r1.fq -2 r2.fq -S OUT

With ``--error-rate PCT`` each mate's K is floor(PCT / 100 x its length):
``dmap run --error-rate PCT%`` against ``yara_mapper -e PCT``; with
``--trimmed SHORTEST`` each mate is first cut to a length drawn from
SHORTEST to its own (``trimmed_mates.py``; a reverse mate's leftmost
position then moves right by what was cut, and mason's is moved with it).

Reported per mapper: wall time, pairs/s, peak RSS, the share of pairs whose
primary records are a proper pair (flag 0x2), and the share whose two
primary records lie where mason placed the mates (same contig, leftmost
position within 10: a mapper may clip or place an indel differently).
dmap's speed is given against Yara, the full-sensitivity mapper of the row.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from allmap_vs_peers import OUT, dmap_label, heuristic_indexes, indexes, reference, run_rounds, tool
from exact_vs_bowtie import DMAP, compile_dmap
from trimmed_mates import trim

SLACK = 10  # positions a placement may differ from mason's and count as correct


def mason_pairs(work: Path, ref: Path, n: int, length: int, threads: int) -> tuple[Path, Path, Path]:
    """``n`` pairs of ``length`` from ``ref`` by mason_simulator (seed 1), and its truth SAM; made once."""
    stem = work / f"mason_pairs_{ref.stem}_{n}_{length}"
    r1, r2, truth = (Path(f"{stem}_{x}") for x in ("1.fq", "2.fq", "truth.sam"))
    if not truth.exists():
        subprocess.run([tool("mason_simulator"), "-ir", str(ref), "-n", str(n), "--illumina-read-length",
                        str(length), "-o", str(r1), "-or", str(r2), "-oa", str(truth), "--seed", "1",
                        "--num-threads", str(threads), "-q"], check=True, capture_output=True)
    return r1, r2, truth


def trimmed_pairs(r1: Path, r2: Path, shortest: int) -> tuple[Path, Path]:
    """Both mates' files with each mate cut to a length from ``shortest`` to its own (seeds 1 and 2), made once."""
    out = []
    for seed, path in enumerate((r1, r2), 1):
        cut = path.with_name(f"{path.stem}_trimmed{shortest}.fq")
        if not cut.exists():
            trim(str(path), str(cut), shortest, seed)
        out.append(cut)
    return out[0], out[1]


def lengths(fastq: Path) -> dict[str, int]:
    """Read name (without /1 /2) -> length."""
    with open(fastq) as f:
        return {re.sub(r"/[12]$", "", head[1:].split()[0]): len(seq.rstrip("\n"))
                for head, seq, _, _ in zip(f, f, f, f)}


def commands(ref: Path, idx: dict[str, Path], r1: Path, r2: Path, length: int, k: int | None,
             threads: int, percent: int | None = None) -> dict[str, list[str]]:
    """Each mapper's command line, its output written as :data:`OUT`: K edits, or with ``percent``
    each mate's K of that error rate."""
    t = str(threads)
    errors = ["-e", str(k)] if percent is None else ["--error-rate", f"{percent}%"]
    name = dmap_label(k, percent)
    percent = -(-100 * k // length) if percent is None else percent
    cmds = {
        name: [DMAP, "run", str(idx["dmap"]), str(r1), str(r2), *errors, "-o", OUT],
        "yara": [tool("yara_mapper"), "-e", str(percent), "-y", "full", "-t", t, str(idx["yara"]), str(r1),
                 str(r2), "-o", OUT],
        "bwa mem": ["bwa", "mem", "-t", t, "-o", OUT, str(ref), str(r1), str(r2)],
        "bowtie2": ["bowtie2", "-p", t, "-x", str(ref.with_suffix(".bt2")), "-1", str(r1), "-2", str(r2),
                    "-S", OUT],
    }
    heuristic_indexes(ref, threads)
    return {name: cmd for name, cmd in cmds.items() if shutil.which(cmd[0]) or Path(cmd[0]).exists()}


def primaries(sam: Path) -> dict[tuple[str, int], tuple[str, int, int]]:
    """(name without /1 /2, mate 1 or 2) -> (contig, 1-based position, flag) of each primary record."""
    out = {}
    with open(sam) as f:
        for line in f:
            if line.startswith("@"):
                continue
            name, flag, contig, pos = line.split("\t", 4)[:4]
            flag = int(flag)
            if flag & 0x900:
                continue
            out[(re.sub(r"/[12]$", "", name), 1 if flag & 0x40 else 2)] = (contig, int(pos), flag)
    return out


def scores(sam: Path, truth: dict[tuple[str, int], tuple[str, int, int]]) -> tuple[float, float]:
    """Percent of pairs properly paired, and percent whose two mates lie where mason put them."""
    got = primaries(sam)
    names = {n for n, _ in truth}
    proper = correct = 0
    for n in names:
        a, b = got.get((n, 1)), got.get((n, 2))
        proper += a is not None and bool(a[2] & 2)
        correct += all(x is not None and not x[2] & 4 and x[0] == t[0] and abs(x[1] - t[1]) <= SLACK
                       for x, t in ((a, truth[(n, 1)]), (b, truth[(n, 2)])))
    return 100 * proper / len(names), 100 * correct / len(names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=500_000)
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--errors", type=int, default=3, help="K")
    ap.add_argument("--error-rate", type=int, default=None, metavar="PCT",
                    help="instead of K: each mate's K is floor(PCT / 100 x its length)")
    ap.add_argument("--trimmed", type=int, default=None, metavar="SHORTEST",
                    help="cut each mate to a length from SHORTEST to its own")
    ap.add_argument("--refs", nargs="+", default=["ecoli", "synth"], choices=["ecoli", "synth"])
    ap.add_argument("--threads", type=int, default=2, help="the peers' threads: every core of the machine")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; medians are reported")
    ap.add_argument("--work", default="/tmp/dmap-bench")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    compile_dmap()
    for ref_name in args.refs:
        ref = reference(work, ref_name)
        idx = indexes(work, ref)
        r1, r2, truth_sam = mason_pairs(work, ref, args.pairs, args.length, args.threads)
        truth = primaries(truth_sam)
        if args.trimmed is not None:
            r1, r2 = trimmed_pairs(r1, r2, args.trimmed)
            cut = {mate: lengths(path) for mate, path in ((1, r1), (2, r2))}
            truth = {(n, mate): (contig, pos + (args.length - cut[mate][n] if flag & 16 else 0), flag)
                     for (n, mate), (contig, pos, flag) in truth.items()}
        k = None if args.error_rate is not None else args.errors
        outs, runs, wall = run_rounds(commands(ref, idx, r1, r2, args.length, k, args.threads, args.error_rate),
                                      work / "pairs", [r1, r2, ref, *idx.values()], args.repeat)
        shape = f"{args.length} bp" if args.trimmed is None else f"{args.trimmed}-{args.length} bp (trimmed)"
        errors = f"K = {k}" if k is not None else f"K = floor({args.error_rate}% x length)"
        print(f"\n### {ref_name}, {args.pairs:,} pairs x {shape} (mason_simulator), {errors}; "
              f"{args.threads} threads for the peers; medians of {args.repeat}\n")
        print("| mapper | wall s | pairs/s | peak RSS MB | properly paired % | placed as mason % | speed vs Yara |")
        print("|---|---|---|---|---|---|---|")
        for name, ms in runs.items():
            proper, correct = scores(outs[name], truth)
            ratio = f"{wall['yara'] / wall[name]:.2f}x" if name.startswith("dmap") and "yara" in wall else ""
            print(f"| {name} | {wall[name]:.2f} | {args.pairs / wall[name]:,.0f} | "
                  f"{max(m['rss_mb'] for m in ms):.0f} | {proper:.2f} | {correct:.2f} | {ratio} |")
        line = next((x for x in runs[dmap_label(k, args.error_rate)][-1]["stderr"].splitlines() if "insert size" in x),
                    "")
        print(f"\n{line}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
