"""dmap's version, in a module of its own so that any module can import it without importing the package,
and the identity of the code a process runs (:func:`code_identity`)."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

__version__ = "0.1.0"


@lru_cache(maxsize=1)
def code_identity() -> str:
    """``"<version> <digest>"``: the version and a digest of the Python modules and OpenCL
    kernels this process imports dmap from.

    The tasks a client submits run on the workers with the workers' own dmap, so a worker
    with other code (another release, another checkout) would compute other records, or
    answer the client in a form it does not expect, without an error.  Processes that run
    the same dmap agree on the digest whatever their install paths.  Reading the ~80
    files takes a few milliseconds, once per process.
    """
    package = Path(__file__).resolve().parent
    kernels = next((k for k in (package / "kernels", package.parent / "kernels") if k.is_dir()), None)
    digest = hashlib.sha256()
    for root, pattern in ((package, "*.py"), (kernels, "*.cl")):
        if root is None:
            continue
        for path in sorted(root.rglob(pattern)):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{__version__} {digest.hexdigest()[:12]}"
