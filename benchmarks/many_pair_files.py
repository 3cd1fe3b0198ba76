"""Paired-end reads in many small pairs of files against the same pairs in one pair of files.

    python3 benchmarks/many_pair_files.py [--pairs 100000] [--files 1000] [--errors 0] [--compress none|gzip]
                                          [--read-groups] [--repeat 3] [--work /tmp/dmap-bench]

Pairs come from ``mason_simulator`` on E. coli (``benchmarks/pairs_vs_peers.py``'s
``mason_pairs``: 100-bp mates, fragments of 300 +- 30 bp), cut into
``--files`` pairs of files of consecutive pairs (``part00000.fq`` of the
first mates' folder with ``part00000.fq`` of the second's, ...).  In alternating rounds:

    dmap run INDEX R1 R2 -e K -o OUT                                 one pair of files
    dmap run INDEX R1_in_N/part00000.fq,... R2_in_N/part00000.fq,... -e K -o OUT  the run's lanes
    dmap run INDEX --manifest LANES.tsv -e K -o OUT        with --read-groups: a read group per lane

Prints the median wall time and peak RSS of each, and checks that the two SAM
files are the same but for their ``@PG`` line (a chunk of pairs spans pairs of
files, of any read groups, and the insert size is estimated from the same first
pairs), and with ``--read-groups`` but for the ``@RG`` lines and RG tags.
"""

from __future__ import annotations

import argparse
import gzip
import re
import statistics
import subprocess
from pathlib import Path

from allmap_vs_peers import reference
from exact_vs_bowtie import DMAP, compile_dmap, measure, reads_files
from pairs_vs_peers import mason_pairs


def cut(work: Path, mates: list[Path], n: int, compress: str) -> list[list[Path]]:
    """Each file of ``mates`` cut into ``n`` files of consecutive records (``exact_vs_bowtie.reads_files``),
    compressed with ``gzip -1`` where asked; made once."""
    lanes = [reads_files(work, path, n) for path in mates]
    if compress == "none":
        return lanes
    zipped = [[p.with_name(p.name + ".gz") for p in lane] for lane in lanes]
    for src, dst in zip((p for lane in lanes for p in lane), (p for lane in zipped for p in lane)):
        if not dst.exists():
            dst.write_bytes(gzip.compress(src.read_bytes(), compresslevel=1))
    return zipped


def whole(work: Path, mates: list[Path], compress: str) -> list[Path]:
    """The two files of mates, compressed with ``gzip -1`` where asked; made once."""
    if compress == "none":
        return mates
    out = [work / f"{p.name}.gz" for p in mates]
    for src, dst in zip(mates, out):
        if not dst.exists():
            dst.write_bytes(gzip.compress(src.read_bytes(), compresslevel=1))
    return out


def body(sam: Path) -> list[str]:
    """A SAM file's lines but its ``@PG`` and ``@RG`` lines, and each record's RG tag."""
    return [re.sub(r"\tRG:Z:[^\t]*$", "", line) for line in sam.read_text().splitlines()
            if not line.startswith(("@PG", "@RG"))]


def manifest(work: Path, lanes: list[list[Path]]) -> Path:
    """The lanes as a ``--manifest``: each pair of files with a read group of its own (its name)."""
    path = work / f"many_pairs_{len(lanes[0])}_{lanes[0][0].suffix.lstrip('.')}.tsv"
    path.write_text("".join(f"{a}\t{b}\tID:{a.name.split('.')[0]}\tSM:s\n" for a, b in zip(*lanes)))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=1000, help="pairs of files to cut the pairs into")
    ap.add_argument("--errors", type=int, default=0, help="dmap run -e K")
    ap.add_argument("--compress", choices=["none", "gzip"], default="none")
    ap.add_argument("--read-groups", action="store_true", help="the lanes given as a --manifest, each pair of "
                    "files its own read group")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default="/tmp/dmap-bench")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    compile_dmap()
    ref = reference(work, "ecoli")
    index = work / "ecoli.dmap"
    if not index.exists():
        subprocess.run([DMAP, "index", str(ref), "-o", str(index)], check=True)
    r1, r2, _ = mason_pairs(work, ref, args.pairs, 100, 2)
    one = whole(work, [r1, r2], args.compress)
    lanes = cut(work, [r1, r2], args.files, args.compress)
    runs = {
        "one pair of files": [*one],
        f"{args.files} pairs of files": (["--manifest", str(manifest(work, lanes))] if args.read_groups
                                         else [",".join(map(str, lane)) for lane in lanes]),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    rss: dict[str, list[float]] = {name: [] for name in runs}
    outputs = {name: work / f"many_pairs_{k}.sam" for k, name in enumerate(runs)}
    inputs = [*one, lanes[0][0].parent]
    for _ in range(args.repeat):
        for name, reads in runs.items():
            outputs[name].unlink(missing_ok=True)
            r = measure([DMAP, "run", str(index), *reads, "-e", str(args.errors), "-o", str(outputs[name])], inputs)
            times[name].append(r["wall"])
            rss[name].append(r["rss_mb"])
    groups = ", a read group per pair of files" if args.read_groups else ""
    print(f"{args.pairs} pairs of 100-bp reads (mason, E. coli), -e {args.errors}, reads {args.compress}{groups}:")
    print("| input | dmap run, wall s (median, min-max) | peak RSS MB |")
    print("| --- | --- | --- |")
    for name in runs:
        t, mb = times[name], statistics.median(rss[name])
        print(f"| {name} | {statistics.median(t):.2f} ({min(t):.2f}-{max(t):.2f}) | {mb:.0f} |")
    same = body(outputs["one pair of files"]) == body(outputs[f"{args.files} pairs of files"])
    print(f"records: the same but @PG{' and read groups' if args.read_groups else ''}" if same
          else "records: DIFFER")


if __name__ == "__main__":
    main()
