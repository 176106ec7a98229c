"""Level 2 — metadata: root, level, family and array attributes, checked without reading cells.

Every problem is collected (the typed models of :mod:`zarr_vectors.format.metadata` stop at
the first), and each becomes a finding with a stable code and a JSON pointer.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zarr_vectors.format.metadata import (
    CROSS_CHUNK_STRATEGIES,
    CROSS_LEVEL_STORAGES,
    GEOMETRY_TYPES,
    KNOWN_CAPABILITIES,
    LINKS_CONVENTIONS,
    MIN_ZV_VERSION,
    OBJECT_INDEX_CONVENTIONS,
    OBJECT_INDEX_LAYOUT,
    parse_version,
)
from zarr_vectors.format.paths import format_delta, parse_chunk_key, parse_delta, parse_offsets
from zarr_vectors.format.schema import is_int
from zarr_vectors.validate.findings import Report, crashed, make
from zarr_vectors.validate.structure import CellCodec, StoreModel, origin_of

FAMILY_NAMES = ("vertices", "vertex_attributes", "fragment_attributes", "links", "object_index",
                "link_attributes", "object_attributes", "groups", "group_attributes", "vertex_fragments",
                "link_fragments")
ZV = "/attributes/zarr_vectors"
LV = "/attributes/zarr_vectors_level"


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_metadata(model: StoreModel, report: Report) -> None:
    for what, fn in (("root", _check_root), ("levels", _check_levels), ("links families", _check_families),
                     ("grid arrays", _check_grid_arrays), ("object index", _check_object_index)):
        try:
            fn(model, report)
        except Exception as exc:  # noqa: BLE001 - a crash is a finding
            report.add(crashed(2, "/", exc, what=what))


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
    version = zv.get("zv_version")
    if "zv_version" not in zv:
        report.add(make("L2_ZV_VERSION", "/", "zv_version is missing", pointer=ZV))
    else:
        try:
            vt = parse_version(version)
            if vt[0] != 0 or vt < MIN_ZV_VERSION:
                report.add(make("L2_ZV_VERSION", "/", f"zv_version {version!r} is unsupported: need major version 0 "
                                "and >= 0.9.0 (compared numerically)", pointer=ZV + "/zv_version"))
        except ValueError:
            report.add(make("L2_ZV_VERSION", "/", f"zv_version {_short(version)} does not parse as a version",
                            pointer=ZV + "/zv_version"))
    for key in ("chunk_shape", "bounds", "geometry_types"):
        if key not in zv:
            report.add(make("L2_ROOT_REQUIRED", "/", f"required key {key!r} is missing", pointer=ZV))
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
    cs = zv.get("chunk_shape")
    if "chunk_shape" in zv:
        if not isinstance(cs, list) or not all(_is_num(v) and v > 0 for v in cs):
            report.add(make("L2_CHUNK_SHAPE", "/", f"chunk_shape entries must be finite numbers > 0, found "
                            f"{_short(cs)}", pointer=ZV + "/chunk_shape"))
            cs = None
        elif d is not None and len(cs) != d:
            report.add(make("L2_CHUNK_SHAPE", "/", f"chunk_shape has {len(cs)} entries, sid_ndim is {d}",
                            pointer=ZV + "/chunk_shape"))
    if "bounds" in zv:
        b = zv["bounds"]
        ok = isinstance(b, list) and len(b) == 2 and all(
            isinstance(x, list) and all(_is_num(v) for v in x) and (d is None or len(x) == d) for x in b
        ) and len(b[0]) == len(b[1])
        if not ok:
            report.add(make("L2_BOUNDS", "/", f"bounds must be [min[{d}], max[{d}]] of finite numbers, found "
                            f"{_short(b)}", pointer=ZV + "/bounds"))
        elif any(lo > hi for lo, hi in zip(b[0], b[1])):
            report.add(make("L2_BOUNDS", "/", f"bounds min exceeds max: {_short(b)}", pointer=ZV + "/bounds"))
    for key, allowed, code in (
        ("links_convention", LINKS_CONVENTIONS, "L2_LINKS_CONVENTION"),
        ("object_index_convention", OBJECT_INDEX_CONVENTIONS, "L2_OBJECT_INDEX_CONVENTION"),
        ("cross_chunk_strategy", CROSS_CHUNK_STRATEGIES, "L2_CROSS_CHUNK_STRATEGY"),
        ("cross_level_storage", CROSS_LEVEL_STORAGES, "L2_CROSS_LEVEL_STORAGE"),
    ):
        if key in zv and zv[key] not in allowed:
            report.add(make(code, "/", f"{key} {_short(zv[key])} is not one of {list(allowed)}", pointer=f"{ZV}/{key}"))
    if "cross_level_depth" in zv:
        depth = zv["cross_level_depth"]
        if not is_int(depth) or depth < -1:
            report.add(make("L2_CROSS_LEVEL_DEPTH", "/", f"cross_level_depth must be an integer >= -1, found "
                            f"{_short(depth)}", pointer=ZV + "/cross_level_depth"))
    if "geometry_types" in zv:
        g = zv["geometry_types"]
        if not isinstance(g, list) or not g or not all(isinstance(x, str) for x in g):
            report.add(make("L2_GEOMETRY_TYPES", "/", f"geometry_types must be a non-empty list of names, found "
                            f"{_short(g)}", pointer=ZV + "/geometry_types"))
        else:
            for x in g:
                if x not in GEOMETRY_TYPES:
                    report.add(make("L2_CUSTOM_GEOMETRY", "/", f"custom geometry type {x!r}: level 4 does not check "
                                    "it", pointer=ZV + "/geometry_types"))
    if "format_capabilities" in zv:
        caps = zv["format_capabilities"]
        if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
            report.add(make("L2_CAPABILITIES", "/", f"format_capabilities must be a list of strings, found "
                            f"{_short(caps)}", pointer=ZV + "/format_capabilities"))
        else:
            for c in caps:
                if c not in KNOWN_CAPABILITIES:
                    report.add(make("L2_UNKNOWN_CAPABILITY", "/", f"unknown format capability {c!r} (the token set "
                                    "is open: readers carry on)", pointer=ZV + "/format_capabilities"))
    if "base_bin_shape" in zv:
        bb = zv["base_bin_shape"]
        if not isinstance(bb, list) or not all(_is_num(v) and v > 0 for v in bb) or (d is not None and len(bb) != d):
            report.add(make("L2_BASE_BIN_SHAPE", "/", f"base_bin_shape must be {d} finite numbers > 0, found "
                            f"{_short(bb)}", pointer=ZV + "/base_bin_shape"))
        elif isinstance(cs, list) and len(cs) == len(bb):
            for i, (c, b) in enumerate(zip(cs, bb)):
                r = c / b
                if abs(r - round(r)) > 1e-9 * max(1.0, r) or round(r) < 1:
                    report.add(make("L2_BASE_BIN_SHAPE", "/", f"base_bin_shape[{i}]={b} does not divide "
                                    f"chunk_shape[{i}]={c} (ratio {r})", pointer=ZV + "/base_bin_shape"))
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
    for path in by_path:
        if not (path.isdigit() and int(path) in model.levels and str(int(path)) == path):
            report.add(make("L2_MULTISCALES_DATASETS", "/", f"multiscales dataset {path!r} names no level",
                            pointer=f"/attributes/multiscales/0/datasets/{by_path[path]}"))


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
        if not isinstance(values, list) or not all(_is_num(v) and v > 0 for v in values):
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


def level_chunk_shape(model: StoreModel, number: int) -> tuple[float, ...]:
    override = model.level_attrs(number).get("chunk_shape")
    if isinstance(override, list) and override and all(_is_num(v) and v > 0 for v in override):
        return tuple(float(v) for v in override)
    return tuple(float(v) for v in model.zv["chunk_shape"])


# ---------------------------------------------------------------------------
# levels
# ---------------------------------------------------------------------------
def _check_levels(model: StoreModel, report: Report) -> None:
    for code in ("L2_LEVEL_BLOCK", "L2_LEVEL_NUMBER", "L2_VERTEX_COUNT", "L2_ARRAYS_PRESENT", "L2_OBJECT_SPARSITY",
                 "L2_PARENT_LEVEL", "L2_LEVEL_CHUNK_SHAPE"):
        report.ran_rule(code)
    d = model.sid_ndim
    for number, name in sorted(model.levels.items()):
        node = model.nodes[name]
        block = node.attrs.get("zarr_vectors_level")
        if not isinstance(block, dict):
            report.add(make("L2_LEVEL_BLOCK", name, "no zarr_vectors_level block", pointer="/attributes"))
            continue
        if block.get("level") != number or not is_int(block.get("level")):
            report.add(make("L2_LEVEL_NUMBER", name, f"level is {_short(block.get('level'))}, the group is named "
                            f"{name}", pointer=LV + "/level"))
        vc = block.get("vertex_count")
        if not is_int(vc) or vc < 0:
            report.add(make("L2_VERTEX_COUNT", name, f"vertex_count must be an integer >= 0, found {_short(vc)}",
                            pointer=LV + ("/vertex_count" if "vertex_count" in block else "")))
        ap = block.get("arrays_present")
        if not isinstance(ap, list) or not all(isinstance(x, str) for x in ap):
            report.add(make("L2_ARRAYS_PRESENT", name, f"arrays_present must be a list of family names, found "
                            f"{_short(ap)}", pointer=LV + ("/arrays_present" if "arrays_present" in block else "")))
        if "object_sparsity" in block:
            s = block["object_sparsity"]
            if not _is_num(s) or not 0 < s <= 1:
                report.add(make("L2_OBJECT_SPARSITY", name, f"object_sparsity must be in (0, 1], found {_short(s)}",
                                pointer=LV + "/object_sparsity"))
        parent = block.get("parent_level")
        if number == 0:
            if parent is not None:
                report.add(make("L2_PARENT_LEVEL", name, f"parent_level of level 0 must be null, found "
                                f"{_short(parent)}", pointer=LV + "/parent_level"))
        elif not is_int(parent) or parent >= number or parent not in model.levels or parent < 0:
            report.add(make("L2_PARENT_LEVEL", name, f"parent_level must name an existing lower level, found "
                            f"{_short(parent)}", pointer=LV + "/parent_level"))
        if "chunk_shape" in block:
            cs = block["chunk_shape"]
            if not isinstance(cs, list) or not all(_is_num(v) and v > 0 for v in cs) or (d and len(cs) != d):
                report.add(make("L2_LEVEL_CHUNK_SHAPE", name, f"chunk_shape must be {d} finite numbers > 0, found "
                                f"{_short(cs)}", pointer=LV + "/chunk_shape"))


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
            and a.get("store", "canonical") in ("canonical", "duplicate") and is_int(a.get("sid_ndim"))):
        return None
    return {"link_width": a["link_width"], "directed": a.get("directed", False), "store": a.get("store", "canonical"),
            "sid_ndim": a["sid_ndim"], "num_links": a.get("num_links"),
            "num_physical_records": a.get("num_physical_records")}


def _check_families(model: StoreModel, report: Report) -> None:
    for code in ("L2_FAMILY_LINK_WIDTH", "L2_FAMILY_DIRECTED", "L2_FAMILY_STORE", "L2_FAMILY_SID_NDIM",
                 "L2_FAMILY_LEVEL_DELTA", "L2_LINKS_ARRAY_AGREES"):
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
            if not is_int(w) or w < 1:
                report.add(make("L2_FAMILY_LINK_WIDTH", fam.path, f"link_width must be an integer >= 1, found "
                                f"{_short(w)}", pointer="/attributes/link_width"))
            if "directed" in a and not isinstance(a["directed"], bool):
                report.add(make("L2_FAMILY_DIRECTED", fam.path, f"directed must be a boolean, found "
                                f"{_short(a['directed'])}", pointer="/attributes/directed"))
            elif "directed" not in a:
                report.add(make("L2_FAMILY_DIRECTED", fam.path, "directed is missing", pointer="/attributes"))
            if a.get("store") not in ("canonical", "duplicate"):
                report.add(make("L2_FAMILY_STORE", fam.path, f"store must be 'canonical' or 'duplicate', found "
                                f"{_short(a.get('store'))}", pointer="/attributes/store"))
            sid = a.get("sid_ndim")
            if not is_int(sid) or (rank is not None and sid != rank):
                report.add(make("L2_FAMILY_SID_NDIM", fam.path, f"sid_ndim must be {rank}, found {_short(sid)}",
                                pointer="/attributes/sid_ndim"))
            if a.get("level_delta") != delta or not is_int(a.get("level_delta")):
                report.add(make("L2_FAMILY_LEVEL_DELTA", fam.path, f"level_delta is {_short(a.get('level_delta'))}, "
                                f"the path says {delta}", pointer="/attributes/level_delta"))
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
                if fam.attrs.get("level_delta") != delta or not is_int(fam.attrs.get("level_delta")):
                    report.add(make("L2_FAMILY_LEVEL_DELTA", fam.path, f"level_delta is "
                                    f"{_short(fam.attrs.get('level_delta'))}, the path says {delta}",
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


def _check_links_array(arr: Any, delta: int, width: int | None, sid: int | None, report: Report) -> None:
    a = arr.attrs
    problems = []
    if width is not None and a.get("link_width") != width:
        problems.append(("link_width", f"link_width {_short(a.get('link_width'))} disagrees with the family's {width}"))
    if a.get("level_delta") != delta:
        problems.append(("level_delta", f"level_delta {_short(a.get('level_delta'))} disagrees with the path's {delta}"))
    want = _offsets_value(arr.name, width, sid)
    if want is not None and "offsets" in a and a["offsets"] != want:
        problems.append(("offsets", f"offsets field {_short(a['offsets'])} disagrees with the path segment "
                                    f"{arr.name!r} ({want})"))
    if "has_perm" in a and not isinstance(a["has_perm"], bool):
        problems.append(("has_perm", f"has_perm must be a boolean, found {_short(a['has_perm'])}"))
    dt = _dtype(a.get("dtype", "int64"))
    if dt is None or dt.kind not in "iu":
        problems.append(("dtype", f"dtype must be an integer type, found {_short(a.get('dtype'))}"))
    for key, message in problems:
        report.add(make("L2_LINKS_ARRAY_AGREES", arr.path, message, pointer=f"/attributes/{key}"))


def _check_link_attribute_array(arr: Any, delta: int, pol: dict[str, Any] | None, rank: int | None,
                                report: Report) -> None:
    a = arr.attrs
    if a.get("level_delta") != delta:
        report.add(make("L2_LINKS_ARRAY_AGREES", arr.path, f"level_delta {_short(a.get('level_delta'))} disagrees "
                        f"with the path's {delta}", pointer="/attributes/level_delta"))
    if pol is not None:
        want = _offsets_value(arr.name, pol["link_width"], pol["sid_ndim"])
        if want is not None and "offsets" in a and a["offsets"] != want:
            report.add(make("L2_LINKS_ARRAY_AGREES", arr.path, f"offsets field {_short(a['offsets'])} disagrees with "
                            f"the path segment {arr.name!r}", pointer="/attributes/offsets"))


# ---------------------------------------------------------------------------
# grid arrays: dtype, codecs, nonempty_chunks
# ---------------------------------------------------------------------------
def _dtype(value: Any) -> np.dtype | None:
    try:
        dt = np.dtype(value)
    except TypeError:
        return None
    return dt if dt.kind in "biuf" else None


def attribute_layout(attrs: dict[str, Any]) -> tuple[np.dtype, int] | None:
    """(little-endian dtype, values per row) of an attribute array, or None when unusable."""
    dt = _dtype(attrs.get("dtype"))
    rs = attrs.get("row_shape", [])
    if dt is None or not isinstance(rs, list) or not all(is_int(v) and v >= 1 for v in rs):
        return None
    return dt.newbyteorder("<"), int(np.prod(rs)) if rs else 1


def vertices_dtype(attrs: dict[str, Any]) -> np.dtype | None:
    dt = _dtype(attrs.get("dtype", "float32"))
    return dt.newbyteorder("<") if dt is not None and dt.kind == "f" else None


def _check_grid_arrays(model: StoreModel, report: Report) -> None:
    for code in ("L2_ARRAY_DTYPE", "L2_CODECS", "L2_NONEMPTY_CHUNKS", "L2_NONEMPTY_UNSORTED"):
        report.ran_rule(code)
    for number in sorted(model.levels):
        for node in model.grid_arrays(number):
            a = node.attrs
            kind = node.zv_array
            if kind == "vertices":
                if vertices_dtype(a) is None:
                    report.add(make("L2_ARRAY_DTYPE", node.path, f"vertices dtype must be a float type, found "
                                    f"{_short(a.get('dtype'))}", pointer="/attributes/dtype"))
                if a.get("encoding", "raw") != "raw":
                    report.add(make("L2_ARRAY_DTYPE", node.path, f"vertices encoding {_short(a.get('encoding'))} is "
                                    "not supported (only 'raw' vertices can be checked)", pointer="/attributes/encoding"))
            elif kind in ("attribute", "fragment_attribute", "link_attribute"):
                if attribute_layout(a) is None:
                    report.add(make("L2_ARRAY_DTYPE", node.path, f"dtype {_short(a.get('dtype'))} / row_shape "
                                    f"{_short(a.get('row_shape'))} are not a numeric type and a list of positive "
                                    "integers", pointer="/attributes"))
            elif kind in ("vertex_fragments", "link_fragments"):
                if a.get("encoding", "fragment_index_v1") != "fragment_index_v1":
                    report.add(make("L2_ARRAY_DTYPE", node.path, f"encoding {_short(a.get('encoding'))} is not "
                                    "fragment_index_v1", pointer="/attributes/encoding"))
            try:
                CellCodec(node.doc, file=f"{node.path}/zarr.json")
            except Exception as exc:  # noqa: BLE001
                reason = getattr(exc, "reason", str(exc))
                report.add(make("L2_CODECS", node.path, reason, pointer=getattr(exc, "pointer", "") or "/codecs"))
            _check_nonempty(node, report)


def _check_nonempty(node: Any, report: Report) -> None:
    a = node.attrs
    keys = a.get("nonempty_chunks")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        report.add(make("L2_NONEMPTY_CHUNKS", node.path, f"nonempty_chunks must be a list of dotted chunk keys, "
                        f"found {_short(keys)}", pointer="/attributes" + ("/nonempty_chunks" if "nonempty_chunks" in a
                                                                          else "")))
        return
    shape = node.doc.get("shape")
    origin = origin_of(node)
    ndim = len(shape) if isinstance(shape, list) else None
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
    if keys != sorted(keys):
        report.add(make("L2_NONEMPTY_UNSORTED", node.path, "nonempty_chunks is not sorted as strings",
                        pointer="/attributes/nonempty_chunks"))


# ---------------------------------------------------------------------------
# object index
# ---------------------------------------------------------------------------
def _check_object_index(model: StoreModel, report: Report) -> None:
    report.ran_rule("L2_OBJECT_INDEX_LAYOUT")
    report.ran_rule("L2_OBJECT_INDEX_COUNTS")
    for number, name in sorted(model.levels.items()):
        group = model.nodes.get(f"{name}/object_index")
        if group is None or group.node_type != "group":
            continue
        a = group.attrs
        layout = a.get("layout", OBJECT_INDEX_LAYOUT)
        if layout != OBJECT_INDEX_LAYOUT:
            allowed = layout in model.allow_layouts and layout == "vlen_manifests_v2"
            hint = "" if allowed else (" (pass allow_layouts=('vlen_manifests_v2',) / --allow-layout "
                                       "vlen_manifests_v2 to read it by its documented contract)"
                                       if layout == "vlen_manifests_v2" else "")
            report.add(make("L2_OBJECT_INDEX_LAYOUT", group.path, f"object_index layout {_short(layout)} is not "
                            f"{OBJECT_INDEX_LAYOUT!r}{' (allowed by the caller)' if allowed else ''}{hint}",
                            pointer="/attributes/layout", severity="warning" if allowed else None))
        no, npres, sid = a.get("num_objects"), a.get("num_present"), a.get("sid_ndim")
        rank = model.grid_rank(number)
        if not is_int(no) or no < 0:
            report.add(make("L2_OBJECT_INDEX_COUNTS", group.path, f"num_objects must be an integer >= 0, found "
                            f"{_short(no)}", pointer="/attributes/num_objects"))
        elif not is_int(npres) or not 0 <= npres <= no:
            report.add(make("L2_OBJECT_INDEX_COUNTS", group.path, f"num_present must be an integer in [0, {no}], "
                            f"found {_short(npres)}", pointer="/attributes/num_present"))
        if not is_int(sid) or (rank is not None and sid != rank):
            report.add(make("L2_OBJECT_INDEX_COUNTS", group.path, f"sid_ndim must be {rank}, found {_short(sid)}",
                            pointer="/attributes/sid_ndim"))
        manifests = model.nodes.get(f"{name}/object_index/manifests")
        rows = manifests.doc.get("shape", [None])[0] if manifests and manifests.doc else None
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
                                f"[{rows}], found {_short(shape)}"))
