"""The facts :mod:`zarr_vectors.format.kinds` reads from a store to decide what its kind list reads as."""

from __future__ import annotations

from zarr_vectors.format.kinds import KindReading, StoreFacts, read_kind, unknown_kinds
from zarr_vectors.format.schema import is_int
from zarr_vectors.store.groups import Level, ZVStore
from zarr_vectors.store.link_family import family_document


def delta0_link_width(level: Level) -> int | None:
    """The ``link_width`` the level's ``links/0`` family declares; None without a family, or when the
    member is not an integer (the schema's finding)."""
    doc = family_document(level, 0)
    width = (doc.get("attributes") or {}).get("link_width") if doc is not None else None
    return width if is_int(width) else None


def store_facts(store: ZVStore) -> StoreFacts:
    """The root's ``links_convention``, level 0's delta-0 ``link_width``, and whether level 0 has
    an object index, ``link_fragments`` and a ``geometry_index`` group."""
    level0 = store.level(0)
    return StoreFacts(store.root.links_convention, delta0_link_width(level0), level0.has("object_index"),
                      level0.has("link_fragments"), level0.has("geometry_index"))


def store_kind(store: ZVStore) -> KindReading:
    """What the store reads as (D19); a single known kind costs no read."""
    listed = store.root.geometry_types
    several = len(set(listed)) > 1 and not unknown_kinds(listed)
    return read_kind(listed, store_facts(store) if several else None)
