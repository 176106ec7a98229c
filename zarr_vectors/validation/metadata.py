"""Level 2 — metadata: root, level, family and array attributes, checked without reading cells.

The root and level members follow the one table of :mod:`zarr_vectors.format.schema` (the
strict parser applies it too, stopping at the first problem); here every problem is
collected and becomes a finding with a stable code and a JSON pointer.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zarr_vectors.errors import MetadataError
from zarr_vectors.format.coarsen import AGGREGATION_MEMBER
from zarr_vectors.format.headers import READ_BACK, header_path, header_problems, with_root_hint
from zarr_vectors.format.metadata import OBJECT_INDEX_LAYOUT
from zarr_vectors.format.paths import (
    LEVEL_NAME,
    format_delta,
    parse_chunk_key,
    parse_chunk_keys,
    parse_delta,
    parse_offsets,
)
from zarr_vectors.format.schema import (
    CHUNK_GRID,
    DATA_TYPE,
    FAMILY_COUNT_FIELDS,
    FAMILY_STORES,
    FILL_VALUE,
    KEY_ENCODING,
    LEVEL_FIELDS,
    LINKS_FAMILY_FIELDS,
    OBJECT_INDEX_FIELDS,
    ROOT_FIELDS,
    ROW_LAYOUT,
    Field,
    array_problems,
    check,
    expected_at,
    is_finite_number,
    is_int,
    json_equal,
    problem,
    row_layout_problem,
    short,
    vertices_row_dtype,
    whole_ratio,
)
from zarr_vectors.store.codecs import Pipeline
from zarr_vectors.validation.findings import Report, crashed, make
from zarr_vectors.validation.structure import CellCodec, StoreModel, origin_of

ZV = "/attributes/zarr_vectors"
LV = "/attributes/zarr_vectors_level"

# the finding code of each schema field the validator reports (a missing member of the root
# block is L2_ROOT_REQUIRED, except zv_version); the level block's coarsening_method is any JSON
# value and has no code (level 5 compares inherited_num_objects with the parent level)
ROOT_CODES: dict[str, str] = {
    "zv_version": "L2_ZV_VERSION",
    "chunk_shape": "L2_CHUNK_SHAPE",
    "bounds": "L2_BOUNDS",
    "geometry_types": "L2_GEOMETRY_TYPES",
    "format_capabilities": "L2_CAPABILITIES",
    "base_bin_shape": "L2_BASE_BIN_SHAPE",
    "links_convention": "L2_LINKS_CONVENTION",
    "object_index_convention": "L2_OBJECT_INDEX_CONVENTION",
    "cross_chunk_strategy": "L2_CROSS_CHUNK_STRATEGY",
    "cross_level_depth": "L2_CROSS_LEVEL_DEPTH",
    "cross_level_storage": "L2_CROSS_LEVEL_STORAGE",
}
ROOT_MISSING_CODES: dict[str, str] = {
    name: "L2_ZV_VERSION" if name == "zv_version" else "L2_ROOT_REQUIRED" for name in ROOT_CODES
}
LEVEL_CODES: dict[str, str] = {
    "vertex_count": "L2_VERTEX_COUNT",
    "arrays_present": "L2_ARRAYS_PRESENT",
    "object_sparsity": "L2_OBJECT_SPARSITY",
    "chunk_shape": "L2_LEVEL_CHUNK_SHAPE",
    "preserves_object_ids": "L2_LEVEL_FLAGS",
    "shared_fragments": "L2_LEVEL_FLAGS",
    "fragments_tile": "L2_LEVEL_FLAGS",
    "inherited_num_objects": "L2_LEVEL_FLAGS",
    AGGREGATION_MEMBER: "L2_ATTRIBUTE_AGGREGATION",
}
# the open token sets: a token outside the known ones is a warning, not an error
OPEN_SET_WARNINGS: dict[str, tuple[str, str]] = {
    "geometry_types": ("L2_CUSTOM_GEOMETRY", "custom geometry type {!r}: level 4 does not check it"),
    "format_capabilities": ("L2_UNKNOWN_CAPABILITY", "unknown format capability {!r} (the token set is open: "
                                                     "readers carry on)"),
}


def check_metadata(model: StoreModel, report: Report) -> None:
    for what, fn in (("root", _check_root), ("levels", _check_levels), ("links families", _check_families),
                     ("arrays", _check_arrays), ("object index", _check_object_index), ("headers", _check_headers)):
        try:
            fn(model, report)
        except Exception as exc:  # noqa: BLE001 - a crash is a finding
            report.add(crashed(2, "/", exc, what=what))


def _check_headers(model: StoreModel, report: Report) -> None:
    """The members of the format headers an export reads (``headers/trk`` ...), as it reads them.  A
    warning: the format is whole without them (the reference's TRK ingest copies a file's
    dimensions of 0 as they are), but an export leaves a failing header out, or, for positions in
    TrackVis voxel mm, refuses the store."""
    report.ran_rule("L2_HEADER_MEMBERS")
    found = {name: node.attrs for name in READ_BACK
             if (node := model.nodes.get(header_path(name))) is not None and node.node_type == "group"}
    try:
        found = with_root_hint(found, model.root.attrs.get("crs") if model.root else None)
    except MetadataError as exc:
        report.add(make("L2_HEADER_MEMBERS", "/", exc.reason, pointer=exc.pointer))
    for name, exc in header_problems(found).items():
        report.add(make("L2_HEADER_MEMBERS", header_path(name), exc.reason, pointer=exc.pointer))


def _check_fields(fields: dict[str, Field], codes: dict[str, str], missing_codes: dict[str, str],
                  block: dict[str, Any], sid_ndim: int | None, node: str, pointer: str, report: Report) -> None:
    """Every schema rule of one metadata block: a problem under the field's code, a missing member
    under its ``missing_codes`` entry."""
    for name, code in codes.items():
        found = check(fields[name], block, sid_ndim)
        if found is not None:
            suffix, message = found
            report.add(make(code if suffix else missing_codes[name], node, message, pointer=pointer + suffix))
        elif name in OPEN_SET_WARNINGS and name in block:
            warn, text = OPEN_SET_WARNINGS[name]
            for token in block[name]:
                if token not in fields[name].allowed:
                    report.add(make(warn, node, text.format(token), pointer=f"{pointer}/{name}"))


# ---------------------------------------------------------------------------
# root
# ---------------------------------------------------------------------------
def _check_root(model: StoreModel, report: Report) -> None:
    zv = model.zv
    for code in ("L2_ZV_VERSION", "L2_ROOT_REQUIRED", "L2_SID_NDIM", "L2_CHUNK_SHAPE", "L2_BOUNDS",
                 "L2_LINKS_CONVENTION", "L2_OBJECT_INDEX_CONVENTION", "L2_CROSS_CHUNK_STRATEGY",
                 "L2_CROSS_LEVEL_STORAGE", "L2_CROSS_LEVEL_DEPTH", "L2_GEOMETRY_TYPES", "L2_CUSTOM_GEOMETRY",
                 "L2_CAPABILITIES", "L2_UNKNOWN_CAPABILITY", "L2_BASE_BIN_SHAPE", "L2_MULTISCALES_DATASETS"):
        report.ran_rule(code)
    # multiscales axes are NGFF, not a zarr_vectors member: their codes are level-2 only
    axes = model.axes
    ms = model.root.attrs.get("multiscales")
    if axes is None:
        report.add(make("L2_ROOT_REQUIRED", "/", "multiscales[0].axes is missing (a non-empty list of axes)",
                        pointer="/attributes/multiscales"))
    elif not axes:
        report.add(make("L2_SID_NDIM", "/", "multiscales[0].axes is empty: sid_ndim must be >= 1",
                        pointer="/attributes/multiscales/0/axes"))
    elif not all(isinstance(a, dict) and isinstance(a.get("name"), str) for a in axes):
        report.add(make("L2_ROOT_REQUIRED", "/", "every multiscales axis must be an object with a name",
                        pointer="/attributes/multiscales/0/axes"))
    d = len(axes) if axes else None
    _check_fields(ROOT_FIELDS, ROOT_CODES, ROOT_MISSING_CODES, zv, d, "/", ZV, report)
    # cross-field: base_bin_shape must divide chunk_shape (the table states one member at a time)
    cs, bb = zv.get("chunk_shape"), zv.get("base_bin_shape")
    if "base_bin_shape" in zv and problem(ROOT_FIELDS["base_bin_shape"], bb, d) is None and check(
            ROOT_FIELDS["chunk_shape"], zv) is None and len(cs) == len(bb):
        for i, (c, b) in enumerate(zip(cs, bb)):
            if whole_ratio(c, b) is None:
                report.add(make("L2_BASE_BIN_SHAPE", "/", f"base_bin_shape[{i}]={b} does not divide "
                                f"chunk_shape[{i}]={c} (ratio {c / b})", pointer=ZV + "/base_bin_shape"))
    # NGFF datasets: one per level
    datasets = ms[0].get("datasets") if isinstance(ms, list) and ms and isinstance(ms[0], dict) else None
    if not isinstance(datasets, list):
        report.add(make("L2_MULTISCALES_DATASETS", "/", "multiscales[0].datasets is missing",
                        pointer="/attributes/multiscales/0"))
        return
    by_path: dict[str, int] = {}
    for i, ds in enumerate(datasets):
        p = f"/attributes/multiscales/0/datasets/{i}"
        if not isinstance(ds, dict) or not isinstance(ds.get("path"), str):
            report.add(make("L2_MULTISCALES_DATASETS", "/", "dataset needs a string path", pointer=p))
            continue
        if ds["path"] in by_path:
            report.add(make("L2_MULTISCALES_DATASETS", "/", f"two datasets for path {ds['path']!r}", pointer=p))
        by_path[ds["path"]] = i
        if dataset_transform(ds, d) is None:
            report.add(make("L2_MULTISCALES_DATASETS", "/", f"dataset {ds['path']!r} needs a scale and a translation "
                            f"of {d} finite numbers, both > 0", pointer=p))
    for number, name in sorted(model.levels.items()):
        if name not in by_path:
            report.add(make("L2_MULTISCALES_DATASETS", "/", f"no multiscales dataset for level {name}",
                            pointer="/attributes/multiscales/0/datasets"))
    if "0" in by_path:
        _check_level0_transform(zv, datasets[by_path["0"]], d, f"/attributes/multiscales/0/datasets/{by_path['0']}",
                                report)
    for path in by_path:
        if not (LEVEL_NAME.fullmatch(path) and int(path) in model.levels):
            report.add(make("L2_MULTISCALES_DATASETS", "/", f"multiscales dataset {path!r} names no level",
                            pointer=f"/attributes/multiscales/0/datasets/{by_path[path]}"))


def _check_level0_transform(zv: dict[str, Any], ds: Any, d: int | None, pointer: str, report: Report) -> None:
    """Level 0's bin shape is stated twice (format.md §3.2): ``base_bin_shape`` (the chunk shape
    when absent) and the NGFF transform, scale all 1 and translation half the bin.  Our readers
    take bins from the transform; one going by ``base_bin_shape`` must see the same bins."""
    transform = dataset_transform(ds, d)
    bins = zv.get("base_bin_shape", zv.get("chunk_shape"))
    if transform is None or problem(ROOT_FIELDS["chunk_shape"], bins, d) is not None:
        return  # their own rules report them
    scale, translation = transform
    if any(v != 1.0 for v in scale):
        report.add(make("L2_MULTISCALES_DATASETS", "/", f"level 0's scale is {list(scale)}, not all 1",
                        pointer=pointer))
    if not all(math.isclose(2.0 * t, float(b), rel_tol=1e-9) for t, b in zip(translation, bins)):
        stated = "base_bin_shape" if "base_bin_shape" in zv else "chunk_shape (no base_bin_shape)"
        report.add(make("L2_MULTISCALES_DATASETS", "/", f"level 0's translation {list(translation)} is not half its "
                        f"bin shape {list(bins)} ({stated}): readers would disagree on the bins", pointer=pointer))


def dataset_transform(ds: Any, d: int | None) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """(scale, translation) of a dataset entry, or None when unusable."""
    if not isinstance(ds, dict):
        return None
    scale = translation = None
    transforms = ds.get("coordinateTransformations")
    for t in transforms if isinstance(transforms, list) else []:
        if not isinstance(t, dict):
            continue
        kind = t.get("type")
        values = t.get(kind) if kind in ("scale", "translation") else None
        if values is None:
            continue
        if not isinstance(values, list) or not all(is_finite_number(v) and v > 0 for v in values):
            return None
        if d is not None and len(values) != d:
            return None
        if kind == "scale":
            scale = tuple(float(v) for v in values)
        else:
            translation = tuple(float(v) for v in values)
    if scale is None or translation is None:
        return None
    return scale, translation


def level_transform(model: StoreModel, number: int) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    ms = model.root.attrs.get("multiscales") if model.root else None
    datasets = ms[0].get("datasets") if isinstance(ms, list) and ms and isinstance(ms[0], dict) else None
    for ds in datasets if isinstance(datasets, list) else []:
        if isinstance(ds, dict) and ds.get("path") == str(number):
            return dataset_transform(ds, model.sid_ndim)
    return None


def level_bin_shape(model: StoreModel, number: int) -> tuple[float, ...] | None:
    """A level's bin shape, from its transform (whose translation is half a bin)."""
    transform = level_transform(model, number)
    return tuple(2.0 * t for t in transform[1]) if transform else None


