// BAM records from SAM records, one work-item per record, in two passes:
// bam_fields parses each line (field offsets, integers, CIGAR and tag
// sizes), the host looks up reference names and places the records, and
// bam_records writes them.  The numpy encoder in dmap/format/bam.py
// (encode_records) is the reference these kernels are tested against byte
// for byte; it in turn is tested against htslib's encoding of the same SAM.
// Error codes are those of dmap/format/bam.py (_ERRORS).

#define FIXED 36  // block_size and the 32 bytes of fixed fields that follow it
#define ERR_FIELDS 1
#define ERR_INTEGER 2
#define ERR_NAME 3
#define ERR_CIGAR_LONG 4
#define ERR_CIGAR 5
#define ERR_QUAL 6
#define ERR_TAG 7
#define ERR_TAG_TYPE 8
#define ERR_ARRAY 9

// Bytes of one value of a B tag's type (c, C, s, S, i, I, f); 0 for any other.
inline uint array_width(uchar sub) {
    return (sub == 'c' || sub == 'C') ? 1 : (sub == 's' || sub == 'S') ? 2 : (sub == 'i' || sub == 'I' || sub == 'f') ? 4
                                                                                                                 : 0;
}

// Whether v fits a B tag's integer type.
inline int array_fits(uchar sub, long v) {
    switch (sub) {
        case 'c': return v >= -128 && v <= 127;
        case 'C': return v >= 0 && v <= 255;
        case 's': return v >= -32768 && v <= 32767;
        case 'S': return v >= 0 && v <= 65535;
        case 'i': return v >= -2147483648L && v <= 2147483647L;
        default: return v >= 0 && v <= 4294967295L;
    }
}

