"""Helpers the tests share: random references with the structures that break mappers
(repeats, N runs, lowercase, many contigs), FASTA/FASTQ writers, kernel runs on one
block, checks of the tools that are installed, and how many examples the random-case tests
draw.  Fixtures are in conftest.py."""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from dmap.alphabet import DNA_SYMBOLS, PROTEIN_SYMBOLS, Alphabet, get_alphabet
from dmap.index.build import index_block
from dmap.index.store import BlockArrays
from dmap.opencl.device import BlockText
from dmap.reads import encode_reads
from dmap.search.exact import search_block
from dmap.search.kmers import build_kmer_table, kmer_depth
from dmap.search.locate import expand_intervals, locate_rows, locate_rows_numpy, split_located
from dmap.testing.search import backward_search_numpy

SCALE_VARIABLE = "DMAP_TEST_SCALE"


def examples(n: int) -> int:
    """``n`` hypothesis examples, times ``$DMAP_TEST_SCALE`` (default 1): the suite draws a few
    random cases per test, and a search for rare failures runs many more of the same tests
    (``DMAP_TEST_SCALE=50 python3 -m pytest tests -k random``), shrinking what it finds."""
    scale = os.environ.get(SCALE_VARIABLE, "1")
    if not scale.isdigit() or int(scale) < 1:
        raise ValueError(f"{SCALE_VARIABLE} must be a whole number of at least 1, not {scale!r}")
    return n * int(scale)


def random_contig(rng: np.random.Generator, alphabet: str, length: int, repeats: bool = True) -> str:
    """A random sequence with tandem repeats, copied segments and (DNA) N runs and lowercase."""
    symbols = {"dna": DNA_SYMBOLS, "protein": PROTEIN_SYMBOLS, "text": b"abcdefghij ,.ABC"}[alphabet].decode()
    seq = list(rng.choice(list(symbols), size=length))
    if repeats and length > 60:
        unit = "".join(rng.choice(list(symbols), size=int(rng.integers(1, 6))))
        at = int(rng.integers(0, length - 40))
        tandem = (unit * 40)[:40]
        seq[at : at + 40] = list(tandem)
        src, dst = sorted(int(x) for x in rng.integers(0, length - 30, size=2))
        seq[dst : dst + 30] = seq[src : src + 30]
    if alphabet == "dna" and length > 50:
        at = int(rng.integers(0, length - 10))
        seq[at : at + int(rng.integers(1, 8))] = "N" * 7
        seq = seq[:length]
        lo = int(rng.integers(0, length - 20))
        seq[lo : lo + 15] = [c.lower() for c in seq[lo : lo + 15]]
    return "".join(seq)


def write_fasta(path, contigs: list[tuple[str, str]]) -> None:
    with open(path, "w") as f:
        for name, seq in contigs:
            f.write(f">{name} some description\n")
            for i in range(0, len(seq), 60):
                f.write(seq[i : i + 60] + "\n")


def write_fastq(path, reads: list[str], names: list[str] | None = None) -> None:
    names = names or [f"read{i}" for i in range(len(reads))]
    with open(path, "w") as f:
        for name, seq in zip(names, reads):
            f.write(f"@{name}\n{seq}\n+\n{'I' * len(seq)}\n")


