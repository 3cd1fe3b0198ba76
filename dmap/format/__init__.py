"""Formatting the records: SAM text, BAM and its BGZF blocks, and the writer that
puts a run's chunks out in input order."""
