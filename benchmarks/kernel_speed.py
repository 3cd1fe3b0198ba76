"""Search and locate kernel throughput on one OpenCL device (no Dask, no I/O).

    python3 benchmarks/kernel_speed.py INDEX READS.fq [--batch 1 8 16 32] [--repeat 3]
                                       [--kmer-depth 0 8 11] [--seed-errors K]

Reports queries/s per strand (each read is searched forward and reverse
complement, so reads/s per strand = 2 x reads / kernel time) and located rows/s.
Best of --repeat runs; the first run (program build, block upload) is not timed.

The search runs on the reads' FASTQ bytes, translated and checked on the
device, as ``dmap run`` does.  The last lines compare search + locate of
every hit with and without the early stop (unique suffixes located and
verified against the text inside the search kernel).

Then the k-mer table (dmap/search/kmers.py): the search with tables of
each --kmer-depth (0: none; default 0 and the block's own depth), on the
reads with the early stop as ``dmap run`` searches them, and with
--seed-errors K on their K+1 pigeonhole pieces as ``dmap run -e K``
searches them (all results checked equal to the search without a table).
"""

import argparse
import time
from functools import partial

import numpy as np

import dmap
from dmap.approx.seeds import pigeonhole_seeds
from dmap.io.fastx import iter_read_chunks
from dmap.opencl.device import Device
from dmap.search.exact import search_block
from dmap.search.kmers import build_kmer_table, kmer_depth
from dmap.search.locate import expand_intervals, locate_rows, split_located


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index")
    ap.add_argument("reads")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 16, 32])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-reads", type=int, default=1_000_000)
    ap.add_argument("--device", default=None)
    ap.add_argument("--kmer-depth", type=int, nargs="+", default=None)
    ap.add_argument("--seed-errors", type=int, default=None)
    args = ap.parse_args()
    idx = dmap.open_index(args.index)
    chunk = next(iter_read_chunks(args.reads, idx.alphabet, args.max_reads, idx.meta.max_query_length))
    if idx.n_blocks > 1:
        raise SystemExit("kernel_speed.py measures one block; index the reference with a larger --block-length")
    dev = Device(args.device)
    blk = dev.block(idx, 0)
    n = len(chunk)
    strands = idx.alphabet.n_strands
    print(f"device: {dev.name}; index: {idx.meta.occ_layout} R={idx.meta.occ_sample_rate} "
          f"S={idx.meta.sa_sample_rate}; {n} reads of {int(chunk.lengths.mean())} symbols, {strands} strand(s)")
    for batch in args.batch:
        t, k = best_of(args.repeat, dev, partial(search_block, dev, blk, chunk.data, chunk.offsets, chunk.lengths,
                                                 strands, batch=batch, table=chunk.table))
        print(f"search batch={batch:3d}: {t:.3f} s, {n * strands / t / 1e6:.2f} M queries/s "
              f"({n / t / 1e6:.2f} M reads/s both strands; kernel alone {k:.3f} s)")
    iv = search_block(dev, blk, chunk.data, chunk.offsets, chunk.lengths, strands, table=chunk.table)
    _, rows = expand_intervals(iv.reshape(-1, 2))
    for batch in args.batch:
        t, k = best_of(args.repeat, dev, partial(locate_rows, dev, blk, rows, batch=batch))
        print(f"locate batch={batch:3d}: {rows.size} rows in {t:.3f} s, {rows.size / t / 1e6:.2f} M rows/s "
              f"(kernel alone {k:.3f} s)")
    text = dev.block_text(idx, 0)

    def search_locate(**kw):
        found = search_block(dev, blk, chunk.data, chunk.offsets, chunk.lengths, strands, table=chunk.table,
                             **kw).reshape(-1, 2)
        locate_rows(dev, blk, split_located(found)[3])

    for label, kw in (("plain search + locate", {}), ("early stop + locate", {"text": text})):
        t, k = best_of(args.repeat, dev, partial(search_locate, **kw))
        print(f"{label}: {t:.3f} s, {n / t / 1e6:.2f} M reads/s (both strands, every hit located; "
              f"kernels alone {k:.3f} s)")
    depths = args.kmer_depth or [0, kmer_depth(blk.shape.n_rows, blk.shape.sigma)]
    queries = {"reads, early stop": ((chunk.data, chunk.offsets, chunk.lengths), {"table": chunk.table, "text": text})}
    if args.seed_errors is not None:
        reads = chunk.encoded()
        seeds = pigeonhole_seeds(reads.lengths, args.seed_errors).encoded(reads)
        queries[f"{args.seed_errors + 1} pieces per read"] = ((seeds.codes, seeds.offsets, seeds.lengths), {})
    for label, (data, kw) in queries.items():
        want = search_block(dev, blk, *data, strands, **kw)
        for depth in depths:
            t0 = time.perf_counter()
            table = build_kmer_table(dev, blk, depth) if depth else None
            built = time.perf_counter() - t0
            assert (search_block(dev, blk, *data, strands, kmers=table, **kw) == want).all()
            t, k = best_of(args.repeat, dev, partial(search_block, dev, blk, *data, strands, kmers=table, **kw))
            print(f"k-mer table depth {depth:2d} ({table.nbytes / 2**20 if table else 0:.1f} MiB, built in "
                  f"{built:.3f} s), {label}: {t:.3f} s ({len(data[2]) * strands / t / 1e6:.2f} M queries/s)")


def best_of(repeat: int, dev: Device, run) -> tuple[float, float]:
    """Best wall time of ``repeat`` calls of ``run`` after an untimed first one, and the
    best time its kernels took alone (transfers excluded: they matter on a discrete GPU)."""
    best, best_kernel = np.inf, np.inf
    for rep in range(repeat + 1):
        before = sum(v for label, v in dev.seconds.items() if label.endswith("-kernel"))
        t = time.perf_counter()
        run()
        t = time.perf_counter() - t
        if rep:
            best = min(best, t)
            best_kernel = min(best_kernel, sum(v for label, v in dev.seconds.items() if label.endswith("-kernel"))
                              - before)
    return best, best_kernel


if __name__ == "__main__":
    main()
