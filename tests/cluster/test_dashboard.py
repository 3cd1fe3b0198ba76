"""The dmap page of the Dask dashboard, in a real headless browser (Debian's
Chromium driven by Playwright): every device appears with non-zero work after
a run.  The screenshot is kept in test-artifacts/."""

import os
import re
import shutil
import threading
import time
from pathlib import Path

import pytest
from helpers import genome_case

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium")


def test_dmap_page_shows_every_device(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    import socket

    from distributed import Client

    import dmap
    from dmap.opencl.discovery import list_devices

    idx = genome_case(tmp_path, seed=2, size=300_000, read_length=80, n_reads=200_000)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    split = 2 if list_devices()[0].max_split >= 2 else 1
    ARTIFACTS.mkdir(exist_ok=True)
    with dmap.LocalDeviceCluster(processes=True, dashboard=port, split=split) as cluster, Client(cluster) as client, \
            playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        # where the dashboard listens, not the host of the in-process scheduler's address
        assert client.dashboard_link == cluster.dashboard_link == f"http://127.0.0.1:{port}/status"
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(f"http://127.0.0.1:{port}/dmap")
        page.wait_for_selector("#dmap-devices", timeout=30_000)  # workers report from their first heartbeat
        failed = []

        def mapped() -> None:
            try:
                dmap.map_reads(idx, tmp_path / "r.fq", client=client, return_hits=False, chunk_size=5000)
            except BaseException as e:  # reported below, not lost with the thread
                failed.append(e)

        run = threading.Thread(target=mapped)
        run.start()
        run.join(timeout=300)
        assert not failed, failed
        # The counts come with the workers' heartbeats, which a busy machine delays: wait for them.
        deadline = time.monotonic() + 120
        while True:
            table = page.locator("#dmap-devices").inner_text(timeout=30_000)
            if _queries(table) == 400_000 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        page.screenshot(path=str(ARTIFACTS / "dmap-dashboard.png"), full_page=True)
        browser.close()
        workers = sorted(cluster.workers)  # the spec names, e.g. dmap-0:0/2:0
    rows = [line.split("\t") for line in table.strip().splitlines()[1:]]
    assert sorted(r[0] for r in rows) == workers
    queries = [int(re.sub(r"\D", "", r[2])) for r in rows]
    assert all(q > 0 for q in queries) and sum(queries) == 400_000, queries  # 200,000 reads x 2 strands
    assert all(float(r[5]) > 0 for r in rows)  # search kernel seconds


def _queries(table: str) -> int:
    """The queries searched that the dmap page's table of devices shows, over all of them."""
    return sum(int(re.sub(r"\D", "", line.split("\t")[2]) or 0) for line in table.strip().splitlines()[1:])


def test_busy_counts_every_kernel():
    """Approximate mapping (Myers, traceback), the phash engine and the SAM/BAM records kernels keep a
    device busy too."""
    from types import SimpleNamespace

    from dmap.cluster.dashboard import device_rows

    seconds = {"dmap-neighborhood-kernel": 2.0, "dmap-verify-kernel": 1.0, "dmap-traceback-kernel": 0.5,
               "dmap-records-kernel": 0.125, "dmap-transfer": 0.25,
               "dmap-traceback": 9.0}  # host time of a task, not a kernel
    metrics = {"dmap_device": "0:0", "dmap_queries_searched": 10, "dmap_block_loads": 1, "dmap_seconds": seconds}
    scheduler = SimpleNamespace(workers={"w": SimpleNamespace(name="w", metrics=metrics),
                                         "plain": SimpleNamespace(name="plain", metrics={})})
    (row,) = device_rows(scheduler)
    assert row["kernel_s"] == 3.625 and row["neighborhood_s"] == 2.0 and row["verify_s"] == 1.5
    assert row["records_s"] == 0.125
    assert row["search_s"] == 0.0 and row["transfer_s"] == 0.25


def test_dmap_run_serves_the_dashboard_while_it_runs(tmp_path):
    """``dmap run --dashboard 0``: the embedded cluster serves the dashboard and the dmap page on
    a free port of the loopback interface, whose address the run prints, until the reads end."""
    import subprocess
    import sys
    import urllib.request

    from helpers import write_fasta, write_fastq

    write_fasta(tmp_path / "ref.fa", [("chr1", "ACGTTGCAAGGCTTAACCGGTATGCATGCC" * 20)])
    subprocess.run([sys.executable, "-m", "dmap", "index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-q"],
                   check=True, timeout=120)
    write_fastq(tmp_path / "r.fq", ["GGCTTAACCGGTATG", "TTTTTTTTTT"] * 5_000)
    reads = (tmp_path / "r.fq").read_text()
    os.mkfifo(tmp_path / "reads")
    checked = threading.Event()

    def feed() -> None:
        """The reads through a FIFO: enough for the run to plan and start its cluster, the rest once
        the dashboard was looked at."""
        with open(tmp_path / "reads", "w") as fifo:
            fifo.write(reads[:len(reads) // 2])
            fifo.flush()
            checked.wait(timeout=120)
            fifo.write(reads[len(reads) // 2:])

    run = subprocess.Popen([sys.executable, "-m", "dmap", "run", tmp_path / "idx", tmp_path / "reads", "-o",
                            tmp_path / "o.sam", "--chunk-size", "1000", "--dashboard", "0"],
                           stderr=subprocess.PIPE, text=True)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        line = run.stderr.readline()
        link = re.fullmatch(r"dmap: the dashboard is at (http://127\.0\.0\.1:\d+)/status, the devices at "
                            r"\1/dmap\n", line)
        assert link, line
        for page in ("status", "dmap"):
            with urllib.request.urlopen(f"{link[1]}/{page}", timeout=30) as response:
                assert response.status == 200
        checked.set()
        assert run.wait(timeout=120) == 0, run.stderr.read()
    finally:
        checked.set()
        run.kill()
        feeder.join(timeout=10)
    names = {line.split("\t")[0] for line in (tmp_path / "o.sam").read_text().splitlines() if line[0] != "@"}
    assert len(names) == 10_000
