"""Two versions of dmap, run in turn in the conditions of exact_vs_bowtie.py.

    python3 benchmarks/ab_packages.py READS OLD=DIR[:INDEX] NEW=DIR[:INDEX] [--pairs 10]
        [--index /tmp/dmap-bench/ecoli.dmap] [--workers N [--threads T]] [--output PATH]
        [--mates MATES] [--options "-e 3"]

Each DIR holds a ``dmap`` package and its ``kernels`` (e.g. ``git archive
HEAD dmap kernels | tar -x -C DIR``); runs put it first on PYTHONPATH and
run ``python3 -m dmap run INDEX READS`` (``-m dmap.cli`` for versions without
``dmap/__main__.py``).  Every run goes through
``measure()`` as in the end-to-end benchmark: sync, inputs read into the page
cache, an idle machine.  On the reference VM memory that stays free for a
few seconds goes back to the host, so the first touch of a page after that
costs 1.5-3 ms per MB (docs/performance.md, "Machine and setup"); runs back
to back do not see it, and a change that moves memory looked neutral there
and was not here.  The versions alternate, their order swapped every pair.
Prints each run and the medians of wall time, of the time dmap reports
inside the process, and the peak RSS, and in how many pairs the second
version was the faster.

``--workers N``: each version maps against a standing cluster of its own
(a ``dask scheduler`` and N ``dask worker`` processes running that version,
both started, and each warmed by one run, before the pairs), as
``exact_vs_bowtie.py --workers`` does.  ``--output``: where the records go
(default a new file; ``/dev/null`` takes the path of a pipe: workers in
processes of their own write part files).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

from exact_vs_bowtie import device_workers, measure


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reads")
    ap.add_argument("versions", nargs=2, metavar="NAME=DIR[:INDEX]",
                    help="INDEX: this version's own index (one built by it), instead of --index")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--index", default="/tmp/dmap-bench/ecoli.dmap")
    ap.add_argument("--workers", type=int, default=0, help="a standing cluster of N worker processes per version")
    ap.add_argument("--threads", type=int, default=2, help="with --workers: threads per worker process")
    ap.add_argument("--output", help="the records' destination (default: a new file)")
    ap.add_argument("--mates", help="the mates of READS: both versions map pairs")
    ap.add_argument("--options", default="", help="more options of dmap run for both, e.g. \"-e 3\"")
    args = ap.parse_args()
    reads = [str(Path(p).resolve()) for p in (args.reads, args.mates) if p]
    versions = {}
    for v in args.versions:
        name, _, spec = v.partition("=")
        folder, _, index = spec.partition(":")
        # Absolute: the runs and the workers start in / (exact_vs_bowtie.device_workers).
        versions[name] = (str(Path(folder).resolve()), str(Path(index or args.index).resolve()))
    for folder, _ in versions.values():
        compileall.compile_dir(folder, quiet=1)  # as an installed package: no compiling in the timed runs
    out = Path(args.output or Path(tempfile.mkdtemp()) / "ab.sam")
    made_here = args.output is None
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in versions}
    with contextlib.ExitStack() as stack:
        commands = {}
        for name, (folder, index) in versions.items():
            # In front of any PYTHONPATH already set (a lent machine's packages: benchmarks/gpu.sh).
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [folder, os.environ.get("PYTHONPATH")])))
            module = "dmap" if (Path(folder) / "dmap" / "__main__.py").exists() else "dmap.cli"
            cmd = [sys.executable, "-m", module, "run", index, *reads, "-o", str(out), *args.options.split()]
            if args.workers:
                address = stack.enter_context(device_workers(args.workers, threads=args.threads, env=env))[0]
                cmd += ["--scheduler", address]
                measure(cmd, env=env, cwd="/")  # each worker builds its kernels and loads the index
            commands[name] = (cmd, env, [Path(index), *map(Path, reads)])
        for i in range(args.pairs):
            for name in list(versions) if i % 2 == 0 else list(versions)[::-1]:
                cmd, env, inputs = commands[name]
                if made_here:
                    out.unlink(missing_ok=True)
                m = measure(cmd, inputs, env=env, cwd="/")
                inside = float(re.search(r"hits in ([\d.]+) s", m["stderr"]).group(1))
                runs[name].append((m["wall"], inside, m["rss_mb"]))
                print(f"{name}\t{m['wall']:.3f} s\tinside {inside:.2f} s\t{m['rss_mb']:.0f} MB", flush=True)
    if made_here:
        out.unlink(missing_ok=True)
    for name, r in runs.items():
        print(f"{name}: median wall {statistics.median(x[0] for x in r):.3f} s, inside "
              f"{statistics.median(x[1] for x in r):.3f} s, peak RSS {max(x[2] for x in r):.0f} MB")
    # The VM drifts between pairs more than within one: count the pairs each version won.
    old, new = runs
    wins = sum(b[0] < a[0] for a, b in zip(runs[old], runs[new]))
    print(f"{new} faster than {old} in {wins} of {args.pairs} pairs")


if __name__ == "__main__":
    main()
