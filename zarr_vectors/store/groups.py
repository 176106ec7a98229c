"""Opening and creating stores; the root group and its level groups (docs/format.md §1, §3, §4)."""

from __future__ import annotations

import json
import math
import os
import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar, overload

from zarr_vectors.errors import (
    InconsistentStoreError,
    InputError,
    InternalError,
    MetadataError,
    StoreExistsError,
    StoreNotFoundError,
    UnsupportedLayoutError,
    ZarrVectorsError,
    describe,
)
from zarr_vectors.format.metadata import GEOMETRY_TYPES, LevelMetadata, RootMetadata
from zarr_vectors.format.paths import (
    COMMIT_JOURNAL,
    LEVEL_FAMILIES,
    LEVEL_NAME,
    ROOT_EXTRAS,
    SHARD_STAGING,
    WORKING_PREFIX,
)
from zarr_vectors.format.schema import KNOWN_CAPABILITIES, PLAIN, Expected, expected_node
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.consolidated import check_level_copy, consolidate, inline_entries
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.headers import header_documents
from zarr_vectors.store.nodes import (
    check_discriminator,
    check_format,
    group_document,
    meta_key,
    require_node,
    write_node,
    write_nodes,
)
from zarr_vectors.store.snapshot import LevelSnapshot, snapshot_level
from zarr_vectors.store.strict_json import load_document

T = TypeVar("T")
_NAME_SUFFIXES = (".zarrvectors", ".zv", ".zarr")


def store_name(url: str) -> str:
    """The RFC-8 ``ome.name``: the store directory name without a known suffix."""
    base = posixpath.basename(os.fspath(url).rstrip("/"))
    for suffix in _NAME_SUFFIXES:
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return base or "zarr_vectors"


