"""A store's format headers (``headers/<format>``, :mod:`zarr_vectors.format.headers`): their
documents, written with the root's, and their strict reading."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from zarr_vectors.errors import InputError, MetadataError
from zarr_vectors.format.headers import (
    HEADER_NAME,
    HEADERS_GROUP,
    TRK,
    TRX,
    check_headers,
    header_path,
    header_problems,
    with_root_hint,
)
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.nodes import group_document, meta_key
from zarr_vectors.store.strict_json import dump_document, load_document


def header_documents(headers: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """The documents of ``headers`` by node path (none for no headers), checked as a reader will
    check them: a header this project reads back (TRK, TRX) must give a reference space."""
    if not headers:
        return {}
    if not isinstance(headers, Mapping):
        raise InputError(f"headers must map format names to header objects, found {type(headers).__name__}")
    documents: dict[str, dict[str, Any]] = {HEADERS_GROUP: group_document()}
    for name, attrs in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            raise InputError(f"header name {name!r} must be lower-case letters, digits and '_' (as 'trk')")
        if not isinstance(attrs, Mapping):
            raise InputError(f"header {name!r} must be an object of JSON values, found {type(attrs).__name__}")
        try:
            json.dumps(attrs, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InputError(f"header {name!r} must hold finite JSON values only ({exc})") from None
        document = group_document(dict(attrs))
        key = meta_key(header_path(name))
        try:  # as every reader and the validator read it: a strict Zarr document, then its members
            load_document(dump_document(document), file=key)
            check_headers({name: attrs})
        except MetadataError as exc:
            raise InputError(f"header {name!r}: {exc}") from None
        documents[header_path(name)] = document
    return documents


def _header_attributes(storage: Storage, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The attributes of the headers ``names`` the store holds (one batch of GETs; no listing).

    Each document is read strictly (its size bounded by the storage layer, as every document's)
    and must be a group whose attributes are an object.
    """
    keys = [meta_key(header_path(name)) for name in names]
    found: dict[str, dict[str, Any]] = {}
    for name, key, raw in zip(names, keys, storage.get_many(keys)):
        if raw is None:
            continue
        doc = load_document(raw, file=key)
        if doc.get("node_type") != "group":
            raise MetadataError(f"node_type must be 'group' for a header, found {doc.get('node_type')!r}",
                                file=key, pointer="/node_type")
        attrs = doc.get("attributes", {})
        if not isinstance(attrs, dict):
            raise MetadataError("attributes must be an object", file=key, pointer="/attributes")
        found[name] = attrs
    return found


def read_headers(storage: Storage, names: Sequence[str] = (TRK, TRX), *, crs: Any = None
                 ) -> dict[str, dict[str, Any]]:
    """The headers ``names`` a store holds, a TRK header's positions' space taken from the root's
    ``crs`` when it does not say (:func:`~zarr_vectors.format.headers.with_root_hint`), checked."""
    headers = _header_attributes(storage, names)
    if TRK in names:  # a streamline export: the root may say where the positions are
        headers = with_root_hint(headers, crs)
    check_headers(headers)
    return headers


def usable_headers(storage: Storage, names: Sequence[str], *, crs: Any = None
                   ) -> tuple[dict[str, dict[str, Any]], list[MetadataError]]:
    """The headers an export can use, and the errors of those it leaves out.

    A header whose members fail the checks is left out when the data does not depend on it -- a
    TRX, FreeSurfer or GIfTI header, or a TRK header whose positions are RAS+ mm (the reference's
    TRK ingest copies a file's header as it is, dimensions of 0 included): the export then goes on
    as for a store without it, and says why.  A TRK header saying (or whose root says) the positions
    are voxel mm, or one whose document cannot be read, is needed to place them: its error is raised.
    """
    headers = _header_attributes(storage, names)
    if TRK in names:
        headers = with_root_hint(headers, crs)
    problems = header_problems(headers)
    if TRK in problems and headers[TRK].get("space", "rasmm") != "rasmm":
        raise problems[TRK]
    return {name: attrs for name, attrs in headers.items() if name not in problems}, list(problems.values())
