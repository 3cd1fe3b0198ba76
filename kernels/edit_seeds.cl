// Seeds searched with up to MAX_EDITS edits on the FM-index (Liu and Schmidt 2012):
// a depth-first backtracking search with an explicit stack, pruned by a
// lower bound on the edits the rest of the seed still needs.
//
// One work-item per query (seed, strand); query q = seed * N_STRANDS + strand.
// Seeds are back to back in `reads` (seed s starts at offsets[s], lengths[s]
// symbols); strand 1 is the reverse complement, read from the same bytes.
//
// The search consumes the pattern P right to left (backward search).  A
// node is (i, [sp, ep), e): P[i..len) is matched, with e edits, by the
// strings whose BWT rows are [sp, ep).  Its children:
//   c in 0..SIGMA-1  P[i-1] against text symbol c: 0 edits if equal, else 1;
//   insertion        P[i-1] against no text symbol: 1 edit;
//   deletion of c    text symbol c against no read symbol: 1 edit.
// Deletions before the first or after the last read symbol are not tried:
// they only lengthen the text match, never change where the read sits
// (the candidate window in dmap/approx/candidates.py has room for them).
// An insertion next to a deletion is a substitution done at twice the cost,
// so that pair is not tried either.
//
// Bound (BWA's D array, from the reverse BWT): scanning P left to right on
// the reversed text's FM-index, D[k] counts the disjoint pieces of P[0..k]
// that do not occur in the text; each needs an edit of its own, so a node
// with e + D[i-1] > MAX_EDITS is cut.
//
// Output: every node reached with i = 0 is one interval [sp, ep) (not the
// empty string's: a seed of m symbols or fewer would match everywhere).  A query
// writes its first `cap` intervals from out[base] and its total to count[q];
// the host runs queries that had more again with room for all of them, so
// nothing is capped.
//
// Defines: SIGMA, RATE, LAYOUT (occ.cl), N_STRANDS (1 or 2),
//          MAX_LEN (longest seed), MAX_EDITS.
#include "occ.cl"

#define OP_MATCH 0
#define OP_INSERT 1
#define OP_DELETE 2

typedef struct {
    uint sp, ep;
    ushort i;     // read symbols still to match: P[0..i)
    uchar e;      // edits so far
    uchar next;   // next child to try: 0..SIGMA-1, SIGMA (insertion), SIGMA+1.. (deletions)
    uchar op;     // how this node was reached
} frame_t;


// P[k] of query q: the seed itself, or its reverse complement.
inline uint pattern_symbol(__global const uchar *r, uint len, uint k, uint strand) {
#if N_STRANDS == 2
    if (strand) {
        uint c = r[len - 1u - k];
        return c < 4u ? 3u - c : 255u;
    }
#endif
    return r[k];
}

inline void lf(__global const uint *occ, uint n_periods, __global const uint *C, uint c, uint *sp, uint *ep) {
    uint base = C[c];
    *sp = base + occ_count(occ, n_periods, c, *sp);
    *ep = base + occ_count(occ, n_periods, c, *ep);
}

