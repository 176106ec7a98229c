"""Stores written by the reference (zarr-vectors 0.9.2, side environment).

* every kind it writes (pyramids, all four link policies, attributes) passes level 5 with
  ``allow_layouts=("vlen_manifests_v2",)`` and no error;
* the byte-level rules, whose bytes the reference writes differently from this project
  (v2 manifests, graph/mesh link cells, anchored cross-level records, duplicate copies),
  are mutated on the reference's own stores and reported with their codes;
* the reference validator itself misses the defects marked (ref misses).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    ZSTD,
    cell_file,
    edit_attrs,
    first_chunk,
    read_json,
    read_payload,
    set_nonempty_raw,
    write_payload,
)

from zarr_vectors.conformance.mutations_data import point_in_wrong_bin
from zarr_vectors.encoding import FragmentIndex, frame_items, unframe_items
from zarr_vectors.validation import validate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))
from refenv import run_reference  # noqa: E402

pytestmark = pytest.mark.interop
V2 = ("vlen_manifests_v2",)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("refzoo")
    info = run_reference("write-zoo", str(out / "zoo"), timeout=900)
    return {name: Path(info["outdir"]) / name for name in info["stores"]}


def test_zoo_covers_every_kind(zoo: dict[str, Path]) -> None:
    kinds = set()
    for store in zoo.values():
        kinds.update(read_json(store, "")["attributes"]["zarr_vectors"]["geometry_types"])
    assert kinds == {"point_cloud", "line", "polyline", "streamline", "skeleton", "graph", "mesh"}
    policies = set()
    for store in zoo.values():
        for fam in (store / "0" / "links").glob("*/zarr.json"):
            a = read_json(store, fam.parent.relative_to(store).as_posix())["attributes"]
            policies.add((a["directed"], a["store"]))
    assert policies == {(False, "canonical"), (False, "duplicate"), (True, "canonical"), (True, "duplicate")}
    storages = {read_json(s, "")["attributes"]["zarr_vectors"].get("cross_level_storage") for s in zoo.values()}
    assert {"explicit", "implicit", "none"} <= storages


def test_reference_stores_pass_level5(zoo: dict[str, Path]) -> None:
    failures = {}
    for name, store in zoo.items():
        result = validate(str(store), 5, allow_layouts=V2)
        unexpected = [f for f in result.findings if f.code != "L2_OBJECT_INDEX_LAYOUT"]
        if not result.ok or unexpected or result.levels_run != [1, 2, 3, 4, 5]:
            failures[name] = result.summary()
    assert not failures, "\n".join(failures.values())


def test_v2_layout_is_an_error_unless_allowed(zoo: dict[str, Path]) -> None:
    result = validate(str(zoo["graph.zv"]), 5)
    assert {f.code for f in result.findings if f.severity == "error"} == {"L2_OBJECT_INDEX_LAYOUT"}
    assert result.levels_run == [1, 2]


# ---------------------------------------------------------------------------
# byte-level defects on the reference's own bytes
# ---------------------------------------------------------------------------
def _segment(store: Path, family: str, *, intra: bool = False) -> str:
    names = sorted(p.name for p in (store / family).iterdir() if p.is_dir())
    names = [n for n in names if read_json(store, f"{family}/{n}")["attributes"]["nonempty_chunks"]]
    return next(n for n in names if (set(n) <= set("0._")) == intra)


def _blob_rows(store: Path, array: str, width: int, fn: Callable[[np.ndarray], None]) -> None:
    c = first_chunk(store, array)
    payload = read_payload(store, array, c)
    k = int(np.frombuffer(payload[:8], "<i8")[0])
    rows = np.frombuffer(payload[8 * (1 + k):], "<i8").copy().reshape(-1, width)
    fn(rows)
    write_payload(store, array, c, payload[: 8 * (1 + k)] + rows.tobytes())


def _grow_last_range(store: Path, array: str) -> None:
    c = first_chunk(store, array)
    index = FragmentIndex.decode(read_payload(store, array, c))
    counts = index.range_counts.copy()
    counts[-1] += 1
    write_payload(store, array, c, FragmentIndex.from_ranges(index.range_starts, counts).encode())


def _graph_vi(s: Path) -> None:
    _blob_rows(s, f"0/links/0/{_segment(s, '0/links/0')}", 3, lambda r: r.__setitem__((0, 2), 10**6))


def _graph_perm(s: Path) -> None:
    _blob_rows(s, f"0/links/0/{_segment(s, '0/links/0')}", 3, lambda r: r.__setitem__((0, 0), 2))


def _mesh_perm(s: Path) -> None:
    _blob_rows(s, f"0/links/0/{_segment(s, '0/links/0')}", 4, lambda r: r.__setitem__((0, 0), 6))


def _graph_link_fragments(s: Path) -> None:
    _grow_last_range(s, "0/link_fragments")


def _graph_fragment_range(s: Path) -> None:
    _grow_last_range(s, "0/vertex_fragments")


def _graph_attribute_rows(s: Path) -> None:
    a = f"0/link_attributes/weight/0/{_segment(s, '0/link_attributes/weight/0')}"
    c = first_chunk(s, a)
    write_payload(s, a, c, read_payload(s, a, c) + b"\0\0\0\0")


def _manifest_trailing(s: Path) -> None:
    f = s / "0/object_index/manifests/c/0"
    items = unframe_items(ZSTD.decode(f.read_bytes()))
    items[0] = items[0] + b"\1"
    f.write_bytes(bytes(ZSTD.encode(frame_items(items))))


def _pyramid_cross_level_vi(s: Path) -> None:
    # level 2 has chunk_shape 2x the root's: its -1 records are anchored, target rows at level 1
    _blob_rows(s, f"2/links/-1/{_segment(s, '2/links/-1')}", 2, lambda r: r.__setitem__((0, 1), 10**6))


def _duplicate_copy_missing(s: Path) -> None:
    a = f"0/links/0/{_segment(s, '0/links/0')}"
    c = first_chunk(s, a)
    b = f"0/link_attributes/weight/0/{a.rsplit('/', 1)[1]}"
    payload = read_payload(s, a, c)
    k = int(np.frombuffer(payload[:8], "<i8")[0])
    rows = np.frombuffer(payload[8 * (1 + k):], "<i8").reshape(-1, 3)
    from zarr_vectors.encoding import encode_ragged_blob

    if len(rows) == 1:
        for arr in (a, b):
            cell_file(s, arr, c).unlink()
            set_nonempty_raw(s, arr, lambda keys: keys[1:])
    else:
        write_payload(s, a, c, encode_ragged_blob([rows[1:]]))
        write_payload(s, b, c, read_payload(s, b, c)[4:])
    edit_attrs(s, "0/links/0", lambda at: at.__setitem__("num_physical_records", at["num_physical_records"] - 1))


def _point_outside_bin(s: Path) -> None:
    point_in_wrong_bin(s)  # the corpus's defect (the last chunk's first vertex one bin over)


def _nonempty_missing(s: Path) -> None:
    a = "0/vertex_attributes/v"
    cell_file(s, a, first_chunk(s, a)).unlink()


REF_MUTATIONS = [
    ("graph.zv", _graph_vi, "L3_LINK_VI_OUT_OF_RANGE"),
    ("graph.zv", _graph_perm, "L3_PERM_IDX_RANGE"),
    ("mesh.zv", _mesh_perm, "L3_PERM_IDX_RANGE"),
    ("graph.zv", _graph_link_fragments, "L3_LINK_FRAGMENTS_TILE"),
    ("graph.zv", _graph_fragment_range, "L3_FRAGMENT_OUT_OF_RANGE"),
    ("graph.zv", _graph_attribute_rows, "L3_LINK_ATTRIBUTE_ROWS"),
    ("points_ids.zv", _manifest_trailing, "L1_MANIFEST_UNDECODABLE"),
    ("graph_pyramid.zv", _pyramid_cross_level_vi, "L3_LINK_VI_OUT_OF_RANGE"),
    ("graph_undirected_duplicate.zv", _duplicate_copy_missing, "L3_FAMILY_NUM_LINKS"),
    ("points.zv", _point_outside_bin, "L4_POINT_OUTSIDE_BIN"),
    ("points_ids.zv", _nonempty_missing, "L3_NONEMPTY_MISSING"),
]


@pytest.fixture(scope="module")
def mutated(zoo: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Path, str]]:
    root = tmp_path_factory.mktemp("refmut")
    out = []
    for i, (base, fn, code) in enumerate(REF_MUTATIONS):
        dst = root / f"{i:02d}-{fn.__name__.strip('_')}.zv"
        shutil.copytree(zoo[base], dst)
        fn(dst)
        out.append((fn.__name__, dst, code))
    return out


@pytest.mark.parametrize("i", range(len(REF_MUTATIONS)), ids=[m[1].__name__.strip("_") for m in REF_MUTATIONS])
def test_reference_bytes_defect(mutated: list[tuple[str, Path, str]], i: int) -> None:
    name, store, code = mutated[i]
    result = validate(str(store), 5, allow_layouts=V2)
    hits = [f for f in result.findings if f.code == code]
    assert hits and not result.ok, f"{name}: expected {code}\n{result.summary()}"
    assert not [f for f in result.findings if f.code.endswith("_CHECK_CRASHED")], result.summary()


def test_reference_validator_misses_them(mutated: list[tuple[str, Path, str]]) -> None:
    """The (ref misses) markers hold for the reference's own validator on its own stores."""
    # (a perm_idx outside [0, L!) on a mesh makes the reference's reader fail, which its validator then
    # reports as a count mismatch; a range past the end is caught there only through the fragments_tile
    # claim: neither is listed here)
    missed_by_ref = {"_graph_vi", "_graph_perm", "_graph_attribute_rows",
                     "_nonempty_missing", "_point_outside_bin", "_pyramid_cross_level_vi"}
    chosen = [(n, s, c) for n, s, c in mutated if n in missed_by_ref]
    report = run_reference("validate-many", *[str(s) for _, s, _ in chosen], "--level", "5")
    for name, store, code in chosen:
        ref = report["results"][str(store)]
        assert ref["errors"] == [], (name, ref["errors"])
