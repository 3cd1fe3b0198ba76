"""CPU time of each process of a cluster run: the client (``dmap run --scheduler``), the
scheduler and the worker, as real processes, per extra million reads.

    python3 benchmarks/client_cpu.py [--work /tmp/dmap-bench] [--small 1000000] [--large 3000000]
                                     [--max-errors 0] [--repeat 2] [--output sam|bam]
                                     [--compress none|gzip|bgzf] [--paired] [--bam] [--stdin]

Starts ``dask scheduler`` and one ``dask worker --resources opencl=1
--preload dmap.cluster.worker`` (on the whole PoCL device), maps a small and a large
set of E. coli reads (``../shared/bench/make_reads.py``; with
``--max-errors K``, K substitutions per read) through them, and reports each
process's CPU seconds (user + system) per run and per extra million reads:
(large - small) / (large - small reads in millions), the medians of
``--repeat`` rounds.  What does not grow with the input (imports, the
cluster connection, the index's first load) cancels out.

The client only plans byte ranges and writes the bytes the workers
formatted, so its share should be small: the number that says whether
adding workers adds speed.  ``--compress bgzf`` maps the reads compressed
by htslib's bgzip (through pysam), which the workers cut and inflate;
``--compress gzip`` by ``gzip -1``, which the client must inflate whole.
``--paired`` maps the reads as pairs (reads 2i and 2i+1 of the file, in two
files named alike): the workers count the records of each byte range of
both files and read their chunks' pairs (per extra million reads, not pairs).
``--bam`` maps the reads as unaligned BAM (``samtools import``), which the workers cut,
inflate and decode; with ``--paired``, the pairs as one interleaved BAM
(``--interleaved``).  ``--stdin`` gives the reads file on standard input (``dmap run INDEX - < FILE``):
a stream, which no worker can open by name.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

# this script's directory is on sys.path
from exact_vs_bowtie import compressed, device_workers, ecoli_reference, simulated_reads


def cpu(proc: psutil.Process) -> float:
    """CPU seconds so far of a process and the processes under it (``dask worker`` runs its
    worker in a child process, under a nanny)."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def run_once(index: Path, reads: list[Path], out: str, address: str, options: list[str],
             scheduler: psutil.Process, worker: psutil.Process, stdin: bool = False) -> dict:
    """One run's CPU seconds per process and its wall time; ``stdin``: the one reads file on standard input."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    s0, w0, t0 = cpu(scheduler), cpu(worker), time.perf_counter()
    with open(reads[0], "rb") if stdin else contextlib.nullcontext() as f:
        r = subprocess.run([sys.executable, "-m", "dmap", "run", str(index), *(["-"] if stdin else map(str, reads)),
                            "-o", out, "-q", "--scheduler", address, *options], capture_output=True, text=True,
                           stdin=f)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise SystemExit(r.stderr)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    time.sleep(0.5)  # the worker's last heartbeat and cleanup of the run
    return {"client": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "scheduler": cpu(scheduler) - s0, "worker": cpu(worker) - w0, "wall": wall}


def as_pairs(reads: Path) -> list[Path]:
    """Reads 2i and 2i+1 of a FASTQ file as the mates of pair i, in two files (made once, beside it)."""
    outs = [reads.with_name(f"{reads.stem}_{mate}.fq") for mate in (1, 2)]
    if not all(o.exists() for o in outs):
        tmps = [o.with_name(o.name + ".tmp") for o in outs]
        with open(reads) as f, open(tmps[0], "w") as a, open(tmps[1], "w") as b:
            for i, _header in enumerate(f):
                rest = f.readline() + f.readline() + f.readline()
                (a if i % 2 == 0 else b).write(f"@p{i // 2}/{i % 2 + 1}\n{rest}")
        for t, o in zip(tmps, outs):
            t.rename(o)
    return outs


def interleaved_bam(mates: list[Path]) -> Path:
    """The pairs of two files of mates as one unaligned BAM, mates interleaved and flagged as
    ``samtools import -1 -2`` writes them (made once, beside them)."""
    out = mates[0].with_name(mates[0].stem[:-2] + "_pairs.bam")
    if not out.exists():
        subprocess.run(["samtools", "import", "-1", str(mates[0]), "-2", str(mates[1]), "-o", str(out) + ".tmp",
                        "-O", "bam"], check=True)
        os.rename(str(out) + ".tmp", out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/dmap-bench")
    ap.add_argument("--small", type=int, default=1_000_000)
    ap.add_argument("--large", type=int, default=3_000_000)
    ap.add_argument("--max-errors", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--output", default="sam", choices=["sam", "bam"], help="output format")
    ap.add_argument("--compress", default="none", choices=["none", "gzip", "bgzf"], help="how the reads are compressed")
    ap.add_argument("--paired", action="store_true", help="map the reads as pairs from two files")
    ap.add_argument("--bam", action="store_true", help="the reads as unaligned BAM (samtools import)")
    ap.add_argument("--stdin", action="store_true", help="the reads file on standard input ('dmap run INDEX - < FILE')")
    args = ap.parse_args()
    if args.bam and args.compress != "none":
        ap.error("--bam maps reads uncompressed before they are made BAM")
    if args.stdin and args.paired and not args.bam:
        ap.error("--stdin maps one file: single reads, or pairs as interleaved BAM (--bam --paired)")
    how = "bam" if args.bam else args.compress
    work = Path(args.work)
    ref = ecoli_reference(work)
    index = work / "ecoli.dmap"
    if not index.exists():
        subprocess.run([sys.executable, "-m", "dmap", "index", str(ref), "-o", str(index), "-q"], check=True)
    sizes = {"small": args.small, "large": args.large}
    files = {}
    for k, n in sizes.items():
        reads = simulated_reads(work, ref, n, 100, args.max_errors)
        if args.bam and args.paired:
            files[k] = [interleaved_bam(as_pairs(reads))]
        else:
            files[k] = [compressed(r, how) for r in (as_pairs(reads) if args.paired else [reads])]
    options = ["-e", str(args.max_errors)] if args.max_errors else []
    options += ["--interleaved"] if args.bam and args.paired else []
    with device_workers(1) as (address, procs):
        scheduler, worker = (psutil.Process(p.pid) for p in procs)
        runs: dict[str, list[dict]] = {k: [] for k in sizes}
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            ext = args.output
            run_once(index, files["small"], f"{tmp}/warm.{ext}", address, options, scheduler, worker)  # kernels built
            for _ in range(args.repeat):
                for k in sizes:
                    runs[k].append(run_once(index, files[k], f"{tmp}/{k}.{ext}", address, options, scheduler, worker,
                                            args.stdin))
                    os.unlink(f"{tmp}/{k}.{ext}")
    extra = (args.large - args.small) / 1e6
    stored = "uncompressed" if how == "none" else f"{how}-compressed"
    stored = "as unaligned BAM" + (", interleaved" if args.paired else "") if args.bam else stored
    stored += ", on standard input" if args.stdin else ""
    print(f"# {'exact' if not args.max_errors else f'-e {args.max_errors}'} 100-bp E. coli reads, "
          f"{args.output.upper()}, {'paired ' if args.paired else ''}reads {stored}; "
          f"real dask scheduler + 1 worker (2 threads); {os.cpu_count()} CPUs; "
          f"medians of {args.repeat}")
    print("\n| process | CPU s, small | CPU s, large | CPU s per extra M reads | share |")
    print("|---|---|---|---|---|")
    med = {k: {p: statistics.median(r[p] for r in rs) for p in ("client", "scheduler", "worker", "wall")}
           for k, rs in runs.items()}
    per = {p: (med["large"][p] - med["small"][p]) / extra for p in ("client", "scheduler", "worker")}
    for p in ("client", "scheduler", "worker"):
        print(f"| {p} | {med['small'][p]:.2f} | {med['large'][p]:.2f} | {per[p]:.3f} | "
              f"{100 * per[p] / sum(per.values()):.0f}% |")
    # A client whose CPU does not grow measurably (the difference of two runs moves by a few
    # hundredths of a second between rounds) sets no cap this script can see.
    cap = (f"the client's share caps a run on many devices at {sum(per.values()) / per['client']:.0f}x one device"
           if per["client"] >= 0.005 else "the client's CPU did not grow measurably with the reads")
    print(f"\nwall: {med['small']['wall']:.2f} s ({args.small:,} reads), {med['large']['wall']:.2f} s "
          f"({args.large:,} reads); {cap}")


if __name__ == "__main__":
    main()
