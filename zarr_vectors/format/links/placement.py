"""Link placement: where each record is filed (docs/format.md §7.2, §7.4), vectorised.

A record is ``L`` endpoints ``(chunk, vi)`` in input order.  Placement chooses one or
more storage permutations sigma per record (``sigma[k]`` = input position of the
endpoint stored at position ``k``); each sigma is one physical row filed in the cell of
its source endpoint ``sigma[0]``, under the offsets of the other endpoints relative to
the source's anchor.

Pure numpy over whole record arrays -- no per-record Python -- so the same functions
serve a single-process write and every task of a Dask graph.  Nothing here touches a
store; :mod:`zarr_vectors.store.link_cells` turns placements into cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zarr_vectors.encoding import lehmer_encode_rows
from zarr_vectors.errors import InputError
from zarr_vectors.format.paths import format_offsets

CANONICAL = "canonical"
DUPLICATE = "duplicate"
STORE_POLICIES = (CANONICAL, DUPLICATE)

__all__ = [
    "CANONICAL",
    "DUPLICATE",
    "STORE_POLICIES",
    "Placements",
    "anchor_chunks",
    "canonical_order",
    "copies_per_record",
    "enumeration_order",
    "intra_mask",
    "place_records",
    "segment_names",
]


@dataclass(frozen=True)
class Placements:
    """Every physical placement of a batch of records, in record order.

    ``P`` placements; the copies of one record (``store="duplicate"``) are adjacent,
    leads in ascending ``(chunk, vi)`` order.
    """

    record: np.ndarray  # (P,) int64: input position of the record in the batch
    sigma: np.ndarray  # (P, L) int64: storage permutation
    cell: np.ndarray  # (P, D) int64: source chunk = the array cell
    offsets: np.ndarray  # (P, L-1, D) int64: relative offsets of stored endpoints 1..L-1
    vi: np.ndarray  # (P, L) int64: stored vertex indices
    perm: np.ndarray  # (P,) int64: Lehmer code of sigma (0 for identity)

    def __len__(self) -> int:
        return int(self.record.size)


def anchor_chunks(src: np.ndarray, r_src: np.ndarray, r_trg: np.ndarray) -> np.ndarray:
    """``floor(src * r_src / r_trg)`` per axis, in integers (floors toward -inf)."""
    return (np.asarray(src, dtype=np.int64) * np.asarray(r_src, dtype=np.int64)) // np.asarray(
        r_trg, dtype=np.int64
    )


def intra_mask(chunks: np.ndarray) -> np.ndarray:
    """(n,) bool: every endpoint of the record is in endpoint 0's chunk."""
    return (chunks == chunks[:, :1, :]).all(axis=(1, 2))


def canonical_order(chunks: np.ndarray, vi: np.ndarray) -> np.ndarray:
    """(n, L) stable argsort of each record's endpoints by (chunk tuple, vi).

    Chunk coordinates compare numerically, axis 0 first; exact ties keep input order.
    """
    n, width, ndim = chunks.shape
    if n == 0 or width == 1:
        return np.broadcast_to(np.arange(width, dtype=np.int64), (n, width)).copy()
    if width == 2:  # edges: one vectorised comparison instead of a row-wise lexsort
        diff = chunks[:, 1, :] - chunks[:, 0, :]
        nonzero = diff != 0
        first = np.argmax(nonzero, axis=1)
        decided = np.take_along_axis(diff, first[:, None], axis=1)[:, 0]
        swap = np.where(nonzero.any(axis=1), decided < 0, vi[:, 1] < vi[:, 0])
        return np.stack([swap, ~swap], axis=1).astype(np.int64)
    # np.lexsort: the LAST key is the primary one; it is stable.
    keys = [vi] + [chunks[:, :, d] for d in range(ndim - 1, -1, -1)]
    return np.lexsort(keys, axis=-1).astype(np.int64, copy=False)


