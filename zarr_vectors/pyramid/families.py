"""The cross-level families of a pyramid level: ``+k`` records at the fine level, ``-k`` at the coarse one.

Per fine group (:func:`family_parts`): its ``+k`` records, placed (it owns its fine cells),
and its ``-k`` records split by the coarse owner of their cell; per coarse owner
(:func:`minus_owner_partition`) one ``-k`` partition of its whole cells.  A family's
offsets segments follow from its distinct ``(fine cell, coarse cell)`` pairs
(:func:`cell_pairs`), so one coordinator task (:func:`init_families`) creates every
family and offsets array while the records are placed; the writers wait for it.
Placement itself is the links rules' (:mod:`zarr_vectors.format.links.crosslevel`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.format.coarsen import MetavertexLayout, unique_sorted
from zarr_vectors.format.links import CrossLevelRecords, LinkPartition, cross_level_segments, place_cross_level
from zarr_vectors.pyramid.bins import MapState
from zarr_vectors.store.groups import Level
from zarr_vectors.store.link_cells import write_link_cells
from zarr_vectors.store.link_family import create_links_family, create_links_segments

__all__ = [
    "FamilyParts",
    "FamilySpec",
    "cell_pairs",
    "family_parts",
    "init_families",
    "minus_owner_partition",
    "minus_share",
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
    families: list[tuple[Level, tuple[int, ...], tuple[int, ...], np.ndarray, FamilySpec, np.ndarray]],
) -> int:
    """The coordinator step of a level's cross-level families: every family group and offsets array."""
    for fine, fine_origin, fine_shape, fine_cells, spec, pairs in families:
        plus, minus = cross_level_segments(
            pairs, fine_cells, coarse_cells, delta=spec.k, anchor_ratios=(spec.r_fine, spec.r_coarse),
            explicit=spec.explicit,
        )
        create_links_family(fine, spec.k, link_width=2, directed=True, store="canonical", sid_ndim=ndim)
        if plus:
            create_links_segments(
                fine, spec.k, plus, extent=(fine_origin, fine_shape), dtype=LINK_ROW_DTYPE, compressor=compressor
            )
        if spec.explicit:
            create_links_family(coarse, -spec.k, link_width=2, directed=True, store="canonical", sid_ndim=ndim)
            if minus:
                create_links_segments(
                    coarse, -spec.k, minus, extent=(origin, shape), dtype=LINK_ROW_DTYPE, compressor=compressor
                )
    return len(families)


def family_parts(
    state: MapState,
    ancestor: np.ndarray,
    offset: int,
    total: int,
    target: MetavertexLayout,
    spec: FamilySpec,
    ready: int = 0,
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


def minus_share(parts: FamilyParts, owner: int) -> CrossLevelRecords | None:
    """A group's ``-k`` records for one coarse owner: under a distributed client only this moves."""
    return parts.minus[owner]


def write_plus(level: Level, delta: int, parts: FamilyParts, ready: int = 0) -> int:
    """Write a fine group's ``+k`` cells (``ready``: the family-init task, which must run first)."""
    part = parts.plus
    if part.num_physical_records == 0:
        return 0
    return write_link_cells(level, delta, part).num_physical_records


def minus_owner_partition(
    target: MetavertexLayout, fine_cells: np.ndarray, spec: FamilySpec, total: int, j: int,
    *shares: CrossLevelRecords | FamilyParts | None,
) -> LinkPartition | None:  # fmt: skip
    """Owner ``j``'s ``-k`` partition (its whole coarse cells), from every fine group's share.

    A share is the group's ``CrossLevelRecords`` for this owner, or (local threads: nothing to
    ship) the group's whole ``FamilyParts``.
    """
    taken = [s.minus[j] if isinstance(s, FamilyParts) else s for s in shares]
    parts = [s for s in taken if s is not None]
    if not parts:
        return None
    lo, hi = spec.owner_starts[j], spec.owner_starts[j + 1]
    return place_cross_level(
        CrossLevelRecords.concat(parts), fine_cells, target.cells[lo:hi], coarse_leads=True, delta=-spec.k,
        anchor_ratios=(spec.r_coarse, spec.r_fine), total=total,
    )  # fmt: skip


def write_minus(level: Level, delta: int, part: LinkPartition | None, ready: int = 0) -> int:
    """Write a coarse owner's ``-k`` cells (after the family-init task)."""
    if part is None or part.num_physical_records == 0:
        return 0
    return write_link_cells(level, delta, part).num_physical_records
