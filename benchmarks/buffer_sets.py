"""Overlap of transfers and kernels: reads/s with 1, 2 and 4 buffer sets per
device (worker threads, each with its own command queue and buffers).

    python3 benchmarks/buffer_sets.py INDEX READS.fq [--sets 1 2 4] [--repeat 3]

One worker process on the whole first device; median of --repeat timed runs
after a warm-up.
"""

import argparse
import statistics
import tempfile
import time

from distributed import Client

import dmap
from dmap.opencl.discovery import list_devices


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index")
    ap.add_argument("reads")
    ap.add_argument("--sets", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    device = list_devices()[0]
    print(f"device: {device.spec} {device.name}")
    print("| buffer sets | reads/s (median) | min-max | vs 1 set |\n|---|---|---|---|")
    base = None
    for sets in args.sets:
        with dmap.LocalDeviceCluster(processes=True, devices=[device.spec], threads=sets) as cluster, \
                Client(cluster) as client, tempfile.TemporaryDirectory() as tmp:
            dmap.map_reads(args.index, args.reads, client=client, return_hits=False, sam_path=f"{tmp}/warm.sam")
            rates = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                res = dmap.map_reads(args.index, args.reads, client=client, return_hits=False,
                                     sam_path=f"{tmp}/out.sam", in_flight=max(4, 2 * sets))
                rates.append(res.n_reads / (time.perf_counter() - t))
        rate = statistics.median(rates)
        base = base or rate
        print(f"| {sets} | {rate:,.0f} | {min(rates):,.0f}-{max(rates):,.0f} | {rate / base:.2f}x |")


if __name__ == "__main__":
    main()
