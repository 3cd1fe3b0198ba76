"""Pinning a Dask worker to one OpenCL device.

A worker gets a :class:`DevicePlugin` naming its device; the plugin builds
the OpenCL context inside the worker's own process (pyopencl objects do not
pickle, and PoCL must not be forked).  For ``dask worker`` processes started
by hand, the same is a preload::

    dask worker SCHEDULER --nthreads 2 --resources opencl=1 \\
        --preload dmap.cluster.worker --dmap-device 0:0
"""

from __future__ import annotations

import os
import socket
import threading
from typing import TYPE_CHECKING

import click
from distributed.core import Status
from distributed.diagnostics.plugin import WorkerPlugin

from .. import _version
from ..errors import IndexFormatError
from ..index.store import index_identity, local_index_path
from ..opencl.device import DEVICE_PLUGIN, DEVICE_RESOURCE, Device, start_devices, take_device

if TYPE_CHECKING:
    from distributed import Client

# glibc's mallopt(3) parameters, and the largest mmap threshold its dynamic policy reaches on a
# 64-bit machine (DEFAULT_MMAP_THRESHOLD_MAX), with twice that as the trim threshold, as it sets.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
CHUNK_HEAP_MMAP_THRESHOLD = 32 << 20
CHUNK_HEAP_TRIM_THRESHOLD = 2 * CHUNK_HEAP_MMAP_THRESHOLD
# What Dask's Nanny puts in a worker's environment (distributed.nanny.pre-spawn-environ).
NANNY_TRIM_THRESHOLD = "65536"


def set_chunk_heap() -> bool:
    """Give this process the heap thresholds that a device worker's chunks want, unless
    someone chose thresholds of their own; True if it did.

    A device worker allocates a few arrays of 1-40 MB per chunk (reads, codes, hits). glibc
    maps each array over its mmap threshold afresh, its pages zeroed by the OS kernel on
    first touch, and unmaps it when freed. Its dynamic policy raises the threshold to the
    size of each mapped array freed, up to 32 MiB, but:

    - Dask's Nanny starts every worker process with ``MALLOC_TRIM_THRESHOLD_=65536``
      (``distributed.nanny.pre-spawn-environ``), and setting any threshold turns the
      dynamic policy off: in such a worker 1M exact reads mapped in 0.95-1.08 s instead
      of 0.62-0.76 s (docs/performance.md, "Worker processes and glibc's heap");
    - a chunk's SAM records, its largest array, are not freed but recycled
      (:class:`dmap.host.RecycledArrays`), so the policy learns from the smaller
      arrays alone, and in the embedded cluster's process the block tasks of a 1M-read run
      took 16,107 page faults against 1,216 with these thresholds (docs/performance.md,
      "Recycled records").

    The thresholds set are those glibc's dynamic policy ends at: arrays up to 32 MiB reuse
    freed heap memory, and more than 64 MiB free at the heap's top goes back to the OS.
    A trim threshold of another value than the Nanny's, an mmap threshold or glibc's malloc
    tunables in the environment are someone's choice, and the allocator is left as it is.
    """
    if (os.environ.get("MALLOC_TRIM_THRESHOLD_", NANNY_TRIM_THRESHOLD) != NANNY_TRIM_THRESHOLD
            or "MALLOC_MMAP_THRESHOLD_" in os.environ or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")):
        return False
    from ..io.mapfile import libc

    mallopt = getattr(libc(), "mallopt", None)  # glibc's; another C library keeps its own policy
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, CHUNK_HEAP_MMAP_THRESHOLD)
                and mallopt(_M_TRIM_THRESHOLD, CHUNK_HEAP_TRIM_THRESHOLD))


def never_pause(worker) -> None:
    """Turn off Dask's pause and spill thresholds on a device worker, which bounds its own memory.

    Dask pauses a worker whose process memory passes 80% of its limit until it drops
    below that again, and spills its results to disk from 70%. A device worker's memory
    is mostly its resident index blocks (host memory on a CPU device), which neither
    pausing nor spilling frees, so a paused worker stayed paused and the run waited for
    ever: the embedded cluster of a 1M-read run on E. coli hung with a 150 MB limit.
    Dask's default limit is the machine's memory times the worker's share of the cores,
    1/32 for 2 task threads on 64 cores, and mapping against a human genome held 7.3 GB
    (docs/performance.md). dmap bounds a run's memory itself, by the chunks it keeps in
    flight. The Nanny's terminate threshold stays: a worker past 95% of its limit is
    restarted, and its tasks run again.
    """
    memory = worker.memory_manager
    memory.memory_pause_fraction = False
    memory.memory_spill_fraction = False
    if worker.status == Status.paused:  # paused by the memory monitor before this ran
        worker.status = Status.running


_DEVICE_LOCK = threading.Lock()  # module-level: a plugin is pickled to its worker


