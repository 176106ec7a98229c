"""``build_pyramid``: coarser levels of a store (docs/format.md §8.1), as a Dask graph level by level.

:func:`~zarr_vectors.pyramid.plan.plan_pyramid` runs every check before anything is
written or removed (among them: the presence lists of the level-0 arrays the build
reads agree with their cells, docs/decisions.md D26); then the plan's removals happen
and the levels are built one after the other.  Level ``N`` from level ``N - 1``
(:meth:`_Builder.build_level`):

1. **bin, combine, map** (:mod:`.bins`): one graph, led by the task that decodes the
   source level's object index and plans its objects (:func:`.objects.plan_objects`);
   the layout of the metavertices, each source group's map and the object plan stay in
   memory;
2. **init** (client, metadata only): the level group and its vertex arrays;
3. one graph: a coordinator task composing every cross-level family and offsets array
   (their groups' documents in one batch), the ``+k`` / ``-k`` records placed and written by the
   owners of their cells (:mod:`.families`), the coarse vertex cells, and the
   **reconcile** tasks: presence lists, the object index and the object attributes
   (:mod:`.objects`), each family's array documents, presence lists and counts from
   what its writers report -- a task each, then the level document;
4. the root's NGFF dataset and capability tokens, last: the root names a level only once
   everything of it is written, so a build that stops leaves the levels the root names
   readable as built; the stopped level's remains, and the cross-level families toward it
   in the levels below, are the next build's to remove.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from zarr_vectors.encoding import FragmentIndex
from zarr_vectors.execution import runner
from zarr_vectors.format.coarsen import BinGrid, MetavertexLayout
from zarr_vectors.format.crosslevel import compose_parents
from zarr_vectors.format.metadata import LevelMetadata, RootMetadata
from zarr_vectors.format.paths import format_chunk_key, format_delta
from zarr_vectors.format.points import chunk_placement_checked
from zarr_vectors.format.schema import vertices_row_dtype
from zarr_vectors.pyramid.bins import (
    AttributeSpec,
    BinParams,
    bin_group,
    combine,
    layout_summary,
    map_group,
    metavertices_of,
    parent_map,
    partial_rows,
    sequences_of,
)
from zarr_vectors.pyramid.families import (
    FamilySpec,
    cell_pairs,
    family_parts,
    finalize_family,
    init_families,
    union_pairs,
    write_minus,
    write_plus,
)
from zarr_vectors.pyramid.objects import ObjectPlan, plan_objects, write_kept_attributes, write_objects
from zarr_vectors.pyramid.plan import (
    LevelState,
    NewLevel,
    PyramidPlan,
    clear_pyramid,
    level_ratios,
    plan_pyramid,
    reset_root,
)
from zarr_vectors.reconcile import confirm_presence
from zarr_vectors.store.consolidated import reconsolidating
from zarr_vectors.store.grid import GridArray, write_cells_many
from zarr_vectors.store.groups import Level
from zarr_vectors.store.nodes import group_document, write_nodes

__all__ = ["PyramidLevel", "PyramidResult", "build_pyramid"]


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PyramidLevel:
    """One level a build wrote."""

    level: int
    vertex_count: int
    cells: int
    bin_shape: tuple[float, ...]
    chunk_shape: tuple[float, ...]
    objects_kept: int | None  # None when the store has no object index


@dataclass(frozen=True)
class PyramidResult:
    """What :func:`build_pyramid` did."""

    url: str
    levels: list[PyramidLevel]
    cross_level_storage: str
    cross_level_depth: int
    families: list[tuple[int, int, int]]  # (level, delta, records)
    replaced: tuple[int, ...] = ()  # levels >= 1 the store held before: the build replaced them
    left_unsharded: bool = False  # level 0 is sharded, what the build wrote is not (shard again)

    def __str__(self) -> str:
        n = len(self.levels)
        was = f" (replacing level{'s' if len(self.replaced) > 1 else ''} {', '.join(map(str, self.replaced))})" \
            if self.replaced else ""
        lines = [f"pyramid of {self.url}: {n} level{'s' if n != 1 else ''} built{was}"]
        for lv in self.levels:
            kept = f", {lv.objects_kept} objects kept" if lv.objects_kept is not None else ""
            lines.append(
                f"  level {lv.level}: {lv.vertex_count} metavertices in {lv.cells} chunks, bin "
                f"{list(lv.bin_shape)}, chunk {list(lv.chunk_shape)}{kept}"
            )
        fams = ", ".join(f"{lv}/links/{format_delta(d)} ({n})" for lv, d, n in self.families) or "none"
        lines.append(f"  cross-level ({self.cross_level_storage}, depth {self.cross_level_depth}): {fams}")
        if self.left_unsharded:
            lines.append("  note: level 0 is sharded, but the new levels and level 0's cross-level links are written "
                         "unsharded: shard the store again (zv shard, shard_store) to shard them")
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# the coarse level's own tasks: vertex cells and the reconcile step
# ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Arrays:
    """A new level's grid arrays, as created by init."""

    vertices: GridArray
    fragments: GridArray
    attributes: dict[str, GridArray]  # the carried vertex attributes (D22)


