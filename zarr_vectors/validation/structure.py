"""Level 1 — structure: the store walk, every ``zarr.json`` read strictly, the node tree.

The walk lists the store once (keys and sizes) through :class:`Storage`'s filesystem and
reads every ``zarr.json`` with the strict reader, collecting every problem.  The result,
a :class:`StoreModel`, is what every later level works from; nothing here goes through
zarr-python.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from zarr_vectors.encoding import unframe_single
from zarr_vectors.errors import MetadataError, StorageObjectError
from zarr_vectors.format.paths import LEVEL_NAME, ROOT_EXTRAS, grid_indices, parse_delta, parse_offsets
from zarr_vectors.format.schema import GRID_KINDS, PLAIN, RAW, ZV_ARRAY_VALUES, discriminator, expected_node, is_int
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.codecs import Pipeline, ShardingSpec
from zarr_vectors.store.consolidated import MEMBER, copy_differences
from zarr_vectors.store.strict_json import find_problems
from zarr_vectors.validation.findings import Report, crashed, make

LOOKS_NUMERIC = re.compile(r"[+-]?[0-9]+")



def display(path: str) -> str:
    return path or "/"


# ---------------------------------------------------------------------------
# the node tree
# ---------------------------------------------------------------------------
@dataclass
class Node:
    path: str
    doc: dict[str, Any] | None
    problems: list[tuple[str, str]] = field(default_factory=list)  # (pointer, message)

    @property
    def node_type(self) -> str | None:
        t = self.doc.get("node_type") if self.doc else None
        return t if t in ("group", "array") else None

    @property
    def attrs(self) -> dict[str, Any]:
        a = self.doc.get("attributes") if self.doc else None
        return a if isinstance(a, dict) else {}

    @property
    def zv_array(self) -> Any:
        """The discriminator as written (any JSON value: level 1 reports one that is not a known string)."""
        return discriminator(self.attrs)

    @property
    def kind(self) -> str | None:
        """The discriminator when it is one this format describes, else None."""
        zv = self.zv_array
        return zv if isinstance(zv, str) and zv in ZV_ARRAY_VALUES else None

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


@dataclass
class StoreModel:
    storage: Storage
    objects: dict[str, int]
    nodes: dict[str, Node]
    # array path -> {cell index tuple: (key, size)} (chunks of the array's own grid: shards when sharded)
    cells: dict[str, dict[tuple[int, ...], tuple[str, int]]] = field(default_factory=dict)
    levels: dict[int, str] = field(default_factory=dict)
    allow_layouts: tuple[str, ...] = ()
    # sharded grid array path -> its cells as read from the shard indexes (filled at level 3)
    shards: dict[str, Any] = field(default_factory=dict)
    # keys listed but never opened -- links, FIFOs, devices -- with what each is; directories
    special: dict[str, str] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    _tree: tuple[int, dict[str, list[Node]]] | None = field(default=None, init=False, repr=False, compare=False)

    # -- root ----------------------------------------------------------------
    @property
    def root(self) -> Node | None:
        return self.nodes.get("")

    @property
    def zv(self) -> dict[str, Any]:
        block = self.root.attrs.get("zarr_vectors") if self.root else None
        return block if isinstance(block, dict) else {}

    @property
    def axes(self) -> list[Any] | None:
        ms = self.root.attrs.get("multiscales") if self.root else None
        if isinstance(ms, list) and ms and isinstance(ms[0], dict) and isinstance(ms[0].get("axes"), list):
            return ms[0]["axes"]
        return None

    @property
    def sid_ndim(self) -> int | None:
        axes = self.axes
        if axes:
            return len(axes)
        cs = self.zv.get("chunk_shape")
        return len(cs) if isinstance(cs, list) and cs else None

    # -- tree ----------------------------------------------------------------
    def children(self, path: str) -> list[Node]:
        """The nodes one segment below ``path``, by path."""
        if self._tree is None or self._tree[0] != len(self.nodes):
            tree: dict[str, list[Node]] = {}
            for p, n in sorted(self.nodes.items()):
                parent = p.rpartition("/")[0]
                if p and (parent or "/" not in p):  # "/a" is below no path ("" is the root's)
                    tree.setdefault(parent, []).append(n)
            # indexed once: checks ask for the children of every group, and a scan each was
            # quadratic in the nodes (0.09 s of the client for a 400-array store)
            self._tree = (len(self.nodes), tree)
        return list(self._tree[1].get(path, ()))

    def node(self, path: str) -> Node | None:
        return self.nodes.get(path)

    def level_attrs(self, number: int) -> dict[str, Any]:
        node = self.nodes.get(self.levels.get(number, "\0"))
        block = node.attrs.get("zarr_vectors_level") if node else None
        return block if isinstance(block, dict) else {}

    def grid_arrays(self, number: int) -> list[Node]:
        """Every grid array below a level whose discriminator says so."""
        prefix = self.levels[number] + "/"
        return [
            n for p, n in sorted(self.nodes.items())
            if p.startswith(prefix) and n.node_type == "array" and n.kind in GRID_KINDS
        ]

    def grid_rank(self, number: int) -> int | None:
        d = self.sid_ndim
        if d is None:
            return None
        return d + 1 if "chunk_dims" in self.level_attrs(number) else d


def load_model(storage: Storage, report: Report) -> StoreModel:
    """List the store and read every ``zarr.json`` strictly (problems become L1 findings).

    Objects the listing names as links, FIFOs or devices are never read (L1_STORAGE_OBJECT):
    their nodes have no document.
    """
    listing = storage.scan()
    objects, special = listing.sizes, dict(listing.special)
    meta_keys = sorted(k for k in objects if (k == "zarr.json" or k.endswith("/zarr.json")) and k not in special)
    nodes: dict[str, Node] = {}
    for key, raw in zip(meta_keys, _read_documents(storage, meta_keys, special)):
        path = "" if key == "zarr.json" else key[: -len("/zarr.json")]
        if key in special:  # became a link or FIFO since the listing
            nodes[path] = Node(path, None)
            continue
        doc, problems = find_problems(b"" if raw is None else raw)  # None: vanished since the listing
        nodes[path] = Node(path, doc, [(p.pointer, p.message) for p in problems])
    for key in special:
        if key == "zarr.json" or key.endswith("/zarr.json"):
            path = "" if key == "zarr.json" else key[: -len("/zarr.json")]
            nodes[path] = Node(path, None)
    return StoreModel(storage, objects, nodes, special=special, dirs=list(listing.dirs))


def _read_documents(storage: Storage, keys: list[str], special: dict[str, str]) -> list[bytes | None]:
    """The documents' bytes; one that the storage layer refuses is recorded in ``special``."""
    try:
        return storage.get_many(keys)
    except StorageObjectError:
        pass
    out: list[bytes | None] = []
    for key in keys:
        try:
            out.append(storage.get(key))
        except StorageObjectError as exc:
            special[key] = f"refused when read ({exc})"
            out.append(None)
    return out


