"""Path segments of the links families, dotted chunk keys, and what lives at each path.

Every ``<delta>`` and ``<offsets>`` directory name is composed and parsed here and
nowhere else, so writers, readers and the validator agree on one spelling. Only the
canonical spelling parses (docs/decisions.md D16): ``+0``, ``-0`` or ``+01`` would name the
same geometry as another directory and silently split a family in two.

:data:`LEVEL_FAMILIES` names the nodes a level may hold; what each must declare is
``format.schema.expected_node``.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Sequence

import numpy as np

from zarr_vectors.errors import InputError

__all__ = [
    "LEVEL_NAME",
    "ROOT_EXTRAS",
    "SELF_SEGMENT",
    "TEMP_PREFIX",
    "WORKING_PREFIX",
    "format_chunk_key",
    "format_delta",
    "format_offsets",
    "intra_offsets",
    "is_intra",
    "link_attributes_group_path",
    "link_attributes_path",
    "links_group_path",
    "links_path",
    "parse_chunk_key",
    "parse_chunk_keys",
    "parse_delta",
    "parse_offsets",
]

LEVEL_NAME = re.compile(r"0|[1-9][0-9]{0,17}")
"""A level group's name under the root: a bare non-negative integer of ASCII digits, at most 18 of
them (match with ``fullmatch``): ``int()`` of it is a 64-bit level number, where ``str.isdigit``
also takes '²' and a 5,000-digit name that ``int()`` refuses."""

ROOT_EXTRAS = ("parametric", "headers")
"""What else a store's root may hold beside its levels and ``zarr.json``."""

WORKING_PREFIX = ".zv-"
"""This implementation's own working entries in a store (the sharder's staging area)."""

SHARD_STAGING = f"{WORKING_PREFIX}shard-staging"
"""The sharder's staging area: per array, its new objects and, once complete, its commit journal
(:mod:`zarr_vectors.sharding.journal`); a journal there is an unfinished change of the store."""

COMMIT_JOURNAL = "commit.json"
"""An array's commit journal in its staging directory."""

TEMP_PREFIX = ".tmp-"
"""A local or fsspec write's temporary file beside its object, renamed over it when whole:
listings and walks skip such names, so no node of a store may take one."""

MAX_NAME_BYTES = 255
"""Longest path segment, in UTF-8 bytes, the common file systems hold (ext4, XFS, APFS, NTFS)."""

SELF_SEGMENT = "self"
"""The offsets segment of a ``link_width == 1`` family: no other endpoint to locate."""

# ``[0-9]`` rather than ``\d``: ``\d`` also matches non-ASCII digits such as "١".
_DELTA_RE = re.compile(r"0|[+-][1-9][0-9]*")
_CHUNK_COMPONENT_RE = re.compile(r"0|-?[1-9][0-9]*")
CHUNK_COMPONENT = _CHUNK_COMPONENT_RE.pattern
"""One component of a dotted chunk key as :func:`format_chunk_key` spells it (a regex)."""
_GRID_INDEX_RE = re.compile(r"0|[1-9][0-9]{0,18}")  # at most 19 digits: int() of any length is never asked


def grid_indices(parts: Sequence[str]) -> tuple[int, ...] | None:
    """The chunk-grid indices that the components of a stored object's key below ``c/`` spell,
    or None when they spell none: ASCII digits without leading zeros, as zarr writes them (a
    cell has one key: ``00`` or ``٣`` beside ``0`` and ``3`` is a stray, not a second name), each
    below 2**63 (an index past int64 names no cell of any array)."""
    if not all(_GRID_INDEX_RE.fullmatch(p) for p in parts):
        return None
    indices = tuple(int(p) for p in parts)
    return indices if all(i < 1 << 63 for i in indices) else None


Offsets = Sequence[Sequence[int]]


