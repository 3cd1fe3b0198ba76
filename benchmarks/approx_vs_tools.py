"""dmap --max-errors K against bowtie, bwa mem, bowtie2 and minimap2 on simulated reads, side by side.

    python3 benchmarks/approx_vs_tools.py [--reads 200000] [--work /tmp/dmap-bench] [--repeat 1] [--threads 2]

Two read sets from E. coli (Debian's bowtie-examples) made by
../shared/bench/make_reads.py, truth known: 100-bp reads with 3
substitutions each (seed 3), and with 2 substitutions and 1 indel of 1-3 bp
(seed 4).  Each mapper runs on both with --threads (2), in alternating order:

    dmap run INDEX READS -o OUT --max-errors K          (K = 3 and 4)
    bowtie -v 3 -a -p 2 --sam INDEX READS OUT
    bwa mem -t 2 INDEX READS
    bowtie2 -p 2 -x INDEX -U READS -S OUT
    minimap2 -ax sr -t 2 INDEX READS

Prints wall time (median over --repeat rounds), reads/s, peak RSS and the
scores of ../shared/bench/score_sam.py: sensitivity (true position among
the primary / any record, 5 bp tolerance) and the wrong-primary rate.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from exact_vs_bowtie import ECOLI, MAKE_READS, measure

SCORE = MAKE_READS.parent / "score_sam.py"
SETS = {"3 subs": ["--errors", "3", "--seed", "3"],
        "2 subs + 1 indel": ["--errors", "2", "--indels", "1", "--max-indel", "3", "--seed", "4"]}


def prepare(work: Path, n: int) -> tuple[Path, dict[str, tuple[Path, Path]]]:
    import gzip

    ref = work / "ecoli.fa"
    if not ref.exists():
        with gzip.open(ECOLI, "rt") as f:
            ref.write_text(f.read())
    reads = {}
    for name, opts in SETS.items():
        fq = work / f"approx_{n}_{name.replace(' ', '').replace('+', '_')}.fq"
        if not fq.exists():
            subprocess.run([sys.executable, str(MAKE_READS), str(ref), "-n", str(n), "-l", "100", *opts,
                            "-o", str(fq), "--truth", str(fq.with_suffix(".tsv"))], check=True)
        reads[name] = (fq, fq.with_suffix(".tsv"))
    indexes = {
        "ecoli_bt.1.ebwt": ["bowtie-build", "-q", str(ref), str(work / "ecoli_bt")],
        "ecoli_bt2.1.bt2": ["bowtie2-build", "-q", str(ref), str(work / "ecoli_bt2")],
        "ecoli.fa.bwt": ["bwa", "index", str(ref)],
        "ecoli.mmi": ["minimap2", "-x", "sr", "-d", str(work / "ecoli.mmi"), str(ref)],
    }
    # dmap's index is rebuilt every time (a few seconds): an index of an older format would be refused.
    subprocess.run(["dmap", "index", str(ref), "-o", str(work / "ecoli.dmap"), "--overwrite"], check=True,
                   capture_output=True)
    for out, cmd in indexes.items():
        if not (work / out).exists() and shutil.which(cmd[0]):
            subprocess.run(cmd, check=True, capture_output=True)
    return ref, reads


def commands(work: Path, fq: Path, out: Path, threads: int) -> dict[str, list[str]]:
    ref = work / "ecoli.fa"
    t = str(threads)
    cmds = {
        f"dmap -e {k}": ["dmap", "run", str(work / "ecoli.dmap"), str(fq), "-o", str(out), "--max-errors", str(k)]
        for k in (3, 4)
    }
    cmds.update({
        "bowtie -v 3 -a": ["bowtie", "-v", "3", "-a", "-p", t, "--sam", str(work / "ecoli_bt"), str(fq), str(out)],
        "bwa mem": ["bwa", "mem", "-t", t, "-o", str(out), str(ref), str(fq)],
        "bowtie2": ["bowtie2", "-p", t, "-x", str(work / "ecoli_bt2"), "-U", str(fq), "-S", str(out)],
        "minimap2 -ax sr": ["minimap2", "-ax", "sr", "-t", t, "-o", str(out), str(work / "ecoli.mmi"), str(fq)],
    })
    return {name: cmd for name, cmd in cmds.items() if shutil.which(cmd[0])}


def score(sam: Path, truth: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, str(SCORE), str(sam), str(truth), "--header"], check=True,
                         capture_output=True, text=True).stdout.split("\n")
    return dict(zip(out[0].split("\t"), map(float, out[1].split("\t"))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", type=int, default=200_000)
    ap.add_argument("--work", default="/tmp/dmap-bench")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; medians are reported")
    ap.add_argument("--threads", type=int, default=2, help="threads of the other mappers: every core of the machine")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    _, reads = prepare(work, args.reads)
    for set_name, (fq, truth) in reads.items():
        out = work / "approx.sam"
        cmds = commands(work, fq, out, args.threads)
        walls: dict[str, list[float]] = {name: [] for name in cmds}
        rss: dict[str, float] = {}
        scores: dict[str, dict] = {}
        for _ in range(args.repeat):
            for name, cmd in cmds.items():
                # Each tool writes the same path; dmap replaces only a file of its own.
                out.unlink(missing_ok=True)
                m = measure(cmd)
                walls[name].append(m["wall"])
                rss[name] = max(rss.get(name, 0), m["rss_mb"])
                scores[name] = score(out, truth)
        base = statistics.median(walls["bowtie2"]) if "bowtie2" in walls else None
        print(f"\n### {args.reads} 100-bp reads, {set_name} (E. coli)\n")
        print("| mapper | wall s | reads/s | speed vs bowtie2 | peak RSS MB | sensitivity (primary) | "
              "sensitivity (any record) | wrong primary |")
        print("|---|---|---|---|---|---|---|---|")
        for name in cmds:
            wall = statistics.median(walls[name])
            s = scores[name]
            ratio = f"{base / wall:.2f}x" if base else "-"
            print(f"| {name} | {wall:.2f} | {args.reads / wall:,.0f} | {ratio} | {rss[name]:.0f} | "
                  f"{100 * s['sens_primary']:.2f}% | {100 * s['sens_any']:.2f}% | "
                  f"{100 * s['wrong_primary'] / args.reads:.2f}% |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
