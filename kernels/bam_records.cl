// BAM records, one work-item per record, from SAM records the host parsed
// field by field (dmap/bam.py: _layout).  The numpy writer in dmap/bam.py
// (encode_records) is the reference this kernel is tested against byte for
// byte; it in turn is tested against htslib's encoding of the same SAM.

#define FIXED 36  // block_size and the 32 bytes of fixed fields that follow it

inline uint le16(__global const uchar *p) { return p[0] | ((uint)p[1] << 8); }
inline uint le32(__global const uchar *p) {
    return p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

// `fixed`: each record's 36 fixed bytes, already encoded; the name, SEQ and
// QUAL lie in the SAM `text` at the given offsets (QUAL absent where
// has_qual is 0: written as 0xFF bytes).  `cigar` holds every record's
// operations in turn from `cigar_first`.  Tags: `n_tags` from `tag_first`,
// each a field "TG:T:value" of `text` at `tag_start`, written with the BAM
// type `tag_kind` (c C s S i I: `tag_value`'s low bytes; Z: the `value_len`
// bytes and a NUL; A: one byte).
__kernel void bam_records(__global const uchar *text, __global const uchar *fixed, __global const ulong *start,
                          __global const uint *name_start, __global const uint *cigar,
                          __global const uint *cigar_first, __global const uint *seq_start,
                          __global const uint *qual_start, __global const uchar *has_qual,
                          __global const uchar *nt16, __global const uint *tag_first,
                          __global const uint *n_tags, __global const uint *tag_start,
                          __global const uchar *tag_kind, __global const int *tag_value,
                          __global const uint *value_len, const uint n_records, __global uchar *out) {
    const uint r = get_global_id(0);
    if (r >= n_records) return;
    __global const uchar *f = fixed + (size_t)r * FIXED;
    const uint l_name = f[12], n_cigar = le16(f + 16), l_seq = le32(f + 20);
    size_t o = start[r];
    for (uint i = 0; i < FIXED; i++) out[o + i] = f[i];
    o += FIXED;
    __global const uchar *name = text + name_start[r];
    for (uint i = 0; i + 1 < l_name; i++) out[o + i] = name[i];
    out[o + l_name - 1] = 0;
    o += l_name;
    for (uint i = 0; i < n_cigar; i++) {
        const uint op = cigar[cigar_first[r] + i];
        out[o++] = op & 0xff;
        out[o++] = (op >> 8) & 0xff;
        out[o++] = (op >> 16) & 0xff;
        out[o++] = op >> 24;
    }
    __global const uchar *seq = text + seq_start[r];
    for (uint i = 0; i < l_seq / 2; i++) out[o + i] = (nt16[seq[2 * i]] << 4) | nt16[seq[2 * i + 1]];
    if (l_seq & 1) out[o + l_seq / 2] = nt16[seq[l_seq - 1]] << 4;
    o += (l_seq + 1) / 2;
    if (has_qual[r]) {
        __global const uchar *qual = text + qual_start[r];
        for (uint i = 0; i < l_seq; i++) out[o + i] = qual[i] - 33;
    } else {
        for (uint i = 0; i < l_seq; i++) out[o + i] = 0xff;
    }
    o += l_seq;
    for (uint t = tag_first[r]; t < tag_first[r] + n_tags[r]; t++) {
        __global const uchar *tag = text + tag_start[t];
        const uchar kind = tag_kind[t];
        out[o++] = tag[0];
        out[o++] = tag[1];
        out[o++] = kind;
        if (kind == 'Z') {
            for (uint i = 0; i < value_len[t]; i++) out[o++] = tag[5 + i];
            out[o++] = 0;
        } else if (kind == 'A') {
            out[o++] = tag[5];
        } else {
            const uint v = (uint)tag_value[t];
            const uint width = (kind == 'c' || kind == 'C') ? 1 : (kind == 's' || kind == 'S') ? 2 : 4;
            for (uint i = 0; i < width; i++) out[o++] = (v >> (8 * i)) & 0xff;
        }
    }
}
