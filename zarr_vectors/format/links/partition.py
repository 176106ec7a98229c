"""Where every record of a links family goes: :func:`partition_records_by_offset`.

The one place placement is decided (docs/format.md §7.2, §7.4).  The result, a
:class:`LinkPartition`, lists every physical placement in on-disk order; single-process
writers, Dask link owners and the pyramid's cross-level families all write from it.
Pure numpy over whole record arrays.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike

from zarr_vectors.errors import ArrayError, InputError
from zarr_vectors.format.links.placement import (
    enumeration_order,
    intra_mask,
    place_records,
    segment_names,
)
from zarr_vectors.format.links.policy import (
    Chunk,
    LinkPolicy,
    OffsetsT,
    StorePolicy,
    as_records,
    make_policy,
    ratios_arg,
)
from zarr_vectors.format.paths import format_offsets, intra_offsets
from zarr_vectors.format.points import stable_order


@dataclass(frozen=True, eq=False)
class LinkPartition:
    """Where every input record went: one entry per physical placement, in on-disk order.

    Placements are sorted the way the family is enumerated -- ``segments`` are ASCII
    sorted and ``segment`` indexes them, then cells as signed integer tuples, then
    input record order -- so consecutive placements with the same ``(segment, cell)``
    form one cell's write group.  ``record[p]`` is the input position (``0 ..
    num_links - 1``) of the record placement ``p`` files; under ``store="duplicate"``
    a record appears once per copy, which is how attribute rows given in input order
    fan out to every copy (:meth:`scatter`).

    ``base_rows`` (one per cell group) is the number of rows the cell already held
    before this write: zero except for ``write_links(mode="append")``.
    """

    policy: LinkPolicy
    num_links: int
    segments: tuple[str, ...]
    segment_offsets: tuple[OffsetsT, ...]
    segment: np.ndarray  # (P,) int64 index into segments
    cell: np.ndarray  # (P, D) int64 source chunk
    record: np.ndarray  # (P,) int64 input record
    vi: np.ndarray  # (P, L) int64 stored vertex indices
    perm: np.ndarray  # (P,) int64 Lehmer code of the storage permutation
    base_rows: np.ndarray | None = None
    group_starts: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        count = self.record.size
        change = np.ones(count, dtype=bool)
        if count > 1:  # column by column: a strided (P, D) any(axis=1) is ~9x slower on millions
            differs = self.segment[1:] != self.segment[:-1]
            for d in range(self.cell.shape[1]):
                differs |= self.cell[1:, d] != self.cell[:-1, d]
            change[1:] = differs
        starts = np.append(np.flatnonzero(change), count).astype(np.int64)
        object.__setattr__(self, "group_starts", starts)
        if self.base_rows is None:
            object.__setattr__(self, "base_rows", np.zeros(starts.size - 1, dtype=np.int64))
        elif self.base_rows.shape != (starts.size - 1,):
            raise InputError(f"base_rows must have one entry per cell group ({starts.size - 1})")

    # -- sizes -------------------------------------------------------------------------
    @property
    def num_physical_records(self) -> int:
        return int(self.record.size)

    @property
    def num_groups(self) -> int:
        """Number of (segment, cell) groups, i.e. cells written."""
        return int(self.group_starts.size - 1)

    @property
    def link_width(self) -> int:
        return self.policy.link_width

    @property
    def sid_ndim(self) -> int:
        return self.policy.sid_ndim

    # -- groups ------------------------------------------------------------------------
    def group_segments(self) -> np.ndarray:
        """(G,) segment index of every cell group."""
        return self.segment[self.group_starts[:-1]]

    def group_cells(self) -> np.ndarray:
        """(G, D) source chunk of every cell group."""
        return self.cell[self.group_starts[:-1]]

    def segment_has_perm(self, s: int) -> bool:
        return self.policy.has_perm(self.segment_offsets[s])

    def stored_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows of placements ``start:stop`` (one segment) as stored: ``[perm_idx,] vi...``."""
        s = int(self.segment[start])
        vi = self.vi[start:stop]
        if self.segment_has_perm(s):
            return np.column_stack([self.perm[start:stop], vi])
        return vi

    def iter_groups(self) -> Iterator[tuple[int, Chunk, int, int]]:
        """``(segment index, cell, start, stop)`` of every cell group, in order."""
        starts = self.group_starts
        segs = self.group_segments().tolist()
        cells = self.group_cells().tolist()
        for g in range(self.num_groups):
            yield segs[g], tuple(cells[g]), int(starts[g]), int(starts[g + 1])

    def select_groups(self, keep: ArrayLike) -> LinkPartition:
        """The partition restricted to the cell groups where ``keep`` (G,) is true.

        Record numbering is unchanged, so attribute values for the original input still
        align; segments no longer used are dropped.  This is how a cell owner takes its
        share of a partition.
        """
        mask = np.asarray(keep, dtype=bool)
        if mask.shape != (self.num_groups,):
            raise InputError(f"keep must be a bool mask over the {self.num_groups} cell groups")
        counts = np.diff(self.group_starts)
        sel = np.repeat(mask, counts)
        used = np.flatnonzero(np.bincount(self.segment[sel], minlength=len(self.segments)))  # segment numbers: small
        remap = np.full(len(self.segments), -1, dtype=np.int64)
        remap[used] = np.arange(used.size)
        return LinkPartition(
            policy=self.policy,
            num_links=self.num_links,
            segments=tuple(self.segments[i] for i in used.tolist()),
            segment_offsets=tuple(self.segment_offsets[i] for i in used.tolist()),
            segment=remap[self.segment[sel]],
            cell=self.cell[sel],
            record=self.record[sel],
            vi=self.vi[sel],
            perm=self.perm[sel],
            base_rows=self.base_rows[mask],
        )

    @staticmethod
    def concat(parts: Sequence[LinkPartition], *, num_links: int) -> LinkPartition:
        """Placements of several partitions of one family merged in on-disk order.

        The parts' records must already be numbered in one input (0 .. num_links-1),
        e.g. partitions of consecutive record blocks with their block offsets added;
        this is how a cell owner merges what every block routed to it.
        """
        if not parts:
            raise InputError("LinkPartition.concat needs at least one part")
        policy = parts[0].policy
        if any(p.policy != policy for p in parts):
            raise ArrayError("cannot merge partitions of different family policies")
        offsets_of = {n: o for p in parts for n, o in zip(p.segments, p.segment_offsets)}
        names = sorted(offsets_of)
        index = {n: i for i, n in enumerate(names)}
        segment = np.concatenate(
            [np.asarray([index[n] for n in p.segments], dtype=np.int64)[p.segment] for p in parts]
        )
        cell = np.concatenate([p.cell for p in parts])
        record = np.concatenate([p.record for p in parts])
        order = enumeration_order(segment, cell, record)
        return LinkPartition(
            policy=policy,
            num_links=num_links,
            segments=tuple(names),
            segment_offsets=tuple(offsets_of[n] for n in names),
            segment=segment[order],
            cell=np.take(cell, order, axis=0),
            record=record[order],
            vi=np.take(np.concatenate([p.vi for p in parts]), order, axis=0),
            perm=np.concatenate([p.perm for p in parts])[order],
        )

    def renumbered(self, offset: int, num_links: int) -> LinkPartition:
        """The same placements with records numbered from ``offset`` in an input of ``num_links``."""
        return replace(self, record=self.record + offset, num_links=num_links, base_rows=self.base_rows)

    def scatter(self, values: ArrayLike) -> np.ndarray:
        """Input-order rows (``num_links`` of them) in on-disk order, one per placement."""
        arr = np.asarray(values)
        if arr.ndim == 0 or arr.shape[0] != self.num_links:
            raise ArrayError(
                f"attribute values have {arr.shape[0] if arr.ndim else 0} rows but the partition covers "
                f"{self.num_links} input records (values must be in input order)"
            )
        return arr[self.record]

    def cell_extent(self) -> tuple[Chunk, Chunk] | None:
        """(origin, shape) of the smallest grid covering every cell, None when empty."""
        if self.record.size == 0:
            return None
        lo = self.cell.min(axis=0)
        hi = self.cell.max(axis=0)
        return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo + 1)


