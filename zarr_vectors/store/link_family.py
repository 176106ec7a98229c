"""A level's links families on storage: policy stamps, arrays, counts, enumeration.

Layout (docs/format.md §7)::

    links/<delta>/                              group: family-wide policy and counts
    links/<delta>/<offsets>/                    grid array, cell = source chunk
    link_fragments                              grid array, sidecar of the intra array (delta 0)
    link_attributes/<name>/<delta>/             group
    link_attributes/<name>/<delta>/<offsets>/   grid array mirroring the link array cell for cell

The family's enumeration order -- segments sorted as ASCII strings, cells as signed
integer tuples (docs/decisions.md D8), then write order -- is defined once here
(:func:`enumerate_family`) and shared by every reader and writer.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from zarr_vectors.errors import ArrayError, InconsistentStoreError, InputError, MetadataError
from zarr_vectors.format.links import (
    Chunk,
    LinkCounts,
    LinkPartition,
    LinkPolicy,
    OffsetsT,
    StorePolicy,
    make_policy,
)
from zarr_vectors.format.paths import (
    SELF_SEGMENT,
    format_chunk_key,
    format_delta,
    link_attributes_group_path,
    links_group_path,
    parse_delta,
    parse_offsets,
)
from zarr_vectors.store.codecs import ZSTD_DEFAULT, compressor_config
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.groups import Level
from zarr_vectors.store.nodes import group_document, meta_key, read_node, write_node

CompressorArg = dict[str, Any] | str | None


LINK_FRAGMENTS = "link_fragments"
LINK_ATTRIBUTES = "link_attributes"
LINKS = "links"
VERTICES = "vertices"


_LINK_DTYPES = ("int64", "int32")


def family_path(level: Level, delta: int) -> str:
    return level.node_path(links_group_path(delta))


def link_array_rel(delta: int, segment: str) -> str:
    return f"{links_group_path(delta)}/{segment}"


def link_attribute_array_rel(name: str, delta: int, segment: str) -> str:
    return f"{link_attributes_group_path(name, delta)}/{segment}"


def ensure_plain_group(level: Level, rel: str) -> None:
    if read_node(level.storage, level.node_path(rel)) is None:
        write_node(level.storage, level.node_path(rel), group_document({}))


def family_document(level: Level, delta: int) -> dict[str, Any] | None:
    """The ``links/<delta>`` group's document (its ``zv_array`` checked by ``Level.node``), or None when there is none."""
    rel = links_group_path(delta)
    doc = level.node(rel)
    if doc is None and format_delta(delta) in level.children(LINKS):
        _missing_node(level, rel)
    if doc is None or doc.get("node_type") != "group":
        return None
    return doc


def link_family_policy(level: Level, delta: int) -> LinkPolicy | None:
    """The policy stamped on ``links/<delta>/``, or None when the family is absent or unstamped.

    An old family without ``sid_ndim`` takes it from the level's ``vertices`` array.
    """
    doc = family_document(level, delta)
    if doc is None:
        return None
    attrs = doc.get("attributes") or {}
    file = posixpath.join(family_path(level, delta), "zarr.json")
    if any(k not in attrs for k in ("link_width", "directed", "store")):
        return None
    sid_ndim = attrs.get("sid_ndim")
    if sid_ndim is None:
        if not level.has(VERTICES):
            return None
        sid_ndim = level.array(VERTICES).ndim
    if "level_delta" in attrs and attrs["level_delta"] != delta:
        raise MetadataError(
            f"family level_delta {attrs['level_delta']!r} disagrees with its path segment "
            f"{format_delta(delta)!r}",
            file=file,
            pointer="/attributes/level_delta",
        )
    try:
        return make_policy(delta, attrs["link_width"], attrs["directed"], attrs["store"], sid_ndim)
    except InputError as exc:
        raise MetadataError(f"bad links family policy: {exc}", file=file, pointer="/attributes") from None


def require_policy(level: Level, delta: int) -> LinkPolicy:
    policy = link_family_policy(level, delta)
    if policy is None:
        raise ArrayError(
            f"level {level.number}: links/{format_delta(delta)} has no family policy; create it with "
            "create_links_family (or write_links) first"
        )
    return policy


