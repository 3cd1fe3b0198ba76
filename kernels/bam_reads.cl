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

// What a record's tags are where -C cannot carry them as SAM text (a float, or a field that runs
// past the record): dmap.io.ubam_reads.TAGS_BAD.
#define TAGS_BAD 0xFFFFFFFFu

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
// arrays as B:type,values.  Written from out[at] where `write`; its length, or TAGS_BAD for a
// float (f, or an array of them), a type BAM does not define, or fields that run past the
// record.  dmap.testing.ubam.tag_texts is its reference.
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
        const uchar sam_type = size && type != 'A' && type != 'f' ? 'i' : type;
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
            if (!width || sub == 'A' || sub == 'f' || aux + 5 + (ulong)count * width > end) return TAGS_BAD;
            if (w) out[o + m] = sub;
            m += 1;
            for (uint k = 0; k < count; k++) {
                if (w) out[o + m] = ',';
                m += 1;
                m += int_text(out, o + m, int_value(data + aux + 5 + (ulong)k * width, sub), w);
            }
            aux += 5 + (ulong)count * width;
        } else if (size && type != 'f') {
            if (aux + size > end) return TAGS_BAD;
            m += int_text(out, o + m, int_value(data + aux, type), w);
            aux += size;
        } else {
            return TAGS_BAD;  // a float, or no type of BAM's
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
