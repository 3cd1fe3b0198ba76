"""Reads/s with 1, 2 and 4 workers, each on an equal part of the first
device (device fission), and the efficiency against one worker on one part:
rate(n) / (n * rate(1)).  A single worker on the whole device is the
reference row.

    python3 benchmarks/scaling.py INDEX READS.fq [--workers 1 2 4] [--repeat 2]

Each configuration is a LocalDeviceCluster of worker processes (spawned),
warmed up on the first chunk, then timed on the whole file (SAM written to
/dev/null's neighbour in a temporary folder).  Splits the device cannot
make are reported as such.  Also prints each worker's share of the reads
(from Dask's task stream) and when each worker finished its last task.
"""

import argparse
import collections
import statistics
import tempfile
import time

from distributed import Client, get_task_stream

import dmap
from dmap.device import list_devices


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index")
    ap.add_argument("reads")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--chunk-size", type=int, default=50_000)
    args = ap.parse_args()
    device = list_devices()[0]
    parts = max(args.workers) if max(args.workers) <= device.max_split else device.max_split
    configs = [("1 (whole device)", [device.spec])]
    for n in args.workers:
        if n > parts:
            print(f"# {n} workers: {device.spec} splits into at most {device.max_split} parts")
            continue
        configs.append((str(n), [device.spec if parts == 1 else f"{device.spec}/{parts}:{k}" for k in range(n)]))
    print(f"device: {device.spec} {device.name}, {device.compute_units} compute units, parts of "
          f"{device.compute_units // parts}")
    print("| workers | devices | reads/s (median) | efficiency vs 1 part | reads per worker | last-task spread |")
    print("|---|---|---|---|---|---|")
    base = None
    for label, specs in configs:
        with dmap.LocalDeviceCluster(processes=True, devices=specs) as cluster, Client(cluster) as client, \
                tempfile.TemporaryDirectory() as tmp:
            dmap.map_reads(args.index, args.reads, client=client, chunk_size=args.chunk_size, return_hits=False,
                           sam_path=f"{tmp}/warm.sam")
            rates, shares, spread = [], "", 0.0
            for _ in range(args.repeat):
                with get_task_stream(client) as ts:
                    t = time.perf_counter()
                    res = dmap.map_reads(args.index, args.reads, client=client, chunk_size=args.chunk_size,
                                         return_hits=False, sam_path=f"{tmp}/out.sam")
                    rates.append(res.n_reads / (time.perf_counter() - t))
                searches = [task for task in ts.data if "search_task" in str(task["key"])]
                count = collections.Counter(task["worker"] for task in searches)
                last = collections.defaultdict(float)
                for task in searches:
                    last[task["worker"]] = max(last[task["worker"]], task["startstops"][-1]["stop"])
                shares = "/".join(f"{100 * c / len(searches):.0f}%" for c in count.values())
                spread = max(last.values()) - min(last.values())
        rate = statistics.median(rates)
        n = len(specs)
        if label == "1":
            base = rate
        eff = f"{rate / base / n:.2f}" if base and not label.startswith("1 (") else ""
        print(f"| {label} | {' '.join(specs)} | {rate:,.0f} | {eff} | {shares} | {1000 * spread:.0f} ms |")


if __name__ == "__main__":
    main()