def _as_int(value: object, what: str) -> int:
    """Accept Python and NumPy integers; refuse bools and floats, which would format wrongly."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, got bool {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}") from None


def format_delta(delta: int) -> str:
    """Spell a level delta or offset component: ``0``, ``+N`` or ``-N``."""
    value = _as_int(delta, "delta")
    return f"{value:+d}" if value else "0"


def parse_delta(text: str) -> int:
    """Parse a canonically spelled delta; any other spelling is a malformed segment."""
    if not isinstance(text, str) or _DELTA_RE.fullmatch(text) is None:
        raise InputError(
            f"delta segment {text!r} is not canonical: expected '0', '+N' or '-N' (N without leading zeros)"
        )
    return _int64s(text, "delta segment", [int(text)])[0]


def _check_arity(link_width: int, sid_ndim: int) -> None:
    if _as_int(link_width, "link_width") < 1:
        raise InputError(f"link_width must be >= 1, got {link_width}")
    if _as_int(sid_ndim, "sid_ndim") < 1:
        raise InputError(f"sid_ndim must be >= 1, got {sid_ndim}")


def format_offsets(offsets: Offsets) -> str:
    """Spell the ``L - 1`` relative offsets of a family's array; ``()`` (``L == 1``) is ``self``."""
    if len(offsets) == 0:
        return SELF_SEGMENT
    widths = {len(offset) for offset in offsets}
    if len(widths) != 1 or 0 in widths:
        raise InputError(f"offsets {offsets!r} must all have the same, non-zero number of components")
    return "_".join(".".join(format_delta(c) for c in offset) for offset in offsets)


def parse_offsets(segment: str, *, link_width: int, sid_ndim: int) -> tuple[tuple[int, ...], ...]:
    """Parse an offsets segment, refusing one whose arity disagrees with its family.

    A wrong arity would otherwise decode every row of the array against the wrong
    geometry, so it fails here, naming the segment.
    """
    _check_arity(link_width, sid_ndim)
    if link_width == 1:
        if segment == SELF_SEGMENT:
            return ()
        raise InputError(f"offsets segment {segment!r} must be {SELF_SEGMENT!r} for link_width 1")
    if segment == SELF_SEGMENT:
        raise InputError(
            f"offsets segment {SELF_SEGMENT!r} is only valid for link_width 1, expected "
            f"{link_width - 1} offsets for link_width {link_width}"
        )
    parts = segment.split("_")
    if len(parts) != link_width - 1:
        raise InputError(
            f"offsets segment {segment!r} has {len(parts)} offsets, expected {link_width - 1} "
            f"(link_width {link_width})"
        )
    parsed = []
    for part in parts:
        components = part.split(".")
        if len(components) != sid_ndim:
            raise InputError(
                f"offsets segment {segment!r} has {len(components)} components per offset, expected {sid_ndim}"
            )
        bad = [c for c in components if _DELTA_RE.fullmatch(c) is None]
        if bad:
            raise InputError(
                f"offsets segment {segment!r} has non-canonical component {bad[0]!r}: "
                "expected '0', '+N' or '-N' (N without leading zeros)"
            )
        parsed.append(_int64s(segment, "offsets segment", [int(c) for c in components]))
    return tuple(parsed)


def intra_offsets(sid_ndim: int, link_width: int) -> tuple[tuple[int, ...], ...]:
    """The all-zero offsets naming a family's intra-chunk array."""
    _check_arity(link_width, sid_ndim)
    return ((0,) * sid_ndim,) * (link_width - 1)


def is_intra(offsets: Offsets) -> bool:
    """Whether every endpoint sits in the source chunk (vacuously true for ``L == 1``)."""
    return all(c == 0 for offset in offsets for c in offset)


def check_name(name: object, what: str) -> str:
    """A name that becomes one path segment of the store (an attribute's): not empty, no ``/``,
    not ``.`` or ``..``, and no control character -- a tab or a NUL in a key is one that
    obstore cannot list and some file systems cannot hold, so a write failed half-way (or
    untyped) where it is refused here."""
    if not isinstance(name, str) or not name or "/" in name or name in (".", "..") or \
            any(c < " " or c == "\x7f" for c in name):
        raise InputError(f"invalid {what} name {name!r}: a name is one path segment of the store "
                         "(not empty, no '/', not '.' or '..', no control character)")
    return name


def check_new_name(name: object, what: str) -> str:
    """:func:`check_name`, and a name a writer may give a new node: one every store can hold and
    lists again -- UTF-8 (not a lone surrogate), at most :data:`MAX_NAME_BYTES`, not
    ``zarr.json`` (its group's own document) nor a :data:`TEMP_PREFIX` name (written, validated,
    never read).  Names found in a store are read as they are: another writer may have used a
    store without these limits (S3 keys reach 1,024 bytes)."""
    check_name(name, what)
    assert isinstance(name, str)
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise InputError(f"invalid {what} name {name!r}: not encodable as UTF-8 (a lone surrogate), as every "
                         "store key is") from None
    if size > MAX_NAME_BYTES:
        raise InputError(f"invalid {what} name {name[:40]!r}...: {size} bytes in UTF-8, more than the "
                         f"{MAX_NAME_BYTES} a file system holds in one path segment")
    if name == "zarr.json" or name.startswith(TEMP_PREFIX):
        raise InputError(f"invalid {what} name {name!r}: 'zarr.json' and names beginning {TEMP_PREFIX!r} are the "
                         "store's own (a group's document, a write's temporary files)")
    return name


