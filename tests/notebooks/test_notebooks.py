"""Every notebook in ``notebooks/`` runs top to bottom in a fresh kernel.

Each notebook ends with a cell of checks and prints "all checks passed"; a cell that
raises fails the test with the cell's traceback.  The kernel runs in a temporary
directory, so the notebook's output folder lands there.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_the_notebooks_are_there_and_committed_clean():
    assert NOTEBOOKS, "notebooks/ holds no notebook"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{path.name}: clear the outputs"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, tmp_path: Path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                      if o.output_type == "stream" and o.name == "stdout")
    assert "dashboard: http" in printed
    assert printed.rstrip().endswith("all checks passed")
