"""Every notebook in ``notebooks/`` runs top to bottom in a fresh kernel.

Each notebook ends with a cell of checks and prints "all checks passed"; a cell that
raises fails the test with the cell's traceback.  The kernel runs in a temporary
directory, so the notebook's output folder lands there.  The pictures a notebook shows
are checked in its executed outputs: PNGs of a reasonable size with many colours.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
PICTURES = {"explore": 1}  # image/png outputs each notebook shows at least


def shown_pictures(nb) -> list[np.ndarray]:
    """Every image/png output of an executed notebook, decoded to RGB pixels."""
    from PIL import Image

    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = o.get("data", {}) if o.output_type in ("display_data", "execute_result") else {}
            if "image/png" in data:
                with Image.open(io.BytesIO(base64.b64decode(data["image/png"]))) as im:
                    out.append(np.asarray(im.convert("RGB")))
    return out


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
    pictures = shown_pictures(nb)
    assert len(pictures) >= PICTURES.get(path.stem, 0)
    for a in pictures:
        h, w, _ = a.shape
        assert h >= 200 and w >= 400, f"a {w}x{h} picture"
        assert len(np.unique(a.reshape(-1, 3), axis=0)) > 50, "a picture of few colours"
        assert 0.02 < (a < 235).any(axis=-1).mean() < 0.95, "a picture of background only"
