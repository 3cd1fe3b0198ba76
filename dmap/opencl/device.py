"""OpenCL devices: one context per device, compiled programs and
index blocks kept resident in device memory between tasks.

Nothing here is pickled: a :class:`Device` is created inside the process
that uses it (a Dask worker), never sent between processes.

This is the one layer that touches OpenCL's contexts, queues and buffers
(devices are found in :mod:`dmap.opencl.discovery`, programs built in
:mod:`dmap.opencl.programs`); the kernels' host wrappers call it.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DeviceError
from ..host import RecycledArrays
from ..index.occ import OccShape
from ..index.store import BLOCK_ARRAYS, BlockArrays, Index
from .discovery import _cl, list_devices, resolve
from .programs import KernelCache, build_quietly

if TYPE_CHECKING:  # pyopencl is imported where a device is first used (discovery._cl)
    import pyopencl as cl

# Dask resource that device tasks ask for; workers with a device declare it (``opencl=1``).
DEVICE_RESOURCE = "opencl"
# Device tasks that run at once on a worker, each on its own thread's command queue and buffers
# (a "buffer set", BowMapCL 4.3.1): a task asks for this share of the device.  While one task's
# kernels run, another's host work (regions, patterns, merging, records) goes on; with one at a
# time, a 2-thread worker ran one task 80% of an `-e 3` run (docs/performance.md, "Buffer sets").
BUFFER_SETS = 2
DEVICE_SHARE = 1 / BUFFER_SETS
DEVICE_PLUGIN = "dmap-device"  # the name of each device worker's dmap.cluster.worker.DevicePlugin


def device_resource(threads: int) -> float:
    """What a device worker of ``threads`` task threads declares of :data:`DEVICE_RESOURCE`:
    a device task per thread, each thread having its own buffer set (1 for 2 threads)."""
    return threads * DEVICE_SHARE


def device_tasks(resource: float) -> int:
    """How many device tasks at once a worker that declares ``resource`` of
    :data:`DEVICE_RESOURCE` runs (at least one): the inverse of :func:`device_resource`."""
    return max(1, int(resource / DEVICE_SHARE + 1e-9))


def kernel_dir() -> Path:
    """Folder of the ``.cl`` sources: inside the installed package, or the checkout's ``kernels/``."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "kernels", package.parent / "kernels"):
        if (candidate / "occ.cl").exists():
            return candidate
    raise DeviceError(f"the OpenCL kernel sources are missing (looked in {package / 'kernels'}); reinstall dmap")


# Work-items per work-group of every kernel launch, as measured fastest for the
# search kernel with benchmarks/kernel_speed.py (docs/performance.md).
WORK_GROUP = 128