def link_array_segments(level: Level, delta: int) -> list[str]:
    """Names of the array children of ``links/<delta>``, ASCII-sorted, unvalidated."""
    rel = links_group_path(delta)
    names = level.children(rel)
    docs = level.nodes([f"{rel}/{name}" for name in names])  # one batch, not a read per child
    for name, doc in zip(names, docs):
        if doc is None and _names_a_node(name, _offsets_shaped):
            _missing_node(level, f"{rel}/{name}")
    return sorted(n for n, doc in zip(names, docs) if doc is not None and doc.get("node_type") == "array")


def _offsets_shaped(name: str) -> None:
    """Refuse a name that is not spelled as an offsets segment (of any arity)."""
    if name != SELF_SEGMENT:
        for offset in name.split("_"):
            for component in offset.split("."):
                parse_delta(component)


def _names_a_node(name: str, parse: Any) -> bool:
    try:
        parse(name)
    except (ValueError, InputError):
        return False
    return True


def _missing_node(level: Level, rel: str) -> None:
    """A directory named as the format names a node, without its ``zarr.json``: its cells are
    there but would be skipped, so reading on would drop them without a word."""
    raise InconsistentStoreError(f"{meta_key(level.node_path(rel))} is missing: {rel} is a directory where the "
                                 "format puts a node, and reading on would leave its links out without a word")


def create_links_family(
    level: Level,
    delta: int,
    *,
    link_width: int,
    directed: bool = False,
    store: StorePolicy = "canonical",
    sid_ndim: int,
) -> LinkPolicy:
    """Stamp the policy on ``links/<delta>/`` without materialising any offsets array.

    Idempotent when the family already carries this policy (its counts are kept).
    Re-stamping a different ``link_width``, ``directed``, ``store`` or ``sid_ndim``
    raises :class:`ArrayError` while offset arrays exist under the family: they keep
    decoding against the stamped policy, so flipping it would silently corrupt them.
    """
    policy = make_policy(delta, link_width, directed, store, sid_ndim)
    existing = link_family_policy(level, delta)
    if existing == policy:
        return policy
    if existing is not None:
        siblings = link_array_segments(level, delta)
        if siblings:
            raise ArrayError(
                f"level {level.number}: links/{format_delta(delta)} already holds offset arrays "
                f"{siblings} written under a different policy ({'; '.join(existing.differences(policy))}); "
                "they would decode wrongly under the new one. Rewrite the family with "
                "write_links(mode='replace') or delete it first"
            )
    ensure_plain_group(level, LINKS)
    write_node(level.storage, family_path(level, delta), group_document(policy.group_attributes()))
    return policy


def attribute_family_attributes(name: str, delta: int, num_links: int | None = None) -> dict[str, Any]:
    """The attributes of a link attribute family's group, ``link_attributes/<name>/<delta>``."""
    attrs: dict[str, Any] = {"zv_array": "link_attribute_family", "name": name, "level_delta": delta}
    if num_links is not None:
        attrs["num_links"] = num_links
    return attrs


@dataclass(frozen=True, eq=False)
class CreatedFamily:
    """A family a coordinator has just composed: its policy, groups and arrays.

    Handed to the cell writers and the reconcile step, so that neither reads back what
    the coordinator decided (on an object store, a round trip per task each).  The
    coordinator writes the groups' documents (:meth:`group_documents`); every array's
    document is written once, by the reconcile, with its presence list
    (:meth:`documents`).
    """

    policy: LinkPolicy
    path: str  # the family group, from the store's root
    arrays: dict[str, GridArray]  # offsets arrays (and link_fragments) by level-relative path
    flat: frozenset[str]  # the segments whose cells have a link_fragments entry
    attributes: dict[str, dict[str, GridArray]] = field(default_factory=dict)  # name -> rel -> array
    attribute_groups: dict[str, str] = field(default_factory=dict)  # name -> its family group's path

    def group_documents(self, counts: LinkCounts | None = None) -> dict[str, dict[str, Any]]:
        """The family's and its attribute families' group documents (``counts`` stamped as
        :func:`stamp_counts` stamps them)."""
        attrs = self.policy.group_attributes()
        if counts is not None:
            attrs.update(num_links=counts.num_links, num_physical_records=counts.num_physical_records)
        out = {self.path: group_document(attrs)}
        num_links = counts.num_links if counts is not None else None
        for name, path in self.attribute_groups.items():
            out[path] = group_document(attribute_family_attributes(name, self.policy.delta, num_links))
        return out

    def every_array(self) -> dict[str, GridArray]:
        """Offsets, link_fragments and attribute arrays, by level-relative path."""
        out = dict(self.arrays)
        for grids in self.attributes.values():
            out.update(grids)
        return out

    def documents(self, counts: LinkCounts) -> dict[str, dict[str, Any]]:
        """Every document of the family, its arrays' as they stand now."""
        out = self.group_documents(counts)
        out.update((grid.path, grid.doc) for grid in self.every_array().values())
        return out


