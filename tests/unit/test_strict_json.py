"""The strict zarr.json reader and writer (docs/decisions.md D10, docs/validation.md Level 1)."""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_vectors.errors import MetadataError
from zarr_vectors.store.strict_json import (
    MAX_DEPTH,
    Problem,
    check_document,
    dump_document,
    find_problems,
    json_pointer,
    load_document,
)

FILE = "0/links/0/0.0.0/zarr.json"

# docs/format.md §2.1: an unsharded grid array as zarr-vectors 0.9.2 writes it.
GRID_ARRAY: dict[str, Any] = {
    "shape": [2, 2, 2],
    "data_type": "variable_length_bytes",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 1, 1]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": "",
    "codecs": [{"name": "vlen-bytes", "configuration": {}}],
    "attributes": {
        "nonempty_chunks": ["0.0.0"],
        "zv_array": "links",
        "dtype": "int64",
        "offsets": [[1, 0, 0]],
        "has_perm": True,
        "link_width": 2,
        "level_delta": 0,
    },
    "zarr_format": 3,
    "node_type": "array",
    "storage_transformers": [],
}

# docs/format.md §9: the same array after shard_store.
SHARDED_ARRAY: dict[str, Any] = {
    **GRID_ARRAY,
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2, 2]}},
    "codecs": [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [1, 1, 1],
                "codecs": [{"name": "vlen-bytes", "configuration": {}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": "end",
            },
        }
    ],
}

GROUP: dict[str, Any] = {"zarr_format": 3, "node_type": "group", "attributes": {}}


