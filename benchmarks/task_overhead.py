"""What Dask's bookkeeping costs per chunk in the embedded cluster: no-op tasks in the shape of
a run on an index of several blocks (read, block, finish: three tasks per chunk, here one
block) against one task per chunk (``chunk_task``, what a one-block index gets).  No-op tasks
show the CPU alone: end to end the hand-offs cost more (docs/performance.md, "One task per
chunk against a one-block index").

    python3 benchmarks/task_overhead.py [--chunks 12] [--rounds 8]

Each round submits ``--chunks`` chunks of each shape in turn, with the resources and
priorities ``dmap.mapping.pipeline`` gives its tasks, and waits for them; printed are
the medians of the rounds' wall time and of this process's CPU time (the embedded
cluster's scheduler, worker and client all run here).  12 chunks is a 1M-read exact run
with the default guided chunks.
"""

from __future__ import annotations

import argparse
import statistics
import time

from dmap.cluster.client import embedded_client
from dmap.opencl.device import DEVICE_RESOURCE, DEVICE_SHARE


def noop(*args) -> int:
    return 0


def submit_round(client, tasks_per_chunk: int, chunks: int) -> tuple[float, float]:
    """(wall s, CPU s) of one round of ``chunks`` chunks of no-op tasks."""
    device = {DEVICE_RESOURCE: DEVICE_SHARE}
    wall, cpu = time.perf_counter(), time.process_time()
    last = []
    for i in range(chunks):
        if tasks_per_chunk == 3:
            read = client.submit(noop, i, pure=False, resources={DEVICE_RESOURCE: 0}, priority=-i)
            block = client.submit(noop, read, pure=False, resources=device, priority=-i)
            last.append(client.submit(noop, read, [block], pure=False, resources=device, priority=-i))
        else:
            last.append(client.submit(noop, i, pure=False, resources=device, priority=-i))
    for future in last:
        future.result()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    shapes = (3, 1)
    with embedded_client() as client:
        for shape in shapes:  # warm-up
            submit_round(client, shape, args.chunks)
        times: dict[int, list[tuple[float, float]]] = {shape: [] for shape in shapes}
        for _ in range(args.rounds):
            for shape in shapes:
                times[shape].append(submit_round(client, shape, args.chunks))
    print(f"# {args.chunks} chunks of no-op tasks, embedded cluster, medians of {args.rounds} rounds\n")
    print("| tasks per chunk | wall ms | CPU ms | CPU ms per chunk |")
    print("|---|---|---|---|")
    for shape in shapes:
        wall = statistics.median(w for w, _ in times[shape]) * 1e3
        cpu = statistics.median(c for _, c in times[shape]) * 1e3
        print(f"| {shape} | {wall:.1f} | {cpu:.1f} | {cpu / args.chunks:.2f} |")


if __name__ == "__main__":
    main()
