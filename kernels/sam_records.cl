// SAM records, one work-item per record, written at offsets the host
// computed (dmap/format/sam.py: record_lengths).  The Python formatters in
// dmap/format/sam.py are the reference this kernel is tested against byte for byte.
//
// Defines: APPROX (0/1).  Exact hits have CIGAR "<length>M", NM:i:0 and
// X1:i:0; approximate alignments (APPROX=1) bring per record an edit
// distance (NM, and AS = -NM), X1, and their CIGAR and MD strings, which lie
// back to back in `cigars` and `mds` (dmap.reads.FlatStrings).
// PAIRED (0/1, with APPROX): records of pairs bring RNEXT (the mate's contig,
// '=' when the record's own, NONE for '*'), PNEXT, a signed TLEN, the mate's
// CIGAR (MC tag) and MAPQ (MQ tag), written where the mate is mapped (flag 8
// clear); an unmapped record may lie at its mate's position, and RNAME is '*'
// for contig NONE (dmap.mapping.pairs.pair_record_columns).

#define NONE 0xFFFFFFFFu

inline size_t put_uint(__global uchar *out, size_t o, ulong v) {
    uchar tmp[20];
    int n = 0;
    do {
        tmp[n++] = (uchar)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) out[o++] = tmp[--n];
    return o;
}

inline size_t put_bytes(__global uchar *out, size_t o, __global const uchar *src, uint len) {
    for (uint i = 0; i < len; i++) out[o + i] = src[i];
    return o + len;
}

// What ends read r's records: its comment after a tab (with COMMENTS, where it has one), then `tail`.
inline size_t put_tail(__global uchar *out, size_t o, __global const uchar *reads, __global const uint *comment_off,
                       __global const uint *comment_len, uint r, __global const uchar *tail, uint tail_len) {
#if COMMENTS
    if (comment_len[r]) {
        out[o++] = '\t';
        o = put_bytes(out, o, reads + comment_off[r], comment_len[r]);
    }
#endif
    return put_bytes(out, o, tail, tail_len);
}

inline size_t put_str(__global uchar *out, size_t o, __constant const char *s) {
    while (*s) out[o++] = (uchar)*s++;
    return o;
}

inline size_t put_contig(__global uchar *out, size_t o, uint c, __global const uchar *rnames,
                         __global const uint *rname_off, __global const uint *rname_len) {
    if (c == NONE) {
        out[o] = '*';
        return o + 1;
    }
    return put_bytes(out, o, rnames + rname_off[c], rname_len[c]);
}

inline size_t put_seq(__global uchar *out, size_t o, __global const uchar *seq, uint len,
                      __global const uchar *letters) {
    for (uint i = 0; i < len; i++) out[o + i] = letters[seq[i]];
    return o + len;
}

// The mate's CIGAR and MAPQ, where it is mapped (flag 8 clear).
inline size_t put_mate_tags(__global uchar *out, size_t o, uint flag, uint mate, uint mapq,
                            __global const uchar *cigars, __global const ulong *cigar_off,
                            __global const uint *cigar_len) {
    if (flag & 8u) return o;
    o = put_str(out, o, "\tMC:Z:");
    o = put_bytes(out, o, cigars + cigar_off[mate], cigar_len[mate]);
    o = put_str(out, o, "\tMQ:i:");
    return put_uint(out, o, mapq);
}