class DevicePlugin(WorkerPlugin):
    """Gives a worker its :class:`dmap.opencl.device.Device` (``worker.plugins[DEVICE_PLUGIN].device``)."""

    name = DEVICE_PLUGIN

    def __init__(self, spec: str | None = None):
        self.spec = spec
        self._device: Device | None = None

    @property
    def block_loads(self) -> int:
        """Index blocks loaded onto this worker's device so far."""
        return self._device.block_loads if self._device is not None else 0

    def stats(self, worker_name: str) -> dict:
        """This worker's counters: device, block loads, queries searched, candidates,
        seconds per activity (what :func:`device_stats` gathers)."""
        device = self._device
        return {
            "name": worker_name,
            "code": _version.code_identity(),
            "device": self.spec or "default",
            "gpu": self.device.is_gpu,  # a run on GPUs alone writes via the page cache (format.writer.direct_writes)
            "block_loads": self.block_loads,
            "block_budget": self.device.block_budget,
            "queries_searched": device.queries_searched if device else 0,
            "candidates": dict(device.candidates) if device else {},
            "seconds": dict(device.seconds) if device else {},
        }

    @property
    def device(self) -> Device:
        # Begun when the worker starts (setup), and waited for on first use; the lock keeps
        # the task threads that come first from making one each.
        with _DEVICE_LOCK:
            if self._device is None:
                self._device = take_device(self.spec)
        return self._device

    def setup(self, worker) -> None:
        # The device's context is made while the worker registers and the client plans
        # the run, not in its first task (dmap.opencl.device.start_devices).
        start_devices([self.spec])
        set_chunk_heap()
        never_pause(worker)
        worker.plugins[self.name] = self
        # Sent with every heartbeat; the dashboard's worker pages list them.
        worker.metrics["dmap_device"] = lambda w: self.spec or "default"
        worker.metrics["dmap_block_loads"] = lambda w: self.block_loads
        worker.metrics["dmap_queries_searched"] = lambda w: self._device.queries_searched if self._device else 0
        worker.metrics["dmap_seconds"] = lambda w: dict(self._device.seconds) if self._device else {}


def _worker_device_stats(dask_worker, index_path: str | None = None) -> dict | None:
    plugin = dask_worker.plugins.get(DEVICE_PLUGIN)
    if plugin is None:
        if not dask_worker.state.total_resources.get(DEVICE_RESOURCE):
            return None
        # Started with the resource but without the preload: its tasks would take the default
        # device anyway (dmap.opencl.device.current_device); with the plugin it is counted and
        # checked (its dmap, its index) like the others.
        plugin = DevicePlugin()
        plugin.setup(dask_worker)
    stats = plugin.stats(str(dask_worker.name))
    if index_path is not None:
        try:  # (an index at a URL: this host's copy of its current build, fetched once per run)
            stats["index"] = index_identity(local_index_path(index_path, refresh=True))
        except OSError as e:
            stats["index"] = None
            stats["index_error"] = f"{e.strerror or e}"
        except IndexFormatError as e:
            stats["index"] = None
            stats["index_error"] = str(e)
        stats["host"] = socket.gethostname()
    return stats


def run_on_workers(client: Client, function, *args, **kwargs) -> dict:
    """``client.run(function, *args, **kwargs)``: each worker's result, by address, but for the
    workers that died while it ran (their connection broke: an OSError).  Dask reruns a lost
    worker's tasks on the others, so a run goes on without it; an error of ``function`` itself
    is raised."""
    results = client.run(function, *args, on_error="return", **kwargs)
    for result in results.values():
        if isinstance(result, Exception) and not isinstance(result, OSError):
            raise result
    return {w: r for w, r in results.items() if not isinstance(r, Exception)}


def device_stats(client: Client, index_path: str | None = None) -> dict[str, dict]:
    """Counters of each device worker, read now: device, block loads, queries
    searched, seconds per activity (the dashboard's dmap page shows the same);
    with ``index_path``, also the digest of the index each worker sees there
    (:func:`dmap.index.store.index_identity`; None and ``index_error`` where it
    cannot read it) and its host.  A worker that dies meanwhile is left out
    (:func:`run_on_workers`)."""
    stats = run_on_workers(client, _worker_device_stats, index_path=index_path)
    return {w: s for w, s in stats.items() if s is not None}


def block_loads(client: Client) -> dict[str, int]:
    """Index blocks each device worker has loaded since it started (blocks stay resident between tasks)."""
    return {w: s["block_loads"] for w, s in device_stats(client).items()}


@click.command()
@click.option("--dmap-device", default=None, help="OpenCL device PLATFORM:DEVICE (see 'dmap devices').")
async def dask_setup(worker, dmap_device):
    """Preload entry point: ``dask worker --preload dmap.cluster.worker --dmap-device P:D``."""
    await worker.plugin_add(DevicePlugin(dmap_device), name=DevicePlugin.name)
