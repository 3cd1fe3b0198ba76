"""Host wrapper of ``kernels/bam_reads.cl``: the reads of BAM records (found by
:mod:`dmap.io.ubam`) as FASTQ's fields, decoded on the worker's device.  The Python
reference it is tested against is :func:`dmap.testing.ubam.bam_reads`."""

from __future__ import annotations

import numpy as np

from ..opencl.device import current_device
from ..reads import ReadFields
from .ubam import layout, read_records, records_of


def read_fields(data: np.ndarray, path: str, where: str, max_record: int) -> ReadFields:
    """The reads of ``data``, whole BAM records from its first byte on, as FASTQ's fields (their
    names, sequences and qualities, each read as sequenced), decoded by ``bam_reads.cl`` on this
    worker's device; secondary and supplementary records left out."""
    starts = read_records(data, records_of(data, path, where, max_record))
    laid = layout(data, starts, path, where)
    device = current_device()
    out = device.recycled_array(laid.size)  # the chunk's reads, kept while it is mapped: not fresh pages
    if starts.size:
        with device.timed("dmap-transfer"):
            args = [device.upload(a) for a in (data, starts.astype(np.uint64), laid.name_off.astype(np.uint64),
                                               laid.seq_off.astype(np.uint64), laid.qual_off.astype(np.uint64))]
            out_buf = device.output(out)
        device.run(device.program("bam_reads.cl", {}), "bam_reads", [*args, np.uint32(starts.size), out_buf],
                   starts.size, "dmap-read-kernel")
        with device.timed("dmap-transfer"):
            device.read_back(out_buf, out)
    return laid.checked(out, path, where)
