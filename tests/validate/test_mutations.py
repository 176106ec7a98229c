"""One defect per test: a valid store written by this project, one raw-file edit, one expected code.

Each entry of ``MUTATIONS`` copies a base store (``conftest.BUILDERS``), applies exactly one
defect by editing files on disk (never through the writer), and asserts the defect is
reported at its level with its stable code.  ``REF_MISSES`` marks the defects docs/validation.md
says the reference validator misses.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    ZSTD,
    assert_clean,
    cell_file,
    edit_attrs,
    edit_json,
    first_chunk,
    read_json,
    read_payload,
    write_json,
    write_payload,
)

from zarr_vectors.encoding import FragmentIndex, encode_ragged_blob, frame_items, unframe_items
from zarr_vectors.validation import validate
from zarr_vectors.validation.findings import CATALOGUE


@dataclass(frozen=True)
class Mutation:
    name: str
    base: str
    apply: Callable[[Path], None]
    code: str
    ref_misses: bool = False
    kw: tuple = ()


MUTATIONS: list[Mutation] = []


def mutation(base: str, code: str, *, ref_misses: bool = False, name: str | None = None, **kw: object):
    def register(fn: Callable[[Path], None]) -> Callable[[Path], None]:
        MUTATIONS.append(Mutation(name or fn.__name__, base, fn, code, ref_misses, tuple(kw.items())))
        return fn

    return register


def zv_block(d: dict) -> dict:
    return d["zarr_vectors"]


def level_block(d: dict) -> dict:
    return d["zarr_vectors_level"]


def raw_text_edit(store: Path, node: str, old: str, new: str) -> None:
    f = store / node / "zarr.json"
    text = f.read_text(encoding="utf-8")
    assert old in text, (old, node)
    f.write_text(text.replace(old, new, 1), encoding="utf-8")


def segments(store: Path, family: str = "0/links/0") -> list[str]:
    return sorted(p.name for p in (store / family).iterdir() if p.is_dir())


def cross_segment(store: Path) -> str:
    return next(s for s in segments(store) if s != "0.0.0")


def set_nonempty(store: Path, array: str, fn: Callable[[list], list]) -> None:
    edit_attrs(store, array, lambda a: a.__setitem__("nonempty_chunks", fn(a["nonempty_chunks"])))


def rewrite_fragments(store: Path, array: str, chunk: tuple[int, ...], fn: Callable[[FragmentIndex], FragmentIndex]) -> None:
    index = FragmentIndex.decode(read_payload(store, array, chunk))
    write_payload(store, array, chunk, fn(index).encode())


# ---------------------------------------------------------------------------
# level 1 -- structure
# ---------------------------------------------------------------------------
@mutation("points", "L1_BAD_JSON", ref_misses=True)
def truncated_array_json(s: Path) -> None:
    f = s / "0/vertices/zarr.json"
    f.write_bytes(f.read_bytes()[:-20])


@mutation("points", "L1_JSON_BOM", ref_misses=True)
def bom_in_level_json(s: Path) -> None:
    f = s / "0/vertex_fragments/zarr.json"
    f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())


@mutation("points", "L1_JSON_DUPLICATE_KEY", ref_misses=True)
def duplicate_key(s: Path) -> None:
    raw_text_edit(s, "0/vertices", '"zarr_format": 3', '"zarr_format": 3, "zarr_format": 3')


@mutation("points", "L1_JSON_NONFINITE", ref_misses=True)
def nan_fill_value(s: Path) -> None:
    raw_text_edit(s, "0/vertex_attributes/intensity", '"fill_value": ""', '"fill_value": NaN')


@mutation("points", "L1_JSON_TOO_DEEP", ref_misses=True)
def nesting_300(s: Path) -> None:
    raw_text_edit(s, "0/vertices", '"attributes": {', '"attributes": {"deep": ' + "[" * 300 + "]" * 300 + ", ")


@mutation("points", "L1_JSON_ENVELOPE", ref_misses=True)
def zarr_format_2(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d.__setitem__("zarr_format", 2))


@mutation("points", "L1_JSON_EXTENSION_NAME", ref_misses=True)
def bad_codec_name(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d["codecs"][1].__setitem__("name", "Zstd!"))


@mutation("points", "L1_JSON_MUST_UNDERSTAND", ref_misses=True)
def must_understand_false(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d["chunk_key_encoding"].__setitem__("must_understand", False))


@mutation("points", "L1_JSON_CHUNK_LENGTH", ref_misses=True)
def chunk_length_zero(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d["chunk_grid"]["configuration"].__setitem__("chunk_shape", [0, 1, 1]))


@mutation("points", "L1_JSON_CONSOLIDATED")
def consolidated_null(s: Path) -> None:
    edit_json(s, "", lambda d: d.__setitem__("consolidated_metadata", None))


@mutation("pyramid_consolidated", "L1_CONSOLIDATED_STALE")
def node_edited_after_consolidating(s: Path) -> None:
    edit_attrs(s, "1/vertices", lambda a: a.__setitem__("note", "edited after the copy was taken"))


@mutation("pyramid_consolidated", "L1_CONSOLIDATED_STALE")
def consolidated_copy_leaves_out_a_node(s: Path) -> None:
    edit_json(s, "", lambda d: d["consolidated_metadata"]["metadata"].pop("1/vertex_fragments"))


@mutation("pyramid_consolidated", "L1_CONSOLIDATED_STALE")
def consolidated_copy_names_a_missing_node(s: Path) -> None:
    ghost = {"attributes": {}, "zarr_format": 3, "node_type": "group"}
    edit_json(s, "", lambda d: d["consolidated_metadata"]["metadata"].__setitem__("3", ghost))


@mutation("pyramid_consolidated", "L1_CONSOLIDATED_FORM")
def consolidated_kind_not_inline(s: Path) -> None:
    edit_json(s, "", lambda d: d["consolidated_metadata"].__setitem__("kind", "remote"))


@mutation("points", "L1_JSON_DIMENSION_NAMES", ref_misses=True)
def dimension_names_short(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d.__setitem__("dimension_names", ["x"]))


@mutation("points", "L1_MISSING_NODE")
def implicit_group(s: Path) -> None:
    (s / "0/vertex_attributes/zarr.json").unlink()


@mutation("points", "L1_STRAY_OBJECT")
def stray_file(s: Path) -> None:
    (s / "0/notes.txt").write_text("hello")


@mutation("points", "L1_STORAGE_OBJECT")
def chunk_is_symlink(s: Path) -> None:
    cell = cell_file(s, "0/vertices", first_chunk(s, "0/vertices"))
    outside = s.parent / f"{s.name}-outside-cell"
    outside.write_bytes(cell.read_bytes())  # a valid copy: following the link would validate ok
    cell.unlink()
    cell.symlink_to(outside)


@mutation("points", "L1_ROOT_NOT_GROUP")
def root_is_array(s: Path) -> None:
    doc = read_json(s, "0/vertices")
    doc["attributes"] = read_json(s, "")["attributes"]
    write_json(s, "", doc)


@mutation("points", "L1_MISSING_ROOT_ZV")
def no_zv_block(s: Path) -> None:
    edit_attrs(s, "", lambda a: a.pop("zarr_vectors"))


@mutation("points", "L1_NO_OME")
def no_ome(s: Path) -> None:
    edit_attrs(s, "", lambda a: a.pop("ome"))


@mutation("points", "L1_NO_LEVELS")
def no_level(s: Path) -> None:
    shutil.move(s / "0", s / "parametric")


@mutation("points", "L1_BAD_LEVEL_NAME")
def level_with_leading_zero(s: Path) -> None:
    shutil.copytree(s / "0", s / "01")


@mutation("points", "L1_UNKNOWN_ROOT_CHILD")
def unknown_root_child(s: Path) -> None:
    (s / "extras").mkdir()
    write_json(s, "extras", {"zarr_format": 3, "node_type": "group", "attributes": {}})


@mutation("points", "L1_LEVEL_NOT_GROUP")
def level_is_array(s: Path) -> None:
    (s / "1").mkdir()
    write_json(s, "1", read_json(s, "0/vertices"))


@mutation("points", "L1_MISSING_VERTICES")
def no_vertices(s: Path) -> None:
    shutil.rmtree(s / "0/vertices")


@mutation("points", "L1_MISSING_VERTEX_FRAGMENTS")
def no_vertex_fragments(s: Path) -> None:
    shutil.rmtree(s / "0/vertex_fragments")


@mutation("points", "L1_ZV_ARRAY_MISSING")
def attribute_without_discriminator(s: Path) -> None:
    edit_attrs(s, "0/vertex_attributes/intensity", lambda a: a.pop("zv_array"))


@mutation("points", "L1_ZV_ARRAY_UNKNOWN", ref_misses=True)
def unknown_discriminator(s: Path) -> None:
    edit_attrs(s, "0/vertices", lambda a: a.__setitem__("zv_array", "vertices_v2"))


@mutation("points", "L1_ZV_ARRAY_WRONG_PATH", ref_misses=True)
def discriminator_for_another_path(s: Path) -> None:
    edit_attrs(s, "0/vertex_fragments", lambda a: a.__setitem__("zv_array", "attribute"))


@mutation("points", "L1_UNEXPECTED_NODE")
def unexpected_group(s: Path) -> None:
    (s / "0/extra").mkdir()
    write_json(s, "0/extra", {"zarr_format": 3, "node_type": "group", "attributes": {}})


@mutation("points", "L1_NODE_TYPE")
def vertices_as_group(s: Path) -> None:
    write_json(s, "0/vertices", {"zarr_format": 3, "node_type": "group", "attributes": {"zv_array": "vertices"}})


@mutation("graph", "L1_BAD_DELTA_NAME")
def non_canonical_delta(s: Path) -> None:
    shutil.move(s / "0/links/0", s / "0/links/+0")


@mutation("graph", "L1_BAD_OFFSETS_NAME")
def offsets_wrong_arity(s: Path) -> None:
    seg = cross_segment(s)
    shutil.move(s / "0/links/0" / seg, s / "0/links/0" / seg.rsplit(".", 1)[0])


@mutation("graph", "L1_BAD_OFFSETS_NAME", name="attribute_offsets_non_canonical")
def attribute_offsets_non_canonical(s: Path) -> None:
    seg = cross_segment(s)
    shutil.move(s / "0/link_attributes/weight/0" / seg, s / "0/link_attributes/weight/0" / seg.replace("+1", "+01", 1))


@mutation("points", "L1_GRID_RANK")
def vertices_rank_two(s: Path) -> None:
    edit_json(s, "0/vertex_attributes/rgb", lambda d: (d.__setitem__("shape", d["shape"][:2]),
                                                       d["chunk_grid"]["configuration"].__setitem__("chunk_shape", [1, 1]),
                                                       d["attributes"].__setitem__("chunk_grid_origin", [-1, -1])))


@mutation("points", "L1_BAD_ORIGIN", ref_misses=True)
def origin_two_entries(s: Path) -> None:
    edit_attrs(s, "0/vertices", lambda a: a.__setitem__("chunk_grid_origin", [-1, -1]))


def _rewrite_manifests(s: Path, fn: Callable[[list[bytes]], list[bytes]]) -> None:
    f = s / "0/object_index/manifests/c/0"
    items = unframe_items(ZSTD.decode(f.read_bytes()))
    f.write_bytes(bytes(ZSTD.encode(frame_items(fn(items)))))


@mutation("points_ids", "L1_MANIFEST_UNDECODABLE", ref_misses=True)
def manifest_trailing_byte(s: Path) -> None:
    _rewrite_manifests(s, lambda items: [items[0] + b"\x00", *items[1:]])


@mutation("points_ids", "L1_MANIFEST_UNDECODABLE", ref_misses=True, name="manifest_unknown_mode")
def manifest_unknown_mode(s: Path) -> None:
    def bump(items: list[bytes]) -> list[bytes]:
        row = bytearray(items[2])
        row[4 + 24] = 7  # mode byte of block 0 (D = 3)
        return [items[0], items[1], bytes(row), *items[3:]]

    _rewrite_manifests(s, bump)


@mutation("points_ids", "L1_MANIFEST_UNDECODABLE")
def manifest_chunk_missing(s: Path) -> None:
    """The shape declares a second chunk that is not stored: its rows would be '', no manifest."""
    edit_json(s, "0/object_index/manifests", lambda d: d["shape"].__setitem__(0, 2 * d["shape"][0]))


@mutation("points_ids", "L1_RESOURCE_LIMIT")
def manifests_shape_huge(s: Path) -> None:
    """10^12 rows in chunks of 12: ~8e10 declared chunks, never enumerated."""
    edit_json(s, "0/object_index/manifests", lambda d: d["shape"].__setitem__(0, 10**12))


# ---------------------------------------------------------------------------
# level 2 -- metadata
# ---------------------------------------------------------------------------
def root_zv(fn: Callable[[dict], object]) -> Callable[[Path], None]:
    return lambda s: edit_attrs(s, "", lambda a: fn(a["zarr_vectors"]))


MUTATIONS += [
    Mutation("zv_version_old", "points", root_zv(lambda z: z.__setitem__("zv_version", "0.8.1")), "L2_ZV_VERSION", True),
    Mutation("zv_version_major_1", "points", root_zv(lambda z: z.__setitem__("zv_version", "1.0.0")), "L2_ZV_VERSION",
             True),
    Mutation("zv_version_garbage", "points", root_zv(lambda z: z.__setitem__("zv_version", "latest")), "L2_ZV_VERSION",
             True),
    Mutation("no_bounds", "points", root_zv(lambda z: z.pop("bounds")), "L2_ROOT_REQUIRED"),
    Mutation("chunk_shape_two_entries", "points", root_zv(lambda z: z.__setitem__("chunk_shape", [50.0, 50.0])),
             "L2_CHUNK_SHAPE"),
    Mutation("chunk_shape_negative", "points", root_zv(lambda z: z.__setitem__("chunk_shape", [50.0, -50.0, 50.0])),
             "L2_CHUNK_SHAPE"),
    Mutation("bounds_inverted", "points", root_zv(lambda z: z.__setitem__("bounds", [[10, 0, 0], [0, 1, 1]])),
             "L2_BOUNDS"),
    Mutation("links_convention_unknown", "points", root_zv(lambda z: z.__setitem__("links_convention", "sequential")),
             "L2_LINKS_CONVENTION"),
    Mutation("object_index_convention_unknown", "points",
             root_zv(lambda z: z.__setitem__("object_index_convention", "sparse")), "L2_OBJECT_INDEX_CONVENTION"),
    Mutation("cross_chunk_strategy_unknown", "points", root_zv(lambda z: z.__setitem__("cross_chunk_strategy", "x")),
             "L2_CROSS_CHUNK_STRATEGY"),
    Mutation("cross_level_storage_unknown", "points", root_zv(lambda z: z.__setitem__("cross_level_storage", "both")),
             "L2_CROSS_LEVEL_STORAGE", True),
    Mutation("cross_level_depth_minus_two", "points", root_zv(lambda z: z.__setitem__("cross_level_depth", -2)),
             "L2_CROSS_LEVEL_DEPTH", True),
    Mutation("geometry_types_empty", "points", root_zv(lambda z: z.__setitem__("geometry_types", [])),
             "L2_GEOMETRY_TYPES"),
    Mutation("geometry_type_custom", "points",
             root_zv(lambda z: z.__setitem__("geometry_types", ["point_cloud", "hologram"])), "L2_CUSTOM_GEOMETRY"),
    Mutation("capabilities_not_a_list", "points",
             root_zv(lambda z: z.__setitem__("format_capabilities", "fragment_index")), "L2_CAPABILITIES"),
    Mutation("capability_unknown", "points", root_zv(lambda z: z.__setitem__("format_capabilities", ["teleport"])),
             "L2_UNKNOWN_CAPABILITY", True),
    Mutation("base_bin_not_dividing", "points", root_zv(lambda z: z.__setitem__("base_bin_shape", [30.0] * 3)),
             "L2_BASE_BIN_SHAPE"),
]


@mutation("points", "L2_SID_NDIM")
def no_axes(s: Path) -> None:
    edit_attrs(s, "", lambda a: a["multiscales"][0].__setitem__("axes", []))


@mutation("points", "L2_MULTISCALES_DATASETS")
def dataset_without_translation(s: Path) -> None:
    edit_attrs(s, "", lambda a: a["multiscales"][0]["datasets"][0]["coordinateTransformations"].pop())


@mutation("points_ids", "L2_OBJECT_INDEX_LAYOUT", ref_misses=True)
def layout_v3(s: Path) -> None:
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("layout", "vlen_manifests_v3"))


@mutation("points_ids", "L2_OBJECT_INDEX_LAYOUT", ref_misses=True, name="layout_v2_not_allowed")
def layout_v2_not_allowed(s: Path) -> None:
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("layout", "vlen_manifests_v2"))


@mutation("points_ids", "L2_OBJECT_INDEX_COUNTS")
def num_present_above_num_objects(s: Path) -> None:
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("num_present", a["num_objects"] + 1))


@mutation("points_ids", "L2_OBJECT_INDEX_COUNTS", name="num_objects_not_rows")
def num_objects_not_rows(s: Path) -> None:
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("num_objects", a["num_objects"] + 3))


@mutation("points", "L2_LEVEL_BLOCK")
def no_level_block(s: Path) -> None:
    edit_attrs(s, "0", lambda a: a.pop("zarr_vectors_level"))


@mutation("points", "L2_LEVEL_NUMBER")
def level_number_wrong(s: Path) -> None:
    edit_attrs(s, "0", lambda a: level_block(a).__setitem__("level", 3))


@mutation("points", "L2_VERTEX_COUNT", ref_misses=True)
def vertex_count_negative(s: Path) -> None:
    edit_attrs(s, "0", lambda a: level_block(a).__setitem__("vertex_count", -5))


@mutation("points", "L2_ARRAYS_PRESENT")
def arrays_present_string(s: Path) -> None:
    edit_attrs(s, "0", lambda a: level_block(a).__setitem__("arrays_present", "vertices"))


@mutation("points", "L2_OBJECT_SPARSITY", ref_misses=True)
def sparsity_zero(s: Path) -> None:
    edit_attrs(s, "0", lambda a: level_block(a).__setitem__("object_sparsity", 0))


@mutation("points", "L2_PARENT_LEVEL")
def level_zero_has_parent(s: Path) -> None:
    edit_attrs(s, "0", lambda a: level_block(a).__setitem__("parent_level", 0))


@mutation("points", "L2_LEVEL_CHUNK_SHAPE")
def level_chunk_shape_zero(s: Path) -> None:
    edit_attrs(s, "0", lambda a: level_block(a).__setitem__("chunk_shape", [0.0, 50.0, 50.0]))


@mutation("graph", "L2_FAMILY_LINK_WIDTH")
def family_width_zero(s: Path) -> None:
    edit_attrs(s, "0/links/0", lambda a: a.__setitem__("link_width", 0))


@mutation("graph", "L2_FAMILY_DIRECTED")
def family_directed_string(s: Path) -> None:
    edit_attrs(s, "0/links/0", lambda a: a.__setitem__("directed", "no"))


@mutation("graph", "L2_FAMILY_STORE")
def family_store_unknown(s: Path) -> None:
    edit_attrs(s, "0/links/0", lambda a: a.__setitem__("store", "both"))


@mutation("graph", "L2_FAMILY_SID_NDIM")
def family_sid_ndim_two(s: Path) -> None:
    edit_attrs(s, "0/links/0", lambda a: a.__setitem__("sid_ndim", 2))


@mutation("graph", "L2_FAMILY_LEVEL_DELTA")
def family_level_delta(s: Path) -> None:
    edit_attrs(s, "0/links/0", lambda a: a.__setitem__("level_delta", 1))


@mutation("graph", "L2_FAMILY_COUNTS", ref_misses=True)
def attribute_family_num_links_a_string(s: Path) -> None:
    edit_attrs(s, "0/link_attributes/weight/0", lambda a: a.__setitem__("num_links", "many"))


@mutation("graph", "L2_LINKS_ARRAY_AGREES", name="offsets_field_true_for_one")
def offsets_field_true_for_one(s: Path) -> None:
    # [[true, ...]] == [[1, ...]] in Python; JSON tells them apart
    seg = cross_segment(s)
    edit_attrs(s, f"0/links/0/{seg}", lambda a: a["offsets"][0].__setitem__(
        next(i for i, v in enumerate(a["offsets"][0]) if v == 1), True))


@mutation("graph", "L2_LINKS_ARRAY_AGREES")
def offsets_field_disagrees(s: Path) -> None:
    edit_attrs(s, f"0/links/0/{cross_segment(s)}", lambda a: a.__setitem__("offsets", [[0, 0, 7]]))


@mutation("graph", "L2_LINKS_ARRAY_AGREES", name="array_link_width_disagrees")
def array_link_width_disagrees(s: Path) -> None:
    edit_attrs(s, "0/links/0/0.0.0", lambda a: a.__setitem__("link_width", 3))


@mutation("points", "L2_ARRAY_DTYPE")
def vertices_int_dtype(s: Path) -> None:
    edit_attrs(s, "0/vertices", lambda a: a.__setitem__("dtype", "int32"))


@mutation("points", "L2_CODECS")
def unsupported_codec(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d["codecs"].__setitem__(1, {"name": "lz4", "configuration": {}}))


@mutation("points", "L1_JSON_FILL_VALUE")
def vlen_fill_value_a_number(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d.__setitem__("fill_value", 1.5))


@mutation("points", "L1_JSON_UNKNOWN_KEY")
def zstd_bogus_key(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d["codecs"][1]["configuration"].__setitem__("bogus", 1))


@mutation("points", "L1_JSON_CODEC_CONFIG")
def zstd_level_a_string(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d["codecs"][1]["configuration"].__setitem__("level", "high"))


@mutation("points", "L2_DATA_TYPE", ref_misses=True)
def vertices_data_type_not_vlen(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d.update(data_type="int32", fill_value=0))


@mutation("points", "L2_FILL_VALUE", ref_misses=True)
def vlen_fill_value_not_empty(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d.__setitem__("fill_value", "AAAA"))


@mutation("points", "L2_CHUNK_KEY_ENCODING", ref_misses=True)
def chunk_keys_dotted(s: Path) -> None:
    edit_json(s, "0/vertices", lambda d: d.__setitem__("chunk_key_encoding",
                                                       {"name": "default", "configuration": {"separator": "."}}))


@mutation("points_ids", "L2_CHUNK_GRID", ref_misses=True)
def object_attribute_grid_not_regular(s: Path) -> None:
    edit_json(s, "0/object_attributes/weight", lambda d: d["chunk_grid"].__setitem__("name", "rectangular"))


@mutation("points", "L2_LEVEL_FLAGS", ref_misses=True)
def fragments_tile_a_string(s: Path) -> None:
    edit_attrs(s, "0", lambda a: level_block(a).__setitem__("fragments_tile", "yes"))


@mutation("points_ids", "L2_OBJECT_ATTRIBUTE_ROWS", ref_misses=True)
def object_attribute_rows_not_objects(s: Path) -> None:
    edit_json(s, "0/object_attributes/weight", lambda d: (d.__setitem__("shape", [d["shape"][0] - 1]),
                                                          d["attributes"].__setitem__("shape", [d["shape"][0]])))


@mutation("points", "L2_NONEMPTY_CHUNKS")
def nonempty_key_non_canonical(s: Path) -> None:
    set_nonempty(s, "0/vertices", lambda keys: ["-01" + keys[0][2:] if keys[0].startswith("-1") else "01.0.0",
                                                *keys[1:]])


@mutation("points", "L2_NONEMPTY_CHUNKS", name="nonempty_key_outside_grid")
def nonempty_key_outside_grid(s: Path) -> None:
    set_nonempty(s, "0/vertices", lambda keys: sorted([*keys, "9.9.9"]))


@mutation("points", "L2_NONEMPTY_UNSORTED")
def nonempty_unsorted(s: Path) -> None:
    set_nonempty(s, "0/vertices", lambda keys: keys[::-1])


# ---------------------------------------------------------------------------
# level 3 -- consistency
# ---------------------------------------------------------------------------
@mutation("points", "L3_NONEMPTY_MISSING", ref_misses=True)
def nonempty_lists_absent_cell(s: Path) -> None:
    vertices_chunk = first_chunk(s, "0/vertices")
    cell_file(s, "0/vertex_attributes/intensity", vertices_chunk).unlink()


@mutation("points", "L3_NONEMPTY_EXTRA")
def cell_not_listed(s: Path) -> None:
    set_nonempty(s, "0/vertex_attributes/rgb", lambda keys: keys[1:])


@mutation("points", "L3_CELL_UNDECODABLE")
def garbage_cell(s: Path) -> None:
    cell_file(s, "0/vertices", first_chunk(s, "0/vertices")).write_bytes(b"not zstd at all")


@mutation("points_sharded", "L3_SHARD_CORRUPT")
def shard_index_crc_mismatch(s: Path) -> None:
    doc = read_json(s, "0/vertices")
    shards = doc["chunk_grid"]["configuration"]["chunk_shape"]
    origin = doc["attributes"].get("chunk_grid_origin", [0] * len(shards))
    chunk = first_chunk(s, "0/vertices")
    f = s / "0/vertices/c" / Path(*[str((c - o) // n) for c, o, n in zip(chunk, origin, shards)])
    raw = bytearray(f.read_bytes())
    raw[-5] ^= 0x01  # the last index byte: the stored CRC32C no longer matches
    f.write_bytes(bytes(raw))


@mutation("points", "L3_VERTEX_ROWS")
def vertex_cell_partial_row(s: Path) -> None:
    c = first_chunk(s, "0/vertices")
    write_payload(s, "0/vertices", c, read_payload(s, "0/vertices", c) + b"\0\0\0\0")


@mutation("points", "L3_FRAGMENT_INDEX_UNDECODABLE")
def fragment_bad_magic(s: Path) -> None:
    c = first_chunk(s, "0/vertex_fragments")
    write_payload(s, "0/vertex_fragments", c, b"XXXX" + read_payload(s, "0/vertex_fragments", c)[4:])


@mutation("points", "L3_FRAGMENT_INDEX_MISSING")
def fragment_cell_removed(s: Path) -> None:
    c = first_chunk(s, "0/vertex_fragments")
    cell_file(s, "0/vertex_fragments", c).unlink()
    set_nonempty(s, "0/vertex_fragments", lambda keys: keys[1:])


@mutation("points", "L3_FRAGMENT_OUT_OF_RANGE", ref_misses=True)
def fragment_range_past_end(s: Path) -> None:
    def grow(index: FragmentIndex) -> FragmentIndex:
        counts = index.range_counts.copy()
        counts[-1] += 1
        return FragmentIndex.from_ranges(index.range_starts, counts)

    rewrite_fragments(s, "0/vertex_fragments", first_chunk(s, "0/vertex_fragments"), grow)


@mutation("points", "L3_FRAGMENTS_TILE")
def fragments_out_of_order(s: Path) -> None:
    def swap(index: FragmentIndex) -> FragmentIndex:
        frags = [(int(a), int(b)) for a, b in zip(index.range_starts, index.range_counts)]
        i = next(k for k in range(len(frags) - 1) if frags[k][1] and frags[k + 1][1])
        frags[i], frags[i + 1] = frags[i + 1], frags[i]
        return FragmentIndex.from_fragments(frags)

    rewrite_fragments(s, "0/vertex_fragments", first_chunk(s, "0/vertex_fragments"), swap)


@mutation("points", "L3_TOO_MANY_FRAGMENTS")
def one_fragment_too_many(s: Path) -> None:
    def extra(index: FragmentIndex) -> FragmentIndex:
        total = int(index.range_counts.sum())
        return FragmentIndex.from_ranges(np.r_[index.range_starts, total], np.r_[index.range_counts, 0])

    rewrite_fragments(s, "0/vertex_fragments", first_chunk(s, "0/vertex_fragments"), extra)


@mutation("points", "L3_NONFINITE_VERTEX")
def nan_vertex(s: Path) -> None:
    c = first_chunk(s, "0/vertices")
    rows = np.frombuffer(read_payload(s, "0/vertices", c), "<f4").copy()
    rows[1] = np.nan
    write_payload(s, "0/vertices", c, rows.tobytes())


@mutation("points", "L3_VERTEX_COUNT", ref_misses=True)
def vertex_count_off_by_one(s: Path) -> None:
    edit_attrs(s, "0", lambda a: level_block(a).__setitem__("vertex_count", level_block(a)["vertex_count"] + 1))


@mutation("points", "L3_ARRAYS_PRESENT")
def arrays_present_over_reports(s: Path) -> None:
    edit_attrs(s, "0", lambda a: level_block(a)["arrays_present"].append("object_index"))


@mutation("points", "L3_ATTRIBUTE_ROWS")
def attribute_cell_short(s: Path) -> None:
    c = first_chunk(s, "0/vertex_attributes/rgb")
    write_payload(s, "0/vertex_attributes/rgb", c, read_payload(s, "0/vertex_attributes/rgb", c)[:-3])


@mutation("points_fattr", "L3_FRAGMENT_ATTRIBUTE_ROWS", ref_misses=True)
def fragment_attribute_short(s: Path) -> None:
    a = "0/fragment_attributes/bin_id"
    c = first_chunk(s, a)
    write_payload(s, a, c, read_payload(s, a, c)[:-4])


def _manifest_row(chunk: tuple[int, ...], fragment: int) -> bytes:
    return np.array([1], "<u4").tobytes() + np.array(chunk, "<i8").tobytes() + b"\x00" + np.array([fragment], "<i8").tobytes()


@mutation("points_ids", "L3_MANIFEST_CHUNK_MISSING")
def manifest_names_missing_chunk(s: Path) -> None:
    _rewrite_manifests(s, lambda items: [_manifest_row((99, 99, 99), 0), *items[1:]])


@mutation("points_ids", "L3_MANIFEST_FRAGMENT_OUT_OF_RANGE")
def manifest_names_missing_fragment(s: Path) -> None:
    c = first_chunk(s, "0/vertices")
    _rewrite_manifests(s, lambda items: [items[0] + b"", _manifest_row(c, 500), *items[2:]])


@mutation("points_ids", "L3_OBJECT_NUM_PRESENT")
def num_present_off(s: Path) -> None:
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("num_present", a["num_present"] - 1))


@mutation("graph", "L3_OFFSETS_NOT_CANONICAL")
def lex_negative_segment(s: Path) -> None:
    seg = next(x for x in segments(s) if x.startswith("0.0.+"))
    neg = seg.replace("0.0.+", "0.0.-")
    for fam in ("0/links/0", "0/link_attributes/weight/0"):
        shutil.move(s / fam / seg, s / fam / neg)
        edit_attrs(s, f"{fam}/{neg}", lambda a: a.__setitem__("offsets", [[-v for v in o] for o in a["offsets"]]))


@mutation("graph", "L3_HAS_PERM")
def has_perm_flipped_on_intra(s: Path) -> None:
    edit_attrs(s, "0/links/0/0.0.0", lambda a: a.__setitem__("has_perm", True))


@mutation("graph", "L3_LINK_CELL_BYTES")
def blob_cell_extra_bytes(s: Path) -> None:
    a = f"0/links/0/{cross_segment(s)}"
    c = first_chunk(s, a)
    write_payload(s, a, c, read_payload(s, a, c) + b"\1\2\3")


@mutation("graph", "L3_LINK_ENCODING")
def intra_cell_as_blob(s: Path) -> None:
    a = "0/links/0/0.0.0"
    c = first_chunk(s, a)
    rows = np.frombuffer(read_payload(s, a, c), "<i8").reshape(-1, 2)
    write_payload(s, a, c, encode_ragged_blob([rows]))


def _edit_blob(s: Path, array: str, fn: Callable[[np.ndarray], None], width: int = 3) -> None:
    c = first_chunk(s, array)
    payload = read_payload(s, array, c)
    k = int(np.frombuffer(payload[:8], "<i8")[0])
    head, data = payload[: 8 * (1 + k)], np.frombuffer(payload[8 * (1 + k):], "<i8").copy().reshape(-1, width)
    fn(data)
    write_payload(s, array, c, head + data.tobytes())


@mutation("graph", "L3_PERM_IDX_RANGE", ref_misses=True)
def perm_idx_too_large(s: Path) -> None:
    _edit_blob(s, f"0/links/0/{cross_segment(s)}", lambda rows: rows.__setitem__((0, 0), 7))


@mutation("graph", "L3_LINK_VI_OUT_OF_RANGE", ref_misses=True)
def vi_past_target_chunk(s: Path) -> None:
    _edit_blob(s, f"0/links/0/{cross_segment(s)}", lambda rows: rows.__setitem__((0, 2), 999))


@mutation("graph", "L3_LINK_VI_OUT_OF_RANGE", ref_misses=True, name="intra_vi_negative")
def intra_vi_negative(s: Path) -> None:
    a = "0/links/0/0.0.0"
    c = first_chunk(s, a)
    rows = np.frombuffer(read_payload(s, a, c), "<i8").copy()
    rows[1] = -1
    write_payload(s, a, c, rows.tobytes())


@mutation("graph", "L3_LINK_ENDPOINT_CHUNK_MISSING")
def endpoint_chunk_missing(s: Path) -> None:
    a = f"0/links/0/{cross_segment(s)}"
    offsets = read_json(s, a)["attributes"]["offsets"][0]
    c = first_chunk(s, a)
    # re-file the cell at a source chunk whose target lies outside the 2x2x2 grid of vertices
    src = tuple(1 if o > 0 else (0 if o < 0 else cc) for cc, o in zip(c, offsets))
    target = tuple(v + o for v, o in zip(src, offsets))
    assert any(t > 1 or t < 0 for t in target)
    payload = read_payload(s, a, c)
    edit_json(s, a, lambda d: d.__setitem__("shape", [2, 2, 2]))
    edit_json(s, a, lambda d: d["attributes"].pop("chunk_grid_origin", None))
    cell_file(s, a, c).unlink()
    write_payload(s, a, src, payload)
    set_nonempty(s, a, lambda keys: sorted([k for k in keys if k != ".".join(map(str, c))]
                                           + [".".join(map(str, src))]))
    # the attribute cell follows its link cell
    b = f"0/link_attributes/weight/0/{a.rsplit('/', 1)[1]}"
    apayload = read_payload(s, b, c)
    edit_json(s, b, lambda d: d.__setitem__("shape", [2, 2, 2]))
    edit_json(s, b, lambda d: d["attributes"].pop("chunk_grid_origin", None))
    cell_file(s, b, c).unlink()
    write_payload(s, b, src, apayload)
    set_nonempty(s, b, lambda keys: sorted([k for k in keys if k != ".".join(map(str, c))]
                                           + [".".join(map(str, src))]))


@mutation("graph", "L3_LINK_FRAGMENTS_PRESENCE", ref_misses=True)
def link_fragments_cell_missing(s: Path) -> None:
    c = first_chunk(s, "0/link_fragments")
    cell_file(s, "0/link_fragments", c).unlink()
    set_nonempty(s, "0/link_fragments", lambda keys: keys[1:])


@mutation("graph", "L3_LINK_FRAGMENTS_TILE")
def link_fragments_range_too_long(s: Path) -> None:
    def grow(index: FragmentIndex) -> FragmentIndex:
        counts = index.range_counts.copy()
        counts[-1] += 1
        return FragmentIndex.from_ranges(index.range_starts, counts)

    rewrite_fragments(s, "0/link_fragments", first_chunk(s, "0/link_fragments"), grow)


@mutation("graph", "L3_LINK_ATTRIBUTE_MIRROR", ref_misses=True)
def attribute_segment_missing(s: Path) -> None:
    shutil.rmtree(s / "0/link_attributes/weight/0" / cross_segment(s))


@mutation("graph", "L3_LINK_ATTRIBUTE_MIRROR", ref_misses=True, name="attribute_cell_missing")
def attribute_cell_missing(s: Path) -> None:
    a = f"0/link_attributes/weight/0/{cross_segment(s)}"
    c = first_chunk(s, a)
    cell_file(s, a, c).unlink()
    set_nonempty(s, a, lambda keys: keys[1:])


@mutation("graph", "L3_LINK_ATTRIBUTE_ROWS", ref_misses=True)
def attribute_rows_short(s: Path) -> None:
    a = "0/link_attributes/weight/0/0.0.0"
    c = first_chunk(s, a)
    write_payload(s, a, c, read_payload(s, a, c)[:-4])


@mutation("graph", "L3_FAMILY_PHYSICAL_COUNT")
def physical_count_off(s: Path) -> None:
    edit_attrs(s, "0/links/0", lambda a: a.__setitem__("num_physical_records", a["num_physical_records"] + 1))


@mutation("graph", "L3_FAMILY_NUM_LINKS", ref_misses=True)
def canonical_num_links_off(s: Path) -> None:
    edit_attrs(s, "0/links/0", lambda a: a.__setitem__("num_links", a["num_links"] - 1))


@mutation("graph_directed_duplicate", "L3_FAMILY_NUM_LINKS", name="duplicate_copy_missing")
def duplicate_copy_missing(s: Path) -> None:
    a = f"0/links/0/{cross_segment(s)}"
    _edit_blob(s, a, lambda rows: None)  # (sanity: decodes)
    c = first_chunk(s, a)
    payload = read_payload(s, a, c)
    k = int(np.frombuffer(payload[:8], "<i8")[0])
    rows = np.frombuffer(payload[8 * (1 + k):], "<i8").reshape(-1, 3)
    b = f"0/link_attributes/weight/0/{a.rsplit('/', 1)[1]}"
    if len(rows) == 1:
        for arr in (a, b):
            cell_file(s, arr, c).unlink()
            set_nonempty(s, arr, lambda keys: keys[1:])
    else:
        write_payload(s, a, c, encode_ragged_blob([rows[1:]]))
        write_payload(s, b, c, read_payload(s, b, c)[4:])
    edit_attrs(s, "0/links/0", lambda at: at.__setitem__("num_physical_records", at["num_physical_records"] - 1))


# ---------------------------------------------------------------------------
# level 4 -- conventions
# ---------------------------------------------------------------------------
MUTATIONS += [
    Mutation("graph_convention_sequential", "graph",
             root_zv(lambda z: z.__setitem__("links_convention", "implicit_sequential")), "L4_LINKS_CONVENTION"),
    Mutation("point_cloud_with_delta0_links", "graph",
             root_zv(lambda z: (z.__setitem__("geometry_types", ["point_cloud"]))), "L4_POINT_CLOUD_LINKS"),
    Mutation("mesh_with_width_two", "graph", root_zv(lambda z: z.__setitem__("geometry_types", ["mesh"])),
             "L4_LINK_WIDTH"),
    # D19: a listed kind the links_convention contradicts is set aside (the graph reads as a graph) ...
    Mutation("geometry_types_name_a_contradicted_kind", "graph",
             root_zv(lambda z: z.__setitem__("geometry_types", ["polyline", "graph"])), "L4_GEOMETRY_TYPES"),
    # ... and a list that the metadata contradicts throughout cannot be read at all
    Mutation("geometry_types_none_fits", "points",
             root_zv(lambda z: z.__setitem__("geometry_types", ["graph", "mesh"])), "L4_GEOMETRY_TYPES_UNREADABLE"),
]


@mutation("points", "L4_POINT_OUTSIDE_BIN", ref_misses=True)
def point_in_wrong_bin(s: Path) -> None:
    # the LAST chunk, so a checker that samples the first few chunks misses it
    c = tuple(int(v) for v in read_json(s, "0/vertices")["attributes"]["nonempty_chunks"][-1].split("."))
    index = FragmentIndex.decode(read_payload(s, "0/vertex_fragments", c))
    rows = np.frombuffer(read_payload(s, "0/vertices", c), "<f4").copy().reshape(-1, 3)
    f = next(k for k in range(index.num_fragments) if index.range_counts[k])
    r = int(index.range_starts[f])
    rows[r] += np.float32(26.0) * np.sign(25.0 * (np.asarray(c) * 2 + 1) - rows[r])  # one bin over, same chunk
    write_payload(s, "0/vertices", c, rows.tobytes())


# ---------------------------------------------------------------------------
# level 5 -- multi-resolution
# ---------------------------------------------------------------------------
def dataset(s: Path, level: int, fn: Callable[[dict], object]) -> None:
    edit_attrs(s, "", lambda a: fn(a["multiscales"][0]["datasets"][level]["coordinateTransformations"]))


@mutation("pyramid", "L5_LEVELS_CONTIGUOUS")
def level_gap(s: Path) -> None:
    shutil.move(s / "2", s / "3")
    edit_attrs(s, "3", lambda a: level_block(a).__setitem__("level", 3))
    edit_attrs(s, "", lambda a: (a["multiscales"][0]["datasets"][2].__setitem__("path", "3")))
    shutil.rmtree(s / "1/links/+1")  # keep level 3's cross-level family story consistent
    edit_attrs(s, "", lambda a: zv_block(a).__setitem__("cross_level_storage", "explicit"))


@mutation("pyramid", "L5_PARENT_CHAIN")
def parent_skips_a_level(s: Path) -> None:
    edit_attrs(s, "2", lambda a: level_block(a).__setitem__("parent_level", 0))


@mutation("pyramid", "L5_CHUNK_SHAPE_MULTIPLE")
def level_chunk_not_multiple(s: Path) -> None:
    edit_attrs(s, "2", lambda a: level_block(a).__setitem__("chunk_shape", [75.0, 50.0, 50.0]))


@mutation("pyramid", "L5_BIN_DIVIDES_CHUNK")
def bin_not_dividing_chunk(s: Path) -> None:
    dataset(s, 1, lambda t: t[1].__setitem__("translation", [20.0, 25.0, 25.0]))


@mutation("pyramid", "L5_BIN_RATIO")
def bin_ratio_decreases(s: Path) -> None:
    dataset(s, 2, lambda t: t[0].__setitem__("scale", [1.5, 4.0, 4.0]))


@mutation("pyramid", "L5_BIN_RATIO", name="bin_ratio_below_one")
def bin_ratio_below_one(s: Path) -> None:
    dataset(s, 1, lambda t: t[0].__setitem__("scale", [0.5, 2.0, 2.0]))


@mutation("pyramid", "L5_BIN_VOLUME", ref_misses=True)
def bin_volume_decreases(s: Path) -> None:
    dataset(s, 2, lambda t: t[1].__setitem__("translation", [25.0, 50.0, 5.0]))


@mutation("pyramid", "L5_VERTEX_COUNT")
def coarse_level_grows(s: Path) -> None:
    edit_attrs(s, "2", lambda a: level_block(a).__setitem__("vertex_count", 10**6))


@mutation("points_pyramid", "L2_ATTRIBUTE_AGGREGATION", ref_misses=True)
def aggregation_unknown_reduction(s: Path) -> None:
    edit_attrs(s, "1", lambda a: level_block(a)["attribute_aggregation"].__setitem__("intensity", "median"))


@mutation("points_pyramid", "L5_ATTRIBUTE_AGGREGATION", ref_misses=True)
def aggregated_value_no_reduction_gives(s: Path) -> None:
    rel = "1/vertex_attributes/intensity"
    chunk = first_chunk(s, rel)
    values = np.frombuffer(read_payload(s, rel, chunk), "<f4").copy()
    values[0] = 1e6  # above every level-0 intensity: no max of them gives it
    write_payload(s, rel, chunk, values.tobytes())


@mutation("pyramid", "L5_INHERITED_NUM_OBJECTS", ref_misses=True)
def inherited_wrong(s: Path) -> None:
    edit_attrs(s, "1", lambda a: level_block(a).__setitem__("inherited_num_objects", 2))


@mutation("pyramid", "L5_CROSS_LEVEL_STORAGE", ref_misses=True)
def explicit_without_minus_family(s: Path) -> None:
    shutil.rmtree(s / "2/links/-1")


@mutation("pyramid", "L5_CROSS_LEVEL_STORAGE", ref_misses=True, name="none_with_families")
def none_with_families(s: Path) -> None:
    edit_attrs(s, "", lambda a: zv_block(a).__setitem__("cross_level_storage", "none"))


@mutation("pyramid", "L5_MULTISCALE_LINKS_TOKEN")
def multiscale_token_missing(s: Path) -> None:
    edit_attrs(s, "", lambda a: zv_block(a).__setitem__("format_capabilities", ["preserved_object_ids"]))


@mutation("pyramid", "L5_CROSS_LEVEL_TARGET")
def family_targets_missing_level(s: Path) -> None:
    shutil.copytree(s / "1/links/+1", s / "2/links/+1")


# ---------------------------------------------------------------------------
# the tests
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("base", ["points", "points_ids", "points_raw", "points_fattr", "graph",
                                  "graph_directed_duplicate", "pyramid", "pyramid_consolidated", "points_pyramid"])
def test_untouched_store_is_clean(base_stores: dict[str, Path], base: str) -> None:
    assert_clean(base_stores[base])


@pytest.mark.parametrize("m", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_defect_is_reported_at_its_level(m: Mutation, copy_store: Callable[[str], Path]) -> None:
    store = copy_store(m.base)
    m.apply(store)
    result = validate(str(store), 5, **dict(m.kw))
    rule = CATALOGUE[m.code]
    hits = [f for f in result.findings if f.code == m.code]
    assert hits, f"{m.name}: expected {m.code}\n{result.summary()}"
    assert all(f.level == rule.level for f in hits)
    assert all(f.line().startswith(f"{rule.level}: ") and "\n" not in f.line() for f in hits)
    if rule.severity == "error":
        assert not result.ok
        assert any(line in result.errors for line in (f.line() for f in hits))
    else:
        assert any(line in result.warnings for line in (f.line() for f in hits))
    crashed = [f for f in result.findings if f.code.endswith("_CHECK_CRASHED")]
    assert not crashed, result.summary()


def test_enough_distinct_defects() -> None:
    names = [m.name for m in MUTATIONS]
    assert len(set(names)) == len(names)
    assert len(names) >= 60
    covered = {m.code for m in MUTATIONS}
    untested = {c for c in CATALOGUE if c not in covered and not c.endswith("_CHECK_CRASHED")} - {"L1_STORE_EMPTY"}
    assert not untested, untested
    assert len({m.code for m in MUTATIONS if m.ref_misses}) >= 20


def test_allowed_layout_is_a_warning(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("points_ids")
    edit_attrs(store, "0/object_index", lambda a: a.__setitem__("layout", "vlen_manifests_v2"))
    # v2 needs its id table: add one through raw files (ids 0..n-1, the same as v1's row = id)
    rows = read_json(store, "0/object_index/manifests")["shape"][0]
    (store / "0/object_index/object_ids").mkdir()
    write_json(store, "0/object_index/object_ids", {
        "shape": [rows], "data_type": "int64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [rows]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {}, "zarr_format": 3, "node_type": "array"})
    result = validate(str(store), 5, allow_layouts=("vlen_manifests_v2",))
    assert result.ok, result.summary()
    assert [f.code for f in result.findings] == ["L2_OBJECT_INDEX_LAYOUT"]
    assert result.findings[0].severity == "warning"
    strict = validate(str(store), 5)
    assert "L2_OBJECT_INDEX_LAYOUT" in {f.code for f in strict.findings if f.severity == "error"}


def test_zv_version_compared_numerically(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("points")
    root_zv(lambda z: z.__setitem__("zv_version", "0.10.0"))(store)
    assert_clean(store)


def test_nan_in_attributes_is_valid(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("points")
    raw_text_edit(store, "0/vertices", '"attributes": {', '"attributes": {"note": NaN, "big": Infinity, ')
    assert_clean(store)


def test_coarse_bin_larger_than_chunk_is_valid(base_stores: dict[str, Path]) -> None:
    doc = read_json(base_stores["pyramid"], "")
    translation = doc["attributes"]["multiscales"][0]["datasets"][2]["coordinateTransformations"][1]["translation"]
    assert 2 * translation[0] > doc["attributes"]["zarr_vectors"]["chunk_shape"][0]
    assert_clean(base_stores["pyramid"])


def test_empty_link_fragments_and_intra_array_are_valid(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("graph")
    # drop every intra record: the all-zero array and link_fragments become empty arrays
    for arr in ("0/links/0/0.0.0", "0/link_fragments", "0/link_attributes/weight/0/0.0.0"):
        shutil.rmtree(store / arr / "c")
        set_nonempty(store, arr, lambda keys: [])
    doc = read_json(store, "0/links/0")["attributes"]
    result = validate(str(store), 5)
    # only the family counts can disagree now (they counted the removed records)
    assert {f.code for f in result.findings} <= {"L3_FAMILY_PHYSICAL_COUNT", "L3_FAMILY_NUM_LINKS"}, result.summary()
    assert doc["num_links"] > 0
