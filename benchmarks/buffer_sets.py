"""Device tasks at once per worker ("buffer sets", BowMapCL 4.3.1): reads/s with 1, 2 and
4 device tasks running together on one device worker, each on its own thread's command
queue and buffers.

    python3 benchmarks/buffer_sets.py INDEX READS.fq [--sets 1 2 4] [--max-errors 0] [--rounds 3]

One in-process worker on the whole first device (as ``dmap run`` starts it) with
``max(2, sets)`` threads; device tasks ask for ``1/sets`` of its ``opencl=1``
(``dmap.opencl.device.BUFFER_SETS`` sets what ``dmap run`` uses).  The settings
alternate within each round, after a warm-up run of each; medians of ``--rounds``.
Every run's SAM records are compared with the first's.
"""

import argparse
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from distributed import Client

import dmap
from dmap.mapping import pipeline
from dmap.opencl.discovery import list_devices


def sam_body(path: str) -> bytes:
    return b"".join(line for line in Path(path).read_bytes().splitlines(keepends=True)
                    if not line.startswith(b"@PG"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index")
    ap.add_argument("reads")
    ap.add_argument("--sets", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--max-errors", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    device = list_devices()[0]
    print(f"device: {device.spec} {device.name}; -e {args.max_errors}; medians of {args.rounds} alternating rounds")
    print("| device tasks at once | reads/s (median) | min-max | vs 1 |\n|---|---|---|---|")
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        clients = {}
        for sets in args.sets:
            cluster = stack.enter_context(dmap.LocalDeviceCluster(devices=[device.spec], threads=max(2, sets)))
            clients[sets] = stack.enter_context(Client(cluster))
        rates: dict[int, list[float]] = {sets: [] for sets in args.sets}
        first = None
        for round_ in range(args.rounds + 1):
            for sets, client in clients.items():
                pipeline.DEVICE_SHARE = 1 / sets  # what each device task asks of the worker's opencl=1
                out = f"{tmp}/{sets}.sam"
                t = time.perf_counter()
                res = dmap.map_reads(args.index, args.reads, client=client, return_hits=False, sam_path=out,
                                     max_errors=args.max_errors, in_flight=max(4, 2 * sets))
                if round_:  # the first round warms each cluster up
                    rates[sets].append(res.n_reads / (time.perf_counter() - t))
                first = first or sam_body(out)
                assert sam_body(out) == first, f"{sets} device tasks at once wrote other records"
    base = statistics.median(rates[args.sets[0]])
    for sets, rs in rates.items():
        rate = statistics.median(rs)
        print(f"| {sets} | {rate:,.0f} | {min(rs):,.0f}-{max(rs):,.0f} | {rate / base:.2f}x |")


if __name__ == "__main__":
    main()
