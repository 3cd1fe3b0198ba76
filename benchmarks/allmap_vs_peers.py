"""dmap -e K against the full-sensitivity all-mappers Yara and RazerS 3, side by side in one run.

    python3 benchmarks/allmap_vs_peers.py [--reads 1000000] [--rows 100:3 150:4 40:2] [--refs ecoli synth large human]
                                          [--threads 2] [--repeat 1] [--context] [--work /tmp/dmap-bench]
    python3 benchmarks/allmap_vs_peers.py --rows 100:5% --trimmed 40 --refs ecoli     # an error rate

`dmap run -e K` promises every locus within K edits; so do SeqAn's Yara
(FM index, optimum search schemes) and RazerS 3 (q-gram filter, Myers'
verification), from Debian's seqan-apps (binaries in /usr/lib/seqan/bin).
Per reference and row (read length L, K edits), with reads from
``mason_simulator`` (its Illumina profile: substitutions, indels and Ns;
seed 1), in alternating order:

    dmap run INDEX READS -e K --all -o OUT                     every locus within K
    razers3 -i ID -rr 100 -m 1000000 -tc T REF READS -o OUT    ID = 100 - 100 K / L
    dmap run INDEX READS -e K -o OUT                           the loci at the read's least distance
    yara_mapper -e PCT -s 0 -y full -t T INDEX READS -o OUT    PCT: the whole percent that gives K

A row ``LENGTH:PCT%`` maps at an error rate instead, each read with its own
K = floor(PCT / 100 x its length), as the peers take it: ``dmap run
--error-rate PCT%``, ``razers3 -i (100 - PCT)`` and ``yara_mapper -e PCT``;
with ``--trimmed SHORTEST`` each read is first cut to a length drawn from
SHORTEST to LENGTH, as adapter and quality trimming leave reads
(``trimmed_mates.py``).

and with --context bwa mem, bowtie2 and minimap2 -ax sr, which are heuristics
and promise neither.  References: E. coli (Debian's bowtie-examples) and a
100 Mbp synthetic with repeats (../shared/bench/make_ref.py --size 100000000
--contigs 4 --seed 5); ``--refs large`` and ``human`` take synthetics of
1 Gbp (6 contigs, seed 9) and 3.1 Gbp (24 contigs, seed 11).  Reports the
median wall time, reads/s, peak RSS, dmap's candidate regions per read,
dmap's speed against its peer, and the loci check:

* against Yara: reads whose least distance (NM of the primary record, or
  unmapped) is Yara's;
* against RazerS 3: reads whose set of loci is RazerS 3's, a locus being
  (contig, strand, leftmost position) and two loci the same when their
  positions differ by at most 2K (the two may choose different alignments
  of one locus: a different best end, an insertion for a deletion).

Where the two differ, the first differing reads are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from exact_vs_bowtie import DMAP, MAKE_READS, compile_dmap, device_workers, ecoli_reference, measure
from trimmed_mates import trim

SEQAN = Path("/usr/lib/seqan/bin")
MAKE_REF = MAKE_READS.parent / "make_ref.py"


def tool(name: str) -> str:
    """A SeqAn binary: on PATH, else in Debian's folder for them; one line where neither has it."""
    found = shutil.which(name) or (str(SEQAN / name) if (SEQAN / name).exists() else None)
    if found is None:
        raise SystemExit(f"{name} is neither on PATH nor in {SEQAN}: apt-get install seqan-apps")
    return found


# The synthetic references: file name and make_ref.py's size, contigs and seed.  ``human`` is the
# human-size one of docs/performance.md (24 contigs of 129 Mbp, 10% repeat families, 2% segmental
# duplications); dmap indexes it in about 15-18 minutes on 2 cores, and Yara's indexer needs more temporary
# disk than 45 GB (--no-yara).
SYNTHETIC = {"synth": ("synth100M.fa", 100_000_000, 4, 5), "large": ("synth1G.fa", 1_000_000_000, 6, 9),
             "human": ("synth3G.fa", 3_100_000_000, 24, 11)}


