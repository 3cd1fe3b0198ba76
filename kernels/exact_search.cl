// Exact backward search (BowMapCL Algorithm 2), several queries per work-item.
//
// Read i is reads[offsets[i] .. offsets[i] + lengths[i]), bytes that
// `table` turns into codes (the FASTQ bytes as read, so the host never
// translates them; or codes already, with an identity table).
// A query is (read, strand): query q = read * N_STRANDS + strand.  Strand 1
// is the reverse complement, read from the same bytes (complementing codes
// and walking the read forwards), so reads are sent to the device once.
// A read holding a byte the table maps to INVALID gets the interval
// (BAD_READ, BAD_READ) on strand 0, which the host reports as an input error.
//
// One Occ lookup is one dependent random memory access (100-300 ns).  Each
// work-item advances BATCH queries in step so that their independent loads
// are in flight together instead of one after another.
//
// Early stop (MIN_SUFFIX > 0): once a suffix of at least MIN_SUFFIX symbols
// has a single row, the rest of the search can only keep or lose that one
// occurrence.  The query then locates the row (sa.cl) and compares the rest
// of the pattern with the block's text, instead of ~100 more Occ lookups:
// its result is (start position, LOCATED), or the empty interval.  Shorter
// unique suffixes are not stopped, because on the strand a read does not
// come from they are single rows by chance and die a few steps later.
//
// Plain DNA reads (PLAIN_READS): a read of at least 16 bases, all of them
// A, C, G or T (either case), is checked and compared with the text 16
// bases at a time, its codes A=0, C=1, G=2, T=3 computed from its bytes as
// ((b >> 1) ^ (b >> 2)) & 3.  The early stop's comparison, one table lookup
// and one compare per symbol, was about 45% of the kernel's time (measured by
// leaving it out; docs/performance.md).  Other reads, and other alphabets,
// take the table one symbol at a time.
//
// k-mer table (KMER_DEPTH > 0): a query's first KMER_DEPTH steps, on its
// last KMER_DEPTH symbols, are one lookup in the block's table (kmers.cl),
// which holds exactly what those steps give; a shorter query looks up all
// its symbols, and one with a symbol outside the alphabet among them the
// symbols after it (where the steps would have stopped).
// KMER_DEPTH < MIN_SUFFIX, so no early stop falls inside the lookup.
//
// Defines: SIGMA, RATE, LAYOUT (occ.cl), SA_RATE (sa.cl), BATCH,
// N_STRANDS (1 or 2), INVALID, MIN_SUFFIX, CHECK_SYMBOLS, PLAIN_READS,
// KMER_DEPTH (0: no table).
#include "occ.cl"
#include "sa.cl"

#define BAD_READ 0xffffffffu
#define LOCATED 0xfffffffeu

// Code of symbol k of query (read r, strand) : the read, or its reverse complement.
#if CHECK_SYMBOLS
#define CODE(x) table[x]
#else
#define CODE(x) (x)
#endif
inline uint pattern_code(__global const uchar *r, __global const uchar *table, uint len, uint strand, uint k) {
#if N_STRANDS == 2
    if (strand) {
        uint c = CODE(r[len - 1u - k]);
        return c < 4u ? 3u - c : 255u;
    }
#endif
    return CODE(r[k]);
}

#if PLAIN_READS
#define UPPER16(v) ((v) & (uchar16)0xdf)
#define PLAIN16(v) all(UPPER16(v) == (uchar16)'A' | UPPER16(v) == (uchar16)'C' | UPPER16(v) == (uchar16)'G' | \
                       UPPER16(v) == (uchar16)'T')
#define CODES16(v) ((((v) >> (uchar16)1) ^ ((v) >> (uchar16)2)) & (uchar16)3)

// Whether read r (len >= 16) is plain; the last 16 bases overlap the ones before.
inline uint plain_read(__global const uchar *r, uint len) {
    uint plain = 1;
    for (uint k = 0; k < len; k += 16) plain &= PLAIN16(vload16(0, r + min(k, len - 16u)));
    return plain;
}

