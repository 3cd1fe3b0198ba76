// Locate: BWT row -> text position by LF-walks to a sampled row (sa.cl).
//
// Defines: SIGMA, RATE, LAYOUT (occ.cl), SA_RATE, BATCH.
#include "occ.cl"
#include "sa.cl"

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
            uint pos;
            if (locate_step(occ, n_periods, C, sa_samples, boundary_rows, boundary_pos, n_boundary, &r[b], steps[b],
                            &pos)) {
                positions[first + b] = pos;
                steps[b] = 0xffffffffu;
                todo--;
            } else {
                steps[b]++;
            }
        }
    }
}
