"""One read of a level's metadata: every node document and group listing below it, batched.

A reader asks many small questions about a level -- does ``links/0/<segment>`` exist,
what are the children of ``link_attributes/weight/0``, what is that array's grid --
and answering each with its own request made reading a graph from an object store one
blocking round trip after another (a few hundred link arrays, each document read four
times, every ``exists`` a HEAD).  :func:`snapshot_level` instead walks the level a
depth at a time: the groups of one depth are listed, and their children's documents
read, in one concurrent batch each (a handful of round trips for the whole level).

A snapshot is what the level held when it was taken.  The reader takes one per call
(``ZVStore.level(n, snapshot=True)``); a coordinator takes one of the groups it is about
to fill (``Level.observed``), where the arrays it creates meanwhile are answered from its
remembered documents first, so its own writes never read as absent.  Cell writers and
the reconcile never use one.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field

from zarr_vectors.store.backend import Storage
from zarr_vectors.store.nodes import meta_key


@dataclass(frozen=True)
class LevelSnapshot:
    """Raw ``zarr.json`` bytes of every node below a level, and the listing of every group.

    Paths are relative to the level group ("" is the level itself).  A path whose parent
    group was listed is answered from here, present or not; anything else (below a
    directory that is not a node, say) is not known, and the caller asks the store.
    """

    documents: dict[str, bytes] = field(default_factory=dict)
    listings: dict[str, list[str]] = field(default_factory=dict)

    def knows(self, rel: str) -> bool:
        """Whether the snapshot can say if a node is at ``rel``."""
        return posixpath.dirname(rel) in self.listings

    def document(self, rel: str) -> bytes | None:
        return self.documents.get(rel)

    def children(self, rel: str) -> list[str] | None:
        """Names below the group ``rel`` (``zarr.json`` left out), or None when it was not listed."""
        names = self.listings.get(rel)
        return None if names is None else [n for n in names if n != "zarr.json"]


def snapshot_level(
    storage: Storage, level_path: str, level_document: bytes | None = None, *, roots: Sequence[str] = ("",)
) -> LevelSnapshot:
    """Walk the groups ``roots`` of the level ``level_path`` (default: all of it): one concurrent
    batch of listings, then one of documents, per depth.

    Arrays are never listed (their cells are not metadata); a directory without a
    ``zarr.json`` is recorded as absent and not descended into.
    """
    snap = LevelSnapshot()
    if level_document is not None:
        snap.documents[""] = level_document
    groups = list(roots)
    while groups:
        listings = storage.list_dirs(_full(level_path, g) for g in groups)
        children = []
        for g, names in zip(groups, listings):
            snap.listings[g] = list(names)
            children += [posixpath.join(g, n) if g else n for n in names if n != "zarr.json"]
        raws = storage.get_many(meta_key(_full(level_path, c)) for c in children)
        groups = []
        for rel, raw in zip(children, raws):
            if raw is None:
                continue
            snap.documents[rel] = raw
            if _is_group(raw):
                groups.append(rel)
    return snap


def _full(level_path: str, rel: str) -> str:
    return posixpath.join(level_path, rel) if rel else level_path


def _is_group(raw: bytes) -> bool:
    """Whether a node document names a group: the walk descends only into groups.

    A cheap look at the text (the strict reader parses every document when it is used);
    a document that does not parse is not descended into, and its reader reports it.
    """
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: hostile nesting
        return False
    return isinstance(doc, dict) and doc.get("node_type") == "group"

