"""Consolidated metadata: a copy of every node's ``zarr.json`` inside the root's.

zarr-python (and so xarray and the reference implementation) opens a consolidated
hierarchy with one read of the root document instead of one read per node -- on an
object store, one request instead of hundreds.  The copy is only worth having while
it matches the nodes, so every operation here that changes an existing store drops it
first and writes it afresh when done (:func:`reconsolidating`), and the validator
reports a copy that disagrees with the nodes (``L1_CONSOLIDATED_STALE``).

The layout is zarr-python's (``consolidate_metadata``): the root group document gains
``consolidated_metadata = {"kind": "inline", "must_understand": false, "metadata":
{path: document}}`` with one entry per node below the root, keyed by its path;
group entries carry an empty ``consolidated_metadata`` of their own.  It is written
here rather than by ``zarr.consolidate_metadata`` because that re-reads every node
through zarr's own stores and models: this keeps one storage layer (local, memory,
S3 with the job's options) and the documents exactly as the strict reader read them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from zarr_vectors.errors import InputError
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.nodes import meta_key, require_node, write_node
from zarr_vectors.store.strict_json import load_document

MEMBER = "consolidated_metadata"


def empty_block() -> dict[str, Any]:
    """What zarr-python writes as ``consolidated_metadata`` (empty) in a group's entry."""
    return {"kind": "inline", "must_understand": False, "metadata": {}}


def node_documents(storage: Storage) -> dict[str, dict[str, Any]]:
    """Every node below the root, by path, in zarr-python's order (by depth, then path).

    Walks the hierarchy a depth at a time -- the groups of one depth listed, and their
    children's documents read, concurrently on a remote store -- so arrays' chunks are
    never listed; a directory without a ``zarr.json`` is not a node and is skipped, as
    zarr-python skips it.
    """
    found: dict[str, dict[str, Any]] = {}
    groups = [""]
    while groups:
        listings = storage.list_dirs(groups)
        children = [f"{g}/{name}" if g else name for g, names in zip(groups, listings) for name in names
                    if name != "zarr.json"]
        raws = storage.get_many(meta_key(path) for path in children)
        groups = []
        for path, raw in sorted(zip(children, raws)):
            if raw is None:
                continue
            doc = load_document(raw, file=meta_key(path))
            doc.pop(MEMBER, None)  # a sub-group consolidated on its own: the root's copy replaces it
            found[path] = doc
            if doc.get("node_type") == "group":
                groups.append(path)
    return found


def consolidated_block(documents: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The root's ``consolidated_metadata`` for these node documents."""
    metadata = {}
    for path, doc in documents.items():
        if doc.get("node_type") == "group":
            doc = _with_member(doc, empty_block())
        metadata[path] = doc
    return {**empty_block(), "metadata": metadata}


def _with_member(doc: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with ``consolidated_metadata`` placed before ``node_type``, where zarr-python puts it."""
    out = {k: v for k, v in doc.items() if k not in (MEMBER, "node_type")}
    out[MEMBER] = block
    out["node_type"] = doc["node_type"]
    return out


def consolidate(storage: Storage) -> int:
    """Write the root's consolidated copy of every node; returns how many nodes it holds."""
    root = require_node(storage, "", "group")
    documents = node_documents(storage)
    write_node(storage, "", _with_member(root, consolidated_block(documents)))
    return len(documents)


def drop_consolidated(storage: Storage) -> bool:
    """Remove the root's consolidated copy, if any (one rewrite of the root); whether there was one."""
    root = require_node(storage, "", "group")
    if MEMBER not in root:
        return False
    del root[MEMBER]
    write_node(storage, "", root)
    return True


def is_consolidated(storage: Storage) -> bool:
    return MEMBER in require_node(storage, "", "group")


@contextmanager
def reconsolidating(storage: Storage) -> Iterator[None]:
    """Run an operation that changes the store's nodes without ever leaving a stale copy.

    The copy is dropped before the first change; it is written again only when the
    operation succeeds, so an interrupted one leaves the store unconsolidated (zarr
    then reads the nodes themselves), never consolidated and wrong.
    """
    had = drop_consolidated(storage)
    yield
    if had:
        consolidate(storage)


def consolidate_store(url: str | os.PathLike[str], *, storage_options: Mapping[str, Any] | None = None) -> int:
    """Consolidate a store's metadata into its root ``zarr.json``; returns the number of nodes copied.

    Run it after the last write (the ``zv build --consolidate`` stage does).  The
    pyramid builder and the sharder keep the copy current; after changing nodes through
    the lower-level API (``open_store``, the links functions), run it again -- the
    validator reports a copy that no longer matches.
    """
    storage = Storage(url, storage_options)
    storage.check_reachable()
    if not storage.list_dir(""):
        raise InputError(f"nothing to consolidate at {storage.url!r}: no such store")
    return consolidate(storage)