@dataclass
class Level:
    """One resolution level group."""

    store: ZVStore
    number: int
    meta: LevelMetadata
    #: Documents (JSON text) of the arrays a coordinator created (or opened and checked)
    #: for the write in progress, by path relative to the level.  Cell-owner tasks
    #: receive the level after that step, so they find each array's grid and codecs here
    #: instead of reading every ``zarr.json`` again (one S3 GET per array per owner).
    #: Text, not dicts: dask walks nested containers in task arguments, and a few hundred
    #: documents cost more to walk than to parse.
    known_arrays: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    #: The level's metadata as one batched walk read it (:func:`snapshot_level`), for a
    #: reader: node questions are answered from it instead of one request each.  None
    #: for writers, whose own writes would make it stale.
    snapshot: LevelSnapshot | None = field(default=None, repr=False, compare=False)

    @property
    def path(self) -> str:
        return str(self.number)

    @property
    def storage(self) -> Storage:
        return self.store.storage

    @property
    def chunk_shape(self) -> tuple[float, ...]:
        return self.meta.chunk_shape or self.store.root.chunk_shape

    @property
    def bin_shape(self) -> tuple[float, ...]:
        return self.store.root.bin_shape(self.number)

    @property
    def finished(self) -> bool:
        """Whether the level's document names its vertices: every level holds them, and a writer
        names its families last (``reconcile.finish_level``), so a level without them is one
        still being written -- or one whose writer was killed -- and would read as empty."""
        return "vertices" in self.meta.arrays_present

    def require_finished(self) -> None:
        if not self.finished:
            raise InconsistentStoreError(
                f"{self.path}/zarr.json: level {self.number} is not finished (its arrays_present does not list "
                "'vertices'): a write still running, or one that was stopped; re-run it (zv build --resume), or "
                "write the store again with overwrite")

    def node_path(self, relpath: str) -> str:
        return posixpath.join(self.path, relpath)

    def has(self, relpath: str) -> bool:
        if relpath in self.known_arrays:  # created or opened by this write: there
            return True
        if self.snapshot is not None and self.snapshot.knows(relpath):
            return self.snapshot.document(relpath) is not None
        return self.storage.exists(meta_key(self.node_path(relpath)))

    def observed(self, groups: Sequence[str]) -> Level:
        """This level with a :class:`LevelSnapshot` of the groups ``groups`` (one batched walk), for
        a coordinator about to probe many nodes below them.  Its remembered arrays are shared,
        and answer :meth:`has` before the snapshot, so what it creates next is seen."""
        snap = snapshot_level(self.storage, self.path, roots=groups)
        return replace(self, snapshot=snap)

    def node(self, relpath: str) -> dict[str, Any] | None:
        """The parsed ``zarr.json`` at ``relpath`` (strictly read), or None when there is none."""
        return self.nodes([relpath])[0]

    def nodes(self, relpaths: Sequence[str]) -> list[dict[str, Any] | None]:
        """:meth:`node` of many paths: from the snapshot where it knows them, the rest in one concurrent batch."""
        snap = self.snapshot
        ask = [r for r in relpaths if snap is None or not snap.knows(r)]
        fetched = dict(zip(ask, self.storage.get_many(meta_key(self.node_path(r)) for r in ask)))
        out: list[dict[str, Any] | None] = []
        for r in relpaths:
            raw = fetched[r] if r in fetched else snap.document(r)  # type: ignore[union-attr]
            if raw is None:
                out.append(None)
                continue
            path = self.node_path(r)
            doc = load_document(raw, file=meta_key(path))
            check_format(doc, path, file=meta_key(path))  # what read_node applies: the node its path makes it
            out.append(doc)
        return out

    def array(self, relpath: str) -> GridArray:
        """The grid array at ``relpath``, refused unless its ``zv_array`` is the one for that path."""
        return self.arrays([relpath])[0]

    @overload
    def arrays(self, relpaths: Sequence[str]) -> list[GridArray]: ...
    @overload
    def arrays(self, relpaths: Sequence[str], *, missing: bool) -> list[GridArray | None]: ...

    def arrays(self, relpaths: Sequence[str], *, missing: bool = False) -> Sequence[GridArray | None]:
        """:meth:`array` of many paths, their documents read in one batch (see :meth:`nodes`);
        with ``missing``, None where there is no node instead of an error."""
        out: list[GridArray | None] = []
        for rel, doc in zip(relpaths, self.nodes(relpaths)):
            key = meta_key(self.node_path(rel))
            if doc is None and missing:
                out.append(None)
                continue
            if doc is None:
                raise MetadataError(f"no zarr.json in store {self.storage.url!r}", file=key)
            if doc.get("node_type") != "array":
                raise MetadataError(f"expected a array, found a {doc.get('node_type')}", file=key,
                                    pointer="/node_type")
            out.append(GridArray(self.storage, self.node_path(rel), doc))  # its zv_array checked by nodes()
        return out

    def create_array(
        self,
        relpath: str,
        *,
        shape: Sequence[int],
        origin: Sequence[int],
        attributes: dict[str, Any],
        compressor: dict[str, Any] | None,
    ) -> GridArray:
        """Create the grid array at ``relpath`` (metadata only) and :meth:`remember` it."""
        return self.remember(
            GridArray.create(
                self.storage, self.node_path(relpath), shape=shape, origin=origin, attributes=attributes,
                compressor=compressor,
            )
        )  # fmt: skip

    def remember(self, grid: GridArray) -> GridArray:
        """Keep ``grid``'s document for :meth:`known_array`; returns ``grid``."""
        self.known_arrays[posixpath.relpath(grid.path, self.path)] = json.dumps(grid.doc).encode()
        return grid

    def known_array(self, relpath: str) -> GridArray | None:
        """The array at ``relpath`` for a cell writer: remembered, else read; None if absent.

        Cell writers use only what never changes after creation (grid, codecs, row
        dtype); array-wide attributes such as ``nonempty_chunks`` must come from
        :meth:`array`.
        """
        raw = self.known_arrays.get(relpath)
        if raw is not None:
            return GridArray(self.storage, self.node_path(relpath), json.loads(raw))
        return self.array(relpath) if self.has(relpath) else None

    def children(self, relpath: str) -> list[str]:
        if self.snapshot is not None and self.snapshot.absent(relpath):
            return []
        known = self.snapshot.children(relpath) if self.snapshot is not None else None
        if known is not None:
            return known
        return [n for n in self.storage.list_dir(self.node_path(relpath)) if n != "zarr.json"]

    def document(self) -> dict[str, Any]:
        """The level group's ``zarr.json`` as :meth:`write_metadata` writes it."""
        return group_document(self.meta.to_attributes())

    def write_metadata(self) -> None:
        write_node(self.storage, self.path, self.document())


