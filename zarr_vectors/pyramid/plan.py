"""The plan of a pyramid build: every check, level 0 as found, the new levels, what is cleared.

:func:`plan_pyramid` runs every check that needs no task (arguments, the store's kind and
level 0, the presence lists of the arrays the pyramid reads (D26), the bin/chunk nesting
of every new level) and returns a :class:`PyramidPlan` to inspect before anything
changes: which storage prefixes a build removes, each new level's bins and chunks, the
task sizing.  The object index is decoded (under D1) by the task that plans level 1's
objects, in level 1's bin graph.  Nothing here writes; once every check -- that task's
included -- passed, :func:`reset_root` makes the root name level 0 alone and
:func:`clear_pyramid` carries out the plan's removals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from zarr_vectors import config
from zarr_vectors.errors import EncodingError, InputError
from zarr_vectors.format.coarsen import REDUCTIONS, default_reduction
from zarr_vectors.format.paths import format_chunk_key, parse_delta
from zarr_vectors.reconcile import require_reconciled
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.groups import Level, ZVStore, open_level_beside, refuse_unfinished_relayout
from zarr_vectors.store.kinds import store_kind

__all__ = [
    "LevelState",
    "NewLevel",
    "PyramidPlan",
    "check_factors",
    "check_reconciled",
    "clear_pyramid",
    "plan_pyramid",
    "reset_root",
]

CROSS_LEVEL_STORAGES = ("none", "implicit", "explicit")
PYRAMID_TOKENS = ("preserved_object_ids", "shared_fragments", "multiscale_links")
READ_ARRAYS = ("vertices", "vertex_fragments")
"""The level-0 arrays the pyramid reads: their presence lists are checked before anything else."""


# ---------------------------------------------------------------------------
# argument checks (nothing is opened)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Factor:
    coarsen: float
    sparsity: float
    scale: Any  # int or a per-axis sequence, checked against the store's rank later


def _real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def check_factors(factors: Any, chunk_scale_factors: Any = None, base_bin: Sequence[float] = ()) -> list[_Factor]:
    """Each new level's (coarsen, sparsity) factors, refused unless finite and >= 1 and, from
    level 0's bin ``base_bin`` where it is known, unless every level's bin stays finite (before
    a build writes anything: ``pipeline.jobs.preflight``)."""
    if isinstance(factors, (str, bytes)) or not isinstance(factors, Sequence) or len(factors) == 0:
        raise InputError(
            f"factors must be a non-empty list of (coarsen, sparsity_factor) pairs, one per new level, got {factors!r}"
        )
    if chunk_scale_factors is not None:
        if isinstance(chunk_scale_factors, (str, bytes)) or not isinstance(chunk_scale_factors, Sequence):
            raise InputError(
                f"chunk_scale_factors must be a list with one entry per new level, got {chunk_scale_factors!r}"
            )
        if len(chunk_scale_factors) != len(factors):
            raise InputError(
                f"chunk_scale_factors has {len(chunk_scale_factors)} entries but factors has {len(factors)}: "
                "give one per new level"
            )
    out = []
    for i, entry in enumerate(factors):
        if _real(entry):
            coarsen, sparsity = entry, 1.0
        elif isinstance(entry, Sequence) and not isinstance(entry, (str, bytes)) and len(entry) == 2:
            coarsen, sparsity = entry
        else:
            raise InputError(f"factors[{i}] must be a (coarsen, sparsity_factor) pair, got {entry!r}")
        if not _real(coarsen) or not math.isfinite(float(coarsen)) or float(coarsen) < 1:
            raise InputError(
                f"factors[{i}]: coarsen factor {coarsen!r} must be a finite number >= 1 (a level's bins are at "
                "least its parent's)"
            )
        if not _real(sparsity) or not math.isfinite(float(sparsity)) or float(sparsity) < 1:
            raise InputError(
                f"factors[{i}]: sparsity factor {sparsity!r} must be a finite number in [1, inf) (1 keeps every "
                "object, 2 about half)"
            )
        scale = chunk_scale_factors[i] if chunk_scale_factors is not None else 1
        out.append(_Factor(float(coarsen), float(sparsity), scale))
    bins = [float(b) for b in base_bin]
    for i, f in enumerate(out):
        bins = [b * f.coarsen for b in bins]
        _check_finite_bin(bins, i)
    return out


def _check_finite_bin(bin_shape: Sequence[float], i: int) -> None:
    """A level's bin is its multiscales scale: an infinite one makes the store's root
    document unreadable, every level with it."""
    if not all(math.isfinite(b) for b in bin_shape):
        raise InputError(f"factors[{i}]: level {i + 1}'s bin would be {[float(b) for b in bin_shape]}, not finite: "
                         "the coarsening factors multiply past the largest number")


#: the largest product of chunk scale factors on an axis, level 0 to any level
MAX_CHUNK_SCALE = 2**31


def _check_scale(scale: Any, ndim: int, i: int) -> tuple[int, ...]:
    values = list(scale) if isinstance(scale, Sequence) and not isinstance(scale, (str, bytes)) else [scale] * ndim
    if len(values) != ndim:
        raise InputError(f"chunk_scale_factors[{i}] has {len(values)} entries, the store has {ndim} axes")
    out = []
    for v in values:
        if not _real(v) or not math.isfinite(float(v)) or float(v) != int(v) or int(v) < 1:
            raise InputError(
                f"chunk_scale_factors[{i}] = {scale!r}: every entry must be a positive integer (a level's chunk is "
                "an integer multiple of its parent's)"
            )
        out.append(int(v))
    return tuple(out)


def _aggregation(level: Level, aggregate: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """Each level-0 vertex attribute's reduction (D22): as asked, else by dtype; unknown names refused."""
    names = sorted(n for n in level.children("vertex_attributes"))
    if aggregate is not None and not isinstance(aggregate, Mapping):
        raise InputError(f"aggregate must map vertex attribute names to reductions, found {aggregate!r}")
    asked = dict(aggregate or {})
    unknown = sorted(set(asked) - set(names))
    if unknown:
        raise InputError(
            f"aggregate names {unknown}, which level 0 has no vertex attribute of (it has {names or 'none'})"
        )
    out = []
    for name in names:
        how = asked.get(name)
        if how is None:
            how = default_reduction(np.dtype(level.array(f"vertex_attributes/{name}").attributes["dtype"]))
        elif how not in REDUCTIONS:
            raise InputError(f"aggregate {name}={how!r}: the reduction must be one of {list(REDUCTIONS)}")
        out.append((name, how))
    return tuple(out)


