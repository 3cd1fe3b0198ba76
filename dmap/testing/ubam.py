"""Reads from BAM records decoded in Python, one record at a time: the reference that
``kernels/bam_reads.cl`` (:func:`dmap.io.ubam_reads.read_fields`) is tested against."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..format.tags import DROPPED_TAGS

LETTERS = "=ACMGRSVTWYHKDBN"
COMPLEMENT = str.maketrans(LETTERS, "=TGKCYSBAWRDMHVN")


def fields_agree(raw: bytes, at: int, max_record: int) -> bool:
    """Whether the record at offset ``at`` of ``raw`` (its 36 bytes of fixed fields inside it) has
    fields that agree with each other and with its length, read field by field as the SAM spec
    (4.2) lays them out: the reference for :func:`dmap.io.ubam._fields_agree`.  The name's bytes
    are checked as far as ``raw`` holds them."""

    def int32(k: int) -> int:
        return int.from_bytes(raw[at + k:at + k + 4], "little", signed=True)

    block_size, ref_id, pos, length, next_ref_id, next_pos = (int32(k) for k in (0, 4, 8, 20, 24, 28))
    name_len, cigar_ops = raw[at + 12], int.from_bytes(raw[at + 16:at + 18], "little")
    if min(ref_id, pos, next_ref_id, next_pos) < -1 or name_len == 0 or not 0 <= length < 1 << 24:
        return False
    if block_size > min(max_record, (1 << 24) - 1):
        return False
    if block_size < 32 + name_len + 4 * cigar_ops + (length + 1) // 2 + length:  # all but the tags
        return False
    name = raw[at + 36:at + 36 + name_len]
    if len(name) == name_len and name[-1] != 0:  # a NUL ends it
        return False
    return name_len == 1 or not name or 33 <= name[0] <= 126  # a printable first symbol


def bam_reads(data: np.ndarray, starts: np.ndarray) -> list[tuple[str, str, str]]:
    """(name, sequence, quality) of each record at ``starts`` of ``data`` that holds a read (not
    secondary or supplementary), the read as sequenced: a reverse-strand record's sequence
    reverse-complemented and its qualities reversed."""
    raw = data.tobytes()
    out = []
    for s in starts.tolist():
        name_len, cigar_ops, flag, length = (int.from_bytes(raw[s + at:s + at + n], "little")
                                             for at, n in ((12, 1), (16, 2), (18, 2), (20, 4)))
        if flag & 0x900:
            continue
        name = raw[s + 36:s + 36 + name_len - 1].decode("latin-1")
        seq_at = s + 36 + name_len + 4 * cigar_ops
        codes = raw[seq_at:seq_at + (length + 1) // 2]
        seq = "".join(LETTERS[codes[i // 2] >> 4 if i % 2 == 0 else codes[i // 2] & 15] for i in range(length))
        qual_at = seq_at + (length + 1) // 2
        qual = "".join(chr(q + 33) for q in raw[qual_at:qual_at + length])
        if flag & 0x10:
            seq, qual = seq.translate(COMPLEMENT)[::-1], qual[::-1]
        out.append((name, seq, qual))
    return out


# Bytes of one value of each fixed-size auxiliary type (SAM spec 4.2.4).
VALUE_SIZES = {"A": 1, "c": 1, "C": 1, "s": 2, "S": 2, "i": 4, "I": 4, "f": 4}


def _aux_spans(raw: bytes, starts: np.ndarray) -> Iterator[tuple[int, int]]:
    """Where the auxiliary fields of each record at ``starts`` of ``raw`` that holds a read (not
    secondary or supplementary) begin and end."""
    for s in starts.tolist():
        block, name_len, cigar_ops, flag, length = (int.from_bytes(raw[s + at:s + at + n], "little")
                                                    for at, n in ((0, 4), (12, 1), (16, 2), (18, 2), (20, 4)))
        if not flag & 0x900:
            yield s + 36 + name_len + 4 * cigar_ops + (length + 1) // 2 + length, s + 4 + block


def read_group_tags(data: np.ndarray, starts: np.ndarray) -> list[str | None]:
    """The ``RG:Z`` value of each record at ``starts`` of ``data`` that holds a read (as
    :func:`bam_reads`), or None: no such field, or auxiliary fields that run past the record."""
    raw = data.tobytes()
    out = []
    for at, end in _aux_spans(raw, starts):
        found = None
        while at + 3 <= end:
            tag, kind = raw[at:at + 2], chr(raw[at + 2])
            at += 3
            if kind in "ZH":
                stop = raw.find(b"\0", at, end)
                if stop < 0:
                    break
                if tag == b"RG" and kind == "Z":
                    found = raw[at:stop].decode("latin-1")
                    break
                at = stop + 1
            elif kind == "B" and at + 5 <= end and chr(raw[at]) in VALUE_SIZES:
                at += 5 + int.from_bytes(raw[at + 1:at + 5], "little") * VALUE_SIZES[chr(raw[at])]
            elif kind in VALUE_SIZES:
                at += VALUE_SIZES[kind]
            else:
                break
        out.append(found)
    return out


_INTEGERS = {"c": "<i1", "C": "<u1", "s": "<i2", "S": "<u2", "i": "<i4", "I": "<u4"}


def float_text(bits: int) -> str:
    """The SAM text of the float whose 32 bits are ``bits``, as C's ``printf("%g")`` writes it
    (Python's ``%g`` rounds as C's does, to even; glibc writes a NaN with its sign bit as
    "-nan", Python as "nan")."""
    value = float(np.array([bits], np.uint32).view(np.float32)[0])
    return ("-nan" if bits >> 31 else "nan") if value != value else f"{value:g}"


def tag_texts(data: np.ndarray, starts: np.ndarray) -> list[str | None]:
    """The tags of each record at ``starts`` of ``data`` that holds a read (as :func:`bam_reads`)
    but those of :data:`dmap.format.tags.DROPPED_TAGS` (its read group, its old alignment's), as
    SAM text (tab-separated, integers as ``i``, arrays as ``B:type,values``, floats as
    :func:`float_text`, as samtools view writes them): what ``-C`` carries; None where it cannot
    (a type BAM does not define, fields that run past the record)."""
    raw = data.tobytes()
    out = []
    for at, end in _aux_spans(raw, starts):
        fields: list[str] | None = []
        while at < end:
            if at + 3 > end:
                fields = None
                break
            tag, kind = raw[at:at + 2].decode("latin-1"), chr(raw[at + 2])
            at += 3
            if tag in DROPPED_TAGS:  # past it, whatever its type (a float too)
                if kind in "ZH" and raw.find(b"\0", at, end) >= 0:
                    at = raw.find(b"\0", at, end) + 1
                elif kind == "B" and at + 5 <= end and chr(raw[at]) in VALUE_SIZES:
                    at += 5 + int.from_bytes(raw[at + 1:at + 5], "little") * VALUE_SIZES[chr(raw[at])]
                elif kind in VALUE_SIZES and at + VALUE_SIZES[kind] <= end:
                    at += VALUE_SIZES[kind]
                else:
                    fields = None
                    break
                if at > end:
                    fields = None
                    break
                continue
            if kind == "A" and at + 1 <= end:
                text, at = f"A:{chr(raw[at])}", at + 1
            elif kind in "ZH" and raw.find(b"\0", at, end) >= 0:
                stop = raw.find(b"\0", at, end)
                text, at = f"{kind}:{raw[at:stop].decode('latin-1')}", stop + 1
            elif kind == "f" and at + 4 <= end:
                text, at = f"f:{float_text(int.from_bytes(raw[at:at + 4], 'little'))}", at + 4
            elif kind in _INTEGERS and at + VALUE_SIZES[kind] <= end:
                value = int(np.frombuffer(raw[at:at + VALUE_SIZES[kind]], _INTEGERS[kind])[0])
                text, at = f"i:{value}", at + VALUE_SIZES[kind]
            elif kind == "B" and at + 5 <= end and (chr(raw[at]) in _INTEGERS or chr(raw[at]) == "f"):
                sub, count = chr(raw[at]), int.from_bytes(raw[at + 1:at + 5], "little")
                stop = at + 5 + count * VALUE_SIZES[sub]
                if stop > end:
                    fields = None
                    break
                if sub == "f":
                    values = [float_text(b) for b in np.frombuffer(raw[at + 5:stop], "<u4").tolist()]
                else:
                    values = list(map(str, np.frombuffer(raw[at + 5:stop], _INTEGERS[sub]).tolist()))
                text, at = "B:" + ",".join([sub, *values]), stop
            else:
                fields = None
                break
            fields.append(f"{tag}:{text}")
        out.append(None if fields is None else "\t".join(fields))
    return out
