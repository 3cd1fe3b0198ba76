"""dmap against bowtie on exact reads from E. coli, side by side in one run.

    python3 benchmarks/exact_vs_bowtie.py [--reads 1000000] [--length 100] [--work /tmp/dmap-bench] [--threads 2]
    python3 benchmarks/exact_vs_bowtie.py --contigs 200000 --contig-length 175 --length 50 --reads 500000
    python3 benchmarks/exact_vs_bowtie.py --reads 200000 --files 2000
    python3 benchmarks/exact_vs_bowtie.py --form sra|fasta
    python3 benchmarks/exact_vs_bowtie.py --compress gzip|bgzf

Steps: extract E. coli (Debian's bowtie-examples; with --contigs N, N random
contigs instead, a transcriptome's shape), simulate exact reads with
../shared/bench/make_reads.py (half reverse-complemented), build the dmap,
bowtie and bwa indexes (timed), then map with

    dmap run INDEX READS -o dmap.sam                   (embedded local cluster)
    dmap run INDEX READS -o dmap.sam --workers-per-device N   (--workers-per-device N)
    dmap run INDEX READS -o dmap.sam --scheduler ADDR  (--workers N: N `dask worker` processes on one device,
                                                        --worker-threads T each; --chunk-sizes C: also with
                                                        --chunk-size C)
    bowtie -v 0 -a -p THREADS --sam INDEX READS bowtie.sam   (--threads, default 2: the CPUs of the reference VM)

in alternating rounds (--repeat, default 3), each after removing the
previous run's output, writing out dirty pages, reading the inputs into the
page cache and waiting for an idle machine.

With --files N the reads are cut into N files of as many reads, given to
both tools as one comma-separated list, and dmap also maps them as one file.
With --form sra the reads carry SRA's headers, repeated on their '+' lines
(as fastq-dump writes them); with --form fasta they are FASTA (bowtie -f).
With --compress gzip the files are compressed by `gzip -1`, which no worker
can cut (dmap's client inflates them alone), with --compress bgzf into
bgzip's blocks (``write_bgzf``: the workers cut them at their blocks);
bowtie reads both.

Prints the median wall time,
reads/s and peak RSS (summed over the process tree, sampled every 50 ms),
how busy the GPU was (where ``nvidia-smi`` is) and the ratios, checks that
both report the same number of alignments, and times the search and locate kernels alone (benchmarks/kernel_speed.py).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from dmap.format import bgzf

HERE = Path(__file__).resolve().parent
# E. coli from Debian's bowtie-examples, or where $DMAP_ECOLI says (benchmarks/device_bundle.sh).
ECOLI = os.environ.get("DMAP_ECOLI", "/usr/share/doc/bowtie/examples/genomes/NC_008253.fna.gz")
MAKE_READS = HERE.parent.parent / "shared" / "bench" / "make_reads.py"
# The installed `dmap` script itself: on PATH there may be a version manager's
# shim in front of it (pyenv's bash shim cost 0.08 s a run here), which is not dmap's.
_SCRIPT = Path(sys.executable).parent / "dmap"
DMAP = str(_SCRIPT) if _SCRIPT.exists() else "dmap"


def cpu_busy() -> tuple[int, int]:
    f = open("/proc/stat").readline().split()[1:]
    v = list(map(int, f))
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7], sum(v[:8])


def wait_idle(frac: float = 0.10, max_wait: float = 600) -> None:
    """Wait until other processes use under ``frac`` of the CPUs (as ../shared/bench/bench_lib.sh)."""
    start = time.time()
    while time.time() - start < max_wait:
        b0, t0 = cpu_busy()
        time.sleep(1)
        b1, t1 = cpu_busy()
        if (b1 - b0) / max(t1 - t0, 1) < frac:
            return
    print("[bench] machine still busy; going on", file=sys.stderr)


def read_through(paths: list[Path]) -> None:
    """Read files (or every file under a folder) so that they are in the page cache."""
    for path in paths:
        for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if f.is_file():
                with open(f, "rb") as h:
                    while h.read(1 << 24):
                        pass


def measure(cmd: list[str], inputs: list[Path] = (), **kw) -> dict:
    """Run a command on ``inputs`` already in the page cache; wall seconds, peak RSS of its process tree, output."""
    os.sync()  # the previous run's gigabytes of SAM are not still being written out during this one
    # This VM's disk reads 70 MB/s: reads evicted from the page cache would
    # cost a 10M-read run 30 s, whichever tool happened to run first.
    read_through(list(inputs))
    wait_idle()
    # The wall time ends when the process does (communicate() waits for it);
    # the peak RSS is sampled beside it. Polling for the exit every 50 ms
    # added 0-50 ms to every run, 2-3% of a 1M-read dmap run.
    peak = 0
    done = threading.Event()

    def sample_rss(pid: int) -> None:
        nonlocal peak
        while not done.wait(0.05):
            try:
                ps = psutil.Process(pid)
                peak = max(peak, sum(p.memory_info().rss for p in [ps, *ps.children(recursive=True)]))
            except psutil.Error:
                pass

    gpu = gpu_sampler()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    sampler = threading.Thread(target=sample_rss, args=(proc.pid,), daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err}")
    return {"wall": wall, "rss_mb": peak / 2**20, "stdout": out, "stderr": err, "gpu_busy": gpu_busy(gpu)}


def shell_rounds(commands: dict[str, str], inputs: list[Path], outputs: dict[str, Path],
                 repeat: int) -> dict[str, list[tuple[float, float]]]:
    """(wall s, CPU s of every process) of each shell command of ``commands`` in ``repeat`` rounds,
    each run through :func:`measure` after removing its output, the order reversed every other
    round."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for k in range(repeat):
        for name in (list(commands) if k % 2 == 0 else list(commands)[::-1]):
            outputs[name].unlink(missing_ok=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            r = measure(["bash", "-o", "pipefail", "-c", commands[name]], inputs)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            times[name].append((r["wall"], after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime))
    return times


def median_times(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The median wall and CPU seconds of :func:`shell_rounds`' runs of one command."""
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def ecoli_arguments(description: str, repeat: int = 3, errors: bool = True) -> argparse.ArgumentParser:
    """The options of a benchmark of :func:`ecoli_case`: its folder, reads, rounds and (``errors``)
    substitutions per read; the caller adds its own."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/dmap-bench")
    ap.add_argument("--reads", type=int, default=1_000_000)
    if errors:
        ap.add_argument("--max-errors", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=repeat)
    return ap


def print_times(times: dict[str, list[tuple[float, float]]], labels: dict[str, str],
                outputs: dict[str, Path] | None = None, same: bool = True) -> None:
    """A Markdown table of :func:`shell_rounds`' medians, a row per command in ``labels``' order (with
    ``outputs``, each output's size); exits 1 where the outputs should be ``same`` and are not."""
    size = " output MB |" if outputs else ""
    print(f"\n| command | wall s | CPU s |{size}")
    print("|---|---|---|" + ("---|" if outputs else ""))
    for name, label in labels.items():
        wall, cpu = median_times(times[name])
        mb = f" {outputs[name].stat().st_size / 1e6:.1f} |" if outputs else ""
        print(f"| {label} | {wall:.2f} | {cpu:.2f} |{mb}")
    if not same:
        sys.exit(1)


def gpu_sampler() -> subprocess.Popen | None:
    """``nvidia-smi`` sampling the first GPU's utilisation every 100 ms (None without one)."""
    if not shutil.which("nvidia-smi"):
        return None
    return subprocess.Popen(["nvidia-smi", "--id=0", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                             "-lms", "100"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def gpu_busy(sampler: subprocess.Popen | None) -> float | None:
    """Mean of the samples: the share of time in which a kernel ran on the GPU, in percent."""
    if sampler is None:
        return None
    sampler.terminate()
    samples = [int(x) for x in sampler.communicate()[0].split() if x.isdigit()]
    return statistics.mean(samples) if samples else None


@contextlib.contextmanager
def device_workers(n: int, device: str | None = None, threads: int = 2, env: dict | None = None):
    """A real ``dask scheduler`` and ``n`` ``dask worker`` processes (``threads`` each) on one
    OpenCL device (default: the first), for ``dmap run --scheduler``; yields the address and the
    two processes (the scheduler, then ``dask worker`` with its workers under it).  ``env``: the
    processes' environment (e.g. a PYTHONPATH naming the dmap to run).

    Several workers can share one GPU: each has its own context and copy of the index, and
    reads, merges and formats its own chunks, so the host's cores serve the device.  They run
    in ``/``: ``python -m`` puts its working directory first on ``sys.path``, and a checkout's
    ``dmap`` there would stand in for the installed one.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    py = sys.executable
    procs = [subprocess.Popen([py, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stderr=subprocess.DEVNULL, env=env, cwd="/")]
    try:
        procs.append(subprocess.Popen(
            [py, "-m", "distributed.cli.dask_worker", address, "--host", "127.0.0.1", "--nworkers", str(n),
             "--nthreads", str(threads), "--no-dashboard", "--memory-limit", "0", "--resources", "opencl=1",
             "--preload", "dmap.cluster.worker", *(["--dmap-device", device] if device else [])],
            stderr=subprocess.DEVNULL, env=env, cwd="/"))
        subprocess.run([py, "-c", f"from distributed import Client; "
                        f"Client('{address}', timeout=60).wait_for_workers({n}, timeout=120)"], check=True, timeout=180,
                       env=env, cwd="/")
        yield address, procs
    finally:
        stop_processes(procs, timeout=60)


def stop_processes(procs: list[subprocess.Popen], timeout: float = 30) -> None:
    """Stop the processes ``procs`` started, one at a time, the last first: SIGTERM, then
    SIGKILL where one still runs ``timeout`` seconds later.  One at a time, because a
    ``dask worker`` stopped together with its scheduler waits on the scheduler's closing
    connection and has taken more than 30 s to exit."""
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def compile_dmap() -> None:
    """Compile dmap's modules to bytecode, as a regular ``pip install`` does.

    An editable install leaves that to the first import, and where
    PYTHONDONTWRITEBYTECODE is set (this VM sets it) every run compiles
    them again, which a user's install does not (``import dmap.cli``: 1.16
    s without, 1.135 s with, medians of 6 in a slow phase of the VM).
    """
    import compileall

    import dmap

    compileall.compile_dir(Path(dmap.__file__).parent, quiet=1)


def ecoli_reference(work: Path) -> Path:
    """E. coli as FASTA in ``work`` (made once)."""
    work.mkdir(parents=True, exist_ok=True)
    ref = work / "ecoli.fa"
    if not ref.exists():
        with gzip.open(ECOLI, "rt") as f:
            ref.write_text(f.read())
    return ref


def ecoli_case(work: Path, reads: int, errors: int = 0) -> tuple[Path, Path]:
    """E. coli's dmap index (built once) and ``reads`` simulated 100-bp reads with ``errors``
    substitutions each, under ``work``."""
    ref = ecoli_reference(work)
    index = work / "ecoli.dmap"
    if not index.exists():
        subprocess.run([DMAP, "index", str(ref), "-o", str(index), "-q"], check=True)
    return index, simulated_reads(work, ref, reads, 100, errors)


def alignment_digest(sam: Path, without_tag: bytes | None = None) -> str:
    """A digest of a SAM file's records, its header left out (its ``@PG`` line names the command);
    with ``without_tag`` (e.g. ``b"\\tRG:Z:"``), each record's last field left out where it is that tag."""
    h = hashlib.blake2b(digest_size=8)
    with open(sam, "rb") as f:
        for line in f:
            if not line.startswith(b"@"):
                if without_tag is not None and (cut := line.rfind(without_tag)) >= 0:
                    line = line[:cut] + b"\n"
                h.update(line)
    return h.hexdigest()


def many_contigs(work: Path, n: int, mean_length: int) -> Path:
    """``n`` random DNA contigs (seed 1) of lengths uniform over half to one and a half times
    ``mean_length``, as FASTA in ``work`` (made once): a transcriptome's or a draft assembly's
    shape, where each run pays for every contig's name and length."""
    import numpy as np

    ref = work / f"contigs_{n}_{mean_length}.fa"
    if not ref.exists():
        rng = np.random.default_rng(1)
        lengths = rng.integers(mean_length // 2, mean_length * 3 // 2 + 1, n)
        bases = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, int(lengths.sum()))].tobytes().decode()
        ends = np.cumsum(lengths)
        with open(ref, "w") as f:
            for i, (end, length) in enumerate(zip(ends.tolist(), lengths.tolist())):
                f.write(f">contig{i} len={length}\n{bases[end - length:end]}\n")
    return ref


def simulated_reads(work: Path, ref: Path, n: int, length: int, errors: int = 0) -> Path:
    """``n`` reads of ``length`` from ``ref`` with ``errors`` substitutions each, made once (seed 1)."""
    reads = work / (f"exact_{n}_{length}.fq" if not errors else f"sub{errors}_{n}_{length}.fq")
    if ref.stem != "ecoli":
        reads = reads.with_name(f"{ref.stem}_{reads.name}")
    if not reads.exists():
        subprocess.run([sys.executable, str(MAKE_READS), str(ref), "-n", str(n), "-l", str(length), "--seed", "1",
                        "--errors", str(errors), "-o", str(reads), "--truth", str(reads.with_suffix(".tsv"))],
                       check=True)
    return reads


def reads_in_form(work: Path, reads: Path, form: str) -> Path:
    """``reads`` (FASTQ) as ``form`` writes them: "fastq" as they are, "sra" with SRA's headers,
    repeated on the '+' lines (as ``fastq-dump`` writes them), "fasta" without qualities."""
    if form == "fastq":
        return reads
    out = work / f"{reads.stem}_{form}.{'fa' if form == 'fasta' else 'fq'}"
    if not out.exists():
        lines = reads.read_bytes().splitlines()
        records = []
        for i in range(0, len(lines), 4):
            name, seq, _, qual = lines[i:i + 4]
            if form == "fasta":
                records.append(b">%s\n%s\n" % (name[1:], seq))
            else:
                header = b"SRR000001.%d %s length=%d" % (i // 4 + 1, name[1:], len(seq))
                records.append(b"@%s\n%s\n+%s\n%s\n" % (header, seq, header, qual))
        out.write_bytes(b"".join(records))
    return out


def compressed(reads: Path, how: str) -> Path:
    """``reads`` compressed ``how`` (made once, beside it); ``bam``: as unaligned BAM."""
    if how == "none":
        return reads
    if how == "bam":
        out = reads.with_suffix(".bam")
        if not out.exists():
            subprocess.run(["samtools", "import", "-0", str(reads), "-o", str(out) + ".tmp", "-O", "bam"], check=True)
            os.rename(str(out) + ".tmp", out)
        return out
    out = reads.with_name(f"{reads.name}.{how}.gz")
    if not out.exists():
        tmp = out.with_name(out.name + ".tmp")
        if how == "bgzf":
            write_bgzf(reads, tmp)
        else:
            with open(tmp, "wb") as f:
                subprocess.run(["gzip", "-1", "-c", str(reads)], stdout=f, check=True)
        tmp.rename(out)
    return out


def write_bgzf(src: Path, out: Path) -> None:
    """``src`` as BGZF in bgzip's blocks of 65,280 bytes, deflated by dmap's BGZF writer on every core.

    Not bgzip itself: htslib's single-threaded ``pysam.tabix_compress`` takes 29 s per 1M reads on
    the 2-core VM, about 5 minutes of a lent machine's time for 10M; this takes 0.44 s per 1M
    there. ISA-L's level 1 makes the file about 7% larger than bgzip's level 6."""
    piece = bgzf.BLOCK_DATA * 256  # 16 MiB: whole blocks, so the pieces' blocks concatenate
    with open(src, "rb") as f, open(out, "wb") as o, ThreadPoolExecutor(os.cpu_count()) as pool:
        for blocks in pool.map(bgzf.compress, iter(lambda: f.read(piece), b"")):  # ISA-L lets go of the GIL
            o.write(blocks)
        o.write(bgzf.EOF)


def reads_files(work: Path, reads: Path, n: int) -> list[Path]:
    """``reads`` cut into ``n`` files of consecutive reads, as many in each (the last takes the rest)."""
    folder = work / f"{reads.stem}_in_{n}_files"
    paths = [folder / f"part{k:05d}{reads.suffix}" for k in range(n)]
    if all(p.exists() for p in paths):
        return paths
    folder.mkdir(exist_ok=True)
    lines = reads.read_bytes().splitlines(keepends=True)
    per_record = 2 if reads.suffix == ".fa" else 4
    per_file = len(lines) // per_record // n * per_record
    for k, path in enumerate(paths):
        path.write_bytes(b"".join(lines[k * per_file: (k + 1) * per_file if k < n - 1 else len(lines)]))
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--work", default="/tmp/dmap-bench")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of (dmap, bowtie) runs; medians are reported")
    ap.add_argument("--skip-kernel", action="store_true")
    ap.add_argument("--threads", type=int, default=2, help="bowtie -p: give it every core of the machine")
    ap.add_argument("--workers-per-device", type=int, nargs="*", default=[],
                    help="also dmap run --workers-per-device N (the embedded cluster), for each N")
    ap.add_argument("--workers", type=int, nargs="*", default=[],
                    help="also dmap run --scheduler against a real cluster of N worker processes on the first "
                         "device, for each N (a GPU host's cores: the workers read, merge and format)")
    ap.add_argument("--worker-threads", type=int, nargs="+", default=[2],
                    help="with --workers: threads per worker process; a cluster for each (N, threads)")
    ap.add_argument("--chunk-sizes", type=int, nargs="*", default=[],
                    help="with --workers: also each cluster with dmap run --chunk-size C, for each C")
    ap.add_argument("--contigs", type=int, default=0,
                    help="map to this many random contigs instead of E. coli (a transcriptome's shape)")
    ap.add_argument("--contig-length", type=int, default=175, help="with --contigs: their mean length")
    ap.add_argument("--files", type=int, default=1,
                    help="cut the reads into this many files, mapped as one comma-separated list")
    ap.add_argument("--form", choices=["fastq", "sra", "fasta"], default="fastq",
                    help="the reads as FASTQ, as FASTQ with SRA's headers repeated on the '+' lines "
                         "(fastq-dump's), or as FASTA (bowtie -f)")
    ap.add_argument("--compress", choices=["none", "gzip", "bgzf"], default="none",
                    help="the reads files compressed by `gzip -1` (which dmap's client inflates alone) or by "
                         "bgzip (which the workers cut and inflate); both tools read them compressed")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    ref = many_contigs(work, args.contigs, args.contig_length) if args.contigs else ecoli_reference(work)
    reads = reads_in_form(work, simulated_reads(work, ref, args.reads, args.length), args.form)
    stem = ref.stem  # the indexes' names: ecoli.dmap, ecoli_bt, ...
    what = (f"{args.contigs} random contigs of {args.contig_length // 2}-{args.contig_length * 3 // 2} bp"
            if args.contigs else "E. coli")

    print(f"# {args.reads} exact {args.length}-bp reads vs {what}; {os.cpu_count()} CPUs")
    compile_dmap()
    builds = {}
    shutil.rmtree(work / f"{stem}.dmap", ignore_errors=True)
    builds["dmap index"] = measure([DMAP, "index", str(ref), "-o", str(work / f"{stem}.dmap")])
    builds["bowtie-build"] = measure(["bowtie-build", "-q", str(ref), str(work / f"{stem}_bt")])
    if shutil.which("bwa"):
        shutil.copy(ref, work / f"{stem}_bwa.fa")
        builds["bwa index"] = measure(["bwa", "index", str(work / f"{stem}_bwa.fa")])
    print("\n| index build | wall s | peak RSS MB |\n|---|---|---|")
    for name, m in builds.items():
        print(f"| {name} | {m['wall']:.2f} | {m['rss_mb']:.0f} |")

    bowtie = f"bowtie -v 0 -a -p {args.threads}"
    files = reads_files(work, reads, args.files) if args.files > 1 else [reads]
    files = [compressed(f, args.compress) for f in files]
    reads = compressed(reads, args.compress)
    listed = ",".join(map(str, files))
    dmap_cmd = [DMAP, "run", str(work / f"{stem}.dmap"), listed, "-o", str(work / "dmap.sam")]
    commands = {
        "dmap run": dmap_cmd,
        bowtie: ["bowtie", "-v", "0", "-a", "-p", str(args.threads), "--sam", *(["-f"] if args.form == "fasta" else []),
                 str(work / f"{stem}_bt"), listed, str(work / "bowtie.sam")],
    }
    inputs = {"dmap run": [*files, work / f"{stem}.dmap"], bowtie: [*files, *work.glob(f"{stem}_bt.*")]}
    if args.files > 1:
        commands["dmap run, one file"] = [*dmap_cmd[:3], str(reads), *dmap_cmd[4:]]
        inputs["dmap run, one file"] = [reads, work / f"{stem}.dmap"]
    for n in args.workers_per_device:
        commands[f"dmap run --workers-per-device {n}"] = [*dmap_cmd, "--workers-per-device", str(n)]
        inputs[f"dmap run --workers-per-device {n}"] = inputs["dmap run"]
    with contextlib.ExitStack() as stack:
        for n in args.workers:
            for threads in args.worker_threads:
                address = stack.enter_context(device_workers(n, threads=threads))[0]
                name = f"dmap run --scheduler, {n} workers" + (f" x {threads} threads" if threads != 2 else "")
                for size in [None, *args.chunk_sizes]:
                    row = name + (f", --chunk-size {size}" if size else "")
                    commands[row] = [*dmap_cmd, "--scheduler", address,
                                     *(["--chunk-size", str(size)] if size else [])]
                    inputs[row] = inputs["dmap run"]
                measure(commands[name], inputs[name])  # each worker builds its kernels and loads the index
        # Alternate the tools, several rounds: this machine's speed drifts by
        # 20-30% over minutes, so one run each is not a fair comparison.
        runs: dict[str, list[dict]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, cmd in commands.items():
                # Each run writes a new file: truncating the previous run's 3 GB of SAM
                # costs bowtie 0.4-1.1 s on this VM's ext4, where dmap leaves freeing
                # the file it replaces to another process (dmap.io.output.released_elsewhere).
                Path(cmd[cmd.index("-o") + 1] if name != bowtie else cmd[-1]).unlink(missing_ok=True)
                runs[name].append(measure(cmd, inputs[name]))
    med = {name: statistics.median(m["wall"] for m in ms) for name, ms in runs.items()}
    last = {name: ms[-1] for name, ms in runs.items()}
    bt_hits = int(re.search(r"Reported (\d+) alignments", last[bowtie]["stderr"]).group(1))
    base = med[bowtie]
    gpu = any(m["gpu_busy"] is not None for ms in runs.values() for m in ms)
    print(f"\n| mapper | wall s (median of {args.repeat}) | min-max | reads/s | peak RSS MB | speed vs bowtie |"
          + (" GPU busy |" if gpu else ""))
    print("|---|---|---|---|---|---|" + ("---|" if gpu else ""))
    for name, ms in runs.items():
        walls = [m["wall"] for m in ms]
        busy = [m["gpu_busy"] for m in ms if m["gpu_busy"] is not None]
        print(f"| {name} | {med[name]:.2f} | {min(walls):.2f}-{max(walls):.2f} | {args.reads / med[name]:,.0f} | "
              f"{max(m['rss_mb'] for m in ms):.0f} | {base / med[name]:.2f}x |"
              + (f" {statistics.median(busy):.0f}% |" if gpu and busy else " |" if gpu else ""))
    for name in commands:
        if name == bowtie:
            continue
        hits = int(re.search(r"mapped, (\d+) hits", last[name]["stderr"]).group(1))
        inner = statistics.median(float(re.search(r"hits in ([\d.]+) s", m["stderr"]).group(1)) for m in runs[name])
        print(f"\n{name} inside the process (cluster start included; interpreter start, imports and shutdown "
              f"excluded): {inner:.2f} s ({args.reads / inner:,.0f} reads/s, "
              f"{base / inner:.2f}x bowtie); alignments: dmap {hits}, bowtie {bt_hits}"
              f"{' (equal)' if hits == bt_hits else ' (DIFFERENT)'}")
    if not args.skip_kernel:
        wait_idle()
        print("\nkernels alone:")
        subprocess.run([sys.executable, str(HERE / "kernel_speed.py"), str(work / f"{stem}.dmap"), str(reads),
                        "--batch", "1", "16", "--repeat", "5"], check=True)


if __name__ == "__main__":
    main()
