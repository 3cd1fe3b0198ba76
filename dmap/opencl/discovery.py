"""The OpenCL devices of this machine: listing them (``dmap devices``) and resolving a
worker's device spec (``P:D``, or ``P:D/N:K`` for a part of a split device)."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import DeviceError
from ..host import allowed_cores

if TYPE_CHECKING:
    import pyopencl as cl_


# Signal handlers that the OpenCL runtime must not take over (keep_signal_handlers).
_kept_handlers: dict[int, Callable] = {}


def keep_signal_handlers(handlers: dict[int, Callable]) -> None:
    """Put ``handlers`` back each time OpenCL lists a platform's devices in the main thread.

    The LLVM inside PoCL installs its own handlers for SIGUSR1, SIGUSR2, SIGXCPU, SIGTERM and
    more when PoCL first lists its devices.  It passes SIGTERM, SIGHUP, SIGINT and SIGUSR2 on to
    the handler it replaced, but takes SIGUSR1 for itself and SIGXCPU once, and neither ends
    the process: a run sent SIGUSR1 (SLURM's ``--signal=B:USR1@N``) went on.  LLVM installs its
    handlers once per process, so putting these back after the first listing keeps them.
    """
    _kept_handlers.update(handlers)


def _devices(platform) -> list:
    """``platform``'s devices; the kept signal handlers put back (:func:`keep_signal_handlers`)."""
    devices = platform.get_devices()
    if _kept_handlers and threading.current_thread() is threading.main_thread():
        for signum, handler in _kept_handlers.items():
            signal.signal(signum, handler)
    return devices


def _cl():
    """pyopencl, imported with PoCL's CPU device kept to the cores this process may run on
    (:func:`dmap.host.allowed_cores`) unless told otherwise: every OpenCL start in dmap comes here."""
    cores = allowed_cores()
    if cores is not None:
        limit_cpu_threads(cores)  # the user's and -t's values are kept
    usable_cache_home()
    try:
        import pyopencl as cl
    except ImportError as e:  # pragma: no cover - pyopencl is a dependency
        raise DeviceError(f"pyopencl cannot be imported ({e}); install dmap's dependencies") from None
    return cl


def user_cache_home() -> str:
    """The user's cache folder: ``$XDG_CACHE_HOME``, else ``~/.cache``."""
    return os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


def usable_cache_home() -> str | None:
    """Point ``$XDG_CACHE_HOME`` at a folder of the temporary directory where the user's
    cache folder (``$XDG_CACHE_HOME``, else ``~/.cache``) cannot be made or written; the
    folder it now names, or None where the user's serves.

    OpenCL's layers keep caches there and fail without them: PoCL lists no device at all
    when it cannot make its folder (``pocl``), and pyopencl fails the first kernel launch
    when its invoker cache (pytools' ``pytools``) cannot be made, as on compute nodes that
    mount homes read-only or for a container's user whose home is not theirs. dmap's own
    kernel binaries (:class:`dmap.opencl.programs.KernelCache`) follow the same variable.
    """
    base = user_cache_home()
    try:
        os.makedirs(base, exist_ok=True)
        if os.access(base, os.W_OK | os.X_OK):
            return None
    except OSError:
        pass
    folder = os.path.join(tempfile.gettempdir(), f"dmap-cache-{os.getuid()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.stat(folder).st_uid != os.getuid():  # someone else's: not ours to fill
            return None
    except OSError:
        return None
    os.environ["XDG_CACHE_HOME"] = folder
    return folder


def limit_cpu_threads(threads: int) -> None:
    """Let PoCL's CPU device run kernels on at most ``threads`` cores, in this process
    and the worker processes it starts.  PoCL reads these variables when OpenCL
    starts: ``POCL_MAX_PTHREAD_COUNT`` for its pthread driver (PoCL 3.1, Debian
    12), ``POCL_CPU_MAX_CU_NUM`` for its cpu driver (newer PoCL).  Values the
    user set are kept."""
    for name in ("POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_NUM"):
        os.environ.setdefault(name, str(threads))


@dataclass
class DeviceInfo:
    """One OpenCL device as listed by ``dmap devices``."""

    spec: str  # "platform:device", how workers are pinned to it
    platform: str
    name: str
    type: str
    compute_units: int
    global_mem: int
    local_mem: int
    max_alloc: int
    version: str
    max_split: int  # sub-devices it can be split into (1: no fission)


def list_devices() -> list[DeviceInfo]:
    """Every OpenCL device on this machine.

    Raises
    ------
    DeviceError
        If no OpenCL platform or device is found.
    """
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:
        platforms = []
        reason = str(e)
    else:
        reason = ("no OpenCL platform is installed" if not platforms else
                  f"the OpenCL platforms {', '.join(repr(p.name.strip()) for p in platforms)} list no device")
    out = []
    for p_i, p in enumerate(platforms):
        try:
            devices = _devices(p)
        except cl.Error:
            continue
        for d_i, d in enumerate(devices):
            out.append(
                DeviceInfo(
                    spec=f"{p_i}:{d_i}",
                    platform=p.name.strip(),
                    name=d.name.strip(),
                    type=cl.device_type.to_string(d.type),
                    compute_units=d.max_compute_units,
                    global_mem=d.global_mem_size,
                    local_mem=d.local_mem_size,
                    max_alloc=d.max_mem_alloc_size,
                    version=d.version.strip(),
                    max_split=max(d.partition_max_sub_devices, 1) if d.partition_properties else 1,
                )
            )
    if not out:
        raise DeviceError(
            f"no OpenCL device found ({reason}); install an OpenCL driver, e.g. 'apt-get install pocl-opencl-icd' "
            "for the CPU or your GPU vendor's driver"
        )
    return out


def resolve(cl: ModuleType, spec: str) -> cl_.Device:
    """The OpenCL device of a spec: ``P:D``, or ``P:D/N:K`` for part K of P:D split into N equal parts.

    Splitting (device fission) lets several workers share one CPU device
    without fighting over its cores.
    """
    whole, _, part = spec.partition("/")
    device, platforms_listed = None, True
    try:
        p_i, d_i = (int(x) for x in whole.split(":"))
        device = _devices(cl.get_platforms()[p_i])[d_i]
    except (ValueError, IndexError):
        pass
    except cl.Error:  # no platform at all: the ICD loader's answer
        platforms_listed = False
    # Raised out of the handlers: an error whose context is pyopencl's does not pickle, and a
    # worker's would reach the client as a bare Exception (dmap.opencl.device.device_task).
    if device is None:
        if not platforms_listed:
            list_devices()  # raises, saying what to install
        raise DeviceError(f"no OpenCL device {spec!r}; 'dmap devices' lists them as PLATFORM:DEVICE")
    if not part:
        return device
    try:
        n, k = (int(x) for x in part.split(":"))
    except ValueError:
        raise DeviceError(f"device spec {spec!r}: a split is written P:D/N:K (part K of N)") from None
    units = device.max_compute_units
    if not (1 <= n <= max(device.partition_max_sub_devices, 1) and n <= units and 0 <= k < n):
        raise DeviceError(
            f"device {whole} cannot be split into {n} parts (it has {units} compute units and allows at most "
            f"{device.partition_max_sub_devices} sub-devices) or has no part {k}"
        )
    try:
        return device.create_sub_devices([cl.device_partition_property.EQUALLY, units // n])[k]
    except cl.Error as e:
        failure = f"device {whole} does not support splitting: {e}"
    raise DeviceError(failure)  # out of the handler, as above
