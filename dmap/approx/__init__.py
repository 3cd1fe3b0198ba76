"""Approximate mapping: pigeonhole seeds on the FM-index, candidate regions,
Myers' bit-parallel verification on the device, and alignments with CIGAR."""
