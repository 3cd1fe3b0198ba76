"""BGZF, the blocked gzip of BAM files (SAM specification, section 4.1).

A BGZF file is a series of gzip members of at most 64 KiB each, with the
compressed size in an extra field, ended by a fixed 28-byte empty block.
Members concatenate: each chunk of a run is compressed on its worker into
whole blocks, and the output is the header's blocks, the chunks' blocks in
input order and :data:`EOF`.  For the same reason a ``bgzip``-compressed
reads file can be cut anywhere: the worker that gets a byte range finds the
first block in it (:func:`find_block`) and inflates the blocks from there
(:func:`inflate_blocks`).

Deflate is ISA-L's (``isal``, installed with ``xopen`` on x86-64 and ARM)
where present, else zlib's.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

try:
    from isal import isal_zlib as _deflate_lib
    from isal.igzip import decompress as gzip_members  # every member of a gzip stream, in C
    from isal.igzip_lib import IsalError

    # What inflating damaged data raises, here and in xopen's gzip readers.
    INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, IsalError)

    # ISA-L's levels are 0-3; its level 1 compresses BAM about as well as zlib's level 6 (about 3%
    # larger; docs/performance.md) at several times the speed.
    DEFAULT_LEVEL = 1
except ImportError:  # pragma: no cover - platforms without ISA-L
    _deflate_lib = zlib
    from gzip import decompress as gzip_members
    INFLATE_ERRORS = (zlib.error,)
    DEFAULT_LEVEL = 6

# CRC-32 (gzip's), ISA-L's where installed: 22 ms per 500 MB against zlib's 125 ms here.
crc32 = _deflate_lib.crc32

# Uncompressed bytes per block, as htslib writes them: room for deflate's worst case below 64 KiB.
BLOCK_DATA = 0xFF00
# The empty block that ends every BGZF file (readers check for it to tell a truncated file).
EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
# gzip header with FEXTRA (flags 4), no time, OS unknown (255), and the 6-byte "BC" subfield
# whose value is the block's total size minus one.
_HEADER = struct.Struct("<4BI2BH2BHH")
_TRAILER = struct.Struct("<II")
_MAGIC = b"\x1f\x8b\x08\x04"  # gzip, deflate, FEXTRA: every BGZF block starts so
MAX_BLOCK = 1 << 16  # bytes of a whole block, at most


def _block(data: bytes | memoryview, level: int) -> bytes:
    cdata = _deflate_lib.compress(data, level, -15)
    if len(cdata) + _HEADER.size + _TRAILER.size > MAX_BLOCK:  # incompressible: stored
        cdata = zlib.compress(data, 0, -15)
    size = len(cdata) + _HEADER.size + _TRAILER.size
    return (_HEADER.pack(31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, size - 1) + cdata
            + _TRAILER.pack(crc32(data), len(data)))


def compress(data: bytes | np.ndarray, level: int = DEFAULT_LEVEL) -> bytes:
    """``data`` as whole BGZF blocks (no :data:`EOF`): one Python call per 65,280 bytes, not per record."""
    view = memoryview(data).cast("B")
    return b"".join(_block(view[i:i + BLOCK_DATA], level) for i in range(0, len(view), BLOCK_DATA))


def is_bgzf(head: bytes) -> bool:
    """Whether ``head``, a file's first bytes, begin a BGZF block: with the usual header its first
    16 bytes tell; where other extra subfields come before ``BC``, the header's every byte is needed."""
    return (len(head) >= 16 and head[:4] == _MAGIC
            and (head[12:16] == b"BC\x02\x00" or block_size(head) is not None))


def block_size(data: np.ndarray | bytes, at: int = 0) -> int | None:
    """The total size of the BGZF block whose header begins at ``data[at]``; None where
    no BGZF header begins there, or ``data`` ends within it.

    The ``BC`` subfield is looked for among all of the header's extra
    subfields, as the SAM specification allows others beside it.
    """
    head = bytes(data[at:at + 18])  # the usual header whole: one subfield, BC (htslib's, this module's)
    if len(head) < 12 or head[:4] != _MAGIC:
        return None
    xlen = int.from_bytes(head[10:12], "little")
    extra = head[12:12 + xlen] if 12 + xlen <= len(head) else bytes(data[at + 12:at + 12 + xlen])
    i = 0
    while len(extra) == xlen and i + 4 <= xlen:
        length = int.from_bytes(extra[i + 2:i + 4], "little")
        if extra[i:i + 2] == b"BC" and length == 2 and i + 6 <= xlen:
            size = int.from_bytes(extra[i + 4:i + 6], "little") + 1
            return size if size >= 12 + xlen + _TRAILER.size else None
        i += 4 + length
    return None