def level_chunk_shape(model: StoreModel, number: int) -> tuple[float, ...]:
    override = model.level_attrs(number).get("chunk_shape")
    if override is not None and problem(LEVEL_FIELDS["chunk_shape"], override) is None:
        return tuple(float(v) for v in override)
    return tuple(float(v) for v in model.zv["chunk_shape"])


# ---------------------------------------------------------------------------
# levels
# ---------------------------------------------------------------------------
def _check_levels(model: StoreModel, report: Report) -> None:
    for code in ("L2_LEVEL_BLOCK", "L2_LEVEL_NUMBER", "L2_VERTEX_COUNT", "L2_ARRAYS_PRESENT", "L2_OBJECT_SPARSITY",
                 "L2_PARENT_LEVEL", "L2_LEVEL_CHUNK_SHAPE", "L2_LEVEL_FLAGS", "L2_ATTRIBUTE_AGGREGATION"):
        report.ran_rule(code)
    d = model.sid_ndim
    for number, name in sorted(model.levels.items()):
        node = model.nodes[name]
        block = node.attrs.get("zarr_vectors_level")
        if not isinstance(block, dict):
            report.add(make("L2_LEVEL_BLOCK", name, "no zarr_vectors_level block", pointer="/attributes"))
            continue
        # cross-field: level must equal the group's name
        level = block.get("level")
        if level != number or check(LEVEL_FIELDS["level"], block) is not None:
            report.add(make("L2_LEVEL_NUMBER", name, f"level is {short(level)}, the group is named {name}",
                            pointer=LV + "/level"))
        _check_fields(LEVEL_FIELDS, LEVEL_CODES, LEVEL_CODES, block, d, name, LV, report)
        present = block.get("arrays_present")
        if isinstance(present, list) and "vertices" not in present:  # cross-field: every level holds vertices
            report.add(make("L2_ARRAYS_PRESENT", name, "arrays_present does not list 'vertices', which every level "
                            "holds: a level still being written, or one whose writer was stopped",
                            pointer=LV + "/arrays_present"))
        _check_aggregation(model, number, name, block, report)
        # cross-field: parent_level depends on the level's number and on the levels present
        parent = block.get("parent_level")
        if number == 0:
            if parent is not None:
                report.add(make("L2_PARENT_LEVEL", name, f"parent_level of level 0 must be null, found "
                                f"{short(parent)}", pointer=LV + "/parent_level"))
        elif not is_int(parent) or parent >= number or parent not in model.levels or parent < 0:
            report.add(make("L2_PARENT_LEVEL", name, f"parent_level must name an existing lower level, found "
                            f"{short(parent)}", pointer=LV + "/parent_level"))


