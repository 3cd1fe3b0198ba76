// MAROSE's "seed and filter" (Tran, Giraud and Varre 2015, Algorithm 1) over a neighborhood index.
//
// One work-item per (pattern, strand).  A pattern is the window of SPAN seed
// symbols and LN neighborhood symbols at pattern_offset[p] of read
// pattern_read[p] (reverse-complemented on strand 1).  Its neighborhood is
// looked up with every degenerated neighborhood within E substitutions; a
// read symbol that matches nothing (N, code >= SIGMA) is a substitution
// already, so it must be one of the substituted positions.  For patterns
// without such symbols every work-item runs the same loops: the only
// divergence is when a lookup hits.
//
// METHOD selects the neighborhood store (the paper's Figure 8):
//   0  perfect hash: three g reads, one key check, one range read
//   1  binary search over each seed's sorted distinct neighborhoods
//   2  list scan: Hamming distance to every window of the seed
//
// Compile-time: SIGMA, BITS, LN, SPAN, SEED_MASK (bit i: span position i
// must match), NS (strands), E, KEY_T, METHOD, KEEP.
// Two kernels share the search: "append" (one pass; nearly every query has
// a few hits) and "fill" (exact second pass for the queries append could
// not hold), so no hit is ever dropped.

#define GOLDEN 0x9e3779b9u
#define FIELD ((1ul << BITS) - 1)

#define MIX(a, b, c) \
    a -= b; a -= c; a ^= (c >> 13); \
    b -= c; b -= a; b ^= (a << 8);  \
    c -= a; c -= b; c ^= (b >> 13); \
    a -= b; a -= c; a ^= (c >> 12); \
    b -= c; b -= a; b ^= (a << 16); \
    c -= a; c -= b; c ^= (b >> 5);  \
    a -= b; a -= c; a ^= (c >> 3);  \
    b -= c; b -= a; b ^= (a << 10); \
    c -= a; c -= b; c ^= (b >> 15);

typedef KEY_T key_t;

typedef struct {
    __global const uint *seed_start;   // METHOD 0: vertices; 1: sorted keys; 2: windows
    __global const uint *seed_family;  // METHOD 0 only
    __global const uchar *g;           // METHOD 0 only
    __global const key_t *key;         // per vertex (0), per distinct key (1), per window (2)
    __global const uint *first;        // per vertex (0) or per distinct key (1)
    __global const uint *positions;
} nb_index;

inline uint g_of(__global const uchar *g, uint v) { return (g[v >> 2] >> ((v & 3) * 2)) & 3; }

// The range positions[*lo, *lo + n) of `key` in the seed's store [base, base + size); returns n.
inline uint visit(const nb_index *ix, ulong key, uint base, uint size, uint family, uint *lo) {
#if METHOD == 0
    uint r = size / 3;
    uint a = (uint)key + GOLDEN, b = (uint)(key >> 32) + GOLDEN, c = family;
    MIX(a, b, c)   // one mix; c, b and c ^ rot(b) are the three hashes (dmap/neighborhood/bdz.py: jenkins3)
    uint v0 = base + mul_hi(c, r), v1 = base + r + mul_hi(b, r), v2 = base + 2 * r + mul_hi(c ^ rotate(b, 16u), r);
    uint j = (g_of(ix->g, v0) + g_of(ix->g, v1) + g_of(ix->g, v2)) % 3;
    uint v = j == 0 ? v0 : (j == 1 ? v1 : v2);
    // A perfect hash maps absent keys somewhere too: the stored key decides.
    // Most lookups miss, so the position range is read only on a match.
    if ((ulong)ix->key[v] != key) return 0;
    *lo = ix->first[v];
    return ix->first[v + 1] - *lo;
#else
    uint lo_i = base, hi_i = base + size;   // first index with key >= target
    while (lo_i < hi_i) {
        uint mid = (lo_i + hi_i) >> 1;
        if ((ulong)ix->key[mid] < key) lo_i = mid + 1; else hi_i = mid;
    }
    uint found = lo_i < base + size && (ulong)ix->key[lo_i] == key;
    *lo = found ? ix->first[lo_i] : 0;
    return found ? ix->first[lo_i + 1] - *lo : 0;
#endif
}

// Positions found are emitted to `out` (fill mode) or, while they fit, to
// the private `keep` (append mode); n counts them all.
#define EMIT(position) { uint p_ = (position); \
    if (out) out[n] = p_; else if (n < KEEP) keep[n] = p_; n++; }

// In append mode a query past KEEP hits goes to the fill pass anyway, so
// only its count matters from there on (and a count-only run reads no positions).
#define VISIT(k) { uint lo_, c_ = visit(ix, (k), base, size, family, &lo_); \
    if (out || n + c_ <= KEEP) { for (uint t_ = 0; t_ < c_; t_++) EMIT(ix->positions[lo_ + t_]) } else n += c_; }