def sample_reads(rng, contigs: list[tuple[str, str]], n: int, min_len: int, max_len: int, alphabet: str) -> list[str]:
    """Reads taken from the contigs (some reverse-complemented), at contig ends,
    spanning junctions, random ones, and some with an N."""
    reads = []
    joined = "|".join(seq for _, seq in contigs)
    for k in range(n):
        length = int(rng.integers(min_len, max_len + 1))
        name, seq = contigs[int(rng.integers(len(contigs)))]
        kind = k % 6
        if kind == 0 and len(seq) >= length:  # contig start
            r = seq[:length]
        elif kind == 1 and len(seq) >= length:  # contig end
            r = seq[-length:]
        elif kind == 2:  # across a contig junction (must not match there)
            at = max(0, joined.find("|") - length // 2)
            r = joined[at : at + length].replace("|", "A" if alphabet == "dna" else "C")
        elif kind == 3:  # random
            r = random_contig(rng, alphabet, length, repeats=False)
        else:
            at = int(rng.integers(0, max(1, len(seq) - length)))
            r = seq[at : at + length]
        if alphabet == "dna" and k % 2 and r:
            from dmap.alphabet import reverse_complement

            r = reverse_complement(r)
        if alphabet == "dna" and k % 17 == 5 and len(r) > 3:
            r = r[:2] + "N" + r[3:]
        if r:
            reads.append(r)
    return reads


def alphabet_for(name: str, contigs: list[tuple[str, str]]) -> Alphabet:
    if name == "text":
        return Alphabet.for_text("".join(s for _, s in contigs).encode())
    return get_alphabet(name)


def single_block(text_codes: np.ndarray, alphabet: Alphabet, layout: str = "interleaved", rate: int | None = None,
                 sa_rate: int = 4) -> BlockArrays:
    from dmap.index.occ import default_rate

    rate = rate or default_rate(layout, alphabet.sigma)
    arrays = index_block(text_codes, alphabet.sigma, layout, rate, sa_rate)
    return BlockArrays.from_arrays(arrays, text_codes.size, layout=layout, sigma=alphabet.sigma, rate=rate,
                                   sa_sample_rate=sa_rate)


def kernel_hits(device, block, text, alphabet, reads, batch=16):
    """Hits of the kernel searching codes (intervals checked against numpy, with and without the
    block's k-mer table, then located), which must equal those of the kernel searching the reads'
    bytes with the early stop on."""
    codes, offsets, lengths, raw = encode_reads(reads, alphabet, reads)
    n_strands = alphabet.n_strands
    dblock = device.upload_block(block)
    intervals = search_block(device, dblock, codes, offsets, lengths, n_strands, batch=batch)
    assert (intervals == backward_search_numpy(block, codes, offsets, lengths, n_strands)).all()
    kmers = deep_kmer_table(device, dblock)
    assert (search_block(device, dblock, codes, offsets, lengths, n_strands, batch=batch, kmers=kmers)
            == intervals).all()
    query, rows = expand_intervals(intervals.reshape(-1, 2))
    positions = locate_rows(device, dblock, rows)
    assert (positions == locate_rows_numpy(block, rows)).all()
    hits = {(int(q) // n_strands, "t", int(p), int(q) % n_strands) for q, p in zip(query, positions)}
    assert early_stop_hits(device, text, dblock, alphabet, raw, offsets, lengths, n_strands, batch) == hits
    return hits


def deep_kmer_table(device, dblock):
    """A block's k-mer table as deep as its rows allow: a small test block's own would be
    a level or two (the table stays under half the size of its occ)."""
    return build_kmer_table(device, dblock, kmer_depth(dblock.shape.n_rows, dblock.shape.sigma, max_bytes=1 << 24))


def early_stop_hits(device, text_codes, dblock, alphabet, raw, offsets, lengths, n_strands, batch):
    """Reads as bytes translated on the device, unique suffixes located and verified against the text."""
    text = BlockText(text_codes, device.upload(text_codes), text_codes.nbytes)
    found = search_block(device, dblock, raw, offsets, lengths, n_strands, batch=batch, table=alphabet.read_table,
                         text=text).reshape(-1, 2)
    with_table = search_block(device, dblock, raw, offsets, lengths, n_strands, batch=batch,
                              table=alphabet.read_table, text=text, kmers=deep_kmer_table(device, dblock))
    assert (with_table.reshape(-1, 2) == found).all()
    located, positions, query, rows = split_located(found)
    positions = np.concatenate([positions, locate_rows(device, dblock, rows)])
    query = np.concatenate([located, query])
    return {(int(q) // n_strands, "t", int(p), int(q) % n_strands) for q, p in zip(query, positions)}


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def samtools_quickcheck(path) -> None:
    if have("samtools"):
        subprocess.run(["samtools", "quickcheck", "-v", str(path)], check=True)


def require_device_parts(n: int = 2) -> None:
    """Skip unless the first OpenCL device can be split into ``n`` workers."""
    from dmap.opencl.discovery import list_devices

    if list_devices()[0].max_split < n:
        pytest.skip(f"this device cannot be split into {n} workers")


def genome_case(directory, seed: int, size: int, read_length: int, n_reads: int, **index_options):
    """A random genome ``ref.fa``, its index ``idx`` and ``r.fq`` of exact reads from it; returns the Index."""
    import dmap

    rng = np.random.default_rng(seed)
    genome = "".join(rng.choice(list("ACGT"), size=size))
    write_fasta(directory / "ref.fa", [("g", genome)])
    starts = rng.integers(0, size - read_length, size=n_reads)
    write_fastq(directory / "r.fq", [genome[s : s + read_length] for s in starts])
    return dmap.build_index(directory / "ref.fa", directory / "idx", **index_options)


def bam_parts(data: bytes) -> tuple[str, bytes]:
    """A BAM file's (BGZF bytes) SAM header text and the bytes of its records, decompressed."""
    raw = gzip.decompress(data)
    assert raw[:4] == b"BAM\x01"
    (l_text,) = struct.unpack_from("<i", raw, 4)
    at = 8 + l_text
    (n_ref,) = struct.unpack_from("<i", raw, at)
    at += 4
    for _ in range(n_ref):
        (l_name,) = struct.unpack_from("<i", raw, at)
        at += 4 + l_name + 4
    return raw[8:8 + l_text].decode(), raw[at:]


# Tests that pin a process to some cores, as SLURM or taskset would.
pinnable = pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
                              reason="needs taskset and two cores")


def pinned_run(code: str, cores: str | None = None) -> str:
    """What Python ``code`` prints, run on ``cores`` (taskset's list, e.g. "0-3"; None: as this
    process may), with no PoCL thread count set in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_NUM")}
    prefix = ["taskset", "-c", cores] if cores is not None else []
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          check=True, timeout=120).stdout.strip()


@contextlib.contextmanager
def cpu_quota_group(cpus: float):
    """A control group of its own, under this process's, whose CPU quota is ``cpus`` CPUs' worth of
    time per period (as ``docker --cpus`` and Kubernetes' CPU limits set it); yields a function
    for ``preexec_fn`` that moves a child process into it.  Skips the test where no CPU
    controller can be written (not root, no cgroup file system, a read-only one)."""
    from dmap.host import group_folders

    # the process's own group: the first one listed (cgroup v1's cpu hierarchy before v2's)
    own = next(group_folders("cpu", "/proc/self/cgroup", "/proc/self/mountinfo"), None)
    if own is None or not os.access(own[1], os.W_OK):
        pytest.skip("needs a control group CPU controller this test may write (root, cgroup v1 or v2)")
    _, parent, v2 = own
    folder = parent / f"dmap-test-{os.getpid()}"
    try:
        folder.mkdir()
        period = 100_000
        if v2:
            (folder / "cpu.max").write_text(f"{int(cpus * period)} {period}")
        else:
            (folder / "cpu.cfs_period_us").write_text(str(period))
            (folder / "cpu.cfs_quota_us").write_text(str(int(cpus * period)))
    except OSError as e:
        with contextlib.suppress(OSError):
            folder.rmdir()
        pytest.skip(f"cannot make a control group with a CPU quota here ({e})")

    def enter() -> None:
        (folder / "cgroup.procs").write_text("0")  # 0: the process that writes it

    try:
        yield enter
    finally:
        for _ in range(50):  # the child has ended, but its group may still count it for a moment
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.1)


# The pages of one of allocation_faults' buffers: fewer faults than this, and freed memory was reused.
PAGES_PER_BUFFER = (1 << 20) // 4096


def allocation_faults(n: int = 20, size: int = 1 << 20, warm_up: int = 2) -> int:
    """Page faults this process takes while it allocates, fills and frees ``n`` buffers of
    ``size`` bytes in turn (through the C library's ``malloc``, where numpy's large arrays
    come from), after ``warm_up`` such buffers not counted (the heap grows once): about
    ``n * size / 4096`` where each buffer is mapped afresh, near 0 where freed heap memory
    is reused. 1 MiB: above glibc's first mmap threshold (128 KiB), and too small for a
    transparent huge page to hide the faults."""
    import ctypes
    import resource

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    for k in range(warm_up + n):
        if k == warm_up:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        p = libc.malloc(size)
        ctypes.memset(p, 1, size)
        libc.free(p)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def without_pg(sam: bytes) -> list[bytes]:
    """SAM text's lines but its ``@PG`` line, which holds the run's command line."""
    return [line for line in sam.splitlines() if not line.startswith(b"@PG\t")]


def htslib_bam(sam: bytes) -> bytes:
    """What htslib (``samtools view -b``) makes of SAM text with a header, as BGZF bytes."""
    return subprocess.run(["samtools", "view", "--no-PG", "-b", "-"], input=sam, capture_output=True,
                          check=True).stdout


def dmap_cmd(*args, cwd=None, stdin=None):
    return subprocess.run([sys.executable, "-m", "dmap", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120, input=stdin)


def assert_clean_failure(r, out, *words):
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dmap: error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert not out.exists()
    assert not [p for p in os.listdir(out.parent) if ".partial-" in p]


def sam_body(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines() if line and not line.startswith("@")]


@contextlib.contextmanager
def http_server(directory, ranges: bool = True):
    """A local HTTP server of the files in ``directory``, as web servers and object stores serve
    reads (``ranges``: byte ranges, ``Range: bytes=a-b`` answered 206; else the whole file every
    time, as some servers do); yields its base URL."""
    import http.server
    import threading

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(directory), **kwargs)

        def log_message(self, *args) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            want = self.headers.get("Range", "")
            path = self.translate_path(self.path)
            if not ranges or not want.startswith("bytes=") or not os.path.isfile(path):
                return super().do_GET()
            size = os.path.getsize(path)
            lo, _, hi = want[len("bytes="):].partition("-")
            lo, hi = int(lo), min(int(hi) if hi else size - 1, size - 1)
            with open(path, "rb") as f:
                f.seek(lo)
                body = f.read(max(0, hi - lo + 1))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {lo}-{lo + len(body) - 1}/{size}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()



BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def benchmark_module(name: str):
    """The script ``benchmarks/<name>.py`` as a module (a script that imports its neighbours
    needs ``BENCHMARKS`` on ``sys.path``, as when it is run there)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_benchmarks_{name}", os.path.join(BENCHMARKS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Stopping the processes a test started, as the benchmarks stop theirs.
stop_processes = benchmark_module("exact_vs_bowtie").stop_processes
