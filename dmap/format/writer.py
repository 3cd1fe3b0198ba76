"""Writing the SAM output: the header, then each chunk's records (formatted by the
workers, :func:`dmap.mapping.tasks.finish_task`) in input order.  A new file on a local disk
is appended with ``O_DIRECT`` (:class:`DirectAppends`); elsewhere only the file's tail is
kept in the page cache (:class:`PageCacheLimit`).

A worker that sees the run's parts directory (:class:`Parts`: on this host,
or on a file system both hosts share) writes a chunk's records to a part
file there, and the writer copies it into the output inside the kernel
(``sendfile``): the records never pass through this process.  Receiving
them over the Dask connection instead cost this process 0.4-0.5 CPU-seconds
per million 100-bp reads (``benchmarks/client_cpu.py``), which capped what
any number of workers could do.
"""

from __future__ import annotations

import errno
import fcntl
import io
import mmap
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass

import numpy as np

from ..errors import OutputError
from ..io.mapfile import libc
from ..io.partial import hold_folder, remove_abandoned_folders

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


# File systems whose O_DIRECT writes go straight to a local disk (statfs's f_type): ext2/3/4,
# XFS, Btrfs.  On NFS, Lustre or GPFS direct writes can be synchronous round trips to a
# server, so anything else is written through the page cache.
DIRECT_FILE_SYSTEMS = frozenset({0xEF53, 0x58465342, 0x9123683E})
DIRECT_ALIGN = 4096  # offsets, lengths and addresses of direct writes: a multiple of any disk's block
DIRECT_BUFFER = 8 << 20


def aligned_buffer(size: int) -> np.ndarray:
    """A buffer of ``size`` bytes at a page boundary, as ``O_DIRECT`` wants (an anonymous mapping,
    unmapped with the last array that uses it)."""
    return np.frombuffer(mmap.mmap(-1, size), np.uint8)


def _file_system_type(fd: int) -> int | None:
    """The file system type of the open file ``fd`` (Linux's ``fstatfs`` f_type), or None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    buf = ctypes.create_string_buffer(256)  # struct statfs: f_type is its first field, a long
    if libc().fstatfs(fd, buf) != 0:
        return None
    return int.from_bytes(buf.raw[:ctypes.sizeof(ctypes.c_long)], sys.byteorder)


def _open_direct(path: str) -> int | None:
    """A descriptor writing ``path`` with ``O_DIRECT``, or None where its file system is not a
    local one of :data:`DIRECT_FILE_SYSTEMS` (or has no ``O_DIRECT``)."""
    flag = getattr(os, "O_DIRECT", None)
    if flag is None:
        return None
    try:
        fd = os.open(path, os.O_WRONLY | flag)
    except OSError:
        return None
    if _file_system_type(fd) in DIRECT_FILE_SYSTEMS:
        return fd
    os.close(fd)
    return None


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    """Write all of ``view`` at ``offset``.  A direct write refused with EINVAL (a device that
    wants larger blocks, or a file-size limit that cuts the write inside a block) is written
    again through the page cache, which does it or tells the real error (EFBIG)."""
    done = 0
    while done < len(view):
        try:
            done += os.pwrite(fd, view[done:], offset + done)
        except OSError as e:
            if e.errno != errno.EINVAL or not _drop_o_direct(fd):
                raise


def _drop_o_direct(fd: int) -> bool:
    """Turn ``O_DIRECT`` off for the rest of the file's writes by ``fd``; False if it was off."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    if not flags & getattr(os, "O_DIRECT", 0):
        return False
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_DIRECT)
    return True


