"""Host wrapper of ``kernels/bam_reads.cl``: the reads of BAM records (found by
:mod:`dmap.io.ubam`) as FASTQ's fields, decoded on the worker's device.  The Python
references it is tested against are :func:`dmap.testing.ubam.bam_reads`,
:func:`~dmap.testing.ubam.read_group_tags` and :func:`~dmap.testing.ubam.tag_texts`."""

from __future__ import annotations

import numpy as np

from ..errors import InputFormatError
from ..format.tags import DROPPED_TAGS
from ..opencl.device import current_device
from ..reads import ReadFields, flat_strings
from .ubam import FIXED, NO_EXTRAS, BamExtras, layout, read_records, records_of

# A record's tag text's length where -C cannot carry its tags (bam_reads.cl).
TAGS_BAD = 0xFFFFFFFF


def read_fields(data: np.ndarray, path: str, where: str, max_record: int,
                extras: BamExtras = NO_EXTRAS) -> ReadFields:
    """The reads of ``data``, whole BAM records from its first byte on, as FASTQ's fields (their
    names, sequences and qualities, each read as sequenced), decoded by ``bam_reads.cl`` on this
    worker's device; secondary and supplementary records left out.

    With ``extras.read_groups`` (IDs), each read's group is the index among them of its record's
    ``RG:Z`` tag (:attr:`ReadFields.group`; :data:`dmap.reads.NO_GROUP` for none of them); with
    ``extras.tags``, its comment is its record's other tags as SAM text (``-C``), but those of
    :data:`dmap.format.tags.DROPPED_TAGS` (its old alignment's, and those dmap writes itself).

    Raises
    ------
    InputFormatError
        As :func:`dmap.io.ubam.layout`, and (``extras.tags``) for a record with a tag of a type
        BAM does not define or tags that run past it, naming its read.
    """
    starts = read_records(data, records_of(data, path, where, max_record))
    device = current_device()
    group = np.zeros(starts.size, np.uint32) if extras.read_groups else None
    groups_out = group if group is not None else np.zeros(1, np.uint32)  # held while the kernel runs
    if not starts.size:
        none = np.zeros(0, np.uint32) if extras.tags else None
        return layout(data, starts, path, where, none).checked(device.recycled_array(0), path, where, group)
    program = device.program("bam_reads.cl", {"TAGS": int(extras.tags)})
    with device.timed("dmap-transfer"):
        records = [device.upload(a) for a in (data, starts.astype(np.uint64))]
    dropped = [device.upload(np.frombuffer("".join(DROPPED_TAGS).encode(), np.uint8)), np.uint32(len(DROPPED_TAGS))]
    tag_len = None
    if extras.tags:
        tag_len = np.zeros(starts.size, np.uint32)
        with device.timed("dmap-transfer"):
            length_buf = device.output(tag_len)
        device.run(program, "bam_tag_lengths", [*records, np.uint32(starts.size), *dropped, length_buf],
                   starts.size, "dmap-read-kernel")
        with device.timed("dmap-transfer"):
            device.read_back(length_buf, tag_len)
        _check_tags(data, starts, tag_len, path, where)
    laid = layout(data, starts, path, where, tag_len)
    out = device.recycled_array(laid.size)  # the chunk's reads, kept while it is mapped: not fresh pages
    ids, id_off, id_len = flat_strings(list(extras.read_groups) or [""])
    with device.timed("dmap-transfer"):
        args = [device.upload(a) for a in (laid.name_off.astype(np.uint64), laid.seq_off.astype(np.uint64),
                                           laid.qual_off.astype(np.uint64))]
        out_buf = device.output(out)
        # OpenCL buffers are never empty: an ID of no bytes is one zero byte, and no tags one offset.
        named = [device.upload(a) for a in (ids if ids.size else np.zeros(1, np.uint8), id_off.astype(np.uint32),
                                            id_len.astype(np.uint32))]
        group_buf = device.output(groups_out)
        tags_at = device.upload(laid.comment_off.astype(np.uint64) if tag_len is not None else np.zeros(1, np.uint64))
    device.run(program, "bam_reads", [*records, *args, np.uint32(starts.size), out_buf, *named,
                                      np.uint32(len(extras.read_groups)), group_buf, tags_at, *dropped],
               starts.size, "dmap-read-kernel")
    with device.timed("dmap-transfer"):
        device.read_back(out_buf, out)
        if group is not None:
            device.read_back(group_buf, group)
    return laid.checked(out, path, where, group)


def _check_tags(data: np.ndarray, starts: np.ndarray, tag_len: np.ndarray, path: str, where: str) -> None:
    """Refuse a record whose tags ``-C`` cannot carry (:data:`TAGS_BAD`), naming its read."""
    bad = tag_len == TAGS_BAD
    if bad.any():
        at = int(starts[np.argmax(bad)])
        name = data[at + FIXED:at + FIXED + int(data[at + 12]) - 1].tobytes().decode("latin-1")
        raise InputFormatError(f"reads file {path!r} (after {where}) holds read {name[:40]!r}, whose tags -C cannot "
                               "carry: a tag of a type BAM does not define, or tags that run past the record; "
                               "leave -C out, or drop the tag (samtools view -x TAG)")
