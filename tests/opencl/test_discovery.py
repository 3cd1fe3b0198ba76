"""dmap.opencl.discovery: which devices there are, and the share of the CPU that PoCL's takes."""

import os

from helpers import pinnable, pinned_run

from dmap.opencl import discovery

# A device made by hand, as a `dask worker --preload dmap.cluster.worker` makes its own.
UNITS = "from dmap.opencl.device import Device\nprint(Device().device.max_compute_units)"


@pinnable
def test_pocl_keeps_to_the_cores_this_process_may_run_on():
    """A worker started inside a SLURM job (or under taskset) runs PoCL's kernels on its cores,
    not one thread per core of the node; a thread count the user set is kept."""
    assert pinned_run(UNITS, "0") == "1"
    assert pinned_run(UNITS) == str(len(os.sched_getaffinity(0)))
    assert pinned_run(f"import os\nos.environ['POCL_MAX_PTHREAD_COUNT'] = '2'\n{UNITS}", "0") == "2"


def test_allowed_cores_are_none_where_every_core_is(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))
    assert discovery.allowed_cores() == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert discovery.allowed_cores() is None
