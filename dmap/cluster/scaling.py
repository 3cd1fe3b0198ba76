"""Throughput over worker configurations: the experiment behind
``benchmarks/scaling.py`` and ``notebooks/02-scaling.ipynb``."""

from __future__ import annotations

import collections
import os
import statistics
import tempfile
import time
from typing import TYPE_CHECKING

from distributed import Client, get_task_stream

from ..mapping.pipeline import map_reads
from ..mapping.tasks import DEVICE_TASKS
from ..opencl.discovery import list_devices
from .client import LocalDeviceCluster

if TYPE_CHECKING:
    from ..index.store import Index


def part_configurations(counts: list[int]) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """Worker device lists: the whole first device, then n equal parts of it for each n.

    Returns the configurations and notes on those the device cannot make.
    """
    device = list_devices()[0]
    parts = min(max(counts), device.max_split)
    configs = [("1 (whole device)", [device.spec])]
    notes = []
    for n in counts:
        if n > parts:
            notes.append(f"{n} workers: {device.spec} splits into at most {device.max_split} parts")
            continue
        configs.append((str(n), [device.spec if parts == 1 else f"{device.spec}/{parts}:{k}" for k in range(n)]))
    return configs, notes


def measure_workers(index: str | os.PathLike | Index, reads: str | os.PathLike,
                    configs: list[tuple[str, list[str]]], repeat: int = 2, chunk_size: int = 50_000) -> list[dict]:
    """Reads/s of each configuration (a LocalDeviceCluster of worker processes).

    Each result has the label, devices, median reads/s, each worker's share
    of the block tasks, and the spread of the workers' last-task finish times.
    """
    results = []
    for label, specs in configs:
        with LocalDeviceCluster(processes=True, devices=specs) as cluster, Client(cluster) as client, \
                tempfile.TemporaryDirectory() as tmp:
            map_reads(index, reads, client=client, chunk_size=chunk_size, return_hits=False, sam_path=f"{tmp}/w.sam")
            rates, shares, spread = [], {}, 0.0
            for _ in range(repeat):
                with get_task_stream(client) as ts:
                    t = time.perf_counter()
                    res = map_reads(index, reads, client=client, chunk_size=chunk_size, return_hits=False,
                                    sam_path=f"{tmp}/out.sam")
                    rates.append(res.n_reads / (time.perf_counter() - t))
                searches = [task for task in ts.data if str(task["key"]).startswith(DEVICE_TASKS)]
                count = collections.Counter(task["worker"] for task in searches)
                last: dict[str, float] = collections.defaultdict(float)
                for task in searches:
                    last[task["worker"]] = max(last[task["worker"]], task["startstops"][-1]["stop"])
                shares = {w: c / len(searches) for w, c in count.items()}
                spread = max(last.values()) - min(last.values())
        results.append({"workers": label, "devices": specs, "reads_per_s": statistics.median(rates),
                        "shares": shares, "finish_spread_s": spread})
    one = next((r["reads_per_s"] for r in results if r["workers"] == "1"), None)
    for r in results:
        n = len(r["devices"])
        r["efficiency"] = r["reads_per_s"] / one / n if one and not r["workers"].startswith("1 (") else None
    return results
