"""Object manifests (docs/format.md §6.7): worked examples, round trips, the batch encoder, rejects."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_vectors.encoding import (
    ManifestBlock,
    decode_manifest,
    encode_manifest,
    encode_mode0_manifests,
    frame_items,
)
from zarr_vectors.errors import EncodingError, InputError


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


def block(chunk: tuple[int, ...], mode: int, *payload: int) -> bytes:
    """Reference block encoder straight from the docs/format.md table."""
    head = struct.pack(f"<{len(chunk)}qB", *chunk, mode)
    if mode == 2:
        return head + struct.pack(f"<I{len(payload)}q", len(payload), *payload)
    return head + struct.pack(f"<{len(payload)}q", *payload)


def manifest(*blocks: bytes) -> bytes:
    return struct.pack("<I", len(blocks)) + b"".join(blocks)


MIXED = h(
    "03000000"
    "00000000 00000000 ffffffff ffffffff 02000000 00000000  01  03000000 00000000 04000000 00000000"
    "01000000 00000000 01000000 00000000 01000000 00000000  02  02000000  05000000 00000000 02000000 00000000"
    "02000000 00000000 02000000 00000000 02000000 00000000  00  07000000 00000000"
)
POLYLINE = manifest(block((0, 0, 0), 0, 0), block((1, 0, 0), 0, 0), block((0, 0, 0), 0, 1))
EMPTY = h("00000000")


def test_mixed_mode_example() -> None:
    blocks = decode_manifest(MIXED, 3)
    assert blocks == [
        ManifestBlock((0, -1, 2), np.array([3, 4, 5, 6]), 1),
        ManifestBlock((1, 1, 1), np.array([5, 2]), 2),
        ManifestBlock((2, 2, 2), np.array([7]), 0),
    ]
    assert MIXED == manifest(block((0, -1, 2), 1, 3, 4), block((1, 1, 1), 2, 5, 2), block((2, 2, 2), 0, 7))


def test_writer_splits_non_consecutive_lists() -> None:
    encoded = encode_manifest([((0, -1, 2), [3, 4, 5, 6]), ((1, 1, 1), [5, 2]), ((2, 2, 2), [7])], 3)
    assert encoded == manifest(
        block((0, -1, 2), 1, 3, 4),
        block((1, 1, 1), 0, 5),
        block((1, 1, 1), 0, 2),
        block((2, 2, 2), 0, 7),
    )
    assert encode_manifest([((5,), [1, 2, 4, 5, 6, 9])], 1) == manifest(
        block((5,), 1, 1, 2), block((5,), 1, 4, 3), block((5,), 0, 9)
    )


def test_polyline_example_103_bytes() -> None:
    assert len(POLYLINE) == 103
    assert POLYLINE[:4] == h("03000000")
    blocks = [((0, 0, 0), [0]), ((1, 0, 0), [0]), ((0, 0, 0), [1])]
    assert encode_manifest(blocks, 3) == POLYLINE
    assert [(b.chunk, b.fragments.tolist(), b.mode) for b in decode_manifest(POLYLINE, 3)] == [
        ((0, 0, 0), [0], 0),
        ((1, 0, 0), [0], 0),
        ((0, 0, 0), [1], 0),
    ]
    rows = encode_mode0_manifests(np.zeros(3, int), np.array([b[0] for b in blocks]), np.array([0, 0, 1]), 1)
    assert list(rows) == [POLYLINE]


def test_graph_example_manifest() -> None:
    """docs/format.md §10a: object 0 spans chunks 0.0.0, 1.0.0, 1.1.1, fragment 0 in each."""
    row = encode_mode0_manifests(np.zeros(3, int), np.array([[0, 0, 0], [1, 0, 0], [1, 1, 1]]), np.zeros(3, int), 1)
    assert len(row[0]) == 103
    assert row[0] == encode_manifest([((0, 0, 0), [0]), ((1, 0, 0), [0]), ((1, 1, 1), [0])], 3)


def test_empty_manifest() -> None:
    assert decode_manifest(EMPTY, 3) == []
    assert encode_manifest([], 3) == EMPTY
    assert list(encode_mode0_manifests(np.zeros(0, int), np.zeros((0, 3), int), np.zeros(0, int), 2)) == [EMPTY, EMPTY]
    assert list(encode_mode0_manifests(np.zeros(0, int), np.zeros((0, 3), int), np.zeros(0, int), 0)) == []


def test_batch_encoder_gaps_and_order() -> None:
    rows = np.array([1, 1, 3])
    chunks = np.array([[0, 0], [-4, 2], [7, 7]])
    frags = np.array([2, 0, 5])
    assert list(encode_mode0_manifests(rows, chunks, frags, 5)) == [
        EMPTY,
        manifest(block((0, 0), 0, 2), block((-4, 2), 0, 0)),
        EMPTY,
        manifest(block((7, 7), 0, 5)),
        EMPTY,
    ]



def test_batch_encoder_slices_are_the_rows_they_name() -> None:
    """Rows are made a slice at a time (a writer's chunk): every slice, and every row on its own,
    is what the whole table holds there; a slice is framed from its buffer as the rows are."""
    rows = np.array([1, 1, 3, 6, 6, 6])
    chunks = np.array([[0, 0], [-4, 2], [7, 7], [1, 1], [1, 2], [1, 3]])
    frags = np.array([2, 0, 5, 0, 1, 9])
    table = encode_mode0_manifests(rows, chunks, frags, 8)
    whole = list(table)  # iterated a block of rows at a time
    assert whole == [table[i] for i in range(8)]
    assert len(table) == len(whole) == 8
    assert [table[i] for i in range(-8, 8)] == whole + whole
    for start in range(9):
        for stop in range(start, 10):
            part, expected = table[start:stop], whole[start:stop]
            assert list(part) == expected
            assert frame_items(part, count=len(expected) + 4) == frame_items([*expected, b"", b"", b"", b""])
    with pytest.raises(IndexError):
        table[8]
    with pytest.raises(InputError, match="step 1"):
        table[::2]

# ---- property tests ------------------------------------------------------------------

coords = st.integers(-(2**40), 2**40)
frag_lists = st.lists(st.integers(0, 30), min_size=1, max_size=6)


@st.composite
def block_lists(draw: st.DrawFn) -> tuple[int, list]:
    ndim = draw(st.integers(1, 4))
    chunk = st.tuples(*[coords] * ndim)
    return ndim, draw(st.lists(st.tuples(chunk, frag_lists), max_size=8))


@given(block_lists())
def test_round_trip(case: tuple[int, list]) -> None:
    ndim, blocks = case
    encoded = encode_manifest(blocks, ndim)
    decoded = decode_manifest(encoded, ndim)
    assert [(c, f) for c, fs in blocks for f in fs] == [
        (b.chunk, f) for b in decoded for f in b.fragments.tolist()
    ]
    assert all(b.mode in (0, 1) for b in decoded)
    again = encode_manifest([(b.chunk, b.fragments) for b in decoded], ndim)
    assert again == encoded


@st.composite
def any_mode_manifests(draw: st.DrawFn) -> tuple[int, bytes, list]:
    ndim = draw(st.integers(1, 3))
    parts, expected = [], []
    for _ in range(draw(st.integers(0, 6))):
        chunk = draw(st.tuples(*[coords] * ndim))
        mode = draw(st.integers(0, 2))
        if mode == 0:
            f = draw(st.integers(0, 2**32 - 1))
            parts.append(block(chunk, 0, f))
            frags = [f]
        elif mode == 1:
            start, count = draw(st.integers(0, 100)), draw(st.integers(0, 5))
            parts.append(block(chunk, 1, start, count))
            frags = list(range(start, start + count))
        else:
            frags = draw(st.lists(st.integers(0, 2**32 - 1), max_size=5))
            parts.append(block(chunk, 2, *frags))
        expected.append(ManifestBlock(chunk, np.array(frags, dtype=np.int64), mode))
    return ndim, manifest(*parts), expected


@given(any_mode_manifests())
def test_decodes_every_mode(case: tuple[int, bytes, list]) -> None:
    ndim, encoded, expected = case
    assert decode_manifest(encoded, ndim) == expected


@given(st.lists(st.tuples(st.integers(0, 6), st.tuples(coords, coords), st.integers(0, 99)), max_size=30))
def test_batch_encoder_matches_single(entries: list) -> None:
    entries.sort(key=lambda e: e[0])
    num_objects = 7
    rows = np.array([e[0] for e in entries], dtype=np.int64)
    chunks = np.array([e[1] for e in entries], dtype=np.int64).reshape(-1, 2)
    frags = np.array([e[2] for e in entries], dtype=np.int64)
    batch = encode_mode0_manifests(rows, chunks, frags, num_objects)
    for obj in range(num_objects):
        mine = [e for e in entries if e[0] == obj]
        assert batch[obj] == manifest(*(block(c, 0, f) for _, c, f in mine))


# ---- rejects ---------------------------------------------------------------------------


@pytest.mark.parametrize("encoded", [MIXED, POLYLINE, EMPTY], ids=["mixed", "polyline", "empty"])
def test_rejects_every_truncation_and_trailing_byte(encoded: bytes) -> None:
    for cut in range(len(encoded)):
        with pytest.raises(EncodingError, match="manifest"):
            decode_manifest(encoded[:cut], 3)
    with pytest.raises(EncodingError, match="manifest: 1 trailing bytes"):
        decode_manifest(encoded + b"\x00", 3)


@pytest.mark.parametrize(
    ("encoded", "message"),
    [
        (manifest(block((0, 0, 0), 3, 1)), "block 0 has unknown mode 3"),
        (manifest(block((0, 0, 0), 0, 1), block((0, 0, 0), 1, 0, -1)), "block 1 .* negative count -1"),
        (manifest(block((0, 0, 0), 1, -2, 3)), r"run -2\.\.0 is outside"),
        (manifest(block((0, 0, 0), 1, 2**32 - 1, 2)), "outside"),
        (manifest(block((0, 0, 0), 0, 4), block((1, 0, 0), 0, -1)), "block 1 names fragment -1"),
        (manifest(block((0, 0, 0), 2, 1, -5)), "block 0 names fragment -5"),
        (manifest(block((0, 0, 0), 2, 1)) + b"\x00" * 7, "7 trailing bytes after block 0"),
        (h("02000000") + block((0, 0, 0), 0, 1), "2 blocks need at least"),
    ],
    ids=["mode3", "neg-count", "neg-start", "past-u32", "neg-mode0", "neg-mode2", "trailing", "count"],
)
def test_rejects_corruption(encoded: bytes, message: str) -> None:
    with pytest.raises(EncodingError, match=message):
        decode_manifest(encoded, 3)


def test_encoder_input_errors() -> None:
    with pytest.raises(InputError, match="does not have 3 coords"):
        encode_manifest([((0, 0), [1])], 3)
    with pytest.raises(InputError, match="non-empty"):
        encode_manifest([((0, 0, 0), [])], 3)
    with pytest.raises(InputError, match=r"\[0, 2\*\*32\)"):
        encode_manifest([((0, 0, 0), [-1])], 3)
    with pytest.raises(InputError, match="int64"):
        encode_manifest([((2**63, 0, 0), [1])], 3)
    with pytest.raises(InputError, match="sorted by object row"):
        encode_mode0_manifests(np.array([1, 0]), np.zeros((2, 3), int), np.zeros(2, int), 2)
    with pytest.raises(InputError, match=r"\[0, 2\)"):
        encode_mode0_manifests(np.array([0, 2]), np.zeros((2, 3), int), np.zeros(2, int), 2)
    with pytest.raises(InputError, match="shape"):
        encode_mode0_manifests(np.array([0]), np.zeros(3, int), np.zeros(1, int), 1)


@given(
    st.lists(
        st.lists(
            st.tuples(st.lists(st.integers(-50, 50), min_size=2, max_size=2), st.lists(st.integers(0, 9), min_size=1, max_size=4)),
            max_size=4,
        ),
        max_size=8,
    )
)
def test_decode_manifest_table_matches_row_by_row_decoding(rows):
    """The batch decoder returns exactly what decoding each row returns, flattened (modes 0 and 1 mixed)."""
    from zarr_vectors.encoding import decode_manifest_table

    encoded = [encode_manifest([(c, f) for c, f in blocks], 2) for blocks in rows]
    row, chunk, frag = decode_manifest_table(encoded, 2)
    exp_row, exp_chunk, exp_frag = [], [], []
    for r, buf in enumerate(encoded):
        for b in decode_manifest(buf, 2):
            for f in b.fragments.tolist():
                exp_row.append(r)
                exp_chunk.append(list(b.chunk))
                exp_frag.append(f)
    assert row.tolist() == exp_row
    assert chunk.reshape(-1, 2).tolist() == exp_chunk
    assert frag.tolist() == exp_frag


def test_decode_manifest_table_rejects_a_truncated_row():
    from zarr_vectors.encoding import decode_manifest_table

    good = encode_manifest([((1, 2), [3])], 2)
    with pytest.raises(EncodingError):
        decode_manifest_table([good, good[:-1]], 2)


def test_mode0_gather_skips_bad_empty_and_mixed_rows_between_good_ones():
    """Regression (issue 13): the mode-0 records are gathered by a byte mask of the fast rows'
    bodies; rows it must leave to the exact decoder sit between them and shift nothing."""
    from zarr_vectors.encoding import decode_manifest_table, summarize_manifest_rows

    rows = [
        encode_manifest([((1, 2), [3]), ((-4, 5), [6])], 2),
        encode_manifest([], 2),
        encode_manifest([((7, 8), [1, 2, 3])], 2),  # mode 1: the exact decoder's
        encode_manifest([((0, 0), [9])], 2),
        encode_manifest([((5, 5), [4])], 2)[:-1],  # truncated
        encode_manifest([((2, 1), [0]), ((2, 1), [5])], 2),
    ]
    summary = summarize_manifest_rows(rows, 2, first_row=10)
    assert summary.nonempty == 4 and len(summary.problems) == 1 and summary.problems[0].startswith("row 14:")
    assert summary.max_fragment == {(1, 2): (3, 10), (-4, 5): (6, 10), (7, 8): (3, 12), (0, 0): (9, 13), (2, 1): (5, 15)}
    row, chunk, frag = decode_manifest_table([r for i, r in enumerate(rows) if i != 4], 2)
    assert row.tolist() == [0, 0, 2, 2, 2, 3, 4, 4]
    assert chunk.tolist() == [[1, 2], [-4, 5], [7, 8], [7, 8], [7, 8], [0, 0], [2, 1], [2, 1]]
    assert frag.tolist() == [3, 6, 1, 2, 3, 9, 0, 5]


def test_an_empty_run_still_names_its_chunk():
    """Regression (hunt): a mode-1 run of count 0 or a mode-2 list of no fragments names a chunk
    and no fragment; the summary left such blocks out, so a chunk that does not exist passed."""
    from zarr_vectors.encoding import summarize_manifest_rows

    def block(chunk: tuple[int, int], mode: int, body: bytes) -> bytes:
        return struct.pack("<2q", *chunk) + bytes([mode]) + body

    row = struct.pack("<I", 3) + block((1, 2), 0, struct.pack("<q", 3)) + block((9, 9), 1, struct.pack("<2q", 4, 0)) \
        + block((-5, 9), 2, struct.pack("<I", 0))
    assert summarize_manifest_rows([row], 2, first_row=7).max_fragment == {(1, 2): (3, 7), (9, 9): (-1, 7),
                                                                           (-5, 9): (-1, 7)}
