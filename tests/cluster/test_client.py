"""dmap.cluster.client: the embedded cluster's share of the machine."""

import json
import os
import resource
import subprocess
import sys

from helpers import pinnable, pinned_run, without_pg, write_fasta, write_fastq

from dmap.cluster import client
from dmap.host import MemoryBudget, memory_budget
from dmap.opencl.discovery import list_devices

# The embedded cluster's task threads per worker and its PoCL device's compute units, as a
# `dmap run` started by a job scheduler would get them.
PROBE = """
from dmap.cluster.client import embedded_client

def units(dask_worker):
    return dask_worker.plugins["dmap-device"].device.device.max_compute_units

with embedded_client() as c:
    workers = c.scheduler_info()["workers"].values()
    print([w["nthreads"] for w in workers], sorted(c.run(units).values()))
"""


@pinnable
def test_the_embedded_cluster_uses_the_cores_this_process_may_run_on():
    """SLURM, taskset and a container's cpuset pin a job to some cores: the embedded cluster's
    PoCL device and task threads use those, not every core of the machine."""
    assert pinned_run(PROBE, "0") == "[1] [1]"
    cores = len(os.sched_getaffinity(0))
    assert pinned_run(PROBE) == f"[{min(cores, client.WORKER_THREADS)}] [{cores}]"


