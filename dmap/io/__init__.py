"""Inputs and the output's destination: FASTA/FASTQ parsing, reads from BAM, the reads
cut into chunks, files mapped into memory, and where the records go."""
