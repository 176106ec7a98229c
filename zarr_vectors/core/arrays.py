"""The links readers, under the names the spec's Links page imports (``zarr_vectors.core.arrays``).

The call shapes are the page's: ``read_links(lg, delta=0)``, ``read_links_for_tuple(lg,
chunk_tuple, delta=0)``, ``read_chunk_links(lg, chunk_coords, delta=0, offsets=...)``,
``read_link_attributes(lg, name, delta=0)``, ``list_link_deltas(lg)``,
``list_link_offsets(lg, delta)``.  Records index, iterate and compare as lists of
``((chunk, vi), ...)`` tuples, and an absent family reads as ``[]``.
"""

from zarr_vectors.links_api import (
    list_link_deltas,
    list_link_offsets,
    read_chunk_links,
    read_link_attributes,
    read_links,
    read_links_for_tuple,
)

__all__ = [
    "list_link_deltas",
    "list_link_offsets",
    "read_chunk_links",
    "read_link_attributes",
    "read_links",
    "read_links_for_tuple",
]
