// Locate: BWT row -> text position by LF-walks to a sampled row
// (BowMapCL 4.4.3).  A walk stops at a row that is a multiple of SA_RATE
// (sa_samples holds its SA value) or at a row whose preceding symbol is a
// separator or the sentinel (boundary_rows/boundary_pos hold those).
//
// Defines: SIGMA, RATE, LAYOUT (occ.cl), SA_RATE, BATCH.
#include "occ.cl"

inline uint boundary_position(__global const uint *boundary_rows, __global const uint *boundary_pos,
                              uint n_boundary, uint r) {
    uint lo = 0, hi = n_boundary;  // r is one of the boundary rows
    while (hi - lo > 1u) {
        uint mid = (lo + hi) >> 1;
        if (boundary_rows[mid] <= r) lo = mid; else hi = mid;
    }
    return boundary_pos[lo];
}

// BATCH rows per work-item are walked in step, so that their independent
// cache misses overlap (each LF step is one dependent random access).
__kernel void locate(__global const uint *occ, const uint n_periods,
                     __global const uint *C,
                     __global const uint *sa_samples,
                     __global const uint *boundary_rows,
                     __global const uint *boundary_pos, const uint n_boundary,
                     __global const uint *rows, const uint n,
                     __global uint *positions) {
    const uint first = get_global_id(0) * BATCH;
    uint r[BATCH], steps[BATCH];
    uint todo = 0;
    for (uint b = 0; b < BATCH; b++) {
        r[b] = first + b < n ? rows[first + b] : 0u;
        steps[b] = first + b < n ? 0u : 0xffffffffu;  // all-ones: done
        todo += first + b < n;
    }
    while (todo) {
        for (uint b = 0; b < BATCH; b++) {
            if (steps[b] == 0xffffffffu) continue;
            uint row = r[b];
            if (row % SA_RATE == 0u) {
                positions[first + b] = sa_samples[row / SA_RATE] + steps[b];
            } else {
                uint c = bwt_symbol(occ, n_periods, row);
                if (c < SIGMA) {
                    r[b] = C[c] + occ_count(occ, n_periods, c, row);
                    steps[b]++;
                    continue;
                }
                positions[first + b] = boundary_position(boundary_rows, boundary_pos, n_boundary, row) + steps[b];
            }
            steps[b] = 0xffffffffu;
            todo--;
        }
    }
}
