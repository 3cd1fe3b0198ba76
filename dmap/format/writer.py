"""Writing the SAM output: the header, then each chunk's records (formatted by the
workers, :func:`dmap.mapping.tasks.finish_task`) in input order, with only the file's tail
kept in the page cache.

A worker that sees the run's parts directory (:class:`Parts`: on this host,
or on a file system both hosts share) writes a chunk's records to a part
file there, and the writer copies it into the output inside the kernel
(``sendfile``): the records never pass through this process.  Receiving
them over the Dask connection instead cost this process 0.4-0.5 CPU-seconds
per million 100-bp reads (``benchmarks/client_cpu.py``), which capped what
any number of workers could do.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tempfile
import uuid
from dataclasses import dataclass

import numpy as np

from ..errors import OutputError

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


@dataclass(frozen=True)
class Parts:
    """A directory for the part files of one run, and the marker that tells a worker it sees it."""

    directory: str
    marker: str  # a file in ``directory`` with a name of its own: a directory of the same name elsewhere lacks it
    client_pid: int  # workers in this process hand their records over in memory

    @classmethod
    def create(cls, near: str | None) -> Parts:
        """A new parts directory beside the output file ``near`` (the same file system: the
        copy can then share blocks where the file system allows), else in ``$TMPDIR``."""
        parent = os.path.dirname(os.path.abspath(near)) if near is not None else None
        try:
            directory = tempfile.mkdtemp(prefix=".dmap-parts-", dir=parent)
        except OSError:
            directory = tempfile.mkdtemp(prefix="dmap-parts-")
        marker = f"run-{uuid.uuid4().hex}"
        open(os.path.join(directory, marker), "xb").close()
        return cls(directory, marker, os.getpid())

    def usable(self) -> bool:
        """Whether a worker here should write part files: in another process, seeing the directory."""
        return os.getpid() != self.client_pid and os.path.exists(os.path.join(self.directory, self.marker))

    def path(self, number: int) -> str:
        return os.path.join(self.directory, f"{number:09d}.sam-part")

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def write_part(parts: Parts, number: int, records: np.ndarray) -> str:
    """Write a chunk's records to its part file (on a worker); the file's path."""
    path = parts.path(number)
    # A task run again (its worker was lost) writes the same bytes again.
    with open(path, "wb") as f:
        f.write(records)
    return path


def write_at(path: str, offset: int, data: np.ndarray) -> None:
    """Write ``data`` into the file ``path`` at ``offset`` (its other bytes are left as they are),
    and start its writeback: written once, the records need not stay in the page cache."""
    fd = os.open(path, os.O_WRONLY)
    try:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            done += os.pwrite(fd, view[done:], offset + done)
        if hasattr(os, "posix_fadvise") and done:
            try:
                os.posix_fadvise(fd, offset, done, os.POSIX_FADV_DONTNEED)  # on dirty pages: starts writeback
            except OSError:
                pass
    finally:
        os.close(fd)


class SamWriter:
    """Writes the SAM output's bytes: the header, then records chunk by chunk.

    Only the last :data:`CACHED_TAIL` bytes of a regular file stay in the
    page cache (:class:`PageCacheLimit`).
    """

    def __init__(self, file, name: str | None = None, after_failure: str = "no output was written"):
        """``name``: the output's name in error messages (default: the file's).
        ``after_failure``: what a failed write leaves, for its message
        (:attr:`dmap.io.output.Output.after_failure`)."""
        self.after_failure = after_failure
        self.file = file
        self.name = name or getattr(file, "name", "the SAM output")
        self.path = os.path.abspath(file.name) if isinstance(getattr(file, "name", None), str) else None
        self._cache = PageCacheLimit(file)
        self._end: int | None = None  # with reserve(): where the next chunk written in place goes

    def reserve(self, nbytes: int) -> int:
        """The offset of the next ``nbytes`` of a regular file, written there by a worker
        (:func:`write_at`) or by :meth:`write_at`."""
        if self._end is None:
            self.file.flush()  # the header, before the workers write after it
            self._end = self.file.tell()
        offset, self._end = self._end, self._end + nbytes
        return offset

    def write_at(self, offset: int, data) -> None:
        """Write ``data`` at ``offset`` of a regular file (a chunk reserved by :meth:`reserve`)."""
        try:
            write_at(self.path, offset, data)
        except OSError as e:
            raise OutputError.writing(self.name, e, self.after_failure) from None

    def write_end(self, data: bytes) -> None:
        """Write ``data`` after everything else (BGZF's end-of-file block): after the chunks
        reserved by :meth:`reserve`, or at the end of what was written."""
        if self._end is None:
            self.write(data)
        else:
            self.write_at(self.reserve(len(data)), data)

    def write_part(self, path: str, nbytes: int) -> None:
        """Copy the part file ``path`` (``nbytes`` long) into the output, inside the kernel, and remove it."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            raise OutputError(f"cannot read the part file {path!r} a worker wrote: {e.strerror}; "
                              f"{self.after_failure}") from None
        try:
            try:
                self.file.flush()
                out = self.file.fileno()
                done = 0
                while done < nbytes:
                    n = os.sendfile(out, fd, done, nbytes - done)
                    if n == 0:
                        raise OutputError(f"the part file {path!r} a worker wrote is {done} bytes long, not "
                                          f"{nbytes}; {self.after_failure}")
                    done += n
            except (io.UnsupportedOperation, AttributeError):  # no descriptor: through this process
                with open(fd, "rb", closefd=False) as f:
                    self.write(f.read())
                return
            except OSError as e:
                raise OutputError.writing(self.name, e, self.after_failure) from None
            if self._cache.fd is not None:
                self._cache.wrote(os.lseek(out, 0, os.SEEK_CUR))
        finally:
            os.close(fd)
            os.unlink(path)

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
