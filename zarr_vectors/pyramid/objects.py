"""A pyramid level's objects: which survive, their metavertex manifests, their kept attribute rows.

The selection (seeded sparsity) and the per-object metavertex lists are the coarsening
math's (:mod:`zarr_vectors.format.coarsen`, :mod:`zarr_vectors.format.crosslevel`);
the tables are written by :func:`zarr_vectors.reconcile.write_object_index` and
:func:`~zarr_vectors.reconcile.write_object_attributes`, as for every writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zarr_vectors.errors import EncodingError, InternalError
from zarr_vectors.format.coarsen import MetavertexLayout, select_objects, unique_sorted
from zarr_vectors.format.crosslevel import object_metavertices
from zarr_vectors.format.metadata import OBJECT_INDEX_LAYOUT
from zarr_vectors.pyramid.plan import LevelState
from zarr_vectors.reconcile import ObjectAttributeTable, write_object_attributes, write_object_index
from zarr_vectors.store.groups import Level
from zarr_vectors.store.nodes import fill_value_from_json, read_node
from zarr_vectors.store.object_index import ObjectIndex, read_object_index
from zarr_vectors.store.tables import read_table

__all__ = ["ORDERED_KINDS", "ObjectPlan", "kept_attribute_tables", "plan_objects", "write_kept_attributes", "write_objects"]

ORDERED_KINDS = ("polyline", "streamline", "line")  # manifests keep traversal order


@dataclass(frozen=True)
class ObjectPlan:
    """The coarse level's objects: parent slots, kept ids and the kept manifest blocks."""

    num_objects: int
    kept: np.ndarray  # ids, ascending
    block_object: np.ndarray  # kept blocks, manifest order
    block_cell: np.ndarray  # global source cell rank
    block_fragment: np.ndarray
    ordered: bool
    attributes: list[str]  # object attribute names at the source level


def plan_objects(
    src: LevelState, index: ObjectIndex | None, *, sparsity: float, seed: int, number: int, kind: str
) -> tuple[ObjectPlan, np.ndarray, np.ndarray]:
    """Kept objects and their blocks; and the surviving (cell rank, fragment) pairs the bin tasks read, sorted.

    A task of the level's bin graph: ``index`` None decodes the source level's object
    index here (under D1: layouts other than v1 are refused by name).
    """
    index = index or read_object_index(src.level)
    if index is None:
        raise EncodingError(f"level {src.number} has no object_index but its parent has one")
    ids = index.ids[index.block_row]  # rows ascend, so do v1 ids
    present = ids[np.r_[True, ids[1:] != ids[:-1]]] if index.layout == OBJECT_INDEX_LAYOUT else unique_sorted(ids)
    kept = select_objects(present, sparsity, seed, number)
    if kept.size == present.size:
        keep = slice(None)
    else:
        wanted = np.zeros(int(index.ids.max()) + 1 if index.ids.size else 0, dtype=bool)
        wanted[kept] = True
        keep = wanted[ids]
    cell = src.rank(index.block_chunk[keep], "a manifest")
    frag = index.block_fragment[keep]
    plan = ObjectPlan(
        num_objects=int(index.ids.size),
        kept=kept,
        block_object=ids[keep],
        block_cell=cell,
        block_fragment=frag,
        ordered=kind in ORDERED_KINDS,
        attributes=sorted(
            n for n in src.level.children("object_attributes") if src.level.has(f"object_attributes/{n}")
        ),
    )
    surviving = unique_sorted((cell << 32) | frag)
    return plan, surviving >> 32, surviving & 0xFFFFFFFF


def _metavertex_manifests(
    plan: ObjectPlan, layout: MetavertexLayout, sequences: Sequence[tuple[np.ndarray, ...]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(object, chunk, row)`` entries of the coarse manifests, in manifest order.

    ``sequences`` are the map tasks' fragments (global cell rank, fragment, CSR of
    metavertices), one per source group in cell order.
    """
    frag_cell = np.concatenate([s[0] for s in sequences]) if sequences else np.zeros(0, np.int64)
    frag_id = np.concatenate([s[1] for s in sequences]) if sequences else np.zeros(0, np.int64)
    lengths = np.concatenate([np.diff(s[2]) for s in sequences]) if sequences else np.zeros(0, np.int64)
    seq = np.concatenate([s[3] for s in sequences]) if sequences else np.zeros(0, np.int64)
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    keys = (frag_cell << 32) | frag_id  # groups are consecutive cell runs: already ascending
    wanted = (plan.block_cell << 32) | plan.block_fragment
    pos = np.searchsorted(keys, wanted)
    if wanted.size and (pos.max() >= keys.size or not np.array_equal(keys[pos], wanted)):
        raise InternalError("a kept manifest block names a fragment the bin tasks did not read")
    obj, mv = object_metavertices(
        plan.block_object, pos, offsets, seq, ordered=plan.ordered, num_metavertices=len(layout)
    )
    chunks, rows = layout.chunk_rows(mv)
    return obj, chunks, rows


def kept_attribute_tables(source: Level, plan: ObjectPlan) -> dict[str, ObjectAttributeTable]:
    """The source level's object attribute tables with the rows of dropped objects set to the fill value."""
    tables = {}
    for name in plan.attributes:
        src_path = source.node_path(f"object_attributes/{name}")
        values, attrs = read_table(source.storage, src_path)
        doc = read_node(source.storage, src_path) or {}
        fill = fill_value_from_json(doc.get("fill_value", 0), values.dtype)
        codecs = doc.get("codecs") or []
        out = values.copy()
        drop = np.ones(out.shape[0], dtype=bool)
        drop[plan.kept[plan.kept < out.shape[0]]] = False
        out[drop] = fill
        tables[name] = ObjectAttributeTable(out, fill, attrs, codecs[1] if len(codecs) > 1 else None)
    return tables


def write_objects(level: Level, plan: ObjectPlan, layout: MetavertexLayout, *sequences: tuple[np.ndarray, ...]) -> None:
    """The coarse level's object index (a reconcile task; ``sequences`` one per source group,
    positional: dask finalizes the graph of every reference inside a list argument)."""
    obj, chunks, rows = _metavertex_manifests(plan, layout, list(sequences))
    write_object_index(level, obj, chunks, rows, num_objects=plan.num_objects, sid_ndim=level.store.root.sid_ndim)


def write_kept_attributes(level: Level, source: Level, plan: ObjectPlan) -> None:
    """The coarse level's object attributes (a reconcile task beside :func:`write_objects`)."""
    write_object_attributes(level, kept_attribute_tables(source, plan))
