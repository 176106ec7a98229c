"""Mesh files in and out: PLY (plyfile), OBJ and STL (by hand from their definitions),
GIfTI and FreeSurfer surfaces (nibabel).

Each format: a file its own library (or, for OBJ / STL, the format's definition) wrote
reads as those arrays; our writer's file reads back with that library the same; and
file -> ``write_mesh`` -> ``read`` -> our writer -> the library gives the same mesh up to
vertex and face enumeration order.  Broken files are InputErrors naming the file.
"""

from __future__ import annotations

import base64
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from geometry_roundtrip import face_set, read_in_capped_child, through_store, vertex_set

from zarr_vectors.errors import InputError
from zarr_vectors.io import freesurfer, gifti, obj, ply, stl
from zarr_vectors.io.types import Geometry

# a small mesh spanning several 2.0-unit chunks: two triangles and a quad's worth of triangles
POS = np.array([[0, 0, 0], [3, 0, 0], [0, 3, 0], [3, 3, 1], [5, 1, 2], [1, 5, 3]], np.float32)
TRI = np.array([[0, 1, 2], [1, 3, 2], [1, 4, 3], [2, 3, 5]], np.int64)
RED = np.array([10, 20, 30, 40, 50, 60], np.uint8)
QUALITY = np.array([0.5, 1.5, 2.5, 3.5], np.float32)


def plyfile_mesh(path: Path, *, faces=TRI, extras: bool = False, text: bool = False) -> None:
    """A PLY file written by plyfile: x y z red per vertex, vertex_indices and quality per face."""
    import plyfile

    vertex = np.empty(len(POS), [("x", "f4"), ("y", "f4"), ("z", "f4"), ("red", "u1")])
    vertex["x"], vertex["y"], vertex["z"], vertex["red"] = POS[:, 0], POS[:, 1], POS[:, 2], RED
    elements = [plyfile.PlyElement.describe(vertex, "vertex")]
    if faces is not None:
        fields = [("vertex_indices", "i4", (faces.shape[1],)), ("quality", "f4")]
        if extras:
            fields.append(("texcoord", "f4", (6,)))
        face = np.empty(len(faces), fields)
        face["vertex_indices"], face["quality"] = faces, QUALITY[: len(faces)]
        elements.append(plyfile.PlyElement.describe(face, "face"))
    if extras:
        edge = np.array([(0, 1)], [("vertex1", "i4"), ("vertex2", "i4")])
        elements.append(plyfile.PlyElement.describe(edge, "edge"))
    plyfile.PlyData(elements, text=text).write(str(path))


# ---------------------------------------------------------------------------
# PLY
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("text", [False, True], ids=["binary", "ascii"])
def test_ply_read_gives_plyfile_arrays_and_names_what_it_cannot_keep(tmp_path, text):
    path = tmp_path / "m.ply"
    plyfile_mesh(path, extras=True, text=text)
    got = ply.read(str(path))
    assert got.kind == "mesh"
    np.testing.assert_array_equal(got.positions, POS)
    np.testing.assert_array_equal(got.faces, TRI)
    np.testing.assert_array_equal(got.attributes["red"], RED)
    assert got.attributes["red"].dtype == np.uint8
    np.testing.assert_array_equal(got.edge_attributes["quality"], QUALITY)
    assert sorted(got.dropped) == ["edge", "face.texcoord"]


@pytest.mark.parametrize("fmt", ["ascii", "binary_little_endian"])
def test_ply_counts_the_file_cannot_hold_are_refused_before_any_allocation(tmp_path, fmt):
    """Regression (hunt): a 190-byte ASCII PLY declaring 4e9 vertices asked numpy for 44.7 GiB."""
    head = (f"ply\nformat {fmt} 1.0\nelement vertex 4000000000\nproperty float x\nproperty float y\n"
            "property float z\nend_header\n").encode()
    (tmp_path / "big.ply").write_bytes(head + (b"1 2 3\n" if fmt == "ascii" else struct.pack("<3f", 1, 2, 3)))
    with pytest.raises(InputError, match=r"big\.ply: declares 4000000000 rows of element 'vertex', more than the "
                                         r"\d+ bytes after its header can hold"):
        ply.read(str(tmp_path / "big.ply"))
    exact = head.replace(b"4000000000", b"1")  # the count its bytes hold: read
    (tmp_path / "one.ply").write_bytes(exact + (b"1 2 3\n" if fmt == "ascii" else struct.pack("<3f", 1, 2, 3)))
    assert ply.read(str(tmp_path / "one.ply")).positions.tolist() == [[1.0, 2.0, 3.0]]
    # regression (hunt): the check looked for the words, so a comment naming them, or a header
    # past its first 64 KiB, let plyfile ask numpy for the 44.7 GiB again
    for name, hidden in (("comment.ply", b"ply\ncomment end_header\n"), ("long.ply", b"ply\n" + b"comment x\n" * 8000)):
        (tmp_path / name).write_bytes(head.replace(b"ply\n", hidden, 1) + b"1 2 3\n")
        with pytest.raises(InputError, match=r"declares 4000000000 rows of element 'vertex'"):
            ply.read(str(tmp_path / name))
        (tmp_path / name).write_bytes(exact.replace(b"ply\n", hidden, 1)
                                      + (b"1 2 3\n" if fmt == "ascii" else struct.pack("<3f", 1, 2, 3)))
        assert ply.read(str(tmp_path / name)).positions.tolist() == [[1.0, 2.0, 3.0]]