def compose_new_family(
    level: Level,
    policy: LinkPolicy,
    segments: Sequence[str],
    *,
    extent: tuple[Sequence[int], Sequence[int]],
    dtype: DTypeLike,
    compressor: CompressorArg,
) -> CreatedFamily:
    """A family that does not exist yet: the arrays :func:`create_links_family` and
    :func:`create_links_segments` would create, composed in memory (nothing is written).

    For a coordinator creating families on a level it knows has none of them (a new
    level, or families its job removed): it writes the group documents in one batch,
    with the ``links`` group when the level has none.
    """
    comp = compressor_config(compressor)
    name = check_link_dtype(dtype)
    origin, shape = (tuple(int(v) for v in extent[0]), tuple(int(v) for v in extent[1]))
    arrays: dict[str, GridArray] = {}

    def new_array(rel: str, attributes: dict[str, Any]) -> None:
        arrays[rel] = GridArray.new(
            level.storage, level.node_path(rel), shape=shape, origin=origin, attributes=attributes, compressor=comp
        )

    parsed = [(segment, parse_segment(level, policy, segment)) for segment in segments]
    if any(policy.is_flat(offsets) for _, offsets in parsed):
        new_array(LINK_FRAGMENTS, {"zv_array": "link_fragments", "encoding": "fragment_index_v1"})
    for segment, offsets in parsed:
        new_array(link_array_rel(policy.delta, segment), _links_array_attributes(policy, offsets, name))
    flat = frozenset(segment for segment, offsets in parsed if policy.is_flat(offsets))
    return CreatedFamily(policy, family_path(level, policy.delta), arrays, flat)


def update_group_attributes(level: Level, rel: str, values: Mapping[str, Any]) -> None:
    path = level.node_path(rel)
    doc = read_node(level.storage, path) or group_document({})
    doc.setdefault("attributes", {}).update(values)
    write_node(level.storage, path, doc)


def _level_ratio(level: Level, number: int, sid_ndim: int) -> tuple[int, ...]:
    root_cs = level.store.root.chunk_shape
    if number == level.number:
        target = level
    else:
        if number < 0 or number not in level.store.level_numbers():
            raise ArrayError(
                f"level {level.number}: links/{format_delta(number - level.number)} targets level {number}, "
                "which does not exist; its chunk_shape is needed for the cross-level anchor (create the "
                "level first, or pass anchor_ratios explicitly)"
            )
        target = level.store.level(number)
    cs = target.chunk_shape
    ratios = []
    for c, r in zip(cs, root_cs):
        q = c / r
        if q < 1 or abs(q - round(q)) > 1e-9:
            raise ArrayError(
                f"level {number} chunk_shape {list(cs)} is not an integer multiple of the root chunk_shape "
                f"{list(root_cs)}"
            )
        ratios.append(int(round(q)))
    extra = sid_ndim - len(ratios)
    if extra not in (0, 1):
        raise ArrayError(
            f"sid_ndim {sid_ndim} does not fit the store's {len(ratios)} spatial axes (it may exceed them "
            "by one leading attribute-chunk axis)"
        )
    return (1,) * extra + tuple(ratios)


