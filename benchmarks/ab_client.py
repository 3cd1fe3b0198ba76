"""The client's CPU in two versions of dmap, each against its own real cluster, run in turn.

    python3 benchmarks/ab_client.py READS OLD=DIR NEW=DIR [--runs 6] [--max-errors 0]
        [--index /tmp/dmap-bench/ecoli.dmap]

Each DIR holds a ``dmap`` package and its ``kernels`` (e.g. a ``git worktree``);
each version gets a ``dask scheduler`` and one ``dask worker`` (2 threads, the
PoCL device) started in DIR with DIR on PYTHONPATH, since the tasks' code runs
on the workers.  The runs (``python3 -m dmap run INDEX READS --scheduler ...
-o FILE``) alternate between the versions; printed are each run's CPU
seconds of the ``dmap run`` process (user + system) and wall time, and the
medians.  ``benchmarks/client_cpu.py`` reports the CPU per extra million
reads of one version; on this 2-vCPU VM its differences of two runs move by
±30% between rounds, where the client's whole-run CPU of runs in turn, with
both clusters standing, resolves changes of a few percent.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from exact_vs_bowtie import device_workers  # this script's directory is on sys.path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reads")
    ap.add_argument("versions", nargs=2, metavar="NAME=DIR")
    ap.add_argument("--runs", type=int, default=6, help="runs of each version")
    ap.add_argument("--max-errors", "-e", default="0")
    ap.add_argument("--index", default="/tmp/dmap-bench/ecoli.dmap")
    args = ap.parse_args()
    versions = {name: os.path.abspath(folder) for name, _, folder in (v.partition("=") for v in args.versions)}
    reads, index = os.path.abspath(args.reads), os.path.abspath(args.index)
    out = Path(tempfile.mkdtemp()) / "ab.sam"
    cpu: dict[str, list[float]] = {name: [] for name in versions}
    with contextlib.ExitStack() as stack:
        address = {}
        for name, folder in versions.items():
            compileall.compile_dir(folder, quiet=1)  # as an installed package: no compiling in the timed runs
            # The cluster's processes inherit both; ``python -m`` puts the working directory
            # ahead of PYTHONPATH, so from another dmap checkout they would import that one.
            os.environ["PYTHONPATH"] = folder
            os.chdir(folder)
            address[name], _ = stack.enter_context(device_workers(1))
        for i in range(args.runs):
            for name, folder in (list(versions.items()) if i % 2 == 0 else list(versions.items())[::-1]):
                out.unlink(missing_ok=True)
                before, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
                subprocess.run([sys.executable, "-m", "dmap", "run", index, reads, "-e", args.max_errors,
                                "-q", "-o", str(out), "--scheduler", address[name]],
                               check=True, env=dict(os.environ, PYTHONPATH=folder), cwd="/")
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                seconds = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                cpu[name].append(seconds)
                print(f"{name}\tclient CPU {seconds:.3f} s\twall {time.perf_counter() - t:.2f} s", flush=True)
    out.unlink(missing_ok=True)
    for name, values in cpu.items():
        print(f"{name}: median client CPU {statistics.median(values):.3f} s "
              f"({min(values):.3f}-{max(values):.3f}) over {len(values)} runs")


if __name__ == "__main__":
    main()
