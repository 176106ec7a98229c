"""Level 3 — consistency: every cell is read, as Dask tasks (this module plans the graph).

The per-cell checks are grouped into tasks per array family and level (batches of cells
sized to tens of MB) and reduced to one list of findings:

* vertex tasks, per level: vertices + FragmentIndex + vertex/fragment attributes of a
  batch of chunks; they return findings and the small per-chunk tables later checks need
  (vertex rows, fragment counts) -- never cell data.  The level-4 bin check of point
  clouds runs in the same pass, so vertex cells are read once.
* link tasks, per family: link cells + their link_fragments and link-attribute cells;
  they take the vertex-row tables of the owning and the target level (a graph
  dependency, not a second pass) and return findings, row totals and, for duplicate
  families only, one 64-bit hash per record.
* reduce tasks: level totals, manifests against fragment counts, family counts.

Cells are decoded here with :mod:`zarr_vectors.encoding` rather than the array API so
that one defect is one finding, not an exception that hides the rest.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import dask
import numpy as np

from zarr_vectors.errors import ResourceLimitError, ZarrVectorsError
from zarr_vectors.execution import runner
from zarr_vectors.format import bounds
from zarr_vectors.format.coarsen import AGGREGATION_MEMBER
from zarr_vectors.format.kinds import ROW_BRIDGED_KINDS
from zarr_vectors.format.metadata import OBJECT_INDEX_LAYOUT
from zarr_vectors.format.paths import LEVEL_FAMILIES
from zarr_vectors.format.points import chunk_placement_checked, placement_checked
from zarr_vectors.format.schema import whole_ratio
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.tables import read_table
from zarr_vectors.validation.conformance import store_kind
from zarr_vectors.validation.consistency.cells import (
    ArraySpec,
    Chunk,
    array_spec,
    batch_limits,
    batch_target,
    batches,
    check_presence,
    digest_seed,
    load_shards,
)
from zarr_vectors.validation.consistency.crosslevel import (
    coarse_bins,
    coverage_findings,
    coverage_pairs,
    mirror_findings,
)
from zarr_vectors.validation.consistency.links import link_graph, orphan_attribute_families
from zarr_vectors.validation.consistency.polylines import bridge_findings, implied_bridges, merge_run_ends
from zarr_vectors.validation.consistency.vertices import (
    VertexLevelSpec,
    aggregation_findings,
    merge_vertex,
    reduce_level,
    vertex_batch,
)
from zarr_vectors.validation.findings import Finding, crashed, make
from zarr_vectors.validation.manifests import ManifestCheck, manifest_jobs, shared_fragments
from zarr_vectors.validation.metadata import (
    attribute_layout,
    family_policy,
    level_bin_shape,
    level_chunk_shape,
    typed_arrays,
    vertices_dtype,
)
from zarr_vectors.validation.structure import StoreModel

__all__ = ["run"]


def _set_limits(vertex_count: Any, ndim: int, vertices: ArraySpec | None, fragments: ArraySpec | None,
                vattrs: list[ArraySpec], fattrs: list[ArraySpec]) -> None:
    """Each vertex-family array's decode bound (format/bounds.py): no cell holds more rows than the
    level's ``vertex_count``.  An unusable declaration leaves the ceiling; its own rule reports it."""
    if vertices is not None:
        dtype = vertices_dtype(vertices.attrs)
        vertices.limit = bounds.rows_bound(vertex_count, dtype.itemsize * ndim if dtype is not None else None)
    if fragments is not None:
        fragments.limit = bounds.fragment_index_bound(vertex_count)
    for specs, bound in ((vattrs, bounds.rows_bound), (fattrs, bounds.fragment_rows_bound)):
        for spec in specs:
            layout = attribute_layout(spec.attrs)
            spec.limit = bound(vertex_count, layout[0].itemsize * layout[1] if layout is not None else None)


