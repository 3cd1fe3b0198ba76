"""Host-device transfers on one OpenCL device: what each way of moving a chunk costs.

    python3 benchmarks/transfers.py [--mib 64] [--repeat 10] [--processes 1 8]

A discrete GPU gets each chunk's bytes by copy (a CPU device uses them in
place, see ``Device.zero_copy``).  Per chunk of --mib MiB, median seconds and
GB/s of each way, in one process and in N processes at once (N worker
processes share one GPU, each with its own context):

    create          a new buffer made from pageable memory (``COPY_HOST_PTR``), as ``Device.upload``
    write           ``enqueue_copy`` from pageable memory into a buffer made once
    write pinned    the same from pinned memory (``ALLOC_HOST_PTR``, mapped once), the copy into it included
    dma pinned      the same, the copy into pinned memory excluded
    read fresh      a buffer into a new numpy array (untouched pages), as ``Device.read_back``
    read touched    into an array written before
    read pinned     into pinned memory (``ALLOC_HOST_PTR``, mapped once)

GB/s in N processes is their total bytes over the wall time of all.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time

import numpy as np


def measure(mib: int, repeat: int, barrier=None) -> dict[str, float]:
    """Median seconds of each way of moving ``mib`` MiB (after one untimed round)."""
    from dmap.opencl.device import Device

    device = Device()
    cl, ctx, q = device.cl, device.context, device.queue
    mf = cl.mem_flags
    n = mib << 20
    rng = np.random.default_rng(0)
    host = rng.integers(0, 256, n, dtype=np.uint8)
    dev = cl.Buffer(ctx, mf.READ_WRITE, n)
    pinned_buf = cl.Buffer(ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, n)
    pinned, _ = cl.enqueue_map_buffer(q, pinned_buf, cl.map_flags.READ | cl.map_flags.WRITE, 0, (n,), np.uint8)
    touched = np.ones(n, dtype=np.uint8)

    def create():
        cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host)
        q.finish()

    def write():
        cl.enqueue_copy(q, dev, host)

    def write_pinned():
        np.copyto(pinned, host)
        cl.enqueue_copy(q, dev, pinned)

    def dma_pinned():
        cl.enqueue_copy(q, dev, pinned)

    def read_fresh():
        out = np.empty(n, dtype=np.uint8)
        cl.enqueue_copy(q, out, dev)

    def read_touched():
        cl.enqueue_copy(q, touched, dev)

    def read_pinned():
        cl.enqueue_copy(q, pinned, dev)

    ways = {"create": create, "write": write, "write pinned": write_pinned, "dma pinned": dma_pinned,
            "read fresh": read_fresh, "read touched": read_touched, "read pinned": read_pinned}
    times: dict[str, list[float]] = {w: [] for w in ways}
    for f in ways.values():
        f()
    q.finish()
    for _ in range(repeat):
        for w, f in ways.items():
            if barrier is not None:
                barrier.wait()
            t0 = time.perf_counter()
            f()
            q.finish()
            times[w].append(time.perf_counter() - t0)
    return {w: statistics.median(t) for w, t in times.items()}


def _child(args):
    mib, repeat, barrier = args
    return measure(mib, repeat, barrier)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 8])
    args = ap.parse_args()
    from dmap.opencl.device import Device

    print(f"# {Device().name}: {args.mib} MiB per transfer, medians of {args.repeat}")
    print("| way | processes | s per transfer | GB/s (all processes) |\n|---|---|---|---|")
    ctx = multiprocessing.get_context("spawn")
    for p in args.processes:
        with ctx.Manager() as manager:
            barrier = manager.Barrier(p)
            with ctx.Pool(p) as pool:
                results = pool.map(_child, [(args.mib, args.repeat, barrier)] * p)
        for way in results[0]:
            worst = max(r[way] for r in results)  # the processes start each transfer together
            print(f"| {way} | {p} | {worst:.4f} | {p * (args.mib << 20) / worst / 1e9:.1f} |")


if __name__ == "__main__":
    main()