// A decimal integer with an optional '-', at most 18 digits; 0 if it is not one.
inline int parse_int(__global const uchar *s, uint len, long *value) {
    const uint neg = len > 0 && s[0] == '-';
    if (len <= neg || len - neg > 18) return 0;
    long v = 0;
    for (uint i = neg; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *value = neg ? -v : v;
    return 1;
}

// CIGAR operation code of byte c (MIDNSHP=X), or -1.
inline int cigar_op(uchar c) {
    switch (c) {
        case 'M': return 0;
        case 'I': return 1;
        case 'D': return 2;
        case 'N': return 3;
        case 'S': return 4;
        case 'H': return 5;
        case 'P': return 6;
        case '=': return 7;
        case 'X': return 8;
        default: return -1;
    }
}

// htslib's type for an integer tag: the smallest of c/s/i (negative) or C/S/I.
inline uchar int_kind(long v) {
    if (v < 0) return v >= -128 ? 'c' : v >= -32768 ? 's' : 'i';
    return v < 256 ? 'C' : v < 65536 ? 'S' : 'I';
}

inline uint kind_width(uchar k) { return (k == 'c' || k == 'C') ? 1 : (k == 's' || k == 'S') ? 2 : 4; }

// Per record (line [line_start, line_end), line_end at its '\n'): the
// fields' offsets and values, the CIGAR's operations and reference span,
// the tags' place and BAM size, its float values (f tags and B:f arrays'),
// and an error code (0 when it encodes).  A float's decimal text is not
// parsed here: the host reads every float of the chunk at once, as htslib
// does (strtod, then a float: dmap.format.bam.float_bits), and writes its
// four bytes where bam_records leaves room for them.
__kernel void bam_fields(__global const uchar *text, __global const ulong *line_start,
                         __global const ulong *line_end, const uint n_records, __global uint *error,
                         __global uint *name_len, __global long *ints,  // 5 per record: FLAG POS MAPQ PNEXT TLEN
                         __global ulong *rname, __global ulong *rnext,  // start, length
                         __global ulong *cigar, __global uint *n_cigar, __global long *ref_span,
                         __global ulong *seq, __global uint *has_qual, __global ulong *tags, __global uint *tag_bytes,
                         __global uint *n_floats) {
    const uint r = get_global_id(0);
    if (r >= n_records) return;
    const ulong e = line_end[r];
    ulong start[11], len[11], p = line_start[r];
    uint err = 0;
    for (uint k = 0; k < 11; k++) {
        start[k] = p;
        while (p < e && text[p] != '\t') p++;
        len[k] = p - start[k];
        if (k < 10) {
            if (p >= e) { err = ERR_FIELDS; break; }
            p++;
        }
    }
    error[r] = err;
    if (err) return;
    if (len[0] < 1 || len[0] > 254) err = ERR_NAME;
    name_len[r] = (uint)len[0];
    const uint int_field[5] = {1, 3, 4, 7, 8};
    for (uint i = 0; i < 5; i++) {
        long v = 0;
        if (!parse_int(text + start[int_field[i]], (uint)len[int_field[i]], &v)) err = err ? err : ERR_INTEGER;
        ints[5 * (size_t)r + i] = v;
    }
    rname[2 * (size_t)r] = start[2];
    rname[2 * (size_t)r + 1] = len[2];
    rnext[2 * (size_t)r] = start[6];
    rnext[2 * (size_t)r + 1] = len[6];

    // CIGAR: digits then an operation, repeated; '*' for none.
    uint ops = 0;
    long span = 0, num = 0;
    uint digits = 0;
    const int star_cigar = len[5] == 1 && text[start[5]] == '*';
    if (!star_cigar) {
        for (ulong i = start[5]; i < start[5] + len[5]; i++) {
            const uchar c = text[i];
            const int op = cigar_op(c);
            if (c >= '0' && c <= '9' && digits < 18) {
                num = num * 10 + (c - '0');
                digits++;
            } else if (op >= 0 && digits > 0) {
                ops++;
                if (op == 0 || op == 2 || op == 3 || op == 7 || op == 8) span += num;
                num = 0;
                digits = 0;
            } else {
                err = err ? err : ERR_INTEGER;  // a byte that is neither, or an operation without a length
                break;
            }
        }
        if (digits) err = err ? err : ERR_CIGAR;
    }
    if (ops > 0xffff) err = err ? err : ERR_CIGAR_LONG;
    cigar[2 * (size_t)r] = start[5];
    cigar[2 * (size_t)r + 1] = star_cigar ? 0 : len[5];
    n_cigar[r] = ops;
    ref_span[r] = span;

    const ulong l_seq = (len[9] == 1 && text[start[9]] == '*') ? 0 : len[9];
    const int qual = !(len[10] == 1 && text[start[10]] == '*');
    if (qual && len[10] != l_seq) err = err ? err : ERR_QUAL;
    seq[3 * (size_t)r] = start[9];
    seq[3 * (size_t)r + 1] = l_seq;
    seq[3 * (size_t)r + 2] = start[10];
    has_qual[r] = qual;

    // Tags: "TG:T:value" fields after the eleventh.
    uint bytes = 0, floats = 0;
    const ulong first_tag = p < e ? p + 1 : e;
    p = first_tag;
    while (p < e) {
        const ulong t = p;
        while (p < e && text[p] != '\t') p++;
        const ulong tl = p - t;
        p++;
        if (tl < 5 || text[t + 2] != ':' || text[t + 4] != ':') { err = err ? err : ERR_TAG; break; }
        const uchar type = text[t + 3];
        if (type == 'i') {
            long v = 0;
            if (!parse_int(text + t + 5, (uint)(tl - 5), &v)) err = err ? err : ERR_INTEGER;
            bytes += 3 + kind_width(int_kind(v));
        } else if (type == 'Z' || type == 'H') {
            bytes += 3 + (uint)(tl - 5) + 1;
        } else if (type == 'A') {
            bytes += 4;
        } else if (type == 'f') {
            bytes += 3 + 4;
            floats++;
        } else if (type == 'B' && tl >= 6 && array_width(text[t + 5])) {
            // B:type,value,...: each value a decimal integer that fits the type, or a float.
            const uchar sub = text[t + 5];
            const ulong e_field = t + tl;
            if (tl > 6 && text[t + 6] != ',') { err = err ? err : ERR_ARRAY; break; }
            uint count = 0;
            for (ulong q = t + 6; q < e_field;) {
                const ulong v0 = ++q;  // past the comma
                while (q < e_field && text[q] != ',') q++;
                count++;
                if (sub == 'f') continue;
                long v = 0;
                if (!parse_int(text + v0, (uint)(q - v0), &v)) { err = err ? err : ERR_INTEGER; break; }
                if (!array_fits(sub, v)) { err = err ? err : ERR_ARRAY; break; }
            }
            bytes += 3 + 5 + count * array_width(sub);
            if (sub == 'f') floats += count;
        } else {
            err = err ? err : ERR_TAG_TYPE;
            break;
        }
    }
    tags[2 * (size_t)r] = first_tag;
    tags[2 * (size_t)r + 1] = e;
    tag_bytes[r] = bytes;
    n_floats[r] = floats;
    error[r] = err;
}

// Each record at `start`: its 36 fixed bytes (encoded by the host), then the
// name and a NUL, the CIGAR operations, SEQ as 4-bit codes (`nt16`), QUAL
// less 33 (0xFF bytes where absent) and the tags, from the line's fields
// that bam_fields found.  The record's floats, from float_first[r] of the
// chunk's, each leave 4 bytes at float_at for the host, and their text's
// (start, length) in float_text.
__kernel void bam_records(__global const uchar *text, __global const uchar *fixed, __global const ulong *start,
                          __global const ulong *line_start, __global const ulong *cigar,
                          __global const ulong *seq, __global const uint *has_qual, __global const ulong *tags,
                          __global const uchar *nt16, const uint n_records, __global uchar *out,
                          __global const ulong *float_first, __global ulong *float_at, __global ulong *float_text) {
    const uint r = get_global_id(0);
    if (r >= n_records) return;
    __global const uchar *f = fixed + (size_t)r * FIXED;
    const uint l_name = f[12];
    size_t o = start[r];
    for (uint i = 0; i < FIXED; i++) out[o + i] = f[i];
    o += FIXED;
    __global const uchar *name = text + line_start[r];
    for (uint i = 0; i + 1 < l_name; i++) out[o + i] = name[i];
    out[o + l_name - 1] = 0;
    o += l_name;

    uint num = 0;
    for (ulong i = cigar[2 * (size_t)r]; i < cigar[2 * (size_t)r] + cigar[2 * (size_t)r + 1]; i++) {
        const uchar c = text[i];
        if (c >= '0' && c <= '9') {
            num = num * 10 + (c - '0');
        } else {
            const uint op = (num << 4) | (uint)cigar_op(c);
            out[o++] = op & 0xff;
            out[o++] = (op >> 8) & 0xff;
            out[o++] = (op >> 16) & 0xff;
            out[o++] = op >> 24;
            num = 0;
        }
    }

    const uint l_seq = (uint)seq[3 * (size_t)r + 1];
    __global const uchar *s = text + seq[3 * (size_t)r];
    for (uint i = 0; i < l_seq / 2; i++) out[o + i] = (nt16[s[2 * i]] << 4) | nt16[s[2 * i + 1]];
    if (l_seq & 1) out[o + l_seq / 2] = nt16[s[l_seq - 1]] << 4;
    o += (l_seq + 1) / 2;
    if (has_qual[r]) {
        __global const uchar *q = text + seq[3 * (size_t)r + 2];
        for (uint i = 0; i < l_seq; i++) out[o + i] = q[i] - 33;
    } else {
        for (uint i = 0; i < l_seq; i++) out[o + i] = 0xff;
    }
    o += l_seq;

    ulong p = tags[2 * (size_t)r];
    const ulong e = tags[2 * (size_t)r + 1];
    ulong next_float = float_first[r];
    while (p < e) {
        const ulong t = p;
        while (p < e && text[p] != '\t') p++;
        const uint vlen = (uint)(p - t - 5);
        p++;
        const uchar type = text[t + 3];
        out[o++] = text[t];
        out[o++] = text[t + 1];
        if (type == 'Z' || type == 'H') {
            out[o++] = type;
            for (uint i = 0; i < vlen; i++) out[o++] = text[t + 5 + i];
            out[o++] = 0;
        } else if (type == 'B') {
            const uchar sub = text[t + 5];
            const uint width = array_width(sub);
            out[o++] = 'B';
            out[o++] = sub;
            const size_t count_at = o;
            o += 4;
            uint count = 0;
            for (ulong q = t + 6; q < t + 5 + vlen;) {
                const ulong v0 = ++q;
                while (q < t + 5 + vlen && text[q] != ',') q++;
                count++;
                if (sub == 'f') {
                    float_at[next_float] = o;
                    float_text[2 * next_float] = v0;
                    float_text[2 * next_float++ + 1] = q - v0;
                    o += 4;
                    continue;
                }
                long v = 0;
                parse_int(text + v0, (uint)(q - v0), &v);
                for (uint i = 0; i < width; i++) out[o++] = (uchar)(((ulong)v >> (8 * i)) & 0xff);
            }
            for (uint i = 0; i < 4; i++) out[count_at + i] = (uchar)((count >> (8 * i)) & 0xff);
        } else if (type == 'A') {
            out[o++] = 'A';
            out[o++] = text[t + 5];
        } else if (type == 'f') {
            out[o++] = 'f';
            float_at[next_float] = o;
            float_text[2 * next_float] = t + 5;
            float_text[2 * next_float++ + 1] = vlen;
            o += 4;
        } else {
            long v = 0;
            parse_int(text + t + 5, vlen, &v);
            const uchar kind = int_kind(v);
            out[o++] = kind;
            for (uint i = 0; i < kind_width(kind); i++) out[o++] = (uchar)(((ulong)v >> (8 * i)) & 0xff);
        }
    }
}
