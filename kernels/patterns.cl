// Verification patterns of the (read, strand) pairs that have candidates:
// each as a row of WIDTH codes padded with NO_MATCH, and its Myers match
// masks (Peq), built on the device from the reads' codes so that the host
// never makes a copy of every read per strand.  numpy reference:
// dmap/approx/patterns.py (pattern_rows, match_masks).
//
// Pattern p = read * N_STRANDS + strand; strand 1 is the reverse complement
// (DNA codes 0-3; any other code matches nothing).  One work-item per row.
//
// Defines: SIGMA, WIDTH (a multiple of 64), N_STRANDS, NO_MATCH.
#define WORDS (WIDTH / 64)

__kernel void oriented_patterns(__global const uchar *codes, __global const uint *offsets,
                                __global const uint *lengths, __global const uint *which, const uint n,
                                __global uchar *rows, __global ulong *peq) {
    const uint i = get_global_id(0);
    if (i >= n) return;
    const uint p = which[i], read = p / N_STRANDS;
    const uint m = lengths[read];
    __global const uchar *r = codes + offsets[read];
    __global uchar *row = rows + (ulong)i * WIDTH;
    __global ulong *pq = peq + (ulong)i * SIGMA * WORDS;
    for (uint x = 0; x < SIGMA * WORDS; x++) pq[x] = 0UL;
#if N_STRANDS == 2
    const int reverse = p % 2u == 1u;
#else
    const int reverse = 0;
#endif
    for (uint k = 0; k < WIDTH; k++) {
        uint c = NO_MATCH;
        if (k < m) {
            c = reverse ? r[m - 1u - k] : r[k];
            if (reverse) c = c < 4u ? 3u - c : NO_MATCH;
        }
        row[k] = (uchar)c;
        if (c < SIGMA) pq[c * WORDS + k / 64u] |= 1UL << (k % 64u);
    }
}
