// Occurrence-table lookups shared by the search and locate kernels.
// Mirrors dmap/index/occ.py (occ_lookup, bwt_symbol); see there for layouts.
//
// Compile-time defines:
//   SIGMA   number of searchable symbols (codes 0..SIGMA-1)
//   RATE    32-bit bitmap words per symbol between count samples
//   LAYOUT  0 = interleaved cache lines, 1 = BowMapCL bitmap + samples
#define PERIOD (32u * RATE)
#define LINE_WORDS (SIGMA * (1u + RATE))

// Pointer to the first bitmap word of symbol c in period p, and its count.
#if LAYOUT == 0
#define OCC_COUNT(occ, n_periods, c, p) ((occ)[(size_t)(p) * LINE_WORDS + (c)])
#define OCC_WORDS(occ, n_periods, c, p) ((occ) + (size_t)(p) * LINE_WORDS + SIGMA + (c) * RATE)
#else
#define OCC_COUNT(occ, n_periods, c, p) ((occ)[(size_t)(c) * (n_periods) + (p)])
#define OCC_WORDS(occ, n_periods, c, p) \
    ((occ) + (size_t)SIGMA * (n_periods) + ((size_t)(c) * (n_periods) + (p)) * RATE)
#endif

// Occ(c, i): occurrences of symbol c in BWT[0:i].
inline uint occ_count(__global const uint *occ, uint n_periods, uint c, uint i) {
    uint p = i / PERIOD;
    uint off = i - p * PERIOD;
    uint total = OCC_COUNT(occ, n_periods, c, p);
    __global const uint *w = OCC_WORDS(occ, n_periods, c, p);
    // Branch-free (selects, unrolled over the compile-time RATE) so that
    // the compiler can vectorise across work-items; a loop with a branch
    // here measured 2.5x slower on PoCL.
    const uint word = off >> 5;
    const uint low = (1u << (off & 31u)) - 1u;
#pragma unroll
    for (uint k = 0; k < RATE; k++) {
        uint m = k < word ? 0xffffffffu : (k == word ? low : 0u);
        total += popcount(w[k] & m);
    }
    return total;
}

// BWT[i] as a code, or SIGMA if it is the sentinel, a separator or an N.
// Branch-free like occ_count: at most one symbol's bit is set.
inline uint bwt_symbol(__global const uint *occ, uint n_periods, uint i) {
    uint p = i / PERIOD;
    uint off = i - p * PERIOD;
    uint word = off >> 5, bit = off & 31u;
    uint found = SIGMA;
#pragma unroll
    for (uint c = 0; c < SIGMA; c++) {
        found = (OCC_WORDS(occ, n_periods, c, p)[word] >> bit) & 1u ? c : found;
    }
    return found;
}
