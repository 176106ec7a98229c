"""Levels 4 and 5 — convention compliance and multi-resolution coherence.

Level 4's bin-containment check reads every vertex cell, so it rides on level 3's vertex
tasks (:mod:`zarr_vectors.validation.consistency`); everything here works from metadata
and the listing.
"""

from __future__ import annotations

import math
from typing import Any

from zarr_vectors.errors import MetadataError
from zarr_vectors.format.kinds import KIND_CONVENTIONS, KindReading, StoreFacts, describe, read_kind, width_problem
from zarr_vectors.format.paths import format_delta, parse_delta
from zarr_vectors.format.schema import is_int, whole_ratio
from zarr_vectors.validation.findings import Report, crashed, make
from zarr_vectors.validation.metadata import level_chunk_shape, level_transform
from zarr_vectors.validation.structure import StoreModel

_GEOMETRY_POINTER = "/attributes/zarr_vectors/geometry_types"


def store_kind(model: StoreModel) -> KindReading | str | None:
    """What the store reads as (D19, the reader's rule), over the kinds this validator knows.

    A string: why several listed kinds cannot be read (the reader refuses the store);
    None: no known kind is listed.
    """
    listed = [g for g in model.zv.get("geometry_types") or [] if isinstance(g, str) and g in KIND_CONVENTIONS]
    if len(set(listed)) <= 1:
        return read_kind(listed, None) if listed else None
    convention = model.zv.get("links_convention", "implicit_sequential")
    lpath = model.levels.get(0)
    family = model.nodes.get(f"{lpath}/links/0") if lpath is not None else None
    width = family.attrs.get("link_width") if family is not None else None
    facts = StoreFacts(str(convention), width if is_int(width) else None,
                       *(lpath is not None and f"{lpath}/{n}" in model.nodes
                         for n in ("object_index", "link_fragments", "geometry_index")))
    try:
        return read_kind(listed, facts)
    except MetadataError as exc:  # UnsupportedLayoutError included
        return exc.reason


def families(model: StoreModel) -> dict[tuple[int, int], Any]:
    """(level, delta) -> family node, for every well-named links/<delta> group."""
    out = {}
    for number, lpath in model.levels.items():
        if f"{lpath}/links" not in model.nodes:
            continue
        for node in model.children(f"{lpath}/links"):
            try:
                out[(number, parse_delta(node.name))] = node
            except ValueError:
                continue
    return out


# ---------------------------------------------------------------------------
# level 4
# ---------------------------------------------------------------------------
def check_conformance(model: StoreModel, report: Report) -> None:
    try:
        _level4(model, report)
    except Exception as exc:  # noqa: BLE001
        report.add(crashed(4, "/", exc, what="conventions"))


def _level4(model: StoreModel, report: Report) -> None:
    for code in ("L4_LINKS_CONVENTION", "L4_POINT_CLOUD_LINKS", "L4_LINK_WIDTH", "L4_GEOMETRY_TYPES",
                 "L4_GEOMETRY_TYPES_UNREADABLE"):
        report.ran_rule(code)
    reading = store_kind(model)
    if isinstance(reading, str):
        report.add(make("L4_GEOMETRY_TYPES_UNREADABLE", "/", reading, pointer=_GEOMETRY_POINTER))
        return
    if reading is None:
        return
    if reading.set_aside or reading.unordered:
        report.add(make("L4_GEOMETRY_TYPES", "/", describe(reading), pointer=_GEOMETRY_POINTER))
    kind = reading.kind  # a kind list is judged as what it reads as: its other kinds are views of it
    convention = model.zv.get("links_convention", "implicit_sequential")
    allowed = KIND_CONVENTIONS[kind]
    if allowed is not None and convention not in allowed:
        report.add(make("L4_LINKS_CONVENTION", "/", f"geometry {kind!r} requires links_convention in "
                        f"{sorted(allowed)}, found {convention!r}", pointer="/attributes/zarr_vectors/"
                                                                             "links_convention"))
    fams = families(model)
    if kind == "point_cloud":
        for (number, delta), node in sorted(fams.items()):
            if delta == 0:
                report.add(make("L4_POINT_CLOUD_LINKS", node.path, "a point cloud has a delta-0 links family (only "
                                "cross-level families are legal on a point cloud, D17)"))
    for (number, delta), node in sorted(fams.items()):
        w = node.attrs.get("link_width")
        problem = width_problem(kind, w) if delta == 0 and is_int(w) else None
        if problem is not None:  # the reader refuses the same (docs/decisions.md D19)
            report.add(make("L4_LINK_WIDTH", node.path, problem, pointer="/attributes/link_width"))


