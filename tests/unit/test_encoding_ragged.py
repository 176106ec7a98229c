"""Link cell encodings (docs/format.md §6.5): flat row dumps and self-describing blobs."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from zarr_vectors.encoding import (
    decode_ragged_blob,
    decode_ragged_ints,
    encode_ragged_blob,
    encode_ragged_ints,
    frame_single,
)
from zarr_vectors.errors import EncodingError, InputError


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


def i64(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}q", *values)


FLAT_FILE = h(
    "01000000 20000000"
    " 00000000 00000000 01000000 00000000"
    " 01000000 00000000 02000000 00000000"
)
BLOB_FILE = h(
    "01000000 28000000"
    " 01000000 00000000 | 00000000 00000000"
    " 01000000 00000000 | 00000000 00000000 | 00000000 00000000"
)
APPENDED = i64(2, 0, 24, 0, 2, 0, 1, 0, 1)
MESH_FACE = i64(1, 0, 3, 0, 0, 0)


def test_flat_example() -> None:
    rows = np.array([[0, 1], [1, 2]], dtype=np.int32)
    assert frame_single(encode_ragged_ints(rows)) == FLAT_FILE
    decoded = decode_ragged_ints(FLAT_FILE[8:], 2)
    assert decoded.dtype == np.dtype("<i8")
    assert decoded.tolist() == [[0, 1], [1, 2]]


def test_blob_example() -> None:
    assert frame_single(encode_ragged_blob([np.array([[1, 0, 0]])])) == BLOB_FILE
    rows, starts = decode_ragged_blob(BLOB_FILE[8:], 3)
    assert rows.tolist() == [[1, 0, 0]]
    assert starts.tolist() == [0, 1]


def test_appended_two_group_example() -> None:
    assert encode_ragged_blob([np.array([[0, 2, 0]]), np.array([[1, 0, 1]])]) == APPENDED
    rows, starts = decode_ragged_blob(APPENDED, 3)
    assert rows.tolist() == [[0, 2, 0], [1, 0, 1]]
    assert starts.tolist() == [0, 1, 2]


def test_l3_mesh_face_example() -> None:
    assert encode_ragged_blob([np.array([[3, 0, 0, 0]], dtype=np.uint8)]) == MESH_FACE
    rows, starts = decode_ragged_blob(MESH_FACE, 4)
    assert rows.tolist() == [[3, 0, 0, 0]]
    assert starts.tolist() == [0, 1]


def test_graph_example_cells() -> None:
    """docs/format.md §10a: the three blob cells of the worked graph store."""
    for row in ([1, 0, 0], [0, 2, 0]):
        assert encode_ragged_blob([np.array([row])]) == i64(1, 0, *row)


def test_empty_blobs() -> None:
    for payload in (b"", b"\x01" * 7, i64(0)):
        rows, starts = decode_ragged_blob(payload, 3)
        assert rows.shape == (0, 3)
        assert starts.tolist() == [0]
    assert encode_ragged_blob([]) == i64(0)
    assert encode_ragged_blob([np.zeros((0, 3), np.int64)]) == i64(1, 0)
    assert decode_ragged_blob(i64(1, 0), 3)[1].tolist() == [0, 0]


def test_other_element_types() -> None:
    rows = np.array([[1, -2]], dtype=np.int64)
    assert encode_ragged_ints(rows, dtype="<i4") == struct.pack("<2i", 1, -2)
    assert decode_ragged_ints(struct.pack("<2i", 1, -2), 2, dtype="int32").tolist() == [[1, -2]]
    assert encode_ragged_blob([rows], dtype="<i4") == i64(1, 0) + struct.pack("<2i", 1, -2)


# ---- property tests ------------------------------------------------------------------

widths = st.integers(1, 4)


@st.composite
def int_rows(draw: st.DrawFn, width: int, max_rows: int = 6) -> np.ndarray:
    n = draw(st.integers(0, max_rows))
    return draw(hnp.arrays(np.int64, (n, width), elements=st.integers(-(2**63), 2**63 - 1)))


@given(st.data(), widths)
def test_ints_round_trip(data: st.DataObject, width: int) -> None:
    rows = data.draw(int_rows(width, 12))
    encoded = encode_ragged_ints(rows)
    assert len(encoded) == rows.size * 8
    assert np.array_equal(decode_ragged_ints(encoded, width), rows)


@given(st.data(), widths)
def test_blob_round_trip(data: st.DataObject, width: int) -> None:
    groups = data.draw(st.lists(int_rows(width), min_size=1, max_size=5))
    encoded = encode_ragged_blob(groups)
    rows, starts = decode_ragged_blob(encoded, width)
    assert np.array_equal(rows, np.concatenate(groups))
    assert starts.tolist() == np.cumsum([0] + [len(g) for g in groups]).tolist()
    for k, g in enumerate(groups):
        assert np.array_equal(rows[starts[k] : starts[k + 1]], g)
    header = struct.unpack_from(f"<{1 + len(groups)}q", encoded)
    assert header[0] == len(groups)
    assert list(header[1:]) == [8 * width * int(s) for s in starts[:-1]]


# ---- rejects ---------------------------------------------------------------------------


def test_ints_rejects_partial_rows() -> None:
    payload = FLAT_FILE[8:]
    for cut in range(len(payload)):
        if cut % 16:
            with pytest.raises(EncodingError, match=f"{cut} bytes is not a whole number of 16-byte rows"):
                decode_ragged_ints(payload[:cut], 2)
    with pytest.raises(EncodingError):
        decode_ragged_ints(payload + b"\x00", 2)


def test_blob_rejects_truncation() -> None:
    """A cut inside the header or a row raises; only a cut at a row boundary of the
    last group stays decodable (the format has no total row count)."""
    for cut in range(8, len(APPENDED)):
        data_len = cut - 24
        if data_len < 0 or data_len % 24 or data_len < 24:
            with pytest.raises(EncodingError, match="ragged blob"):
                decode_ragged_blob(APPENDED[:cut], 3)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (i64(-1), "negative group count K=-1"),
        (i64(0) + b"\x00", "1 trailing bytes after K=0"),
        (i64(3, 0, 0), "K=3 needs a 32-byte header, payload has 24"),
        (i64(1, 0, 1, 2, 3) + b"\x00", "data section of 25 bytes"),
        (i64(1, 24, 1, 2, 3), "group 0 byte offset 24 is not 0"),
        (i64(2, 0, 48, 1, 2, 3), "group 1 byte offset 48 lies beyond the 24-byte data section"),
        (i64(3, 0, 24, 0, 1, 2, 3, 4, 5, 6), "group 2 byte offset 0 is smaller"),
        (i64(2, 0, 8, 1, 2, 3, 4, 5, 6), "group 1 byte offset 8 is not a multiple of the 24-byte row"),
    ],
    ids=["negative-K", "K0-trailing", "short-header", "partial-row", "first-offset", "beyond-data",
         "decreasing", "misaligned"],
)
def test_blob_rejects_corruption(payload: bytes, message: str) -> None:
    with pytest.raises(EncodingError, match=message):
        decode_ragged_blob(payload, 3)


def test_encoder_input_errors() -> None:
    with pytest.raises(InputError, match="2-D"):
        encode_ragged_ints(np.arange(3))
    with pytest.raises(InputError, match="integers"):
        encode_ragged_ints(np.zeros((1, 2), dtype=np.float64))
    with pytest.raises(InputError, match=r"outside int32"):
        encode_ragged_ints(np.array([[2**40]]), dtype="<i4")
    with pytest.raises(InputError, match="little-endian"):
        encode_ragged_ints(np.array([[1]]), dtype=">i8")
    with pytest.raises(InputError, match="different widths"):
        encode_ragged_blob([np.zeros((1, 2), np.int64), np.zeros((1, 3), np.int64)])
    with pytest.raises(InputError, match="width must be >= 1"):
        decode_ragged_ints(b"", 0)
