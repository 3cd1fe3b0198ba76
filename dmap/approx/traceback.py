"""Alignments from best end positions: a banded DP traceback in numpy, then CIGAR and MD.

Myers' kernel gives only the distance at each end.  For the few ends that
are reported, the alignment itself comes from a DP over the band of
diagonals an alignment with at most K edits can use (2K+1 cells per read
symbol), vectorised across all alignments of the same read length.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from ..reads import FlatStrings
from .patterns import DevicePatterns

if TYPE_CHECKING:
    from ..opencl.device import BlockText, Device

INF = np.int16(10_000)
DIAG, UP, LEFT = 0, 1, 2  # match/mismatch, insertion (read symbol only), deletion (reference symbol only)
# Op codes in the op matrix; PAD fills after the end of an alignment.
OP_MATCH, OP_MISMATCH, OP_INS, OP_DEL, PAD = 0, 1, 2, 3, 255


def traceback(
    patterns: np.ndarray,
    m: int,
    text: np.ndarray,
    end: np.ndarray,
    min_start: np.ndarray,
    max_errors: int,
    sigma: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Alignments of patterns of length ``m`` ending at text positions ``end``.

    Parameters
    ----------
    patterns
        ``(n, >= m)`` codes.
    text
        The text (codes) ``end`` and ``min_start`` index into.
    end
        Last text position of each alignment (inclusive).
    min_start
        No alignment may use text before this position (its region's start).

    Returns
    -------
    start, distance, ops
        First text position, edit distance and ``(n, m + 2K)`` op codes in
        text order, padded with ``PAD``.  Ties prefer a match/mismatch, then
        an insertion, then a deletion, at each step from the end.
    """
    k = max_errors
    n_alignments = end.size
    width = 2 * k + 1  # band cell b is diagonal j - i = b
    cols = m + k  # text columns 1..cols end at `end`
    first_text = end.astype(np.int64) - cols + 1  # text position of column 1
    j0 = np.maximum(min_start.astype(np.int64) - first_text, 0)  # columns < j0 are outside the region
    pos = first_text[:, None] + np.arange(cols + 1)[None, :] - 1  # text position of column j
    tcol = np.where(pos >= 0, text[np.clip(pos, 0, text.size - 1)], 255).astype(np.int16)
    tcol[:, 0] = 255
    pat = patterns[:, :m].astype(np.int16)
    big = np.int16(sigma)
    D = np.empty((n_alignments, m + 1, width), dtype=np.int16)
    ptr = np.zeros((n_alignments, m + 1, width), dtype=np.uint8)
    band = np.arange(width)
    D[:, 0, :] = np.where(band[None, :] >= j0[:, None], 0, INF)
    for i in range(1, m + 1):
        p = pat[:, i - 1]
        for b in range(width):
            j = i + b
            if j > cols:
                D[:, i, b] = INF
                continue
            t = tcol[:, j]
            cost = ((p != t) | (p >= big) | (t >= big)).astype(np.int16)
            best = D[:, i - 1, b] + cost
            choice = np.zeros(n_alignments, dtype=np.uint8)
            if b + 1 < width:
                up = D[:, i - 1, b + 1] + 1
                better = up < best
                best = np.where(better, up, best)
                choice[better] = UP
            if b > 0:
                left = D[:, i, b - 1] + 1
                better = left < best
                best = np.where(better, left, best)
                choice[better] = LEFT
            best[j < j0] = INF
            D[:, i, b] = np.minimum(best, INF)
            ptr[:, i, b] = choice
    distance = D[:, m, k].astype(np.int64)
    ops = np.full((n_alignments, m + 2 * k), PAD, dtype=np.uint8)
    i = np.full(n_alignments, m)
    b = np.full(n_alignments, k)
    rows = np.arange(n_alignments)
    step = 0
    while (i > 0).any():
        live = i > 0
        c = ptr[rows, i, b]
        j = i + b
        mism = (pat[rows, np.maximum(i - 1, 0)] != tcol[rows, np.minimum(j, cols)]) \
            | (pat[rows, np.maximum(i - 1, 0)] >= big) | (tcol[rows, np.minimum(j, cols)] >= big)
        op = np.select([c == DIAG, c == UP], [np.where(mism, OP_MISMATCH, OP_MATCH), OP_INS], OP_DEL)
        ops[:, step] = np.where(live, op, PAD)
        i = np.where(live & (c != LEFT), i - 1, i)
        b = np.where(live & (c == UP), b + 1, np.where(live & (c == LEFT), b - 1, b))
        step += 1
    start = first_text + b  # at row 0, column b: the alignment starts at column b + 1
    # ops were collected from the end: reverse the used part of each row
    used = (ops != PAD).sum(axis=1)
    idx = used[:, None] - 1 - np.arange(ops.shape[1])[None, :]
    ops = np.where(idx >= 0, ops[rows[:, None], np.maximum(idx, 0)], PAD).astype(np.uint8)
    return start, distance, ops


_OP_LETTERS = np.frombuffer(b"=XID", dtype=np.uint8)
_RUNS = re.compile(rb"(=+|X+|I+|D+)")
_MATCH_RUNS = re.compile(rb"([=X]+|I+|D+)")