def test_ply_without_faces_is_a_point_cloud_and_is_written_back_as_one(tmp_path):
    import plyfile

    plyfile_mesh(tmp_path / "p.ply", faces=None)
    got = ply.read(str(tmp_path / "p.ply"))
    assert got.kind == "points" and got.faces is None
    ply.write(str(tmp_path / "back.ply"), got)
    back = plyfile.PlyData.read(str(tmp_path / "back.ply"))
    assert [e.name for e in back.elements] == ["vertex"]
    np.testing.assert_array_equal(back["vertex"]["red"], RED)
    np.testing.assert_array_equal(np.stack([back["vertex"][a] for a in "xyz"], axis=1), POS)


def test_ply_mixed_polygons_are_fanned_and_mapped_back_to_their_face(tmp_path):
    import plyfile

    vertex = np.array([tuple(p) for p in POS.tolist()], [("x", "f4"), ("y", "f4"), ("z", "f4")])
    face = np.empty(2, [("vertex_indices", object)])
    face["vertex_indices"] = [np.array([0, 1, 3, 2], np.int32), np.array([1, 4, 3], np.int32)]
    plyfile.PlyData([plyfile.PlyElement.describe(vertex, "vertex"), plyfile.PlyElement.describe(face, "face")]).write(
        str(tmp_path / "q.ply")
    )
    got = ply.read(str(tmp_path / "q.ply"))
    np.testing.assert_array_equal(got.faces, [[0, 1, 3], [0, 3, 2], [1, 4, 3]])
    np.testing.assert_array_equal(got.edge_attributes["polygon"], [0, 0, 1])
    # regression (hunt): a face property of that name was written over, [100, 200] became [0, 0, 1]
    named = np.empty(2, [("vertex_indices", object), ("polygon", "i4")])
    named["vertex_indices"], named["polygon"] = face["vertex_indices"], [100, 200]
    plyfile.PlyData([plyfile.PlyElement.describe(vertex, "vertex"), plyfile.PlyElement.describe(named, "face")]).write(
        str(tmp_path / "p.ply")
    )
    with pytest.raises(InputError, match=r"p\.ply: a face property is named 'polygon'"):
        ply.read(str(tmp_path / "p.ply"))


@pytest.mark.parametrize("text", [False, True], ids=["binary", "ascii"])
def test_ply_quads_are_kept_and_a_wrong_triangle_guess_is_not_believed(tmp_path, text):
    """A binary file is first mapped as if all faces were triangles; quads (17 bytes a row,
    not 13) must be detected by the stored counts and read again, exactly."""
    quads = np.array([[0, 1, 3, 2], [1, 4, 3, 0], [2, 3, 5, 0]])
    plyfile_mesh(tmp_path / "q.ply", faces=quads, text=text)
    got = ply.read(str(tmp_path / "q.ply"))
    np.testing.assert_array_equal(got.faces, quads)
    np.testing.assert_array_equal(got.edge_attributes["quality"], QUALITY[:3])


def test_ply_quads_whose_size_fits_the_triangle_guess_are_caught_by_their_counts(tmp_path):
    """Two quads (2 x 21 bytes) and one 8-byte edge make exactly the bytes of two guessed
    triangles (2 x 17) and the edge: only the stored lengths tell (plyfile checks them)."""
    import plyfile

    vertex = np.array([tuple(p) for p in POS.tolist()], [("x", "f4"), ("y", "f4"), ("z", "f4")])
    face = np.empty(2, [("vertex_indices", "i4", (4,)), ("quality", "f4")])
    face["vertex_indices"], face["quality"] = [[0, 1, 3, 2], [1, 4, 3, 0]], [0.5, 1.5]
    edge = np.array([(0, 1)], [("vertex1", "i4"), ("vertex2", "i4")])
    elements = [plyfile.PlyElement.describe(a, n) for a, n in ((vertex, "vertex"), (face, "face"), (edge, "edge"))]
    plyfile.PlyData(elements).write(str(tmp_path / "q.ply"))
    with pytest.raises(plyfile.PlyElementParseError, match="unexpected list length"):
        plyfile.PlyData.read(str(tmp_path / "q.ply"), known_list_len={"face": {"vertex_indices": 3}})
    got = ply.read(str(tmp_path / "q.ply"))
    np.testing.assert_array_equal(got.faces, [[0, 1, 3, 2], [1, 4, 3, 0]])
    np.testing.assert_array_equal(got.edge_attributes["quality"], [0.5, 1.5])
    assert got.dropped == ("edge",)


@pytest.mark.parametrize("text", [False, True], ids=["binary", "ascii"])
def test_ply_written_reads_back_with_plyfile(tmp_path, text):
    import plyfile

    plyfile_mesh(tmp_path / "m.ply")
    ply.write(str(tmp_path / "back.ply"), ply.read(str(tmp_path / "m.ply")), text=text)
    back = plyfile.PlyData.read(str(tmp_path / "back.ply"))
    assert back.text == text
    np.testing.assert_array_equal(np.stack([back["vertex"][a] for a in "xyz"], axis=1), POS)
    np.testing.assert_array_equal(back["vertex"]["red"], RED)
    np.testing.assert_array_equal(np.stack(back["face"]["vertex_indices"]), TRI)
    np.testing.assert_array_equal(back["face"]["quality"], QUALITY)


