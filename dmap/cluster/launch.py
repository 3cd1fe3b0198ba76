"""``dmap cluster up`` / ``down``: start and stop the processes that
``cluster.yaml`` describes, as real ``dask scheduler`` and ``dask worker``
processes (one worker per OpenCL device, pinned with the ``dmap.cluster.worker``
preload), detached from the command that started them.

Their PIDs and logs live in a state folder per cluster file
(``~/.cache/dmap/clusters/``), so ``down`` finds them again.  Workers on other
hosts are started there over ssh by this same module (``python -m
dmap.cluster.launch start``), which answers with their PIDs and log folder on
that host; ``down`` stops them the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from distributed import Client

from .._version import code_identity
from ..errors import ClusterError
from ..host import memory_budget
from ..opencl.device import DEVICE_RESOURCE, Device, device_resource
from ..opencl.discovery import list_devices
from .client import scheduler_workers, worker_name
from .config import WorkerGroup, is_this_machine, reachable_from_elsewhere, read_cluster_file

START_TIMEOUT = 60.0
# Seconds a worker on another host waits for a lost scheduler before it exits.
DEATH_TIMEOUT = 60.0


@dataclass
class ClusterState:
    """What ``up`` started."""

    scheduler_address: str
    dashboard: str | None
    pids: list[int]  # the scheduler first, then this machine's workers
    log_dir: str
    remote: list[dict] = field(default_factory=list)  # each other host's RemoteWorkers, as a dict

    @property
    def n_workers(self) -> int:
        return len(self.pids) - 1 + sum(len(r["pids"]) for r in self.remote)


@dataclass
class RemoteWorkers:
    """The workers ``up`` started on another host over ssh, and how to reach them again."""

    host: str
    ssh: list[str]
    python: str
    pids: list[int]
    log_dir: str


def _state_root() -> Path:
    """Where ``up`` keeps its PIDs and logs, on this machine and on worker hosts."""
    return Path(os.environ.get("DMAP_STATE_DIR", Path.home() / ".cache" / "dmap" / "clusters"))


def state_dir(cluster_file: str | os.PathLike) -> Path:
    key = hashlib.sha1(os.path.abspath(os.fspath(cluster_file)).encode()).hexdigest()[:12]
    return _state_root() / f"{Path(cluster_file).stem}-{key}"


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


def _group_commands(group: WorkerGroup, address: str, listen_host: str | None, name_prefix: str,
                    death_timeout: float | None = None) -> list[tuple[str, list[str]]]:
    """The ``dask worker`` commands of one worker group on this machine, with their names:
    ``name_prefix`` (which tells the groups apart: Dask refuses a name taken) and the device.

    ``listen_host``: the interface the workers listen on (None: the one that reaches the
    scheduler, as Dask picks it).  ``death_timeout``: seconds a worker waits for a lost scheduler
    before it exits, so that workers on another host end with their scheduler even where
    ``down`` cannot reach them.  Checks every device before anything starts.
    """
    devices = [d.spec for d in list_devices()]
    wholes = devices if group.device == "all" else [group.device]
    for whole in wholes:
        if whole not in devices:
            raise ClusterError(f"no OpenCL device {whole!r} on {socket.gethostname()}; "
                               f"'dmap devices' lists {', '.join(devices)}")
    specs = [w if group.split == 1 else f"{w}/{group.split}:{k}" for w in wholes for k in range(group.split)]
    # "auto": the memory this host gives these processes (dmap.host: the machine's, or less
    # under a memory limit such as a SLURM job's, which `dask worker` does not read) shared
    # equally among the group's workers, not Dask's share by threads over cores.
    workers_here = len(specs) * group.per_device
    memory_limit = (str(memory_budget().total // workers_here) if group.memory_limit == "auto"
                    else group.memory_limit)
    commands = []
    for spec in specs:
        Device(spec)  # fails here, with the reason, if the device cannot be split so
        names = [worker_name(spec, copy, name_prefix) for copy in range(group.per_device)]
        commands.extend((name, [
            sys.executable, "-m", "distributed.cli.dask_worker", address,
            *(["--host", listen_host] if listen_host else []),
            *(["--death-timeout", str(death_timeout)] if death_timeout else []),
            "--nthreads", str(group.threads), "--memory-limit", memory_limit, "--name", name,
            "--resources", f"{DEVICE_RESOURCE}={device_resource(group.threads):g}",
            "--preload", "dmap.cluster.worker", "--dmap-device", spec,
            "--no-dashboard",
        ]) for name in names)
    return commands


def cluster_up(cluster_file: str | os.PathLike) -> ClusterState:
    """Start the scheduler and workers of ``cluster_file``; return what was started.

    Workers of a group whose ``host`` is another machine are started there over ssh
    (:func:`start_remote`), detached as here, and end on their own if their scheduler goes
    (``--death-timeout``).

    Raises
    ------
    ClusterError
        If the cluster is already up, its scheduler's host is another machine (or is this
        machine's loopback address while workers run elsewhere), a device does not exist, a
        host cannot be reached, or a process does not come up (its log is named).
    """
    cfg = read_cluster_file(cluster_file)
    folder = state_dir(cluster_file)
    old = _read_state(folder)
    if old is not None and any(_alive(p) for p in old.pids):
        raise ClusterError(f"the cluster of {cfg.path!r} is already up at {old.scheduler_address}; "
                           "'dmap cluster down' stops it")
    if old is not None and old.remote:  # its scheduler is gone: stop what may be left of its workers
        _stop_all(old)
    if not is_this_machine(cfg.scheduler_host):
        raise ClusterError(f"scheduler host {cfg.scheduler_host!r} is another machine; start it there by hand "
                           "(docs/cluster.md) and use its address with --scheduler or --cluster")
    groups = cfg.workers or [WorkerGroup("all")]
    here = [is_this_machine(g.host) for g in groups]  # a name lookup each
    remote = [(g, i) for i, (g, h) in enumerate(zip(groups, here)) if not h]  # with their places in the file
    if remote and not reachable_from_elsewhere(cfg.scheduler_host):
        raise ClusterError(f"workers on {remote[0][0].host} cannot reach a scheduler at {cfg.scheduler_address}: "
                           "give scheduler.address an address of this machine that they can reach")
    folder.mkdir(parents=True, exist_ok=True)
    workers = [cmd for i, (g, h) in enumerate(zip(groups, here)) if h
               for cmd in _group_commands(g, cfg.scheduler_address, cfg.scheduler_host, f"dmap-{i}-")]
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
            for i, (_, cmd) in enumerate(workers):
                procs.append(_spawn(cmd, folder / f"worker-{i}.log"))
                state.pids.append(procs[-1].pid)
            # Each host over its own ssh connection, at once: a host's start takes seconds.
            with ThreadPoolExecutor(max(1, len(remote))) as pool:
                starts = [pool.submit(start_remote, g, i, cfg.scheduler_address) for g, i in remote]
            failed = [f.exception() for f in starts if f.exception() is not None]
            state.remote += [f.result().__dict__ for f in starts if f.exception() is None]
            if failed:
                raise failed[0]
            _wait_for_workers(client, [name for name, _ in workers], procs[1:], folder)
    except BaseException:
        _stop_all(state)
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


def _wait_for_workers(client: Client, names: list[str], procs: list[subprocess.Popen], folder: Path) -> None:
    """Wait until the workers named ``names`` (started as ``procs``, logging into ``folder``)
    are registered with the scheduler; an error names the log of one that exited or is missing."""
    deadline = time.time() + START_TIMEOUT
    while missing := sorted(set(names) - {w.get("name") for w in scheduler_workers(client).values()}):
        for i, p in enumerate(procs):
            if p.poll() is not None:
                raise ClusterError(f"worker {names[i]} exited at start; see {folder / f'worker-{i}.log'}")
        if time.time() > deadline:
            raise ClusterError(f"{len(names) - len(missing)} of {len(names)} workers started within "
                               f"{START_TIMEOUT:.0f} s on {socket.gethostname()}; see the logs in {folder}")
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


def _stop_all(state: ClusterState) -> list[str]:
    """Stop the workers on other hosts, then this machine's processes; return a line for each
    host that could not be reached (its workers end on their own once the scheduler is gone)."""
    unreached = []
    for r in state.remote:
        try:
            _over_ssh(RemoteWorkers(**r), ["stop", *map(str, r["pids"])])
        except ClusterError as e:
            unreached.append(f"{e}; its workers exit within {DEATH_TIMEOUT:.0f} s of the scheduler's end")
    _stop(state.pids)
    return unreached


def _over_ssh(where: RemoteWorkers, args: list[str], timeout: float = START_TIMEOUT + 30) -> str:
    """Run ``python -m dmap.cluster.launch ARGS`` on ``where.host`` over ssh; its standard output.

    ``BatchMode``: ssh fails rather than asking for a password nobody will type."""
    command = [*where.ssh, "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", where.host,
               shlex.join([where.python, "-m", "dmap.cluster.launch", *args])]
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"host {where.host}: no answer over ssh within {timeout:.0f} s") from None
    except OSError as e:
        raise ClusterError(f"host {where.host}: cannot run {where.ssh[0]!r}: {e.strerror}") from None
    if r.returncode:
        said = [line for line in r.stderr.splitlines() if line.strip()]
        why = said[-1].removeprefix("dmap: error: ") if said else f"exit status {r.returncode}"
        raise ClusterError(f"host {where.host}: {why}")
    return r.stdout


def start_remote(group: WorkerGroup, place: int, address: str) -> RemoteWorkers:
    """Start ``group`` (``workers[place]`` of the cluster file) on its host over ssh
    (:func:`start_here` runs there), and return its workers once they are registered with the
    scheduler at ``address``."""
    where = RemoteWorkers(group.host, shlex.split(group.ssh), group.python or sys.executable, [], "")
    spec = {**asdict(group), "address": address, "place": place, "code": code_identity()}
    answer = _over_ssh(where, ["start", json.dumps(spec)]).strip()
    try:
        said = json.loads(answer.splitlines()[-1])
        where.pids, where.log_dir = said["pids"], said["log_dir"]
    except (IndexError, ValueError, KeyError, TypeError):
        raise ClusterError(f"host {group.host}: dmap answered {answer[-200:]!r}, not its workers") from None
    return where


def start_here(spec: dict) -> dict:
    """On a worker host (run there by :func:`start_remote`): start the group ``spec`` describes,
    detached, and wait until its workers are registered with the scheduler; their PIDs and log
    folder.  A worker that exits at start stops the others and names its log.  Nothing starts
    where dmap differs from the ``up`` machine's (``spec["code"]``): every run would refuse it."""
    if spec["code"] != code_identity():
        raise ClusterError(f"it runs dmap {code_identity()}, the machine that starts the cluster dmap "
                           f"{spec['code']}: install the same dmap on every host")
    group = WorkerGroup(**{f.name: spec[f.name] for f in fields(WorkerGroup)})
    folder = _state_root() / f"workers-{hashlib.sha1(spec['address'].encode()).hexdigest()[:12]}-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    workers = _group_commands(group, spec["address"], None, f"dmap-{spec['host']}-{spec['place']}-", DEATH_TIMEOUT)
    procs = [_spawn(cmd, folder / f"worker-{i}.log") for i, (_, cmd) in enumerate(workers)]
    try:
        try:
            client = Client(spec["address"], timeout=START_TIMEOUT)
        except (OSError, TimeoutError) as e:
            raise ClusterError(f"cannot reach the scheduler at {spec['address']}: {e}") from None
        with client:
            _wait_for_workers(client, [name for name, _ in workers], procs, folder)
    except BaseException:
        _stop([p.pid for p in procs])
        raise
    return {"pids": [p.pid for p in procs], "log_dir": str(folder)}


def cluster_down(cluster_file: str | os.PathLike) -> tuple[ClusterState, list[str]]:
    """Stop what ``cluster_up`` started for ``cluster_file``: what was stopped, and a line for
    each worker host that could not be reached."""
    folder = state_dir(cluster_file)
    state = _read_state(folder)
    if state is None:
        raise ClusterError(f"no cluster of {os.fspath(cluster_file)!r} is up (nothing in {folder})")
    unreached = _stop_all(state)
    (folder / "state.json").unlink(missing_ok=True)
    return state, unreached


def _main(argv: list[str]) -> int:
    """``python -m dmap.cluster.launch start SPEC_JSON`` or ``stop PID...``, as ``up`` and
    ``down`` run it on a worker host: one JSON line out, or one error line."""
    from ..errors import DmapError

    try:
        if argv[:1] == ["start"] and len(argv) == 2:
            print(json.dumps(start_here(json.loads(argv[1]))))
        elif argv[:1] == ["stop"]:
            _stop([int(p) for p in argv[1:]])
        else:
            raise DmapError("usage: python -m dmap.cluster.launch start SPEC_JSON | stop PID...")
    except DmapError as e:
        print(f"dmap: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
