"""A links family's policy and the record arrays placement works on (docs/format.md §7).

The family-wide policy (``link_width``, ``directed``, ``store``, ``sid_ndim``, level
delta) decides everything else: whether an offsets array carries ``perm_idx``
(:func:`links_has_perm`, the single definition), whether a cell is flat, how many
copies a record has.  Pure: nothing here reads or writes a store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from zarr_vectors.errors import ArrayError, InputError
from zarr_vectors.format.links.placement import STORE_POLICIES, copies_per_record
from zarr_vectors.format.paths import format_delta, is_intra, parse_offsets

Chunk = tuple[int, ...]
OffsetsT = tuple[tuple[int, ...], ...]
StorePolicy = Literal["canonical", "duplicate"]


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


def make_policy(delta: int, link_width: int, directed: bool, store: str, sid_ndim: int) -> LinkPolicy:
    _check_policy_args(link_width, directed, store, sid_ndim)
    format_delta(delta)  # refuses a non-integer delta
    return LinkPolicy(int(delta), int(link_width), bool(directed), str(store), int(sid_ndim))


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

    # the reference's readers return ``[((chunk, vi), ...), ...]``: these records index,
    # iterate and compare (``== []`` for none) as that list does
    def __iter__(self) -> Iterator[tuple[tuple[Chunk, int], ...]]:
        return iter(self.as_tuples())

    def __getitem__(self, i: int) -> tuple[tuple[Chunk, int], ...]:
        return tuple((tuple(c), v) for c, v in zip(self.chunks[i].tolist(), self.vi[i].tolist()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LinkRecords):
            return bool(np.array_equal(self.chunks, other.chunks) and np.array_equal(self.vi, other.vi))
        if isinstance(other, (list, tuple)):
            try:
                return self.as_tuples() == [tuple((tuple(c), v) for c, v in r) for r in other]
            except (TypeError, ValueError):  # not a list of records: unequal
                return False
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

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


def as_int_array(values: ArrayLike, what: str) -> np.ndarray:
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


def as_records(chunks: ArrayLike, vi: ArrayLike, *, sid_ndim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``chunks (n, L, D)`` and ``vi (n, L)`` as int64, or an error naming the problem."""
    c = as_int_array(chunks, "chunks")
    v = as_int_array(vi, "vi")
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


def check_endpoint_deltas(endpoint_deltas: ArrayLike | None, shape: tuple[int, int], delta: int) -> None:
    """Refuse mixed-resolution records: endpoints 1..L-1 must all sit at owning + delta."""
    if endpoint_deltas is None:
        return
    d = as_int_array(endpoint_deltas, "endpoint_deltas")
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
            f"level delta {delta}; a mixed-resolution record cannot be expressed (docs/format.md §7.4, "
            "'Mixed-resolution records - current limitation')"
        )


def offsets_tuple(offsets: str | Sequence[Sequence[int]], policy: LinkPolicy) -> OffsetsT:
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


def as_chunk(chunk: Sequence[int], sid_ndim: int) -> Chunk:
    c = tuple(int(v) for v in chunk)
    if len(c) != sid_ndim:
        raise ArrayError(f"chunk {c} has {len(c)} coordinates, the family uses sid_ndim {sid_ndim}")
    return c


def ratios_arg(
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


def logical_count(policy: LinkPolicy, records: LinkRecords, where: str) -> int:
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