def _check_aggregation(model: StoreModel, number: int, name: str, block: dict[str, Any], report: Report) -> None:
    """Cross-field (D22): a level's reductions name vertex attributes it has, and only coarse levels have them."""
    rules = block.get(AGGREGATION_MEMBER)
    if not isinstance(rules, dict):
        return
    pointer = f"{LV}/{AGGREGATION_MEMBER}"
    if number == 0 and rules:
        report.add(make("L2_ATTRIBUTE_AGGREGATION", name, "level 0 aggregates nothing: it has no parent level",
                        pointer=pointer))
    for attr in sorted(k for k in rules if isinstance(k, str)):
        if f"{name}/vertex_attributes/{attr}" not in model.nodes:
            report.add(make("L2_ATTRIBUTE_AGGREGATION", name, f"names {attr!r}, which is not a vertex attribute of "
                            "the level", pointer=f"{pointer}/{attr}"))


# ---------------------------------------------------------------------------
# links families
# ---------------------------------------------------------------------------
def family_policy(model: StoreModel, number: int, delta: int) -> dict[str, Any] | None:
    """The family's policy when every field is usable (checked here at L2)."""
    node = model.nodes.get(f"{model.levels[number]}/links/{format_delta(delta)}")
    if node is None:
        return None
    a = node.attrs
    if not (is_int(a.get("link_width")) and a["link_width"] >= 1 and isinstance(a.get("directed", False), bool)
            and a.get("store", "canonical") in FAMILY_STORES and is_int(a.get("sid_ndim"))):
        return None
    return {"link_width": a["link_width"], "directed": a.get("directed", False), "store": a.get("store", "canonical"),
            "sid_ndim": a["sid_ndim"], "num_links": a.get("num_links"),
            "num_physical_records": a.get("num_physical_records")}