def partition_records_by_offset(
    chunks: ArrayLike,
    vi: ArrayLike,
    *,
    delta: int = 0,
    directed: bool = False,
    store: StorePolicy = "canonical",
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None,
) -> LinkPartition:
    """Decide where every record goes (docs/format.md §7.2, §7.4); the only place this is decided.

    Args:
        chunks: ``(n, L, D)`` absolute chunk coordinates of every endpoint, input order.
        vi: ``(n, L)`` chunk-local vertex row of every endpoint.
        delta: level delta of the family; endpoints ``1..L-1`` live at owning + delta.
        directed, store: the family policy.
        anchor_ratios: ``(r_src, r_trg)`` (see :func:`link_anchor_ratios`); required
            when ``delta != 0``, ignored otherwise.

    Returns:
        The :class:`LinkPartition`: every placement with its segment, cell, stored row
        and input record, in on-disk order.  Pure: nothing is read or written.
    """
    c, v = as_records(chunks, vi)
    n, width, ndim = c.shape
    policy = make_policy(delta, width, directed, store, ndim)
    r_src = r_trg = None
    if policy.delta != 0:
        r_src, r_trg = ratios_arg(anchor_ratios, ndim)
    if policy.delta == 0 and width == 2 and policy.store == "canonical":
        # edges: one copy each, placed by two-column selects (intra records included)
        placed = place_records(c, v, delta=0, directed=policy.directed, store=policy.store)
        names, segment, parsed = segment_names(placed.offsets)
        order = enumeration_order(segment, placed.cell, placed.record, records_ascending=True)
        return LinkPartition(
            policy=policy,
            num_links=n,
            segments=tuple(names),
            segment_offsets=tuple(tuple(tuple(int(x) for x in o) for o in p) for p in parsed),
            segment=segment[order],
            cell=np.take(placed.cell, order, axis=0),
            record=order.astype(np.int64, copy=False),
            vi=np.take(placed.vi, order, axis=0),
            perm=placed.perm[order],
        )
    # Intra records (every endpoint in one chunk) are placed as they come, whatever the
    # policy (docs/format.md §7.2 rule 1), and their all-zero segment sorts after every other
    # name; so they skip the general placement and are appended, sorted by cell.
    intra = intra_mask(c) if policy.delta == 0 and n else np.zeros(n, dtype=bool)
    cross = np.flatnonzero(~intra)
    if cross.size == n:
        placed = place_records(
            c, v, delta=policy.delta, directed=policy.directed, store=policy.store, r_src=r_src, r_trg=r_trg
        )
        record = placed.record
    else:
        placed = place_records(
            np.take(c, cross, axis=0), np.take(v, cross, axis=0), delta=0, directed=policy.directed,
            store=policy.store,
        )  # fmt: skip
        record = cross[placed.record]
    names, segment, parsed = segment_names(placed.offsets)
    order = enumeration_order(segment, placed.cell, placed.record, records_ascending=True)
    cells = [np.take(placed.cell, order, axis=0)]
    records = [record[order]]
    vis = [np.take(placed.vi, order, axis=0)]
    perms = [placed.perm[order]]
    segments = [segment[order]]
    offsets_of = [tuple(tuple(int(x) for x in o) for o in p) for p in parsed]
    if cross.size < n:
        kept = np.flatnonzero(intra)
        intra_cells = np.ascontiguousarray(c[kept, 0, :])
        by_cell = enumeration_order(np.zeros(kept.size, np.int64), intra_cells, kept, records_ascending=True)
        cells.append(np.take(intra_cells, by_cell, axis=0))
        records.append(kept[by_cell])
        vis.append(np.take(v, kept[by_cell], axis=0))
        perms.append(np.zeros(kept.size, dtype=np.int64))
        segments.append(np.full(kept.size, len(names), dtype=np.int64))
        zero = intra_offsets(ndim, width)
        names.append(format_offsets(zero))
        offsets_of.append(zero)
    return LinkPartition(
        policy=policy,
        num_links=n,
        segments=tuple(names),
        segment_offsets=tuple(offsets_of),
        segment=np.concatenate(segments),
        cell=np.concatenate(cells),
        record=np.concatenate(records),
        vi=np.concatenate(vis),
        perm=np.concatenate(perms),
    )