def reference(work: Path, name: str) -> Path:
    """The reference FASTA ``name`` (``ecoli``, or a key of :data:`SYNTHETIC`), made once."""
    if name == "ecoli":
        return ecoli_reference(work)
    file, size, contigs, seed = SYNTHETIC[name]
    ref = work / file
    if not ref.exists():
        subprocess.run([sys.executable, str(MAKE_REF), "--size", str(size), "--contigs", str(contigs),
                        "--seed", str(seed), "-o", str(ref)], check=True)
    return ref


def indexes(work: Path, ref: Path, yara: bool = True) -> dict[str, Path]:
    """dmap's and (with ``yara``) Yara's indexes of ``ref``, built once."""
    out = {"dmap": ref.with_suffix(".dmap"), "yara": ref.with_suffix(".yara")}
    if not out["dmap"].exists():
        subprocess.run([DMAP, "index", str(ref), "-o", str(out["dmap"]), "-q"], check=True)
    if not yara:
        del out["yara"]
    elif not Path(f"{out['yara']}.txt.size").exists():
        subprocess.run([tool("yara_indexer"), str(ref), "-o", str(out["yara"])], check=True, capture_output=True)
    return out


def mason_reads(work: Path, ref: Path, n: int, length: int, threads: int, trimmed: int | None = None) -> Path:
    """``n`` reads of ``length`` from ``ref`` by mason_simulator (Illumina profile, seed 1), made once;
    with ``trimmed``, each cut to a length from ``trimmed`` to ``length`` (seed 1)."""
    reads = work / f"mason_{ref.stem}_{n}_{length}.fq"
    if not reads.exists():
        subprocess.run([tool("mason_simulator"), "-ir", str(ref), "-n", str(n), "--illumina-read-length",
                        str(length), "-o", str(reads), "--seed", "1", "--num-threads", str(threads), "-q"],
                       check=True, capture_output=True)
    if trimmed is None:
        return reads
    cut = reads.with_name(f"{reads.stem}_trimmed{trimmed}.fq")
    if not cut.exists():
        trim(str(reads), str(cut), trimmed)
    return cut


def errors_of(row: str) -> tuple[int, int | None, int | None]:
    """A row ``LENGTH:K`` or ``LENGTH:PCT%``: the read length, K or None, and the percent or None."""
    length, errors = row.split(":")
    if errors.endswith("%"):
        return int(length), None, int(errors[:-1])
    return int(length), int(errors), None


def dmap_label(k: int | None, percent: int | None) -> str:
    """dmap's row name, its errors option as given."""
    return f"dmap -e {k}" if percent is None else f"dmap --error-rate {percent}%"


# Stands for each command's own output file in what commands() returns.
OUT = "{out}"


