"""Defects of structure and metadata (validator levels 1 and 2), one raw-file edit each."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.conformance.defect import registry
from zarr_vectors.conformance.rawfiles import (
    ZSTD,
    cell_file,
    cross_segment,
    edit_attrs,
    edit_json,
    first_chunk,
    raw_text_edit,
    read_json,
    set_nonempty,
    write_json,
)
from zarr_vectors.encoding import frame_items, unframe_items
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.codecs import ZSTD_DEFAULT
from zarr_vectors.store.tables import write_table

DEFECTS, defect = registry()
P, PI, G = "points-basic", "points-ids", "graph-undirected-canonical"
PY = "points-pyramid-explicit"
PC = "pyramid-consolidated"


# -- level 1 --------------------------------------------------------------------------
@defect(P, "L1_BAD_JSON")
def truncated_array_json(s: Path) -> None:
    """0/vertices/zarr.json loses its last 20 bytes"""
    f = s / "0/vertices/zarr.json"
    f.write_bytes(f.read_bytes()[:-20])


@defect(P, "L1_STORE_EMPTY")
def no_root_json(s: Path) -> None:
    """the root zarr.json is deleted (every other file remains)"""
    (s / "zarr.json").unlink()


@defect(P, "L1_JSON_BOM")
def bom_in_array_json(s: Path) -> None:
    """0/vertex_fragments/zarr.json starts with a UTF-8 byte order mark"""
    f = s / "0/vertex_fragments/zarr.json"
    f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())


@defect(P, "L1_JSON_DUPLICATE_KEY")
def duplicate_key(s: Path) -> None:
    """0/vertices/zarr.json spells zarr_format twice"""
    raw_text_edit(s, "0/vertices", '"zarr_format": 3', '"zarr_format": 3, "zarr_format": 3')


@defect(P, "L1_JSON_NONFINITE")
def nan_fill_value(s: Path) -> None:
    """an attribute array's fill_value is the bare token NaN"""
    raw_text_edit(s, "0/vertex_attributes/intensity", '"fill_value": ""', '"fill_value": NaN')


@defect(P, "L1_JSON_TOO_DEEP")
def nesting_300(s: Path) -> None:
    """0/vertices/zarr.json nests 300 arrays"""
    raw_text_edit(s, "0/vertices", '"attributes": {', '"attributes": {"deep": ' + "[" * 300 + "]" * 300 + ", ")


@defect(P, "L1_JSON_ENVELOPE")
def zarr_format_2(s: Path) -> None:
    """0/vertices says zarr_format 2"""
    edit_json(s, "0/vertices", lambda d: d.__setitem__("zarr_format", 2))


@defect(P, "L1_JSON_EXTENSION_NAME")
def bad_codec_name(s: Path) -> None:
    """the zstd codec of 0/vertices is named 'Zstd!'"""
    edit_json(s, "0/vertices", lambda d: d["codecs"][1].__setitem__("name", "Zstd!"))


@defect(P, "L1_JSON_MUST_UNDERSTAND")
def must_understand_false(s: Path) -> None:
    """0/vertices' chunk_key_encoding has must_understand: false"""
    edit_json(s, "0/vertices", lambda d: d["chunk_key_encoding"].__setitem__("must_understand", False))


@defect(P, "L1_JSON_CHUNK_LENGTH")
def chunk_length_zero(s: Path) -> None:
    """0/vertices' regular grid has a chunk length 0"""
    edit_json(s, "0/vertices", lambda d: d["chunk_grid"]["configuration"].__setitem__("chunk_shape", [0, 1, 1]))


@defect(P, "L1_JSON_CONSOLIDATED")
def consolidated_null(s: Path) -> None:
    """the root's consolidated_metadata is null"""
    edit_json(s, "", lambda d: d.__setitem__("consolidated_metadata", None))


@defect(PC, "L1_CONSOLIDATED_STALE")
def node_edited_after_consolidating(s: Path) -> None:
    """1/vertices gains an attribute after the consolidated copy was taken"""
    edit_attrs(s, "1/vertices", lambda a: a.__setitem__("note", "edited after the copy was taken"))


@defect(PC, "L1_CONSOLIDATED_STALE")
def consolidated_copy_leaves_out_a_node(s: Path) -> None:
    """the consolidated copy leaves out 1/vertex_fragments"""
    edit_json(s, "", lambda d: d["consolidated_metadata"]["metadata"].pop("1/vertex_fragments"))