# the family's policy members checked one at a time (sid_ndim and level_delta are cross-field, below)
FAMILY_CODES: dict[str, str] = {
    "link_width": "L2_FAMILY_LINK_WIDTH",
    "directed": "L2_FAMILY_DIRECTED",
    "store": "L2_FAMILY_STORE",
}


def _check_families(model: StoreModel, report: Report) -> None:
    for code in ("L2_FAMILY_LINK_WIDTH", "L2_FAMILY_DIRECTED", "L2_FAMILY_STORE", "L2_FAMILY_SID_NDIM",
                 "L2_FAMILY_LEVEL_DELTA", "L2_FAMILY_COUNTS", "L2_LINKS_ARRAY_AGREES"):
        report.ran_rule(code)
    for number, name in sorted(model.levels.items()):
        rank = model.grid_rank(number)
        links = model.nodes.get(f"{name}/links")
        for fam in model.children(f"{name}/links") if links else []:
            try:
                delta = parse_delta(fam.name)
            except ValueError:
                continue
            a = fam.attrs
            w = a.get("link_width")
            for field, code in FAMILY_CODES.items():
                found = check(LINKS_FAMILY_FIELDS[field], a)
                if found is not None:
                    report.add(make(code, fam.path, found[1], pointer="/attributes" + found[0]))
            sid = a.get("sid_ndim")
            if not is_int(sid) or (rank is not None and sid != rank):
                report.add(make("L2_FAMILY_SID_NDIM", fam.path, f"sid_ndim must be {rank}, found {short(sid)}",
                                pointer="/attributes/sid_ndim"))
            if not json_equal(a.get("level_delta"), delta):
                report.add(make("L2_FAMILY_LEVEL_DELTA", fam.path, f"level_delta is {short(a.get('level_delta'))}, "
                                f"the path says {delta}", pointer="/attributes/level_delta"))
            _check_family_counts(fam, report)
            for arr in model.children(fam.path):
                _check_links_array(arr, delta, w if is_int(w) else None, sid if is_int(sid) else rank, report)
        # link attribute families
        la = model.nodes.get(f"{name}/link_attributes")
        for attr_group in model.children(f"{name}/link_attributes") if la else []:
            for fam in model.children(attr_group.path):
                try:
                    delta = parse_delta(fam.name)
                except ValueError:
                    continue
                _check_family_counts(fam, report)
                if not json_equal(fam.attrs.get("level_delta"), delta):
                    report.add(make("L2_FAMILY_LEVEL_DELTA", fam.path, f"level_delta is "
                                    f"{short(fam.attrs.get('level_delta'))}, the path says {delta}",
                                    pointer="/attributes/level_delta"))
                pol = family_policy(model, number, delta)
                for arr in model.children(fam.path):
                    _check_link_attribute_array(arr, delta, pol, rank, report)


