"""Every defect of the corpus's invalid fixtures: the per-code ones and the same few defects on every kind.

Each is one raw-file edit of a valid fixture (:mod:`.fixtures`); the generator checks
that our validator reports its code at its level before it writes the case.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from zarr_vectors.conformance import mutations_data, mutations_meta
from zarr_vectors.conformance.defect import Defect
from zarr_vectors.conformance.rawfiles import cell_file, edit_attrs, first_chunk, read_payload, write_payload

#: The kinds and layouts each generic defect is repeated on (the per-code defects use points and graphs).
ACROSS = ("points-2d", "line-3d", "polyline-2d", "streamline-3d", "streamline-1d-trx", "skeleton-3d", "mesh-tri",
          "points-ids")


def _truncate(s: Path) -> None:
    f = s / "0/vertices/zarr.json"
    f.write_bytes(f.read_bytes()[:-20])


def _count(s: Path) -> None:
    edit_attrs(s, "0", lambda a: a["zarr_vectors_level"].__setitem__("vertex_count",
                                                                      a["zarr_vectors_level"]["vertex_count"] + 1))


def _garbage(s: Path) -> None:
    cell_file(s, "0/vertices", first_chunk(s, "0/vertices")).write_bytes(b"not zstd at all")


def _partial_row(s: Path) -> None:
    c = first_chunk(s, "0/vertices")
    write_payload(s, "0/vertices", c, read_payload(s, "0/vertices", c) + b"\0\0")


def _nan(s: Path) -> None:
    c = first_chunk(s, "0/vertices")
    rows = np.frombuffer(read_payload(s, "0/vertices", c), "<f4").copy()
    rows[0] = np.nan
    write_payload(s, "0/vertices", c, rows.tobytes())


def _no_vertices(s: Path) -> None:
    shutil.rmtree(s / "0/vertices")


def _no_version(s: Path) -> None:
    edit_attrs(s, "", lambda a: a["zarr_vectors"].__setitem__("zv_version", "0.8.0"))


GENERIC: list[tuple[str, str, str, Callable[[Path], None]]] = [
    ("truncated-vertices-json", "L1_BAD_JSON", "0/vertices/zarr.json loses its last 20 bytes", _truncate),
    ("no-vertices", "L1_MISSING_VERTICES", "0/vertices is deleted", _no_vertices),
    ("old-zv-version", "L2_ZV_VERSION", "root zarr_vectors.zv_version = '0.8.0'", _no_version),
    ("garbage-vertex-cell", "L3_CELL_UNDECODABLE", "the first vertex cell holds bytes that are not zstd", _garbage),
    ("partial-vertex-row", "L3_VERTEX_ROWS", "the first vertex cell gains 2 bytes (a partial row)", _partial_row),
    ("vertex-count-off", "L3_VERTEX_COUNT", "level 0's vertex_count is one too many", _count),
    ("nan-vertex", "L3_NONFINITE_VERTEX", "one vertex coordinate is NaN", _nan),
]

DEFECTS: list[Defect] = [
    *mutations_meta.DEFECTS,
    *mutations_data.DEFECTS,
    *(Defect(f"{base}-{name}", base, fn, code, text) for name, code, text, fn in GENERIC for base in ACROSS),
]