@defect(PC, "L1_CONSOLIDATED_STALE")
def consolidated_copy_names_a_missing_node(s: Path) -> None:
    """the consolidated copy names a level 3 that is not stored"""
    ghost = {"attributes": {}, "zarr_format": 3, "node_type": "group"}
    edit_json(s, "", lambda d: d["consolidated_metadata"]["metadata"].__setitem__("3", ghost))


@defect(PC, "L1_CONSOLIDATED_FORM")
def consolidated_kind_not_inline(s: Path) -> None:
    """consolidated_metadata.kind is 'remote'"""
    edit_json(s, "", lambda d: d["consolidated_metadata"].__setitem__("kind", "remote"))


@defect(P, "L1_JSON_DIMENSION_NAMES")
def dimension_names_short(s: Path) -> None:
    """0/vertices has one dimension name for three dimensions"""
    edit_json(s, "0/vertices", lambda d: d.__setitem__("dimension_names", ["x"]))


@defect(P, "L1_MISSING_NODE")
def implicit_group(s: Path) -> None:
    """0/vertex_attributes/zarr.json is deleted (its arrays remain)"""
    (s / "0/vertex_attributes/zarr.json").unlink()


@defect(P, "L1_STRAY_OBJECT")
def stray_file(s: Path) -> None:
    """a file 0/notes.txt"""
    (s / "0/notes.txt").write_text("hello")


@defect(P, "L1_STORAGE_OBJECT")
def cell_path_is_directory(s: Path) -> None:
    """the first vertex cell is replaced by an empty directory"""
    cell = cell_file(s, "0/vertices", first_chunk(s, "0/vertices"))
    cell.unlink()
    cell.mkdir()
    (cell / ".keep").write_bytes(b"")  # git keeps no empty directory


@defect(P, "L1_ROOT_NOT_GROUP")
def root_is_array(s: Path) -> None:
    """the root zarr.json is an array document (with the root's attributes)"""
    doc = read_json(s, "0/vertices")
    doc["attributes"] = read_json(s, "")["attributes"]
    write_json(s, "", doc)


@defect(P, "L1_MISSING_ROOT_ZV")
def no_zv_block(s: Path) -> None:
    """the root has no attributes.zarr_vectors"""
    edit_attrs(s, "", lambda a: a.pop("zarr_vectors"))


@defect(P, "L1_NO_OME")
def no_ome(s: Path) -> None:
    """the root has no 'ome' block"""
    edit_attrs(s, "", lambda a: a.pop("ome"))


@defect(P, "L1_NO_LEVELS")
def no_level(s: Path) -> None:
    """level 0 is renamed 'parametric'"""
    shutil.move(s / "0", s / "parametric")


@defect(P, "L1_BAD_LEVEL_NAME")
def level_with_leading_zero(s: Path) -> None:
    """a copy of level 0 named '01'"""
    shutil.copytree(s / "0", s / "01")


@defect(P, "L1_UNKNOWN_ROOT_CHILD")
def unknown_root_child(s: Path) -> None:
    """an empty group 'extras' at the root"""
    (s / "extras").mkdir()
    write_json(s, "extras", {"zarr_format": 3, "node_type": "group", "attributes": {}})


@defect(P, "L1_LEVEL_NOT_GROUP")
def level_is_array(s: Path) -> None:
    """a level '1' whose zarr.json is an array document"""
    (s / "1").mkdir()
    write_json(s, "1", read_json(s, "0/vertices"))


@defect(P, "L1_MISSING_VERTICES")
def no_vertices(s: Path) -> None:
    """0/vertices is deleted"""
    shutil.rmtree(s / "0/vertices")


@defect(P, "L1_MISSING_VERTEX_FRAGMENTS")
def no_vertex_fragments(s: Path) -> None:
    """0/vertex_fragments is deleted"""
    shutil.rmtree(s / "0/vertex_fragments")


@defect(P, "L1_ZV_ARRAY_MISSING")
def attribute_without_discriminator(s: Path) -> None:
    """an attribute array has no zv_array"""
    edit_attrs(s, "0/vertex_attributes/intensity", lambda a: a.pop("zv_array"))


