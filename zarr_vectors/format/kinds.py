"""What a store's ``geometry_types`` list reads as (docs/decisions.md D19), and what each kind demands.

The reference's high-level API writes lists of several kinds: ``Schema(kind=K)`` puts K
in the list and every ``add_*`` call appends its own kind, so a store created with the
default schema and filled with ``add_polylines`` says ``["point_cloud", "polyline"]``.
The data in such a store is the writer's; the list may also name kinds the data is not.

The rule, from metadata alone (never from cell contents):

1. kinds refine each other in a tree rooted at ``point_cloud`` (:data:`REFINES`): every
   kind is a point cloud, a line or a streamline is a polyline, a skeleton is a graph;
2. a single listed kind reads as itself (the validator's level-4 rules judge it);
3. of several, a kind the store's metadata contradicts (:func:`contradictions`: its
   ``links_convention``, the width of level 0's delta-0 family, the presence of level 0's
   object index or ``link_fragments``) is set aside;
4. the kinds left read as the most specific of them when they form a chain, else as
   the most specific kind all of them refine (their meet); a set-aside kind that this
   result refines was only a view of it (``point_cloud`` beside ``graph``), any other is
   reported (:func:`describe`);
5. nothing left, or a kind this reader does not know, and the store is refused -- as is a
   store laid out by the reference's ``zarr_vectors.composite`` (each kind's arrays under
   its own name, ``vertices_<kind>``, indexed by a ``geometry_index`` group: a layout no
   format document describes, whose extra kinds a reader of the plain arrays would drop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zarr_vectors.errors import InternalError, MetadataError, UnsupportedLayoutError

REFINES: dict[str, str | None] = {
    "point_cloud": None,
    "polyline": "point_cloud",
    "line": "polyline",
    "streamline": "polyline",
    "graph": "point_cloud",
    "skeleton": "graph",
    "mesh": "point_cloud",
}
"""The kind each kind refines (its parent in the tree); ``None`` for the root."""

KIND_CONVENTIONS: dict[str, frozenset[str] | None] = {
    "point_cloud": None,  # any
    "line": frozenset({"implicit_sequential"}),
    "polyline": frozenset({"implicit_sequential"}),
    "streamline": frozenset({"implicit_sequential"}),
    "graph": frozenset({"explicit"}),
    "skeleton": frozenset({"implicit_sequential_with_branches", "explicit"}),
    "mesh": frozenset({"explicit"}),
}
"""The ``links_convention`` values each kind allows (``None``: any)."""

LINK_WIDTHS: dict[str, tuple[int, int | None]] = {
    "mesh": (3, None), "graph": (2, 2), "skeleton": (2, 2), "line": (2, 2), "polyline": (2, 2), "streamline": (2, 2),
}
"""(min, max or None) ``link_width`` of a kind's delta-0 family."""

POLYLINE_KINDS = ("polyline", "streamline", "line")
"""Kinds stored as runs of vertices in manifest order, joined across chunks by delta-0 bridges (§8)."""

ROW_BRIDGED_KINDS = ("polyline", "streamline")
"""Polyline kinds whose bridges name vertex rows in both implementations; the reference's line
writer stores a fragment index in ``vi`` (D12), so a line store's bridges are not held to rows."""

NEEDS_OBJECT_INDEX = frozenset(POLYLINE_KINDS)
"""Kinds whose vertices are ordered only by their manifests, hence unreadable without an object index."""

_POINTER = "/attributes/zarr_vectors/geometry_types"


@dataclass(frozen=True)
class StoreFacts:
    """The metadata the rule reads: the root's ``links_convention`` and level 0's delta-0 family,
    object index, ``link_fragments`` and ``geometry_index`` group."""

    links_convention: str
    delta0_link_width: int | None  # None: level 0 has no delta-0 links family
    has_object_index: bool
    has_link_fragments: bool = False  # intra-chunk records: graphs, skeletons and meshes, never polylines
    namespaced: bool = False  # level 0 has a geometry_index group (the reference's zarr_vectors.composite)


@dataclass(frozen=True)
class KindReading:
    """What a ``geometry_types`` list reads as.

    ``set_aside``: (kind, why) for each listed kind the metadata contradicts;
    ``unordered``: the kinds left when they did not form a chain (``kind`` is then their meet).
    """

    kind: str
    listed: tuple[str, ...]
    set_aside: tuple[tuple[str, str], ...] = ()
    unordered: tuple[str, ...] = ()


