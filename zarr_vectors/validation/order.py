"""The order findings are shown in: causes before the findings they cause.

One missing object makes many rules fail: a deleted vertex cell also breaks the vertex
count, the attribute rows, the fragment ranges and every link naming its vertices.
A reader should meet the cause first, so findings are shown by

1. the rule's conformance level (structure before metadata before consistency ...);
2. absence first: an object gone from storage (a listed cell, a node, the root), then
   anything else missing (an index entry, an array), before what is wrong in what is there;
3. the store level (level 0 before the levels built from it);
4. the array, in the order the format builds them: vertices, then what indexes or hangs
   off them (fragments, object index, attributes), then links and what hangs off those;
   the level's own group and the root after its arrays, whose counts they sum;
5. errors before warnings; a "... and N more" line after the findings it continues;
6. otherwise in the order found.
"""

from __future__ import annotations

from collections.abc import Iterable

from zarr_vectors.format.paths import LEVEL_NAME
from zarr_vectors.validation.findings import ERROR, Finding

#: The arrays below a level, causes first
ARRAY_ORDER = ("vertices", "vertex_fragments", "object_index", "vertex_attributes", "object_attributes",
               "links", "link_fragments", "link_attributes", "cross_level_links")

#: Codes (by suffix) saying an object is gone from storage; any other code naming MISSING is absence too
_GONE = ("NONEMPTY_MISSING", "MISSING_NODE", "STORE_EMPTY", "NO_LEVELS", "STORAGE_OBJECT")


def _array_rank(node: str) -> tuple[int, int]:
    """(store level, array rank) of a node path such as ``0/vertex_fragments``; root: (-1, last)."""
    parts = node.split("/") if node else []
    last = len(ARRAY_ORDER) + 1
    if not parts or not LEVEL_NAME.fullmatch(parts[0]):
        return -1, last
    if len(parts) == 1:  # the level group itself
        return int(parts[0]), last
    name = parts[1]
    return int(parts[0]), ARRAY_ORDER.index(name) if name in ARRAY_ORDER else len(ARRAY_ORDER)


def causes_first(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` in the order of the module's docstring (a stable sort)."""

    def key(item: tuple[int, Finding]) -> tuple:
        index, f = item
        absence = 0 if f.code.endswith(_GONE) else 1 if "MISSING" in f.code else 2
        level, rank = _array_rank(f.node)
        return (f.level, absence, level, rank, f.severity != ERROR, f.message.startswith("..."), index)

    return [f for _, f in sorted(enumerate(findings), key=key)]
