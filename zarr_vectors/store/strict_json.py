"""Strict reading and writing of ``zarr.json`` documents (docs/decisions.md D10).

Every ``zarr.json`` the project reads goes through :func:`check_document` or
:func:`load_document`. Python's ``json`` module silently keeps the last of two duplicate
keys, accepts ``NaN`` anywhere and recurses until the interpreter gives up; a store that
relies on any of that reads differently in other Zarr implementations, so each such
document is reported with the file and a JSON pointer (RFC 6901) to the offending member.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from zarr_vectors.errors import MetadataError
from zarr_vectors.format.schema import is_int
from zarr_vectors.store.extensions import (
    check_codec_configuration,
    check_fill_value,
    check_plain_configuration,
    item_size,
    known_data_type,
)

__all__ = ["MAX_DEPTH", "Problem", "check_document", "dump_document", "find_problems", "json_pointer", "load_document"]

MAX_DEPTH: Final = 256
"""Deepest container nesting a document may have (the root object is depth 1)."""

_BOM: Final = b"\xef\xbb\xbf"
_ESCAPE_RE: Final = re.compile(rb"\\.", re.DOTALL)
_NOT_STRUCTURAL: Final = bytes(sorted(set(range(256)) - set(b'"[]{}')))
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_TOKEN_RE: Final = re.compile(rf"({_STRING})(\s*:)?|([\[{{])|([\]}}])|(,)", re.DOTALL)
_EXTENSION_NAME_RE: Final = re.compile(r"[a-z][a-z0-9_.-]+")
_URI_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s]+")

_GROUP_MEMBERS: Final = frozenset({"zarr_format", "node_type", "attributes", "consolidated_metadata"})
_ARRAY_REQUIRED: Final = ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs")
_ARRAY_MEMBERS: Final = frozenset(
    {"zarr_format", "node_type", "attributes", "dimension_names", "storage_transformers", *_ARRAY_REQUIRED}
)

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One violation, located by an RFC 6901 pointer (``""`` is the document root)."""

    pointer: str
    message: str


def json_pointer(*tokens: str | int) -> str:
    """RFC 6901 pointer to the member reached through ``tokens``."""
    return "".join("/" + str(token).replace("~", "~0").replace("/", "~1") for token in tokens)


class _Report:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: Path, message: str) -> None:
        self.problems.append(Problem(json_pointer(*path), message))

    def add_all(self, base: Path, found: Iterator[tuple[Path, str]]) -> None:
        for path, message in found:
            self.add((*base, *path), message)


def _show(value: object) -> str:
    """A value as JSON spells it, so ``true`` is not mistaken for ``1`` in a message."""
    text = json.dumps(value, allow_nan=True)
    return text if len(text) <= 60 else text[:57] + "..."


def check_document(raw: bytes, *, file: str) -> tuple[dict[str, Any] | None, list[MetadataError]]:
    """Parse a ``zarr.json`` and report every problem, not just the first.

    The parsed document is returned even when it has problems (the last of duplicate
    keys wins), and is ``None`` only when it cannot be parsed into an object at all.
    """
    doc, problems = find_problems(raw)
    return doc, [MetadataError(p.message, file=file, pointer=p.pointer) for p in problems]


def load_document(raw: bytes, *, file: str) -> dict[str, Any]:
    """Parse a ``zarr.json``, raising :class:`MetadataError` for its first problem."""
    doc, errors = check_document(raw, file=file)
    if errors:
        raise errors[0]
    assert doc is not None
    return doc


