"""dmap: FM-index read mapping on a Dask cluster of OpenCL devices."""

__version__ = "0.1.0"

from .cluster import LocalDeviceCluster  # noqa: E402
from .errors import ClusterError, DeviceError, DmapError, IndexFormatError, InputFormatError  # noqa: E402
from .index import Index, build_index, open_index  # noqa: E402
from .neighborhood.params import NeighborhoodSpec  # noqa: E402
from .pipeline import Hits, MappingResult, device_stats, map_reads  # noqa: E402

__all__ = [
    "__version__",
    "build_index",
    "open_index",
    "Index",
    "NeighborhoodSpec",
    "map_reads",
    "device_stats",
    "MappingResult",
    "Hits",
    "LocalDeviceCluster",
    "DmapError",
    "InputFormatError",
    "IndexFormatError",
    "DeviceError",
    "ClusterError",
]
