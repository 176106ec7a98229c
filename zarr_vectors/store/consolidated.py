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

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from zarr_vectors.errors import InconsistentStoreError, MetadataError
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.nodes import meta_key, require_node, write_node
from zarr_vectors.store.strict_json import load_document, same_json

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


def copy_differences(entries: Mapping[str, Any], nodes: Mapping[str, Any]) -> list[str]:
    """How a group's consolidated entries differ from the node documents below it (both keyed by
    path relative to the group); empty when the copy is exact.

    The one comparison the validator (``L1_CONSOLIDATED_STALE``) and the reader apply.
    Group entries carry zarr-python's own (empty) ``consolidated_metadata``, which is not
    compared.
    """
    problems = []
    for rel, entry in sorted(entries.items()):
        if rel not in nodes:
            problems.append(f"the copy names {rel!r}, which is not a node of the store")
        elif nodes[rel] is not None and not same_json(_without_member(entry), _without_member(nodes[rel])):
            copy, actual = _without_member(entry), _without_member(nodes[rel])
            problems.append(f"the copy of {rel!r} differs from its zarr.json ({_first_difference(copy, actual)})")
    problems += [f"the copy leaves out node {rel!r}" for rel in sorted(set(nodes) - set(entries))]
    return problems


def inline_entries(root_document: Mapping[str, Any]) -> dict[str, Any] | None:
    """The root's consolidated entries by path, or None when it has no copy; a malformed copy is refused.

    zarr readers open the store from this copy alone, so a reader that reads the nodes
    themselves must know what the copy says to refuse a store the two read differently.
    """
    block = root_document.get(MEMBER)
    if block is None:
        return None
    entries = block.get("metadata") if isinstance(block, dict) else None
    if not isinstance(block, dict) or block.get("kind") != "inline" or not isinstance(entries, dict):
        raise MetadataError('consolidated_metadata must be {"kind": "inline", "metadata": {path: document}}',
                            file="zarr.json", pointer=f"/{MEMBER}")
    return entries


def check_level_copy(entries: Mapping[str, Any], level_path: str, documents: Mapping[str, dict[str, Any]]) -> None:
    """Refuse a level whose nodes (``documents``, by path relative to the level, ``""`` the level
    itself) are not what the root's consolidated copy says they are.

    Reading the nodes and ignoring a stale copy would answer differently from every
    zarr reader of the same store -- a plausible wrong answer, e.g. object attributes
    deleted from storage but still in the copy.
    """
    prefix = f"{level_path}/"
    mine = {("" if p == level_path else p[len(prefix):]): doc for p, doc in entries.items()
            if p == level_path or p.startswith(prefix)}
    problems = copy_differences(mine, documents)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InconsistentStoreError(
            f"level {level_path}: the root's consolidated metadata is stale: {problems[0]}{more}; "
            "zarr readers that use the copy see another store (run `zv consolidate` to rewrite it)"
        )


def _without_member(doc: Any) -> Any:
    return {k: v for k, v in doc.items() if k != MEMBER} if isinstance(doc, dict) else doc


def _first_difference(copy: Any, actual: Any) -> str:
    if not isinstance(copy, dict) or not isinstance(actual, dict):
        return "not an object" if not isinstance(copy, dict) else "differs"
    for key in sorted(set(copy) | set(actual)):
        if key not in copy or key not in actual or not same_json(copy[key], actual[key]):
            return f"member {key!r}"
    return "differs"


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
def reconsolidating(storage: Storage, *, has_copy: bool | None = None) -> Iterator[None]:
    """Run an operation that changes the store's nodes without ever leaving a stale copy.

    The copy is dropped before the first change; it is written again only when the
    operation succeeds, so an interrupted one leaves the store unconsolidated (zarr
    then reads the nodes themselves), never consolidated and wrong.  ``has_copy``: what
    the caller's own read of the root said (False spares reading it again).
    """
    had = drop_consolidated(storage) if has_copy is not False else False
    yield
    if had:
        consolidate(storage)
