"""Defects of content (validator levels 3 to 5), one raw-file edit each."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import numpy as np

from zarr_vectors.conformance.defect import registry
from zarr_vectors.conformance.mutations_meta import _rewrite_manifests
from zarr_vectors.conformance.rawfiles import (
    cell_file,
    cross_segment,
    edit_attrs,
    first_chunk,
    nonempty,
    read_json,
    read_payload,
    remove_cell,
    segments,
    set_nonempty,
    write_payload,
)
from zarr_vectors.encoding import FragmentIndex, decode_ragged_blob, encode_ragged_blob
from zarr_vectors.store.groups import open_store

DEFECTS, defect = registry()
P, PI, G = "points-basic", "points-ids", "graph-undirected-canonical"
GDD, PY = "graph-directed-duplicate", "points-pyramid-explicit"


def _rewrite_fragments(s: Path, array: str, fn: Callable[[FragmentIndex], FragmentIndex | None]) -> None:
    """Rewrite the first cell of ``array`` that ``fn`` applies to (it returns None where it does not)."""
    for c in nonempty(s, array):
        index = fn(FragmentIndex.decode(read_payload(s, array, c)))
        if index is not None:
            write_payload(s, array, c, index.encode())
            return
    raise ValueError(f"no cell of {array} to apply the defect to")


def _grow_last(index: FragmentIndex) -> FragmentIndex:
    counts = index.range_counts.copy()
    counts[-1] += 1
    return FragmentIndex.from_ranges(index.range_starts, counts)


def _link_attributes(s: Path) -> list[str]:
    return sorted(p.name for p in (s / "0/link_attributes").iterdir() if p.is_dir())


# -- level 3 --------------------------------------------------------------------------
@defect(P, "L3_NONEMPTY_MISSING")
def nonempty_lists_absent_cell(s: Path) -> None:
    """an attribute cell listed in nonempty_chunks is deleted"""
    remove_cell(s, "0/vertex_attributes/intensity", first_chunk(s, "0/vertices"))


@defect(P, "L3_NONEMPTY_EXTRA")
def cell_not_listed(s: Path) -> None:
    """an attribute's nonempty_chunks loses its first key (the cell stays)"""
    set_nonempty(s, "0/vertex_attributes/rgb", lambda keys: keys[1:])


@defect(P, "L3_CELL_UNDECODABLE")
def garbage_cell(s: Path) -> None:
    """the first vertex cell holds bytes that are not zstd"""
    cell_file(s, "0/vertices", first_chunk(s, "0/vertices")).write_bytes(b"not zstd at all")


