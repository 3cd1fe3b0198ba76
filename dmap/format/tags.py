"""The SAM tags that dmap writes on every record itself, and those that describe an alignment:
what a read's own tags (``-C``: a FASTQ comment, a BAM record's tags) may not bring along."""

# The tags of dmap's records (dmap.format.sam): NM, NH, X0, X1 on each, MD and AS with -e K, MC
# and MQ on mates, RG with a read group.  A comment's would stand twice on a record.
WRITTEN_TAGS = ("NM", "NH", "X0", "X1", "MD", "AS", "MC", "MQ", "RG")

# What ``samtools reset`` removes from a record by default as the aligner's (samtools 1.17+):
# a BAM being mapped again keeps its read's tags, not its old alignment's.
ALIGNER_TAGS = ("AS", "CC", "CG", "CP", "H0", "H1", "H2", "HI", "IH", "MC", "MD", "MQ", "NM", "SA", "TS")

# A BAM record's tags that -C leaves out: its old alignment's, and those dmap writes itself.
DROPPED_TAGS = tuple(sorted(set(WRITTEN_TAGS) | set(ALIGNER_TAGS)))
