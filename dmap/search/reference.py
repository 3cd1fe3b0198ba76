"""Plain references the kernels are tested against.

* :func:`backward_search_numpy` - the same backward search as
  ``kernels/exact_search.cl``, in numpy over the same Occ arrays;
* :func:`brute_force_hits` - the oracle: plain string search of every read
  (and its reverse complement) in every contig, no index at all.
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
