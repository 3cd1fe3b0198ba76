"""Where a cluster run's time goes: Dask's task stream of ``map_reads`` against real
``dask scheduler``/``dask worker`` processes on one device, summed by stage and by slice of
the run, with each process's CPU.

    python3 benchmarks/timeline.py INDEX READS [--workers 8] [--threads 2] [--repeat 2]
                                   [--output FILE|/dev/null] [--chunk-size C] [--bins 10]

For each round (after one warm-up run): the run's wall time as the client sees it; when
the first task started and the last ended; per stage (``read_task``, ``block_task``,
``finish_task``, ``summary_task``, ``write_at_task``) the tasks, their compute seconds and
the share of the worker threads' time; per slice of the run, how many of the workers'
threads computed on average and in which stages (a slice whose threads idle is waiting
for something else: the client, the scheduler, the disk); the CPU seconds (user +
system) of the client, the scheduler and the workers; and per stage, Dask's Fine
Performance Metrics of the round: the seconds its tasks spent in dmap's device steps
(``dmap-search-kernel``, ``dmap-records-kernel``, ``dmap-transfer``, ...), and the rest
split into the task threads' CPU (``thread-cpu``) and their waits outside those steps
(``thread-noncpu``: the interpreter lock, the disk, a device call not labelled).

``--output /dev/null`` writes the records to a device: the workers write part files for
the client to join, as for a pipe (no in-place writes into one file).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import psutil
from dask.utils import key_split
from distributed import Client, get_task_stream

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_cpu import cpu  # noqa: E402
from exact_vs_bowtie import device_workers, read_through  # noqa: E402

from dmap.mapping.pipeline import map_reads  # noqa: E402


def summarize(stream: list[dict], start: float, stop: float, threads: int, bins: int) -> list[str]:
    """The task stream's compute intervals by stage, and by slice of [start, stop]."""
    computes = [(key_split(t["key"]), s["start"], s["stop"]) for t in stream
                for s in t["startstops"] if s["action"] == "compute"]
    if not computes:
        return ["no tasks"]
    first = min(c[1] for c in computes) - start
    last = max(c[2] for c in computes) - start
    wall = stop - start
    lines = [f"wall {wall:.3f} s; first task starts at {first:.3f} s, last ends at {last:.3f} s "
             f"({wall - last:.3f} s before the run returns)"]
    by_stage: dict[str, list[float]] = defaultdict(list)
    for name, a, b in computes:
        by_stage[name].append(b - a)
    lines.append("stage\ttasks\tcompute s\tmean ms\tshare of thread time")
    for name, d in sorted(by_stage.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"{name}\t{len(d)}\t{sum(d):.3f}\t{1000 * statistics.mean(d):.1f}\t"
                     f"{sum(d) / (threads * wall):.1%}")
    lines.append(f"slice (s)\tthreads computing (of {threads})\tby stage")
    width = wall / bins
    for i in range(bins):
        lo, hi = start + i * width, start + (i + 1) * width
        busy: dict[str, float] = defaultdict(float)
        for name, a, b in computes:
            overlap = min(b, hi) - max(a, lo)
            if overlap > 0:
                busy[name] += overlap / width
        stages = ", ".join(f"{n.removesuffix('_task')} {v:.1f}" for n, v in sorted(busy.items(), key=lambda kv: -kv[1]))
        lines.append(f"{i * width:.2f}-{(i + 1) * width:.2f}\t{sum(busy.values()):.1f}\t{stages}")
    return lines


def fine_metrics(client: Client, previous: dict | None = None, settle: float = 10.0) -> dict:
    """The scheduler's cumulative ``("execute", stage, label, "seconds")`` metrics.  Workers
    report them with their heartbeats, so after a run (``previous`` given) they are read until
    two readings a second apart agree and differ from ``previous``, for at most ``settle`` s."""
    def read() -> dict:
        return client.run_on_scheduler(lambda dask_scheduler: {
            k[1:3]: v for k, v in dask_scheduler.cumulative_worker_metrics.items()
            if isinstance(k, tuple) and len(k) == 4 and k[0] == "execute" and k[3] == "seconds"})

    last = read()
    deadline = time.time() + settle
    while previous is not None and time.time() < deadline:
        time.sleep(1.0)
        now = read()
        if now == last and now != previous:
            break
        last = now
    return last


def metrics_table(before: dict, after: dict) -> list[str]:
    """Per stage, the seconds of each metric label in a round (``after`` less ``before``)."""
    delta = {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 5e-4}
    labels = sorted({label for _, label in delta}, key=lambda x: (not x.startswith("dmap-"), x))
    stages = sorted({stage for stage, _ in delta}, key=lambda st: -sum(v for (s, _), v in delta.items() if s == st))
    lines = ["stage\t" + "\t".join(labels)]
    for stage in stages:
        lines.append(stage + "\t" + "\t".join(f"{delta.get((stage, label), 0.0):.3f}" for label in labels))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index")
    ap.add_argument("reads")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="threads per worker process")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--output", help="where the records go (default: a new file beside the reads)")
    ap.add_argument("--chunk-size", type=int)
    ap.add_argument("--bins", type=int, default=10)
    args = ap.parse_args()
    output = args.output or str(Path(args.reads).with_suffix(".timeline.sam"))
    me = psutil.Process()
    with device_workers(args.workers, threads=args.threads) as (address, procs):
        scheduler, workers = (psutil.Process(p.pid) for p in procs)
        with Client(address) as client:
            map_reads(args.index, args.reads, sam_path=output, client=client, return_hits=False,
                      chunk_size=args.chunk_size)  # warm-up: each worker loads the index
            for r in range(args.repeat):
                if output != os.devnull:
                    Path(output).unlink(missing_ok=True)
                os.sync()
                read_through([Path(args.reads)])
                before = [me.cpu_times(), cpu(scheduler), cpu(workers)]
                metrics = fine_metrics(client)
                with get_task_stream(client) as ts:
                    start = time.time()
                    result = map_reads(args.index, args.reads, sam_path=output, client=client, return_hits=False,
                                       chunk_size=args.chunk_size)
                    stop = time.time()
                mine = me.cpu_times()
                client_cpu = mine.user + mine.system - before[0].user - before[0].system
                print(f"\n# round {r + 1}: {result.n_reads:,} reads, {args.workers} workers x {args.threads} threads, "
                      f"output {output}; CPU s: client {client_cpu:.2f}, "
                      f"scheduler {cpu(scheduler) - before[1]:.2f}, workers {cpu(workers) - before[2]:.2f}")
                print("\n".join(summarize(ts.data, start, stop, args.workers * args.threads, args.bins)))
                print("Fine Performance Metrics, seconds per stage:")
                print("\n".join(metrics_table(metrics, fine_metrics(client, metrics))))
    if output != os.devnull:
        Path(output).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
