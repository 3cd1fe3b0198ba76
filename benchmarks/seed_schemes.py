"""Which seeds for --max-errors K: exact pieces, or fewer pieces searched with m edits?

    python3 benchmarks/seed_schemes.py [--reads 50000] [--lengths 36,50,75,100,150] [--errors 1,2,3,4]
                                       [--edits 0,1] [--repeat 2] [--work /tmp/dmap-bench]

For each read length and K: reads from E. coli (Debian's bowtie-examples)
with K substitutions each, made by ../shared/bench/make_reads.py (seed 11),
mapped with ``map_reads(max_errors=K, seed_edits=m)`` for every m, one
embedded cluster (the machine's OpenCL device) for all.  Every scheme has
full sensitivity within K, so the SAM records must be identical (checked);
only the speed differs.  Prints reads/s (median of --repeat runs, cluster
already up), the piece length, seed hits per read (what locate and
verification pay for) and the seconds in the seed-search kernel (all runs).
Schemes with pieces shorter than MIN_PIECE are not run.  The
fastest m per (length, K) is what dmap.approx.seeds.choose_seed_edits uses.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from approx_vs_tools import prepare
from exact_vs_bowtie import MAKE_READS, alignment_digest

import dmap
from dmap.approx.seeds import n_pieces
from dmap.cluster.client import embedded_client
from dmap.cluster.worker import device_stats

# Exact pieces shorter than this hit E. coli hundreds of times each (4**7 =
# 16384 against 9.3 million positions on two strands): minutes per run, and
# never the fastest.
MIN_PIECE = 8


def totals(client) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in device_stats(client).values():
        for k, v in {**s["candidates"], **s["seconds"]}.items():
            out[k] = out.get(k, 0) + v
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", type=int, default=50_000)
    ap.add_argument("--lengths", default="36,50,75,100,150")
    ap.add_argument("--errors", default="1,2,3,4", help="values of K")
    ap.add_argument("--edits", default="0,1", help="values of m (edits per seed) to compare")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--work", default="/tmp/dmap-bench")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    ref, _ = prepare(work, 1000)  # E. coli and a fresh dmap index (ecoli.dmap)
    index = dmap.open_index(work / "ecoli.dmap")
    edits = [int(m) for m in args.edits.split(",")]
    print(f"\n### {args.reads} reads per set, K substitutions each (E. coli); reads/s, median of {args.repeat}\n")
    print("| length | K | " + " | ".join(f"m={m}: pieces x len, reads/s, seed hits/read, search s" for m in edits)
          + " | fastest | same SAM |")
    print("|---|---|" + "---|" * len(edits) + "---|---|")
    with embedded_client() as client:
        for length in [int(x) for x in args.lengths.split(",")]:
            for k in [int(x) for x in args.errors.split(",")]:
                fq = work / f"schemes_{args.reads}_{length}bp_{k}subs.fq"
                if not fq.exists():
                    subprocess.run([sys.executable, str(MAKE_READS), str(ref), "-n", str(args.reads), "-l",
                                    str(length), "--errors", str(k), "--seed", "11", "-o", str(fq),
                                    "--truth", str(fq.with_suffix(".tsv"))], check=True)
                cells, speed, digests = [], {}, set()
                for m in edits:
                    p = n_pieces(k, m)
                    if length // p < max(m + 1, MIN_PIECE):
                        cells.append(f"{p} x {length // p}: not run")
                        continue
                    runs = []
                    for _ in range(args.repeat):
                        before = totals(client)
                        res = dmap.map_reads(index, fq, sam_path=work / "schemes.sam", client=client, max_errors=k,
                                             seed_edits=m, return_hits=False)
                        after = totals(client)
                        runs.append(res.reads_per_second)
                    digests.add(alignment_digest(work / "schemes.sam"))
                    speed[m] = statistics.median(runs)
                    hits = (after.get("seed hits", 0) - before.get("seed hits", 0)) / res.n_reads
                    search = after.get("dmap-search-kernel", 0) - before.get("dmap-search-kernel", 0)
                    cells.append(f"{p} x {length // p}, {speed[m]:,.0f}, {hits:.1f}, {search:.2f}")
                best = max(speed, key=speed.get)
                print(f"| {length} | {k} | " + " | ".join(cells) + f" | m={best} | "
                      f"{'yes' if len(digests) == 1 else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
