"""Getting a Dask client: an existing one, a scheduler address, or an
embedded cluster with one worker per local OpenCL device."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from collections.abc import Iterator

import dask
from distributed import Client, Nanny, Scheduler, SpecCluster, Worker

from .._version import code_identity
from ..errors import ClusterError, IndexFormatError
from ..host import allowed_cores, memory_budget
from ..index.store import unseen_index_error
from ..opencl.device import DEVICE_RESOURCE, device_resource, device_tasks
from ..opencl.discovery import limit_cpu_threads, list_devices
from .worker import DevicePlugin

# Threads per device worker: one runs a kernel while the other locates,
# merges and formats SAM for another chunk (BUFFER_SETS device tasks at once).
WORKER_THREADS = 2
# Task threads of a GPU's worker in the embedded cluster, at most.  A GPU leaves the host's
# work (reading, locating, merging, formatting) as what bounds a run, and most of it releases
# the interpreter lock: on a 16-core H100 host a plain `dmap run` of 10M exact reads took
# 3.89 s with 8 threads against 4.15 s with 4 and 5.16-5.69 s with 2, and 16 were no faster
# (3.81 against 3.91 s, faster in 1 of 3 pairs; docs/performance.md, "An H100 host: the
# embedded cluster's threads").
GPU_WORKER_THREADS = 8
# Device memory a GPU worker's thread may hold in buffers, reckoned for its thread count: a
# thread's buffer set took up to 142 MiB for a 200,000-read chunk of 100-bp reads exact,
# 257 MiB at -e 3 and 261 MiB for 150-bp reads at -e 4 (benchmarks/buffer_set_memory.py),
# and its pool keeps up to twice what it takes.  The sets get at most a quarter of the
# device (resident blocks take up to half): 2 threads on a 4 GB GPU, 8 from 16 GB.
SET_MEMORY = 512 << 20

# Dask keeps each process's last messages for its developers (1,000 by default), by
# reference where both ends share a process, and a chunk of a stream (a pipe, standard
# input, plain gzip) travels in its task's message: the embedded cluster kept every chunk
# of a piped input, 2.5 GB of RSS for 10M reads of gzip FASTQ. Its scheduler, workers and
# client, and dmap's clients of a standing cluster, keep no such logs (nor the transition
# and profile histories that share the setting: an embedded cluster's Dask dashboard shows
# no Profile history). Over TCP Dask keeps no message of a megabyte or more, so a client of
# a cluster in processes of its own needs nothing; one made by hand for a LocalDeviceCluster
# of threads (processes=False) is made within dask.config.set(NO_MESSAGE_LOGS).
NO_MESSAGE_LOGS = {"distributed.admin.low-level-log-length": 0}
# An embedded cluster serves this machine only.
LOOPBACK = "127.0.0.1"


def worker_threads(device_type: str, cores: int, gpu_workers: int, memory: int | None = None) -> int:
    """Task threads of an embedded cluster's worker on a device of ``device_type``
    (as :class:`~dmap.opencl.discovery.DeviceInfo` has it), on a host of ``cores`` cores
    with ``gpu_workers`` workers on GPUs, the worker's share of the device being ``memory`` bytes.

    A CPU device's worker has :data:`WORKER_THREADS`: PoCL runs its kernels on every core
    already, and on the 2-core VM 1, 2 or 3 task threads mapped alike.  A GPU's worker has
    half the host's cores, shared among the GPU workers, from :data:`WORKER_THREADS` to
    :data:`GPU_WORKER_THREADS`: the other half runs the scheduler, the writer and the
    operating system's writes into the output.  Each thread's buffers take device memory,
    so a quarter of ``memory`` bounds them too (:data:`SET_MEMORY`).  Never more than ``cores``.
    """
    if "GPU" not in device_type:
        return max(1, min(cores, WORKER_THREADS))
    share = min(cores // (2 * max(gpu_workers, 1)), GPU_WORKER_THREADS)
    if memory is not None:
        share = min(share, memory // 4 // SET_MEMORY)
    return max(1, min(cores, max(WORKER_THREADS, share)))


def worker_name(spec: str, copy: int = 0, prefix: str = "dmap-") -> str:
    """The Dask name of the worker ``copy`` of those that share the device ``spec``."""
    return f"{prefix}{spec}" if copy == 0 else f"{prefix}{spec}-{copy}"


def embedded_cluster_spec(
    processes: bool = False, dashboard: bool | int = False, split: int = 1, devices: list[str] | None = None,
    threads: int | None = None, per_device: int = 1, cores: int | None = None,
) -> tuple[dict, dict]:
    """Scheduler and worker specs for :class:`distributed.SpecCluster`.

    In-process workers (threads) start in well under a second and share data
    without copies; ``processes=True`` starts one spawned process per device.
    ``split`` > 1 puts that many workers on equal parts of each device;
    ``devices`` names the device specs (one worker each) instead.
    ``threads`` per worker, each with its own command queue and buffers (a buffer set),
    running one device task at a time; None: :func:`worker_threads` for each device on
    ``cores`` cores (default: the machine's).
    ``per_device`` workers share each device spec (each its own context and index).
    """
    # In-process workers talk over inproc:// (objects handed over, not
    # pickled through loopback TCP, which cost a core-second per million reads).
    where = {"host": LOOPBACK} if processes else {"protocol": "inproc://"}
    workers = {}
    infos = {info.spec: info for info in list_devices()}
    specs = devices or [
        spec if split == 1 else f"{spec}/{split}:{k}" for spec in infos for k in range(split)
    ]
    devices_of = {spec: infos.get(spec.split("/")[0]) for spec in specs}  # None: the worker says why
    gpu_workers = per_device * sum(bool(d) and "GPU" in d.type for d in devices_of.values())
    # Each worker's memory limit: the memory this process may use (the machine's, or its memory
    # limit's, such as a SLURM job's: dmap.host), shared equally among the worker processes, or
    # all of it for in-process workers, which share this process. Dask's own default gives a
    # worker the share of the cores its threads are, far too little for a worker with a few task
    # threads on a many-core host (dmap.cluster.worker.never_pause), and reads no SLURM limit.
    total = memory_budget().total
    memory_limit = total // (len(specs) * per_device) if processes else total
    for spec, copy in ((spec, k) for spec in specs for k in range(per_device)):
        name = worker_name(spec, copy)
        info = devices_of[spec]  # a split device's parts are CPU cores, whose memory does not count
        nthreads = threads or worker_threads(info.type if info else "", cores or os.cpu_count() or 1, gpu_workers,
                                             info.global_mem // per_device if info else None)
        options = {
            "nthreads": nthreads,
            "memory_limit": memory_limit,
            "resources": {DEVICE_RESOURCE: device_resource(nthreads)},
            "plugins": {DevicePlugin(spec)},
            "name": name,
            "dashboard": False,
            **where,
        }
        if processes:
            options["silence_logs"] = logging.CRITICAL  # failures reach the caller as exceptions
        workers[name] = {"cls": Nanny if processes else Worker, "options": options}
    port = 8787 if dashboard is True else int(dashboard)  # an int: that port (0: any free one)
    scheduler = {
        "cls": Scheduler,
        "options": {
            **where,
            "dashboard": dashboard is not False,
            # Port 0 when no dashboard is asked for: the scheduler's HTTP
            # server should never contend for 8787 with another cluster.
            "dashboard_address": f"{LOOPBACK}:{port}",
            "preload": ["dmap.cluster.dashboard"] if dashboard is not False else [],
        },
    }
    return scheduler, workers


class LocalDeviceCluster(SpecCluster):
    """A local Dask cluster with one worker per OpenCL device of this machine.

    The Dask way to get dmap's workers in a notebook::

        from distributed import Client
        client = Client(dmap.LocalDeviceCluster())

    Parameters
    ----------
    processes
        One spawned worker process per device (default), or threads here.
    dashboard
        Serve the Dask dashboard, with the dmap page at ``/dmap``, on
        127.0.0.1:8787 (True) or on the given port.
    split
        Workers per device, each on an equal part of it (device fission).
    devices
        Device specs, one worker each (e.g. ``["0:0/2:0"]``), instead of all.
    threads
        Threads per worker; each has its own command queue and buffers, so
        this many chunks are in flight on a device at once [default: 2 for a
        CPU device, half the machine's cores for a GPU, up to 8:
        :func:`worker_threads`].
    per_device
        Worker processes sharing each device: on a GPU host with many cores,
        reading, merging and formatting run on several cores at once.
    cores
        The cores the default ``threads`` are reckoned from [default: the machine's].
    """

    def __init__(self, processes: bool = True, dashboard: bool | int = False, split: int = 1,
                 devices: list[str] | None = None, threads: int | None = None, per_device: int = 1,
                 cores: int | None = None, **kwargs):
        scheduler, workers = embedded_cluster_spec(processes, dashboard, split, devices, threads, per_device, cores)
        kwargs.setdefault("silence_logs", logging.ERROR)
        # Dask's statistical profiler samples every thread's stack every 10 ms
        # for the dashboard's Profile page; with no dashboard nobody sees it,
        # and it held the event loop 0.04 s of a 1M-read run and 0.16 s of a
        # 10M-read one (docs/performance.md).
        with dask.config.set({"distributed.worker.profile.enabled": dashboard is not False, **NO_MESSAGE_LOGS}):
            super().__init__(workers=workers, scheduler=scheduler, **kwargs)

    @property
    def dashboard_link(self) -> str:
        """The dashboard's address, on the loopback interface where it listens: Dask's own link
        names the host in an in-process scheduler's ``inproc://`` address, where nothing listens."""
        link = super().dashboard_link
        return re.sub(r"//[^/:]+:", f"//{LOOPBACK}:", link, count=1) if link else link


@contextlib.contextmanager
def embedded_client(processes: bool = False, dashboard: bool | int = False, threads: int | None = None,
                    per_device: int = 1) -> Iterator[Client]:
    """A client of a :class:`LocalDeviceCluster`, closed on exit.

    ``threads``: the cores to use; by default those this process may run on
    where they are fewer than the machine's (:func:`~dmap.host.allowed_cores`).
    PoCL's CPU device then runs its kernels on that many
    (:func:`~dmap.opencl.discovery.limit_cpu_threads`: it takes effect if
    OpenCL has not started in this process yet, as in the ``dmap`` command,
    and always in worker processes), and each device worker has at most that
    many threads (:func:`worker_threads`).
    ``per_device`` > 1 starts that many worker processes on each device
    (``processes`` is then implied).
    """
    if threads is not None:
        limit_cpu_threads(threads)
    else:
        threads = allowed_cores()  # which PoCL keeps to as well (dmap.opencl.discovery._cl)
    # A failed task is re-raised to the caller with its own message; the
    # worker's "Compute Failed" log would repeat it as a traceback.
    quiet = {name: logging.getLogger(name) for name in ("distributed.worker", "distributed.core")}
    levels = {name: log.level for name, log in quiet.items()}
    for log in quiet.values():
        log.setLevel(logging.CRITICAL)
    try:
        with contextlib.ExitStack() as stack:
            with dask.config.set(NO_MESSAGE_LOGS):  # read as the cluster and its client are made
                cluster = stack.enter_context(LocalDeviceCluster(processes or per_device > 1, dashboard,
                                                                 per_device=per_device, cores=threads))
                client = stack.enter_context(Client(cluster))
            yield client
    finally:
        for name, log in quiet.items():
            log.setLevel(levels[name])


def _check_address(scheduler: str, timeout: float) -> None:
    """Refuse a malformed address, and a TCP address where nothing listens, at once.

    Dask's client retries a refused connection until its timeout ends, and
    raises a bare ValueError for an address without a port.
    """
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(scheduler, strict=True)
        if scheme not in ("tcp", "tls"):
            return
        host, port = parse_host_port(location)
    except (ValueError, TypeError) as e:
        raise ClusterError(f"--scheduler {scheduler!r} is not a scheduler address such as tcp://HOST:8786 "
                           f"({e})") from None
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise ClusterError(f"cannot reach the Dask scheduler at {scheduler} ({e.strerror or e}); start one with "
                           "'dask scheduler' or run without --scheduler to use the local devices") from None


@contextlib.contextmanager
def connect(scheduler: str, timeout: float = 10) -> Iterator[Client]:
    """A client of the scheduler at ``scheduler`` (e.g. ``tcp://host:8786``)."""
    _check_address(scheduler, timeout)
    try:
        with dask.config.set(NO_MESSAGE_LOGS):
            client = Client(scheduler, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as e:
        raise ClusterError(
            f"cannot reach the Dask scheduler at {scheduler} ({type(e).__name__}: {e}); start one with "
            "'dask scheduler' or run without --scheduler to use the local devices"
        ) from None
    with client:
        yield client


def scheduler_workers(client: Client) -> dict[str, dict]:
    """Every worker the scheduler knows, by address, with what it says of itself (name,
    resources, threads), asked of the scheduler now.

    Not ``client.scheduler_info()``: that returns the client's cached copy, which the client's
    own update replaces every 2 s with one that lists no workers (distributed 2026.8), so a
    call that raced that update found none: a notebook's long-lived client then failed a run
    with "no worker with an OpenCL device".
    """
    return client.sync(client.scheduler.identity)["workers"]


def require_device_workers(client: Client) -> list[int]:
    """How many device tasks each worker that declares an OpenCL device runs at once
    (:func:`~dmap.opencl.device.device_tasks`); error if none."""
    workers = scheduler_workers(client)
    shares = [w.get("resources", {}).get(DEVICE_RESOURCE) for w in workers.values()]
    slots = [device_tasks(share) for share in shares if share]
    if not slots:
        raise ClusterError(
            f"the cluster at {client.scheduler.address} has no worker with an OpenCL device (Dask resource "
            f"'{DEVICE_RESOURCE}'); start workers with '--resources {DEVICE_RESOURCE}=1 --preload dmap.cluster.worker'"
        )
    return slots


def require_same_code(stats: dict[str, dict]) -> None:
    """Error unless every device worker (``stats``: :func:`dmap.cluster.worker.device_stats`)
    runs the dmap this process runs (:func:`dmap._version.code_identity`)."""
    mine = code_identity()
    other = {w: st.get("code", "of an older version") for w, st in stats.items() if st.get("code") != mine}
    if other:
        worker, theirs = sorted(other.items())[0]
        raise ClusterError(
            f"worker {worker} runs dmap {theirs}, this process dmap {mine} ({len(other)} of {len(stats)} workers "
            f"differ): every worker must run the same dmap as the client; install the same one on every host"
        )


def require_same_index(stats: dict[str, dict], path: str, mine: str) -> None:
    """Error unless every device worker (``stats``: :func:`dmap.cluster.worker.device_stats` with
    the index path) sees at ``path`` the index this process opened (digest ``mine``): a worker
    without it would fail every task, one with another index would map against it silently."""
    for worker, st in sorted(stats.items()):
        where = f"the worker {worker} on host {st.get('host', '?')!r}"
        if st.get("index") is None:
            raise unseen_index_error(path, where, st.get("index_error", "no reason given"))
        if st["index"] != mine:
            raise IndexFormatError(
                f"{where} sees another index at {path!r} than this process (metadata digest {st['index']}, "
                f"here {mine}): every worker must see the same index; copy it again, or give a shared path")


@contextlib.contextmanager
def client_for(client: Client | None, scheduler: str | None, processes: bool, threads: int | None = None,
               per_device: int = 1, dashboard: bool | int = False) -> Iterator[Client]:
    """The client a run uses: ``client`` itself, one connected to ``scheduler``, or an embedded
    cluster's (:func:`embedded_client`, serving the dashboard as ``dashboard`` says)."""
    if client is not None:
        yield client
    elif scheduler is not None:
        with connect(scheduler) as c:
            yield c
    else:
        with embedded_client(processes=processes, dashboard=dashboard, threads=threads, per_device=per_device) as c:
            yield c
