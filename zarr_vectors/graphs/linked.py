"""Writers of the linked kinds -- graph, mesh, skeleton, polyline, streamline, line -- as Dask graphs.

Every kind is the shared vertex stage (``graphs.vertices``) followed by one link
stage over the records the kind stores (FORMAT.md §8):

1. vertex owners write their cells and report where every input vertex landed;
2. one task assembles that placement (input vertex -> chunk, chunk-local row);
3. per block of records: endpoints resolved through the placement and placed
   (``partition_records_by_offset``, the single place placement is decided);
4. the coordinator stamps the family and creates every offsets / attribute array
   the blocks need (metadata only);
5. per cell owner: its share of every block's partition, merged, written whole with
   ``record_presence=False`` (links, ``link_fragments``, link attributes);
6. one reconcile task: vertex presence lists and object index, ``finalize_links``
   with the counts the tasks report, level metadata.

Intermediate results stay where they were computed (``runner.persist``): on the
workers under a distributed client, in memory on local threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np

from zarr_vectors.core.arrays import (
    LinkCounts,
    LinkPartition,
    create_link_attribute_arrays,
    create_links_family,
    create_links_segments,
    finalize_links,
    partition_records_by_offset,
    write_link_attribute_cells,
    write_link_cells,
)
from zarr_vectors.core.paths import format_offsets, intra_offsets
from zarr_vectors.core.storage import Storage
from zarr_vectors.core.store import Level, create_store
from zarr_vectors.errors import InputError
from zarr_vectors.geometry import topology
from zarr_vectors.graphs import runner
from zarr_vectors.graphs import vertices as vx
from zarr_vectors.graphs.points import WriteResult

RECORD_BLOCK = 1_000_000


@dataclass(frozen=True)
class LinkSpec:
    """The family a kind writes at delta 0."""

    link_width: int
    directed: bool
    store: str
    always_intra: bool  # graph / mesh / skeleton keep links/0/<all-zero> allocated even when empty


def _records_in(records: Any, n: int, *, what: str, width: int | None = None) -> np.ndarray | da.Array:
    """Numpy records checked whole now; dask records checked for shape now, values per block later."""
    if isinstance(records, da.Array):
        topology.check_record_shape(records, what=what, width=width)
        return records
    return topology.check_records(records, n, what=what, width=width)


def _check_policy(directed: Any, store: Any) -> None:
    if not isinstance(directed, bool):
        raise InputError(f"directed must be True or False, found {directed!r}")
    if store not in ("canonical", "duplicate"):
        raise InputError(f"store must be 'canonical' or 'duplicate', found {store!r}")


def _check_record_attributes(values: Mapping[str, Any] | None, m: int, what: str) -> dict[str, Any]:
    """Attribute columns (numpy or dask), one row per record."""
    out = {}
    for name, value in (values or {}).items():
        vx.check_name(name, what)
        arr = value if isinstance(value, da.Array) else np.asarray(value)
        if arr.ndim not in (1, 2) or arr.shape[0] != m:
            raise InputError(f"{what} {name!r} has shape {arr.shape}; expected ({m},) or ({m}, channels), one row per record")
        if arr.dtype.kind not in vx.ATTRIBUTE_KINDS:
            raise InputError(f"{what} {name!r} has unsupported dtype {arr.dtype} (numeric or bool only)")
        out[name] = arr
    return out


# ---------------------------------------------------------------------------
# link tasks: route record blocks to cell owners, place, write
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class OwnerRecords:
    """The records one block routes to one cell owner, in input order, with their attribute rows."""

    records: np.ndarray  # (k, L) input vertex indices
    attributes: dict[str, np.ndarray]


def _route_block(
    records: np.ndarray,
    attributes: dict[str, np.ndarray],
    placement: vx.Placement,
    owner_of_rank: np.ndarray,
    link: LinkSpec,
) -> list[OwnerRecords]:
    """Split a block of records by the owner of the cell(s) they are filed in.

    A record is filed in its source endpoint's cell: endpoint 0 when directed, else the
    smallest endpoint chunk (cell ranks follow chunk order), and under
    ``store="duplicate"`` in every distinct endpoint chunk -- then it goes to every
    owner of one of them.  Order within each share stays input order, so owners see
    records in ascending input position once the blocks are concatenated in order.
    """
    num_owners = int(owner_of_rank.max()) + 1 if owner_of_rank.size else 1
    ends = np.take(placement.rank, records)
    if link.store == "duplicate":
        m, width = records.shape
        key = np.unique(owner_of_rank[ends].astype(np.int64) * m + np.arange(m)[:, None])  # (owner, record) pairs
        owner, picked = np.divmod(key, m)
    else:
        src = ends[:, 0] if link.directed else ends.min(axis=1)
        by_owner = owner_of_rank[src]
        picked = np.argsort(by_owner, kind="stable")
        owner = by_owner[picked]
    cuts = np.searchsorted(owner, np.arange(num_owners + 1))
    shares = []
    for k in range(num_owners):
        sel = picked[cuts[k] : cuts[k + 1]]
        shares.append(OwnerRecords(records[sel], {name: v[sel] for name, v in attributes.items()}))
    return shares


def _share(shares: list[OwnerRecords], k: int) -> OwnerRecords:
    return shares[k]


@dataclass(frozen=True)
class OwnerLinks:
    """One cell owner's placed records: its partition (records numbered in the owner's own
    input order) and the attribute rows in that order."""

    partition: LinkPartition | None
    attributes: dict[str, np.ndarray]


def _place_owner(placement: vx.Placement, plan: vx.VertexPlan, k: int, link: LinkSpec, *shares: OwnerRecords) -> OwnerLinks:
    """Place every record routed to owner ``k`` (``partition_records_by_offset``) in one pass."""
    records = np.concatenate([s.records for s in shares]) if shares else np.zeros((0, link.link_width), np.int64)
    if records.shape[0] == 0:
        return OwnerLinks(None, {})
    flat = records.reshape(-1)
    chunks = np.take(placement.chunks, flat, axis=0).reshape(records.shape + (placement.chunks.shape[1],))
    part = partition_records_by_offset(
        chunks, np.take(placement.rows, flat).reshape(records.shape), directed=link.directed, store=link.store
    )
    if link.store == "duplicate":  # copies filed in other owners' cells are theirs to write
        cells = part.group_cells()
        linear = np.ravel_multi_index(tuple((cells - plan.origin).T), plan.grid_shape)
        part = part.select_groups(plan.owner_of_rank()[plan.rank_of(linear)] == k)
    names = shares[0].attributes.keys()
    return OwnerLinks(part, {name: np.concatenate([s.attributes[name] for s in shares]) for name in names})


def _segments(owned: OwnerLinks) -> tuple[str, ...]:
    return owned.partition.segments if owned.partition is not None else ()


def _write_link_owner(level: Level, owned: OwnerLinks) -> int:
    part = owned.partition
    if part is None or part.num_groups == 0:
        return 0
    write_link_cells(level, 0, part)
    for name, values in owned.attributes.items():
        write_link_attribute_cells(level, name, 0, values, part)
    return part.num_physical_records


def _reconcile(
    level: Level,
    arrays: vx.VertexArrays,
    spec: vx.VertexSpec,
    plan: vx.VertexPlan,
    object_attributes: Mapping[str, np.ndarray],
    vertex_summaries: Sequence[dict[str, Any]],
    total: int,
    has_family: bool,
    *link_rows: int,
) -> dict[str, int]:
    present = vx.reconcile_vertices(level, arrays, spec, plan, object_attributes, vertex_summaries)
    if has_family:
        finalize_links(level, 0, counts=LinkCounts(total, int(sum(link_rows))))
        present.append("links")
    level.meta.arrays_present = present
    level.write_metadata()
    return {"cells": len(plan.cells), "rows": level.meta.vertex_count, "links": total}


# ---------------------------------------------------------------------------
# the shared driver
# ---------------------------------------------------------------------------
RecordSource = Callable[[vx.Placement], np.ndarray]


@dataclass(frozen=True)
class RecordCheck:
    """What to check, per block, of records given as a dask array (a numpy array is
    checked whole by the public writer before it gets here)."""

    what: str
    distinct: bool = False


def _record_blocks(
    records: np.ndarray | da.Array,
    attributes: Mapping[str, Any],
    n_vertices: int,
    check: RecordCheck,
) -> tuple[list[Any], list[dict[str, Any]]]:
    """Record blocks and their attribute blocks as graph references, checked.

    A dask array keeps its own blocks (one per source partition: no rechunk, so no
    data moves), is read once into cluster memory (``persist``) and checked block by
    block before anything is written; a numpy array is cut into ``RECORD_BLOCK`` rows.
    """
    if isinstance(records, da.Array):
        rec = records.rechunk({1: -1})
        rows = np.r_[0, np.cumsum(rec.chunks[0])].astype(int).tolist()
        columns = {name: vx.publish_blocks(v, rows) for name, v in attributes.items()}
        blocks = rec.to_delayed().ravel().tolist()
        flat = runner.persist("read records", *blocks, *[b for bs in columns.values() for b in bs])
        record_blocks, rest = flat[: len(blocks)], flat[len(blocks) :]
        columns = {name: rest[i * len(blocks) : (i + 1) * len(blocks)] for i, name in enumerate(columns)}
        problems = runner.compute(
            "check records",
            *[
                dask.delayed(topology.record_block_problem)(b, n_vertices, first, check.what, check.distinct)
                for b, first in zip(record_blocks, rows[:-1])
            ],
        )
        for problem in problems:
            if problem is not None:
                raise InputError(problem)
    else:
        rows = list(range(0, len(records), RECORD_BLOCK)) + [len(records)]
        record_blocks = vx.publish_blocks(records, rows)
        columns = {name: vx.publish_blocks(v, rows) for name, v in attributes.items()}
    return record_blocks, [{name: bs[b] for name, bs in columns.items()} for b in range(len(record_blocks))]


def write_linked(
    url: str,
    kind: str,
    positions: Any,
    *,
    records: np.ndarray | da.Array | RecordSource,
    link: LinkSpec,
    links_convention: str,
    fragment_mode: vx.FragmentMode,
    chunk_shape: Sequence[float] | float,
    bin_shape: Sequence[float] | float | None,
    bounds: Any,
    object_ids: Any,
    attributes: Mapping[str, Any] | None,
    object_attributes: Mapping[str, Any] | None,
    record_attributes: Mapping[str, np.ndarray] | None,
    compressor: Any,
    storage_options: Mapping[str, Any] | None,
    overwrite: bool,
    fragment_breaks: np.ndarray | None = None,
    record_check: RecordCheck | None = None,
) -> WriteResult:
    """Write vertices, then the kind's records, as one job on the current scheduler.

    ``records`` is an (m, L) numpy array of input vertex indices (already checked), a
    dask array of them (checked here per block, by ``record_check``, before anything
    is written), or a function deriving them from the vertex placement (polyline
    bridges, skeleton parents not implied by row order).
    """
    spec, blocks = vx.normalise_vertex_inputs(
        positions,
        chunk_shape=chunk_shape,
        bin_shape=bin_shape,
        bounds=bounds,
        object_ids=object_ids,
        attributes=attributes,
        compressor=compressor,
        mode=fragment_mode,
        breaks=fragment_breaks,
    )
    obj_attrs = vx.check_object_attributes(object_attributes, has_ids=True)
    storage = Storage(url, storage_options)
    storage.check_reachable()
    plan = vx.plan_vertices(spec, blocks)
    vx.check_object_attribute_rows(obj_attrs, plan.num_objects)
    if not callable(records):
        record_blocks, attr_blocks = _record_blocks(
            records, record_attributes or {}, spec.n, record_check or RecordCheck("records")
        )
        total = int(records.shape[0])

    store = create_store(
        storage,
        chunk_shape=spec.chunk_shape,
        bounds=plan.bounds,
        geometry_type=kind,
        base_bin_shape=spec.bin_shape,
        links_convention=links_convention,
        overwrite=overwrite,
    )
    level = store.level(0)
    arrays = vx.create_vertex_arrays(level, spec, plan)
    vertex_owners = runner.persist("write vertices", *vx.write_graph(arrays, spec, plan, blocks, with_gid=True))
    (placement,) = runner.persist(
        "placement", dask.delayed(vx.assemble_placement)(plan, spec.n, *vertex_owners), everywhere=True
    )

    if callable(records):
        (derived,) = runner.persist("derive records", dask.delayed(records)(placement))
        total = int(runner.compute("count records", dask.delayed(len)(derived))[0])
        record_blocks, attr_blocks = [derived], [{}]

    num_owners = len(plan.owners)
    owner_of_rank = plan.owner_of_rank()
    routed = runner.persist(
        "route records",
        *[dask.delayed(_route_block)(r, a, placement, owner_of_rank, link) for r, a in zip(record_blocks, attr_blocks)],
    )
    owned = runner.persist(
        "place records",
        *[
            dask.delayed(_place_owner)(placement, plan, k, link, *[dask.delayed(_share)(r, k) for r in routed])
            for k in range(num_owners)
        ],
    )
    segments = set().union(*runner.compute("plan links", *[dask.delayed(_segments)(o) for o in owned]))
    has_family = bool(segments) or link.always_intra
    if link.always_intra:
        segments.add(format_offsets(intra_offsets(spec.ndim, link.link_width)))
    link_rows: list[Any] = []
    if has_family:
        create_links_family(
            level, 0, link_width=link.link_width, directed=link.directed, store=link.store, sid_ndim=spec.ndim
        )
        extent = (tuple(int(v) for v in plan.origin), plan.grid_shape)
        create_links_segments(level, 0, sorted(segments), extent=extent, compressor=spec.compressor)
        for name, values in (record_attributes or {}).items():
            create_link_attribute_arrays(
                level, name, 0, dtype=values.dtype, row_shape=values.shape[1:], compressor=spec.compressor
            )
        link_rows = runner.persist("write links", *[dask.delayed(_write_link_owner)(level, o) for o in owned])
    (done,) = runner.compute(
        "reconcile",
        dask.delayed(_reconcile)(
            level, arrays, spec, plan, obj_attrs, list(vertex_owners), total, has_family, *link_rows
        )
    )
    return WriteResult(
        storage.url, kind, done["rows"], done["cells"], len(plan.owners), plan.num_objects, done["links"]
    )


# ---------------------------------------------------------------------------
# the public writers
# ---------------------------------------------------------------------------
def write_graph(
    url: str,
    positions: Any,
    edges: Any,
    *,
    chunk_shape: Sequence[float] | float,
    directed: bool = False,
    store: str = "canonical",
    edge_attributes: Mapping[str, Any] | None = None,
    bin_shape: Sequence[float] | float | None = None,
    bounds: Any = None,
    object_ids: Any = None,
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    compressor: str | dict[str, Any] | None = "zstd",
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> WriteResult:
    """A graph: vertices (one fragment per object per chunk; all object 0 without ids) and edges.

    ``edges`` (m, 2) input vertex indices, numpy or dask (a dask array is checked
    block by block on the cluster, still before anything is written); ``directed`` and
    ``store`` are the family policy (all four combinations).  Edge attributes have one
    row per edge (dask arrays alongside dask edges).
    """
    _check_policy(directed, store)
    n = int(np.shape(positions)[0]) if np.ndim(positions) == 2 else 0
    rec = _records_in(edges, n, what="edges", width=2)
    return write_linked(
        url, "graph", positions,
        records=rec, link=LinkSpec(2, directed, store, True), links_convention="explicit", fragment_mode="objects",
        chunk_shape=chunk_shape, bin_shape=bin_shape, bounds=bounds, object_ids=object_ids, attributes=attributes,
        object_attributes=object_attributes,
        record_attributes=_check_record_attributes(edge_attributes, rec.shape[0], "edge attribute"),
        compressor=compressor, storage_options=storage_options, overwrite=overwrite,
        record_check=RecordCheck("edges"),
    )  # fmt: skip


def write_mesh(
    url: str,
    positions: Any,
    faces: Any,
    *,
    chunk_shape: Sequence[float] | float,
    face_attributes: Mapping[str, Any] | None = None,
    bin_shape: Sequence[float] | float | None = None,
    bounds: Any = None,
    object_ids: Any = None,
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    compressor: str | dict[str, Any] | None = "zstd",
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> WriteResult:
    """A mesh: faces (m, L >= 3) of distinct vertices, undirected canonical; winding kept via perm_idx.

    ``faces`` numpy or dask, as the edges of :func:`write_graph`.
    """
    n = int(np.shape(positions)[0]) if np.ndim(positions) == 2 else 0
    rec = _records_in(faces, n, what="faces")
    if rec.shape[1] < 3:
        raise InputError(f"faces must have at least 3 vertices each, found {rec.shape[1]}")
    if isinstance(rec, np.ndarray):
        topology.check_distinct(rec, what="faces")
    return write_linked(
        url, "mesh", positions,
        records=rec, link=LinkSpec(rec.shape[1], False, "canonical", True), links_convention="explicit",
        fragment_mode="objects", chunk_shape=chunk_shape, bin_shape=bin_shape, bounds=bounds, object_ids=object_ids,
        attributes=attributes, object_attributes=object_attributes,
        record_attributes=_check_record_attributes(face_attributes, rec.shape[0], "face attribute"),
        compressor=compressor, storage_options=storage_options, overwrite=overwrite,
        record_check=RecordCheck("faces", distinct=True),
    )  # fmt: skip


def _skeleton_records(parents: np.ndarray, object_ids: np.ndarray) -> RecordSource:
    def explicit_edges(placement: vx.Placement) -> np.ndarray:
        """``[child, parent]`` for every parent link not implied by the next row of the same fragment."""
        child = np.flatnonzero(parents >= 0)
        parent = parents[child]
        implied = (
            (placement.chunks[child] == placement.chunks[parent]).all(axis=1)
            & (placement.rows[child] == placement.rows[parent] + 1)
            & (object_ids[child] == object_ids[parent])
        )
        return np.stack([child[~implied], parent[~implied]], axis=1)

    return explicit_edges


def write_skeleton(
    url: str,
    positions: Any,
    parents: Any,
    *,
    chunk_shape: Sequence[float] | float,
    bin_shape: Sequence[float] | float | None = None,
    bounds: Any = None,
    object_ids: Any = None,
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    compressor: str | dict[str, Any] | None = "zstd",
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> WriteResult:
    """A skeleton (forest): ``parents[i]`` is node i's parent, -1 for roots.

    Nodes are stored depth-first from each root, so most parent links are implied by
    row order (``implicit_sequential_with_branches``); the rest are explicit
    ``[child, parent]`` records, directed (D5).  Vertex order on read is that
    depth-first order.
    """
    pos = np.asarray(positions)
    n = int(pos.shape[0]) if pos.ndim == 2 else 0
    par = topology.check_parents(parents, n)
    order = topology.depth_first_order(par)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    new_parents = np.where(par[order] >= 0, rank[np.maximum(par[order], 0)], -1)
    ids = np.zeros(n, np.int64) if object_ids is None else np.asarray(object_ids)
    if ids.shape != (n,):
        raise InputError(f"object_ids must have shape ({n},), found {ids.shape}")
    ids = ids[order]
    reordered_attrs = {k: np.asarray(v)[order] if np.ndim(v) >= 1 and len(v) == n else v for k, v in (attributes or {}).items()}
    return write_linked(
        url, "skeleton", pos[order],
        records=_skeleton_records(new_parents, ids.astype(np.int64)), link=LinkSpec(2, True, "canonical", True),
        links_convention="implicit_sequential_with_branches", fragment_mode="objects",
        chunk_shape=chunk_shape, bin_shape=bin_shape, bounds=bounds, object_ids=ids, attributes=reordered_attrs,
        object_attributes=object_attributes, record_attributes=None,
        compressor=compressor, storage_options=storage_options, overwrite=overwrite,
        fragment_breaks=new_parents < 0,  # a root never continues a fragment: its row-1 is not its parent
    )  # fmt: skip


def write_polylines(
    url: str,
    positions: Any,
    offsets: Any,
    *,
    chunk_shape: Sequence[float] | float,
    kind: str = "polyline",
    bin_shape: Sequence[float] | float | None = None,
    bounds: Any = None,
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    compressor: str | dict[str, Any] | None = "zstd",
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> WriteResult:
    """Polylines, streamlines or lines: ``offsets`` are CSR boundaries into ``positions``.

    Polyline p (object id p) is ``positions[offsets[p]:offsets[p+1]]``; each run of it
    inside one chunk is a fragment, and consecutive runs are joined by explicit L=2
    bridges -- directed for streamlines (D4), undirected canonical otherwise.  Lines
    have exactly two vertices each.  Object attributes have one row per polyline.
    """
    if kind not in ("polyline", "streamline", "line"):
        raise InputError(f"kind must be 'polyline', 'streamline' or 'line', found {kind!r}")
    n = int(np.shape(positions)[0]) if np.ndim(positions) == 2 else 0
    off = topology.check_offsets(offsets, n, exact_length=2 if kind == "line" else None)
    ids = np.repeat(np.arange(len(off) - 1, dtype=np.int64), np.diff(off))

    def bridges(placement: vx.Placement) -> np.ndarray:
        return topology.polyline_bridges(off, placement.chunks)

    return write_linked(
        url, kind, positions,
        records=bridges, link=LinkSpec(2, kind == "streamline", "canonical", False),
        links_convention="implicit_sequential", fragment_mode="runs",
        chunk_shape=chunk_shape, bin_shape=bin_shape, bounds=bounds, object_ids=ids, attributes=attributes,
        object_attributes=object_attributes, record_attributes=None,
        compressor=compressor, storage_options=storage_options, overwrite=overwrite,
    )  # fmt: skip
