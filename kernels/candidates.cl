// Candidate windows of located seed hits, one work-item per hit: the
// per-hit part of dmap.approx.candidates.candidate_regions (its numpy
// reference), as two sort keys per hit.  A hit of query q (seed * N_STRANDS
// + strand) at block-local position pos puts the read's window at
// [pos - back[q], pos - back[q] + span[q]), clipped to the hit's contig and
// to the block; the keys are pattern[q] * stride + each end, so that one
// sort and a running maximum merge the windows of each pattern (the host's
// part).  One pass instead of a dozen numpy passes over every hit, each
// into fresh memory.
//
// Contigs: their first positions in the joined reference, ascending from 0;
// a hit's contig is the last that starts at or before it.

__kernel void hit_windows(__global const long *query, __global const uint *position, const uint n,
                          __global const long *back, __global const long *span, __global const long *pattern,
                          __global const long *contig_start, __global const long *contig_end,
                          const uint n_contigs, const long block_start, const long block_length,
                          const long stride, __global long *key_lo, __global long *key_hi) {
    const uint i = get_global_id(0);
    if (i >= n) return;
    const long q = query[i], pos = (long)position[i];
    // Binary search for the contig: the last start <= the hit's reference position.
    const long at = pos + block_start;
    uint lo_c = 0, hi_c = n_contigs;  // contig_start[lo_c] <= at < contig_start[hi_c]
    while (hi_c - lo_c > 1u) {
        const uint mid = (lo_c + hi_c) / 2u;
        if (contig_start[mid] <= at) lo_c = mid;
        else hi_c = mid;
    }
    const long first = max(contig_start[lo_c] - block_start, 0L);
    const long last = min(contig_end[lo_c] - block_start, block_length);
    const long lo = pos - back[q];
    const long p = pattern[q] * stride;
    key_lo[i] = p + max(lo, first);
    key_hi[i] = p + min(lo + span[q], last);
}
