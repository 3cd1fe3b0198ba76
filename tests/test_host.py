"""The cores and memory a process may use (dmap.host), read from control-group trees laid
out as cgroup v1 and v2 lay them out, in a temporary folder; real ones: SLURM's in
tests/cluster/test_slurm.py, a CPU quota in tests/opencl/test_discovery.py."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from dmap.host import (
    GroupMemory,
    MemoryBudget,
    allowed_cores,
    cpu_quota,
    format_bytes,
    memory_budget,
    memory_groups,
)

MiB = 1 << 20
NO_LIMIT_V1 = 9223372036854771712


def group(folder: Path, limit: int | str, usage: int, inactive: int, v2: bool) -> None:
    """Write one group's files as the kernel shows them."""
    folder.mkdir(parents=True, exist_ok=True)
    if v2:
        (folder / "memory.max").write_text(f"{limit}\n")
        (folder / "memory.current").write_text(f"{usage}\n")
        (folder / "memory.stat").write_text(f"anon {usage - inactive}\nfile {inactive}\ninactive_file {inactive}\n")
    else:
        (folder / "memory.limit_in_bytes").write_text(f"{limit}\n")
        (folder / "memory.usage_in_bytes").write_text(f"{usage}\n")
        (folder / "memory.stat").write_text(f"cache {inactive}\ninactive_file {inactive // 2}\n"
                                            f"total_cache {inactive}\ntotal_inactive_file {inactive}\n")


def proc_files(tmp_path: Path, cgroup: str, mounts: list[str]) -> tuple[Path, Path]:
    """/proc/self/cgroup and /proc/self/mountinfo as a process in ``cgroup`` sees them."""
    (tmp_path / "cgroup").write_text(cgroup)
    (tmp_path / "mountinfo").write_text("".join(line + "\n" for line in mounts))
    return tmp_path / "cgroup", tmp_path / "mountinfo"


def v1_mounts(root: Path, memory_root: str = "/") -> list[str]:
    return [
        "23 1 0:21 / /proc rw,relatime - proc proc rw",
        f"31 23 0:28 / {root} rw,relatime - tmpfs tmpfs rw,mode=755",
        f"34 31 0:31 / {root}/cpuset rw,relatime - cgroup cgroup rw,cpuset",
        f"35 31 0:32 {memory_root} {root}/memory rw,relatime - cgroup cgroup rw,memory",
        f"41 31 0:38 / {root}/unified rw,relatime - cgroup2 cgroup2 rw",
    ]


def test_a_slurm_jobs_limit_above_the_process_own_group_bounds_it(tmp_path):
    """task/cgroup (cgroup v1) sets the limit on the job's and the step's groups; the task's own
    group, where the process is, has none: that is all Dask and psutil see."""
    memory = tmp_path / "cg" / "memory"
    group(memory, NO_LIMIT_V1, 9000 * MiB, 1000 * MiB, v2=False)
    group(memory / "slurm", NO_LIMIT_V1, 600 * MiB, 0, v2=False)
    group(memory / "slurm/uid_0", NO_LIMIT_V1, 600 * MiB, 0, v2=False)
    group(memory / "slurm/uid_0/job_2", 1000 * MiB, 600 * MiB, 200 * MiB, v2=False)
    group(memory / "slurm/uid_0/job_2/step_batch", 1000 * MiB, 590 * MiB, 100 * MiB, v2=False)
    group(memory / "slurm/uid_0/job_2/step_batch/task_0", NO_LIMIT_V1, 580 * MiB, 100 * MiB, v2=False)
    files = proc_files(tmp_path, "9:cpuset:/slurm/uid_0/job_2/step_batch\n"
                                 "4:memory:/slurm/uid_0/job_2/step_batch/task_0\n0::/\n", v1_mounts(tmp_path / "cg"))
    assert memory_groups(*files) == [
        GroupMemory("/slurm/uid_0/job_2/step_batch", 1000 * MiB, 490 * MiB),
        GroupMemory("/slurm/uid_0/job_2", 1000 * MiB, 400 * MiB),
    ]
    budget = memory_budget(*files)
    assert budget == MemoryBudget(1000 * MiB, 510 * MiB, "control group /slurm/uid_0/job_2/step_batch")
    assert budget.describe_available() == (
        "510.0 MiB is available (the memory limit of control group /slurm/uid_0/job_2/step_batch)")


def test_cgroup_v2_limits_up_to_the_mount(tmp_path):
    """cgroup v2 ("0::PATH"): memory.max is "max" where there is no limit; the tighter of the
    limits on the way up binds, by what is left under it."""
    root = tmp_path / "cg2"
    group(root / "user.slice", 2048 * MiB, 1800 * MiB, 300 * MiB, v2=True)
    group(root / "user.slice/run.scope", "max", 1700 * MiB, 300 * MiB, v2=True)
    (root / "memory.stat").write_text("anon 1\n")  # the root group has no memory.max
    files = proc_files(tmp_path, "0::/user.slice/run.scope\n",
                       [f"30 1 0:26 / {root} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"])
    assert memory_groups(*files) == [GroupMemory("/user.slice", 2048 * MiB, 1500 * MiB)]
    budget = memory_budget(*files)
    assert (budget.total, budget.available, budget.bound) == (2048 * MiB, 548 * MiB, "control group /user.slice")