@defect(P, "L1_ZV_ARRAY_UNKNOWN")
def unknown_discriminator(s: Path) -> None:
    """0/vertices says zv_array 'vertices_v2'"""
    edit_attrs(s, "0/vertices", lambda a: a.__setitem__("zv_array", "vertices_v2"))


@defect(P, "L1_ZV_ARRAY_WRONG_PATH")
def discriminator_for_another_path(s: Path) -> None:
    """0/vertex_fragments says zv_array 'attribute'"""
    edit_attrs(s, "0/vertex_fragments", lambda a: a.__setitem__("zv_array", "attribute"))


@defect(P, "L1_UNEXPECTED_NODE")
def unexpected_group(s: Path) -> None:
    """an empty group 0/extra"""
    (s / "0/extra").mkdir()
    write_json(s, "0/extra", {"zarr_format": 3, "node_type": "group", "attributes": {}})


@defect(P, "L1_NODE_TYPE")
def vertices_as_group(s: Path) -> None:
    """0/vertices/zarr.json is a group document"""
    write_json(s, "0/vertices", {"zarr_format": 3, "node_type": "group", "attributes": {"zv_array": "vertices"}})


@defect(G, "L1_BAD_DELTA_NAME")
def non_canonical_delta(s: Path) -> None:
    """links/0 is spelled links/+0"""
    shutil.move(s / "0/links/0", s / "0/links/+0")


@defect(G, "L1_BAD_OFFSETS_NAME")
def offsets_wrong_arity(s: Path) -> None:
    """a links segment name loses its last offset"""
    seg = cross_segment(s)
    shutil.move(s / "0/links/0" / seg, s / "0/links/0" / seg.rsplit(".", 1)[0])


@defect(G, "L1_BAD_OFFSETS_NAME")
def attribute_offsets_non_canonical(s: Path) -> None:
    """a link-attribute segment spells +1 as +01"""
    fam = "0/link_attributes/weight/0"
    seg = next(x for x in sorted(p.name for p in (s / fam).iterdir() if p.is_dir()) if "+1" in x)
    shutil.move(s / fam / seg, s / fam / seg.replace("+1", "+01", 1))


@defect(P, "L1_GRID_RANK")
def attribute_rank_two(s: Path) -> None:
    """an attribute array of a 3-D store has two grid dimensions"""
    edit_json(s, "0/vertex_attributes/rgb", lambda d: (d.__setitem__("shape", d["shape"][:2]),
                                                       d["chunk_grid"]["configuration"].__setitem__("chunk_shape", [1, 1]),
                                                       d["attributes"].__setitem__("chunk_grid_origin", [-1, -1])))


@defect(P, "L1_BAD_ORIGIN")
def origin_two_entries(s: Path) -> None:
    """0/vertices' chunk_grid_origin has two entries"""
    edit_attrs(s, "0/vertices", lambda a: a.__setitem__("chunk_grid_origin", [-1, -1]))


def _rewrite_manifests(s: Path, fn: Callable[[list[bytes]], list[bytes]]) -> None:
    f = s / "0/object_index/manifests/c/0"
    items = unframe_items(ZSTD.decode(f.read_bytes()))
    f.write_bytes(bytes(ZSTD.encode(frame_items(fn(items)))))


@defect(PI, "L1_MANIFEST_UNDECODABLE")
def manifest_trailing_byte(s: Path) -> None:
    """object 0's manifest row gains a trailing byte"""
    _rewrite_manifests(s, lambda items: [items[0] + b"\x00", *items[1:]])


@defect(PI, "L1_MANIFEST_UNDECODABLE")
def manifest_unknown_mode(s: Path) -> None:
    """a manifest block's mode byte is 7"""
    def bump(items: list[bytes]) -> list[bytes]:
        i = next(k for k, row in enumerate(items) if row)
        row = bytearray(items[i])
        row[4 + 24] = 7  # mode byte of block 0 (D = 3)
        return [*items[:i], bytes(row), *items[i + 1:]]

    _rewrite_manifests(s, bump)


@defect(PI, "L1_MANIFEST_UNDECODABLE")
def manifest_chunk_missing(s: Path) -> None:
    """the manifests' shape declares a second chunk that is not stored"""
    edit_json(s, "0/object_index/manifests", lambda d: d["shape"].__setitem__(0, 2 * d["shape"][0]))


