"""BAM output: SAM records encoded as BAM (SAM specification, section 4.2), in bulk.

A chunk's SAM records, as the workers format them (:mod:`dmap.format.sam`), are
parsed and encoded in bulk, with no Python object per record: by
``kernels/bam_records.cl`` (:func:`encode_records_device`, a work-item per
record), and by whole-array numpy operations in :func:`encode_records`, the
reference the kernels are tested against.  Encoding the text keeps one source of truth for every field (the
SAM formatters, exact and approximate alike) and makes the contract easy to
check: the encoded bytes equal what ``samtools view -b`` (htslib) makes of the
same SAM, down to the integer tag types, the floats' bits and the ``bin`` field
(``tests/format/test_bam.py``).  Floats are the one field the kernels do not parse: their text
is read on the host for a whole chunk at once (:func:`float_bits`), as htslib reads it.

BAM holds SEQ as 4-bit nucleotide codes (``=ACMGRSVTWYHKDBN``): lower case
becomes upper case and any other letter ``N``, as htslib does; reads of
other alphabets (protein, text) can only be written as SAM.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import DmapError
from ..reads import padded_rows
from ..reads import ragged_positions as ragged

if TYPE_CHECKING:
    from ..opencl.device import Device

MAGIC = b"BAM\x01"
# A record's fixed fields after block_size (its first 4 bytes): 32 bytes, little-endian, packed.
_FIXED = np.dtype([("block_size", "<i4"), ("ref_id", "<i4"), ("pos", "<i4"), ("l_read_name", "u1"),
                   ("mapq", "u1"), ("bin", "<u2"), ("n_cigar_op", "<u2"), ("flag", "<u2"), ("l_seq", "<i4"),
                   ("next_ref_id", "<i4"), ("next_pos", "<i4"), ("tlen", "<i4")])
# byte -> 4-bit base code; letters outside "=ACMGRSVTWYHKDBN" (either case) are N (15), as in htslib.
_NT16 = np.full(256, 15, dtype=np.uint8)
for _i, _c in enumerate(b"=ACMGRSVTWYHKDBN"):
    _NT16[_c] = _NT16[ord(chr(_c).lower())] = _i
# byte -> CIGAR operation code, 255 for a byte that is not one.
_CIGAR_OP = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"MIDNSHP=X"):
    _CIGAR_OP[_c] = _i
_CONSUMES_REFERENCE = np.array([1, 0, 1, 1, 0, 0, 0, 1, 1], dtype=bool)  # M D N = X
MAX_READ_NAME = 254  # l_read_name is one byte and counts the NUL
# What a record BAM cannot hold, or that is not SAM, by the codes kernels/bam_records.cl uses too.
_ERRORS = {
    1: "a SAM record has fewer than 11 fields",
    2: "an integer field is not a decimal number of at most 18 digits",
    3: f"a read name is empty or longer than {MAX_READ_NAME} bytes; write SAM instead",
    4: "a CIGAR with more than 65,535 operations",
    5: "a CIGAR that does not end with an operation",
    6: "a record whose QUAL is not as long as its SEQ",
    7: "a tag that is not TG:TYPE:VALUE",
    8: "only tags of types A, i, f, Z, H and B are written",
    9: "an array tag whose values do not fit its type, or that is not B:type,value,...",
    10: "a float tag's value is not a decimal number",
}


def _fail(code: int) -> DmapError:
    return DmapError(f"BAM: {_ERRORS[code]}")


@dataclass(frozen=True)
class References:
    """Contig names -> BAM reference ids, looked up for a whole column at once."""

    sorted_names: np.ndarray  # bytes dtype ("S"), sorted
    ids: np.ndarray  # reference id of each sorted name

    @classmethod
    def of(cls, names: list[str]) -> References:
        encoded = np.array([n.encode() for n in names], dtype=bytes) if names else np.zeros(0, "S1")
        order = np.argsort(encoded, kind="stable")
        return cls(encoded[order], order.astype(np.int32))

    def lookup(self, text: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
        """Reference id of each field ``text[start:start+length]``; -1 for ``*``."""
        width = max(int(length.max(initial=1)), 1)
        fields = padded_rows(text, start, length, width).view(f"S{width}").ravel()
        star = (length == 1) & (text[start] == ord("*"))
        at = np.searchsorted(self.sorted_names, fields)
        at_c = np.minimum(at, max(self.sorted_names.size - 1, 0))
        found = (at < self.sorted_names.size) & (self.sorted_names[at_c] == fields) if self.sorted_names.size \
            else np.zeros(fields.size, dtype=bool)
        if not (found | star).all():
            bad = int(np.flatnonzero(~(found | star))[0])
            name = bytes(text[start[bad]:start[bad] + length[bad]]).decode(errors="replace")
            raise DmapError(f"BAM: reference name {name!r} is not in the header")
        out = np.full(fields.size, -1, dtype=np.int32)
        out[found] = self.ids[at_c[found]]
        return out


def header(sam_header: str, names: list[str], lengths: list[int]) -> bytes:
    """A BAM header (uncompressed): the SAM header text and the reference list."""
    text = sam_header.encode()
    parts = [MAGIC, struct.pack("<i", len(text)), text, struct.pack("<i", len(names))]
    for name, length in zip(names, lengths):
        n = name.encode() + b"\0"
        parts += [struct.pack("<i", len(n)), n, struct.pack("<i", length)]
    return b"".join(parts)


def sam_header_text(head: bytes) -> str | None:
    """The SAM header text of a BAM file's decompressed first bytes ``head``, or None when they do not
    start one (or hold less than the whole text)."""
    if head[:4] != MAGIC or len(head) < 8:
        return None
    (l_text,) = struct.unpack_from("<i", head, 4)
    if l_text < 0 or len(head) < 8 + l_text:
        return None
    return head[8:8 + l_text].decode(errors="replace")


# The bytes a float tag's value may hold: a decimal number's, and those of inf and nan (as C's
# printf writes infinities and NaNs, and dmap.testing.ubam.float_text: -C carries BAM's floats so).
_FLOAT_BYTES = np.zeros(256, dtype=bool)
_FLOAT_BYTES[np.frombuffer(b"0123456789+-.eEinfaINFA", np.uint8)] = True


def float_bits(text: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The float fields ``text[start:start+length]`` as the bits of BAM's floats (uint32), as
    htslib reads them: strtod's double, correctly rounded (numpy's parse is), then that double
    rounded to a float; "-nan" keeps its sign, as strtod's does.  Anything but a decimal number,
    inf or nan is an error."""
    if not start.size:
        return np.zeros(0, np.uint32)
    if (length < 1).any() or not _FLOAT_BYTES[text[ragged(start, length)]].all():
        raise _fail(10)
    width = int(length.max())
    fields = padded_rows(text, start, length, width).view(f"S{width}").ravel()
    try:
        values = fields.astype(np.float64)
    except ValueError:
        values = None
    if values is None:  # raised out of the handler, with no ValueError as its context
        raise _fail(10)
    with np.errstate(over="ignore"):  # past a float's range: infinity, as C's conversion gives
        bits = values.astype(np.float32).view(np.uint32)
    bits[np.isnan(values) & (text[start] == ord("-"))] |= np.uint32(0x80000000)
    return bits