def commands(ref: Path, idx: dict[str, Path], reads: Path, length: int, k: int | None, threads: int,
             context: bool, scheduler: str | None = None, percent: int | None = None) -> dict[str, list[str]]:
    """Each mapper's command line, its output file written as :data:`OUT`: K edits, or with
    ``percent`` each read's K of that error rate."""
    out = OUT
    t = str(threads)
    name = dmap_label(k, percent)
    if percent is None:
        # The peers take K as a share of the read length and round K down: RazerS 3 a percent identity a
        # hair under 100 (1 - K / L), Yara a whole percent (the least that gives K: 3 for 150 bp and K = 4).
        identity = f"{100 - 100 * k / length - 1e-4:.4f}".rstrip("0").rstrip(".")
        percent = -(-100 * k // length)
        if percent * length // 100 != k:
            raise SystemExit(f"yara_mapper -e takes whole percents: none gives K = {k} for {length}-bp reads")
        errors = ["-e", str(k)]
    else:
        identity, errors = str(100 - percent), ["--error-rate", f"{percent}%"]
    cmds = {
        f"{name} --all": [DMAP, "run", str(idx["dmap"]), str(reads), *errors, "--all", "-o", str(out)],
        "razers3": [tool("razers3"), "-i", identity, "-rr", "100", "-m", "1000000", "-tc", t, str(ref), str(reads),
                    "-o", str(out)],
        name: [DMAP, "run", str(idx["dmap"]), str(reads), *errors, "-o", str(out)],
    }
    if "yara" in idx:
        cmds["yara"] = [tool("yara_mapper"), "-e", str(percent), "-s", "0", "-y", "full", "-t", t, str(idx["yara"]),
                        str(reads), "-o", str(out)]
    if scheduler:
        for dmap in (f"{name} --all", name):
            cmds[f"{dmap}, workers"] = [*cmds[dmap], "--scheduler", scheduler]
    if context:
        cmds.update({
            "bwa mem": ["bwa", "mem", "-t", t, "-o", str(out), str(ref), str(reads)],
            "bowtie2": ["bowtie2", "-p", t, "-x", str(ref.with_suffix(".bt2")), "-U", str(reads), "-S", str(out)],
            "minimap2 -ax sr": ["minimap2", "-ax", "sr", "-t", t, "-o", str(out), str(ref), str(reads)],
        })
        heuristic_indexes(ref, threads)
    return {name: cmd for name, cmd in cmds.items() if shutil.which(cmd[0]) or Path(cmd[0]).exists()}


def heuristic_indexes(ref: Path, threads: int) -> None:
    """bwa's index beside ``ref`` and bowtie2's (``REF.bt2``), built once, where the tools are installed."""
    bt2 = str(ref.with_suffix(".bt2"))
    for done, build in ((f"{ref}.bwt", ["bwa", "index", str(ref)]),
                        (f"{bt2}.1.bt2", ["bowtie2-build", "-q", "--threads", str(threads), str(ref), bt2])):
        if shutil.which(build[0]) and not Path(done).exists():
            subprocess.run(build, check=True, capture_output=True)


def loci(sam: Path) -> tuple[dict[str, list[tuple[str, int, int]]], dict[str, int | None]]:
    """Per read name: its loci (contig, strand, 1-based position) and its least distance (None: unmapped)."""
    found: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    best: dict[str, int | None] = {}
    with open(sam) as f:
        for line in f:
            if line.startswith("@"):
                continue
            name, flag, contig, pos, _, _, _, _, _, _, _, *tags = line.rstrip("\n").split("\t")
            flag = int(flag)
            if flag & 4:
                best.setdefault(name, None)
                continue
            nm = next(int(t[5:]) for t in tags if t.startswith("NM:i:"))
            found[name].append((contig, (flag >> 4) & 1, int(pos)))
            if best.get(name) is None or nm < best[name]:
                best[name] = nm
    return found, best


def same_loci(ours: list[tuple[str, int, int]], peer: list[tuple[str, int, int]], k: int) -> bool:
    """Whether two reads' loci match one to one, positions within ``2 k``.  Records of the peer
    at the same contig, strand and position are one locus (RazerS 3 with two threads wrote one
    read's only locus twice, 1 of 1M 150-bp reads at K=4); dmap's are taken as they are, so a
    duplicate of its own differs."""
    peer = sorted(set(peer))
    if len(ours) != len(peer):
        return False
    return all(x[:2] == y[:2] and abs(x[2] - y[2]) <= 2 * k for x, y in zip(sorted(ours), peer))


def check(ours: Path, theirs: Path, k: int, every_locus: bool) -> str:
    """The loci check of one row (see the module's docstring)."""
    (a_loci, a_best), (b_loci, b_best) = loci(ours), loci(theirs)
    names = set(a_best) | set(b_best)
    if every_locus:
        differ = sorted(n for n in names if not same_loci(a_loci.get(n, []), b_loci.get(n, []), k))
        what = "loci"
    else:
        differ = sorted(n for n in names if a_best.get(n) != b_best.get(n))
        what = "least distance"
    text = f"{what} equal for {len(names) - len(differ):,} of {len(names):,} reads"
    for n in differ[:3]:
        text += (f"; {n}: dmap {sorted(a_loci.get(n, []))} NM {a_best.get(n)}, "
                 f"peer {sorted(b_loci.get(n, []))} NM {b_best.get(n)}")
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--rows", nargs="+", default=["100:3", "150:4", "40:2"],
                    help="READ_LENGTH:K, or READ_LENGTH:PCT%% for an error rate")
    ap.add_argument("--trimmed", type=int, default=None, metavar="SHORTEST",
                    help="cut each read to a length from SHORTEST to READ_LENGTH (seed 1)")
    ap.add_argument("--refs", nargs="+", default=["ecoli", "synth"], choices=["ecoli", *SYNTHETIC])
    ap.add_argument("--threads", type=int, default=2, help="the peers' threads: every core of the machine")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; medians are reported")
    ap.add_argument("--context", action="store_true", help="also bwa mem, bowtie2 and minimap2")
    ap.add_argument("--no-yara", action="store_true",
                    help="leave Yara out: its indexer needs more temporary disk than a 3.1 Gbp reference's "
                         "45 GB here (it failed writing at 9 minutes)")
    ap.add_argument("--work", default="/tmp/dmap-bench")
    ap.add_argument("--workers", type=int, default=0,
                    help="also dmap against a real cluster of this many worker processes on the first device")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    compile_dmap()
    with contextlib.ExitStack() as stack:
        scheduler = stack.enter_context(device_workers(args.workers))[0] if args.workers else None
        for ref_name in args.refs:
            run_reference(args, work, ref_name, scheduler)


