"""SWC skeletons in and out, by hand from the format's definition (``n T x y z R P``).

The files are written here line by line and read back with ``numpy.loadtxt``, independently
of the module; file -> ``write_skeleton`` -> ``read`` -> SWC keeps every sample's number,
type, position, radius and parent (up to the store's depth-first enumeration order).
"""

from __future__ import annotations

import numpy as np
import pytest
from geometry_roundtrip import through_store

from zarr_vectors.errors import InputError
from zarr_vectors.io import swc

# two trees; sample numbers not contiguous, a child (20) listed before its parent (30)
SWC_TEXT = """# an SWC file written by hand
#   n T x y z R P
10 1 0.0 0.0 0.0 1.5 -1
20 3 4.5 0.5 0.0 0.75 30   # a comment after a sample
30 3 2.0 0.0 1.0 1.0 10
40 3 2.5 3.0 1.0 0.5 30

7 2 9 9 9 0.25 -1
8 2 8 9 5.5 0.25 7
"""
ROWS = np.loadtxt(SWC_TEXT.splitlines(), comments="#")  # what the file says, sample by sample


def samples(rows: np.ndarray) -> list[tuple]:
    """Every sample as (n, T, x, y, z, R, parent n), sorted: a skeleton up to enumeration order."""
    return sorted(map(tuple, np.asarray(rows, np.float64).tolist()))


def test_swc_read_keeps_sample_numbers_types_radii_and_trees(tmp_path):
    (tmp_path / "n.swc").write_text(SWC_TEXT)
    got = swc.read(str(tmp_path / "n.swc"))
    assert got.kind == "skeleton"
    np.testing.assert_array_equal(got.ids, [10, 20, 30, 40, 7, 8])
    np.testing.assert_array_equal(got.positions, ROWS[:, 2:5])
    np.testing.assert_array_equal(got.attributes["type"], [1, 3, 3, 3, 2, 2])
    np.testing.assert_array_equal(got.attributes["radius"], ROWS[:, 5])
    np.testing.assert_array_equal(got.edges, [[1, 2], [2, 0], [3, 2], [5, 4]])  # [child, parent] rows
    np.testing.assert_array_equal(got.object_ids, [0, 0, 0, 0, 1, 1])


@pytest.mark.parametrize("bom, end", [(b"\xef\xbb\xbf", b"\n"), (b"", b"\r"), (b"", b"\r\n")])
def test_swc_with_a_byte_order_mark_or_other_line_ends_reads_as_the_plain_file(tmp_path, bom, end):
    """Regression (hunt): a byte-order mark made the first line unreadable, and with lone CR line ends
    (classic Mac) the first comment took the whole file: an empty skeleton, silently."""
    (tmp_path / "plain.swc").write_text(SWC_TEXT)
    (tmp_path / "other.swc").write_bytes(bom + SWC_TEXT.encode().replace(b"\n", end))
    plain, other = swc.read(str(tmp_path / "plain.swc")), swc.read(str(tmp_path / "other.swc"))
    assert len(plain.positions) == 6
    for name in ("ids", "positions", "edges", "object_ids"):
        np.testing.assert_array_equal(getattr(other, name), getattr(plain, name))


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_swc_in_latin_1_reads_as_before(tmp_path, bom):
    """A file that is not UTF-8 reads as Latin-1, as numpy read the bytes before: a comment's 'µm'
    or a no-break space between values (an old tool's) is not a reason to refuse it, with or
    without a byte-order mark."""
    text = "# units: \u00b5m\n" + SWC_TEXT.replace("10 1 0.0", "10\u00a01 0.0")
    (tmp_path / "l1.swc").write_bytes(bom + text.encode("latin-1"))
    np.testing.assert_array_equal(swc.read(str(tmp_path / "l1.swc")).positions, ROWS[:, 2:5])
    (tmp_path / "unit.swc").write_bytes(("1 1 0 0 0 1\u00b5 -1\n").encode("latin-1"))
    with pytest.raises(InputError, match=r"unit\.swc: not an SWC table of numbers \(could not convert "
                                         r"string '1\u00b5'"):
        swc.read(str(tmp_path / "unit.swc"))  # in a value it is no number, and named as the file has it


def test_swc_written_reads_back_with_loadtxt(tmp_path):
    (tmp_path / "n.swc").write_text(SWC_TEXT)
    swc.write(str(tmp_path / "back.swc"), swc.read(str(tmp_path / "n.swc")))
    assert samples(np.loadtxt(tmp_path / "back.swc", comments="#")) == samples(ROWS)