@defect("points-sharded", "L3_SHARD_CORRUPT")
def shard_index_crc_mismatch(s: Path) -> None:
    """one bit of a shard index is flipped: its CRC32C no longer matches"""
    doc = read_json(s, "0/vertices")
    shards = doc["chunk_grid"]["configuration"]["chunk_shape"]
    origin = doc["attributes"].get("chunk_grid_origin", [0] * len(shards))
    chunk = first_chunk(s, "0/vertices")
    f = s / "0/vertices/c" / Path(*[str((c - o) // n) for c, o, n in zip(chunk, origin, shards)])
    raw = bytearray(f.read_bytes())
    raw[-5] ^= 0x01
    f.write_bytes(bytes(raw))


@defect(P, "L3_VERTEX_ROWS")
def vertex_cell_partial_row(s: Path) -> None:
    """the first vertex cell gains 4 bytes (a partial row)"""
    c = first_chunk(s, "0/vertices")
    write_payload(s, "0/vertices", c, read_payload(s, "0/vertices", c) + b"\0\0\0\0")


@defect(P, "L3_FRAGMENT_INDEX_UNDECODABLE")
def fragment_bad_magic(s: Path) -> None:
    """a FragmentIndex's magic is 'XXXX'"""
    c = first_chunk(s, "0/vertex_fragments")
    write_payload(s, "0/vertex_fragments", c, b"XXXX" + read_payload(s, "0/vertex_fragments", c)[4:])


def _drop_first_cell(s: Path, array: str) -> None:
    """Delete an array's first listed cell and unlist it (the presence list stays true)."""
    remove_cell(s, array, first_chunk(s, array))
    set_nonempty(s, array, lambda keys: keys[1:])


@defect(P, "L3_FRAGMENT_INDEX_MISSING")
def fragment_cell_removed(s: Path) -> None:
    """the first vertex_fragments cell is deleted and unlisted"""
    _drop_first_cell(s, "0/vertex_fragments")


@defect(P, "L3_FRAGMENT_OUT_OF_RANGE")
def fragment_range_past_end(s: Path) -> None:
    """the last fragment of a cell runs one row past its end"""
    _rewrite_fragments(s, "0/vertex_fragments", _grow_last)


@defect(P, "L3_FRAGMENTS_TILE")
def fragments_out_of_order(s: Path) -> None:
    """two non-empty fragments of a cell are swapped"""
    def swap(index: FragmentIndex) -> FragmentIndex | None:
        frags = [(int(a), int(b)) for a, b in zip(index.range_starts, index.range_counts)]
        i = next((k for k in range(len(frags) - 1) if frags[k][1] and frags[k + 1][1]), None)
        if i is None:
            return None
        frags[i], frags[i + 1] = frags[i + 1], frags[i]
        return FragmentIndex.from_fragments(frags)

    _rewrite_fragments(s, "0/vertex_fragments", swap)


@defect(P, "L3_TOO_MANY_FRAGMENTS")
def one_fragment_too_many(s: Path) -> None:
    """a cell gains an empty fragment past its bins"""
    def extra(index: FragmentIndex) -> FragmentIndex:
        total = int(index.range_counts.sum())
        return FragmentIndex.from_ranges(np.r_[index.range_starts, total], np.r_[index.range_counts, 0])

    _rewrite_fragments(s, "0/vertex_fragments", extra)


@defect(P, "L3_NONFINITE_VERTEX")
def nan_vertex(s: Path) -> None:
    """one vertex coordinate is NaN"""
    c = first_chunk(s, "0/vertices")
    rows = np.frombuffer(read_payload(s, "0/vertices", c), "<f4").copy()
    rows[1] = np.nan
    write_payload(s, "0/vertices", c, rows.tobytes())


@defect(P, "L3_VERTEX_COUNT")
def vertex_count_off_by_one(s: Path) -> None:
    """level 0's vertex_count is one too many"""
    edit_attrs(s, "0", lambda a: a["zarr_vectors_level"].__setitem__("vertex_count",
                                                                      a["zarr_vectors_level"]["vertex_count"] + 1))


@defect(P, "L3_ARRAYS_PRESENT")
def arrays_present_over_reports(s: Path) -> None:
    """arrays_present names object_index, which is absent"""
    edit_attrs(s, "0", lambda a: a["zarr_vectors_level"]["arrays_present"].append("object_index"))


@defect(P, "L3_ATTRIBUTE_ROWS")
def attribute_cell_short(s: Path) -> None:
    """an rgb attribute cell loses its last row"""
    c = first_chunk(s, "0/vertex_attributes/rgb")
    write_payload(s, "0/vertex_attributes/rgb", c, read_payload(s, "0/vertex_attributes/rgb", c)[:-3])


@defect("points-fragment-attributes", "L3_FRAGMENT_ATTRIBUTE_ROWS")
def fragment_attribute_short(s: Path) -> None:
    """a fragment-attribute cell loses its last row"""
    a = "0/fragment_attributes/bin_id"
    c = first_chunk(s, a)
    write_payload(s, a, c, read_payload(s, a, c)[:-4])


def _blocks(row: bytes) -> int:
    return int(np.frombuffer(row[:4], "<u4")[0])


def _manifest_row(chunk: tuple[int, ...], fragment: int) -> bytes:
    return (np.array([1], "<u4").tobytes() + np.array(chunk, "<i8").tobytes() + b"\x00"
            + np.array([fragment], "<i8").tobytes())


def _with_block(row: bytes, chunk: tuple[int, ...], fragment: int) -> bytes:
    """A manifest row with one more mode-0 block (its own blocks kept: every vertex keeps its owner)."""
    return np.array([_blocks(row) + 1], "<u4").tobytes() + row[4:] + _manifest_row(chunk, fragment)[4:]


@defect(PI, "L3_MANIFEST_CHUNK_MISSING")
def manifest_names_missing_chunk(s: Path) -> None:
    """object 0's manifest also names chunk 99.99.99"""
    _rewrite_manifests(s, lambda items: [_with_block(items[0], (99, 99, 99), 0), *items[1:]])


@defect(PI, "L3_MANIFEST_FRAGMENT_OUT_OF_RANGE")
def manifest_names_missing_fragment(s: Path) -> None:
    """object 1's manifest also names fragment 500 of a chunk"""
    c = first_chunk(s, "0/vertices")
    _rewrite_manifests(s, lambda items: [items[0], _with_block(items[1], c, 500), *items[2:]])


@defect(PI, "L3_FRAGMENT_SHARED")
def manifest_names_a_fragment_of_another_object(s: Path) -> None:
    """object 1's manifest also names object 0's first fragment (level 0 has no shared_fragments)"""
    def share(items: list[bytes]) -> list[bytes]:
        block = items[0][4:37]  # object 0's first block (mode 0, D = 3: 8 D + 1 + 8 bytes)
        chunk, fragment = tuple(np.frombuffer(block[:24], "<i8").tolist()), int(np.frombuffer(block[25:], "<i8")[0])
        return [items[0], _with_block(items[1], chunk, fragment), *items[2:]]

    _rewrite_manifests(s, share)


@defect(PI, "L3_VERTEX_OWNERS")
def manifest_drops_a_fragment(s: Path) -> None:
    """the first manifest of several blocks loses its last: that fragment's vertices have no owner"""
    def drop(items: list[bytes]) -> list[bytes]:
        i = next(k for k, row in enumerate(items) if _blocks(row) >= 2)
        row = items[i]
        assert len(row) == 4 + 33 * _blocks(row), "mode-0 blocks only"
        return [*items[:i], np.array([_blocks(row) - 1], "<u4").tobytes() + row[4:-33], *items[i + 1:]]

    _rewrite_manifests(s, drop)


@defect(PI, "L3_OBJECT_NUM_PRESENT")
def num_present_off(s: Path) -> None:
    """object_index num_present is one too few"""
    edit_attrs(s, "0/object_index", lambda a: a.__setitem__("num_present", a["num_present"] - 1))


@defect(G, "L3_OFFSETS_NOT_CANONICAL")
def lex_negative_segment(s: Path) -> None:
    """a canonical family's segment (and its attribute mirrors) negated: lexicographically negative"""
    seg = next(x for x in segments(s) if set(x.split(".")) != {"0"} and "-" not in x)
    neg = ".".join(v.replace("+", "-") for v in seg.split("."))
    for fam in ("0/links/0", *(f"0/link_attributes/{n}/0" for n in _link_attributes(s))):
        shutil.move(s / fam / seg, s / fam / neg)
        edit_attrs(s, f"{fam}/{neg}", lambda a: a.__setitem__("offsets", [[-v for v in o] for o in a["offsets"]]))


@defect(G, "L3_HAS_PERM")
def has_perm_flipped_on_intra(s: Path) -> None:
    """the intra-chunk links array says has_perm true"""
    edit_attrs(s, "0/links/0/0.0.0", lambda a: a.__setitem__("has_perm", True))


@defect(G, "L3_LINK_CELL_BYTES")
def blob_cell_extra_bytes(s: Path) -> None:
    """a cross-chunk link cell gains 3 bytes"""
    a = f"0/links/0/{cross_segment(s)}"
    c = first_chunk(s, a)
    write_payload(s, a, c, read_payload(s, a, c) + b"\1\2\3")


@defect(G, "L3_LINK_ENCODING")
def intra_cell_as_blob(s: Path) -> None:
    """the intra-chunk link cell is re-encoded as a ragged blob"""
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


@defect(G, "L3_PERM_IDX_RANGE")
def perm_idx_too_large(s: Path) -> None:
    """a cross-chunk record's perm_idx is 7 (L = 2: at most 1)"""
    _edit_blob(s, f"0/links/0/{cross_segment(s)}", lambda rows: rows.__setitem__((0, 0), 7))


@defect(G, "L3_LINK_VI_OUT_OF_RANGE")
def vi_past_target_chunk(s: Path) -> None:
    """a cross-chunk record names row 999 of its target chunk"""
    _edit_blob(s, f"0/links/0/{cross_segment(s)}", lambda rows: rows.__setitem__((0, 2), 999))


@defect(G, "L3_LINK_VI_OUT_OF_RANGE")
def intra_vi_negative(s: Path) -> None:
    """an intra-chunk record names row -1"""
    a = "0/links/0/0.0.0"
    c = first_chunk(s, a)
    rows = np.frombuffer(read_payload(s, a, c), "<i8").copy()
    rows[1] = -1
    write_payload(s, a, c, rows.tobytes())


def _refile(s: Path, array: str, src: tuple[int, ...], dst: tuple[int, ...]) -> None:
    """Move one cell of ``array`` from chunk ``src`` to chunk ``dst`` (file and nonempty_chunks)."""
    payload = read_payload(s, array, src)
    remove_cell(s, array, src)
    write_payload(s, array, dst, payload)
    old, new = ".".join(map(str, src)), ".".join(map(str, dst))
    set_nonempty(s, array, lambda keys: sorted([k for k in keys if k != old] + [new]))


@defect(G, "L3_LINK_ENDPOINT_CHUNK_MISSING")
def endpoint_chunk_missing(s: Path) -> None:
    """a cross-chunk link cell (and its attribute cells) re-filed at a chunk whose target chunk holds no vertices"""
    vertex_chunks = set(nonempty(s, "0/vertices"))
    for seg in (x for x in segments(s) if set(x.split(".")) != {"0"}):
        a = f"0/links/0/{seg}"
        offsets = read_json(s, a)["attributes"]["offsets"][0]
        taken = set(nonempty(s, a))
        free = [v for v in sorted(vertex_chunks - taken)
                if tuple(x + o for x, o in zip(v, offsets)) not in vertex_chunks]
        if free:
            c = nonempty(s, a)[0]
            for arr in (a, *(f"0/link_attributes/{n}/0/{seg}" for n in _link_attributes(s))):
                _refile(s, arr, c, free[0])
            return
    raise ValueError("no link cell can be re-filed at a chunk with an empty target")


@defect(G, "L3_LINK_FRAGMENTS_PRESENCE")
def link_fragments_cell_missing(s: Path) -> None:
    """the first link_fragments cell is deleted and unlisted"""
    _drop_first_cell(s, "0/link_fragments")


@defect(G, "L3_LINK_FRAGMENTS_TILE")
def link_fragments_range_too_long(s: Path) -> None:
    """a link_fragments range runs one record past its cell"""
    _rewrite_fragments(s, "0/link_fragments", _grow_last)


@defect(G, "L3_LINK_ATTRIBUTE_MIRROR")
def attribute_segment_missing(s: Path) -> None:
    """a link-attribute segment is deleted"""
    shutil.rmtree(s / "0/link_attributes/weight/0" / cross_segment(s))


@defect(G, "L3_LINK_ATTRIBUTE_MIRROR")
def attribute_cell_missing(s: Path) -> None:
    """a link-attribute cell is deleted and unlisted"""
    _drop_first_cell(s, f"0/link_attributes/weight/0/{cross_segment(s)}")


@defect(G, "L3_LINK_ATTRIBUTE_ROWS")
def attribute_rows_short(s: Path) -> None:
    """an intra-chunk link-attribute cell loses its last row"""
    a = "0/link_attributes/weight/0/0.0.0"
    c = first_chunk(s, a)
    write_payload(s, a, c, read_payload(s, a, c)[:-4])


@defect(G, "L3_FAMILY_PHYSICAL_COUNT")
def physical_count_off(s: Path) -> None:
    """links/0 num_physical_records is one too many"""
    edit_attrs(s, "0/links/0", lambda a: a.__setitem__("num_physical_records", a["num_physical_records"] + 1))


@defect(G, "L3_FAMILY_NUM_LINKS")
def canonical_num_links_off(s: Path) -> None:
    """links/0 num_links is one too few"""
    edit_attrs(s, "0/links/0", lambda a: a.__setitem__("num_links", a["num_links"] - 1))


@defect(GDD, "L3_FAMILY_NUM_LINKS")
def duplicate_copy_missing(s: Path) -> None:
    """a duplicate family loses one record's copy (and its attribute rows); the physical count follows"""
    seg = cross_segment(s)
    a = f"0/links/0/{seg}"
    c = first_chunk(s, a)
    payload = read_payload(s, a, c)
    k = int(np.frombuffer(payload[:8], "<i8")[0])
    rows = np.frombuffer(payload[8 * (1 + k):], "<i8").reshape(-1, 3)
    attrs = [(f"0/link_attributes/{n}/0/{seg}", 4) for n in ("weight", "label")]
    if len(rows) == 1:
        for arr in (a, *(x for x, _ in attrs)):
            remove_cell(s, arr, c)
            set_nonempty(s, arr, lambda keys: keys[1:])
    else:
        write_payload(s, a, c, encode_ragged_blob([rows[1:]]))
        for arr, size in attrs:
            write_payload(s, arr, c, read_payload(s, arr, c)[size:])
    edit_attrs(s, "0/links/0", lambda at: at.__setitem__("num_physical_records", at["num_physical_records"] - 1))


# -- level 4 --------------------------------------------------------------------------
def _kinds(base: str, code: str, name: str, kinds: list[str]) -> None:
    defect(base, code, name=name, text=f"root geometry_types = {kinds!r}")(
        lambda s: edit_attrs(s, "", lambda a: a["zarr_vectors"].__setitem__("geometry_types", kinds)))


_kinds(G, "L4_POINT_CLOUD_LINKS", "point_cloud_with_delta0_links", ["point_cloud"])
_kinds(G, "L4_LINK_WIDTH", "mesh_with_width_two", ["mesh"])
_kinds(G, "L4_GEOMETRY_TYPES", "geometry_types_name_a_contradicted_kind", ["polyline", "graph"])
_kinds(P, "L4_GEOMETRY_TYPES_UNREADABLE", "geometry_types_none_fits", ["graph", "mesh"])


@defect(G, "L4_LINKS_CONVENTION")
def graph_convention_sequential(s: Path) -> None:
    """a graph says links_convention implicit_sequential"""
    edit_attrs(s, "", lambda a: a["zarr_vectors"].__setitem__("links_convention", "implicit_sequential"))


@defect(P, "L4_POINT_OUTSIDE_BIN")
def point_in_wrong_bin(s: Path) -> None:
    """in the last chunk, one vertex is moved one bin over (same chunk)"""
    c = nonempty(s, "0/vertices")[-1]
    index = FragmentIndex.decode(read_payload(s, "0/vertex_fragments", c))
    rows = np.frombuffer(read_payload(s, "0/vertices", c), "<f4").copy().reshape(-1, 3)
    f = next(k for k in range(index.num_fragments) if index.range_counts[k])
    r = int(index.range_starts[f])
    rows[r] += np.float32(26.0) * np.sign(25.0 * (np.asarray(c) * 2 + 1) - rows[r])
    write_payload(s, "0/vertices", c, rows.tobytes())


# -- level 5 --------------------------------------------------------------------------
def _dataset(s: Path, level: int, fn: Callable[[list[dict]], object]) -> None:
    edit_attrs(s, "", lambda a: fn(a["multiscales"][0]["datasets"][level]["coordinateTransformations"]))


def _level2(key: str, value: object) -> Callable[[Path], None]:
    return lambda s: edit_attrs(s, "2", lambda a: a["zarr_vectors_level"].__setitem__(key, value))


defect(PY, "L5_PARENT_CHAIN", name="parent_skips_a_level", text="level 2's parent_level = 0")(
    _level2("parent_level", 0))
defect(PY, "L5_CHUNK_SHAPE_MULTIPLE", name="level_chunk_not_multiple", text="level 2's chunk_shape = [75, 50, 50]")(
    _level2("chunk_shape", [75.0, 50.0, 50.0]))
defect(PY, "L5_VERTEX_COUNT", name="coarse_level_grows", text="level 2's vertex_count = 10**6")(
    _level2("vertex_count", 10**6))


@defect(PY, "L5_LEVELS_CONTIGUOUS")
def level_gap(s: Path) -> None:
    """level 2 is renamed 3 (and its dataset path), leaving a gap"""
    shutil.move(s / "2", s / "3")
    edit_attrs(s, "3", lambda a: a["zarr_vectors_level"].__setitem__("level", 3))
    edit_attrs(s, "", lambda a: a["multiscales"][0]["datasets"][2].__setitem__("path", "3"))
    shutil.rmtree(s / "1/links/+1")


@defect(PY, "L5_BIN_DIVIDES_CHUNK")
def bin_not_dividing_chunk(s: Path) -> None:
    """level 1's bin (NGFF translation) no longer divides its chunk"""
    _dataset(s, 1, lambda t: t[1].__setitem__("translation", [20.0, 25.0, 25.0]))


@defect(PY, "L5_BIN_RATIO")
def bin_ratio_decreases(s: Path) -> None:
    """level 2's scale is below level 1's on one axis"""
    _dataset(s, 2, lambda t: t[0].__setitem__("scale", [1.5, 4.0, 4.0]))


@defect(PY, "L5_BIN_RATIO")
def bin_ratio_below_one(s: Path) -> None:
    """level 1's scale is 0.5 on one axis"""
    _dataset(s, 1, lambda t: t[0].__setitem__("scale", [0.5, 2.0, 2.0]))


@defect(PY, "L5_BIN_VOLUME")
def bin_volume_decreases(s: Path) -> None:
    """level 2's bin volume is below level 1's"""
    _dataset(s, 2, lambda t: t[1].__setitem__("translation", [25.0, 50.0, 5.0]))


@defect(PY, "L5_INHERITED_NUM_OBJECTS")
def inherited_wrong(s: Path) -> None:
    """level 1's inherited_num_objects = 2"""
    edit_attrs(s, "1", lambda a: a["zarr_vectors_level"].__setitem__("inherited_num_objects", 2))


@defect(PY, "L5_CROSS_LEVEL_STORAGE")
def explicit_without_minus_family(s: Path) -> None:
    """explicit storage, but 2/links/-1 is deleted"""
    shutil.rmtree(s / "2/links/-1")


@defect(PY, "L5_CROSS_LEVEL_STORAGE")
def none_with_families(s: Path) -> None:
    """cross_level_storage 'none' over stored cross-level families"""
    edit_attrs(s, "", lambda a: a["zarr_vectors"].__setitem__("cross_level_storage", "none"))


@defect(PY, "L5_CROSS_LEVEL_MIRROR")
def minus_record_names_another_fine_row(s: Path) -> None:
    """a level-1 links/-1 record names its neighbour's fine row: every row still exists and the
    counts hold, but the pair is not one of links/+1 at level 0 turned around"""
    _edit_link_rows(s, "1/links/-1/0.0.0", lambda rows: rows.__setitem__((0, 1), rows[1, 1]))


@defect("points-pyramid-implicit-depth2", "L5_CROSS_LEVEL_COVERAGE")
def plus_record_names_a_vertex_twice(s: Path) -> None:
    """a level-0 links/+1 record names its neighbour's fine row: that vertex has two records and the
    record's own none, though every level keeps every object; counts and ranges hold, and implicit
    storage has no links/-1 to mirror"""
    _edit_link_rows(s, "0/links/+1/0.0.0", lambda rows: rows.__setitem__((0, 0), rows[1, 0]))


@defect("points-pyramid-fine-bins", "L5_CROSS_LEVEL_BIN")
def plus_record_names_another_bins_metavertex(s: Path) -> None:
    """a level-0 links/+1 record names another metavertex of its coarse cell, one of another bin:
    each vertex still has one record, rows and counts hold, and implicit storage has no links/-1
    to mirror; but the metavertex is not where its vertex coarsens"""
    def edit(rows: np.ndarray) -> None:
        rows[0, 1] = rows[np.flatnonzero(rows[:, 1] != rows[0, 1])[0], 1]

    _edit_link_rows(s, "0/links/+1/0.0.0", edit)


@defect(PY, "L5_CROSS_LEVEL_CENTROID")
def metavertex_moved_within_its_bin(s: Path) -> None:
    """a level-1 metavertex moved halfway to the centre of its bin: it stays in its bin and its
    chunk, every record and count holds, but it is no longer the mean of its vertices"""
    bins = np.asarray(open_store(str(s)).level(1).bin_shape)
    c = first_chunk(s, "1/vertices")
    rows = np.frombuffer(read_payload(s, "1/vertices", c), "<f4").copy().reshape(-1, 3)
    centre = (np.floor(rows[0] / bins) + 0.5) * bins
    rows[0] = (rows[0] + centre) / 2
    write_payload(s, "1/vertices", c, rows.tobytes())


def _edit_link_rows(s: Path, array: str, edit: Callable[[np.ndarray], None]) -> None:
    """Rewrite the first cell of a width-2 links array once ``edit`` has changed its rows in place."""
    c = first_chunk(s, array)
    dtype = read_json(s, array)["attributes"]["dtype"]
    rows, starts = decode_ragged_blob(read_payload(s, array, c), 2, dtype)
    rows = rows.copy()
    edit(rows)
    write_payload(s, array, c, encode_ragged_blob([rows[lo:hi] for lo, hi in pairwise(starts)], dtype))


@defect(PY, "L5_MULTISCALE_LINKS_TOKEN")
def multiscale_token_missing(s: Path) -> None:
    """format_capabilities loses multiscale_links"""
    edit_attrs(s, "", lambda a: a["zarr_vectors"].__setitem__(
        "format_capabilities", [t for t in a["zarr_vectors"]["format_capabilities"] if t != "multiscale_links"]))


@defect(PY, "L5_CROSS_LEVEL_TARGET")
def family_targets_missing_level(s: Path) -> None:
    """a copy of 1/links/+1 at level 2, whose target level 3 does not exist"""
    shutil.copytree(s / "1/links/+1", s / "2/links/+1")


@defect(PY, "L5_ATTRIBUTE_AGGREGATION")
def aggregated_value_no_reduction_gives(s: Path) -> None:
    """a level-1 intensity above every level-0 intensity: no reduction of its children gives it"""
    rel = "1/vertex_attributes/intensity"
    chunk = first_chunk(s, rel)
    values = np.frombuffer(read_payload(s, rel, chunk), "<f4").copy()
    values[0] = 1e6
    write_payload(s, rel, chunk, values.tobytes())


@defect("streamline-3d", "L4_POLYLINE_BRIDGES")
def streamline_runs_reversed(s: Path) -> None:
    """a streamline's manifest lists its runs in reverse order: its bridges join other vertices"""
    def blocks(row: bytes) -> list[bytes]:  # mode 0, D = 3: 33 bytes each, the chunk coords first
        assert len(row) == 4 + 33 * _blocks(row), "mode-0 blocks only"
        return [row[4 + 33 * b : 37 + 33 * b] for b in range(_blocks(row))]

    def reverse(items: list[bytes]) -> list[bytes]:
        i = next(k for k, row in enumerate(items) if len({b[:24] for b in blocks(row)}) >= 2)  # runs in 2+ chunks
        return [*items[:i], items[i][:4] + b"".join(reversed(blocks(items[i]))), *items[i + 1:]]

    _rewrite_manifests(s, reverse)
