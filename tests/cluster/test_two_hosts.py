"""Two hosts as two network namespaces (benchmarks/two_hosts.py): the SAM
equals a local run's and both hosts' workers take part."""

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import genome_case, require_device_parts

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "two_hosts.py"


def can_make_namespaces() -> bool:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    r = subprocess.run(["ip", "netns", "add", "dmapprobe"], capture_output=True)
    subprocess.run(["ip", "netns", "del", "dmapprobe"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not can_make_namespaces(), reason="needs root and ip netns")
def test_two_hosts(tmp_path, monkeypatch):
    require_device_parts(2)
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # the script imports its neighbours, as when run there
    genome_case(tmp_path, seed=4, size=100_000, read_length=50, n_reads=200_000)
    spec = importlib.util.spec_from_file_location("two_hosts", SCRIPT)
    two_hosts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(two_hosts)
    result = two_hosts.main([str(tmp_path / "idx"), str(tmp_path / "r.fq"), "--repeat", "1"])
    assert result["same_sam_as_local"]
    assert result["workers_with_work"] == 2
    assert set(result["cpu_seconds"]) == {"client", "scheduler", "worker on 10.77.0.1", "worker on 10.77.0.2"}
