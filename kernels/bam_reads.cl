// Reads from BAM records, one work-item per record: its name, its sequence
// from BAM's 4-bit codes and its qualities plus 33, each written at offsets
// the host computed (dmap/io/ubam_reads.py: read_fields).  A record on the
// reverse strand (flag 0x10) holds the reverse complement of its read: its
// sequence is complemented and both are written back to front, so the read
// is as it was sequenced.  With n_ids > 0 each record's RG:Z tag is looked
// up among the run's read group IDs too, and with TAGS (-C) its other tags are
// written as SAM text, the read's comment.  dmap.testing.ubam (Python) is the
// reference this kernel is tested against.

// SAM's 4-bit codes "=ACMGRSVTWYHKDBN", and the complement of each.
__constant uchar LETTERS[16] = {'=', 'A', 'C', 'M', 'G', 'R', 'S', 'V', 'T', 'W', 'Y', 'H', 'K', 'D', 'B', 'N'};
__constant uchar COMPLEMENTS[16] = {'=', 'T', 'G', 'K', 'C', 'Y', 'S', 'B', 'A', 'W', 'R', 'D', 'M', 'H', 'V', 'N'};

// What a record's read group is where it names none of the run's (dmap.reads.NO_GROUP).
#define NO_GROUP 0xFFFFFFFFu

inline uint le32(__global const uchar *p) {
    return p[0] | (uint)p[1] << 8 | (uint)p[2] << 16 | (uint)p[3] << 24;
}

// Bytes of one value of an auxiliary field's type (BAM's A, c, C, s, S, i, I, f); 0 for any other.
inline uint value_size(const uchar type) {
    switch (type) {
        case 'A': case 'c': case 'C': return 1;
        case 's': case 'S': return 2;
        case 'i': case 'I': case 'f': return 4;
        default: return 0;
    }
}

// The index among the ids of the value of the RG:Z field among the auxiliary
// fields at [aux, end), or NO_GROUP: no such field, a value not among the ids,
// or fields that run past the record (which is then read without its group).
uint read_group(__global const uchar *data, ulong aux, const ulong end, __global const uchar *ids,
                __global const uint *id_off, __global const uint *id_len, const uint n_ids) {
    while (aux + 3 <= end) {
        const uchar tag0 = data[aux], tag1 = data[aux + 1], type = data[aux + 2];
        aux += 3;
        if (type == 'Z' || type == 'H') {
            const ulong value = aux;
            while (aux < end && data[aux] != 0) aux++;
            if (aux >= end) return NO_GROUP;  // no NUL inside the record
            if (tag0 == 'R' && tag1 == 'G' && type == 'Z') {
                const ulong len = aux - value;
                for (uint k = 0; k < n_ids; k++) {
                    if (id_len[k] != len) continue;
                    uint i = 0;
                    while (i < len && data[value + i] == ids[id_off[k] + i]) i++;
                    if (i == len) return k;
                }
                return NO_GROUP;
            }
            aux++;  // past the NUL
        } else if (type == 'B') {
            if (aux + 5 > end) return NO_GROUP;
            const uint size = value_size(data[aux]);
            if (size == 0) return NO_GROUP;
            aux += 5 + (ulong)le32(data + aux + 1) * size;
        } else {
            const uint size = value_size(type);
            if (size == 0) return NO_GROUP;
            aux += size;
        }
    }
    return NO_GROUP;
}

// What a record's tags are where -C cannot carry them as SAM text (a type BAM does not define,
// or a field that runs past the record): dmap.io.ubam_reads.TAGS_BAD.
#define TAGS_BAD 0xFFFFFFFFu

// Floats as C's printf("%g") writes them: six significant digits, an exact half rounded to
// even, the shorter of fixed and exponential notation as %g chooses, trailing zeros dropped.
// A float is m * 2^e2 exactly; its six digits N = round(v * 10^(5 - X)) are found with
// integers of BIG_LIMBS 32-bit limbs (no double precision, which a device may lack), so every
// device writes the same text.  The largest numbers met: m * 5^50 (2^141) and, shifted for
// the division, 2^107 * 2^27.
#define BIG_LIMBS 5

inline void big_set(uint *a, const uint v) {
    a[0] = v;
    for (uint k = 1; k < BIG_LIMBS; k++) a[k] = 0;
}

inline void big_mul(uint *a, const uint factor) {
    ulong carry = 0;
    for (uint k = 0; k < BIG_LIMBS; k++) {
        const ulong t = (ulong)a[k] * factor + carry;
        a[k] = (uint)t;
        carry = t >> 32;
    }
}