# ---------------------------------------------------------------------------
# cell codecs (grid arrays) and chunk keys
# ---------------------------------------------------------------------------
_ONE_ITEM_FRAMING = 8  # a grid cell's vlen framing: u32 item count, u32 length


class CellCodec:
    """Decodes a grid array's stored cells: ``vlen-bytes`` plus at most one compressor.

    A sharded array (docs/format.md §9) is one ``sharding_indexed`` codec whose inner chunks
    (one cell each) use such a pipeline; ``sharding`` is then its
    :class:`~zarr_vectors.store.codecs.ShardingSpec` and :meth:`payload` decodes an
    inner chunk.  The codecs are the library's own (:mod:`zarr_vectors.store.codecs`).
    """

    def __init__(self, doc: dict[str, Any], *, file: str) -> None:
        codecs = doc.get("codecs")
        if not isinstance(codecs, list) or not codecs:
            raise MetadataError("no codec list", file=file, pointer="/codecs")
        first = codecs[0] if isinstance(codecs[0], dict) else {"name": codecs[0]}
        self.sharding: ShardingSpec | None = None
        if first.get("name") == "sharding_indexed":
            self.sharding = _sharding(doc, file)
            self.pipeline = self.sharding.inner
            return
        if first.get("name") != "vlen-bytes":
            raise MetadataError(
                f"codec {first.get('name')!r}: grid arrays are vlen-bytes cells (optionally compressed), or "
                "sharding_indexed over such cells (docs/format.md §9)",
                file=file,
                pointer="/codecs/0",
            )
        if len(codecs) > 2:
            raise MetadataError(f"{len(codecs)} codecs; vlen-bytes takes at most one compressor", file=file,
                                pointer="/codecs")
        self.pipeline = Pipeline.from_codecs(codecs, file=file)
        grid = grid_chunk_shape(doc)
        if grid is None or any(c != 1 for c in grid):
            raise MetadataError("grid arrays must have chunk_shape 1 on every axis (one cell per chunk) unless "
                                "sharded", file=file, pointer="/chunk_grid/configuration/chunk_shape")

    def payload(self, raw: bytes, limit: int | None = None, where: str = "") -> bytes:
        """The payload of a stored cell (an inner chunk when sharded): decompressed, unframed.

        ``limit`` is the most the payload may hold (from metadata, format/bounds.py): a cell
        decoding to more raises ResourceLimitError before the excess is produced.
        """
        max_size = None if limit is None else limit + _ONE_ITEM_FRAMING
        return bytes(unframe_single(self.pipeline.decompress(raw, max_size=max_size, where=where)))