def build(model: StoreModel, requested: int, manifests: dict[int, ManifestCheck], static: list[Finding],
          ran: dict[str, int]) -> Any:
    """Static level-3 checks into ``static``; returns one delayed reducing every cell task to findings."""
    load_shards(model, static)
    limits = batch_limits()  # read once, here in the client, while the graph is planned
    storage_d = dask.delayed(model.storage, traverse=False)
    level_reduces = []
    family_reduces = []
    tables: dict[int, Any] = {}
    implied: dict[int, list[Any]] = {}  # level -> its tasks digesting the bridges its manifests imply
    seed = digest_seed()
    reading = store_kind(model)
    point_cloud = not isinstance(reading, str) and reading is not None and reading.kind == "point_cloud"
    polylines = not isinstance(reading, str) and reading is not None and reading.kind in ROW_BRIDGED_KINDS
    ndim = model.sid_ndim or 0
    aggregated = _aggregated(model) if requested >= 5 else {}
    ranged = set(aggregated) | {parent for parent, _ in aggregated.values()}
    # L5_CROSS_LEVEL_COVERAGE: (fine level, d) -> the +d family's link tasks, once link_graph made them
    covers: dict[tuple[int, int], list[Any] | None] = dict.fromkeys(coverage_pairs(model) if requested >= 5 else [])
    if aggregated:
        ran["L5_ATTRIBUTE_AGGREGATION"] = len(aggregated)
    for number, lpath in sorted(model.levels.items()):
        attrs = model.level_attrs(number)
        rank = model.grid_rank(number) or ndim
        grids = {n.path: array_spec(model, n.path) for n in model.grid_arrays(number)}
        for spec in grids.values():
            if spec is not None:
                check_presence(model, spec, static)
        vertices = grids.get(f"{lpath}/vertices")
        fragments = grids.get(f"{lpath}/vertex_fragments")
        vattrs = [s for p, s in grids.items() if p.startswith(f"{lpath}/vertex_attributes/") and s]
        fattrs = [s for p, s in grids.items() if p.startswith(f"{lpath}/fragment_attributes/") and s]
        _set_limits(attrs.get("vertex_count"), ndim, vertices, fragments, vattrs, fattrs)
        has_objects = f"{lpath}/object_index" in model.nodes
        binned = point_cloud and not has_objects
        cs = level_chunk_shape(model, number)
        bin_shape = level_bin_shape(model, number)
        bpc = None
        if bin_shape is not None and len(bin_shape) == len(cs):
            ratios = [whole_ratio(c, b) for c, b in zip(cs, bin_shape)]
            if all(r is not None for r in ratios):
                bpc = tuple(ratios)
        max_fragments = math.prod(bpc) if bpc else None
        chunk_check = (requested >= 4 and vertices is not None
                       and chunk_placement_checked(number, attrs.get("coarsening_method"), rank, ndim))
        bin_check = (chunk_check and bpc is not None and fragments is not None and placement_checked(
            point_cloud, has_objects, number, attrs.get("coarsening_method"), rank, ndim))
        if binned and max_fragments is not None:
            ran["L3_TOO_MANY_FRAGMENTS"] = ran.get("L3_TOO_MANY_FRAGMENTS", 0) + 1
        if chunk_check:
            ran["L4_POINT_OUTSIDE_BIN"] = ran.get("L4_POINT_OUTSIDE_BIN", 0) + 1
        # L5_CROSS_LEVEL_BIN rides on coverage of links/+1: digest the rows with their coarse bins
        cover_bins = coarse_bins(model, number, 1) if (number, 1) in covers else None
        bridged = requested >= 4 and polylines and has_objects
        bridge_policy = family_policy(model, number, 0) if bridged and fragments is not None else None
        vspec = VertexLevelSpec(
            number, lpath, ndim, rank, vertices, fragments, vattrs, fattrs,
            claims_tile=attrs.get("fragments_tile") is True, binned=binned, max_fragments=max_fragments,
            bin_check=bin_check, chunk_check=chunk_check, chunk_shape=cs, bin_shape=bin_shape, bins_per_chunk=bpc,
            attribute_ranges=number in ranged, owned=has_objects, one_owner=number == 0,
            run_ends=bridge_policy is not None, cover_bins=cover_bins, seed=seed,
            cover=any(n == number and (d != 1 or cover_bins is None) for n, d in covers),
        )
        sizes: dict[Chunk, int] = defaultdict(int)
        for s in (vertices, fragments, *vattrs, *fattrs):
            if s is not None:
                for c, (_, size) in s.cells.items():
                    sizes[c] += size
        units = sorted(sizes.items())
        target = batch_target(sum(sizes.values()), limits)
        vspec_d = dask.delayed(vspec, traverse=False)
        tasks = [dask.delayed(vertex_batch, pure=False)(storage_d, vspec_d, dask.delayed(batch, traverse=False))
                 for batch in batches(units, target)]  # a batch is plain data: nothing for dask to walk
        tables[number] = dask.delayed(merge_vertex, pure=False)(*tasks)
        level_info = {
            "path": lpath,
            "vertex_count": attrs.get("vertex_count"),
            "vertices_ok": vertices is not None and not vertices.unreadable,
            "num_present": (model.nodes[f"{lpath}/object_index"].attrs.get("num_present") if has_objects else None),
            "shared_ok": shared_fragments(model, number),
        }
        summary_d = dask.delayed(manifests.get(number), traverse=False)  # its tables need no walking
        level_reduces.append(dask.delayed(reduce_level, pure=False)(level_info, tables[number], summary_d))
        level_reduces.extend(dask.delayed(typed_array_findings, pure=False)(storage_d, node.path)
                             for node in typed_arrays(model, number) if not node.path.endswith("/object_ids"))
        if f"{lpath}/object_index/object_ids" in model.nodes and has_objects:
            claims_sorted = model.nodes[f"{lpath}/object_index"].attrs.get("object_ids_sorted") is True
            level_reduces.append(dask.delayed(object_ids_findings, pure=False)(
                storage_d, f"{lpath}/object_index/object_ids", claims_sorted))
            ran["L3_OBJECT_IDS"] = 1
        _arrays_present(model, number, static)
        if bridge_policy is not None:  # compared with the delta-0 family's link tasks (links.link_graph)
            ends = dask.delayed(merge_run_ends, pure=False)(*tasks)
            shared = shared_fragments(model, number)
            implied[number] = [dask.delayed(implied_bridges, pure=False)(storage_d, number, job,
                                                                         bridge_policy["directed"], shared, seed, ends)
                               for job in manifest_jobs(model, number)[0]]
        elif bridged:
            level_reduces.append(dask.delayed(bridge_findings, pure=False)(storage_d, number,
                                                                           tuple(model.allow_layouts)))
        if bridged:
            ran["L4_POLYLINE_BRIDGES"] = ran.get("L4_POLYLINE_BRIDGES", 0) + 1
    if requested >= 5:
        static.extend(_objects_come_back(model, manifests))
    for number, (parent, rules) in sorted(aggregated.items()):
        level_reduces.append(dask.delayed(aggregation_findings, pure=False)(
            model.levels[number], parent, rules, tables[parent], tables[number]))
    mirrors: dict[tuple[int, int], list[Any]] | None = {} if requested >= 5 else None
    centroids: list[int] | None = [] if requested >= 5 else None  # the fine levels L5_CROSS_LEVEL_CENTROID compares
    for number, lpath in sorted(model.levels.items()):
        family_reduces.extend(link_graph(model, number, tables, static, limits, implied, mirrors, seed, covers,
                                         centroids))
    if centroids:
        ran["L5_CROSS_LEVEL_CENTROID"] = len(centroids)
    pairs = mirrors or {}
    for (number, delta), up in sorted(pairs.items()):
        down = pairs.get((number + delta, -delta))
        if delta > 0 and down is not None:
            family_reduces.append(dask.delayed(mirror_findings, pure=False)(storage_d, number, delta, len(up), *up,
                                                                            *down))
            ran["L5_CROSS_LEVEL_MIRROR"] = ran.get("L5_CROSS_LEVEL_MIRROR", 0) + 1
    for (number, delta), tasks in sorted(covers.items()):
        if tasks is not None:  # None: the family's own rules report why it has no link tasks
            bins = coarse_bins(model, number, delta)
            family_reduces.append(dask.delayed(coverage_findings, pure=False)(storage_d, number, delta, bins,
                                                                              tables[number], *tasks))
            ran["L5_CROSS_LEVEL_COVERAGE"] = ran.get("L5_CROSS_LEVEL_COVERAGE", 0) + 1
            if bins is not None:
                ran["L5_CROSS_LEVEL_BIN"] = ran.get("L5_CROSS_LEVEL_BIN", 0) + 1
    family_reduces.extend(dask.delayed(bridge_findings, pure=False)(storage_d, number, tuple(model.allow_layouts))
                          for number in sorted(implied))  # no link tasks for the family: compared row by row
    return dask.delayed(_collect, pure=False)(*level_reduces, *family_reduces)


