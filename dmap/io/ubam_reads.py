"""Host wrapper of ``kernels/bam_reads.cl``: the reads of BAM records (found by
:mod:`dmap.io.ubam`) as FASTQ's fields, decoded on the worker's device.  The Python
reference it is tested against is :func:`dmap.testing.ubam.bam_reads`."""

from __future__ import annotations

import numpy as np

from ..opencl.device import current_device
from ..reads import ReadFields, flat_strings
from .ubam import layout, read_records, records_of


def read_fields(data: np.ndarray, path: str, where: str, max_record: int,
                read_groups: tuple[str, ...] = ()) -> ReadFields:
    """The reads of ``data``, whole BAM records from its first byte on, as FASTQ's fields (their
    names, sequences and qualities, each read as sequenced), decoded by ``bam_reads.cl`` on this
    worker's device; secondary and supplementary records left out.

    With ``read_groups`` (IDs), each read's group is the index among them of its record's
    ``RG:Z`` tag (:attr:`ReadFields.group`; :data:`dmap.reads.NO_GROUP` for none of them)."""
    starts = read_records(data, records_of(data, path, where, max_record))
    laid = layout(data, starts, path, where)
    device = current_device()
    out = device.recycled_array(laid.size)  # the chunk's reads, kept while it is mapped: not fresh pages
    group = np.zeros(starts.size, np.uint32) if read_groups else None
    if starts.size:
        ids, id_off, id_len = flat_strings(list(read_groups) or [""])
        with device.timed("dmap-transfer"):
            args = [device.upload(a) for a in (data, starts.astype(np.uint64), laid.name_off.astype(np.uint64),
                                               laid.seq_off.astype(np.uint64), laid.qual_off.astype(np.uint64))]
            out_buf = device.output(out)
            # OpenCL buffers are never empty: an ID of no bytes is one zero byte.
            named = [device.upload(a) for a in (ids if ids.size else np.zeros(1, np.uint8), id_off.astype(np.uint32),
                                                id_len.astype(np.uint32))]
            group_buf = device.output(group if group is not None else np.zeros(1, np.uint32))
        device.run(device.program("bam_reads.cl", {}), "bam_reads",
                   [*args, np.uint32(starts.size), out_buf, *named, np.uint32(len(read_groups)), group_buf],
                   starts.size, "dmap-read-kernel")
        with device.timed("dmap-transfer"):
            device.read_back(out_buf, out)
            if group is not None:
                device.read_back(group_buf, group)
    return laid.checked(out, path, where, group)