def _offsets_value(segment: str, width: int | None, sid: int | None) -> list[list[int]] | None:
    if width is None or sid is None or width < 1 or sid < 1:
        return None
    try:
        return [list(o) for o in parse_offsets(segment, link_width=width, sid_ndim=sid)]
    except ValueError:
        return None


def _check_family_counts(fam: Any, report: Report) -> None:
    for f in FAMILY_COUNT_FIELDS.values():
        found = check(f, fam.attrs)
        if found is not None:
            report.add(make("L2_FAMILY_COUNTS", fam.path, found[1], pointer="/attributes" + found[0]))


def _check_links_array(arr: Any, delta: int, width: int | None, sid: int | None, report: Report) -> None:
    a = arr.attrs
    problems = []
    if width is not None and not json_equal(a.get("link_width"), width):
        problems.append(("link_width", f"link_width {short(a.get('link_width'))} disagrees with the family's {width}"))
    if not json_equal(a.get("level_delta"), delta):
        problems.append(("level_delta", f"level_delta {short(a.get('level_delta'))} disagrees with the path's {delta}"))
    want = _offsets_value(arr.name, width, sid)
    if want is not None and "offsets" in a and not json_equal(a["offsets"], want):
        problems.append(("offsets", f"offsets field {short(a['offsets'])} disagrees with the path segment "
                                    f"{arr.name!r} ({want})"))
    if "has_perm" in a and not isinstance(a["has_perm"], bool):
        problems.append(("has_perm", f"has_perm must be a boolean, found {short(a['has_perm'])}"))
    for key, message in problems:
        report.add(make("L2_LINKS_ARRAY_AGREES", arr.path, message, pointer=f"/attributes/{key}"))


