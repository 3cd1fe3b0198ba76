"""Search kernels' host wrappers (exact.py) and their numpy references (reference.py)."""
