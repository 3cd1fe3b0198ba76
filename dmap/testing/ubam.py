"""Reads from BAM records decoded in Python, one record at a time: the reference that
``kernels/bam_reads.cl`` (:func:`dmap.io.ubam.read_fields`) is tested against."""

from __future__ import annotations

import numpy as np

LETTERS = "=ACMGRSVTWYHKDBN"
COMPLEMENT = str.maketrans(LETTERS, "=TGKCYSBAWRDMHVN")


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
