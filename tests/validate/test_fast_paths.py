"""The validator's whole-list fast paths agree with the rules they stand in for.

A store lists thousands of chunk keys and hundreds of nodes, so the client checks a whole
``nonempty_chunks`` list at once and indexes the node tree once.  These are shortcuts, not
rules: a list the fast check calls clean must be one the key-by-key rule finds nothing in,
and the tree's children are exactly the nodes one segment below a path.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from zarr_vectors.validation.consistency.cells import ArraySpec, check_presence
from zarr_vectors.validation.findings import Report
from zarr_vectors.validation.metadata import _check_nonempty, _nonempty_clean, _nonempty_findings
from zarr_vectors.validation.structure import Node, StoreModel

component = st.one_of(st.integers(-3, 5).map(str), st.sampled_from(["01", "+1", "-0", " 1", "", "x", "9" * 20]))
keys = st.lists(st.lists(component, min_size=1, max_size=4).map(".".join), max_size=12)


def _node(shape: Any, origin: Any, listed: list[str]) -> Node:
    attrs: dict[str, Any] = {"nonempty_chunks": listed}
    if origin is not None:
        attrs["chunk_grid_origin"] = origin
    return Node("0/vertices", {"node_type": "array", "shape": shape, "attributes": attrs})


extreme = st.sampled_from([-(2**63), -(2**63) + 1, 2**63 - 2, 2**63 - 1])
keys = st.one_of(keys, st.lists(st.lists(extreme.map(str), min_size=1, max_size=3).map(".".join), max_size=4))


@given(keys, st.lists(st.integers(1, 4), min_size=1, max_size=3),
       st.one_of(st.none(), st.lists(st.one_of(st.integers(-2, 2), extreme), min_size=1, max_size=3)))
@example(["-9223372036854775808"], [4], [2**63 - 1])  # review: key - origin wrapped past int64 into the grid
def test_a_list_called_clean_has_no_key_finding(listed: list[str], shape: list[int], origin: Any) -> None:
    node = _node(shape, origin, listed)
    from zarr_vectors.validation.structure import origin_of

    slow = Report()
    _nonempty_findings(node, listed, len(shape), origin_of(node), shape, slow)
    if _nonempty_clean(listed, len(shape), origin_of(node), shape):
        assert not slow.findings, [f.line() for f in slow.findings]
    fast = Report()
    _check_nonempty(node, fast)
    cells = math.prod(shape)
    if len(listed) > cells:  # longer than the grid: said once, and the entries checked are the first cells + 1
        slow = Report()
        _nonempty_findings(node, listed[: cells + 1], len(shape), origin_of(node), shape, slow)
        assert slow.findings  # a repeat, a stray or a malformed key is among them
        assert any(f"lists {len(listed)} cells, more than the {cells}" in f.line() for f in fast.findings)
    assert {f.line() for f in fast.findings} >= {f.line() for f in slow.findings}


@given(keys, st.lists(st.tuples(*[st.integers(-2, 3)] * 2), max_size=8))
def test_presence_check_reads_a_list_as_the_key_by_key_parse(listed: list[str], cells: list[tuple[int, int]]) -> None:
    """Missing and extra cells are the same whether the list parses at once or key by key."""
    from zarr_vectors.format.paths import format_chunk_key, parse_chunk_key

    spec = ArraySpec("0/vertices", {"shape": [9, 9], "attributes": {"nonempty_chunks": listed}},
                     {c: ("k", 1) for c in cells})
    out: list = []
    check_presence(None, spec, out)  # type: ignore[arg-type]
    parsed = set()
    for k in listed:
        try:
            parsed.add(parse_chunk_key(k, 2))
        except ValueError:
            pass
    missing, extra = sorted(parsed - set(cells)), sorted(set(cells) - parsed)
    for code, expected in (("L3_NONEMPTY_MISSING", missing), ("L3_NONEMPTY_EXTRA", extra)):
        named = [f.cell for f in out if f.code == code and f.cell]
        assert named == [format_chunk_key(c) for c in expected[:3]]
        assert sum(1 for f in out if f.code == code and not f.cell) == (len(expected) > 3)


@given(st.sets(st.lists(st.sampled_from(["a", "b", "0", "links", ""]), min_size=1, max_size=4).map("/".join)))
def test_children_are_the_nodes_one_segment_below(paths: set[str]) -> None:
    nodes = {p: Node(p, {"node_type": "group"}) for p in paths | {""}}
    model = StoreModel(None, {}, nodes)  # type: ignore[arg-type]
    for parent in paths | {""}:
        prefix = parent + "/" if parent else ""
        expected = sorted(p for p in nodes if p and p.startswith(prefix) and p.count("/") == prefix.count("/"))
        assert [n.path for n in model.children(parent)] == expected
    nodes["zz"] = Node("zz", None)  # a node added later is seen
    assert "zz" in [n.path for n in model.children("")]
