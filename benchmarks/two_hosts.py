"""dmap across two hosts: two network namespaces joined by a veth pair (this
machine only), a scheduler and a worker on "host A", a second worker on
"host B", each worker on half of the PoCL device.  Maps READS from host A
and checks that the SAM equals a local run's and that both hosts' workers
did work; reports each process's CPU seconds per run (the client's, the
scheduler's and each worker's, with their children): the workers read
their own splits of READS and write their records into the output, which
both hosts see, and the client only plans and schedules.  Needs root
(ip netns).

    python3 benchmarks/two_hosts.py INDEX READS.fq [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import psutil
from client_cpu import cpu  # this script's directory is on sys.path
from exact_vs_bowtie import stop_processes

A, B = "10.77.0.1", "10.77.0.2"  # test addresses inside namespaces this script creates


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def make_hosts(tag: str) -> tuple[str, str]:
    ns_a, ns_b = f"dmapA{tag}", f"dmapB{tag}"
    sh("ip", "netns", "add", ns_a)
    sh("ip", "netns", "add", ns_b)
    sh("ip", "link", "add", f"va{tag}", "type", "veth", "peer", "name", f"vb{tag}")
    for ns, dev, addr in ((ns_a, f"va{tag}", A), (ns_b, f"vb{tag}", B)):
        sh("ip", "link", "set", dev, "netns", ns)
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    return ns_a, ns_b


def remove_hosts(*namespaces: str) -> None:
    for ns in namespaces:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def in_ns(ns: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *cmd]


def dmap_run(ns: str, index: str, reads: str, out: str, scheduler: str) -> tuple[float, str]:
    r = subprocess.run(in_ns(ns, sys.executable, "-m", "dmap.cli", "run", index, reads, "-o", out,
                             "--scheduler", scheduler), capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise SystemExit(f"dmap run failed on host A:\n{r.stderr}")
    return float(re.search(r"\(([\d,]+) reads/s\)", r.stderr).group(1).replace(",", "")), r.stderr


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index")
    ap.add_argument("reads")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    index, reads = os.path.abspath(args.index), os.path.abspath(args.reads)
    tag = str(os.getpid() % 100000)
    ns_a, ns_b = make_hosts(tag)
    procs = []
    dask = [sys.executable, "-m"]
    try:
        procs.append(subprocess.Popen(in_ns(ns_a, *dask, "distributed.cli.dask_scheduler", "--host", A,
                                            "--port", "8786", "--no-dashboard"), stderr=subprocess.DEVNULL))
        time.sleep(2)
        for ns, addr, part in ((ns_a, A, "0:0/2:0"), (ns_b, B, "0:0/2:1")):
            procs.append(subprocess.Popen(in_ns(ns, *dask, "distributed.cli.dask_worker", f"tcp://{A}:8786",
                                                "--host", addr, "--nthreads", "2", "--no-dashboard", "--name",
                                                f"worker-on-{addr}", "--resources", "opencl=1", "--preload",
                                                "dmap.cluster.worker", "--dmap-device", part),
                                          stderr=subprocess.DEVNULL))
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(in_ns(ns_a, sys.executable, "-c", "from distributed import Client; "
                                 f"Client('tcp://{A}:8786', timeout=60).wait_for_workers(2, timeout=60)"),
                           check=True, capture_output=True, timeout=120)
            rates, cpus = [], []
            names = ["scheduler", f"worker on {A}", f"worker on {B}"]
            watched = [psutil.Process(p.pid) for p in procs]
            for _ in range(args.repeat):
                before = [cpu(p) for p in watched]
                client0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                rate, err = dmap_run(ns_a, index, reads, f"{tmp}/two_hosts.sam", f"tcp://{A}:8786")
                client1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                time.sleep(0.5)  # the workers' last heartbeats
                rates.append(rate)
                cpus.append({"client": client1.ru_utime + client1.ru_stime - client0.ru_utime - client0.ru_stime,
                             **{n: cpu(p) - b for n, p, b in zip(names, watched, before)}})
            loads = re.search(r"index blocks loaded: (\d+) on (\d+) worker", err)
            local = subprocess.run([sys.executable, "-m", "dmap.cli", "run", index, reads, "-o", f"{tmp}/local.sam"],
                                   capture_output=True, text=True, timeout=600)
            if local.returncode:
                raise SystemExit(local.stderr)

            def body(p):
                return [line for line in open(p) if not line.startswith("@PG")]

            same = body(f"{tmp}/two_hosts.sam") == body(f"{tmp}/local.sam")
    finally:
        stop_processes(procs)
        remove_hosts(ns_a, ns_b)
    result = {"reads_per_s": statistics.median(rates), "same_sam_as_local": same,
              "workers_with_work": int(loads.group(2)) if loads else 0,
              "cpu_seconds": {k: statistics.median(c[k] for c in cpus) for k in cpus[0]}}
    print(f"two hosts (namespaces {A} and {B}): {result['reads_per_s']:,.0f} reads/s (median of {args.repeat}); "
          f"workers that loaded the index: {result['workers_with_work']}; SAM equal to a local run: {same}")
    print("\n| process | CPU s per run |\n|---|---|")
    for k, v in result["cpu_seconds"].items():
        print(f"| {k} | {v:.2f} |")
    return result


if __name__ == "__main__":
    main()