def test_ply_face_index_out_of_range_is_refused_naming_file_and_face(tmp_path):
    bad = TRI.copy()
    bad[2, 1] = 99
    plyfile_mesh(tmp_path / "bad.ply", faces=bad)
    with pytest.raises(InputError, match=r"bad\.ply: face 2 refers to vertex 99, but the file has 6 vertices"):
        ply.read(str(tmp_path / "bad.ply"))


def test_ply_truncated_or_not_ply_is_refused(tmp_path):
    plyfile_mesh(tmp_path / "m.ply")
    (tmp_path / "cut.ply").write_bytes((tmp_path / "m.ply").read_bytes()[:-7])
    with pytest.raises(InputError, match=r"cut\.ply: not a readable PLY file"):
        ply.read(str(tmp_path / "cut.ply"))
    (tmp_path / "no.ply").write_bytes(b"solid x\n")
    with pytest.raises(InputError, match=r"no\.ply: not a readable PLY file"):
        ply.read(str(tmp_path / "no.ply"))


@pytest.mark.parametrize("text", [False, True], ids=["binary", "ascii"])
def test_ply_float_face_indices_are_refused_not_truncated(tmp_path, text):
    """Regression (hunt): a float vertex_indices list was cast to int64, 2.9 read as vertex 2."""
    import plyfile

    vertex = np.empty(3, [("x", "f4"), ("y", "f4"), ("z", "f4")])
    vertex["x"], vertex["y"], vertex["z"] = POS[:3].T
    face = np.empty(1, [("vertex_indices", "f4", (3,))])
    face["vertex_indices"] = [[0.7, 1.2, 2.9]]
    elements = [plyfile.PlyElement.describe(vertex, "vertex"), plyfile.PlyElement.describe(face, "face")]
    plyfile.PlyData(elements, text=text).write(str(tmp_path / "f.ply"))
    with pytest.raises(InputError, match=r"f\.ply: the face list vertex_indices holds float32, not integers"):
        ply.read(str(tmp_path / "f.ply"))


@pytest.mark.parametrize(("attributes", "face_attributes", "clash"), [
    ({"x": RED}, {}, r"vertex attribute\(s\) 'x'"),
    ({}, {"vertex_indices": QUALITY}, r"face attribute\(s\) 'vertex_indices'"),
    ({"n": np.zeros((6, 3)), "n_1": RED}, {}, r"vertex attribute\(s\) 'n_1'"),
], ids=["position", "faces", "component"])
def test_ply_write_refuses_an_attribute_named_like_a_property_it_writes(tmp_path, attributes, face_attributes, clash):
    """Regression (hunt): an attribute ``x`` replaced the x coordinates (plyfile keeps the last column of a name)."""
    mesh = Geometry(kind="mesh", positions=POS, faces=TRI, attributes=attributes, edge_attributes=face_attributes)
    with pytest.raises(InputError, match=rf"m\.ply: {clash} would replace the field"):
        ply.write(str(tmp_path / "m.ply"), mesh)
    assert not (tmp_path / "m.ply").exists()


@pytest.mark.parametrize("name", ["fiber count", "größe", ""])
def test_ply_write_refuses_an_attribute_name_ply_cannot_spell(tmp_path, name):
    """Regression (hunt): plyfile's bare ValueError named neither the file nor what to do."""
    mesh = Geometry(kind="mesh", positions=POS, faces=TRI, attributes={name: RED})
    with pytest.raises(InputError, match=rf"m\.ply: attribute {re.escape(repr(name))} cannot be a PLY property "
                                         "name: PLY names are printable ASCII without spaces"):
        ply.write(str(tmp_path / "m.ply"), mesh)


# ---------------------------------------------------------------------------
# OBJ (by hand from the format's definition)
# ---------------------------------------------------------------------------
OBJ_TEXT = """# a quad and a triangle, every corner form
mtllib m.mtl
o thing
v 0 0 0
v 3 0 0
v 3 3 1
v 0 3 0
vt 0 0
vn 0 0 1
f 1/1/1 2/1/1 3/1/1 4/1/1   # a quad
v 5 1 2
f -4//1 -1 \\
  -3
usemtl red
"""


