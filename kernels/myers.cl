// Myers' bit-parallel edit distance (Myers 1999), blocked for patterns
// longer than 64 symbols (Hyyrö's carry between words, as in edlib).
//
// Semi-global: the pattern must be aligned whole, the text ends are free.
// For each region (a window of the block's text around seed hits of one
// pattern) the kernel writes D[m][j] = the least edit distance of the
// pattern to a text substring ending at region position j, for every j.
//
// One region per work-item: regions are ~m + 2K symbols, so a chunk has
// tens of thousands of them, plenty to fill a device.  The pattern's match
// masks (Peq) are precomputed on the host, WORDS 64-bit words per symbol.
// Text symbols >= SIGMA (N, contig separators) match nothing.
//
// Defines: SIGMA, WORDS (words of the longest pattern).

// One 64-bit word of Myers' step (Hyyrö's blocked form), on ulong or ulongN
// alike: from the word's match mask eq, its vertical deltas (pv, mv) and the
// carry in (hneg, hpos: 1 where it is -1, +1), the horizontal deltas ph, mh
// of its top row (the carry out is read from them) ...
#define MYERS_DELTAS(T, eq, pv, mv, hneg)         \
    const T xv = (eq) | (mv);                     \
    const T eqh = (eq) | (hneg);                  \
    const T xh = (((eqh & (pv)) + (pv)) ^ (pv)) | eqh; \
    T ph = (mv) | ~(xh | (pv));                   \
    T mh = (pv) & xh;
// ... and then the word's new vertical deltas.
#define MYERS_ADVANCE(hneg, hpos, pv, mv) \
    ph = (ph << 1) | (hpos);              \
    mh = (mh << 1) | (hneg);              \
    pv = mh | ~(xv | ph);                 \
    mv = ph & xv;

__kernel void myers(__global const uchar *text, __global const ulong *peq,
                    __global const uint *pattern_length,
                    __global const uint *region_start, __global const uint *region_length,
                    __global const uint *region_pattern, __global const uint *out_offset,
                    const uint n_regions, __global uchar *out) {
    const uint r = get_global_id(0);
    if (r >= n_regions) return;
    const uint p = region_pattern[r];
    const uint m = pattern_length[p];
    const uint nw = (m + 63u) / 64u;
    const ulong last_bit = 1UL << ((m - 1u) & 63u);
    __global const ulong *pq = peq + (ulong)p * SIGMA * WORDS;
    __global const uchar *t = text + region_start[r];
    __global uchar *o = out + out_offset[r];
    const uint n = region_length[r];

    ulong Pv[WORDS], Mv[WORDS];
    for (uint w = 0; w < WORDS; w++) {
        Pv[w] = ~0UL;  // D[i][0] = i: every vertical delta is +1
        Mv[w] = 0UL;
    }
    int score = (int)m;
    // The carries and the score step are computed without branches: on random
    // text they are unpredictable (1.4x the cell rate for 40-symbol patterns on
    // PoCL: benchmarks/myers_gcups.py --length 40 --window 44).
    for (uint j = 0; j < n; j++) {
        const uint c = t[j];
        int h = 0;  // row 0 is all zeros (free start): no carry into word 0
        for (uint w = 0; w < nw; w++) {
            const ulong hneg = (ulong)(h < 0), hpos = (ulong)(h > 0);
            const ulong eq = c < SIGMA ? pq[c * WORDS + w] : 0UL;
            MYERS_DELTAS(ulong, eq, Pv[w], Mv[w], hneg)
            const ulong top = (w + 1u == nw) ? last_bit : (1UL << 63);
            const int hout = (int)((ph & top) != 0UL) - (int)((mh & top) != 0UL);
            MYERS_ADVANCE(hneg, hpos, Pv[w], Mv[w])
            h = hout;
        }
        score += h;
        o[j] = (uchar)min(score, 255);
    }
}