def _sharding(doc: dict[str, Any], file: str) -> ShardingSpec:
    """The array's sharding spec, restricted to what docs/format.md §9 writes (and this validator checks)."""
    spec = ShardingSpec.from_array(doc, file=file) if isinstance(doc["codecs"][0], dict) else None
    if spec is None:
        raise MetadataError("sharding_indexed must be a codec object", file=file, pointer="/codecs/0")
    if spec.index_location != "end" or not spec.index_crc:
        raise MetadataError(
            f"shard index {'at the ' + spec.index_location if spec.index_location != 'end' else 'without a CRC32C'}: "
            "docs/format.md §9 shards have index_codecs [bytes (little endian), crc32c] and index_location 'end'",
            file=file,
            pointer="/codecs/0/configuration",
        )
    return spec


def grid_chunk_shape(doc: dict[str, Any]) -> list[int] | None:
    """The regular grid's chunk shape when it is a list of integers (level 1 reports any other)."""
    grid = doc.get("chunk_grid")
    conf = grid.get("configuration") if isinstance(grid, dict) else None
    shape = conf.get("chunk_shape") if isinstance(conf, dict) else None
    return shape if isinstance(shape, list) and all(is_int(c) for c in shape) else None


def key_parser(doc: dict[str, Any]) -> tuple[str, str] | None:
    """(prefix, separator) of the array's chunk keys; None when the encoding is unusable.

    An unusable encoding (an unknown name, a separator other than '/' or '.') is a level-1
    or level-2 finding of its own; the array's objects then belong to no cell.
    """
    enc = doc.get("chunk_key_encoding", {})
    name = enc.get("name") if isinstance(enc, dict) else enc
    conf = enc.get("configuration", {}) if isinstance(enc, dict) else {}
    if name not in ("default", "v2") or not isinstance(conf, dict):
        return None
    sep = conf.get("separator", "." if name == "v2" else "/")
    if sep not in ("/", "."):
        return None
    return ("" if name == "v2" else "c"), sep


def parse_cell_key(rel: str, prefix: str, sep: str, ndim: int) -> tuple[int, ...] | None:
    if prefix:
        if sep == "/":
            if not rel.startswith(prefix + "/"):
                return None
            rel = rel[len(prefix) + 1:]
        else:
            if not rel.startswith(prefix + sep):
                return None
            rel = rel[len(prefix) + len(sep):]
    parts = rel.split(sep)
    return grid_indices(parts) if len(parts) == ndim else None


def cell_key(path: str, index: Iterable[int], prefix: str, sep: str) -> str:
    body = sep.join(str(i) for i in index)
    if prefix:
        body = prefix + sep + body
    return f"{path}/{body}"


def origin_of(node: Node) -> tuple[int, ...] | None:
    shape = node.doc.get("shape") if node.doc else None
    ndim = len(shape) if isinstance(shape, list) else None
    origin = node.attrs.get("chunk_grid_origin")
    if origin is None:
        return (0,) * ndim if ndim is not None else None
    if isinstance(origin, list) and all(is_int(v) for v in origin):
        return tuple(origin)
    return None