def link_anchor_ratios(level: Level, delta: int, sid_ndim: int | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(r_src, r_trg)``: the owning and target levels' chunk_shape over the root's, per axis.

    The cross-level anchor is ``floor(c_src * r_src / r_trg)``.  A leading
    attribute-chunk axis (``sid_ndim`` one more than the spatial rank) has ratio 1.
    """
    d = sid_ndim if sid_ndim is not None else len(level.store.root.chunk_shape)
    return _level_ratio(level, level.number, d), _level_ratio(level, level.number + delta, d)


def covers(origin: Sequence[int], shape: Sequence[int], cells: np.ndarray) -> bool:
    if cells.size == 0:
        return True
    lo = np.asarray(origin, dtype=np.int64)
    hi = lo + np.asarray(shape, dtype=np.int64)
    return bool(((cells >= lo) & (cells < hi)).all())


def extent_for(level: Level, cells: np.ndarray) -> tuple[Chunk, Chunk]:
    """(origin, shape) for a new grid array holding ``cells``.

    The level's ``vertices`` array's grid when it covers them (arrays of one level then
    share one grid), else the bounding box of the vertices grid and the cells together;
    without ``vertices``, the bounding box of the cells.
    """
    ndim = cells.shape[1]
    if level.has(VERTICES):
        vert = level.array(VERTICES)
        if vert.ndim != ndim:
            raise ArrayError(
                f"level {level.number}: link chunk coordinates have {ndim} components but the vertices "
                f"array has {vert.ndim} dimensions"
            )
        if covers(vert.origin, vert.shape, cells):
            return vert.origin, vert.shape
        lo = np.minimum(np.asarray(vert.origin), cells.min(axis=0))
        hi = np.maximum(np.asarray(vert.origin) + np.asarray(vert.shape) - 1, cells.max(axis=0))
    else:
        lo, hi = cells.min(axis=0), cells.max(axis=0)
    return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo + 1)


def check_covers(grid: GridArray, cells: np.ndarray) -> None:
    if grid.ndim != cells.shape[1]:
        raise ArrayError(f"{grid.path}: has {grid.ndim} dimensions, link cells have {cells.shape[1]} coordinates")
    if not covers(grid.origin, grid.shape, cells):
        lo = np.asarray(grid.origin)
        outside = ~((cells >= lo) & (cells < lo + np.asarray(grid.shape))).all(axis=1)
        bad = tuple(int(v) for v in cells[np.argmax(outside)])
        raise ArrayError(
            f"{grid.path}: cell {format_chunk_key(bad)} lies outside the existing array (origin "
            f"{list(grid.origin)}, shape {list(grid.shape)}); existing arrays are not resized"
        )


def _links_array_attributes(policy: LinkPolicy, offsets: OffsetsT, dtype: str) -> dict[str, Any]:
    return {
        "zv_array": "links",
        "dtype": dtype,
        "offsets": [list(o) for o in offsets],
        "has_perm": policy.has_perm(offsets),
        "link_width": policy.link_width,
        "level_delta": policy.delta,
    }


def check_link_dtype(dtype: DTypeLike) -> str:
    name = np.dtype(dtype).name
    if name not in _LINK_DTYPES:
        raise InputError(f"link rows must be int64 or int32, got {name}")
    return name


def open_or_create_links_array(
    level: Level,
    policy: LinkPolicy,
    segment: str,
    offsets: OffsetsT,
    cells: np.ndarray,
    *,
    extent: tuple[Chunk, Chunk],
    dtype: str,
    compressor: dict[str, Any] | None,
    check_perm: bool = True,
) -> GridArray:
    rel = link_array_rel(policy.delta, segment)
    if level.has(rel):
        grid = level.array(rel)
        attrs = grid.attributes
        if attrs.get("link_width", policy.link_width) != policy.link_width:
            raise ArrayError(f"{grid.path}: link_width {attrs.get('link_width')} disagrees with the family")
        if check_perm and "has_perm" in attrs and attrs["has_perm"] != policy.has_perm(offsets):
            raise ArrayError(f"{grid.path}: has_perm {attrs['has_perm']} disagrees with the family policy")
        check_covers(grid, cells)
        return level.remember(grid)
    return level.create_array(
        rel, shape=extent[1], origin=extent[0], attributes=_links_array_attributes(policy, offsets, dtype),
        compressor=compressor,
    )  # fmt: skip


def open_or_create_fragments(
    level: Level, cells: np.ndarray, *, extent: tuple[Chunk, Chunk], compressor: dict[str, Any] | None
) -> GridArray:
    if level.has(LINK_FRAGMENTS):
        grid = level.array(LINK_FRAGMENTS)
        check_covers(grid, cells)
        return level.remember(grid)
    return level.create_array(
        LINK_FRAGMENTS, shape=extent[1], origin=extent[0],
        attributes={"zv_array": "link_fragments", "encoding": "fragment_index_v1"}, compressor=compressor,
    )  # fmt: skip


def check_partition_policy(level: Level, partition: LinkPartition, policy: LinkPolicy | None = None) -> LinkPolicy:
    """The family's policy, refused unless ``partition`` was placed under it (``policy``: the
    family's, when the caller holds it as its coordinator composed it; else it is read)."""
    if policy is None:
        policy = require_policy(level, partition.policy.delta)
    if policy != partition.policy:
        raise ArrayError(
            f"level {level.number}: the partition was placed under a different policy than "
            f"links/{format_delta(policy.delta)} carries ({'; '.join(policy.differences(partition.policy))})"
        )
    return policy


def create_links_segments(
    level: Level,
    delta: int,
    segments: Sequence[str],
    *,
    extent: tuple[Sequence[int], Sequence[int]],
    dtype: DTypeLike = "int64",
    compressor: CompressorArg = ZSTD_DEFAULT,
) -> None:
    """Create (metadata only) the named offsets arrays of a stamped family, and ``link_fragments``.

    The coordinator step when the segments are known but no single partition holds
    every record (the Dask writers plan them from per-block summaries).
    ``extent = (origin, shape)`` is the grid every array gets.
    """
    policy = require_policy(level, delta)
    comp = compressor_config(compressor)
    name = check_link_dtype(dtype)
    ext = (tuple(int(v) for v in extent[0]), tuple(int(v) for v in extent[1]))
    none = np.zeros((0, policy.sid_ndim), dtype=np.int64)
    seen = level.observed([links_group_path(delta)])  # one walk answers every "does it exist yet"
    parsed = [(segment, parse_segment(level, policy, segment)) for segment in segments]
    if any(policy.is_flat(offsets) for _, offsets in parsed):
        open_or_create_fragments(seen, none, extent=ext, compressor=comp)
    seen.storage.overlap(  # the documents written concurrently on an object store
        lambda so: open_or_create_links_array(seen, policy, so[0], so[1], none, extent=ext, dtype=name,
                                              compressor=comp),
        parsed,
    )


def create_links_arrays(
    level: Level,
    delta: int,
    partition: LinkPartition,
    *,
    dtype: DTypeLike = "int64",
    compressor: CompressorArg = ZSTD_DEFAULT,
    extent: tuple[Sequence[int], Sequence[int]] | None = None,
) -> list[str]:
    """Create (metadata only) every offsets array, and ``link_fragments``, the partition needs.

    Coordinator step of a decentralised write; arrays that exist are kept (and must
    cover the partition's cells).  ``extent = (origin, shape)`` overrides the grid
    choice (default: the level's ``vertices`` grid, else the partition's cells).
    Returns the segments of the partition.
    """
    if partition.policy.delta != delta:
        raise ArrayError(f"the partition is for delta {partition.policy.delta}, not {delta}")
    policy = check_partition_policy(level, partition)
    if partition.num_physical_records == 0:
        return []
    comp = compressor_config(compressor)
    name = check_link_dtype(dtype)
    ext = (
        (tuple(int(v) for v in extent[0]), tuple(int(v) for v in extent[1]))
        if extent is not None
        else extent_for(level, partition.cell)
    )
    if not covers(ext[0], ext[1], partition.cell):
        raise ArrayError(f"extent {ext} does not cover the partition's cells")
    for s, (segment, offsets) in enumerate(zip(partition.segments, partition.segment_offsets)):
        cells = partition.cell[partition.segment == s]
        open_or_create_links_array(
            level, policy, segment, offsets, cells, extent=ext, dtype=name, compressor=comp
        )
        if policy.is_flat(offsets):
            open_or_create_fragments(level, cells, extent=ext, compressor=comp)
    return list(partition.segments)


def link_row_dtype(grid: GridArray) -> np.dtype:
    name = grid.attributes.get("dtype", "int64")
    try:
        dt = np.dtype(name)
    except TypeError:
        raise MetadataError(f"unknown link dtype {name!r}", file=posixpath.join(grid.path, "zarr.json")) from None
    if dt.kind not in "iu":
        raise MetadataError(f"link dtype {name!r} is not an integer type", file=posixpath.join(grid.path, "zarr.json"))
    return dt.newbyteorder("<")


def array_has_perm(grid: GridArray, policy: LinkPolicy, offsets: OffsetsT) -> bool:
    """The stored ``has_perm`` (trusted), else the policy's answer."""
    value = grid.attributes.get("has_perm")
    if value is None:
        return policy.has_perm(offsets)
    if not isinstance(value, bool):
        raise MetadataError(
            f"has_perm must be a bool, found {value!r}",
            file=posixpath.join(grid.path, "zarr.json"),
            pointer="/attributes/has_perm",
        )
    return value


def list_link_attribute_names(level: Level) -> list[str]:
    """Names under ``link_attributes/`` (ASCII-sorted)."""
    return sorted(level.children(LINK_ATTRIBUTES))


def family_counts(level: Level, delta: int) -> LinkCounts | None:
    doc = family_document(level, delta)
    attrs = (doc or {}).get("attributes") or {}
    if "num_links" in attrs and "num_physical_records" in attrs:
        for key in ("num_links", "num_physical_records"):
            value = attrs[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise MetadataError(f"{key} must be an integer >= 0, found {value!r}",
                                    file=posixpath.join(family_path(level, delta), "zarr.json"),
                                    pointer=f"/attributes/{key}")
        return LinkCounts(attrs["num_links"], attrs["num_physical_records"])
    if not link_array_segments(level, delta):
        return LinkCounts(0, 0)
    return None


def stamp_counts(level: Level, delta: int, counts: LinkCounts, *, attributes: bool) -> None:
    update_group_attributes(
        level,
        links_group_path(delta),
        {"num_links": counts.num_links, "num_physical_records": counts.num_physical_records},
    )
    if attributes:
        for name in list_link_attribute_names(level):
            rel = link_attributes_group_path(name, delta)
            if level.node(rel) is not None:
                update_group_attributes(level, rel, {"num_links": counts.num_links})


@dataclass(frozen=True)
class FamilyArray:
    segment: str
    offsets: OffsetsT
    grid: GridArray
    cells: list[Chunk]  # numeric order (D8)
    has_perm: bool
    flat: bool
    dtype: np.dtype

    @property
    def width(self) -> int:
        return len(self.offsets) + 1 + int(self.has_perm)


def list_link_deltas(level: Level) -> list[int]:
    """Level deltas with a ``links/<delta>/`` group, ascending numerically."""
    out = []
    names = level.children(LINKS)
    for name, doc in zip(names, level.nodes([f"{LINKS}/{name}" for name in names])):
        path = level.node_path(f"{LINKS}/{name}")
        if doc is None and _names_a_node(name, parse_delta):
            _missing_node(level, f"{LINKS}/{name}")
        if doc is None or doc.get("node_type") != "group":
            continue
        try:
            out.append(parse_delta(name))
        except ValueError as exc:
            raise MetadataError(str(exc), file=posixpath.join(path, "zarr.json")) from None
    return sorted(out)


def list_link_offsets(level: Level, delta: int) -> list[str]:
    """Offsets segments of the arrays under ``links/<delta>/``, sorted as ASCII strings.

    With a family policy, every segment must parse against it (a malformed or
    wrong-arity name raises :class:`MetadataError`).
    """
    segments = link_array_segments(level, delta)
    policy = link_family_policy(level, delta)
    if policy is not None:
        for segment in segments:
            parse_segment(level, policy, segment)
    return segments


def parse_segment(level: Level, policy: LinkPolicy, segment: str) -> OffsetsT:
    try:
        return parse_offsets(segment, link_width=policy.link_width, sid_ndim=policy.sid_ndim)
    except ValueError as exc:
        path = level.node_path(link_array_rel(policy.delta, segment))
        raise MetadataError(f"malformed offsets segment: {exc}", file=posixpath.join(path, "zarr.json")) from None


def family_array(level: Level, policy: LinkPolicy, segment: str, grid: GridArray | None = None) -> FamilyArray:
    """The array of ``segment`` (``grid``: its already-opened array)."""
    offsets = parse_segment(level, policy, segment)
    grid = grid if grid is not None else level.array(link_array_rel(policy.delta, segment))
    stored = grid.attributes.get("offsets")
    if stored is not None:
        try:
            field_offsets = tuple(tuple(int(c) for c in o) for o in stored)
        except (TypeError, ValueError):
            field_offsets = None
        if field_offsets != offsets:
            raise MetadataError(
                f"offsets attribute {stored!r} disagrees with the path segment {segment!r}",
                file=posixpath.join(grid.path, "zarr.json"),
                pointer="/attributes/offsets",
            )
    cells = sorted(grid.nonempty_chunk_coords())  # each entry checked, naming its pointer
    return FamilyArray(
        segment=segment,
        offsets=offsets,
        grid=grid,
        cells=cells,
        has_perm=array_has_perm(grid, policy, offsets),
        flat=policy.is_flat(offsets),
        dtype=link_row_dtype(grid),
    )


def enumerate_family(level: Level, policy: LinkPolicy) -> list[FamilyArray]:
    """The family's arrays in enumeration order (segments ASCII, cells numeric).

    The single definition of the order shared by :func:`read_links`,
    :func:`read_link_attributes` and :func:`write_link_attributes`.
    """
    segments = link_array_segments(level, policy.delta)
    grids = level.arrays([link_array_rel(policy.delta, s) for s in segments])  # one batch of documents
    return [family_array(level, policy, s, g) for s, g in zip(segments, grids)]
