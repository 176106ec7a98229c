"""Smoke test of the reference side-environment and its driver.

Writes a small point cloud with the reference (zarr-vectors 0.9.2),
validates it at level 5 with the reference validator, and reads it back
with the reference reader.  Our own package is not involved: this pins
the harness that the real interop tests stand on.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from refenv import REFERENCE_VERSION, ensure_reference_env, run_reference  # noqa: E402

pytestmark = pytest.mark.interop


def _sorted_rows(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a[np.lexsort(a.T[::-1])]


@pytest.fixture(scope="module")
def ref_python() -> Path:
    return ensure_reference_env()


def test_reference_env_is_isolated(ref_python: Path) -> None:
    assert ref_python.exists()
    info = run_reference("validate", "/nonexistent-zv-store", "--level", "1")
    assert info["zarr_vectors_version"] == REFERENCE_VERSION
    assert info["in_reference_env"] is True
    ours = Path(__file__).resolve().parents[2] / "zarr_vectors"
    assert ours not in Path(info["zarr_vectors_file"]).resolve().parents
    # A missing store is a validation error, not a crash of the driver.
    assert info["errors"]


def test_write_validate_read_roundtrip(ref_python: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    n = 500
    positions = rng.uniform(0.0, 100.0, (n, 3)).astype(np.float32)
    value = rng.standard_normal(n).astype(np.float32)
    rgb = rng.integers(0, 255, (n, 3), dtype=np.uint8)
    src = tmp_path / "in.npz"
    np.savez(src, positions=positions, vattr__value=value, vattr__rgb=rgb)

    store = tmp_path / "ref.zv"
    wrote = run_reference(
        "write-points", str(src), str(store),
        "--chunk-shape", "50,50,50", "--bin-shape", "25,25,25",
        "--bounds", "0,0,0,100,100,100",
    )
    assert wrote["n"] == n
    assert wrote["chunk_shape"] == [50.0, 50.0, 50.0]
    assert wrote["base_bin_shape"] == [25.0, 25.0, 25.0]
    assert (store / "zarr.json").is_file()

    report = run_reference("validate", str(store), "--level", "5")
    assert report["errors"] == [], report

    out = tmp_path / "out.npz"
    summary = run_reference("read-points", str(store), "--out", str(out))
    assert summary["n"] == n
    assert sorted(summary["attributes"]) == ["rgb", "value"]
    got = np.load(out)
    assert got["positions"].shape == (n, 3)
    np.testing.assert_array_equal(_sorted_rows(got["positions"]), _sorted_rows(positions))

    # Attributes travel with their points: compare (position, value) rows.
    want = np.column_stack([positions, value, rgb.astype(np.float32)])
    have = np.column_stack(
        [got["positions"], got["vattr__value"], got["vattr__rgb"].astype(np.float32)]
    )
    np.testing.assert_array_equal(_sorted_rows(have), _sorted_rows(want))
