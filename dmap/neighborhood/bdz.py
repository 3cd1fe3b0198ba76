"""BDZ perfect hashing over random 3-hypergraphs, one hash function per seed.

For a seed s with n distinct neighborhood keys, the vertices are three
ranges of r = ceil(1.23 n / 3) (or more), so |V| = 3r >= 1.23 n.  Key b is
the edge ``(x, r + y, 2r + z)``, where ``x, y, z`` come from Bob Jenkins'
mix of the key with the seed's family index J (:func:`jenkins3`), each
scaled into ``[0, r)``.  If
the hypergraph peels (is "acyclic", which a random one is with probability
near 1 at this density), each edge is assigned the vertex it was peeled by,
and a 2-bit value ``g`` per vertex makes
``phf(b) = vertex[(g[v0] + g[v1] + g[v2]) mod 3]`` find it.  Otherwise J is
incremented (and after a few failures r grows) until it peels.

All seeds' hypergraphs are disjoint, so they are peeled together in one
vectorized pass (a round peels every edge that has a degree-1 vertex at
its start; that is a valid peeling order) and only failed seeds are
retried.  The OpenCL lookup in ``kernels/neighborhood.cl`` computes the
same function as :func:`lookup` here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GOLDEN = np.uint32(0x9E3779B9)
LOAD = 1.23  # |V| / |E| (the paper: a random 3-hypergraph peels w.h.p. above 1.23)
# Small hypergraphs peel far less often at that density (two of 5 keys share
# an edge in a third of the draws), so a seed's ranges grow by 5% (at least
# one vertex) after every TRIES_PER_SIZE failed families.  Growing only the
# seeds that fail keeps the index smaller than a fixed slack for every seed
# (E. coli 10/8: |V|/|E| 1.76 instead of 2.66 with 2 extra vertices per range).
TRIES_PER_SIZE = 2


def _mix(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """Jenkins' 96-bit mix (the paper's Figure 6), in place on uint32 arrays."""
    a -= b; a -= c; a ^= c >> 13  # noqa: E702
    b -= c; b -= a; b ^= a << 8  # noqa: E702
    c -= a; c -= b; c ^= b >> 13  # noqa: E702
    a -= b; a -= c; a ^= c >> 12  # noqa: E702
    b -= c; b -= a; b ^= a << 16  # noqa: E702
    c -= a; c -= b; c ^= b >> 5  # noqa: E702
    a -= b; a -= c; a ^= c >> 3  # noqa: E702
    b -= c; b -= a; b ^= a << 10  # noqa: E702
    c -= a; c -= b; c ^= b >> 15  # noqa: E702


def jenkins3(key: np.ndarray, family: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three 32-bit hashes of 64-bit keys under hash family ``family``.

    One mix, as lookup2 does for keys up to 12 bytes.  Only ``c`` and ``b``
    are well mixed after one round (hashlittle2 returns just those two), so
    the third hash is ``c`` xor ``b`` rotated; taking ``a`` instead needed
    twice the vertices on small integer keys.  Measured on E. coli windows,
    this peels exactly as well as two full mixes, at half the arithmetic.
    """
    key = key.astype(np.uint64)
    a = (key & np.uint64(0xFFFFFFFF)).astype(np.uint32) + GOLDEN
    b = (key >> np.uint64(32)).astype(np.uint32) + GOLDEN
    c = np.broadcast_to(family, key.shape).astype(np.uint32).copy()
    _mix(a, b, c)
    return c, b, c ^ ((b << np.uint32(16)) | (b >> np.uint32(16)))


