"""``write_points``: the vertex stage alone, plus point-cloud metadata.

Graph: scan -> plan (client side: every input check, the 4 GiB cell check) ->
init (root, level 0, every array; never a cell) -> route (per input block) ->
owner writes (``record_presence=False``) -> one reconcile task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dask
from typing_extensions import Unpack

from zarr_vectors import reconcile
from zarr_vectors.execution import runner
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.groups import Level, create_store, empty_level, removed_if_unfinished
from zarr_vectors.write import vertices as vx
from zarr_vectors.write.options import SharedOptions, WriteOptions
from zarr_vectors.write.plan import plan_write


@dataclass(frozen=True)
class WriteResult:
    """What a write did: where, how many records and cells, and how many write tasks."""

    url: str
    kind: str
    num_vertices: int
    num_cells: int
    num_tasks: int
    num_objects: int
    num_links: int = 0

    def __str__(self) -> str:
        links = f", {self.num_links} links" if self.num_links else ""
        return (
            f"{self.kind}: {self.num_vertices} vertices{links} in {self.num_cells} chunks "
            f"({self.num_tasks} write task{'' if self.num_tasks == 1 else 's'}) -> {self.url}"
        )


def _reconcile(
    level: Level,
    arrays: vx.VertexArrays,
    spec: vx.VertexSpec,
    plan: vx.VertexPlan,
    object_attributes: Mapping[str, Any],
    summaries: list[Any],
) -> None:
    """Presence lists and object tables side by side, then the level metadata."""
    parts = vx.reconcile_tasks(level, arrays, spec, plan, object_attributes, summaries)
    families, rows = vx.vertex_families(spec), int(plan.counts.sum())
    # every cell's fragments are ranges tiling its rows
    runner.compute("reconcile", dask.delayed(reconcile.finish_level)(level, families, rows, *parts, fragments_tile=True))


def write_points(
    url: str,
    positions: Any,
    *,
    object_ids: Any = None,
    attributes: Mapping[str, Any] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    options: WriteOptions | None = None,
    **shared: Unpack[SharedOptions],
) -> WriteResult:
    """Write a point cloud as a Dask graph on the current scheduler.

    ``positions`` (n, D) float32/float64, numpy or dask.  Without ``object_ids``
    each chunk holds one fragment per bin; with them, one fragment per object, and
    an object index (layout v1, row = id) is written.  The grid, codec and store
    settings (``chunk_shape``, ``bin_shape``, ``bounds``, ``compressor``,
    ``storage_options``, ``overwrite``) come as keywords or as ``options``
    (:class:`WriteOptions`).  Every input check, the bounds check and the 4 GiB cell
    check run before anything is written.
    """
    opts = WriteOptions.resolve("write_points", options, shared)
    storage = Storage(url, opts.storage_options)
    storage.check_reachable()
    plan = plan_write(
        positions, options=opts, object_ids=object_ids, attributes=attributes, object_attributes=object_attributes
    )
    spec, vplan = plan.spec, plan.vertices

    first_documents: dict[str, dict[str, Any]] = {}  # the root's and level 0's, sent with the arrays'
    store = create_store(
        storage,
        chunk_shape=spec.chunk_shape,
        bounds=vplan.bounds,
        geometry_type="point_cloud",
        base_bin_shape=spec.bin_shape,
        links_convention="implicit_sequential",
        overwrite=opts.overwrite,
        pending=first_documents,
        headers=opts.headers,
    )
    with removed_if_unfinished(storage):
        level = empty_level(store)
        arrays = vx.create_vertex_arrays(level, spec, vplan, pending=first_documents)
        owners = runner.persist("write vertices", *vx.write_graph(arrays, spec, vplan, plan.blocks))
        _reconcile(level, arrays, spec, vplan, plan.object_attributes, owners)
    return WriteResult(
        storage.url, "point_cloud", plan.num_vertices, len(vplan.cells), len(vplan.owners), vplan.num_objects
    )