def _check_link_attribute_array(arr: Any, delta: int, pol: dict[str, Any] | None, rank: int | None,
                                report: Report) -> None:
    a = arr.attrs
    if not json_equal(a.get("level_delta"), delta):
        report.add(make("L2_LINKS_ARRAY_AGREES", arr.path, f"level_delta {short(a.get('level_delta'))} disagrees "
                        f"with the path's {delta}", pointer="/attributes/level_delta"))
    if pol is not None:
        want = _offsets_value(arr.name, pol["link_width"], pol["sid_ndim"])
        if want is not None and "offsets" in a and not json_equal(a["offsets"], want):
            report.add(make("L2_LINKS_ARRAY_AGREES", arr.path, f"offsets field {short(a['offsets'])} disagrees with "
                            f"the path segment {arr.name!r}", pointer="/attributes/offsets"))


# ---------------------------------------------------------------------------
# arrays: what the format requires of each kind; grid arrays' codecs and nonempty_chunks
# ---------------------------------------------------------------------------
ARRAY_CODES: dict[str, str] = {
    DATA_TYPE: "L2_DATA_TYPE",
    FILL_VALUE: "L2_FILL_VALUE",
    KEY_ENCODING: "L2_CHUNK_KEY_ENCODING",
    CHUNK_GRID: "L2_CHUNK_GRID",
    ROW_LAYOUT: "L2_ARRAY_DTYPE",
}


def attribute_layout(attrs: dict[str, Any]) -> tuple[np.dtype, int] | None:
    """(little-endian dtype, values per row) of an attribute array, or None when unusable."""
    if row_layout_problem("attribute", attrs) is not None:
        return None
    rs = attrs.get("row_shape", [])
    return np.dtype(attrs["dtype"]).newbyteorder("<"), math.prod(rs)


def vertices_dtype(attrs: dict[str, Any]) -> np.dtype | None:
    stated = {"dtype": attrs["dtype"]} if "dtype" in attrs else {}  # absent: the format's default
    return None if row_layout_problem("vertices", stated) is not None else vertices_row_dtype(attrs)


def _check_arrays(model: StoreModel, report: Report) -> None:
    for code in (*ARRAY_CODES.values(), "L2_CODECS", "L2_NONEMPTY_CHUNKS", "L2_NONEMPTY_UNSORTED"):
        report.ran_rule(code)
    for number, lpath in sorted(model.levels.items()):
        for path, node in sorted(model.nodes.items()):
            if not path.startswith(lpath + "/") or node.node_type != "array":
                continue
            expected = expected_at(path)  # level 1 has checked the node type and discriminator
            if expected is not None and expected.node_type == "array":
                for p in array_problems(expected.rule_kind, node.doc):
                    report.add(make(ARRAY_CODES[p.rule], path, p.message, pointer=p.pointer))
        for node in model.grid_arrays(number):
            try:
                CellCodec(node.doc, file=f"{node.path}/zarr.json")
            except Exception as exc:  # noqa: BLE001
                reason = getattr(exc, "reason", str(exc))
                report.add(make("L2_CODECS", node.path, reason, pointer=getattr(exc, "pointer", "") or "/codecs"))
            _check_nonempty(node, report)
        _check_link_attribute_layouts(model, lpath, report)
        for node in typed_arrays(model, number):  # the reader's own pipeline refuses what it cannot decode
            try:
                Pipeline.from_codecs(node.doc.get("codecs"), file=f"{node.path}/zarr.json")
            except MetadataError as exc:
                report.add(make("L2_CODECS", node.path, exc.reason, pointer=exc.pointer or "/codecs"))


def _check_link_attribute_layouts(model: StoreModel, lpath: str, report: Report) -> None:
    """One row layout per link-attribute family (``link_attributes/<name>/<delta>``): a reader
    joins the family's cells into one column, so its arrays holding cells must agree on dtype
    and row_shape (the reader refuses the family otherwise)."""
    if f"{lpath}/link_attributes" not in model.nodes:
        return
    for name in model.children(f"{lpath}/link_attributes"):
        for family in model.children(name.path):
            first: tuple[Any, Any, str] | None = None
            for node in model.children(family.path):
                if (node.node_type != "array" or not node.attrs.get("nonempty_chunks")
                        or row_layout_problem("link_attribute", node.attrs) is not None):  # reported on its own
                    continue
                layout = (node.attrs["dtype"], node.attrs.get("row_shape", []))
                if first is None:
                    first = (*layout, node.path)
                elif layout != first[:2]:
                    report.add(make("L2_ARRAY_DTYPE", node.path, f"dtype/row_shape {short(layout[0])}/"
                                    f"{short(layout[1])} differ from {first[2]}'s {short(first[0])}/{short(first[1])}: "
                                    "a link-attribute family has one row layout", pointer="/attributes/dtype"))
                    break


