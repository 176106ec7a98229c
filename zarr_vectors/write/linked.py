"""Writers of the linked kinds -- graph, mesh, skeleton, polyline, streamline, line -- as Dask graphs.

Every kind is the shared vertex stage (``graphs.vertices``) followed by one link
stage over the records the kind stores (docs/format.md §8):

1. vertex owners write their cells and report where every input vertex landed;
2. one task assembles that placement (input vertex -> chunk, chunk-local row, cell
   rank), copied to every worker;
3. per block of records: the cell each record is filed in (its source endpoint's),
   sorted by cell; the per-cell counts come back to the coordinator;
4. link owners are runs of whole cells of even record counts -- not the vertex
   owners: undirected records are filed in their smallest endpoint cell, which
   crowds the first cells -- and each takes its cells' records from every block
   and places them in one pass (``partition_records_by_rank``: intra records by cell
   rank, the rest through ``partition_records_by_offset``, where placement is decided);
5. the coordinator composes the family and every offsets / attribute array the
   owners' partitions need, and writes the groups' documents in one batch;
6. every link owner writes its cells whole (links, ``link_fragments``, link
   attributes) into the composed arrays and reports them;
7. the reconcile tasks: vertex presence lists and object index; the family's
   presence lists (the owners' reports checked against listings), array documents
   and counts in one batch; then the level metadata.

Intermediate results stay where they were computed (``runner.persist``): on the
workers under a distributed client, in memory on local threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import dask
import numpy as np
from typing_extensions import Unpack

from zarr_vectors import config, reconcile
from zarr_vectors.errors import InputError
from zarr_vectors.execution import runner
from zarr_vectors.format import topology
from zarr_vectors.format.coarsen import unique_sorted
from zarr_vectors.format.links import LinkCounts, LinkPartition, make_policy, partition_records_by_rank
from zarr_vectors.format.paths import format_offsets, intra_offsets
from zarr_vectors.format.points import stable_order, take_rows
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.groups import Level, create_store, empty_level, removed_if_unfinished
from zarr_vectors.store.link_cells import (
    LinkWriteSummary,
    compose_link_attribute,
    write_link_attribute_cells,
    write_link_cells,
)
from zarr_vectors.store.link_family import LINK_ATTRIBUTES, LINKS, CreatedFamily, compose_new_family
from zarr_vectors.store.nodes import group_document, write_nodes
from zarr_vectors.write import vertices as vx
from zarr_vectors.write.arguments import (
    attribute_column,
    check_positions,
    input_array,
    is_dask_array,
    mapping_argument,
)
from zarr_vectors.write.options import SharedOptions, WriteOptions
from zarr_vectors.write.plan import plan_write
from zarr_vectors.write.points import WriteResult

if TYPE_CHECKING:
    import dask.array as da


@dataclass(frozen=True)
class LinkSpec:
    """The family a kind writes at delta 0."""

    link_width: int
    directed: bool
    store: str
    always_intra: bool  # graph / mesh / skeleton keep links/0/<all-zero> allocated even when empty


def _records_in(records: Any, n: int, *, what: str, width: int | None = None) -> np.ndarray | da.Array:
    """Numpy records checked whole now; dask records checked for shape now, values per block later."""
    records = input_array(records, what)
    if is_dask_array(records):
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
    for name, value in mapping_argument(values, what.replace(" ", "_") + "s").items():  # the argument
        out[name] = attribute_column(value, name, m, what, per="record")
    return out


# ---------------------------------------------------------------------------
# link tasks: route record blocks to cell owners, place, write
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class OwnerRecords:
    """The records one block sends to one link owner, with their attribute rows."""

    records: np.ndarray  # (k, L) input vertex indices
    attributes: dict[str, np.ndarray]


@dataclass(frozen=True)
class FiledRecords:
    """A block of records and the cell (by rank) each copy is filed in, ascending.

    A record is filed in its source endpoint's cell: endpoint 0 when directed, else the
    smallest endpoint chunk (cell ranks follow chunk order), and under
    ``store="duplicate"`` once in every distinct endpoint chunk.  ``index[i]`` is the
    block row of copy ``i``; copies of one cell keep input order.
    """

    records: np.ndarray
    attributes: dict[str, np.ndarray]
    filed: np.ndarray  # (copies,) cell rank, ascending
    index: np.ndarray  # (copies,) block row

    def counts(self, num_cells: int) -> np.ndarray:
        return np.bincount(self.filed, minlength=num_cells)

    def share(self, cells: slice, duplicate: bool) -> OwnerRecords:
        """The records filed in the cells of ranks ``cells``, each once."""
        lo, hi = np.searchsorted(self.filed, [cells.start, cells.stop])
        rows = self.index[lo:hi]
        if duplicate:  # a record filed in two cells of this owner's run is placed (and copied) once
            rows = unique_sorted(rows)
        return OwnerRecords(take_rows(self.records, rows), {name: take_rows(v, rows) for name, v in self.attributes.items()})


def _file_block(
    records: np.ndarray, attributes: dict[str, np.ndarray], placement: vx.Placement, link: LinkSpec, num_cells: int
) -> FiledRecords:
    ends = np.take(placement.rank, records)
    if link.store == "duplicate":
        m = records.shape[0]
        key = unique_sorted(ends.astype(np.int64) * m + np.arange(m)[:, None])  # (cell, record) pairs, each once
        filed, index = np.divmod(key, m)
    else:
        src = ends[:, 0].copy()
        for k in range(1, 1 if link.directed else ends.shape[1]):  # column by column: no strided reduce
            np.minimum(src, ends[:, k], out=src)
        index = stable_order(src, num_cells)
        filed = src[index]
    return FiledRecords(records, attributes, filed, index)


@dataclass(frozen=True)
class OwnerLinks:
    """One link owner's placed records: its partition (records numbered in the owner's own
    input order) and the attribute rows in that order."""

    partition: LinkPartition | None
    attributes: dict[str, np.ndarray]


def _place_owner(placement: vx.Placement, plan: vx.VertexPlan, cells: slice, link: LinkSpec, *shares: OwnerRecords) -> OwnerLinks:
    """Place every record filed in the cells of ranks ``cells`` (``partition_records_by_rank``) in one pass."""
    records = np.concatenate([s.records for s in shares]) if shares else np.zeros((0, link.link_width), np.int64)
    if records.shape[0] == 0:
        return OwnerLinks(None, {})
    # endpoints as cell ranks: most records are intra-chunk, and only the rest need coordinates
    part = partition_records_by_rank(
        plan.chunks(), np.take(placement.rank, records), np.take(placement.rows, records),
        directed=link.directed, store=link.store,
    )  # fmt: skip
    if link.store == "duplicate":  # copies filed in other owners' cells are theirs to write
        group_cells = part.group_cells()
        rank = plan.rank_of(np.ravel_multi_index(tuple((group_cells - plan.origin).T), plan.grid_shape))
        part = part.select_groups((rank >= cells.start) & (rank < cells.stop))
    names = shares[0].attributes.keys()
    return OwnerLinks(part, {name: np.concatenate([s.attributes[name] for s in shares]) for name in names})


def _segments(owned: OwnerLinks) -> tuple[str, ...]:
    return owned.partition.segments if owned.partition is not None else ()


def _write_link_owner(level: Level, owned: OwnerLinks, created: CreatedFamily) -> LinkWriteSummary | None:
    """An owner's link and link-attribute cells, into the arrays the coordinator composed."""
    part = owned.partition
    if part is None or part.num_groups == 0:
        return None
    written = write_link_cells(level, 0, part, created)
    for name, values in owned.attributes.items():
        write_link_attribute_cells(level, name, 0, values, part, created)
    return written


