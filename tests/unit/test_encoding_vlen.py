"""vlen-bytes chunk framing (docs/format.md §2.2) against the worked examples and zarr itself."""

from __future__ import annotations

import mmap
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_vectors.encoding import (
    MAX_ITEM_BYTES,
    FramedItems,
    frame_items,
    frame_single,
    item_spans,
    unframe_items,
    unframe_single,
)
from zarr_vectors.errors import EncodingError, InputError


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


# docs/format.md §6.1: the complete file vertices/c/0/0/0 of the graph store.
VERTICES_FILE = h(
    "01000000 24000000"
    " 00002041 00002041 00002041"
    " 0000a041 0000a041 0000a041"
    " 00007041 00004041 00003041"
)


def test_vertices_cell_example() -> None:
    payload = np.array([[10, 10, 10], [20, 20, 20], [15, 12, 11]], dtype="<f4").tobytes()
    assert frame_single(payload) == VERTICES_FILE
    assert frame_items([payload]) == VERTICES_FILE
    assert bytes(unframe_single(VERTICES_FILE)) == payload
    assert unframe_items(VERTICES_FILE) == [payload]


def test_frame_items_exact_bytes() -> None:
    framed = frame_items([b"ab", b"", memoryview(b"xyz")])
    assert framed == h("03000000 | 02000000 6162 | 00000000 | 03000000 78797a")
    assert frame_items([]) == h("00000000")
    assert unframe_items(h("00000000")) == []


def test_unframe_single_is_zero_copy() -> None:
    buf = bytearray(VERTICES_FILE)
    view = unframe_single(buf)
    buf[8] = 0x7F
    assert view[0] == 0x7F


@given(st.lists(st.binary(max_size=40), max_size=30))
def test_items_round_trip(items: list[bytes]) -> None:
    framed = frame_items(items)
    assert unframe_items(framed) == items
    assert len(framed) == 4 + 4 * len(items) + sum(map(len, items))


@given(st.lists(st.lists(st.binary(max_size=20), max_size=8), max_size=4), st.integers(0, 8), st.integers(0, 8))
def test_framed_items_are_the_items_in_one_buffer(chunks: list[list[bytes]], lo: int, hi: int) -> None:
    """Spans of each chunk, joined: index, slice, iterate and join give the items themselves."""
    parts = [item_spans(memoryview(frame_items(c))) for c in chunks]  # a memoryview too
    joined = FramedItems.concat(parts)
    items = [i for c in chunks for i in c]
    assert len(joined) == len(items) and list(joined) == items
    assert [joined[i] for i in range(len(items))] == items
    assert list(joined[lo:hi]) == items[lo:hi] and len(joined[lo:hi]) == len(items[lo:hi])
    again = FramedItems.of(items)
    assert list(again) == items and FramedItems.of(again) is again
    for framed, chunk in zip(parts, chunks):
        assert all(isinstance(i, bytes) for i in framed) and list(framed) == chunk


@given(st.binary(max_size=200))
def test_single_round_trip(payload: bytes) -> None:
    framed = frame_single(payload)
    assert framed == frame_items([payload])
    assert bytes(unframe_single(framed)) == payload
    assert unframe_items(framed) == [payload]


@pytest.mark.parametrize("items", [[b"ab", b"", b"xyz"], [b""], [], [b"\x00" * 9]])
def test_unframe_items_rejects_every_truncation_and_trailing_byte(items: list[bytes]) -> None:
    framed = frame_items(items)
    for cut in range(len(framed)):
        with pytest.raises(EncodingError):
            unframe_items(framed[:cut])
    with pytest.raises(EncodingError, match="1 trailing bytes"):
        unframe_items(framed + b"\x00")


RUNS = st.lists(st.tuples(st.sampled_from([0, 1, 4, 13, 37, 255, 256, 257]), st.integers(1, 70)), max_size=6)


