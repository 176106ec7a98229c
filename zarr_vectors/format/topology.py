"""Input topology of the linked kinds: checks and the records each kind stores (docs/format.md §8).

Pure numpy; indices are global input vertex indices.  Everything here runs before
anything is written -- on the client, or per block in a check stage for records given
as dask arrays -- so every check can name the offending record.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_vectors.errors import InputError


def check_record_shape(records: Any, *, what: str, width: int | None = None) -> None:
    """(m, L) integers: what can be checked without reading the values (numpy or dask)."""
    if records.ndim != 2 or records.shape[1] < 1:
        raise InputError(f"{what} must have shape (m, L), found {tuple(records.shape)}")
    if width is not None and records.shape[1] != width:
        raise InputError(f"{what} must have {width} columns, found {records.shape[1]}")
    if records.dtype.kind not in "iu":
        raise InputError(f"{what} dtype {records.dtype} is unsupported: pass integer vertex indices")


def check_records(
    records: np.ndarray, n_vertices: int, *, what: str, width: int | None = None, first_row: int = 0
) -> np.ndarray:
    """Integer (m, L) vertex-index records, every index in range (rows named from ``first_row``)."""
    given = np.asarray(records)
    check_record_shape(given, what=what, width=width)
    arr = given.astype(np.int64, copy=False)
    # one reduction, no temporaries (a fresh process pays for each page of one): seen as
    # unsigned, a negative index is larger than any vertex count
    if arr.size and arr.view(np.uint64).max() >= n_vertices:
        row, col = np.argwhere((arr < 0) | (arr >= n_vertices))[0]
        raise InputError(
            f"{what} row {first_row + row} names vertex {given[row, col]}, outside 0..{n_vertices - 1}; "
            "nothing was written"
        )
    return arr


def record_block_problem(
    block: np.ndarray, n_vertices: int, first_row: int, what: str, distinct: bool
) -> str | None:
    """The first problem of one block of a lazily given record array, or None (a Dask check task)."""
    try:
        arr = check_records(block, n_vertices, what=what, first_row=first_row)
        if distinct:
            check_distinct(arr, what=what, first_row=first_row)
    except InputError as exc:
        return str(exc)
    return None


def check_distinct(records: np.ndarray, *, what: str, first_row: int = 0) -> None:
    """Every record names L distinct vertices (a face may not repeat a corner).

    Block by block, so the comparisons' temporaries stay in cache and never need fresh
    pages (half the time of whole-array comparisons in a new process, 2*10^6 faces).
    """
    width = records.shape[1]
    pairs = [(i, j) for i in range(width) for j in range(i + 1, width)]
    block = 16384
    for start in range(0, records.shape[0], block):
        part = records[start : start + block]
        if width <= 4:  # a handful of column comparisons beat a row-wise sort
            dup = np.zeros(part.shape[0], dtype=bool)
            for i, j in pairs:
                dup |= part[:, i] == part[:, j]
        else:
            s = np.sort(part, axis=1)
            dup = (s[:, 1:] == s[:, :-1]).any(axis=1)
        if dup.any():
            row = start + int(np.argmax(dup))
            raise InputError(
                f"{what} row {first_row + row} repeats a vertex: {records[row].tolist()}; nothing was written"
            )


def check_offsets(offsets: np.ndarray, n_vertices: int, *, exact_length: int | None = None) -> np.ndarray:
    """CSR polyline boundaries: starts at 0, non-decreasing, ends at n; each polyline non-empty."""
    off = np.asarray(offsets)
    if off.ndim != 1 or off.size < 2 or off.dtype.kind not in "iu":
        raise InputError(f"offsets must be a 1-D integer array of length (polylines + 1), found {off.dtype} {off.shape}")
    off = off.astype(np.int64)
    if off[0] != 0 or off[-1] != n_vertices:
        raise InputError(f"offsets must start at 0 and end at {n_vertices} (the vertex count), found {off[0]}..{off[-1]}")
    lengths = np.diff(off)
    if (lengths < 1).any():
        p = int(np.argmax(lengths < 1))
        raise InputError(f"polyline {p} has {lengths[p]} vertices (offsets[{p}]={off[p]}, offsets[{p + 1}]={off[p + 1]})")
    if exact_length is not None and (lengths != exact_length).any():
        p = int(np.argmax(lengths != exact_length))
        raise InputError(f"line {p} has {lengths[p]} vertices; every line has exactly {exact_length}")
    return off


def check_parents(parents: np.ndarray, n_vertices: int) -> np.ndarray:
    """Parent index per node, -1 for roots; the graph must be a forest (no cycles)."""
    par = np.asarray(parents)
    if par.ndim != 1 or par.shape[0] != n_vertices or par.dtype.kind not in "iu":
        raise InputError(f"parents must be an integer array of shape ({n_vertices},), found {par.dtype} {par.shape}")
    par = par.astype(np.int64)
    bad = (par < -1) | (par >= n_vertices) | (par == np.arange(n_vertices))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"node {i} has parent {par[i]}: parents must be -1 or another node index")
    # pointer jumping: after ceil(log2 n) rounds every node points at its root, unless on a cycle
    jump = np.where(par < 0, np.arange(n_vertices), par)
    for _ in range(max(1, int(np.ceil(np.log2(max(n_vertices, 2))))) + 1):
        jump = jump[jump]
    on_cycle = par[jump] >= 0
    if on_cycle.any():
        i = int(np.argmax(on_cycle))
        raise InputError(f"parents contain a cycle through node {i}: a skeleton must be a forest")
    return par


def depth_first_order(parents: np.ndarray) -> np.ndarray:
    """Nodes in depth-first pre-order: roots ascending, children in ascending index order.

    The skeleton writer stores nodes in this order so that most parent links are
    implied by row adjacency (docs/format.md §8).  An explicit stack over CSR children:
    linear in the node count.
    """
    n = len(parents)
    children = np.argsort(parents, kind="stable")
    children = children[parents[children] >= 0]
    starts = np.searchsorted(parents[children], np.arange(n + 1))
    order = np.empty(n, dtype=np.int64)
    roots = np.flatnonzero(parents < 0)
    stack = list(roots[::-1].tolist())
    kids = children.tolist()
    first = starts.tolist()
    k = 0
    while stack:
        node = stack.pop()
        order[k] = node
        k += 1
        stack.extend(reversed(kids[first[node] : first[node + 1]]))
    return order


def polyline_bridges(offsets: np.ndarray, vertex_chunks: np.ndarray) -> np.ndarray:
    """(b, 2) consecutive vertex pairs of one polyline that sit in different chunks."""
    n = len(vertex_chunks)
    same_line = np.ones(max(n - 1, 0), dtype=bool)
    same_line[offsets[1:-1] - 1] = False  # the pair (last of polyline p, first of p+1)
    crosses = (vertex_chunks[1:] != vertex_chunks[:-1]).any(axis=1) & same_line
    i = np.flatnonzero(crosses)
    return np.stack([i, i + 1], axis=1)
