"""dmap under SLURM: a real ``slurmctld`` and ``slurmd`` (Debian's slurmctld and slurmd
packages) on this machine, as one node of two CPUs. A batch job maps on the cores SLURM
gave it, ``scancel`` stops a job without leaving a partial file or touching the output of
an earlier run, and Dask workers started as jobs by dask-jobqueue, with the options that
``docs/cluster.md`` gives, serve ``dmap run --scheduler``."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from helpers import dmap_cmd, genome_case, stop_processes, without_pg, write_fasta

DAEMONS = ("slurmctld", "slurmd")
CLIENTS = ("sbatch", "scancel", "scontrol", "sinfo", "squeue")


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports that nothing listens on now (held together while they are chosen)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class Slurm:
    """A running one-node SLURM cluster: its configuration's environment and its folder."""

    env: dict[str, str]
    folder: Path

    def command(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(args, env=self.env, capture_output=True, text=True, check=True, timeout=60, **kwargs)

    def submit(self, script: str, *options: str) -> int:
        """A batch job's number; its standard output and error go to ``job-N.out`` and ``job-N.err``."""
        path = self.folder / f"job{time.monotonic_ns()}.sh"
        path.write_text("#!/bin/bash\n" + script)
        out = self.command("sbatch", "--parsable", "-o", str(self.folder / "job-%j.out"),
                           "-e", str(self.folder / "job-%j.err"), *options, str(path)).stdout
        return int(out.strip().split(";")[0])

    def state(self, job: int) -> str:
        line = self.command("scontrol", "-o", "show", "job", str(job)).stdout
        return re.search(r"JobState=(\S+)", line).group(1)

    def wait(self, job: int, timeout: float = 120) -> str:
        """The job's final state, once it has ended."""
        deadline = time.monotonic() + timeout
        while (state := self.state(job)) in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            assert time.monotonic() < deadline, f"job {job} still {state}"
            time.sleep(0.2)
        return state

    def output(self, job: int) -> tuple[str, str]:
        return ((self.folder / f"job-{job}.out").read_text(), (self.folder / f"job-{job}.err").read_text())


def slurm_conf(folder: Path, host: str, tracking: str) -> str:
    """The configuration of a one-node cluster.  auth/none: no munge daemon to run;
    config_overrides: the node may claim two CPUs on any machine.  ``tracking``:
    ``pgid``, SLURM's simplest (a job is pinned to the CPUs it was given by task/affinity), or
    ``cgroup``, as most clusters run it: each job in control groups (cgroup.conf) that hold
    its processes, its CPUs and, memory being a consumable resource, its ``--mem``."""
    controller, node = free_ports(2)
    cgroups = tracking == "cgroup"
    return f"""\
ClusterName=dmaptest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
SlurmctldPort={controller}
SlurmdPort={node}
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/{tracking}
TaskPlugin={"task/cgroup,task/affinity" if cgroups else "task/affinity"}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters={"CR_Core_Memory" if cgroups else "CR_Core"}
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
KillWait=30
NodeName=dmapnode NodeAddr=127.0.0.1 CPUs=2 RealMemory=8000 State=UNKNOWN
PartitionName=test Nodes=dmapnode Default=YES MaxTime=INFINITE State=UP
"""


# cgroup.conf for tracking by control groups: a job's cores and memory are its groups' limits.
CGROUP_CONF = """\
CgroupPlugin=autodetect
ConstrainCores=yes
ConstrainRAMSpace=yes
"""


def cgroups_usable() -> bool:
    """Whether slurmd can make control groups here: cgroup v1's freezer, cpuset and memory
    hierarchies, or cgroup v2 with the memory and cpuset controllers, mounted writable."""
    v1 = [Path("/sys/fs/cgroup", c) for c in ("freezer", "cpuset", "memory")]
    if all(os.access(d / "cgroup.procs", os.W_OK) for d in v1):
        return True
    controllers = Path("/sys/fs/cgroup/cgroup.controllers")
    return (controllers.exists() and {"memory", "cpuset"} <= set(controllers.read_text().split())
            and os.access(controllers.parent / "cgroup.subtree_control", os.W_OK))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory, request):
    """A one-node SLURM cluster that tracks jobs by process group, or by control group where a
    test asks for ``cgroup`` (``@pytest.mark.parametrize("slurm", [...], indirect=True)``)."""
    tracking = getattr(request, "param", "pgid")
    if os.geteuid() != 0 or not all(shutil.which(t) for t in DAEMONS + CLIENTS):
        pytest.skip("needs root and SLURM (Debian's slurmctld, slurmd and slurm-client)")
    if tracking == "cgroup" and not cgroups_usable():
        pytest.skip("needs control groups that slurmd can make (cgroup v1 or v2, mounted writable)")
    folder = tmp_path_factory.mktemp(f"slurm-{tracking}")
    (folder / "state").mkdir()
    (folder / "spool").mkdir()
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, socket.gethostname().split(".")[0], tracking))
    (folder / "cgroup.conf").write_text(CGROUP_CONF)  # read beside slurm.conf
    # PoCL's thread counts as dmap sets them for a pinned process are left to each job's own dmap
    env = {k: v for k, v in os.environ.items() if k not in ("POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_NUM")}
    env["SLURM_CONF"] = str(conf)
    daemons = [subprocess.Popen(["slurmctld", "-D", "-i"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True),
               subprocess.Popen(["slurmd", "-D", "-N", "dmapnode"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)]
    cluster = Slurm(env, folder)
    try:
        deadline = time.monotonic() + 60
        while True:  # the node has registered and takes jobs
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True)
            if r.stdout.strip() == "idle":
                break
            if time.monotonic() > deadline or any(d.poll() is not None for d in daemons):
                pytest.fail("SLURM did not start: " + "".join(
                    (folder / log).read_text()[-2000:] for log in ("slurmctld.log", "slurmd.log")
                    if (folder / log).exists()))
            time.sleep(0.2)
        yield cluster
    finally:
        # Jobs end before the daemons: a job's slurmstepd outlives a slurmctld that is gone,
        # retrying to report the job's end.
        subprocess.run(["scancel", "--full", "--partition", "test"], env=env, capture_output=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and subprocess.run(
                ["squeue", "-h", "--partition", "test"], env=env, capture_output=True, text=True).stdout.strip():
            time.sleep(0.2)
        stop_processes(daemons)
        if tracking == "cgroup":
            remove_node_groups()


def remove_node_groups() -> None:
    """Remove the control groups slurmd made for the node (``slurm_dmapnode`` in each
    hierarchy of cgroup v1, or at v2's root), empty once its jobs have ended; deepest first, as
    rmdir needs."""
    cgroups = Path("/sys/fs/cgroup")
    for top in [*cgroups.glob("slurm_dmapnode"), *cgroups.glob("*/slurm_dmapnode")]:
        for folder in sorted((d for d in top.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)) + [top]:
            with contextlib.suppress(OSError):
                folder.rmdir()


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """An index, 100,000 reads and the SAM that a plain ``dmap run`` writes of them."""
    folder = tmp_path_factory.mktemp("case")
    genome_case(folder, seed=7, size=50_000, read_length=60, n_reads=100_000)
    r = dmap_cmd("run", folder / "idx", folder / "r.fq", "-o", folder / "plain.sam")
    assert r.returncode == 0, r.stderr
    return folder


def dmap_line(*args) -> str:
    """A shell line that runs this Python's dmap."""
    return " ".join([sys.executable, "-m", "dmap", *map(str, args)])


@pytest.mark.parametrize("slurm", ["pgid", "cgroup"], indirect=True)
def test_a_batch_job_maps_on_the_cores_slurm_gave_it(slurm, case, tmp_path):
    run = dmap_line("run", case / "idx", case / "r.fq", "-o", tmp_path / "o.sam")
    job = slurm.submit(f"{dmap_line('devices')}\n{run}\n", "--cpus-per-task=1")
    state = slurm.wait(job)
    out, err = slurm.output(job)
    assert state == "COMPLETED", err
    assert " 1 compute units" in out  # PoCL's threads held to the job's one CPU, not the node's two
    assert without_pg((tmp_path / "o.sam").read_bytes()) == without_pg((case / "plain.sam").read_bytes())


def test_a_failing_job_ends_failed_with_one_line(slurm, case, tmp_path):
    job = slurm.submit(dmap_line("run", case / "idx", tmp_path / "missing.fq", "-o", tmp_path / "o.sam") + "\n")
    assert slurm.wait(job) == "FAILED"
    assert slurm.output(job)[1] == f"dmap: error: reads file '{tmp_path / 'missing.fq'}' does not exist\n"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("slurm", ["cgroup"], indirect=True)
def test_an_index_too_large_for_the_jobs_memory_is_refused_in_one_line(slurm, tmp_path):
    """Under ``--mem`` the kernel kills a job that allocates past it, with no word from the job.
    SLURM sets the limit on the job's control group, above the process's own, where psutil and
    Dask do not look: dmap index read the machine's 24 GB as available, began a 20 Mbp block
    (about 320 MB) under --mem=250M and was killed (OUT_OF_MEMORY, its partial folder left).
    dmap reads the job's limit (dmap.host) and refuses the block before sorting, in one line.
    The limit here leaves room for the build's fixed part (the interpreter and its imports,
    the reference's arrays, freed memory the allocator keeps: 120-200 MB at 20 Mbp), which the
    check does not model and which a block of the proposed length would not fit beside in 250 MB."""
    rng = np.random.default_rng(3)
    write_fasta(tmp_path / "ref.fa", [("r", np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, 40_000_000)]
                                       .tobytes().decode())])
    index = tmp_path / "ref.dmap"
    job = slurm.submit(f"exec {dmap_line('index', tmp_path / 'ref.fa', '-o', index)}\n", "--mem=600M")
    state = slurm.wait(job)
    err = slurm.output(job)[1]
    assert state == "FAILED", err
    line = re.fullmatch(r"dmap: error: building a block of 40000000 symbols needs about 610.4 MiB of memory, "
                        r"but (\d+\.\d) MiB is available \(the memory limit of control group (\S+)\); "
                        r"pass a smaller --block-length, e\.g\. (\d+)\n", err)
    assert line, err
    assert float(line[1]) < 600 and re.search(rf"/job_{job}(/|$)", line[2])
    assert os.listdir(tmp_path) == ["ref.fa"]
    # The block it proposes is built within the limit.
    job = slurm.submit(f"exec {dmap_line('index', tmp_path / 'ref.fa', '-o', index, '--block-length', line[3])}\n",
                       "--mem=600M")
    assert slurm.wait(job, timeout=300) == "COMPLETED", slurm.output(job)[1]