def _attribute_document(source: LevelState, name: str) -> dict[str, Any]:
    """A carried attribute's array attributes: the source's, without its presence list and grid origin."""
    attrs = source.array(f"vertex_attributes/{name}").attributes
    return {k: v for k, v in attrs.items() if k not in ("nonempty_chunks", "chunk_grid_origin")}


def _write_vertices(arrays: _Arrays, layout: MetavertexLayout, start: int, stop: int) -> list[str]:
    """Write the coarse cells ``start:stop``: rows, one 1-row fragment per metavertex, attribute rows."""
    attributes = arrays.attributes
    cells, counts, positions, values = layout.slice_cells(start, stop)
    values = {name: v.astype(v.dtype.newbyteorder("<"), copy=False) for name, v in values.items()}  # stored LE
    vcells: dict[tuple[int, ...], bytes] = {}
    fcells: dict[tuple[int, ...], bytes] = {}
    acells: dict[str, dict[tuple[int, ...], bytes]] = {name: {} for name in attributes}
    offset = 0
    for chunk, n in zip(cells.tolist(), counts.tolist()):
        key = tuple(chunk)
        vcells[key] = positions[offset : offset + n].tobytes()
        fcells[key] = FragmentIndex.from_counts(np.ones(n, dtype=np.int64)).encode()
        for name in attributes:
            acells[name][key] = values[name][offset : offset + n].tobytes()
        offset += n
    write_cells_many(
        [(arrays.vertices, vcells), (arrays.fragments, fcells)] + [(attributes[n], acells[n]) for n in attributes]
    )
    return [format_chunk_key(c) for c in vcells]


def _vertex_keys(*parts: list[str]) -> list[str]:
    """Every coarse vertex cell the owners wrote, sorted (what the presence lists must say)."""
    return sorted({k for ks in parts for k in ks})


def _finish(level: Level, count: int, *families_then_done: Any) -> list[tuple[int, int, int]]:
    """The level document, once every reconcile task has run; safe to run twice.  The first
    ``count`` arguments after it are the families' rows (positional, as in :func:`init_families`)."""
    level.write_metadata()
    return list(families_then_done[:count])


def _objects_summary(plan: ObjectPlan) -> tuple[int, int]:
    """What the client plans the level's metadata with: (object slots, objects kept)."""
    return plan.num_objects, int(plan.kept.size)


