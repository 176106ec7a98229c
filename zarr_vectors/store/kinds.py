"""The facts :mod:`zarr_vectors.format.kinds` reads from a store to decide what its kind list reads as."""

from __future__ import annotations

from zarr_vectors.format.kinds import KindReading, StoreFacts, read_kind, unknown_kinds
from zarr_vectors.format.schema import is_int
from zarr_vectors.store.groups import ZVStore
from zarr_vectors.store.link_family import family_document


def store_facts(store: ZVStore) -> StoreFacts:
    """The root's ``links_convention``, level 0's delta-0 ``link_width``, and whether level 0 has
    an object index, ``link_fragments`` and a ``geometry_index`` group."""
    level0 = store.level(0)
    doc = family_document(level0, 0)
    width = (doc.get("attributes") or {}).get("link_width") if doc is not None else None
    return StoreFacts(store.root.links_convention, width if is_int(width) else None, level0.has("object_index"),
                      level0.has("link_fragments"), level0.has("geometry_index"))


def store_kind(store: ZVStore) -> KindReading:
    """What the store reads as (D19); a single known kind costs no read."""
    listed = store.root.geometry_types
    several = len(set(listed)) > 1 and not unknown_kinds(listed)
    return read_kind(listed, store_facts(store) if several else None)
