"""The root and level metadata members (docs/format.md §3-4), each rule stated once.

:data:`ROOT_FIELDS` (``attributes.zarr_vectors``) and :data:`LEVEL_FIELDS`
(``attributes.zarr_vectors_level``) give each member's JSON type, whether a conforming
document has it, what readers assume when it is absent, and its allowed values.
:func:`check` applies one field to a document: the strict parser
(:mod:`zarr_vectors.format.metadata`) raises on the first problem, the validator
(:mod:`zarr_vectors.validation.metadata`) reports every one under its own codes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MIN_ZV_VERSION = (0, 9, 0)

GEOMETRY_TYPES = ("point_cloud", "line", "polyline", "streamline", "skeleton", "graph", "mesh")
LINKS_CONVENTIONS = ("explicit", "implicit_sequential", "implicit_sequential_with_branches")
OBJECT_INDEX_CONVENTIONS = ("standard", "identity")
CROSS_CHUNK_STRATEGIES = ("explicit_links", "boundary_deduplication", "both")
CROSS_LEVEL_STORAGES = ("none", "implicit", "explicit")
KNOWN_CAPABILITIES = ("preserved_object_ids", "shared_fragments", "multiscale_links", "fragment_index")

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:[.+-].*)?$")


# ---------------------------------------------------------------------------
# JSON value predicates (``True`` is a JSON boolean, never the integer 1)
# ---------------------------------------------------------------------------
def is_int(value: Any) -> bool:
    """A JSON integer: an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A JSON number (``NaN`` and infinities included: attributes may hold them)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def short(value: Any) -> str:
    """``repr`` cut to 80 characters, so one bad member cannot flood a message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_version(text: Any) -> tuple[int, int, int]:
    """Numeric version triple (D2: ``0.10.0 > 0.9.0``); ValueError when unparseable."""
    m = _VERSION_RE.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"unparseable zv_version {text!r}")
    return int(m[1]), int(m[2]), int(m[3])


# ---------------------------------------------------------------------------
# the fields
# ---------------------------------------------------------------------------
VERSION = "version"  # a zv_version string this format revision reads
ENUM = "enum"  # one of ``allowed``
INT = "int"  # an integer >= ``minimum`` (or null when ``nullable``)
FRACTION = "fraction"  # a finite number in (0, 1]
BOOL = "bool"
STRINGS = "strings"  # a list of strings; ``allowed`` names the known tokens of an open set
AXIS_NUMBERS = "axis_numbers"  # one finite number > 0 per spatial axis
BOUNDS = "bounds"  # [min[sid_ndim], max[sid_ndim]] of finite numbers, min <= max
ANY = "any"  # any JSON value (kept, not checked)


@dataclass(frozen=True)
class Field:
    """One member of a metadata block.

    ``required``: a conforming document has the member (the validator reports its
    absence).  ``default``: what readers assume when it is absent; a required member
    with a default is one writers always write but readers tolerate missing.
    """

    name: str
    kind: str
    required: bool = False
    default: Any = None
    allowed: tuple[str, ...] = ()
    minimum: int | None = None
    nullable: bool = False
    nonempty: bool = False


def _fields(*fields: Field) -> dict[str, Field]:
    return {f.name: f for f in fields}


ROOT_FIELDS: dict[str, Field] = _fields(
    Field("zv_version", VERSION, required=True),
    Field("format_capabilities", STRINGS, default=(), allowed=KNOWN_CAPABILITIES),
    Field("chunk_shape", AXIS_NUMBERS, required=True),
    Field("bounds", BOUNDS, required=True),
    Field("geometry_types", STRINGS, required=True, allowed=GEOMETRY_TYPES, nonempty=True),
    Field("base_bin_shape", AXIS_NUMBERS),
    Field("links_convention", ENUM, default="implicit_sequential", allowed=LINKS_CONVENTIONS),
    Field("object_index_convention", ENUM, default="standard", allowed=OBJECT_INDEX_CONVENTIONS),
    Field("cross_chunk_strategy", ENUM, default="explicit_links", allowed=CROSS_CHUNK_STRATEGIES),
    Field("cross_level_depth", INT, minimum=-1),
    Field("cross_level_storage", ENUM, allowed=CROSS_LEVEL_STORAGES),
)
"""``attributes.zarr_vectors`` of the root group (docs/format.md §3)."""

LEVEL_FIELDS: dict[str, Field] = _fields(
    Field("level", INT, required=True, minimum=0),
    Field("object_sparsity", FRACTION, default=1.0),
    Field("vertex_count", INT, required=True, default=0, minimum=0),
    Field("coarsening_method", ANY, default="none"),
    Field("parent_level", INT, nullable=True),
    Field("arrays_present", STRINGS, required=True, default=()),
    Field("chunk_shape", AXIS_NUMBERS),
    Field("preserves_object_ids", BOOL, default=False),
    Field("inherited_num_objects", INT, minimum=0),
    Field("shared_fragments", BOOL, default=False),
    Field("fragments_tile", BOOL, default=False),
)
"""``attributes.zarr_vectors_level`` of a level group (docs/format.md §4)."""


def problem(field: Field, value: Any, sid_ndim: int | None = None) -> str | None:
    """What is wrong with ``value`` as ``field`` (None: nothing).

    ``sid_ndim`` (the number of spatial axes) sizes the per-axis members; when it is
    unknown they need only be non-empty.
    """
    name, kind = field.name, field.kind
    if kind == VERSION:
        try:
            parsed = parse_version(value)
        except ValueError:
            return f"{name} {short(value)} does not parse as a version"
        if parsed[0] != 0 or parsed < MIN_ZV_VERSION:
            return f"{name} {value!r} is unsupported: need major version 0 and >= 0.9.0 (compared numerically)"
        return None
    if kind == ENUM:
        return None if value in field.allowed else f"{name} {short(value)} is not one of {list(field.allowed)}"
    if kind == INT:
        if value is None and field.nullable:
            return None
        if is_int(value) and (field.minimum is None or value >= field.minimum):
            return None
        what = "null or an integer" if field.nullable else "an integer"
        bound = f" >= {field.minimum}" if field.minimum is not None else ""
        return f"{name} must be {what}{bound}, found {short(value)}"
    if kind == FRACTION:
        return None if is_finite_number(value) and 0 < value <= 1 else f"{name} must be in (0, 1], found {short(value)}"
    if kind == BOOL:
        return None if isinstance(value, bool) else f"{name} must be a boolean, found {short(value)}"
    if kind == STRINGS:
        if isinstance(value, list) and (value or not field.nonempty) and all(isinstance(v, str) for v in value):
            return None
        return f"{name} must be a {'non-empty ' if field.nonempty else ''}list of strings, found {short(value)}"
    if kind == AXIS_NUMBERS:
        if not isinstance(value, list) or not all(is_finite_number(v) and v > 0 for v in value):
            return f"{name} entries must be finite numbers > 0, found {short(value)}"
        if sid_ndim is not None and len(value) != sid_ndim:
            return f"{name} has {len(value)} entries, sid_ndim is {sid_ndim}"
        return None if value else f"{name} must not be empty"
    if kind == BOUNDS:
        if not (isinstance(value, list) and len(value) == 2 and all(
            isinstance(b, list) and all(is_finite_number(v) for v in b) and (sid_ndim is None or len(b) == sid_ndim)
            for b in value
        ) and len(value[0]) == len(value[1])):
            return f"{name} must be [min[{sid_ndim}], max[{sid_ndim}]] of finite numbers, found {short(value)}"
        if any(lo > hi for lo, hi in zip(value[0], value[1])):
            return f"{name} min exceeds max: {short(value)}"
        return None
    return None


def check(field: Field, block: Mapping[str, Any], sid_ndim: int | None = None) -> tuple[str, str] | None:
    """(JSON pointer below the block, message) of the member's problem, or None.

    A missing required member points at the block itself; any other problem at the member.
    """
    if field.name not in block:
        return ("", f"required key {field.name!r} is missing") if field.required else None
    message = problem(field, block[field.name], sid_ndim)
    return None if message is None else (f"/{field.name}", message)