// Thread-cooperative variant (Chacon et al. 2014): WORDS work-items share one
// region, work-item w holding word w of the pattern, and a work-group holds
// REGIONS_PER_GROUP regions.  The words run as a wavefront: at step s word w
// processes text column s - w, taking the horizontal carry that word w-1
// produced for that column one step earlier (local memory, double-buffered,
// one barrier per step).  The top word of each pattern keeps the score.
// Local size must be WORDS * REGIONS_PER_GROUP.  With RUNS = 1 the top word
// finds the runs instead of writing the distances, as myers_lanes does
// (below): a GPU then sends back five numbers per region, not one byte per
// end, and the host does not scan every distance.
__kernel void myers_cooperative(__global const uchar *text, __global const ulong *peq,
                                __global const uint *pattern_length,
                                __global const uint *region_start, __global const uint *region_length,
                                __global const uint *region_pattern, __global const uint *out_offset,
                                const uint n_regions, __global uchar *out, const uint max_errors,
                                const long own_from, const long own_until,
                                __global uchar *run_count, __global uint *run_best, __global uchar *run_dist,
                                __global uint *run_first, __global uint *run_last) {
    __local int carry[2][REGIONS_PER_GROUP][WORDS];
    __local uint steps;
    const uint lid = get_local_id(0);
    const uint slot = lid / WORDS, w = lid % WORDS;
    const uint r = get_group_id(0) * REGIONS_PER_GROUP + slot;
    const int live = r < n_regions;
    const uint p = live ? region_pattern[r] : 0;
    const uint m = live ? pattern_length[p] : 1;
    const uint nw = (m + 63u) / 64u;
    const int mine = live && w < nw;  // this work-item has a word of a real pattern
    const uint n = live ? region_length[r] : 0;
    const ulong top = (w + 1u == nw) ? 1UL << ((m - 1u) & 63u) : (1UL << 63);
    __global const ulong *pq = peq + (ulong)p * SIGMA * WORDS;
    __global const uchar *t = text + (live ? region_start[r] : 0);
    __global uchar *o = out + (live ? out_offset[r] : 0);

    if (lid == 0) steps = 0;
    carry[0][slot][w] = 0;
    carry[1][slot][w] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (mine) atomic_max((volatile __local int *)&steps, (int)(n + nw - 1u));
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint total = steps;

    ulong Pv = ~0UL, Mv = 0UL;
    int score = (int)m;
#if RUNS
    // The top word's work-item follows the runs, as myers_lanes' lanes do (below).
    const long shift = (long)m + (long)max_errors - 1L - (live ? (long)region_start[r] : 0L);
    const int own_lo = (int)clamp(own_from + shift, 0L, (long)n), own_hi = (int)clamp(own_until + shift, 0L, (long)n);
    int in_run = 0, count = 0, best_j = 0, best_d = 0, first_j = 0, last_j = 0;
#endif
    for (uint s = 0; s < total; s++) {
        const uint j = s - w;  // wraps (huge) before this word's first column
        const int active = mine && s >= w && j < n;
        // word 0 has no carry in (row 0 is free); word w takes word w-1's carry for column j
        const int h = (w == 0) ? 0 : carry[(s + 1u) & 1u][slot][w - 1u];
        int hout = 0;
        if (active) {
            const uint c = t[j];
            ulong eq = c < SIGMA ? pq[c * WORDS + w] : 0UL;
            const ulong xv = eq | Mv;
            if (h < 0) eq |= 1UL;
            const ulong xh = (((eq & Pv) + Pv) ^ Pv) | eq;
            ulong ph = Mv | ~(xh | Pv);
            ulong mh = Pv & xh;
            hout = (ph & top) ? 1 : ((mh & top) ? -1 : 0);
            ph <<= 1;
            mh <<= 1;
            if (h < 0) mh |= 1UL;
            else if (h > 0) ph |= 1UL;
            Pv = mh | ~(xv | ph);
            Mv = ph & xv;
            if (w + 1u == nw) {
                score += hout;
#if !RUNS
                o[j] = (uchar)min(score, 255);
#else
                const int ok = score <= (int)max_errors && (int)j >= own_lo && (int)j < own_hi;
                const int opens = ok && !in_run;
                count += opens;
                if (ok && count == 1) {
                    if (opens) first_j = (int)j;
                    if (opens || score < best_d) {
                        best_d = score;
                        best_j = (int)j;
                    }
                    last_j = (int)j;
                }
                in_run = ok;
#endif
            }
        }
        carry[s & 1u][slot][w] = hout;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#if RUNS
    if (mine && w + 1u == nw) {
        run_count[r] = (uchar)min(count, 255);
        run_best[r] = (uint)best_j;
        run_dist[r] = (uchar)best_d;
        run_first[r] = (uint)first_j;
        run_last[r] = (uint)last_j;
    }
#endif
}

// LANES regions per work-item, in the lanes of 64-bit vectors: for a CPU.
// Each step of Myers' recurrence is a chain of about eight dependent
// operations; independent regions in the lanes of one vector register
// advance LANES chains for the price of one, where one region per
// work-item left most of a core idle on PoCL (2.2-3.0x: docs/performance.md).
// The lanes run max(n) steps; a lane past its own region's end reads no
// text and writes nothing.  Words above a lane's own pattern (shorter than
// its neighbours') are computed too, but carries only move up and the score
// is taken at the lane's top word, so they change nothing.  Same output as
// `myers`.  Per-lane values are named variables (x0, x1, ...), spelled out
// by EACH and LIST: private arrays indexed in loops were kept in memory and
// ran at half the speed.
//
// Runs (RUNS = 1): the kernel also finds what the host would find in the
// distances next (dmap.approx.alignments.best_of_runs): the runs of
// consecutive owned ends with distance <= max_errors, and of each region's
// first run its best end (least distance, leftmost), that distance and the
// run's first and last end, as offsets into the region.  A pattern of
// length m owns the block-local ends [own_from + m + K - 1, own_until + m +
// K - 1).  The distances are then not written: the host takes regions with
// one run as they are, and runs the kernel again without RUNS for the few
// with more.
//
// Defines: LANES (4 or 8: AVX2 or AVX-512 registers of 64-bit lanes),
//          RUNS (0 or 1; K is an argument, so that each K needs no build of its own).
#ifdef LANES
#if LANES == 4
#define EACH(X) X(0) X(1) X(2) X(3)
#define LIST(X) X(0), X(1), X(2), X(3)
#elif LANES == 8
#define EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define LIST(X) X(0), X(1), X(2), X(3), X(4), X(5), X(6), X(7)
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define U64V CAT(ulong, LANES)
#define I64V CAT(long, LANES)
#define U32V CAT(uint, LANES)
#define I32V CAT(int, LANES)

#define LANE_SETUP(l)                                                                    \
    const uint r##l = first + l;                                                            \
    const int live##l = r##l < n_regions;                                                \
    const uint p##l = live##l ? region_pattern[r##l] : 0u;                               \
    const uint m##l = live##l ? pattern_length[p##l] : 1u;                               \
    const uint len##l = live##l ? region_length[r##l] : 0u;                              \
    __global const ulong *pq##l = peq + (ulong)p##l * SIGMA * WORDS;                     \
    __global const uchar *t##l = text + (live##l ? region_start[r##l] : 0u);             \
    __global uchar *o##l = out + (live##l ? out_offset[r##l] : 0u);                      \
    const long s##l = live##l ? (long)region_start[r##l] : 0L;                           \
    steps = max(steps, len##l);                                                          \
    words = max(words, (m##l + 63u) / 64u);
#define TOP_WORD(l) ((m##l + 63u) / 64u - 1u)
#define LAST_BIT(l) (1UL << ((m##l - 1u) & 63u))
#define LENGTH(l) ((int)m##l)
#define SYMBOL(l) const uint c##l = j < len##l ? t##l[j] : SIGMA;
#define MATCHES(l) (c##l < SIGMA ? pq##l[c##l * WORDS + w] : 0UL)
#define WRITE(l) if (j < len##l) o##l[j] = d.s##l;
// The owned ends of lane l, as offsets into its region: [OWN_FROM, OWN_UNTIL).
#define OWN_FROM(l) (int)clamp(own_from + (long)m##l + (long)max_errors - 1L - s##l, 0L, (long)len##l)
#define OWN_UNTIL(l) (int)clamp(own_until + (long)m##l + (long)max_errors - 1L - s##l, 0L, (long)len##l)
#define WRITE_RUNS(l)                                                                    \
    if (live##l) {                                                                       \
        run_count[r##l] = (uchar)min(count.s##l, 255);                                   \
        run_best[r##l] = (uint)best_j.s##l;                                              \
        run_dist[r##l] = (uchar)best_d.s##l;                                             \
        run_first[r##l] = (uint)first_j.s##l;                                            \
        run_last[r##l] = (uint)last_j.s##l;                                              \
    }

__kernel void myers_lanes(__global const uchar *text, __global const ulong *peq,
                          __global const uint *pattern_length,
                          __global const uint *region_start, __global const uint *region_length,
                          __global const uint *region_pattern, __global const uint *out_offset,
                          const uint n_regions, __global uchar *out, const uint max_errors,
                          const long own_from, const long own_until,
                          __global uchar *run_count, __global uint *run_best, __global uchar *run_dist,
                          __global uint *run_first, __global uint *run_last) {
    const uint first = get_global_id(0) * LANES;
    if (first >= n_regions) return;
    uint steps = 0, words = 1;
    EACH(LANE_SETUP)
    const U32V top_at = (U32V)(LIST(TOP_WORD));
    const U64V last_bit = (U64V)(LIST(LAST_BIT));
    I32V score = (I32V)(LIST(LENGTH));

    U64V Pv[WORDS], Mv[WORDS];
    for (uint w = 0; w < WORDS; w++) {
        Pv[w] = (U64V)(~0UL);
        Mv[w] = (U64V)(0UL);
    }
    const U64V one = (U64V)(1UL);
#if RUNS
    const I32V own_lo = (I32V)(LIST(OWN_FROM)), own_hi = (I32V)(LIST(OWN_UNTIL));
    I32V in_run = 0, count = 0, best_j = 0, best_d = 0, first_j = 0, last_j = 0;
#endif
    for (uint j = 0; j < steps; j++) {
        EACH(SYMBOL)
        I64V h = 0;  // the carry into word w, -1, 0 or +1 per lane
        I32V step = 0;
        for (uint w = 0; w < words; w++) {
            const U64V eq = (U64V)(LIST(MATCHES));
            // (vector comparisons are -1 where true)
            const U64V hneg = CAT(as_ulong, LANES)(h < 0) & one, hpos = CAT(as_ulong, LANES)(h > 0) & one;
            MYERS_DELTAS(U64V, eq, Pv[w], Mv[w], hneg)
            const I32V is_top = top_at == (U32V)(w);  // where w is the lane's top word
            const U64V top = select((U64V)(1UL << 63), last_bit, CAT(convert_long, LANES)(is_top));
            const I64V hout = ((mh & top) != 0) - ((ph & top) != 0);
            step = select(step, CAT(convert_int, LANES)(hout), is_top);
            MYERS_ADVANCE(hneg, hpos, Pv[w], Mv[w])
            h = hout;
        }
        score += step;
#if !RUNS
        const CAT(uchar, LANES) d = CAT(CAT(convert_uchar, LANES), _sat)(score);
        EACH(WRITE)
#else
        // (vector comparisons and logical operators are -1 where true)
        const I32V at = (I32V)((int)j);
        const I32V ok = (score <= (int)max_errors) & (at >= own_lo) & (at < own_hi);
        const I32V opens = ok & ~in_run;
        count -= opens;
        const I32V in_first = ok & (count == 1);
        const I32V better = in_first & (opens | (score < best_d));
        first_j = select(first_j, at, opens & in_first);
        best_d = select(best_d, score, better);
        best_j = select(best_j, at, better);
        last_j = select(last_j, at, in_first);
        in_run = ok;
#endif
    }
#if RUNS
    EACH(WRITE_RUNS)
#endif
}
#endif
