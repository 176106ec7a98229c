"""The links API of the Links page: families, placement, cell I/O, attributes, reconcile.

Connectivity of a level lives in one family per level delta::

    links/<delta>/                              group: family-wide policy
    links/<delta>/<offsets>/                    grid array, cell = source chunk
    link_fragments                              grid array, sidecar of the intra array (delta 0)
    link_attributes/<name>/<delta>/             group
    link_attributes/<name>/<delta>/<offsets>/   grid array mirroring the link array cell for cell

Where a record goes is decided in one place, :func:`partition_records_by_offset`
(which wraps the vectorised rules of :mod:`zarr_vectors.format.links`); whether an
array carries a ``perm_idx`` column in one place, :func:`links_has_perm`; and the order
in which records (and attribute rows) come back in one place, the family enumeration
shared by :func:`read_links`, :func:`read_link_attributes` and
:func:`write_link_attributes`: segments sorted as ASCII strings, cells sorted as signed
integer tuples (DECISIONS.md D8), then write order.

Two ways to write:

* :func:`write_links` / :func:`write_link_attributes` -- single process: they create
  what is missing, write the cells and keep ``nonempty_chunks`` and the counts right.
* the decentralised path used by Dask owner tasks -- a coordinator calls
  :func:`create_links_family`, :func:`create_links_arrays` and
  :func:`create_link_attribute_arrays` (metadata only); each owner of a disjoint set of
  whole cells calls :func:`write_link_cells` / :func:`write_link_attribute_cells`
  (``record_presence=False``: no array-wide state is touched); one reconcile task calls
  :func:`finalize_links`.  The two paths produce byte-identical stores.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from zarr_vectors.encoding import (
    FragmentIndex,
    decode_ragged_blob,
    decode_ragged_ints,
    encode_ragged_blob,
    encode_ragged_ints,
    lehmer_decode_rows,
)
from zarr_vectors.errors import ArrayError, EncodingError, InputError, MetadataError
from zarr_vectors.format.links import (
    STORE_POLICIES,
    anchor_chunks,
    copies_per_record,
    enumeration_order,
    intra_mask,
    place_records,
    segment_names,
)
from zarr_vectors.format.paths import (
    format_chunk_key,
    format_delta,
    format_offsets,
    intra_offsets,
    is_intra,
    link_attributes_group_path,
    links_group_path,
    parse_delta,
    parse_offsets,
)
from zarr_vectors.store.codecs import ZSTD_DEFAULT, compressor_config
from zarr_vectors.store.grid import GridArray, read_cells_many, write_cells_many
from zarr_vectors.store.groups import Level
from zarr_vectors.store.nodes import group_document, read_node, write_node

__all__ = [
    "LinkCell",
    "LinkCounts",
    "LinkPartition",
    "LinkPolicy",
    "LinkRecords",
    "LinkWriteSummary",
    "create_link_attribute_arrays",
    "create_links_arrays",
    "create_links_family",
    "derive_nonempty_chunks",
    "finalize_links",
    "link_anchor_ratios",
    "link_family_policy",
    "links_has_perm",
    "list_link_attribute_names",
    "list_link_deltas",
    "list_link_offsets",
    "partition_records_by_offset",
    "read_chunk_links",
    "read_link_attributes",
    "read_links",
    "read_links_for_tuple",
    "write_chunk_links",
    "write_link_attribute_cells",
    "write_link_attributes",
    "write_link_cells",
    "write_links",
]

Chunk = tuple[int, ...]
OffsetsT = tuple[tuple[int, ...], ...]
StorePolicy = Literal["canonical", "duplicate"]
CompressorArg = dict[str, Any] | str | None

LINK_FRAGMENTS = "link_fragments"
LINK_ATTRIBUTES = "link_attributes"
LINKS = "links"
VERTICES = "vertices"
_LINK_DTYPES = ("int64", "int32")
_ATTRIBUTE_KINDS = "biuf"


# ---------------------------------------------------------------------------------------
# policy
# ---------------------------------------------------------------------------------------
def links_has_perm(offsets: Sequence[Sequence[int]], *, delta: int, directed: bool, store: str) -> bool:
    """Whether an offsets array carries the ``perm_idx`` column (the single definition).

    True exactly when the record is not intra-chunk, ``delta == 0``, and the family
    either duplicates records or is undirected: those are the only placements that can
    reorder endpoints, so the only ones whose input order needs recovering.
    """
    if is_intra(offsets):
        return False
    if delta != 0:
        return False
    if store == "duplicate":
        return True
    return not directed


@dataclass(frozen=True)
class LinkPolicy:
    """The family-wide policy stamped on ``links/<delta>/``."""

    delta: int
    link_width: int
    directed: bool
    store: str
    sid_ndim: int

    def has_perm(self, offsets: Sequence[Sequence[int]]) -> bool:
        return links_has_perm(offsets, delta=self.delta, directed=self.directed, store=self.store)

    def is_flat(self, offsets: Sequence[Sequence[int]]) -> bool:
        """The cell encoding condition: flat rows + sidecar iff delta 0 and intra."""
        return self.delta == 0 and is_intra(offsets)

    def group_attributes(self) -> dict[str, Any]:
        return {
            "zv_array": "links_family",
            "level_delta": self.delta,
            "link_width": self.link_width,
            "directed": self.directed,
            "store": self.store,
            "sid_ndim": self.sid_ndim,
        }

    def differences(self, other: LinkPolicy) -> list[str]:
        return [
            f"{k}: {getattr(self, k)!r} -> {getattr(other, k)!r}"
            for k in ("link_width", "directed", "store", "sid_ndim")
            if getattr(self, k) != getattr(other, k)
        ]


def _check_policy_args(link_width: int, directed: bool, store: str, sid_ndim: int) -> None:
    if not isinstance(directed, (bool, np.bool_)):
        raise InputError(f"directed must be a bool, got {directed!r}")
    if store not in STORE_POLICIES:
        raise InputError(f"store must be one of {list(STORE_POLICIES)}, got {store!r}")
    for name, value in (("link_width", link_width), ("sid_ndim", sid_ndim)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value!r}")


def _make_policy(delta: int, link_width: int, directed: bool, store: str, sid_ndim: int) -> LinkPolicy:
    _check_policy_args(link_width, directed, store, sid_ndim)
    format_delta(delta)  # refuses a non-integer delta
    return LinkPolicy(int(delta), int(link_width), bool(directed), str(store), int(sid_ndim))


# ---------------------------------------------------------------------------------------
# result types
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class LinkRecords:
    """Link records with endpoints in input order.

    ``chunks[i, k]`` is the absolute chunk of endpoint ``k`` of record ``i`` (for
    ``delta != 0`` endpoints ``1..L-1`` are chunks of the target level) and ``vi[i, k]``
    its row in that chunk's ``vertices`` cell.
    """

    chunks: np.ndarray  # (n, L, D) int64
    vi: np.ndarray  # (n, L) int64

    def __len__(self) -> int:
        return int(self.vi.shape[0])

    def as_tuples(self) -> list[tuple[tuple[Chunk, int], ...]]:
        """``[((chunk, vi), ...), ...]`` -- convenient for small comparisons."""
        return [
            tuple((tuple(c), v) for c, v in zip(cs, vs))
            for cs, vs in zip(self.chunks.tolist(), self.vi.tolist())
        ]

    @staticmethod
    def empty(link_width: int = 0, sid_ndim: int = 0) -> LinkRecords:
        return LinkRecords(np.zeros((0, link_width, sid_ndim), np.int64), np.zeros((0, link_width), np.int64))

    @staticmethod
    def concat(parts: Sequence[LinkRecords], link_width: int, sid_ndim: int) -> LinkRecords:
        if not parts:
            return LinkRecords.empty(link_width, sid_ndim)
        return LinkRecords(np.concatenate([p.chunks for p in parts]), np.concatenate([p.vi for p in parts]))


@dataclass(frozen=True)
class LinkCounts:
    """A family's logical (``num_links``) and on-disk (``num_physical_records``) counts."""

    num_links: int
    num_physical_records: int


@dataclass(frozen=True)
class LinkWriteSummary:
    """What one :func:`write_link_cells` call wrote: dotted cell keys per segment, and rows."""

    cells: dict[str, list[str]]
    num_physical_records: int


@dataclass(frozen=True, eq=False)
class LinkCell:
    """One cell of one offsets array as stored, and its records decoded."""

    segment: str
    offsets: OffsetsT
    cell: Chunk
    has_perm: bool
    groups: list[np.ndarray]  # stored rows of each write group, (m_k, L or 1 + L)
    records: LinkRecords


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
        used = np.unique(self.segment[sel])
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


