"""The Links page's reading API as the spec writes it (seed 002, "Reading").

Its snippet, pasted verbatim, runs on a store this project writes; ``read_links`` gives
``[]`` for an absent family; the reference's call shapes of ``read_links_for_tuple`` and
``read_chunk_links`` (level, chunk tuple or source chunk, then ``delta=`` / ``offsets=``
keywords) read back exactly the records written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import ArrayError
from zarr_vectors.links_api import (
    read_chunk_links,
    read_links,
    read_links_for_tuple,
    write_link_attributes,
    write_links,
)

# verbatim from the spec's Links page, section "Reading"
SNIPPET = """\
from zarr_vectors.core.store import get_resolution_level, open_store
from zarr_vectors.core.arrays import (
    read_links,               # every record under links/<delta>/
    read_links_for_tuple,     # only records spanning an exact L-chunk tuple
    read_link_attributes,
    read_chunk_links,         # one cell
    list_link_deltas,         # [0, +1, -1, ...]
    list_link_offsets,        # ['+1.0.0', '-1.0.0', '0.0.0', ...]
)

root = open_store("graph.zarrvectors")
lg   = get_resolution_level(root, 0)

records = read_links(lg, delta=0)                       # intra + cross, one family
weights = read_link_attributes(lg, "weight", delta=0)   # row-aligned to records

# Which deltas / offset arrays exist?
print(list_link_deltas(lg))            # e.g. [0, +1]
print(list_link_offsets(lg, 0))        # intra sorts LAST — see Enumeration order
"""

# two chunks along x (chunk_shape 10): rows 0-3 in chunk (0,0,0), rows 0-3 in chunk (1,0,0)
POSITIONS = np.array([[1, 1, 1], [2, 2, 2], [3, 3, 3], [4, 4, 4],
                      [11, 1, 1], [12, 2, 2], [13, 3, 3], [14, 4, 4]], dtype=np.float32)
EDGES = [(0, 1), (1, 5), (6, 2), (5, 7)]  # intra, cross, cross (against canonical order), intra
WEIGHTS = np.array([1.5, 2.5, 3.5, 4.5], dtype=np.float32)
A, B = (0, 0, 0), (1, 0, 0)


def _endpoint(i: int) -> tuple[tuple[int, ...], int]:
    return (A, i) if i < 4 else (B, i - 4)


WRITTEN = [tuple(_endpoint(i) for i in e) for e in EDGES]  # ((chunk, vi), (chunk, vi)) per record


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "graph.zarrvectors"
    zv.write_points(str(path), POSITIONS, chunk_shape=10.0, bounds=[[0, 0, 0], [20, 10, 10]], compressor="none")
    st = zv.open_store(str(path))
    st.root.geometry_types = ["graph"]
    st.root.links_convention = "explicit"
    st.write_root()
    chunks = np.array([[c for c, _ in r] for r in WRITTEN], dtype=np.int64)
    vi = np.array([[v for _, v in r] for r in WRITTEN], dtype=np.int64)
    part = write_links(st.level(0), 0, chunks, vi)
    write_link_attributes(st.level(0), "weight", 0, WEIGHTS, partition=part)
    return path


def test_snippet_runs_unchanged(graph: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(graph.parent)
    ns: dict = {}
    exec(compile(SNIPPET, "seed-002-reading", "exec"), ns)  # noqa: S102 - the spec's own code
    records, weights = ns["records"], ns["weights"]
    assert sorted(records) == sorted(WRITTEN) and len(records) == len(WRITTEN)
    # row-aligned: each record's weight is the one written with it
    assert {r: float(w) for r, w in zip(records, weights)} == {r: float(w) for r, w in zip(WRITTEN, WEIGHTS)}
    deltas, offsets = capsys.readouterr().out.splitlines()
    assert deltas == "[0]"
    assert offsets == "['+1.0.0', '0.0.0']"  # intra sorts last


def test_absent_family_reads_as_empty_list(graph: Path) -> None:
    lg = zv.open_store(str(graph)).level(0)
    assert read_links(lg, delta=1) == []
    assert list(read_links(lg, delta=-2)) == []
    assert read_links(lg, delta=0) != []


def test_read_links_for_tuple_reference_shape(graph: Path) -> None:
    lg = zv.open_store(str(graph)).level(0)
    cross = [r for r in WRITTEN if {c for c, _ in r} == {A, B}]
    for tup in ([A, B], [B, A]):  # undirected canonical at delta 0: either order
        assert sorted(read_links_for_tuple(lg, tup, delta=0)) == sorted(cross)
    assert read_links_for_tuple(lg, [A, A]) == [WRITTEN[0]]
    assert read_links_for_tuple(lg, [B, B], delta=0) == [WRITTEN[3]]
    assert read_links_for_tuple(lg, [A, B], delta=1) == []  # no such family


def test_read_chunk_links_reference_shape(graph: Path) -> None:
    lg = zv.open_store(str(graph)).level(0)
    intra = read_chunk_links(lg, A)  # offsets default to the all-zero (intra) array
    assert intra.records == [WRITTEN[0]]
    assert [g.tolist() for g in intra] == [[[0, 1]]] and len(intra) == 1  # the stored groups, as the reference lists them
    cross = read_chunk_links(lg, A, delta=0, offsets=((1, 0, 0),))
    assert sorted(cross.records) == sorted([WRITTEN[1], WRITTEN[2]])
    assert sum(len(g) for g in cross) == 2
    narrow = read_chunk_links(lg, B, np.int32, 2, delta=0, offsets="0.0.0")  # dtype and link_width positional
    assert narrow.records == [WRITTEN[3]] and all(g.dtype == np.int32 for g in narrow)
    assert read_chunk_links(lg, B, offsets="+1.0.0").records == []  # a cell the array does not hold
    with pytest.raises(ArrayError, match="link_width 3"):
        read_chunk_links(lg, A, link_width=3)
