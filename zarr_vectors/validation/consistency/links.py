"""Level 3 — links families: static checks of their segments and the link-cell tasks.

A link task reads a batch of link cells with their link_fragments and link-attribute
cells; it takes the vertex-row tables of the owning and the target level (a graph
dependency, not a second pass) and returns findings, row totals and, for duplicate
families only, one 64-bit hash per record.  The family reduce checks the counts.
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
from zarr_vectors.format import bounds
from zarr_vectors.format.links import links_has_perm
from zarr_vectors.format.paths import (
    format_chunk_key,
    format_delta,
    is_intra,
    parse_delta,
    parse_offsets,
)
from zarr_vectors.format.schema import whole_ratio
from zarr_vectors.store.backend import Storage
from zarr_vectors.validation.consistency.cells import (
    MAX_EXAMPLES,
    NO_BIN,
    ArraySpec,
    Chunk,
    Digest,
    array_spec,
    batch_target,
    batches,
    bin_keys,
    cell_rows,
    listed_cells,
    prefetch,
    row_hashes,
    vertex_rows,
)
from zarr_vectors.validation.consistency.crosslevel import (
    Centred,
    CentroidSpec,
    CentroidSums,
    centroid_checked,
    centroid_findings,
    centroid_sums,
    coarse_bins,
    mirror_rows,
)
from zarr_vectors.validation.consistency.polylines import bridge_rows, compare_bridges
from zarr_vectors.validation.consistency.vertices import VertexResult
from zarr_vectors.validation.findings import Finding, crashed, make
from zarr_vectors.validation.metadata import (
    attribute_layout,
    family_policy,
    level_chunk_shape,
    vertices_dtype,
)
from zarr_vectors.validation.structure import StoreModel


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
    bridges: bool = False  # a polyline level's delta-0 family: digest its records for L4_POLYLINE_BRIDGES
    mirror: bool = False  # a ±N family whose mirror exists: digest its records for L5_CROSS_LEVEL_MIRROR
    cover: bool = False  # a +N family whose coarse levels keep every object: L5_CROSS_LEVEL_COVERAGE
    # a +1 family with cover: the coarse level's bin shape (crosslevel.coarse_bins) and vertices, to
    # digest each record's fine end with the bin its metavertex lies in (L5_CROSS_LEVEL_BIN)
    bin_shape: tuple[float, ...] | None = None
    metavertices: ArraySpec | None = None
    # a +1 family whose records L5_CROSS_LEVEL_CENTROID compares with the metavertices they name
    # (crosslevel.centroid_checked): its tasks sum the vertices each metavertex stands for
    centroids: CentroidSpec | None = None
    seed: int = 0  # of the digests (cells.digest_seed), one per validation


@dataclass
class LinkResult:
    findings: list[Finding] = field(default_factory=list)
    rows: int = 0
    # duplicate families, one array per cell: each row's record hash (its endpoints in input
    # order), the hash of the cell it is stored in (the copy's leading chunk), and its number
    # K of distinct endpoint chunks: a record has one copy led by each of its K chunks
    hashes: list[np.ndarray] = field(default_factory=list)
    leads: list[np.ndarray] = field(default_factory=list)
    spans: list[np.ndarray] = field(default_factory=list)
    # a polyline level's delta-0 family: the digest of its records as bridges (polylines.bridge_rows)
    bridges: Digest = field(default_factory=Digest)
    # a ±N family with FamilySpec.mirror: the digest of its records (crosslevel.mirror_rows)
    mirror: Digest = field(default_factory=Digest)
    # a +N family with FamilySpec.cover: the digest of its records' fine ends as (cell tag, row) (cells.cell_rows),
    # with FamilySpec.bin_shape followed by the bin key of the metavertex each names (cells.bin_keys)
    cover: Digest = field(default_factory=Digest)
    # a +1 family with FamilySpec.centroids: its records' vertices summed per metavertex
    centroid: CentroidSums | None = None


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
        fetched = iter(prefetch(storage, wanted, res.findings))
    except Exception as exc:  # noqa: BLE001
        res.findings.append(crashed(3, fam.path, exc, what="link cell reads"))
        return res
    bridges: list[np.ndarray] = []  # rows digested once for the batch: ~0.1 ms a call, whatever its rows
    mirrored: list[np.ndarray] = []
    covered: list[np.ndarray] = []
    targets: list[tuple[Chunk, np.ndarray]] = []  # with fam.bin_shape: each covered part's (coarse chunk, rows)
    centred: list[Centred] = []  # with fam.centroids: (coarse chunk, rows, fine chunk, rows) per link cell
    for segment, chunks in units:
        seg = fam.segments[segment]
        payloads, lf_cells = next(fetched), next(fetched)
        attr_cells = [(a, next(fetched)) for a in seg.attributes]
        try:
            _link_cells(fam, seg, chunks, payloads, lf_cells, attr_cells, src_rows.rows,
                        trg_rows.rows if trg_rows else None, res, bridges, mirrored, covered, targets, centred)
        except Exception as exc:  # noqa: BLE001
            res.findings.append(crashed(3, seg.links.path, exc, cell=format_chunk_key(chunks[0]) if chunks else None,
                                        what="link cells"))
    if bridges:
        res.bridges = Digest.of(np.concatenate(bridges), fam.seed)
    if mirrored:
        res.mirror = Digest.of(mirror_rows(np.concatenate(mirrored), fam.delta), fam.seed)
    if covered:
        ends = np.concatenate(covered)
        if fam.bin_shape is not None:  # (tag, row, bin key), as columns: no stacked copy
            res.cover = Digest.of([ends[:, 0], ends[:, 1], _metavertex_bins(storage, fam, targets)], fam.seed)
        else:
            res.cover = Digest.of(ends, fam.seed)
    if fam.centroids is not None and trg_rows is not None:
        try:
            res.centroid = centroid_sums(storage, fam.centroids, centred, trg_rows.rows)
        except Exception as exc:  # noqa: BLE001
            res.findings.append(crashed(5, fam.path, exc, what="L5_CROSS_LEVEL_CENTROID"))
    return res


def compare_centroids(storage: Storage, fam: FamilySpec, table: VertexResult, *parts: LinkResult) -> list[Finding]:
    """``L5_CROSS_LEVEL_CENTROID`` for ``fam`` from its link tasks and the coarse level's vertex table;
    a link task that could not sum leaves the comparison out (its crash is the finding)."""
    assert fam.centroids is not None
    if any(p.centroid is None for p in parts):
        return []
    try:
        return centroid_findings(storage, fam.path, fam.centroids, table, *(p.centroid for p in parts))
    except Exception as exc:  # noqa: BLE001
        return [crashed(5, fam.path, exc, what="L5_CROSS_LEVEL_CENTROID")]


def _metavertex_bins(storage: Storage, fam: FamilySpec, targets: list[tuple[Chunk, np.ndarray]]) -> np.ndarray:
    """The bin key (``cells.bin_keys``) of the metavertex each ``(coarse chunk, rows)`` names, in
    order; ``NO_BIN`` where it is not there (level 3 names the record, or the cell, the coarse
    level's vertex tasks).  A read that fails leaves every bin ``NO_BIN``: the digests then differ, and the
    comparison reads again and says why."""
    assert fam.bin_shape is not None
    ndim = len(fam.bin_shape)
    out = [np.full(len(rows), NO_BIN, dtype=np.int64) for _, rows in targets]
    dtype = vertices_dtype(fam.metavertices.attrs) if fam.metavertices is not None else None
    if dtype is None:
        return np.concatenate(out) if out else np.zeros(0, np.int64)
    try:
        payloads = prefetch(storage, [(fam.metavertices, sorted({c for c, _ in targets}))], [])[0]
    except Exception:  # noqa: BLE001 - NO_BIN: the digests differ and the comparison reads again
        payloads = {}
    keys: dict[Chunk, np.ndarray | None] = {}  # each metavertex's, per coarse cell
    for part, (c, rows) in zip(out, targets):
        if c not in keys:
            cell = vertex_rows(payloads.get(c), dtype, ndim)
            keys[c] = bin_keys(cell, fam.bin_shape, fam.seed) if cell is not None else None
        cell_keys = keys[c]
        if cell_keys is not None:
            good = (rows >= 0) & (rows < len(cell_keys))
            part[good] = cell_keys[rows[good]]
    return np.concatenate(out)


def _link_cells(fam: FamilySpec, seg: SegmentSpec, chunks: list[Chunk], payloads: dict[Chunk, bytes],
                lf_cells: dict[Chunk, bytes], attr_cells: list[tuple[ArraySpec, dict[Chunk, bytes]]],
                src_rows: dict[Chunk, int], trg_rows: dict[Chunk, int] | None, res: LinkResult,
                bridges: list[np.ndarray], mirrored: list[np.ndarray], covered: list[np.ndarray],
                targets: list[tuple[Chunk, np.ndarray]], centred: list[Centred]) -> None:
    out = res.findings
    path = seg.links.path
    dtype = np.dtype(seg.dtype).newbyteorder("<")
    width = fam.width + int(seg.has_perm)
    factorial = math.factorial(fam.width)
    for c in chunks:
        payload = payloads.get(c)
        key = format_chunk_key(c)
        rows = _decode_link_cell(payload, width, dtype, seg.flat, path, key, out) if payload is not None else None
        if rows is None:  # absent or undecodable: level 3's; which metavertices its records name is unknown
            if fam.centroids is not None:
                centred.append((_target_cell(fam, seg.segment, c), None, c, None))
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
                                f"{format_chunk_key(ck)}, which has no vertices at level {level}", cell=key))
                continue
            col = vi[:, k]
            bad = (col < 0) | (col >= table[ck])
            if bad.any():
                out.append(make("L3_LINK_VI_OUT_OF_RANGE", path, f"{int(bad.sum())} records have vi_{k} outside "
                                f"[0, {table[ck]}) of chunk {format_chunk_key(ck)} at level {level} (first "
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
            res.hashes.append(row_hashes(_input_rows(vi, perm, endpoint_chunks, fam.width)))
            res.leads.append(np.full(n, row_hashes(np.asarray([c]))[0], dtype=np.uint64))
            res.spans.append(np.full(n, len(set(endpoint_chunks)) if fam.delta == 0 else 1, dtype=np.int64))
        if fam.bridges and fam.width == 2 and n:  # another width never matches: the comparison says so
            # an undirected bridge is compared as an unordered pair: its input order is not needed
            rows = bridge_rows(_input_rows(vi, perm if fam.directed else None, endpoint_chunks, fam.width),
                               fam.directed)
            if fam.store == "duplicate":  # each record once: the copy its first endpoint's chunk holds
                rows = rows[(rows[:, : len(c)] == np.asarray(c)).all(axis=1)]
            bridges.append(rows)
        if fam.mirror and fam.width == 2 and n:  # as bridges: another width never matches
            mirrored.append(_input_rows(vi, None, endpoint_chunks, fam.width))  # cross-level: never permuted
        if fam.cover and fam.width == 2 and n:  # a +N record's first end is the fine vertex, in this cell
            covered.append(cell_rows(c, vi[:, 0], fam.seed))
            if fam.bin_shape is not None:
                targets.append((endpoint_chunks[1], vi[:, 1]))
        if fam.centroids is not None and fam.width == 2 and n:  # a +1 record: [fine vi here, coarse vi]
            centred.append((endpoint_chunks[1], vi[:, 1], c, vi[:, 0]))


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


def _input_rows(vi: np.ndarray, perm: np.ndarray | None, chunks: list[Chunk], width: int) -> np.ndarray:
    """Each record's endpoints in INPUT order, ``(chunk_0, vi_0, chunk_1, vi_1, ...)`` a row (so
    every physical copy of a record reads alike)."""
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
    return inp.reshape(n, -1)


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
                copies = _duplicate_copies(parts)
                distinct, logical = len(copies.spans), int((copies.rows // copies.spans).sum())
                wrong = np.flatnonzero(~copies.complete)
                if wrong.size:
                    r = int(wrong[0])
                    out.append(make("L3_FAMILY_NUM_LINKS", fam.path, f"{wrong.size} records are not stored once per "
                                    f"distinct endpoint chunk: one spans {copies.spans[r]} chunks and has "
                                    f"{copies.rows[r]} copies led by {copies.leads[r]} of them"))
                elif num not in (distinct, logical):
                    out.append(make("L3_FAMILY_NUM_LINKS", fam.path, f"num_links is {num} but the duplicate family's "
                                    f"{rows} physical rows decode to {distinct} distinct records ({logical} input "
                                    "records counting repeated ones)"))
    except Exception as exc:  # noqa: BLE001
        out.append(crashed(3, fam.path, exc, what="family counts"))
    return out


@dataclass(frozen=True)
class DuplicateCopies:
    """Per distinct record of a duplicate family: its rows, the distinct cells leading them and
    its span K; complete where the copies are led by K cells, as many by each (a record given
    m times in the input is stored m times in each of its K chunks)."""

    rows: np.ndarray
    leads: np.ndarray
    spans: np.ndarray
    complete: np.ndarray


def _duplicate_copies(parts: Sequence[LinkResult]) -> DuplicateCopies:
    """Group every copy of a duplicate family by record hash, then by leading cell (one sort)."""
    if not any(p.hashes for p in parts):
        empty = np.zeros(0, dtype=np.int64)
        return DuplicateCopies(empty, empty, empty, np.zeros(0, dtype=bool))
    h, lead, span = (np.concatenate([a for p in parts for a in getattr(p, n)]) for n in ("hashes", "leads", "spans"))
    order = np.lexsort((lead, h))
    h, lead, span = h[order], lead[order], span[order]
    new_record = np.r_[True, h[1:] != h[:-1]]
    new_pair = new_record | np.r_[True, lead[1:] != lead[:-1]]
    record = np.cumsum(new_record) - 1
    rows = np.bincount(record)
    leads = np.bincount(record[new_pair])
    pair_starts = np.flatnonzero(new_pair)
    pair_rows = np.diff(np.r_[pair_starts, len(h)])
    most = np.zeros(len(rows), dtype=np.int64)
    np.maximum.at(most, record[pair_starts], pair_rows)
    spans = span[new_record]
    starts = np.flatnonzero(new_record)
    same_span = np.minimum.reduceat(span, starts) == np.maximum.reduceat(span, starts)
    complete = same_span & (leads == spans) & (rows % spans == 0) & (most * spans == rows)
    return DuplicateCopies(rows, leads, spans, complete)


def _ratio(model: StoreModel, number: int, rank: int) -> tuple[int, ...] | None:
    if number not in model.levels:
        return None
    root = model.zv["chunk_shape"]
    level = level_chunk_shape(model, number)
    q = [a / b for a, b in zip(level, root)]
    if not all(math.isfinite(v) for v in q):
        return None  # no usable multiple: level 5 reports it (L5_CHUNK_SHAPE_MULTIPLE)
    r = [round(v) for v in q]
    return tuple([1] * (rank - len(r)) + r)


def _whole_multiple(model: StoreModel, number: int) -> bool:
    """Whether a level's chunk_shape is a whole multiple of the root's on every axis (a reader
    resolves its cross-level records only then)."""
    root = model.zv["chunk_shape"]
    return all(whole_ratio(a, b) is not None for a, b in zip(level_chunk_shape(model, number), root))


def _set_limits(seg: SegmentSpec, width: int, records: int | None) -> None:
    """Decode bounds of a segment's link and attribute cells (format/bounds.py): no cell holds more
    rows than its family stores.  An unusable dtype leaves the ceiling; its own rule reports it."""
    try:
        row_bytes: int | None = np.dtype(seg.dtype).itemsize * (width + int(seg.has_perm))
    except (TypeError, ValueError):
        row_bytes = None
    seg.links.limit = None if row_bytes is None else bounds.link_cell_bound(records, row_bytes, flat=seg.flat)
    for a in seg.attributes:
        layout = attribute_layout(a.attrs)
        a.limit = bounds.rows_bound(records, layout[0].itemsize * layout[1] if layout is not None else None)


def link_graph(model: StoreModel, number: int, tables: dict[int, Any], static: list[Finding],
               limits: tuple[int, int], implied_bridges: dict[int, list[Any]],
               mirrors: dict[tuple[int, int], list[Any]] | None = None, seed: int = 0,
               covers: dict[tuple[int, int], list[Any] | None] | None = None,
               centroids: list[int] | None = None) -> list[Any]:
    """Static checks of a level's links families into ``static``; one reduce per family (delayed).
    A level in ``implied_bridges`` (its tasks digesting the bridges its manifests imply) is taken out
    of it when its delta-0 family's tasks digest the stored records, and one more reduce compares them.
    With ``mirrors``, a ±N family whose mirror family exists digests its records too, and its link
    tasks go into ``mirrors[(level, delta)]`` (compared by :func:`crosslevel.mirror_findings`).  A family
    whose ``(level, delta)`` is a key of ``covers`` digests its records' fine ends, and its tasks become
    that key's value (:func:`crosslevel.coverage_findings`); where its records are compared with the
    metavertices they name (``L5_CROSS_LEVEL_CENTROID``), its level goes into ``centroids``."""
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
        records = bounds.family_records(fam_node.attrs)
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
            _set_limits(segments[arr.name], width, records)
        if delta == 0 and lf is not None:
            lf.limit = bounds.fragment_index_bound(records)
        target = number + delta
        r_src = _ratio(model, number, rank) or (1,) * rank
        r_trg = _ratio(model, target, rank) or (1,) * rank
        implied = implied_bridges.pop(number, None) if delta == 0 else None
        mirrored = (mirrors is not None and delta != 0 and target in model.levels
                    and _whole_multiple(model, number) and _whole_multiple(model, target)  # else L5_CHUNK_SHAPE_MULTIPLE
                    and family_policy(model, target, -delta) is not None)
        fam = FamilySpec(number, fam_node.path, delta, width, directed, store, target in model.levels, r_src, r_trg,
                         lf if delta == 0 else None, segments, bridges=implied is not None, mirror=mirrored, seed=seed,
                         cover=covers is not None and (number, delta) in covers)
        if fam.cover and (bins := coarse_bins(model, number, delta)) is not None:
            fam.bin_shape, fam.metavertices = bins, array_spec(model, f"{model.levels[number + 1]}/vertices")
        _mirror(model, number, delta, fam, static)
        units = sorted(((s.segment, c), size) for s in segments.values() for c, (_, size) in s.links.cells.items())
        target_bytes = batch_target(sum(n for _, n in units), limits)
        if (centroids is not None and covers is not None and delta == 1 and centroid_checked(model, number, covers)
                and _whole_multiple(model, number) and _whole_multiple(model, target)):  # else L5_CHUNK_SHAPE_MULTIPLE
            plan = _centroid_plan(model, fam, units, limits[1])
            if plan is not None:
                fam.centroids, units = plan
                centroids.append(number)
        tasks = []
        fam_d = dask.delayed(fam, traverse=False)
        storage_d = dask.delayed(model.storage, traverse=False)
        for batch in batches(units, target_bytes):
            grouped: dict[str, list[Chunk]] = defaultdict(list)
            for seg, c in batch:
                grouped[seg].append(c)
            trg_table = tables.get(target) if delta != 0 else None
            cells_d = dask.delayed(sorted(grouped.items()), traverse=False)  # plain data: nothing for dask to walk
            tasks.append(dask.delayed(link_batch, pure=False)(storage_d, fam_d, cells_d, tables[number], trg_table))
        out.append(dask.delayed(reduce_family, pure=False)(fam_d, pol, *tasks))
        if fam.centroids is not None:
            out.append(dask.delayed(compare_centroids, pure=False)(storage_d, fam_d, tables[target], *tasks))
        if mirrors is not None and mirrored:
            mirrors[(number, delta)] = tasks
        if covers is not None and fam.cover:
            covers[(number, delta)] = tasks
        if implied is not None:
            out.append(dask.delayed(compare_bridges, pure=False)(
                storage_d, number, tuple(model.allow_layouts), len(implied), *implied, *tasks))
    # link_fragments: a cell for every cell of the delta-0 all-zero array and for no other cell
    if lf is not None:
        have = set(lf.cells)
        want = intra_cells or set()
        for c in sorted(want - have)[:MAX_EXAMPLES]:
            static.append(make("L3_LINK_FRAGMENTS_PRESENCE", lf.path, "the intra-chunk links cell has no link_fragments "
                               "cell", cell=format_chunk_key(c)))
        for c in sorted(have - want)[:MAX_EXAMPLES]:
            static.append(make("L3_LINK_FRAGMENTS_PRESENCE", lf.path, "link_fragments cell without an intra-chunk "
                               "links cell at the same chunk", cell=format_chunk_key(c)))
    return out


Unit = tuple[tuple[str, Chunk], int]  # a link cell to read: (segment, chunk), and its stored size


def _centroid_plan(model: StoreModel, fam: FamilySpec, units: list[Unit],
                   max_bytes: int) -> tuple[CentroidSpec, list[Unit]] | None:
    """``L5_CROSS_LEVEL_CENTROID`` planned for ``fam`` (a ``links/+1``): its spec, and the units with
    the link cells the presence lists name but storage lacks (level 3's finding: the task given
    one knows that the records naming the metavertices of the coarse cell it points into are not
    all there, and leaves that cell out)."""
    fine = array_spec(model, f"{model.levels[fam.number]}/vertices")
    coarse = array_spec(model, f"{model.levels[fam.number + 1]}/vertices")
    ndim = model.sid_ndim
    if fine is None or coarse is None or not ndim:
        return None
    missing: list[Unit] = []
    for seg in fam.segments.values():
        listed = seg.links.attrs.get("nonempty_chunks")
        if isinstance(listed, list):
            gone = listed_cells(listed, len(seg.links.doc.get("shape", []))) - set(seg.links.cells)
            missing += [((seg.segment, c), 0) for c in sorted(gone)]
    bins = fam.bin_shape  # a covered +1 family: coarse_bins, set with it (None: a bad bin, level 2's)
    spec = CentroidSpec(fam.number + 1, fine, coarse, ndim, max(bins) if bins else 0.0, max_bytes)
    return spec, sorted(units + missing)


def _target_cell(fam: FamilySpec, segment: str, c: Chunk) -> Chunk:
    """The coarse cell every record of a cross-level link cell points into (its segment's offset)."""
    return _endpoint_chunks(c, fam.segments[segment].offsets, fam)[1]


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
                out.append(make("L3_LINK_ATTRIBUTE_MIRROR", a.path, "the links cell has no attribute cell", cell=format_chunk_key(c)))
            for c in sorted(set(a.cells) - links_cells)[:MAX_EXAMPLES]:
                out.append(make("L3_LINK_ATTRIBUTE_MIRROR", a.path, "attribute cell without a links cell", cell=format_chunk_key(c)))
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