def parents_first(rows: np.ndarray) -> bool:
    seen = set()
    for n, parent in zip(rows[:, 0].tolist(), rows[:, 6].tolist()):
        if parent >= 0 and parent not in seen:
            return False
        seen.add(n)
    return True


def test_swc_through_a_store_and_back_keeps_every_sample_parents_first(tmp_path):
    (tmp_path / "n.swc").write_text(SWC_TEXT)
    stored = through_store(tmp_path, swc.read(str(tmp_path / "n.swc")))
    assert stored.kind == "skeleton" and sorted(stored.attributes) == ["id", "radius", "type"]
    swc.write(str(tmp_path / "back.swc"), stored)  # sample numbers from the stored "id" attribute
    back = np.loadtxt(tmp_path / "back.swc", comments="#")
    assert samples(back) == samples(ROWS)
    assert parents_first(back) and not parents_first(ROWS)
    swc.write(str(tmp_path / "as_read.swc"), swc.read(str(tmp_path / "n.swc")), parents_first=False)
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "as_read.swc", comments="#"), ROWS)


def test_swc_writer_refuses_repeated_sample_numbers(tmp_path):
    (tmp_path / "n.swc").write_text(SWC_TEXT)
    got = swc.read(str(tmp_path / "n.swc"))
    got.ids = np.array([1, 2, 3, 4, 5, 5])
    with pytest.raises(InputError, match=r"o\.swc: sample number 5 is given to 2 vertices"):
        swc.write(str(tmp_path / "o.swc"), got)
    got.ids = np.array([1, 2, -3, 4, 5, 6])  # a negative parent reads as a root: sample -3's children lost it
    with pytest.raises(InputError, match=r"o\.swc: sample number -3 is negative"):
        swc.write(str(tmp_path / "o.swc"), got)
    assert not (tmp_path / "o.swc").exists()


def test_swc_extra_columns_are_attributes_and_others_are_named_on_write(tmp_path):
    (tmp_path / "x.swc").write_text("1 1 0 0 0 1 -1 0.5\n2 1 1 0 0 1 1 0.25\n")
    got = swc.read(str(tmp_path / "x.swc"))
    np.testing.assert_array_equal(got.attributes["column_8"], [0.5, 0.25])
    with pytest.warns(UserWarning, match=r"SWC cannot hold column_8"):
        swc.write(str(tmp_path / "back.swc"), got)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1 1 0 0 0 1 -1\n2 1 1 0 0 1 5\n", r"sample 2 has parent 5, which is not a sample of the file"),
        ("1 1 0 0 0 1 2\n2 1 1 0 0 1 1\n", r"sample 1 lies on a cycle of parents"),
        ("1 1 0 0 0 1 -1\n1 1 1 0 0 1 1\n", r"sample number 1 appears more than once"),
        ("1 1 0 0 0 1\n", r"SWC lines have 6 values; 7 expected"),
        ("1 1 0 0 0 1 -1\n2 1 0 0\n", r"not an SWC table of numbers"),
        ("1.5 1 0 0 0 1 -1\n", r"data line 1: sample number, type and parent must be integers"),
        # past the integer types they are kept in: the casts wrapped (hunt), parent 1e20 made a root
        ("1 1 0 0 0 1 -1\n2 1 1 0 0 1 1e20\n", r"data line 2: parent 1e\+20 is outside the int64 range"),
        ("1e30 1 0 0 0 1 -1\n", r"data line 1: sample number 1e\+30 is outside the int64 range"),
        ("1 99999999999 0 0 0 1 -1\n", r"data line 1: type 1e\+11 is outside the int32 range"),
        # hunt: sample 4's parent -3 read as a root, a second tree, the edge to sample -3 lost
        ("1 1 0 0 0 1 -1\n-3 3 1 0 0 1 1\n4 3 2 0 0 1 -3\n",
         r"data line 2: sample number -3 is negative; a negative parent marks a root"),
    ],
    ids=["missing-parent", "cycle", "repeated", "short", "ragged", "fractional", "parent-past-int64",
         "id-past-int64", "type-past-int32", "negative-id"],
)
def test_swc_broken_files_are_refused_naming_file_and_sample(tmp_path, text, problem):
    (tmp_path / "bad.swc").write_text(text)
    with pytest.raises(InputError, match=r"bad\.swc: " + problem):
        swc.read(str(tmp_path / "bad.swc"))