def _integers(text: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Decimal integer fields (an optional leading ``-``) as int64; any other byte is an error."""
    negative = (length > 0) & (text[start] == ord("-"))
    start, length = start + negative, length - negative
    if (length < 1).any() or (length > 18).any():
        raise _fail(2)
    # Right-aligned in rows of `width` digits, leading columns zero: one product with the powers of ten.
    width = int(length.max(initial=1))
    cols = np.arange(width)
    at = (start + length - width)[:, None] + cols
    digits = text[np.clip(at, 0, text.size - 1)].astype(np.int64) - ord("0")
    digits[cols < (width - length)[:, None]] = 0
    if ((digits < 0) | (digits > 9)).any():
        raise _fail(2)
    value = digits @ (10 ** np.arange(width - 1, -1, -1, dtype=np.int64))
    return np.where(negative, -value, value)


def _reg2bin(beg: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The BAI bin of each interval [beg, end) (SAM specification, section 5.3)."""
    end = end - 1
    out = np.zeros(beg.size, dtype=np.int64)
    todo = np.ones(beg.size, dtype=bool)
    for shift, first in ((14, 4681), (17, 585), (20, 73), (23, 9), (26, 1)):
        same = todo & ((beg >> shift) == (end >> shift))
        out[same] = first + (beg[same] >> shift)
        todo &= ~same
    return out


def _integer_tag_types(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The type letter and width htslib gives an ``i`` tag: the smallest of c/s/i for a negative
    value, of C/S/I otherwise."""
    neg = value < 0
    kind = np.where(neg, np.where(value >= -(1 << 7), ord("c"), np.where(value >= -(1 << 15), ord("s"), ord("i"))),
                    np.where(value < (1 << 8), ord("C"), np.where(value < (1 << 16), ord("S"), ord("I"))))
    width = np.where((kind == ord("c")) | (kind == ord("C")), 1, np.where((kind == ord("s")) | (kind == ord("S")),
                                                                           2, 4))
    return kind.astype(np.uint8), width.astype(np.int64)


@dataclass
class _Layout:
    """Parsed SAM records and where each part of their BAM records goes (one entry per record,
    per CIGAR operation or per tag): what :func:`encode_records` and ``bam_records.cl`` write."""

    fixed: np.ndarray  # _FIXED, per record
    start: np.ndarray  # int64: where each BAM record starts
    size: int  # bytes of all the BAM records
    name_start: np.ndarray
    name_len: np.ndarray
    cigar: np.ndarray  # "<u4", every record's operations in turn
    seq_start: np.ndarray
    seq_len: np.ndarray
    qual_start: np.ndarray
    has_qual: np.ndarray  # bool: QUAL is not "*"
    tag_first: np.ndarray  # each record's first tag in the tag columns
    n_tags: np.ndarray
    tag_start: np.ndarray  # the tag's field in ``text`` ("TG:T:value")
    tag_kind: np.ndarray  # BAM type letter (c C s S i I f Z H A B)
    tag_value: np.ndarray  # int64: an integer tag's value, a float's bits; an array's (B) type letter
    tag_width: np.ndarray  # an integer or float tag's bytes; an array's, each value's
    value_len: np.ndarray  # a Z or H tag's length; an array's values
    array_first: np.ndarray  # an array's first value in ``array_values``
    array_values: np.ndarray  # int64: every array's values in turn


def _fixed_fields(name_len, flag, ref_id, pos, mapq, ref_span, n_cigar, seq_len, next_ref_id, next_pos, tlen,
                  tag_bytes) -> tuple[np.ndarray, np.ndarray, int]:
    """Each record's fixed fields (``pos`` and ``next_pos`` 0-based), where it starts, and the
    bytes of all of them."""
    block_size = (_FIXED.itemsize - 4 + name_len + 1 + 4 * n_cigar + (seq_len + 1) // 2 + seq_len + tag_bytes)
    fixed = np.zeros(name_len.size, dtype=_FIXED)
    for key, column in (("block_size", block_size), ("ref_id", ref_id), ("pos", pos), ("l_read_name", name_len + 1),
                        ("mapq", mapq), ("bin", _reg2bin(pos, pos + np.maximum(ref_span, 1))),
                        ("n_cigar_op", n_cigar), ("flag", flag), ("l_seq", seq_len), ("next_ref_id", next_ref_id),
                        ("next_pos", next_pos), ("tlen", tlen)):
        fixed[key] = column
    return fixed, np.cumsum(4 + block_size) - (4 + block_size), int((4 + block_size).sum())


def _next_ref_ids(refs: References, text: np.ndarray, ref_id: np.ndarray, rname: tuple, rnext: tuple) -> np.ndarray:
    """RNEXT's reference ids: ``=`` is RNAME's."""
    rnext_start, rnext_len = rnext
    same = (rnext_len == 1) & (text[rnext_start] == ord("="))
    return np.where(same, ref_id, refs.lookup(text, np.where(same, rname[0], rnext_start),
                                              np.where(same, rname[1], rnext_len)))


def _check_whole_lines(text: np.ndarray) -> None:
    if text[-1] != ord("\n"):
        raise DmapError("BAM: the SAM records do not end with a line break")


def _layout(text: np.ndarray, refs: References) -> _Layout:
    """Parse SAM records ``text`` (whole lines) field by field, with numpy over all of them at once."""
    _check_whole_lines(text)
    ends = np.flatnonzero((text == ord("\t")) | (text == ord("\n")))  # every field ends at one
    starts = np.empty_like(ends)
    starts[0], starts[1:] = 0, ends[:-1] + 1
    lengths = ends - starts
    last = np.flatnonzero(text[ends] == ord("\n"))  # each record's last field
    n = last.size
    first = np.empty_like(last)
    first[0], first[1:] = 0, last[:-1] + 1
    n_fields = last - first + 1
    if (n_fields < 11).any():
        raise _fail(1)

    def field(k: int) -> tuple[np.ndarray, np.ndarray]:
        return starts[first + k], lengths[first + k]

    def is_star(k: int) -> np.ndarray:
        s, length = field(k)
        return (length == 1) & (text[s] == ord("*"))

    name_start, name_len = field(0)
    if (name_len > MAX_READ_NAME).any() or (name_len < 1).any():
        raise _fail(3)
    flag = _integers(text, *field(1))
    ref_id = refs.lookup(text, *field(2))
    pos = _integers(text, *field(3)) - 1
    mapq = _integers(text, *field(4))
    next_ref_id = _next_ref_ids(refs, text, ref_id, field(2), field(6))
    next_pos = _integers(text, *field(7)) - 1
    tlen = _integers(text, *field(8))

    # CIGAR: every operation's length and code, then per record its count and reference span.
    cig_start, cig_len = field(5)
    cig_len = np.where(is_star(5), 0, cig_len)
    cig_bytes = ragged(cig_start, cig_len)
    ops_at = np.flatnonzero(_CIGAR_OP[text[cig_bytes]] != 255)
    op_pos = cig_bytes[ops_at]
    op_record = np.repeat(np.arange(n), cig_len)[ops_at]
    n_cigar = np.bincount(op_record, minlength=n)
    if (n_cigar > 0xFFFF).any():
        raise _fail(4)
    num_start = np.empty_like(op_pos)
    if op_pos.size:
        num_start[1:] = op_pos[:-1] + 1
        first_op = np.ones(op_pos.size, dtype=bool)
        first_op[1:] = op_record[1:] != op_record[:-1]
        num_start[first_op] = cig_start[op_record[first_op]]
    if int(cig_len.sum()) != int((op_pos - num_start + 1).sum()):
        raise _fail(5)
    op_len = _integers(text, num_start, op_pos - num_start)
    op_code = _CIGAR_OP[text[op_pos]].astype(np.int64)
    ref_span = np.bincount(op_record, weights=op_len * _CONSUMES_REFERENCE[op_code], minlength=n).astype(np.int64)

    seq_start, seq_len = field(9)
    seq_len = np.where(is_star(9), 0, seq_len)
    qual_start, qual_len = field(10)
    has_qual = ~is_star(10)
    if (has_qual & (qual_len != seq_len)).any():
        raise _fail(6)

    # Tags: the fields after the eleventh, "TG:T:value".
    field_record = np.repeat(np.arange(n), n_fields)
    tag_field = np.flatnonzero(np.arange(ends.size) - first[field_record] >= 11)
    t_start, t_len = starts[tag_field], lengths[tag_field]
    if (t_len < 5).any() or (text[t_start + 2] != ord(":")).any() or (text[t_start + 4] != ord(":")).any():
        raise _fail(7)
    t_type = text[t_start + 3]
    v_len = t_len - 5
    is_int, is_str, is_array = t_type == ord("i"), (t_type == ord("Z")) | (t_type == ord("H")), t_type == ord("B")
    is_float = t_type == ord("f")
    if not (is_int | is_float | is_str | is_array | (t_type == ord("A"))).all():
        raise _fail(8)
    value = np.zeros(t_start.size, dtype=np.int64)
    value[is_int] = _integers(text, t_start[is_int] + 5, v_len[is_int])
    value[is_float] = float_bits(text, t_start[is_float] + 5, v_len[is_float])
    int_kind, int_width = _integer_tag_types(value)
    int_kind[is_float], int_width[is_float] = ord("f"), 4  # its bits, written as a 4-byte integer's are
    count, array_first, array_values, array_width = _arrays(text, t_start[is_array], v_len[is_array])
    value[is_array] = text[t_start[is_array] + 5]
    int_width[is_array] = array_width
    v_len = v_len.copy()
    v_len[is_array] = count
    t_size = 3 + np.where(is_int | is_float | is_array, int_width, np.where(is_str, v_len + 1, 1))
    t_size[is_array] = 3 + 5 + count * array_width  # tag, type; the values' type and count; values
    n_tags = n_fields - 11
    tag_first = np.cumsum(n_tags) - n_tags

    tag_bytes = np.bincount(field_record[tag_field], weights=t_size, minlength=n).astype(np.int64)
    fixed, start, size = _fixed_fields(name_len, flag, ref_id, pos, mapq, ref_span, n_cigar, seq_len, next_ref_id,
                                       next_pos, tlen, tag_bytes)
    firsts = np.zeros(t_start.size, dtype=np.int64)
    firsts[is_array] = array_first
    return _Layout(fixed, start, size, name_start, name_len, ((op_len << 4) | op_code).astype("<u4"), seq_start,
                   seq_len, qual_start, has_qual, tag_first, n_tags, t_start,
                   np.where(is_int | is_float, int_kind, t_type).astype(np.uint8), value, int_width, v_len, firsts,
                   array_values)


# The array types of B tags, their bytes and (integers) their ranges; a float is its 4 bytes' bits.
_ARRAY_TYPES = {ord("c"): (1, -2**7, 2**7 - 1), ord("C"): (1, 0, 2**8 - 1), ord("s"): (2, -2**15, 2**15 - 1),
                ord("S"): (2, 0, 2**16 - 1), ord("i"): (4, -2**31, 2**31 - 1), ord("I"): (4, 0, 2**32 - 1),
                ord("f"): (4, 0, 2**32 - 1)}


def _arrays(text: np.ndarray, start: np.ndarray, v_len: np.ndarray) -> tuple[np.ndarray, ...]:
    """The B tags whose fields start at ``start`` (values ``type,v1,v2,...`` of ``v_len`` bytes
    from ``start + 5``): each one's count of values, its first value's place among them all, every
    value in turn, and each one's bytes per value."""
    sub = text[start + 5] if start.size else np.zeros(0, np.uint8)
    width, lo, hi = (np.zeros(sub.size, np.int64) for _ in range(3))
    for code, (w, least, most) in _ARRAY_TYPES.items():
        width[sub == code], lo[sub == code], hi[sub == code] = w, least, most
    if (width == 0).any():
        raise _fail(8)  # no type of BAM's
    if ((v_len > 1) & (text[np.minimum(start + 6, text.size - 1)] != ord(","))).any():
        raise _fail(9)
    # Each value follows a comma: its field runs to the next comma or to its tag's end.
    inside = ragged(start + 6, np.maximum(v_len - 1, 0))
    commas = inside[text[inside] == ord(",")]
    owner = np.repeat(np.arange(start.size), np.maximum(v_len - 1, 0))[text[inside] == ord(",")]
    count = np.bincount(owner, minlength=start.size).astype(np.int64)
    ends = np.append(commas[1:], 0)
    last = np.append(owner[1:] != owner[:-1], True) if owner.size else np.zeros(0, bool)
    ends[last] = (start + 5 + v_len)[owner[last]]
    floats = sub[owner] == ord("f")
    values = np.empty(commas.size, np.int64)
    values[~floats] = _integers(text, commas[~floats] + 1, (ends - commas - 1)[~floats])
    values[floats] = float_bits(text, commas[floats] + 1, (ends - commas - 1)[floats])
    if ((values < lo[owner]) | (values > hi[owner])).any():
        raise _fail(9)
    return count, np.cumsum(count) - count, values, width


def encode_records(text: np.ndarray, refs: References) -> np.ndarray:
    """BAM records of SAM records ``text`` (whole lines, each ending ``\\n``; no header), in numpy:
    the reference for ``bam_records.cl`` (:func:`encode_records_device`).

    Raises
    ------
    dmap.errors.DmapError
        A record BAM cannot hold (a name over 254 bytes, an unknown reference)
        or that is not SAM; dmap's formatters write neither.
    """
    text = np.asarray(text, dtype=np.uint8)
    if text.size == 0:
        return np.zeros(0, dtype=np.uint8)
    lay = _layout(text, refs)
    out = np.zeros(lay.size, dtype=np.uint8)
    out[(lay.start[:, None] + np.arange(_FIXED.itemsize)).ravel()] = lay.fixed.view(np.uint8)
    at = lay.start + _FIXED.itemsize
    out[ragged(at, lay.name_len)] = text[ragged(lay.name_start, lay.name_len)]  # the NUL is already there
    at = at + lay.name_len + 1
    n_cigar = lay.fixed["n_cigar_op"].astype(np.int64)
    out[ragged(at, 4 * n_cigar)] = lay.cigar.view(np.uint8)
    at = at + 4 * n_cigar
    # SEQ: two bases a byte, the first in the high nibble; an odd length leaves the last low nibble 0.
    seq_len = lay.seq_len
    seq_bytes = (seq_len + 1) // 2
    padded = 2 * seq_bytes
    nibbles = np.zeros(int(padded.sum()), dtype=np.uint8)
    nibbles[ragged(np.cumsum(padded) - padded, seq_len)] = _NT16[text[ragged(lay.seq_start, seq_len)]]
    out[ragged(at, seq_bytes)] = (nibbles[0::2] << 4) | nibbles[1::2]
    at = at + seq_bytes
    q = lay.has_qual
    out[ragged(at[q], seq_len[q])] = text[ragged(lay.qual_start[q], seq_len[q])] - 33
    out[ragged(at[~q], seq_len[~q])] = 0xFF
    at = at + seq_len

    record = np.repeat(np.arange(at.size), lay.n_tags)
    is_str = (lay.tag_kind == ord("Z")) | (lay.tag_kind == ord("H"))
    is_array = lay.tag_kind == ord("B")
    size = 3 + np.where(is_str, lay.value_len + 1, np.where(lay.tag_kind == ord("A"), 1, np.where(
        is_array, 5 + lay.value_len * lay.tag_width, lay.tag_width)))
    before = np.cumsum(size) - size  # over all the chunk's tags; less the record's first tag's
    tag_at = at[record] + before - before[lay.tag_first[record]]
    out[tag_at] = text[lay.tag_start]
    out[tag_at + 1] = text[lay.tag_start + 1]
    out[tag_at + 2] = lay.tag_kind
    is_int = ~is_str & ~is_array & (lay.tag_kind != ord("A"))
    for width in (1, 2, 4):
        sel = is_int & (lay.tag_width == width)
        le = lay.tag_value[sel].astype("<i4").view(np.uint8).reshape(-1, 4)[:, :width]
        out[(tag_at[sel, None] + 3 + np.arange(width)).ravel()] = le.ravel()
    z = is_str
    out[ragged(tag_at[z] + 3, lay.value_len[z])] = text[ragged(lay.tag_start[z] + 5, lay.value_len[z])]
    # B: the values' type, their count, then each value in its bytes.
    out[tag_at[is_array] + 3] = lay.tag_value[is_array]
    count = lay.value_len[is_array]
    out[(tag_at[is_array, None] + 4 + np.arange(4)).ravel()] = count.astype("<u4").view(np.uint8)
    width = np.repeat(lay.tag_width[is_array], count)
    place = np.repeat(tag_at[is_array] + 8, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count,
                                                                                          count)) * width
    values = lay.array_values[np.repeat(lay.array_first[is_array], count) + np.arange(count.sum())
                              - np.repeat(np.cumsum(count) - count, count)]
    for w in (1, 2, 4):
        sel = width == w
        le = values[sel].astype("<i8").view(np.uint8).reshape(-1, 8)[:, :w]
        out[(place[sel, None] + np.arange(w)).ravel()] = le.ravel()
    a = lay.tag_kind == ord("A")
    out[tag_at[a] + 3] = text[lay.tag_start[a] + 5]
    return out


def encode_records_device(device: Device, text: np.ndarray, refs: References) -> np.ndarray:
    """The bytes of :func:`encode_records`, made by ``kernels/bam_records.cl`` on ``device``: a
    work-item per record parses its line, numpy looks up the reference names and places the
    records, and a second kernel writes them (parsing in numpy held the interpreter and took
    twice the time of the rest of the encoding together, docs/performance.md).
    """
    text = np.asarray(text, dtype=np.uint8)
    if text.size == 0:
        return np.zeros(0, dtype=np.uint8)
    _check_whole_lines(text)
    line_end = np.flatnonzero(text == ord("\n")).astype(np.uint64)
    line_start = np.zeros_like(line_end)
    line_start[1:] = line_end[:-1] + 1
    n = line_end.size
    error, name_len, n_cigar, has_qual, tag_bytes, n_floats = (np.empty(n, np.uint32) for _ in range(6))
    ints, ref_span = np.empty((n, 5), np.int64), np.empty(n, np.int64)
    rname, rnext, cigar, tags = (np.empty((n, 2), np.uint64) for _ in range(4))
    seq = np.empty((n, 3), np.uint64)
    outputs = [error, name_len, ints, rname, rnext, cigar, n_cigar, ref_span, seq, has_qual, tags, tag_bytes,
               n_floats]
    # The buffers must outlive the kernels: OpenCL kernels need not retain their arguments.
    with device.timed("dmap-transfer"):
        inputs = [device.upload(a) for a in (text, line_start, line_end)]
        buffers = [device.output(a) for a in outputs]
    program = device.program("bam_records.cl", {})
    device.run(program, "bam_fields", [*inputs, np.uint32(n), *buffers], n, "dmap-records-kernel")
    with device.timed("dmap-transfer"):
        for buf, host in zip(buffers, outputs):
            device.read_back(buf, host)
    if error.any():
        raise _fail(int(error[np.flatnonzero(error)[0]]))
    rname, rnext = rname.astype(np.int64).T, rnext.astype(np.int64).T  # (starts, lengths)
    ref_id = refs.lookup(text, *rname)
    next_ref_id = _next_ref_ids(refs, text, ref_id, rname, rnext)
    flag, pos, mapq, pnext, tlen = ints.T
    seq_len = seq[:, 1].astype(np.int64)
    fixed, start, size = _fixed_fields(name_len.astype(np.int64), flag, ref_id, pos - 1, mapq, ref_span,
                                       n_cigar.astype(np.int64), seq_len, next_ref_id, pnext - 1, tlen,
                                       tag_bytes.astype(np.int64))
    out = np.empty(size, dtype=np.uint8)
    # The floats' places in the output and their text (none in most chunks: a buffer of one).
    float_first = (np.cumsum(n_floats, dtype=np.uint64) - n_floats).astype(np.uint64)
    n_float = int(n_floats.sum(dtype=np.int64))
    float_at, float_text = np.empty(max(n_float, 1), np.uint64), np.empty((max(n_float, 1), 2), np.uint64)
    with device.timed("dmap-transfer"):
        out_buf = device.output(out)
        written = [device.upload(a) for a in (text, fixed.view(np.uint8), start.astype(np.uint64), line_start,
                                              cigar, seq, has_qual, tags, _NT16)]
        floats = [device.upload(float_first), device.output(float_at), device.output(float_text)]
    device.run(program, "bam_records", [*written, np.uint32(n), out_buf, *floats], n, "dmap-records-kernel")
    with device.timed("dmap-transfer"):
        device.read_back(out_buf, out)
        if n_float:
            device.read_back(floats[1], float_at)
            device.read_back(floats[2], float_text)
    if n_float:
        bits = float_bits(text, float_text[:n_float, 0].astype(np.int64), float_text[:n_float, 1].astype(np.int64))
        out[(float_at[:n_float, None].astype(np.int64) + np.arange(4)).ravel()] = bits.astype("<u4").view(np.uint8)
    return out
