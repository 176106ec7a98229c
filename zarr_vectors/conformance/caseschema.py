"""The JSON Schema (draft 2020-12) of a case file; the generator writes it as ``case.schema.json``."""

from __future__ import annotations

from typing import Any

_NPY = {"type": "string", "pattern": r"^expected/[^/]+/[0-9]+/.+\.npy$"}
_NAMED = {"type": "object", "additionalProperties": _NPY}
_CODE = {"type": "string", "pattern": "^L[1-5]_[A-Z0-9_]+$"}

CASE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://zarr-vectors-dask/conformance/case.schema.json",
    "title": "Zarr Vectors conformance case",
    "type": "object",
    "required": ["id", "description", "kind", "fixture", "writer", "files", "expect"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"},
        "description": {"type": "string"},
        "kind": {"enum": ["point_cloud", "line", "polyline", "streamline", "skeleton", "graph", "mesh"]},
        "fixture": {"type": "string", "pattern": "^fixtures/[a-z0-9][a-z0-9-]*$"},
        "writer": {
            "type": "object", "required": ["implementation", "version"], "additionalProperties": False,
            "properties": {"implementation": {"enum": ["zarr-vectors-dask", "zarr-vectors"]},
                           "version": {"type": "string"}},
        },
        "files": {
            "type": "array", "minItems": 1,
            "items": {"type": "object", "required": ["path", "sha256", "bytes"], "additionalProperties": False,
                      "properties": {"path": {"type": "string"},
                                     "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                                     "bytes": {"type": "integer", "minimum": 0}}},
        },
        "expect": {"oneOf": [{"$ref": "#/$defs/valid"}, {"$ref": "#/$defs/invalid"}]},
    },
    "$defs": {
        "validate": {
            "type": "object", "required": ["level", "codes"], "additionalProperties": False,
            "properties": {"level": {"type": "integer", "minimum": 1, "maximum": 5},
                           "codes": {"type": "array", "items": _CODE}, "exact": {"type": "boolean"}},
        },
        "level": {
            "type": "object", "required": ["positions"], "additionalProperties": False,
            "properties": {
                **{k: _NPY for k in ("positions", "object_ids", "edges", "faces", "offsets", "objects")},
                **{k: _NAMED for k in ("attributes", "edge_attributes", "object_attributes")},
            },
        },
        "valid": {
            "type": "object", "required": ["valid", "validate", "read"], "additionalProperties": False,
            "properties": {
                "valid": {"const": True},
                "validate": {"allOf": [{"$ref": "#/$defs/validate"}, {"properties": {"level": {"const": 5}}}]},
                "options": {"$ref": "#/$defs/options"},
                "read": {"type": "object", "minProperties": 1, "propertyNames": {"pattern": "^[0-9]+$"},
                         "additionalProperties": {"$ref": "#/$defs/level"}},
            },
        },
        "invalid": {
            "type": "object", "required": ["valid", "derived_from", "defect", "validate", "read", "decision"],
            "additionalProperties": False,
            "properties": {
                "valid": {"const": False},
                "derived_from": {"type": "string"},
                "defect": {"type": "string"},
                "validate": {"allOf": [{"$ref": "#/$defs/validate"}, {"properties": {"codes": {"minItems": 1}}}]},
                "read": {"enum": ["error", "ok"]},
                "decision": {"type": ["string", "null"], "pattern": "^D[0-9]+$"},
                "options": {"$ref": "#/$defs/options"},
            },
        },
        "options": {"type": "object", "additionalProperties": False,
                    "properties": {"allow_layouts": {"type": "array", "items": {"type": "string"}}}},
    },
}
