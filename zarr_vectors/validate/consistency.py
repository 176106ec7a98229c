"""Level 3 — consistency: every cell is read, as Dask tasks.

The per-cell checks are grouped into tasks per array family and level (batches of cells
sized to tens of MB) and reduced to one list of findings:

* vertex tasks, per level: vertices + FragmentIndex + vertex/fragment attributes of a
  batch of chunks; they return findings and the small per-chunk tables later checks need
  (vertex rows, fragment counts) -- never cell data.  The level-4 bin check of point
  clouds runs in the same pass, so vertex cells are read once.
* link tasks, per family: link cells + their link_fragments and link-attribute cells;
  they take the vertex-row tables of the owning and the target level (a graph
  dependency, not a second pass) and return findings, row totals and, for duplicate
  families only, one 64-bit hash per record.
* reduce tasks: level totals, manifests against fragment counts, family counts.

Cells are decoded here with :mod:`zarr_vectors.encoding` rather than the array API so
that one defect is one finding, not an exception that hides the rest.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import dask
import numpy as np

from zarr_vectors.encoding import FragmentIndex, decode_ragged_blob, decode_ragged_ints, lehmer_decode_rows
from zarr_vectors.errors import EncodingError
from zarr_vectors.execution import runner
from zarr_vectors.execution.runner import parallelism
from zarr_vectors.format.paths import (
    format_chunk_key,
    format_delta,
    is_intra,
    parse_chunk_key,
    parse_delta,
    parse_offsets,
)
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.codecs import ShardingSpec
from zarr_vectors.validate.findings import Finding, crashed, make
from zarr_vectors.validate.metadata import (
    attribute_layout,
    family_policy,
    level_chunk_shape,
    level_transform,
    vertices_dtype,
)
from zarr_vectors.validate.structure import CellCodec, ManifestSummary, Node, StoreModel, origin_of

try:  # the single definition lives with the links API (Links page)
    from zarr_vectors.store.link_arrays import links_has_perm
except Exception:  # pragma: no cover - only while that module is being written

    def links_has_perm(offsets: Sequence[Sequence[int]], *, delta: int, directed: bool, store: str) -> bool:
        if is_intra(offsets) or delta != 0:
            return False
        return True if store == "duplicate" else not directed


Chunk = tuple[int, ...]
MIN_BATCH_BYTES = 4 << 20
MAX_BATCH_BYTES = 48 << 20
MAX_EXAMPLES = 3


def _key(chunk: Chunk) -> str:
    return format_chunk_key(chunk)


# ---------------------------------------------------------------------------
# array descriptions shipped to tasks (small, picklable)
# ---------------------------------------------------------------------------
@dataclass
class ArraySpec:
    path: str
    doc: dict[str, Any]
    cells: dict[Chunk, tuple[str, int]]  # absolute chunk -> (key, size); sharded: (shard key, inner chunk size)
    # sharded arrays: absolute chunk -> offset of the inner chunk in its shard object; the cells of
    # a corrupt shard (already an L3_SHARD_CORRUPT finding) are in ``cells`` but have no offset
    offsets: dict[Chunk, int] | None = None

    def codec(self) -> CellCodec:
        return CellCodec(self.doc, file=f"{self.path}/zarr.json")

    @property
    def attrs(self) -> dict[str, Any]:
        return self.doc.get("attributes", {})

    @property
    def unreadable(self) -> int:
        """Cells known to exist whose bytes cannot be located (in a corrupt shard)."""
        return 0 if self.offsets is None else len(self.cells) - len(self.offsets)


def array_spec(model: StoreModel, path: str) -> ArraySpec | None:
    node = model.nodes.get(path)
    if node is None or node.doc is None or node.node_type != "array":
        return None
    if path in model.shards:
        cells, offsets = model.shards[path]
        return ArraySpec(path, node.doc, cells, offsets)
    origin = origin_of(node) or ()
    cells = {
        tuple(i + o for i, o in zip(index, origin)): entry for index, entry in model.cells.get(path, {}).items()
    }
    return ArraySpec(path, node.doc, cells)


# ---------------------------------------------------------------------------
# sharded arrays (FORMAT.md §9): the present cells come from the shard indexes
# ---------------------------------------------------------------------------
def load_shards(model: StoreModel, out: list[Finding]) -> None:
    """Read every shard index of every sharded grid array (one concurrent batch of suffix reads) into
    ``model.shards``: {path: (cells, offsets)} as :class:`ArraySpec` takes them.  A shard whose index
    is truncated, fails its CRC32C, or points outside the object or the array is an L3_SHARD_CORRUPT
    finding; the cells ``nonempty_chunks`` lists in it then count as present but unreadable, so that
    one defect is one finding."""
    jobs: list[tuple[Node, ShardingSpec, list[tuple[tuple[int, ...], tuple[str, int]]]]] = []
    for number in sorted(model.levels):
        for node in model.grid_arrays(number):
            try:
                sharding = CellCodec(node.doc, file=f"{node.path}/zarr.json").sharding
            except Exception:  # noqa: BLE001 - an L2 finding; level 3 does not run after one
                continue
            if sharding is not None:
                jobs.append((node, sharding, sorted(model.cells.get(node.path, {}).items())))
    requests = [(key, *sharding.index_range()) for _, sharding, shards in jobs for _, (key, _) in shards]
    raws = iter(model.storage.get_ranges(requests))
    for node, sharding, shards in jobs:
        model.shards[node.path] = _shard_cells(node, sharding, [(s, k, n, next(raws)) for s, (k, n) in shards], out)


def _shard_cells(node: Node, spec: ShardingSpec, shards: list[tuple[tuple[int, ...], str, int, bytes | None]],
                 out: list[Finding]) -> tuple[dict[Chunk, tuple[str, int]], dict[Chunk, int]]:
    origin = np.asarray(origin_of(node) or (0,) * len(spec.shard_shape), dtype=np.int64)
    shape = np.asarray(node.doc.get("shape"), dtype=np.int64)
    ss = np.asarray(spec.shard_shape, dtype=np.int64)
    cells: dict[Chunk, tuple[str, int]] = {}
    offsets: dict[Chunk, int] = {}
    corrupt: dict[tuple[int, ...], str] = {}
    for shard, key, size, raw in shards:
        if raw is None:  # vanished since the listing: nothing present
            continue
        try:
            where = f"shard {key}"
            index = spec.decode_index(raw, where=where)
            entries = spec.present(index)
            lo, hi = spec.data_bounds(size)
            start, nbytes = index[entries, 0], index[entries, 1]
            lo_, hi_ = np.uint64(max(lo, 0)), np.uint64(max(hi, 0))
            bad = (start < lo_) | (start > hi_) | (nbytes > hi_ - np.minimum(start, hi_))
            if bad.any():
                spec.inner_slice(index, int(entries[np.argmax(bad)]), where=where, object_size=size)  # raises
            index_of = np.stack(np.unravel_index(entries, spec.shard_shape), axis=1) + np.asarray(shard) * ss
            outside = (index_of >= shape).any(axis=1)
            if outside.any():
                raise EncodingError(f"{where}: index lists cell {index_of[int(np.argmax(outside))].tolist()} "
                                    f"outside the array shape {shape.tolist()}")
        except EncodingError as exc:
            out.append(make("L3_SHARD_CORRUPT", node.path, str(exc)))
            corrupt[shard] = key
            continue
        for c, o, n in zip((index_of + origin).tolist(), start.tolist(), nbytes.tolist()):
            cells[tuple(c)] = (key, int(n))
            offsets[tuple(c)] = int(o)
    listed = node.attrs.get("nonempty_chunks")
    if corrupt and isinstance(listed, list):
        for k in listed:
            try:
                c = parse_chunk_key(k, len(ss))
            except (ValueError, TypeError):
                continue
            shard = tuple(int(v) for v in (np.asarray(c) - origin) // ss)
            if shard in corrupt:
                cells[c] = (corrupt[shard], 0)
    return cells, offsets


def _read_raw(storage: Storage, keys: list[str], nbytes: int) -> list[bytes | None]:
    """Raw objects of many keys: one concurrent batch, or plain reads when that would cost more."""
    if storage.protocol == "file" and (len(keys) < 8 or nbytes < (8 << 20)):
        return [storage.get(k) for k in keys]
    return storage.get_many(keys)


def _prefetch(storage: Storage, wanted: list[tuple[ArraySpec | None, Sequence[Chunk]]],
              out: list[Finding]) -> list[dict[Chunk, bytes]]:
    """Decoded payloads of the given cells of several arrays, read in one batch (absent cells left out).

    An unsharded cell is its own object; a sharded one is a byte range of its shard object (located
    by the shard indexes read in :func:`load_shards`).  Cells of a corrupt shard are skipped: they
    are already an L3_SHARD_CORRUPT finding."""
    plan: list[tuple[ArraySpec, list[Chunk]]] = []
    keys: list[str] = []
    ranges: list[tuple[str, int, int]] = []
    nbytes = 0
    for spec, chunks in wanted:
        present = [c for c in chunks if spec is not None and c in spec.cells
                   and (spec.offsets is None or c in spec.offsets)]
        plan.append((spec, present))
        for c in present:
            key, size = spec.cells[c]
            if spec.offsets is None:
                keys.append(key)
            else:
                ranges.append((key, spec.offsets[c], spec.offsets[c] + size))
            nbytes += size
    raws = iter(_read_raw(storage, keys, nbytes)) if keys else iter(())
    inner = iter(storage.get_ranges(ranges)) if ranges else iter(())
    results: list[dict[Chunk, bytes]] = []
    for spec, present in plan:
        payloads: dict[Chunk, bytes] = {}
        results.append(payloads)
        if not present:
            continue
        source = raws if spec.offsets is None else inner
        try:
            codec = spec.codec()
        except Exception as exc:  # noqa: BLE001 - already an L2 finding; never reached when L2 passed
            out.append(crashed(3, spec.path, exc, what="codec"))
            for _ in present:
                next(source)
            continue
        for c in present:
            raw = next(source)
            if raw is None:
                out.append(make("L3_NONEMPTY_MISSING", spec.path, "cell vanished while validating", cell=_key(c)))
                continue
            if spec.offsets is not None and len(raw) != spec.cells[c][1]:
                out.append(make("L3_SHARD_CORRUPT", spec.path, f"shard {spec.cells[c][0]}: inner chunk at bytes "
                                f"[{spec.offsets[c]}, {spec.offsets[c] + spec.cells[c][1]}) lies past the end of "
                                "the shard object", cell=_key(c)))
                continue
            try:
                payloads[c] = codec.payload(raw)
            except Exception as exc:  # noqa: BLE001
                out.append(make("L3_CELL_UNDECODABLE", spec.path, f"cell does not decode: {exc}", cell=_key(c)))
    return results


def _batches(units: list[tuple[Any, int]], target: int) -> list[list[Any]]:
    """Greedy runs of units whose summed size is about ``target`` bytes."""
    out: list[list[Any]] = []
    current: list[Any] = []
    size = 0
    for unit, n in units:
        if current and size + n > target:
            out.append(current)
            current, size = [], 0
        current.append(unit)
        size += n
    if current:
        out.append(current)
    return out


def _target_bytes(total: int) -> int:
    return int(min(MAX_BATCH_BYTES, max(MIN_BATCH_BYTES, total // max(1, 3 * parallelism()))))


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
    bin_shape: tuple[float, ...] | None = None
    bins_per_chunk: tuple[int, ...] | None = None


@dataclass
class VertexResult:
    findings: list[Finding] = field(default_factory=list)
    rows: dict[Chunk, int] = field(default_factory=dict)
    fragments: dict[Chunk, int] = field(default_factory=dict)
    bin_checked: int = 0
    undecoded: int = 0  # vertex cells whose row count is unknown (already reported)


def vertex_batch(storage: Storage, spec: VertexLevelSpec, chunks: list[Chunk]) -> VertexResult:
    res = VertexResult()
    try:
        _vertex_batch(storage, spec, chunks, res)
    except Exception as exc:  # noqa: BLE001 - a crash is a finding, never a silent pass
        res.findings.append(crashed(3, spec.path, exc, cell=_key(chunks[0]) if chunks else None, what="vertex cells"))
    return res


def _vertex_batch(storage: Storage, spec: VertexLevelSpec, chunks: list[Chunk], res: VertexResult) -> None:
    out = res.findings
    vpath = spec.vertices.path if spec.vertices else f"{spec.path}/vertices"
    dtype = vertices_dtype(spec.vertices.attrs) if spec.vertices else None
    fetched = _prefetch(storage, [(spec.vertices, chunks), (spec.fragments, chunks)]
                        + [(a, chunks) for a in (*spec.vattrs, *spec.fattrs)], out)
    vcells, fcells = fetched[0], fetched[1]
    vattr_cells = list(zip(spec.vattrs, fetched[2:2 + len(spec.vattrs)]))
    fattr_cells = list(zip(spec.fattrs, fetched[2 + len(spec.vattrs):]))
    row_bytes = dtype.itemsize * spec.ndim if dtype is not None else None
    for c in chunks:
        key = _key(c)
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
                if n_rows is not None:
                    _check_fragment_ranges(index, n_rows, spec, key, out)
                if spec.binned and spec.max_fragments is not None and index.num_fragments > spec.max_fragments:
                    out.append(make("L3_TOO_MANY_FRAGMENTS", spec.fragments.path, f"{index.num_fragments} fragments, "
                                    f"more than the {spec.max_fragments} bins per chunk", cell=key))
        # attributes
        for a, cells in vattr_cells:
            _check_attribute_rows(a, cells.get(c), c, n_rows, "L3_ATTRIBUTE_ROWS", "vertex rows", out)
        for a, cells in fattr_cells:
            nf = index.num_fragments if index is not None else None
            _check_attribute_rows(a, cells.get(c), c, nf, "L3_FRAGMENT_ATTRIBUTE_ROWS", "fragments", out)
        # level 4: every vertex inside the bin its fragment claims
        if spec.bin_check and positions is not None and index is not None and n_rows and index.max_row() < n_rows:
            if index.num_fragments == spec.max_fragments:
                try:
                    _check_bins(positions, index, c, spec, key, out)
                    res.bin_checked += 1
                except Exception as exc:  # noqa: BLE001
                    out.append(crashed(4, vpath, exc, cell=key, what="bin containment"))


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
                          what: str, out: list[Finding]) -> None:
    if c in a.cells and payload is None:
        return  # undecodable: already reported
    layout = attribute_layout(a.attrs)
    if layout is None:
        return  # an L2 finding
    dtype, width = layout
    row_bytes = dtype.itemsize * width
    got = len(payload) if payload is not None else 0
    if got % row_bytes:
        out.append(make(code, a.path, f"{got} bytes is not a whole number of {row_bytes}-byte rows", cell=_key(c)))
        return
    rows = got // row_bytes
    if expected is not None and rows != expected:
        out.append(make(code, a.path, f"{rows} rows but the chunk has {expected} {what}", cell=_key(c)))


def _bin_bounds(frag: np.ndarray, c: Chunk, bpc: np.ndarray, bs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, tolerance) of the bins that fragments ``frag`` claim in chunk ``c``."""
    local = np.stack(np.unravel_index(frag, tuple(bpc)), axis=1)
    lo = (np.asarray(c, dtype=np.int64) * bpc + local) * bs
    hi = lo + bs
    return lo, hi, 1e-6 * np.maximum(np.maximum(np.abs(lo), np.abs(hi)), bs)


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
    outside = ((p < lo - tol) | (p >= hi + tol)).any(axis=1)
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
    return out


