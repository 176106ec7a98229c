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

import numpy as np

from zarr_vectors.format.coarsen import AGGREGATION_MEMBER, REDUCTIONS
from zarr_vectors.format.objects import absence_fill
from zarr_vectors.format.paths import LEVEL_NAME

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


def whole_ratio(num: float, den: float) -> int | None:
    """``num / den`` when it is a whole number >= 1 (within 1e-9, relative), else None.

    Shapes are finite and > 0 but may be as far apart as 1e38 and 5e-324, whose quotient
    is infinite: that is "not a whole multiple", never an exception.
    """
    r = num / den
    if not math.isfinite(r):
        return None
    k = round(r)
    return k if k >= 1 and abs(r - k) <= 1e-9 * max(1.0, r) else None


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
NAMED_ENUM = "named_enum"  # an object mapping names to one of ``allowed`` each


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
    Field(AGGREGATION_MEMBER, NAMED_ENUM, allowed=REDUCTIONS),
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
    if kind == NAMED_ENUM:
        if isinstance(value, dict) and all(isinstance(k, str) and k and v in field.allowed for k, v in value.items()):
            return None
        return f"{name} must map names to one of {list(field.allowed)}, found {short(value)}"
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


# ---------------------------------------------------------------------------
# group blocks below a level: the object index (docs/format.md §6.7)
# ---------------------------------------------------------------------------
OBJECT_INDEX_FIELDS: dict[str, Field] = _fields(
    Field("num_objects", INT, required=True, minimum=0),
    Field("num_present", INT, required=True, minimum=0),
    Field("sid_ndim", INT, required=True, minimum=1),
    Field("object_ids_sorted", BOOL),
)
"""``attributes`` of ``object_index`` (its ``layout`` is decided by docs/decisions.md D1)."""

FAMILY_STORES = ("canonical", "duplicate")
LINKS_FAMILY_FIELDS: dict[str, Field] = _fields(
    Field("link_width", INT, required=True, minimum=1),
    Field("directed", BOOL, required=True, default=False),
    Field("store", ENUM, required=True, default="canonical", allowed=FAMILY_STORES),
    Field("sid_ndim", INT, required=True, minimum=1),
    Field("level_delta", INT, required=True),
)
"""``attributes`` of a ``links/<d>`` family group (§5): its policy.  ``sid_ndim`` must also
equal the level's rank and ``level_delta`` the delta its path names (the validator's
cross-field rules)."""