inline uint search_one(__global const uint *occ, uint n_periods, __global const uint *C, uint n_rows,
                       __global const uint *rocc, __global const uint *rC,
                       __global const uchar *r, uint len, uint strand,
                       __global uint2 *out, uint base, uint cap) {
    // D[k]: lower bound on the edits of P[0..k].
    uchar D[MAX_LEN];
    uint sp = 0u, ep = n_rows, z = 0u;
    for (uint k = 0; k < len; k++) {
        uint c = pattern_symbol(r, len, k, strand);
        if (c < SIGMA) lf(rocc, n_periods, rC, c, &sp, &ep);
        else sp = ep;
        if (sp >= ep) {  // P[start..k] occurs nowhere: one edit in it; start again after it
            z++;
            sp = 0u;
            ep = n_rows;
        }
        D[k] = (uchar)min(z, 255u);
    }
    if (len == 0u || D[len - 1u] > MAX_EDITS) return 0u;

    uint found = 0u;
    frame_t stack[MAX_LEN + MAX_EDITS + 1];
    int top = 0;
    stack[0].sp = 0u;
    stack[0].ep = n_rows;
    stack[0].i = (ushort)len;
    stack[0].e = 0;
    stack[0].next = 0;
    stack[0].op = OP_MATCH;
    while (top >= 0) {
        frame_t f = stack[top];
        if (f.e == MAX_EDITS || f.i == 0u) {
            // No edits left: the rest is an exact backward search.
            for (uint k = f.i; k > 0u && f.sp < f.ep; k--) {
                uint c = pattern_symbol(r, len, k - 1u, strand);
                if (c < SIGMA) lf(occ, n_periods, C, c, &f.sp, &f.ep);
                else f.sp = f.ep;
            }
            if (f.sp < f.ep && f.sp > 0u) {  // row 0 is in no interval but the empty string's
                if (found < cap) out[base + found] = (uint2)(f.sp, f.ep);
                found++;
            }
            top--;
            continue;
        }
        uint child = f.next;
        if (child > 2u * SIGMA) {
            top--;
            continue;
        }
        stack[top].next = (uchar)(child + 1u);
        uint nsp = f.sp, nep = f.ep, ni = f.i, ne = f.e + 1u, op;
        if (child < SIGMA) {  // match or substitution
            if (pattern_symbol(r, len, f.i - 1u, strand) == child) ne = f.e;
            lf(occ, n_periods, C, child, &nsp, &nep);
            ni = f.i - 1u;
            op = OP_MATCH;
        } else if (child == SIGMA) {  // insertion: a read symbol the text does not have
            if (f.op == OP_DELETE) continue;
            ni = f.i - 1u;
            op = OP_INSERT;
        } else {  // deletion: a text symbol the read does not have
            if (f.op == OP_INSERT || f.i == len) continue;
            lf(occ, n_periods, C, child - SIGMA - 1u, &nsp, &nep);
            op = OP_DELETE;
        }
        if (nsp >= nep || ne + (ni ? D[ni - 1u] : 0u) > MAX_EDITS) continue;
        top++;
        stack[top].sp = nsp;
        stack[top].ep = nep;
        stack[top].i = (ushort)ni;
        stack[top].e = (uchar)ne;
        stack[top].next = 0;
        stack[top].op = (uchar)op;
    }
    return found;
}

// First pass: query q writes up to `cap` intervals from out[q * cap].
__kernel void edit_seeds_first(__global const uint *occ, const uint n_periods, __global const uint *C,
                               const uint n_rows, __global const uint *rocc, __global const uint *rC,
                               __global const uchar *reads, __global const uint *offsets,
                               __global const uint *lengths, const uint n_queries, const uint cap,
                               __global uint *count, __global uint2 *out) {
    uint q = get_global_id(0);
    if (q >= n_queries) return;
    uint s = q / N_STRANDS;
    count[q] = search_one(occ, n_periods, C, n_rows, rocc, rC, reads + offsets[s], lengths[s], q % N_STRANDS,
                          out, q * cap, cap);
}

// Second pass, for the queries that found more: all their intervals, from out[first[j]].
__kernel void edit_seeds_fill(__global const uint *occ, const uint n_periods, __global const uint *C,
                              const uint n_rows, __global const uint *rocc, __global const uint *rC,
                              __global const uchar *reads, __global const uint *offsets,
                              __global const uint *lengths, __global const uint *queries, const uint n_again,
                              __global const uint *first, __global uint2 *out) {
    uint j = get_global_id(0);
    if (j >= n_again) return;
    uint q = queries[j], s = q / N_STRANDS;
    search_one(occ, n_periods, C, n_rows, rocc, rC, reads + offsets[s], lengths[s], q % N_STRANDS,
               out, first[j], 0xffffffffu);
}