# ---------------------------------------------------------------------------
# link tasks
# ---------------------------------------------------------------------------
@dataclass
class SegmentSpec:
    segment: str
    offsets: tuple[tuple[int, ...], ...]
    links: ArraySpec
    has_perm: bool
    flat: bool
    dtype: str
    attributes: list[ArraySpec]  # parallel link_attributes arrays that exist


@dataclass
class FamilySpec:
    number: int
    path: str
    delta: int
    width: int
    directed: bool
    store: str
    target_exists: bool
    r_src: tuple[int, ...]
    r_trg: tuple[int, ...]
    link_fragments: ArraySpec | None
    segments: dict[str, SegmentSpec]


@dataclass
class LinkResult:
    findings: list[Finding] = field(default_factory=list)
    rows: int = 0
    hashes: list[np.ndarray] = field(default_factory=list)
    # duplicate families: physical rows per number of distinct endpoint chunks K (each logical
    # record has exactly K copies, so the logical count is sum(rows_K / K))
    copies: dict[int, int] = field(default_factory=dict)


def link_batch(storage: Storage, fam: FamilySpec, units: list[tuple[str, list[Chunk]]],
               src_rows: VertexResult, trg_rows: VertexResult | None) -> LinkResult:
    res = LinkResult()
    wanted: list[tuple[ArraySpec | None, Sequence[Chunk]]] = []
    for segment, chunks in units:
        seg = fam.segments[segment]
        wanted.append((seg.links, chunks))
        wanted.append((fam.link_fragments if seg.flat else None, chunks))
        wanted.extend((a, chunks) for a in seg.attributes)
    try:
        fetched = iter(_prefetch(storage, wanted, res.findings))
    except Exception as exc:  # noqa: BLE001
        res.findings.append(crashed(3, fam.path, exc, what="link cell reads"))
        return res
    for segment, chunks in units:
        seg = fam.segments[segment]
        payloads, lf_cells = next(fetched), next(fetched)
        attr_cells = [(a, next(fetched)) for a in seg.attributes]
        try:
            _link_cells(fam, seg, chunks, payloads, lf_cells, attr_cells, src_rows.rows,
                        trg_rows.rows if trg_rows else None, res)
        except Exception as exc:  # noqa: BLE001
            res.findings.append(crashed(3, seg.links.path, exc, cell=_key(chunks[0]) if chunks else None,
                                        what="link cells"))
    return res


