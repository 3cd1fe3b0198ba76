// The k-mer interval table of a block: the BWT interval [sp, ep) of every
// string of 1..DEPTH symbols, so that the exact search starts from a query's
// last DEPTH symbols in one lookup instead of DEPTH backward-search steps (two
// dependent random Occ loads each).  numpy reference and host wrapper:
// dmap/search/kmers.py.
//
// Level j holds the SIGMA**j strings of j symbols from table[offset(j)],
// offset(j) = 1 + SIGMA + ... + SIGMA**(j-1); string s_0 .. s_{j-1} is entry
// sum s_i * SIGMA**(j-1-i) (its first symbol most significant).  Level 0 is
// the empty string's interval [0, n_rows), written by the host.
//
// Entries are exactly what the search kernel's steps give, dead intervals
// included: the step from an empty interval keeps it as it is (its sp is
// the row where the search died), so a lookup is bit-for-bit the search it
// replaces.
//
// One launch per level, one work-item per entry: entry c * n_prev + x is
// the string c followed by entry x of the level before (a backward-search
// step prepends its symbol).
//
// Defines: SIGMA, RATE, LAYOUT (occ.cl).
#include "occ.cl"

__kernel void kmer_level(__global const uint *occ, const uint n_periods, __global const uint *C,
                         __global uint2 *table, const uint prev, const uint n_prev, const uint here) {
    const uint e = get_global_id(0);
    if (e >= SIGMA * n_prev) return;
    const uint c = e / n_prev;
    uint2 r = table[prev + e - c * n_prev];
    if (r.x < r.y) {
        r.x = C[c] + occ_count(occ, n_periods, c, r.x);
        r.y = C[c] + occ_count(occ, n_periods, c, r.y);
    }
    table[here + e] = r;
}
