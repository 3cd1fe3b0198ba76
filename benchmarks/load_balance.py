"""Dynamic load balancing on two workers of unequal speed.

    python3 benchmarks/load_balance.py INDEX READS.fq [--chunk-size 50000]

Worker A is pinned (taskset) to core 0 and worker B to core 1, each on its
own half of the PoCL device; a CPU hog also runs on core 1, so B is about
half as fast.  The same reads are mapped with equal chunks and with guided
chunks (shrinking toward the end).  Prints each worker's share of the reads
and the gap between the two workers' finish times (the papers: about 20 ms).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time

from distributed import Client, get_task_stream
from exact_vs_bowtie import stop_processes  # this script's directory is on sys.path

import dmap
from dmap.cluster.client import scheduler_workers
from dmap.mapping.tasks import DEVICE_TASKS


def queries(dask_worker) -> int:
    plugin = dask_worker.plugins.get("dmap-device")
    return plugin.device.queries_searched if plugin is not None else 0


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index")
    ap.add_argument("reads")
    ap.add_argument("--chunk-size", type=int, default=50_000)
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp()
    py = sys.executable
    procs = [subprocess.Popen([py, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", f"{tmp}/s.json"], stderr=subprocess.DEVNULL)]
    results = []
    try:
        for _ in range(300):
            try:
                address = json.load(open(f"{tmp}/s.json"))["address"]
                break
            except (OSError, ValueError):
                time.sleep(0.1)
        for name, core, part in (("A-fast", "0", "0:0/2:0"), ("B-slow", "1", "0:0/2:1")):
            procs.append(subprocess.Popen(
                ["taskset", "-c", core, py, "-m", "distributed.cli.dask_worker", address, "--host", "127.0.0.1",
                 "--nthreads", "2", "--no-dashboard", "--name", name, "--resources", "opencl=1",
                 "--preload", "dmap.cluster.worker", "--dmap-device", part], stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(["taskset", "-c", "1", py, "-c", "while True: pass"]))  # slows worker B
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
            names = {w: info["name"] for w, info in scheduler_workers(client).items()}
            dmap.map_reads(args.index, args.reads, client=client, return_hits=False, chunk_size=args.chunk_size)
            for guided in (False, True):
                before = client.run(queries)
                with get_task_stream(client) as ts:
                    t0 = time.time()
                    res = dmap.map_reads(args.index, args.reads, client=client, return_hits=False,
                                         chunk_size=args.chunk_size, guided=guided, sam_path=f"{tmp}/o.sam")
                after = client.run(queries)
                done = collections.defaultdict(float)
                for task in ts.data:
                    if str(task["key"]).startswith(DEVICE_TASKS):
                        done[task["worker"]] = max(done[task["worker"]], task["startstops"][-1]["stop"])
                share = {names[w]: (after[w] - before[w]) / 2 / res.n_reads for w in after}
                gap = abs(done[min(done)] - done[max(done)]) if len(done) == 2 else float("nan")
                results.append({"chunks": "guided" if guided else "equal", "seconds": time.time() - t0,
                                "share": share, "finish_gap_s": gap})
    finally:
        stop_processes(procs)
    print("| chunks | wall s | share of reads (A fast / B slow) | finish gap |\n|---|---|---|---|")
    for r in results:
        print(f"| {r['chunks']} | {r['seconds']:.2f} | {100 * r['share'].get('A-fast', 0):.0f}% / "
              f"{100 * r['share'].get('B-slow', 0):.0f}% | {1000 * r['finish_gap_s']:.0f} ms |")
    return results


if __name__ == "__main__":
    main()
