// Locate steps shared by locate.cl and exact_search.cl (BowMapCL 4.4.3):
// a BWT row becomes a text position by LF-walks to a row that is a
// multiple of SA_RATE (sa_samples holds its SA value) or to a row whose
// preceding symbol is a separator or the sentinel (boundary_rows and
// boundary_pos hold those).
//
// Defines: SA_RATE, and those of occ.cl (included before this file).

inline uint boundary_position(__global const uint *boundary_rows, __global const uint *boundary_pos,
                              uint n_boundary, uint r) {
    uint lo = 0, hi = n_boundary;  // r is one of the boundary rows
    while (hi - lo > 1u) {
        uint mid = (lo + hi) >> 1;
        if (boundary_rows[mid] <= r) lo = mid; else hi = mid;
    }
    return boundary_pos[lo];
}

// One step of a walk that has taken `steps` LF steps so far and stands at
// *row: returns 1 with the walk's start position in *pos when the walk
// ends here, else moves *row one LF step on and returns 0.
inline int locate_step(__global const uint *occ, uint n_periods, __global const uint *C,
                       __global const uint *sa_samples, __global const uint *boundary_rows,
                       __global const uint *boundary_pos, uint n_boundary,
                       uint *row, uint steps, uint *pos) {
    const uint r = *row;
    if (r % SA_RATE == 0u) {
        *pos = sa_samples[r / SA_RATE] + steps;
        return 1;
    }
    const uint c = bwt_symbol(occ, n_periods, r);
    if (c < SIGMA) {
        *row = C[c] + occ_count(occ, n_periods, c, r);
        return 0;
    }
    *pos = boundary_position(boundary_rows, boundary_pos, n_boundary, r) + steps;
    return 1;
}