def _device(spec: str, kind: str, memory: int = 80 << 30):
    from dmap.opencl.discovery import DeviceInfo

    return DeviceInfo(spec=spec, platform="p", name=kind, type=kind, compute_units=1, global_mem=memory,
                      local_mem=1 << 15, max_alloc=memory // 4, version="OpenCL 3.0", max_split=1)


def test_a_gpu_worker_gets_half_the_cores_up_to_a_limit():
    """A CPU device's worker has 2 task threads; a GPU's half the cores among the GPU workers,
    from 2 up to GPU_WORKER_THREADS; never more threads than cores."""
    cases = {  # (type, cores, GPU workers) -> threads
        ("CPU", 2, 0): 2, ("CPU", 64, 0): 2, ("CPU", 1, 0): 1,
        ("GPU", 16, 1): 8, ("GPU", 64, 1): client.GPU_WORKER_THREADS, ("GPU", 16, 2): 4, ("GPU", 8, 1): 4,
        ("GPU", 4, 1): 2, ("GPU", 16, 8): 2, ("GPU", 1, 1): 1, ("ALL | GPU", 16, 1): 8,
    }
    got = {case: client.worker_threads(*case) for case in cases}
    assert got == cases
    assert client.GPU_WORKER_THREADS == 8


def test_a_small_gpu_gets_fewer_threads():
    """Each thread's buffers take device memory: a quarter of the device bounds them."""
    gib = 1 << 30
    got = {memory: client.worker_threads("GPU", 32, 1, memory * gib) for memory in (2, 4, 6, 8, 16, 80)}
    assert got == {2: 2, 4: 2, 6: 3, 8: 4, 16: 8, 80: 8}
    assert client.worker_threads("CPU", 2, 0, 1 * gib) == 2


def test_embedded_workers_run_a_device_task_per_thread(monkeypatch):
    """Each embedded worker declares a device share that lets each of its threads run a device
    task (each thread has its own buffer set); threads follow each device's type."""
    from dmap.opencl.device import DEVICE_RESOURCE

    devices = [_device("0:0", "GPU"), _device("0:1", "GPU", 8 << 30), _device("1:0", "CPU")]
    monkeypatch.setattr(client, "list_devices", lambda: devices)
    _, workers = client.embedded_cluster_spec(cores=32)
    got = {name: (w["options"]["nthreads"], w["options"]["resources"][DEVICE_RESOURCE]) for name, w in workers.items()}
    assert got == {"dmap-0:0": (8, 4.0), "dmap-0:1": (4, 2.0), "dmap-1:0": (2, 1.0)}
    _, workers = client.embedded_cluster_spec(devices=["0:0"], per_device=4, cores=16, processes=True)
    assert {w["options"]["nthreads"] for w in workers.values()} == {2}  # 16 cores over 4 GPU workers
    _, workers = client.embedded_cluster_spec(devices=["1:0"], threads=3, cores=32)
    assert workers["dmap-1:0"]["options"]["resources"] == {DEVICE_RESOURCE: 1.5}


def test_device_task_slots_are_read_from_the_workers():
    """What each device worker can run at once comes from its declared share of the device:
    chunks in flight are reckoned from it."""
    from distributed import Client

    import dmap

    with dmap.LocalDeviceCluster(processes=False, threads=3) as cluster, Client(cluster) as c:
        assert client.require_device_workers(c) == [3]


def test_workers_share_the_memory_this_process_may_use(monkeypatch):
    """Each embedded worker's memory limit is the memory dmap's process may use (the machine's, or
    a SLURM job's limit: dmap.host) shared among the worker processes, or all of it for workers
    in dmap's own process; not Dask's default, the machine's memory times the worker's share of
    the cores (1/32 for 2 threads on 64 cores), which reads no SLURM limit either."""
    monkeypatch.setattr(client, "list_devices", lambda: [_device("0:0", "CPU"), _device("1:0", "GPU")])
    _, workers = client.embedded_cluster_spec(cores=64)
    assert {w["options"]["memory_limit"] for w in workers.values()} == {memory_budget().total}
    monkeypatch.setattr(client, "memory_budget", lambda: MemoryBudget(total=16 << 30, available=12 << 30))
    _, workers = client.embedded_cluster_spec(cores=64)
    assert {w["options"]["memory_limit"] for w in workers.values()} == {16 << 30}
    _, workers = client.embedded_cluster_spec(cores=64, processes=True, per_device=4)
    assert len(workers) == 8 and {w["options"]["memory_limit"] for w in workers.values()} == {2 << 30}


# A run's embedded worker, asked whether Dask may pause or spill it.
MEMORY_PROBE = """
import json
import sys
from dmap.cluster.client import embedded_client

def memory(dask_worker):
    m = dask_worker.memory_manager
    return m.memory_limit, m.memory_pause_fraction, m.memory_spill_fraction

with embedded_client(processes=sys.argv[1] == "processes") as c:
    print(json.dumps(sorted(set(c.run(memory).values()))))
"""


def test_workers_never_pause_for_memory(tmp_path):
    """Dask pauses a worker past 80% of its memory limit until its memory drops below that
    again; a device worker's memory is mostly resident index blocks, so a paused worker stayed
    paused and the run waited for ever. Here dmap and Dask read the machine's memory as 64 MB
    (the hard RLIMIT_RSS, which Linux itself ignores), less than dmap's process holds once it has
    imported Dask: the run maps all the same, as without the limit (it waited for ever)."""
    def limited():
        resource.setrlimit(resource.RLIMIT_RSS, (64 << 20, 64 << 20))

    for how in ("threads", "processes"):
        probe = subprocess.run([sys.executable, "-c", MEMORY_PROBE, how], capture_output=True, text=True,
                               timeout=120, check=True)
        total = memory_budget().total
        limit = total if how == "threads" else total // len(list_devices())
        assert json.loads(probe.stdout) == [[limit, False, False]], how
    write_fasta(tmp_path / "ref.fa", [("c1", "ACGTTGCATGCAAGTCCGATGACTGACTAGCTAGC" * 20)])
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "TTTTTTTT", "CTAGCTAGCACGTTG"] * 2000)
    run = [sys.executable, "-m", "dmap", "run", tmp_path / "idx", tmp_path / "r.fq", "-q"]
    subprocess.run([sys.executable, "-m", "dmap", "index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-q"],
                   check=True)
    free = subprocess.run(run, capture_output=True, timeout=120, check=True)
    # Dask's memory monitor every millisecond instead of every 100: it has looked at the
    # process before the first task, which a run this small might otherwise finish before.
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL="1ms")
    tight = subprocess.run(run, capture_output=True, timeout=120, preexec_fn=limited, env=env)
    assert tight.returncode == 0, tight.stderr
    assert without_pg(tight.stdout) == without_pg(free.stdout)
