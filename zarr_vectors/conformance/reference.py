"""The corpus's reference-written fixtures: which they are, and writing them with the reference.

The reference (zarr-vectors, import name ``zarr_vectors`` too) never runs in this
interpreter: ``conformance/reference_writer.py`` runs under its side environment's
python (``$ZV_REFENV_DIR`` or ``.cache/refenv-<version>`` in the checkout), in a
subprocess with a clean environment.  Its stores are committed as data with the version
that wrote them; CI checks their hashes and never rewrites them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from zarr_vectors.conformance.corpus import file_entries
from zarr_vectors.errors import InputError

REFERENCE_VERSION = "0.9.2"
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "conformance" / "reference_writer.py"


@dataclass(frozen=True)
class RefFixture:
    id: str
    kind: str
    description: str


def _r(id: str, kind: str, description: str) -> RefFixture:
    return RefFixture(id, kind, f"written by the reference: {description}")


FIXTURES: list[RefFixture] = [
    _r("ref-points", "point_cloud", "3-D points, bins, two vertex attributes, zstd"),
    _r("ref-points-ids", "point_cloud", "3-D points with object ids and an object attribute"),
    _r("ref-points-2d", "point_cloud", "2-D points with bins"),
    _r("ref-graph", "graph", "graph with a link and a vertex attribute"),
    _r("ref-skeleton", "skeleton", "write_graph(kind='skeleton') of a tree"),
    _r("ref-mesh", "mesh", "triangle mesh"),
    _r("ref-polyline", "polyline", "polylines"),
    _r("ref-streamline", "streamline", "streamlines with a vertex attribute"),
    _r("ref-lines", "line", "lines"),
    _r("ref-points-pyramid", "point_cloud", "points and a 2-level pyramid (explicit)"),
    _r("ref-graph-pyramid-depth2", "graph", "graph with ids, 3 levels, chunk scale 2, depth 2"),
    _r("ref-mesh-pyramid-implicit", "mesh", "mesh, 2 levels, implicit cross-level storage"),
    _r("ref-streamline-pyramid-none", "streamline", "streamlines, 2 levels, sparsity 2, no cross-level storage"),
    *(_r(f"ref-graph-{d}-{p}", "graph", f"graph whose links were rewritten by write_links ({d}, {p})")
      for d in ("undirected", "directed") for p in ("canonical", "duplicate")),
    _r("ref-composite-point-cloud-polyline", "polyline",
       "create(Schema()) + add_polylines: geometry_types ['point_cloud', 'polyline'] (D19)"),
    _r("ref-composite-streamline-polyline", "streamline",
       "create(Schema(kind='streamline')) + add_polylines: ['streamline', 'polyline'] (D19)"),
    _r("ref-composite-point-cloud-graph", "graph", "create(Schema()) + add_graph: ['point_cloud', 'graph'] (D19)"),
]
IDS = {f.id for f in FIXTURES}


def _python() -> Path:
    env_dir = os.environ.get("ZV_REFENV_DIR")
    root = Path(env_dir).expanduser() if env_dir else REPO / ".cache" / f"refenv-{REFERENCE_VERSION}"
    python = root / "bin" / "python"
    if not python.exists():
        raise InputError(f"no reference environment at {root}: build it (make test does) or set ZV_REFENV_DIR")
    return python


def write_fixtures(out: Path) -> None:
    """Write every reference fixture into ``out/fixtures`` and a stub case file with its bytes and writer."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP") and not k.startswith("ZARR_VECTORS_")}
    with tempfile.TemporaryDirectory(prefix="zv-ref-") as tmp:
        stores = Path(tmp) / "stores"
        proc = subprocess.run([str(_python()), "-I", str(SCRIPT), str(stores)], cwd=tmp, env=env,
                              capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0:
            raise InputError(f"{SCRIPT} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        missing = IDS - set(report["stores"])
        if missing:
            raise InputError(f"{SCRIPT} did not write {sorted(missing)}")
        for f in FIXTURES:
            dst = out / "fixtures" / f.id
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(stores / f.id, dst)
            files = [e.as_json() for e in file_entries(dst)]
            stub = {"id": f.id, "writer": {"implementation": "zarr-vectors", "version": str(report["version"])},
                    "files": files}
            (out / "cases").mkdir(parents=True, exist_ok=True)
            (out / "cases" / f"{f.id}.json").write_text(json.dumps(stub, indent=2) + "\n", encoding="utf-8")
