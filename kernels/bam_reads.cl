// Reads from BAM records, one work-item per record: its name, its sequence
// from BAM's 4-bit codes and its qualities plus 33, each written at offsets
// the host computed (dmap/io/ubam.py: read_fields_device).  A record on the
// reverse strand (flag 0x10) holds the reverse complement of its read: its
// sequence is complemented and both are written back to front, so the read
// is as it was sequenced.  dmap.io.ubam.bam_fields (numpy) is the reference
// this kernel is tested against.

// SAM's 4-bit codes "=ACMGRSVTWYHKDBN", and the complement of each.
__constant uchar LETTERS[16] = {'=', 'A', 'C', 'M', 'G', 'R', 'S', 'V', 'T', 'W', 'Y', 'H', 'K', 'D', 'B', 'N'};
__constant uchar COMPLEMENTS[16] = {'=', 'T', 'G', 'K', 'C', 'Y', 'S', 'B', 'A', 'W', 'R', 'D', 'M', 'H', 'V', 'N'};

__kernel void bam_reads(__global const uchar *data, __global const ulong *record,
                        __global const ulong *name_out, __global const ulong *seq_out,
                        __global const ulong *qual_out, const uint n, __global uchar *out) {
    const uint r = get_global_id(0);
    if (r >= n) return;
    const ulong s = record[r];
    const uint name_len = data[s + 12];
    const uint cigar_ops = data[s + 16] | (uint)data[s + 17] << 8;
    const uint flag = data[s + 18] | (uint)data[s + 19] << 8;
    const uint len = data[s + 20] | (uint)data[s + 21] << 8 | (uint)data[s + 22] << 16 | (uint)data[s + 23] << 24;
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
}