# ---------------------------------------------------------------------------
# level 1 checks
# ---------------------------------------------------------------------------
def _json_code(message: str) -> str:
    m = message.lower()
    if m.startswith("starts with a utf-8 byte order mark"):
        return "L1_JSON_BOM"
    if m.startswith(("not valid utf-8", "not valid json", "top level must be")):
        return "L1_BAD_JSON"
    if m.startswith("duplicate key"):
        return "L1_JSON_DUPLICATE_KEY"
    if m.startswith("non-finite number"):
        return "L1_JSON_NONFINITE"
    if m.startswith("nesting is deeper"):
        return "L1_JSON_TOO_DEEP"
    if m.startswith("unknown configuration key"):
        return "L1_JSON_UNKNOWN_KEY"
    if m.startswith("bad ") and " configuration: " in m:
        return "L1_JSON_CODEC_CONFIG"
    if m.startswith("fill_value of a") or m.startswith("raw data type"):
        return "L1_JSON_FILL_VALUE"
    if "extension name" in m and ("must match" in m or "must be a string" in m):
        return "L1_JSON_EXTENSION_NAME"
    if "must_understand" in m and "unknown member" not in m:
        return "L1_JSON_MUST_UNDERSTAND"
    if "chunk length" in m or "chunk_shape" in m or "entries, expected one per array dimension" in m:
        return "L1_JSON_CHUNK_LENGTH"
    if "consolidated_metadata" in m or "(zarr-python 3.0.x wrote null" in m:
        return "L1_JSON_CONSOLIDATED"
    if "one per dimension" in m or "dimension_names" in m:
        return "L1_JSON_DIMENSION_NAMES"
    return "L1_JSON_ENVELOPE"


def check_structure(model: StoreModel, report: Report) -> None:
    """Every level-1 rule except the manifest decode (run as tasks by :func:`manifest_tasks`)."""
    for code in ("L1_BAD_JSON", "L1_JSON_BOM", "L1_JSON_DUPLICATE_KEY", "L1_JSON_NONFINITE", "L1_JSON_TOO_DEEP",
                 "L1_JSON_ENVELOPE", "L1_JSON_EXTENSION_NAME", "L1_JSON_MUST_UNDERSTAND", "L1_JSON_CHUNK_LENGTH",
                 "L1_JSON_CONSOLIDATED", "L1_JSON_DIMENSION_NAMES"):
        report.ran_rule(code, len(model.nodes))
    for node in model.nodes.values():
        for pointer, message in node.problems:
            report.add(make(_json_code(message), display(node.path), message, pointer=pointer or "/"))
    _check_storage_objects(model, report)
    root = model.root
    if root is None:
        report.add(make("L1_STORE_EMPTY", "/", f"no root zarr.json at {model.storage.url!r}"))
        return
    report.ran_rule("L1_STORE_EMPTY")
    _check_tree(model, report)
    _check_consolidated(model, report)
    if root.doc is None:
        return
    report.ran_rule("L1_ROOT_NOT_GROUP")
    if root.node_type != "group":
        report.add(make("L1_ROOT_NOT_GROUP", "/", f"the root is a {root.doc.get('node_type')!r}, not a group",
                        pointer="/node_type"))
        return
    report.ran_rule("L1_MISSING_ROOT_ZV")
    if not isinstance(root.attrs.get("zarr_vectors"), dict):
        report.add(make("L1_MISSING_ROOT_ZV", "/", "root attributes have no zarr_vectors block: not a Zarr Vectors "
                        "store", pointer="/attributes"))
        return
    report.ran_rule("L1_NO_OME")
    if "ome" not in root.attrs:
        report.add(make("L1_NO_OME", "/", "no RFC 8 'ome' node in the root attributes; the store cannot be resolved "
                        "as a member of an OME collection", pointer="/attributes"))
    _check_levels(model, report)
    for number in sorted(model.levels):
        try:
            _check_level(model, number, report)
        except Exception as exc:  # noqa: BLE001 - a crash is a finding
            report.add(crashed(1, model.levels[number], exc, what="level structure"))


