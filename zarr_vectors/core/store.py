"""Opening a store and its levels, under the names the spec's pages use."""

from zarr_vectors.store.groups import get_resolution_level, open_store

__all__ = ["get_resolution_level", "open_store"]
