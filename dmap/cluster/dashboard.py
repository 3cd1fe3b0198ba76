"""The dmap page of the scheduler's Dask dashboard: every OpenCL device
worker with its busy fraction over time (every dmap kernel counts), reads/s,
and the time spent in the search, locate, verification (Myers + traceback)
and neighborhood kernels and in transfers.

Load it into a scheduler with ``dask scheduler --preload dmap.cluster.dashboard``
(``dmap cluster up`` and ``LocalDeviceCluster(dashboard=...)`` do).  The
page is ``/dmap``, also listed as "Dmap Devices" in the dashboard's "More"
menu.  Its data are the worker metrics that :class:`dmap.cluster.worker.DevicePlugin`
sends with every heartbeat, so the page needs nothing beyond the scheduler.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque

from bokeh.layouts import column
from bokeh.models import ColumnDataSource, Div
from bokeh.palettes import Category10_10
from bokeh.plotting import figure
from distributed.dashboard.scheduler import applications

# Columns of the time split: (row key, Device.timed labels, legend).
SPLIT = (
    ("search_s", ("dmap-search-kernel",), "search kernel"),
    ("locate_s", ("dmap-locate-kernel",), "locate kernel"),
    ("verify_s", ("dmap-verify-kernel", "dmap-traceback-kernel"), "verify kernels"),
    ("neighborhood_s", ("dmap-neighborhood-kernel",), "neighborhood kernel"),
    ("records_s", ("dmap-records-kernel",), "records kernels"),
    ("transfer_s", ("dmap-transfer",), "transfers"),
)
HISTORY = 240  # points per device in the busy-over-time plot


def device_rows(scheduler) -> list[dict]:
    """One row per worker that has a dmap device, from its latest heartbeat."""
    rows = []
    for ws in scheduler.workers.values():
        metrics = ws.metrics
        if "dmap_device" not in metrics:
            continue
        seconds = metrics.get("dmap_seconds") or {}
        row = {
            "worker": str(ws.name),
            "device": str(metrics["dmap_device"]),
            "queries": int(metrics.get("dmap_queries_searched", 0)),
            "block_loads": int(metrics.get("dmap_block_loads", 0)),
            # busy = every kernel, whichever engine or mode ran
            "kernel_s": sum(float(v) for k, v in seconds.items() if k.endswith("-kernel")),
        }
        row.update({key: sum(float(seconds.get(label, 0.0)) for label in labels) for key, labels, _ in SPLIT})
        rows.append(row)
    return sorted(rows, key=lambda r: r["worker"])


class DevicePage:
    """Rates come from differences between two updates of the cumulative counters."""

    def __init__(self, scheduler, doc):
        self.scheduler = scheduler
        self.start = time.time()
        self.last: dict[str, tuple[float, float, int]] = {}
        self.history: dict[str, deque] = defaultdict(lambda: deque(maxlen=HISTORY))
        self.busy = ColumnDataSource({"xs": [], "ys": [], "worker": [], "color": []})
        self.split = ColumnDataSource({"worker": [], **{key: [] for key, _, _ in SPLIT}})
        busy = figure(title="Device busy fraction (kernel time / wall time)", height=260, sizing_mode="stretch_width",
                      x_axis_label="seconds", y_range=(0, 1.05), tools="")
        busy.multi_line("xs", "ys", source=self.busy, color="color", legend_field="worker", line_width=2)
        self.split_fig = figure(title="Time per device: kernels and transfers (s)", height=220,
                                sizing_mode="stretch_width", y_range=[], tools="")
        self.split_fig.hbar_stack([key for key, _, _ in SPLIT], y="worker", height=0.6,
                                  source=self.split, color=Category10_10[:len(SPLIT)],
                                  legend_label=[legend for _, _, legend in SPLIT])
        self.table = Div(text="<p>No dmap device worker has reported yet.</p>", sizing_mode="stretch_width")
        doc.title = "Dask: dmap devices"
        doc.add_root(column(self.table, busy, self.split_fig, sizing_mode="stretch_width"))
        doc.add_periodic_callback(self.update, 500)
        self.update()

    def update(self) -> None:
        now = time.time()
        rows = device_rows(self.scheduler)
        table = ["<table id='dmap-devices' style='border-collapse:collapse'><tr>"
                 + "".join(f"<th style='padding:2px 10px'>{h}</th>" for h in
                           ("worker", "device", "queries searched", "reads/s (both strands)", "busy",
                            *(f"{legend} s" for _, _, legend in SPLIT), "block loads")) + "</tr>"]
        for r in rows:
            kernel = r["kernel_s"]
            t0, k0, q0 = self.last.get(r["worker"], (now, kernel, r["queries"]))
            dt = max(now - t0, 1e-9)
            busy = min((kernel - k0) / dt, 1.0) if now > t0 else 0.0
            rate = (r["queries"] - q0) / 2 / dt if now > t0 else 0.0
            self.last[r["worker"]] = (now, kernel, r["queries"])
            self.history[r["worker"]].append((now - self.start, busy))
            cells = (r["worker"], r["device"], f"{r['queries']:,}", f"{rate:,.0f}", f"{100 * busy:.0f}%",
                     *(f"{r[key]:.2f}" for key, _, _ in SPLIT), r["block_loads"])
            table.append("<tr>" + "".join(f"<td style='padding:2px 10px'>{c}</td>" for c in cells) + "</tr>")
        table.append("</table>")
        if rows:
            self.table.text = "".join(table)
        workers = [r["worker"] for r in rows]
        self.busy.data = {
            "xs": [[x for x, _ in self.history[w]] for w in workers],
            "ys": [[y for _, y in self.history[w]] for w in workers],
            "worker": workers,
            "color": [Category10_10[i % 10] for i in range(len(workers))],
        }
        self.split_fig.y_range.factors = workers
        self.split.data = {k: [r[k] for r in rows] if k != "worker" else workers
                           for k in ("worker", *(key for key, _, _ in SPLIT))}


def dmap_page(scheduler, extra, doc) -> None:
    DevicePage(scheduler, doc)


# Registered on import: the scheduler builds its dashboard from this table
# after importing its preload modules.
applications["/dmap"] = dmap_page
applications["/individual-dmap-devices"] = dmap_page


def dask_setup(scheduler) -> None:
    """Preload entry point (the page itself is registered on import)."""