def find_problems(raw: bytes) -> tuple[dict[str, Any] | None, list[Problem]]:
    """:func:`check_document` without a file name, for callers that attach their own context."""
    report = _Report()
    skipped = len(_BOM) if raw.startswith(_BOM) else 0
    if skipped:
        report.add((), "starts with a UTF-8 byte order mark (U+FEFF); zarr.json must not have one")
    body = bytes(raw[skipped:])
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        report.add((), f"not valid UTF-8: {exc.reason} at byte {exc.start + skipped}")
        return None, report.problems
    too_deep = _too_deep(body, text)
    if too_deep is not None:
        report.add(too_deep, f"nesting is deeper than {MAX_DEPTH} levels")
        return None, report.problems

    duplicates: dict[int, tuple[dict[str, Any], list[str]]] = {}

    def collect(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            counts = Counter(key for key, _ in pairs)
            # Keeping ``obj`` alive pins its id, so no later object can be mistaken for it.
            duplicates[id(obj)] = (obj, [key for key, count in counts.items() if count > 1])
        return obj

    non_finite_seen = False

    def constant(token: str) -> float:  # NaN, Infinity, -Infinity
        nonlocal non_finite_seen
        non_finite_seen = True
        return float(token)

    def number(token: str) -> float:  # a literal beyond the double range parses to +-inf
        nonlocal non_finite_seen
        value = float(token)
        if not math.isfinite(value):
            non_finite_seen = True
        return value

    try:
        doc = json.loads(text, object_pairs_hook=collect, parse_constant=constant, parse_float=number)
    except json.JSONDecodeError as exc:
        report.add((), f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        return None, report.problems
    except (ValueError, RecursionError) as exc:  # an integer over Python's digit limit, or a broken string
        report.add((), f"not valid JSON: {exc}")
        return None, report.problems
    if not isinstance(doc, dict):
        report.add((), f"top level must be a JSON object, got {type(doc).__name__}")
        return None, report.problems

    if duplicates:
        for path, obj in _objects(doc, ()):
            entry = duplicates.get(id(obj))
            if entry is not None and entry[0] is obj:
                for key in entry[1]:
                    report.add(path, f"duplicate key {key!r} (JSON readers disagree on which value wins)")
    for path in _non_finite(doc, ()) if non_finite_seen else ():  # the walk only when the parser saw one
        report.add(
            path,
            "non-finite number (NaN, Infinity or a literal beyond the double range) is only allowed "
            "inside 'attributes'",
        )
    _check_envelope(doc, report)
    return doc, report.problems


def same_json(a: Any, b: Any) -> bool:
    """Whether two parsed JSON values are the same JSON: a NaN attribute (the strict reader
    allows one) equals itself, and ``true``, ``1`` and ``1.0`` differ -- Python's ``==`` says
    neither, while a zarr reader sees ``True`` where the other document has ``1``."""
    return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)


def dump_document(doc: dict[str, Any]) -> bytes:
    """Serialise a ``zarr.json`` as zarr-python does (indent 2, UTF-8, no BOM).

    Bare ``NaN``/``Infinity`` tokens are written only inside ``attributes``, where
    zarr-python writes them too; anywhere else they are refused, since the strict reader
    would refuse the file (a NaN ``fill_value`` must already be the string ``"NaN"``).
    """
    try:  # the C encoder refuses every non-finite number; only then walk to find where
        return json.dumps(doc, indent=2, allow_nan=False).encode("utf-8")
    except ValueError:
        pass
    path = next(_non_finite(doc, ()), None)
    if path is not None:
        raise MetadataError("non-finite number outside 'attributes' cannot be written", pointer=json_pointer(*path))
    return json.dumps(doc, indent=2, allow_nan=True).encode("utf-8")


def _too_deep(data: bytes, text: str) -> Path | None:
    """Path of the first container nested deeper than MAX_DEPTH, found before ``json.loads`` recurses.

    The count runs over the UTF-8 bytes (multi-byte sequences never contain ASCII
    bytes): with escapes removed, a bracket is inside a string iff an odd number of
    quotes precede it, so only quotes and brackets need to reach NumPy.
    """
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:  # too few openers, in strings or not
        return None
    codes = np.frombuffer(_ESCAPE_RE.sub(b"", data).translate(None, _NOT_STRUCTURAL), dtype=np.uint8)
    outside = ~np.logical_xor.accumulate(codes == ord('"'))
    opens = ((codes == ord("[")) | (codes == ord("{"))) & outside
    brackets = np.flatnonzero(opens | (((codes == ord("]")) | (codes == ord("}"))) & outside))
    if brackets.size == 0 or int(np.cumsum(opens[brackets].astype(np.int64) * 2 - 1).max()) <= MAX_DEPTH:
        return None
    # Rare error path: walk the tokens again to name the container, keys included.
    stack: list[list[Any]] = []  # [is_object, current key or index] per open container
    for match in _TOKEN_RE.finditer(text):
        string, colon, opener, closer, comma = match.groups()
        if opener:
            if len(stack) == MAX_DEPTH:
                return tuple(token for _, token in stack)
            stack.append([opener == "{", "" if opener == "{" else 0])
        elif closer and stack:
            stack.pop()
        elif comma and stack and not stack[-1][0]:
            stack[-1][1] += 1
        elif colon and stack and stack[-1][0]:
            stack[-1][1] = _decode_string(string)
    return ()  # only for invalid JSON on which the two scans disagree about strings


def _decode_string(literal: str) -> str:
    try:
        return str(json.loads(literal))
    except ValueError:
        return literal[1:-1]


def _objects(value: Any, path: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    if isinstance(value, dict):
        yield path, value
        for key, child in value.items():
            yield from _objects(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _objects(child, (*path, index))


def _is_attributes(path: Path) -> bool:
    """Whether ``path`` is a node's ``attributes`` member, the one place non-finite numbers may live.

    Besides the document's own, that includes each node's attributes copied into a
    group's inline ``consolidated_metadata`` by zarr-python.
    """
    return path == ("attributes",) or (
        len(path) == 4 and path[:2] == ("consolidated_metadata", "metadata") and path[3] == "attributes"
    )


def _non_finite(value: Any, path: Path) -> Iterator[Path]:
    if isinstance(value, float):
        if not math.isfinite(value):
            yield path
    elif isinstance(value, dict):
        for key, child in value.items():
            child_path = (*path, key)
            if not _is_attributes(child_path):
                yield from _non_finite(child, child_path)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _non_finite(child, (*path, index))


def _check_envelope(doc: dict[str, Any], report: _Report) -> None:
    if "zarr_format" not in doc:
        report.add(("zarr_format",), "missing; must be the integer 3")
    elif not (is_int(doc["zarr_format"]) and doc["zarr_format"] == 3):
        report.add(("zarr_format",), f"must be the integer 3, got {_show(doc['zarr_format'])}")
    node_type = doc.get("node_type")
    if "node_type" not in doc:
        report.add(("node_type",), "missing; must be 'group' or 'array'")
    elif node_type == "group":
        _check_group(doc, report)
    elif node_type == "array":
        _check_array(doc, report)
    else:
        report.add(("node_type",), f"must be 'group' or 'array', got {_show(node_type)}")


def _check_unknown_members(doc: dict[str, Any], known: frozenset[str], report: _Report) -> None:
    for key, value in doc.items():
        if key not in known and not (isinstance(value, dict) and value.get("must_understand") is False):
            report.add(
                (key,),
                f"unknown member {key!r}; the Zarr v3 spec allows one only as an object with "
                '"must_understand": false',
            )


def _check_attributes(doc: dict[str, Any], report: _Report) -> None:
    if "attributes" in doc and not isinstance(doc["attributes"], dict):
        report.add(("attributes",), f"must be an object when present, got {_show(doc['attributes'])}")


def _check_group(doc: dict[str, Any], report: _Report) -> None:
    _check_attributes(doc, report)
    if "consolidated_metadata" in doc and not isinstance(doc["consolidated_metadata"], dict):
        report.add(
            ("consolidated_metadata",),
            f"must be an object when present, got {_show(doc['consolidated_metadata'])} "
            "(zarr-python 3.0.x wrote null; remove the key)",
        )
    _check_unknown_members(doc, _GROUP_MEMBERS, report)


def _check_array(doc: dict[str, Any], report: _Report) -> None:
    for member in _ARRAY_REQUIRED:
        if member not in doc:
            report.add((member,), "required array member is missing")
    ndim = _check_shape(doc["shape"], report) if "shape" in doc else None
    if "data_type" in doc:
        _check_data_type(doc, report)
    if "chunk_grid" in doc:
        _check_chunk_grid(doc["chunk_grid"], ndim, report)
    if "chunk_key_encoding" in doc:
        _check_chunk_key_encoding(doc["chunk_key_encoding"], report)
    if "codecs" in doc:
        data_type = doc.get("data_type")
        name = data_type.get("name") if isinstance(data_type, dict) else data_type
        _check_codecs(doc["codecs"], ("codecs",), ndim, report, item_size(name))
    _check_attributes(doc, report)
    if "dimension_names" in doc:
        _check_dimension_names(doc["dimension_names"], ndim, report)
    if "storage_transformers" in doc:
        transformers = doc["storage_transformers"]
        if isinstance(transformers, list):
            for index, transformer in enumerate(transformers):
                _check_extension(transformer, ("storage_transformers", index), report)
        else:
            report.add(("storage_transformers",), f"must be a list when present, got {_show(transformers)}")
    _check_unknown_members(doc, _ARRAY_MEMBERS, report)


def _check_data_type(doc: dict[str, Any], report: _Report) -> None:
    """The data type, and the fill value against it, when a definition here claims the name."""
    name, configuration = _check_extension(doc["data_type"], ("data_type",), report)
    if not isinstance(name, str) or not known_data_type(name):
        return
    if configuration:
        path: Path = ("data_type", "configuration")
        report.add_all(path, check_plain_configuration("data type", name, configuration, frozenset()))
    fill = doc.get("fill_value")
    if "fill_value" in doc and not (isinstance(fill, float) and not math.isfinite(fill)):  # else reported already
        report.add_all(("fill_value",), check_fill_value(name, fill))


def _check_shape(shape: Any, report: _Report) -> int | None:
    """Check ``shape`` and return the array's dimensionality when it is a list."""
    if not isinstance(shape, list):
        report.add(("shape",), f"must be a list of non-negative integers, got {_show(shape)}")
        return None
    for index, length in enumerate(shape):
        if not is_int(length) or length < 0:
            report.add(("shape", index), f"dimension length must be a non-negative integer, got {_show(length)}")
    return len(shape)


def _check_dimension_names(names: Any, ndim: int | None, report: _Report) -> None:
    if not isinstance(names, list):
        report.add(("dimension_names",), f"must be a list when present, got {_show(names)}")
        return
    for index, name in enumerate(names):
        if name is not None and not isinstance(name, str):
            report.add(("dimension_names", index), f"must be a string or null, got {_show(name)}")
    if ndim is not None and len(names) != ndim:
        report.add(("dimension_names",), f"has {len(names)} entries, expected one per dimension ({ndim})")


def _check_extension(value: Any, path: Path, report: _Report) -> tuple[str | None, dict[str, Any] | None]:
    """Check one extension point; return its name and configuration (``{}`` when absent).

    The configuration is ``None`` when it is unusable (already reported), so callers
    check it further only when it can be read. A plain string is the short form of
    ``{"name": ...}``.
    """
    if isinstance(value, str):
        name: Any = value
        name_path = path
        configuration: dict[str, Any] | None = {}
    elif isinstance(value, dict):
        name_path = (*path, "name")
        name = value.get("name")
        configuration = value.get("configuration", {})
        if "name" not in value:
            report.add(path, "extension object has no 'name'")
        elif not isinstance(name, str):
            report.add(name_path, f"extension name must be a string, got {_show(name)}")
            name = None
        if not isinstance(configuration, dict):
            report.add((*path, "configuration"), f"must be an object when present, got {_show(configuration)}")
            configuration = None
        if "must_understand" in value:
            must_understand = value["must_understand"]
            if must_understand is False:
                report.add(
                    (*path, "must_understand"),
                    "must_understand: false is refused at an extension point: a reader that skipped it "
                    "would decode wrong data",
                )
            elif must_understand is not True:
                report.add((*path, "must_understand"), f"must be true when present, got {_show(must_understand)}")
    else:
        report.add(path, f"must be an extension name or an object with a 'name', got {_show(value)}")
        return None, None
    if isinstance(name, str) and not (_EXTENSION_NAME_RE.fullmatch(name) or _URI_RE.fullmatch(name)):
        report.add(name_path, f"extension name {name!r} must match ^[a-z][a-z0-9-_.]+$ or be a URI")
    return name, configuration


def _check_chunk_lengths(value: Any, path: Path, ndim: int | None, report: _Report) -> None:
    if not isinstance(value, list):
        report.add(path, f"must be a list of integers >= 1, got {_show(value)}")
        return
    for index, length in enumerate(value):
        if not is_int(length) or length < 1:
            report.add((*path, index), f"chunk length must be an integer >= 1, got {_show(length)}")
    if ndim is not None and len(value) != ndim:
        report.add(path, f"has {len(value)} entries, expected one per array dimension ({ndim})")


def _check_chunk_grid(grid: Any, ndim: int | None, report: _Report) -> None:
    name, configuration = _check_extension(grid, ("chunk_grid",), report)
    if name != "regular" or configuration is None:
        return
    report.add_all(("chunk_grid", "configuration"),
                   check_plain_configuration("chunk grid", name, configuration, frozenset({"chunk_shape"})))
    if "chunk_shape" in configuration:
        _check_chunk_lengths(configuration["chunk_shape"], ("chunk_grid", "configuration", "chunk_shape"), ndim, report)
    else:
        report.add(("chunk_grid",), "regular chunk grid needs configuration.chunk_shape")


def _check_chunk_key_encoding(encoding: Any, report: _Report) -> None:
    name, configuration = _check_extension(encoding, ("chunk_key_encoding",), report)
    if name in ("default", "v2") and configuration is not None:
        report.add_all(("chunk_key_encoding", "configuration"), check_plain_configuration(
            "chunk key encoding", name, configuration, frozenset({"separator"})))
    if name in ("default", "v2") and configuration is not None and "separator" in configuration:
        separator = configuration["separator"]
        if separator not in ("/", "."):
            report.add(
                ("chunk_key_encoding", "configuration", "separator"),
                f"{name} chunk key encoding separator must be '/' or '.', got {_show(separator)}",
            )


def _check_codecs(codecs: Any, path: Path, ndim: int | None, report: _Report, itemsize: int | None) -> None:
    """A codec list; ``itemsize`` is the byte size of the elements it receives (None: unknown)."""
    if not isinstance(codecs, list):
        report.add(path, f"must be a list of codecs, got {_show(codecs)}")
        return
    if not codecs:
        report.add(path, "must list at least one codec")
    for index, codec in enumerate(codecs):
        codec_path = (*path, index)
        name, configuration = _check_extension(codec, codec_path, report)
        if isinstance(name, str) and configuration is not None:
            report.add_all((*codec_path, "configuration"), check_codec_configuration(name, configuration, itemsize))
        if name != "sharding_indexed" or configuration is None:
            continue
        configuration_path = (*codec_path, "configuration")
        if "chunk_shape" in configuration:
            _check_chunk_lengths(configuration["chunk_shape"], (*configuration_path, "chunk_shape"), ndim, report)
        else:
            report.add(codec_path, "sharding_indexed codec needs configuration.chunk_shape")
        for member, size in (("codecs", itemsize), ("index_codecs", 8)):  # the index: u64 pairs
            if member in configuration:
                _check_codecs(configuration[member], (*configuration_path, member), ndim, report, size)
            else:
                report.add(codec_path, f"sharding_indexed codec needs configuration.{member}")
