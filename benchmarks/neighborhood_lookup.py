"""Neighborhood lookups: plain list scan vs binary search vs perfect hash (Tran, Giraud and Varré 2015, Figure 8).

    python3 benchmarks/neighborhood_lookup.py [--queries 200000] [--list-queries 4000] [--device 0:0]

Reference: E. coli (Debian's bowtie-examples).  Seed length 4 (256 seeds,
about 19,000 windows per seed), neighborhood length 4, 8 and 16, as in the
paper.  Queries are windows of the reference at random positions with 0-2
random substitutions in the neighborhood.  Each method counts, per query,
the windows whose seed matches and whose neighborhood is within E = 0, 1, 2
substitutions (``kernels/neighborhood.cl``, count only: the positions are
not copied out).  The three methods' counts are checked equal.

Reports queries/s and the paper's measure, neighborhoods processed per
second: the windows of each query's seed (its nb_block), summed over
queries, per second of kernel time.  The list scan is timed on fewer
queries (it reads the whole nb_block per query).
"""

from __future__ import annotations

import argparse
import gzip
import time

import numpy as np
from exact_vs_bowtie import ECOLI

from dmap.alphabet import get_alphabet
from dmap.io.fastx import encode_reference, iter_contigs
from dmap.neighborhood.build import index_neighborhoods
from dmap.neighborhood.params import NeighborhoodParams, reference_windows
from dmap.neighborhood.search import count_matches, neighborhood_patterns, upload_neighborhood
from dmap.opencl.device import Device
from dmap.reads import EncodedReads
from dmap.testing.neighborhood import lookup_tables


def ecoli_codes() -> np.ndarray:
    alpha = get_alphabet("dna")
    with gzip.open(ECOLI, "rb") as f:
        tmp = "/tmp/dmap-nb-ecoli.fa"
        open(tmp, "wb").write(f.read())
    return np.concatenate([encode_reference(name, seq, alpha) for name, seq in iter_contigs(tmp)])


def queries(rng, text: np.ndarray, window: int, span: int, n: int) -> EncodedReads:
    at = rng.integers(0, text.size - window, n)
    q = text[at[:, None] + np.arange(window)].copy()
    q[q >= 4] = 0
    for _ in range(2):
        pick = rng.random(n) < 0.5
        col = rng.integers(span, window, n)
        q[pick, col[pick]] = rng.integers(0, 4, int(pick.sum()))
    lengths = np.full(n, window, np.uint32)
    return EncodedReads(0, q.ravel().astype(np.uint8), (np.arange(n) * window).astype(np.uint32), lengths)


def timed_counts(device, store, params, reads, errors, repeat=3):
    patterns = neighborhood_patterns(reads.lengths, params.window, 1)
    best, counts = float("inf"), None  # best of `repeat` (the first call also compiles the kernel)
    for _ in range(repeat):
        t = time.perf_counter()
        counts = count_matches(device, store, params, reads, patterns, errors, 1)
        best = min(best, time.perf_counter() - t)
    return counts, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=200_000)
    ap.add_argument("--list-queries", type=int, default=4_000)
    ap.add_argument("--seed-length", type=int, default=4)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    device = Device(args.device)
    text = ecoli_codes()
    rng = np.random.default_rng(1)
    print(f"device: {device.name} ({device.spec}); reference {text.size:,} symbols; seed length {args.seed_length}\n")
    print("| LN | E | method | queries | kernel s | queries/s | neighborhoods/s | vs list |")
    print("|---|---|---|---|---|---|---|---|")
    for ln in (4, 8, 16):
        params = NeighborhoodParams.create(4, args.seed_length, ln, None, 2)
        stores = {"phash": index_neighborhoods(text, params)}
        for method in ("bsearch", "list"):
            stores[method] = lookup_tables(text, params, method)
        _, seed, _ = reference_windows(text, params)
        per_seed = np.bincount(seed, minlength=params.n_seeds)
        dev_stores = {m: upload_neighborhood(device, s, m) for m, s in stores.items()}
        all_q = queries(rng, text, params.window, params.span, args.queries)
        for errors in (0, 1, 2):
            rates = {}
            reference_counts = None
            for method in ("list", "bsearch", "phash"):
                n = args.list_queries if method == "list" else args.queries
                q = EncodedReads(0, all_q.codes[: n * params.window], all_q.offsets[:n], all_q.lengths[:n])
                counts, secs = timed_counts(device, dev_stores[method], params, q, errors)
                if reference_counts is None:
                    reference_counts = counts
                elif not np.array_equal(counts[: reference_counts.size], reference_counts):
                    raise AssertionError(f"{method} counts differ from the list scan")
                seeds = q.codes.reshape(n, params.window)[:, : params.span] @ (4 ** np.arange(params.span)[::-1])
                processed = int(per_seed[seeds].sum())
                rates[method] = processed / secs
                print(f"| {ln} | {errors} | {method} | {n:,} | {secs:.3f} | {n / secs:,.0f} | {processed / secs:.3g} | "
                      f"{rates[method] / rates['list']:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
