"""Plain references the kernels are tested against.

* :func:`backward_search_numpy` - the same backward search as
  ``kernels/exact_search.cl``, in numpy over the same Occ arrays;
* :func:`brute_force_hits` - the oracle: plain string search of every read
  (and its reverse complement) in every contig, no index at all;
* :func:`edit_search_reference` - the search of ``kernels/edit_seeds.cl``
  as a plain recursion without its lower bound, over the same Occ arrays;
* :func:`edit_starts_brute_force` - its oracle: where, by dynamic
  programming at every text position, a string within m edits starts.
"""

from __future__ import annotations

import numpy as np

from ..alphabet import Alphabet, reverse_complement
from ..index.occ import occ_lookup
from ..index.store import BlockArrays


def backward_search_numpy(
    block: BlockArrays, codes: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, n_strands: int
) -> np.ndarray:
    """``(n, n_strands, 2)`` intervals, like :func:`dmap.search.exact.search_block`."""
    n = len(lengths)
    lengths = lengths.astype(np.int64)
    offsets = offsets.astype(np.int64)
    sigma = block.shape.sigma
    out = np.zeros((n, n_strands, 2), dtype=np.int64)
    for strand in range(n_strands):
        sp = np.zeros(n, dtype=np.int64)
        ep = np.where(lengths > 0, block.shape.n_rows, 0).astype(np.int64)
        for j in range(int(lengths.max(initial=0))):
            active = (j < lengths) & (sp < ep)
            if not active.any():
                break
            idx = np.flatnonzero(active)
            if strand == 0:
                c = codes[offsets[idx] + lengths[idx] - 1 - j].astype(np.int64)
            else:
                c = codes[offsets[idx] + j].astype(np.int64)
                c = np.where(c < 4, 3 - c, 255)
            bad = c >= sigma
            sp[idx[bad]] = ep[idx[bad]] = 0
            idx, c = idx[~bad], c[~bad]
            base = block.C[c].astype(np.int64)
            sp[idx] = base + occ_lookup(block.occ, block.shape, c, sp[idx])
            ep[idx] = base + occ_lookup(block.occ, block.shape, c, ep[idx])
        out[:, strand, 0] = sp
        out[:, strand, 1] = np.maximum(ep, sp)
    return out.astype(np.uint32)


def brute_force_hits(
    contigs: list[tuple[str, str]], reads: list[str], alphabet: Alphabet
) -> set[tuple[int, str, int, int]]:
    """Every exact occurrence as ``(read number, contig, 0-based position, strand)``.

    A read containing a never-matching symbol (N, X, a symbol outside a text
    alphabet) has no occurrence; such symbols in the reference match nothing.
    """
    fold = (lambda s: s) if alphabet.case_sensitive else str.upper
    searchable = set(alphabet.symbols.decode("latin-1"))
    hits = set()
    targets = [(name, fold(seq)) for name, seq in contigs]
    for i, read in enumerate(reads):
        read = fold(read)
        if not read or not set(read) <= searchable:
            continue
        strands = [(0, read)]
        if alphabet.has_reverse_complement:
            strands.append((1, reverse_complement(read)))
        for strand, pattern in strands:
            for name, seq in targets:
                at = seq.find(pattern)
                while at != -1:
                    hits.add((i, name, at, strand))
                    at = seq.find(pattern, at + 1)
    return hits


def edit_search_reference(block: BlockArrays, pattern: np.ndarray, max_edits: int) -> set[tuple[int, int]]:
    """The intervals ``kernels/edit_seeds.cl`` finds for one oriented pattern, by plain recursion.

    Same moves as the kernel (match/substitute, insert, delete; no deletion
    before the first or after the last pattern symbol; no insertion next to
    a deletion) but no lower bound: what the bound cuts must be nothing.
    """
    sigma = block.shape.sigma
    found: set[tuple[int, int]] = set()

    codes = np.arange(sigma)
    base = block.C[codes].astype(np.int64)

    def lf(sp: int, ep: int) -> list[tuple[int, int]]:
        """The interval after each symbol c (0 .. sigma-1) is put before (sp, ep)'s strings."""
        sps = base + occ_lookup(block.occ, block.shape, codes, np.full(sigma, sp))
        eps = base + occ_lookup(block.occ, block.shape, codes, np.full(sigma, ep))
        return list(zip(sps.tolist(), eps.tolist()))

    def visit(i: int, sp: int, ep: int, e: int, op: str) -> None:
        if sp >= ep or e > max_edits:
            return
        if i == 0:
            if sp > 0:  # not the empty string
                found.add((sp, ep))
            return
        after = lf(sp, ep)
        for c, (c_sp, c_ep) in enumerate(after):
            visit(i - 1, c_sp, c_ep, e + (int(pattern[i - 1]) != c), "M")
        if op != "D":
            visit(i - 1, sp, ep, e + 1, "I")
        if op != "I" and i < len(pattern):
            for c_sp, c_ep in after:
                visit(i, c_sp, c_ep, e + 1, "D")

    visit(len(pattern), 0, block.shape.n_rows, 0, "M")
    return found


def edit_starts_brute_force(text: np.ndarray, pattern: np.ndarray, max_edits: int, sigma: int) -> set[int]:
    """Start positions of the text strings within ``max_edits`` edits of ``pattern``.

    Edits are Levenshtein's; an alignment may not begin or end with a
    deletion (a text symbol against no pattern symbol), as in the kernel.
    Codes ``>= sigma`` match nothing and no string contains them (they are
    separators and N's in the reference).
    """
    text = np.asarray(text, dtype=np.int64)
    pattern = np.asarray(pattern, dtype=np.int64)
    m = len(pattern)
    starts = set()
    for x in range(len(text)):
        stop = x
        while stop < min(len(text), x + m + max_edits) and text[stop] < sigma:
            stop += 1
        s = text[x:stop]
        if s.size == 0:
            continue
        inf = 1 << 20
        # d[i][j]: pattern[:i] against s[:j], never starting with a deletion.
        d = np.full((m + 1, s.size + 1), inf, dtype=np.int64)
        d[:, 0] = np.arange(m + 1)
        for i in range(1, m + 1):
            for j in range(1, s.size + 1):
                d[i, j] = min(d[i - 1, j - 1] + (pattern[i - 1] != s[j - 1]), d[i - 1, j] + 1, d[i, j - 1] + 1)
        # The last move consumes a pattern symbol (no trailing deletion), and the string is not empty.
        for j in range(1, s.size + 1):
            if min(d[m - 1, j - 1] + (pattern[m - 1] != s[j - 1]), d[m - 1, j] + 1) <= max_edits:
                starts.add(x)
                break
    return starts