@dataclass
class ZVStore:
    """An open store: its storage and root metadata (and the root's consolidated entries, when it has a copy)."""

    storage: Storage
    root: RootMetadata
    consolidated: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def url(self) -> str:
        return self.storage.url

    def level_numbers(self, names: Sequence[str] | None = None) -> list[int]:
        """Level groups present, ascending (bare non-negative integer names); ``names``: the
        root's children, where the caller listed them already."""
        names = self.storage.list_dir("") if names is None else names
        return sorted(int(n) for n in names if LEVEL_NAME.fullmatch(n))

    def level(self, number: int, *, snapshot: bool | LevelSnapshot = False) -> Level:
        """Level ``number``; with ``snapshot``, its metadata read in one batched walk (for readers),
        or the walk already taken (:func:`open_level`)."""
        path = str(number)
        if snapshot is True:
            snap: LevelSnapshot | None = snapshot_level(self.storage, path)  # the level's document in its first wave
        else:
            snap = snapshot or None
        raw = snap.document("") if snap is not None else self.storage.get(meta_key(path))
        doc = None if raw is None else load_document(raw, file=meta_key(path))
        if doc is None:
            present = self.level_numbers()
            if number in present:  # "has no level 1 (levels: [1, 2])" contradicted itself
                raise InputError(f"store {self.url!r}: level {number}'s folder holds no zarr.json (a damaged or "
                                 "unfinished store)")
            raise InputError(f"store {self.url!r} has no level {number} (levels: {present})")
        if doc.get("node_type") != "group":
            raise MetadataError("a level must be a group", file=f"{path}/zarr.json", pointer="/node_type")
        meta = LevelMetadata.from_attributes(doc.get("attributes", {}), file=f"{path}/zarr.json",
                                             sid_ndim=self.root.sid_ndim)
        return Level(self, number, meta, snapshot=snap)

    def check_copy(self, level: Level) -> None:
        """Refuse ``level`` (taken with a snapshot) when the root's consolidated copy says it holds
        other nodes: a reader of the nodes would answer differently from every zarr reader of the copy."""
        if self.consolidated is None or level.snapshot is None:
            return
        if level.snapshot.skimmed:
            raise InternalError(f"{level.path}: a skimmed snapshot lacks documents the consolidated copy holds")
        documents = {rel: load_document(raw, file=meta_key(level.node_path(rel) if rel else level.path))
                     for rel, raw in level.snapshot.documents.items()}
        check_level_copy(self.consolidated, level.path, documents)

    def root_document(self) -> dict[str, Any]:
        """The root group's ``zarr.json`` as :meth:`write_root` writes it."""
        return group_document(self.root.to_attributes())

    def write_root(self) -> None:
        write_node(self.storage, "", self.root_document())


def check_zv_array(attrs: Mapping[str, Any], relpath: str, file: str) -> None:
    """Refuse a node whose ``zv_array`` is unknown, missing, or not the one the format puts at ``relpath``.

    ``relpath`` is relative to the level group; the rule is ``format.schema.expected_node``
    (docs/format.md §1, §5), the one :func:`~zarr_vectors.store.nodes.read_node` and the
    validator apply; this applies it to documents that arrive another way (a consolidated
    block).  §13.2: a discriminator the reader does not know is an error, never a guess.
    """
    check_discriminator(expected_node(tuple(relpath.split("/"))) or Expected("group", PLAIN), attrs, file=file)


def _check_required_capabilities(zv: Any) -> None:
    """Refuse a store that requires a capability this reader does not know (docs/decisions.md D9)."""
    required = zv.get("required_capabilities") if isinstance(zv, dict) else None
    if required is None:
        return
    pointer = "/attributes/zarr_vectors/required_capabilities"
    if not isinstance(required, list) or not all(isinstance(t, str) for t in required):
        raise MetadataError(f"required_capabilities must be a list of strings, found {required!r}",
                            file="zarr.json", pointer=pointer)
    unknown = sorted(set(required) - set(KNOWN_CAPABILITIES))
    if unknown:
        raise UnsupportedLayoutError(
            f"the store requires capabilities this reader does not know: {unknown} (known: {list(KNOWN_CAPABILITIES)})",
            file="zarr.json",
            pointer=pointer,
        )


