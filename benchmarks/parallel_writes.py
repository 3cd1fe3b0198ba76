"""N processes writing one output at once, the way dmap's workers write a SAM file in place.

    python3 benchmarks/parallel_writes.py [--processes 8] [--gib 2.9] [--dir /tmp] [--repeat 3]
                                          [--chunk-mib 64] [--modes MODE...] [--buffer-mib MIB...]

Each process writes its share of the bytes, in chunks of ``--chunk-mib``
(a 10M-read run's chunks of 70,000 100-bp reads hold 19 MB of SAM), at its
own offsets of one file:

- ``pwrite``: buffered writes (what ``dmap.format.writer.write_at`` did
  for every chunk);
- ``mapped``: whole pages copied through a shared mapping, whose page faults
  take no file lock, the bytes either side with pwrite;
- ``own files``: each process into a file of its own: the bound with no
  shared file;
- ``parts, joined``: each chunk into a part file of its own, as workers
  write them for a pipe, which this process copies into the output in order
  (``sendfile``) as they come, as dmap's client joins part files;
- ``write_at``: ``dmap.format.writer.write_at``, what dmap's workers do: on
  a local disk each chunk's whole blocks with ``O_DIRECT``, the blocks it
  shares with its neighbours through the page cache;
- ``write_at, preallocated``: the same into a file given its length first
  (``posix_fallocate``), as dmap's client gives it: ext4 (Linux 6.3 on)
  takes its inode lock shared, not exclusive, for aligned direct writes
  into blocks already given.  ``--buffer-mib``: each ``write_at`` way
  again with aligned buffers of these sizes (``DIRECT_BUFFER``: the most
  one direct write of a chunk carries, so the disk's queue depth for one
  writer).

Prints the wall time of the writes (processes started and waiting before the
clock starts; the page cache only: the data need not reach the disk) and the
system CPU of the whole machine until the written pages are on disk
(``sync``), since the mapped pages are written back by the kernel's threads.
"""

from __future__ import annotations

import argparse
import mmap
import multiprocessing
import os
import time
from pathlib import Path

import numpy as np

from dmap.format import writer as dmap_writer
from dmap.format.writer import write_at

MODES = ("pwrite", "mapped", "own files", "parts, joined", "write_at", "write_at, preallocated")


def system_seconds() -> float:
    """System, interrupt and soft-interrupt time of every CPU since boot."""
    fields = open("/proc/stat").readline().split()
    return (int(fields[3]) + int(fields[6]) + int(fields[7])) / os.sysconf("SC_CLK_TCK")


def _pwrite(fd: int, view: memoryview, offset: int) -> None:
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)


def _mapped_write(fd: int, offset: int, view: memoryview) -> None:
    """Copy ``view`` into the file at ``offset`` (a page boundary, inside the file) through a mapping."""
    with mmap.mmap(fd, len(view), mmap.MAP_SHARED, mmap.PROT_WRITE | mmap.PROT_READ, offset=offset) as m:
        target = np.frombuffer(m, np.uint8)
        target[:] = np.frombuffer(view, np.uint8)
        del target