// Names, sequences and qualities are fields of the reads' bytes `reads`
// (dmap.reads.ReadFields).  `letters` maps a read's bytes to SEQ's (a byte
// SAM does not allow becomes N) and `complement` to the reverse strand's.
// Mapped forward records go through `letters` only if `mapped_letters`:
// a mapped DNA read holds letters alone (the search refused the rest), and
// a plain copy is faster than a lookup per base.
// Read r's records end with tail `t` (a read group's RG:Z tag, or nothing): `tail_len[t]`
// bytes from `tail + tail_off[t]`, where t = `tail_of[r]` if `tails_per_read`, else 0.
// With COMMENTS (-C), the read's header comment comes before it, after a tab, where it has one:
// `comment_len[r]` bytes of `reads` from `comment_off[r]`.
__kernel void sam_records(__global const uchar *reads, __global const uint *name_off,
                          __global const uint *name_len, __global const uint *seq_off,
                          __global const uint *seq_len, __global const uint *qual_off, const uint has_qual,
                          __global const uchar *rnames, __global const uint *rname_off,
                          __global const uint *rname_len, __global const uchar *letters,
                          __global const uchar *complement, const uint mapped_letters,
                          __global const uchar *tail, __global const uint *tail_off,
                          __global const uint *tail_len, __global const uint *tail_of, const uint tails_per_read,
                          __global const uint *comment_off, __global const uint *comment_len,
                          __global const uint *rec_read, __global const uint *rec_flag,
                          __global const uint *rec_contig, __global const uint *rec_pos,
                          __global const uint *rec_mapq, __global const uint *rec_nh,
                          __global const uint *rec_x0, __global const uint *rec_nm,
                          __global const uint *rec_x1, __global const uint *rec_aln,
                          __global const uchar *cigars, __global const ulong *cigar_off,
                          __global const uint *cigar_len, __global const uchar *mds,
                          __global const ulong *md_off, __global const uint *md_len,
                          __global const uint *rec_rnext, __global const uint *rec_pnext,
                          __global const long *rec_tlen, __global const uint *rec_mate_aln,
                          __global const uint *rec_mate_mapq, __global const ulong *rec_start, const uint n_records, __global uchar *out) {
    const uint gid = get_global_id(0);
    if (gid >= n_records) return;
    const uint r = rec_read[gid], flag = rec_flag[gid];
    const uint len = seq_len[r];
    const uint t = tails_per_read ? tail_of[r] : 0u;
    __global const uchar *seq = reads + seq_off[r];
    __global const uchar *qual = reads + qual_off[r];
    size_t o = put_bytes(out, rec_start[gid], reads + name_off[r], name_len[r]);
    const uint c = rec_contig[gid];
#if PAIRED
    const uint rn = rec_rnext[gid];
#endif
    if (flag & 4u) {
#if PAIRED
        out[o++] = '\t';
        o = put_uint(out, o, flag);
        out[o++] = '\t';
        o = put_contig(out, o, c, rnames, rname_off, rname_len);
        out[o++] = '\t';
        o = put_uint(out, o, rec_pos[gid]);
        o = put_str(out, o, "\t0\t*\t");
        if (rn != NONE && rn == c) out[o++] = '='; else o = put_contig(out, o, rn, rnames, rname_off, rname_len);
        out[o++] = '\t';
        o = put_uint(out, o, rec_pnext[gid]);
        o = put_str(out, o, "\t0\t");
#else
        o = put_str(out, o, "\t4\t*\t0\t0\t*\t*\t0\t0\t");
#endif
        if (len == 0) {  // an empty read: SEQ and QUAL are '*'
            o = put_str(out, o, "*\t*");
        } else {
            o = put_seq(out, o, seq, len, letters);
            out[o++] = '\t';
            if (has_qual) o = put_bytes(out, o, qual, len); else out[o++] = '*';
        }
#if PAIRED
        o = put_mate_tags(out, o, flag, rec_mate_aln[gid], rec_mate_mapq[gid], cigars, cigar_off, cigar_len);
#endif
        o = put_tail(out, o, reads, comment_off, comment_len, r, tail + tail_off[t], tail_len[t]);
        out[o] = '\n';
        return;
    }
    out[o++] = '\t';
    o = put_uint(out, o, flag);
    out[o++] = '\t';
    o = put_bytes(out, o, rnames + rname_off[c], rname_len[c]);
    out[o++] = '\t';
    o = put_uint(out, o, rec_pos[gid]);
    out[o++] = '\t';
    o = put_uint(out, o, rec_mapq[gid]);
    out[o++] = '\t';
#if APPROX
    const uint a = rec_aln[gid];
    o = put_bytes(out, o, cigars + cigar_off[a], cigar_len[a]);
#else
    o = put_uint(out, o, len);
    out[o++] = 'M';
#endif
#if PAIRED
    out[o++] = '\t';
    if (rn == c) out[o++] = '='; else o = put_contig(out, o, rn, rnames, rname_off, rname_len);
    out[o++] = '\t';
    o = put_uint(out, o, rec_pnext[gid]);
    out[o++] = '\t';
    const long tlen = rec_tlen[gid];
    if (tlen < 0) out[o++] = '-';
    o = put_uint(out, o, (ulong)(tlen < 0 ? -tlen : tlen));
    out[o++] = '\t';
#else
    o = put_str(out, o, "\t*\t0\t0\t");
#endif
    if (flag & 256u) {
        o = put_str(out, o, "*\t*");
    } else if (flag & 16u) {
        for (uint i = 0; i < len; i++) out[o + i] = complement[seq[len - 1 - i]];
        o += len;
        out[o++] = '\t';
        if (has_qual) {
            for (uint i = 0; i < len; i++) out[o + i] = qual[len - 1 - i];
            o += len;
        } else {
            out[o++] = '*';
        }
    } else {
        o = mapped_letters ? put_seq(out, o, seq, len, letters) : put_bytes(out, o, seq, len);
        out[o++] = '\t';
        if (has_qual) o = put_bytes(out, o, qual, len); else out[o++] = '*';
    }
#if APPROX
    const uint nm = rec_nm[gid];
    o = put_str(out, o, "\tNM:i:");
    o = put_uint(out, o, nm);
    o = put_str(out, o, "\tMD:Z:");
    o = put_bytes(out, o, mds + md_off[a], md_len[a]);
    o = put_str(out, o, "\tAS:i:");
    if (nm) out[o++] = '-';
    o = put_uint(out, o, nm);
    o = put_str(out, o, "\tNH:i:");
#else
    o = put_str(out, o, "\tNM:i:0\tNH:i:");
#endif
    o = put_uint(out, o, rec_nh[gid]);
    o = put_str(out, o, "\tX0:i:");
    o = put_uint(out, o, rec_x0[gid]);
#if APPROX
    o = put_str(out, o, "\tX1:i:");
    o = put_uint(out, o, rec_x1[gid]);
#else
    o = put_str(out, o, "\tX1:i:0");
#endif
#if PAIRED
    o = put_mate_tags(out, o, flag, rec_mate_aln[gid], rec_mate_mapq[gid], cigars, cigar_off, cigar_len);
#endif
    o = put_tail(out, o, reads, comment_off, comment_len, r, tail + tail_off[t], tail_len[t]);
    out[o] = '\n';
}
