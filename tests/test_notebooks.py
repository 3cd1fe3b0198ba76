"""The notebooks run top to bottom (nbclient), so they never rot."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("DMAP_NOTEBOOK_DIR", str(tmp_path))
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = "".join(str(o) for c in nb.cells for o in c.get("outputs", []))
    assert "mapped" in outputs and "Traceback" not in outputs
    if path.name.startswith("01"):
        assert "reads/s'" in outputs and "': '0 reads/s'" not in outputs  # per-device rates are real
