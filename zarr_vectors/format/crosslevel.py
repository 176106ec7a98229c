"""Cross-level records and the coarse level's per-object metavertex lists (docs/format.md §7.4, §8.1).

A coarse level links every surviving fine vertex to the metavertex it was folded into:
``+N`` records ``[fine, coarse]`` at the fine level, ``-N`` records ``[coarse, fine]`` at
the coarse level (both directed; placement and the cross-level anchor are the Links
API's business).  ``|N| >= 2`` composes the single-step parent maps.
"""

from __future__ import annotations

import numpy as np

from zarr_vectors.format.coarsen import unique_sorted

__all__ = ["compose_parents", "cross_level_records", "fragment_sequences", "object_metavertices"]


def cross_level_records(
    src_chunks: np.ndarray, src_rows: np.ndarray, trg_chunks: np.ndarray, trg_rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(chunks (m, 2, D), vi (m, 2))``: endpoint 0 at the owning level, endpoint 1 at the other."""
    chunks = np.stack([np.asarray(src_chunks, dtype=np.int64), np.asarray(trg_chunks, dtype=np.int64)], axis=1)
    vi = np.stack([np.asarray(src_rows, dtype=np.int64), np.asarray(trg_rows, dtype=np.int64)], axis=1)
    return chunks, vi


def compose_parents(parent: np.ndarray, ancestor: np.ndarray) -> np.ndarray:
    """One more level up: ``parent[ancestor]``, keeping -1 (no ancestor) where either is missing.

    ``ancestor`` holds storage indices at level ``N - 1`` (or -1); ``parent`` maps every
    level ``N - 1`` storage index to its metavertex at level ``N`` (or -1 when the vertex
    belongs to no surviving object there).
    """
    out = np.full(len(ancestor), -1, dtype=np.int64)
    ok = ancestor >= 0
    out[ok] = parent[ancestor[ok]]
    return out


def fragment_sequences(
    offsets: np.ndarray, members: np.ndarray, metavertex: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per fragment, the metavertices its rows fell into, in row order, repeats collapsed.

    ``offsets`` (F + 1) delimit each fragment's run in ``members`` (vertex numbers, in the
    fragment's row order); ``metavertex`` maps a vertex number to its metavertex.
    Returns ``(offsets, sequence)`` in the same CSR form.
    """
    values = metavertex[members] if len(members) else np.zeros(0, dtype=np.int64)
    lengths = np.diff(offsets)
    keep = np.ones(values.size, dtype=bool)
    if values.size:
        keep[1:] = values[1:] != values[:-1]
        starts = offsets[:-1][lengths > 0]
        keep[starts] = True
    frag = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
    new_lengths = np.bincount(frag[keep], minlength=lengths.size).astype(np.int64)
    new_offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(new_lengths, out=new_offsets[1:])
    return new_offsets, values[keep]


def object_metavertices(
    block_object: np.ndarray,
    block_fragment: np.ndarray,
    offsets: np.ndarray,
    sequence: np.ndarray,
    *,
    ordered: bool,
    num_metavertices: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``(object, metavertex)`` pairs of the coarse manifests.

    ``block_object`` / ``block_fragment`` are the kept objects' manifest blocks in order
    (object-major, block order within an object), ``block_fragment`` indexing the CSR
    fragment sequences.  ``ordered`` (polylines, streamlines, lines): each object's
    metavertices follow its traversal, consecutive repeats collapsed (a path may revisit
    a metavertex).  Otherwise each object names each of its metavertices once, ascending
    storage index (= ascending coarse chunk, then fragment).
    """
    lengths = np.diff(offsets)[block_fragment]
    total = int(lengths.sum())
    first = np.repeat(offsets[:-1][block_fragment], lengths)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    mv = sequence[first + within] if total else np.zeros(0, dtype=np.int64)
    obj = np.repeat(np.asarray(block_object, dtype=np.int64), lengths)
    if ordered:
        keep = np.ones(total, dtype=bool)
        if total:
            keep[1:] = (obj[1:] != obj[:-1]) | (mv[1:] != mv[:-1])
        return obj[keep], mv[keep]
    key = unique_sorted(obj * max(int(num_metavertices), 1) + mv)
    return key // max(int(num_metavertices), 1), key % max(int(num_metavertices), 1)
