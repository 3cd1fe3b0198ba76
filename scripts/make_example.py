"""Write the example genome and reads (dmap.write_example) into a directory: make_example.py [DIR]."""

import sys

from dmap.examples import N_READS, write_example

genome, reads = write_example(sys.argv[1] if len(sys.argv) > 1 else "demo")
print(f"wrote {genome} and {reads} ({N_READS} reads)")
