"""Two hosts as two network namespaces (benchmarks/two_hosts.py): the SAM
equals a local run's and both hosts' workers take part, with workers started
by hand and by `dmap cluster up` over ssh."""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import BENCHMARKS, benchmark_module, genome_case, require_device_parts


def can_make_namespaces() -> bool:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    r = subprocess.run(["ip", "netns", "add", "dmapprobe"], capture_output=True)
    subprocess.run(["ip", "netns", "del", "dmapprobe"], capture_output=True)
    return r.returncode == 0


def two_hosts_script(monkeypatch):
    """benchmarks/two_hosts.py as a module: its namespaces are the tests' hosts."""
    monkeypatch.syspath_prepend(BENCHMARKS)  # the script imports its neighbours, as when run there
    return benchmark_module("two_hosts")


@pytest.mark.skipif(not can_make_namespaces(), reason="needs root and ip netns")
def test_two_hosts(tmp_path, monkeypatch):
    require_device_parts(2)
    genome_case(tmp_path, seed=4, size=100_000, read_length=50, n_reads=200_000)
    result = two_hosts_script(monkeypatch).main([str(tmp_path / "idx"), str(tmp_path / "r.fq"), "--repeat", "1"])
    assert result["same_sam_as_local"]
    assert result["workers_with_work"] == 2
    assert set(result["cpu_seconds"]) == {"client", "scheduler", "worker on 10.77.0.1", "worker on 10.77.0.2"}


SSHD = Path("/usr/sbin/sshd")


@contextlib.contextmanager
def ssh_host(two_hosts, ns: str, address: str, folder: Path):
    """An ssh server on ``address`` inside the namespace ``ns``, which lets in a key of its own
    alone; yields the ssh command that reaches it (as cluster.yaml's ``ssh`` takes it) and the
    server's process."""
    folder.mkdir()
    for key in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", folder / key], check=True)
    (folder / "authorized_keys").write_bytes((folder / "client.pub").read_bytes())
    (folder / "sshd_config").write_text(
        f"ListenAddress {address}\nHostKey {folder / 'host'}\nAuthorizedKeysFile {folder / 'authorized_keys'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\nPidFile none\n"
        # Where the workers there keep their logs; a real host's default is ~/.cache/dmap/clusters.
        f"SetEnv DMAP_STATE_DIR={folder / 'state'}\n")
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation folder
    server = subprocess.Popen(two_hosts.in_ns(ns, str(SSHD), "-D", "-e", "-f", str(folder / "sshd_config")),
                              stderr=open(folder / "sshd.log", "wb"))
    ssh = (f"ssh -i {folder / 'client'} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
           "-o LogLevel=ERROR")
    try:
        yield ssh, server
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.skipif(not can_make_namespaces() or not SSHD.exists(), reason="needs root, ip netns and sshd")
def test_cluster_up_starts_workers_on_another_host_over_ssh(tmp_path, monkeypatch):
    """`dmap cluster up` starts a worker here and one on host B over ssh; a run from host A uses
    both and writes a local run's SAM; `down` stops both.  A host whose Python cannot be run
    stops `up` in one line, and leaves nothing running.  A host that `down` cannot reach is
    named in a warning, and its worker ends by itself once the scheduler is gone."""
    import psutil

    def alive(pid: int) -> bool:
        return psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"

    require_device_parts(1)
    genome_case(tmp_path, seed=6, size=60_000, read_length=50, n_reads=60_000)
    two_hosts = two_hosts_script(monkeypatch)
    a, b = two_hosts.A, two_hosts.B
    ns_a, ns_b = two_hosts.make_hosts(str(os.getpid() % 100000))
    env = {**os.environ, "DMAP_STATE_DIR": str(tmp_path / "state")}

    def dmap_on_a(*args, timeout=300):
        return subprocess.run(two_hosts.in_ns(ns_a, sys.executable, "-m", "dmap.cli", *map(str, args)),
                              capture_output=True, text=True, timeout=timeout, env=env)

    def cluster_file(name: str, remote: str) -> Path:
        path = tmp_path / name
        path.write_text(f"scheduler:\n  address: tcp://{a}:8786\n  dashboard: null\nworkers:\n"
                        f"  - {{device: all, threads: 1}}\n  - {{host: {b}, device: all, threads: 1, {remote}}}\n")
        return path

    try:
        with ssh_host(two_hosts, ns_b, b, tmp_path / "ssh") as (ssh, server):
            bad = dmap_on_a("cluster", "up", cluster_file("bad.yaml", f"ssh: {ssh}, python: /nonexistent/python"))
            assert bad.returncode == 1, bad.stderr
            lines = bad.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"dmap: error: host {b}: ") and "nonexistent" in lines[0]
            cfg = cluster_file("cluster.yaml", f"ssh: {ssh}")
            up = dmap_on_a("cluster", "up", cfg)  # on the port the failed start let go of
            assert up.returncode == 0, up.stderr
            assert f"workers    1 on {b}" in up.stdout, up.stdout
            state = json.loads(next((tmp_path / "state").glob("cluster-*/state.json")).read_text())
            started = state["pids"] + state["remote"][0]["pids"]
            try:
                run = dmap_on_a("run", tmp_path / "idx", tmp_path / "r.fq", "-o", tmp_path / "two.sam",
                                "--cluster", cfg)
                assert run.returncode == 0, run.stderr
                assert "60000 reads, 60000 mapped" in run.stderr and "on 2 worker(s)" in run.stderr, run.stderr
            finally:
                down = dmap_on_a("cluster", "down", cfg, timeout=120)
            assert down.returncode == 0 and "and 2 workers" in down.stdout, down.stderr
            assert not down.stderr
            assert not [p for p in started if alive(p)]
            # Host B unreachable when the cluster goes down: its worker outlives `down`, not its scheduler.
            assert dmap_on_a("cluster", "up", cfg).returncode == 0
            state = json.loads(next((tmp_path / "state").glob("cluster-*/state.json")).read_text())
            server.terminate()
            server.wait(timeout=30)
            down = dmap_on_a("cluster", "down", cfg, timeout=120)
            assert down.returncode == 0 and not [p for p in state["pids"] if alive(p)], down.stderr
            warning = down.stderr.strip().splitlines()
            assert len(warning) == 1 and warning[0].startswith(f"dmap: warning: host {b}: "), down.stderr
            deadline = time.time() + 120
            while [p for p in state["remote"][0]["pids"] if alive(p)] and time.time() < deadline:
                time.sleep(0.5)
            assert not [p for p in state["remote"][0]["pids"] if alive(p)]
    finally:
        two_hosts.remove_hosts(ns_a, ns_b)
    local = subprocess.run([sys.executable, "-m", "dmap.cli", "run", tmp_path / "idx", tmp_path / "r.fq", "-o",
                            tmp_path / "local.sam"], capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr

    def body(p):
        return [line for line in open(p) if not line.startswith("@PG")]

    assert body(tmp_path / "two.sam") == body(tmp_path / "local.sam")
