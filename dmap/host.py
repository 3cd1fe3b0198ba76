"""What this host gives this process: its cores and its memory, the machine's bounded by
the process's CPU affinity and by the limits of the control groups it runs in; and host
arrays recycled between chunks (:class:`RecycledArrays`).

SLURM (``task/cgroup`` with ``ConstrainRAMSpace``), Kubernetes, systemd and container
runtimes bound a job's memory with a control group, and the kernel kills a job that
allocates past it (SIGKILL: no line from dmap, and whatever it was writing is left
half-done).  ``psutil`` reports the machine's memory, and Dask reads the limit only at the
root of the cgroup mount: right inside a container with its own cgroup namespace, but not
under SLURM, which sets the limit on the job's group (``.../job_N``) a level or two above
the process's own (``.../job_N/step_batch/task_0``).  A job given 250 MB of a 24 GB node
saw 23 GB available, and ``dmap index`` started a build that the kernel killed
(``tests/cluster/test_slurm.py``).  So dmap reads the limit of every group from the
process's own up to the mount's root, for cgroup v1 and v2 alike.

A group's memory in use is counted as the kernel charges it, less its inactive page cache
(``inactive_file``), which the kernel reclaims before it kills: the "working set" of
Kubernetes and of ``docker stats``.

Cores are bounded the same two ways: SLURM and ``taskset`` pin a process to some cores (its
affinity), while Kubernetes' CPU limits and ``docker --cpus`` give it a quota of CPU time
per period (``cpu.max``, ``cpu.cfs_quota_us``) on every core of the node.  PoCL starts a
kernel thread per core it is told of: 64 threads under a quota of 2 CPUs spend most of
each period throttled.
"""

from __future__ import annotations

import math
import os
import resource
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# A v1 group without a limit reports the largest page-aligned value that fits an int64
# (9223372036854771712); anything from 2**62 on means no limit.
_NO_LIMIT = 1 << 62


@dataclass(frozen=True)
class GroupMemory:
    """The memory limit of one control group and what it holds now, in bytes."""

    path: str
    limit: int
    used: int  # charged to the group, less its inactive page cache

    @property
    def available(self) -> int:
        return max(self.limit - self.used, 0)


@dataclass(frozen=True)
class MemoryBudget:
    """The memory this process may use, in bytes: ``total`` at most, ``available`` now (page
    cache counts as available), and the limit that binds ``available``, if not the machine's
    (e.g. 'control group /slurm/uid_0/job_2')."""

    total: int
    available: int
    bound: str | None = None

    def describe_available(self) -> str:
        """E.g. '150.0 MiB is available (the memory limit of control group /slurm/uid_0/job_2)'."""
        where = f" (the memory limit of {self.bound})" if self.bound else ""
        return f"{format_bytes(self.available)} is available{where}"


def memory_budget(proc_cgroup: str | os.PathLike = "/proc/self/cgroup",
                  mountinfo: str | os.PathLike = "/proc/self/mountinfo") -> MemoryBudget:
    """This process's memory: the machine's, bounded by each limited control group it is in
    and, as Dask has it, by a hard ``RLIMIT_RSS`` (which Linux does not enforce, but which
    says how much the process is meant to use).

    ``proc_cgroup`` and ``mountinfo``: the files that say which groups the process is in and
    where their hierarchies are mounted (tests give others).
    """
    import psutil  # here: `dmap --help` and the device listing that imports this module need no psutil

    machine = psutil.virtual_memory()
    total, available, bound = int(machine.total), int(machine.available), None
    for g in memory_groups(proc_cgroup, mountinfo):
        total = min(total, g.limit)
        if g.available < available:
            available, bound = g.available, f"control group {g.path}"
    rss = resource.getrlimit(resource.RLIMIT_RSS)[1]  # RLIM_INFINITY: -1
    if 0 < rss < total:
        total = rss
        if rss < available:
            available, bound = rss, "RLIMIT_RSS"
    return MemoryBudget(total, available, bound)


