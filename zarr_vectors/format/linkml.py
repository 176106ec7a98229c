"""The LinkML schema of the root, level, group and array metadata (§13.1, §13.3), as data.

Built from the tables of :mod:`zarr_vectors.format.schema`, the ones the validator's level-2
rules and the strict parser apply, so the schema cannot drift from them: a member's type,
presence, default and allowed values are read from its :class:`~zarr_vectors.format.schema.Field`,
an array's data type, fill value and row layout from the array tables.  What one document
cannot say (a rule across members, levels or paths) stays with the validator; the list is in
docs/validation.md.  ``pipeline/metadata_schema.py`` writes this and the JSON Schema LinkML
generates from it to ``schema/``.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from zarr_vectors.format.metadata import OBJECT_INDEX_LAYOUT, OBJECT_INDEX_LAYOUT_V2
from zarr_vectors.format.paths import CHUNK_COMPONENT, LEVEL_NAME
from zarr_vectors.format.schema import (
    ANY,
    ARRAY_DATA_TYPES,
    AXIS_NUMBERS,
    BOOL,
    BOUNDS,
    ENUM,
    FAMILY_COUNT_FIELDS,
    FRACTION,
    INT,
    LEVEL_FIELDS,
    LINKS_FAMILY_FIELDS,
    MANIFESTS,
    MIN_ZV_VERSION,
    NAMED_ENUM,
    OBJECT_IDS,
    OBJECT_INDEX_FIELDS,
    PLAIN,
    ROOT_FIELDS,
    ROW_DTYPES,
    ROW_ENCODINGS,
    ROW_SHAPE_KINDS,
    STRINGS,
    VERSION,
    VLEN_DATA_TYPE,
    VLEN_KINDS,
    Field,
    expected_at,
    sentinel_json,
)

SCHEMA_NAME = "zarr_vectors_metadata"
PREFIX = "urn:zarr-vectors:metadata:"
# JSON numbers are doubles: "> 0" is ">= the smallest positive double", "finite" is "within +-max"
SMALLEST_POSITIVE = math.ulp(0.0)
LARGEST = sys.float_info.max

#: The class describing each kind of node (the zv_array value, or RAW kinds by their array's name).
KIND_CLASSES: dict[str, str] = {
    "object_index": "ObjectIndexGroup",
    "links_family": "LinksFamilyGroup",
    "link_attribute_family": "LinkAttributeFamilyGroup",
    "vertices": "VerticesArray",
    "vertex_fragments": "VertexFragmentsArray",
    "link_fragments": "LinkFragmentsArray",
    "links": "LinksArray",
    "attribute": "VertexAttributeArray",
    "fragment_attribute": "FragmentAttributeArray",
    "link_attribute": "LinkAttributeArray",
    "groups": "GroupsArray",
    "groupings_attribute": "GroupAttributeArray",
    "object_attribute": "ObjectAttributeArray",
    MANIFESTS: "ManifestsArray",
    OBJECT_IDS: "ObjectIdsArray",
}


def document_class(path: str) -> str | None:
    """The schema class of the ``zarr.json`` at store path ``path`` ("" is the root); None: none applies.

    Plain groups (``links``, ``vertex_attributes``, ...) carry no metadata of this format.
    """
    if path == "":
        return "RootGroup"
    if LEVEL_NAME.fullmatch(path):
        return "LevelGroup"
    expected = expected_at(path)
    if expected is None or expected.kind == PLAIN:
        return None
    return KIND_CLASSES[expected.rule_kind]


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _ifabsent(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"string({value})"
    if isinstance(value, int):
        return f"int({value})"
    if isinstance(value, float):
        return f"float({value!r})"
    return None  # an empty list: absent means empty


def _version_pattern() -> str:
    """``zv_version`` as a regex: major 0, minor >= the minimum (what parse_version reads)."""
    major, minor, patch = MIN_ZV_VERSION
    if major != 0 or patch != 0 or not 0 <= minor <= 9:
        raise AssertionError(f"no version pattern for minimum {MIN_ZV_VERSION}")  # a new revision: extend this
    low = str(minor) if minor == 9 else f"[{minor}-9]"
    return rf"^0+\.0*({low}|[1-9][0-9]+)\.[0-9]+([.+-].*)?$"


def _slot(field: Field, enums: dict[str, dict[str, Any]], owner: str) -> dict[str, Any]:
    """A LinkML slot stating ``field``'s rule (``enums`` collects the enumerations it names)."""
    slot: dict[str, Any] = {}
    notes = []
    kind = field.kind
    if kind == VERSION:
        slot.update(range="string", pattern=_version_pattern())
        notes.append(f"a version string, major 0 and >= {'.'.join(map(str, MIN_ZV_VERSION))} compared numerically")
    elif kind == ENUM:
        name = _camel(field.name)
        enums[name] = {"permissible_values": {v: {} for v in field.allowed}}
        slot["range"] = name
    elif kind == INT and field.nullable:
        slot["range"] = "Anything"  # LinkML has no null type: the integer-or-null rule stays cross-field
        notes.append("null or an integer")
    elif kind == INT:
        slot["range"] = "integer"
        if field.minimum is not None:
            slot["minimum_value"] = field.minimum
    elif kind == FRACTION:
        slot.update(range="float", minimum_value=SMALLEST_POSITIVE, maximum_value=1)
        notes.append("a number in (0, 1]")
    elif kind == BOOL:
        slot["range"] = "boolean"
    elif kind == STRINGS:
        slot.update(range="string", multivalued=True)
        if field.nonempty:
            slot["minimum_cardinality"] = 1
        if field.allowed:
            notes.append(f"an open set; the known tokens are {', '.join(field.allowed)}")
    elif kind == AXIS_NUMBERS:
        slot.update(range="float", multivalued=True, minimum_cardinality=1, minimum_value=SMALLEST_POSITIVE,
                    maximum_value=LARGEST)
        notes.append("one finite number > 0 per spatial axis")
    elif kind == BOUNDS:
        slot.update(range="float", minimum_value=-LARGEST, maximum_value=LARGEST, array={
            "exact_number_dimensions": 2,
            "dimensions": [{"exact_cardinality": 2}, {"minimum_cardinality": 1}],
        })
        notes.append("[min per axis, max per axis] of finite numbers, min <= max")
    elif kind == NAMED_ENUM:
        slot["range"] = "Anything"  # a map with free keys: LinkML states no value rule for it
        notes.append(f"an object mapping names to one of {', '.join(field.allowed)} each")
    elif kind == ANY:
        slot["range"] = "Anything"
    else:
        raise AssertionError(f"field kind {kind!r} has no LinkML form")  # a new kind: give it one
    if field.required:
        slot["required"] = True
    default = _ifabsent(field.default)
    if default is not None:
        slot["ifabsent"] = default
        notes.append(f"readers assume {field.default!r} when absent")
    slot["description"] = "; ".join([f"{owner}.{field.name}", *notes])
    return slot