def test_a_containers_own_group_at_the_mounts_root(tmp_path):
    """A container with its own cgroup namespace sees its group as "/", at the mount point; one
    without sees the host's path, and the mount shows that group as its root."""
    root = tmp_path / "cg2"
    group(root, 4096 * MiB, 1024 * MiB, 0, v2=True)
    files = proc_files(tmp_path, "0::/\n", [f"30 1 0:26 / {root} rw - cgroup2 cgroup2 rw"])
    assert memory_groups(*files) == [GroupMemory("/", 4096 * MiB, 1024 * MiB)]
    files = proc_files(tmp_path, "0::/docker/abc\n", [f"30 1 0:26 /docker/abc {root} rw - cgroup2 cgroup2 rw"])
    assert memory_groups(*files) == [GroupMemory("/docker/abc", 4096 * MiB, 1024 * MiB)]
    # A group outside what the mount shows cannot be read: nothing is guessed.
    files = proc_files(tmp_path, "0::/other\n", [f"30 1 0:26 /docker/abc {root} rw - cgroup2 cgroup2 rw"])
    assert memory_groups(*files) == []


def test_mount_points_with_spaces(tmp_path):
    """mountinfo writes a space in a path as \\040."""
    memory = tmp_path / "c g" / "memory"
    group(memory / "job", 100 * MiB, 10 * MiB, 0, v2=False)
    mounts = [line.replace(str(tmp_path / "c g"), str(tmp_path).replace(" ", "\\040") + "/c\\040g")
              for line in v1_mounts(tmp_path / "c g")]
    files = proc_files(tmp_path, "4:memory:/job\n", mounts)
    assert memory_groups(*files) == [GroupMemory("/job", 100 * MiB, 10 * MiB)]


def test_no_limits_or_no_cgroups_give_the_machines_memory(tmp_path):
    memory = tmp_path / "cg" / "memory"
    group(memory / "user", NO_LIMIT_V1, 10 * MiB, 0, v2=False)
    files = proc_files(tmp_path, "4:memory:/user\n", v1_mounts(tmp_path / "cg"))
    assert memory_groups(*files) == []
    assert memory_groups(tmp_path / "missing", tmp_path / "missing") == []
    budget = memory_budget(tmp_path / "missing", tmp_path / "missing")
    assert budget.total == psutil.virtual_memory().total and budget.bound is None
    assert budget.describe_available().endswith("B is available")


def test_format_bytes():
    assert [format_bytes(n) for n in (0, 1023, 1024, 1536 * MiB, 3 << 40)] == [
        "0 bytes", "1023 bytes", "1.0 KiB", "1.5 GiB", "3072.0 GiB"]


def test_allowed_cores_are_the_affinity_and_none_where_every_core_is(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))
    none = tmp_path / "missing", tmp_path / "missing"
    assert allowed_cores(*none) == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert allowed_cores(*none) is None


def test_a_cpu_quota_bounds_the_cores(tmp_path, monkeypatch):
    """Kubernetes' CPU limit and ``docker --cpus`` give a quota of CPU time on every core: 2.5
    CPUs are 3 cores' worth of threads; the tightest quota on the way up binds, and "max" (v2)
    or -1 (v1) is none."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    root = tmp_path / "cg2"
    (root / "kubepods/pod1/c1").mkdir(parents=True)
    (root / "kubepods/cpu.max").write_text("max 100000\n")
    (root / "kubepods/pod1/cpu.max").write_text("250000 100000\n")
    (root / "kubepods/pod1/c1/cpu.max").write_text("max 100000\n")
    files = proc_files(tmp_path, "0::/kubepods/pod1/c1\n", [f"30 1 0:26 / {root} rw - cgroup2 cgroup2 rw"])
    assert cpu_quota(*files) == 2.5 and allowed_cores(*files) == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(2)))
    assert allowed_cores(*files) == 2  # the affinity is tighter
    # cgroup v1: cpu.cfs_quota_us over cpu.cfs_period_us, in the cpu hierarchy (mounted with cpuacct here)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    cpu = tmp_path / "cg" / "cpu,cpuacct"
    for folder, quota in ((cpu / "docker", -1), (cpu / "docker/abc", 50000)):
        folder.mkdir(parents=True)
        (folder / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        (folder / "cpu.cfs_period_us").write_text("100000\n")
    files = proc_files(tmp_path, "3:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n",
                       [f"33 31 0:30 / {cpu} rw - cgroup cgroup rw,cpu,cpuacct"])
    assert cpu_quota(*files) == 0.5 and allowed_cores(*files) == 1
    assert cpu_quota(tmp_path / "missing", tmp_path / "missing") is None