def links_group_path(delta: int) -> str:
    """``links/<delta>``, relative to a level group."""
    return f"links/{format_delta(delta)}"


def links_path(delta: int, offsets: Offsets) -> str:
    """``links/<delta>/<offsets>``, relative to a level group."""
    return f"{links_group_path(delta)}/{format_offsets(offsets)}"


def link_attributes_group_path(name: str, delta: int) -> str:
    """``link_attributes/<name>/<delta>``, relative to a level group."""
    return f"link_attributes/{check_name(name, 'link attribute')}/{format_delta(delta)}"


def link_attributes_path(name: str, delta: int, offsets: Offsets) -> str:
    """``link_attributes/<name>/<delta>/<offsets>``, relative to a level group."""
    return f"{link_attributes_group_path(name, delta)}/{format_offsets(offsets)}"


def format_chunk_key(coords: Sequence[int]) -> str:
    """Dotted absolute chunk key as stored in ``nonempty_chunks`` (``-1.0.2``)."""
    if len(coords) == 0:
        raise InputError("a chunk key needs at least one coordinate")
    return ".".join(str(_as_int(c, "chunk coordinate")) for c in coords)


def parse_chunk_key(key: str, ndim: int | None = None) -> tuple[int, ...]:
    """Parse a dotted absolute chunk key; only the spelling :func:`format_chunk_key` writes.

    A key spelled two ways (``01`` and ``1``) would list one cell twice in
    ``nonempty_chunks``, so non-canonical spellings are refused.
    """
    if not isinstance(key, str):
        raise InputError(f"chunk key must be a string, got {type(key).__name__} {key!r}")
    components = key.split(".")
    bad = [c for c in components if _CHUNK_COMPONENT_RE.fullmatch(c) is None]
    if bad:
        raise InputError(
            f"chunk key {key!r} has malformed component {bad[0]!r}: expected a signed decimal "
            "integer without '+', whitespace or leading zeros"
        )
    if ndim is not None and len(components) != ndim:
        raise InputError(f"chunk key {key!r} has {len(components)} components, expected {ndim}")
    return _int64s(key, "chunk key", [int(c) for c in components])


@functools.lru_cache(maxsize=8)
def _chunk_keys_re(ndim: int) -> re.Pattern[str]:
    """Comma-separated canonical keys of ``ndim`` components (a key holding a comma fails the count check)."""
    component = _CHUNK_COMPONENT_RE.pattern
    key = rf"(?:{component})(?:\.(?:{component})){{{ndim - 1}}}"
    return re.compile(rf"{key}(?:,{key})*")


def parse_chunk_keys(keys: Sequence[object], ndim: int) -> np.ndarray:
    """Many keys at once, as an (n, ndim) int64 array: one regex match and one conversion for the list.

    Accepts exactly what :func:`parse_chunk_key` accepts; otherwise raises that function's
    error for the first entry it refuses.
    """
    if not keys:
        return np.zeros((0, max(ndim, 0)), dtype=np.int64)
    if ndim >= 1 and all(isinstance(k, str) for k in keys):
        joined = ",".join(keys)  # type: ignore[arg-type]
        if _chunk_keys_re(ndim).fullmatch(joined):
            values = joined.replace(",", ".").split(".")
            if len(values) == len(keys) * ndim:
                try:
                    return np.array(values, dtype=np.int64).reshape(-1, ndim)
                except OverflowError:
                    pass  # a component past int64: the key-by-key pass names it
    return np.array([parse_chunk_key(k, ndim) for k in keys], dtype=np.int64).reshape(-1, ndim)  # type: ignore[arg-type]


def _int64s(text: str, what: str, values: list[int]) -> tuple[int, ...]:
    """``values`` as a tuple, refusing a component no int64 holds (chunk coordinates are int64 everywhere)."""
    if any(not -(1 << 63) <= v < 1 << 63 for v in values):
        raise InputError(f"{what} {text!r} has a component outside the int64 range")
    return tuple(values)


# ---------------------------------------------------------------------------
# what the format puts at each path below a level (docs/format.md §1, §5)
# ---------------------------------------------------------------------------
#: The names a level's ``arrays_present`` may list: each is a node directly below the level.
LEVEL_FAMILIES = frozenset(
    {
        "vertices", "vertex_attributes", "fragment_attributes", "links", "object_index", "link_attributes",
        "object_attributes", "groups", "group_attributes", "vertex_fragments", "link_fragments",
    }
)