def _objects_come_back(model: StoreModel, manifests: dict[int, ManifestCheck]) -> list[Finding]:
    """A level preserving object ids names no object its parent level dropped (an empty
    manifest there): ids keep their meaning, and a dropped object stays dropped up the
    pyramid (``L5_INHERITED_NUM_OBJECTS``; v1 rows, where a row is its id)."""
    out = []
    for number in sorted(manifests):
        attrs, lpath = model.level_attrs(number), model.levels[number]
        parent = attrs.get("parent_level")
        if attrs.get("preserves_object_ids") is not True or not isinstance(parent, int) or parent not in manifests:
            continue
        groups = [model.nodes.get(f"{model.levels[n]}/object_index") for n in (number, parent)]
        if any(g is None or g.attrs.get("layout") != OBJECT_INDEX_LAYOUT or not isinstance(
                g.attrs.get("num_objects"), int) for g in groups):
            continue
        rows = min(g.attrs["num_objects"] for g in groups)  # a count that differs is reported by the slot rule
        back = np.flatnonzero(manifests[number].summary.present_rows(rows)
                              & ~manifests[parent].summary.present_rows(rows))
        if back.size:
            out.append(make("L5_INHERITED_NUM_OBJECTS", f"{lpath}/object_index/manifests", f"object {int(back[0])} "
                            f"({back.size} in all) has vertices here, but level {parent} dropped it (an empty "
                            "manifest): a level preserving object ids brings back no dropped object"))
    return out