def _check_storage_objects(model: StoreModel, report: Report) -> None:
    """Links, FIFOs, sockets and devices anywhere in the store, and directories where a
    ``zarr.json`` or a chunk file belongs: all from the listing (lstat), none opened.

    Stores are data from elsewhere: a link may name a file outside the store (a valid
    copy, ``/etc/passwd``), a FIFO blocks whoever opens it, so no reader may use them.
    """
    report.ran_rule("L1_STORAGE_OBJECT", len(model.objects))
    arrays = {p: n for p, n in model.nodes.items() if n.node_type == "array"}
    found: list[tuple[str, str]] = []  # (key, message)
    for key, what in sorted(model.special.items()):
        problem = what if what.startswith("refused") else f"is a {what}, not a regular file"
        found.append((key, f"{key!r} {problem}: readers refuse it (a store holds only regular files and "
                           "directories; links are never followed)"))
    for key in sorted(model.dirs):
        owner = _owning_array(key, arrays)
        if posixpath.basename(key) == "zarr.json":
            found.append((key, f"{key!r} is a directory where a zarr.json belongs: readers refuse it"))
        elif owner is not None and _is_cell_key(key, owner, arrays[owner]):
            found.append((key, f"{key!r} is a directory where a chunk file belongs: readers refuse it"))
    for key, message in found[:50]:
        owner = _owning_array(key, arrays)
        report.add(make("L1_STORAGE_OBJECT", display(owner if owner is not None else posixpath.dirname(key)), message))
    if len(found) > 50:
        report.add(make("L1_STORAGE_OBJECT", "/", f"... and {len(found) - 50} more objects that are not regular files"))


def _is_cell_key(key: str, owner: str, node: Node) -> bool:
    shape = node.doc.get("shape") if node.doc else None
    if not isinstance(shape, list):
        return False
    parser = key_parser(node.doc or {})
    if parser is None:  # an unusable encoding is another rule's finding
        return False
    prefix, sep = parser
    return parse_cell_key(key[len(owner) + 1:], prefix, sep, len(shape)) is not None


def _check_consolidated(model: StoreModel, report: Report) -> None:
    """A group's consolidated copy against the nodes below it, as zarr-python would use it.

    zarr-python opens a consolidated group from the copy alone, so an entry that
    differs from the node's own ``zarr.json``, names a node that is not there, or
    leaves one out shows readers a store other than the one on disk.  Group entries
    carry zarr-python's own (empty) ``consolidated_metadata``, which is not compared.
    """
    report.ran_rule("L1_CONSOLIDATED_FORM")
    report.ran_rule("L1_CONSOLIDATED_STALE")
    for path, node in sorted(model.nodes.items()):
        block = node.doc.get(MEMBER) if node.node_type == "group" else None
        if not isinstance(block, dict):
            continue  # absent, or not an object (L1_JSON_CONSOLIDATED)
        where = display(path)
        entries = block.get("metadata")
        if block.get("kind") != "inline" or not isinstance(entries, dict):
            report.add(make("L1_CONSOLIDATED_FORM", where, f"must be {{\"kind\": \"inline\", "
                            f"\"metadata\": {{path: document}}}}, found kind {block.get('kind')!r} and metadata of "
                            f"type {type(entries).__name__}", pointer="/consolidated_metadata"))
            continue
        prefix = f"{path}/" if path else ""
        below = {p[len(prefix):]: n.doc for p, n in model.nodes.items() if p.startswith(prefix) and p != path}
        stale = copy_differences(entries, below)
        for problem in stale[:20]:
            report.add(make("L1_CONSOLIDATED_STALE", where, f"{problem}: zarr readers that use the copy see another "
                            "store (consolidate again)", pointer="/consolidated_metadata"))
        if len(stale) > 20:
            report.add(make("L1_CONSOLIDATED_STALE", where, f"... and {len(stale) - 20} more stale entries",
                            pointer="/consolidated_metadata"))


