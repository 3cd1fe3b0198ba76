// Alignments from best end positions: banded DP with traceback, then the
// CIGAR and MD strings, one alignment per work-item, in two kernels:
// `traceback` writes each alignment's ops and the lengths of its strings,
// and `alignment_strings` writes the strings back to back at the offsets
// the host summed from those lengths (dmap.reads.FlatStrings).
//
// An alignment of a pattern of length m ending at text position `end` with
// at most K edits uses diagonals j - i in [0, 2K] of the DP over text
// columns 1..m+K (column m+K is `end`): WIDTH = 2K+1 cells per pattern
// symbol.  The same recurrence and tie order as dmap/approx/traceback.py
// (its numpy reference): match/mismatch, then insertion, then deletion.
// Text before `min_start` (outside the candidate region: another contig or
// the block's edge) is never used.
//
// Most alignments have no indel: where the diagonal ending at `end` already
// has `expect` (Myers' distance there) mismatches, it is an optimal
// alignment, and the one the traceback would choose (every prefix of an
// optimal path is optimal, so a match/mismatch is preferred at each of its
// cells); its ops are written without the DP.  `expect` 0xFFFFFFFF: no
// distance known, the DP always.
//
// Defines: SIGMA, K, WIDTH (= 2K+1), MAXOPS (longest pattern + 2K), EQX (0/1).

#define INF 10000
#define OP_MATCH 0
#define OP_MISMATCH 1
#define OP_INS 2
#define OP_DEL 3

// The string helpers write to `s`, or only count where `s` is 0 (the lengths pass).
inline uint put_uint(__global uchar *s, uint at, uint v) {
    uchar digits[10];
    uint n = 0;
    do { digits[n++] = (uchar)('0' + v % 10u); v /= 10u; } while (v);
    if (!s) return at + n;
    while (n) s[at++] = digits[--n];
    return at;
}

inline uint put_char(__global uchar *s, uint at, uchar c) {
    if (s) s[at] = c;
    return at + 1;
}

// Whether ops o[x..x+16) are all OP_MATCH (with `mismatch_too`, all OP_MATCH or
// OP_MISMATCH): OP_MATCH is 0 and OP_MISMATCH 1, so a 16-byte load answers it.
// Most alignments are long runs of matches; the strings' loops skip those 16
// ops at a time.
inline int all_match16(__global const uchar *o, uint x, int mismatch_too) {
    const ulong2 v = as_ulong2(vload16(0, o + x)) & (ulong2)(mismatch_too ? 0xfefefefefefefefeUL : ~0UL);
    return (v.x | v.y) == 0UL;
}

// CIGAR of ops o[0..k): runs of M (=/X with EQX), I, D.  Returns its length.
inline uint write_cigar(__global const uchar *o, uint k, __global uchar *s) {
    uint at = 0;
    for (uint x = 0; x < k;) {
        uchar kind = o[x];
        if (!EQX && kind == OP_MISMATCH) kind = OP_MATCH;
        uint y = x + 1;
        while (y < k) {
            if (kind == OP_MATCH && y + 16u <= k && all_match16(o, y, !EQX)) {
                y += 16u;
                continue;
            }
            uchar next = o[y];
            if (!EQX && next == OP_MISMATCH) next = OP_MATCH;
            if (next != kind) break;
            y++;
        }
        at = put_uint(s, at, y - x);
        at = put_char(s, at, kind == OP_INS ? 'I' : kind == OP_DEL ? 'D' : !EQX ? 'M' : kind == OP_MATCH ? '=' : 'X');
        x = y;
    }
    return at;
}

// MD of ops o[0..k) starting at text position t: matches counted, mismatches and
// deletions spelled from the reference.  Returns its length.
inline uint write_md(__global const uchar *o, uint k, long t, __global const uchar *text,
                     __global const uchar *letters, __global uchar *s) {
    uint at = 0, matches = 0;
    for (uint x = 0; x < k; x++) {
        if (x + 16u <= k && all_match16(o, x, 0)) {
            matches += 16u;
            t += 16;
            x += 15u;
            continue;
        }
        const uchar op = o[x];
        if (op == OP_MATCH) {
            matches++;
            t++;
        } else if (op == OP_MISMATCH) {
            at = put_uint(s, at, matches);
            at = put_char(s, at, letters[text[t++]]);
            matches = 0;
        } else if (op == OP_DEL) {
            at = put_uint(s, at, matches);
            at = put_char(s, at, '^');
            while (x < k && o[x] == OP_DEL) { at = put_char(s, at, letters[text[t++]]); x++; }
            x--;
            matches = 0;
        }
    }
    return put_uint(s, at, matches);
}

