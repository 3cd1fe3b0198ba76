"""One process appending a SAM-sized output, through the page cache or with ``O_DIRECT``.

    python3 benchmarks/sam_appends.py [--gib 2.9] [--chunk-mib 60] [--dir /tmp] [--repeat 3]

dmap's writer appends each chunk's records to a new output file
(``dmap.format.writer.SamWriter``), as the embedded cluster hands them over:

- ``page cache``: buffered writes, with only the file's last 16 MB kept in
  the page cache (``PageCacheLimit``), as dmap wrote every file before;
- ``direct``: ``O_DIRECT`` appends from an aligned buffer (``DirectAppends``),
  what dmap does for a new file on a local disk.

The two alternate, ``--repeat`` rounds.  Prints the wall time of the writes,
this process's CPU, and the system CPU of the whole machine until the file is
on disk (``sync``): written back by the kernel's threads, the page cache's
work would not show in this process.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from pathlib import Path

import numpy as np

from dmap.format.writer import SamWriter


def system_seconds() -> float:
    """System, interrupt and soft-interrupt time of every CPU since boot."""
    fields = open("/proc/stat").readline().split()
    return sum(int(fields[k]) for k in (3, 6, 7)) / os.sysconf("SC_CLK_TCK")


def append(path: Path, chunk: np.ndarray, n: int, direct: bool) -> tuple[float, float, float]:
    """Wall seconds, this process's CPU seconds and the machine's system seconds until synced."""
    sys_before, cpu_before = system_seconds(), resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    with open(path, "xb") as f:
        writer = SamWriter(f, direct=direct)
        assert writer.direct == direct, "O_DIRECT is not available in this directory"
        for _ in range(n):
            writer.write(chunk)
        writer.finish()
    wall = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    os.sync()
    cpu = cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
    assert path.stat().st_size == n * chunk.size
    path.unlink()
    return wall, cpu, system_seconds() - sys_before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=2.9, help="bytes written per run (10M 100-bp reads: 2.9)")
    ap.add_argument("--chunk-mib", type=float, default=60, help="bytes per append (200,000 reads: 60)")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    # Printable bytes, a little over the whole MiB, so that appends straddle the disk's blocks.
    chunk = np.random.default_rng(1).integers(32, 127, int(args.chunk_mib * (1 << 20)) + 37, dtype=np.uint8)
    n = max(1, round(args.gib * (1 << 30) / chunk.size))
    path = Path(args.dir) / f"sam-appends-{os.getpid()}.sam"
    runs: dict[str, list[tuple[float, float, float]]] = {"page cache": [], "direct": []}
    for r in range(args.repeat):
        for name in (("page cache", "direct") if r % 2 == 0 else ("direct", "page cache")):
            os.sync()
            time.sleep(2)
            runs[name].append(append(path, chunk, n, name == "direct"))
            wall, cpu, system = runs[name][-1]
            print(f"{name:10s}  wall {wall:.2f} s  process CPU {cpu:.2f} s  machine system CPU {system:.2f} s")
    print(f"\n{n * chunk.size / 1e9:.2f} GB in {n} appends of {chunk.size / 1e6:.1f} MB, medians of {args.repeat}:")
    for name, rows in runs.items():
        wall, cpu, system = (statistics.median(col) for col in zip(*rows))
        print(f"{name:10s}  wall {wall:.2f} s  process CPU {cpu:.2f} s  machine system CPU {system:.2f} s")


if __name__ == "__main__":
    main()
