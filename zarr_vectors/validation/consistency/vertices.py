"""Level 3 — vertex tasks: vertices, FragmentIndex and vertex/fragment attributes per chunk.

A task reads a batch of chunks and returns findings and the small per-chunk tables later
checks need (vertex rows, fragment counts), never cell data.  The level-4 bin check of
point clouds runs in the same pass, so vertex cells are read once.  The level reduce
checks totals and the manifests against the fragment counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.encoding import FragmentIndex, ManifestSummary, named_coverage
from zarr_vectors.errors import ResourceLimitError
from zarr_vectors.format.paths import (
    format_chunk_key,
)
from zarr_vectors.format.points import box_bounds, outside_box
from zarr_vectors.format.schema import is_int
from zarr_vectors.store.backend import Storage
from zarr_vectors.validation.consistency.cells import (
    MAX_EXAMPLES,
    ArraySpec,
    Chunk,
    Digest,
    bin_keys,
    cell_rows,
    prefetch,
)
from zarr_vectors.validation.findings import Finding, crashed, make
from zarr_vectors.validation.manifests import ManifestCheck
from zarr_vectors.validation.metadata import (
    attribute_layout,
    vertices_dtype,
)


# ---------------------------------------------------------------------------
# vertex tasks
# ---------------------------------------------------------------------------
@dataclass
class VertexLevelSpec:
    number: int
    path: str
    ndim: int  # vertex row width (spatial sid_ndim)
    rank: int  # chunk-key rank
    vertices: ArraySpec | None
    fragments: ArraySpec | None
    vattrs: list[ArraySpec]
    fattrs: list[ArraySpec]
    claims_tile: bool
    binned: bool  # point cloud without object ids: fragments are bins
    max_fragments: int | None
    bin_check: bool  # level-4 bin containment (requested and applicable)
    chunk_check: bool = False  # level-4 chunk containment (requested and applicable; needs no bins)
    chunk_shape: tuple[float, ...] | None = None
    bin_shape: tuple[float, ...] | None = None
    bins_per_chunk: tuple[int, ...] | None = None
    attribute_ranges: bool = False  # level 5 (D22): gather each vertex attribute's value range
    owned: bool = False  # a level with an object index: each vertex lies in a fragment (L3_VERTEX_OWNERS)
    one_owner: bool = False  # level 0: in exactly one
    run_ends: bool = False  # a polyline level checked at level 4: keep each fragment's first and last row
    cover: bool = False  # the fine level of L5_CROSS_LEVEL_COVERAGE: digest every (cell, row)
    # the fine level of a +1 family under L5_CROSS_LEVEL_COVERAGE: the coarse level's bin shape, to
    # digest every (cell, row, the bin its vertex coarsens into) for L5_CROSS_LEVEL_BIN
    cover_bins: tuple[float, ...] | None = None
    seed: int = 0  # of the digests (cells.digest_seed), one per validation


@dataclass
class VertexResult:
    findings: list[Finding] = field(default_factory=list)
    rows: dict[Chunk, int] = field(default_factory=dict)
    fragments: dict[Chunk, int] = field(default_factory=dict)
    bin_checked: int = 0
    undecoded: int = 0  # vertex cells whose row count is unknown (already reported)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)  # attribute -> (min, max), NaN ignored
    # with spec.run_ends: each decoded FragmentIndex's (first rows, last rows), what the bridge tasks
    # need (polylines.implied_bridges); not merged by merge_vertex, whose table every link task gets
    run_ends: dict[Chunk, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # with spec.cover: the digest of every decoded cell's rows as (cell tag, row) (cells.cell_rows)
    cover: Digest = field(default_factory=Digest)
    # with spec.cover_bins: the digest of (cell tag, row, bin key) (cells.bin_keys)
    cover_bins: Digest = field(default_factory=Digest)


def vertex_batch(storage: Storage, spec: VertexLevelSpec, chunks: list[Chunk]) -> VertexResult:
    res = VertexResult()
    try:
        _vertex_batch(storage, spec, chunks, res)
    except Exception as exc:  # noqa: BLE001 - a crash is a finding, never a silent pass
        res.findings.append(crashed(3, spec.path, exc, cell=format_chunk_key(chunks[0]) if chunks else None, what="vertex cells"))
    return res


def _vertex_batch(storage: Storage, spec: VertexLevelSpec, chunks: list[Chunk], res: VertexResult) -> None:
    out = res.findings
    vpath = spec.vertices.path if spec.vertices else f"{spec.path}/vertices"
    dtype = vertices_dtype(spec.vertices.attrs) if spec.vertices else None
    fetched = prefetch(storage, [(spec.vertices, chunks), (spec.fragments, chunks)]
                        + [(a, chunks) for a in (*spec.vattrs, *spec.fattrs)], out)
    vcells, fcells = fetched[0], fetched[1]
    vattr_cells = list(zip(spec.vattrs, fetched[2:2 + len(spec.vattrs)]))
    fattr_cells = list(zip(spec.fattrs, fetched[2 + len(spec.vattrs):]))
    row_bytes = dtype.itemsize * spec.ndim if dtype is not None else None
    covered: list[np.ndarray] = []  # digested once for the batch
    binned: list[tuple[np.ndarray, np.ndarray]] = []  # (cell rows, their bin keys)
    for c in chunks:
        key = format_chunk_key(c)
        n_rows: int | None = 0
        positions = None
        payload = vcells.get(c)
        if payload is not None and row_bytes:
            if len(payload) % row_bytes:
                out.append(make("L3_VERTEX_ROWS", vpath, f"{len(payload)} bytes is not a whole number of "
                                f"{row_bytes}-byte rows ({spec.ndim} x {dtype.name})", cell=key))
                n_rows = None
                res.undecoded += 1
            else:
                positions = np.frombuffer(payload, dtype=dtype).reshape(-1, spec.ndim)
                n_rows = len(positions)
                finite = np.isfinite(positions).all(axis=1)
                if not finite.all():
                    out.append(make("L3_NONFINITE_VERTEX", vpath, f"{int((~finite).sum())} vertices have NaN or "
                                    f"infinite coordinates (first row {int(np.argmin(finite))})", cell=key))
        if n_rows is not None:
            res.rows[c] = n_rows
            rows = cell_rows(c, np.arange(n_rows), spec.seed) if (spec.cover or spec.cover_bins) and n_rows else None
            if spec.cover and rows is not None:
                covered.append(rows)
            if spec.cover_bins is not None and rows is not None and positions is not None:
                binned.append((rows, bin_keys(positions, spec.cover_bins, spec.seed)))
        # fragment index
        index = None
        if spec.fragments is not None:
            fpayload = fcells.get(c)
            if fpayload is None:
                if c in spec.fragments.cells:
                    pass  # undecodable: already reported
                elif n_rows:
                    out.append(make("L3_FRAGMENT_INDEX_MISSING", spec.fragments.path, f"the vertex cell has {n_rows} "
                                    "rows but there is no FragmentIndex at this chunk", cell=key))
            else:
                try:
                    index = FragmentIndex.decode(fpayload)
                except Exception as exc:  # noqa: BLE001
                    out.append(make("L3_FRAGMENT_INDEX_UNDECODABLE", spec.fragments.path, str(exc), cell=key))
            if index is not None:
                res.fragments[c] = index.num_fragments
                if spec.run_ends:
                    res.run_ends[c] = index.first_last_rows()
                if n_rows is not None:
                    _check_fragment_ranges(index, n_rows, spec, key, out)
                if spec.owned and n_rows is not None:
                    _check_fragments_cover(index, n_rows, spec, key, out)
                if spec.binned and spec.max_fragments is not None and index.num_fragments > spec.max_fragments:
                    out.append(make("L3_TOO_MANY_FRAGMENTS", spec.fragments.path, f"{index.num_fragments} fragments, "
                                    f"more than the {spec.max_fragments} bins per chunk", cell=key))
        # attributes
        for a, cells in vattr_cells:
            whole = _check_attribute_rows(a, cells.get(c), c, n_rows, "L3_ATTRIBUTE_ROWS", "vertex rows", out)
            if spec.attribute_ranges and whole:
                _widen(res.ranges, a, cells[c])
        for a, cells in fattr_cells:
            nf = index.num_fragments if index is not None else None
            _check_attribute_rows(a, cells.get(c), c, nf, "L3_FRAGMENT_ATTRIBUTE_ROWS", "fragments", out)
        # level 4: every vertex inside its cell's chunk, and inside the bin its fragment claims
        if spec.chunk_check and positions is not None and n_rows:
            try:
                if not _check_chunk(positions, c, spec, key, out):
                    continue  # the bins would only repeat it
            except Exception as exc:  # noqa: BLE001
                out.append(crashed(4, vpath, exc, cell=key, what="chunk containment"))
        if spec.bin_check and positions is not None and index is not None and n_rows and index.max_row() < n_rows:
            if index.num_fragments == spec.max_fragments:
                try:
                    _check_bins(positions, index, c, spec, key, out)
                    res.bin_checked += 1
                except Exception as exc:  # noqa: BLE001
                    out.append(crashed(4, vpath, exc, cell=key, what="bin containment"))
    if covered:
        res.cover = Digest.of(np.concatenate(covered), spec.seed)
    if binned:
        rows = np.concatenate([r for r, _ in binned])
        res.cover_bins = Digest.of([rows[:, 0], rows[:, 1], np.concatenate([k for _, k in binned])], spec.seed)


def _check_fragments_cover(index: FragmentIndex, n_rows: int, spec: VertexLevelSpec, key: str,
                           out: list[Finding]) -> None:
    """Every row of an object-indexed level in a fragment (an owner), at level 0 in exactly one;
    rows past the cell are ``L3_FRAGMENT_OUT_OF_RANGE``'s."""
    where = spec.fragments.path if spec.fragments else spec.path
    try:
        _, rows = index.expand()
    except ResourceLimitError as exc:  # overlapping ranges selecting far more rows than the cell holds
        out.append(make("L1_RESOURCE_LIMIT", where, str(exc), cell=key))
        return
    cover = np.bincount(rows[(rows >= 0) & (rows < n_rows)], minlength=n_rows)
    none = int(np.count_nonzero(cover == 0))
    several = int(np.count_nonzero(cover > 1)) if spec.one_owner else 0
    if none or several:
        first = int(np.flatnonzero((cover == 0) | ((cover > 1) & spec.one_owner))[0])
        rule = "at level 0 each vertex has one owner" if spec.one_owner else "every vertex has an owner"
        out.append(make("L3_VERTEX_OWNERS", where,
                        f"{none} vertices lie in no fragment and {several} in several (first row {first}): {rule}",
                        cell=key))


