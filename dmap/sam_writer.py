"""Writing the SAM output: the header, then each chunk's records (formatted by the
workers, :func:`dmap.tasks.finish_task`) in input order, with only the file's tail
kept in the page cache."""

from __future__ import annotations

import io
import os
import stat

from .errors import OutputError

# Bytes at the end of a SAM file being written that are left in the page
# cache: two SAM batches.  Against 64 MB, the pages dropped come back sooner,
# while the host still backs them (1M reads: faster in 15 of 18 pairs, by
# 2-3%; 10M: 8 of 11), and writeback keeps up (17.8 MB cached after a
# 10M-read run; docs/performance.md).
CACHED_TAIL = 16 << 20


class PageCacheLimit:
    """Keeps all but the last ``keep`` bytes of a regular file being written
    out of the page cache.

    A SAM file of millions of reads (about 2.9 GB per 10M 100-bp reads) is
    written once; in the page cache it would only push out the index and
    the reads.  Each call starts the writeback of what is new and drops what
    lies more than ``keep`` bytes back, which has been written to disk by
    then, so the next writes reuse those pages.  On a virtual machine that
    hands free memory back to its host (free page reporting), every fresh
    page costs a fault in the host: there, writing 2.8 GB took 6.3-6.6
    CPU-s with plain writes and 1.1 CPU-s with this (docs/performance.md).
    It is advice only: pipes and other special files are left alone, and a
    page still being written back simply stays cached.  On a disk slower
    than the mapping, the writer may then wait for the disk instead of
    ending the run with gigabytes still to be written (not measured).
    """

    def __init__(self, file, keep: int = CACHED_TAIL):
        self.keep = keep
        self.fd: int | None = None
        self.started = self.dropped = 0  # bytes whose writeback was started; bytes dropped
        try:
            fd = file.fileno()
            if hasattr(os, "posix_fadvise") and stat.S_ISREG(os.fstat(fd).st_mode):
                self.fd = fd
        except (OSError, AttributeError, io.UnsupportedOperation):
            pass

    def wrote(self, end: int) -> None:
        """The file's first ``end`` bytes have been handed to the OS."""
        if self.fd is None:
            return
        try:
            # On dirty pages DONTNEED only starts their writeback (WB_SYNC_NONE).
            os.posix_fadvise(self.fd, self.started, end - self.started, os.POSIX_FADV_DONTNEED)
            self.started = end
            old = end - self.keep
            if old > self.dropped:
                # Again from one window back: pages whose writeback was still running last time.
                lo = max(0, self.dropped - self.keep)
                os.posix_fadvise(self.fd, lo, old - lo, os.POSIX_FADV_DONTNEED)
                self.dropped = old
        except OSError:
            self.fd = None  # a file system that refuses the advice is written as usual


class SamWriter:
    """Writes the SAM output's bytes: the header, then records chunk by chunk.

    Only the last :data:`CACHED_TAIL` bytes of a regular file stay in the
    page cache (:class:`PageCacheLimit`).
    """

    def __init__(self, file, name: str | None = None, after_failure: str = "no output was written"):
        """``name``: the output's name in error messages (default: the file's).
        ``after_failure``: what a failed write leaves, for its message
        (:attr:`dmap.output.Output.after_failure`)."""
        self.after_failure = after_failure
        self.file = file
        self.name = name or getattr(file, "name", "the SAM output")
        self._cache = PageCacheLimit(file)

    def write(self, data) -> None:
        """Write ``data`` (bytes or a uint8 array)."""
        # An OSError here is the output's (disk full, a closed pipe), told
        # apart from the OSErrors of a Dask cluster that went away.
        try:
            self.file.write(data)
            if self._cache.fd is not None:
                self.file.flush()
                self._cache.wrote(self.file.tell())
        except OSError as e:
            raise OutputError.writing(self.name, e, self.after_failure) from None
