"""The parity adapter on a corpus of four cases of the corpus layout, written here.

It runs the reference over them and writes the table; the table must list every case with
a verdict, its counts must add up, and each case that does not agree must name a decision.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from tests.interop import parity
from zarr_vectors.links_api import write_links
from zarr_vectors.validation import validate

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def _points(path: Path) -> None:
    rng = np.random.default_rng(3)
    zv.write_points(str(path), rng.uniform(-5, 15, (40, 3)).astype(np.float32), chunk_shape=10.0,
                    object_ids=rng.integers(0, 4, 40), attributes={"w": rng.standard_normal(40).astype(np.float32)})


def _graph(path: Path) -> None:
    pos = np.array([[1, 1, 1], [2, 2, 2], [11, 1, 1], [12, 2, 2]], dtype=np.float32)
    zv.write_points(str(path), pos, chunk_shape=10.0, bounds=[[0, 0, 0], [20, 10, 10]])
    st = zv.open_store(str(path))
    st.root.geometry_types = ["graph"]
    st.root.links_convention = "explicit"
    st.write_root()
    a, b = (0, 0, 0), (1, 0, 0)
    write_links(st.level(0), 0, [[a, a], [a, b], [b, b]], [[0, 1], [1, 0], [0, 1]])


def _root_zv(path: Path, fn: Callable[[dict], object]) -> None:
    doc = json.loads((path / "zarr.json").read_text())
    fn(doc["attributes"]["zarr_vectors"])
    (path / "zarr.json").write_text(json.dumps(doc, indent=2))


def _case(corpus: Path, cid: str, kind: str, expect: dict) -> dict:
    store = corpus / "fixtures" / cid
    files = [{"path": str(f.relative_to(store)), "sha256": hashlib.sha256(f.read_bytes()).hexdigest(),
              "bytes": f.stat().st_size} for f in sorted(store.rglob("*")) if f.is_file()]
    case = {"id": cid, "description": cid, "kind": kind, "fixture": f"fixtures/{cid}",
            "writer": {"implementation": "zarr-vectors-dask", "version": "0.1.0"}, "files": files, "expect": expect}
    (corpus / "cases" / f"{cid}.json").write_text(json.dumps(case))
    return case


def _valid(corpus: Path, cid: str) -> dict:
    data = zv.read(str(corpus / "fixtures" / cid))
    out = corpus / "expected" / cid / "0"
    out.mkdir(parents=True)
    level: dict = {}
    for name in ("positions", "object_ids", "edges"):
        if getattr(data, name) is not None:
            np.save(out / f"{name}.npy", getattr(data, name))
            level[name] = f"expected/{cid}/0/{name}.npy"
    level["attributes"] = {}
    for name, values in data.attributes.items():
        np.save(out / f"attr_{name}.npy", values)
        level["attributes"][name] = f"expected/{cid}/0/attr_{name}.npy"
    return {"valid": True, "validate": {"level": 5, "codes": []}, "read": {"0": level}}


def _invalid(corpus: Path, cid: str) -> dict:
    codes = sorted({f.code for f in validate(str(corpus / "fixtures" / cid), 5).findings if f.severity == "error"})
    try:
        zv.read(str(corpus / "fixtures" / cid))
        read = "ok"
    except Exception:  # noqa: BLE001 - the case records whether our reader refuses
        read = "error"
    return {"valid": False, "derived_from": "points", "defect": cid, "read": read, "decision": None,
            "validate": {"level": min(int(c[1]) for c in codes), "codes": codes}}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    (root / "cases").mkdir()
    fixtures = root / "fixtures"
    _points(fixtures / "points")
    _graph(fixtures / "graph")
    _points(fixtures / "zv_version_old")
    _root_zv(fixtures / "zv_version_old", lambda z: z.__setitem__("zv_version", "0.8.1"))
    _points(fixtures / "no_bounds")
    _root_zv(fixtures / "no_bounds", lambda z: z.pop("bounds"))
    cases = [_case(root, "points", "point_cloud", _valid(root, "points")),
             _case(root, "graph", "graph", _valid(root, "graph"))]
    cases += [_case(root, cid, "point_cloud", _invalid(root, cid)) for cid in ("zv_version_old", "no_bounds")]
    (root / "cases.json").write_text(json.dumps({"corpus_version": 1, "conventions": {}, "cases": [
        {"id": c["id"], "valid": c["expect"]["valid"], "kind": c["kind"], "writer": c["writer"]} for c in cases]}))
    return root


def test_parity_table_lists_every_case(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "parity.md"
    assert parity.main([str(corpus), "--out", str(out), "--json", str(tmp_path / "parity.json")]) == 0
    text = out.read_text()
    verdicts = {v["id"]: v for v in json.loads((tmp_path / "parity.json").read_text())}
    assert sorted(verdicts) == ["graph", "no_bounds", "points", "zv_version_old"]
    for cid, v in verdicts.items():
        assert v["verdict"] in (parity.AGREE, parity.DIFFER, parity.CRASH)
        assert f"| {cid} |" in text and f"| {v['verdict']} |" in text
        assert v["verdict"] == parity.AGREE or v["decision"], v
    # the reference writes 0.9.x stores like ours and refuses a store without bounds, as we do
    assert verdicts["points"]["verdict"] == verdicts["graph"]["verdict"] == parity.AGREE
    assert verdicts["no_bounds"]["verdict"] != parity.DIFFER or verdicts["no_bounds"]["decision"]
    # the reference does not compare versions numerically (D2): it passes 0.8.1
    assert verdicts["zv_version_old"] == {**verdicts["zv_version_old"], "verdict": parity.DIFFER, "decision": "D2"}
    assert "4 cases:" in text