def partition_records_by_rank(
    cells: ArrayLike,
    ranks: ArrayLike,
    vi: ArrayLike,
    *,
    directed: bool = False,
    store: StorePolicy = "canonical",
) -> LinkPartition:
    """:func:`partition_records_by_offset` at delta 0 for endpoints given by cell rank.

    ``cells`` ``(K, D)`` are chunk coordinates in ascending chunk order (a write plan's
    occupied cells) and ``ranks`` ``(n, L)`` each endpoint's index into them -- what a
    link owner has.  Intra records (one rank) keep input order, sorted by cell, under the
    all-zero segment that sorts after every other name (docs/format.md §7.2 rule 1), so
    they are found and ordered by rank alone; only the cross records' coordinates are
    gathered and placed by :func:`partition_records_by_offset`.  The same partition, at
    a fraction of the memory traffic when most records are intra.
    """
    table = np.ascontiguousarray(cells, dtype=np.int64)
    r = np.asarray(ranks, dtype=np.int64)
    v = np.asarray(vi, dtype=np.int64)
    if table.ndim != 2 or r.ndim != 2 or v.shape != r.shape or r.shape[1] < 1:
        raise InputError(f"cells (K, D), ranks (n, L) and vi (n, L) expected, got {table.shape}, {r.shape}, {v.shape}")
    if r.size and (int(r.min()) < 0 or int(r.max()) >= table.shape[0]):
        raise InputError(f"ranks must index the {table.shape[0]} cells")
    n, width = r.shape
    ndim = table.shape[1]
    intra = np.ones(n, dtype=bool)
    for k in range(1, width):  # column by column: cheaper than a strided all(axis=1)
        intra &= r[:, k] == r[:, 0]
    cross = np.flatnonzero(~intra)
    part = partition_records_by_offset(
        table[r[cross]].reshape(cross.size, width, ndim), v[cross], directed=directed, store=store
    )
    kept = np.flatnonzero(intra)
    if kept.size == 0:
        return replace(part, num_links=n, record=cross[part.record], base_rows=None)
    by_cell = kept[stable_order(r[kept, 0], table.shape[0])]
    zero = intra_offsets(ndim, width)
    # the intra placements follow the cross ones: fill preallocated columns (no concatenate copies);
    # mode "clip" writes into ``out`` unbuffered, and every index is in range (ranks checked above)
    head, total = part.num_physical_records, part.num_physical_records + kept.size
    cell = np.empty((total, ndim), dtype=np.int64)
    cell[:head] = part.cell.reshape(head, ndim)
    np.take(table, r[by_cell, 0], axis=0, out=cell[head:], mode="clip")
    stored = np.empty((total, width), dtype=np.int64)
    stored[:head] = part.vi.reshape(head, width)
    np.take(v, by_cell, axis=0, out=stored[head:], mode="clip")
    record = np.empty(total, dtype=np.int64)
    record[:head] = cross[part.record]
    record[head:] = by_cell
    segment = np.full(total, len(part.segments), dtype=np.int64)
    segment[:head] = part.segment
    perm = np.zeros(total, dtype=np.int64)
    perm[:head] = part.perm
    return LinkPartition(
        policy=part.policy,
        num_links=n,
        segments=part.segments + (format_offsets(zero),),
        segment_offsets=part.segment_offsets + (zero,),
        segment=segment,
        cell=cell,
        record=record,
        vi=stored,
        perm=perm,
    )
