"""``dmap cluster up`` / ``down``: start and stop the processes that
``cluster.yaml`` describes, as real ``dask scheduler`` and ``dask worker``
processes (one worker per OpenCL device, pinned with the ``dmap.cluster.worker``
preload), detached from the command that started them.

Their PIDs and logs live in a state folder per cluster file
(``~/.cache/dmap/clusters/``), so ``down`` finds them again.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from distributed import Client

from ..errors import ClusterError
from ..opencl.device import DEVICE_RESOURCE, Device
from ..opencl.discovery import list_devices
from .client import scheduler_workers
from .config import ClusterFile, WorkerGroup, is_this_machine, read_cluster_file

START_TIMEOUT = 60.0


@dataclass
class ClusterState:
    """What ``up`` started."""

    scheduler_address: str
    dashboard: str | None
    pids: list[int]  # scheduler first
    log_dir: str


def state_dir(cluster_file: str | os.PathLike) -> Path:
    root = Path(os.environ.get("DMAP_STATE_DIR", Path.home() / ".cache" / "dmap" / "clusters"))
    key = hashlib.sha1(os.path.abspath(os.fspath(cluster_file)).encode()).hexdigest()[:12]
    return root / f"{Path(cluster_file).stem}-{key}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _read_state(folder: Path) -> ClusterState | None:
    try:
        return ClusterState(**json.loads((folder / "state.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _spawn(cmd: list[str], log: Path) -> subprocess.Popen:
    # setsid (start_new_session): the processes outlive `dmap cluster up` and its terminal.
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _worker_commands(cfg: ClusterFile) -> list[list[str]]:
    devices = [d.spec for d in list_devices()]
    dask = [sys.executable, "-m", "distributed.cli.dask_worker"]
    commands = []
    for group in cfg.workers or [WorkerGroup("all")]:
        if not is_this_machine(group.host):
            raise ClusterError(
                f"worker host {group.host!r}: starting workers on other machines is not implemented yet; "
                "start them there by hand (docs/cluster.md)"
            )
        wholes = devices if group.device == "all" else [group.device]
        for whole in wholes:
            if whole not in devices:
                raise ClusterError(f"no OpenCL device {whole!r} here; 'dmap devices' lists {', '.join(devices)}")
        specs = [w if group.split == 1 else f"{w}/{group.split}:{k}" for w in wholes for k in range(group.split)]
        for spec in specs:
            Device(spec)  # fails here, with the reason, if the device cannot be split so
            commands.append(dask + [
                cfg.scheduler_address, "--host", cfg.scheduler_host, "--nthreads", str(group.threads),
                "--memory-limit", group.memory_limit, "--name", f"dmap-{spec}-{len(commands)}",
                "--resources", f"{DEVICE_RESOURCE}=1", "--preload", "dmap.cluster.worker", "--dmap-device", spec,
                "--no-dashboard",
            ])
    return commands


def cluster_up(cluster_file: str | os.PathLike) -> ClusterState:
    """Start the scheduler and workers of ``cluster_file``; return what was started.

    Raises
    ------
    ClusterError
        If the cluster is already up, its host is another machine, a device
        does not exist, or a process does not come up (its log is named).
    """
    cfg = read_cluster_file(cluster_file)
    folder = state_dir(cluster_file)
    old = _read_state(folder)
    if old is not None and any(_alive(p) for p in old.pids):
        raise ClusterError(f"the cluster of {cfg.path!r} is already up at {old.scheduler_address}; "
                           "'dmap cluster down' stops it")
    if not is_this_machine(cfg.scheduler_host):
        raise ClusterError(f"scheduler host {cfg.scheduler_host!r} is another machine; start it there by hand "
                           "(docs/cluster.md) and use its address with --scheduler or --cluster")
    folder.mkdir(parents=True, exist_ok=True)
    workers = _worker_commands(cfg)  # checks devices before anything starts
    dashboard = ["--dashboard-address", f"{cfg.scheduler_host}:{cfg.dashboard_port}"] if cfg.dashboard_port \
        else ["--no-dashboard"]
    procs = [_spawn([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", cfg.scheduler_host,
                     "--port", str(cfg.scheduler_port), "--preload", "dmap.cluster.dashboard", *dashboard],
                    folder / "scheduler.log")]
    state = ClusterState(cfg.scheduler_address,
                         f"http://{cfg.scheduler_host}:{cfg.dashboard_port}/dmap" if cfg.dashboard_port else None,
                         [procs[0].pid], str(folder))
    try:
        client = _wait_for_scheduler(cfg.scheduler_address, procs[0], folder / "scheduler.log")
        with client:
            for i, cmd in enumerate(workers):
                procs.append(_spawn(cmd, folder / f"worker-{i}.log"))
                state.pids.append(procs[-1].pid)
            _wait_for_workers(client, len(workers), procs[1:], folder)
    except BaseException:
        _stop(state.pids)
        raise
    (folder / "state.json").write_text(json.dumps(state.__dict__))
    return state


def _wait_for_scheduler(address: str, proc: subprocess.Popen, log: Path) -> Client:
    deadline = time.time() + START_TIMEOUT
    while time.time() < deadline:
        if proc.poll() is not None:
            raise ClusterError(f"the scheduler exited at start (is {address} in use?); see {log}")
        try:
            return Client(address, timeout=2)
        except (OSError, TimeoutError):
            time.sleep(0.2)
    raise ClusterError(f"the scheduler did not start within {START_TIMEOUT:.0f} s; see {log}")


def _wait_for_workers(client: Client, n: int, procs: list[subprocess.Popen], folder: Path) -> None:
    deadline = time.time() + START_TIMEOUT
    while len(scheduler_workers(client)) < n:
        for i, p in enumerate(procs):
            if p.poll() is not None:
                raise ClusterError(f"worker {i} exited at start; see {folder / f'worker-{i}.log'}")
        if time.time() > deadline:
            raise ClusterError(f"only {len(scheduler_workers(client))} of {n} workers started; "
                               f"see the logs in {folder}")
        time.sleep(0.2)


def _stop(pids: list[int], timeout: float = 15) -> None:
    """SIGTERM workers, then the scheduler; SIGKILL what is left after ``timeout``."""
    for pid in reversed(pids):  # workers before the scheduler
        try:
            os.killpg(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.time() + timeout
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def cluster_down(cluster_file: str | os.PathLike) -> ClusterState:
    """Stop what ``cluster_up`` started for ``cluster_file``."""
    folder = state_dir(cluster_file)
    state = _read_state(folder)
    if state is None:
        raise ClusterError(f"no cluster of {os.fspath(cluster_file)!r} is up (nothing in {folder})")
    _stop(state.pids)
    (folder / "state.json").unlink(missing_ok=True)
    return state