// Whether symbols [from, rest) of the pattern (a plain read, or its reverse
// complement) equal t[from, rest); rest >= 16, and a multiple of 16 from.
inline uint plain_equals(__global const uchar *t, __global const uchar *r, uint len, uint strand, uint from,
                         uint rest) {
    const uchar16 reversed = (uchar16)(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (uint k = from; k < rest; k += 16) {
        const uint at = min(k, rest - 16u);
        uchar16 p = strand ? shuffle(CODES16(vload16(0, r + len - 16u - at)), reversed) ^ (uchar16)3
                           : CODES16(vload16(0, r + at));
        if (any(p != vload16(0, t + at))) return 0;
    }
    return 1;
}
#endif

__kernel void exact_search(__global const uint *occ, const uint n_periods,
                           __global const uint *C, const uint n_rows,
                           __global const uint *sa_samples, __global const uint *boundary_rows,
                           __global const uint *boundary_pos, const uint n_boundary,
                           __global const uchar *text,
                           __global const uchar *reads, __global const uint *offsets,
                           __global const uint *lengths, __global const uchar *table,
                           __global const uint2 *kmers, const uint n_queries, __global uint2 *out) {
    const uint first = get_global_id(0) * BATCH;
    uint sp[BATCH], ep[BATCH], len[BATCH], start[BATCH], done[BATCH];
    uint maxlen = 0;
    for (uint b = 0; b < BATCH; b++) {
        uint q = first + b;
        len[b] = q < n_queries ? lengths[q / N_STRANDS] : 0u;
        start[b] = q < n_queries ? offsets[q / N_STRANDS] : 0u;
        sp[b] = 0;
        ep[b] = len[b] ? n_rows : 0u;
        done[b] = len[b];  // symbols matched when the search stopped early
        maxlen = max(maxlen, len[b]);
    }
    uint plain[BATCH];
    for (uint b = 0; b < BATCH; b++) {
#if PLAIN_READS
        plain[b] = len[b] >= 16u && plain_read(reads + start[b], len[b]);
#else
        plain[b] = 0;
#endif
    }
#if CHECK_SYMBOLS
    uint bad[BATCH];
    for (uint b = 0; b < BATCH; b++) {
        bad[b] = 0;
        if ((first + b) % N_STRANDS == 0u && !plain[b])
            for (uint j = 0; j < len[b]; j++) bad[b] |= table[reads[start[b] + j]] == INVALID;
    }
#endif
#if KMER_DEPTH > 0
    for (uint b = 0; b < BATCH; b++) {
        if (!len[b]) continue;
        const uint strand = (first + b) % N_STRANDS, depth = min((uint)KMER_DEPTH, len[b]);
        // Entry x of level `level`, from offset 1 + SIGMA + ... + SIGMA**(level-1).
        uint level = 0, x = 0, weight = 1, offset = 0;
        for (; level < depth; level++) {
            const uint c = pattern_code(reads + start[b], table, len[b], strand, len[b] - 1u - level);
            if (c >= SIGMA) break;
            x += c * weight;
            offset += weight;
            weight *= SIGMA;
        }
        const uint2 r = kmers[offset + x];
        const uint stopped = level < depth && r.x < r.y;  // alive when the search meets the unknown symbol
        sp[b] = stopped ? 0u : r.x;
        ep[b] = stopped ? 0u : r.y;
    }
    // Queries shorter than the table are done; the others go on from symbol KMER_DEPTH.
    for (uint j = KMER_DEPTH; j < maxlen; j++) {
#else
    for (uint j = 0; j < maxlen; j++) {
#endif
        uint alive = 0;
        for (uint b = 0; b < BATCH; b++) {
            if (j < done[b] && sp[b] < ep[b]) {
                uint c = pattern_code(reads + start[b], table, len[b], (first + b) % N_STRANDS, len[b] - 1u - j);
                if (c < SIGMA) {
                    uint base = C[c];
                    sp[b] = base + occ_count(occ, n_periods, c, sp[b]);
                    ep[b] = base + occ_count(occ, n_periods, c, ep[b]);
                } else {
                    sp[b] = ep[b] = 0u;  // N or unknown symbol: no match
                }
#if MIN_SUFFIX > 0
                if (ep[b] - sp[b] == 1u && j + 1u >= MIN_SUFFIX) done[b] = j + 1u;
#endif
                alive++;
            }
        }
        if (!alive) break;
    }
#if MIN_SUFFIX > 0
    // Queries stopped early: walk their single rows in step (as locate.cl
    // does); a walk that ends leaves the matched suffix's position in sp.
    uint steps[BATCH], walked[BATCH], todo = 0;
    for (uint b = 0; b < BATCH; b++) {
        walked[b] = 0;
        steps[b] = done[b] < len[b] && sp[b] < ep[b] ? 0u : 0xffffffffu;
        todo += steps[b] == 0u;
    }
    while (todo) {
        for (uint b = 0; b < BATCH; b++) {
            if (steps[b] == 0xffffffffu) continue;
            uint pos;
            if (!locate_step(occ, n_periods, C, sa_samples, boundary_rows, boundary_pos, n_boundary, &sp[b],
                             steps[b], &pos)) {
                steps[b]++;
                continue;
            }
            steps[b] = 0xffffffffu;
            todo--;
            sp[b] = pos;
            walked[b] = 1;
        }
    }
    // Then the rest of each walked pattern, which must precede its suffix,
    // is compared with the text.  Comparing only after every walk of the
    // batch has ended, first 16 symbols of every plain pattern and then the
    // rest, keeps the queries' text loads apart from each other's walks and
    // comparisons, so that their cache misses overlap (E. coli, 500k reads:
    // 0.185 -> 0.156 s; docs/performance.md).
#if PLAIN_READS
    for (uint b = 0; b < BATCH; b++) {
        const uint rest = len[b] - done[b];
        if (walked[b] && plain[b] && rest >= 16u && sp[b] >= rest &&
            !plain_equals(text + sp[b] - rest, reads + start[b], len[b], (first + b) % N_STRANDS, 0u, 16u)) {
            walked[b] = 0;
            sp[b] = ep[b] = 0u;
        }
    }
#endif
    for (uint b = 0; b < BATCH; b++) {
        if (!walked[b]) continue;
        const uint pos = sp[b], rest = len[b] - done[b], strand = (first + b) % N_STRANDS;
        uint ok = pos >= rest, scalar = rest;
#if PLAIN_READS
        if (ok && plain[b] && rest >= 16u) {  // its first 16 symbols matched above
            ok = plain_equals(text + pos - rest, reads + start[b], len[b], strand, 16u, rest);
            scalar = 0;
        }
#endif
        for (uint k = 0; ok && k < scalar; k++) {
            uint t = text[pos - rest + k];
            ok = t < SIGMA && t == pattern_code(reads + start[b], table, len[b], strand, k);
        }
        sp[b] = ok ? pos - rest : 0u;
        ep[b] = ok ? LOCATED : 0u;
    }
#endif
    for (uint b = 0; b < BATCH; b++) {
        uint q = first + b;
        uint2 r = (uint2)(sp[b], sp[b] < ep[b] || ep[b] == LOCATED ? ep[b] : sp[b]);
#if CHECK_SYMBOLS
        if (bad[b]) r = (uint2)(BAD_READ, BAD_READ);
#endif
        if (q < n_queries) out[q] = r;
    }
}