# ---------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------
def _coarse_grid(
    bounds: tuple[tuple[float, ...], tuple[float, ...]], cs: Sequence[float], cells: np.ndarray
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(origin, shape) of a new level's arrays: the root bounds' chunks, and every occupied cell."""
    c = np.asarray(cs, dtype=np.float64)
    lo = np.floor(np.asarray(bounds[0], dtype=np.float64) / c).astype(np.int64)
    hi = np.floor(np.asarray(bounds[1], dtype=np.float64) / c).astype(np.int64)
    if len(cells):
        lo = np.minimum(lo, cells.min(axis=0))
        hi = np.maximum(hi, cells.max(axis=0))
    return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo + 1)


def _compressor(grid: GridArray) -> dict[str, Any] | None:
    """The store's compressor (D14): the one a cell of ``grid`` uses (inside the shards when sharded)."""
    comp = grid.pipeline.compressor
    return dict(comp.config) if comp is not None else None


@dataclass(frozen=True, eq=False)
class _Binned:
    """A level after its bin stage: the layout and maps (persisted), and what the client plans with."""

    objects: Any  # persisted ObjectPlan (None: the store has no objects)
    num_objects: int | None  # the plan's object slots and kept objects, for the client's metadata
    kept: int | None
    dtype: np.dtype
    layout: Any  # persisted MetavertexLayout
    maps: list[Any]  # persisted MapState per source group
    cells: np.ndarray  # (c, D) coarse cells, ascending
    counts: np.ndarray  # metavertices per coarse cell
    members: np.ndarray  # surviving source vertices per coarse cell
    sizes: list[int]  # surviving vertices per source group


class _Builder:
    """Builds the planned levels in order, keeping the maps later levels' families compose."""

    def __init__(self, plan: PyramidPlan) -> None:
        self.plan = plan
        self.store = plan.store
        self.root = plan.store.root
        self.ndim = plan.store.root.sid_ndim
        self.compressor = _compressor(plan.base.array("vertices"))
        self.levels: dict[int, LevelState] = {0: plan.base}
        self.maps: dict[int, list[Any]] = {}  # fine level -> persisted MapState per group
        self.ancestors: dict[int, list[Any]] = {}  # fine level -> persisted ancestor arrays
        self.offsets: dict[int, tuple[list[int], int]] = {}  # fine level -> (group offsets, total)
        self.changed = False  # whether the root has been reset to name level 0 alone

    def build_level(self, new: NewLevel) -> tuple[PyramidLevel, list[tuple[int, int, int]]]:
        """Level ``new`` from its parent: bin, init, then families, vertex cells and reconcile."""
        n = new.number
        src = self.levels[n - 1]
        binned = self._bin(src, new)
        if n == 1:  # every check passed: only now is anything removed
            reset_root(self.plan)
            self.changed = True  # from here on the root names level 0 alone, until a level is built
            clear_pyramid(self.plan)
        state, arrays = self._init_level(new, binned)
        # coarse owners write the metavertices and the -k records of their cells: size them by the latter,
        # one per worker thread (each places and writes a share of every fine group's -k records)
        owners = runner.task_runs(binned.members + binned.counts, 1, tasks_per_thread=1)
        self._track_ancestors(n, src, binned)
        level_ref = runner.share(state.level)
        ready, family_rows = self._families(state, level_ref, binned.layout, owners)
        families = self._write(state, src, arrays, binned, owners, level_ref, ready, family_rows)
        self.store.write_root()  # the level is whole: only now does the root name it
        self._forget(n)
        result = PyramidLevel(
            level=n,
            vertex_count=int(binned.counts.sum()),
            cells=len(binned.cells),
            bin_shape=tuple(new.bin_shape),
            chunk_shape=state.chunk_shape,
            objects_kept=binned.kept,
        )
        return result, families

    # -- steps of one level -----------------------------------------------------
    def _bin(self, src: LevelState, new: NewLevel) -> _Binned:
        """Bin, combine and map as one graph (with the object plan and the deferred check); the
        layout, the maps and the object plan stay in memory."""
        plan = self.plan
        extra: list[Any] = []
        if plan.has_objects:  # the source's object index is decoded by this task, not by the client
            objects, fc, fi = dask.delayed(plan_objects, nout=3)(
                runner.share(src), None, sparsity=new.sparsity, seed=plan.seed, number=new.number, kind=plan.kind
            )
            extra = [objects, dask.delayed(_objects_summary)(objects)]
        else:
            fc = fi = runner.share(np.zeros(0, np.int64))
        vertices = src.array("vertices")
        fragments = src.array("vertex_fragments") if plan.has_objects else None
        grid = BinGrid.covering(new.bin_shape, src.chunk_shape, *src.occupied_box())
        carried = tuple(
            AttributeSpec.of(name, src.array(f"vertex_attributes/{name}"), how) for name, how in plan.aggregation
        )
        meta = src.level.meta
        params = BinParams(
            self.ndim, vertices_row_dtype(vertices.attributes), src.chunk_shape, grid, plan.has_objects, carried,
            src.level.path, meta.vertex_count,
            chunk_placement_checked(src.level.number, meta.coarsening_method, len(vertices.shape), self.ndim),
        )  # fmt: skip
        # groups of whole source cells, by rows where a built level knows them, else by cell count
        weights = src.counts if src.counts is not None else np.ones(len(src.cells), dtype=np.int64)
        groups = runner.task_runs(weights, 1, tasks_per_thread=plan.tasks_per_thread)
        v_ref, f_ref, p_ref = runner.share(vertices), runner.share(fragments), runner.share(params)
        bins = runner.calls(bin_group, [(v_ref, f_ref, p_ref, g.start, src.cells[g], fc, fi) for g in groups])
        partials = runner.calls(partial_rows, [(b,) for b in bins])
        combined = dask.delayed(combine)(p_ref, new.chunk_shape, *partials)
        # one graph: bin -> combine -> map; only the layout, the maps and a small summary stay in memory
        layout, summary, *rest = runner.persist(
            f"pyramid level {new.number}: bin",
            combined, dask.delayed(layout_summary)(combined, *partials), *extra,
            *runner.calls(map_group, [(b, combined) for b in bins]),
        )  # fmt: skip
        head = len(extra)
        ((cells, counts, members, sizes), *small) = runner.compute(
            f"pyramid level {new.number}: layout", summary, *rest[1:head]
        )
        num_objects, kept = small[-1] if extra else (None, None)
        return _Binned(
            rest[0] if extra else None, num_objects, kept, params.dtype, layout, rest[head:], cells, counts, members,
            sizes,
        )  # fmt: skip

    def _init_level(self, new: NewLevel, binned: _Binned) -> tuple[LevelState, _Arrays]:
        """The level group and its vertex arrays (metadata only); the root's dataset and tokens
        in memory, written by :meth:`build_level` once the level's write graph has run."""
        n = new.number
        cs = tuple(float(c) for c in new.chunk_shape)
        carried = dict(self.plan.aggregation)
        meta = LevelMetadata(
            level=n,
            vertex_count=int(binned.counts.sum()),
            arrays_present=["vertices"] + (["vertex_attributes"] if carried else [])
            + (["object_index"] if self.plan.has_objects else []),
            object_sparsity=1.0 / new.sparsity,
            coarsening_method="per_object",
            parent_level=n - 1,
            chunk_shape=cs if any(abs(a - b) > 1e-9 for a, b in zip(cs, self.root.chunk_shape)) else None,
            preserves_object_ids=self.plan.has_objects,
            inherited_num_objects=binned.num_objects,
            shared_fragments=True,
            fragments_tile=True,
            attribute_aggregation=carried or None,
        )
        level = Level(self.store, n, meta)
        origin, shape = _coarse_grid(self.root.bounds, cs, binned.cells)

        def new_array(rel: str, attrs: dict[str, Any]) -> GridArray:
            return GridArray.new(
                self.store.storage, level.node_path(rel), shape=shape, origin=origin, attributes=attrs,
                compressor=self.compressor,
            )

        source = self.levels[n - 1]
        arrays = _Arrays(
            new_array("vertices", {"zv_array": "vertices", "dtype": binned.dtype.name, "encoding": "raw"}),
            new_array("vertex_fragments", {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"}),
            {  # the same row layout as the source's (dtype, row_shape, channel names): D22
                name: new_array(f"vertex_attributes/{name}", _attribute_document(source, name)) for name in carried
            },
        )
        # the level's documents in one batch (one round on an object store, not one per document)
        documents = {level.path: group_document(meta.to_attributes())}
        if carried:
            documents[level.node_path("vertex_attributes")] = group_document()
        for grid in [arrays.vertices, arrays.fragments, *arrays.attributes.values()]:
            documents[grid.path] = grid.doc
        write_nodes(self.store.storage, documents)
        self.root.datasets.append(RootMetadata.level_transform(n, new.bin_shape, self.root.effective_base_bin_shape))
        tokens = (["preserved_object_ids"] if self.plan.has_objects else []) + ["shared_fragments"]
        if self.plan.max_delta > 0:
            tokens.append("multiscale_links")
        for t in tokens:
            if t not in self.root.format_capabilities:
                self.root.format_capabilities.append(t)
        state = LevelState(
            level=level,
            chunk_shape=cs,
            bin_shape=tuple(new.bin_shape),
            ratios=level_ratios(cs, self.root.chunk_shape),
            origin=origin,
            shape=shape,
            cells=binned.cells,
            counts=binned.counts,
        )
        self.levels[n] = state
        return state, arrays

    def _track_ancestors(self, n: int, src: LevelState, binned: _Binned) -> None:
        """Keep level ``n - 1``'s maps, and carry the ancestors of deeper fine levels up to level ``n``."""
        maps = binned.maps
        total = int(sum(binned.sizes))
        self.maps[n - 1] = list(maps)
        self.offsets[n - 1] = ([int(v) for v in np.cumsum([0] + list(binned.sizes))[:-1]], total)
        self.ancestors[n - 1] = runner.calls(metavertices_of, [(m,) for m in maps])
        deeper = [i for i in self.ancestors if i <= n - 2 and n - i <= self.plan.max_delta]
        if not deeper:
            return
        assert src.counts is not None  # a built level
        starts = np.r_[0, np.cumsum(src.counts)[:-1]].astype(np.int64)
        (parent,) = runner.persist(
            f"pyramid level {n}: parents", dask.delayed(parent_map)(starts, int(src.counts.sum()), *maps)
        )
        for i in deeper:
            self.ancestors[i] = list(
                runner.persist(
                    f"pyramid level {n}: ancestors of level {i}",
                    *[dask.delayed(compose_parents)(parent, a) for a in self.ancestors[i]],
                )
            )

    def _families(
        self, state: LevelState, level_ref: Any, layout: Any, owners: list[slice]
    ) -> tuple[Any, list[tuple[Any, int, list[Any]]]]:
        """The graph of the cross-level families ending at this level: the init task, and per family its writers.

        Their offsets segments follow from the distinct (fine cell, coarse cell) pairs, so
        one coordinator task creates every family and array (metadata only) while the
        records are being placed; writers wait for it.
        """
        n, cells = state.number, state.cells
        owner_starts = tuple(int(v) for v in [s.start for s in owners] + [len(cells)])
        ks = list(range(1, min(self.plan.max_delta, n) + 1))
        explicit = self.plan.cross_level_storage == "explicit"
        specs = {k: FamilySpec(k, self.levels[n - k].ratios, state.ratios, explicit, owner_starts) for k in ks}
        spec_refs = {k: runner.share(specs[k]) for k in ks}
        fine_refs = {k: (runner.share(self.levels[n - k].level), runner.share(self.levels[n - k].cells)) for k in ks}
        families_init = [
            argument
            for k in ks
            for argument in (
                fine_refs[k][0], self.levels[n - k].origin, self.levels[n - k].shape, fine_refs[k][1], spec_refs[k],
                dask.delayed(union_pairs)(
                    *runner.calls(cell_pairs, [(m, a, layout) for m, a in zip(self.maps[n - k], self.ancestors[n - k])])
                ),
            )
        ]  # fmt: skip
        ready = dask.delayed(init_families)(
            level_ref, state.origin, state.shape, runner.share(cells), self.compressor, self.ndim, *families_init
        )
        writers = []
        for k in ks:
            spec_ref = spec_refs[k]
            fine_ref, fine_cells = fine_refs[k]
            offs, tot = self.offsets[n - k]
            parts = runner.calls(
                family_parts,
                [(m, a, o, tot, layout, spec_ref, ready) for m, a, o in zip(self.maps[n - k], self.ancestors[n - k], offs)],
            )
            writers.append((fine_ref, k, runner.calls(write_plus, [(fine_ref, k, part, ready) for part in parts])))
            if explicit:
                writers.append((level_ref, -k, runner.per_owner(
                    write_minus, parts, len(owners), level_ref, -k, layout, fine_cells, spec_ref, tot, ready,
                )))  # fmt: skip
        return ready, writers

    def _write(
        self,
        state: LevelState,
        src: LevelState,
        arrays: _Arrays,
        binned: _Binned,
        owners: list[slice],
        level_ref: Any,
        ready: Any,
        family_rows: list[tuple[Any, int, list[Any]]],
    ) -> list[tuple[int, int, int]]:
        """One graph: the families' writers, the coarse vertex cells and the reconcile tasks.

        The reconcile's parts touch disjoint files, so each is a task of its own (safe to
        run twice); the level document is written once all of them have run.
        """
        arrays_ref = runner.share(arrays)
        vertex_keys = runner.calls(_write_vertices, [(arrays_ref, binned.layout, s.start, s.stop) for s in owners])
        keys = dask.delayed(_vertex_keys)(*vertex_keys)
        grids = [arrays.vertices, arrays.fragments, *arrays.attributes.values()]
        parts = [dask.delayed(confirm_presence)(runner.share(a), keys) for a in grids]
        objects = binned.objects
        if objects is not None:
            source = runner.share(src.level)
            sequences = runner.calls(sequences_of, [(m,) for m in binned.maps])
            parts += [
                dask.delayed(write_objects)(level_ref, objects, binned.layout, *sequences),
                dask.delayed(write_kept_attributes)(level_ref, source, objects),
            ]
        counted = [dask.delayed(finalize_family)(lv, d, ready, *rows) for lv, d, rows in family_rows]
        finish = dask.delayed(_finish)(level_ref, len(counted), *counted, ready, *parts)
        (families,) = runner.compute(f"pyramid level {state.number}: write", finish)
        return families

    def _forget(self, n: int) -> None:
        """Drop the maps no family of a later level needs."""
        for i in [i for i in self.ancestors if n + 1 - i > self.plan.max_delta]:
            self.ancestors.pop(i)
            self.maps.pop(i, None)
            self.offsets.pop(i, None)


def _stopped_at(number: int, url: str) -> str:
    names = "level 0 only" if number == 1 else f"levels 0 to {number - 1}"
    return (f"the pyramid of {url} stopped while building level {number}: the root names {names}; "
            f"level {number}'s partial data, and the cross-level families toward it, stay until the pyramid "
            "is built again")


def build_pyramid(
    url: str | os.PathLike[str],
    *,
    factors: Sequence[Any],
    chunk_scale_factors: Sequence[Any] | None = None,
    cross_level_storage: str = "explicit",
    cross_level_depth: int = 1,
    sparsity_seed: int = 0,
    aggregate: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> PyramidResult:
    """Build (or rebuild) the coarser levels of a store, as a Dask graph on the current scheduler.

    Args:
        url: the store (local path, ``file://``, ``memory://``, ``s3://bucket/prefix``).
        factors: one ``(coarsen, sparsity_factor)`` pair per new level (a bare number
            means sparsity 1).  Level N's bin = level N-1's bin x ``coarsen`` (>= 1);
            ``sparsity_factor`` (>= 1) keeps ``max(1, round(objects / sparsity_factor))``
            of the parent's objects, chosen at random (seeded).
        chunk_scale_factors: one entry per new level, an int or a per-axis tuple of
            positive ints: level N's chunk = level N-1's chunk x the factor (default 1).
        cross_level_storage: ``"explicit"`` (``+N`` at the fine level and ``-N`` at the
            coarse one), ``"implicit"`` (``+N`` only) or ``"none"``.
        cross_level_depth: the largest ``|N|`` linked (``-1``: every pair of levels;
            ``0``: no cross-level family).
        sparsity_seed: seed of the object selection (non-negative int).
        aggregate: per vertex attribute name, how each metavertex reduces the rows it
            stands for: ``"mean"``, ``"min"``, ``"max"`` or ``"first"`` (default: mean for
            float attributes, first for integer and boolean ones; docs/decisions.md D22).
            Every vertex attribute is carried to every coarse level.
        storage_options: fsspec options (e.g. an S3 ``endpoint_url``).

    Levels >= 1 and every cross-level family are replaced; the same inputs give the same
    bytes.  Every check runs before anything is removed or written.  A build that fails
    after that raises with a note saying which levels the root still names;
    building again removes the stopped level's remains.
    """
    plan = plan_pyramid(
        url,
        factors=factors,
        chunk_scale_factors=chunk_scale_factors,
        cross_level_storage=cross_level_storage,
        cross_level_depth=cross_level_depth,
        sparsity_seed=sparsity_seed,
        aggregate=aggregate,
        storage_options=storage_options,
    )
    builder = _Builder(plan)
    levels, families = [], []
    with reconsolidating(plan.store.storage, has_copy=plan.store.consolidated is not None):
        for new in plan.levels:
            try:
                result, fams = builder.build_level(new)
            except BaseException as exc:
                if builder.changed:  # what the store holds now, and how to mend it
                    exc.add_note(_stopped_at(new.number, plan.store.url))
                raise
            levels.append(result)
            families += fams
    sharded = any(grid.sharding is not None for grid in plan.base.grids.values())
    return PyramidResult(plan.store.url, levels, plan.cross_level_storage, plan.cross_level_depth, families,
                         replaced=plan.replaced_levels, left_unsharded=sharded)