def _fixed(value: Any, *, required: bool = True) -> dict[str, Any]:
    """A member that must hold exactly ``value``."""
    key = "equals_string" if isinstance(value, str) else "equals_number"
    return {"range": "string" if isinstance(value, str) else "integer", key: value, "required": required}


def _one_of(values: tuple[str, ...], *, required: bool = True) -> dict[str, Any]:
    return {"range": "string", "equals_string_in": list(values), "required": required}


def _open(attributes: dict[str, Any], description: str, **extra: Any) -> dict[str, Any]:
    """A class whose documents may hold members the format does not describe (Zarr's, a user's)."""
    return {"description": description, "extra_slots": {"allowed": True}, "attributes": attributes, **extra}


def _node(node_type: str, attributes_class: str, description: str, **members: Any) -> dict[str, Any]:
    return _open({
        "zarr_format": _fixed(3),
        "node_type": _fixed(node_type),
        "attributes": {"range": attributes_class, "required": True, "inlined": True},
        **members,
    }, description)


def _block(fields: dict[str, Field], enums: dict[str, dict[str, Any]], owner: str) -> dict[str, Any]:
    return {name: _slot(f, enums, owner) for name, f in fields.items()}


def _array_classes() -> dict[str, dict[str, Any]]:
    """One class per kind of array: its data type, fill value, grid, key encoding and row layout."""
    classes: dict[str, dict[str, Any]] = {}
    for kind, cls in KIND_CLASSES.items():
        if kind not in ARRAY_DATA_TYPES:
            continue  # a group
        attrs: dict[str, Any] = {}
        if kind not in (MANIFESTS, OBJECT_IDS):
            attrs["zv_array"] = _fixed(kind)
        if kind in ROW_DTYPES:
            allowed, default = ROW_DTYPES[kind]
            attrs["dtype"] = _one_of(allowed, required=default is None)
            if default is not None:
                attrs["dtype"]["ifabsent"] = f"string({default})"
        if kind in ROW_ENCODINGS:
            attrs["encoding"] = {**_fixed(ROW_ENCODINGS[kind], required=False),
                                 "ifabsent": f"string({ROW_ENCODINGS[kind]})"}
        if kind in ROW_SHAPE_KINDS:
            attrs["row_shape"] = {"range": "integer", "multivalued": True, "minimum_value": 1}
        if kind == "links":
            attrs["has_perm"] = {"range": "boolean"}
        vlen = kind in VLEN_KINDS
        if vlen and kind not in (MANIFESTS, "groups"):
            attrs["nonempty_chunks"] = {"range": "string", "multivalued": True, "required": True,
                                        "pattern": rf"^({CHUNK_COMPONENT})(\.({CHUNK_COMPONENT}))*$",
                                        "description": "dotted chunk keys, sorted as strings"}
        members: dict[str, Any] = {
            "data_type": _fixed(VLEN_DATA_TYPE) if vlen else _one_of(ARRAY_DATA_TYPES[kind]),
            "chunk_grid": {"range": "RegularChunkGrid", "required": True, "inlined": True},
            "chunk_key_encoding": {"range": "SlashChunkKeyEncoding", "required": True, "inlined": True},
        }
        if vlen:
            members["fill_value"] = {**_fixed(""), "description": "an absent cell is an empty one"}
        else:
            members["fill_value"] = {"range": "Anything", "required": True}
        classes[f"{cls}Attributes"] = _open(attrs, f"attributes of a {kind} array")
        classes[cls] = _node("array", f"{cls}Attributes", f"zarr.json of a {kind} array", **members)
        if kind == "object_attribute":
            classes[cls]["rules"] = [{
                "description": f"a {dt} object attribute's fill_value is its absence sentinel",
                "preconditions": {"slot_conditions": {"data_type": {"equals_string": dt}}},
                "postconditions": {"slot_conditions": {"fill_value": {
                    ("equals_string" if isinstance(sentinel_json(dt), str) else "equals_number"): sentinel_json(dt)}}},
            } for dt in ARRAY_DATA_TYPES[kind]]
    return classes