def hand_read_obj(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """An independent plain reading of v / f lines (1-based corner indices, no negatives)."""
    lines = [line.split() for line in path.read_text().splitlines()]
    v = np.array([line[1:4] for line in lines if line and line[0] == "v"], np.float64)
    f = np.array([[int(c.split("/")[0]) - 1 for c in line[1:]] for line in lines if line and line[0] == "f"])
    return v, f


def test_obj_read_honours_corner_forms_negative_indices_polygons_and_names_the_rest(tmp_path):
    (tmp_path / "m.obj").write_text(OBJ_TEXT)
    got = obj.read(str(tmp_path / "m.obj"))
    np.testing.assert_array_equal(got.positions, [[0, 0, 0], [3, 0, 0], [3, 3, 1], [0, 3, 0], [5, 1, 2]])
    # the quad fanned (mixed sizes), the triangle -4 -1 -3 after five vertices = 1 4 2
    np.testing.assert_array_equal(got.faces, [[0, 1, 2], [0, 2, 3], [1, 4, 2]])
    np.testing.assert_array_equal(got.edge_attributes["polygon"], [0, 0, 1])
    assert sorted(got.dropped) == ["o", "usemtl", "vn", "vt"]


@pytest.mark.parametrize("bom, end", [(b"\xef\xbb\xbf", b"\n"), (b"", b"\r"), (b"", b"\r\n"), (b"\xef\xbb\xbf", b"\r")])
def test_obj_with_a_byte_order_mark_or_other_line_ends_reads_as_the_plain_file(tmp_path, bom, end):
    """Regression (hunt): a byte-order mark hid the first ``v`` line (a vertex lost, silently, or its
    faces refused), and lone CR line ends (classic Mac) made one line of the file, whose first
    comment took every line after it."""
    (tmp_path / "plain.obj").write_text(OBJ_TEXT)
    (tmp_path / "other.obj").write_bytes(bom + OBJ_TEXT.encode().replace(b"\n", end))
    plain, other = obj.read(str(tmp_path / "plain.obj")), obj.read(str(tmp_path / "other.obj"))
    np.testing.assert_array_equal(other.positions, plain.positions)
    np.testing.assert_array_equal(other.faces, plain.faces)
    assert len(plain.positions) == 5 and sorted(other.dropped) == sorted(plain.dropped)


def test_obj_written_reads_back_by_hand(tmp_path):
    ply_path = tmp_path / "m.ply"
    plyfile_mesh(ply_path)
    with pytest.warns(UserWarning, match=r"OBJ cannot hold quality, red"):
        obj.write(str(tmp_path / "m.obj"), ply.read(str(ply_path)))
    v, f = hand_read_obj(tmp_path / "m.obj")
    np.testing.assert_array_equal(v, POS)
    np.testing.assert_array_equal(f, TRI)


def test_obj_bad_index_is_refused(tmp_path):
    (tmp_path / "zero.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 0 1 2\n")
    with pytest.raises(InputError, match=r"zero\.obj: a face refers to vertex 0"):
        obj.read(str(tmp_path / "zero.obj"))
    (tmp_path / "far.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 7\n")
    # named as the file counts, from 1: it said "face 0 refers to vertex 6" (hunt)
    with pytest.raises(InputError, match=r"far\.obj: face 1 \(counting from 1\) refers to vertex 7, but the file"):
        obj.read(str(tmp_path / "far.obj"))
    (tmp_path / "back.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\nf -1 -2 -6\n")
    with pytest.raises(InputError, match=r"face 2 \(counting from 1\) refers to vertex -6, but the file has 3"):
        obj.read(str(tmp_path / "back.obj"))
    (tmp_path / "huge.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 99999999999999999999999\n")
    with pytest.raises(InputError, match=r"huge\.obj: a face has a vertex index that is not an int64 integer"):
        obj.read(str(tmp_path / "huge.obj"))  # an OverflowError traceback before (hunt)


# ---------------------------------------------------------------------------
# STL (by hand from the format's definition)
# ---------------------------------------------------------------------------
def hand_binary_stl(path: Path, positions=POS, faces=TRI, count: int | None = None) -> None:
    records = b"".join(
        struct.pack("<3f", 0, 0, 1) + positions[f].astype("<f4").tobytes() + struct.pack("<H", 0) for f in faces
    )
    path.write_bytes(
        b"hand-made binary STL".ljust(80) + struct.pack("<I", len(faces) if count is None else count) + records
    )


def hand_ascii_stl(path: Path) -> None:
    body = "".join(
        "facet normal 0 0 1\n outer loop\n" + "".join(f"  vertex {x:g} {y:g} {z:g}\n" for x, y, z in POS[f])
        + " endloop\nendfacet\n"
        for f in TRI
    )  # fmt: skip
    path.write_text(f"solid hand\n{body}endsolid hand\n")


@pytest.mark.parametrize("writer", [hand_binary_stl, hand_ascii_stl], ids=["binary", "ascii"])
def test_stl_read_merges_corners_at_one_position_into_shared_vertices(tmp_path, writer):
    writer(tmp_path / "m.stl")
    got = stl.read(str(tmp_path / "m.stl"))
    np.testing.assert_array_equal(got.positions, POS)  # first appearance order = POS order for TRI
    np.testing.assert_array_equal(got.faces, TRI)
    np.testing.assert_array_equal(got.edge_attributes["normal"], np.tile([0, 0, 1], (4, 1)))


@pytest.mark.parametrize("ascii", [False, True], ids=["binary", "ascii"])
def test_stl_written_reads_back_by_hand(tmp_path, ascii):
    hand_binary_stl(tmp_path / "m.stl")
    stl.write(str(tmp_path / "back.stl"), stl.read(str(tmp_path / "m.stl")), ascii=ascii)
    raw = (tmp_path / "back.stl").read_bytes()
    if ascii:
        corners = np.array(re.findall(rb"vertex\s+(\S+)\s+(\S+)\s+(\S+)", raw), np.float32).reshape(-1, 3, 3)
    else:
        (count,) = struct.unpack_from("<I", raw, 80)
        assert len(raw) == 84 + 50 * count
        corners = np.array(
            [struct.unpack_from("<9f", raw, 84 + 50 * i + 12) for i in range(count)], np.float32
        ).reshape(-1, 3, 3)  # fmt: skip
    np.testing.assert_array_equal(corners, POS[TRI])


def test_stl_truncated_binary_is_refused_with_the_sizes(tmp_path):
    hand_binary_stl(tmp_path / "cut.stl")
    (tmp_path / "cut.stl").write_bytes((tmp_path / "cut.stl").read_bytes()[:-20])
    with pytest.raises(InputError, match=r"cut\.stl: binary STL truncated or padded: its header declares 4 triangles "
                       r"\(284 bytes\), the file has 264 bytes"):  # fmt: skip
        stl.read(str(tmp_path / "cut.stl"))


@pytest.mark.parametrize("bom, end", [(b"\xef\xbb\xbf", b"\n"), (b"", b"\r"), (b"\xef\xbb\xbf", b"\r\n")])
def test_ascii_stl_with_a_byte_order_mark_or_other_line_ends_reads_as_the_plain_file(tmp_path, bom, end):
    """Regression: a byte-order mark before 'solid' made the file binary to the reader, refused as
    'binary STL truncated ... declares 824193056 triangles'."""
    hand_binary_stl(tmp_path / "m.stl")
    stl.write(str(tmp_path / "plain.stl"), stl.read(str(tmp_path / "m.stl")), ascii=True)
    (tmp_path / "other.stl").write_bytes(bom + (tmp_path / "plain.stl").read_bytes().replace(b"\n", end))
    plain, other = stl.read(str(tmp_path / "plain.stl")), stl.read(str(tmp_path / "other.stl"))
    np.testing.assert_array_equal(other.positions, plain.positions)
    np.testing.assert_array_equal(other.faces, plain.faces)
    assert len(plain.faces) == len(TRI)


def test_stl_truncated_binary_whose_header_says_solid_is_not_read_as_empty_ascii(tmp_path):
    hand_binary_stl(tmp_path / "cut.stl")
    raw = (tmp_path / "cut.stl").read_bytes()
    (tmp_path / "cut.stl").write_bytes(b"solid by a careless exporter".ljust(80) + raw[80:-20])
    with pytest.raises(InputError, match=r"cut\.stl: not ASCII STL \(no endsolid\) and binary STL truncated"):
        stl.read(str(tmp_path / "cut.stl"))
    (tmp_path / "tiny.stl").write_bytes(b"solid")
    with pytest.raises(InputError, match=r"tiny\.stl: not ASCII STL \(no endsolid\) and not a binary STL: 5 bytes"):
        stl.read(str(tmp_path / "tiny.stl"))


def test_stl_minus_zero_is_the_same_position_as_zero(tmp_path):
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [-0.0, 0, 0], [1, 1, 0]], np.float32)
    hand_binary_stl(tmp_path / "z.stl", positions=pos, faces=np.array([[0, 1, 2], [3, 4, 2]]))
    got = stl.read(str(tmp_path / "z.stl"))
    np.testing.assert_array_equal(got.faces, [[0, 1, 2], [0, 3, 2]])
    assert len(got.positions) == 4


