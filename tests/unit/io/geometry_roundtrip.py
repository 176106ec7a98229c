"""Helpers of the geometry format tests: a Geometry through a real store, comparisons that
hold up to the store's enumeration order (docs/formats.md), and a write the OS refuses."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from zarr_vectors.errors import InputError
from zarr_vectors.io.types import Geometry
from zarr_vectors.read import VectorData, read
from zarr_vectors.write.linked import write_mesh, write_polylines, write_skeleton

CHUNK = 2.0  # small against the test shapes: every store spans several chunks


def through_store(tmp_path: Path, geometry: Geometry, name: str = "s.zv") -> VectorData:
    """Write ``geometry`` with our writer (local threads, numpy inputs) and read it back."""
    url = str(tmp_path / name)
    if geometry.kind == "mesh":
        write_mesh(
            url, geometry.positions, geometry.faces, face_attributes=geometry.edge_attributes,
            attributes=geometry.attributes, chunk_shape=CHUNK,
        )  # fmt: skip
    elif geometry.kind == "skeleton":
        parents = np.full(len(geometry.positions), -1, np.int64)
        parents[geometry.edges[:, 0]] = geometry.edges[:, 1]
        write_skeleton(
            url, geometry.positions, parents, object_ids=geometry.object_ids,
            attributes={**geometry.attributes, "id": geometry.ids}, chunk_shape=CHUNK,
        )  # fmt: skip
    else:
        write_polylines(
            url, geometry.positions, geometry.offsets, kind="streamline", attributes=geometry.attributes,
            object_attributes=geometry.object_attributes, chunk_shape=CHUNK,
        )  # fmt: skip
    return read(url)


def face_set(positions, faces, face_attributes=None) -> list[tuple]:
    """Every face as (corner positions in winding order..., its attributes...), sorted: a mesh
    up to vertex and face enumeration order."""
    positions = np.asarray(positions, np.float64)
    rows = positions[np.asarray(faces)].reshape(len(faces), -1)
    columns = [np.asarray(v, np.float64).reshape(len(faces), -1) for _, v in sorted((face_attributes or {}).items())]
    return sorted(map(tuple, np.concatenate([rows, *columns], axis=1).tolist()))


def vertex_set(positions, attributes=None) -> list[tuple]:
    """Every vertex as (position..., attributes...), sorted."""
    positions = np.asarray(positions, np.float64)
    columns = [np.asarray(v, np.float64).reshape(len(positions), -1) for _, v in sorted((attributes or {}).items())]
    return sorted(map(tuple, np.concatenate([positions, *columns], axis=1).tolist()))


def read_in_capped_child(module: str, path: Path, cap: int) -> str:
    """``zarr_vectors.io.<module>.read(path)`` in a child process whose address space is capped
    at ``cap`` bytes, so an allocation beyond it fails the same way on any machine; its stdout,
    where an InputError is printed as ``InputError: <message>``."""
    import subprocess
    import sys
    import textwrap

    child = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
        from zarr_vectors.errors import InputError
        from zarr_vectors.io import {module}
        try:
            {module}.read({str(path)!r})
        except InputError as exc:
            print("InputError:", exc)
    """)
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def assert_refused_where_the_os_refuses(tmp_path: Path, write, name: str, data, folder: str) -> None:
    """``write(path, data)`` into a missing folder, then onto a folder at the path: each an
    InputError naming the file (``folder``: the pattern of the second's reason), not the library's
    raw OSError."""
    missing = str(tmp_path / "missing" / name)
    with pytest.raises(InputError, match=rf"^{re.escape(missing)}: cannot be written \(.*directory"):
        write(missing, data)
    (tmp_path / name).mkdir()
    with pytest.raises(InputError, match=rf"^{re.escape(str(tmp_path / name))}: cannot be written \({folder}"):
        write(str(tmp_path / name), data)
