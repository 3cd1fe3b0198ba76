// Exact backward search (BowMapCL Algorithm 2), several queries per work-item.
//
// Reads are back to back in `reads`; read i starts at offsets[i].
// A query is (read, strand): query q = read * N_STRANDS + strand.  Strand 1
// is the reverse complement, read from the same bytes (complementing codes
// and walking the read forwards), so reads are sent to the device once.
//
// One Occ lookup is one dependent random memory access (100-300 ns).  Each
// work-item advances BATCH queries in step so that their independent loads
// are in flight together instead of one after another.
//
// Defines: SIGMA, RATE, LAYOUT (occ.cl), BATCH, N_STRANDS (1 or 2).
#include "occ.cl"

__kernel void exact_search(__global const uint *occ, const uint n_periods,
                           __global const uint *C, const uint n_rows,
                           __global const uchar *reads, __global const uint *offsets,
                           __global const uint *lengths, const uint n_queries,
                           __global uint2 *out) {
    const uint first = get_global_id(0) * BATCH;
    uint sp[BATCH], ep[BATCH], len[BATCH], start[BATCH];
    uint maxlen = 0;
    for (uint b = 0; b < BATCH; b++) {
        uint q = first + b;
        len[b] = q < n_queries ? lengths[q / N_STRANDS] : 0u;
        start[b] = q < n_queries ? offsets[q / N_STRANDS] : 0u;
        sp[b] = 0;
        ep[b] = len[b] ? n_rows : 0u;
        maxlen = max(maxlen, len[b]);
    }
    for (uint j = 0; j < maxlen; j++) {
        uint alive = 0;
        for (uint b = 0; b < BATCH; b++) {
            if (j < len[b] && sp[b] < ep[b]) {
                __global const uchar *r = reads + start[b];
                uint c;
#if N_STRANDS == 2
                if ((first + b) & 1u) {
                    c = r[j];
                    c = c < 4u ? 3u - c : 255u;
                } else
#endif
                    c = r[len[b] - 1u - j];
                if (c < SIGMA) {
                    uint base = C[c];
                    sp[b] = base + occ_count(occ, n_periods, c, sp[b]);
                    ep[b] = base + occ_count(occ, n_periods, c, ep[b]);
                } else {
                    sp[b] = ep[b] = 0u;  // N or unknown symbol: no match
                }
                alive++;
            }
        }
        if (!alive) break;
    }
    for (uint b = 0; b < BATCH; b++) {
        uint q = first + b;
        if (q < n_queries) out[q] = (uint2)(sp[b], sp[b] < ep[b] ? ep[b] : sp[b]);
    }
}