def scancel_mid_run(slurm: Slurm, case: Path, folder: Path, launch: str) -> tuple[Path, str]:
    """``scancel`` a job that maps reads from a FIFO into ``o.sam``, which holds an earlier
    run's output, while the test keeps the FIFO open: the job is in its middle.  The job's
    script runs dmap as ``launch`` says; returns the output and the job's standard error."""
    out = folder / "o.sam"
    shutil.copy(case / "plain.sam", out)
    fifo = folder / "reads.fifo"
    os.mkfifo(fifo)
    job = slurm.submit(f"{launch} {dmap_line('run', case / 'idx', fifo, '-o', out)}\n")
    with open(fifo, "wb") as reads:  # opens once the job's dmap opens the other end
        reads.write((case / "r.fq").read_bytes())  # more than one 4 MB piece: the first chunks are written
        reads.flush()
        deadline = time.monotonic() + 120
        while not any(".partial-" in name for name in os.listdir(folder)):
            assert time.monotonic() < deadline and slurm.state(job) == "RUNNING"
            time.sleep(0.05)
        slurm.command("scancel", str(job))
        assert slurm.wait(job) == "CANCELLED"
    return out, slurm.output(job)[1]


@pytest.mark.parametrize("slurm", ["pgid", "cgroup"], indirect=True)
def test_scancel_leaves_no_partial_file_and_the_earlier_output(slurm, case, tmp_path):
    """``scancel`` sends SIGTERM to every process of the job.  The script ``exec``s dmap, as
    docs/cluster.md says to: SLURM kills what is left of a job once its script has ended,
    and a shell ends at SIGTERM at once, which leaves dmap a few milliseconds instead of
    the ``KillWait`` seconds."""
    out, err = scancel_mid_run(slurm, case, tmp_path, "exec")
    assert err.splitlines()[-1] == "dmap: stopped by SIGTERM; no partial output file was left", err
    assert sorted(os.listdir(tmp_path)) == ["o.sam", "reads.fifo"]
    assert out.read_bytes() == (case / "plain.sam").read_bytes()