@defect(PI, "L1_RESOURCE_LIMIT")
def manifests_shape_huge(s: Path) -> None:
    """the manifests declare 10**12 rows"""
    edit_json(s, "0/object_index/manifests", lambda d: d["shape"].__setitem__(0, 10**12))


# -- level 2 --------------------------------------------------------------------------
def _root(base: str, code: str, name: str, text: str, fn: Callable[[dict[str, Any]], object]) -> None:
    defect(base, code, name=name, text=text)(lambda s: edit_attrs(s, "", lambda a: fn(a["zarr_vectors"])))


def _set(key: str, value: object) -> Callable[[dict[str, Any]], object]:
    return lambda z: z.__setitem__(key, value)


for _name, _code, _key, _value in [
    ("zv_version_old", "L2_ZV_VERSION", "zv_version", "0.8.1"),
    ("zv_version_major_1", "L2_ZV_VERSION", "zv_version", "1.0.0"),
    ("zv_version_garbage", "L2_ZV_VERSION", "zv_version", "latest"),
    ("chunk_shape_two_entries", "L2_CHUNK_SHAPE", "chunk_shape", [50.0, 50.0]),
    ("chunk_shape_negative", "L2_CHUNK_SHAPE", "chunk_shape", [50.0, -50.0, 50.0]),
    ("bounds_inverted", "L2_BOUNDS", "bounds", [[10, 0, 0], [0, 1, 1]]),
    ("links_convention_unknown", "L2_LINKS_CONVENTION", "links_convention", "sequential"),
    ("object_index_convention_unknown", "L2_OBJECT_INDEX_CONVENTION", "object_index_convention", "sparse"),
    ("cross_chunk_strategy_unknown", "L2_CROSS_CHUNK_STRATEGY", "cross_chunk_strategy", "x"),
    ("cross_level_storage_unknown", "L2_CROSS_LEVEL_STORAGE", "cross_level_storage", "both"),
    ("cross_level_depth_minus_two", "L2_CROSS_LEVEL_DEPTH", "cross_level_depth", -2),
    ("geometry_types_empty", "L2_GEOMETRY_TYPES", "geometry_types", []),
    ("geometry_type_custom", "L2_CUSTOM_GEOMETRY", "geometry_types", ["point_cloud", "hologram"]),
    ("capabilities_not_a_list", "L2_CAPABILITIES", "format_capabilities", "fragment_index"),
    ("capability_unknown", "L2_UNKNOWN_CAPABILITY", "format_capabilities", ["teleport"]),
    ("base_bin_not_dividing", "L2_BASE_BIN_SHAPE", "base_bin_shape", [30.0] * 3),
]:
    _root(P, _code, _name, f"root zarr_vectors.{_key} = {_value!r}", _set(_key, _value))
_root(P, "L2_ROOT_REQUIRED", "no_bounds", "root zarr_vectors.bounds removed", lambda z: z.pop("bounds"))


def _level(name: str, code: str, key: str, value: object) -> None:
    defect(P, code, name=name, text=f"level 0's zarr_vectors_level.{key} = {value!r}")(
        lambda s: edit_attrs(s, "0", lambda a: a["zarr_vectors_level"].__setitem__(key, value)))


_level("level_number_wrong", "L2_LEVEL_NUMBER", "level", 3)
_level("vertex_count_negative", "L2_VERTEX_COUNT", "vertex_count", -5)
_level("arrays_present_string", "L2_ARRAYS_PRESENT", "arrays_present", "vertices")
_level("sparsity_zero", "L2_OBJECT_SPARSITY", "object_sparsity", 0)
_level("level_zero_has_parent", "L2_PARENT_LEVEL", "parent_level", 0)
_level("level_chunk_shape_zero", "L2_LEVEL_CHUNK_SHAPE", "chunk_shape", [0.0, 50.0, 50.0])
_level("fragments_tile_a_string", "L2_LEVEL_FLAGS", "fragments_tile", "yes")


@defect(P, "L2_SID_NDIM")
def no_axes(s: Path) -> None:
    """multiscales[0].axes is empty"""
    edit_attrs(s, "", lambda a: a["multiscales"][0].__setitem__("axes", []))


