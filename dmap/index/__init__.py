"""The blocked FM-index: building (build.py), storage (store.py), Occ layouts (occ.py)."""

from .build import build_index
from .store import Index, open_index

__all__ = ["build_index", "Index", "open_index"]
