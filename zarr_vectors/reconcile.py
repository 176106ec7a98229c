"""The reconcile step: what a level's array-wide metadata must say once its cells are written.

Cell writers (vertex owners, link owners, the pyramid's tasks) write whole cells and
touch nothing array-wide.  Everything array-wide is decided here, once, for every
writer, the pyramid and sharding alike:

* **presence** -- ``nonempty_chunks`` compared with, or rebuilt from, a listing of the
  cells on storage (:func:`presence_mismatch`, :func:`confirm_presence`,
  :func:`rebuild_presence`, :func:`merge_presence`, :func:`require_reconciled`); a
  disagreement is always a :class:`~zarr_vectors.errors.PresenceMismatchError`;
* **counts** -- a links family's ``num_links`` / ``num_physical_records``
  (:func:`stamp_link_counts`, :func:`finalize_links`, and :func:`finalize_created_family`
  for a family whose coordinator and writers report everything it holds);
* **object tables** -- the object index's manifests and the object attributes
  (:func:`write_object_index`, :func:`write_object_attributes`), whoever computed them;
* **the level document** -- ``arrays_present``, ``vertex_count``, ``fragments_tile``
  (:func:`finish_level`).

Every function here is safe to run twice: a retried reconcile task gives the same store.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.encoding import encode_mode0_manifests
from zarr_vectors.errors import InternalError, PresenceMismatchError
from zarr_vectors.format.links import Chunk, LinkCounts, logical_count
from zarr_vectors.format.paths import format_chunk_key, link_attributes_group_path
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.groups import Level
from zarr_vectors.store.link_cells import LinkWriteSummary
from zarr_vectors.store.link_family import (
    LINK_FRAGMENTS,
    CreatedFamily,
    family_path,
    link_array_rel,
    list_link_attribute_names,
    list_link_offsets,
    require_policy,
    stamp_counts,
)
from zarr_vectors.store.link_read import read_family_records
from zarr_vectors.store.nodes import group_document, write_node, write_nodes
from zarr_vectors.store.object_index import write_object_index as write_manifests
from zarr_vectors.store.tables import write_table

__all__ = [
    "ObjectAttributeTable",
    "confirm_presence",
    "finalize_created_family",
    "finalize_links",
    "finish_level",
    "link_presence_arrays",
    "merge_presence",
    "presence_mismatch",
    "rebuild_presence",
    "refuse_unreconciled",
    "require_reconciled",
    "stamp_link_counts",
    "write_object_attributes",
    "write_object_index",
]


# ---------------------------------------------------------------------------------------
# presence
# ---------------------------------------------------------------------------------------
def presence_mismatch(grid: GridArray, on_storage: Iterable[str], expected: Iterable[str] | None = None) -> str | None:
    """A line naming how ``expected`` (default: the array's own list) differs from the cells
    on storage, or None when they agree."""
    listed = set(grid.nonempty_chunks if expected is None else expected)
    present = set(on_storage)
    if listed == present:
        return None
    absent, extra = sorted(listed - present), sorted(present - listed)
    return (
        f"{grid.path}: {len(absent)} listed but not on storage {absent[:3]}, "
        f"{len(extra)} on storage but not listed {extra[:3]}"
    )


def _raise_mismatches(headline: str, problems: Sequence[str], advice: str) -> None:
    if problems:
        shown = "\n  ".join(problems[:5]) + ("\n  ..." if len(problems) > 5 else "")
        raise PresenceMismatchError(
            f"{headline}: the nonempty_chunks of {len(problems)} grid array(s) do not match the cells on storage:"
            f"\n  {shown}\n{advice}"
        )


def confirm_presence(grid: GridArray, keys: Iterable[str]) -> None:
    """Stamp ``keys`` -- the cells the write tasks report -- after checking a listing agrees.

    A disagreement means a write task's cells are missing or a stranger's are present:
    the store is not complete, and nothing is stamped.
    """
    expected = sorted(set(keys))
    problem = presence_mismatch(grid, grid.derive_nonempty_chunks(), expected)
    _raise_mismatches(
        f"{grid.path}: the write is incomplete", [problem] if problem else [], "Run the write again."
    )
    grid.set_nonempty_chunks(expected)


def rebuild_presence(level: Level, rels: Sequence[str]) -> None:
    """Rewrite the ``nonempty_chunks`` of the arrays ``rels`` from a listing, where it changed.

    Arrays are independent, so a job may run this over disjoint runs of arrays side by side;
    within a run the documents are read in one batch and each array's listing and rewrite
    overlap the others' (on S3 they were three blocking round trips per array, in turn).
    """

    def rebuild(grid: GridArray) -> None:
        keys = grid.derive_nonempty_chunks()
        if keys != grid.nonempty_chunks:
            grid.set_nonempty_chunks(keys)

    level.storage.overlap(rebuild, level.arrays(rels))


def merge_presence(grid: GridArray, cells: Mapping[Chunk, bytes]) -> None:
    """Fold cells one process just wrote (empty payload = removed) into the current list."""
    grid = GridArray.open(grid.storage, grid.path)  # the current list, not a writer's remembered copy
    present = set(grid.nonempty_chunks)
    for chunk, payload in cells.items():
        (present.add if payload else present.discard)(format_chunk_key(chunk))
    grid.set_nonempty_chunks(present)


def require_reconciled(what: str, grids: Sequence[GridArray], on_storage: Sequence[Iterable[str]]) -> None:
    """Refuse arrays whose presence list is not exactly their cells on storage (D15).

    ``what`` names the store or level; ``on_storage[i]`` is the listing of ``grids[i]`` (callers list however suits them:
    locally, on a thread pool, as Dask tasks).  Readers of a store -- the pyramid,
    sharding -- trust presence lists, so an unreconciled store is refused before
    anything changes.
    """
    refuse_unreconciled(what, [p for grid, keys in zip(grids, on_storage) if (p := presence_mismatch(grid, keys))])


def refuse_unreconciled(what: str, problems: Sequence[str | None]) -> None:
    """:func:`require_reconciled` from the :func:`presence_mismatch` lines of arrays checked
    apart (one task per array: only the lines, never the listings, travel)."""
    problems = [p for p in problems if p]
    _raise_mismatches(
        f"{what} is not reconciled",
        problems,
        "Run the writer's reconcile step first (finalize_links for a links family written by hand) so every "
        "presence list names exactly its cells (docs/decisions.md D15). Nothing was changed.",
    )


# ---------------------------------------------------------------------------------------
# links families
# ---------------------------------------------------------------------------------------
def link_presence_arrays(level: Level, delta: int) -> list[str]:
    """Every array of ``links/<delta>`` whose presence list :func:`finalize_links` rebuilds:
    the offsets arrays, ``link_fragments`` (delta 0) and the link attribute arrays."""
    rels = [link_array_rel(delta, s) for s in list_link_offsets(level, delta)]
    if delta == 0 and level.has(LINK_FRAGMENTS):
        rels.append(LINK_FRAGMENTS)
    for name in list_link_attribute_names(level):
        rel = link_attributes_group_path(name, delta)
        below = [f"{rel}/{segment}" for segment in level.children(rel)]
        rels += [r for r, doc in zip(below, level.nodes(below)) if doc is not None]  # one batch, not a HEAD each
    return rels


def stamp_link_counts(level: Level, delta: int, counts: LinkCounts) -> None:
    """Stamp counts the write tasks know on the family and its attribute families."""
    stamp_counts(level, delta, counts, attributes=True)


def finalize_links(
    level: Level,
    delta: int,
    *,
    anchor_ratios: tuple[Sequence[int], Sequence[int]] | None = None,
    counts: LinkCounts | None = None,
) -> LinkCounts:
    """Reconcile ``links/<delta>/`` after decentralised writes.

    Rebuilds the presence lists of every array of the family from listings, then stamps
    ``num_physical_records`` (rows on storage) and ``num_links`` (logical records).
    ``counts``, when the write tasks already know them, are stamped instead of decoding
    every record.  Must run before sharding; safe to run twice.
    """
    policy = require_policy(level, delta)
    level.storage.overlap(lambda rel: rebuild_presence(level, [rel]), link_presence_arrays(level, delta))
    if counts is None:  # not known from the write tasks: decode every record to count them
        records, total = read_family_records(level, policy, anchor_ratios)
        counts = LinkCounts(logical_count(policy, records, family_path(level, delta)), total)
    stamp_link_counts(level, delta, counts)
    return counts


def finalize_created_family(
    level: Level, created: CreatedFamily, written: Sequence[LinkWriteSummary], counts: LinkCounts
) -> None:
    """:func:`finalize_links` for a family its coordinator just composed (``created``) and whose
    writers report every cell they wrote (``written``).

    Each array's listing must agree with the reports (else nothing is written); then every
    array's document, with its presence list, and the groups' counts go out in one batch:
    two rounds on an object store, where the general reconcile walks and re-reads.  An
    attribute array holds the cells of its offsets array.  A job runs the same three steps
    as tasks, the listings split over several (:func:`family_cells`,
    :func:`family_presence_problems`, :func:`write_family_documents`).
    """
    expected = family_cells(created, written)
    problems = family_presence_problems(level, created, expected, list(expected))
    write_family_documents(level, created, expected, counts, problems)


def family_cells(created: CreatedFamily, written: Sequence[LinkWriteSummary]) -> dict[str, set[str]]:
    """The cells of every array of the family (by level-relative path), as its writers report them."""
    by_segment: dict[str, set[str]] = {}
    for summary in written:
        for segment, keys in summary.cells.items():
            by_segment.setdefault(segment, set()).update(keys)
    expected: dict[str, set[str]] = {}
    for rel in created.every_array():
        if rel == LINK_FRAGMENTS:
            expected[rel] = set().union(*(by_segment.get(s, set()) for s in created.flat))
        else:
            expected[rel] = by_segment.get(posixpath.basename(rel), set())
    unknown = sorted(set(by_segment) - {posixpath.basename(r) for r in created.arrays})
    if unknown:
        raise InternalError(f"{created.path}: writers report segments the coordinator did not create: {unknown[:3]}")
    return expected


def family_presence_problems(
    level: Level, created: CreatedFamily, expected: Mapping[str, set[str]], rels: Sequence[str]
) -> list[str]:
    """How the listings of the arrays ``rels`` differ from the reported cells (one line per array that does)."""
    arrays = created.every_array()
    grids = [arrays[rel] for rel in rels]
    listings = level.storage.overlap(GridArray.derive_nonempty_chunks, grids)
    return [p for g, on, rel in zip(grids, listings, rels) if (p := presence_mismatch(g, on, expected[rel]))]


def write_family_documents(
    level: Level, created: CreatedFamily, expected: Mapping[str, set[str]], counts: LinkCounts,
    *problems: Sequence[str],
) -> None:
    """Every document of the family, once no listing disagreed with the reports (``problems``)."""
    _raise_mismatches(f"{created.path}: the write is incomplete", [p for part in problems for p in part],
                      "Run the write again.")
    arrays = created.every_array()
    for rel, cells in expected.items():
        arrays[rel].note_nonempty_chunks(cells)
    write_nodes(level.storage, created.documents(counts))


# ---------------------------------------------------------------------------------------
# object tables
# ---------------------------------------------------------------------------------------
def write_object_index(
    level: Level, ids: np.ndarray, chunks: np.ndarray, fragments: np.ndarray, *, num_objects: int, sid_ndim: int
) -> None:
    """The object index (layout v1, row = id) of ``(id, chunk, fragment)`` entries in manifest order."""
    manifests = encode_mode0_manifests(ids, chunks, fragments, num_objects)  # refuses ids out of order
    present = int(np.count_nonzero(ids[1:] != ids[:-1])) + 1 if len(ids) else 0  # sorted: no np.unique, no numpy.ma
    write_manifests(level, manifests, num_objects=num_objects, num_present=present, sid_ndim=sid_ndim)


@dataclass(frozen=True, eq=False)
class ObjectAttributeTable:
    """One ``object_attributes/<name>`` array to write: rows by object id and its document's parts."""

    values: np.ndarray
    fill_value: Any
    attributes: dict[str, Any]
    compressor: dict[str, Any] | None


def write_object_attributes(level: Level, tables: Mapping[str, ObjectAttributeTable]) -> None:
    """The ``object_attributes`` group and one table per name (nothing when there are none)."""
    if tables:
        write_node(level.storage, level.node_path("object_attributes"), group_document())
    for name, table in tables.items():
        write_table(
            level.storage,
            level.node_path(posixpath.join("object_attributes", name)),
            table.values,
            fill_value=table.fill_value,
            attributes=table.attributes,
            compressor=table.compressor,
        )


# ---------------------------------------------------------------------------------------
# the level document
# ---------------------------------------------------------------------------------------
def finish_level(level: Level, families: list[str], vertex_count: int, *done: None, fragments_tile: bool = False) -> None:
    """The last step of a level's reconcile, once every part of it (``done``) has run:
    the level metadata (``fragments_tile`` when every cell's fragments tile its rows)."""
    level.meta.arrays_present = families
    level.meta.vertex_count = vertex_count
    level.meta.fragments_tile = fragments_tile
    level.write_metadata()
