"""Zarr v3 node documents (``zarr.json``): building, writing and strict reading.

Every metadata read in the project goes through :func:`read_node`, i.e. through
the strict reader of :mod:`zarr_vectors.store.strict_json` (docs/decisions.md D10).
"""

from __future__ import annotations

import math
import posixpath
from typing import Any

import numpy as np

from zarr_vectors.errors import MetadataError, UnsupportedLayoutError
from zarr_vectors.format.schema import (
    FAMILY_COUNT_FIELDS,
    OBJECT_INDEX_FIELDS,
    ZV_ARRAY_VALUES,
    Expected,
    array_problems,
    check,
    discriminator,
    discriminator_problem,
    expected_at,
)
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.strict_json import dump_document, load_document


def meta_key(path: str) -> str:
    return posixpath.join(path, "zarr.json") if path else "zarr.json"


def read_node(storage: Storage, path: str) -> dict[str, Any] | None:
    """The parsed ``zarr.json`` of the node at ``path``, or None when there is none.

    Read strictly twice over: as a Zarr v3 document (:mod:`.strict_json`) and as the node
    of this format its path and discriminator make it (:func:`check_format`).
    """
    key = meta_key(path)
    raw = storage.get(key)
    if raw is None:
        return None
    doc = load_document(raw, file=key)
    check_format(doc, path, file=key)
    return doc


def check_format(doc: dict[str, Any], path: str, *, file: str) -> None:
    """Raise :class:`MetadataError` at the first member the format's rules for this node refuse.

    What the node must be comes from its path below a level
    (:func:`~zarr_vectors.format.schema.expected_at`): its node type and discriminator,
    then for arrays the data type, fill value, chunk grid, key encoding and row layout of
    its kind (:func:`~zarr_vectors.format.schema.array_problems`), for the object index
    its counts (:data:`~zarr_vectors.format.schema.OBJECT_INDEX_FIELDS`), for a links
    family its recorded counts.  Nodes outside the level tree (the root, a level) are
    checked by their own models.
    """
    expected = expected_at(path)
    if expected is None:
        return
    attrs = doc.get("attributes", {})
    if doc.get("node_type") != expected.node_type:
        raise MetadataError(f"must be an {expected.node_type}, found a {doc.get('node_type')}", file=file,
                            pointer="/node_type")
    check_discriminator(expected, attrs, file=file)
    if expected.node_type == "array":
        problems = array_problems(expected.rule_kind, doc)
        if problems:
            raise MetadataError(problems[0].message, file=file, pointer=problems[0].pointer)
    else:
        fields = GROUP_FIELDS.get(expected.kind, {})
        for f in fields.values():
            found = check(f, attrs)
            if found is not None:
                raise MetadataError(found[1], file=file, pointer="/attributes" + found[0])


def check_discriminator(expected: Expected, attrs: dict[str, Any], *, file: str) -> None:
    """Refuse a ``zv_array`` the path does not hold: :class:`UnsupportedLayoutError` for a value
    this format does not describe (§13.2: written to a contract this reader does not know),
    :class:`MetadataError` for a known one in the wrong place or a missing one."""
    message = discriminator_problem(expected, attrs)
    if message is None:
        return
    pointer = "/attributes/zv_array" if "zv_array" in attrs else "/attributes"
    value = discriminator(attrs)
    if value is not None and not (isinstance(value, str) and value in ZV_ARRAY_VALUES):
        raise UnsupportedLayoutError(message, file=file, pointer=pointer)
    raise MetadataError(message, file=file, pointer=pointer)


GROUP_FIELDS = {
    "object_index": OBJECT_INDEX_FIELDS,
    "links_family": FAMILY_COUNT_FIELDS,
    "link_attribute_family": FAMILY_COUNT_FIELDS,
}
"""The schema tables of the group kinds whose members readers use without a model of their own."""


def require_node(storage: Storage, path: str, node_type: str | None = None) -> dict[str, Any]:
    doc = read_node(storage, path)
    key = meta_key(path)
    if doc is None:
        raise MetadataError(f"no zarr.json in store {storage.url!r}", file=key)
    if node_type is not None and doc.get("node_type") != node_type:
        raise MetadataError(f"expected a {node_type}, found a {doc.get('node_type')}", file=key, pointer="/node_type")
    return doc


def write_node(storage: Storage, path: str, doc: dict[str, Any]) -> None:
    storage.put(meta_key(path), dump_document(doc))


def write_nodes(storage: Storage, docs: dict[str, dict[str, Any]]) -> None:
    """Several nodes' documents in one batch (concurrent on an object store)."""
    storage.put_many({meta_key(path): dump_document(doc) for path, doc in docs.items()})


def group_document(attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"attributes": attributes or {}, "zarr_format": 3, "node_type": "group"}


def array_document(
    *,
    shape: tuple[int, ...],
    data_type: str,
    chunk_shape: tuple[int, ...],
    fill_value: Any,
    codecs: list[dict[str, Any]],
    attributes: dict[str, Any],
) -> dict[str, Any]:
    return {
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk_shape)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": codecs,
        "attributes": attributes,
        "zarr_format": 3,
        "node_type": "array",
        "storage_transformers": [],
    }


def fill_value_json(value: Any, dtype: np.dtype) -> Any:
    """A fill value as zarr v3 spells it (non-finite floats as strings)."""
    if dtype.kind == "f":
        v = float(value)
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if dtype.kind == "b":
        return bool(value)
    return int(value)


def fill_value_from_json(value: Any, dtype: np.dtype) -> Any:
    if dtype.kind == "f" and isinstance(value, str):
        return {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}[value]
    return dtype.type(value)