def _aggregated(model: StoreModel) -> dict[int, tuple[int, dict[str, Any]]]:
    """Coarse levels declaring attribute reductions (D22) whose parent level exists: level -> (parent, rules)."""
    out = {}
    for number in model.levels:
        attrs = model.level_attrs(number)
        rules, parent = attrs.get(AGGREGATION_MEMBER), attrs.get("parent_level")
        if isinstance(rules, dict) and rules and isinstance(parent, int) and parent in model.levels:
            out[number] = (parent, rules)
    return out


def typed_array_findings(storage: Storage, path: str) -> list[Finding]:
    """A typed array's chunks decode to their declared size, read as the reader reads them (the
    whole array, within ``zarr_vectors.limits.max-decoded-bytes``)."""
    return _read_typed(storage, path)[1]


def object_ids_findings(storage: Storage, path: str, claims_sorted: bool) -> list[Finding]:
    """A v2 index's ``object_ids`` (row r is object ``object_ids[r]``): distinct and >= 0, as the
    reader requires, and ascending where ``object_ids_sorted`` promises it (a reader may search them)."""
    ids, out = _read_typed(storage, path)
    if ids is None or ids.ndim != 1 or not len(ids):
        return out
    ids = ids.astype(np.int64, copy=False)
    ordered = np.sort(ids)
    if ordered[0] < 0 or (ordered[1:] == ordered[:-1]).any():
        out.append(make("L3_OBJECT_IDS", path, f"object ids must be distinct and >= 0 (each manifest row is one "
                        f"object): the smallest is {int(ordered[0])}, {int((ordered[1:] == ordered[:-1]).sum())} "
                        "repeat an earlier one"))
    elif claims_sorted and not np.array_equal(ordered, ids):
        first = int(np.flatnonzero(ids[1:] < ids[:-1])[0]) + 1
        out.append(make("L3_OBJECT_IDS", path, f"object_ids_sorted is true, but row {first} holds {int(ids[first])} "
                        f"after {int(ids[first - 1])}"))
    return out