def _link_cells(fam: FamilySpec, seg: SegmentSpec, chunks: list[Chunk], payloads: dict[Chunk, bytes],
                lf_cells: dict[Chunk, bytes], attr_cells: list[tuple[ArraySpec, dict[Chunk, bytes]]],
                src_rows: dict[Chunk, int], trg_rows: dict[Chunk, int] | None, res: LinkResult) -> None:
    out = res.findings
    path = seg.links.path
    dtype = np.dtype(seg.dtype).newbyteorder("<")
    width = fam.width + int(seg.has_perm)
    factorial = math.factorial(fam.width)
    for c in chunks:
        payload = payloads.get(c)
        if payload is None:
            continue
        key = _key(c)
        rows = _decode_link_cell(payload, width, dtype, seg.flat, path, key, out)
        if rows is None:
            continue
        n = len(rows)
        res.rows += n
        if seg.flat and fam.link_fragments is not None and c in lf_cells:
            _check_link_fragments(lf_cells[c], n, payload, width, dtype, fam.link_fragments.path, key, out)
        perm = rows[:, 0] if seg.has_perm else None
        vi = rows[:, 1:] if seg.has_perm else rows
        if perm is not None and n:
            bad = (perm < 0) | (perm >= factorial)
            if bad.any():
                out.append(make("L3_PERM_IDX_RANGE", path, f"{int(bad.sum())} records have perm_idx outside "
                                f"[0, {factorial}) (first {int(perm[np.argmax(bad)])})", cell=key))
        endpoint_chunks = _endpoint_chunks(c, seg.offsets, fam)
        for k, ck in enumerate(endpoint_chunks):
            table = src_rows if (k == 0 or fam.delta == 0) else trg_rows
            level = fam.number if (k == 0 or fam.delta == 0) else fam.number + fam.delta
            if table is None or not n:
                continue
            if ck not in table:
                out.append(make("L3_LINK_ENDPOINT_CHUNK_MISSING", path, f"endpoint {k} of {n} records lies in chunk "
                                f"{_key(ck)}, which has no vertices at level {level}", cell=key))
                continue
            col = vi[:, k]
            bad = (col < 0) | (col >= table[ck])
            if bad.any():
                out.append(make("L3_LINK_VI_OUT_OF_RANGE", path, f"{int(bad.sum())} records have vi_{k} outside "
                                f"[0, {table[ck]}) of chunk {_key(ck)} at level {level} (first "
                                f"{int(col[np.argmax(bad)])})", cell=key))
        for a, cells in attr_cells:
            if c not in cells:
                continue  # absent: a mirror finding; undecodable: already reported
            layout = attribute_layout(a.attrs)
            if layout is None:
                continue
            adt, awidth = layout
            rb = adt.itemsize * awidth
            got = len(cells[c])
            if got % rb or got // rb != n:
                out.append(make("L3_LINK_ATTRIBUTE_ROWS", a.path, f"{got} bytes = {got / rb:g} rows of {rb} bytes, "
                                f"the link cell has {n} records", cell=key))
        if fam.store == "duplicate" and n:
            res.hashes.append(_record_hashes(vi, perm, endpoint_chunks, fam.width))
            k = len(set(endpoint_chunks)) if fam.delta == 0 else 1
            res.copies[k] = res.copies.get(k, 0) + n


