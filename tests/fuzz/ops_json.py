"""JSON operators: hostile values at any path of any ``zarr.json``, and broken documents.

Paths are drawn from every member of a document (of a list, its first, second and last
elements), so hostile values land in codecs, shapes, presence lists, the consolidated
block and the Zarr Vectors attributes alike.
"""

from __future__ import annotations

import json
from typing import Any

from .operators import Ctx, operator
from .storeio import Inventory

Path_ = tuple[Any, ...]

#: the hostile values, one operator each
HOSTILE: dict[str, Any] = {
    "null": None,
    "empty_string": "",
    "list": [1, "x"],
    "dict": {"a": 1},
    "zero": 0,
    "minus_one": -1,
    "2p31": 2**31,
    "2p63": 2**63,
    "1e12": 10**12,
    "1e39": 1e39,
    "denormal": 5e-324,
}


def docs(inv: Inventory) -> list[str]:
    return list(inv.docs)


def paths(doc: Any) -> list[Path_]:
    """Every member path below the document root (lists: elements 0, 1 and -1)."""
    out: list[Path_] = []

    def walk(value: Any, path: Path_) -> None:
        if path:
            out.append(path)
        if isinstance(value, dict):
            for k in value:
                walk(value[k], (*path, k))
        elif isinstance(value, list) and value:
            for i in sorted({0, min(1, len(value) - 1), len(value) - 1}):
                walk(value[i], (*path, i))

    walk(doc, ())
    return out


#: members most paths of a root document lie in, which no Zarr Vectors rule reads
_BULK = ("multiscales", "ome")
_STRUCTURE = ("shape", "chunk_grid", "codecs", "chunk_key_encoding", "data_type", "fill_value", "node_type",
              "zarr_format", "storage_transformers")


def _focused(path: Path_) -> bool:
    if path[0] == "attributes":
        return len(path) == 1 or path[1] not in _BULK
    return path[0] in _STRUCTURE


def choose(ctx: Ctx, found: list[Path_]) -> Path_:
    """A path, two times in three among the format's own members (the Zarr envelope and the
    Zarr Vectors attributes; not the OME/multiscales bulk or the consolidated copies)."""
    focus = [p for p in found if _focused(p)]
    pool = focus if focus and ctx.rng.random() < 2 / 3 else found
    return pool[ctx.rng.randrange(len(pool))]


def _parent(doc: Any, path: Path_) -> Any:
    for p in path[:-1]:
        doc = doc[p]
    return doc


def _pick(ctx: Ctx, key: str) -> tuple[Any, Path_]:
    doc = ctx.doc(key)
    return doc, choose(ctx, paths(doc))


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _show(path: Path_) -> str:
    return "/" + "/".join(str(p) for p in path)


def _replace(ctx: Ctx, key: str, value: Any) -> str:
    doc = ctx.doc(key)
    path = choose(ctx, [p for p in paths(doc) if not _same(_parent(doc, p)[p[-1]], value)])  # never a no-op
    _parent(doc, path)[path[-1]] = value
    ctx.write_doc(key, doc)
    return f"{key}#{_show(path)} = {json.dumps(value)}"


def _hostile_operator(label: str, value: Any) -> None:
    def apply(ctx: Ctx, key: str) -> str:
        return _replace(ctx, key, value)

    apply.__doc__ = f"a member at a random path of a zarr.json set to {json.dumps(value)}"
    operator(f"json_{label}", "json", docs)(apply)


for _label, _value in HOSTILE.items():
    _hostile_operator(_label, _value)


def _other_type(value: Any) -> Any:
    if isinstance(value, bool):
        return "true"
    if isinstance(value, str):
        return 7
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return {"0": value[0] if value else None}
    if isinstance(value, dict):
        return [next(iter(value), "x")]
    return {}


@operator("json_wrong_type", "json", docs)
def _wrong_type(ctx: Ctx, key: str) -> str:
    """a member replaced by a value of another JSON type (string <-> number, list <-> object, ...)"""
    doc, path = _pick(ctx, key)
    parent = _parent(doc, path)
    parent[path[-1]] = _other_type(parent[path[-1]])
    ctx.write_doc(key, doc)
    return f"{key}#{_show(path)} = {json.dumps(parent[path[-1]])}"


def _dict_members(doc: Any) -> list[Path_]:
    return [p for p in paths(doc) if isinstance(_parent(doc, p), dict)]


