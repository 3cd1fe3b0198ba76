"""MAROSE's neighborhood index: a second seed-and-filter engine (``--engine phash``).

For every seed of the reference, the right neighborhoods that follow it are
stored in a collision-free perfect hash (:mod:`.bdz`); a read's patterns
(seed + neighborhood) are looked up with every neighborhood within E
substitutions (:mod:`.search`, ``kernels/neighborhood.cl``) and the hits
verified by the same Myers kernel as the FM-index engine.
"""
