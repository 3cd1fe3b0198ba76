"""dmap.cluster.client: the embedded cluster's share of the machine."""

import os
import shutil
import subprocess
import sys

import pytest

from dmap.cluster import client

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


def probe(*prefix: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_NUM")}
    return subprocess.run([*prefix, sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                          check=True, timeout=120).stdout.strip()


@pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
                    reason="needs taskset and two cores")
def test_the_embedded_cluster_uses_the_cores_this_process_may_run_on():
    """SLURM, taskset and a container's cpuset pin a job to some cores: the embedded cluster's
    PoCL device and task threads use those, not every core of the machine."""
    assert probe("taskset", "-c", "0") == "[1] [1]"
    cores = len(os.sched_getaffinity(0))
    assert probe() == f"[{min(cores, client.WORKER_THREADS)}] [{cores}]"


def test_allowed_cores_are_none_where_every_core_is(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))
    assert client.allowed_cores() == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert client.allowed_cores() is None