def linkml_schema() -> dict[str, Any]:
    """The LinkML schema (a YAML-ready dict) of every ``zarr.json`` this format describes."""
    enums: dict[str, dict[str, Any]] = {}
    root = _block(ROOT_FIELDS, enums, "zarr_vectors")
    level = _block(LEVEL_FIELDS, enums, "zarr_vectors_level")
    family = _block(LINKS_FAMILY_FIELDS, enums, "links family")
    counts = _block(FAMILY_COUNT_FIELDS, enums, "family")
    object_index = _block(OBJECT_INDEX_FIELDS, enums, "object_index")
    classes: dict[str, Any] = {
        "Anything": {"class_uri": "linkml:Any", "description": "any JSON value but an array"},
        "RootGroup": _node("group", "RootAttributes", "zarr.json of the store's root group (docs/format.md §3)"),
        "RootAttributes": _open({
            "zarr_vectors": {"range": "RootMetadata", "required": True, "inlined": True},
            "multiscales": {"range": "Multiscale", "required": True, "multivalued": True, "inlined_as_list": True,
                            "minimum_cardinality": 1},
        }, "attributes of the root group"),
        "RootMetadata": _open(root, "attributes.zarr_vectors: the store's format metadata"),
        "Multiscale": _open({
            "axes": {"range": "Axis", "required": True, "multivalued": True, "inlined_as_list": True,
                     "minimum_cardinality": 1, "description": "one per spatial axis: sid_ndim >= 1"},
            "datasets": {"range": "Dataset", "required": True, "multivalued": True, "inlined_as_list": True},
        }, "an NGFF multiscales entry (D3: on the root); one dataset per level"),
        "Axis": _open({"name": {"range": "string", "required": True}}, "an NGFF axis"),
        "Dataset": _open({"path": {"range": "string", "required": True}}, "an NGFF dataset: one level"),
        "LevelGroup": _node("group", "LevelAttributes", "zarr.json of a level group (docs/format.md §4)"),
        "LevelAttributes": _open({"zarr_vectors_level": {"range": "LevelMetadata", "required": True,
                                                         "inlined": True}}, "attributes of a level group"),
        "LevelMetadata": _open(level, "attributes.zarr_vectors_level: one level's metadata"),
        "ObjectIndexGroup": _node("group", "ObjectIndexAttributes", "zarr.json of a level's object_index group"),
        "ObjectIndexAttributes": _open({
            "zv_array": _fixed("object_index"),
            "layout": {**_one_of((OBJECT_INDEX_LAYOUT, OBJECT_INDEX_LAYOUT_V2)), "description": (
                f"{OBJECT_INDEX_LAYOUT} is what this revision writes and reads; {OBJECT_INDEX_LAYOUT_V2} (the "
                "reference's) is read only when the caller allows it (docs/decisions.md D1)")},
            **object_index,
        }, "attributes of the object index"),
        "LinksFamilyGroup": _node("group", "LinksFamilyAttributes", "zarr.json of a links/<delta> family"),
        "LinksFamilyAttributes": _open({"zv_array": _fixed("links_family"), **family, **counts},
                                       "a links family's policy and counts (docs/format.md §5)"),
        "LinkAttributeFamilyGroup": _node("group", "LinkAttributeFamilyAttributes",
                                          "zarr.json of a link_attributes/<name>/<delta> family"),
        "LinkAttributeFamilyAttributes": _open({"zv_array": _fixed("link_attribute_family"),
                                                "level_delta": family["level_delta"], **counts},
                                               "a link attribute family's counts"),
        "RegularChunkGrid": _open({"name": _fixed("regular")}, "the chunk grid of every array of this format"),
        "SlashChunkKeyEncoding": _open({"name": _fixed("default"), "configuration": {
            "range": "SlashSeparator", "inlined": True}}, "chunk keys c/i/j/k"),
        "SlashSeparator": _open({"separator": {**_fixed("/", required=False), "ifabsent": "string(/)"}},
                                "the default encoding's configuration"),
        **_array_classes(),
    }
    return {
        "id": PREFIX.rstrip(":"),
        "name": SCHEMA_NAME,
        "title": "Zarr Vectors metadata",
        "description": ("The zarr.json documents of a Zarr Vectors store: root, level, group and array metadata. "
                        "Generated from zarr_vectors/format/schema.py by pipeline/metadata_schema.py; do not edit. "
                        "Rules across members, levels or paths are the validator's (docs/validation.md)."),
        "license": "BSD-3-Clause",
        "version": ".".join(map(str, MIN_ZV_VERSION)),
        "prefixes": {"linkml": "https://w3id.org/linkml/", "zv": PREFIX},
        "default_prefix": "zv",
        "default_range": "string",
        "imports": ["linkml:types"],
        "enums": enums,
        "classes": classes,
    }
