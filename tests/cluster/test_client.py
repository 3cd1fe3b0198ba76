"""dmap.cluster.client: the embedded cluster's share of the machine."""

import os

from helpers import pinnable, pinned_run

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


@pinnable
def test_the_embedded_cluster_uses_the_cores_this_process_may_run_on():
    """SLURM, taskset and a container's cpuset pin a job to some cores: the embedded cluster's
    PoCL device and task threads use those, not every core of the machine."""
    assert pinned_run(PROBE, "0") == "[1] [1]"
    cores = len(os.sched_getaffinity(0))
    assert pinned_run(PROBE) == f"[{min(cores, client.WORKER_THREADS)}] [{cores}]"