def writer(mode: str, i: int, n: int, share: int, path: str, ready, go, done, parts, chunk: int) -> None:
    data = memoryview(np.random.default_rng(i).integers(0, 256, chunk, dtype=np.uint8))
    own = mode == "own files"
    fd = os.open(f"{path}.{i}" if own else path, os.O_RDWR | os.O_CREAT, 0o644)
    ready.wait()
    go.wait()
    page = 4096
    for k in range(0, share, chunk):
        # Chunks interleaved between the processes, as chunks of reads go to workers, and cut off
        # page boundaries (odd lengths), as SAM records are.
        size = min(chunk - 1, share - k)
        offset = k if own else (k * n + i * chunk)
        if mode == "parts, joined":
            part = os.open(f"{path}.part{offset // chunk}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            _pwrite(part, data[:size], 0)
            os.close(part)
            parts.put((offset // chunk, size))
        elif mode.startswith("write_at"):
            write_at(path, offset, np.frombuffer(data[:size], np.uint8))
        elif mode == "mapped":
            head = -offset % page
            body = (size - head) // page * page
            _pwrite(fd, data[head + body - 1:size], offset + head + body - 1)
            _pwrite(fd, data[:head], offset)
            _mapped_write(fd, offset + head, data[head:head + body])
        else:
            _pwrite(fd, data[:size], offset)
    os.close(fd)
    done.wait()


def join_parts(path: Path, n_parts: int, parts) -> None:
    """Copy the part files into ``path`` in order, as they are written, inside the kernel."""
    ready: dict[int, int] = {}
    with open(path, "wb") as out:
        for k in range(n_parts):
            while k not in ready:
                j, size = parts.get()
                ready[j] = size
            part = f"{path}.part{k}"
            fd = os.open(part, os.O_RDONLY)
            done = 0
            while done < ready[k]:
                done += os.sendfile(out.fileno(), fd, done, ready[k] - done)
            os.close(fd)
            os.unlink(part)


def run(mode: str, n: int, total: int, directory: Path, chunk: int) -> tuple[float, float]:
    path = directory / "parallel_writes.out"
    share = total // n // chunk * chunk
    ctx = multiprocessing.get_context("fork")
    ready, go, done = ctx.Barrier(n + 1), ctx.Barrier(n + 1), ctx.Barrier(n + 1)
    parts = ctx.Queue()
    procs = [ctx.Process(target=writer, args=(mode, i, n, share, str(path), ready, go, done, parts, chunk))
             for i in range(n)]
    for p in procs:
        p.start()
    ready.wait()
    if mode == "write_at, preallocated":
        fd = os.open(path, os.O_WRONLY)
        os.posix_fallocate(fd, 0, share * n)
        os.close(fd)
    os.sync()
    cpu = system_seconds()
    go.wait()
    t = time.perf_counter()
    if mode == "parts, joined":
        join_parts(path, share // chunk * n, parts)
    done.wait()
    wall = time.perf_counter() - t
    for p in procs:
        p.join()
    os.sync()
    cpu = system_seconds() - cpu
    for p in [path, *(Path(f"{path}.{i}") for i in range(n)), *path.parent.glob(f"{path.name}.part*")]:
        p.unlink(missing_ok=True)
    os.sync()
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, nargs="+", default=[8])
    ap.add_argument("--gib", type=float, default=2.9, help="bytes written in all (a 10M-read SAM: 2.9 GB)")
    ap.add_argument("--dir", default="/tmp", help="where the file is written (its file system is what is measured)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--chunk-mib", type=float, default=64)
    ap.add_argument("--modes", nargs="+", choices=MODES, default=MODES)
    ap.add_argument("--buffer-mib", type=int, nargs="+", default=[dmap_writer.DIRECT_BUFFER >> 20])
    args = ap.parse_args()
    total = int(args.gib * (1 << 30))
    chunk = int(args.chunk_mib * (1 << 20))
    print("processes\tway\tGB\twall s\tGB/s\tsystem CPU-s (to disk)")
    for n in args.processes:
        for _ in range(args.repeat):
            for mode in args.modes:
                for mib in args.buffer_mib if mode.startswith("write_at") else [0]:
                    dmap_writer.DIRECT_BUFFER = mib << 20 or dmap_writer.DIRECT_BUFFER  # inherited by the forks
                    wall, cpu = run(mode, n, total, Path(args.dir), chunk)
                    written = total // n // chunk * chunk * n
                    way = f"{mode}, {mib} MiB buffer" if len(args.buffer_mib) > 1 and mib else mode
                    print(f"{n}\t{way}\t{written / 1e9:.2f}\t{wall:.3f}\t{written / wall / 1e9:.2f}\t{cpu:.2f}",
                          flush=True)


if __name__ == "__main__":
    main()