def cigar_and_md(ops: np.ndarray, ref_letters: np.ndarray, eqx: bool = False) -> tuple[str, str]:
    """CIGAR (``M/I/D``, or ``=/X/I/D`` with ``eqx``) and the SAM ``MD`` tag of one alignment.

    ``ref_letters`` holds the reference symbols (ASCII) the alignment spans.
    """
    ops = ops[ops != PAD]
    letters = _OP_LETTERS[ops].tobytes()
    cigar = []
    for run in (_RUNS if eqx else _MATCH_RUNS).findall(letters):
        op = chr(run[0]) if (eqx or run[0] in b"ID") else "M"
        cigar.append(f"{len(run)}{op}")
    md, matches, t = [], 0, 0
    for run in _RUNS.findall(letters):
        kind = run[0]
        if kind == ord("="):
            matches += len(run)
            t += len(run)
        elif kind == ord("X"):
            for x in range(len(run)):
                md.append(f"{matches}{chr(ref_letters[t + x])}")
                matches = 0
            t += len(run)
        elif kind == ord("D"):
            md.append(f"{matches}^{ref_letters[t : t + len(run)].tobytes().decode('latin-1')}")
            matches = 0
            t += len(run)
        # insertions consume no reference
    md.append(str(matches))
    return "".join(cigar), "".join(md)


# Scratch for the kernel's traceback pointers is (m + 2K + 1) * (2K + 1) bytes
# per alignment; alignments go to the device in batches that keep it below this.
SCRATCH_BYTES = 256 << 20
NO_DISTANCE = 0xFFFFFFFF  # traceback.cl: no distance known for the end


def traceback_device(
    device: Device,
    text: BlockText,
    patterns: DevicePatterns,
    row: np.ndarray,
    end: np.ndarray,
    min_start: np.ndarray,
    max_errors: int,
    sigma: int,
    letters: np.ndarray,
    eqx: bool = False,
    expect: np.ndarray | None = None,
    with_ops: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, FlatStrings, FlatStrings]:
    """:func:`traceback`, CIGAR and MD of every alignment with ``kernels/traceback.cl``.

    Parameters
    ----------
    text
        The text, as a :class:`dmap.opencl.device.BlockText` (host array and device buffer).
    patterns, row
        The patterns on the device (:class:`dmap.approx.patterns.DevicePatterns`) and
        each alignment's row of them.
    expect
        The edit distance at each end, as Myers' kernel found it: alignments
        without an indel are then written without the DP (``traceback.cl``).
    with_ops
        Return the op codes (None otherwise: the strings hold what mapping needs).

    Returns
    -------
    start, distance, ops, cigar, md
    """
    n, width = int(row.size), patterns.width
    pattern_length = patterns.lengths[row]
    k = max_errors
    maxops = width + 2 * k
    cl = device.cl
    prg = device.program("traceback.cl", {"SIGMA": sigma, "K": k, "WIDTH": 2 * k + 1, "MAXOPS": maxops,
                                          "EQX": int(eqx)})
    start, dist, n_ops, cigar_len, md_len = (np.empty(n, dtype=np.uint32) for _ in range(5))
    ops = np.empty((n, maxops), dtype=np.uint8) if with_ops else None
    cigars, mds = [], []
    letters_buf = device.upload(letters)
    # NO_DISTANCE: not known, always the DP.
    want = np.full(n, NO_DISTANCE, np.uint32) if expect is None else expect.astype(np.uint32)
    per = max(1, SCRATCH_BYTES // ((maxops + 1) * (2 * k + 1)))
    for lo in range(0, n, per):
        hi = min(n, lo + per)
        c = hi - lo
        with device.timed("dmap-transfer"):
            ins = [device.upload(np.ascontiguousarray(a[lo:hi])) for a in (
                row.astype(np.uint32), pattern_length, end.astype(np.uint32), min_start.astype(np.uint32), want)]
        outs = [device.buffer(size) for size in (
            c * (maxops + 1) * (2 * k + 1), c * maxops, 4 * c, 4 * c, 4 * c, 4 * c, 4 * c)]
        device.run(prg, "traceback", [text.buffer, np.uint32(text.host.size), patterns.rows, np.uint32(width), *ins,
                                      np.uint32(c), letters_buf, *outs], c, "dmap-traceback-kernel")
        with device.timed("dmap-transfer"):
            for host, buf in zip((start[lo:hi], dist[lo:hi], n_ops[lo:hi], cigar_len[lo:hi], md_len[lo:hi]),
                                 outs[2:]):
                cl.enqueue_copy(device.queue, host, buf)
            if with_ops:
                cl.enqueue_copy(device.queue, ops[lo:hi], outs[1])
        # The strings, back to back at offsets summed from their lengths, from the ops still on the device.
        offsets = [np.zeros(c, dtype=np.uint64) for _ in range(2)]
        for off, lengths in zip(offsets, (cigar_len[lo:hi], md_len[lo:hi])):
            np.cumsum(lengths[:-1], out=off[1:])
        strings = [np.empty(int(lengths.sum()), dtype=np.uint8) for lengths in (cigar_len[lo:hi], md_len[lo:hi])]
        string_bufs = [device.buffer(x.nbytes) for x in strings]
        device.run(prg, "alignment_strings", [text.buffer, letters_buf, outs[1], outs[4], outs[2],
                                              *(device.upload(o) for o in offsets), np.uint32(c), *string_bufs],
                   c, "dmap-traceback-kernel")
        with device.timed("dmap-transfer"):
            for host, buf in zip(strings, string_bufs):
                if host.size:
                    cl.enqueue_copy(device.queue, host, buf)
        cigars.append(strings[0])
        mds.append(strings[1])
    if with_ops:
        ops[np.arange(maxops)[None, :] >= n_ops[:, None]] = PAD
    flat = lambda parts, lengths: FlatStrings.packed(  # noqa: E731
        np.concatenate(parts) if parts else np.zeros(0, np.uint8), lengths)
    return start.astype(np.int64), dist.astype(np.int64), ops, flat(cigars, cigar_len), flat(mds, md_len)