class DirectAppends:
    """Appends to a regular file with ``O_DIRECT``, through an aligned buffer: the bytes go
    from this buffer to the disk, not through the page cache.

    Written through the page cache, the 3 GB of a 10M-read SAM file cost the machine
    2.4-3.2 system CPU-s on the development VM, in copies into fresh cache pages, their
    writeback and dropping them (:class:`PageCacheLimit`); appended this way, 0.21-0.26
    CPU-s (``benchmarks/sam_appends.py``).  Those CPU-seconds are taken from the mapping on
    the same cores: a 10M-read run took 5.1 s against 6.2 s (docs/performance.md).  Whole
    aligned blocks are written as the buffer fills; the last, partial block is left to
    :meth:`finish`'s caller.

    ``at``: where the appends begin (a multiple of :data:`DIRECT_ALIGN`).  ``buffer``: an
    aligned buffer to write through (:func:`thread_buffer`), else one of ``size`` bytes of
    its own.
    """

    def __init__(self, fd: int, size: int = DIRECT_BUFFER, at: int = 0, buffer: np.ndarray | None = None):
        self.fd: int | None = fd
        # A run that is interrupted closes the file while the writer thread may be appending:
        # a descriptor closed under it could be reused by another file.
        self._lock = threading.Lock()
        self._view = aligned_buffer(size) if buffer is None else buffer
        self._held = 0  # bytes in the buffer, not yet written
        self.written = at  # where the held bytes go: a multiple of DIRECT_ALIGN

    @classmethod
    def open(cls, path: str) -> DirectAppends | None:
        """Direct appends to the empty regular file ``path``, or None where its file system is
        not a local one of :data:`DIRECT_FILE_SYSTEMS`."""
        fd = _open_direct(path)
        if fd is not None and os.fstat(fd).st_size:
            os.close(fd)
            fd = None
        return None if fd is None else cls(fd)

    def write(self, data: bytes | np.ndarray) -> None:
        """Append ``data`` (bytes or a uint8 array)."""
        data = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1).view(np.uint8)
        with self._lock:
            if self.fd is None:
                raise ValueError("write to a closed DirectAppends")
            self._append(data)

    def _append(self, data: np.ndarray) -> None:
        done = 0
        while done < data.size:
            n = min(data.size - done, self._view.size - self._held)
            self._view[self._held:self._held + n] = data[done:done + n]
            self._held += n
            done += n
            if self._held == self._view.size:
                self._write_blocks()

    def _write_blocks(self) -> None:
        """Write the buffer's whole blocks, and keep the rest at its start."""
        whole = self._held - self._held % DIRECT_ALIGN
        with memoryview(self._view) as view:
            _pwrite_all(self.fd, view[:whole], self.written)
        self.written += whole
        self._view[:self._held - whole] = self._view[whole:self._held]
        self._held -= whole

    def finish(self) -> bytes:
        """Write the whole blocks held, close the file, and return the bytes after them (less than a
        block), which the caller writes at offset :attr:`written` through the page cache."""
        with self._lock:
            try:
                self._write_blocks()
                return bytes(self._view[:self._held])
            finally:
                self._close()

    def close(self) -> None:
        """Close the file and free the buffer (what is held is dropped)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            del self._view  # its own buffer is unmapped with the last view of it


# Parts.remove: how many times it empties a directory that workers may still be writing into.
REMOVE_TRIES = 100
# Names of parts directories: hidden beside the output, plain in $TMPDIR.
PARTS_PREFIXES = (".dmap-parts-", "dmap-parts-")
# This process's parts directories, and the descriptor of the lock it holds on each (dmap.io.partial).
_held: dict[str, int | None] = {}


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
            directory = tempfile.mkdtemp(prefix=PARTS_PREFIXES[0], dir=parent)
        except OSError:
            directory = tempfile.mkdtemp(prefix=PARTS_PREFIXES[1])
        # Held while this run lives: a run killed outright leaves its part files, which the next
        # run's parts directory beside them removes.
        _held[directory] = hold_folder(directory)
        remove_abandoned_folders(os.path.dirname(directory), PARTS_PREFIXES)
        marker = f"run-{uuid.uuid4().hex}"
        open(os.path.join(directory, marker), "xb").close()
        return cls(directory, marker, os.getpid())

    def usable(self) -> bool:
        """Whether a worker here should write part files: in another process, seeing the directory."""
        return os.getpid() != self.client_pid and os.path.exists(os.path.join(self.directory, self.marker))

    def path(self, number: int) -> str:
        return os.path.join(self.directory, f"{number:09d}.sam-part")

    def remove(self) -> None:
        """Remove the directory and its part files.  After a failed run, workers may still be
        writing chunks' part files into it: one made while ``rmtree`` empties the directory
        leaves it non-empty, so empty it again until it is gone (once it is, a worker's write
        fails instead of making it again)."""
        try:
            for _ in range(REMOVE_TRIES):
                shutil.rmtree(self.directory, ignore_errors=True)
                if not os.path.lexists(self.directory):
                    return
                time.sleep(0.01)
        finally:
            if (lock := _held.pop(self.directory, None)) is not None:
                os.close(lock)


def write_part(parts: Parts, number: int, records: np.ndarray) -> str:
    """Write a chunk's records to its part file (on a worker); the file's path."""
    path = parts.path(number)
    # A task run again (its worker was lost) writes the same bytes again.
    with open(path, "wb") as f:
        f.write(records)
    return path


# The length given to the output file ahead of the chunks written in place, in steps of this much.
PREALLOCATE = 256 << 20

# A chunk written in place goes to the disk with O_DIRECT when its whole blocks hold at least
# this much; a smaller one costs the page cache little.
DIRECT_AT_LEAST = 1 << 20

_thread_buffers = threading.local()


def thread_buffer() -> np.ndarray:
    """This thread's aligned buffer of :data:`DIRECT_BUFFER` bytes for direct writes, kept for
    its next writes (a worker's task threads write chunk after chunk)."""
    buffer = getattr(_thread_buffers, "buffer", None)
    if buffer is None:
        buffer = _thread_buffers.buffer = aligned_buffer(DIRECT_BUFFER)
    return buffer


def direct_writes(gpus: list[bool]) -> bool:
    """Whether a run on devices of these kinds (True: a GPU) writes its records to a local
    disk with ``O_DIRECT``, or through the page cache.

    Where the search runs on the host's cores (PoCL's CPU device), the page cache's copies,
    writeback and reclaim take cores from it: on the 2-core VM, direct writes made a 10M-read
    run 5.1 s against 6.2 s.  A GPU host's cores have room for them, and its memory takes a
    SAM file faster than its disk: 8 workers on an H200 mapped 10M reads in 2.97 s with this
    rule against 3.47 s direct, in 4 of 4 alternating pairs (docs/performance.md, "GPU").
    """
    return not gpus or not all(gpus)


def write_at(path: str, offset: int, data: np.ndarray, direct: bool = True) -> None:
    """Write ``data`` into the file ``path`` at ``offset`` (its other bytes are left as they are).

    With ``direct``, on a local disk (:data:`DIRECT_FILE_SYSTEMS`) the whole blocks of the
    range are written with ``O_DIRECT`` from this thread's aligned buffer, as
    :class:`DirectAppends` appends; the partial blocks at its ends, which it shares with the
    chunks beside it (written by other workers, never directly), go through the page cache.
    There, and for the whole range otherwise, the writeback is started at once: written once,
    the records need not stay in the page cache.
    """
    view = memoryview(data).cast("B")
    end = offset + len(view)
    lo, hi = -(-offset // DIRECT_ALIGN) * DIRECT_ALIGN, end // DIRECT_ALIGN * DIRECT_ALIGN
    direct_fd = _open_direct(path) if direct and hi - lo >= DIRECT_AT_LEAST else None
    if direct_fd is None:
        lo = hi = end
    else:  # the whole blocks (hi is aligned: no partial block is left over)
        appends = DirectAppends(direct_fd, at=lo, buffer=thread_buffer())
        try:
            appends.write(np.frombuffer(view, np.uint8)[lo - offset:hi - offset])
            appends.finish()
        except BaseException:
            appends.close()
            raise
    fd = os.open(path, os.O_WRONLY)
    try:
        for start, stop in ((offset, lo), (hi, end)):
            if stop > start:
                _pwrite_all(fd, view[start - offset:stop - offset], start)
                if hasattr(os, "posix_fadvise"):
                    try:
                        os.posix_fadvise(fd, start, stop - start, os.POSIX_FADV_DONTNEED)  # starts writeback
                    except OSError:
                        pass
    finally:
        os.close(fd)


class SamWriter:
    """Writes the SAM output's bytes: the header, then records chunk by chunk.

    With ``direct``, appends go to the disk with :class:`DirectAppends` until a
    chunk is written in place or copied from a part file, and so do the whole blocks
    of chunks written in place (:func:`write_at`), until :meth:`through_page_cache`;
    otherwise only the last :data:`CACHED_TAIL` bytes of a regular file stay in the
    page cache (:class:`PageCacheLimit`).
    """

    def __init__(self, file, name: str | None = None, after_failure: str = "no output was written",
                 direct: bool = False):
        """``name``: the output's name in error messages (default: the file's).
        ``after_failure``: what a failed write leaves, for its message
        (:attr:`dmap.io.output.Output.after_failure`).  ``direct``: ``file`` is a new, empty
        regular file that nothing else writes; what :meth:`write` appends then goes to the disk
        with :class:`DirectAppends` where its file system allows, and :meth:`finish` must be
        called before the file is closed."""
        self.after_failure = after_failure
        self.file = file
        self.name = name or getattr(file, "name", "the SAM output")
        self.path = os.path.abspath(file.name) if isinstance(getattr(file, "name", None), str) else None
        self._cache = PageCacheLimit(file)
        self._end: int | None = None  # with reserve(): where the next chunk written in place goes
        self._allocated = 0  # with reserve(): the file's length given ahead of the writes
        self._preallocate = False  # direct appends went on to reserve(): the file is given its length ahead
        self._direct = DirectAppends.open(self.path) if direct and self.path is not None else None
        self._direct_at = direct  # chunks written in place by write_at() go to the disk directly

    @property
    def direct(self) -> bool:
        """Whether :meth:`write` appends with ``O_DIRECT`` (until anything but appends is asked)."""
        return self._direct is not None

    def _end_direct(self) -> None:
        """Back to writing through the page cache: the direct appends' last partial block is
        written after their whole ones."""
        direct, self._direct = self._direct, None
        if direct is not None:
            try:
                tail = direct.finish()
                self.file.seek(direct.written)
                self.file.write(tail)
            except OSError as e:
                raise OutputError.writing(self.name, e, self.after_failure) from None

    def through_page_cache(self) -> None:
        """Write everything from now on through the page cache (:func:`direct_writes`)."""
        self._direct_at = False
        self._end_direct()

    def finish(self) -> None:
        """Everything written so far is in the file, for it to be closed."""
        self._end_direct()
        try:
            self.file.flush()
            if self._end is not None and self._allocated > self._end:
                os.ftruncate(self.file.fileno(), self._end)  # the blocks given ahead and not written
        except OSError as e:
            raise OutputError.writing(self.name, e, self.after_failure) from None

    def close(self) -> None:
        """Let go of what the direct appends hold (after a failure: the file goes anyway)."""
        direct, self._direct = self._direct, None
        if direct is not None:
            direct.close()

    def reserve(self, nbytes: int) -> int:
        """The offset of the next ``nbytes`` of a regular file, written there by a worker
        (:func:`write_at`) or by :meth:`write_at`."""
        if self._end is None:
            self._preallocate = self._direct is not None
            self._end_direct()
            self.file.flush()  # the header, before the workers write after it
            self._end = self._allocated = self.file.tell()
        offset, self._end = self._end, self._end + nbytes
        if self._preallocate and self._end > self._allocated:
            # The file's blocks are given ahead of the workers' writes: ext4 (Linux 6.3 on) takes
            # its lock shared, not exclusive, for aligned direct writes into them.
            size = max(self._end, self._allocated + PREALLOCATE)
            try:
                os.posix_fallocate(self.file.fileno(), self._allocated, size - self._allocated)
                self._allocated = size
            except OSError:  # a disk too full for the step ahead: the writes will tell
                self._preallocate = False
        return offset

    def write_at(self, offset: int, data: bytes | np.ndarray) -> None:
        """Write ``data`` at ``offset`` of a regular file (a chunk reserved by :meth:`reserve`)."""
        self._end_direct()
        try:
            write_at(self.path, offset, data, direct=self._direct_at)
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
                self._end_direct()
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

    def write(self, data: bytes | np.ndarray) -> None:
        """Write ``data`` (bytes or a uint8 array)."""
        # An OSError here is the output's (disk full, a closed pipe), told
        # apart from the OSErrors of a Dask cluster that went away.
        try:
            direct = self._direct  # once: close() may take it from another thread
            if direct is not None:
                direct.write(data)
                return
            self.file.write(data)
            if self._cache.fd is not None:
                self.file.flush()
                self._cache.wrote(self.file.tell())
        except OSError as e:
            raise OutputError.writing(self.name, e, self.after_failure) from None
