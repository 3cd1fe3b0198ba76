"""Two hosts as two network namespaces (benchmarks/two_hosts.py): the SAM
equals a local run's and both hosts' workers take part."""

import importlib.util
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import write_fasta, write_fastq

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "two_hosts.py"


def can_make_namespaces() -> bool:
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["ip", "netns", "add", "dmapprobe"], capture_output=True)
    subprocess.run(["ip", "netns", "del", "dmapprobe"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not can_make_namespaces(), reason="needs root and ip netns")
def test_two_hosts(tmp_path):
    from dmap.device import list_devices

    if list_devices()[0].max_split < 2:
        pytest.skip("this device cannot be split into two workers")
    rng = np.random.default_rng(4)
    genome = "".join(rng.choice(list("ACGT"), size=100_000))
    write_fasta(tmp_path / "ref.fa", [("g", genome)])
    subprocess.run(["dmap", "index", tmp_path / "ref.fa", "-o", tmp_path / "idx"], check=True)
    write_fastq(tmp_path / "r.fq", [genome[s : s + 50] for s in rng.integers(0, 99_000, size=200_000)])
    spec = importlib.util.spec_from_file_location("two_hosts", SCRIPT)
    two_hosts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(two_hosts)
    result = two_hosts.main([str(tmp_path / "idx"), str(tmp_path / "r.fq"), "--repeat", "1"])
    assert result["same_sam_as_local"]
    assert result["workers_with_work"] == 2