@defect(P, "L2_HEADER_MEMBERS")
def trk_header_of_no_grid(s: Path) -> None:
    """a headers/trk group whose dimensions are 0, as the reference's TRK ingest copies a file's"""
    for node, attrs in (("headers", {}), ("headers/trk", {
            "format_name": "trk", "vox_to_ras": [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0,
                                                 0.0, 0.0, 0.0, 1.0],
            "dimensions": [0, 0, 0], "voxel_size": [1.0, 1.0, 1.0], "voxel_order": "RAS"})):
        (s / node).mkdir()
        write_json(s, node, {"zarr_format": 3, "node_type": "group", "attributes": attrs})


@defect(P, "L2_MULTISCALES_DATASETS")
def dataset_without_translation(s: Path) -> None:
    """level 0's dataset has no translation"""
    edit_attrs(s, "", lambda a: a["multiscales"][0]["datasets"][0]["coordinateTransformations"].pop())


@defect(PI, "L2_OBJECT_INDEX_LAYOUT")
def layout_v3(s: Path) -> None:
    """object_index layout 'vlen_manifests_v3'"""
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("layout", "vlen_manifests_v3"))


@defect(PI, "L2_OBJECT_INDEX_LAYOUT")
def layout_v2_not_allowed(s: Path) -> None:
    """object_index layout 'vlen_manifests_v2' (not allowed by default, D1)"""
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("layout", "vlen_manifests_v2"))


@defect(PI, "L3_OBJECT_IDS", allow_layouts=("vlen_manifests_v2",))
def object_ids_repeated(s: Path) -> None:
    """layout v2 (allowed) whose object_ids name object 0 twice: two manifest rows, one object"""
    n = read_json(s, "0/object_index")["attributes"]["num_objects"]
    ids = np.arange(n, dtype=np.int64)
    ids[-1] = 0
    write_table(Storage(str(s)), "0/object_index/object_ids", ids, fill_value=0, attributes={},
                compressor=ZSTD_DEFAULT, chunk_rows=n)
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("layout", "vlen_manifests_v2"))


@defect(PI, "L2_OBJECT_INDEX_COUNTS")
def num_present_above_num_objects(s: Path) -> None:
    """object_index num_present = num_objects + 1"""
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("num_present", a["num_objects"] + 1))


@defect(PI, "L2_OBJECT_INDEX_COUNTS")
def num_objects_not_rows(s: Path) -> None:
    """object_index num_objects is 3 more than the manifest rows"""
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("num_objects", a["num_objects"] + 3))


@defect(P, "L2_LEVEL_BLOCK")
def no_level_block(s: Path) -> None:
    """level 0 has no zarr_vectors_level"""
    edit_attrs(s, "0", lambda a: a.pop("zarr_vectors_level"))


def _family(code: str, key: str, value: object) -> None:
    defect(G, code, name=f"family_{key}_{value}", text=f"links/0 {key} = {value!r}")(
        lambda s: edit_attrs(s, "0/links/0", lambda a: a.__setitem__(key, value)))


_family("L2_FAMILY_LINK_WIDTH", "link_width", 0)
_family("L2_FAMILY_DIRECTED", "directed", "no")
_family("L2_FAMILY_STORE", "store", "both")
_family("L2_FAMILY_SID_NDIM", "sid_ndim", 2)
_family("L2_FAMILY_LEVEL_DELTA", "level_delta", 1)


@defect(G, "L2_FAMILY_COUNTS")
def attribute_family_num_links_a_string(s: Path) -> None:
    """link_attributes/weight/0 num_links = 'many'"""
    edit_attrs(s, "0/link_attributes/weight/0", lambda a: a.__setitem__("num_links", "many"))


@defect(G, "L2_LINKS_ARRAY_AGREES")
def offsets_field_true_for_one(s: Path) -> None:
    """a links array's offsets spell 1 as true"""
    seg = next(x for x in sorted(p.name for p in (s / "0/links/0").iterdir() if p.is_dir()) if "+1" in x)
    edit_attrs(s, f"0/links/0/{seg}", lambda a: a["offsets"][0].__setitem__(
        next(i for i, v in enumerate(a["offsets"][0]) if v == 1), True))


@defect(G, "L2_LINKS_ARRAY_AGREES")
def offsets_field_disagrees(s: Path) -> None:
    """a links array's offsets field disagrees with its path"""
    edit_attrs(s, f"0/links/0/{cross_segment(s)}", lambda a: a.__setitem__("offsets", [[0, 0, 7]]))


@defect(G, "L2_LINKS_ARRAY_AGREES")
def array_link_width_disagrees(s: Path) -> None:
    """the intra-chunk links array says link_width 3"""
    edit_attrs(s, "0/links/0/0.0.0", lambda a: a.__setitem__("link_width", 3))