def _decode_link_cell(payload: bytes, width: int, dtype: np.dtype, flat: bool, path: str, key: str,
                      out: list[Finding]) -> np.ndarray | None:
    row_bytes = dtype.itemsize * width
    if flat:
        try:
            return decode_ragged_ints(payload, width, dtype).astype(np.int64, copy=False)
        except Exception as exc:  # noqa: BLE001
            if _decodes(lambda: decode_ragged_blob(payload, width, dtype)):
                out.append(make("L3_LINK_ENCODING", path, "the all-zero delta-0 array must hold flat rows, but this "
                                "cell is a ragged blob", cell=key))
            else:
                out.append(make("L3_LINK_CELL_BYTES", path, f"{exc} (row = link_width + has_perm = {width} ints)",
                                cell=key))
            return None
    try:
        rows, _ = decode_ragged_blob(payload, width, dtype)
        return rows.astype(np.int64, copy=False)
    except Exception as exc:  # noqa: BLE001
        if len(payload) % row_bytes == 0:
            out.append(make("L3_LINK_ENCODING", path, f"a non-intra or cross-level array must hold a ragged blob, but "
                            f"this cell does not parse as one ({exc}); it looks like a flat row dump", cell=key))
        else:
            out.append(make("L3_LINK_CELL_BYTES", path, f"{exc} (row = link_width + has_perm = {width} ints)",
                            cell=key))
        return None


def _decodes(fn: Any) -> bool:
    try:
        rows, _ = fn()
        return len(rows) > 0
    except Exception:  # noqa: BLE001
        return False