def _family_cells(created: CreatedFamily, *written: LinkWriteSummary | None) -> tuple[dict[str, set[str]], int]:
    """What the link owners report: every array's cells, and the records on storage."""
    reports = [w for w in written if w is not None]
    return reconcile.family_cells(created, reports), sum(w.num_physical_records for w in reports)


def _family_problems(
    level: Level, created: CreatedFamily, reported: tuple[dict[str, set[str]], int], rels: list[str]
) -> list[str]:
    return reconcile.family_presence_problems(level, created, reported[0], rels)


def _finalize_family(
    level: Level, created: CreatedFamily, total: int, reported: tuple[dict[str, set[str]], int], *problems: list[str]
) -> None:
    """The family's presence lists and counts, once every listing agreed with the reports."""
    expected, physical = reported
    reconcile.write_family_documents(level, created, expected, LinkCounts(total, physical), *problems)


def _finish_level(level: Level, families: list[str], vertex_count: int, *done: None) -> None:
    """The level metadata, once every part is reconciled."""
    reconcile.finish_level(level, families, vertex_count)


def _create_family(level: Level, spec: vx.VertexSpec, plan: vx.VertexPlan, link: LinkSpec, segments: Sequence[str],
                   record_attributes: Mapping[str, np.ndarray]) -> CreatedFamily:  # fmt: skip
    """The coordinator step: the family and its attribute families, composed in memory; the
    groups' documents in one batch (the arrays' come with their presence lists, from the
    reconcile).  The level is new: nothing of the family exists yet."""
    policy = make_policy(0, link.link_width, link.directed, link.store, spec.ndim)
    extent = (tuple(int(v) for v in plan.origin), plan.grid_shape)
    created = compose_new_family(level, policy, segments, extent=extent, dtype="int64", compressor=spec.compressor)
    for name, values in record_attributes.items():
        created = compose_link_attribute(
            level, created, name, dtype=values.dtype, row_shape=values.shape[1:], compressor=spec.compressor
        )
    plain = [LINKS] + ([LINK_ATTRIBUTES] if record_attributes else []) + [f"{LINK_ATTRIBUTES}/{n}" for n in record_attributes]
    documents = {level.node_path(rel): group_document() for rel in plain}
    documents.update(created.group_documents())
    write_nodes(level.storage, documents)
    return created