def run_rounds(cmds: dict[str, list[str]], prefix: Path, inputs: list[Path], repeat: int
               ) -> tuple[dict[str, Path], dict[str, list[dict]], dict[str, float]]:
    """Run each command ``repeat`` times, alternating, its :data:`OUT` written to ``PREFIX_NAME.sam``:
    the outputs, every run's :func:`measure`, and each command's median wall time."""
    outs = {name: Path(f"{prefix}_{re.sub(r'[^a-z0-9]+', '_', name)}.sam") for name in cmds}
    runs: dict[str, list[dict]] = {name: [] for name in cmds}
    for _ in range(repeat):
        for name, cmd in cmds.items():
            outs[name].unlink(missing_ok=True)
            runs[name].append(measure([str(outs[name]) if x == OUT else x for x in cmd], inputs))
    return outs, runs, {name: statistics.median(m["wall"] for m in ms) for name, ms in runs.items()}


def run_reference(args: argparse.Namespace, work: Path, ref_name: str, scheduler: str | None) -> None:
    """The rows of one reference."""
    ref = reference(work, ref_name)
    idx = indexes(work, ref, yara=not args.no_yara)
    for row in args.rows:
        length, k, percent = errors_of(row)
        reads = mason_reads(work, ref, args.reads, length, args.threads, args.trimmed)
        outs, runs, wall = run_rounds(commands(ref, idx, reads, length, k, args.threads, args.context, scheduler,
                                               percent), work / "allmap", [reads, ref, *idx.values()], args.repeat)
        shape = f"{length} bp" if args.trimmed is None else f"{args.trimmed}-{length} bp (trimmed)"
        errors = f"K = {k}" if percent is None else f"K = floor({percent}% x length)"
        print(f"\n### {ref_name}, {args.reads:,} x {shape} (mason_simulator), {errors}; "
              f"{args.threads} threads for the peers; medians of {args.repeat}\n")
        print("| mapper | wall s | reads/s | peak RSS MB | candidate regions per read | speed vs its peer |")
        print("|---|---|---|---|---|---|")
        for name, ms in runs.items():
            cand = re.search(r"([\d.]+) candidate regions per read", ms[-1]["stderr"])
            peer = "razers3" if "--all" in name else "yara" if name.startswith("dmap") else None
            ratio = f"{wall[peer] / wall[name]:.2f}x" if peer in wall else ""
            print(f"| {name} | {wall[name]:.2f} | {args.reads / wall[name]:,.0f} | "
                  f"{max(m['rss_mb'] for m in ms):.0f} | {cand.group(1) if cand else ''} | {ratio} |")
        name = dmap_label(k, percent)
        most = k if percent is None else percent * length // 100  # the position tolerance of a locus: 2K
        for ours, theirs, every in ((f"{name} --all", "razers3", True), (name, "yara", False)):
            if ours in outs and theirs in outs:
                print(f"\n{ours} vs {theirs}: {check(outs[ours], outs[theirs], most, every)}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