def test_stl_degenerate_facet_is_left_out_and_counted(tmp_path):
    hand_binary_stl(tmp_path / "d.stl", faces=np.r_[TRI, [[0, 0, 1]]])
    with pytest.warns(UserWarning, match=r"1 degenerate facet \(two corners at one position\) left out") as said:
        got = stl.read(str(tmp_path / "d.stl"))
    np.testing.assert_array_equal(got.faces, TRI)
    assert got.dropped == () and "cannot be stored" not in str(said[0].message)  # not said as a column


# ---------------------------------------------------------------------------
# GIfTI and FreeSurfer (nibabel)
# ---------------------------------------------------------------------------
THICKNESS = np.linspace(1, 3, len(POS)).astype(np.float32)


def nibabel_gifti(path: Path) -> None:
    from nibabel import gifti

    gifti.GiftiImage(darrays=[
        gifti.GiftiDataArray(POS, intent="NIFTI_INTENT_POINTSET", datatype="NIFTI_TYPE_FLOAT32"),
        gifti.GiftiDataArray(TRI.astype(np.int32), intent="NIFTI_INTENT_TRIANGLE", datatype="NIFTI_TYPE_INT32"),
        gifti.GiftiDataArray(THICKNESS, intent="NIFTI_INTENT_SHAPE", meta=gifti.GiftiMetaData(Name="thickness")),
    ]).to_filename(str(path))  # fmt: skip