def _read_typed(storage: Storage, path: str) -> tuple[np.ndarray | None, list[Finding]]:
    try:
        return read_table(storage, path)[0], []
    except ResourceLimitError as exc:
        return None, [make("L1_RESOURCE_LIMIT", path, str(exc))]
    except ZarrVectorsError as exc:
        return None, [make("L3_CELL_UNDECODABLE", path, str(exc))]
    except Exception as exc:  # noqa: BLE001
        return None, [crashed(3, path, exc, what="typed array")]


def _collect(*parts: list[Finding]) -> list[Finding]:
    return [f for p in parts for f in p]


def _arrays_present(model: StoreModel, number: int, out: list[Finding]) -> None:
    lpath = model.levels[number]
    listed = model.level_attrs(number).get("arrays_present")
    if not isinstance(listed, list):
        return
    for name in listed:
        if isinstance(name, str) and name in LEVEL_FAMILIES and f"{lpath}/{name}" not in model.nodes:
            out.append(make("L3_ARRAYS_PRESENT", lpath, f"arrays_present names {name!r}, which the level does not "
                            "have"))


def run(model: StoreModel, requested: int, manifests: dict[int, ManifestCheck]) -> tuple[list[Finding], dict[str, int]]:
    """Every level-3 check (and the level-4 bin check riding on the same reads)."""
    static: list[Finding] = []
    ran: dict[str, int] = {}
    for code in ("L3_NONEMPTY_MISSING", "L3_NONEMPTY_EXTRA", "L3_CELL_UNDECODABLE", "L3_SHARD_CORRUPT",
                 "L3_VERTEX_ROWS", "L3_FRAGMENT_INDEX_UNDECODABLE", "L3_FRAGMENT_INDEX_MISSING",
                 "L3_FRAGMENT_OUT_OF_RANGE",
                 "L3_NONFINITE_VERTEX", "L3_VERTEX_COUNT", "L3_ARRAYS_PRESENT", "L3_ATTRIBUTE_ROWS",
                 "L3_FRAGMENT_ATTRIBUTE_ROWS", "L3_OFFSETS_NOT_CANONICAL", "L3_HAS_PERM", "L3_LINK_CELL_BYTES",
                 "L3_LINK_ENCODING", "L3_PERM_IDX_RANGE", "L3_LINK_VI_OUT_OF_RANGE", "L3_LINK_ENDPOINT_CHUNK_MISSING",
                 "L3_LINK_FRAGMENTS_PRESENCE", "L3_LINK_FRAGMENTS_TILE", "L3_LINK_ATTRIBUTE_MIRROR",
                 "L3_LINK_ATTRIBUTE_ROWS", "L3_FAMILY_PHYSICAL_COUNT", "L3_FAMILY_NUM_LINKS"):
        ran[code] = 1
    if any(model.level_attrs(n).get("fragments_tile") is True for n in model.levels):
        ran["L3_FRAGMENTS_TILE"] = 1
    if manifests:
        for code in ("L3_MANIFEST_CHUNK_MISSING", "L3_MANIFEST_FRAGMENT_OUT_OF_RANGE", "L3_OBJECT_NUM_PRESENT",
                     "L3_FRAGMENT_SHARED", "L3_VERTEX_OWNERS"):
            ran[code] = 1
    try:
        orphan_attribute_families(model, static)
        graph = build(model, requested, manifests, static, ran)
        (found,) = runner.compute("validate", graph)
    except Exception as exc:  # noqa: BLE001
        return static + [crashed(3, "/", exc, what="consistency graph")], ran
    return static + found, ran