def _check_fragment_ranges(index: FragmentIndex, n_rows: int, spec: VertexLevelSpec, key: str,
                           out: list[Finding]) -> None:
    path = spec.fragments.path
    ends = index.range_starts + index.range_counts
    bad = (index.range_counts > 0) & (ends > n_rows) | (index.range_starts > n_rows)
    if bad.any():
        k = int(np.argmax(bad))
        f = int(np.flatnonzero(index.is_range)[k])
        out.append(make("L3_FRAGMENT_OUT_OF_RANGE", path, f"{int(bad.sum())} range fragments run past the "
                        f"{n_rows} vertex rows (fragment {f}: start {int(index.range_starts[k])}, count "
                        f"{int(index.range_counts[k])})", cell=key))
    if index.csr_indices.size and int(index.csr_indices.max()) >= n_rows:
        out.append(make("L3_FRAGMENT_OUT_OF_RANGE", path, f"explicit row index {int(index.csr_indices.max())} is "
                        f"past the {n_rows} vertex rows", cell=key))
    if spec.claims_tile and not index.is_tiling(n_rows):
        out.append(make("L3_FRAGMENTS_TILE", path, f"the level claims fragments_tile but this FragmentIndex does not "
                        f"tile the {n_rows} rows in order", cell=key))


def _check_attribute_rows(a: ArraySpec, payload: bytes | None, c: Chunk, expected: int | None, code: str,
                          what: str, out: list[Finding]) -> bool:
    """Report a cell whose rows are not the chunk's; True when it holds exactly those rows."""
    if c in a.cells and payload is None:
        return False  # undecodable: already reported
    layout = attribute_layout(a.attrs)
    if layout is None:
        return False  # an L2 finding
    dtype, width = layout
    row_bytes = dtype.itemsize * width
    got = len(payload) if payload is not None else 0
    if got % row_bytes:
        out.append(make(code, a.path, f"{got} bytes is not a whole number of {row_bytes}-byte rows", cell=format_chunk_key(c)))
        return False
    rows = got // row_bytes
    if expected is not None and rows != expected:
        out.append(make(code, a.path, f"{rows} rows but the chunk has {expected} {what}", cell=format_chunk_key(c)))
        return False
    return payload is not None and rows > 0


