"""Where cross-level records go (docs/format.md §7.4, §8.1): the ``+k`` / ``-k`` families a pyramid writes.

A cross-level record links a fine vertex to the metavertex it was folded into.  Its
placement (cell, offsets segment) depends only on its two endpoint chunks -- endpoint 0
always leads, nothing is sorted, there is no perm column -- so each distinct chunk pair
is placed once by :func:`~zarr_vectors.format.links.partition.partition_records_by_offset`
and every record takes its pair's placement.  Pure numpy; the pyramid builder writes
the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zarr_vectors.format.coarsen import unique_inverse
from zarr_vectors.format.crosslevel import cross_level_records
from zarr_vectors.format.links.partition import LinkPartition, partition_records_by_offset

__all__ = ["CrossLevelRecords", "cross_level_segments", "place_cross_level"]


@dataclass(frozen=True, eq=False)
class CrossLevelRecords:
    """Cross-level records by partial row: the endpoints' cells and coarse row are per partial.

    A partial row is one ``(fine cell, bin)``: all its vertices fold into one metavertex,
    so everything but the fine row is stored once per partial row.  ``partial_*``
    describe partial rows; ``partial`` / ``fine_row`` / ``number`` one record each, in
    ascending ``number`` (the fine vertex's position among the fine level's surviving
    vertices: fine storage order).
    """

    partial_fine_cell: np.ndarray  # (k,) index into the fine cell table
    partial_coarse_cell: np.ndarray  # (k,) index into the coarse cell table
    partial_coarse_row: np.ndarray  # (k,)
    partial: np.ndarray  # (r,)
    fine_row: np.ndarray  # (r,)
    number: np.ndarray  # (r,)

    @staticmethod
    def concat(parts: Sequence[CrossLevelRecords]) -> CrossLevelRecords:
        """The records of several parts, in the order given (``partial`` renumbered)."""
        if len(parts) == 1:
            return parts[0]
        base = np.cumsum([0] + [p.partial_fine_cell.size for p in parts[:-1]])
        return CrossLevelRecords(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in
              ("partial_fine_cell", "partial_coarse_cell", "partial_coarse_row")),
            np.concatenate([p.partial + b for p, b in zip(parts, base)]),
            np.concatenate([p.fine_row for p in parts]),
            np.concatenate([p.number for p in parts]),
        )  # fmt: skip


def place_cross_level(
    records: CrossLevelRecords,
    fine_cells: np.ndarray,
    coarse_cells: np.ndarray,
    *,
    coarse_leads: bool,
    delta: int,
    anchor_ratios: tuple[Sequence[int], Sequence[int]],
    total: int,
) -> LinkPartition:
    """The :class:`LinkPartition` of cross-level records, as partitioning every record would give it.

    ``coarse_leads`` False: ``+k`` records ``[fine, coarse]`` owned by the fine level;
    True: ``-k`` records ``[coarse, fine]`` owned by the coarse level.  Each distinct
    chunk pair is placed once; rows keep record order within each ``(segment, cell)``,
    exactly as partitioning every record would order them.
    """
    src_p = records.partial_coarse_cell if coarse_leads else records.partial_fine_cell
    trg_p = records.partial_fine_cell if coarse_leads else records.partial_coarse_cell
    src_cells, trg_cells = (coarse_cells, fine_cells) if coarse_leads else (fine_cells, coarse_cells)
    n_trg = max(len(trg_cells), 1)
    pairs, pair_of = unique_inverse(src_p * n_trg + trg_p)
    pair_src = pairs // n_trg
    zeros = np.zeros(len(pairs), np.int64)
    rep_chunks, rep_vi = cross_level_records(src_cells[pair_src], zeros, trg_cells[pairs % n_trg], zeros)
    rep = partition_records_by_offset(
        rep_chunks, rep_vi, delta=delta, directed=True, store="canonical", anchor_ratios=anchor_ratios
    )
    seg_of_pair = np.empty(len(pairs), dtype=np.int64)
    seg_of_pair[rep.record] = rep.segment
    # on-disk order is (segment, cell, record): rank the partial rows by (segment, source cell) ...
    part_key = seg_of_pair[pair_of] * max(len(src_cells), 1) + src_p
    uniq_key, part_rank = unique_inverse(part_key)
    # ... and the records by their partial row's rank (stable: record order within a cell)
    partial, fine_row, number = records.partial, records.fine_row, records.number
    if not coarse_leads:  # fine records come in fine cell order: decide on the partial rows
        by_cell = np.argsort(src_p, kind="stable")
        s, r = src_p[by_cell], part_rank[by_cell]
        in_order = bool(((r[1:] >= r[:-1]) & ((s[1:] != s[:-1]) | (r[1:] == r[:-1]))).all())
    else:
        rank = part_rank[partial]
        in_order = rank.size < 2 or not bool((rank[1:] < rank[:-1]).any())
    if not in_order:
        rank = part_rank[partial]
        order = np.argsort(rank.astype(np.uint16) if len(uniq_key) <= 1 << 16 else rank, kind="stable")
        partial, fine_row, number = partial[order], fine_row[order], number[order]
    vi = np.empty((partial.size, 2), dtype=np.int64)
    vi[:, 1 - int(coarse_leads)] = records.partial_coarse_row[partial]
    vi[:, int(coarse_leads)] = fine_row
    return LinkPartition(
        policy=rep.policy,
        num_links=total,
        segments=rep.segments,
        segment_offsets=rep.segment_offsets,
        segment=seg_of_pair[pair_of][partial],
        cell=np.take(src_cells[src_p], partial, axis=0),
        record=number,
        vi=vi,
        perm=np.zeros(partial.size, dtype=np.int64),
    )


def cross_level_segments(
    pairs: np.ndarray,
    fine_cells: np.ndarray,
    coarse_cells: np.ndarray,
    *,
    delta: int,
    anchor_ratios: tuple[Sequence[int], Sequence[int]],
    explicit: bool,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``+delta`` and (``explicit``) ``-delta`` offsets segments of a family, from its cell pairs.

    ``pairs`` packs each distinct ``(fine cell, coarse cell)`` index pair as ``fine *
    len(coarse_cells) + coarse``; ``anchor_ratios`` is ``(fine, coarse)``.  Known before
    any record is placed, so the family's arrays can be created while records are placed.
    """
    if pairs.size == 0:
        return (), ()
    n_coarse = max(len(coarse_cells), 1)
    fine_ch, coarse_ch = fine_cells[pairs // n_coarse], coarse_cells[pairs % n_coarse]
    zeros = np.zeros(pairs.size, np.int64)
    plus = partition_records_by_offset(
        *cross_level_records(fine_ch, zeros, coarse_ch, zeros), delta=delta, directed=True, store="canonical",
        anchor_ratios=anchor_ratios,
    ).segments  # fmt: skip
    minus = partition_records_by_offset(
        *cross_level_records(coarse_ch, zeros, fine_ch, zeros), delta=-delta, directed=True, store="canonical",
        anchor_ratios=anchor_ratios[::-1],
    ).segments if explicit else ()  # fmt: skip
    return plus, minus