def test_gifti_read_and_written_back_with_nibabel(tmp_path):
    import nibabel as nib

    nibabel_gifti(tmp_path / "m.surf.gii")
    got = gifti.read(str(tmp_path / "m.surf.gii"))
    np.testing.assert_array_equal(got.positions, POS)
    np.testing.assert_array_equal(got.faces, TRI)
    np.testing.assert_array_equal(got.attributes["thickness"], THICKNESS)
    gifti.write(str(tmp_path / "back.surf.gii"), got)
    back = nib.load(str(tmp_path / "back.surf.gii"))
    coords, faces = back.agg_data(("pointset", "triangle"))
    np.testing.assert_array_equal(coords, POS)
    np.testing.assert_array_equal(faces, TRI)
    assert back.darrays[2].meta["Name"] == "thickness"
    np.testing.assert_array_equal(back.darrays[2].data, THICKNESS)


@pytest.mark.parametrize("name", ["a\x01b", "a\udc80b", "a\uffffb"])
def test_gifti_write_refuses_an_attribute_name_xml_cannot_hold(tmp_path, name):
    """nibabel wrote the name into the array's Name metadata as it was: a file no XML parser (nibabel's
    own included) reads back."""
    got = Geometry("mesh", POS, faces=TRI, attributes={name: THICKNESS})
    with pytest.raises(InputError, match=rf"m\.surf\.gii: attribute {re.escape(repr(name))}: its name holds "
                                         r".*, which XML 1\.0 cannot hold"):
        gifti.write(str(tmp_path / "m.surf.gii"), got)
    assert not (tmp_path / "m.surf.gii").exists()


def test_gifti_without_pointset_or_broken_is_refused(tmp_path):
    from nibabel import gifti as nib_gifti

    nib_gifti.GiftiImage(darrays=[nib_gifti.GiftiDataArray(THICKNESS)]).to_filename(str(tmp_path / "f.func.gii"))
    with pytest.raises(InputError, match=r"f\.func\.gii: has no NIFTI_INTENT_POINTSET array"):
        gifti.read(str(tmp_path / "f.func.gii"))
    (tmp_path / "x.gii").write_text("<GIFTI><DataArray")
    with pytest.raises(InputError, match=r"x\.gii: not a readable GIfTI file"):
        gifti.read(str(tmp_path / "x.gii"))


def _gifti(path: Path, *arrays) -> str:
    from nibabel import gifti as nib_gifti

    nib_gifti.GiftiImage(darrays=[
        nib_gifti.GiftiDataArray(values, intent=intent, meta=nib_gifti.GiftiMetaData(Name=name) if name else None)
        for values, intent, name in arrays
    ]).to_filename(str(path))  # fmt: skip
    return str(path)


@pytest.mark.parametrize(("arrays", "message"), [
    # the last 'thick' replaced the first, silently
    ([(POS, "NIFTI_INTENT_POINTSET", None), (TRI.astype(np.int32), "NIFTI_INTENT_TRIANGLE", None),
      (THICKNESS, "NIFTI_INTENT_SHAPE", "thick"), (THICKNESS + 1, "NIFTI_INTENT_SHAPE", "thick")],
     "two per-vertex data arrays are named 'thick'"),
    # an IndexError before; (n, 2) and (n, 4) were stored as 2-D and 4-D meshes
    ([(POS.ravel(), "NIFTI_INTENT_POINTSET", None)], r"the pointset is float32 of shape \(\d+,\); a GIfTI surface's"),
    ([(POS[:, :2].copy(), "NIFTI_INTENT_POINTSET", None)], r"the pointset is float32 of shape \(\d+, 2\)"),
    # float corner indices were truncated (1.7 became 1)
    ([(POS, "NIFTI_INTENT_POINTSET", None), (TRI.astype(np.float32) + 0.5, "NIFTI_INTENT_TRIANGLE", None)],
     r"the triangles are float32 of shape \(\d+, 3\); a GIfTI surface's are integers"),
])
def test_gifti_arrays_a_surface_cannot_have_are_refused(tmp_path, arrays, message):
    """Regressions (hunt): each read as something other than the file says, or ended in a traceback."""
    with pytest.raises(InputError, match=message):
        gifti.read(_gifti(tmp_path / "s.surf.gii", *arrays))


def _first_array_data(text: str) -> str:
    return re.search(r"<Data>([^<]*)</Data>", text).group(1)


def test_gifti_big_endian_arrays_read_as_the_little_endian_file(tmp_path):
    """Regression (hunt): an Endian="BigEndian" pointset, valid GIfTI, failed at the write on '>f4'."""
    _gifti(tmp_path / "le.surf.gii", (POS, "NIFTI_INTENT_POINTSET", None),
           (TRI.astype(np.int32), "NIFTI_INTENT_TRIANGLE", None))
    text = (tmp_path / "le.surf.gii").read_text()
    big = base64.b64encode(zlib.compress(POS.astype(">f4").tobytes())).decode()
    text = text.replace('Endian="LittleEndian"', 'Endian="BigEndian"', 1).replace(_first_array_data(text), big, 1)
    (tmp_path / "be.surf.gii").write_text(text)
    got = gifti.read(str(tmp_path / "be.surf.gii"))
    assert got.positions.dtype.byteorder in "=|"
    np.testing.assert_array_equal(got.positions, POS)
    stored = through_store(tmp_path, got)
    assert face_set(stored.positions, stored.faces) == face_set(POS, TRI)