def raw_of(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


def problems_of(doc: Any) -> list[Problem]:
    return find_problems(raw_of(doc))[1]


def at(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc


def with_(base: dict[str, Any], pointer: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``base`` with the member at ``pointer`` set (or deleted when ``value`` is DELETE)."""
    doc = copy.deepcopy(base)
    *parents, last = pointer.split("/")[1:]
    target = at(doc, parents)
    key: Any = int(last) if isinstance(target, list) else last
    if value is DELETE:
        del target[key]
    else:
        target[key] = value
    return doc


DELETE = object()


def assert_single(doc_or_raw: Any, pointer: str, *words: str) -> None:
    raw = doc_or_raw if isinstance(doc_or_raw, bytes) else raw_of(doc_or_raw)
    _, errors = check_document(raw, file=FILE)
    assert [e.pointer for e in errors] == [pointer], [str(e) for e in errors]
    error = errors[0]
    assert isinstance(error, MetadataError)
    assert error.file == FILE
    assert str(error).startswith(FILE + (f"#{pointer}" if pointer else "") + ": ")
    for word in words:
        assert word in error.reason, error.reason
    with pytest.raises(MetadataError) as raised:
        load_document(raw, file=FILE)
    assert raised.value.pointer == pointer


# -- valid documents ---------------------------------------------------------------------


@pytest.mark.parametrize("doc", [GRID_ARRAY, SHARDED_ARRAY, GROUP], ids=["grid", "sharded", "group"])
def test_valid_documents_load(doc: dict[str, Any]) -> None:
    assert load_document(raw_of(doc), file=FILE) == doc
    assert check_document(raw_of(doc), file=FILE) == (doc, [])


def test_non_finite_numbers_are_fine_anywhere_inside_attributes() -> None:
    raw = (
        b'{"zarr_format": 3, "node_type": "group", '
        b'"attributes": {"a": NaN, "b": [Infinity, {"c": -Infinity}], "d": 1e999}}'
    )
    doc = load_document(raw, file=FILE)
    assert math.isnan(doc["attributes"]["a"])
    assert doc["attributes"]["b"] == [math.inf, {"c": -math.inf}]
    assert doc["attributes"]["d"] == math.inf


def test_group_without_attributes_and_with_consolidated_metadata() -> None:
    doc = {"zarr_format": 3, "node_type": "group"}
    assert load_document(raw_of(doc), file=FILE) == doc
    consolidated = {**GROUP, "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": {}}}
    assert load_document(raw_of(consolidated), file=FILE) == consolidated


def test_consolidated_copies_of_attributes_may_hold_non_finite_numbers() -> None:
    child = {**GRID_ARRAY, "attributes": {"x": math.nan}}
    doc = {**GROUP, "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": {"a": child}}}
    assert problems_of(doc) == []
    child["fill_value"] = math.nan
    assert [p.pointer for p in problems_of(doc)] == ["/consolidated_metadata/metadata/a/fill_value"]


def test_document_at_the_depth_limit_is_fine() -> None:
    value: Any = 1
    for _ in range(MAX_DEPTH - 2):  # root object + attributes object + MAX_DEPTH - 2 lists
        value = [value]
    doc = {**GROUP, "attributes": {"deep": value}}
    assert load_document(raw_of(doc), file=FILE) == doc


def test_extension_short_forms_and_uris() -> None:
    doc = with_(GRID_ARRAY, "/data_type", {"name": "https://example.org/zarr/dtype/v1", "configuration": {}})
    doc = with_(doc, "/codecs", ["vlen-bytes", {"name": "numcodecs.zlib", "must_understand": True}])
    doc = with_(doc, "/storage_transformers", [{"name": "urn:x-example:transformer"}])
    doc = with_(doc, "/chunk_key_encoding", {"name": "v2", "configuration": {"separator": "."}})
    doc = with_(doc, "/dimension_names", ["x", None, "z"])
    assert problems_of(doc) == []


# -- rule 1: encoding, BOM, JSON, top level ----------------------------------------------


def test_bom_is_a_problem_but_the_rest_is_still_checked() -> None:
    raw = b"\xef\xbb\xbf" + raw_of({**GROUP, "zarr_format": 2})
    doc, errors = check_document(raw, file=FILE)
    assert doc is not None
    assert [(e.pointer, "byte order mark" in e.reason) for e in errors] == [("", True), ("/zarr_format", False)]


def test_invalid_utf8_names_the_byte() -> None:
    raw = b'{"zarr_format": 3, "node_type": "group", "attributes": {"a": "\xff"}}'
    assert_single(raw, "", "not valid UTF-8", f"at byte {raw.index(0xFF)}")
    _, errors = check_document(b"\xef\xbb\xbf" + raw, file=FILE)
    assert ["byte order mark" in errors[0].reason, errors[1].reason.split(":")[0]] == [True, "not valid UTF-8"]
    assert errors[1].reason.endswith(f"at byte {raw.index(0xFF) + 3}")


def test_invalid_json() -> None:
    assert_single(b'{"zarr_format": 3,}', "", "not valid JSON", "line 1")
    doc, errors = check_document(b"", file=FILE)
    assert doc is None and len(errors) == 1


@pytest.mark.parametrize("raw", [b"[]", b"3", b'"group"', b"null"])
def test_top_level_must_be_an_object(raw: bytes) -> None:
    assert_single(raw, "", "top level must be a JSON object")
    assert check_document(raw, file=FILE)[0] is None


# -- rule 2: duplicate keys --------------------------------------------------------------


def test_duplicate_keys_point_at_the_containing_object() -> None:
    raw = b'{"zarr_format": 3, "node_type": "group", "attributes": {"a/b": {"x": 1, "x": 2, "y": 0, "y": 1}}}'
    doc, errors = check_document(raw, file=FILE)
    assert [(e.pointer, e.reason.split(" (")[0]) for e in errors] == [
        ("/attributes/a~1b", "duplicate key 'x'"),
        ("/attributes/a~1b", "duplicate key 'y'"),
    ]
    assert doc is not None and doc["attributes"]["a/b"] == {"x": 2, "y": 1}


def test_duplicate_keys_at_the_root() -> None:
    assert_single(b'{"zarr_format": 3, "node_type": "group", "zarr_format": 3}', "", "duplicate key 'zarr_format'")


def test_duplicate_in_a_dropped_value_does_not_haunt_later_objects() -> None:
    # The first "a" (holding a duplicate) is dropped; the objects parsed after it must not be blamed.
    raw = b'{"zarr_format": 3, "node_type": "group", "attributes": {"a": {"k": 1, "k": 2}, "a": 0, "b": [{}, {}, {}]}}'
    _, errors = check_document(raw, file=FILE)
    assert [e.pointer for e in errors] == ["/attributes"]


# -- rule 3: non-finite numbers ----------------------------------------------------------


@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e999"])
def test_non_finite_outside_attributes(token: bytes) -> None:
    raw = raw_of(GRID_ARRAY).replace(b'"fill_value": ""', b'"fill_value": ' + token)
    assert_single(raw, "/fill_value", "non-finite", "attributes")


def test_non_finite_deep_outside_attributes() -> None:
    # inside a codec no definition claims, so nothing but the number itself is a problem
    raw = raw_of(GRID_ARRAY).replace(b'"name": "vlen-bytes", "configuration": {}',
                                     b'"name": "example", "configuration": {"level": [0, NaN]}')
    assert_single(raw, "/codecs/0/configuration/level/1", "non-finite")


# -- rule 4: nesting depth ---------------------------------------------------------------


def test_one_level_past_the_limit() -> None:
    value: Any = 1
    for _ in range(MAX_DEPTH - 1):
        value = [value]
    doc = {**GROUP, "attributes": {"deep": value}}
    pointer = "/attributes/deep" + "/0" * (MAX_DEPTH - 2)  # the 257th container
    assert_single(doc, pointer, "deeper than 256")


def test_depth_pointer_decodes_and_escapes_keys() -> None:
    value: Any = 1
    for _ in range(MAX_DEPTH - 3):
        value = [value]
    doc = {**GROUP, "attributes": {"x": [1, {"a": 2}], 'k"[/~': [0, 1, {"u": value}]}}
    assert_single(doc, '/attributes/k"[~1~0/2/u' + "/0" * (MAX_DEPTH - 4), "deeper than 256")


def test_brackets_inside_strings_do_not_count() -> None:
    doc = {**GROUP, "attributes": {'k[{"': "[" * 1000 + '\\"{' * 1000}}
    assert load_document(raw_of(doc), file=FILE) == doc


@pytest.mark.parametrize("raw", [b"[" * 100_000, b'{"a": ' * 100_000, b"[" * 100_000 + b"]" * 100_000])
def test_pathological_nesting_is_rejected_fast(raw: bytes) -> None:
    start = time.perf_counter()
    doc, errors = check_document(raw, file=FILE)
    assert time.perf_counter() - start < 1.0
    assert doc is None
    assert len(errors) == 1 and "deeper than 256" in errors[0].reason
    assert errors[0].pointer.count("/") == MAX_DEPTH


# -- rule 5: envelope --------------------------------------------------------------------


@pytest.mark.parametrize("value", [3.0, "3", True, 2, None])
def test_zarr_format_must_be_integer_3(value: Any) -> None:
    assert_single(with_(GROUP, "/zarr_format", value), "/zarr_format", "integer 3", json.dumps(value))


@pytest.mark.parametrize("value", ["Group", "", None, 1, ["group"]])
def test_node_type(value: Any) -> None:
    assert_single(with_(GROUP, "/node_type", value), "/node_type", "'group' or 'array'")


@pytest.mark.parametrize("member", ["zarr_format", "node_type"])
def test_envelope_members_are_required(member: str) -> None:
    assert_single(with_(GROUP, f"/{member}", DELETE), f"/{member}", "missing")


# -- rule 6: groups ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, [], "x"])
def test_group_attributes_must_be_an_object(value: Any) -> None:
    assert_single(with_(GROUP, "/attributes", value), "/attributes", "must be an object")


def test_consolidated_metadata_null() -> None:
    assert_single({**GROUP, "consolidated_metadata": None}, "/consolidated_metadata", "must be an object", "null")


def test_unknown_members_need_must_understand_false() -> None:
    assert_single({**GROUP, "extra": 1}, "/extra", "unknown member 'extra'")
    assert_single({**GROUP, "extra": {"must_understand": True}}, "/extra", "unknown member")
    assert problems_of({**GROUP, "extra": {"must_understand": False}}) == []
    assert problems_of({**GRID_ARRAY, "extra": {"must_understand": False, "x": 1}}) == []


# -- rule 7: arrays ----------------------------------------------------------------------


@pytest.mark.parametrize("member", ["shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"])
def test_required_array_members(member: str) -> None:
    doc = with_(GRID_ARRAY, f"/{member}", DELETE)
    messages = [p.message for p in problems_of(doc) if p.pointer == f"/{member}"]
    assert messages == ["required array member is missing"]


def test_fill_value_null_is_present_but_no_bytes_value() -> None:
    # present (not "missing"), but null is no value of any Zarr v3 data type
    assert_single(with_(GRID_ARRAY, "/fill_value", None), "/fill_value", "base64 string", "got null")


@pytest.mark.parametrize(("value", "pointer"), [(-1, "/shape/1"), (1.5, "/shape/1"), ("2", "/shape/1")])
def test_shape_entries(value: Any, pointer: str) -> None:
    assert_single(with_(GRID_ARRAY, "/shape/1", value), pointer, "non-negative integer")


def test_shape_must_be_a_list() -> None:
    problems = problems_of(with_(GRID_ARRAY, "/shape", 8))
    assert [p.pointer for p in problems] == ["/shape"]


def test_zero_length_dimension_is_fine() -> None:
    assert problems_of(with_(GRID_ARRAY, "/shape/0", 0)) == []


def test_array_attributes_must_be_an_object() -> None:
    assert_single(with_(GRID_ARRAY, "/attributes", []), "/attributes", "must be an object")


def test_codecs_non_empty_list() -> None:
    assert_single(with_(GRID_ARRAY, "/codecs", []), "/codecs", "at least one codec")
    assert_single(with_(GRID_ARRAY, "/codecs", {"name": "bytes"}), "/codecs", "must be a list")


def test_dimension_names() -> None:
    assert_single({**GRID_ARRAY, "dimension_names": ["x", "y"]}, "/dimension_names", "2 entries", "(3)")
    assert_single({**GRID_ARRAY, "dimension_names": ["x", 1, None]}, "/dimension_names/1", "string or null")
    assert_single({**GRID_ARRAY, "dimension_names": None}, "/dimension_names", "must be a list")


def test_storage_transformers_must_be_a_list() -> None:
    assert_single(with_(GRID_ARRAY, "/storage_transformers", {}), "/storage_transformers", "must be a list")


# -- rule 8: extension points ------------------------------------------------------------


EXTENSION_POINTERS = [
    "/data_type",
    "/chunk_grid",
    "/chunk_key_encoding",
    "/codecs/0",
    "/codecs/0/configuration/codecs/0",
    "/codecs/0/configuration/index_codecs/1",
]


EXTENSIONS = with_(SHARDED_ARRAY, "/storage_transformers", [{"name": "example"}])


@pytest.mark.parametrize("pointer", [*EXTENSION_POINTERS, "/storage_transformers/0"])
@pytest.mark.parametrize("name", ["", "foo/bar", "Zstd", "1abc", "a", "zstd ", "ä"])
def test_bad_extension_names(pointer: str, name: str) -> None:
    doc = with_(EXTENSIONS, pointer, {"name": name})
    problems = [p for p in problems_of(doc) if "extension name" in p.message]
    assert [p.pointer for p in problems] == [f"{pointer}/name"]
    assert repr(name) in problems[0].message and "URI" in problems[0].message


@pytest.mark.parametrize("pointer", [*EXTENSION_POINTERS, "/storage_transformers/0"])
def test_must_understand_false_at_extension_points(pointer: str) -> None:
    current = at(EXTENSIONS, pointer.split("/")[1:])
    entry = {**({"name": current} if isinstance(current, str) else current), "must_understand": False}
    problems = problems_of(with_(EXTENSIONS, pointer, entry))
    assert [p.pointer for p in problems] == [f"{pointer}/must_understand"]
    assert "must_understand: false" in problems[0].message


def test_must_understand_must_be_boolean() -> None:
    doc = with_(GRID_ARRAY, "/codecs/0/must_understand", "no")
    assert_single(doc, "/codecs/0/must_understand", "must be true")


def test_extension_needs_a_name_and_an_object_configuration() -> None:
    assert_single(with_(GRID_ARRAY, "/codecs/0", {"configuration": {}}), "/codecs/0", "no 'name'")
    assert_single(with_(GRID_ARRAY, "/codecs/0/name", 3), "/codecs/0/name", "must be a string")
    assert_single(with_(GRID_ARRAY, "/codecs/0/configuration", []), "/codecs/0/configuration", "must be an object")
    assert_single(with_(GRID_ARRAY, "/data_type", 7), "/data_type", "extension name or an object")


def test_string_extension_name_is_checked_too() -> None:
    assert_single(with_(GRID_ARRAY, "/data_type", "Float32"), "/data_type", "'Float32'")


# -- rule 9: chunk lengths ---------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, 1.0, True, "1"])
def test_regular_grid_chunk_lengths(value: Any) -> None:
    doc = with_(GRID_ARRAY, "/chunk_grid/configuration/chunk_shape/2", value)
    assert_single(doc, "/chunk_grid/configuration/chunk_shape/2", "integer >= 1")


def test_regular_grid_needs_one_length_per_dimension() -> None:
    doc = with_(GRID_ARRAY, "/chunk_grid/configuration/chunk_shape", [1, 1])
    assert_single(doc, "/chunk_grid/configuration/chunk_shape", "2 entries", "(3)")
    assert_single(with_(GRID_ARRAY, "/chunk_grid/configuration", {}), "/chunk_grid", "chunk_shape")
    assert_single(with_(GRID_ARRAY, "/chunk_grid", "regular"), "/chunk_grid", "chunk_shape")


def test_other_chunk_grids_are_not_interpreted() -> None:
    assert problems_of(with_(GRID_ARRAY, "/chunk_grid", {"name": "rectilinear", "configuration": {"x": 0}})) == []


@pytest.mark.parametrize("value", [0, False, 2.0])
def test_sharding_chunk_lengths(value: Any) -> None:
    doc = with_(SHARDED_ARRAY, "/codecs/0/configuration/chunk_shape/0", value)
    assert_single(doc, "/codecs/0/configuration/chunk_shape/0", "integer >= 1")


@pytest.mark.parametrize("member", ["chunk_shape", "codecs", "index_codecs"])
def test_sharding_configuration_members_are_required(member: str) -> None:
    doc = with_(SHARDED_ARRAY, f"/codecs/0/configuration/{member}", DELETE)
    assert_single(doc, "/codecs/0", f"configuration.{member}")


def test_nested_sharding_is_checked() -> None:
    inner = copy.deepcopy(SHARDED_ARRAY["codecs"][0])
    inner["configuration"]["chunk_shape"] = [1, 0, 1]
    doc = with_(SHARDED_ARRAY, "/codecs/0/configuration/codecs/0", inner)
    assert_single(doc, "/codecs/0/configuration/codecs/0/configuration/chunk_shape/1", "integer >= 1")


# -- rule 10: chunk key encodings --------------------------------------------------------


@pytest.mark.parametrize("name", ["default", "v2"])
@pytest.mark.parametrize("separator", ["|", "", "//", None, 0])
def test_chunk_key_separator(name: str, separator: Any) -> None:
    doc = with_(GRID_ARRAY, "/chunk_key_encoding", {"name": name, "configuration": {"separator": separator}})
    assert_single(doc, "/chunk_key_encoding/configuration/separator", f"{name} chunk key encoding", "'/' or '.'")


@pytest.mark.parametrize("name", ["default", "v2"])
@pytest.mark.parametrize("encoding", [{"configuration": {"separator": "."}}, {"configuration": {}}, {}])
def test_chunk_key_encoding_valid_forms(name: str, encoding: dict[str, Any]) -> None:
    assert problems_of(with_(GRID_ARRAY, "/chunk_key_encoding", {"name": name, **encoding})) == []


# -- rule 11: booleans are not integers --------------------------------------------------


def test_true_is_not_a_dimension_length() -> None:
    assert_single(with_(GRID_ARRAY, "/shape/0", True), "/shape/0", "got true")


# -- collecting everything ---------------------------------------------------------------


def test_all_problems_are_collected() -> None:
    doc = with_(GRID_ARRAY, "/zarr_format", "3")
    doc = with_(doc, "/shape/0", -1)
    doc = with_(doc, "/chunk_grid/configuration/chunk_shape/0", 0)
    doc = with_(doc, "/codecs/0/must_understand", False)
    raw = raw_of(doc).replace(b'"fill_value": ""', b'"fill_value": NaN')
    parsed, errors = check_document(raw, file=FILE)
    assert parsed is not None and parsed["shape"] == [-1, 2, 2]
    assert sorted(e.pointer for e in errors) == [
        "/chunk_grid/configuration/chunk_shape/0",
        "/codecs/0/must_understand",
        "/fill_value",
        "/shape/0",
        "/zarr_format",
    ]


def test_json_pointer_escapes() -> None:
    assert json_pointer() == ""
    assert json_pointer("a/b", "m~n", 0, "") == "/a~1b/m~0n/0/"


# -- dump_document -----------------------------------------------------------------------


def test_dump_round_trip_and_format() -> None:
    doc = {**GRID_ARRAY, "attributes": {**GRID_ARRAY["attributes"], "x": math.inf, "y": [math.nan], "é": "ü"}}
    raw = dump_document(doc)
    assert not raw.startswith(b"\xef\xbb\xbf")
    assert raw == json.dumps(doc, indent=2, allow_nan=True).encode()
    assert b'"x": Infinity' in raw and b"NaN" in raw
    loaded = load_document(raw, file=FILE)
    assert loaded["attributes"]["x"] == math.inf and math.isnan(loaded["attributes"]["y"][0])
    assert loaded["attributes"]["é"] == "ü"


@pytest.mark.parametrize(
    ("pointer", "value"), [("/fill_value", math.nan), ("/codecs/0/configuration/level", -math.inf)]
)
def test_dump_refuses_non_finite_outside_attributes(pointer: str, value: float) -> None:
    with pytest.raises(ValueError, match=pointer) as raised:
        dump_document(with_(GRID_ARRAY, pointer, value))
    assert isinstance(raised.value, MetadataError) and raised.value.pointer == pointer


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), json_values, max_size=6))
def test_finite_attributes_round_trip(attributes: dict[str, Any]) -> None:
    doc = {**GROUP, "attributes": attributes}
    assert load_document(dump_document(doc), file=FILE) == doc


# -- zarr-python cross-check -------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:The data type .* does not have a Zarr V3 specification")
@pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part")
def test_documents_written_by_zarr_python_load_and_rewrite_identically(tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    root = zarr.open_group(tmp_path, mode="w", attributes={"nan": math.nan})
    vlen = zarr.dtype.VariableLengthBytes()
    root.create_array("vlen", shape=(2, 2, 2), chunks=(1, 1, 1), dtype=vlen, compressors=None)
    root.create_array("f32", shape=(10,), chunks=(5,), dtype="float32", fill_value=np.nan, attributes={"i": math.inf})
    root.create_array("sharded", shape=(4, 4), chunks=(1, 1), shards=(2, 2), dtype="int64")
    root.create_array("empty", shape=(0,), dtype="uint8")
    zarr.consolidate_metadata(tmp_path)
    files = sorted(tmp_path.rglob("zarr.json"))
    assert len(files) == 5
    for path in files:
        raw = path.read_bytes()
        doc, errors = check_document(raw, file=str(path))
        assert errors == [], [str(e) for e in errors]
        assert dump_document(doc) == raw
    assert load_document((tmp_path / "f32" / "zarr.json").read_bytes(), file="f32/zarr.json")["fill_value"] == "NaN"