def open_store(url: str | os.PathLike[str], *, storage_options: Mapping[str, Any] | None = None) -> ZVStore:
    """Open an existing store, reading its root metadata strictly (and refusing unknown required capabilities).

    The reachability probe and the root's GET overlap (one round trip on an object
    store, not two); the probe's error -- a missing bucket, an unreachable endpoint --
    comes first, as soon as the probe alone would give it.
    """
    storage = url if isinstance(url, Storage) else Storage(url, storage_options)
    return open_store_beside(storage, [])[0]


def consolidate_store(url: str | os.PathLike[str], *, storage_options: Mapping[str, Any] | None = None) -> int:
    """Consolidate a store's metadata into its root ``zarr.json``; returns the number of nodes copied.

    Run it after the last write (the ``zv build --consolidate`` stage does).  The
    pyramid builder and the sharder keep the copy current; after changing nodes through
    the lower-level API (``open_store``, the links functions), run it again -- the
    validator reports a copy that no longer matches.  A root that is not a Zarr Vectors
    store, or a level still being written, is refused as the readers refuse it: the copy
    would rewrite a foreign root, or make a store that is not finished look whole.
    """
    storage = Storage(url, storage_options)
    storage.check_reachable()
    if not storage.list_dir(""):
        raise InputError(f"nothing to consolidate at {storage.url!r}: no such store")
    store = open_store(storage)
    storage.overlap(lambda number: store.level(number).require_finished(), store.level_numbers())  # concurrent on S3
    return consolidate(storage)


def open_store_beside(storage: Storage, reads: Sequence[Callable[[], T]]) -> tuple[ZVStore, list[T]]:
    """:func:`open_store` with ``reads`` overlapping its probe and root GET: on an object store
    a caller's first round trips cost none of their own.  Their results -- and their errors
    -- are handed out only once the probe and the root passed every check, so a missing
    bucket or a store that is not one is reported as such, never as what a read met."""

    def guarded(read: Callable[[], T]) -> T | ZarrVectorsError:
        try:
            return read()
        except ZarrVectorsError as exc:  # raised only once the root passed: its error comes first
            return exc

    steps = [storage.check_reachable, lambda: storage.get(meta_key("")), *(partial(guarded, r) for r in reads)]
    _, root, *got = storage.overlap(lambda step: step(), steps)
    store = _opened(storage, root)
    for result in got:
        if isinstance(result, ZarrVectorsError):
            raise result
    return store, got


def open_level(
    url: str | os.PathLike[str],
    number: int,
    *,
    storage_options: Mapping[str, Any] | None = None,
    skim: Callable[[str], bool] | None = None,
) -> Level:
    """``open_store(url).level(number, snapshot=True)`` with the level's walk beside the probe
    and the root's read (:func:`open_store_beside`): two round trips fewer on an object
    store.  ``skim``: groups whose children the walk lists without reading
    (:func:`~zarr_vectors.store.snapshot.snapshot_level`)."""
    return open_level_beside(url, number, [], storage_options=storage_options, skim=skim)[0]


def open_level_beside(
    url: str | os.PathLike[str] | Storage,
    number: int,
    reads: Sequence[Callable[[], T]],
    *,
    storage_options: Mapping[str, Any] | None = None,
    skim: Callable[[str], bool] | None = None,
) -> tuple[Level, list[T]]:
    """:func:`open_level` with ``reads`` in its first round trip, as :func:`open_store_beside`
    has them (a caller's listing of the root, say), and their results."""
    storage = url if isinstance(url, Storage) else Storage(url, storage_options)
    walk = partial(snapshot_level, storage, str(number), skim=skim)
    store, (snap, *got) = open_store_beside(storage, [walk, *reads])
    return store.level(number, snapshot=snap), got


def _opened(storage: Storage, raw: bytes | None) -> ZVStore:
    """The store whose root document is ``raw``, read strictly."""
    if raw is None:
        raise StoreNotFoundError(f"no Zarr Vectors store at {storage.url!r} (no root zarr.json)")
    doc = load_document(raw, file="zarr.json")
    check_format(doc, "", file="zarr.json")
    if doc.get("node_type") != "group":
        raise MetadataError("the root must be a group", file="zarr.json", pointer="/node_type")
    attrs = doc.get("attributes", {})
    if "zarr_vectors" not in attrs:
        raise MetadataError("root group has no zarr_vectors block: not a Zarr Vectors store",
                            file="zarr.json", pointer="/attributes")
    _check_required_capabilities(attrs["zarr_vectors"])
    return ZVStore(storage, RootMetadata.from_attributes(attrs, file="zarr.json"), consolidated=inline_entries(doc))