def test_gifti_external_data_only_from_a_regular_file_beside_it(tmp_path):
    """Regression (hunt): an ExternalFileBinary array naming /dev/zero with a large Dim0 read
    1.6 GB before failing; nibabel opens whatever path the file names."""
    (tmp_path / "data.bin").write_bytes(POS.astype("<f4").tobytes())
    _gifti(tmp_path / "inline.surf.gii", (POS, "NIFTI_INTENT_POINTSET", None))
    text = (tmp_path / "inline.surf.gii").read_text()
    text = text.replace('Encoding="GZipBase64Binary"', 'Encoding="ExternalFileBinary"', 1) \
        .replace('ExternalFileName=""', 'ExternalFileName="data.bin"', 1).replace(_first_array_data(text), "", 1)
    (tmp_path / "ext.surf.gii").write_text(text)
    np.testing.assert_array_equal(gifti.read(str(tmp_path / "ext.surf.gii")).positions, POS)
    for name in ("/dev/zero", "../outside.bin", "missing.bin"):
        (tmp_path / "bad.surf.gii").write_text(text.replace('"data.bin"', f'"{name}"'))
        with pytest.raises(InputError, match=rf"bad\.surf\.gii: a data array's external file '{re.escape(name)}' is "
                                             "not a regular file in the GIfTI's folder"):
            gifti.read(str(tmp_path / "bad.surf.gii"))


def _deflated_zeros(mib: int) -> bytes:
    """A zlib stream of ``mib`` MiB of zeros, made in milliseconds: after a full flush the
    compressor's state is reset, so every further MiB is the same bytes; the Adler-32 of n zeros
    is (n mod 65521) << 16 | 1."""
    block = bytes(1 << 20)
    deflate = zlib.compressobj(9)
    first = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    end = deflate.flush()[:-4]
    return first + again * (mib - 1) + end + (((mib << 20) % 65521) << 16 | 1).to_bytes(4, "big")


def test_gifti_deflated_array_larger_than_declared_is_refused_in_bounded_memory(tmp_path):
    """Regression (hunt): 1.5 MB of deflated zeros as a 4 x 3 pointset took nibabel 3 GB (it
    inflates a whole array, then copies it) before its reshape failed.  The child's address
    space is capped at 1 GiB, below what the 1.5 GiB array inflates to."""
    assert zlib.decompress(_deflated_zeros(3)) == bytes(3 << 20)
    _gifti(tmp_path / "ok.surf.gii", (POS, "NIFTI_INTENT_POINTSET", None), (THICKNESS, "NIFTI_INTENT_SHAPE", "thick"))
    text = (tmp_path / "ok.surf.gii").read_text()
    bomb = base64.b64encode(_deflated_zeros(1536)).decode()
    (tmp_path / "bomb.surf.gii").write_text(text.replace(_first_array_data(text), bomb, 1))
    out = read_in_capped_child("gifti", tmp_path / "bomb.surf.gii", 1 << 30)
    assert (f"bomb.surf.gii: data array 'NIFTI_INTENT_POINTSET' inflates to more than the {POS.nbytes:,} bytes its "
            "Dim and DataType attributes declare") in out, out
    # with a default namespace ElementTree names every tag {urn:x}..., nibabel's expat does not (review)
    small = base64.b64encode(_deflated_zeros(8)).decode()
    spaced = text.replace(_first_array_data(text), small, 1).replace("<GIFTI ", '<GIFTI xmlns="urn:x" ', 1)
    (tmp_path / "spaced.surf.gii").write_text(spaced)
    with pytest.raises(InputError, match="data array 'NIFTI_INTENT_POINTSET' inflates to more than"):
        gifti.read(str(tmp_path / "spaced.surf.gii"))
    # a declared size one value short of the data is refused by the same check; the file as written reads
    head, _, tail = text.rpartition(f'Dim0="{len(THICKNESS)}"')  # the last array's
    short = f'{head}Dim0="{len(THICKNESS) - 1}"{tail}'
    (tmp_path / "short.surf.gii").write_text(short)
    with pytest.raises(InputError, match=r"data array 'thick' inflates to more than the \d+ bytes"):
        gifti.read(str(tmp_path / "short.surf.gii"))
    np.testing.assert_array_equal(gifti.read(str(tmp_path / "ok.surf.gii")).attributes["thick"], THICKNESS)



