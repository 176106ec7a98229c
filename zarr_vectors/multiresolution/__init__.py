"""Per-object coarsening for pyramid levels (FORMAT.md §8.1): the math, no I/O.

* :mod:`.coarsen` -- bins, per-cell partial sums, centroids (metavertices), their
  placement in the coarse level's cells, seeded object sparsity;
* :mod:`.crosslevel` -- cross-level ``±N`` records, parent-map composition and the
  per-object metavertex sequences that become the coarse level's manifests.

Pure, vectorised numpy: the Dask graph in :mod:`zarr_vectors.graphs.pyramid` runs these
functions inside its tasks.
"""

from __future__ import annotations

from zarr_vectors.multiresolution.coarsen import (
    BinGrid,
    CellPartials,
    MetavertexLayout,
    cell_partials,
    centroids_in_bins,
    combine_partials,
    layout_metavertices,
    select_objects,
    unique_inverse,
    unique_sorted,
)
from zarr_vectors.multiresolution.crosslevel import (
    compose_parents,
    cross_level_records,
    fragment_sequences,
    object_metavertices,
)

__all__ = [
    "BinGrid",
    "CellPartials",
    "MetavertexLayout",
    "cell_partials",
    "centroids_in_bins",
    "combine_partials",
    "compose_parents",
    "cross_level_records",
    "fragment_sequences",
    "layout_metavertices",
    "object_metavertices",
    "select_objects",
    "unique_inverse",
    "unique_sorted",
]
