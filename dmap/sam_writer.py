"""Writing a SAM file: the header, then each chunk's records in input order, formatted on
this process's OpenCL device (``kernels/sam_records.cl``) when it has one, with only
the file's tail kept in the page cache."""

from __future__ import annotations

import io
import os
import stat
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from .approx.alignments import ChunkAlignments
from .device import local_device
from .errors import OutputError
from .hits import ChunkHits
from .reads import ReadChunk
from .sam import (
    ReadGroup,
    contig_name_columns,
    format_alignment_records,
    format_records,
    format_records_device,
    primaries,
)

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


def prepare_device() -> Future:
    """This process's device (:func:`dmap.device.local_device`) with the SAM
    kernel built, made in a background thread.

    The OpenCL context (0.06-0.07 s) and the kernel's build from the binary
    cache (0.04 s) then overlap the cluster's start and the first chunk's
    search, instead of delaying both (docs/performance.md).
    """
    def make():
        device = local_device()
        if device is not None:
            device.program("sam_records.cl", {})
        return device

    # An exception in make() is raised by future.result(), in the writer.
    pool = ThreadPoolExecutor(1, thread_name_prefix="dmap-sam-device")
    future = pool.submit(make)
    pool.shutdown(wait=False)  # the thread ends when make() returns
    return future


class SamWriter:
    """Writes a SAM file: header, then records chunk by chunk.

    Records are formatted by ``sam_records.cl`` on this process's OpenCL
    device when it has one, else in Python (the same bytes).  Only the last
    :data:`CACHED_TAIL` bytes of a regular file stay in the page cache
    (:class:`PageCacheLimit`).
    """

    def __init__(self, file, contig_names: list[str], max_hits: int | None, device=None, name: str | None = None,
                 read_group: ReadGroup | None = None, after_failure: str = "no output was written"):
        """``device``: a :class:`dmap.device.Device`, None, or a future of either
        (:func:`prepare_device`), waited for at the first records.  ``name``:
        the output's name in error messages (default: the file's).
        ``read_group``: its tag ends every record.  ``after_failure``: what a
        failed write leaves, for its message (:attr:`dmap.output.Output.after_failure`)."""
        self.after_failure = after_failure
        self.tail = read_group.tag if read_group is not None else ""
        self.file = file
        self.name = name or getattr(file, "name", "the SAM output")
        self.contig_names = contig_names
        self.max_hits = max_hits
        self._device = device
        self._name_columns = None  # contig_name_columns, made at the first records formatted on the device
        self._cache = PageCacheLimit(file)
        self._records = np.empty(0, dtype=np.uint8)

    def _records_buffer(self, nbytes: int) -> np.ndarray:
        """An array for a batch of records (:data:`SAM_BATCH_BYTES`), reused
        from batch to batch (each is written out before the next is formatted):
        new ones came as fresh pages, which the kernel zeroes first."""
        if self._records.size < nbytes:
            self._records = np.empty(nbytes + nbytes // 8, dtype=np.uint8)  # room for slightly longer batches
        return self._records[:nbytes]

    @property
    def device(self):
        if isinstance(self._device, Future):
            self._device = self._device.result()
        return self._device

    def _write(self, data) -> None:
        # An OSError here is the output's (disk full, a closed pipe), told
        # apart from the OSErrors of a Dask cluster that went away.
        try:
            self.file.write(data)
            if self._cache.fd is not None:
                self.file.flush()
                self._cache.wrote(self.file.tell())
        except OSError as e:
            raise OutputError.writing(self.name, e, self.after_failure) from None

    def write_header(self, text: str) -> None:
        self._write(text.encode())

    def write_records(self, chunk: ReadChunk, hits: ChunkHits | ChunkAlignments) -> None:
        if isinstance(hits, ChunkAlignments):
            self._write(format_alignment_records(chunk, hits, self.contig_names, self.tail).encode())
            return
        pick = primaries(chunk, hits.counts())
        if self.device is not None:
            if self._name_columns is None:
                self._name_columns = contig_name_columns(self.contig_names)
            for records in format_records_device(self.device, chunk, hits, self.contig_names, self.max_hits,
                                                 self._name_columns, self._records_buffer, tail=self.tail,
                                                 pick=pick):
                self._write(records)
        else:
            self._write(format_records(chunk, hits, self.contig_names, self.max_hits, self.tail, pick).encode())