inline void big_shl(uint *a, const uint bits) {
    const uint limbs = bits / 32, rest = bits % 32;
    for (int k = BIG_LIMBS - 1; k >= 0; k--) {
        const int from = k - (int)limbs;
        const uint hi = from >= 0 ? a[from] : 0u, lo = from >= 1 ? a[from - 1] : 0u;
        a[k] = rest ? hi << rest | lo >> (32 - rest) : hi;
    }
}

inline int big_cmp(const uint *a, const uint *b) {
    for (int k = BIG_LIMBS - 1; k >= 0; k--)
        if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
    return 0;
}

inline void big_sub(uint *a, const uint *b) {
    long borrow = 0;
    for (uint k = 0; k < BIG_LIMBS; k++) {
        const long t = (long)a[k] - (long)b[k] - borrow;
        a[k] = (uint)t;
        borrow = t < 0;
    }
}

// round(m * 2^e2 * 10^(5 - x)), an exact half to even; right while it is under 2^28.
inline uint scaled_digits(const uint m, const int e2, const int x) {
    const int k = 5 - x, s = e2 + k;  // 10^k = 5^k * 2^k
    if (k >= 0 && k <= 13 && s > -64) {
        // Values from 1e-8 up to 1e6, %g's fixed notation among them: m * 5^k < 2^55, and
        // the power of two a shift.  1M reads with 3 floats each (-C, PoCL, 2 cores): 1.9-2.0 s,
        // as with integers; 2.8-3.0 s with the 160-bit division for every float.
        ulong num = m;
        for (int j = 0; j < k; j++) num *= 5;
        if (s >= 0) return (uint)(num << s);  // an integer under 10^7
        const uint shift = (uint)-s;
        const ulong q = num >> shift, rest = num & ((1ul << shift) - 1), midpoint = 1ul << (shift - 1);
        return (uint)q + (rest > midpoint || (rest == midpoint && (q & 1ul)));
    }
    uint num[BIG_LIMBS], den[BIG_LIMBS], t[BIG_LIMBS];
    big_set(num, m);
    big_set(den, 1);
    for (int j = 0; j < k; j++) big_mul(num, 5);
    for (int j = 0; j < -k; j++) big_mul(den, 5);
    if (s > 0) big_shl(num, (uint)s); else big_shl(den, (uint)-s);
    uint q = 0;
    for (int b = 27; b >= 0; b--) {  // num / den, a bit at a time; num keeps the remainder
        for (uint j = 0; j < BIG_LIMBS; j++) t[j] = den[j];
        big_shl(t, (uint)b);
        if (big_cmp(num, t) >= 0) {
            big_sub(num, t);
            q |= 1u << b;
        }
    }
    big_shl(num, 1);
    const int c = big_cmp(num, den);
    return q + (c > 0 || (c == 0 && (q & 1u)));
}

// Digit k (0: the first) of a number of six digits.
__constant uint DIGIT_PLACE[6] = {100000, 10000, 1000, 100, 10, 1};
#define DIGIT(n, k) ((uchar)('0' + (n) / DIGIT_PLACE[k] % 10u))
// Write byte c at out[at + n] where `write`, and count it.  Straight to `out`: the same code
// through a private text buffer gave wrong first digits under PoCL 3.1 (LLVM 15), right in C.
#define PUT(c) do { if (write) out[at + n] = (c); n++; } while (0)

