"""--engine phash (MAROSE's neighborhood index) against --engine fm, side by side.

    python3 benchmarks/phash_vs_fm.py [--reads 200000] [--work /tmp/dmap-bench]

E. coli (Debian's bowtie-examples); two read sets from
../shared/bench/make_reads.py, truth known: 100-bp reads with 3
substitutions (seed 3, as in benchmarks/approx_vs_tools.py) and 40-bp reads
with 3 substitutions (seed 5, the paper's H3 read shape).  Every
configuration maps with --max-errors 3 in one embedded cluster (the
machine's OpenCL device), writing SAM:

    fm                       pigeonhole seeds on the FM-index (full sensitivity within K), with
                             --seed-edits auto and with exact pieces only (--seed-edits 0)
    phash LS/LN/mask, E, delta  neighborhood index built with those parameters

Reports reads/s (map_reads time, cluster already up; median of --repeat runs), sensitivity (true
position among any record, ../shared/bench/score_sam.py), seed hits and
candidate regions per read (what Myers verifies), and index size: the
FM-index blocks, and the neighborhood index against an offset-only index
and a plain neighborhood list (the paper's 1.25x/1.5x/2x comparison).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from approx_vs_tools import SCORE, prepare, score

import dmap
from dmap.cluster.client import embedded_client
from dmap.cluster.worker import device_stats
from dmap.neighborhood.build import neighborhood_sizes

SHAPES = [  # (seed length, neighborhood length, spaced seed, E, delta)
    (8, 7, "######-##", 1, 1),  # the paper's best for 40-bp reads on the human genome
    (10, 8, None, 1, 1),
    (10, 8, None, 1, 4),
    (12, 8, None, 1, 4),
]


def counters(client) -> dict[str, int]:
    total: dict[str, int] = {}
    for s in device_stats(client).values():
        for k, v in s["candidates"].items():
            total[k] = total.get(k, 0) + v
    return total


def index_sizes(idx: dmap.Index) -> dict[str, int]:
    fm = sum(idx.block_nbytes(b) for b in range(idx.n_blocks))
    out = {"fm": fm, "offset_only": 0, "neighborhood_list": 0, "perfect_hash": 0}
    if idx.neighborhood_params is not None:
        for b in range(idx.n_blocks):
            for k, v in neighborhood_sizes(idx.load_neighborhood(b), idx.neighborhood_params).items():
                if k in out:
                    out[k] += v
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", type=int, default=200_000)
    ap.add_argument("--work", default="/tmp/dmap-bench")
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration; the median reads/s is reported")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    ref, reads = prepare(work, args.reads)
    fq40 = work / f"approx_{args.reads}_40bp_3subs.fq"
    if not fq40.exists():
        subprocess.run([sys.executable, str(SCORE.parent / "make_reads.py"), str(ref), "-n", str(args.reads),
                        "-l", "40", "--errors", "3", "--seed", "5", "-o", str(fq40),
                        "--truth", str(fq40.with_suffix(".tsv"))], check=True)
    sets = {"100 bp, 3 subs": reads["3 subs"], "40 bp, 3 subs": (fq40, fq40.with_suffix(".tsv"))}
    indexes = {}
    for ls, ln, mask, e, _ in SHAPES:
        name = f"{ls}/{ln}" + (f" {mask}" if mask else "")
        if name not in indexes:
            path = work / f"ecoli_nb_{ls}_{ln}{'_spaced' if mask else ''}.dmap"
            indexes[name] = dmap.build_index(ref, path, max_query_length=512, overwrite=True,
                                             neighborhood=dmap.NeighborhoodSpec(ls, ln, mask, e))
    print("\n### index sizes (E. coli, MiB)\n")
    print("| neighborhood shape | FM-index | offset-only | neighborhood list | perfect hash | hash / offset-only |")
    print("|---|---|---|---|---|---|")
    for name, idx in indexes.items():
        s = index_sizes(idx)
        mib = {k: v / 2**20 for k, v in s.items()}
        print(f"| {name} | {mib['fm']:.1f} | {mib['offset_only']:.1f} | {mib['neighborhood_list']:.1f} | "
              f"{mib['perfect_hash']:.1f} | {s['perfect_hash'] / s['offset_only']:.2f}x |")
    out = work / "phash.sam"
    with embedded_client() as client:
        for set_name, (fq, truth) in sets.items():
            print(f"\n### {args.reads} reads, {set_name} (E. coli), --max-errors 3\n")
            print("| engine | reads/s | sensitivity (any record) | seed hits / read | candidate regions / read |")
            print("|---|---|---|---|---|")
            configs = [("fm (--seed-edits auto)", None, {}), ("fm --seed-edits 0", None, dict(seed_edits=0))] + [
                (f"phash {ls}/{ln}{' ' + mask if mask else ''} E={e} delta={d}",
                 indexes[f"{ls}/{ln}" + (f" {mask}" if mask else "")], dict(engine="phash", delta=d))
                for ls, ln, mask, e, d in SHAPES]
            for label, idx, options in configs:
                speeds = []
                for _ in range(args.repeat):
                    before = counters(client)
                    res = dmap.map_reads(idx or next(iter(indexes.values())), fq, sam_path=out, client=client,
                                         max_errors=3, return_hits=False, **options)
                    after = counters(client)
                    speeds.append(res.reads_per_second)
                per = {k: (after.get(k, 0) - before.get(k, 0)) / res.n_reads for k in ("seed hits", "regions")}
                s = score(out, truth)
                print(f"| {label} | {statistics.median(speeds):,.0f} | {100 * s['sens_any']:.2f}% | "
                      f"{per['seed hits']:.1f} | {per['regions']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
