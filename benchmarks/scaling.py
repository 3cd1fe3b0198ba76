"""Reads/s with 1, 2 and 4 workers, each on an equal part of the first
device (device fission), and the efficiency against one worker on one part:
rate(n) / (n * rate(1)).  A single worker on the whole device is the
reference row.

    python3 benchmarks/scaling.py INDEX READS.fq [--workers 1 2 4] [--repeat 2]

Each configuration is a LocalDeviceCluster of worker processes (spawned),
warmed up once, then timed (median of --repeat runs).  Also prints each
worker's share of the reads and the spread of the workers' finish times.
The experiment itself is dmap.cluster.scaling (notebooks/02-scaling.ipynb plots it).
"""

import argparse

from dmap.cluster.scaling import measure_workers, part_configurations
from dmap.opencl.discovery import list_devices


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index")
    ap.add_argument("reads")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--chunk-size", type=int, default=50_000)
    args = ap.parse_args()
    device = list_devices()[0]
    configs, notes = part_configurations(args.workers)
    for note in notes:
        print(f"# {note}")
    print(f"device: {device.spec} {device.name}, {device.compute_units} compute units")
    print("| workers | devices | reads/s (median) | efficiency vs 1 part | reads per worker | last-task spread |")
    print("|---|---|---|---|---|---|")
    for r in measure_workers(args.index, args.reads, configs, args.repeat, args.chunk_size):
        eff = f"{r['efficiency']:.2f}" if r["efficiency"] is not None else ""
        shares = "/".join(f"{100 * s:.0f}%" for s in r["shares"].values())
        print(f"| {r['workers']} | {' '.join(r['devices'])} | {r['reads_per_s']:,.0f} | {eff} | {shares} | "
              f"{1000 * r['finish_spread_s']:.0f} ms |")


if __name__ == "__main__":
    main()
