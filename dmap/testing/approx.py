"""Plain dynamic programming the approximate mapper is tested against.

* :func:`semiglobal_row` - the last DP row (pattern whole, text ends free):
  what ``kernels/myers.cl`` computes, one column at a time;
* :func:`edit_distance` - the global edit distance;
* :func:`brute_force_loci` - the oracle: every read (and its reverse
  complement) against every contig, no index, no seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def semiglobal_row(pattern: np.ndarray, text: np.ndarray, sigma: int) -> np.ndarray:
    """``D[m][j]`` for every text position j: the least edit distance of the
    whole pattern to a text substring ending at j.

    Symbols ``>= sigma`` (N, separators, NO_MATCH) match nothing.
    """
    return _last_row(pattern, text, sigma, np.zeros(text.size + 1, np.int64))[1:]


def edit_distance(a: np.ndarray, b: np.ndarray, sigma: int) -> int:
    """Global edit distance (symbols >= sigma match nothing)."""
    return int(_last_row(a, b, sigma, np.arange(b.size + 1))[-1])


def _last_row(pattern: np.ndarray, text: np.ndarray, sigma: int, first_row: np.ndarray) -> np.ndarray:
    """The DP's last row ``D[m][0..n]`` (``D[i][j]``: the pattern's first i symbols against the
    text's first j), from its first row ``D[0]``: zeros for an alignment that may start anywhere
    in the text, ``0..n`` for one that starts at its beginning.  ``D[i][0] = i``.

    One pattern symbol at a time, the whole row at once: the diagonal and vertical moves are
    elementwise, and the horizontal ones, ``D[i][j] = min over k <= j of E[k] + (j - k)``, one
    running minimum of ``E[k] - k``.  Rows, not columns, so that the loop runs over the read
    (about 100 symbols), not the contig (thousands).
    """
    columns = np.arange(text.size + 1)
    row = first_row
    for i, x in enumerate(pattern.tolist(), 1):
        cost = ((text != x) | (text >= sigma) | (x >= sigma)).astype(np.int64)
        diag_or_up = np.empty(text.size + 1, np.int64)
        diag_or_up[0] = i  # i insertions (read symbols) before any text
        diag_or_up[1:] = np.minimum(row[:-1] + cost, row[1:] + 1)
        row = np.minimum.accumulate(diag_or_up - columns) + columns
    return row


def runs(values: np.ndarray, limit: int) -> list[tuple[int, int, int, int]]:
    """Maximal runs of positions with ``values <= limit``, each as
    ``(first, last, best_position, best_value)``; the best is the least
    value, the leftmost among equals."""
    ok = np.flatnonzero(values <= limit)
    out = []
    if ok.size == 0:
        return out
    breaks = np.flatnonzero(np.diff(ok) > 1)
    for lo, hi in zip(np.r_[0, breaks + 1], np.r_[breaks, ok.size - 1]):
        span = ok[lo : hi + 1]
        best = span[np.argmin(values[span])]
        out.append((int(span[0]), int(span[-1]), int(best), int(values[best])))
    return out


def brute_force_loci(
    contigs: list[np.ndarray], patterns: list[np.ndarray], sigma: int, max_errors: int | Sequence[int]
) -> set[tuple[int, int, int, int]]:
    """Every locus of every pattern: ``(pattern, contig, best end, distance)``.

    A locus is a maximal run of consecutive end positions in one contig where
    the pattern aligns with at most ``max_errors`` edits (one K for all, or
    each pattern's); its best end has the
    least distance (the leftmost among equals).  Two loci whose best
    alignments (the DP traceback of :func:`dmap.approx.traceback.traceback`)
    start at the same position are one: the better is kept (least distance,
    then leftmost end), as RazerS 3 keeps one match per start.
    """
    return {(p, c, end, dist) for p, c, _, end, dist in brute_force_alignments(contigs, patterns, sigma, max_errors)}


def brute_force_alignments(
    contigs: list[np.ndarray], patterns: list[np.ndarray], sigma: int, max_errors: int | Sequence[int]
) -> set[tuple[int, int, int, int, int]]:
    """The loci of :func:`brute_force_loci` with the start of each best alignment:
    ``(pattern, contig, start, best end, distance)``."""
    from ..approx.traceback import traceback

    out = set()
    errors = np.broadcast_to(np.asarray(max_errors), (len(patterns),))
    for p, pat in enumerate(patterns):
        k = int(errors[p])
        for c, text in enumerate(contigs):
            found = runs(semiglobal_row(pat, text, sigma), k)
            if not found:
                continue
            ends = np.array([end for _, _, end, _ in found])
            starts, _, _ = traceback(pat[None, :].repeat(ends.size, 0), pat.size, text, ends,
                                     np.zeros(ends.size, np.int64), k, sigma)
            best: dict[int, tuple[int, int]] = {}
            for start, (_, _, end, dist) in zip(starts.tolist(), found):
                best[start] = min(best.get(start, (dist, end)), (dist, end))
            out.update((p, c, start, end, dist) for start, (dist, end) in best.items())
    return out


def brute_force_pairs(
    alignments: set[tuple[int, int, int, int, int]], low: int, high: int
) -> set[tuple[int, int, int, int, int, int]]:
    """Every proper pair (:mod:`dmap.mapping.pairs`) of DNA reads whose mates are reads ``2i`` and
    ``2i + 1`` (pattern ``2 * read + strand``), from their :func:`brute_force_alignments`:
    ``(pair, contig, first mate's start, its strand, second mate's start, its strand)``."""
    by_read: dict[int, list[tuple[int, int, int, int]]] = {}
    for p, c, start, end, _ in alignments:
        by_read.setdefault(p // 2, []).append((p % 2, c, start, end))
    out = set()
    for read, first in by_read.items():
        if read % 2:
            continue
        for s1, c1, a1, e1 in first:
            for s2, c2, a2, e2 in by_read.get(read + 1, []):
                if c1 != c2 or s1 == s2:
                    continue
                (fa, f_is_first), (ra, re) = ((a1, True), (a2, e2)) if s1 == 0 else ((a2, False), (a1, e1))
                leads = fa < ra or (fa == ra and f_is_first)
                if leads and low <= re - fa + 1 <= high:
                    out.add((read // 2, c1, a1, s1, a2, s2))
    return out
