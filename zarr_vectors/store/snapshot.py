"""One read of a level's metadata: every node document and group listing below it, batched.

A reader asks many small questions about a level -- does ``links/0/<segment>`` exist,
what are the children of ``link_attributes/weight/0``, what is that array's grid --
and answering each with its own request made reading a graph from an object store one
blocking round trip after another (a few hundred link arrays, each document read four
times, every ``exists`` a HEAD).  :func:`snapshot_level` instead walks the level in
waves of concurrent requests, one per depth: a wave reads one depth's documents and
lists, beside them, the nodes the format says are groups, so a points level costs three
round trips and a graph's links families a few more (the level's own document rides in
the first wave).

A snapshot is what the level held when it was taken.  The reader takes one per call
(``ZVStore.level(n, snapshot=True)``); a coordinator takes one of the groups it is about
to fill (``Level.observed``), where the arrays it creates meanwhile are answered from its
remembered documents first, so its own writes never read as absent.  Cell writers and
the reconcile never use one.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from zarr_vectors.format.schema import expected_node
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
    skimmed: set[str] = field(default_factory=set)  # groups listed whose children were not read

    def knows(self, rel: str) -> bool:
        """Whether the snapshot can say if a node is at ``rel``."""
        parent = posixpath.dirname(rel)
        return parent in self.listings and parent not in self.skimmed

    def absent(self, rel: str) -> bool:
        """Whether nothing at all is at ``rel``: its parent group was listed without that name
        (a directory there without a ``zarr.json`` is not absent: its reader must see it)."""
        parent, name = posixpath.split(rel)
        names = self.listings.get(parent)
        return names is not None and name not in names

    def document(self, rel: str) -> bytes | None:
        return self.documents.get(rel)

    def children(self, rel: str) -> list[str] | None:
        """Names below the group ``rel`` (``zarr.json`` left out), or None when it was not listed."""
        names = self.listings.get(rel)
        return None if names is None else [n for n in names if n != "zarr.json"]


def snapshot_level(
    storage: Storage,
    level_path: str,
    level_document: bytes | None = None,
    *,
    roots: Sequence[str] = ("",),
    skim: Callable[[str], bool] | None = None,
) -> LevelSnapshot:
    """Walk the groups ``roots`` of the level ``level_path`` (default: all of it) in waves of
    concurrent requests, one wave per depth; the children of a group ``skim`` names are
    listed but not read (a caller that needs only their names).

    A wave reads the documents of one depth's nodes and lists, beside them, the ones the
    format says are groups (``format.schema.expected_node``), so a level of depth d costs
    d + 1 round trips, not 2d; a listing is kept only when the document beside it says
    group, and a group the format does not name is listed a wave later.  Without
    ``level_document`` the level's own document is read in the first wave.  Arrays are
    never listed (their cells are not metadata); a directory without a ``zarr.json`` is
    recorded as absent and not descended into.
    """
    snap = LevelSnapshot()
    docs: list[str] = []
    if level_document is not None:
        snap.documents[""] = level_document
    elif "" in roots:
        docs.append("")
    lists, accepted = list(roots), set(roots)
    while docs or lists:
        listings, raws = _wave(storage, level_path, lists, docs)
        read = [rel for rel, raw in zip(docs, raws) if raw is not None]
        snap.documents.update((rel, raw) for rel, raw in zip(docs, raws) if raw is not None)
        listed = set(lists)
        docs, next_lists = [], []
        for g, names in zip(lists, listings):
            if g not in accepted and not _is_group(snap.documents.get(g)):
                continue  # listed on the format's word, but not a group here: not descended into
            snap.listings[g] = list(names)
            if skim is not None and skim(g):
                snap.skimmed.add(g)
                continue
            for name in names:
                if name != "zarr.json":
                    child = posixpath.join(g, name) if g else name
                    docs.append(child)
                    if _format_says_group(child):
                        next_lists.append(child)
        # groups the format does not name: listed once their documents say so
        late = [rel for rel in read if rel not in listed and _is_group(snap.documents[rel])]
        lists, accepted = next_lists + late, set(late)
    return snap


def _wave(storage: Storage, level_path: str, lists: Sequence[str], docs: Sequence[str]) -> tuple[list, list]:
    """One round trip: the listings of ``lists`` and the documents of ``docs``, concurrently."""
    calls = [lambda: storage.list_dirs(_full(level_path, g) for g in lists),
             lambda: storage.get_many(meta_key(_full(level_path, d)) for d in docs)]
    listings, raws = storage.overlap(lambda call: call(), calls)
    return listings, raws


def _format_says_group(rel: str) -> bool:
    expected = expected_node(tuple(rel.split("/")))
    return expected is not None and expected.node_type == "group"


def _full(level_path: str, rel: str) -> str:
    return posixpath.join(level_path, rel) if rel else level_path


def _is_group(raw: bytes | None) -> bool:
    """Whether a node document names a group: the walk descends only into groups.

    A cheap look at the text (the strict reader parses every document when it is used);
    a document that does not parse is not descended into, and its reader reports it.
    """
    if raw is None:
        return False
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: hostile nesting
        return False
    return isinstance(doc, dict) and doc.get("node_type") == "group"

