"""Errors that dmap reports to users as one clear line.

Every problem a user can cause or fix (bad input, a damaged index, no device,
no scheduler) is raised as a :class:`DmapError` subclass whose message says
what is wrong and how to fix it.  The CLI prints the message and exits
non-zero; anything else escaping is a bug in dmap.
"""


class DmapError(Exception):
    """Base class of all user-facing dmap errors."""


class InputFormatError(DmapError):
    """A FASTA/FASTQ file is missing, empty, malformed or has unknown symbols."""


class IndexFormatError(DmapError):
    """An index path is not a dmap index, is damaged, or does not fit the reads."""


class DeviceError(DmapError):
    """No usable OpenCL device, or a kernel could not be built or run."""


class ClusterError(DmapError):
    """The Dask scheduler cannot be reached or the cluster lost its workers."""

