"""Search and locate kernel throughput on one OpenCL device (no Dask, no I/O).

    python3 benchmarks/kernel_speed.py INDEX READS.fq [--batch 1 8 16 32] [--repeat 3]

Reports queries/s per strand (each read is searched forward and reverse
complement, so reads/s per strand = 2 x reads / kernel time) and located rows/s.
Best of --repeat runs; the first run (program build, block upload) is not timed.
"""

import argparse
import time

import numpy as np

import dmap
from dmap.device import Device
from dmap.fastx import iter_read_chunks
from dmap.locate import expand_intervals, locate_rows
from dmap.search.exact import search_block


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index")
    ap.add_argument("reads")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 16, 32])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-reads", type=int, default=1_000_000)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    idx = dmap.open_index(args.index)
    chunk = next(iter_read_chunks(args.reads, idx.alphabet, args.max_reads, idx.meta.max_query_length))
    dev = Device(args.device)
    blk = dev.block(idx, 0)
    n = len(chunk)
    strands = 2 if idx.alphabet.has_reverse_complement else 1
    print(f"device: {dev.name}; index: {idx.meta.occ_layout} R={idx.meta.occ_sample_rate} "
          f"S={idx.meta.sa_sample_rate}; {n} reads of {int(chunk.lengths.mean())} symbols, {strands} strand(s)")
    for batch in args.batch:
        best = np.inf
        for rep in range(args.repeat + 1):
            t = time.perf_counter()
            iv = search_block(dev, blk, chunk.codes, chunk.offsets, chunk.lengths, strands, batch=batch)
            if rep:
                best = min(best, time.perf_counter() - t)
        print(f"search batch={batch:3d}: {best:.3f} s, {n * strands / best / 1e6:.2f} M queries/s "
              f"({n / best / 1e6:.2f} M reads/s both strands)")
    _, rows = expand_intervals(iv.reshape(-1, 2))
    for batch in args.batch:
        best = np.inf
        for rep in range(args.repeat + 1):
            t = time.perf_counter()
            locate_rows(dev, blk, rows, batch=batch)
            if rep:
                best = min(best, time.perf_counter() - t)
        print(f"locate batch={batch:3d}: {rows.size} rows in {best:.3f} s, {rows.size / best / 1e6:.2f} M rows/s")


if __name__ == "__main__":
    main()