# ---------------------------------------------------------------------------
# level 5
# ---------------------------------------------------------------------------
def check_multiresolution(model: StoreModel, report: Report) -> None:
    for what, fn in (("pyramid", _pyramid), ("cross-level storage", _cross_level)):
        try:
            fn(model, report)
        except Exception as exc:  # noqa: BLE001
            report.add(crashed(5, "/", exc, what=what))


def _pyramid(model: StoreModel, report: Report) -> None:
    for code in ("L5_LEVELS_CONTIGUOUS", "L5_PARENT_CHAIN", "L5_CHUNK_SHAPE_MULTIPLE", "L5_BIN_DIVIDES_CHUNK",
                 "L5_BIN_RATIO", "L5_BIN_VOLUME", "L5_VERTEX_COUNT", "L5_INHERITED_NUM_OBJECTS"):
        report.ran_rule(code)
    numbers = sorted(model.levels)
    if numbers != list(range(len(numbers))):
        report.add(make("L5_LEVELS_CONTIGUOUS", "/", f"levels are {numbers}, expected 0..{len(numbers) - 1}"))
    root_cs = [float(v) for v in model.zv["chunk_shape"]]
    prev: dict[str, Any] | None = None
    for number in numbers:
        lpath = model.levels[number]
        attrs = model.level_attrs(number)
        if number > 0 and number - 1 in model.levels and attrs.get("parent_level") != number - 1:
            report.add(make("L5_PARENT_CHAIN", lpath, f"parent_level is {attrs.get('parent_level')!r}, expected "
                            f"{number - 1}", pointer="/attributes/zarr_vectors_level/parent_level"))
        if "chunk_shape" in attrs:
            for i, (c, r) in enumerate(zip(attrs["chunk_shape"], root_cs)):
                if whole_ratio(c, r) is None:
                    report.add(make("L5_CHUNK_SHAPE_MULTIPLE", lpath, f"chunk_shape[{i}]={c} is not a positive integer "
                                    f"multiple of the root's {r}", pointer="/attributes/zarr_vectors_level/chunk_shape"))
        cs = level_chunk_shape(model, number)
        transform = level_transform(model, number)
        if transform is None:
            prev = None
            continue
        scale, translation = transform
        bins = [2.0 * t for t in translation]
        for i, (b, c) in enumerate(zip(bins, cs)):
            if b <= c and whole_ratio(c, b) is None:
                report.add(make("L5_BIN_DIVIDES_CHUNK", lpath, f"bin_shape[{i}]={b} (from the NGFF translation) "
                                f"does not divide chunk_shape[{i}]={c}"))
        pointer = f"/attributes/multiscales/0/datasets/{number}"
        if any(s < 1 for s in scale):
            report.add(make("L5_BIN_RATIO", "/", f"level {number} bin_ratio {list(scale)} has an entry below 1",
                            pointer=pointer))
        volume = math.prod(bins)
        vc = attrs.get("vertex_count")
        if prev is not None:
            if any(s < p for s, p in zip(scale, prev["scale"])):
                report.add(make("L5_BIN_RATIO", "/", f"level {number} bin_ratio {list(scale)} decreases from level "
                                f"{prev['number']}'s {list(prev['scale'])}", pointer=pointer))
            if volume < prev["volume"] * (1 - 1e-9):
                report.add(make("L5_BIN_VOLUME", lpath, f"bin volume {volume:g} is smaller than level "
                                f"{prev['number']}'s {prev['volume']:g}"))
            if is_int(vc) and is_int(prev["vc"]) and vc > prev["vc"]:
                report.add(make("L5_VERTEX_COUNT", lpath, f"{vc} vertices, more than level {prev['number']}'s "
                                f"{prev['vc']}"))
        prev = {"number": number, "scale": scale, "volume": volume, "vc": vc}
        if attrs.get("preserves_object_ids") is True and number > 0:
            parent = attrs.get("parent_level")
            parent = parent if is_int(parent) and parent in model.levels else number - 1
            pindex = model.nodes.get(f"{model.levels.get(parent, '')}/object_index")
            slots = pindex.attrs.get("num_objects") if pindex is not None else 0
            inherited = attrs.get("inherited_num_objects")
            if inherited != slots or not is_int(inherited):
                report.add(make("L5_INHERITED_NUM_OBJECTS", lpath, f"inherited_num_objects is {inherited!r}, the "
                                f"parent level {parent} has {slots} object slots",
                                pointer="/attributes/zarr_vectors_level"))
            own = model.nodes.get(f"{lpath}/object_index")
            if own is not None and is_int(slots) and own.attrs.get("num_objects") != slots:
                # ids keep their meaning: a dropped object keeps its (empty) slot, no new one appears
                report.add(make("L5_INHERITED_NUM_OBJECTS", f"{lpath}/object_index", f"num_objects is "
                                f"{own.attrs.get('num_objects')!r}, but the level preserves the object ids of level "
                                f"{parent}, which has {slots} object slots", pointer="/attributes/num_objects"))


