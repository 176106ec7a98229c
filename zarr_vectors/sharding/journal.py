"""The relayout's staging area and commit journal: why an interrupted run can be finished.

Cell keys ``c/i/j/k`` and shard keys ``c/a/b/c`` share one namespace (shard (1,0,0)
and cell (1,0,0) are both ``c/1/0/0``), so shards cannot be written in place while
their source cells may still be needed.  Hence the staging: pack tasks write each
array's new objects under ``.zv-shard-staging/<array path in hex>/c.<i>.<j>...``, and
until a journal exists the store itself is untouched, so a crash during packing
leaves every array in its old, complete layout (the orphan staging is deleted by the
next run).  A commit first writes the array's journal,
``.zv-shard-staging/<array path in hex>/commit.json`` (the new ``zarr.json`` and the new
object keys); from then on the staging is complete and the commit only moves data
whose copy is in the staging, so every step of it can be replayed: ``shard_store`` and
``unshard_store`` first finish every journal they find (whatever operation wrote it),
then do what they were asked.

Arrays are committed independently, so after a crash during commits some arrays may
be sharded and others not -- each array describes its own layout, and readers read
such a store as usual.  The window in which one array's objects and ``zarr.json``
disagree is its commit, which re-running closes; do not read a store while it is
being resharded.  Two runs on one store at the same time are not supported.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from typing import Any

from zarr_vectors.errors import ArrayError, EncodingError
from zarr_vectors.format.paths import COMMIT_JOURNAL as JOURNAL
from zarr_vectors.format.paths import SHARD_STAGING as STAGING
from zarr_vectors.format.paths import grid_indices
from zarr_vectors.format.schema import GRID_KINDS, expected_at
from zarr_vectors.sharding.layout import new_keys, target_document
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.nodes import check_format, meta_key, write_nodes
from zarr_vectors.store.strict_json import load_document, same_json

Commit = tuple[str, dict[str, Any], list[str]]
"""One array's new layout: its path, its new ``zarr.json`` document, its new object keys."""


def staging_dir(path: str) -> str:
    """One flat staging directory per array, named by its path in hex (creating directories is what
    costs on a local disk; hex keeps the name injective and free of characters object stores escape)."""
    return posixpath.join(STAGING, path.encode("utf-8").hex())


def staged_key(path: str, key: str) -> str:
    """Where the new object ``<path>/<key>`` is staged."""
    return posixpath.join(staging_dir(path), key.replace("/", "."))


def apply_commits(
    storage: Storage,
    commits: Sequence[Commit],
    listed: Sequence[tuple[Sequence[str], Sequence[str]]] | None = None,
) -> None:
    """Make each array of ``commits`` the staged one; safe to replay from any point.

    Per array: old objects that are not new keys are deleted, staged objects moved over,
    the new document written, what is left of its staging (its journal) removed -- each
    step as one round over every array (a bulk delete for all of them, not one per array),
    the deletes beside the moves.
    Everything an array needs is in the staging (or already in place) while its journal
    exists, and nothing is deleted before every array was found complete.  ``listed``: per
    array, its staged keys and its objects, listed since the journal was written (a first
    commit lists them with its journals; a replay lists them here).
    """
    if listed is None:
        listed = _listings(storage, commits)
    stale: list[str] = []
    moves: list[tuple[str, str]] = []
    documents: dict[str, dict[str, Any]] = {}
    leftovers: list[str] = []
    emptied: list[tuple[set[str], str]] = []  # (directories the old layouts needed, their floor)
    for (path, document, keys), (staged, current) in zip(commits, listed):
        keep = set(keys)
        prefix = posixpath.join(path, "c")
        old = [rel for rel in current if rel[len(path) + 1 :] not in keep]
        there, placed = set(staged), set(current)
        lost = [k for k in keys if staged_key(path, k) not in there and posixpath.join(path, k) not in placed]
        if lost:  # neither staged nor already moved: applying would leave the array without them
            raise ArrayError(f"{path}: {len(lost)} new objects are neither staged nor in place (e.g. {lost[:3]})")
        mine = [(staged_key(path, k), posixpath.join(path, k)) for k in keys if staged_key(path, k) in there]
        moved = {source for source, _ in mine}
        stale += old
        moves += mine
        documents[path] = document
        # the journal (written after a first commit's listing), and any orphan beside it
        leftovers += [posixpath.join(staging_dir(path), JOURNAL), *(k for k in staged if k not in moved)]
        # directories the old layout needed and the new one does not; never above <path>/c
        emptied.append(({posixpath.dirname(k) for k in old} - {posixpath.dirname(d) for _, d in mine}, prefix))
    # disjoint keys (stale ones are not new keys), so one round for both; listed: no
    # second look at the sources
    steps = [lambda: storage.delete_many(stale), lambda: storage.move_many(moves, sources_present=True)]
    storage.overlap(lambda step: step(), steps)
    for parents, floor in emptied:
        storage.remove_empty_dirs(parents, floor=floor)
    write_nodes(storage, documents)
    storage.delete_many(sorted(set(leftovers)))  # the journals go last: until then, each array replays
    storage.remove_empty_dirs([staging_dir(path) for path, _, _ in commits], floor=STAGING)