def _widen(ranges: dict[str, tuple[float, float]], a: ArraySpec, payload: bytes) -> None:
    """Widen the attribute's (min, max) by one cell's values (NaN ignored)."""
    layout = attribute_layout(a.attrs)
    assert layout is not None  # checked by the caller
    values = np.frombuffer(payload, dtype=layout[0]).astype(np.float64)
    values = values[~np.isnan(values)]
    if not values.size:
        return
    name = a.path.rsplit("/", 1)[-1]
    lo, hi = float(values.min()), float(values.max())
    old = ranges.get(name)
    ranges[name] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))


def aggregation_findings(path: str, parent: int, rules: dict[str, Any], fine: VertexResult,
                         coarse: VertexResult) -> list[Finding]:
    """Level 5 (D22): every reduction of a coarse attribute lies within the parent level's range of it."""
    out = []
    try:
        for name, how in sorted(rules.items()):
            got = coarse.ranges.get(name)
            if got is None:
                continue  # no value to check (or the cells are reported at level 3)
            if name not in fine.ranges:
                out.append(make("L5_ATTRIBUTE_AGGREGATION", path, f"{name!r} is aggregated ({how}) from level "
                                f"{parent}, which has no value of it"))
                continue
            lo, hi = fine.ranges[name]
            if got[0] < lo or got[1] > hi:
                out.append(make("L5_ATTRIBUTE_AGGREGATION", f"{path}/vertex_attributes/{name}", f"values span "
                                f"[{got[0]:g}, {got[1]:g}], outside level {parent}'s [{lo:g}, {hi:g}]: no {how} of "
                                "the parent's rows gives them"))
    except Exception as exc:  # noqa: BLE001
        out.append(crashed(5, path, exc, what="attribute aggregation"))
    return out