def launch_size(work_items: int) -> tuple[tuple[int], tuple[int]]:
    """Global and local sizes of a launch: the global size rounded up to whole groups."""
    return (-(-work_items // WORK_GROUP) * WORK_GROUP,), (WORK_GROUP,)


@dataclass
class DeviceBlock:
    """An index block in device memory, and the sizes its kernels need.

    The host arrays are not kept: on a CPU device the buffers are host
    memory already, and holding both doubled the memory of resident blocks.
    """

    buffers: dict
    nbytes: int
    shape: OccShape
    start: int
    own_length: int
    sa_sample_rate: int
    n_boundary: int


@dataclass
class ReverseOcc:
    """A block's reversed-text ``occ`` and ``C`` on a device (the edit-seed lower bound)."""

    buffers: dict
    nbytes: int
    shape: OccShape


@dataclass
class BlockText:
    """A block's reference text (codes), on the host and on the device."""

    host: np.ndarray
    buffer: object
    nbytes: int


class Device:
    """An OpenCL device with its context, queue, programs and resident blocks.

    Parameters
    ----------
    spec
        ``"platform:device"`` indices as printed by ``dmap devices``; ``None``
        takes ``$DMAP_DEVICE`` or else the first device.
    """

    def __init__(self, spec: str | None = None):
        cl = self.cl = _cl()
        spec = spec or os.environ.get("DMAP_DEVICE") or list_devices()[0].spec
        self.device = resolve(cl, spec)
        self.spec = spec
        self.name = self.device.name.strip()
        self.context = cl.Context([self.device])
        # One command queue per worker thread: each thread's buffers and
        # kernels form one "buffer set" (BowMapCL 4.3.1), so copies and
        # kernels of different chunks overlap instead of queueing behind
        # each other in one in-order queue.
        self._local = threading.local()
        self.max_alloc = self.device.max_mem_alloc_size
        # A device that shares the host's memory (a CPU, an integrated GPU)
        # uses numpy arrays in place: copying each chunk's reads in and
        # results out (into fresh pages, zeroed first) cost 0.26 CPU-seconds
        # per 1M reads, and a warm exact mapping run took 2.22 s instead of
        # 1.92 s (docs/performance.md).
        self.zero_copy = _shares_host_memory(self.device)
        # Blocks kept resident: up to half the device memory, least recently used out first.
        # $DMAP_BLOCK_BUDGET (bytes) overrides it, e.g. to share a device.
        self.block_budget = int(os.environ.get("DMAP_BLOCK_BUDGET") or self.device.global_mem_size // 2)
        self._programs: dict = {}
        self._kernel_cache = KernelCache(self.cl)
        self._blocks: OrderedDict = OrderedDict()
        self.scratch_buffers_made = 0  # device buffers :meth:`scratch` pools made, over all threads
        self.recycled = RecycledArrays()  # host arrays for results that leave the task (recycled_array)
        self._lock = threading.RLock()
        self._tally_lock = threading.Lock()
        self.block_loads = 0
        self.queries_searched = 0  # (read, strand) pairs, for the workers page
        self.candidates = collections.Counter()  # "seed hits", "regions" of approximate mapping
        self.seconds: collections.Counter = collections.Counter()  # label of Device.timed -> seconds

    def tally(self, counter: str, amount: float = 1, key: str | None = None) -> None:
        """Add ``amount`` to the counter attribute ``counter`` (to its entry ``key``, for
        ``candidates`` and ``seconds``): :data:`BUFFER_SETS` tasks count at once."""
        with self._tally_lock:
            if key is None:
                setattr(self, counter, getattr(self, counter) + amount)
            else:
                getattr(self, counter)[key] += amount

    @property
    def is_gpu(self) -> bool:
        """Whether this is a GPU (kernels that pay only where many work-items run in lockstep use it)."""
        return bool(self.device.type & self.cl.device_type.GPU)

    @contextlib.contextmanager
    def timed(self, label: str) -> Iterator[None]:
        """Time a step under ``label``: in this device's running totals
        (``seconds``, shown on the dmap dashboard page) and in Dask's Fine
        Performance Metrics (a no-op outside a Dask task)."""
        from distributed.metrics import context_meter

        start = time.perf_counter()
        try:
            with context_meter.meter(label):
                yield
        finally:
            self.tally("seconds", time.perf_counter() - start, label)

    def run(self, program: cl.Program, name: str, args: list, work_items: int = 0, label: str | None = None,
            size: tuple[tuple[int, ...], tuple[int, ...]] | None = None, wait: bool = True) -> None:
        """Launch kernel ``name`` of ``program`` with ``args`` on this device's queue.

        Over ``work_items`` rounded up to whole work-groups (:func:`launch_size`),
        or over an explicit ``size`` (global, local); timed under ``label``
        (:meth:`timed`) and waited for unless ``wait`` is False (a read-back
        that blocks follows).  Each thread has its own kernel objects
        (:meth:`_kernel`); the caller keeps its buffers alive until
        the results are read, as OpenCL kernels need not retain their arguments.
        """
        kernel = self._kernel(program, name)
        kernel.set_args(*args)
        with self.timed(label) if label else contextlib.nullcontext():
            event = self.cl.enqueue_nd_range_kernel(self.queue, kernel, *(size or launch_size(work_items)))
            if wait:
                event.wait()

    def _kernel(self, program, name: str):
        """This thread's kernel object ``name`` of ``program``, made once.

        One per thread, since ``set_args`` is not thread-safe. Not one per launch: pyopencl
        makes a kernel's argument setter from its on-disk cache (``in_mem_cache_size=0``,
        a SQLite read, an unpickle and a ``compile``) each time a kernel object is made, 0.4 ms
        a launch. Each entry holds its program, so the id it is kept under is not reused.
        """
        kernels = getattr(self._local, "kernels", None)
        if kernels is None:
            kernels = self._local.kernels = {}
        held = kernels.get((id(program), name))
        if held is None:
            held = kernels[id(program), name] = (program, self.cl.Kernel(program, name))
        return held[1]

    @property
    def queue(self) -> cl.CommandQueue:
        """This thread's command queue on the device."""
        q = getattr(self._local, "queue", None)
        if q is None:
            q = self._local.queue = self.cl.CommandQueue(self.context)
        return q

    def __repr__(self) -> str:
        return f"<Device {self.spec} {self.name}>"

    def program(self, source: str, defines: dict[str, int]) -> cl.Program:
        """Build a kernel file once per process, from the binary cache when it has it (see :class:`KernelCache`)."""
        key = (source, tuple(sorted(defines.items())))
        with self._lock:
            prg = self._programs.get(key)
            if prg is None:
                kdir = kernel_dir()
                options = [f"-D{k}={v}" for k, v in sorted(defines.items())]
                # Includes are inlined rather than found with -I: the source and
                # options then do not depend on where dmap is installed, so
                # the binary cache serves every checkout.
                text = re.sub(r'#include "(\w+\.cl)"', lambda m: (kdir / m.group(1)).read_text(),
                              (kdir / source).read_text())
                prg = self._kernel_cache.load(self.context, self.device, text, options)
                if prg is None:
                    try:
                        prg = build_quietly(self.cl, self.cl.Program(self.context, text), options, self.device)
                    except self.cl.Error as e:
                        failure = f"building {source} for {self.name} failed: {e}"
                    else:
                        failure = None
                    if failure is not None:
                        # Raised out of the handler, as device_task does: an error whose context is
                        # pyopencl's does not pickle, and the client was handed a bare Exception.
                        raise DeviceError(failure)
                    self._kernel_cache.store(self.device, text, options, prg)
                self._programs[key] = prg
            return prg

    def upload(self, array: np.ndarray) -> cl.Buffer:
        """A read-only device buffer holding ``array`` (never empty).

        Where the device shares host memory the buffer *is* ``array``
        (``USE_HOST_PTR``; pyopencl keeps the array alive with it), so the
        caller must not change ``array`` while kernels may read it.  Elsewhere
        ``array`` is copied, into a pooled buffer inside :meth:`scratch`.
        """
        mf = self.cl.mem_flags
        data = np.ascontiguousarray(array if array.size else np.zeros(1, dtype=array.dtype))
        if data.nbytes > self.max_alloc:
            raise DeviceError(
                f"a {data.nbytes >> 20} MiB buffer exceeds {self.name}'s allocation limit of "
                f"{self.max_alloc >> 20} MiB; rebuild the index with a smaller --block-length"
            )
        if self.zero_copy:
            return self.cl.Buffer(self.context, mf.READ_ONLY | mf.USE_HOST_PTR, hostbuf=data)
        buffer = self._take(data.nbytes)
        if buffer is None:
            return self.cl.Buffer(self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=data)
        self.cl.enqueue_copy(self.queue, buffer, data)
        return buffer

    def output(self, host: np.ndarray) -> cl.Buffer:
        """A write-only device buffer for a kernel's results, which :meth:`read_back` puts in ``host``."""
        mf = self.cl.mem_flags
        if self.zero_copy and host.nbytes:
            return self.cl.Buffer(self.context, mf.WRITE_ONLY | mf.USE_HOST_PTR, hostbuf=host)
        return self.buffer(host.nbytes)

    def buffer(self, nbytes: int) -> cl.Buffer:
        """A device buffer of at least ``nbytes`` (never empty), its contents undefined, for
        kernels to write and read: pooled inside :meth:`scratch`.

        Made afresh, a buffer is made and let go with the interpreter lock held (pyopencl
        keeps it through ``clCreateBuffer`` and ``clReleaseMemObject``), and on a discrete
        GPU each costs more than a copy into a pooled one (:meth:`scratch`)."""
        buffer = self._take(max(nbytes, 1))
        if buffer is None:
            return self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE, max(nbytes, 1))
        return buffer

    def read_back(self, buffer: cl.Buffer, host: np.ndarray) -> None:
        """Wait for the kernels writing ``buffer`` (from :meth:`output`) and make ``host`` hold their results."""
        if not host.nbytes:
            return
        if self.zero_copy:
            # Mapping makes the kernel's writes visible in `host`, without a copy.
            mapped, _ = self.cl.enqueue_map_buffer(self.queue, buffer, self.cl.map_flags.READ, 0, host.shape,
                                                   host.dtype)
            mapped.base.release(self.queue)
        else:
            self.cl.enqueue_copy(self.queue, host, buffer)

    def host_array(self, nbytes: int) -> np.ndarray:
        """A uint8 array of ``nbytes`` for a kernel's results to be read back into.

        Inside :meth:`scratch`, on a device that gets copies, the array lies
        in pinned (page-locked) host memory from this thread's pool, and is
        valid only until the block ends: the caller must be done with it by
        then.  A GPU writes pinned memory by DMA, 14x faster than fresh
        pages (1.2 ms against 16.6 ms for 64 MiB on an H100,
        ``benchmarks/transfers.py``).  Elsewhere it is a :meth:`recycled_array`.
        """
        pinned = None if self.zero_copy else self._take(nbytes, pinned=True)
        return self.recycled_array(nbytes) if pinned is None else pinned[1][:nbytes]

    def recycled_array(self, nbytes: int) -> np.ndarray:
        """A uint8 array of ``nbytes`` for results that outlive the task, in memory that
        earlier results no longer use (:class:`RecycledArrays`)."""
        return self.recycled.take(nbytes)

    @contextlib.contextmanager
    def scratch(self) -> Iterator[None]:
        """Within this block, the buffers that :meth:`upload`, :meth:`output` and
        :meth:`host_array` make in this thread come from the thread's pool,
        and go back to it when the block ends.

        A task's buffers live as long as the task, and the next task needs
        buffers of about the same sizes.  On a discrete GPU making a buffer
        costs 4x copying into one: 28 ms against 6.7 ms for 64 MiB on an H100
        (``benchmarks/transfers.py``, docs/performance.md "GPU").  Buffers
        are pooled by size rounded up to a power of two, per thread, so no
        lock is taken and a buffer is never shared between two queues.  The
        resident cache (blocks, texts, tables) never takes pooled buffers.  A
        device that shares host memory makes none (:meth:`upload`).

        The pool follows the work: when a block ends, free buffers that it did
        not take are let go, largest first, until they hold at most twice the
        thread's recent need (what this block took, or half the need before,
        if more: a search task and a records task alternate on a thread and
        take different sets), so a worker whose runs change (exact, then
        ``-e K``, then pairs) lets go of sizes it no longer uses within a few
        tasks.
        """
        local = self._local
        outer, local.taken = getattr(local, "taken", None), []
        ok = False
        try:
            yield
            ok = True
        finally:
            taken, local.taken = local.taken, outer
            if taken:
                try:
                    self.queue.finish()  # no kernel or copy of this block still uses them
                except self.cl.Error:
                    ok = False
                if ok:  # after a failure they may be in any state: dropped
                    pool = self._pool()
                    local.need = max(sum(_key_bytes(key) for key, _ in taken), getattr(local, "need", 0) // 2)
                    _trim(pool, 2 * local.need)
                    for key, item in taken:
                        pool.setdefault(key, []).append(item)

    def _pool(self) -> dict:
        """This thread's free scratch buffers: size (device) or ("host", size) (pinned) -> list."""
        if not hasattr(self._local, "pool"):
            self._local.pool = {}
        return self._local.pool

    def _take(self, nbytes: int, pinned: bool = False):
        """Inside :meth:`scratch`, a pooled device buffer of at least ``nbytes`` (with ``pinned``:
        a pinned host buffer and the array mapping it), made if the pool has none; else None."""
        taken = getattr(self._local, "taken", None)
        if taken is None:
            return None
        size = _size_class(nbytes, self.max_alloc)
        key = ("host", size) if pinned else size
        free = self._pool().get(key)
        if free:
            item = free.pop()
        else:
            mf = self.cl.mem_flags
            item = self.cl.Buffer(self.context, mf.READ_WRITE | (mf.ALLOC_HOST_PTR if pinned else 0), size)
            if pinned:
                flags = self.cl.map_flags.READ | self.cl.map_flags.WRITE
                array, _ = self.cl.enqueue_map_buffer(self.queue, item, flags, 0, (size,), np.uint8)
                item = (item, array)
            self.tally("scratch_buffers_made")
        taken.append((key, item))
        return item

    def _resident(self, key, load, upload):
        """The cached device copy under ``key``, else ``upload(load())`` after evicting
        least recently used entries until it fits the block budget."""
        with self._lock:
            if key in self._blocks:
                self._blocks.move_to_end(key)
                return self._blocks[key], False
            host = load()
            while self._blocks and sum(b.nbytes for b in self._blocks.values()) + host.nbytes > self.block_budget:
                self._blocks.popitem(last=False)
            # Resident buffers outlive the task that loads them: never from the scratch pool.
            local = self._local
            taken, local.taken = getattr(local, "taken", None), None
            try:
                item = self._blocks[key] = upload(host)
            finally:
                local.taken = taken
            return item, True

    def block(self, index: Index, number: int) -> DeviceBlock:
        """Block ``number`` of ``index`` on this device, loading it on first use."""
        blk, loaded = self._resident((index.uid, number), lambda: index.load_block(number), self.upload_block)
        if loaded:
            self.tally("block_loads")
        return blk

    def derived(self, key: tuple, nbytes: int, make: Callable[[], Any]) -> Any:
        """A device object of ``nbytes`` that ``make()`` builds from resident ones (a block's
        k-mer table, :func:`dmap.search.kmers.kmer_table`), cached like blocks under ``key``."""
        item, _ = self._resident(key, lambda: _Bytes(nbytes), lambda _: make())
        return item

    def block_text(self, index: Index, number: int) -> BlockText:
        """Block ``number``'s text on this device (and on the host, for tracebacks), cached like blocks."""
        text, _ = self._resident((index.uid, number, "text"), lambda: index.block_text(number),
                                 lambda host: BlockText(host, self.upload(host), int(host.nbytes)))
        return text

    def reverse_occ(self, index: Index, number: int) -> ReverseOcc:
        """Block ``number``'s reversed-text occurrence table on this device, cached like blocks."""
        shape = OccShape(index.meta.occ_layout, index.alphabet.sigma, index.meta.occ_sample_rate,
                         index.meta.blocks[number].n_rows)
        rev, _ = self._resident((index.uid, number, "reverse"), lambda: _Sized(index.load_reverse(number)),
                                lambda host: self.upload_reverse(host.arrays, shape))
        return rev

    def upload_reverse(self, arrays: dict[str, np.ndarray], shape: OccShape) -> ReverseOcc:
        """Copy a reversed text's ``occ`` and ``C`` to the device (uncached; :meth:`reverse_occ` caches)."""
        return ReverseOcc({k: self.upload(arrays[k]) for k in ("occ", "C")},
                          sum(int(arrays[k].nbytes) for k in ("occ", "C")), shape)

    def neighborhood(self, index: Index, number: int, upload: Callable[[Device, dict[str, np.ndarray]], Any]) -> Any:
        """Block ``number``'s neighborhood index on this device, cached like blocks;
        ``upload(device, arrays)`` (:func:`dmap.neighborhood.search.upload_neighborhood`) copies it there."""
        store, loaded = self._resident((index.uid, number, "neighborhood"), lambda: _Sized(index.load_neighborhood(
            number)), lambda host: upload(self, host.arrays))
        if loaded:
            self.tally("block_loads")
        return store

    def upload_block(self, host: BlockArrays) -> DeviceBlock:
        """Copy a block's arrays to the device (uncached; :meth:`block` caches)."""
        buffers = {name: self.upload(getattr(host, name)) for name in BLOCK_ARRAYS}
        return DeviceBlock(buffers, host.nbytes, host.shape, host.start, host.own_length, host.sa_sample_rate,
                           int(host.boundary_rows.size))


@dataclass
class _Sized:
    """Host arrays with the ``nbytes`` the resident cache budgets by."""

    arrays: dict

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays.values())


@dataclass
class _Bytes:
    """The size of a device object made on the device, for the resident cache's budget."""

    nbytes: int


_process_device: Device | None = None
# Devices being made ahead of their first use (start_devices), by spec; each is handed over once.
_early: dict[str | None, concurrent.futures.Future] = {}
_early_lock = threading.Lock()


def start_devices(specs: Iterable[str | None]) -> None:
    """Begin making the :class:`Device` of each of ``specs`` (``None``: the default device)
    in a thread of its own, for :func:`take_device` to hand over.

    Making a device is mostly making its OpenCL context, native code that lets the
    interpreter run on: 0.45-0.75 s on an NVIDIA H100, 1.6 s each when 8 worker
    processes make theirs at once (25 ms for PoCL's CPU device). A worker made it in
    its first task, after its start, and the embedded cluster's process after importing
    Dask; begun here it overlaps them. A spec already being made is left alone. The
    threads are not daemons: the interpreter waits for them before it exits, so no
    process leaves OpenCL while one is still inside the driver.
    """
    with _early_lock:
        for spec in specs:
            if spec in _early:
                continue
            future: concurrent.futures.Future = concurrent.futures.Future()
            _early[spec] = future
            threading.Thread(target=_make_early, args=(spec, future), name=f"dmap-device-{spec}").start()


def _make_early(spec: str | None, future: concurrent.futures.Future) -> None:
    try:
        future.set_result(Device(spec))
    except BaseException as e:  # handed to take_device, which makes the device again and raises there
        future.set_exception(e)


def take_device(spec: str | None) -> Device:
    """The :class:`Device` of ``spec``: the one :func:`start_devices` began, once it is made,
    else a new one. Each device begun is handed over once, so every worker has its own
    (its counters and resident blocks start empty)."""
    with _early_lock:
        future = _early.pop(spec, None)
    if future is not None:
        try:
            return future.result()
        except Exception:  # made again here, so that the error is raised where the device is used
            pass
    return Device(spec)


def _key_bytes(key: int | tuple[str, int]) -> int:
    """The size of the buffers pooled under ``key``: ``size`` (device) or ``("host", size)`` (pinned)."""
    return key if isinstance(key, int) else key[1]


def _trim(pool: dict, keep: int) -> None:
    """Let go of ``pool``'s buffers, largest first, until they hold at most ``keep`` bytes."""
    total = sum(_key_bytes(key) * len(items) for key, items in pool.items())
    for key in sorted(pool, key=_key_bytes, reverse=True):
        while total > keep and pool[key]:
            pool[key].pop(0)  # the oldest of its size; OpenCL frees it once nothing uses it
            total -= _key_bytes(key)
        if not pool[key]:
            del pool[key]


def _size_class(nbytes: int, limit: int) -> int:
    """The size a pooled buffer of ``nbytes`` is made with: a power of two, at least 4 KiB,
    but ``nbytes`` itself where the power of two would pass the device's allocation ``limit``."""
    size = max(4096, 1 << (nbytes - 1).bit_length())
    return size if size <= limit else nbytes


def _shares_host_memory(device) -> bool:
    """Whether ``device`` works on host memory itself (CL_DEVICE_HOST_UNIFIED_MEMORY)."""
    try:
        return bool(device.host_unified_memory)
    except Exception:  # deprecated since OpenCL 2.0; a driver may not answer
        return False


def current_device() -> Device:
    """The device of the calling Dask worker (or of this process outside Dask).

    A worker started by dmap carries a :class:`dmap.cluster.worker.DevicePlugin` that
    names its device; elsewhere the device comes from ``$DMAP_DEVICE`` or is
    the first one found.
    """
    global _process_device
    try:
        from distributed import get_worker

        plugin = get_worker().plugins.get(DEVICE_PLUGIN)
    except ValueError:  # not inside a worker
        plugin = None
    if plugin is not None:
        return plugin.device
    if _process_device is None:
        _process_device = Device()
    return _process_device


def device_task(task: Callable) -> Callable:
    """``task`` run on :func:`current_device`, with the device buffers it makes pooled on
    this thread (:meth:`Device.scratch`: a task's buffers die with it, and the next task
    needs the same sizes), and an OpenCL error in it (out of memory on a GPU that another
    process fills, a device lost) raised as a :class:`~dmap.errors.DeviceError` that names
    the device."""

    @functools.wraps(task)
    def run(*args, **kwargs):
        device = current_device()
        try:
            with device.scratch():
                return task(*args, **kwargs)
        except device.cl.Error as e:
            failure = f"the OpenCL device {device.name} failed: {type(e).__name__}: {e}"
        # Raised out of the handler, with no pyopencl error as its context: Dask pickles a
        # task's error with its chain, pyopencl's errors do not pickle, and the client was
        # handed "Exception: LogicError(<pyopencl._cl._ErrorRecord object at 0x...>)".
        raise DeviceError(failure)

    return run