def _check_tree(model: StoreModel, report: Report) -> None:
    """Implicit groups, stray objects, and the cells of every array."""
    report.ran_rule("L1_MISSING_NODE")
    report.ran_rule("L1_STRAY_OBJECT")
    missing: set[str] = set()
    for path in model.nodes:
        parts = path.split("/") if path else []
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent not in model.nodes:
                missing.add(parent)
    for parent in sorted(missing):
        report.add(make("L1_MISSING_NODE", parent, "directory holds nodes but has no zarr.json (Zarr v3 has no "
                        "implicit groups)"))
    arrays = {p: n for p, n in model.nodes.items() if n.node_type == "array"}
    parsers = {}
    for p, n in arrays.items():
        shape = n.doc.get("shape") if n.doc else None
        ndim = len(shape) if isinstance(shape, list) else None
        parsers[p] = (key_parser(n.doc or {}), ndim)
        model.cells[p] = {}
    stray: list[str] = []
    for key, size in model.objects.items():
        if key == "zarr.json" or key.endswith("/zarr.json"):
            continue
        owner = _owning_array(key, arrays)
        if owner is None:
            if key not in model.special:  # already an L1_STORAGE_OBJECT error
                stray.append(key)
            continue
        parser, ndim = parsers[owner]
        index = (parse_cell_key(key[len(owner) + 1:], *parser, ndim)
                 if ndim is not None and parser is not None else None)
        if index is None:
            if key not in model.special:
                stray.append(key)
            continue
        model.cells[owner][index] = (key, size)
    for key in sorted(stray)[:50]:
        report.add(make("L1_STRAY_OBJECT", display(posixpath.dirname(key)), f"unexpected object {key!r} (not a "
                        "zarr.json and not a chunk of an array)"))
    if len(stray) > 50:
        report.add(make("L1_STRAY_OBJECT", "/", f"... and {len(stray) - 50} more unexpected objects"))


def _owning_array(key: str, arrays: dict[str, Node]) -> str | None:
    parts = key.split("/")
    for i in range(len(parts) - 1, 0, -1):
        candidate = "/".join(parts[:i])
        if candidate in arrays:
            return candidate
    return None


def _check_levels(model: StoreModel, report: Report) -> None:
    report.ran_rule("L1_NO_LEVELS")
    report.ran_rule("L1_BAD_LEVEL_NAME")
    report.ran_rule("L1_LEVEL_NOT_GROUP")
    report.ran_rule("L1_UNKNOWN_ROOT_CHILD")
    for child in model.children(""):
        name = child.name
        if LEVEL_NAME.fullmatch(name):
            if child.node_type != "group":
                report.add(make("L1_LEVEL_NOT_GROUP", name, f"level {name} is a {child.node_type or 'broken node'}, "
                                "not a group", pointer="/node_type"))
                continue
            model.levels[int(name)] = name
        elif LOOKS_NUMERIC.fullmatch(name):
            report.add(make("L1_BAD_LEVEL_NAME", name, f"level name {name!r} is not a bare non-negative integer "
                            "(no sign, no leading zeros, at most 18 digits)"))
        elif name not in ROOT_EXTRAS:
            report.add(make("L1_UNKNOWN_ROOT_CHILD", name, f"root child {name!r} is neither a level nor a known "
                            "root entity"))
    if not model.levels:
        report.add(make("L1_NO_LEVELS", "/", "no level group (bare integer name) under the root"))


def _check_level(model: StoreModel, number: int, report: Report) -> None:
    lpath = model.levels[number]
    for code in ("L1_MISSING_VERTICES", "L1_MISSING_VERTEX_FRAGMENTS", "L1_ZV_ARRAY_MISSING", "L1_ZV_ARRAY_UNKNOWN",
                 "L1_ZV_ARRAY_WRONG_PATH", "L1_UNEXPECTED_NODE", "L1_NODE_TYPE", "L1_BAD_DELTA_NAME",
                 "L1_BAD_OFFSETS_NAME", "L1_GRID_RANK", "L1_BAD_ORIGIN"):
        report.ran_rule(code)
    if f"{lpath}/vertices" not in model.nodes:
        report.add(make("L1_MISSING_VERTICES", lpath, "level has no vertices array"))
    if f"{lpath}/vertex_fragments" not in model.nodes:
        report.add(make("L1_MISSING_VERTEX_FRAGMENTS", lpath, "level has no vertex_fragments array"))
    rank = model.grid_rank(number)
    prefix = lpath + "/"
    for path, node in sorted(model.nodes.items()):
        if not path.startswith(prefix) or node.doc is None:
            continue
        rel = tuple(path[len(prefix):].split("/"))
        _check_node(model, number, node, rel, rank, report)


