"""dmap: FM-index read mapping on a Dask cluster of OpenCL devices.

The public names below are imported on first use (PEP 562): mapping needs
Dask and distributed, whose imports take 0.3-0.4 s, but ``dmap index``,
``dmap index info`` and ``dmap --help`` do not (docs/performance.md).
``from dmap import map_reads`` and ``dmap.map_reads`` work as with plain
imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__

if TYPE_CHECKING:  # what type checkers and editors see; at run time, __getattr__ below
    from .cluster.client import LocalDeviceCluster  # noqa: F401
    from .cluster.scaling import measure_workers, part_configurations  # noqa: F401
    from .cluster.worker import device_stats  # noqa: F401
    from .errors import ClusterError, DeviceError, DmapError, IndexFormatError, InputFormatError  # noqa: F401
    from .examples import write_example, write_example_pairs  # noqa: F401
    from .index import Index, build_index, open_index  # noqa: F401
    from .io.manifest import Manifest, read_manifest  # noqa: F401
    from .mapping.pipeline import map_reads  # noqa: F401
    from .mapping.result import Hits, MappingResult  # noqa: F401
    from .neighborhood.params import NeighborhoodSpec  # noqa: F401

# Public name -> the module that defines it.
_EXPORTS = {
    "build_index": ".index",
    "open_index": ".index",
    "Index": ".index",
    "NeighborhoodSpec": ".neighborhood.params",
    "map_reads": ".mapping.pipeline",
    "read_manifest": ".io.manifest",
    "Manifest": ".io.manifest",
    "device_stats": ".cluster.worker",
    "MappingResult": ".mapping.result",
    "Hits": ".mapping.result",
    "LocalDeviceCluster": ".cluster.client",
    "write_example": ".examples",
    "write_example_pairs": ".examples",
    "measure_workers": ".cluster.scaling",
    "part_configurations": ".cluster.scaling",
    "DmapError": ".errors",
    "InputFormatError": ".errors",
    "IndexFormatError": ".errors",
    "DeviceError": ".errors",
    "ClusterError": ".errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dmap' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