def _check_link_fragments(raw: bytes, n: int, payload: bytes, width: int, dtype: np.dtype, path: str, key: str,
                          out: list[Finding]) -> None:
    try:
        index = FragmentIndex.decode(raw)
    except Exception as exc:  # noqa: BLE001
        out.append(make("L3_LINK_FRAGMENTS_TILE", path, f"does not decode: {exc}", cell=key))
        return
    if index.is_tiling(n):
        return
    total = int(index.row_counts().sum()) if index.num_fragments else 0
    try:
        blob_rows, _ = decode_ragged_blob(payload, width, dtype)
        if len(blob_rows) == total and total:
            out.append(make("L3_LINK_ENCODING", path.rsplit("/", 1)[0] + "/links/0", "the all-zero delta-0 array "
                            "must hold flat rows, but this cell is a ragged blob", cell=key))
            return
    except Exception:  # noqa: BLE001
        pass
    out.append(make("L3_LINK_FRAGMENTS_TILE", path, f"ranges do not tile the link cell's {n} rows in order "
                    f"({index.num_fragments} fragments covering {total} rows)", cell=key))


def _endpoint_chunks(src: Chunk, offsets: tuple[tuple[int, ...], ...], fam: FamilySpec) -> list[Chunk]:
    """Chunk of each stored endpoint: the source, then anchor(src) + o_k."""
    if fam.delta == 0:
        anchor = src
    else:
        anchor = tuple((c * rs) // rt for c, rs, rt in zip(src, fam.r_src, fam.r_trg))
    return [src] + [tuple(a + o for a, o in zip(anchor, off)) for off in offsets]


_MIX = np.uint64(0x9E3779B97F4A7C15)
_MUL = np.uint64(0xBF58476D1CE4E5B9)


def _record_hashes(vi: np.ndarray, perm: np.ndarray | None, chunks: list[Chunk], width: int) -> np.ndarray:
    """One 64-bit hash per record of its endpoints in INPUT order (so every physical copy hashes alike)."""
    n = len(vi)
    d = len(chunks[0])
    stored = np.empty((n, width, d + 1), dtype=np.int64)
    for k, ck in enumerate(chunks):
        stored[:, k, :d] = ck
        stored[:, k, d] = vi[:, k]
    if perm is not None:
        sigma = lehmer_decode_rows(np.clip(perm, 0, math.factorial(width) - 1), width)
        inp = np.empty_like(stored)
        rows = np.arange(n)[:, None]
        inp[rows, sigma] = stored  # input endpoint sigma[k] = stored endpoint k
    else:
        inp = stored
    flat = inp.reshape(n, -1).astype(np.uint64)
    h = np.full(n, _MIX, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(flat.shape[1]):
            h ^= flat[:, j] + _MIX + (h << np.uint64(6)) + (h >> np.uint64(2))
            h *= _MUL
            h ^= h >> np.uint64(31)
    return h


def reduce_family(fam: FamilySpec, policy: dict[str, Any], *parts: LinkResult) -> list[Finding]:
    out: list[Finding] = []
    try:
        for p in parts:
            out.extend(p.findings)
        rows = sum(p.rows for p in parts)
        phys = policy.get("num_physical_records")
        num = policy.get("num_links")
        if phys is not None and phys != rows:
            out.append(make("L3_FAMILY_PHYSICAL_COUNT", fam.path, f"num_physical_records is {phys}, the family's "
                            f"cells hold {rows} rows"))
        if num is not None:
            if fam.store == "canonical":
                if num != rows:
                    out.append(make("L3_FAMILY_NUM_LINKS", fam.path, f"num_links is {num} but a canonical family "
                                    f"holds {rows} records on disk"))
            else:
                hashes = [h for p in parts for h in p.hashes]
                distinct = int(np.unique(np.concatenate(hashes)).size) if hashes else 0
                copies: dict[int, int] = defaultdict(int)
                for p in parts:
                    for k, n in p.copies.items():
                        copies[k] += n
                incomplete = {k: n for k, n in copies.items() if n % k}
                logical = sum(n // k for k, n in copies.items())
                if incomplete:
                    k, n = sorted(incomplete.items())[0]
                    out.append(make("L3_FAMILY_NUM_LINKS", fam.path, f"{n} physical rows span {k} chunks each, not a "
                                    f"multiple of {k}: some records are missing a copy"))
                elif num not in (distinct, logical):
                    out.append(make("L3_FAMILY_NUM_LINKS", fam.path, f"num_links is {num} but the duplicate family's "
                                    f"{rows} physical rows decode to {distinct} distinct records ({logical} input "
                                    "records counting repeated ones)"))
    except Exception as exc:  # noqa: BLE001
        out.append(crashed(3, fam.path, exc, what="family counts"))
    return out


# ---------------------------------------------------------------------------
# level reduce: totals, manifests
# ---------------------------------------------------------------------------
def reduce_level(model_level: dict[str, Any], table: VertexResult, manifests: ManifestSummary | None) -> list[Finding]:
    out: list[Finding] = list(table.findings)
    path = model_level["path"]
    try:
        vc = model_level["vertex_count"]
        total = int(sum(table.rows.values()))
        complete = model_level["vertices_ok"] and not table.undecoded and not any(
            f.code in ("L3_CELL_UNDECODABLE", "L3_NONEMPTY_MISSING", "L3_SHARD_CORRUPT")
            and f.node.endswith("/vertices")
            for f in table.findings)
        if isinstance(vc, int) and not isinstance(vc, bool) and complete and vc != total:
            out.append(make("L3_VERTEX_COUNT", path, f"vertex_count is {vc}, the vertex cells hold {total} rows"))
        if manifests is not None:
            mpath = f"{path}/object_index/manifests"
            missing = [(c, v) for c, v in manifests.max_fragment.items() if c not in table.fragments]
            for c, (f, r) in sorted(missing)[:MAX_EXAMPLES]:
                out.append(make("L3_MANIFEST_CHUNK_MISSING", mpath, f"row {r} names chunk {_key(c)}, which has no "
                                "FragmentIndex at this level"))
            if len(missing) > MAX_EXAMPLES:
                out.append(make("L3_MANIFEST_CHUNK_MISSING", mpath, f"... and {len(missing) - MAX_EXAMPLES} more "
                                "missing chunks"))
            over = [(c, v) for c, v in manifests.max_fragment.items()
                    if c in table.fragments and v[0] >= table.fragments[c]]
            for c, (f, r) in sorted(over)[:MAX_EXAMPLES]:
                out.append(make("L3_MANIFEST_FRAGMENT_OUT_OF_RANGE", mpath, f"row {r} names fragment {f} of chunk "
                                f"{_key(c)}, which has {table.fragments[c]} fragments"))
            if len(over) > MAX_EXAMPLES:
                out.append(make("L3_MANIFEST_FRAGMENT_OUT_OF_RANGE", mpath, f"... and {len(over) - MAX_EXAMPLES} "
                                "more chunks"))
            npres = model_level.get("num_present")
            if isinstance(npres, int) and npres != manifests.nonempty and not manifests.findings:
                out.append(make("L3_OBJECT_NUM_PRESENT", f"{path}/object_index", f"num_present is {npres}, "
                                f"{manifests.nonempty} manifests are non-empty"))
    except Exception as exc:  # noqa: BLE001
        out.append(crashed(3, path, exc, what="level totals"))
    return out


# ---------------------------------------------------------------------------
# the driver: static checks, then one Dask graph
# ---------------------------------------------------------------------------
def _presence(model: StoreModel, spec: ArraySpec, out: list[Finding]) -> None:
    """nonempty_chunks against the cells on disk."""
    listed = spec.attrs.get("nonempty_chunks")
    if not isinstance(listed, list):
        return
    ndim = len(spec.doc.get("shape", []))
    keys = set()
    for k in listed:
        try:
            keys.add(parse_chunk_key(k, ndim))
        except (ValueError, TypeError):
            continue
    present = set(spec.cells)
    missing = sorted(keys - present)
    extra = sorted(present - keys)
    for code, chunks, what in (("L3_NONEMPTY_MISSING", missing, "listed in nonempty_chunks but has no cell on disk"),
                               ("L3_NONEMPTY_EXTRA", extra, "has a cell on disk but is not listed in "
                                                            "nonempty_chunks")):
        for c in chunks[:MAX_EXAMPLES]:
            out.append(make(code, spec.path, what, cell=_key(c)))
        if len(chunks) > MAX_EXAMPLES:
            out.append(make(code, spec.path, f"... and {len(chunks) - MAX_EXAMPLES} more cells"))


def _ratio(model: StoreModel, number: int, rank: int) -> tuple[int, ...] | None:
    if number not in model.levels:
        return None
    root = model.zv["chunk_shape"]
    level = level_chunk_shape(model, number)
    r = [round(a / b) for a, b in zip(level, root)]
    return tuple([1] * (rank - len(r)) + r)


def build(model: StoreModel, requested: int, manifests: dict[int, ManifestSummary], static: list[Finding],
          ran: dict[str, int]) -> Any:
    """Static level-3 checks into ``static``; returns one delayed reducing every cell task to findings."""
    load_shards(model, static)
    storage_d = dask.delayed(model.storage, traverse=False)
    level_reduces = []
    family_reduces = []
    tables: dict[int, Any] = {}
    geometry = model.zv.get("geometry_types") or []
    point_cloud = list(geometry) == ["point_cloud"]
    ndim = model.sid_ndim or 0
    for number, lpath in sorted(model.levels.items()):
        attrs = model.level_attrs(number)
        rank = model.grid_rank(number) or ndim
        grids = {n.path: array_spec(model, n.path) for n in model.grid_arrays(number)}
        for spec in grids.values():
            if spec is not None:
                _presence(model, spec, static)
        vertices = grids.get(f"{lpath}/vertices")
        fragments = grids.get(f"{lpath}/vertex_fragments")
        vattrs = [s for p, s in grids.items() if p.startswith(f"{lpath}/vertex_attributes/") and s]
        fattrs = [s for p, s in grids.items() if p.startswith(f"{lpath}/fragment_attributes/") and s]
        has_objects = f"{lpath}/object_index" in model.nodes
        binned = point_cloud and not has_objects
        transform = level_transform(model, number)
        cs = level_chunk_shape(model, number)
        bin_shape = tuple(2.0 * t for t in transform[1]) if transform else None
        bpc = None
        if bin_shape is not None and len(bin_shape) == len(cs):
            ratios = [c / b for c, b in zip(cs, bin_shape)]
            if all(abs(r - round(r)) <= 1e-9 * max(1.0, r) and round(r) >= 1 for r in ratios):
                bpc = tuple(int(round(r)) for r in ratios)
        max_fragments = math.prod(bpc) if bpc else None
        coarsened = attrs.get("coarsening_method", "none") not in (None, "none")
        bin_check = (requested >= 4 and binned and bpc is not None and not coarsened and rank == ndim
                     and vertices is not None and fragments is not None)
        if binned and max_fragments is not None:
            ran["L3_TOO_MANY_FRAGMENTS"] = ran.get("L3_TOO_MANY_FRAGMENTS", 0) + 1
        if bin_check:
            ran["L4_POINT_OUTSIDE_BIN"] = ran.get("L4_POINT_OUTSIDE_BIN", 0) + 1
        vspec = VertexLevelSpec(
            number, lpath, ndim, rank, vertices, fragments, vattrs, fattrs,
            claims_tile=attrs.get("fragments_tile") is True, binned=binned, max_fragments=max_fragments,
            bin_check=bin_check, bin_shape=bin_shape, bins_per_chunk=bpc,
        )
        sizes: dict[Chunk, int] = defaultdict(int)
        for s in (vertices, fragments, *vattrs, *fattrs):
            if s is not None:
                for c, (_, size) in s.cells.items():
                    sizes[c] += size
        units = sorted(sizes.items())
        target = _target_bytes(sum(sizes.values()))
        vspec_d = dask.delayed(vspec, traverse=False)
        tasks = [dask.delayed(vertex_batch, pure=False)(storage_d, vspec_d, batch) for batch in _batches(units, target)]
        tables[number] = dask.delayed(merge_vertex, pure=False)(*tasks)
        level_info = {
            "path": lpath,
            "vertex_count": attrs.get("vertex_count"),
            "vertices_ok": vertices is not None and not vertices.unreadable,
            "num_present": (model.nodes[f"{lpath}/object_index"].attrs.get("num_present") if has_objects else None),
        }
        summary_d = dask.delayed(manifests.get(number), traverse=False)  # its tables need no walking
        level_reduces.append(dask.delayed(reduce_level, pure=False)(level_info, tables[number], summary_d))
        _arrays_present(model, number, static)
    for number, lpath in sorted(model.levels.items()):
        family_reduces.extend(_link_graph(model, number, tables, static))
    return dask.delayed(_collect, pure=False)(*level_reduces, *family_reduces)


def _collect(*parts: list[Finding]) -> list[Finding]:
    return [f for p in parts for f in p]


FAMILY_PATHS = {
    "vertices": "vertices", "vertex_attributes": "vertex_attributes", "fragment_attributes": "fragment_attributes",
    "links": "links", "object_index": "object_index", "link_attributes": "link_attributes",
    "object_attributes": "object_attributes", "groups": "groups", "group_attributes": "group_attributes",
    "vertex_fragments": "vertex_fragments", "link_fragments": "link_fragments",
}


def _arrays_present(model: StoreModel, number: int, out: list[Finding]) -> None:
    lpath = model.levels[number]
    listed = model.level_attrs(number).get("arrays_present")
    if not isinstance(listed, list):
        return
    for name in listed:
        rel = FAMILY_PATHS.get(name) if isinstance(name, str) else None
        if rel is not None and f"{lpath}/{rel}" not in model.nodes:
            out.append(make("L3_ARRAYS_PRESENT", lpath, f"arrays_present names {name!r}, which the level does not "
                            "have"))


def _link_graph(model: StoreModel, number: int, tables: dict[int, Any], static: list[Finding]) -> list[Any]:
    lpath = model.levels[number]
    rank = model.grid_rank(number) or 0
    out = []
    families = model.children(f"{lpath}/links") if f"{lpath}/links" in model.nodes else []
    intra_cells: set[Chunk] | None = None
    lf = array_spec(model, f"{lpath}/link_fragments") if f"{lpath}/link_fragments" in model.nodes else None
    for fam_node in families:
        try:
            delta = parse_delta(fam_node.name)
        except ValueError:
            continue
        pol = family_policy(model, number, delta)
        if pol is None:
            continue
        width, directed, store = pol["link_width"], pol["directed"], pol["store"]
        segments: dict[str, SegmentSpec] = {}
        for arr in model.children(fam_node.path):
            try:
                offsets = parse_offsets(arr.name, link_width=width, sid_ndim=pol["sid_ndim"])
            except ValueError:
                continue
            _canonical(arr.path, offsets, delta, directed, store, static)
            expected = links_has_perm(offsets, delta=delta, directed=directed, store=store)
            stamped = arr.attrs.get("has_perm")
            if isinstance(stamped, bool) and stamped != expected:
                static.append(make("L3_HAS_PERM", arr.path, f"has_perm is {str(stamped).lower()} but "
                                   f"links_has_perm(offsets, delta={delta}, directed={str(directed).lower()}, "
                                   f"store={store!r}) is {str(expected).lower()}", pointer="/attributes/has_perm"))
            spec = array_spec(model, arr.path)
            if spec is None:
                continue
            flat = delta == 0 and is_intra(offsets)
            if flat:
                intra_cells = set(spec.cells)
            attrs = []
            for name_node in (model.children(f"{lpath}/link_attributes") if f"{lpath}/link_attributes" in model.nodes
                              else []):
                a = array_spec(model, f"{name_node.path}/{format_delta(delta)}/{arr.name}")
                if a is not None:
                    attrs.append(a)
            segments[arr.name] = SegmentSpec(arr.name, offsets, spec, stamped if isinstance(stamped, bool)
                                             else expected, flat, str(arr.attrs.get("dtype", "int64")), attrs)
        target = number + delta
        r_src = _ratio(model, number, rank) or (1,) * rank
        r_trg = _ratio(model, target, rank) or (1,) * rank
        fam = FamilySpec(number, fam_node.path, delta, width, directed, store, target in model.levels, r_src, r_trg,
                         lf if delta == 0 else None, segments)
        _mirror(model, number, delta, fam, static)
        units = sorted(((s.segment, c), size) for s in segments.values() for c, (_, size) in s.links.cells.items())
        target_bytes = _target_bytes(sum(n for _, n in units))
        tasks = []
        fam_d = dask.delayed(fam, traverse=False)
        storage_d = dask.delayed(model.storage, traverse=False)
        for batch in _batches(units, target_bytes):
            grouped: dict[str, list[Chunk]] = defaultdict(list)
            for seg, c in batch:
                grouped[seg].append(c)
            trg_table = tables.get(target) if delta != 0 else None
            tasks.append(dask.delayed(link_batch, pure=False)(storage_d, fam_d, sorted(grouped.items()),
                                                              tables[number], trg_table))
        out.append(dask.delayed(reduce_family, pure=False)(fam_d, pol, *tasks))
    # link_fragments: a cell for every cell of the delta-0 all-zero array and for no other cell
    if lf is not None:
        have = set(lf.cells)
        want = intra_cells or set()
        for c in sorted(want - have)[:MAX_EXAMPLES]:
            static.append(make("L3_LINK_FRAGMENTS_PRESENCE", lf.path, "the intra-chunk links cell has no link_fragments "
                               "cell", cell=_key(c)))
        for c in sorted(have - want)[:MAX_EXAMPLES]:
            static.append(make("L3_LINK_FRAGMENTS_PRESENCE", lf.path, "link_fragments cell without an intra-chunk "
                               "links cell at the same chunk", cell=_key(c)))
    return out


def _lex_sign(offset: Sequence[int]) -> int:
    for c in offset:
        if c:
            return 1 if c > 0 else -1
    return 0


def _canonical(path: str, offsets: tuple[tuple[int, ...], ...], delta: int, directed: bool, store: str,
               out: list[Finding]) -> None:
    if directed or store != "canonical" or delta != 0:
        return
    for i, off in enumerate(offsets):
        if _lex_sign(off) < 0:
            out.append(make("L3_OFFSETS_NOT_CANONICAL", path, f"offset {i + 1} {list(off)} is lexicographically "
                            "negative in an undirected canonical family (each record is stored once, under the "
                            "positive offset)"))
        if i and list(offsets[i]) < list(offsets[i - 1]):
            out.append(make("L3_OFFSETS_NOT_CANONICAL", path, "offsets are not non-decreasing across the segment"))


def _mirror(model: StoreModel, number: int, delta: int, fam: FamilySpec, out: list[Finding]) -> None:
    lpath = model.levels[number]
    if f"{lpath}/link_attributes" not in model.nodes:
        return
    dname = format_delta(delta)
    for name_node in model.children(f"{lpath}/link_attributes"):
        afam = f"{name_node.path}/{dname}"
        if afam not in model.nodes:
            continue
        have = {n.name for n in model.children(afam)}
        want = set(fam.segments)
        for seg in sorted(want - have):
            if fam.segments[seg].links.cells:
                out.append(make("L3_LINK_ATTRIBUTE_MIRROR", afam, f"no array for links segment {seg!r}"))
        for seg in sorted(have - want):
            out.append(make("L3_LINK_ATTRIBUTE_MIRROR", f"{afam}/{seg}", "no links array with this segment"))
        for seg in sorted(want & have):
            a = array_spec(model, f"{afam}/{seg}")
            if a is None:
                continue
            links_cells = set(fam.segments[seg].links.cells)
            for c in sorted(links_cells - set(a.cells))[:MAX_EXAMPLES]:
                out.append(make("L3_LINK_ATTRIBUTE_MIRROR", a.path, "the links cell has no attribute cell", cell=_key(c)))
            for c in sorted(set(a.cells) - links_cells)[:MAX_EXAMPLES]:
                out.append(make("L3_LINK_ATTRIBUTE_MIRROR", a.path, "attribute cell without a links cell", cell=_key(c)))
    # attribute families for a delta with no links family at all are reported by the caller


def orphan_attribute_families(model: StoreModel, out: list[Finding]) -> None:
    for number, lpath in sorted(model.levels.items()):
        if f"{lpath}/link_attributes" not in model.nodes:
            continue
        for name_node in model.children(f"{lpath}/link_attributes"):
            for afam in model.children(name_node.path):
                try:
                    delta = parse_delta(afam.name)
                except ValueError:
                    continue
                if family_policy(model, number, delta) is None and f"{lpath}/links/{afam.name}" not in model.nodes:
                    out.append(make("L3_LINK_ATTRIBUTE_MIRROR", afam.path, f"no links family links/{afam.name} to "
                                    "mirror"))


def run(model: StoreModel, requested: int, manifests: dict[int, ManifestSummary]) -> tuple[list[Finding], dict[str, int]]:
    """Every level-3 check (and the level-4 bin check riding on the same reads)."""
    static: list[Finding] = []
    ran: dict[str, int] = {}
    for code in ("L3_NONEMPTY_MISSING", "L3_NONEMPTY_EXTRA", "L3_CELL_UNDECODABLE", "L3_SHARD_CORRUPT",
                 "L3_VERTEX_ROWS", "L3_FRAGMENT_INDEX_UNDECODABLE", "L3_FRAGMENT_INDEX_MISSING",
                 "L3_FRAGMENT_OUT_OF_RANGE",
                 "L3_NONFINITE_VERTEX", "L3_VERTEX_COUNT", "L3_ARRAYS_PRESENT", "L3_ATTRIBUTE_ROWS",
                 "L3_FRAGMENT_ATTRIBUTE_ROWS", "L3_OFFSETS_NOT_CANONICAL", "L3_HAS_PERM", "L3_LINK_CELL_BYTES",
                 "L3_LINK_ENCODING", "L3_PERM_IDX_RANGE", "L3_LINK_VI_OUT_OF_RANGE", "L3_LINK_ENDPOINT_CHUNK_MISSING",
                 "L3_LINK_FRAGMENTS_PRESENCE", "L3_LINK_FRAGMENTS_TILE", "L3_LINK_ATTRIBUTE_MIRROR",
                 "L3_LINK_ATTRIBUTE_ROWS", "L3_FAMILY_PHYSICAL_COUNT", "L3_FAMILY_NUM_LINKS"):
        ran[code] = 1
    if any(model.level_attrs(n).get("fragments_tile") is True for n in model.levels):
        ran["L3_FRAGMENTS_TILE"] = 1
    if manifests:
        for code in ("L3_MANIFEST_CHUNK_MISSING", "L3_MANIFEST_FRAGMENT_OUT_OF_RANGE", "L3_OBJECT_NUM_PRESENT"):
            ran[code] = 1
    try:
        orphan_attribute_families(model, static)
        graph = build(model, requested, manifests, static, ran)
        (found,) = runner.compute("validate", graph)
    except Exception as exc:  # noqa: BLE001
        return static + [crashed(3, "/", exc, what="consistency graph")], ran
    return static + found, ran
