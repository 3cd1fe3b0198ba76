"""Progress of a long command on standard error, for ``dmap run`` and ``dmap index``.

On a terminal one line is redrawn twice a second; into a file (a SLURM or
Nextflow log) a plain line is written every 10 seconds, as bwa writes its
``[M::process]`` lines, so a log shows how far a run got.  The time left is
given where the input's size is known (an uncompressed file).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

TERMINAL_INTERVAL = 0.5  # seconds between redraws on a terminal
LOG_INTERVAL = 10.0  # seconds between lines in a file


def _isatty(stream) -> bool:
    try:
        return os.isatty(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False


class Progress:
    """Counts of work done, shown on ``stream`` (standard error by default).

    Parameters
    ----------
    unit
        What is counted: ``"reads"``, ``"symbols"``.
    verb
        What was done to them: ``"mapped"``, ``"indexed"``.
    total_bytes
        The input's size, for the share done and the time left (None: unknown).
    whole
        What ``total_bytes`` measures, in the report: ``"input"``, ``"reference"``.
    interval
        Seconds between reports (default: :data:`TERMINAL_INTERVAL` on a
        terminal, else :data:`LOG_INTERVAL`).
    """

    def __init__(self, unit: str, verb: str, total_bytes: int | None = None, stream: TextIO | None = None,
                 interval: float | None = None, whole: str = "input"):
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = _isatty(self.stream)
        self.interval = interval if interval is not None else (TERMINAL_INTERVAL if self.terminal else LOG_INTERVAL)
        self.unit, self.verb, self.total_bytes, self.whole = unit, verb, total_bytes, whole
        self.count = self.bytes = 0
        self.start = self.last = time.monotonic()
        self.shown = False

    def update(self, count: int, bytes_done: int | None = None) -> None:
        """``count`` units done so far, from the input's first ``bytes_done`` bytes."""
        self.count = count
        if bytes_done is not None:
            self.bytes = bytes_done
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._show(now)

    def line(self, now: float | None = None) -> str:
        """The report, e.g. ``dmap: 1,200,000 reads mapped in 12.0 s (100,000 reads/s); 40% of the input,
        about 18 s left``."""
        seconds = (now if now is not None else time.monotonic()) - self.start
        rate = self.count / seconds if seconds > 0 else 0.0
        text = f"dmap: {self.count:,} {self.unit} {self.verb} in {seconds:.1f} s ({rate:,.0f} {self.unit}/s)"
        if self.total_bytes and self.bytes:
            share = min(self.bytes / self.total_bytes, 1.0)
            left = seconds * (1 - share) / share
            text += f"; {100 * share:.0f}% of the {self.whole}, about {left:.0f} s left"
        return text

    def _show(self, now: float) -> None:
        try:
            if self.terminal:
                self.stream.write("\r\033[K" + self.line(now))
            else:
                self.stream.write(self.line(now) + "\n")
            self.stream.flush()
            self.shown = True
        except (OSError, ValueError):  # a log that went away does not stop the run
            pass

    def note(self, text: str) -> None:
        """A line of its own (e.g. where the dashboard is), above a line being redrawn."""
        try:
            self.stream.write(("\r\033[K" if self.terminal and self.shown else "") + text + "\n")
            self.stream.flush()
            if self.terminal:
                self.last = 0.0  # redraw the line the note cleared at the next update
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        """End the redrawn line on a terminal, so that the next message starts on its own."""
        if self.terminal and self.shown:
            try:
                self.stream.write("\r\033[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass


def input_size(paths: list[str]) -> int | None:
    """The size of uncompressed regular reads files, else None (a pipe, gzip)."""
    total = 0
    for path in paths:
        try:
            if path == "-" or not os.path.isfile(path):
                return None
            with open(path, "rb") as f:
                if f.read(2) == b"\x1f\x8b":
                    return None
            total += os.path.getsize(path)
        except OSError:
            return None
    return total
