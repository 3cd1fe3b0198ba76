"""The blocked FM-index: building (build.py), storage (store.py), Occ layouts (occ.py).

``build_index`` is imported on first use (PEP 562): building needs zarr,
pydivsufsort, whose imports mapping does without (see
``zarr_direct.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .store import Index, open_index

if TYPE_CHECKING:
    from .build import build_index

__all__ = ["build_index", "Index", "open_index"]


def __getattr__(name: str):
    if name != "build_index":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .build import build_index

    return build_index
