"""A device worker's process: its device (dmap.cluster.worker.DevicePlugin) and its allocator
(dmap.cluster.worker.set_chunk_heap)."""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import PAGES_PER_BUFFER

from dmap.cluster.worker import DevicePlugin
from dmap.opencl.discovery import list_devices


def faults_in_a_new_process(env: dict, restore: bool) -> tuple[int, int]:
    """(set_chunk_heap's answer, allocation_faults after it) in a fresh interpreter with ``env``."""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent.parent)!r}); "
            "from helpers import allocation_faults; from dmap.cluster.worker import set_chunk_heap; "
            f"done = set_chunk_heap() if {restore} else None; "
            "print(int(bool(done)), allocation_faults())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         timeout=60).stdout.split()
    return int(out[0]), int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_nanny_started_worker_gets_glibcs_heap_policy_back():
    """With Dask's Nanny's MALLOC_TRIM_THRESHOLD_ every buffer over 128 KiB is mapped afresh
    (each page faulted and zeroed); the worker's plugin makes freed memory reused again."""
    nanny_env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}
    _, without = faults_in_a_new_process(nanny_env, restore=False)
    done, with_policy = faults_in_a_new_process(nanny_env, restore=True)
    assert done == 1
    assert without >= 20 * PAGES_PER_BUFFER * 0.9, without
    assert with_policy < PAGES_PER_BUFFER, with_policy


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_process_without_settings_gets_the_thresholds_too():
    """The embedded cluster's process: its records are recycled (dmap.host.RecycledArrays), so
    glibc's dynamic threshold would learn from the smaller arrays alone; the thresholds are set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    done, faults = faults_in_a_new_process(env, restore=True)
    assert done == 1
    assert faults < PAGES_PER_BUFFER, faults


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
@pytest.mark.parametrize("setting", [("MALLOC_TRIM_THRESHOLD_", "131072"), ("MALLOC_MMAP_THRESHOLD_", "131072"),
                                     ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072")])
def test_a_threshold_someone_chose_is_kept(setting):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}, setting[0]: setting[1]}
    done, faults = faults_in_a_new_process(env, restore=True)
    assert done == 0
    assert faults >= 20 * PAGES_PER_BUFFER * 0.9, faults  # still every buffer mapped afresh


def test_a_workers_task_threads_that_come_first_share_one_device():
    plugin = DevicePlugin(list_devices()[0].spec)
    with ThreadPoolExecutor(4) as pool:
        devices = list(pool.map(lambda _: plugin.device, range(4)))
    assert all(d is devices[0] for d in devices)