def _listings(storage: Storage, commits: Sequence[Commit]) -> list[tuple[list[str], list[str]]]:
    """Per array, its staged objects and its objects, listed side by side for every array."""
    flat = storage.overlap(
        storage.list_files, [d for path, _, _ in commits for d in (staging_dir(path), posixpath.join(path, "c"))]
    )
    return list(zip(flat[0::2], flat[1::2]))


def commit_arrays(storage: Storage, commits: Sequence[Commit]) -> int:
    """Journal, then apply, the new layout of some arrays (only once every pack task succeeded).

    In rounds over every array at once, so on a remote store the arrays' round trips
    overlap: one listing of each array's staging and of its objects, then the journals,
    then the steps of :func:`apply_commits`.
    """
    listings = _listings(storage, commits)
    journals: dict[str, bytes] = {}
    for (path, document, keys), (staged, _) in zip(commits, listings):
        journal = posixpath.join(staging_dir(path), JOURNAL)
        if journal in staged:  # journaled by a run that stopped before applying: replay it below
            continue
        there = set(staged)
        missing = [k for k in keys if staged_key(path, k) not in there]
        if missing:
            raise ArrayError(f"{path}: {len(missing)} staged objects are missing (e.g. {missing[:3]}); not committing")
        record = {"array": path, "document": document, "keys": keys}
        journals[journal] = json.dumps(record, allow_nan=True).encode("utf-8")
    storage.put_many(journals)
    apply_commits(storage, commits, listings)
    return len(commits)


def _journal_record(key: str, raw: bytes) -> dict[str, Any]:
    """A journal as :func:`commit_arrays` writes it, or an EncodingError naming it."""
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise EncodingError(f"{key}: not a commit journal ({exc})") from None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("array"), str)
        and isinstance(record.get("document"), dict)
        and isinstance(record.get("keys"), list)
        and all(isinstance(k, str) for k in record["keys"])
    ):
        raise EncodingError(f"{key}: not a commit journal (needs an array path, a document and a list of keys)")
    bad = [k for k in record["keys"] if not _object_key(k)]
    if bad:
        raise EncodingError(f"{key}: not a commit journal: {bad[:3]} are not object keys c/<i>/<j>/...")
    path = record["array"]
    # the document a replay writes is read as strictly as any array's, where it would be
    document = load_document(json.dumps(record["document"], allow_nan=True).encode("utf-8"), file=key)
    check_format(document, path, file=key)
    if document.get("node_type") != "array":
        raise EncodingError(f"{key}: the journal's document is not an array's")
    return record


def _object_key(key: str) -> bool:
    """``c/<i>/<j>/...``: a cell or shard of the array, never anything beside it."""
    parts = key.split("/")
    return len(parts) >= 2 and parts[0] == "c" and grid_indices(parts[1:]) is not None