inline uint seed_and_filter(const nb_index *ix, uint q,
                            __global const uchar *codes, __global const uint *read_offsets,
                            __global const uint *pattern_read, __global const uint *pattern_offset,
                            __global uint *out, uint *keep) {
    uint p = q / NS, strand = q % NS;
    uint at = read_offsets[pattern_read[p]] + pattern_offset[p];
    uint seed = 0, valid = 1, unknown = 0;
    ulong key = 0;
    for (int i = 0; i < SPAN + LN; i++) {
        uint c = codes[strand ? at + SPAN + LN - 1 - i : at + i];
        if (strand) c = c < 4 ? 3 - c : c;   // complement (strand 1 exists only for DNA)
        if (i < SPAN) {
            if ((SEED_MASK >> i) & 1ul) { valid &= c < SIGMA; seed = seed * SIGMA + min(c, (uint)SIGMA - 1); }
        } else {
            uint u = c >= SIGMA;
            unknown |= u << (i - SPAN);
            key = (key << BITS) | (u ? 0 : c);
        }
    }
    if (!valid || popcount(unknown) > E) return 0;
    uint base = ix->seed_start[seed], size = ix->seed_start[seed + 1] - base;
    if (size == 0) return 0;   // the seed does not occur in this block
    uint n = 0;
#if METHOD == 2
    // List scan: Hamming distance to every window of the seed, no enumeration.
    for (uint w = base; w < base + size; w++) {
        ulong d = (ulong)ix->key[w] ^ key;
        uint mism = 0;
        for (int i = 0; i < LN; i++) mism += (((d >> (i * BITS)) & FIELD) != 0) | ((unknown >> (LN - 1 - i)) & 1);
        if (mism <= E) { if (out || n < KEEP) EMIT(ix->positions[w]) else n++; }
    }
#else
    uint family = ix->seed_family ? ix->seed_family[seed] : 0;
    if (unknown == 0) VISIT(key)
#if E >= 1
    for (int i = 0; i < LN; i++) {
        uint sh = (LN - 1 - i) * BITS, ui = (unknown >> i) & 1;
        if (unknown & ~(1u << i)) continue;   // an N elsewhere needs its own substitution
        ulong orig = (key >> sh) & FIELD, cleared = key & ~(FIELD << sh);
        for (uint k = 1 - ui; k < SIGMA; k++)
            VISIT(cleared | (((orig + k) % SIGMA) << sh))
    }
#endif
#if E >= 2
    for (int i = 0; i < LN; i++) {
        for (int j = i + 1; j < LN; j++) {
            uint si = (LN - 1 - i) * BITS, sj = (LN - 1 - j) * BITS;
            uint ui = (unknown >> i) & 1, uj = (unknown >> j) & 1;
            if (unknown & ~((1u << i) | (1u << j))) continue;
            ulong oi = (key >> si) & FIELD, oj = (key >> sj) & FIELD;
            ulong cleared = key & ~(FIELD << si) & ~(FIELD << sj);
            for (uint ki = 1 - ui; ki < SIGMA; ki++) {
                ulong with_i = cleared | (((oi + ki) % SIGMA) << si);
                for (uint kj = 1 - uj; kj < SIGMA; kj++)
                    VISIT(with_i | (((oj + kj) % SIGMA) << sj))
            }
        }
    }
#endif
#endif
    return n;
}

#define NB_INDEX_ARGS \
    __global const uint *seed_start, __global const uint *seed_family, __global const uchar *g, \
    __global const key_t *key, __global const uint *first, __global const uint *positions, \
    __global const uchar *codes, __global const uint *read_offsets, \
    __global const uint *pattern_read, __global const uint *pattern_offset, const uint use_family

// Append mode: counts[q] = positions found for query q; a query with at most
// KEEP of them also appends (q, position) pairs at a slot reserved with one
// atomic add (the rest, or all when `capacity` runs out, go to fill mode).
__kernel void seed_and_filter_append(NB_INDEX_ARGS, const uint n_queries, __global uint *counts,
                                     volatile __global uint *total, const uint capacity,
                                     __global uint *out_query, __global uint *out_position)
{
    uint q = get_global_id(0);
    if (q >= n_queries) return;
    nb_index ix = {seed_start, use_family ? seed_family : 0, g, key, first, positions};
    uint keep[KEEP];
    uint n = seed_and_filter(&ix, q, codes, read_offsets, pattern_read, pattern_offset, 0, keep);
    counts[q] = n;
    if (n == 0 || n > KEEP) return;
    uint at = atomic_add(total, n);
    if (at + n > capacity) return;
    for (uint t = 0; t < n; t++) { out_query[at + t] = q; out_position[at + t] = keep[t]; }
}

// Fill mode: every position of query query_ids[gid], written at out + offsets[gid].
__kernel void seed_and_filter_fill(NB_INDEX_ARGS, const uint n_queries, __global const uint *query_ids,
                                   __global const ulong *offsets, __global uint *out)
{
    uint gid = get_global_id(0);
    if (gid >= n_queries) return;
    nb_index ix = {seed_start, use_family ? seed_family : 0, g, key, first, positions};
    seed_and_filter(&ix, query_ids[gid], codes, read_offsets, pattern_read, pattern_offset, out + offsets[gid], 0);
}