def _check_options(storage: Any, depth: Any, seed: Any) -> None:
    if storage not in CROSS_LEVEL_STORAGES:
        raise InputError(f"cross_level_storage must be one of {list(CROSS_LEVEL_STORAGES)}, got {storage!r}")
    if not isinstance(depth, (int, np.integer)) or isinstance(depth, (bool, np.bool_)) or depth < -1:
        raise InputError(f"cross_level_depth must be an integer >= -1 (-1 = every pair of levels), got {depth!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, (bool, np.bool_)) or seed < 0:
        raise InputError(f"sparsity_seed must be a non-negative integer, got {seed!r}")


# ---------------------------------------------------------------------------
# the store as found
# ---------------------------------------------------------------------------
def _delta_of(level: Level, name: str, where: str) -> int:
    try:
        return parse_delta(name)
    except ValueError:
        raise InputError(
            f"level {level.number}: {where}/{name} is not a level delta (the store is malformed)"
        ) from None


def _read_arrays(level: Level) -> list[str]:
    """The level-0 grid arrays the build reads: the vertex arrays and the vertex attributes (D26)."""
    out = [n for n in READ_ARRAYS if level.has(n)]
    names = level.children("vertex_attributes")
    return out + [f"vertex_attributes/{n}" for n in names if level.has(f"vertex_attributes/{n}")]


def _unread_groups(rel: str) -> bool:
    """The level-0 groups whose children the plan needs only the names of: the links families
    and the link attribute families (none is read; a rebuild removes the cross-level ones)."""
    parts = rel.split("/")
    return (parts[0] == "links" and len(parts) == 2) or (parts[0] == "link_attributes" and len(parts) == 3)


def _replaced(store: ZVStore, level0: Level, top: Sequence[str]) -> tuple[str, ...]:
    """Storage prefixes a build removes: levels >= 1 (``top``: the root's names) and level 0's
    cross-level families.

    ``links`` itself goes too when nothing but cross-level families is in it.
    """
    out = [str(n) for n in store.level_numbers(top) if n >= 1]
    deltas = level0.children("links")
    crossing = [d for d in deltas if _delta_of(level0, d, "links") != 0]
    out += [level0.node_path(f"links/{d}") for d in crossing]
    if level0.has("links") and len(crossing) == len(deltas):
        out.append(level0.node_path("links"))
    for name in level0.children("link_attributes"):
        rel = f"link_attributes/{name}"
        out += [level0.node_path(f"{rel}/{d}") for d in level0.children(rel) if _delta_of(level0, d, rel) != 0]
    return tuple(out)


def check_reconciled(level: Level, rels: Sequence[str]) -> None:
    """Refuse the level when any of the grid arrays ``rels`` lists other cells than it holds."""
    grids = [level.array(rel) for rel in rels]
    listings = level.storage.overlap(GridArray.derive_nonempty_chunks, grids)
    require_reconciled(f"level {level.number}", grids, listings)


@dataclass
class LevelState:
    """What the build knows about one level that exists on disk."""

    level: Level
    chunk_shape: tuple[float, ...]
    bin_shape: tuple[float, ...]
    ratios: tuple[int, ...]  # chunk shape / the root's: the level's anchor ratios
    origin: tuple[int, ...]  # vertices grid
    shape: tuple[int, ...]
    cells: np.ndarray  # (c, D) occupied vertex cells, ascending
    counts: np.ndarray | None  # rows per cell (known for built levels)
    grids: dict[str, GridArray] = field(default_factory=dict)  # level 0: the arrays the build reads, as checked

    @property
    def number(self) -> int:
        return self.level.number

    def array(self, rel: str) -> GridArray:
        """The array at ``rel``: as the plan read it (the build adds families to level 0 but changes
        none of the arrays it keeps), else from storage."""
        return self.grids[rel] if rel in self.grids else self.level.array(rel)

    def occupied_box(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(origin, shape) of the smallest box of chunks holding every occupied cell: what the build
        addresses.  The arrays' declared grid may be far larger (the format lets a writer declare any
        shape that covers its cells), and a key space sized from it overflows."""
        if not len(self.cells):
            return self.origin, (0,) * len(self.origin)
        lo, hi = self.cells.min(axis=0), self.cells.max(axis=0)
        return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo + 1)

    def rank(self, chunks: np.ndarray, what: str) -> np.ndarray:
        """Index into ``cells`` of each chunk (every one must be an occupied cell)."""
        if len(chunks) == 0:
            return np.zeros(0, dtype=np.int64)
        origin, shape = self.occupied_box()
        if math.prod(shape) >= 1 << 62:
            raise InputError(f"level {self.number}: its cells spread over {list(shape)} chunks, too many to address")
        lo, hi = np.asarray(origin), np.asarray(origin) + np.asarray(shape)
        inside = ((chunks >= lo) & (chunks < hi)).all(axis=1)

        def linear(at: np.ndarray) -> np.ndarray:
            return np.ravel_multi_index(tuple((at - lo).T), shape)

        keys = linear(self.cells) if len(self.cells) else np.zeros(0, np.int64)
        q = linear(np.where(inside[:, None], chunks, lo))
        pos = np.minimum(np.searchsorted(keys, q), max(len(keys) - 1, 0))
        ok = inside & (keys[pos] == q) if len(keys) else np.zeros(len(chunks), bool)
        if not ok.all():
            i = int(np.argmin(ok))
            raise EncodingError(
                f"level {self.number}: {what} names chunk {format_chunk_key(chunks[i].tolist())}, which has no "
                "vertex cell"
            )
        return pos.astype(np.int64)


def level_ratios(chunk_shape: Sequence[float], root_cs: Sequence[float]) -> tuple[int, ...]:
    return tuple(int(round(c / r)) for c, r in zip(chunk_shape, root_cs))


def _level0_state(level: Level) -> LevelState:
    """Level 0 as planning reads it: its metadata from one walk (:func:`open_level`)."""
    store = level.store
    if not level.has("vertices"):
        raise InputError(f"{store.url!r}: level 0 has no vertices array; nothing to coarsen")
    grid = level.array("vertices")
    ndim = store.root.sid_ndim
    if grid.ndim != ndim:
        raise InputError(
            f"{store.url!r}: level 0 is attribute-chunked (chunk keys of rank {grid.ndim}); pyramids of "
            "attribute-chunked levels are not supported"
        )
    cs = level.chunk_shape
    cells = np.asarray(sorted(grid.nonempty_chunk_coords()), dtype=np.int64).reshape(-1, ndim)
    return LevelState(
        level=level,
        chunk_shape=tuple(cs),
        bin_shape=store.root.bin_shape(0),
        ratios=level_ratios(cs, store.root.chunk_shape),
        origin=grid.origin,
        shape=grid.shape,
        cells=cells,
        counts=None,
    )


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class NewLevel:
    """One level a build will write."""

    number: int
    bin_shape: tuple[float, ...]
    chunk_shape: tuple[float, ...]
    sparsity: float


def _plan_levels(store: ZVStore, base: LevelState, factors: list[_Factor]) -> list[NewLevel]:
    ndim = store.root.sid_ndim
    out = []
    bin_shape, chunk_shape = base.bin_shape, base.chunk_shape
    scaled = (1,) * ndim  # each level's chunk over level 0's: a links family's anchor ratio is one of these
    for i, f in enumerate(factors):
        scale = _check_scale(f.scale, ndim, i)
        scaled = tuple(t * s for t, s in zip(scaled, scale))
        if max(scaled) > MAX_CHUNK_SCALE:
            raise InputError(f"chunk_scale_factors[{i}]: level {i + 1}'s chunk would be {list(scaled)} times level "
                             f"0's; at most {MAX_CHUNK_SCALE} (2**31) per axis, so that cell indices times it stay "
                             "64-bit integers")
        bin_shape = tuple(b * f.coarsen for b in bin_shape)
        _check_finite_bin(bin_shape, i)
        chunk_shape = tuple(c * s for c, s in zip(chunk_shape, scale))
        for d, (b, c) in enumerate(zip(bin_shape, chunk_shape)):
            if b <= c:
                ratio = c / b
                if abs(ratio - round(ratio)) > 1e-9 * max(1.0, ratio):
                    raise InputError(
                        f"level {i + 1}: bin {b:g} (parent bin x {f.coarsen:g}) does not divide chunk {c:g} on axis "
                        f"{d}; a bin no larger than its chunk must divide it (docs/validation.md L5). Choose a coarsening "
                        "factor (or chunk scale) so that the chunk is a whole number of bins"
                    )
        out.append(NewLevel(i + 1, bin_shape, chunk_shape, f.sparsity))
    return out


@dataclass(frozen=True, eq=False)
class PyramidPlan:
    """Everything a build will do, decided before anything is written or removed."""

    store: ZVStore
    base: LevelState  # level 0 as found
    kind: str  # the store's geometry type
    has_objects: bool  # level 0 has an object index (decoded by level 1's object plan task)
    levels: tuple[NewLevel, ...]
    cross_level_storage: str
    cross_level_depth: int
    seed: int
    tasks_per_thread: int  # bin/map groups per worker thread (``zarr_vectors.pyramid.tasks-per-thread``)
    aggregation: tuple[tuple[str, str], ...]  # (vertex attribute, reduction) the coarse levels carry (D22)
    removes: tuple[str, ...]  # storage prefixes removed once every check passed
    replaced_levels: tuple[int, ...] = ()  # levels >= 1 the store holds now, which the build replaces

    @property
    def max_delta(self) -> int:
        """The largest ``|k|`` of a cross-level family the build writes (0: none)."""
        if self.cross_level_storage == "none":
            return 0
        return len(self.levels) if self.cross_level_depth == -1 else self.cross_level_depth


def plan_pyramid(
    url: Any,
    *,
    factors: Sequence[Any],
    chunk_scale_factors: Sequence[Any] | None = None,
    cross_level_storage: str = "explicit",
    cross_level_depth: int = 1,
    sparsity_seed: int = 0,
    aggregate: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> PyramidPlan:
    """Check a build's arguments and store and plan it (the arguments of :func:`build_pyramid`).

    Reads level 0's metadata and the listings of the arrays the pyramid reads; raises
    before anything is written.
    """
    parsed = check_factors(factors, chunk_scale_factors)
    _check_options(cross_level_storage, cross_level_depth, sparsity_seed)
    # the root's listing (the levels a build replaces) in the walk's first round trip
    storage = url if isinstance(url, Storage) else Storage(url, storage_options)
    level0, (top,) = open_level_beside(storage, 0, [lambda: storage.list_dir("")], skim=_unread_groups)
    store = level0.store
    refuse_unfinished_relayout(storage, top, "building a pyramid")  # before anything is read for the plan
    kind = store_kind(store).kind  # a kind list reads as one kind (D19); refused when none fits
    base = _level0_state(level0)
    aggregation = _aggregation(base.level, aggregate)
    read_here = _read_arrays(base.level)
    check_reconciled(base.level, read_here)  # the arrays the pyramid reads: before anything else (D26)
    has_objects = base.level.has("object_index")
    if not has_objects and any(f.sparsity != 1 for f in parsed):
        raise InputError(
            f"{store.url!r} has no object ids, so there are no objects to drop: object sparsity needs an "
            "object index (use sparsity factor 1)"
        )
    removes = _replaced(store, base.level, top)
    replaced_levels = tuple(n for n in store.level_numbers(top) if n >= 1)
    base.grids = dict(zip(read_here, base.level.arrays(read_here)))  # from the snapshot, as checked
    base.level = replace(base.level, snapshot=None)  # the build writes into level 0: it asks storage again
    return PyramidPlan(
        store=store,
        base=base,
        kind=kind,
        has_objects=has_objects,
        levels=tuple(_plan_levels(store, base, parsed)),
        cross_level_storage=cross_level_storage,
        cross_level_depth=int(cross_level_depth),
        seed=int(sparsity_seed),
        tasks_per_thread=int(config.get("pyramid.tasks-per-thread")),
        aggregation=aggregation,
        removes=removes,
        replaced_levels=replaced_levels,
    )


def reset_root(plan: PyramidPlan) -> None:
    """Make the root name level 0 alone, with the plan's cross-level settings (only once every
    check passed), before anything is removed: a build stopped during the removal then leaves a
    root naming nothing that is gone."""
    store = plan.store
    root = store.root
    before = root.to_attributes()
    root.datasets = [d for d in root.datasets if d.path == "0"]
    root.format_capabilities = [c for c in root.format_capabilities if c not in PYRAMID_TOKENS]
    root.cross_level_storage = plan.cross_level_storage
    root.cross_level_depth = plan.cross_level_depth
    # a root that named none of what goes is written with the first new level's dataset
    # instead (one write, not two)
    if plan.removes or _pyramid_keys(root.to_attributes()) != _pyramid_keys(before):
        store.write_root()


def clear_pyramid(plan: PyramidPlan) -> None:
    """Remove what the plan replaces (after :func:`reset_root`)."""
    for prefix in plan.removes:
        plan.store.storage.delete_prefix(prefix)


def _pyramid_keys(attributes: dict[str, Any]) -> Any:
    """What of the root names pyramid levels: its datasets and capability tokens."""
    block = attributes.get("zarr_vectors", {})
    return attributes.get("multiscales"), block.get("format_capabilities")