def recover(storage: Storage, names: Sequence[str] | None = None) -> tuple[int, bool]:
    """Finish every commit an interrupted run journaled: how many, and whether the staging area
    still holds anything (orphans of an interrupted pack stage, which the next run drops).
    ``names``: the staging area's children, where the caller listed them already.

    A journal is data found in the store, and replaying it deletes objects: each must be one this
    module could have written for the store as it is (:func:`_checked_commit`, :func:`_check_in_place`),
    or nothing is replayed."""
    names = storage.list_dir(STAGING) if names is None else names
    keys = [posixpath.join(STAGING, name, JOURNAL) for name in names]
    records: list[tuple[str, dict[str, Any]]] = []
    orphans = False
    for name, key, raw in zip(names, keys, storage.get_many(keys)):  # every journal in one batch
        if raw is None:  # staging of an interrupted pack stage: never journaled, discarded later
            orphans = True
            continue
        record = _journal_record(key, raw)
        if staging_dir(record["array"]) != posixpath.join(STAGING, name):
            raise EncodingError(f"{key}: journal names array {record['array']!r}, which does not match its location")
        records.append((key, record))
    paths = [record["array"] for _, record in records]
    current = [None if raw is None else load_document(raw, file=meta_key(path))
               for path, raw in zip(paths, storage.get_many([meta_key(path) for path in paths]))]
    commits = [_checked_commit(storage, key, record, old) for (key, record), old in zip(records, current)]
    if commits:
        listed = _listings(storage, commits)
        for (key, _), commit, (staged, placed), old in zip(records, commits, listed, current):
            _check_in_place(storage, key, commit, staged, placed, old)
        apply_commits(storage, commits, listed)
    return len(commits), orphans


def _refused(key: str, why: str) -> EncodingError:
    return EncodingError(f"{key}: {why}; not replaying it (a journal a relayout did not write for the store as "
                         f"it is: remove {STAGING!r} to keep the store as it stands)")


def _checked_commit(storage: Storage, key: str, record: dict[str, Any], old: dict[str, Any] | None) -> Commit:
    """A journal's commit, once it names a grid array the store has (never ``object_index`` or anything
    a relayout leaves alone), its document is that array's relaid out -- nothing but the chunk grid
    and codecs differ, before or after the commit wrote it -- and its keys are exactly the objects
    that layout gives the array's present cells."""
    path, document = record["array"], record["document"]
    expected = expected_at(path)
    if expected is None or expected.node_type != "array" or expected.kind not in GRID_KINDS:
        raise _refused(key, f"journal names {path!r}, which is not a grid array (a relayout changes only those)")
    if old is None:
        raise _refused(key, f"journal names array {path!r}, which the store does not have")
    grid = GridArray(storage, path, document)
    layout = grid.sharding.shard_shape if grid.sharding is not None else None
    if not same_json(target_document(old, layout), document):
        raise _refused(key, f"the journal's document for {path!r} is not the array's own relaid out (the array "
                            "was changed since it was written)")
    if sorted(record["keys"]) != new_keys(grid, layout):
        raise _refused(key, f"the journal's keys are not the objects of the cells {path!r} lists")
    return path, document, list(record["keys"])


def _check_in_place(storage: Storage, key: str, commit: Commit, staged: Sequence[str], placed: Sequence[str],
                    old: dict[str, Any]) -> None:
    """A new object that is not staged must be one the commit already moved in, not an old object that
    shares its name (old cell ``c/0/0/0`` and new shard ``c/0/0/0``): while the array's document is the
    old one, such an object must have a valid index of the new shards, or, when unsharding, must not
    have one of the old.  A forged journal that stages nothing would otherwise recast old objects."""
    path, document, keys = commit
    if same_json(old, document):  # the commit wrote the document: every move was done
        return
    there, present = set(staged), set(placed)
    moved = [k for k in keys if staged_key(path, k) not in there and posixpath.join(path, k) in present]
    new_spec, old_spec = GridArray(storage, path, document).sharding, GridArray(storage, path, old).sharding
    spec = new_spec if new_spec is not None else old_spec
    if not moved or spec is None:
        return
    tails = storage.get_ranges([(posixpath.join(path, k), *spec.index_range()) for k in moved])
    for k, tail in zip(moved, tails):
        is_shard = spec.holds_index(tail or b"")
        if is_shard != (new_spec is not None):
            raise _refused(key, f"{path}/{k} is neither staged nor an object the commit moved in (it is "
                                f"{'an old shard' if is_shard else 'not a shard'})")
