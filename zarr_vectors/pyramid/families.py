"""The cross-level families of a pyramid level: ``+k`` records at the fine level, ``-k`` at the coarse one.

Per fine group (:func:`family_parts`): its ``+k`` records, placed (it owns its fine cells),
and its ``-k`` records split by the coarse owner of their cell; :func:`write_minus` places
and writes each group's share for an owner on its own (a ``-k`` cell object takes the records
of one fine cell).  A family's
offsets segments follow from its distinct ``(fine cell, coarse cell)`` pairs
(:func:`cell_pairs`), so one coordinator task (:func:`init_families`) creates every
family and offsets array while the records are placed; the writers wait for it.
Placement itself is the links rules' (:mod:`zarr_vectors.format.links.crosslevel`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.format.coarsen import MetavertexLayout, unique_sorted
from zarr_vectors.errors import ArrayError
from zarr_vectors.format.links import (
    CrossLevelRecords,
    LinkCounts,
    LinkPartition,
    cross_level_segments,
    make_policy,
    place_cross_level,
)
from zarr_vectors.format.paths import links_group_path
from zarr_vectors.pyramid.bins import MapState
from zarr_vectors.reconcile import finalize_created_family
from zarr_vectors.store.groups import Level
from zarr_vectors.store.link_cells import LinkWriteSummary, write_link_cells, write_link_partitions
from zarr_vectors.store.link_family import LINKS, CreatedFamily, compose_new_family
from zarr_vectors.store.nodes import group_document, meta_key, write_nodes

__all__ = [
    "FamilyParts",
    "FamilySpec",
    "cell_pairs",
    "family_parts",
    "finalize_family",
    "init_families",
    "union_pairs",
    "write_minus",
    "write_plus",
]

LINK_ROW_DTYPE = "int32"
"""Cross-level rows are chunk-local vertex rows, below 2**31 by the 4 GiB cell limit (D13)."""


@dataclass(frozen=True)
class FamilySpec:
    """One family ``+k`` / ``-k`` ending at the level being built, and how its coarse cells are owned."""

    k: int
    r_fine: tuple[int, ...]
    r_coarse: tuple[int, ...]
    explicit: bool
    owner_starts: tuple[int, ...]  # first coarse cell of every owner, plus the cell count


@dataclass(frozen=True, eq=False)
class FamilyParts:
    """What one fine group's place task hands the writers."""

    plus: LinkPartition
    minus: list[CrossLevelRecords | None]  # per coarse owner; coarse cells relative to the owner's first


def init_families(
    coarse: Level,
    origin: tuple[int, ...],
    shape: tuple[int, ...],
    coarse_cells: np.ndarray,
    compressor: dict[str, Any] | None,
    ndim: int,
    *families: Any,
) -> dict[tuple[int, int], CreatedFamily]:
    """The coordinator step of a level's cross-level families: every family group and offsets array.

    ``families``: per family, six arguments in a row -- its fine level, that level's grid origin
    and shape, its cells, its :class:`FamilySpec` and its (fine cell, coarse cell) pairs.  They
    are positional because dask finalizes the whole graph of every reference inside a list
    argument (optimized and culled, once per call): with the graph a level's build has, that
    cost the client more than the call's own work.

    The build removed every cross-level family before it began (:func:`~.plan.clear_pyramid`),
    so one batch of reads confirms none is back (but for this task's own documents, when it
    is retried), and one batch writes every group document; each array's document is
    written once, by the family's reconcile task.
    Returns the families by ``(level, delta)`` for their writers and reconcile tasks.
    """
    wanted = []  # (level, delta, segments, extent)
    for at in range(0, len(families), 6):
        fine, fine_origin, fine_shape, fine_cells, spec, pairs = families[at : at + 6]
        plus, minus = cross_level_segments(
            pairs, fine_cells, coarse_cells, delta=spec.k, anchor_ratios=(spec.r_fine, spec.r_coarse),
            explicit=spec.explicit,
        )
        wanted.append((fine, spec.k, plus, (fine_origin, fine_shape)))
        if spec.explicit:
            wanted.append((coarse, -spec.k, minus, (origin, shape)))
    levels = {lv.number: lv for lv, *_ in wanted}
    groups = [(lv, LINKS) for lv in levels.values()] + [(lv, links_group_path(d)) for lv, d, *_ in wanted]
    storage = coarse.storage
    found = storage.get_many(meta_key(lv.node_path(rel)) for lv, rel in groups)
    present = {(lv.number, rel): raw for (lv, rel), raw in zip(groups, found) if raw is not None}
    documents: dict[str, dict[str, Any]] = {
        lv.node_path(LINKS): group_document() for n, lv in levels.items() if (n, LINKS) not in present
    }
    created: dict[tuple[int, int], CreatedFamily] = {}
    for level, delta, segments, extent in wanted:
        policy = make_policy(delta, 2, True, "canonical", ndim)
        family = compose_new_family(level, policy, segments, extent=extent, dtype=LINK_ROW_DTYPE, compressor=compressor)
        mine = family.group_documents()
        raw = present.get((level.number, links_group_path(delta)))
        if raw is not None and not _is_document(raw, mine[family.path]):  # a retry of this task finds its own
            raise ArrayError(
                f"{family.path} exists although this pyramid build removed it: another writer is at work on the store"
            )
        created[level.number, delta] = family
        documents.update(mine)  # the arrays' documents come with their presence lists
    write_nodes(storage, documents)
    return created


def _is_document(raw: bytes, document: dict[str, Any]) -> bool:
    """Whether stored bytes hold exactly ``document`` (what this task writes)."""
    try:
        return bool(json.loads(raw) == document)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False