def _scale(h: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``h * r / 2**32``: a uniform value in [0, r) without a division (OpenCL ``mul_hi``)."""
    return ((h.astype(np.uint64) * r.astype(np.uint64)) >> np.uint64(32)).astype(np.int64)


def edges(key: np.ndarray, family: np.ndarray, base: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The (n, 3) global vertices of each key's edge (``base``/``r`` per key)."""
    x, y, z = jenkins3(key, family)
    base = base.astype(np.int64)
    return np.stack([base + _scale(x, r), base + r + _scale(y, r), base + 2 * r + _scale(z, r)], axis=1)


@dataclass
class PerfectHash:
    """The perfect hashes of all seeds of one block.

    Seed s owns vertices ``[vertex_start[s], vertex_start[s+1])`` (three
    equal ranges, none for a seed that does not occur) and hash family
    ``family[s]``; ``g`` holds 2 bits per vertex, four vertices per byte.
    """

    vertex_start: np.ndarray  # uint32, n_seeds + 1
    family: np.ndarray  # uint32, n_seeds
    g: np.ndarray  # uint8, ceil(n_vertices / 4)

    @property
    def n_vertices(self) -> int:
        return int(self.vertex_start[-1])

    def g_of(self, v: np.ndarray) -> np.ndarray:
        return (self.g[v >> 2] >> ((v & 3) * 2).astype(np.uint8)) & 3


def _peel(e: np.ndarray, n_vertices: int) -> tuple[np.ndarray, np.ndarray]:
    """Peel a 3-hypergraph: per edge its round (-1: not peeled) and the slot (0-2) of its free vertex."""
    n = e.shape[0]
    rnd = np.full(n, -1, dtype=np.int64)
    slot = np.zeros(n, dtype=np.int64)
    deg = np.bincount(e.ravel(), minlength=n_vertices)
    # vertex -> incident edges (CSR), to find the edges a round frees up
    flat_order = np.argsort(e.ravel(), kind="stable")
    inc_edge = flat_order // 3
    inc_start = np.zeros(n_vertices + 1, dtype=np.int64)
    np.cumsum(deg, out=inc_start[1:])
    candidates = np.arange(n)
    mark = np.zeros(n, dtype=bool)
    t = 0
    while candidates.size:
        candidates = candidates[rnd[candidates] < 0]
        d1 = deg[e[candidates]] == 1
        ok = d1.any(axis=1)
        peeled = candidates[ok]
        if peeled.size == 0:
            break
        rnd[peeled] = t
        slot[peeled] = np.argmax(d1[ok], axis=1)
        touched = e[peeled].ravel()
        np.subtract.at(deg, touched, 1)
        now_one = touched[deg[touched] == 1]  # each has one live edge left: next round's candidates
        lo, hi = inc_start[now_one], inc_start[now_one + 1]
        cnt = hi - lo
        idx = np.repeat(lo - np.r_[0, np.cumsum(cnt)[:-1]], cnt) + np.arange(cnt.sum())
        mark[inc_edge[idx]] = True
        candidates = np.flatnonzero(mark)
        mark[candidates] = False
        t += 1
    return rnd, slot


def build_perfect_hash(seed: np.ndarray, key: np.ndarray, n_seeds: int,
                       max_rounds: int = 200) -> tuple[PerfectHash, np.ndarray]:
    """Perfect hashes for distinct ``(seed, key)`` pairs.

    Returns
    -------
    PerfectHash, vertex
        The hashes, and the vertex each pair is assigned (distinct within a seed).
    """
    seed = seed.astype(np.int64)
    n_keys = np.bincount(seed, minlength=n_seeds)
    r = np.where(n_keys > 0, np.ceil(LOAD * n_keys / 3).astype(np.int64), 0)
    family = np.zeros(n_seeds, dtype=np.uint32)
    failures = np.zeros(n_seeds, dtype=np.int64)
    pending = n_keys > 0
    g_local: dict[int, tuple] = {}  # attempt number -> (seeds that peeled, their vertex base, that attempt's g)
    local_vertex = np.zeros(seed.size, dtype=np.int64)  # offset of the key's vertex within its seed
    for attempt in range(max_rounds):
        if not pending.any():
            break
        seeds = np.flatnonzero(pending)
        sel = np.flatnonzero(pending[seed])
        base = np.zeros(n_seeds, dtype=np.int64)
        base[seeds] = np.r_[0, np.cumsum(3 * r[seeds])[:-1]]
        nv = int((3 * r[seeds]).sum())
        e = edges(key[sel], family[seed[sel]], base[seed[sel]], r[seed[sel]])
        rnd, slot = _peel(e, nv)
        failed = np.zeros(n_seeds, dtype=bool)  # masks, not np.unique/isin: those were a quarter of the build
        failed[seed[sel][rnd < 0]] = True
        failed_seeds = np.flatnonzero(failed)
        good = ~failed[seed[sel]]
        g = np.zeros(nv, dtype=np.int64)
        by_round = np.flatnonzero(good)[np.argsort(rnd[good], kind="stable")]
        bounds = np.searchsorted(rnd[by_round], np.arange(int(rnd[by_round[-1]]) + 2 if by_round.size else 1))
        for t in range(bounds.size - 2, -1, -1):  # reverse peeling order, one round at a time
            at = by_round[bounds[t]:bounds[t + 1]]
            ve, j = e[at], slot[at]
            free = ve[np.arange(ve.shape[0]), j]
            others = g[ve].sum(axis=1) - g[free]
            g[free] = (j - others) % 3
        assigned = e[np.arange(e.shape[0]), slot]
        ok_keys = sel[good]
        local_vertex[ok_keys] = assigned[good] - base[seed[ok_keys]]
        ok_seeds = seeds[~failed[seeds]]
        g_local[attempt] = (ok_seeds, base[ok_seeds], g)
        pending[ok_seeds] = False
        failures[failed_seeds] += 1
        family[failed_seeds] += 1
        grow = failed_seeds[failures[failed_seeds] % TRIES_PER_SIZE == 0]
        r[grow] += np.maximum(1, r[grow] // 20)
    else:
        raise RuntimeError(f"perfect hash construction did not converge for {int(pending.sum())} seeds")
    vertex_start = np.zeros(n_seeds + 1, dtype=np.int64)
    np.cumsum(3 * r, out=vertex_start[1:])
    total = int(vertex_start[-1])
    g_all = np.zeros(total, dtype=np.uint8)
    for seeds_ok, old_base, g in g_local.values():
        cnt = 3 * r[seeds_ok]
        src = np.repeat(old_base - np.r_[0, np.cumsum(cnt)[:-1]], cnt) + np.arange(cnt.sum())
        dst = np.repeat(vertex_start[seeds_ok] - np.r_[0, np.cumsum(cnt)[:-1]], cnt) + np.arange(cnt.sum())
        g_all[dst] = g[src]
    packed = np.zeros((total + 3) // 4 * 4, dtype=np.uint8)
    packed[:total] = g_all
    packed = packed.reshape(-1, 4)
    g_bytes = (packed[:, 0] | (packed[:, 1] << 2) | (packed[:, 2] << 4) | (packed[:, 3] << 6)).astype(np.uint8)
    if vertex_start[-1] >= 1 << 32:
        raise RuntimeError("a block has too many neighborhoods for 32-bit vertex numbers; use a smaller --block-length")
    ph = PerfectHash(vertex_start.astype(np.uint32), family, g_bytes)
    return ph, vertex_start[seed] + local_vertex


def lookup(ph: PerfectHash, seed: np.ndarray, key: np.ndarray) -> np.ndarray:
    """``phf(key)`` in seed ``seed``'s hash (a vertex for any key; -1 for a seed with no keys).

    The caller must compare the key stored at that vertex: a perfect hash
    maps absent keys somewhere too.
    """
    seed = seed.astype(np.int64)
    base = ph.vertex_start[seed].astype(np.int64)
    r = (ph.vertex_start[seed + 1].astype(np.int64) - base) // 3
    e = edges(key, ph.family[seed], base, r)
    j = ph.g_of(e).astype(np.int64).sum(axis=1) % 3
    v = e[np.arange(e.shape[0]), j]
    return np.where(r > 0, v, -1)