def get_resolution_level(store: ZVStore | str | os.PathLike[str], level: int) -> Level:
    """Level ``level`` of ``store``: an open store, or the URL or path of one (opened here)."""
    return (store if isinstance(store, ZVStore) else open_store(store)).level(level)


def prepare_location(storage: Storage, *, overwrite: bool) -> None:
    """Refuse an existing store unless ``overwrite``; only then remove it.

    Everything the caller can check about its inputs must be checked before this
    is called: nothing is deleted before the decision to write is final.
    """
    storage.check_reachable()
    if storage.protocol == "file" and os.path.lexists(storage.root) and not os.path.isdir(storage.root):
        raise InputError(f"store path {storage.url!r} is a file, not a directory")
    if storage.protocol == "s3" and "/" not in storage.root:
        raise InputError(f"refusing to write a store at the root of bucket {storage.bucket!r}: use a prefix")
    existing = storage.list_dir("")
    if not existing:
        return
    if not overwrite:
        raise StoreExistsError(
            f"{storage.url!r} already exists ({len(existing)} entries); pass overwrite=True to replace it"
        )
    refuse_foreign_entries(storage, existing)
    storage.delete_prefix("")


@contextmanager
def removed_if_unfinished(storage: Storage) -> Iterator[None]:
    """A write that fails after :func:`create_store` removes what it wrote: the location held
    no store when it began (or ``overwrite`` had emptied it), and the documents a writer sends
    first, without the cells its failed tasks did not write, read as an empty store that
    validated.  Run once the graphs have stopped (the runner waits for started tasks).

    A directory that was there before (made by the user, or a link to one) stays, as does
    anything in it listings skip (``.tmp-`` names); only the entries listed then are removed.
    Two writers of one new location at once are not told apart: the one that fails removes both.
    """
    keep_root = not storage.is_remote and storage.exists("")  # nothing is written yet: a user's directory
    try:
        yield
    except BaseException as exc:
        try:
            if keep_root:
                for name in storage.list_dir(""):
                    storage.delete_prefix(name)
            else:
                storage.delete_prefix("")
        except Exception as lost:  # noqa: BLE001 - the write's failure is what is raised; this is said with it
            exc.add_note(f"and what it wrote at {storage.url!r} could not be removed: {describe(lost)}")
        raise


def refuse_unfinished_relayout(storage: Storage, names: Sequence[str], doing: str) -> None:
    """Refuse ``doing`` (e.g. "building a pyramid") on a store an interrupted ``shard_store`` /
    ``unshard_store`` left commit journals in (``names``: its top's listing; one listing more only
    when the staging area is there).  Changing the store first would make the journals stale, and
    their replay by the next relayout would move old cells over new ones; finishing them is the
    sharder's (a lower layer cannot run it)."""
    if SHARD_STAGING not in names:
        return
    keys = [posixpath.join(SHARD_STAGING, name, COMMIT_JOURNAL) for name in storage.list_dir(SHARD_STAGING)]
    journals = [k for k, there in zip(keys, storage.overlap(storage.exists, keys)) if there]  # one listing, a batch
    if journals:
        raise InconsistentStoreError(
            f"store {storage.url!r}: an interrupted zv shard (or zv shard --unshard) left {len(journals)} array "
            f"commit(s) unfinished ({journals[0]}); run zv shard or zv shard --unshard on it to finish them "
            f"before {doing}")


def refuse_foreign_entries(storage: Storage, names: Sequence[str]) -> None:
    """Refuse to overwrite a location that holds what no store holds (``names``, its top's
    listing): a wrong path -- a home or project directory, an input's folder -- is not emptied.
    A store passes: levels, ``zarr.json`` and our working entries only, its root document a Zarr
    Vectors one -- or, for a write stopped before that document, each level folder holding only
    a level's nodes: a folder of numbered runs, or an OME-Zarr image, has the same top names."""
    ours = ("zarr.json", *ROOT_EXTRAS)
    foreign = [n for n in names if not (LEVEL_NAME.fullmatch(n) or n in ours or n.startswith(WORKING_PREFIX))]
    if not foreign:
        foreign = _foreign_below(storage, names)
    if foreign:
        raise InputError(
            f"{storage.url!r} holds {', '.join(map(repr, foreign[:3]))}{' ...' if len(foreign) > 3 else ''}, "
            "which no Zarr Vectors store holds: not deleting it to overwrite (is this the store's path?)"
        )


