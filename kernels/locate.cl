// Locate: BWT row -> text position by LF-walks to a sampled row
// (BowMapCL 4.4.3).  A walk stops at a row that is a multiple of SA_RATE
// (sa_samples holds its SA value) or at a row whose preceding symbol is a
// separator or the sentinel (boundary_rows/boundary_pos hold those).
//
// Defines: SIGMA, RATE, LAYOUT (occ.cl), SA_RATE.
#include "occ.cl"

__kernel void locate(__global const uint *occ, const uint n_periods,
                     __global const uint *C,
                     __global const uint *sa_samples,
                     __global const uint *boundary_rows,
                     __global const uint *boundary_pos, const uint n_boundary,
                     __global const uint *rows, const uint n,
                     __global uint *positions) {
    const uint gid = get_global_id(0);
    if (gid >= n) return;
    uint r = rows[gid];
    uint steps = 0;
    for (;;) {
        if (r % SA_RATE == 0u) {
            positions[gid] = sa_samples[r / SA_RATE] + steps;
            return;
        }
        uint c = bwt_symbol(occ, n_periods, r);
        if (c >= SIGMA) {
            // Binary search: r is one of the boundary rows.
            uint lo = 0, hi = n_boundary;
            while (hi - lo > 1u) {
                uint mid = (lo + hi) >> 1;
                if (boundary_rows[mid] <= r) lo = mid; else hi = mid;
            }
            positions[gid] = boundary_pos[lo] + steps;
            return;
        }
        r = C[c] + occ_count(occ, n_periods, c, r);
        steps++;
    }
}