def typed_arrays(model: StoreModel, number: int) -> list[Any]:
    """A level's numeric (typed) arrays: its object attributes and a v2 index's ``object_ids``."""
    lpath = model.levels[number]
    group = f"{lpath}/object_attributes"
    nodes = model.children(group) if group in model.nodes else []
    ids = model.nodes.get(f"{lpath}/object_index/object_ids")
    return [n for n in (*nodes, *([ids] if ids else [])) if n.node_type == "array" and n.doc]


def _check_nonempty(node: Any, report: Report) -> None:
    a = node.attrs
    keys = a.get("nonempty_chunks")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        report.add(make("L2_NONEMPTY_CHUNKS", node.path, f"nonempty_chunks must be a list of dotted chunk keys, "
                        f"found {short(keys)}", pointer="/attributes" + ("/nonempty_chunks" if "nonempty_chunks" in a
                                                                          else "")))
        return
    shape = node.doc.get("shape")
    origin = origin_of(node)
    ndim = len(shape) if isinstance(shape, list) else None
    cells = math.prod(shape) if ndim and all(isinstance(v, int) and v >= 0 for v in shape) else None
    if cells is not None and len(keys) > cells:
        # more than the grid holds: repeats or strays. Said once; the entries checked one by one are the
        # first cells + 1, among which one is wrong (not millions of findings over millions of keys)
        report.add(make("L2_NONEMPTY_CHUNKS", node.path, f"nonempty_chunks lists {len(keys)} cells, more than the "
                        f"{cells} of the array's shape {shape}", pointer="/attributes/nonempty_chunks"))
        keys = keys[: cells + 1]
    if not _nonempty_clean(keys, ndim, origin, shape):
        _nonempty_findings(node, keys, ndim, origin, shape, report)
    if keys != sorted(keys):
        report.add(make("L2_NONEMPTY_UNSORTED", node.path, "nonempty_chunks is not sorted as strings",
                        pointer="/attributes/nonempty_chunks"))


def _nonempty_clean(keys: list[str], ndim: int | None, origin: Any, shape: Any) -> bool:
    """Whether every key is canonical, distinct and inside the grid, checked for the whole list at once
    (a store lists thousands); when not, the key-by-key pass says which and why."""
    if not ndim or len(set(keys)) != len(keys):
        return False
    try:
        coords = parse_chunk_keys(keys, ndim)
    except (ValueError, TypeError):
        return False
    if origin is None or not all(isinstance(s, int) for s in shape):
        return True
    if len(origin) != ndim:
        return False
    # the grid's bounds in Python ints: ``coords - origin`` could wrap past int64
    lo, hi = list(origin), [o + s for o, s in zip(origin, shape)]
    if not all(-(1 << 63) <= v < 1 << 63 for v in lo + hi):
        return False
    return not ((coords < np.asarray(lo, dtype=np.int64)) | (coords >= np.asarray(hi, dtype=np.int64))).any()


def _nonempty_findings(node: Any, keys: list[str], ndim: int | None, origin: Any, shape: Any, report: Report) -> None:
    seen: set[str] = set()
    for i, k in enumerate(keys):
        try:
            c = parse_chunk_key(k, ndim)
        except (ValueError, TypeError) as exc:
            report.add(make("L2_NONEMPTY_CHUNKS", node.path, str(exc), pointer=f"/attributes/nonempty_chunks/{i}"))
            continue
        if k in seen:
            report.add(make("L2_NONEMPTY_CHUNKS", node.path, f"key {k!r} is listed twice",
                            pointer=f"/attributes/nonempty_chunks/{i}"))
        seen.add(k)
        if origin is not None and ndim is not None and all(isinstance(s, int) for s in shape):
            idx = [v - o for v, o in zip(c, origin)]
            if any(j < 0 or j >= s for j, s in zip(idx, shape)):
                report.add(make("L2_NONEMPTY_CHUNKS", node.path, f"key {k!r} lies outside the array's grid (origin "
                                f"{list(origin)}, shape {shape})", pointer=f"/attributes/nonempty_chunks/{i}"))