@defect(P, "L2_ARRAY_DTYPE")
def vertices_int_dtype(s: Path) -> None:
    """0/vertices says dtype int32"""
    edit_attrs(s, "0/vertices", lambda a: a.__setitem__("dtype", "int32"))


@defect(P, "L2_CODECS")
def unsupported_codec(s: Path) -> None:
    """0/vertices declares an lz4 codec"""
    edit_json(s, "0/vertices", lambda d: d["codecs"].__setitem__(1, {"name": "lz4", "configuration": {}}))


@defect(P, "L1_JSON_FILL_VALUE")
def vlen_fill_value_a_number(s: Path) -> None:
    """0/vertices' fill_value is 1.5"""
    edit_json(s, "0/vertices", lambda d: d.__setitem__("fill_value", 1.5))


@defect(P, "L1_JSON_UNKNOWN_KEY")
def zstd_bogus_key(s: Path) -> None:
    """the zstd configuration has a key 'bogus'"""
    edit_json(s, "0/vertices", lambda d: d["codecs"][1]["configuration"].__setitem__("bogus", 1))


@defect(P, "L1_JSON_CODEC_CONFIG")
def zstd_level_a_string(s: Path) -> None:
    """the zstd level is 'high'"""
    edit_json(s, "0/vertices", lambda d: d["codecs"][1]["configuration"].__setitem__("level", "high"))


@defect(P, "L2_DATA_TYPE")
def vertices_data_type_not_vlen(s: Path) -> None:
    """0/vertices' data_type is int32"""
    edit_json(s, "0/vertices", lambda d: d.update(data_type="int32", fill_value=0))


@defect(P, "L2_FILL_VALUE")
def vlen_fill_value_not_empty(s: Path) -> None:
    """0/vertices' fill_value is 'AAAA'"""
    edit_json(s, "0/vertices", lambda d: d.__setitem__("fill_value", "AAAA"))


@defect(P, "L2_CHUNK_KEY_ENCODING")
def chunk_keys_dotted(s: Path) -> None:
    """0/vertices' chunk keys use the separator '.'"""
    edit_json(s, "0/vertices", lambda d: d.__setitem__("chunk_key_encoding",
                                                       {"name": "default", "configuration": {"separator": "."}}))


@defect(PI, "L2_CHUNK_GRID")
def object_attribute_grid_not_regular(s: Path) -> None:
    """an object attribute's chunk grid is 'rectangular'"""
    edit_json(s, "0/object_attributes/weight", lambda d: d["chunk_grid"].__setitem__("name", "rectangular"))


@defect(PI, "L2_OBJECT_ATTRIBUTE_ROWS")
def object_attribute_rows_not_objects(s: Path) -> None:
    """an object attribute has one row fewer than objects"""
    edit_json(s, "0/object_attributes/weight", lambda d: (d.__setitem__("shape", [d["shape"][0] - 1]),
                                                          d["attributes"].__setitem__("shape", [d["shape"][0]])))


@defect(P, "L2_NONEMPTY_CHUNKS")
def nonempty_key_non_canonical(s: Path) -> None:
    """a nonempty_chunks key spelled with a leading zero"""
    set_nonempty(s, "0/vertices", lambda keys: ["-01" + keys[0][2:] if keys[0].startswith("-1") else "0" + keys[0],
                                                *keys[1:]])


@defect(P, "L2_NONEMPTY_CHUNKS")
def nonempty_key_outside_grid(s: Path) -> None:
    """nonempty_chunks names 9.9.9, outside the grid"""
    set_nonempty(s, "0/vertices", lambda keys: sorted([*keys, "9.9.9"]))


@defect(P, "L2_NONEMPTY_UNSORTED")
def nonempty_unsorted(s: Path) -> None:
    """nonempty_chunks reversed"""
    set_nonempty(s, "0/vertices", lambda keys: keys[::-1])


@defect(PY, "L2_ATTRIBUTE_AGGREGATION")
def aggregation_unknown_reduction(s: Path) -> None:
    """level 1's attribute_aggregation names a reduction the format does not define (median)"""
    edit_attrs(s, "1", lambda a: a["zarr_vectors_level"]["attribute_aggregation"].__setitem__("intensity", "median"))