# ---------------------------------------------------------------------------------------
# input normalisation
# ---------------------------------------------------------------------------------------
def _as_int_array(values: ArrayLike, what: str) -> np.ndarray:
    try:
        arr = np.asarray(values)
    except ValueError as exc:  # ragged nesting
        raise ArrayError(f"{what}: endpoint chunk coordinates have differing arity ({exc})") from None
    if arr.dtype == object:
        raise ArrayError(f"{what}: endpoint chunk coordinates have differing arity")
    if arr.size and arr.dtype.kind not in "iu":
        raise InputError(f"{what} must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise InputError(f"{what} has values beyond int64")
    return arr.astype(np.int64, copy=False)


def _as_records(chunks: ArrayLike, vi: ArrayLike, *, sid_ndim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``chunks (n, L, D)`` and ``vi (n, L)`` as int64, or an error naming the problem."""
    c = _as_int_array(chunks, "chunks")
    v = _as_int_array(vi, "vi")
    if c.ndim != 3:
        raise ArrayError(
            f"chunks must have shape (n, link_width, sid_ndim), got {c.shape}: every endpoint needs a "
            "chunk coordinate tuple of the same arity"
        )
    if c.shape[1] < 1 or c.shape[2] < 1:
        raise InputError(f"chunks shape {c.shape}: link_width and sid_ndim must be >= 1")
    if v.shape != c.shape[:2]:
        raise InputError(f"vi must have shape {c.shape[:2]} (n, link_width), got {v.shape}")
    if sid_ndim is not None and c.shape[2] != sid_ndim:
        raise ArrayError(
            f"endpoint chunk coordinates have {c.shape[2]} components but the family/level uses "
            f"sid_ndim {sid_ndim}; source and target levels share one chunk-key arity"
        )
    if v.size and int(v.min()) < 0:
        i = int(np.argmin(v.min(axis=1)))
        raise InputError(f"vi of record {i} is negative ({v[i].tolist()}): vertex indices are chunk-local rows")
    return np.ascontiguousarray(c), np.ascontiguousarray(v)


def _check_endpoint_deltas(endpoint_deltas: ArrayLike | None, shape: tuple[int, int], delta: int) -> None:
    """Refuse mixed-resolution records: endpoints 1..L-1 must all sit at owning + delta."""
    if endpoint_deltas is None:
        return
    d = _as_int_array(endpoint_deltas, "endpoint_deltas")
    if d.shape != shape:
        raise InputError(f"endpoint_deltas must have shape {shape}, got {d.shape}")
    expected = np.full(shape, delta, dtype=np.int64)
    expected[:, 0] = 0
    bad = (d != expected).any(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ArrayError(
            f"record {i} mixes resolution levels (endpoint level deltas {d[i].tolist()}): links/"
            f"{format_delta(delta)} needs endpoint 0 at the owning level (0) and endpoints 1..L-1 all at "
            f"level delta {delta}; a mixed-resolution record cannot be expressed (Links page, "
            "'Mixed-resolution records - current limitation')"
        )


def _offsets_tuple(offsets: str | Sequence[Sequence[int]], policy: LinkPolicy) -> OffsetsT:
    """Offsets given as a segment or parsed, checked against the family's arity."""
    if isinstance(offsets, str):
        try:
            return parse_offsets(offsets, link_width=policy.link_width, sid_ndim=policy.sid_ndim)
        except ValueError as exc:
            raise ArrayError(str(exc)) from None
    parsed = tuple(tuple(int(c) for c in o) for o in offsets)
    if len(parsed) != policy.link_width - 1 or any(len(o) != policy.sid_ndim for o in parsed):
        raise ArrayError(
            f"offsets {parsed!r} do not match the family (link_width {policy.link_width} needs "
            f"{policy.link_width - 1} offsets of {policy.sid_ndim} components)"
        )
    return parsed


def _chunk_tuple(chunk: Sequence[int], sid_ndim: int) -> Chunk:
    c = tuple(int(v) for v in chunk)
    if len(c) != sid_ndim:
        raise ArrayError(f"chunk {c} has {len(c)} coordinates, the family uses sid_ndim {sid_ndim}")
    return c


# ---------------------------------------------------------------------------------------
# cross-level anchor ratios
# ---------------------------------------------------------------------------------------
def _level_ratio(level: Level, number: int, sid_ndim: int) -> tuple[int, ...]:
    root_cs = level.store.root.chunk_shape
    if number == level.number:
        target = level
    else:
        if number < 0 or number not in level.store.level_numbers():
            raise ArrayError(
                f"level {level.number}: links/{format_delta(number - level.number)} targets level {number}, "
                "which does not exist; its chunk_shape is needed for the cross-level anchor (create the "
                "level first, or pass anchor_ratios explicitly)"
            )
        target = level.store.level(number)
    cs = target.chunk_shape
    ratios = []
    for c, r in zip(cs, root_cs):
        q = c / r
        if q < 1 or abs(q - round(q)) > 1e-9:
            raise ArrayError(
                f"level {number} chunk_shape {list(cs)} is not an integer multiple of the root chunk_shape "
                f"{list(root_cs)}"
            )
        ratios.append(int(round(q)))
    extra = sid_ndim - len(ratios)
    if extra not in (0, 1):
        raise ArrayError(
            f"sid_ndim {sid_ndim} does not fit the store's {len(ratios)} spatial axes (it may exceed them "
            "by one leading attribute-chunk axis)"
        )
    return (1,) * extra + tuple(ratios)


def link_anchor_ratios(level: Level, delta: int, sid_ndim: int | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(r_src, r_trg)``: the owning and target levels' chunk_shape over the root's, per axis.

    The cross-level anchor is ``floor(c_src * r_src / r_trg)``.  A leading
    attribute-chunk axis (``sid_ndim`` one more than the spatial rank) has ratio 1.
    """
    d = sid_ndim if sid_ndim is not None else len(level.store.root.chunk_shape)
    return _level_ratio(level, level.number, d), _level_ratio(level, level.number + delta, d)


def _ratios_arg(
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None, sid_ndim: int
) -> tuple[np.ndarray, np.ndarray]:
    if anchor_ratios is None or len(anchor_ratios) != 2:
        raise InputError("anchor_ratios must be (r_src, r_trg) for delta != 0")
    r_src, r_trg = (np.asarray(r, dtype=np.int64).reshape(-1) for r in anchor_ratios)
    if r_src.size != sid_ndim or r_trg.size != sid_ndim:
        raise ArrayError(f"anchor ratios {anchor_ratios!r} must have sid_ndim={sid_ndim} entries each")
    if (r_src < 1).any() or (r_trg < 1).any():
        raise InputError(f"anchor ratios must be positive integers, got {anchor_ratios!r}")
    return r_src, r_trg


# ---------------------------------------------------------------------------------------
# placement
# ---------------------------------------------------------------------------------------
def partition_records_by_offset(
    chunks: ArrayLike,
    vi: ArrayLike,
    *,
    delta: int = 0,
    directed: bool = False,
    store: StorePolicy = "canonical",
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None,
) -> LinkPartition:
    """Decide where every record goes (FORMAT.md §7.2, §7.4); the only place this is decided.

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
    c, v = _as_records(chunks, vi)
    n, width, ndim = c.shape
    policy = _make_policy(delta, width, directed, store, ndim)
    r_src = r_trg = None
    if policy.delta != 0:
        r_src, r_trg = _ratios_arg(anchor_ratios, ndim)
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
    # policy (FORMAT.md §7.2 rule 1), and their all-zero segment sorts after every other
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


# ---------------------------------------------------------------------------------------
# family metadata
# ---------------------------------------------------------------------------------------
def _family_path(level: Level, delta: int) -> str:
    return level.node_path(links_group_path(delta))


def _array_rel(delta: int, segment: str) -> str:
    return f"{links_group_path(delta)}/{segment}"


def _attr_array_rel(name: str, delta: int, segment: str) -> str:
    return f"{link_attributes_group_path(name, delta)}/{segment}"


def _ensure_plain_group(level: Level, rel: str) -> None:
    if read_node(level.storage, level.node_path(rel)) is None:
        write_node(level.storage, level.node_path(rel), group_document({}))


def _family_document(level: Level, delta: int) -> dict[str, Any] | None:
    doc = read_node(level.storage, _family_path(level, delta))
    if doc is None or doc.get("node_type") != "group":
        return None
    return doc


def link_family_policy(level: Level, delta: int) -> LinkPolicy | None:
    """The policy stamped on ``links/<delta>/``, or None when the family is absent or unstamped.

    An old family without ``sid_ndim`` takes it from the level's ``vertices`` array.
    """
    doc = _family_document(level, delta)
    if doc is None:
        return None
    attrs = doc.get("attributes") or {}
    file = posixpath.join(_family_path(level, delta), "zarr.json")
    if any(k not in attrs for k in ("link_width", "directed", "store")):
        return None
    sid_ndim = attrs.get("sid_ndim")
    if sid_ndim is None:
        if not level.has(VERTICES):
            return None
        sid_ndim = level.array(VERTICES).ndim
    if "level_delta" in attrs and attrs["level_delta"] != delta:
        raise MetadataError(
            f"family level_delta {attrs['level_delta']!r} disagrees with its path segment "
            f"{format_delta(delta)!r}",
            file=file,
            pointer="/attributes/level_delta",
        )
    try:
        return _make_policy(delta, attrs["link_width"], attrs["directed"], attrs["store"], sid_ndim)
    except InputError as exc:
        raise MetadataError(f"bad links family policy: {exc}", file=file, pointer="/attributes") from None


def _require_policy(level: Level, delta: int) -> LinkPolicy:
    policy = link_family_policy(level, delta)
    if policy is None:
        raise ArrayError(
            f"level {level.number}: links/{format_delta(delta)} has no family policy; create it with "
            "create_links_family (or write_links) first"
        )
    return policy


def _link_array_segments(level: Level, delta: int) -> list[str]:
    """Names of the array children of ``links/<delta>``, ASCII-sorted, unvalidated."""
    rel = links_group_path(delta)
    out = []
    for name in level.children(rel):
        doc = read_node(level.storage, level.node_path(f"{rel}/{name}"))
        if doc is not None and doc.get("node_type") == "array":
            out.append(name)
    return sorted(out)


def create_links_family(
    level: Level,
    delta: int,
    *,
    link_width: int,
    directed: bool = False,
    store: StorePolicy = "canonical",
    sid_ndim: int,
) -> LinkPolicy:
    """Stamp the policy on ``links/<delta>/`` without materialising any offsets array.

    Idempotent when the family already carries this policy (its counts are kept).
    Re-stamping a different ``link_width``, ``directed``, ``store`` or ``sid_ndim``
    raises :class:`ArrayError` while offset arrays exist under the family: they keep
    decoding against the stamped policy, so flipping it would silently corrupt them.
    """
    policy = _make_policy(delta, link_width, directed, store, sid_ndim)
    existing = link_family_policy(level, delta)
    if existing == policy:
        return policy
    if existing is not None:
        siblings = _link_array_segments(level, delta)
        if siblings:
            raise ArrayError(
                f"level {level.number}: links/{format_delta(delta)} already holds offset arrays "
                f"{siblings} written under a different policy ({'; '.join(existing.differences(policy))}); "
                "they would decode wrongly under the new one. Rewrite the family with "
                "write_links(mode='replace') or delete it first"
            )
    _ensure_plain_group(level, LINKS)
    write_node(level.storage, _family_path(level, delta), group_document(policy.group_attributes()))
    return policy


def _update_group_attributes(level: Level, rel: str, values: Mapping[str, Any]) -> None:
    path = level.node_path(rel)
    doc = read_node(level.storage, path) or group_document({})
    doc.setdefault("attributes", {}).update(values)
    write_node(level.storage, path, doc)


# ---------------------------------------------------------------------------------------
# array creation
# ---------------------------------------------------------------------------------------
def _covers(origin: Sequence[int], shape: Sequence[int], cells: np.ndarray) -> bool:
    if cells.size == 0:
        return True
    lo = np.asarray(origin, dtype=np.int64)
    hi = lo + np.asarray(shape, dtype=np.int64)
    return bool(((cells >= lo) & (cells < hi)).all())


def _extent_for(level: Level, cells: np.ndarray) -> tuple[Chunk, Chunk]:
    """(origin, shape) for a new grid array holding ``cells``.

    The level's ``vertices`` array's grid when it covers them (arrays of one level then
    share one grid), else the bounding box of the vertices grid and the cells together;
    without ``vertices``, the bounding box of the cells.
    """
    ndim = cells.shape[1]
    if level.has(VERTICES):
        vert = level.array(VERTICES)
        if vert.ndim != ndim:
            raise ArrayError(
                f"level {level.number}: link chunk coordinates have {ndim} components but the vertices "
                f"array has {vert.ndim} dimensions"
            )
        if _covers(vert.origin, vert.shape, cells):
            return vert.origin, vert.shape
        lo = np.minimum(np.asarray(vert.origin), cells.min(axis=0))
        hi = np.maximum(np.asarray(vert.origin) + np.asarray(vert.shape) - 1, cells.max(axis=0))
    else:
        lo, hi = cells.min(axis=0), cells.max(axis=0)
    return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo + 1)


def _check_covers(grid: GridArray, cells: np.ndarray) -> None:
    if grid.ndim != cells.shape[1]:
        raise ArrayError(f"{grid.path}: has {grid.ndim} dimensions, link cells have {cells.shape[1]} coordinates")
    if not _covers(grid.origin, grid.shape, cells):
        lo = np.asarray(grid.origin)
        outside = ~((cells >= lo) & (cells < lo + np.asarray(grid.shape))).all(axis=1)
        bad = tuple(int(v) for v in cells[np.argmax(outside)])
        raise ArrayError(
            f"{grid.path}: cell {format_chunk_key(bad)} lies outside the existing array (origin "
            f"{list(grid.origin)}, shape {list(grid.shape)}); existing arrays are not resized"
        )


def _links_array_attributes(policy: LinkPolicy, offsets: OffsetsT, dtype: str) -> dict[str, Any]:
    return {
        "zv_array": "links",
        "dtype": dtype,
        "offsets": [list(o) for o in offsets],
        "has_perm": policy.has_perm(offsets),
        "link_width": policy.link_width,
        "level_delta": policy.delta,
    }


def _check_link_dtype(dtype: DTypeLike) -> str:
    name = np.dtype(dtype).name
    if name not in _LINK_DTYPES:
        raise InputError(f"link rows must be int64 or int32, got {name}")
    return name


def _open_or_create_links_array(
    level: Level,
    policy: LinkPolicy,
    segment: str,
    offsets: OffsetsT,
    cells: np.ndarray,
    *,
    extent: tuple[Chunk, Chunk],
    dtype: str,
    compressor: dict[str, Any] | None,
    check_perm: bool = True,
) -> GridArray:
    rel = _array_rel(policy.delta, segment)
    if level.has(rel):
        grid = level.array(rel)
        attrs = grid.attributes
        if attrs.get("link_width", policy.link_width) != policy.link_width:
            raise ArrayError(f"{grid.path}: link_width {attrs.get('link_width')} disagrees with the family")
        if check_perm and "has_perm" in attrs and attrs["has_perm"] != policy.has_perm(offsets):
            raise ArrayError(f"{grid.path}: has_perm {attrs['has_perm']} disagrees with the family policy")
        _check_covers(grid, cells)
        return level.remember(grid)
    return level.create_array(
        rel, shape=extent[1], origin=extent[0], attributes=_links_array_attributes(policy, offsets, dtype),
        compressor=compressor,
    )  # fmt: skip


def _open_or_create_fragments(
    level: Level, cells: np.ndarray, *, extent: tuple[Chunk, Chunk], compressor: dict[str, Any] | None
) -> GridArray:
    if level.has(LINK_FRAGMENTS):
        grid = level.array(LINK_FRAGMENTS)
        _check_covers(grid, cells)
        return level.remember(grid)
    return level.create_array(
        LINK_FRAGMENTS, shape=extent[1], origin=extent[0],
        attributes={"zv_array": "link_fragments", "encoding": "fragment_index_v1"}, compressor=compressor,
    )  # fmt: skip


def _check_partition_policy(level: Level, partition: LinkPartition) -> LinkPolicy:
    policy = _require_policy(level, partition.policy.delta)
    if policy != partition.policy:
        raise ArrayError(
            f"level {level.number}: the partition was placed under a different policy than "
            f"links/{format_delta(policy.delta)} carries ({'; '.join(policy.differences(partition.policy))})"
        )
    return policy


def create_links_segments(
    level: Level,
    delta: int,
    segments: Sequence[str],
    *,
    extent: tuple[Sequence[int], Sequence[int]],
    dtype: DTypeLike = "int64",
    compressor: CompressorArg = ZSTD_DEFAULT,
) -> None:
    """Create (metadata only) the named offsets arrays of a stamped family, and ``link_fragments``.

    The coordinator step when the segments are known but no single partition holds
    every record (the Dask writers plan them from per-block summaries).
    ``extent = (origin, shape)`` is the grid every array gets.
    """
    policy = _require_policy(level, delta)
    comp = compressor_config(compressor)
    name = _check_link_dtype(dtype)
    ext = (tuple(int(v) for v in extent[0]), tuple(int(v) for v in extent[1]))
    none = np.zeros((0, policy.sid_ndim), dtype=np.int64)
    for segment in segments:
        offsets = _parse_segment(level, policy, segment)
        _open_or_create_links_array(level, policy, segment, offsets, none, extent=ext, dtype=name, compressor=comp)
        if policy.is_flat(offsets):
            _open_or_create_fragments(level, none, extent=ext, compressor=comp)


def create_links_arrays(
    level: Level,
    delta: int,
    partition: LinkPartition,
    *,
    dtype: DTypeLike = "int64",
    compressor: CompressorArg = ZSTD_DEFAULT,
    extent: tuple[Sequence[int], Sequence[int]] | None = None,
) -> list[str]:
    """Create (metadata only) every offsets array, and ``link_fragments``, the partition needs.

    Coordinator step of a decentralised write; arrays that exist are kept (and must
    cover the partition's cells).  ``extent = (origin, shape)`` overrides the grid
    choice (default: the level's ``vertices`` grid, else the partition's cells).
    Returns the segments of the partition.
    """
    if partition.policy.delta != delta:
        raise ArrayError(f"the partition is for delta {partition.policy.delta}, not {delta}")
    policy = _check_partition_policy(level, partition)
    if partition.num_physical_records == 0:
        return []
    comp = compressor_config(compressor)
    name = _check_link_dtype(dtype)
    ext = (
        (tuple(int(v) for v in extent[0]), tuple(int(v) for v in extent[1]))
        if extent is not None
        else _extent_for(level, partition.cell)
    )
    if not _covers(ext[0], ext[1], partition.cell):
        raise ArrayError(f"extent {ext} does not cover the partition's cells")
    for s, (segment, offsets) in enumerate(zip(partition.segments, partition.segment_offsets)):
        cells = partition.cell[partition.segment == s]
        _open_or_create_links_array(
            level, policy, segment, offsets, cells, extent=ext, dtype=name, compressor=comp
        )
        if policy.is_flat(offsets):
            _open_or_create_fragments(level, cells, extent=ext, compressor=comp)
    return list(partition.segments)


# ---------------------------------------------------------------------------------------
# cell encoding
# ---------------------------------------------------------------------------------------
def _row_dtype(grid: GridArray) -> np.dtype:
    name = grid.attributes.get("dtype", "int64")
    try:
        dt = np.dtype(name)
    except TypeError:
        raise MetadataError(f"unknown link dtype {name!r}", file=posixpath.join(grid.path, "zarr.json")) from None
    if dt.kind not in "iu":
        raise MetadataError(f"link dtype {name!r} is not an integer type", file=posixpath.join(grid.path, "zarr.json"))
    return dt.newbyteorder("<")


def _encode_link_cell(groups: Sequence[np.ndarray], *, flat: bool, dtype: np.dtype) -> tuple[bytes, bytes | None]:
    """(cell payload, link_fragments payload or None) for the cell's write groups."""
    if flat:
        rows = np.concatenate(groups) if len(groups) > 1 else groups[0]
        counts = [g.shape[0] for g in groups]
        if rows.shape[0] == 0:
            return b"", b""
        return encode_ragged_ints(rows, dtype), FragmentIndex.from_counts(counts).encode()
    if sum(g.shape[0] for g in groups) == 0:
        return b"", None
    return encode_ragged_blob([g for g in groups if g.shape[0]], dtype), None


def _decode_link_cell(
    payload: bytes, *, flat: bool, width: int, dtype: np.dtype, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """(rows (m, width) int64, group row starts) of one stored cell."""
    try:
        if flat:
            rows = decode_ragged_ints(payload, width, dtype)
            starts = np.array([0, rows.shape[0]], dtype=np.int64)
        else:
            rows, starts = decode_ragged_blob(payload, width, dtype)
    except EncodingError as exc:
        raise EncodingError(f"{where}: {exc}") from None
    return rows.astype(np.int64), starts


def _sidecar_groups(raw: bytes, n_rows: int, where: str) -> list[np.ndarray]:
    """Row indices of every group of a flat cell, from its link_fragments payload."""
    if not raw:
        return [np.arange(n_rows, dtype=np.int64)]
    index = FragmentIndex.decode(raw)
    if index.max_row() >= n_rows:
        raise EncodingError(f"{where}: link_fragments names row {index.max_row()} of a {n_rows}-row cell")
    return [index.rows(f) for f in range(index.num_fragments)]


def _stored_groups(
    level: Level, policy: LinkPolicy, grid: GridArray, offsets: OffsetsT, cells: list[Chunk]
) -> list[list[np.ndarray]]:
    """Existing groups (lists of row arrays) of some cells of one offsets array."""
    flat = policy.is_flat(offsets)
    width = policy.link_width + int(_array_has_perm(grid, policy, offsets))
    dtype = _row_dtype(grid)
    requests = [(grid, c) for c in cells]
    frag = level.array(LINK_FRAGMENTS) if flat and level.has(LINK_FRAGMENTS) else None
    if frag is not None:
        requests += [(frag, c) for c in cells]
    raws = read_cells_many(requests)
    out = []
    for i, cell in enumerate(cells):
        where = f"{grid.path} cell {format_chunk_key(cell)}"
        rows, starts = _decode_link_cell(raws[i], flat=flat, width=width, dtype=dtype, where=where)
        if flat:
            side = raws[len(cells) + i] if frag is not None else b""
            groups = [rows[idx] for idx in _sidecar_groups(side, rows.shape[0], where)] if rows.shape[0] else []
        else:
            groups = [rows[a:b] for a, b in zip(starts[:-1], starts[1:])]
        out.append(groups)
    return out


def _array_has_perm(grid: GridArray, policy: LinkPolicy, offsets: OffsetsT) -> bool:
    """The stored ``has_perm`` (trusted), else the policy's answer."""
    value = grid.attributes.get("has_perm")
    if value is None:
        return policy.has_perm(offsets)
    if not isinstance(value, bool):
        raise MetadataError(
            f"has_perm must be a bool, found {value!r}",
            file=posixpath.join(grid.path, "zarr.json"),
            pointer="/attributes/has_perm",
        )
    return value


def write_chunk_links(
    level: Level,
    delta: int,
    offsets: str | Sequence[Sequence[int]],
    chunk: Sequence[int],
    rows: ArrayLike,
    *,
    mode: Literal["replace", "append"] = "replace",
    record_presence: bool = True,
    dtype: DTypeLike = "int64",
    compressor: CompressorArg = ZSTD_DEFAULT,
) -> None:
    """Write one cell of ``links/<delta>/<offsets>`` from its stored rows.

    ``rows`` are ``(m, L)``, or ``(m, 1 + L)`` with the ``perm_idx`` column first when
    the array has one; they form one write group.  ``mode="replace"`` makes them the
    whole cell, ``"append"`` adds them as a new group.  Encoding follows the single
    condition: ``delta == 0`` and all offsets zero -> flat rows plus a
    ``link_fragments`` entry at the same chunk; otherwise a self-describing blob.
    The family must exist; the array is created when missing (single-process use; a
    coordinator creates arrays for concurrent writers).  Family counts are left to
    :func:`finalize_links`.
    """
    policy = _require_policy(level, delta)
    offs = _offsets_tuple(offsets, policy)
    cell = _chunk_tuple(chunk, policy.sid_ndim)
    if mode not in ("replace", "append"):
        raise InputError(f"mode must be 'replace' or 'append', got {mode!r}")
    segment = format_offsets(offs)
    cells = np.asarray([cell], dtype=np.int64)
    comp = compressor_config(compressor)
    extent = _extent_for(level, cells)
    grid = _open_or_create_links_array(
        level,
        policy,
        segment,
        offs,
        cells,
        extent=extent,
        dtype=_check_link_dtype(dtype),
        compressor=comp,
        check_perm=False,  # rows are given as stored: the array's own stamp decides their width
    )
    width = policy.link_width + int(_array_has_perm(grid, policy, offs))
    new = _as_int_array(rows, "rows")
    if new.ndim != 2 or new.shape[1] != width:
        raise ArrayError(f"{grid.path}: rows must have shape (m, {width}), got {new.shape}")
    flat = policy.is_flat(offs)
    groups = _stored_groups(level, policy, grid, offs, [cell])[0] if mode == "append" else []
    payload, side = _encode_link_cell(groups + [new], flat=flat, dtype=_row_dtype(grid))
    batches: list[tuple[GridArray, dict[Chunk, bytes]]] = [(grid, {cell: payload})]
    if flat:
        frag = _open_or_create_fragments(level, cells, extent=extent, compressor=comp)
        batches.append((frag, {cell: side or b""}))
    write_cells_many(batches)
    if record_presence:
        for g, cs in batches:
            _merge_presence(g, cs)


def _merge_presence(grid: GridArray, cells: Mapping[Chunk, bytes]) -> None:
    grid = GridArray.open(grid.storage, grid.path)  # the current list, not the writer's copy (Level.known_array)
    present = set(grid.nonempty_chunks)
    for c, payload in cells.items():
        (present.add if payload else present.discard)(format_chunk_key(c))
    grid.set_nonempty_chunks(present)


def _partition_cell_batches(
    level: Level,
    policy: LinkPolicy,
    partition: LinkPartition,
    existing: Mapping[tuple[int, Chunk], list[np.ndarray]] | None = None,
) -> list[tuple[GridArray, dict[Chunk, bytes]]]:
    """Encoded cells (and sidecars) of every group of the partition."""
    grids: dict[int, GridArray] = {}
    cells: dict[int, dict[Chunk, bytes]] = {}
    frag_cells: dict[Chunk, bytes] = {}
    frag: GridArray | None = None
    for s, cell, start, stop in partition.iter_groups():
        if s not in grids:
            rel = _array_rel(policy.delta, partition.segments[s])
            grid = level.known_array(rel)
            if grid is None:
                raise ArrayError(
                    f"level {level.number}: {rel} does not exist; the coordinator creates arrays "
                    "(create_links_arrays) before cell owners write"
                )
            grids[s] = grid
            cells[s] = {}
        offsets = partition.segment_offsets[s]
        flat = policy.is_flat(offsets)
        rows = partition.stored_rows(start, stop)
        groups = list(existing.get((s, cell), [])) if existing else []
        payload, side = _encode_link_cell(groups + [rows], flat=flat, dtype=_row_dtype(grids[s]))
        cells[s][cell] = payload
        if flat:
            if frag is None:
                frag = level.known_array(LINK_FRAGMENTS)
                if frag is None:
                    raise ArrayError(f"level {level.number}: link_fragments does not exist; create_links_arrays first")
            frag_cells[cell] = side or b""
    out = [(grids[s], cells[s]) for s in sorted(grids)]
    if frag is not None:
        out.append((frag, frag_cells))
    return out


def write_link_cells(level: Level, delta: int, partition: LinkPartition) -> LinkWriteSummary:
    """Write every cell group of ``partition`` as a whole cell (one write group each).

    The per-cell writer of Dask owner tasks: the partition must hold whole cells (an
    owner's :meth:`LinkPartition.select_groups` share of a partition of the records it
    was routed), the family and arrays must exist, and nothing array-wide is touched
    -- ``nonempty_chunks`` and family counts are left to :func:`finalize_links`.
    Idempotent: a retried task writes the same bytes.
    """
    if partition.policy.delta != delta:
        raise ArrayError(f"the partition is for delta {partition.policy.delta}, not {delta}")
    policy = _check_partition_policy(level, partition)
    if partition.base_rows.any():
        raise ArrayError("write_link_cells writes whole cells; this partition appends to existing cells")
    write_cells_many(_partition_cell_batches(level, policy, partition))
    summary: dict[str, list[str]] = {}
    for s, cell, _, _ in partition.iter_groups():
        summary.setdefault(partition.segments[s], []).append(format_chunk_key(cell))
    return LinkWriteSummary(summary, partition.num_physical_records)


# ---------------------------------------------------------------------------------------
# single-process write
# ---------------------------------------------------------------------------------------
def list_link_attribute_names(level: Level) -> list[str]:
    """Names under ``link_attributes/`` (ASCII-sorted)."""
    return sorted(level.children(LINK_ATTRIBUTES))


def _clear_family(level: Level, delta: int) -> None:
    """Remove ``links/<delta>`` with its attribute families (and link_fragments at delta 0)."""
    level.known_arrays.clear()
    for name in list_link_attribute_names(level):
        rel = link_attributes_group_path(name, delta)
        if level.storage.exists(posixpath.join(level.node_path(rel), "zarr.json")) or level.children(rel):
            level.storage.delete_prefix(level.node_path(rel))
    level.storage.delete_prefix(_family_path(level, delta))
    if delta == 0 and level.has(LINK_FRAGMENTS):
        level.storage.delete_prefix(level.node_path(LINK_FRAGMENTS))


def write_links(
    level: Level,
    delta: int,
    chunks: ArrayLike,
    vi: ArrayLike,
    *,
    directed: bool = False,
    store: StorePolicy = "canonical",
    mode: Literal["replace", "append"] = "replace",
    dtype: DTypeLike = "int64",
    compressor: CompressorArg = ZSTD_DEFAULT,
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None,
    endpoint_deltas: ArrayLike | None = None,
) -> LinkPartition:
    """Write link records into ``links/<delta>/`` of one level (single process).

    Args:
        level: the owning level.
        delta: level delta: endpoints ``1..L-1`` live at ``level + delta``.
        chunks: ``(n, L, D)`` absolute chunk coordinates per endpoint, input order.
        vi: ``(n, L)`` chunk-local vertex rows per endpoint.
        directed, store: the family policy (see the Links page).
        mode: ``"replace"`` makes the family hold exactly these records: the whole
            ``links/<delta>/`` family, its ``link_attributes/*/<delta>/`` families
            and, at delta 0, ``link_fragments`` are removed first (so a policy change
            is allowed).  ``"append"`` adds the records as one new group per touched
            cell and refuses a policy that differs from the family's.
        dtype: row element type of newly created arrays (int64 or int32).
        compressor: codec of newly created arrays (``None`` for raw cells).
        anchor_ratios: ``(r_src, r_trg)`` for ``delta != 0``; default from the
            owning and target levels' chunk shapes (:func:`link_anchor_ratios`).
        endpoint_deltas: optional ``(n, L)`` level delta of every endpoint, checked
            so a mixed-resolution record is refused rather than misfiled.

    Returns:
        The :class:`LinkPartition` (record numbering = this call's input order; pass it
        to :func:`write_link_attributes`).  Family counts and every touched array's
        ``nonempty_chunks`` are up to date on return.
    """
    if mode not in ("replace", "append"):
        raise InputError(f"mode must be 'replace' or 'append', got {mode!r}")
    existing = link_family_policy(level, delta)
    c, v = _as_records(chunks, vi, sid_ndim=existing.sid_ndim if existing and mode == "append" else None)
    _check_endpoint_deltas(endpoint_deltas, v.shape, delta)
    n, width, ndim = c.shape
    policy = _make_policy(delta, width, directed, store, ndim)
    if mode == "append" and existing is not None and existing != policy:
        raise ArrayError(
            f"level {level.number}: cannot append to links/{format_delta(delta)} with a different policy "
            f"({'; '.join(existing.differences(policy))}); the family's arrays decode against its stamped policy"
        )
    if level.has(VERTICES) and level.array(VERTICES).ndim != ndim:
        raise ArrayError(
            f"level {level.number}: endpoint chunk coordinates have {ndim} components but the vertices "
            f"array has {level.array(VERTICES).ndim} dimensions"
        )
    ratios = None
    if delta != 0:
        ratios = anchor_ratios if anchor_ratios is not None else link_anchor_ratios(level, delta, ndim)
    partition = partition_records_by_offset(
        c, v, delta=delta, directed=directed, store=store, anchor_ratios=ratios
    )
    comp = compressor_config(compressor)
    dtype_name = _check_link_dtype(dtype)
    append = mode == "append" and existing is not None
    extent = _extent_for(level, partition.cell) if n else None
    if append:  # check every existing array covers its new cells before writing anything
        for s, segment in enumerate(partition.segments):
            rel = _array_rel(delta, segment)
            if level.has(rel):
                _check_covers(level.array(rel), partition.cell[partition.segment == s])
        if level.has(LINK_FRAGMENTS) and delta == 0:
            _check_covers(level.array(LINK_FRAGMENTS), partition.cell)
    elif mode == "append" and _link_array_segments(level, delta):
        raise ArrayError(
            f"level {level.number}: links/{format_delta(delta)} holds arrays but no family policy; "
            "cannot append to it (rewrite it with mode='replace')"
        )
    if n and dtype_name == "int32":  # everything is checked before anything is removed or written
        limit = np.iinfo(np.int32).max
        if int(partition.vi.max()) > limit or int(partition.perm.max()) > limit:
            raise InputError("link rows do not fit int32; use dtype='int64'")
    if mode == "replace":
        _clear_family(level, delta)
    create_links_family(level, delta, link_width=width, directed=directed, store=store, sid_ndim=ndim)
    if n:
        create_links_arrays(level, delta, partition, dtype=dtype_name, compressor=comp, extent=extent)
    existing_groups: dict[tuple[int, Chunk], list[np.ndarray]] = {}
    if append and n:
        base = np.zeros(partition.num_groups, dtype=np.int64)
        by_segment: dict[int, list[tuple[int, Chunk]]] = {}
        for g, (s, cell, _, _) in enumerate(partition.iter_groups()):
            by_segment.setdefault(s, []).append((g, cell))
        for s, items in by_segment.items():
            grid = level.array(_array_rel(delta, partition.segments[s]))
            stored = _stored_groups(level, policy, grid, partition.segment_offsets[s], [c_ for _, c_ in items])
            for (g, cell), groups in zip(items, stored):
                existing_groups[(s, cell)] = groups
                base[g] = sum(x.shape[0] for x in groups)
        partition = LinkPartition(
            policy=partition.policy,
            num_links=partition.num_links,
            segments=partition.segments,
            segment_offsets=partition.segment_offsets,
            segment=partition.segment,
            cell=partition.cell,
            record=partition.record,
            vi=partition.vi,
            perm=partition.perm,
            base_rows=base,
        )
    batches = _partition_cell_batches(level, policy, partition, existing_groups) if n else []
    write_cells_many(batches)
    for grid, cells in batches:
        _merge_presence(grid, cells)
    old = _family_counts(level, delta) if append else LinkCounts(0, 0)
    if old is None:
        finalize_links(level, delta)
    else:
        _stamp_counts(
            level,
            delta,
            LinkCounts(old.num_links + n, old.num_physical_records + partition.num_physical_records),
            attributes=False,
        )
    return partition


def _family_counts(level: Level, delta: int) -> LinkCounts | None:
    doc = _family_document(level, delta)
    attrs = (doc or {}).get("attributes") or {}
    if "num_links" in attrs and "num_physical_records" in attrs:
        return LinkCounts(int(attrs["num_links"]), int(attrs["num_physical_records"]))
    if not _link_array_segments(level, delta):
        return LinkCounts(0, 0)
    return None


def _stamp_counts(level: Level, delta: int, counts: LinkCounts, *, attributes: bool) -> None:
    _update_group_attributes(
        level,
        links_group_path(delta),
        {"num_links": counts.num_links, "num_physical_records": counts.num_physical_records},
    )
    if attributes:
        for name in list_link_attribute_names(level):
            rel = link_attributes_group_path(name, delta)
            if read_node(level.storage, level.node_path(rel)) is not None:
                _update_group_attributes(level, rel, {"num_links": counts.num_links})


# ---------------------------------------------------------------------------------------
# enumeration and reading
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _FamilyArray:
    segment: str
    offsets: OffsetsT
    grid: GridArray
    cells: list[Chunk]  # numeric order (D8)
    has_perm: bool
    flat: bool
    dtype: np.dtype

    @property
    def width(self) -> int:
        return len(self.offsets) + 1 + int(self.has_perm)


def list_link_deltas(level: Level) -> list[int]:
    """Level deltas with a ``links/<delta>/`` group, ascending numerically."""
    out = []
    for name in level.children(LINKS):
        path = level.node_path(f"{LINKS}/{name}")
        doc = read_node(level.storage, path)
        if doc is None or doc.get("node_type") != "group":
            continue
        try:
            out.append(parse_delta(name))
        except ValueError as exc:
            raise MetadataError(str(exc), file=posixpath.join(path, "zarr.json")) from None
    return sorted(out)


def list_link_offsets(level: Level, delta: int) -> list[str]:
    """Offsets segments of the arrays under ``links/<delta>/``, sorted as ASCII strings.

    With a family policy, every segment must parse against it (a malformed or
    wrong-arity name raises :class:`MetadataError`).
    """
    segments = _link_array_segments(level, delta)
    policy = link_family_policy(level, delta)
    if policy is not None:
        for segment in segments:
            _parse_segment(level, policy, segment)
    return segments


def _parse_segment(level: Level, policy: LinkPolicy, segment: str) -> OffsetsT:
    try:
        return parse_offsets(segment, link_width=policy.link_width, sid_ndim=policy.sid_ndim)
    except ValueError as exc:
        path = level.node_path(_array_rel(policy.delta, segment))
        raise MetadataError(f"malformed offsets segment: {exc}", file=posixpath.join(path, "zarr.json")) from None


def _family_array(level: Level, policy: LinkPolicy, segment: str) -> _FamilyArray:
    offsets = _parse_segment(level, policy, segment)
    grid = level.array(_array_rel(policy.delta, segment))
    stored = grid.attributes.get("offsets")
    if stored is not None:
        try:
            field_offsets = tuple(tuple(int(c) for c in o) for o in stored)
        except (TypeError, ValueError):
            field_offsets = None
        if field_offsets != offsets:
            raise MetadataError(
                f"offsets attribute {stored!r} disagrees with the path segment {segment!r}",
                file=posixpath.join(grid.path, "zarr.json"),
                pointer="/attributes/offsets",
            )
    try:
        cells = sorted(grid.nonempty_chunk_coords())
    except ValueError as exc:
        raise MetadataError(str(exc), file=posixpath.join(grid.path, "zarr.json"), pointer="/attributes/nonempty_chunks") from None
    return _FamilyArray(
        segment=segment,
        offsets=offsets,
        grid=grid,
        cells=cells,
        has_perm=_array_has_perm(grid, policy, offsets),
        flat=policy.is_flat(offsets),
        dtype=_row_dtype(grid),
    )


def _enumerate_family(level: Level, policy: LinkPolicy) -> list[_FamilyArray]:
    """The family's arrays in enumeration order (segments ASCII, cells numeric).

    The single definition of the order shared by :func:`read_links`,
    :func:`read_link_attributes` and :func:`write_link_attributes`.
    """
    return [_family_array(level, policy, s) for s in _link_array_segments(level, policy.delta)]


def _read_family_rows(arrays: Sequence[_FamilyArray]) -> list[list[np.ndarray]]:
    """Stored rows of every enumerated cell, per array (one concurrent read)."""
    requests = [(fa.grid, cell) for fa in arrays for cell in fa.cells]
    raws = iter(read_cells_many(requests))
    out = []
    for fa in arrays:
        rows = []
        for cell in fa.cells:
            where = f"{fa.grid.path} cell {format_chunk_key(cell)}"
            r, _ = _decode_link_cell(next(raws), flat=fa.flat, width=fa.width, dtype=fa.dtype, where=where)
            rows.append(r)
        out.append(rows)
    return out


def _decode_rows(
    policy: LinkPolicy,
    offsets: OffsetsT,
    has_perm: bool,
    cells: np.ndarray,
    rows: np.ndarray,
    ratios: tuple[np.ndarray, np.ndarray] | None,
    where: str,
) -> LinkRecords:
    """Stored rows of one offsets array (with their cells) -> records in input endpoint order."""
    width = policy.link_width
    count = rows.shape[0]
    vi_stored = rows[:, int(has_perm) :]
    stored = np.empty((count, width, policy.sid_ndim), dtype=np.int64)
    stored[:, 0, :] = cells
    if width > 1:
        anchor = cells
        if policy.delta != 0:
            assert ratios is not None
            anchor = anchor_chunks(cells, ratios[0], ratios[1])
        stored[:, 1:, :] = anchor[:, None, :] + np.asarray(offsets, dtype=np.int64)[None, :, :]
    if not has_perm:
        return LinkRecords(stored, np.ascontiguousarray(vi_stored))
    if width == 2:  # edges: perm 1 swaps the two endpoints back
        codes = rows[:, 0]
        bad = (codes < 0) | (codes > 1)
        if bad.any():
            i = int(np.argmax(bad))
            raise EncodingError(f"{where}: Lehmer: perm_idx {int(codes[i])} at row {i} is outside [0, 2) for L=2")
        swap = codes == 1
        stored[swap] = stored[swap][:, ::-1]
        vi = np.ascontiguousarray(vi_stored)
        vi[swap] = vi[swap][:, ::-1]
        return LinkRecords(stored, vi)
    try:
        sigma = lehmer_decode_rows(rows[:, 0], width)
    except EncodingError as exc:
        raise EncodingError(f"{where}: {exc}") from None
    chunks = np.empty_like(stored)
    vi = np.empty_like(vi_stored)
    np.put_along_axis(chunks, sigma[:, :, None], stored, axis=1)
    np.put_along_axis(vi, sigma, vi_stored, axis=1)
    return LinkRecords(chunks, vi)


def _ratios_for(
    level: Level, policy: LinkPolicy, anchor_ratios: tuple[Sequence[int], Sequence[int]] | None
) -> tuple[np.ndarray, np.ndarray] | None:
    if policy.delta == 0:
        return None
    ratios = anchor_ratios if anchor_ratios is not None else link_anchor_ratios(level, policy.delta, policy.sid_ndim)
    return _ratios_arg(ratios, policy.sid_ndim)


def _read_family_records(
    level: Level, policy: LinkPolicy, anchor_ratios: tuple[Sequence[int], Sequence[int]] | None
) -> tuple[LinkRecords, int]:
    arrays = _enumerate_family(level, policy)
    rows_per_array = _read_family_rows(arrays)
    ratios = _ratios_for(level, policy, anchor_ratios) if arrays else None
    parts = []
    total = 0
    for fa, rows in zip(arrays, rows_per_array):
        if not rows:
            continue
        counts = [r.shape[0] for r in rows]
        cells = np.repeat(np.asarray(fa.cells, dtype=np.int64).reshape(-1, policy.sid_ndim), counts, axis=0)
        stacked = np.concatenate(rows) if rows else np.zeros((0, fa.width), np.int64)
        parts.append(_decode_rows(policy, fa.offsets, fa.has_perm, cells, stacked, ratios, fa.grid.path))
        total += stacked.shape[0]
    return LinkRecords.concat(parts, policy.link_width, policy.sid_ndim), total


def read_links(
    level: Level, delta: int = 0, *, anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None
) -> LinkRecords:
    """Every record of ``links/<delta>/``, endpoints in input order.

    Enumeration order: offsets segments sorted as ASCII strings (so the all-zero intra
    segment comes last), cells as signed integer tuples (DECISIONS.md D8), then write
    order.  Under ``store="duplicate"`` every physical copy is returned.  An absent or
    unstamped family reads as no records.
    """
    policy = link_family_policy(level, delta)
    if policy is None:
        return LinkRecords.empty(0, len(level.store.root.chunk_shape))
    return _read_family_records(level, policy, anchor_ratios)[0]


def read_chunk_links(
    level: Level,
    delta: int,
    offsets: str | Sequence[Sequence[int]],
    chunk: Sequence[int],
    *,
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None,
) -> LinkCell:
    """One cell of ``links/<delta>/<offsets>``: its stored groups and decoded records.

    A flat (intra, delta 0) cell is split into groups by its ``link_fragments`` entry;
    a blob cell by its own header.  A missing array or cell reads as empty.
    """
    policy = _require_policy(level, delta)
    offs = _offsets_tuple(offsets, policy)
    cell = _chunk_tuple(chunk, policy.sid_ndim)
    segment = format_offsets(offs)
    empty = LinkCell(segment, offs, cell, policy.has_perm(offs), [], LinkRecords.empty(policy.link_width, policy.sid_ndim))
    rel = _array_rel(delta, segment)
    if not level.has(rel):
        return empty
    grid = level.array(rel)
    lo, shape = np.asarray(grid.origin), np.asarray(grid.shape)
    if not _covers(lo, shape, np.asarray([cell])):
        return empty
    has_perm = _array_has_perm(grid, policy, offs)
    groups = _stored_groups(level, policy, grid, offs, [cell])[0]
    rows = np.concatenate(groups) if groups else np.zeros((0, policy.link_width + int(has_perm)), np.int64)
    cells = np.repeat(np.asarray([cell], dtype=np.int64), rows.shape[0], axis=0)
    records = _decode_rows(policy, offs, has_perm, cells, rows, _ratios_for(level, policy, anchor_ratios), grid.path)
    return LinkCell(segment, offs, cell, has_perm, groups, records)


def read_links_for_tuple(
    level: Level,
    delta: int,
    chunk_tuple: Sequence[Sequence[int]],
    *,
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None,
) -> LinkRecords:
    """Records whose endpoints span exactly the ``L`` chunks of ``chunk_tuple``.

    The tuple resolves to the single ``(offsets, source)`` cell that can hold such
    records.  For an undirected canonical family at ``delta == 0`` the tuple may be in
    any order (the placement sorts endpoint chunks); every other family leads with
    the stored endpoint 0 (input endpoint 0, or the lead chunk of a duplicate copy),
    so the order is meaningful.
    """
    policy = link_family_policy(level, delta)
    if policy is None:
        return LinkRecords.empty()
    chunks = [_chunk_tuple(c, policy.sid_ndim) for c in chunk_tuple]
    if len(chunks) != policy.link_width:
        raise ArrayError(f"chunk tuple has {len(chunks)} chunks, the family has link_width {policy.link_width}")
    if policy.delta == 0 and not policy.directed and policy.store == "canonical":
        chunks = sorted(chunks)
    source = np.asarray(chunks[0], dtype=np.int64)
    anchor = source
    if policy.delta != 0:
        r_src, r_trg = _ratios_for(level, policy, anchor_ratios)  # type: ignore[misc]
        anchor = anchor_chunks(source, r_src, r_trg)
    offsets = tuple(tuple(int(x) for x in np.asarray(c) - anchor) for c in chunks[1:])
    return read_chunk_links(level, delta, offsets, chunks[0], anchor_ratios=anchor_ratios).records


# ---------------------------------------------------------------------------------------
# link attributes
# ---------------------------------------------------------------------------------------
def _attribute_values(values: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim == 0:
        raise InputError(f"link attribute {name!r}: values must have one row per link record")
    if arr.dtype.kind not in _ATTRIBUTE_KINDS:
        raise InputError(f"link attribute {name!r}: dtype {arr.dtype} is not bool, integer or float")
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))


def _attribute_array_attributes(
    name: str, dtype: np.dtype, row_shape: tuple[int, ...], offsets: OffsetsT, delta: int
) -> dict[str, Any]:
    return {
        "zv_array": "link_attribute",
        "name": name,
        "dtype": dtype.name,
        "offsets": [list(o) for o in offsets],
        "level_delta": delta,
        "row_shape": list(row_shape),
    }


def _create_attribute_family(level: Level, name: str, delta: int, num_links: int | None) -> None:
    _ensure_plain_group(level, LINK_ATTRIBUTES)
    _ensure_plain_group(level, f"{LINK_ATTRIBUTES}/{name}")
    attrs: dict[str, Any] = {"zv_array": "link_attribute_family", "name": name, "level_delta": delta}
    if num_links is not None:
        attrs["num_links"] = num_links
    write_node(level.storage, level.node_path(link_attributes_group_path(name, delta)), group_document(attrs))


def _open_or_create_attribute_array(
    level: Level,
    name: str,
    delta: int,
    segment: str,
    offsets: OffsetsT,
    dtype: np.dtype,
    row_shape: tuple[int, ...],
    compressor: dict[str, Any] | None,
) -> GridArray:
    rel = _attr_array_rel(name, delta, segment)
    if level.has(rel):
        grid = level.array(rel)
        attrs = grid.attributes
        if attrs.get("dtype") != dtype.name or tuple(attrs.get("row_shape", ())) != row_shape:
            raise ArrayError(
                f"{grid.path}: holds {attrs.get('dtype')} rows of shape {attrs.get('row_shape')}, "
                f"cannot write {dtype.name} rows of shape {list(row_shape)}"
            )
        return level.remember(grid)
    links_rel = _array_rel(delta, segment)
    if not level.has(links_rel):
        raise ArrayError(f"level {level.number}: {links_rel} does not exist; link attributes mirror link arrays")
    mirror = level.array(links_rel)
    return level.create_array(
        rel, shape=mirror.shape, origin=mirror.origin,
        attributes=_attribute_array_attributes(name, dtype, row_shape, offsets, delta), compressor=compressor,
    )  # fmt: skip


def create_link_attribute_arrays(
    level: Level,
    name: str,
    delta: int,
    *,
    dtype: DTypeLike,
    row_shape: Sequence[int] = (),
    partition: LinkPartition | None = None,
    compressor: CompressorArg = ZSTD_DEFAULT,
) -> list[str]:
    """Create (metadata only) ``link_attributes/<name>/<delta>/`` and its arrays.

    One array per segment of ``partition`` (default: every offsets array of the link
    family), each mirroring its link array's grid.  The family group gets no
    ``num_links`` until :func:`finalize_links`.  Coordinator step; returns the segments.
    """
    policy = _require_policy(level, delta)
    dt = np.dtype(dtype).newbyteorder("<")
    if dt.kind not in _ATTRIBUTE_KINDS:
        raise InputError(f"link attribute {name!r}: dtype {dt} is not bool, integer or float")
    if partition is not None:
        _check_partition_policy(level, partition)
        segments = list(zip(partition.segments, partition.segment_offsets))
    else:
        segments = [(s, _parse_segment(level, policy, s)) for s in _link_array_segments(level, delta)]
    comp = compressor_config(compressor)
    if read_node(level.storage, level.node_path(link_attributes_group_path(name, delta))) is None:
        _create_attribute_family(level, name, delta, None)
    shape = tuple(int(x) for x in row_shape)
    for segment, offsets in segments:
        _open_or_create_attribute_array(level, name, delta, segment, offsets, dt, shape, comp)
    return [s for s, _ in segments]


def _attribute_cell_batches(
    level: Level,
    name: str,
    delta: int,
    partition: LinkPartition,
    physical: np.ndarray,
    existing: Mapping[int, bytes] | None = None,
) -> list[tuple[GridArray, dict[Chunk, bytes]]]:
    grids: dict[int, GridArray] = {}
    cells: dict[int, dict[Chunk, bytes]] = {}
    for g, (s, cell, start, stop) in enumerate(partition.iter_groups()):
        if s not in grids:
            rel = _attr_array_rel(name, delta, partition.segments[s])
            grid = level.known_array(rel)
            if grid is None:
                raise ArrayError(f"level {level.number}: {rel} does not exist; create_link_attribute_arrays first")
            grids[s] = grid
            cells[s] = {}
        prefix = existing.get(g, b"") if existing else b""
        cells[s][cell] = prefix + physical[start:stop].tobytes()
    return [(grids[s], cells[s]) for s in sorted(grids)]


def write_link_attribute_cells(
    level: Level, name: str, delta: int, values: ArrayLike, partition: LinkPartition
) -> None:
    """Write the attribute cells of every cell group of ``partition`` (Dask owner writer).

    ``values`` are in the partition's input record order (``num_links`` rows); each
    placement gets its record's row, so duplicate copies each get a copy.  The arrays
    must exist (:func:`create_link_attribute_arrays`); ``nonempty_chunks`` and the
    family's ``num_links`` are left to :func:`finalize_links`.
    """
    if partition.policy.delta != delta:
        raise ArrayError(f"the partition is for delta {partition.policy.delta}, not {delta}")
    _check_partition_policy(level, partition)
    if partition.base_rows.any():
        raise ArrayError("write_link_attribute_cells writes whole cells; this partition appends to existing cells")
    arr = _attribute_values(values, name)
    physical = partition.scatter(arr)
    batches = _attribute_cell_batches(level, name, delta, partition, physical)
    for grid, _ in batches:
        attrs = grid.attributes
        if attrs.get("dtype") != arr.dtype.name or tuple(attrs.get("row_shape", ())) != arr.shape[1:]:
            raise ArrayError(
                f"{grid.path}: holds {attrs.get('dtype')} rows of shape {attrs.get('row_shape')}, values are "
                f"{arr.dtype.name} rows of shape {list(arr.shape[1:])}"
            )
    write_cells_many(batches)


def _link_cell_sets(arrays: Sequence[_FamilyArray]) -> dict[str, set[Chunk]]:
    return {fa.segment: set(fa.cells) for fa in arrays}


def write_link_attributes(
    level: Level,
    name: str,
    delta: int,
    values: ArrayLike,
    *,
    partition: LinkPartition | None = None,
    compressor: CompressorArg = ZSTD_DEFAULT,
) -> None:
    """Write ``link_attributes/<name>/<delta>/``, one row per stored link record.

    Without ``partition``, ``values`` are already in the family's enumeration order
    (the order :func:`read_links` returns) and cover every stored record; the writer
    re-derives each cell's share from the link cells on disk.  With the
    :class:`LinkPartition` returned by :func:`write_links`, ``values`` are in that
    call's input order and fan out to every placement.  Under ``store="duplicate"`` a
    partition is required: positional rows cannot express the fan-out of copies.
    A partition from a ``mode="append"`` write appends to the existing attribute cells.
    """
    policy = _require_policy(level, delta)
    arr = _attribute_values(values, name)
    comp = compressor_config(compressor)
    arrays = _enumerate_family(level, policy)
    counts = _family_counts(level, delta)
    if partition is None:
        if policy.store == "duplicate":
            raise ArrayError(
                f"level {level.number}: links/{format_delta(delta)} stores duplicate copies, so a partition is "
                "required: pass the LinkPartition returned by write_links so attribute rows fan out to every copy"
            )
        rows_per_array = _read_family_rows(arrays)
        total = sum(r.shape[0] for rows in rows_per_array for r in rows)
        if arr.shape[0] != total:
            raise ArrayError(
                f"link attribute {name!r}: {arr.shape[0]} rows given, links/{format_delta(delta)} stores "
                f"{total} records (values must be in enumeration order, one per stored record)"
            )
        _clear_attribute_family(level, name, delta)
        _create_attribute_family(level, name, delta, counts.num_links if counts else None)
        batches = []
        pos = 0
        for fa, rows in zip(arrays, rows_per_array):
            if not fa.cells:
                continue
            grid = _open_or_create_attribute_array(
                level, name, delta, fa.segment, fa.offsets, arr.dtype, arr.shape[1:], comp
            )
            cells = {}
            for cell, r in zip(fa.cells, rows):
                cells[cell] = arr[pos : pos + r.shape[0]].tobytes()
                pos += r.shape[0]
            batches.append((grid, cells))
        write_cells_many(batches)
        for grid, cells in batches:
            grid.set_nonempty_chunks(format_chunk_key(c) for c, p in cells.items() if p)
        return

    if partition.policy.delta != delta:
        raise ArrayError(f"the partition is for delta {partition.policy.delta}, not {delta}")
    _check_partition_policy(level, partition)
    physical = partition.scatter(arr)
    appending = bool(partition.base_rows.any())
    on_disk = _link_cell_sets(arrays)
    if not appending:
        mine: dict[str, set[Chunk]] = {}
        for s, cell, _, _ in partition.iter_groups():
            mine.setdefault(partition.segments[s], set()).add(cell)
        theirs = {s: cells for s, cells in on_disk.items() if cells}
        if mine != theirs:
            raise ArrayError(
                f"link attribute {name!r}: the partition's cells do not match links/{format_delta(delta)} "
                "on disk (was the family rewritten since, or its nonempty_chunks not reconciled? run "
                "finalize_links after decentralised writes)"
            )
        _clear_attribute_family(level, name, delta)
        _create_attribute_family(level, name, delta, counts.num_links if counts else None)
    elif read_node(level.storage, level.node_path(link_attributes_group_path(name, delta))) is None:
        raise ArrayError(f"link attribute {name!r}: nothing to append to at delta {delta}")
    for s, (segment, offsets) in enumerate(zip(partition.segments, partition.segment_offsets)):
        _open_or_create_attribute_array(level, name, delta, segment, offsets, arr.dtype, arr.shape[1:], comp)
    existing: dict[int, bytes] = {}
    if appending:
        row_bytes = arr.dtype.itemsize * int(np.prod(arr.shape[1:], dtype=np.int64))
        requests = []
        groups = []
        for g, (s, cell, _, _) in enumerate(partition.iter_groups()):
            if partition.base_rows[g]:
                requests.append((level.array(_attr_array_rel(name, delta, partition.segments[s])), cell))
                groups.append(g)
        for g, (grid, cell), raw in zip(groups, requests, read_cells_many(requests)):
            if len(raw) != int(partition.base_rows[g]) * row_bytes:
                raise ArrayError(
                    f"{grid.path} cell {format_chunk_key(cell)}: holds {len(raw) // max(row_bytes, 1)} rows, "
                    f"the link cell held {int(partition.base_rows[g])} before the append"
                )
            existing[g] = raw
    batches = _attribute_cell_batches(level, name, delta, partition, physical, existing)
    write_cells_many(batches)
    for grid, cells in batches:
        _merge_presence(grid, cells)
    if appending and counts is not None:
        _update_group_attributes(level, link_attributes_group_path(name, delta), {"num_links": counts.num_links})


def _clear_attribute_family(level: Level, name: str, delta: int) -> None:
    level.known_arrays.clear()
    level.storage.delete_prefix(level.node_path(link_attributes_group_path(name, delta)))


def read_link_attributes(level: Level, name: str, delta: int = 0) -> np.ndarray:
    """Rows of ``link_attributes/<name>/<delta>/``, aligned with :func:`read_links`.

    Uses the same enumeration of the link family; the attribute family must mirror its
    cells (and, when the link family records it, its row count), else ArrayError.
    """
    policy = link_family_policy(level, delta)
    if policy is None:
        return np.zeros(0)
    arrays = _enumerate_family(level, policy)
    group_rel = link_attributes_group_path(name, delta)
    if read_node(level.storage, level.node_path(group_rel)) is None:
        if any(fa.cells for fa in arrays):
            raise ArrayError(f"level {level.number}: no link attribute {name!r} at delta {format_delta(delta)}")
        return np.zeros(0)
    attr_segments = set(level.children(group_rel))
    extra = attr_segments - {fa.segment for fa in arrays}
    if extra:
        raise ArrayError(f"{level.node_path(group_rel)}: arrays {sorted(extra)} have no link array to mirror")
    requests = []
    spec: tuple[np.dtype, tuple[int, ...]] | None = None
    for fa in arrays:
        if not fa.cells:
            continue
        rel = _attr_array_rel(name, delta, fa.segment)
        if not level.has(rel):
            raise ArrayError(f"level {level.number}: {rel} is missing; attributes must mirror every link array")
        grid = level.array(rel)
        if set(grid.nonempty_chunk_coords()) != set(fa.cells):
            raise ArrayError(f"{grid.path}: its cells do not mirror {fa.grid.path}")
        dt = np.dtype(grid.attributes.get("dtype", "float32")).newbyteorder("<")
        rs = tuple(int(x) for x in grid.attributes.get("row_shape", []))
        if spec is None:
            spec = (dt, rs)
        elif spec != (dt, rs):
            raise ArrayError(f"{grid.path}: dtype/row_shape {dt}/{list(rs)} differ across the family")
        requests += [(grid, cell) for cell in fa.cells]
    if spec is None:
        return np.zeros(0)
    dt, rs = spec
    payload = b"".join(read_cells_many(requests))
    row_elems = int(np.prod(rs, dtype=np.int64))
    if len(payload) % (dt.itemsize * max(row_elems, 1)):
        raise EncodingError(f"{level.node_path(group_rel)}: cells are not whole rows of {dt} x {list(rs)}")
    out = np.frombuffer(payload, dtype=dt).reshape((-1, *rs)) if row_elems else np.zeros((0, *rs), dt)
    stamped = ((_family_document(level, delta) or {}).get("attributes") or {}).get("num_physical_records")
    if stamped is not None and stamped != out.shape[0]:
        raise ArrayError(
            f"link attribute {name!r}: {out.shape[0]} rows but links/{format_delta(delta)} stores "
            f"{stamped} records"
        )
    return out


# ---------------------------------------------------------------------------------------
# reconcile
# ---------------------------------------------------------------------------------------
def derive_nonempty_chunks(grid: GridArray) -> list[str]:
    """Dotted keys of the cells present on disk, from a listing (unsharded arrays only)."""
    return grid.derive_nonempty_chunks()


def _logical_count(policy: LinkPolicy, records: LinkRecords, where: str) -> int:
    """Logical records among decoded physical rows.

    Every copy of a record decodes to the same input-order endpoints and a record has
    exactly as many copies as placement makes (one per distinct endpoint chunk under
    duplicate at delta 0), so identical decoded rows are grouped and each group of
    ``m`` rows of a record with ``K`` copies counts ``m / K`` records.  Repeated input
    records are counted, not merged.
    """
    count = len(records)
    if policy.store != "duplicate" or policy.delta != 0 or count == 0:
        return count
    flat = np.concatenate([records.chunks.reshape(count, -1), records.vi], axis=1)
    uniq, first, mult = np.unique(flat, axis=0, return_index=True, return_counts=True)
    copies = copies_per_record(records.chunks[first], delta=policy.delta, store=policy.store)
    bad = mult % copies != 0
    if bad.any():
        i = int(np.argmax(bad))
        raise ArrayError(
            f"{where}: record {records.as_tuples()[int(first[i])]} has {int(mult[i])} stored copies, not a "
            f"multiple of its {int(copies[i])} incident chunks; the duplicate family is incomplete"
        )
    return int((mult // copies).sum())


def link_presence_arrays(level: Level, delta: int) -> list[str]:
    """Every array of the family whose ``nonempty_chunks`` :func:`finalize_links` rebuilds:
    the offsets arrays, ``link_fragments`` (delta 0) and the link attribute arrays."""
    rels = [_array_rel(delta, s) for s in list_link_offsets(level, delta)]
    if delta == 0 and level.has(LINK_FRAGMENTS):
        rels.append(LINK_FRAGMENTS)
    for name in list_link_attribute_names(level):
        rel = link_attributes_group_path(name, delta)
        rels += [f"{rel}/{segment}" for segment in level.children(rel) if level.has(f"{rel}/{segment}")]
    return rels


def reconcile_presence(level: Level, rels: Sequence[str]) -> None:
    """Rewrite the ``nonempty_chunks`` of the arrays ``rels`` from a listing, where it changed.

    The presence half of :func:`finalize_links`; arrays are independent, so a job may
    run it over disjoint runs of :func:`link_presence_arrays` side by side.
    """
    for rel in rels:
        grid = level.array(rel)
        keys = derive_nonempty_chunks(grid)
        if keys != grid.nonempty_chunks:
            grid.set_nonempty_chunks(keys)


def stamp_link_counts(level: Level, delta: int, counts: LinkCounts) -> None:
    """The counting half of :func:`finalize_links`: stamp counts the write tasks know."""
    _stamp_counts(level, delta, counts, attributes=True)


def finalize_links(
    level: Level,
    delta: int,
    *,
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None,
    counts: LinkCounts | None = None,
) -> LinkCounts:
    """Reconcile ``links/<delta>/`` after decentralised writes (the single coordinator step).

    Rebuilds ``nonempty_chunks`` of every offsets array, of ``link_fragments`` (delta 0)
    and of every ``link_attributes/*/<delta>/`` array from a listing, then stamps
    ``num_physical_records`` (rows on disk) and ``num_links`` (logical records) on the
    family and ``num_links`` on its attribute families.  Must run before sharding.
    Safe to run twice.  ``counts``, when the write tasks already know them (logical
    records in, rows written), are stamped instead of decoding every record.
    """
    policy = _require_policy(level, delta)
    rels = link_presence_arrays(level, delta)
    if not level.storage.is_remote or len(rels) < 2:
        reconcile_presence(level, rels)
    else:  # remote: every array is a few round trips (metadata, listing, write); overlap them
        with ThreadPoolExecutor(min(16, len(rels))) as pool:
            list(pool.map(lambda rel: reconcile_presence(level, [rel]), rels))
    if counts is None:  # not known from the write tasks: decode every record to count them
        records, total = _read_family_records(level, policy, anchor_ratios)
        counts = LinkCounts(_logical_count(policy, records, _family_path(level, delta)), total)
    stamp_link_counts(level, delta, counts)
    return counts