// The %g text of the float whose bits are `bits`, written from out[at] where `write`; its length.
// As glibc: "-0", "inf", "-inf", "nan", and "-nan" for a NaN whose sign bit is set.
// dmap.testing.ubam.float_text is its reference.
inline uint float_text(__global uchar *out, const ulong at, const uint bits, const int write) {
    uint n = 0;
    if (bits >> 31) PUT('-');
    const uint exponent = (bits >> 23) & 0xFFu, fraction = bits & 0x7FFFFFu;
    if (exponent == 0xFFu) {
        PUT(fraction ? 'n' : 'i');
        PUT(fraction ? 'a' : 'n');
        PUT(fraction ? 'n' : 'f');
        return n;
    }
    if (exponent == 0 && fraction == 0) {
        PUT('0');
        return n;
    }
    const uint m = exponent ? fraction | 0x800000u : fraction;
    const int e2 = exponent ? (int)exponent - 150 : -149;
    // The decimal exponent x of the rounded value, from an estimate within one of it.
    int x = (int)floor(log10((float)m) + (float)e2 * 0.30102999566f);
    uint digits = scaled_digits(m, e2, x);
    for (uint tries = 0; tries < 3 && (digits >= 1000000u || digits < 100000u); tries++) {
        x += digits >= 1000000u ? 1 : -1;
        digits = scaled_digits(m, e2, x);
    }
    int last = 5;  // the last digit written: trailing zeros are dropped
    while (last > 0 && DIGIT(digits, last) == '0') last--;
    if (x < -4 || x >= 6) {  // d.ddddde+XX
        PUT(DIGIT(digits, 0));
        if (last > 0) PUT('.');
        for (int k = 1; k <= last; k++) PUT(DIGIT(digits, k));
        PUT('e');
        PUT(x < 0 ? '-' : '+');
        const int ax = x < 0 ? -x : x;
        PUT((uchar)('0' + ax / 10));
        PUT((uchar)('0' + ax % 10));
    } else if (x >= 0) {  // ddd.ddd
        for (int k = 0; k <= x; k++) PUT(DIGIT(digits, k));
        if (last > x) PUT('.');
        for (int k = x + 1; k <= last; k++) PUT(DIGIT(digits, k));
    } else {  // 0.000ddd
        PUT('0');
        PUT('.');
        for (int k = 0; k < -x - 1; k++) PUT('0');
        for (int k = 0; k <= last; k++) PUT(DIGIT(digits, k));
    }
    return n;
}

// The decimal text of v, written from out[at] where `write`; its length.
inline uint int_text(__global uchar *out, const ulong at, const long v, const int write) {
    const ulong u = v < 0 ? (ulong)(-(v + 1)) + 1 : (ulong)v;
    uint digits = 1;
    for (ulong t = u; t >= 10; t /= 10) digits++;
    const uint sign = v < 0;
    if (write) {
        if (sign) out[at] = '-';
        ulong p = at + sign + digits, x = u;
        do { out[--p] = (uchar)('0' + x % 10); x /= 10; } while (x);
    }
    return sign + digits;
}

// The integer of BAM type `type` (c, C, s, S, i or I) at p.
inline long int_value(__global const uchar *p, const uchar type) {
    switch (type) {
        case 'c': return (char)p[0];
        case 'C': return p[0];
        case 's': return (short)(p[0] | p[1] << 8);
        case 'S': return (ushort)(p[0] | p[1] << 8);
        case 'i': return (int)le32(p);
        default: return (uint)le32(p);
    }
}

// The SAM text of the auxiliary fields at [aux, end) but those whose tags are among the
// `n_dropped` pairs of bytes `dropped` (the read group, and what an alignment wrote:
// dmap.io.ubam.DROPPED_TAGS), separated by tabs, as samtools view writes them: integers as i,
// arrays as B:type,values, floats as %g (float_text).  Written from out[at] where `write`; its
// length, or TAGS_BAD for a type BAM does not define, or fields that run past the record.
// dmap.testing.ubam.tag_texts is its reference.
uint tag_text(__global const uchar *data, ulong aux, const ulong end, __global uchar *out, const ulong at,
              const int write, __global const uchar *dropped, const uint n_dropped) {
    uint n = 0;
    while (aux < end) {
        if (aux + 3 > end) return TAGS_BAD;
        const uchar tag0 = data[aux], tag1 = data[aux + 1], type = data[aux + 2];
        aux += 3;
        int drop = 0;
        for (uint k = 0; k < n_dropped; k++) drop |= tag0 == dropped[2 * k] && tag1 == dropped[2 * k + 1];
        if (drop) {  // past the field, whatever its type (a float too)
            if (type == 'Z' || type == 'H') {
                while (aux < end && data[aux] != 0) aux++;
                if (aux >= end) return TAGS_BAD;
                aux++;
            } else if (type == 'B') {
                if (aux + 5 > end || !value_size(data[aux])) return TAGS_BAD;
                aux += 5 + (ulong)le32(data + aux + 1) * value_size(data[aux]);
                if (aux > end) return TAGS_BAD;
            } else {
                if (!value_size(type) || aux + value_size(type) > end) return TAGS_BAD;
                aux += value_size(type);
            }
            continue;
        }
        const int w = write;
        uint m = 0;  // the field's text, from o
        const ulong o = at + n + (n > 0);  // after a tab between fields
        const uint size = value_size(type);
        const uchar sam_type = size && type != 'A' && type != 'f' ? 'i' : type;  // every integer is i
        if (w && n > 0) out[at + n] = '\t';
        if (w) { out[o] = tag0; out[o + 1] = tag1; out[o + 2] = ':'; out[o + 3] = sam_type; out[o + 4] = ':'; }
        m = 5;
        if (type == 'A') {
            if (aux + 1 > end) return TAGS_BAD;
            if (w) out[o + m] = data[aux];
            m += 1;
            aux += 1;
        } else if (type == 'Z' || type == 'H') {
            ulong p = aux;
            while (p < end && data[p] != 0) p++;
            if (p >= end) return TAGS_BAD;
            if (w) for (ulong i = aux; i < p; i++) out[o + m + (i - aux)] = data[i];
            m += (uint)(p - aux);
            aux = p + 1;
        } else if (type == 'B') {
            if (aux + 5 > end) return TAGS_BAD;
            const uchar sub = data[aux];
            const uint width = value_size(sub);
            const uint count = le32(data + aux + 1);
            if (!width || sub == 'A' || aux + 5 + (ulong)count * width > end) return TAGS_BAD;
            if (w) out[o + m] = sub;
            m += 1;
            for (uint k = 0; k < count; k++) {
                __global const uchar *value = data + aux + 5 + (ulong)k * width;
                if (w) out[o + m] = ',';
                m += 1;
                m += sub == 'f' ? float_text(out, o + m, le32(value), w) : int_text(out, o + m, int_value(value, sub), w);
            }
            aux += 5 + (ulong)count * width;
        } else if (type == 'f') {
            if (aux + 4 > end) return TAGS_BAD;
            m += float_text(out, o + m, le32(data + aux), w);
            aux += 4;
        } else if (size) {
            if (aux + size > end) return TAGS_BAD;
            m += int_text(out, o + m, int_value(data + aux, type), w);
            aux += size;
        } else {
            return TAGS_BAD;  // no type of BAM's
        }
        n += (n > 0) + m;
    }
    return n;
}

