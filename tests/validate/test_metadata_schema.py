"""The committed metadata schema (schema/) against its source and the validator's level-2 rules.

Regenerating gives the committed bytes; every store the builders write and every valid
fixture of the conformance corpus passes the JSON Schema; every invalid fixture whose defect
is a level-2 error fails it, except the ones listed in ``NOT_EXPRESSED`` (cross-field rules
one document cannot state; docs/validation.md), which must pass it so the list stays true.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import jsonschema
import pytest
from conftest import BUILDERS

from pipeline.metadata_schema import JSON_SCHEMA_FILE, LINKML_FILE, main
from zarr_vectors.format.linkml import document_class
from zarr_vectors.validation.findings import CATALOGUE

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "schema"
CORPUS = REPO / "conformance"

#: level-2 defects of the corpus (case ids) the schema cannot state, and why
NOT_EXPRESSED: dict[str, str] = {
    "bad-chunk-shape-two-entries": "one entry per axis: the count is the multiscales axes'",
    "bad-bounds-inverted": "min <= max compares two members",
    "bad-base-bin-not-dividing": "base_bin_shape divides chunk_shape: two members",
    "bad-dataset-without-translation": "each dataset has a scale and a translation: LinkML has no 'contains'",
    "bad-num-present-above-num-objects": "num_present <= num_objects: two members",
    "bad-num-objects-not-rows": "num_objects equals the manifests array's rows: two documents",
    "bad-level-number-wrong": "level equals the group's name: the path",
    "bad-level-zero-has-parent": "parent_level names an existing lower level: the path and other levels",
    "bad-family-sid-ndim-2": "sid_ndim equals the level's rank: another document",
    "bad-family-level-delta-1": "level_delta equals the delta the path names",
    "bad-offsets-field-true-for-one": "offsets equals the path segment's offsets",
    "bad-offsets-field-disagrees": "offsets equals the path segment's offsets",
    "bad-array-link-width-disagrees": "link_width equals the family's: another document",
    "bad-unsupported-codec": "codec chains are Zarr's, checked by the strict reader",
    "bad-object-attribute-rows-not-objects": "rows equal the object index's num_objects: another document",
    "bad-nonempty-key-outside-grid": "keys lie in the array's grid: shape and origin",
    "bad-layout-v2-not-allowed": "the v2 layout is valid when the caller allows it (D1): not the document's to say",
    "bad-aggregation-unknown-reduction": "attribute_aggregation maps free names to reductions: no LinkML form",
}

#: level-2 codes every defect of which the schema states (a corpus case with one of them must fail it)
EXPRESSED_CODES = frozenset({
    "L2_ZV_VERSION", "L2_ROOT_REQUIRED", "L2_SID_NDIM", "L2_LINKS_CONVENTION", "L2_OBJECT_INDEX_CONVENTION",
    "L2_CROSS_CHUNK_STRATEGY", "L2_CROSS_LEVEL_STORAGE", "L2_CROSS_LEVEL_DEPTH", "L2_GEOMETRY_TYPES",
    "L2_CAPABILITIES", "L2_LEVEL_BLOCK", "L2_VERTEX_COUNT", "L2_ARRAYS_PRESENT", "L2_OBJECT_SPARSITY",
    "L2_LEVEL_FLAGS", "L2_FAMILY_LINK_WIDTH", "L2_FAMILY_DIRECTED", "L2_FAMILY_STORE", "L2_FAMILY_COUNTS",
    "L2_FILL_VALUE", "L2_CHUNK_KEY_ENCODING", "L2_CHUNK_GRID",
})


@cache
def _validator(cls: str) -> jsonschema.Draft201909Validator:
    schema = json.loads((SCHEMA / JSON_SCHEMA_FILE).read_text(encoding="utf-8"))
    return jsonschema.Draft201909Validator({"$schema": schema["$schema"], "$defs": schema["$defs"],
                                            "$ref": f"#/$defs/{cls}"})


def schema_errors(store: Path) -> list[str]:
    """Every JSON Schema error of every zarr.json in ``store`` the schema has a class for."""
    out = []
    for doc in sorted(store.rglob("zarr.json")):
        rel = doc.parent.relative_to(store).as_posix()
        cls = document_class("" if rel == "." else rel)
        if cls is None:
            continue
        try:
            instance = json.loads(doc.read_bytes().decode("utf-8"))
        except ValueError as exc:  # not a JSON document: no instance of any class
            out.append(f"{rel} ({cls}): not JSON ({exc})")
            continue
        out += [f"{rel} ({cls}) {e.json_path}: {e.message}" for e in _validator(cls).iter_errors(instance)]
    return out


def test_committed_files_are_regenerated_bytes(tmp_path: Path) -> None:
    """python -m pipeline.metadata_schema has been run after the last change to format/schema.py."""
    assert main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in SCHEMA.iterdir()) == sorted(p.name for p in tmp_path.iterdir())
    for name in (LINKML_FILE, JSON_SCHEMA_FILE):
        assert (SCHEMA / name).read_bytes() == (tmp_path / name).read_bytes(), f"schema/{name} is stale: regenerate it"


@pytest.mark.parametrize("name", list(BUILDERS))
def test_builder_stores_pass(base_stores: dict[str, Path], name: str) -> None:
    assert schema_errors(base_stores[name]) == []


def _corpus_cases() -> list[dict]:
    index = json.loads((CORPUS / "cases.json").read_text(encoding="utf-8"))
    return [json.loads((CORPUS / "cases" / f"{c['id']}.json").read_text(encoding="utf-8")) for c in index["cases"]]


CASES = _corpus_cases()
#: invalid fixtures whose defect is a level-2 error (the corpus has one defect per fixture)
LEVEL2_ERRORS = [c for c in CASES if not c["expect"]["valid"]
                 and any(code.startswith("L2_") and CATALOGUE[code].severity == "error"
                         for code in c["expect"]["validate"]["codes"])]


def test_not_expressed_names_real_cases() -> None:
    assert set(NOT_EXPRESSED) <= {c["id"] for c in LEVEL2_ERRORS}


@pytest.mark.parametrize("case", LEVEL2_ERRORS, ids=lambda c: c["id"])
def test_level2_defects_fail_the_schema(case: dict) -> None:
    errors = schema_errors(CORPUS / case["fixture"])
    if case["id"] in NOT_EXPRESSED:
        assert errors == [], f"the schema now catches {case['id']}: drop it from NOT_EXPRESSED and docs/validation.md"
    else:
        assert errors, f"{case['id']} ({case['expect']['validate']['codes']}) passes the JSON Schema"


def test_valid_corpus_fixtures_pass() -> None:
    wrong = {c["id"]: schema_errors(CORPUS / c["fixture"])[:2] for c in CASES if c["expect"]["valid"]}
    assert {k: v for k, v in wrong.items() if v} == {}


def test_expressed_codes_fail_the_schema() -> None:
    """An invalid fixture whose codes include a code the schema fully expresses fails it."""
    passing = [c["id"] for c in CASES if not c["expect"]["valid"]
               and set(c["expect"]["validate"]["codes"]) & EXPRESSED_CODES and not schema_errors(CORPUS / c["fixture"])]
    assert passing == []
