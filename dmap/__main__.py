"""The ``dmap`` command, as installed on PATH and as ``python -m dmap``.

Python's garbage collection is paused from here until the command's own
imports are done (:func:`dmap.cli.startup_done`).  Starting up makes some
400,000 objects that live as long as the command; the collections that
their allocations triggered found about 700 objects to free and took
0.04-0.07 s of a 1.6 s mapping run, all on the one busy core
(docs/performance.md).

dmap makes no BLAS calls, so numpy's OpenBLAS gets one thread unless the
user says otherwise: its pool of one thread per core spun 0.1 CPU-seconds
waiting for work at every start (measured with ``perf``).
"""

from __future__ import annotations

import gc
import os


def hold_standard_descriptors() -> None:
    """Open the null device on the standard descriptors (0, 1, 2) that are closed
    (``dmap run ... 2>&-``), so that no file dmap opens takes their numbers.

    Otherwise the next file opened becomes descriptor 2 (or 1), and a message (or SAM
    records) written to the standard stream would go into that file: the output, a lock
    file, a kernel cache entry.  Python has already set ``sys.stderr`` (``stdout``, ``stdin``)
    to None for a descriptor that was closed, which is how dmap tells that standard output or
    input, asked for, was closed (:class:`dmap.io.output.Output`, :func:`dmap.io.splits.check_path`).
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one, unless a lower is free too
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def console_main() -> None:
    """Run the command line (:func:`dmap.cli.console_main`) with collection paused while it starts."""
    hold_standard_descriptors()
    gc.disable()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported
    from dmap.cli import console_main as main

    main(gc_paused=True)


if __name__ == "__main__":
    console_main()
