"""A write's plan: every input check and every placement decision, before anything is written.

:func:`plan_write` is what every writer runs first and what ``zv build --dry-run`` shows:
the checked settings and inputs (:class:`~zarr_vectors.write.vertices.VertexSpec`), the
input blocks, and the vertex plan (occupied cells, their row counts, the owner tasks
that will write them).  Building it reads the positions once (one scan pass on the
current scheduler); it opens no store and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError, InternalError
from zarr_vectors.format.paths import format_chunk_key
from zarr_vectors.write import vertices as vx
from zarr_vectors.write.options import WriteOptions


@dataclass(frozen=True, eq=False, repr=False)
class WritePlan:
    """The inspectable plan of one write (see :func:`plan_write`): :meth:`summary` as plain data,
    a one-line ``repr`` (the input blocks and arrays it holds are not for reading)."""

    options: WriteOptions
    spec: vx.VertexSpec
    blocks: vx.InputBlocks
    vertices: vx.VertexPlan
    object_attributes: dict[str, np.ndarray]

    @property
    def num_vertices(self) -> int:
        return int(self.vertices.counts.sum())

    def __repr__(self) -> str:
        plan, owners = self.vertices, len(self.vertices.owners)
        return (f"WritePlan({self.num_vertices} vertices in {len(plan.cells)} chunks of a "
                f"{'x'.join(map(str, plan.grid_shape))} grid, {owners} owner task{'' if owners == 1 else 's'}, "
                f"chunk_shape={list(self.spec.chunk_shape)})")

    def check(self) -> dict[str, bool]:
        """The plan's invariants: owners are disjoint runs of whole cells and every occupied
        cell has one.  A failure is a bug of this package, never of the input."""
        plan = self.vertices
        owned = (
            np.concatenate([plan.owner_cells(k) for k in range(len(plan.owners))]) if plan.owners else np.zeros(0, int)
        )
        checks = {
            "owners_disjoint": len(np.unique(owned)) == len(owned) and all(s.stop > s.start for s in plan.owners),
            "every_cell_owned": np.array_equal(np.sort(owned), plan.cells),
        }
        if not all(checks.values()):
            raise InternalError(f"write plan check failed: {checks}")
        return checks

    def summary(self) -> dict[str, Any]:
        """What the vertex stage will do, as plain data: one entry per owner task (cells, rows,
        first and last cell; owners own runs of cells in ascending C order of the grid)."""
        plan = self.vertices
        chunks = plan.chunks()
        owners = [
            {"cells": int(s.stop - s.start), "rows": int(plan.counts[s].sum()),
             "first": format_chunk_key(chunks[s.start].tolist()), "last": format_chunk_key(chunks[s.stop - 1].tolist())}
            for s in plan.owners
        ]  # fmt: skip
        return {
            "vertices": self.spec.n,
            "cells": len(plan.cells),
            "grid": {"origin": [int(v) for v in plan.origin], "shape": list(plan.grid_shape)},
            "owners": owners,
            "checks": self.check(),
        }


def plan_write(
    positions: Any,
    *,
    options: WriteOptions,
    object_ids: Any = None,
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    fragment_mode: vx.FragmentMode | None = None,
    fragment_breaks: np.ndarray | None = None,
    objects_required: bool = False,
) -> WritePlan:
    """Check every input of a write and plan its vertex stage.

    ``fragment_mode`` (default: ``objects`` with ids, else ``bins``) and
    ``fragment_breaks`` say how a cell's rows form fragments; ``objects_required`` is
    set by the kinds whose vertices always belong to objects (object 0 without ids).
    Every check of the arguments, the bounds and the 4 GiB cell runs here.
    """
    if not isinstance(options, WriteOptions):
        raise InputError(f"plan_write: options must be a WriteOptions, found {type(options).__name__}")
    spec, blocks = vx.normalise_vertex_inputs(
        positions,
        chunk_shape=options.chunk_shape,
        bin_shape=options.bin_shape,
        bounds=options.bounds,
        object_ids=object_ids,
        attributes=attributes,
        compressor=options.compressor,
        mode=fragment_mode,
        breaks=fragment_breaks,
    )
    obj_attrs = vx.check_object_attributes(object_attributes, has_ids=objects_required or spec.has_objects)
    plan = vx.plan_vertices(spec, blocks)
    vx.check_object_attribute_rows(obj_attrs, plan.num_objects)
    return WritePlan(options, spec, blocks, plan, obj_attrs)


__all__ = ["WritePlan", "plan_write"]
