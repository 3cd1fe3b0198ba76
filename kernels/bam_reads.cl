// Reads from BAM records, one work-item per record: its name, its sequence
// from BAM's 4-bit codes and its qualities plus 33, each written at offsets
// the host computed (dmap/io/ubam_reads.py: read_fields).  A record on the
// reverse strand (flag 0x10) holds the reverse complement of its read: its
// sequence is complemented and both are written back to front, so the read
// is as it was sequenced.  With n_ids > 0 each record's RG:Z tag is looked
// up among the run's read group IDs too.  dmap.testing.ubam (Python) is the
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

__kernel void bam_reads(__global const uchar *data, __global const ulong *record,
                        __global const ulong *name_out, __global const ulong *seq_out,
                        __global const ulong *qual_out, const uint n, __global uchar *out,
                        __global const uchar *ids, __global const uint *id_off, __global const uint *id_len,
                        const uint n_ids, __global uint *group) {
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
}