// The ops of the pattern on the diagonal from text position `start`, OP_MATCH
// or OP_MISMATCH each, written to o[0..m); returns the mismatches.  Sixteen
// symbols at a time where pattern and text hold them (pattern rows are padded
// to whole 64-symbol words).
inline uint diagonal_ops(__global const uchar *pat, int m, __global const uchar *text, uint text_length, long start,
                         __global uchar *o) {
    uint mismatches = 0;
    int i = 0;
    for (; i + 16 <= m && start + i + 16 <= (long)text_length; i += 16) {
        const uchar16 p = vload16(0, pat + i), t = vload16(0, text + start + i);
        const uchar16 x = as_uchar16((p != t) | (p >= (uchar16)SIGMA) | (t >= (uchar16)SIGMA)) & (uchar16)1;
        vstore16(x, 0, o + i);
        const ulong2 w = as_ulong2(x);
        mismatches += popcount(w.x) + popcount(w.y);
    }
    for (; i < m; i++) {
        const uint tc = (start + i < (long)text_length) ? text[start + i] : 255u;
        const uint pc = pat[i];
        const uint x = (pc != tc || pc >= SIGMA || tc >= SIGMA) ? 1u : 0u;
        o[i] = x ? OP_MISMATCH : OP_MATCH;
        mismatches += x;
    }
    return mismatches;
}

__kernel void traceback(__global const uchar *text, const uint text_length,
                        __global const uchar *patterns, const uint pattern_stride, __global const uint *row_of,
                        __global const uint *pattern_length, __global const uint *end,
                        __global const uint *min_start, __global const uint *expect, const uint n,
                        __global const uchar *letters, __global uchar *ptr_scratch,
                        __global uchar *ops, __global uint *start_out, __global uint *dist_out,
                        __global uint *n_ops_out, __global uint *cigar_len, __global uint *md_len) {
    const uint a = get_global_id(0);
    if (a >= n) return;
    __global const uchar *pat = patterns + (ulong)row_of[a] * pattern_stride;  // alignment a's pattern row
    __global uchar *ptr = ptr_scratch + (ulong)a * (MAXOPS + 1) * WIDTH;
    const int m = (int)pattern_length[a];
    const int cols = m + K;
    const long first_text = (long)end[a] - cols + 1;  // text position of column 1
    const long j0 = max((long)min_start[a] - first_text, 0L);
    __global uchar *o = ops + (ulong)a * MAXOPS;
    uint k = 0;
    long start = (long)end[a] - m + 1;  // of the diagonal
    const uint want = expect[a];
    const int diagonal = want != 0xFFFFFFFFu && start >= (long)min_start[a] && start >= 0;
    if (diagonal && diagonal_ops(pat, m, text, text_length, start, o) == want) {
        k = (uint)m;
        dist_out[a] = want;
    } else {
        short D[WIDTH], Dn[WIDTH];
        for (int b = 0; b < WIDTH; b++) D[b] = (b >= j0) ? 0 : INF;
        for (int i = 1; i <= m; i++) {
            const uint pc = pat[i - 1];
            for (int b = 0; b < WIDTH; b++) {
                const int j = i + b;
                uchar choice = 0;
                int best = INF;
                if (j <= cols) {
                    const long tp = first_text + j - 1;
                    const uint tc = (tp >= 0 && tp < (long)text_length) ? text[tp] : 255u;
                    best = D[b] + ((pc != tc || pc >= SIGMA || tc >= SIGMA) ? 1 : 0);
                    if (b + 1 < WIDTH && D[b + 1] + 1 < best) { best = D[b + 1] + 1; choice = 1; }
                    if (b > 0 && Dn[b - 1] + 1 < best) { best = Dn[b - 1] + 1; choice = 2; }
                    if (j < j0) best = INF;
                }
                Dn[b] = (short)min(best, INF);
                ptr[i * WIDTH + b] = choice;
            }
            for (int b = 0; b < WIDTH; b++) D[b] = Dn[b];
        }
        dist_out[a] = (uint)D[K];

        // Walk back from (m, K), writing ops from the end, then reverse them.
        int i = m, b = K;
        while (i > 0) {
            const uchar c = ptr[i * WIDTH + b];
            if (c == 0) {
                const long tp = first_text + i + b - 1;
                const uint tc = (tp >= 0 && tp < (long)text_length) ? text[tp] : 255u;
                const uint pc = pat[i - 1];
                o[k++] = (pc != tc || pc >= SIGMA || tc >= SIGMA) ? OP_MISMATCH : OP_MATCH;
                i--;
            } else if (c == 1) {
                o[k++] = OP_INS;
                i--;
                b++;
            } else {
                o[k++] = OP_DEL;
                b--;
            }
        }
        for (uint x = 0; x < k / 2; x++) {
            const uchar t = o[x];
            o[x] = o[k - 1 - x];
            o[k - 1 - x] = t;
        }
        start = first_text + b;
    }
    n_ops_out[a] = k;
    start_out[a] = (uint)start;

    cigar_len[a] = write_cigar(o, k, 0);
    md_len[a] = write_md(o, k, start, text, letters, 0);
}

__kernel void alignment_strings(__global const uchar *text, __global const uchar *letters,
                                __global const uchar *ops, __global const uint *n_ops,
                                __global const uint *start, __global const ulong *cigar_off,
                                __global const ulong *md_off, const uint n, __global uchar *cigars,
                                __global uchar *mds) {
    const uint a = get_global_id(0);
    if (a >= n) return;
    __global const uchar *o = ops + (ulong)a * MAXOPS;
    write_cigar(o, n_ops[a], cigars + cigar_off[a]);
    write_md(o, n_ops[a], start[a], text, letters, mds + md_off[a]);
}