def _cross_level(model: StoreModel, report: Report) -> None:
    for code in ("L5_CROSS_LEVEL_STORAGE", "L5_MULTISCALE_LINKS_TOKEN", "L5_CROSS_LEVEL_TARGET"):
        report.ran_rule(code)
    zv = model.zv
    storage = zv.get("cross_level_storage", "explicit")
    depth = zv.get("cross_level_depth", 1)
    numbers = sorted(model.levels)
    fams = families(model)
    present = {(lv, d) for (lv, d) in fams if d != 0}
    max_n = len(numbers) - 1 if depth == -1 else depth
    required: set[tuple[int, int]] = set()
    if storage in ("implicit", "explicit") and is_int(max_n):
        for i, fine in enumerate(numbers):  # pairs of levels present: the depth is a stored number, never a loop bound
            for coarse in numbers[i + 1 :]:
                n = coarse - fine
                if n > max_n:
                    break
                required.add((fine, n))
                if storage == "explicit":
                    required.add((coarse, -n))
    for lv, d in sorted(required - present):
        report.add(make("L5_CROSS_LEVEL_STORAGE", model.levels[lv], f"cross_level_storage {storage!r} with depth "
                        f"{depth} needs links/{format_delta(d)} at level {lv}"))
    for lv, d in sorted(present - required):
        report.add(make("L5_CROSS_LEVEL_STORAGE", fams[(lv, d)].path, f"cross_level_storage {storage!r} with depth "
                        f"{depth} allows no links/{format_delta(d)} family at level {lv}"))
    for lv, d in sorted(present):
        if lv + d not in model.levels:
            report.add(make("L5_CROSS_LEVEL_TARGET", fams[(lv, d)].path, f"targets level {lv + d}, which does not "
                            "exist"))
    caps = zv.get("format_capabilities") or []
    has_token = isinstance(caps, list) and "multiscale_links" in caps
    if has_token != bool(present):
        what = ("the multiscale_links capability is stamped but no delta != 0 family exists" if has_token else
                "delta != 0 families exist but the multiscale_links capability is missing")
        report.add(make("L5_MULTISCALE_LINKS_TOKEN", "/", what, pointer="/attributes/zarr_vectors/format_capabilities"))