def test_gifti_arrays_declaring_more_than_the_decode_limit_are_refused_before_inflating(tmp_path, zv_config):
    """A file may declare, and inflate to, any size (8 MiB of zeros deflate to 8 kB): what its
    compressed arrays declare in all is held to ``limits.max-decoded-bytes``, and the error
    names the array that crossed it and the setting."""
    from zarr_vectors.errors import ResourceLimitError

    _gifti(tmp_path / "ok.surf.gii", (POS, "NIFTI_INTENT_POINTSET", None), (THICKNESS, "NIFTI_INTENT_SHAPE", "thick"))
    text = (tmp_path / "ok.surf.gii").read_text()
    zv_config("limits.max-decoded-bytes", POS.nbytes + THICKNESS.nbytes)
    np.testing.assert_array_equal(gifti.read(str(tmp_path / "ok.surf.gii")).attributes["thick"], THICKNESS)
    zv_config("limits.max-decoded-bytes", POS.nbytes + THICKNESS.nbytes - 1)
    with pytest.raises(ResourceLimitError, match=rf"ok\.surf\.gii: its compressed data arrays, up to 'thick', declare "
                                                  rf"{POS.nbytes + THICKNESS.nbytes:,} bytes, more than zarr_vectors\."
                                                  r"limits\.max-decoded-bytes"):
        gifti.read(str(tmp_path / "ok.surf.gii"))
    # a pointset declared (and deflated) as 2^21 x 1 float32, 8 MiB, is refused before it is inflated
    zv_config("limits.max-decoded-bytes", 4 << 20)
    head, _, tail = text.partition('Dim0="')
    big = head + 'Dim0="2097152' + tail[tail.index('"'):]
    zeros = base64.b64encode(_deflated_zeros(8)).decode()
    big = big.replace('Dim1="3"', 'Dim1="1"', 1).replace(_first_array_data(text), zeros, 1)
    (tmp_path / "big.surf.gii").write_text(big)
    with pytest.raises(ResourceLimitError, match="up to 'NIFTI_INTENT_POINTSET', declare 8,388,608 bytes"):
        gifti.read(str(tmp_path / "big.surf.gii"))

def test_freesurfer_read_and_written_back_with_nibabel(tmp_path):
    from nibabel.freesurfer import read_geometry, write_geometry

    write_geometry(str(tmp_path / "lh.white"), POS.astype(np.float64), TRI.astype(np.int32))
    got = freesurfer.read(str(tmp_path / "lh.white"))
    np.testing.assert_array_equal(got.positions, POS)
    np.testing.assert_array_equal(got.faces, TRI)
    assert freesurfer.FORMAT.matches("rh.pial") and freesurfer.FORMAT.matches("lh.smoothwm")
    freesurfer.write(str(tmp_path / "back.pial"), got)
    coords, faces = read_geometry(str(tmp_path / "back.pial"))
    np.testing.assert_array_equal(coords, POS)
    np.testing.assert_array_equal(faces, TRI)
    (tmp_path / "cut.white").write_bytes((tmp_path / "lh.white").read_bytes()[:40])
    with pytest.raises(InputError, match=r"cut\.white: not a readable FreeSurfer surface"):
        freesurfer.read(str(tmp_path / "cut.white"))


# ---------------------------------------------------------------------------
# file -> store -> file, every mesh format
# ---------------------------------------------------------------------------
def _plyfile_back(path: Path):
    import plyfile

    back = plyfile.PlyData.read(str(path))
    pos = np.stack([back["vertex"][a] for a in "xyz"], axis=1)
    return (
        pos,
        np.stack(back["face"]["vertex_indices"]),
        {"quality": back["face"]["quality"]},
        {"red": back["vertex"]["red"]},
    )


def _obj_back(path: Path):
    return (*hand_read_obj(path), {}, {})


def _stl_back(path: Path):
    raw = path.read_bytes()
    (count,) = struct.unpack_from("<I", raw, 80)
    corners = np.frombuffer(raw, stl.RECORD, count, 84)["corners"].reshape(-1, 3)
    return corners, np.arange(len(corners)).reshape(-1, 3), {}, {}


def _gifti_back(path: Path):
    import nibabel as nib

    img = nib.load(str(path))
    coords, faces = img.agg_data(("pointset", "triangle"))
    return coords, faces, {}, {"thickness": img.darrays[2].data}


def _freesurfer_back(path: Path):
    from nibabel.freesurfer import read_geometry

    return (*read_geometry(str(path)), {}, {})


CASES = {
    "ply": (lambda p: plyfile_mesh(p), ply, _plyfile_back, {"quality": QUALITY}, {"red": RED}),
    "obj": (lambda p: p.write_text("".join(f"v {x:g} {y:g} {z:g}\n" for x, y, z in POS) + "".join(
        f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in TRI)), obj, _obj_back, {}, {}),
    "stl": (hand_binary_stl, stl, _stl_back, {}, {}),
    "surf.gii": (nibabel_gifti, gifti, _gifti_back, {}, {"thickness": THICKNESS}),
    "white": (lambda p: __import__("nibabel.freesurfer").freesurfer.write_geometry(
        str(p), POS.astype(np.float64), TRI.astype(np.int32)), freesurfer, _freesurfer_back, {}, {}),
}  # fmt: skip


@pytest.mark.parametrize("ext", list(CASES))
def test_mesh_file_through_a_store_and_back_is_the_same_mesh(tmp_path, ext):
    make, module, library_read, face_attrs, vertex_attrs = CASES[ext]
    make(tmp_path / f"in.{ext}")
    stored = through_store(tmp_path, module.read(str(tmp_path / f"in.{ext}")))
    assert stored.kind == "mesh" and len(stored.faces) == len(TRI)
    module.write(str(tmp_path / f"out.{ext}"), stored)
    pos, faces, back_face_attrs, back_vertex_attrs = library_read(tmp_path / f"out.{ext}")
    assert face_set(pos, faces, back_face_attrs) == face_set(POS, TRI, face_attrs)
    if vertex_attrs:
        assert vertex_set(pos, back_vertex_attrs) == vertex_set(POS, vertex_attrs)
