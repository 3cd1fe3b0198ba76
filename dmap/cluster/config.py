"""``cluster.yaml``: the cluster as users describe it.

::

    scheduler:
      address: tcp://127.0.0.1:8786   # where the scheduler listens (or runs already)
      dashboard: 8787                 # dashboard port on the scheduler's host; null for none
    workers:                          # what `dmap cluster up` starts
      - device: all                   # PLATFORM:DEVICE from `dmap devices`, or all
        threads: 2
        memory_limit: 8GB
        split: 1                      # workers per device, each on an equal part (device fission)
        per_device: 1                 # worker processes sharing each device (or part), e.g. 8 on a GPU
      - host: node2                   # another machine, reached over ssh (default: this one)
        device: all                   # its devices, as `dmap devices` lists them there
        ssh: ssh -p 2222              # the command that reaches it [default: ssh]
        python: /opt/dmap/bin/python  # the Python that has dmap there [default: this one's path]
    dmap:
      chunk_size: 200000              # reads per task [default: 200000; 50000 with --max-errors]
      in_flight: 4
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field, fields
from urllib.parse import urlparse

import yaml

from ..errors import ClusterError


@dataclass
class WorkerGroup:
    device: str  # "P:D" or "all"
    threads: int = 2
    memory_limit: str = "auto"
    host: str = "localhost"
    split: int = 1  # workers per device, each on an equal part of it (device fission)
    ssh: str = "ssh"  # the command that reaches another host (split as a shell would)
    python: str | None = None  # the Python with dmap on another host (None: this process's path)
    # Worker processes sharing each device (or part): on a GPU host the host's work bounds a run,
    # and 8 processes of 2 threads on one H100 mapped 10M reads in 2.39 s against one
    # in-process worker's 3.89 s (docs/cluster.md).
    per_device: int = 1


# What a worker group in cluster.yaml may say: WorkerGroup's fields, each defaulting as there
# (the device to "all").
WORKER_KEYS = tuple(f.name for f in fields(WorkerGroup))


@dataclass
class ClusterFile:
    """What ``cluster.yaml`` says."""

    path: str
    scheduler_address: str
    dashboard_port: int | None = None
    workers: list[WorkerGroup] = field(default_factory=list)
    chunk_size: int | None = None
    in_flight: int | None = None

    @property
    def scheduler_host(self) -> str:
        return urlparse(self.scheduler_address).hostname or "127.0.0.1"

    @property
    def scheduler_port(self) -> int:
        return urlparse(self.scheduler_address).port or 8786


def _fail(path, message: str) -> ClusterError:
    return ClusterError(f"cluster file {os.fspath(path)!r}: {message}")


def read_cluster_file(path: str | os.PathLike) -> ClusterFile:
    """Read and check ``cluster.yaml``; errors name the key that is wrong."""
    try:
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
    except OSError as e:
        raise ClusterError(f"cannot read cluster file {os.fspath(path)!r}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise _fail(path, f"not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise _fail(path, "must be a YAML mapping")
    unknown = set(doc) - {"scheduler", "workers", "dmap"}
    if unknown:
        raise _fail(path, f"unknown sections {sorted(unknown)}")
    sched = doc.get("scheduler") or {}
    address = sched.get("address")
    if not address:
        raise _fail(path, "scheduler.address is missing (e.g. tcp://127.0.0.1:8786)")
    if not str(address).startswith("tcp://"):
        raise _fail(path, f"scheduler.address {address!r} must look like tcp://HOST:PORT")
    dashboard = sched.get("dashboard")
    if dashboard is not None and not isinstance(dashboard, int):
        raise _fail(path, "scheduler.dashboard must be a port number or null")
    groups = []
    for i, w in enumerate(doc.get("workers") or []):
        if not isinstance(w, dict) or set(w) - set(WORKER_KEYS):
            raise _fail(path, f"workers[{i}] must have only {', '.join(WORKER_KEYS)}")
        group = WorkerGroup(**{"device": "all", **w})
        for key in ("threads", "split", "per_device"):
            if not isinstance(getattr(group, key), int) or getattr(group, key) < 1:
                raise _fail(path, f"workers[{i}].{key} must be a positive integer")
        for key in ("ssh", "python"):
            if key in w and (not isinstance(w[key], str) or not w[key].strip()):
                raise _fail(path, f"workers[{i}].{key} must be a command")
        group.device, group.memory_limit, group.host = str(group.device), str(group.memory_limit), str(group.host)
        groups.append(group)
    settings = doc.get("dmap") or {}
    unknown = set(settings) - {"chunk_size", "in_flight"}
    if unknown:
        raise _fail(path, f"unknown dmap settings {sorted(unknown)}")
    return ClusterFile(os.path.abspath(os.fspath(path)), str(address), dashboard, groups,
                       settings.get("chunk_size"), settings.get("in_flight"))


def reachable_from_elsewhere(host: str) -> bool:
    """Whether other machines can reach this machine's ``host`` (not a loopback address, nor
    0.0.0.0, which a server listens on but nothing connects to)."""
    try:
        address = socket.gethostbyname(host)
    except OSError:
        return True  # not ours to judge: connecting will say
    return not (address.startswith("127.") or address == "0.0.0.0")


def is_this_machine(host: str) -> bool:
    """Whether ``host`` names this machine (processes are started here, not over ssh): a loopback
    name, this machine's name, or an address of one of its interfaces (one a socket can bind)."""
    if host in ("localhost", "127.0.0.1", "::1", "0.0.0.0", socket.gethostname()):
        return True
    try:
        address = socket.gethostbyname(host)
    except OSError:
        return False
    if address.startswith("127."):
        return True
    with socket.socket() as s:
        try:
            s.bind((address, 0))
        except OSError:  # EADDRNOTAVAIL: another machine's address
            return False
    return True
