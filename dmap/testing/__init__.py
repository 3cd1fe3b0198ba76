"""The simple, obviously correct references that dmap's kernels and pipeline are tested
against: numpy backward search and brute-force occurrence lists (``search``), DP
alignment of every read to every contig (``approx``), and brute-force neighborhood
lookups with list and binary-search stores (``neighborhood``).  Nothing in dmap's
mapping path imports them; they ship so that tests and benchmarks, dmap's and a
user's, can check results on their own inputs."""