@operator("json_delete_key", "json", docs)
def _delete_key(ctx: Ctx, key: str) -> str:
    """an object member removed"""
    doc = ctx.doc(key)
    path = choose(ctx, _dict_members(doc))
    del _parent(doc, path)[path[-1]]
    ctx.write_doc(key, doc)
    return f"{key}#{_show(path)} deleted"


MARK = "\u0001zv-fuzz-mark\u0001"


def _with_marker(ctx: Ctx, key: str, *, members_only: bool = False) -> tuple[str, Path_, Any]:
    """The document's text with the value at a random path replaced by a marker string."""
    doc = ctx.doc(key)
    path = choose(ctx, _dict_members(doc) if members_only else paths(doc))
    parent = _parent(doc, path)
    old = parent[path[-1]]
    parent[path[-1]] = MARK
    return json.dumps(doc, indent=2), path, old


def _marker_text(text: str, replacement: str) -> str:
    return text.replace(json.dumps(MARK), replacement, 1)


@operator("json_duplicate_key", "json", docs)
def _duplicate_key(ctx: Ctx, key: str) -> str:
    """a member written twice in the raw text, the second time with a hostile value"""
    text, path, old = _with_marker(ctx, key, members_only=True)
    hostile = list(HOSTILE.values())[ctx.rng.randrange(len(HOSTILE))]
    name = json.dumps(path[-1])
    text = text.replace(f"{name}: {json.dumps(MARK)}", f"{name}: {json.dumps(old)}, {name}: {json.dumps(hostile)}", 1)
    ctx.write(key, text.encode())
    return f"{key}#{_show(path)} duplicated, second value {json.dumps(hostile)}"


@operator("json_truncate", "json", docs)
def _truncate(ctx: Ctx, key: str) -> str:
    """the document cut at a random byte"""
    raw = ctx.read(key)
    at = ctx.rng.randrange(len(raw))
    ctx.write(key, raw[:at])
    return f"{key} truncated to {at} of {len(raw)} bytes"


@operator("json_bom", "json", docs)
def _bom(ctx: Ctx, key: str) -> str:
    """a UTF-8 byte order mark before the document"""
    ctx.write(key, b"\xef\xbb\xbf" + ctx.read(key))
    return f"{key} starts with a BOM"


@operator("json_deep_nesting", "json", docs)
def _deep(ctx: Ctx, key: str) -> str:
    """a member replaced by 100,000 nested lists"""
    text, path, _ = _with_marker(ctx, key)
    depth = 100_000
    ctx.write(key, _marker_text(text, "[" * depth + "]" * depth).encode())
    return f"{key}#{_show(path)} = {depth} nested lists"


@operator("json_non_utf8", "json", docs)
def _non_utf8(ctx: Ctx, key: str) -> str:
    """a member replaced by a string holding bytes that are not UTF-8"""
    text, path, _ = _with_marker(ctx, key)
    raw = _marker_text(text, '"MARK"').encode().replace(b'"MARK"', b'"\xff\xfe\xc0\x80"', 1)
    ctx.write(key, raw)
    return f"{key}#{_show(path)} = non-UTF-8 bytes"


@operator("json_nan", "json", docs)
def _nan(ctx: Ctx, key: str) -> str:
    """a member replaced by NaN, Infinity or -Infinity (not JSON, accepted by Python's parser)"""
    text, path, _ = _with_marker(ctx, key)
    literal = ("NaN", "Infinity", "-Infinity")[ctx.rng.randrange(3)]
    ctx.write(key, _marker_text(text, literal).encode())
    return f"{key}#{_show(path)} = {literal}"


@operator("json_huge_int", "json", docs)
def _huge_int(ctx: Ctx, key: str) -> str:
    """a member replaced by an integer of 5,000 digits (beyond Python's int parsing limit)"""
    text, path, _ = _with_marker(ctx, key)
    ctx.write(key, _marker_text(text, "9" * 5000).encode())
    return f"{key}#{_show(path)} = a 5000-digit integer"


@operator("json_not_object", "json", docs)
def _not_object(ctx: Ctx, key: str) -> str:
    """the whole document replaced by a JSON value that is not an object"""
    doc = ctx.doc(key)
    value = ([], "zarr", None, 42, [doc])[ctx.rng.randrange(5)]
    ctx.write(key, json.dumps(value).encode())
    return f"{key} = {type(value).__name__} {json.dumps(value)[:40]}"


@operator("json_empty_file", "json", docs)
def _empty(ctx: Ctx, key: str) -> str:
    """the document emptied (zero bytes)"""
    ctx.write(key, b"")
    return f"{key} emptied"