def _foreign_below(storage: Storage, names: Sequence[str]) -> list[str]:
    """What a location whose top names are a store's holds that no store does (one GET, or one
    listing and one GET per level folder, made only to overwrite)."""
    if "zarr.json" in names:
        ours = _declares(storage.get("zarr.json"), "zarr.json", "zarr_vectors")
        return [] if ours else ["zarr.json (not a Zarr Vectors root document)"]
    levels = [n for n in names if LEVEL_NAME.fullmatch(n)]
    foreign = []
    for level, below in zip(levels, storage.list_dirs(levels)):
        foreign += [f"{level}/{name}" for name in below if name != "zarr.json" and name not in LEVEL_FAMILIES]
    documents = storage.get_many([f"{level}/zarr.json" for level in levels])
    for level, raw in zip(levels, documents):  # a level's first batch always holds its document
        if not _declares(raw, f"{level}/zarr.json", "zarr_vectors_level"):
            foreign.append(f"{level} (no Zarr Vectors level document)")
    return foreign


def _declares(raw: bytes | None, file: str, block: str) -> bool:
    """Whether ``raw`` is a document whose attributes hold ``block`` (absent or broken: no)."""
    try:
        attrs = load_document(raw or b"", file=file).get("attributes")
    except MetadataError:
        return False
    return isinstance(attrs, dict) and block in attrs


def create_store(
    url: str | os.PathLike[str] | Storage,
    *,
    chunk_shape: Sequence[float],
    bounds: tuple[Sequence[float], Sequence[float]],
    geometry_type: str,
    base_bin_shape: Sequence[float] | None = None,
    axes: list[dict[str, Any]] | None = None,
    links_convention: str = "implicit_sequential",
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    pending: dict[str, dict[str, Any]] | None = None,
    headers: Mapping[str, Mapping[str, Any]] | None = None,
) -> ZVStore:
    """Create the root group, an empty level 0 (no arrays) and the format ``headers`` given.

    With ``pending``, the documents are added to it (by node path) instead of written:
    a writer sends them with its first arrays' documents, one round trip on an object store.
    """
    storage = url if isinstance(url, Storage) else Storage(url, storage_options)
    if geometry_type not in GEOMETRY_TYPES:
        raise InputError(f"unknown geometry type {geometry_type!r}; expected one of {list(GEOMETRY_TYPES)}")
    cs = tuple(float(c) for c in chunk_shape)
    base = tuple(float(b) for b in base_bin_shape) if base_bin_shape is not None else None
    if not cs or not all(math.isfinite(v) and v > 0 for v in cs + (base or ())):
        raise InputError(f"chunk_shape {list(cs)} and base_bin_shape {base} entries must be finite and > 0")
    root = RootMetadata(
        chunk_shape=cs,
        bounds=(tuple(float(v) for v in bounds[0]), tuple(float(v) for v in bounds[1])),
        geometry_types=[geometry_type],
        axes=axes or RootMetadata.default_axes(len(cs)),
        datasets=[RootMetadata.level_transform(0, base or cs, base or cs)],
        base_bin_shape=base,
        links_convention=links_convention,
        name=store_name(storage.root),
    )
    try:  # the strict reader's checks (enumerations, dimensions), before anything is written
        RootMetadata.from_attributes(root.to_attributes())
    except MetadataError as exc:
        raise InputError(f"create_store: {exc}") from None
    header_docs = header_documents(headers)
    prepare_location(storage, overwrite=overwrite)
    store = ZVStore(storage, root)
    level = empty_level(store)
    documents = {"": store.root_document(), level.path: level.document(), **header_docs}
    if pending is None:
        write_nodes(storage, documents)  # one round trip, not one per node
    else:
        pending.update(documents)
    return store


def empty_level(store: ZVStore) -> Level:
    """The level 0 :func:`create_store` writes: a writer goes on with it without reading it back."""
    return Level(store, 0, LevelMetadata(level=0))


def require_group(storage: Storage, path: str) -> dict[str, Any]:
    return require_node(storage, path, "group")