FAMILY_COUNT_FIELDS: dict[str, Field] = _fields(
    Field("num_links", INT, minimum=0),
    Field("num_physical_records", INT, minimum=0),
)
"""The counts a ``links/<d>`` or ``link_attributes/<n>/<d>`` family records, where present (§5)."""


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``true`` is not ``1`` and ``1.0`` is not ``1`` (Python's ``==`` says both are)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------------------
# arrays (docs/format.md §2.1, §2.3, §6): what each one's zarr.json must say
# ---------------------------------------------------------------------------
VLEN_DATA_TYPE = "variable_length_bytes"
GRID_KINDS = frozenset(
    {"vertices", "vertex_fragments", "link_fragments", "attribute", "fragment_attribute", "links", "link_attribute"}
)
"""``zv_array`` values of the grid ("per-chunk") arrays: one vlen cell per spatial chunk."""
ZV_ARRAY_VALUES = GRID_KINDS | {
    "links_family", "link_attribute_family", "object_index", "object_attribute", "groups", "groupings_attribute",
}
"""Every ``zv_array`` discriminator this format revision describes."""
MANIFESTS, OBJECT_IDS = "manifests", "object_ids"  # the two arrays without a discriminator

FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
ATTRIBUTE_DTYPES = ("bool", *INT_DTYPES, *FLOAT_DTYPES)
"""Names a grid attribute's ``dtype`` may take (numpy names, always stored little endian)."""


def attribute_dtype_problem(dtype: Any) -> str | None:
    """What keeps values of ``dtype`` (either byte order) from being an attribute, or None: a
    check of the ``kind`` alone let float128 into a store that no reader opens."""
    dt = np.dtype(dtype)
    return None if dt.name in ATTRIBUTE_DTYPES else f"unsupported dtype {dt} (one of {', '.join(ATTRIBUTE_DTYPES)})"


MAX_ROW_BYTES = 2**32 - 1
"""Largest row a grid cell can hold: the vlen framing's u32 item length (§2.2)."""

# the rule each array problem breaks (the validator gives each its own finding code)
DATA_TYPE, FILL_VALUE, KEY_ENCODING, CHUNK_GRID, ROW_LAYOUT = (
    "data_type", "fill_value", "chunk_key_encoding", "chunk_grid", "row_layout")


@dataclass(frozen=True)
class ArrayProblem:
    rule: str  # DATA_TYPE, FILL_VALUE, KEY_ENCODING, CHUNK_GRID or ROW_LAYOUT
    pointer: str  # into the array's zarr.json
    message: str


PLAIN, RAW = "plain", "raw"  # a group, an array, that carries no discriminator


@dataclass(frozen=True)
class Expected:
    """What the format puts at a path below a level group (docs/format.md §1, §5)."""

    node_type: str  # "array" or "group"
    kind: str  # its zv_array value, or PLAIN / RAW when it carries none
    rules: str | None = None  # the kind whose array rules apply to a RAW array

    @property
    def rule_kind(self) -> str:
        return self.rules or self.kind


_FIXED: dict[tuple[str, ...], Expected] = {
    ("vertices",): Expected("array", "vertices"),
    ("vertex_fragments",): Expected("array", "vertex_fragments"),
    ("link_fragments",): Expected("array", "link_fragments"),
    ("groups",): Expected("array", "groups"),
    ("object_index",): Expected("group", "object_index"),
    ("object_index", MANIFESTS): Expected("array", RAW, MANIFESTS),
    ("object_index", OBJECT_IDS): Expected("array", RAW, OBJECT_IDS),
}
_NAMED: dict[str, str] = {
    "vertex_attributes": "attribute",
    "fragment_attributes": "fragment_attribute",
    "object_attributes": "object_attribute",
    "group_attributes": "groupings_attribute",
}


def expected_node(rel: tuple[str, ...]) -> Expected | None:
    """What the format puts at ``rel``, a path relative to a level group (None: nothing)."""
    n = len(rel)
    head = rel[0] if rel else ""
    if rel in _FIXED:
        return _FIXED[rel]
    if head in _NAMED:
        return {1: Expected("group", PLAIN), 2: Expected("array", _NAMED[head])}.get(n)
    if head == "links":
        return {1: Expected("group", PLAIN), 2: Expected("group", "links_family"), 3: Expected("array", "links")}.get(n)
    if head == "link_attributes":
        return {
            1: Expected("group", PLAIN),
            2: Expected("group", PLAIN),
            3: Expected("group", "link_attribute_family"),
            4: Expected("array", "link_attribute"),
        }.get(n)
    return None


def expected_at(path: str) -> Expected | None:
    """:func:`expected_node` of a store path (``"0/vertices"``); None outside level groups."""
    parts = tuple(path.split("/")) if path else ()
    if len(parts) < 2 or not LEVEL_NAME.fullmatch(parts[0]):
        return None
    return expected_node(parts[1:])


def discriminator(attrs: Mapping[str, Any]) -> Any:
    """The ``zv_array`` value as written (``zvf_array`` is an older spelling); None when absent."""
    return attrs.get("zv_array", attrs.get("zvf_array"))


def discriminator_problem(expected: Expected, attrs: Mapping[str, Any]) -> str | None:
    """What is wrong with a node's discriminator for what its path holds (None: nothing).

    An unrecognised value means the node was written to a contract this format does not
    describe (§13.2): an error, never a guess.
    """
    zv = discriminator(attrs)
    if expected.kind in (PLAIN, RAW):
        return None if zv is None else f"zv_array {short(zv)} on a node that carries no discriminator"
    if zv is None:
        return f"no zv_array discriminator (the path holds a {expected.kind!r} node)"
    if zv != expected.kind:
        known = isinstance(zv, str) and zv in ZV_ARRAY_VALUES
        return (f"{'' if known else 'unknown '}zv_array {short(zv)} where the path holds a {expected.kind!r} node; "
                "refusing to guess")
    return None


VLEN_KINDS = GRID_KINDS | {MANIFESTS, "groups"}
ARRAY_DATA_TYPES: dict[str, tuple[str, ...]] = {
    **{kind: (VLEN_DATA_TYPE,) for kind in sorted(VLEN_KINDS)},
    OBJECT_IDS: ("int64",),
    "object_attribute": (*INT_DTYPES, *FLOAT_DTYPES),  # the types with an absence sentinel (§6.8)
    "groupings_attribute": ATTRIBUTE_DTYPES,
}
"""The ``data_type`` each kind of array may have; a vlen array's ``fill_value`` is ``""``."""
ROW_DTYPES: dict[str, tuple[tuple[str, ...], str | None]] = {
    "vertices": (FLOAT_DTYPES, "float32"),
    "links": (INT_DTYPES, "int64"),
    "attribute": (ATTRIBUTE_DTYPES, None),
    "fragment_attribute": (ATTRIBUTE_DTYPES, None),
    "link_attribute": (ATTRIBUTE_DTYPES, None),
}
"""A grid array's row ``attributes.dtype``: the names allowed and the default (None: required)."""


def vertices_row_dtype(attrs: Mapping[str, Any]) -> np.dtype:
    """The little-endian dtype of a vertices array's rows, from its ``attributes`` (no ``dtype``:
    the format's default)."""
    return np.dtype(attrs.get("dtype", ROW_DTYPES["vertices"][1])).newbyteorder("<")

ROW_ENCODINGS: dict[str, str] = {
    "vertices": "raw", "vertex_fragments": "fragment_index_v1", "link_fragments": "fragment_index_v1"}
"""The one ``attributes.encoding`` a grid array may state (absent means that one)."""
ROW_SHAPE_KINDS = ("attribute", "fragment_attribute", "link_attribute")
"""The grid arrays whose rows have an ``attributes.row_shape`` (a list of integers >= 1)."""


def _name(extension: Any) -> Any:
    return extension.get("name") if isinstance(extension, dict) else extension


def row_layout_problem(kind: str, attrs: Mapping[str, Any]) -> tuple[str, str] | None:
    """(pointer, message) of what is wrong with a grid array's row description, or None.

    ``dtype`` (and ``row_shape``, ``encoding``) say how a cell's bytes are rows; a value
    numpy would read some other way (``">f4"``, a dict) is refused rather than guessed.
    """
    if kind in ROW_DTYPES:
        allowed, default = ROW_DTYPES[kind]
        if default is None and "dtype" not in attrs:
            return "/attributes", "required key 'dtype' is missing"
        dt = attrs.get("dtype", default)
        if dt not in allowed:
            return "/attributes/dtype", f"{kind} dtype must be one of {list(allowed)}, found {short(dt)}"
    if kind in ROW_ENCODINGS:
        encoding = attrs.get("encoding", ROW_ENCODINGS[kind])
        if encoding != ROW_ENCODINGS[kind]:
            return ("/attributes/encoding", f"{kind} encoding {short(encoding)} is not supported "
                    f"(only {ROW_ENCODINGS[kind]!r})")
    if kind in ROW_SHAPE_KINDS:
        rs = attrs.get("row_shape", [])
        if not isinstance(rs, list) or not all(is_int(v) and v >= 1 for v in rs):
            return "/attributes/row_shape", f"row_shape must be a list of integers >= 1, found {short(rs)}"
        dt = attrs["dtype"]
        if math.prod(rs) * np.dtype(dt).itemsize > MAX_ROW_BYTES:
            return ("/attributes/row_shape", f"row_shape {short(rs)} of {dt} makes rows larger than a cell can "
                    f"hold ({MAX_ROW_BYTES} bytes)")
    return None


def sentinel_json(data_type: str) -> Any:
    """The absence sentinel of an object attribute (§6.8) as its zarr.json spells it."""
    value = absence_fill(np.dtype(data_type))
    return "NaN" if data_type in FLOAT_DTYPES else int(value)


def array_problems(kind: Any, doc: Mapping[str, Any]) -> list[ArrayProblem]:
    """Every way an array's ``zarr.json`` differs from what the format requires of its kind.

    Zarr-level validity (a fill value of the declared type, known codecs' keys) is the strict
    reader's; this says which data type, fill value, chunk grid, key encoding and row layout
    each kind of array of this format has, whoever wrote it.
    """
    out: list[ArrayProblem] = []
    attrs = doc.get("attributes")
    attrs = attrs if isinstance(attrs, dict) else {}
    data_type, fill = _name(doc.get("data_type")), doc.get("fill_value")
    encoding = doc.get("chunk_key_encoding")
    configuration = encoding.get("configuration", {}) if isinstance(encoding, dict) else {}
    separator = configuration.get("separator", "/") if isinstance(configuration, dict) else None
    if _name(encoding) != "default" or separator != "/":
        out.append(ArrayProblem(KEY_ENCODING, "/chunk_key_encoding", "chunk keys must use the 'default' encoding "
                                f"with separator '/' (c/i/j/k), found {short(encoding)}"))
    if _name(doc.get("chunk_grid")) != "regular":
        out.append(ArrayProblem(CHUNK_GRID, "/chunk_grid", f"the chunk grid must be 'regular', found "
                                f"{short(_name(doc.get('chunk_grid')))}"))
    if kind in VLEN_KINDS:
        if data_type != VLEN_DATA_TYPE:
            out.append(ArrayProblem(DATA_TYPE, "/data_type", f"a {kind} array has data_type {VLEN_DATA_TYPE!r}, "
                                    f"found {short(data_type)}"))
        if fill != "":
            out.append(ArrayProblem(FILL_VALUE, "/fill_value", f"a {kind} array has fill_value \"\" (an absent cell "
                                    f"is an empty one), found {short(fill)}"))
        found = row_layout_problem(kind, attrs) if kind in GRID_KINDS else None
        if found is not None:
            out.append(ArrayProblem(ROW_LAYOUT, *found))
    elif kind == OBJECT_IDS:
        if data_type not in ARRAY_DATA_TYPES[OBJECT_IDS]:
            out.append(ArrayProblem(DATA_TYPE, "/data_type", f"object_ids has data_type 'int64', found "
                                    f"{short(data_type)}"))
    elif kind == "object_attribute":
        allowed = ARRAY_DATA_TYPES["object_attribute"]
        if data_type not in allowed:
            out.append(ArrayProblem(DATA_TYPE, "/data_type", f"an object attribute's data_type is one of "
                                    f"{list(allowed)} (a type with an absence sentinel), found {short(data_type)}"))
        else:
            if "dtype" in attrs and attrs["dtype"] != data_type:
                out.append(ArrayProblem(DATA_TYPE, "/attributes/dtype", f"dtype {short(attrs['dtype'])} disagrees "
                                        f"with data_type {data_type!r}"))
            if fill != sentinel_json(data_type):
                out.append(ArrayProblem(FILL_VALUE, "/fill_value", f"an object attribute's fill_value is the absence "
                                        f"sentinel {sentinel_json(data_type)!r} of {data_type}, found {short(fill)}"))
    elif kind == "groupings_attribute" and data_type not in ARRAY_DATA_TYPES[kind]:
        out.append(ArrayProblem(DATA_TYPE, "/data_type", f"a group attribute's data_type is one of "
                                f"{list(ATTRIBUTE_DTYPES)}, found {short(data_type)}"))
    return out
