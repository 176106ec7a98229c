"""The committed metadata schema (schema/) against its source and the validator's level-2 rules.

Regenerating gives the committed bytes; every store the builders write passes the JSON Schema;
every level-2 defect of test_mutations.py fails it, except the ones listed in
``NOT_EXPRESSED`` (cross-field rules one document cannot state; docs/validation.md), which
must pass it so the list stays true.  The conformance corpus, where present, is held to the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

import jsonschema
import pytest
from conftest import BUILDERS
from test_mutations import MUTATIONS, Mutation

from pipeline.metadata_schema import JSON_SCHEMA_FILE, LINKML_FILE, main
from zarr_vectors.format.linkml import document_class
from zarr_vectors.validation.findings import CATALOGUE

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "schema"
CORPUS = REPO / "conformance"

#: level-2 defects of test_mutations.py the schema cannot state, and why
NOT_EXPRESSED: dict[str, str] = {
    "chunk_shape_two_entries": "one entry per axis: the count is the multiscales axes'",
    "bounds_inverted": "min <= max compares two members",
    "base_bin_not_dividing": "base_bin_shape divides chunk_shape: two members",
    "dataset_without_translation": "each dataset has a scale and a translation: LinkML has no 'contains'",
    "num_present_above_num_objects": "num_present <= num_objects: two members",
    "num_objects_not_rows": "num_objects equals the manifests array's rows: two documents",
    "level_number_wrong": "level equals the group's name: the path",
    "level_zero_has_parent": "parent_level names an existing lower level: the path and other levels",
    "family_sid_ndim_two": "sid_ndim equals the level's rank: another document",
    "family_level_delta": "level_delta equals the delta the path names",
    "offsets_field_true_for_one": "offsets equals the path segment's offsets",
    "offsets_field_disagrees": "offsets equals the path segment's offsets",
    "array_link_width_disagrees": "link_width equals the family's: another document",
    "unsupported_codec": "codec chains are Zarr's, checked by the strict reader",
    "object_attribute_rows_not_objects": "rows equal the object index's num_objects: another document",
    "nonempty_key_outside_grid": "keys lie in the array's grid: shape and origin",
    "layout_v2_not_allowed": "the v2 layout is valid when the caller allows it (D1): not the document's to say",
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


LEVEL2_ERRORS = [m for m in MUTATIONS if m.code.startswith("L2_") and CATALOGUE[m.code].severity == "error"]


def test_not_expressed_names_real_mutations() -> None:
    assert set(NOT_EXPRESSED) <= {m.name for m in LEVEL2_ERRORS}


@pytest.mark.parametrize("m", LEVEL2_ERRORS, ids=lambda m: m.name)
def test_level2_defects_fail_the_schema(copy_store: Callable[[str], Path], m: Mutation) -> None:
    store = copy_store(m.base)
    m.apply(store)
    errors = schema_errors(store)
    if m.name in NOT_EXPRESSED:
        assert errors == [], f"the schema now catches {m.name}: drop it from NOT_EXPRESSED and docs/validation.md"
    else:
        assert errors, f"{m.name} ({m.code}) passes the JSON Schema"


def _corpus_cases() -> list[dict]:
    index = CORPUS / "cases.json"
    if not index.is_file():
        return []
    return [json.loads((CORPUS / "cases" / f"{c['id']}.json").read_text(encoding="utf-8"))
            for c in json.loads(index.read_text(encoding="utf-8"))["cases"]]


@pytest.mark.skipif(not (CORPUS / "cases.json").is_file(), reason="no conformance/ corpus in this checkout")
def test_corpus_fixtures() -> None:
    """Valid fixtures pass; an invalid one whose codes include an expressed level-2 code fails."""
    wrong = []
    for case in _corpus_cases():
        fixture = CORPUS / case["fixture"]
        errors = schema_errors(fixture)
        codes = set(case["expect"]["validate"]["codes"])
        if case["expect"]["valid"] and errors:
            wrong.append(f"{case['id']}: valid but {errors[:2]}")
        elif not case["expect"]["valid"] and codes & EXPRESSED_CODES and not errors:
            wrong.append(f"{case['id']}: {sorted(codes & EXPRESSED_CODES)} passes the JSON Schema")
    assert wrong == []