def test_scancel_of_a_job_step_keeps_the_earlier_output(slurm, case, tmp_path):
    """dmap as a job step (``srun dmap run ...``): ``srun`` answers its own SIGTERM by
    sending SIGKILL to the step, so dmap may be killed before it removes its partial file
    or says so (docs/cluster.md); the earlier output stays whatever the timing."""
    out, err = scancel_mid_run(slurm, case, tmp_path, "srun")
    assert "srun: forcing job termination" in err
    assert out.read_bytes() == (case / "plain.sam").read_bytes()


def test_dask_jobqueue_workers_serve_dmap_run(slurm, case, tmp_path, monkeypatch):
    """docs/cluster.md's SLURMCluster (without its GPU request and with less memory, to fit
    this node): two workers, each a job, and the client's run equals a plain one."""
    dask_jobqueue = pytest.importorskip("dask_jobqueue")
    from distributed import Client

    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    cluster = dask_jobqueue.SLURMCluster(
        cores=1, processes=1, memory="2GB", walltime="00:10:00", log_directory=str(tmp_path / "logs"),
        worker_extra_args=["--resources", "opencl=1", "--preload", "dmap.cluster.worker", "--dmap-device", "0:0"],
    )
    try:
        cluster.scale(jobs=2)
        with Client(cluster) as client:
            client.wait_for_workers(2, timeout=120)
            r = dmap_cmd("run", "--scheduler", cluster.scheduler_address, case / "idx", case / "r.fq",
                         "-o", tmp_path / "o.sam", "--chunk-size", "10000")
            assert r.returncode == 0, r.stderr
            assert len(client.scheduler_info()["workers"]) == 2
        queued = slurm.command("squeue", "-h", "-o", "%j %T").stdout.split("\n")
        assert queued.count("dask-worker RUNNING") == 2
    finally:
        cluster.close()
    assert without_pg((tmp_path / "o.sam").read_bytes()) == without_pg((case / "plain.sam").read_bytes())