def family_parts(
    state: MapState,
    ancestor: np.ndarray,
    offset: int,
    total: int,
    target: MetavertexLayout,
    spec: FamilySpec,
    ready: object = None,
) -> FamilyParts:
    """``+k`` records of a fine group (its own cells, placed) and its ``-k`` records split by coarse owner.

    ``ready`` (the family-init task) only orders the graph: init first, so writers can
    start as soon as their records are placed.

    ``ancestor`` (per partial row) is the metavertex at the coarse level, -1 when the
    partial row's vertices have none there (their object was dropped on the way).
    """
    valid_p = ancestor >= 0
    vp = state.vertex_partial
    if bool(valid_p.all()):
        anc, fine_cell = ancestor, state.partial_cell
        partial, fine_row = vp, state.rows
        number = np.arange(offset, offset + vp.size, dtype=np.int64)
    else:  # keep only the partial rows (and their vertices) that still have an ancestor
        kept = np.flatnonzero(valid_p)
        remap = np.full(valid_p.size, -1, dtype=np.int64)
        remap[kept] = np.arange(kept.size, dtype=np.int64)
        anc, fine_cell = ancestor[kept], state.partial_cell[kept]
        keep = np.flatnonzero(valid_p[vp])
        partial, fine_row, number = remap[vp[keep]], state.rows[keep], keep + offset
    coarse_cell = target.mv_cell[anc]
    coarse_row = target.mv_row[anc]
    records = CrossLevelRecords(fine_cell, coarse_cell, coarse_row, partial, fine_row, number)
    plus = place_cross_level(
        records, state.cells, target.cells, coarse_leads=False, delta=spec.k,
        anchor_ratios=(spec.r_fine, spec.r_coarse), total=total,
    )  # fmt: skip
    bounds = np.asarray(spec.owner_starts, dtype=np.int64)
    minus: list[CrossLevelRecords | None] = [None] * (len(bounds) - 1)
    if spec.explicit and number.size:
        owner_p = np.searchsorted(bounds, coarse_cell, side="right") - 1
        owner = owner_p[partial]
        if bool((owner[1:] < owner[:-1]).any()):
            order = np.argsort(owner.astype(np.uint16) if len(bounds) <= 1 << 16 else owner, kind="stable")
            partial, fine_row, number, owner = partial[order], fine_row[order], number[order], owner[order]
        cuts = np.searchsorted(owner, np.arange(len(bounds)))
        fine_global = fine_cell + state.first_rank
        for j in range(len(bounds) - 1):
            lo, hi = int(cuts[j]), int(cuts[j + 1])
            if lo == hi:
                continue
            mine = np.flatnonzero(owner_p == j)
            local = np.full(owner_p.size, -1, dtype=np.int64)
            local[mine] = np.arange(mine.size, dtype=np.int64)
            minus[j] = CrossLevelRecords(
                fine_global[mine], coarse_cell[mine] - bounds[j], coarse_row[mine],
                local[partial[lo:hi]], fine_row[lo:hi], number[lo:hi],
            )  # fmt: skip
    return FamilyParts(plus, minus)


def cell_pairs(state: MapState, ancestor: np.ndarray, target: MetavertexLayout) -> np.ndarray:
    """Distinct (global fine cell, coarse cell) index pairs of a fine group's records, packed."""
    valid = ancestor >= 0
    fine = state.partial_cell[valid] + state.first_rank
    return unique_sorted(fine * max(len(target.cells), 1) + target.mv_cell[ancestor[valid]])


def union_pairs(*parts: np.ndarray) -> np.ndarray:
    """The distinct cell pairs of a whole family, from every fine group's."""
    return unique_sorted(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def write_plus(
    level: Level, delta: int, parts: FamilyParts, created: dict[tuple[int, int], CreatedFamily]
) -> LinkWriteSummary | None:
    """Write a fine group's ``+k`` cells into the family ``created`` by the init task."""
    part = parts.plus
    if part.num_physical_records == 0:
        return None
    return write_link_cells(level, delta, part, created[level.number, delta])


def write_minus(
    level: Level, delta: int, target: MetavertexLayout, fine_cells: np.ndarray, spec: FamilySpec, total: int,
    created: dict[tuple[int, int], CreatedFamily], j: int, *parts: FamilyParts,
) -> LinkWriteSummary | None:  # fmt: skip
    """Place and write coarse owner ``j``'s ``-k`` records, each fine group's share on its own.

    A ``-k`` cell object (an offsets array's cell) holds the records of one fine cell -- its
    offset names that cell -- and a fine cell is one group's, so each share fills whole
    objects no other share touches: the shares are never concatenated, and an owner's work
    can run as one task per group (:func:`~zarr_vectors.execution.runner.per_owner`), where
    the group's parts are.
    """
    lo, hi = spec.owner_starts[j], spec.owner_starts[j + 1]
    ratios = (spec.r_coarse, spec.r_fine)
    placed = [
        place_cross_level(share, fine_cells, target.cells[lo:hi], coarse_leads=True, delta=-spec.k,
                          anchor_ratios=ratios, total=total)
        for share in (p.minus[j] for p in parts) if share is not None
    ]
    placed = [part for part in placed if part.num_physical_records]
    if not placed:
        return None
    return write_link_partitions(level, delta, placed, created[level.number, delta])  # one batch of writes


def finalize_family(
    level: Level, delta: int, created: dict[tuple[int, int], CreatedFamily], *written: LinkWriteSummary | None
) -> tuple[int, int, int]:
    """One family's presence lists and counts from its writers' reports: ``(level, delta, records)``."""
    reports = [w for w in written if w is not None]
    n = sum(w.num_physical_records for w in reports)
    finalize_created_family(level, created[level.number, delta], reports, LinkCounts(n, n))
    return level.number, delta, n
