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
    for (uint j = 0; j < n; j++) {
        const uint c = t[j];
        int h = 0;  // row 0 is all zeros (free start): no carry into word 0
        for (uint w = 0; w < nw; w++) {
            ulong eq = c < SIGMA ? pq[c * WORDS + w] : 0UL;
            const ulong pv = Pv[w], mv = Mv[w];
            const ulong xv = eq | mv;
            if (h < 0) eq |= 1UL;
            const ulong xh = (((eq & pv) + pv) ^ pv) | eq;
            ulong ph = mv | ~(xh | pv);
            ulong mh = pv & xh;
            const ulong top = (w + 1u == nw) ? last_bit : (1UL << 63);
            const int hout = (ph & top) ? 1 : ((mh & top) ? -1 : 0);
            ph <<= 1;
            mh <<= 1;
            if (h < 0) mh |= 1UL;
            else if (h > 0) ph |= 1UL;
            Pv[w] = mh | ~(xv | ph);
            Mv[w] = ph & xv;
            h = hout;
        }
        score += h;
        o[j] = (uchar)min(score, 255);
    }
}