@given(RUNS, st.randoms(use_true_random=False))
def test_runs_of_items_of_one_length_read_as_the_items(runs: list[tuple[int, int]], rnd) -> None:
    """Runs of equal-length items (gathered at their stride: an object index's absent ids, a manifest's
    rows) give the same spans as the one-by-one walk, whatever their lengths and run lengths."""
    items = [rnd.randbytes(length) for length, count in runs for _ in range(count)]
    framed = frame_items(items)
    spans = item_spans(framed)
    assert list(spans) == items
    want = np.cumsum([4] + [4 + len(i) for i in items])[:-1] + 4
    assert spans.starts.tolist() == want.tolist() and spans.lengths.tolist() == [len(i) for i in items]


@pytest.mark.parametrize("items", [[b"\0" * 4] * 40 + [b"ab"], [b"\1" * 8] * 33, [b""] * 3 + [b"\0" * 4] * 20])
def test_a_run_cut_anywhere_is_refused(items: list[bytes]) -> None:
    framed = frame_items(items)
    assert unframe_items(framed) == items
    for cut in range(len(framed)):
        with pytest.raises(EncodingError):
            unframe_items(framed[:cut])
    with pytest.raises(EncodingError, match="1 trailing bytes"):
        unframe_items(framed + b"\x00")


def test_unframe_items_rejects_absurd_count() -> None:
    with pytest.raises(EncodingError, match="4294967295 items need at least"):
        unframe_items(h("ffffffff 00000000"))


def test_unframe_single_rejects() -> None:
    for cut in range(len(VERTICES_FILE)):
        with pytest.raises(EncodingError):
            unframe_single(VERTICES_FILE[:cut])
    with pytest.raises(EncodingError, match="1 trailing bytes"):
        unframe_single(VERTICES_FILE + b"\x00")
    with pytest.raises(EncodingError, match="holds 2 items"):
        unframe_single(frame_items([b"a", b"b"]))
    with pytest.raises(EncodingError, match="holds 0 items"):
        unframe_single(h("00000000 00000000"))


def test_rejects_non_byte_items() -> None:
    with pytest.raises(InputError, match="byte buffers"):
        frame_items([memoryview(np.arange(3, dtype=np.int32))])


def test_refuses_items_of_4_gib(tmp_path) -> None:
    """A u32 length cannot describe 2**32 bytes (docs/decisions.md D13); a sparse file avoids RAM."""
    path = tmp_path / "big"
    with open(path, "wb") as f:
        f.truncate(MAX_ITEM_BYTES + 1)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as big:
        view = memoryview(big)
        try:
            with pytest.raises(InputError, match="4294967296 bytes"):
                frame_single(view)
            with pytest.raises(InputError, match="item 1 has 4294967296 bytes"):
                frame_items([b"", view])
        finally:
            view.release()


def test_an_item_past_the_limit_is_refused_before_any_item_is_read() -> None:
    """The lengths are checked before the items are joined: a 4 GiB item was copied first (31 s).
    An item that only says its length shows it: the join would fail on it with a TypeError."""
    class Said:
        def __len__(self) -> int:
            return MAX_ITEM_BYTES + 1

    with pytest.raises(InputError, match="item 1 has 4294967296 bytes"):
        frame_items([b"ab", Said()])


def _zarr_chunk(tmp_path, rows: list[bytes], chunk: int) -> bytes:
    """Raw bytes of chunk c/0 of a zarr-python vlen-bytes array holding ``rows``."""
    import zarr
    from zarr.storage import LocalStore

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr flags variable_length_bytes as unstable
        arr = zarr.create_array(
            LocalStore(tmp_path), shape=(len(rows),), chunks=(chunk,), dtype="bytes", compressors=None
        )
        values = np.empty(len(rows), dtype=object)
        values[:] = rows
        arr[:] = values
        assert [c["name"] for c in arr.metadata.to_dict()["codecs"]] == ["vlen-bytes"]
    return (tmp_path / "c" / "0").read_bytes()


def test_frame_single_matches_zarr_python(tmp_path) -> None:
    payload = bytes(range(256)) + b"\x00\x00"
    assert _zarr_chunk(tmp_path, [payload], 1) == frame_single(payload)


def test_frame_items_matches_zarr_python_edge_chunk(tmp_path) -> None:
    """zarr pads the edge chunk with zero-length items, as docs/format.md §2.2 says."""
    rows = [b"\x00\x00\x00\x00", b"abc", b"\x01"]
    assert _zarr_chunk(tmp_path, rows, 4) == frame_items([*rows, b""])