# ---------------------------------------------------------------------------
# object index
# ---------------------------------------------------------------------------
def _check_object_attributes(model: StoreModel, number: int, num_objects: Any, report: Report) -> None:
    """One row per object-index row (§6.8: row i belongs to manifest row i)."""
    lpath = model.levels[number]
    group = model.nodes.get(f"{lpath}/object_attributes")
    for node in model.children(f"{lpath}/object_attributes") if group is not None else []:
        shape = node.doc.get("shape") if node.doc and node.node_type == "array" else None
        if not isinstance(shape, list) or not shape:
            continue
        if is_int(num_objects) and shape[0] != num_objects:
            report.add(make("L2_OBJECT_ATTRIBUTE_ROWS", node.path, f"{short(shape[0])} rows, the object index has "
                            f"{num_objects}", pointer="/shape/0"))
        declared = node.attrs.get("shape", shape)
        if declared != shape:
            report.add(make("L2_OBJECT_ATTRIBUTE_ROWS", node.path, f"attributes.shape {short(declared)} disagrees "
                            f"with the array's shape {short(shape)}", pointer="/attributes/shape"))


def _check_object_index(model: StoreModel, report: Report) -> None:
    report.ran_rule("L2_OBJECT_INDEX_LAYOUT")
    report.ran_rule("L2_OBJECT_INDEX_COUNTS")
    report.ran_rule("L2_OBJECT_ATTRIBUTE_ROWS")
    for number, name in sorted(model.levels.items()):
        group = model.nodes.get(f"{name}/object_index")
        if group is None or group.node_type != "group":
            continue
        a = group.attrs
        layout = a.get("layout")  # no default: a missing layout is not v1 (D1), as the reader says
        if layout != OBJECT_INDEX_LAYOUT:
            allowed = layout in model.allow_layouts and layout == "vlen_manifests_v2"
            hint = "" if allowed else (" (pass allow_layouts=('vlen_manifests_v2',) / --allow-layout "
                                       "vlen_manifests_v2 to read it by its documented contract)"
                                       if layout == "vlen_manifests_v2" else "")
            report.add(make("L2_OBJECT_INDEX_LAYOUT", group.path, f"object_index layout {short(layout)} is not "
                            f"{OBJECT_INDEX_LAYOUT!r}{' (allowed by the caller)' if allowed else ''}{hint}",
                            pointer="/attributes/layout", severity="warning" if allowed else None))
        no, npres, sid = a.get("num_objects"), a.get("num_present"), a.get("sid_ndim")
        rank = model.grid_rank(number)
        _check_object_attributes(model, number, no, report)
        for f in OBJECT_INDEX_FIELDS.values():
            found = check(f, a)
            if found is not None:
                report.add(make("L2_OBJECT_INDEX_COUNTS", group.path, found[1], pointer="/attributes" + found[0]))
        if is_int(no) and is_int(npres) and 0 <= no < npres:
            report.add(make("L2_OBJECT_INDEX_COUNTS", group.path, f"num_present must be an integer in [0, {no}], "
                            f"found {short(npres)}", pointer="/attributes/num_present"))
        if is_int(sid) and rank is not None and sid != rank:
            report.add(make("L2_OBJECT_INDEX_COUNTS", group.path, f"sid_ndim must be {rank}, found {short(sid)}",
                            pointer="/attributes/sid_ndim"))
        manifests = model.nodes.get(f"{name}/object_index/manifests")
        shape = manifests.doc.get("shape") if manifests and manifests.doc else None
        rows = shape[0] if isinstance(shape, list) and len(shape) == 1 else None
        if manifests is None:
            report.add(make("L2_OBJECT_INDEX_COUNTS", group.path, "object_index has no manifests array"))
        elif is_int(no) and rows != no:
            report.add(make("L2_OBJECT_INDEX_COUNTS", group.path, f"num_objects is {no} but manifests has {rows} "
                            "rows", pointer="/attributes/num_objects"))
        if layout == "vlen_manifests_v2":
            ids = model.nodes.get(f"{name}/object_index/object_ids")
            shape = ids.doc.get("shape") if ids and ids.doc else None
            if ids is None or shape != [rows]:
                report.add(make("L2_OBJECT_INDEX_COUNTS", group.path, f"layout v2 needs an object_ids array of shape "
                                f"[{rows}], found {short(shape)}"))