def memory_groups(proc_cgroup: str | os.PathLike = "/proc/self/cgroup",
                   mountinfo: str | os.PathLike = "/proc/self/mountinfo") -> list[GroupMemory]:
    """The memory-limited control groups this process is in: its own and every one above it up
    to its hierarchy's mount, in cgroup v1's memory hierarchy and in cgroup v2's.  Empty where
    there are none, or where they cannot be read (not Linux, no cgroup file system mounted)."""
    return [g for name, folder, v2 in group_folders("memory", proc_cgroup, mountinfo)
            if (g := _group_memory(folder, v2, name)) is not None]


def cpu_quota(proc_cgroup: str | os.PathLike = "/proc/self/cgroup",
              mountinfo: str | os.PathLike = "/proc/self/mountinfo") -> float | None:
    """The CPUs' worth of time per period that this process's control groups allow it (the
    tightest quota over periods, from its own group up to its hierarchy's mount), or None
    where no group sets a quota."""
    quotas = []
    for _, folder, v2 in group_folders("cpu", proc_cgroup, mountinfo):
        try:
            if v2:
                quota, period = (folder / "cpu.max").read_text().split()
            else:
                quota, period = ((folder / name).read_text() for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us"))
            if quota.strip() not in ("max", "-1") and int(period) > 0:
                quotas.append(int(quota) / int(period))
        except (OSError, ValueError):
            continue
    return min(quotas, default=None)


def allowed_cores(proc_cgroup: str | os.PathLike = "/proc/self/cgroup",
                  mountinfo: str | os.PathLike = "/proc/self/mountinfo") -> int | None:
    """The cores this process may keep busy, or None where that is every core of the machine:
    its CPU affinity (which SLURM, ``taskset`` and a container's cpuset restrict), and no more
    than its control groups' CPU quota, rounded up (Kubernetes' CPU limits, ``docker --cpus``).

    PoCL's CPU device otherwise starts a thread per core of the machine: a job given
    4 cores of a 64-core node would run 64 kernel threads on them.
    """
    machine = os.cpu_count() or 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = machine
    quota = cpu_quota(proc_cgroup, mountinfo)
    if quota is not None:
        cores = max(1, min(cores, math.ceil(quota)))
    return cores if cores < machine else None


def group_folders(controller: str, proc_cgroup: str | os.PathLike,
            mountinfo: str | os.PathLike) -> Iterator[tuple[str, Path, bool]]:
    """The control groups this process is in for ``controller`` ("memory", "cpu"): for its cgroup
    v1 hierarchy and for cgroup v2's unified one, its own group and every one above it up to
    the hierarchy's mount, each as (its path in the hierarchy, its folder, whether v2)."""
    try:
        memberships = Path(proc_cgroup).read_text().splitlines()
        mounts = Path(mountinfo).read_text().splitlines()
    except OSError:
        return
    for line in memberships:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        v2 = hierarchy == "0" and controllers == ""
        if not (v2 or controller in controllers.split(",")):
            continue
        mount = _mount_of(mounts, controller, v2)
        if mount is None:
            continue
        mount_point, root = mount
        path, root = path.rstrip("/"), root.rstrip("/")
        if not (path + "/").startswith(root + "/"):
            continue  # the group lies outside what is mounted here (another namespace's view)
        while True:  # from the process's own group up to the mount's root
            yield path or "/", Path(mount_point + path[len(root):]), v2
            if len(path) <= len(root):
                break
            path = path.rsplit("/", 1)[0]


def _mount_of(mounts: list[str], controller: str, v2: bool) -> tuple[str, str] | None:
    """Where ``controller``'s hierarchy (cgroup v1) or the unified one (v2) is mounted, and which
    of its groups the mount shows as its root, from /proc/self/mountinfo's lines."""
    for line in mounts:
        fields, _, after = line.partition(" - ")
        fields, after = fields.split(), after.split()
        if len(fields) < 5 or len(after) < 3:
            continue
        fstype, options = after[0], after[2].split(",")
        if (fstype == "cgroup2") if v2 else (fstype == "cgroup" and controller in options):
            return _unescape(fields[4]), _unescape(fields[3])
    return None


def _unescape(field: str) -> str:
    """A mountinfo path field: spaces, tabs, newlines and backslashes are octal escapes there."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _group_memory(folder: Path, v2: bool, name: str) -> GroupMemory | None:
    """One group's limit and use, or None where it has no limit (or its files cannot be read)."""
    limit_file, usage_file, inactive = (("memory.max", "memory.current", "inactive_file") if v2 else
                                        ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"))
    try:
        text = (folder / limit_file).read_text().strip()
        if text == "max" or int(text) >= _NO_LIMIT:
            return None
        limit = int(text)
        usage = int((folder / usage_file).read_text())
        stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines() if " " in line)
    except (OSError, ValueError):
        return None
    return GroupMemory(name, limit, max(usage - int(stat.get(inactive, 0)), 0))


def format_bytes(n: int) -> str:
    """``n`` bytes in the largest binary unit it fills, e.g. '1.5 GiB'."""
    unit = next(u for u in (3, 2, 1, 0) if n >= 1024**u or u == 0)
    return f"{n} bytes" if unit == 0 else f"{n / 1024**unit:.1f} {('KiB', 'MiB', 'GiB')[unit - 1]}"


# The smallest base of RecycledArrays: address space (untouched pages cost no memory) enough for
# the records of a chunk of the largest exact-mapping size (200,000 reads of 100 bp, 60 MB).
MIN_BASE = 64 << 20


class RecycledArrays:
    """Host arrays handed out for good, whose memory is handed out again once nothing refers to them.

    A chunk's SAM records leave the task that formats them (the writer, a part file or the
    client takes them), so they cannot come from a scratch pool that the task's end takes
    back. Made afresh, each chunk's records are fresh pages that the OS kernel zeroes on
    first touch: under ``perf record``, zeroing the records' pages took more CPU than the
    records kernel itself (7.8% of a 1M-read exact run against 5.6%). Here each array is a
    view of a base array kept in the pool, and a base is free again when its reference
    count shows that the pool alone holds it (numpy's views refer to their base, however
    deep).

    A take gets the free base whose pages are already touched for most of it (its earlier
    takes' largest size), so the small first chunks' bases serve the larger ones after them:
    bases are at least ``min_base`` bytes of address space, of which only the pages written
    cost memory.  A 1M-read exact run made 3 bases instead of 6 and peaked at 360 MB
    instead of 391 MB (``benchmarks/ab_packages.py``, docs/performance.md "Recycled
    records").  A base that :meth:`take` has not handed out in the last
    :data:`RECYCLE_TAKES` takes is let go, so the pool follows the chunk sizes of the work
    and a standing worker does not keep an earlier run's arrays.
    """

    # A base's references while it is free: the pool's entry, and getrefcount's argument.
    _FREE = 2

    def __init__(self, min_base: int = MIN_BASE):
        # [base array, the take that last handed it out, the most bytes any take handed out of it]
        self._entries: list[list] = []
        self._takes = 0
        self._lock = threading.Lock()
        self.min_base = min_base
        self.made = 0  # bases made, for tests

    def take(self, nbytes: int) -> np.ndarray:
        """A uint8 array of ``nbytes``, its contents undefined."""
        with self._lock:
            self._takes += 1
            free = [e for e in self._entries if e[0].size >= nbytes and sys.getrefcount(e[0]) == self._FREE]
            # The most pages already touched for these bytes; among those, the smallest base.
            found = max(free, key=lambda e: (min(e[2], nbytes), -e[0].size), default=None)
            if found is None:
                size = max(self.min_base, 1 << (max(nbytes, 1) - 1).bit_length())
                found = [np.empty(size, dtype=np.uint8), 0, 0]
                self._entries.append(found)
                self.made += 1
            found[1] = self._takes
            found[2] = max(found[2], nbytes)
            # Bases in use stay with whoever holds them until they let go; they just leave the pool.
            self._entries = [e for e in self._entries if e[1] > self._takes - RECYCLE_TAKES]
            return found[0][:nbytes]


# Takes after which a base that none of them handed out leaves the pool of RecycledArrays: the
# chunks in flight each hold one (a 1M-read run has a dozen chunks, and the client keeps a few
# in flight), and a base is let go within this many chunks of a run that needs it no longer.
RECYCLE_TAKES = 16
