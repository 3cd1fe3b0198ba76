"""dmap against a real cluster: `dask scheduler` and `dask worker --preload
dmap.worker` processes on loopback."""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import write_fasta, write_fastq

HERE = os.path.dirname(__file__)


@pytest.fixture(scope="module")
def real_cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    sched_file = d / "scheduler.json"
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    procs = [subprocess.Popen(["dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], stderr=subprocess.DEVNULL, env=env)]
    try:
        for _ in range(300):
            if sched_file.exists() and sched_file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        for name in ("w1", "w2"):  # two workers sharing the one PoCL device
            procs.append(subprocess.Popen(
                ["dask", "worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard",
                 "--name", name, "--resources", "opencl=1", "--preload", "dmap.worker", "--dmap-device", "0:0"],
                stderr=subprocess.DEVNULL, env=env))
        from distributed import Client

        with Client(address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
        yield address, procs[1]
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


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


def test_worker_killed_mid_run_gives_the_same_sam(real_cluster, tmp_path):
    """SIGKILL a worker process while dmap runs: Dask reruns its tasks elsewhere."""
    import numpy as np
    import psutil

    address, nanny = real_cluster
    rng = np.random.default_rng(5)
    genome = "".join(rng.choice(list("ACGT"), size=200_000))
    write_fasta(tmp_path / "ref.fa", [("g", genome)])
    subprocess.run([sys.executable, "-m", "dmap.cli", "index", tmp_path / "ref.fa", "-o", tmp_path / "idx"], check=True)
    starts = rng.integers(0, len(genome) - 60, size=60_000)
    write_fastq(tmp_path / "r.fq", [genome[s : s + 60] for s in starts])
    run = [sys.executable, "-m", "dmap.cli", "run", str(tmp_path / "idx"), str(tmp_path / "r.fq"),
           "--scheduler", address, "--chunk-size", "1000"]
    subprocess.run([*run, "-o", str(tmp_path / "clean.sam")], check=True, capture_output=True, timeout=300)

    job = subprocess.Popen([*run, "-o", str(tmp_path / "killed.sam")], stderr=subprocess.PIPE, text=True)
    worker = psutil.Process(nanny.pid).children()[0]  # the worker process under its nanny
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until records are being written, then kill
        partial = [p for p in tmp_path.iterdir() if p.name.startswith("killed.sam.partial-")]
        if partial and partial[0].stat().st_size > 100_000:
            break
        time.sleep(0.05)
    killed_mid_run = bool(partial) and job.poll() is None
    worker.kill()
    _, err = job.communicate(timeout=300)
    assert killed_mid_run
    assert job.returncode == 0, err
    body = lambda p: [line for line in p.read_text().splitlines() if not line.startswith("@PG")]  # noqa: E731
    assert body(tmp_path / "killed.sam") == body(tmp_path / "clean.sam")

