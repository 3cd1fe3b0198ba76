"""Where a cluster run's time goes: Dask's task stream of ``map_reads`` against real
``dask scheduler``/``dask worker`` processes on one device (or, with ``--embedded``, the
cluster that ``dmap run`` starts in its own process without one), summed by stage and by
slice of the run, with each process's CPU.

    python3 benchmarks/timeline.py INDEX READS [--workers 8] [--threads 2] [--repeat 2]
                                   [--output FILE|/dev/null] [--chunk-size C] [--bins 10]
                                   [--embedded] [--cold | --warm-up READS]
                                   [--mates MATES] [--max-errors K]

For each round (after one warm-up run of the reads, or of ``--warm-up``'s, unless
``--cold``: the first round is then what a ``dmap run`` of the reads gets): the run's wall
time as the client sees it; when the first task started and the last ended; how long no
task, one task, and two or more computed; per stage (``read_task``, ``block_task``,
``finish_task``, or ``chunk_task`` for all three against a one-block index such as E.
coli's; ``summary_task``, ``write_at_task``) the tasks, their compute seconds and
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
from contextlib import ExitStack
from pathlib import Path

import psutil
from dask.utils import key_split
from distributed import Client, get_task_stream

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_cpu import cpu  # noqa: E402
from exact_vs_bowtie import device_workers, read_through  # noqa: E402

from dmap.cluster.client import embedded_client, scheduler_workers  # noqa: E402
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
    lines.append("tasks computing at once, seconds: " + ", ".join(
        f"{k}{'+' if k == 2 else ''} {t:.3f}" for k, t in enumerate(occupancy(computes, start, stop))))
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


def occupancy(computes: list[tuple[str, float, float]], start: float, stop: float) -> list[float]:
    """The seconds of [start, stop] in which no task, one task, and two or more computed."""
    edges = sorted([(a, 1) for _, a, _ in computes] + [(b, -1) for _, _, b in computes])
    seconds = [0.0, 0.0, 0.0]
    running, at = 0, start
    for t, step in edges:
        seconds[min(running, 2)] += max(t, at) - at
        at, running = max(t, at), running + step
    seconds[0] += max(stop - at, 0.0)
    return seconds


def own_cpu(proc: psutil.Process) -> float:
    """CPU seconds so far of ``proc`` alone (the ``dask`` processes this script starts are its
    children)."""
    t = proc.cpu_times()
    return t.user + t.system


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
    ap.add_argument("--mates", help="the mates of READS: map pairs")
    ap.add_argument("--max-errors", type=int, default=0, help="map within K edits (dmap run -e K)")
    ap.add_argument("--embedded", action="store_true",
                    help="the cluster dmap run starts without one (one worker in this process: 2 threads "
                         "on a CPU device, up to 8 on a GPU) instead of --workers dask worker processes of "
                         "--threads threads")
    warm_up = ap.add_mutually_exclusive_group()
    warm_up.add_argument("--cold", action="store_true", help="no warm-up run before the rounds")
    warm_up.add_argument("--warm-up", metavar="READS", help="the reads of the warm-up run (default: READS)")
    args = ap.parse_args()
    output = args.output or str(Path(args.reads).with_suffix(".timeline.sam"))
    me = psutil.Process()
    if args.mates and args.warm_up:
        ap.error("--warm-up takes no mates: give --cold, or let the pairs warm up")
    options = {"chunk_size": args.chunk_size, "max_errors": args.max_errors}
    with ExitStack() as stack:
        if args.embedded:
            client = stack.enter_context(embedded_client())
            processes: list[psutil.Process] = []
            workers, threads = 1, sum(w["nthreads"] for w in scheduler_workers(client).values())
        else:
            address, procs = stack.enter_context(device_workers(args.workers, threads=args.threads))
            client = stack.enter_context(Client(address))
            processes = [psutil.Process(p.pid) for p in procs]  # the scheduler, then the workers
            workers, threads = args.workers, args.threads
        if not args.cold:  # each worker loads the index and its kernels
            map_reads(args.index, args.warm_up or args.reads, args.mates, sam_path=output, client=client,
                      return_hits=False, **options)
        for r in range(args.repeat):
            if output != os.devnull:
                Path(output).unlink(missing_ok=True)
            os.sync()
            read_through([Path(p) for p in (args.reads, args.mates) if p])
            before = [own_cpu(me), *(cpu(p) for p in processes)]
            metrics = fine_metrics(client)
            with get_task_stream(client) as ts:
                start = time.time()
                result = map_reads(args.index, args.reads, args.mates, sam_path=output, client=client,
                                   return_hits=False, **options)
                stop = time.time()
            used = [own_cpu(me) - before[0], *(cpu(p) - b for p, b in zip(processes, before[1:]))]
            where = ("the embedded cluster (this process)" if args.embedded
                     else f"{workers} workers x {threads} threads")
            names = ["this process"] if args.embedded else ["client", "scheduler", "workers"]
            print(f"\n# round {r + 1}: {result.n_reads:,} reads, {where}, output {output}; CPU s: "
                  + ", ".join(f"{n} {u:.2f}" for n, u in zip(names, used)))
            print("\n".join(summarize(ts.data, start, stop, workers * threads, args.bins)))
            print("Fine Performance Metrics, seconds per stage:")
            print("\n".join(metrics_table(metrics, fine_metrics(client, metrics))))
    if output != os.devnull:
        Path(output).unlink(missing_ok=True)

if __name__ == "__main__":
    main()
