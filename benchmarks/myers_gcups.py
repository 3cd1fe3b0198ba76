"""Cell updates per second of the Myers kernel against edlib, on the same pairs, one core each.

    python3 benchmarks/myers_gcups.py --device 0:0/2:0 [--pairs 200000] [--length 100] [--window 106]

Each pair is a read-length pattern and a text window around its locus (the
shape dmap verifies: m + 2K symbols); cells = m x window per pair.  dmap:
``kernels/myers.cl`` through :func:`dmap.approx.verify.myers_distances`
(kernel time; ``0:0/2:0`` is one of two sub-devices of one compute unit
each, from device fission, so the kernel runs on one core).
edlib: ``edlib.align(pattern, text, mode="HW", task="distance")`` in a loop
(semi-global, the same problem; its Python call overhead included, and
reported without it as well by subtracting an empty-call baseline).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dmap.approx.candidates import Regions
from dmap.approx.patterns import pattern_matrix, upload_patterns
from dmap.approx.verify import MYERS_KERNELS, myers_distances
from dmap.opencl.device import Device
from dmap.testing.approx import semiglobal_row

KINDS = {"myers": "a work-item per region", "myers_lanes": "four regions per work-item, in vector lanes",
         "myers_cooperative": "cooperative, a work-item per word"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--window", type=int, default=106)
    ap.add_argument("--device", default=None, help="P:D as printed by 'dmap devices'")
    ap.add_argument("--no-edlib", action="store_true", help="only the two dmap kernels")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    n, m, w = args.pairs, args.length, args.window
    pats = rng.integers(0, 4, size=(n, m)).astype(np.uint8)
    texts = rng.integers(0, 4, size=(n, w)).astype(np.uint8)
    texts[:, 3 : 3 + m] = pats  # the locus inside the window
    flip = rng.random((n, w)) < 0.03
    texts[flip] = rng.integers(0, 4, size=int(flip.sum()))
    device = Device(args.device)
    codes = pats.reshape(-1)
    patterns = upload_patterns(device, pattern_matrix(codes, np.arange(n) * m, np.full(n, m), 1), np.full(n, m), 4)
    first = upload_patterns(device, pattern_matrix(codes[: 1000 * m], np.arange(1000) * m, np.full(1000, m), 1),
                            np.full(1000, m), 4)
    text_buf = device.upload(texts.reshape(-1))
    starts, lengths = np.arange(n) * w, np.full(n, w)
    for kernel in MYERS_KERNELS:  # build the programs
        myers_distances(device, text_buf, first, 4, Regions(np.arange(1000), starts[:1000], lengths[:1000]),
                        kernel=kernel)
    cells = n * m * w
    print(f"device: {device.name}")
    print("| implementation | pairs | m x window | seconds | GCUPS |\n|---|---|---|---|---|")
    for kernel in MYERS_KERNELS:
        best = float("inf")
        for _ in range(3):
            device.seconds.clear()
            out = myers_distances(device, text_buf, patterns, 4, Regions(np.arange(n), starts, lengths),
                                  kernel=kernel)
            best = min(best, device.seconds["dmap-verify-kernel"])
        for k in range(0, n, max(1, n // 20)):
            assert np.array_equal(out[k * w : (k + 1) * w], np.minimum(semiglobal_row(pats[k], texts[k], 4), 255))
        kind = KINDS[kernel]
        print(f"| dmap myers.cl, {kind} ({device.name}) | {n} | {m} x {w} | {best:.3f} | {cells / best / 1e9:.2f} |")
    if args.no_edlib:
        return
    try:
        import edlib
    except ImportError:
        print("| edlib | not installed (pip install edlib) | | | |")
        return
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)
    ps = [letters[p].tobytes().decode() for p in pats]
    ts = [letters[t].tobytes().decode() for t in texts]
    t0 = time.perf_counter()
    for p, t in zip(ps, ts):
        edlib.align(p, t, mode="HW", task="distance")
    ed = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(len(ps)):
        edlib.align("A", "A", mode="HW", task="distance")
    empty = time.perf_counter() - t0
    print(f"| edlib HW distance (one core, Python loop) | {n} | {m} x {w} | {ed:.3f} | {cells / ed / 1e9:.2f} |")
    print(f"| edlib, minus the cost of an empty call | {n} | {m} x {w} | {ed - empty:.3f} | "
          f"{cells / max(ed - empty, 1e-9) / 1e9:.2f} |")


if __name__ == "__main__":
    main()