def block_table(data: bytes | bytearray | np.ndarray, at: int = 0, base: int = 0) -> tuple[list[int], list[int]]:
    """The sizes and inflated sizes (from each block's trailer, without inflating it) of the
    whole BGZF blocks of ``data`` from ``at`` on, up to where ``data`` ends or cuts a block short.

    Raises ValueError, naming the offset (``base`` being that of ``data``), where bytes that are
    not a BGZF block follow.
    """
    sizes: list[int] = []
    inflated: list[int] = []
    view = memoryview(data).cast("B")
    n = len(view)
    while at < n:
        size = block_size(view, at)  # (a memoryview's slices are cheaper than a numpy array's)
        if size is None:
            whole_head = n - at >= 12 and (bytes(data[at:at + 4]) != _MAGIC
                                           or n - at >= 12 + int.from_bytes(data[at + 10:at + 12], "little"))
            if whole_head:
                raise ValueError(f"no BGZF block begins at byte {base + at}")
            break  # a header cut short: the rest is yet to come
        if at + size > n:
            break
        sizes.append(size)
        inflated.append(int.from_bytes(view[at + size - 4:at + size], "little"))
        at += size
    return sizes, inflated


def inflate_block(block: np.ndarray | bytes) -> bytes:
    """The data of one whole BGZF block; ValueError where its deflate stream, length or CRC is wrong."""
    view = memoryview(block)
    xlen = int.from_bytes(view[10:12], "little")
    crc, size = _TRAILER.unpack(view[-_TRAILER.size:])
    try:
        data = _deflate_lib.decompress(view[12 + xlen:-_TRAILER.size], -15)
    except INFLATE_ERRORS as e:
        raise ValueError(f"its deflate data is damaged ({e})") from None
    if len(data) != size or crc32(data) != crc:
        raise ValueError("its length or CRC does not match its data")
    return data


def find_block(data: np.ndarray) -> int | None:
    """The offset in ``data`` of the first whole BGZF block that inflates with the right
    length and CRC (None if none begins in it).

    A false start inside compressed data would need the 4 bytes of the gzip
    magic, a well-formed ``BC`` field and deflate data whose CRC matches by
    chance: the workers on both sides of a cut find the same block.
    """
    magic = np.frombuffer(_MAGIC, np.uint8)
    if data.size < 4:
        return None
    hits = np.flatnonzero((data[:-3] == magic[0]) & (data[1:-2] == magic[1]) & (data[2:-1] == magic[2])
                          & (data[3:] == magic[3]))
    for at in hits.tolist():
        size = block_size(data, at)
        if size is None or at + size > data.size:
            continue
        try:
            inflate_block(data[at:at + size])
        except ValueError:
            continue
        return at
    return None


def inflate_blocks(data: np.ndarray, stop: int, base: int = 0) -> tuple[list[bytes], int]:
    """The inflated data of the consecutive BGZF blocks at the start of ``data`` that begin
    before ``stop``, and the offset after the last of them.  ``data`` must reach
    :data:`MAX_BLOCK` bytes past ``stop`` or the end of the file.

    The blocks are found from their headers, then inflated in one call into ISA-L, which lets
    go of the interpreter's lock once for all of them: a call per block took it back 33,000
    times per 10M reads, each time waiting behind the task threads that run Python (600 blocks
    beside one busy thread: 8.3 s, against 0.17 s in one call; docs/performance.md).

    Raises ValueError, naming the block's offset (``base`` being that of ``data``), where a
    block is not BGZF, is damaged or is cut short.
    """
    end = 0
    while end < min(stop, data.size):
        size = block_size(data, end)
        if size is None or end + size > data.size:
            break
        end += size
    else:
        if end == 0:
            return [], 0
        try:
            # The blocks are gzip members: the reader checks each one's CRC and length.
            return [gzip_members(data[:end])], end
        except (*INFLATE_ERRORS, EOFError, OSError):
            pass  # the blocks one by one say which is wrong
    return _inflate_each(data, stop, base)


def _inflate_each(data: np.ndarray, stop: int, base: int) -> tuple[list[bytes], int]:
    """:func:`inflate_blocks` a block at a time, raising ValueError at the first block that is wrong."""
    out, at = [], 0
    while at < min(stop, data.size):
        size = block_size(data, at)
        if size is None or at + size > data.size:
            raise ValueError(f"no whole BGZF block begins at byte {base + at}")
        try:
            out.append(inflate_block(data[at:at + size]))
        except ValueError as e:
            raise ValueError(f"the BGZF block at byte {base + at} is damaged: {e}") from None
        at += size
    return out, at