def _reconcile(
    bare: Level,
    spec: vx.VertexSpec,
    plan: vx.VertexPlan,
    vertex_parts: list[Any],
    link_rows: Sequence[Any],
    total: int,
    family: CreatedFamily | None,
    created: Any,
) -> None:
    """The reconcile step as side-by-side tasks (they touch disjoint files): the vertex
    parts (started as soon as the vertices were written; on local threads run already,
    beside the link writes, when there are links) and the links family's; one last task
    writes the level metadata.  ``bare``: the level without its remembered array documents,
    which these tasks never read; ``family``: the links family as composed (None: no links),
    ``created`` the same as one graph node."""
    parts = list(vertex_parts)
    if family is not None:
        reported = dask.delayed(_family_cells)(created, *link_rows)
        # a listing per array (a request each on an object store): split over tasks of a useful size
        rels = list(family.every_array())  # the one-task form's order: offsets arrays, then attributes
        runs = runner.task_runs(np.ones(len(rels), dtype=np.int64), config.get("write.min-arrays-per-check"),
                                tasks_per_thread=1)
        problems = [dask.delayed(_family_problems)(bare, created, reported, rels[run]) for run in runs]
        parts.append(dask.delayed(_finalize_family)(bare, created, total, reported, *problems))
    families = vx.vertex_families(spec) + (["links"] if family is not None else [])
    runner.compute("reconcile", dask.delayed(_finish_level)(bare, families, int(plan.counts.sum()), *parts))


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
    block before anything is written; a numpy array is cut into blocks of ``zarr_vectors.write.record-block`` rows.
    """
    if is_dask_array(records):
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
        rows = list(range(0, len(records), config.get("write.record-block"))) + [len(records)]
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
    options: WriteOptions,
    object_ids: Any,
    attributes: Mapping[str, Any] | None,
    object_attributes: Mapping[str, Any] | None,
    record_attributes: Mapping[str, np.ndarray] | None,
    fragment_breaks: np.ndarray | None = None,
    record_check: RecordCheck | None = None,
) -> WriteResult:
    """Write vertices, then the kind's records, as one job on the current scheduler.

    ``records`` is an (m, L) numpy array of input vertex indices (already checked), a
    dask array of them (checked here per block, by ``record_check``, before anything
    is written), or a function deriving them from the vertex placement (polyline
    bridges, skeleton parents not implied by row order).
    """
    storage = Storage(url, options.storage_options)
    storage.check_reachable()
    planned = plan_write(
        positions, options=options, object_ids=object_ids, attributes=attributes,
        object_attributes=object_attributes, fragment_mode=fragment_mode, fragment_breaks=fragment_breaks,
        objects_required=True,
    )  # fmt: skip
    spec, blocks, plan, obj_attrs = planned.spec, planned.blocks, planned.vertices, planned.object_attributes
    if not callable(records):
        record_blocks, attr_blocks = _record_blocks(
            records, record_attributes or {}, spec.n, record_check or RecordCheck("records")
        )
        total = int(records.shape[0])

    first_documents: dict[str, dict[str, Any]] = {}  # the root's and level 0's, sent with the arrays'
    store = create_store(
        storage,
        chunk_shape=spec.chunk_shape,
        bounds=plan.bounds,
        geometry_type=kind,
        base_bin_shape=spec.bin_shape,
        links_convention=links_convention,
        overwrite=options.overwrite,
        pending=first_documents,
        headers=options.headers,
    )
    with removed_if_unfinished(storage):
        level = empty_level(store)
        arrays = vx.create_vertex_arrays(level, spec, plan, pending=first_documents)
        # what many tasks take, as one node each (dask would walk them once per task otherwise)
        plan_ref, link_ref, level_ref = runner.share(plan), runner.share(link), runner.share(level)
        vertex_owners = runner.persist(
            "write vertices", *vx.write_graph(arrays, spec, plan, blocks, with_gid=True, plan_ref=plan_ref)
        )
        (placement,) = runner.persist(
            "placement", dask.delayed(vx.assemble_placement)(plan_ref, spec.n, *vertex_owners), everywhere=True
        )
        # the vertex half of the reconcile step needs nothing of the links: it runs beside them
        # (under a client from now on; on local threads with the link writes)
        bare = replace(level, known_arrays={})  # reconcile tasks read presence lists, not remembered documents
        vertex_parts = runner.start(*vx.reconcile_tasks(bare, arrays, spec, plan, obj_attrs, vertex_owners))

        if callable(records):
            (derived,) = runner.persist("derive records", dask.delayed(records)(placement))
            total = int(runner.compute("count records", dask.delayed(len)(derived))[0])
            record_blocks, attr_blocks = [derived], [{}]

        filed = runner.persist(
            "file records",
            *[dask.delayed(_file_block)(r, a, placement, link_ref, len(plan.cells))
              for r, a in zip(record_blocks, attr_blocks)],
        )
        per_cell = np.zeros(len(plan.cells), dtype=np.int64)
        counted = [dask.delayed(FiledRecords.counts)(f, len(plan.cells)) for f in filed]
        for counts in runner.compute("records per cell", *counted):
            per_cell += counts
        duplicate = link.store == "duplicate"
        # a cell costs its records and its files (one per segment): sparse families of many
        # cells (streamline bridges) get several owners, not one task writing every file
        link_weights = per_cell + (per_cell > 0) * config.get("write.link-cell-rows")
        owned = runner.persist(
            "place records",
            *[
                dask.delayed(_place_owner)(
                    placement, plan_ref, cells, link_ref,
                    *[dask.delayed(FiledRecords.share)(f, cells, duplicate) for f in filed],
                )
                for cells in runner.task_runs(link_weights, config.get("write.min-rows-per-task"))
            ],
        )
        segments = set().union(*runner.compute("plan links", *[dask.delayed(_segments)(o) for o in owned]))
        has_family = bool(segments) or link.always_intra
        if link.always_intra:
            segments.add(format_offsets(intra_offsets(spec.ndim, link.link_width)))
        link_rows: list[Any] = []
        family = created = None  # the family as composed here, and as one graph node for the tasks
        if has_family:
            family = _create_family(level, spec, plan, link, sorted(segments), record_attributes or {})
            created = runner.share(family)
            link_rows, vertex_parts = runner.persist_beside(
                "write links", [dask.delayed(_write_link_owner)(level_ref, o, created) for o in owned], vertex_parts
            )
        _reconcile(bare, spec, plan, vertex_parts, link_rows, total, family, created)
    return WriteResult(storage.url, kind, int(plan.counts.sum()), len(plan.cells), len(plan.owners), plan.num_objects, total)


# ---------------------------------------------------------------------------
# the public writers
# ---------------------------------------------------------------------------
def write_graph(
    url: str,
    positions: Any,
    edges: Any,
    *,
    directed: bool = False,
    store: str = "canonical",
    edge_attributes: Mapping[str, Any] | None = None,
    object_ids: Any = None,
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    options: WriteOptions | None = None,
    **shared: Unpack[SharedOptions],
) -> WriteResult:
    """A graph: vertices (one fragment per object per chunk; all object 0 without ids) and edges.

    ``edges`` (m, 2) input vertex indices, numpy or dask (a dask array is checked
    block by block on the cluster, still before anything is written); ``directed`` and
    ``store`` are the family policy (all four combinations; ``"duplicate"`` stores an edge
    in each endpoint's chunk, and :func:`~zarr_vectors.read` returns every copy).  Edge
    attributes have one row per edge (dask arrays alongside dask edges).
    """
    opts = WriteOptions.resolve("write_graph", options, shared)
    _check_policy(directed, store)
    positions = check_positions(positions)  # first: the record checks count its rows
    n = int(positions.shape[0])
    rec = _records_in(edges, n, what="edges", width=2)
    return write_linked(
        url, "graph", positions,
        records=rec, link=LinkSpec(2, directed, store, True), links_convention="explicit", fragment_mode="objects",
        options=opts, object_ids=object_ids, attributes=attributes,
        object_attributes=object_attributes,
        record_attributes=_check_record_attributes(edge_attributes, rec.shape[0], "edge attribute"),
        record_check=RecordCheck("edges"),
    )  # fmt: skip


def write_mesh(
    url: str,
    positions: Any,
    faces: Any,
    *,
    face_attributes: Mapping[str, Any] | None = None,
    object_ids: Any = None,
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    options: WriteOptions | None = None,
    **shared: Unpack[SharedOptions],
) -> WriteResult:
    """A mesh: faces (m, L >= 3) of distinct vertices, undirected canonical; winding kept via perm_idx.

    ``faces`` numpy or dask, as the edges of :func:`write_graph`.
    """
    opts = WriteOptions.resolve("write_mesh", options, shared)
    positions = check_positions(positions)  # first: the record checks count its rows
    n = int(positions.shape[0])
    rec = _records_in(faces, n, what="faces")
    if rec.shape[1] < 3:
        raise InputError(f"faces must have at least 3 vertices each, found {rec.shape[1]}")
    if isinstance(rec, np.ndarray):
        topology.check_distinct(rec, what="faces")
    return write_linked(
        url, "mesh", positions,
        records=rec, link=LinkSpec(rec.shape[1], False, "canonical", True), links_convention="explicit",
        fragment_mode="objects", options=opts, object_ids=object_ids,
        attributes=attributes, object_attributes=object_attributes,
        record_attributes=_check_record_attributes(face_attributes, rec.shape[0], "face attribute"),
        record_check=RecordCheck("faces", distinct=True),
    )  # fmt: skip


def _skeleton_records(parents: np.ndarray, object_ids: np.ndarray) -> RecordSource:
    def explicit_edges(placement: vx.Placement) -> np.ndarray:
        """``[child, parent]`` for every parent link not implied by the next row of the same fragment."""
        child = np.flatnonzero(parents >= 0)
        parent = parents[child]
        implied = (
            (placement.rank[child] == placement.rank[parent])
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
    object_ids: Any = None,
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    options: WriteOptions | None = None,
    **shared: Unpack[SharedOptions],
) -> WriteResult:
    """A skeleton (forest): ``parents[i]`` is node i's parent, -1 for roots.

    The forest's structure -- ``parents`` and the object ids (dask ones are computed) --
    is held in this process: the storage order is a traversal of the whole forest.
    Positions and attributes may be dask arrays; they are permuted on the cluster.

    Nodes are stored depth-first from each root, so most parent links are implied by
    row order (``implicit_sequential_with_branches``); the rest are explicit
    ``[child, parent]`` records, directed (D5).  Vertex order on read is that
    depth-first order.
    """
    opts = WriteOptions.resolve("write_skeleton", options, shared)
    pos = check_positions(positions)  # first: the parents are checked against its rows
    n = int(pos.shape[0])
    par = topology.check_parents(parents, n)
    order = topology.depth_first_order(par)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    new_parents = np.where(par[order] >= 0, rank[np.maximum(par[order], 0)], -1)
    # the explicit-edge test needs every node's object id in one task, like the parents
    ids = np.zeros(n, np.int64) if object_ids is None else np.asarray(
        object_ids.compute() if is_dask_array(object_ids) else object_ids
    )
    if ids.shape != (n,):
        raise InputError(f"object_ids must have shape ({n},), found {ids.shape}")
    ids = ids[order]

    def reordered(v: Any) -> Any:  # dask columns are permuted on the cluster
        if is_dask_array(v):
            return v[order] if v.ndim >= 1 and v.shape[0] == n else v
        return np.asarray(v)[order] if np.ndim(v) >= 1 and len(v) == n else v

    return write_linked(
        url, "skeleton", reordered(pos),
        records=_skeleton_records(new_parents, ids.astype(np.int64)), link=LinkSpec(2, True, "canonical", True),
        links_convention="implicit_sequential_with_branches", fragment_mode="objects",
        options=opts, object_ids=ids,
        attributes={k: reordered(v) for k, v in (attributes or {}).items()},
        object_attributes=object_attributes, record_attributes=None,
        fragment_breaks=new_parents < 0,  # a root never continues a fragment: its row-1 is not its parent
    )  # fmt: skip


def _ids_between(offsets: np.ndarray, start: int, stop: int) -> np.ndarray:
    return np.searchsorted(offsets, np.arange(start, stop, dtype=np.int64), side="right") - 1


def _polyline_ids(offsets: np.ndarray, positions: Any) -> np.ndarray | da.Array:
    """Object id (polyline number) of every vertex; for dask positions a dask array with
    their blocks, so the per-vertex ids are never built on the client."""
    if not is_dask_array(positions):
        return np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    import dask.array as da  # already imported: positions is one

    (shared,) = vx.publish_blocks(offsets, [0, len(offsets)])
    bounds = np.r_[0, np.cumsum(positions.chunks[0])].astype(int).tolist()
    blocks = [
        da.from_delayed(dask.delayed(_ids_between)(shared, a, b), shape=(b - a,), dtype=np.int64)
        for a, b in zip(bounds[:-1], bounds[1:])
    ]
    return da.concatenate(blocks) if len(blocks) > 1 else blocks[0]


def write_polylines(
    url: str,
    positions: Any,
    offsets: Any,
    *,
    kind: str = "polyline",
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    options: WriteOptions | None = None,
    **shared: Unpack[SharedOptions],
) -> WriteResult:
    """Polylines, streamlines or lines: ``offsets`` are CSR boundaries into ``positions``.

    Polyline p (object id p) is ``positions[offsets[p]:offsets[p+1]]``; each run of it
    inside one chunk is a fragment, and consecutive runs are joined by explicit L=2
    bridges -- directed for streamlines (D4), undirected canonical otherwise.  Lines
    have exactly two vertices each.  Object attributes have one row per polyline.
    """
    opts = WriteOptions.resolve("write_polylines", options, shared)
    if kind not in ("polyline", "streamline", "line"):
        raise InputError(f"kind must be 'polyline', 'streamline' or 'line', found {kind!r}")
    positions = check_positions(positions)  # first: the record checks count its rows
    n = int(positions.shape[0])
    off = topology.check_offsets(offsets, n, exact_length=2 if kind == "line" else None)
    ids = _polyline_ids(off, positions)

    def bridges(placement: vx.Placement) -> np.ndarray:
        return topology.polyline_bridges(off, placement.rank[:, None])  # equal ranks, equal chunks

    return write_linked(
        url, kind, positions,
        records=bridges, link=LinkSpec(2, kind == "streamline", "canonical", False),
        links_convention="implicit_sequential", fragment_mode="runs",
        options=opts, object_ids=ids, attributes=attributes,
        object_attributes=object_attributes, record_attributes=None,
    )  # fmt: skip
