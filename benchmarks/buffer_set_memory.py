"""Device memory one buffer set takes for a chunk: the largest sum of pooled buffers that one
task's scratch block holds at once (dmap.opencl.device.Device.scratch), for exact and ``-e K``.

    python3 benchmarks/buffer_set_memory.py INDEX READS [--max-errors 3] [--chunk-size 200000]

A device that shares the host's memory (PoCL's CPU device) pools no buffers, so the run
treats it as one that does not: the sizes are those a discrete GPU's buffers take.
``dmap.cluster.client.SET_MEMORY`` is reckoned from them (docs/performance.md, "An H100
host: the embedded cluster's threads").
"""

from __future__ import annotations

import argparse
import collections
import tempfile

from distributed import Client

import dmap
import dmap.opencl.device as device


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index")
    ap.add_argument("reads")
    ap.add_argument("--max-errors", type=int, default=0)
    ap.add_argument("--chunk-size", type=int, default=200_000)
    args = ap.parse_args()

    peak: collections.Counter = collections.Counter()
    make, take = device.Device.__init__, device.Device._take

    def copying_init(self, *a, **k):
        make(self, *a, **k)
        self.zero_copy = False  # buffers and pinned copies, as on a discrete GPU

    def measured_take(self, nbytes, pinned=False):
        item = take(self, nbytes, pinned)
        taken = getattr(self._local, "taken", None) or []
        held = sum(device._key_bytes(key) for key, _ in taken if isinstance(key, tuple) == pinned)
        kind = "pinned host" if pinned else "device"
        peak[kind] = max(peak[kind], held)
        return item

    device.Device.__init__, device.Device._take = copying_init, measured_take
    with (dmap.LocalDeviceCluster(processes=False, threads=1) as cluster, Client(cluster) as client,
          tempfile.TemporaryDirectory() as tmp):
        res = dmap.map_reads(args.index, args.reads, client=client, max_errors=args.max_errors, return_hits=False,
                             sam_path=f"{tmp}/out.sam", chunk_size=args.chunk_size, guided=False)
    print(f"{res.n_reads:,} reads, chunks of {args.chunk_size:,}, -e {args.max_errors}: one buffer set held at most "
          + ", ".join(f"{v / 2**20:.0f} MiB of {k} memory" for k, v in sorted(peak.items())))


if __name__ == "__main__":
    main()