// Each record's tag text's length (tag_text), for the host to lay the reads out.
__kernel void bam_tag_lengths(__global const uchar *data, __global const ulong *record, const uint n,
                              __global const uchar *dropped, const uint n_dropped,
                              __global uint *length) {
    const uint r = get_global_id(0);
    if (r >= n) return;
    const ulong s = record[r];
    const uint name_len = data[s + 12];
    const uint cigar_ops = data[s + 16] | (uint)data[s + 17] << 8;
    const uint len = le32(data + s + 20);
    const ulong aux = s + 36 + name_len + 4 * (ulong)cigar_ops + (len + 1) / 2 + len;
    length[r] = tag_text(data, aux, s + 4 + le32(data + s), 0, 0, 0, dropped, n_dropped);
}

__kernel void bam_reads(__global const uchar *data, __global const ulong *record,
                        __global const ulong *name_out, __global const ulong *seq_out,
                        __global const ulong *qual_out, const uint n, __global uchar *out,
                        __global const uchar *ids, __global const uint *id_off, __global const uint *id_len,
                        const uint n_ids, __global uint *group, __global const ulong *tags_out,
                        __global const uchar *dropped, const uint n_dropped) {
    const uint r = get_global_id(0);
    if (r >= n) return;
    const ulong s = record[r];
    const uint name_len = data[s + 12];
    const uint cigar_ops = data[s + 16] | (uint)data[s + 17] << 8;
    const uint flag = data[s + 18] | (uint)data[s + 19] << 8;
    const uint len = le32(data + s + 20);
    const ulong name = s + 36;
    const ulong seq = name + name_len + 4 * (ulong)cigar_ops;
    const ulong qual = seq + (len + 1) / 2;
    const ulong name_at = name_out[r], seq_at = seq_out[r], qual_at = qual_out[r];
    for (uint i = 0; i + 1 < name_len; i++) out[name_at + i] = data[name + i];  // without its NUL
    const int reverse = (flag & 0x10) != 0;
    __constant const uchar *letters = reverse ? COMPLEMENTS : LETTERS;
    for (uint i = 0; i < len; i++) {
        const uchar pair = data[seq + i / 2];
        const uint to = reverse ? len - 1 - i : i;
        out[seq_at + to] = letters[(i & 1) ? (pair & 15) : (pair >> 4)];
        out[qual_at + to] = (uchar)(data[qual + i] + 33);
    }
    if (n_ids) group[r] = read_group(data, qual + len, s + 4 + le32(data + s), ids, id_off, id_len, n_ids);
#if TAGS
    tag_text(data, qual + len, s + 4 + le32(data + s), out, tags_out[r], 1, dropped, n_dropped);
#endif
}