def _bin_bounds(frag: np.ndarray, c: Chunk, bpc: np.ndarray, bs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, tolerance) of the bins that fragments ``frag`` claim in chunk ``c``."""
    local = np.stack(np.unravel_index(frag, tuple(bpc)), axis=1)
    return box_bounds(np.asarray(c, dtype=np.int64) * bpc + local, bs)


def _check_chunk(positions: np.ndarray, c: Chunk, spec: VertexLevelSpec, key: str, out: list[Finding]) -> bool:
    """Every vertex inside the chunk its cell stands for (the union of its bins); False when one is not."""
    assert spec.chunk_shape is not None
    spatial = c[len(c) - spec.ndim :]  # an attribute-chunked key leads with the attribute's index
    lo, hi, tol = box_bounds(np.asarray(spatial, dtype=np.float64), np.asarray(spec.chunk_shape, dtype=np.float64))
    outside = outside_box(positions.astype(np.float64), lo, hi, tol)
    if not outside.any():
        return True
    i = int(np.argmax(outside))
    out.append(make("L4_POINT_OUTSIDE_BIN", spec.vertices.path if spec.vertices else spec.path,
                    f"{int(outside.sum())} vertices lie outside the cell's chunk"
                    f"{', so outside every bin of it' if spec.bin_check else ''} "
                    f"(row {i} at {positions[i].tolist()}, chunk [{lo.tolist()}, {hi.tolist()}))", cell=key))
    return False


def _check_bins(positions: np.ndarray, index: FragmentIndex, c: Chunk, spec: VertexLevelSpec, key: str,
                out: list[Finding]) -> None:
    bpc = np.asarray(spec.bins_per_chunk, dtype=np.int64)
    bs = np.asarray(spec.bin_shape, dtype=np.float64)
    frag, rows = index.expand()
    if rows.size == 0:
        return
    # per fragment first: its rows' extent against its bin (reduceat over the rows in fragment
    # order); only a fragment that fails is looked at row by row, for the message
    counts = np.bincount(frag, minlength=index.num_fragments)
    used = np.flatnonzero(counts)
    starts = (np.cumsum(counts) - counts)[used]
    p = positions[rows]
    lo, hi, tol = _bin_bounds(used, c, bpc, bs)
    low = np.minimum.reduceat(p, starts, axis=0).astype(np.float64)
    high = np.maximum.reduceat(p, starts, axis=0).astype(np.float64)
    if not ((low < lo - tol) | (high >= hi + tol)).any():
        return
    lo, hi, tol = _bin_bounds(frag, c, bpc, bs)
    p = p.astype(np.float64)
    outside = outside_box(p, lo, hi, tol)
    if outside.any():
        i = int(np.argmax(outside))
        out.append(make("L4_POINT_OUTSIDE_BIN", spec.vertices.path, f"{int(outside.sum())} vertices lie outside the "
                        f"bin their fragment claims (row {int(rows[i])} at {p[i].tolist()} is in fragment "
                        f"{int(frag[i])}, bin [{lo[i].tolist()}, {hi[i].tolist()}))", cell=key))


def merge_vertex(*parts: VertexResult) -> VertexResult:
    out = VertexResult()
    for p in parts:
        out.findings.extend(p.findings)
        out.rows.update(p.rows)
        out.fragments.update(p.fragments)
        out.bin_checked += p.bin_checked
        out.undecoded += p.undecoded
        out.cover += p.cover
        out.cover_bins += p.cover_bins
        for name, (lo, hi) in p.ranges.items():
            old = out.ranges.get(name)
            out.ranges[name] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    return out


def _check_owners(model_level: dict[str, Any], table: VertexResult, summary: ManifestSummary, mpath: str,
                  out: list[Finding]) -> None:
    """Who owns each fragment: named once at most where the level does not declare
    ``shared_fragments``, and by some manifest everywhere (an unnamed fragment belongs to no
    object: at level 0 every vertex has one owner, a coarse level's metavertices are the kept
    objects' own).  Coverage per chunk from the blocks' runs, sized by the chunk's fragments."""
    shared: list[tuple[Chunk, int]] = []
    unnamed: dict[Chunk, int] = {}
    for c, fragments in sorted(table.fragments.items()):
        cover = named_coverage(summary.named.get(c), fragments)
        if not model_level["shared_ok"] and (cover > 1).any():
            shared.append((c, int(np.argmax(cover > 1))))
        if (cover == 0).any():
            unnamed[c] = int(np.count_nonzero(cover == 0))
    if shared:
        c, f = shared[0]
        out.append(make("L3_FRAGMENT_SHARED", mpath, f"fragment {f} of chunk {format_chunk_key(c)} is named more "
                        f"than once ({len(shared)} chunk(s) with such fragments), and the level does not declare "
                        "shared_fragments"))
    if unnamed:
        c = min(unnamed)
        out.append(make("L3_VERTEX_OWNERS", mpath, f"{unnamed[c]} of the {table.fragments[c]} fragments of chunk "
                        f"{format_chunk_key(c)} are named by no manifest ({len(unnamed)} chunk(s) so): a fragment's "
                        "vertices belong to some object"))


# ---------------------------------------------------------------------------
# level reduce: totals, manifests
# ---------------------------------------------------------------------------
def reduce_level(model_level: dict[str, Any], table: VertexResult, manifests: ManifestCheck | None) -> list[Finding]:
    out: list[Finding] = list(table.findings)
    path = model_level["path"]
    try:
        vc = model_level["vertex_count"]
        total = int(sum(table.rows.values()))
        complete = model_level["vertices_ok"] and not table.undecoded and not any(
            f.code in ("L3_CELL_UNDECODABLE", "L3_NONEMPTY_MISSING", "L3_SHARD_CORRUPT")
            and f.node.endswith("/vertices")
            for f in table.findings)
        if is_int(vc) and complete and vc != total:
            out.append(make("L3_VERTEX_COUNT", path, f"vertex_count is {vc}, the vertex cells hold {total} rows"))
        if manifests is not None:
            mpath = f"{path}/object_index/manifests"
            max_fragment = manifests.summary.max_fragment
            missing = [(c, v) for c, v in max_fragment.items() if c not in table.fragments]
            for c, (f, r) in sorted(missing)[:MAX_EXAMPLES]:
                out.append(make("L3_MANIFEST_CHUNK_MISSING", mpath, f"row {r} names chunk {format_chunk_key(c)}, which has no "
                                "FragmentIndex at this level"))
            if len(missing) > MAX_EXAMPLES:
                out.append(make("L3_MANIFEST_CHUNK_MISSING", mpath, f"... and {len(missing) - MAX_EXAMPLES} more "
                                "missing chunks"))
            over = [(c, v) for c, v in max_fragment.items()
                    if c in table.fragments and v[0] >= table.fragments[c]]
            for c, (f, r) in sorted(over)[:MAX_EXAMPLES]:
                out.append(make("L3_MANIFEST_FRAGMENT_OUT_OF_RANGE", mpath, f"row {r} names fragment {f} of chunk "
                                f"{format_chunk_key(c)}, which has {table.fragments[c]} fragments"))
            if len(over) > MAX_EXAMPLES:
                out.append(make("L3_MANIFEST_FRAGMENT_OUT_OF_RANGE", mpath, f"... and {len(over) - MAX_EXAMPLES} "
                                "more chunks"))
            _check_owners(model_level, table, manifests.summary, mpath, out)
            npres = model_level.get("num_present")
            nonempty = manifests.summary.nonempty
            if isinstance(npres, int) and npres != nonempty and not manifests.findings:
                out.append(make("L3_OBJECT_NUM_PRESENT", f"{path}/object_index", f"num_present is {npres}, "
                                f"{nonempty} manifests are non-empty"))
    except Exception as exc:  # noqa: BLE001
        out.append(crashed(3, path, exc, what="level totals"))
    return out
