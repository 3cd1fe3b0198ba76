"""dmap against a real cluster: `dask scheduler` and `dask worker --preload
dmap.cluster.worker` processes on loopback."""

import contextlib
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest
from helpers import (
    assert_clean_failure,
    bam_parts,
    genome_case,
    htslib_bam,
    require_device_parts,
    stop_processes,
    without_pg,
    write_fasta,
    write_fastq,
)

from dmap.cluster.client import scheduler_workers
from dmap.format import bgzf
from dmap.io.splits import plan_input
from dmap.mapping.tasks import block_task

HERE = os.path.dirname(__file__)


PRELOAD = ("--preload", "dmap.cluster.worker", "--dmap-device", "0:0")


def start_cluster(directory, n_workers: int, scheduler: tuple[str, ...] = ("dask", "scheduler"),
                  worker_prefix: tuple[str, ...] = (), worker_args: tuple[str, ...] = PRELOAD, **env_extra: str):
    """A `dask scheduler` (or the command ``scheduler``) and `n_workers` `dask worker` processes
    on the device (each run by ``worker_prefix``, e.g. in a namespace of its own, with
    ``worker_args``: dmap's preload by default) on loopback, with ``env_extra`` in their
    environment; returns (address, processes)."""
    sched_file = directory / "scheduler.json"
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False", **env_extra)
    procs = [subprocess.Popen([*scheduler, "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], stderr=subprocess.DEVNULL, env=env)]
    for _ in range(300):
        if sched_file.exists() and sched_file.stat().st_size:
            break
        time.sleep(0.1)
    address = json.loads(sched_file.read_text())["address"]
    for i in range(n_workers):  # workers sharing the one PoCL device
        procs.append(subprocess.Popen(
            [*worker_prefix, "dask", "worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard",
             "--name", f"w{i}", "--resources", "opencl=1", *worker_args],
            stderr=subprocess.DEVNULL, env=env))
    from distributed import Client

    with Client(address, timeout=30) as c:
        c.wait_for_workers(n_workers, timeout=60)
    return address, procs


@pytest.fixture(scope="module")
def real_cluster(tmp_path_factory):
    address, procs = start_cluster(tmp_path_factory.mktemp("cluster"), 2)
    try:
        yield address, procs[1]
    finally:
        stop_processes(procs)


@pytest.fixture
def mapping_case(tmp_path):
    """An index of a random 200 kbp genome and 60,000 reads from it (both strands)."""
    genome_case(tmp_path, seed=5, size=200_000, read_length=60, n_reads=60_000)
    return [sys.executable, "-m", "dmap.cli", "run", str(tmp_path / "idx"), str(tmp_path / "r.fq"), "--chunk-size",
            "1000"]


def sam_body(path):
    return [line for line in path.read_text().splitlines() if not line.startswith("@PG")]


def test_run_against_scheduler_and_cluster_file(real_cluster, tmp_path):
    real_cluster, _ = real_cluster
    write_fasta(tmp_path / "ref.fa", [("c1", "ACGTTGCATGCAAGTCCGATGACTGACTAGCTAGC"), ("c2", "GGATCGATCGGATC")])
    subprocess.run([sys.executable, "-m", "dmap.cli", "index", tmp_path / "ref.fa", "-o", tmp_path / "idx",
                    "-L", "20", "-B", "16"], check=True)
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GATCCGATC", "TTTTTTTT"])
    (tmp_path / "cluster.yaml").write_text(f"scheduler:\n  address: {real_cluster}\ndmap:\n  chunk_size: 2\n")
    outputs = []
    for how in (["--scheduler", real_cluster], ["--cluster", tmp_path / "cluster.yaml"]):
        out = tmp_path / f"out{len(outputs)}.sam"
        r = subprocess.run([sys.executable, "-m", "dmap.cli", "run", tmp_path / "idx", tmp_path / "r.fq", "-o", out,
                            *how], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outputs.append([line for line in out.read_text().splitlines() if not line.startswith("@")])
    assert outputs[0] == outputs[1]
    assert [(f.split("\t")[0], f.split("\t")[2], f.split("\t")[3]) for f in outputs[0]] == [
        ("read0", "c1", "6"), ("read1", "c2", "6"), ("read2", "*", "0")]  # read1 maps as GATCGGATC (reverse)


def test_cluster_file_without_address(tmp_path):
    (tmp_path / "cluster.yaml").write_text("dmap:\n  chunk_size: 10\n")
    write_fastq(tmp_path / "r.fq", ["ACGT"])
    r = subprocess.run([sys.executable, "-m", "dmap.cli", "run", tmp_path, tmp_path / "r.fq", "-o",
                        tmp_path / "o.sam", "--cluster", tmp_path / "cluster.yaml"], capture_output=True, text=True)
    assert r.returncode == 1 and "scheduler.address" in r.stderr and "Traceback" not in r.stderr


def test_worker_killed_mid_run_gives_the_same_sam(real_cluster, mapping_case, tmp_path):
    """SIGKILL a worker process while dmap runs: Dask reruns its tasks elsewhere."""
    import psutil

    address, nanny = real_cluster
    run = [*mapping_case, "--scheduler", address]
    subprocess.run([*run, "-o", str(tmp_path / "clean.sam")], check=True, capture_output=True, timeout=300)
    job = subprocess.Popen([*run, "-o", str(tmp_path / "killed.sam")], stderr=subprocess.PIPE, text=True)
    worker = psutil.Process(nanny.pid).children()[0]  # the worker process under its nanny
    wait_for_records(tmp_path, "killed.sam")
    killed_mid_run = job.poll() is None
    worker.kill()
    _, err = job.communicate(timeout=300)
    assert killed_mid_run
    assert job.returncode == 0, err
    assert sam_body(tmp_path / "killed.sam") == sam_body(tmp_path / "clean.sam")


def test_a_standing_worker_makes_its_device_before_its_first_task(tmp_path):
    """A `dask worker` begins making its device (its OpenCL context: 0.45-0.75 s on an H100)
    when it starts, so a standing cluster's first run does not wait for it: before any task,
    the device is made, for the first task to take over."""
    from distributed import Client

    def made_early(dask_worker):
        from dmap.opencl import device

        future = device._early.get("0:0")
        return future is not None and future.result(timeout=60).spec == "0:0"

    address, procs = start_cluster(tmp_path, 1)
    try:
        with Client(address, timeout=30) as client:
            assert list(client.run(made_early).values()) == [True]
    finally:
        stop_processes(procs)


def test_a_worker_that_dies_while_every_worker_is_asked_is_left_out(tmp_path):
    """A run asks every worker for its process, dmap, index and counters (a broadcast) when it
    starts and ends.  A worker killed meanwhile (here 0.5 s into a random run) must not fail the
    run with "lost the Dask cluster": its broken connection leaves it out, as Dask reruns its
    tasks on the others; an error of the function itself is still raised."""
    from distributed import Client

    from dmap.cluster.worker import run_on_workers

    address, procs = start_cluster(tmp_path, 2, worker_args=(*PRELOAD, "--no-nanny"))
    try:
        with Client(address, timeout=30) as client:
            names = run_on_workers(client, lambda dask_worker: os._exit(1) if dask_worker.name == "w0"
                                   else dask_worker.name)
            assert list(names.values()) == ["w1"] and procs[1].wait(timeout=30) == 1
            with pytest.raises(ZeroDivisionError):
                run_on_workers(client, lambda: 1 / 0)
    finally:
        stop_processes(procs)


def test_a_worker_without_the_preload_is_counted_and_checked(mapping_case, tmp_path):
    """A worker started with the device resource but without dmap's preload takes the default
    device: it is given dmap's plugin when the run asks for the workers' counters, so its dmap
    and index are checked and its block loads counted like a preloaded worker's."""
    from distributed import Client

    address, procs = start_cluster(tmp_path, 1, worker_args=())
    try:
        r = subprocess.run([*mapping_case, "--scheduler", address, "-o", str(tmp_path / "out.sam")],
                           capture_output=True, text=True, timeout=300)
        with Client(address, timeout=30) as client:
            client.run(exec, OTHER_CODE)
            other = subprocess.run([*mapping_case, "--scheduler", address, "-o", str(tmp_path / "other.sam")],
                                   capture_output=True, text=True, timeout=300)
    finally:
        stop_processes(procs)
    assert r.returncode == 0, r.stderr
    assert "index blocks loaded: 1 on 1 worker(s)" in r.stderr
    assert other.returncode == 1 and "runs dmap 0.0.9 0123456789ab" in other.stderr, other.stderr


def test_a_run_whose_workers_are_gone_stops_at_once_on_a_signal(mapping_case, tmp_path):
    """The only worker (no nanny to restart it) is killed mid-run: the run waits for a device
    that never comes.  SIGTERM then ends it at once, as Ctrl-C would, with its one line and no
    partial output; it hung before, waiting for that chunk while cleaning up."""
    import signal

    address, procs = start_cluster(tmp_path, 1, worker_args=(*PRELOAD, "--no-nanny"))
    try:
        job = subprocess.Popen([*mapping_case, "--scheduler", address, "-o", str(tmp_path / "out.sam")],
                               stderr=subprocess.PIPE, text=True)
        wait_for_records(tmp_path, "out.sam")
        procs[1].kill()
        procs[1].wait(timeout=30)
        stalled = job.poll() is None
        job.send_signal(signal.SIGTERM)
        _, err = job.communicate(timeout=60)
    finally:
        stop_processes(procs)
    assert stalled
    assert job.returncode == 128 + signal.SIGTERM, err
    assert err.strip() == "dmap: stopped by SIGTERM; no partial output file was left"
    assert not [p for p in os.listdir(tmp_path) if p.startswith("out.sam")]


def test_a_scheduler_that_gives_up_waiting_for_workers_stops_the_run_in_one_line(mapping_case, tmp_path):
    """With Dask's no-workers-timeout set on the scheduler, the tasks of a run whose workers are
    all gone fail after it: one line, no partial output, instead of Dask's traceback."""
    address, procs = start_cluster(tmp_path, 1, worker_args=(*PRELOAD, "--no-nanny"),
                                   DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT="1s")
    try:
        out = tmp_path / "out" / "out.sam"
        out.parent.mkdir()
        job = subprocess.Popen([*mapping_case, "--scheduler", address, "-o", str(out)], stderr=subprocess.PIPE,
                               text=True)
        wait_for_records(out.parent, "out.sam")
        procs[1].kill()
        _, err = job.communicate(timeout=120)
    finally:
        stop_processes(procs)
    assert_clean_failure(subprocess.CompletedProcess(job.args, job.returncode, "", err), out,
                         "no worker could run dmap's tasks (Attempted to run task", "no output was written")


def test_workers_write_the_records_to_a_file_a_pipe_and_a_fifo(real_cluster, mapping_case, tmp_path):
    """Worker processes write a file output's records in place and a stream's to part files that
    the client copies in order: the same bytes either way, and no part file is left.  Chunks of
    20,000 reads (about 2 MB of records each) have their whole blocks written with O_DIRECT where
    the file system allows, into a file given its length ahead and cut back at the end."""
    address, _ = real_cluster
    run = [*mapping_case, "--scheduler", address]
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    os.mkdir(tmp_path / "tmp")
    (tmp_path / "out").mkdir()
    subprocess.run([*run, "-o", str(tmp_path / "out" / "file.sam")], check=True, capture_output=True, timeout=300,
                   env=env)
    subprocess.run([*run, "--chunk-size", "20000", "-o", str(tmp_path / "large.sam")], check=True,
                   capture_output=True, timeout=300, env=env)
    assert sam_body(tmp_path / "large.sam") == sam_body(tmp_path / "out" / "file.sam")
    piped = subprocess.run(run, check=True, capture_output=True, timeout=300, env=env).stdout
    os.mkfifo(tmp_path / "fifo")
    with open(tmp_path / "from_fifo", "wb") as f:
        reader = subprocess.Popen(["cat", str(tmp_path / "fifo")], stdout=f)
        subprocess.run([*run, "-o", str(tmp_path / "fifo")], check=True, capture_output=True, timeout=300, env=env)
        reader.wait(timeout=60)
    from_fifo = (tmp_path / "from_fifo").read_bytes()
    want = sam_body(tmp_path / "out" / "file.sam")
    assert len(want) > 60_000
    assert [x for x in piped.decode().splitlines() if not x.startswith("@PG")] == want
    assert [x for x in from_fifo.decode().splitlines() if not x.startswith("@PG")] == want
    assert os.listdir(tmp_path / "tmp") == [] and os.listdir(tmp_path / "out") == ["file.sam"]


# Run on a worker (as source: the workers cannot import this module): as if it ran on a host
# without the run's file system, and back.
HIDE_RUN_FILES = "from dmap.format.writer import Parts\nParts.seen, Parts.usable = Parts.usable, lambda self: False"
SHOW_RUN_FILES = "from dmap.format.writer import Parts\nParts.usable = Parts.seen\ndel Parts.seen"


def test_a_worker_that_does_not_see_the_output_leaves_its_chunks_to_the_client(real_cluster, mapping_case,
                                                                                tmp_path):
    """One of the two workers is made blind to the run's files: its writes in place and its part
    files fail over to the client, which writes those chunks itself; the output is the same."""
    from distributed import Client

    address, _ = real_cluster
    run = [*mapping_case, "--scheduler", address]
    subprocess.run([*run, "-o", str(tmp_path / "clean.sam")], check=True, capture_output=True, timeout=300)
    with Client(address, timeout=30) as client:
        blind = sorted(scheduler_workers(client))[:1]
        client.run(exec, HIDE_RUN_FILES, workers=blind)
        try:
            r = subprocess.run([*run, "-o", str(tmp_path / "blind.sam")], capture_output=True, text=True,
                               timeout=300)
            piped = subprocess.run(run, capture_output=True, timeout=300)
        finally:
            client.run(exec, SHOW_RUN_FILES, workers=blind)
    assert r.returncode == 0, r.stderr
    assert piped.returncode == 0, piped.stderr
    want = sam_body(tmp_path / "clean.sam")
    assert len(want) > 60_000
    assert sam_body(tmp_path / "blind.sam") == want
    assert [x for x in piped.stdout.decode().splitlines() if not x.startswith("@PG")] == want


# A scheduler whose Python cannot import dmap (started from another environment).
SCHEDULER_WITHOUT_DMAP = (sys.executable, "-c", "import sys; sys.modules['dmap'] = None\n"
                          "from distributed.cli.dask_scheduler import main; main()")


def test_a_scheduler_that_cannot_load_dmap_stops_the_run_in_one_line(mapping_case, tmp_path):
    """Dask's scheduler unpickles the tasks it is sent: one without dmap refuses the run's graph,
    which dmap reports as the scheduler's, in one line, leaving no output."""
    address, procs = start_cluster(tmp_path, 1, SCHEDULER_WITHOUT_DMAP)
    try:
        (tmp_path / "out").mkdir()
        out = tmp_path / "out" / "file.sam"
        r = subprocess.run([*mapping_case, "--scheduler", address, "-o", str(out)], capture_output=True, text=True,
                           timeout=300)
    finally:
        stop_processes(procs)
    assert_clean_failure(r, out, "the Dask scheduler cannot load dmap's tasks (ModuleNotFoundError",
                         "run the scheduler where the same dmap is installed as here; no output was written")
    assert os.listdir(tmp_path / "out") == []


def can_hide_directories() -> bool:
    """Whether a process can get a mount namespace of its own (root, util-linux's unshare)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not can_hide_directories(), reason="needs root and unshare -m")
def test_a_worker_on_a_host_without_the_files_names_its_host(mapping_case, tmp_path):
    """A worker whose mount namespace hides a directory (as a host without the shared file
    system would): an index or reads file there is refused in one line naming the worker's host."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    index, reads = mapping_case[4], mapping_case[5]
    shutil.copytree(index, hidden / "idx")
    shutil.copy(reads, hidden / "r.fq")
    hide = ("unshare", "-m", "sh", "-c", f"mount -t tmpfs tmpfs {hidden} && exec \"$@\"", "sh")
    address, procs = start_cluster(tmp_path, 1, worker_prefix=hide)
    try:
        (tmp_path / "out").mkdir()
        out = tmp_path / "out" / "file.sam"
        python = mapping_case[:4]
        runs = [subprocess.run([*python, hidden / "idx", reads, "--scheduler", address, "-o", out],
                               capture_output=True, text=True, timeout=300),
                subprocess.run([*python, index, hidden / "r.fq", "--scheduler", address, "-o", out],
                               capture_output=True, text=True, timeout=300)]
    finally:
        stop_processes(procs)
    host = f"on host {socket.gethostname()!r}: No such file or directory"
    # The index is asked for before any task (the worker's address is named), the reads by the task.
    assert_clean_failure(runs[0], out, f"index {str(hidden / 'idx')!r} cannot be read by the worker tcp://127.0.0.1:",
                         host, "give a path every worker sees")
    assert_clean_failure(runs[1], out, f"reads file {str(hidden / 'r.fq')!r} cannot be read by the worker {host}",
                         "give a path every worker sees")


@pytest.mark.skipif(not can_hide_directories(), reason="needs root and unshare -m")
def test_a_worker_that_sees_another_index_at_the_path_stops_the_run(mapping_case, tmp_path):
    """Node-local copies of two different builds at one path: the worker would map against its
    own silently; the run stops first, in one line, before any output."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shutil.copytree(mapping_case[4], shared / "idx")
    (tmp_path / "other").mkdir()
    genome_case(tmp_path / "other", seed=6, size=50_000, read_length=60, n_reads=10)
    swap = ("unshare", "-m", "sh", "-c",
            f"mount -t tmpfs tmpfs {shared} && cp -r {tmp_path / 'other' / 'idx'} {shared / 'idx'} && exec \"$@\"",
            "sh")
    address, procs = start_cluster(tmp_path, 1, worker_prefix=swap)
    try:
        out = tmp_path / "out.sam"
        r = subprocess.run([*mapping_case[:4], shared / "idx", mapping_case[5], "--scheduler", address, "-o", out],
                           capture_output=True, text=True, timeout=300)
    finally:
        stop_processes(procs)
    assert_clean_failure(r, out, f"sees another index at {str(shared / 'idx')!r} than this process",
                         "every worker must see the same index")


# Run on a worker: files it writes may not grow past 64 KiB, and a write that would fails with
# EFBIG ("File too large") instead of the signal, as a full disk fails with ENOSPC.
LIMIT_FILE_SIZE = ("import resource, signal\n"
                   "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
                   "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))")
UNLIMIT_FILE_SIZE = ("import resource, signal\n"
                     "resource.setrlimit(resource.RLIMIT_FSIZE, (resource.getrlimit(resource.RLIMIT_FSIZE)[1],) * 2)\n"
                     "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)")


def test_a_worker_that_cannot_write_fails_the_run_with_the_outputs_error(real_cluster, mapping_case, tmp_path):
    """A worker's failed write (in place into the output, or to a part file for a pipe) is the
    output's error, in one line: not a lost cluster; no output or part file is left."""
    from distributed import Client

    address, _ = real_cluster
    run = [*mapping_case, "--scheduler", address]
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    os.mkdir(tmp_path / "tmp")
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "file.sam"
    with Client(address, timeout=30) as client:
        client.run(exec, LIMIT_FILE_SIZE)
        try:
            r = subprocess.run([*run, "-o", str(out)], capture_output=True, text=True, timeout=300, env=env)
            piped = subprocess.run(run, capture_output=True, text=True, timeout=300, env=env)
        finally:
            client.run(exec, UNLIMIT_FILE_SIZE)
    assert_clean_failure(r, out, f"cannot write {str(out)!r}: File too large; no output was written")
    assert_clean_failure(piped, out, "cannot write", ".sam-part': File too large; the records written so far "
                         "are incomplete")
    assert os.listdir(tmp_path / "tmp") == [] and os.listdir(tmp_path / "out") == []


OTHER_CODE = ("import dmap._version as v\n"
              "v.real_identity, v.code_identity = v.code_identity, lambda: '0.0.9 0123456789ab'")
SAME_CODE = "import dmap._version as v\nv.code_identity = v.real_identity\ndel v.real_identity"


def test_a_worker_with_other_code_stops_the_run_before_it_starts(real_cluster, mapping_case, tmp_path):
    """A worker whose dmap differs from the client's (another release or checkout) would compute
    the tasks its own way: the run stops with one line naming it, and writes nothing."""
    from distributed import Client

    address, _ = real_cluster
    with Client(address, timeout=30) as client:
        other = sorted(scheduler_workers(client))[-1:]
        client.run(exec, OTHER_CODE, workers=other)
        try:
            r = subprocess.run([*mapping_case, "--scheduler", address, "-o", str(tmp_path / "o.sam")],
                               capture_output=True, text=True, timeout=300)
        finally:
            client.run(exec, SAME_CODE, workers=other)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"dmap: error: worker {other[0]} runs dmap 0.0.9 0123456789ab, this process dmap ")
    assert "1 of 2 workers differ" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.sam").exists()


def test_workers_write_bam_and_compressed_sam_in_place_and_to_a_stream(real_cluster, mapping_case, tmp_path):
    """BAM, and SAM in BGZF blocks, from worker processes: each chunk's blocks written in place in
    a file, or through part files to a stream, then the end-of-file block; the records are the
    SAM output's."""
    address, _ = real_cluster
    run = [*mapping_case, "--scheduler", address]
    subprocess.run([*run, "-o", str(tmp_path / "o.sam")], check=True, capture_output=True, timeout=300)
    subprocess.run([*run, "-o", str(tmp_path / "o.bam")], check=True, capture_output=True, timeout=300)
    piped = subprocess.run([*run, "-O", "bam"], check=True, capture_output=True, timeout=300).stdout
    want = bam_parts(htslib_bam((tmp_path / "o.sam").read_bytes()))[1]
    assert len(want) > 1_000_000
    assert bam_parts((tmp_path / "o.bam").read_bytes())[1] == want
    assert bam_parts(piped)[1] == want
    subprocess.run(["samtools", "quickcheck", "-v", str(tmp_path / "o.bam")], check=True)
    # SAM text in BGZF blocks, the same way: the SAM output's bytes but its @PG line
    subprocess.run([*run, "-o", str(tmp_path / "o.sam.gz")], check=True, capture_output=True, timeout=300)
    piped = subprocess.run([*run, "-O", "sam.gz"], check=True, capture_output=True, timeout=300).stdout
    sam = without_pg((tmp_path / "o.sam").read_bytes())
    assert without_pg(gzip.decompress((tmp_path / "o.sam.gz").read_bytes())) == sam
    assert without_pg(gzip.decompress(piped)) == sam
    assert piped.endswith(bgzf.EOF) and bgzf.is_bgzf(piped[:16])


def test_workers_cut_and_inflate_bgzip_reads(real_cluster, mapping_case, tmp_path):
    """Reads compressed by htslib's bgzip are cut into byte ranges of the compressed file (the
    client reads its first blocks only) and inflated by the workers, also given as a URL: the
    records of the uncompressed file's run, whatever worker read which range."""
    import pysam

    address, _ = real_cluster
    pysam.tabix_compress(str(tmp_path / "r.fq"), str(tmp_path / "r.fq.gz"))
    plan = list(plan_input([str(tmp_path / "r.fq.gz")], lambda *_: 1000))
    assert len(plan) > 20 and all(s.bgzf for s in plan)
    run = [*mapping_case, "--scheduler", address]
    subprocess.run([*run, "-o", str(tmp_path / "plain.sam")], check=True, capture_output=True, timeout=300)
    at = run.index(str(tmp_path / "r.fq"))
    run[at] = str(tmp_path / "r.fq.gz")
    subprocess.run([*run, "-o", str(tmp_path / "bgzf.sam")], check=True, capture_output=True, timeout=300)
    assert sam_body(tmp_path / "bgzf.sam") == sam_body(tmp_path / "plain.sam")
    # The same file as a URL (fsspec's file://): the workers fetch their byte ranges through fsspec.
    run[at] = (tmp_path / "r.fq.gz").as_uri()
    subprocess.run([*run, "-o", str(tmp_path / "url.sam")], check=True, capture_output=True, timeout=300)
    assert sam_body(tmp_path / "url.sam") == sam_body(tmp_path / "plain.sam")


def test_workers_count_and_read_paired_byte_ranges(real_cluster, mapping_case, tmp_path):
    """Paired plain files are cut into byte ranges whose records the workers count, then read
    (two worker processes): the records of the run that reads the gzip files as streams."""
    address, _ = real_cluster
    records = (tmp_path / "r.fq").read_text().splitlines(keepends=True)
    for mate in (1, 2):  # reads 2i and 2i+1 as the mates of pair i
        text = "".join(f"@p{i // 8}/{mate}\n" + "".join(records[i + 1:i + 4])
                       for i in range(4 * (mate - 1), len(records), 8))
        (tmp_path / f"r{mate}.fq").write_text(text)
        (tmp_path / f"r{mate}.fq.gz").write_bytes(gzip.compress(text.encode(), 1))
    run = [*mapping_case[:5], "--scheduler", address, "-e", "1", "--chunk-size", "2000"]
    for name, suffix in (("split", ""), ("stream", ".gz")):
        subprocess.run([*run, tmp_path / f"r1.fq{suffix}", tmp_path / f"r2.fq{suffix}", "-o", tmp_path / f"{name}.sam"],
                       check=True, capture_output=True, timeout=300)
    # Paths relative to the client's working directory, which the workers do not share.
    subprocess.run([*run, "r1.fq", "r2.fq", "-o", "relative.sam"], check=True, capture_output=True, timeout=300,
                   cwd=tmp_path)
    assert sam_body(tmp_path / "split.sam") == sam_body(tmp_path / "stream.sam")
    assert sam_body(tmp_path / "relative.sam") == sam_body(tmp_path / "split.sam")
    assert len(sam_body(tmp_path / "split.sam")) > 60_000


def test_paths_relative_to_the_clients_directory(real_cluster, mapping_case, tmp_path):
    """The index, the reads and the output named relative to where `dmap run` runs: the workers,
    in directories of their own, read and write the same files."""
    address, _ = real_cluster
    python, index, reads = mapping_case[:3], mapping_case[4], mapping_case[5]
    assert os.path.dirname(index) == os.path.dirname(reads) == str(tmp_path)
    subprocess.run([*mapping_case, "--scheduler", address, "-o", tmp_path / "absolute.sam"], check=True,
                   capture_output=True, timeout=300)
    subprocess.run([*python, "run", "idx", "r.fq", "--chunk-size", "1000", "--scheduler", address, "-o",
                    "relative.sam"], check=True, capture_output=True, timeout=300, cwd=tmp_path)
    assert sam_body(tmp_path / "relative.sam") == sam_body(tmp_path / "absolute.sam")


def test_workers_per_device_share_a_device_and_write_the_same_sam(real_cluster, mapping_case, tmp_path):
    """--workers-per-device 3: three spawned worker processes on the one device, each reading and
    writing its own chunks; the records are those of a run on the real cluster."""
    real_cluster, _ = real_cluster
    outs = {}
    for name, extra in (("cluster", ["--scheduler", real_cluster]), ("shared", ["--workers-per-device", "3"])):
        outs[name] = tmp_path / f"{name}.sam"
        r = subprocess.run([*mapping_case, "-o", outs[name], "-e", "1", *extra], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
    assert sam_body(outs["shared"]) == sam_body(outs["cluster"])
    r = subprocess.run([*mapping_case, "-o", tmp_path / "x.sam", "--workers-per-device", "2", "--scheduler",
                        real_cluster], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "--workers-per-device applies only to the embedded cluster" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "x.sam").exists()


def test_embedded_cluster_names_each_worker_on_a_shared_device():
    from dmap.cluster.client import embedded_cluster_spec

    _, workers = embedded_cluster_spec(processes=True, devices=["0:0"], per_device=3)
    assert list(workers) == ["dmap-0:0", "dmap-0:0-1", "dmap-0:0-2"]
    assert {w["options"]["plugins"].pop().spec for w in workers.values()} == {"0:0"}


def test_cluster_up_workers_declare_a_device_task_per_thread():
    """`dmap cluster up`'s workers declare the device as the embedded cluster's do: a device
    task per thread (opencl=1 for the default 2 threads), and per_device names each copy."""
    from dmap.cluster.config import WorkerGroup
    from dmap.cluster.launch import _group_commands

    for threads, declared in ((2, "opencl=1"), (3, "opencl=1.5"), (8, "opencl=4")):
        [(name, cmd)] = _group_commands(WorkerGroup("0:0", threads), "tcp://127.0.0.1:1", None, "dmap-0-")
        assert cmd[cmd.index("--resources") + 1] == declared and name == "dmap-0-0:0"
    commands = _group_commands(WorkerGroup("0:0", per_device=3), "tcp://127.0.0.1:1", None, "dmap-0-")
    assert [name for name, _ in commands] == ["dmap-0-0:0", "dmap-0-0:0-1", "dmap-0-0:0-2"]


def test_cluster_up_workers_share_the_hosts_memory(monkeypatch):
    """``memory_limit: auto`` gives each of a group's workers an equal share of the memory its
    host gives ``dmap cluster up`` (the machine's, or a SLURM job's limit, which ``dask worker``
    does not read), in bytes, not Dask's share by threads over cores; a limit given stays as it is."""
    from dmap.cluster import launch
    from dmap.cluster.config import WorkerGroup
    from dmap.host import MemoryBudget

    def limits(group: WorkerGroup) -> set[str]:
        commands = launch._group_commands(group, "tcp://127.0.0.1:1", None, "dmap-0-")
        return {cmd[cmd.index("--memory-limit") + 1] for _, cmd in commands}

    assert limits(WorkerGroup("0:0")) == {str(launch.memory_budget().total)}
    monkeypatch.setattr(launch, "memory_budget", lambda: MemoryBudget(total=12 << 30, available=1 << 30))
    for per_device, share in ((1, 12 << 30), (4, 3 << 30), (3, 4 << 30)):
        assert limits(WorkerGroup("0:0", per_device=per_device)) == {str(share)}
    assert limits(WorkerGroup("0:0", memory_limit="8GB", per_device=2)) == {"8GB"}


def test_workers_that_keep_dying_stop_the_run_in_one_line(mapping_case, tmp_path):
    """A task whose workers all die running it (killed at their memory limit, or by the OOM
    killer; here each exits as it starts a task) is given up by the scheduler after
    ``distributed.scheduler.allowed-failures`` deaths (none here): the run stops with one line
    and leaves no output."""
    dying = ("--preload", os.path.join(HERE, "dying_worker.py"))
    address, procs = start_cluster(tmp_path, 1, worker_args=(*PRELOAD, *dying),
                                   DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0")
    try:
        r = subprocess.run([*mapping_case, "-o", tmp_path / "o.sam", "--scheduler", address], capture_output=True,
                           text=True, timeout=120)
    finally:  # one at a time, the worker first: a nanny whose worker it restarted stopped in 0.5 s
        stop_processes(procs)  # with its scheduler up, and not within 30 s when both were stopped at once
    assert_clean_failure(r, tmp_path / "o.sam", "workers died running one of the run's tasks, 1 time (out of memory")


@pytest.mark.parametrize("reads", ["r.fq", "r.fq.gz", "stdin", "bgzf stdin"])
def test_a_worker_that_dies_running_a_chunk_gives_the_same_sam(mapping_case, tmp_path, reads):
    """One of two workers dies as it starts its fifth task (killed for its memory, say): the run
    maps every chunk and its output equals a clean run's, also where the client read the chunk's
    bytes (gzip, standard input, a BGZF stream's compressed blocks) and handed them to the worker
    that died, so that no other worker holds them."""
    import gzip

    from dmap.format import bgzf

    clean = subprocess.run([*mapping_case, "-o", tmp_path / "clean.sam"], capture_output=True, text=True, timeout=300)
    assert clean.returncode == 0, clean.stderr
    run, stdin = list(mapping_case), None
    if reads == "r.fq.gz":
        (tmp_path / reads).write_bytes(gzip.compress((tmp_path / "r.fq").read_bytes(), 1))
        run[run.index(str(tmp_path / "r.fq"))] = str(tmp_path / reads)
    elif reads == "stdin":
        run[run.index(str(tmp_path / "r.fq"))] = "-"
        stdin = open(tmp_path / "r.fq", "rb")
    elif reads == "bgzf stdin":
        (tmp_path / "r.fq.bgz").write_bytes(bgzf.compress((tmp_path / "r.fq").read_bytes()) + bgzf.EOF)
        run[run.index(str(tmp_path / "r.fq"))] = "-"
        stdin = open(tmp_path / "r.fq.bgz", "rb")
    dying = ("--preload", os.path.join(HERE, "dying_worker.py"))
    address, procs = start_cluster(tmp_path, 2, worker_args=(*PRELOAD, *dying),
                                   DMAP_TEST_DIE_ONCE=str(tmp_path / "died"), DMAP_TEST_DIE_AT="5")
    try:
        r = subprocess.run([*run, "-o", tmp_path / "o.sam", "--scheduler", address], capture_output=True, text=True,
                           timeout=300, stdin=stdin)
    finally:
        stop_processes(procs)
        if stdin is not None:
            stdin.close()
    assert (tmp_path / "died").exists()
    assert r.returncode == 0, r.stderr
    assert sam_body(tmp_path / "o.sam") == sam_body(tmp_path / "clean.sam")


def test_two_jobs_share_one_cluster(real_cluster, mapping_case, tmp_path):
    address, _ = real_cluster
    run = [*mapping_case, "--scheduler", address]
    subprocess.run([*run, "-o", str(tmp_path / "alone.sam")], check=True, capture_output=True, timeout=300)
    jobs = [subprocess.Popen([*run, "-o", str(tmp_path / f"job{i}.sam")], stderr=subprocess.PIPE, text=True)
            for i in range(2)]
    for job in jobs:
        _, err = job.communicate(timeout=300)
        assert job.returncode == 0, err
    for i in range(2):
        assert sam_body(tmp_path / f"job{i}.sam") == sam_body(tmp_path / "alone.sam")


def test_scheduler_lost_mid_run(mapping_case, tmp_path):
    address, procs = start_cluster(tmp_path, 1)
    try:
        job = subprocess.Popen([*mapping_case, "--scheduler", address, "-o", str(tmp_path / "lost.sam")],
                               stderr=subprocess.PIPE, text=True)
        wait_for_records(tmp_path, "lost.sam")
        procs[0].kill()  # the scheduler
        _, err = job.communicate(timeout=300)
    finally:
        stop_processes(procs)
    assert job.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dmap: error: lost the Dask cluster"), err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("lost.sam")]


def wait_for_records(directory, name: str, timeout: float = 120) -> None:
    """Wait until a run's partial SAM holds records, i.e. the run is under way."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        partial = [p for p in directory.iterdir() if p.name.startswith(f"{name}.partial-")]
        if partial and partial[0].stat().st_size > 100_000:
            return
        time.sleep(0.02)
    raise AssertionError(f"{name} never started writing records")


@pytest.mark.parametrize("split,per_device", [(1, 1), (2, 1), (1, 2)])
def test_cluster_up_run_down(tmp_path, mapping_case, monkeypatch, split, per_device):
    import urllib.request

    import psutil

    require_device_parts(split)
    monkeypatch.setenv("DMAP_STATE_DIR", str(tmp_path / "state"))
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(f"scheduler:\n  address: tcp://127.0.0.1:{ports[0]}\n  dashboard: {ports[1]}\n"
                   f"workers:\n  - device: all\n    threads: 2\n    split: {split}\n    per_device: {per_device}\n")
    dmap = [sys.executable, "-m", "dmap.cli"]
    up = subprocess.run([*dmap, "cluster", "up", cfg], capture_output=True, text=True, timeout=180)
    assert up.returncode == 0, up.stderr
    state = json.loads(next((tmp_path / "state").glob("*/state.json")).read_text())
    try:
        assert f"tcp://127.0.0.1:{ports[0]}" in up.stdout and len(state["pids"]) == 1 + split * per_device
        again = subprocess.run([*dmap, "cluster", "up", cfg], capture_output=True, text=True, timeout=60)
        assert again.returncode == 1 and "already up" in again.stderr
        run = subprocess.run([*mapping_case, "--cluster", cfg, "-o", tmp_path / "o.sam"], capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        assert "60000 reads, 60000 mapped" in run.stderr
        with urllib.request.urlopen(f"http://127.0.0.1:{ports[1]}/status", timeout=30) as page:
            assert page.status == 200
    finally:
        down = subprocess.run([*dmap, "cluster", "down", cfg], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    assert not [p for p in state["pids"] if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    again = subprocess.run([*dmap, "cluster", "down", cfg], capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "no cluster" in again.stderr


def test_this_machine_is_told_from_other_hosts():
    """A worker host is this machine by name, loopback address or the address of one of its
    interfaces; anything else is reached over ssh."""
    from dmap.cluster.config import is_this_machine, reachable_from_elsewhere

    own = ["localhost", "127.0.0.1", socket.gethostname()]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        with contextlib.suppress(OSError):  # a machine without a route has no interface address to add
            s.connect(("192.0.2.1", 9))  # no packet is sent: this picks the interface that would route there
            own.append(s.getsockname()[0])
    assert all(is_this_machine(h) for h in own)
    assert not any(is_this_machine(h) for h in ("192.0.2.123", "node2.invalid"))
    assert not reachable_from_elsewhere("127.0.0.1") and not reachable_from_elsewhere("0.0.0.0")


def test_a_host_with_other_code_starts_no_worker(tmp_path, monkeypatch):
    """What `dmap cluster up` runs on another host refuses to start workers there when that
    host's dmap differs from the machine's that starts the cluster (each run would refuse them)."""
    from dmap.cluster.launch import start_here
    from dmap.errors import ClusterError

    monkeypatch.setenv("DMAP_STATE_DIR", str(tmp_path))
    spec = {"address": "tcp://127.0.0.1:1", "device": "all", "threads": 1, "memory_limit": "auto", "split": 1,
            "host": "node2", "place": 1, "code": "0.0.1 0123456789ab"}
    with pytest.raises(ClusterError, match="the machine that starts the cluster dmap 0.0.1 0123456789ab"):
        start_here(spec)
    assert not list(tmp_path.iterdir())


def test_committed_cluster_yaml_is_valid():
    from dmap.cluster.config import read_cluster_file

    cfg = read_cluster_file(os.path.join(HERE, "..", "..", "cluster.yaml"))
    assert cfg.scheduler_address.startswith("tcp://") and cfg.workers
    # commented out: the defaults depend on --max-errors and on the number of device workers
    assert cfg.chunk_size is None and cfg.in_flight is None


@pytest.mark.parametrize("text,words", [
    ("scheduler: {address: 8786}\n", "tcp://"),
    ("scheduler: {address: tcp://127.0.0.1:8786}\nworkers: [{device: all, threads: 0}]\n", "threads"),
    ("scheduler: {address: tcp://127.0.0.1:8786}\nworkers: [{device: all, per_device: 0}]\n", "workers[0].per_device"),
    ("scheduler: {address: tcp://127.0.0.1:8786}\nnodes: []\n", "unknown sections"),
    ("scheduler: {address: tcp://127.0.0.1:8786}\ndmap: {chunk: 5}\n", "unknown dmap settings"),
    ("[1, 2\n", "not valid YAML"),
    ("scheduler: {address: tcp://127.0.0.1:8786}\nworkers: [{host: node2, ssh: 22}]\n", "workers[0].ssh"),
    ("scheduler: {address: tcp://127.0.0.1:8786}\nworkers: [{host: node2, user: me}]\n", "must have only"),
    # Workers on another host could not reach a scheduler on this machine's loopback address.
    ("scheduler: {address: tcp://127.0.0.1:8786}\nworkers: [{device: all}, {host: 192.0.2.123}]\n",
     "cannot reach a scheduler at tcp://127.0.0.1:8786"),
])
def test_bad_cluster_files(tmp_path, text, words):
    (tmp_path / "c.yaml").write_text(text)
    r = subprocess.run([sys.executable, "-m", "dmap.cli", "cluster", "up", tmp_path / "c.yaml"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_blocks_stay_resident_and_loads_are_counted(tmp_path):
    """4 blocks, 2 workers: each worker loads each block at most once, and a second run loads none."""
    from distributed import Client

    import dmap

    require_device_parts(2)
    idx = genome_case(tmp_path, seed=8, size=40_000, read_length=40, n_reads=4000, block_length=10_000,
                      max_query_length=50)
    with dmap.LocalDeviceCluster(processes=False, split=2) as cluster, Client(cluster) as client:
        first = dmap.map_reads(idx, tmp_path / "r.fq", client=client, chunk_size=500, return_hits=False)
        second = dmap.map_reads(idx, tmp_path / "r.fq", client=client, chunk_size=500, return_hits=False)
    assert len(first.block_loads) == 2 and 4 <= sum(first.block_loads.values()) <= 8
    assert all(n <= 4 for n in first.block_loads.values())
    assert sum(second.block_loads.values()) == 0


@pytest.mark.parametrize("dashboard", [False, 0])
def test_workers_profile_only_for_a_dashboard(dashboard):
    """Dask's stack-sampling profiler runs only where a dashboard can show it."""
    import dask

    import dmap

    with dmap.LocalDeviceCluster(processes=False, dashboard=dashboard) as cluster:
        callbacks = {name for w in cluster.workers.values() for name in w.periodic_callbacks}
    assert ("profile" in callbacks) == (dashboard is not False)
    assert dask.config.get("distributed.worker.profile.enabled")  # the setting is the cluster's, not global


def test_dashboard_metrics(tmp_path):
    """Kernel (search, locate, records) and transfer time reaches the scheduler's Fine Performance Metrics;
    device counters its worker info."""
    from distributed import Client

    import dmap

    write_fasta(tmp_path / "ref.fa", [("g", "ACGTTGCATGCAAGTCCGATGACTGACTAGCTAGCTAGGATCGATCGGATC" * 20)])
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=30)
    write_fastq(tmp_path / "r.fq", ["GCATGCAAGTCC", "GATCGATCGG"] * 50)
    with dmap.LocalDeviceCluster(processes=False) as cluster, Client(cluster) as client:
        dmap.map_reads(idx, tmp_path / "r.fq", client=client, return_hits=False)
        deadline = time.time() + 30
        while time.time() < deadline:
            labels = client.run_on_scheduler(
                lambda dask_scheduler: sorted({str(k) for k, v in dask_scheduler.cumulative_worker_metrics.items()
                                               if "dmap-" in str(k) and v > 0}))
            workers = scheduler_workers(client).values()
            counters = [w.get("metrics", {}).get("dmap_queries_searched", 0) for w in workers]
            if len(labels) >= 4 and sum(counters) >= 200:
                break
            time.sleep(0.5)
    text = " ".join(labels)
    for label in ("dmap-search-kernel", "dmap-locate-kernel", "dmap-records-kernel", "dmap-transfer"):
        assert label in text, labels
    assert sum(counters) == 200  # 100 reads x 2 strands


def test_worker_memory_stays_bounded_on_a_long_run(real_cluster, tmp_path):
    """Chunks are streamed with backpressure: worker memory late in a long run stays at its early level.

    The worker's memory is sampled every 10 ms; a run too short for 10 samples in each third
    (a fast machine) is made again on the reads repeated twice as often, so the comparison
    does not depend on the machine's speed."""
    import threading

    import psutil

    address, nanny = real_cluster
    genome_case(tmp_path, seed=9, size=200_000, read_length=100, n_reads=300_000)
    worker = psutil.Process(nanny.pid).children()[0]
    reads = (tmp_path / "r.fq").read_bytes()

    def sample(samples: list, done: threading.Event) -> None:
        while not done.is_set():
            samples.append(worker.memory_info().rss)
            time.sleep(0.01)

    for copies in (1, 2, 4, 8):
        (tmp_path / "long.fq").write_bytes(reads * copies)
        samples, done = [], threading.Event()
        sampler = threading.Thread(target=sample, args=(samples, done))
        sampler.start()
        try:
            r = subprocess.run([sys.executable, "-m", "dmap.cli", "run", tmp_path / "idx", tmp_path / "long.fq",
                                "-o", tmp_path / "o.sam", "--scheduler", address, "--chunk-size", "5000"],
                               capture_output=True, text=True, timeout=600)
        finally:
            done.set()
            sampler.join()
        assert r.returncode == 0, r.stderr
        third = len(samples) // 3
        if third >= 10:
            break
    early, late = max(samples[:third]), max(samples[-third:])
    assert late <= early * 1.15 + 20 * 2**20, (early >> 20, late >> 20)


def test_nanny_started_workers_reuse_freed_memory(real_cluster):
    """``dask worker`` starts its worker under a Nanny, which sets MALLOC_TRIM_THRESHOLD_ and
    with it maps every buffer over 128 KiB afresh; the preload's plugin gives the worker
    glibc's own policy back (dmap.cluster.worker.set_chunk_heap), so a chunk's arrays
    reuse freed memory (tests/cluster/test_worker.py has the mechanism)."""
    import cloudpickle
    import helpers
    from distributed import Client

    address, _ = real_cluster
    cloudpickle.register_pickle_by_value(helpers)  # the workers cannot import the tests' helpers
    try:
        with Client(address, timeout=30) as client:
            environ = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
            faults = client.run(helpers.allocation_faults)
    finally:
        cloudpickle.unregister_pickle_by_value(helpers)
    assert set(environ.values()) == {"65536"}, environ  # the Nanny's setting is there
    assert all(n < helpers.PAGES_PER_BUFFER for n in faults.values()), faults


class _SubmittedGate:
    """Holds every block task until the reads are all submitted, so that which
    tasks a worker can choose from does not depend on how fast this machine is."""

    submitted = threading.Event()

    @staticmethod
    def chunks(*args, **kwargs):
        yield from plan_input(*args, **kwargs)
        _SubmittedGate.submitted.set()

    @staticmethod
    def block_task(*args, **kwargs):
        assert _SubmittedGate.submitted.wait(120), "the chunks were never all submitted"
        return block_task(*args, **kwargs)


def test_block_major_order_reloads_fewer_blocks(tmp_path, monkeypatch):
    """A device that holds one block at a time: block-major order loads each block once per
    window of chunks in flight, chunk-major order about once per (chunk, block)."""
    from distributed import Client

    import dmap
    import dmap.mapping.pipeline

    idx = genome_case(tmp_path, seed=3, size=60_000, read_length=40, n_reads=8000, block_length=15_000,
                      max_query_length=50)
    block_bytes = max(idx.load_block(b).nbytes for b in range(idx.n_blocks))
    monkeypatch.setenv("DMAP_BLOCK_BUDGET", str(int(block_bytes * 1.5)))  # room for one block
    monkeypatch.setattr(dmap.mapping.pipeline, "plan_input", _SubmittedGate.chunks)
    monkeypatch.setattr(dmap.mapping.pipeline, "block_task", _SubmittedGate.block_task)
    n_chunks = 8000 // 500
    loads, sams = {}, {}
    for block_major in (False, True):
        _SubmittedGate.submitted.clear()
        with dmap.LocalDeviceCluster(processes=False, threads=1) as cluster, Client(cluster) as client:
            res = dmap.map_reads(idx, tmp_path / "r.fq", client=client, chunk_size=500, in_flight=n_chunks,
                                 guided=False, block_major=block_major, sam_path=tmp_path / f"{block_major}.sam")
        loads[block_major] = sum(res.block_loads.values())
        sams[block_major] = [x for x in open(tmp_path / f"{block_major}.sam") if not x.startswith("@PG")]
    assert sams[True] == sams[False]
    assert loads[False] >= n_chunks * idx.n_blocks * 0.75, loads  # chunk-major: about a load per (chunk, block)
    # Block-major: each block about once per window of chunks in flight (a block task that reaches
    # the worker after it has moved on to the next block, a scheduler round trip, loads one again).
    # The order the pipeline asks for is checked exactly in test_block_priority_orders_windows_then_blocks.
    assert loads[True] <= loads[False] / 2, loads


def test_block_priority_orders_windows_then_blocks():
    """Dask runs higher priorities first: window by window of in-flight chunks, and within a
    window block by block, chunks in input order."""
    from dmap.mapping.schedule import block_priority

    window = 4
    tasks = [(chunk, block) for chunk in range(10) for block in range(3)]
    order = sorted(tasks, key=lambda t: -block_priority(t[1], t[0], window))
    windows = [range(0, 4), range(4, 8), range(8, 10)]
    assert order == [(c, b) for chunks in windows for b in range(3) for c in chunks]


def test_blocks_get_home_workers_when_devices_cannot_hold_them_all(tmp_path, monkeypatch):
    """4 blocks, 2 workers whose devices hold 2 blocks each: each worker loads its own 2 blocks."""
    from distributed import Client

    import dmap
    from dmap.mapping.schedule import block_homes

    require_device_parts(2)
    idx = genome_case(tmp_path, seed=6, size=60_000, read_length=40, n_reads=8000, block_length=15_000,
                      max_query_length=50)
    block_bytes = max(idx.block_nbytes(b) for b in range(idx.n_blocks))
    monkeypatch.setenv("DMAP_BLOCK_BUDGET", str(int(block_bytes * 2.5)))  # room for two blocks
    with dmap.LocalDeviceCluster(processes=False, split=2, threads=1) as cluster, Client(cluster) as client:
        homes = block_homes(client, idx)
        res = dmap.map_reads(idx, tmp_path / "r.fq", client=client, chunk_size=500, guided=False,
                             sam_path=tmp_path / "o.sam")
    assert sorted(set(homes.values())) == sorted(res.block_loads) and len(homes) == 4
    assert sum(res.block_loads.values()) <= 6, res.block_loads  # 4 when every task ran at its home


def test_an_index_url_is_fetched_by_each_worker_host(mapping_case, tmp_path):
    """An index given as a URL: the client and each worker (each with a cache of its own, as on
    hosts of their own) fetch their own copy, once, and the records are the index path's."""
    caches = tmp_path / "caches"
    caches.mkdir()
    own_cache = ("sh", "-c", 'DMAP_INDEX_CACHE="$0/worker-$$" exec "$@"', str(caches))
    address, procs = start_cluster(tmp_path, 2, worker_prefix=own_cache)
    try:
        python, index, reads = mapping_case[:4], mapping_case[4], mapping_case[5]
        env = {**os.environ, "DMAP_INDEX_CACHE": str(caches / "client")}
        url = "file://" + os.path.abspath(index)
        for name, where in (("path.sam", index), ("url.sam", url), ("again.sam", url)):
            subprocess.run([*python, where, reads, "--chunk-size", "5000", "--scheduler", address, "-o",
                            tmp_path / name], check=True, capture_output=True, timeout=300, env=env)
    finally:
        stop_processes(procs)
    assert sam_body(tmp_path / "url.sam") == sam_body(tmp_path / "path.sam") == sam_body(tmp_path / "again.sam")
    copies = sorted(p.parent.parent.name for p in caches.glob("*/*/index.dmap"))
    assert len(copies) == 3 and copies[0] == "client" and all(c.startswith("worker-") for c in copies[1:])


def test_a_worker_that_cannot_fetch_an_index_url_stops_the_run_in_one_line(mapping_case, tmp_path):
    """A worker whose host cannot keep a copy (its cache cannot be made): one line naming the
    worker and why, before any task, and no output."""
    address, procs = start_cluster(tmp_path, 1, DMAP_INDEX_CACHE="/proc/no-cache-here")
    try:
        python, index, reads = mapping_case[:4], mapping_case[4], mapping_case[5]
        out = tmp_path / "out.sam"
        run = subprocess.run([*python, "file://" + os.path.abspath(index), reads, "--scheduler", address, "-o", out],
                             capture_output=True, text=True, timeout=300,
                             env={**os.environ, "DMAP_INDEX_CACHE": str(tmp_path / "cache")})
    finally:
        stop_processes(procs)
    assert_clean_failure(run, out, "the worker tcp://127.0.0.1:", "cannot read the index: index 'file://",
                         "its cache '/proc/no-cache-here'", "set DMAP_INDEX_CACHE")