def lineage(kind: str) -> tuple[str, ...]:
    """``kind`` and every kind it refines, most specific first (``("skeleton", "graph", "point_cloud")``)."""
    out: list[str] = []
    k: str | None = kind
    while k is not None:
        out.append(k)
        k = REFINES[k]
    return tuple(out)


def refines(kind: str, other: str) -> bool:
    """Whether every ``kind`` store is an ``other`` store (a kind refines itself)."""
    return other in lineage(kind)


def width_problem(kind: str, width: int) -> str | None:
    """Why a delta-0 family of ``link_width`` ``width`` cannot hold ``kind``'s records (None: it can)."""
    if kind not in LINK_WIDTHS:
        return None
    lo, hi = LINK_WIDTHS[kind]
    if width >= lo and (hi is None or width <= hi):
        return None
    want = f"{lo} or more" if hi is None else str(lo) if hi == lo else f"{lo} to {hi}"
    return f"link_width is {width}, where a {kind} needs {want}"


def contradictions(kind: str, facts: StoreFacts) -> list[str]:
    """Why ``facts`` contradict ``kind`` (empty: they do not)."""
    out = []
    allowed = KIND_CONVENTIONS[kind]
    if allowed is not None and facts.links_convention not in allowed:
        out.append(f"links_convention {facts.links_convention!r} is not in {sorted(allowed)}")
    width = facts.delta0_link_width
    if kind == "point_cloud" and width is not None:
        out.append("level 0 has a delta-0 links family (D17)")
    if width is not None and width_problem(kind, width) is not None:
        out.append(f"the delta-0 link_width is {width}")
    if kind in NEEDS_OBJECT_INDEX and not facts.has_object_index:
        out.append("level 0 has no object_index")
    if kind in NEEDS_OBJECT_INDEX and facts.has_link_fragments:  # a polyline's rows follow on implicitly
        out.append("level 0 has link_fragments (intra-chunk records)")
    return out


def unknown_kinds(listed: Sequence[str]) -> list[str]:
    return [k for k in listed if k not in REFINES]


def read_kind(listed: Sequence[str], facts: StoreFacts | None) -> KindReading:
    """What ``listed`` reads as (module docstring); ``facts`` may be None only for a single kind.

    Raises :class:`UnsupportedLayoutError` for a kind this reader does not know and
    :class:`MetadataError` when the metadata contradicts every listed kind.
    """
    kinds = tuple(dict.fromkeys(listed))
    unknown = unknown_kinds(kinds)
    if unknown:
        raise UnsupportedLayoutError(f"geometry type(s) {unknown} are unknown to this reader", file="zarr.json",
                                     pointer=_POINTER)
    if not kinds:
        raise MetadataError("geometry_types is empty", file="zarr.json", pointer=_POINTER)
    if len(kinds) == 1:
        return KindReading(kinds[0], kinds)
    if facts is None:
        raise InternalError("read_kind: several geometry types need the store's facts")
    if facts.namespaced:
        raise UnsupportedLayoutError(
            f"geometry_types {list(kinds)} with a 0/geometry_index group: the namespaced composite layout "
            "(vertices_<kind> arrays) is not read (D19)", file="zarr.json", pointer=_POINTER)
    why = {k: "; ".join(contradictions(k, facts)) for k in kinds}
    left = [k for k in kinds if not why[k]]
    if not left:
        raise MetadataError(
            "the store's metadata contradicts every listed geometry type (D19): "
            + "; ".join(f"{k}: {w}" for k, w in why.items()),
            file="zarr.json", pointer=_POINTER,
        )
    deepest = max(left, key=lambda k: len(lineage(k)))
    chain = all(refines(deepest, k) for k in left)
    kind = deepest if chain else next(k for k in lineage(left[0]) if all(refines(o, k) for o in left))
    # a contradicted kind that the result refines is only a view of it (a graph is a point cloud)
    set_aside = tuple((k, w) for k, w in why.items() if w and not refines(kind, k))
    return KindReading(kind, kinds, set_aside, () if chain else tuple(left))


def describe(reading: KindReading) -> str:
    """One sentence on a reading that set kinds aside or met unordered kinds (empty otherwise)."""
    parts = [f"{k} set aside ({w})" for k, w in reading.set_aside]
    if reading.unordered:
        parts.append(f"{', '.join(reading.unordered)} do not refine one another, so only what they share is read")
    if not parts:
        return ""
    return f"geometry_types {list(reading.listed)} reads as {reading.kind!r} (D19): " + "; ".join(parts)
