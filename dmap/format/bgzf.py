"""BGZF, the blocked gzip of BAM files (SAM specification, section 4.1).

A BGZF file is a series of gzip members of at most 64 KiB each, with the
compressed size in an extra field, ended by a fixed 28-byte empty block.
Members concatenate: each chunk of a run is compressed on its worker into
whole blocks, and the output is the header's blocks, the chunks' blocks in
input order and :data:`EOF`.

Deflate is ISA-L's (``isal``, installed with ``xopen`` on x86-64 and ARM)
where present, else zlib's.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

try:
    from isal import isal_zlib as _deflate_lib

    # ISA-L's levels are 0-3; its level 1 compresses BAM about as well as zlib's level 6 (about 3%
    # larger; docs/performance.md) at several times the speed.
    DEFAULT_LEVEL = 1
except ImportError:  # pragma: no cover - platforms without ISA-L
    _deflate_lib = zlib
    DEFAULT_LEVEL = 6

# Uncompressed bytes per block, as htslib writes them: room for deflate's worst case below 64 KiB.
BLOCK_DATA = 0xFF00
# The empty block that ends every BGZF file (readers check for it to tell a truncated file).
EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
# gzip header with FEXTRA (flags 4), no time, OS unknown (255), and the 6-byte "BC" subfield
# whose value is the block's total size minus one.
_HEADER = struct.Struct("<4BI2BH2BHH")
_TRAILER = struct.Struct("<II")
_MAX_BLOCK = 1 << 16


def _block(data: bytes | memoryview, level: int) -> bytes:
    cdata = _deflate_lib.compress(data, level, -15)
    if len(cdata) + _HEADER.size + _TRAILER.size > _MAX_BLOCK:  # incompressible: stored
        cdata = zlib.compress(data, 0, -15)
    size = len(cdata) + _HEADER.size + _TRAILER.size
    return (_HEADER.pack(31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, size - 1) + cdata
            + _TRAILER.pack(zlib.crc32(data), len(data)))


def compress(data: bytes | np.ndarray, level: int = DEFAULT_LEVEL) -> bytes:
    """``data`` as whole BGZF blocks (no :data:`EOF`): one Python call per 65,280 bytes, not per record."""
    view = memoryview(data).cast("B")
    return b"".join(_block(view[i:i + BLOCK_DATA], level) for i in range(0, len(view), BLOCK_DATA))


def is_bgzf(head: bytes) -> bool:
    """Whether ``head``, a file's first bytes, begin a BGZF block."""
    return len(head) >= 16 and head[:4] == b"\x1f\x8b\x08\x04" and head[12:16] == b"BC\x02\x00"
