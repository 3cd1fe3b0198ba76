"""OpenCL programs: built quietly, and kept on disk as binaries so that a new
process builds its kernels in milliseconds (used by :class:`dmap.opencl.device.Device`)."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import warnings
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from .discovery import user_cache_home

if TYPE_CHECKING:
    import pyopencl as cl_


logger = logging.getLogger(__name__)

_BUILD_LOCK = threading.Lock()


def build_quietly(cl: ModuleType, program: cl_.Program, options: list[str], device: cl_.Device) -> cl_.Program:
    """``program`` built, its compiler output logged at debug level (``dmap run -v``) instead of warned.

    NVIDIA's compiler says "Function ... is a kernel, so overriding noinline
    attribute" of every kernel, which pyopencl turns into a CompilerWarning
    with a traceback line on the user's terminal.  A failed build still
    raises with the log in its message.
    """
    # catch_warnings swaps process-wide filters: two threads building at once
    # (a worker's device and this process's, for SAM) could restore each
    # other's and let the warning through, as seen on NVIDIA's driver.
    with _BUILD_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        prg = program.build(options=options)
    log = prg.get_build_info(device, cl.program_build_info.LOG).strip()
    if log:
        logger.debug("compiler output for %s: %s", device.name.strip(), log)
    return prg


class KernelCache:
    """Compiled kernels kept on disk, so a new process builds them from binaries.

    pyopencl leaves caching to PoCL, whose cache still runs the C
    preprocessor over the source to find its key: 25-45 ms per kernel file,
    against 2-10 ms from a binary, and a mapping run builds three of them
    before its first results (docs/performance.md).

    Binaries live in ``$DMAP_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/dmap/kernels``
    (``~/.cache/dmap/kernels``), one file per source, options, device and
    driver, each with its SHA-256; ``DMAP_KERNEL_CACHE=off`` turns the cache
    off.  A damaged binary, or one the driver refuses, is rebuilt from
    source, and a cache that cannot be written is not used.
    """

    def __init__(self, cl):
        self.cl = cl
        where = os.environ.get("DMAP_KERNEL_CACHE")
        if where is None:
            where = os.path.join(user_cache_home(), "dmap", "kernels")
        self.folder = None if where.lower() in ("", "off", "0", "no") else Path(where)
        self.loads = 0  # programs built from a cached binary, for tests

    def _path(self, device, text: str, options: list[str]) -> Path:
        h = hashlib.sha256()
        for part in (text, *options, device.name, device.version, device.driver_version, device.platform.name,
                     device.platform.version, self.cl.VERSION_TEXT):
            h.update(part.encode() + b"\0")
        return self.folder / f"{h.hexdigest()}.bin"

    def load(self, context: cl_.Context, device: cl_.Device, text: str, options: list[str]) -> cl_.Program | None:
        """The program built from its cached binary, or None."""
        if self.folder is None:
            return None
        try:
            stored = self._path(device, text, options).read_bytes()
        except OSError:
            return None
        # A damaged binary could crash the driver rather than fail to build.
        digest, binary = stored[:32], stored[32:]
        if hashlib.sha256(binary).digest() != digest:
            return None
        try:
            prg = build_quietly(self.cl, self.cl.Program(context, [device], [binary]), options, device)
        except self.cl.Error:  # e.g. a driver update the key missed: build from source instead
            return None
        self.loads += 1
        return prg

    def store(self, device: cl_.Device, text: str, options: list[str], prg: cl_.Program) -> None:
        """Keep ``prg``'s binary (written under a temporary name, then renamed)."""
        if self.folder is None:
            return
        try:
            (binary,) = prg.get_info(self.cl.program_info.BINARIES)
            if not binary:
                return
            path = self._path(device, text, options)
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
            partial.write_bytes(hashlib.sha256(binary).digest() + binary)
            os.replace(partial, path)
        except (OSError, ValueError, self.cl.Error):
            pass  # a read-only home: every process builds from source, as without the cache