def _distinct_chunk_starts(chunks: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(n, L) bool: position ``j`` of the sorted endpoints starts a new chunk."""
    sorted_chunks = np.take_along_axis(chunks, order[:, :, None], axis=1)
    new = np.ones(order.shape, dtype=bool)
    new[:, 1:] = (sorted_chunks[:, 1:] != sorted_chunks[:, :-1]).any(axis=2)
    return new


def copies_per_record(chunks: np.ndarray, *, delta: int, store: str) -> np.ndarray:
    """(n,) number of physical rows each record is filed as.

    One, except ``store="duplicate"`` at ``delta == 0``: one per distinct endpoint chunk
    (an intra record touches one chunk, so it also gets one).
    """
    n = chunks.shape[0]
    if store != DUPLICATE or delta != 0 or n == 0:
        return np.ones(n, dtype=np.int64)
    order = canonical_order(chunks, np.zeros(chunks.shape[:2], dtype=np.int64))
    return _distinct_chunk_starts(chunks, order).sum(axis=1).astype(np.int64)


def _lead_permutations(leads: np.ndarray, width: int) -> np.ndarray:
    """sigma = [lead] + every other input position ascending, one row per lead."""
    sigma = np.empty((leads.size, width), dtype=np.int64)
    sigma[:, 0] = leads
    rest = np.arange(width - 1, dtype=np.int64)[None, :]
    sigma[:, 1:] = rest + (rest >= leads[:, None])
    return sigma


def place_records(
    chunks: np.ndarray,
    vi: np.ndarray,
    *,
    delta: int,
    directed: bool,
    store: str,
    r_src: Sequence[int] | np.ndarray | None = None,
    r_trg: Sequence[int] | np.ndarray | None = None,
) -> Placements:
    """Every placement of ``n`` records ``chunks (n, L, D)`` / ``vi (n, L)``.

    ``delta == 0`` (docs/format.md §7.2): intra records keep input order; otherwise
    undirected canonical sorts by (chunk, vi), directed canonical keeps input order, and
    duplicate files one copy per distinct endpoint chunk.  ``delta != 0`` (§7.4): the
    source is always endpoint 0, offsets are taken against its anchor
    ``floor(c_src * r_src / r_trg)`` (``r_src``/``r_trg`` are required then).
    Inputs are assumed validated (int64, matching shapes, ``store`` known).
    """
    n, width, ndim = chunks.shape
    identity = np.broadcast_to(np.arange(width, dtype=np.int64), (n, width))
    if delta != 0:
        if r_src is None or r_trg is None:
            raise InputError("cross-level placement needs the anchor ratios r_src and r_trg")
        cell = chunks[:, 0, :].copy()
        anchor = anchor_chunks(cell, np.asarray(r_src), np.asarray(r_trg))
        return Placements(
            record=np.arange(n, dtype=np.int64),
            sigma=identity.copy(),
            cell=cell,
            offsets=chunks[:, 1:, :] - anchor[:, None, :],
            vi=vi.copy(),
            perm=np.zeros(n, dtype=np.int64),
        )

    if width == 2 and store != DUPLICATE:
        return _place_pairs(chunks, vi, directed=directed)
    intra = intra_mask(chunks) if n else np.zeros(0, dtype=bool)
    record = np.arange(n, dtype=np.int64)
    if store == DUPLICATE:
        cross = np.flatnonzero(~intra)
        order = canonical_order(chunks[cross], vi[cross])
        starts = _distinct_chunk_starts(chunks[cross], order)
        rows, cols = np.nonzero(starts)  # row-major: records ascending, leads ascending
        lead_sigma = _lead_permutations(order[rows, cols], width)
        lead_record = cross[rows]
        keep = np.flatnonzero(intra)
        record = np.concatenate([keep, lead_record])
        sigma = np.concatenate([identity[keep], lead_sigma])
        by_record = np.argsort(record, kind="stable")
        record, sigma = record[by_record], sigma[by_record]
    elif not directed:
        sigma = identity.copy()
        cross = np.flatnonzero(~intra)
        sigma[cross] = canonical_order(np.take(chunks, cross, axis=0), np.take(vi, cross, axis=0))
    else:
        sigma = identity.copy()

    # gather endpoints in storage order; only rows whose sigma is not the identity move
    one_per_record = store != DUPLICATE  # record == arange(n)
    stored_chunks = (chunks if one_per_record else chunks[record]).copy()
    stored_vi = (vi if one_per_record else vi[record]).copy()
    moved = np.flatnonzero((sigma != np.arange(width)).any(axis=1))
    if moved.size:
        sub_sigma = np.take(sigma, moved, axis=0)
        stored_chunks[moved] = np.take_along_axis(np.take(stored_chunks, moved, axis=0), sub_sigma[:, :, None], axis=1)
        stored_vi[moved] = np.take_along_axis(np.take(stored_vi, moved, axis=0), sub_sigma, axis=1)
    perm = np.zeros(record.size, dtype=np.int64)
    if moved.size:  # the identity's Lehmer code is 0
        perm[moved] = sigma[moved, 0] if width == 2 else lehmer_encode_rows(sigma[moved])
    cell = stored_chunks[:, 0, :]
    return Placements(
        record=record,
        sigma=sigma,
        cell=np.ascontiguousarray(cell),
        offsets=stored_chunks[:, 1:, :] - cell[:, None, :],
        vi=stored_vi,
        perm=perm,
    )


def _place_pairs(chunks: np.ndarray, vi: np.ndarray, *, directed: bool) -> Placements:
    """:func:`place_records` for canonical edges at delta 0, without the general gathers.

    One copy per record; undirected, a cross record is stored swapped when endpoint 1's
    chunk sorts first (intra records and directed ones keep input order), so every
    stored column is a ``where`` over the two input columns.
    """
    n = chunks.shape[0]
    c0, c1 = chunks[:, 0, :], chunks[:, 1, :]
    if directed or n == 0:
        swap = np.zeros(n, dtype=bool)
    else:
        diff = c1 - c0
        nonzero = diff != 0
        first = np.argmax(nonzero, axis=1)
        swap = np.take_along_axis(diff, first[:, None], axis=1)[:, 0] < 0  # 0 where intra: no swap
    s = swap[:, None]
    cell = np.where(s, c1, c0)
    stored_vi = np.where(s, vi[:, ::-1], vi)
    perm = swap.astype(np.int64)  # the Lehmer code of (1, 0) is 1
    return Placements(
        record=np.arange(n, dtype=np.int64),
        sigma=np.stack([perm, 1 - perm], axis=1),
        cell=cell,
        offsets=(np.where(s, c0, c1) - cell)[:, None, :],
        vi=stored_vi,
        perm=perm,
    )


def _pack_columns(columns: np.ndarray) -> np.ndarray | None:
    """One int64 key per row preserving lexicographic row order, or None if it would overflow."""
    if columns.shape[1] == 0 or columns.shape[0] == 0:
        return np.zeros(columns.shape[0], dtype=np.int64)
    lo = [int(columns[:, d].min()) for d in range(columns.shape[1])]  # column-wise: no strided reduce
    spans = [int(columns[:, d].max()) - low + 1 for d, low in enumerate(lo)]
    total = 1
    for span in spans:
        total *= span
    if total >= 2**62:
        return None
    key = np.zeros(columns.shape[0], dtype=np.int64)
    for d, (span, low) in enumerate(zip(spans, lo)):
        key *= span
        key += columns[:, d] - low
    return key


def segment_names(offsets: np.ndarray) -> tuple[list[str], np.ndarray, list[np.ndarray]]:
    """The distinct offsets of ``P`` placements.

    Returns ``(names, segment, parsed)``: segment names sorted as ASCII strings (the
    enumeration order, docs/format.md §7.5), each placement's index into ``names``, and
    the ``(L-1, D)`` offsets of every name.
    """
    count, nm1, ndim = offsets.shape
    if count == 0:
        return [], np.zeros(0, dtype=np.int64), []
    flat = offsets.reshape(count, nm1 * ndim)
    key = _pack_columns(flat)
    span = int(key.max()) + 1 if key is not None else 0
    if key is not None and span <= 1 << 22:  # few distinct offsets: count instead of sorting
        present = np.flatnonzero(np.bincount(key, minlength=span))
        lookup = np.zeros(span, dtype=np.int64)
        lookup[present] = np.arange(present.size)
        inverse = lookup[key]
        first = np.zeros(present.size, dtype=np.int64)
        first[inverse[::-1]] = np.arange(key.size - 1, -1, -1)  # first occurrence of each key
        uniq = flat[first]
    elif key is not None:
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        uniq = flat[first]
    else:
        uniq, inverse = np.unique(flat, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    parsed = [u.reshape(nm1, ndim) for u in uniq]
    names = [format_offsets(p.tolist()) for p in parsed]
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names), dtype=np.int64)
    return [names[i] for i in order], rank[inverse], [parsed[i] for i in order]


def enumeration_order(
    segment: np.ndarray, cell: np.ndarray, record: np.ndarray, *, records_ascending: bool = False
) -> np.ndarray:
    """Order of placements on disk: segment index, then cell as a signed int tuple, then record.

    The segment index must already follow the ASCII order of the names (see
    :func:`segment_names`); cells compare numerically (docs/decisions.md D8).  When the
    placements are already in ascending record order, a stable sort on (segment,
    cell) alone is enough -- a radix sort when that key fits 16 bits.
    """
    if records_ascending:
        key = _pack_columns(np.column_stack([segment, cell]))
        if key is not None:
            if key.size and int(key.max()) < 1 << 16:
                return np.argsort(key.astype(np.uint16), kind="stable")
            return np.argsort(key, kind="stable")
    columns = np.column_stack([segment, cell, record])
    key = _pack_columns(columns)
    if key is not None:
        return np.argsort(key, kind="stable")
    keys = [record] + [cell[:, d] for d in range(cell.shape[1] - 1, -1, -1)] + [segment]
    return np.lexsort(keys)