def _check_node(model: StoreModel, number: int, node: Node, rel: tuple[str, ...], rank: int | None,
                report: Report) -> None:
    shown = node.path
    exp = expected_node(rel)
    zv = node.zv_array
    if exp is None:
        if zv is None:
            report.add(make("L1_UNEXPECTED_NODE", shown, f"a {node.node_type or 'node'} at a path the format does "
                            "not describe, with no zv_array discriminator"))
        elif node.kind is None:
            report.add(make("L1_ZV_ARRAY_UNKNOWN", shown, f"unknown zv_array discriminator {_short(zv)}: the node was "
                            "written to a contract this validator does not know", pointer="/attributes/zv_array"))
        else:
            report.add(make("L1_ZV_ARRAY_WRONG_PATH", shown, f"zv_array {zv!r} at a path the format does not "
                            "describe", pointer="/attributes/zv_array"))
        return
    if node.node_type != exp.node_type:
        report.add(make("L1_NODE_TYPE", shown, f"must be an {exp.node_type}, found {node.node_type!r}",
                        pointer="/node_type"))
        return
    if exp.kind in (PLAIN, RAW):
        if zv is not None:
            code = "L1_ZV_ARRAY_UNKNOWN" if node.kind is None else "L1_ZV_ARRAY_WRONG_PATH"
            report.add(make(code, shown, f"zv_array {_short(zv)} on a node that carries no discriminator "
                            f"({'/'.join(rel)})", pointer="/attributes/zv_array"))
    elif zv is None:
        report.add(make("L1_ZV_ARRAY_MISSING", shown, f"no zv_array discriminator (expected {exp.kind!r})",
                        pointer="/attributes"))
        return
    elif node.kind is None:
        report.add(make("L1_ZV_ARRAY_UNKNOWN", shown, f"unknown zv_array discriminator {_short(zv)} (expected "
                        f"{exp.kind!r}); refusing to guess", pointer="/attributes/zv_array"))
        return
    elif zv != exp.kind:
        report.add(make("L1_ZV_ARRAY_WRONG_PATH", shown, f"zv_array {zv!r} where the path requires {exp.kind!r}",
                        pointer="/attributes/zv_array"))
        return
    # names of the links tree
    head = rel[0]
    if head == "links" and len(rel) >= 2 or head == "link_attributes" and len(rel) >= 3:
        dname = rel[1] if head == "links" else rel[2]
        try:
            delta = parse_delta(dname)
        except ValueError as exc:
            if len(rel) == (2 if head == "links" else 3):
                report.add(make("L1_BAD_DELTA_NAME", shown, str(exc)))
            return
        if len(rel) == (3 if head == "links" else 4):
            _check_offsets_name(model, number, node, delta, rel[-1], report)
    if exp.kind in GRID_KINDS:
        _check_grid_geometry(node, rank, report)


def _check_offsets_name(model: StoreModel, number: int, node: Node, delta: int, segment: str,
                        report: Report) -> None:
    from zarr_vectors.format.paths import format_delta

    family = model.nodes.get(f"{model.levels[number]}/links/{format_delta(delta)}")
    fattrs = family.attrs if family else {}
    width = fattrs.get("link_width")
    if not is_int(width) or width < 1:
        # no usable family policy: fall back to the array's own claim (the family is checked at L2)
        width = node.attrs.get("link_width", width)
    # the chunk-key rank of the level; a family sid_ndim that disagrees is an L2 finding, not a
    # reason to call every segment malformed
    sid = model.grid_rank(number)
    if sid is None:
        sid = fattrs.get("sid_ndim")
    if not is_int(width) or not is_int(sid) or width < 1 or sid < 1:
        return
    try:
        parse_offsets(segment, link_width=width, sid_ndim=sid)
    except ValueError as exc:
        report.add(make("L1_BAD_OFFSETS_NAME", node.path, str(exc)))


def _check_grid_geometry(node: Node, rank: int | None, report: Report) -> None:
    shape = node.doc.get("shape") if node.doc else None
    ndim = len(shape) if isinstance(shape, list) else None
    if rank is not None and ndim is not None and ndim != rank:
        report.add(make("L1_GRID_RANK", node.path, f"grid array has {ndim} dimensions, the level's chunk keys have "
                        f"{rank}", pointer="/shape"))
    if "chunk_grid_origin" in node.attrs:
        origin = node.attrs["chunk_grid_origin"]
        want = rank if rank is not None else ndim
        ok = isinstance(origin, list) and all(is_int(v) and -(1 << 63) <= v < 1 << 63 for v in origin)
        if not ok or (want is not None and len(origin) != want):
            report.add(make("L1_BAD_ORIGIN", node.path, f"chunk_grid_origin must be {want} int64 integers, found "
                            f"{_short(origin)}", pointer="/attributes/chunk_grid_origin"))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
