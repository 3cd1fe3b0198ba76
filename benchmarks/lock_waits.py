"""How long a worker's read of a chunk takes alone and beside a thread busy in Python.

    python3 benchmarks/lock_waits.py READS [READS...] [--reads 200000] [--repeat 3] [--exact]

A task thread that calls into C code which lets go of the interpreter's lock (ISA-L,
numpy on more than 500 elements, an OpenCL wait) must take the lock back when the call
returns; while another thread runs Python, that waits up to the switch interval (5 ms).
A step that makes thousands of such calls runs many times slower beside the other task
threads of a worker than alone, which a profile of the step alone does not show. This
script reads the second chunk of each file (``fastx.read_chunk``: split, inflate, find
the records, parse) alone and then beside one thread that counts in a Python loop, and
prints both times and their ratio. A FASTQ chunk's ratio (about 4x on the 2-core VM:
the busy thread takes a core and the lock between numpy's large operations) is the
baseline; a much larger one points at a loop of small calls (docs/performance.md,
"Unaligned BAM: records found in lanes"). Its profile beside the busy thread names the loop:
``--profile``.  ``--exact``: read as exact mapping reads, the symbols of every chunk but
the first left to the search kernel (``check_symbols=False``).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import threading
import time
from collections.abc import Callable

from dmap.alphabet import get_alphabet
from dmap.io import fastx, splits


def beside_busy_thread(step: Callable[[], object], profile: bool = False) -> float:
    """Seconds that ``step`` takes while another thread counts in a Python loop."""
    stop = False

    def busy() -> None:
        n = 0
        while not stop:
            n += 1

    thread = threading.Thread(target=busy)
    thread.start()
    profiler = cProfile.Profile() if profile else None
    try:
        t = time.perf_counter()
        if profiler:
            profiler.runcall(step)
        else:
            step()
        return time.perf_counter() - t
    finally:
        stop = True
        thread.join()
        if profiler:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reads", nargs="+", help="reads files (FASTQ, bgzip, unaligned BAM...)")
    ap.add_argument("--reads", dest="chunk", type=int, default=200_000, help="reads per chunk")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the fastest is reported")
    ap.add_argument("--profile", action="store_true", help="also print the profile of one run beside the thread")
    ap.add_argument("--exact", action="store_true", help="read as exact mapping does: symbols left to the kernel")
    args = ap.parse_args()
    dna = get_alphabet("dna")
    print("| file | alone s | beside a busy thread s | ratio |\n|---|---|---|---|")
    for path in args.reads:
        plan = list(splits.plan_input([path], lambda *_: args.chunk))
        chunk = plan[1] if len(plan) > 1 else plan[0]
        step = functools.partial(fastx.read_chunk, chunk, dna, check_symbols=not args.exact)
        step()  # kernels built, pages read
        alone = min(_timed(step) for _ in range(args.repeat))
        busy = min(beside_busy_thread(step) for _ in range(args.repeat))
        print(f"| {path} | {alone:.3f} | {busy:.3f} | {busy / alone:.1f}x |")
        if args.profile:
            beside_busy_thread(step, profile=True)


def _timed(step: Callable[[], object]) -> float:
    t = time.perf_counter()
    step()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
