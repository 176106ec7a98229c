"""FragmentIndex v1 (docs/format.md §6.2): worked examples byte for byte, round trips, rejects."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_vectors.encoding import FragmentIndex
from zarr_vectors.errors import EncodingError, InputError


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


def i64(*values: int) -> str:
    return struct.pack(f"<{len(values)}q", *values).hex()


EXAMPLE_A = h(
    "4746565a 01000000 01000000 01000000 | 01000000 00000000 "
    "| 00000000 00000000 03000000 00000000 | 00000000"
)
EXAMPLE_B = h(
    "4746565a 0100 0000 04000000 03000000"
    "0d 00 00 00 00 00 00 00"
    + i64(0, 2, 1, 2, 2, 1)
    + "00000000 02000000"
    "02000000 00000000 00000000 00000000"
)
EXAMPLE_C_BINS = [(0, 2), (2, 0), (2, 0), (2, 0), (2, 1), (3, 0), (3, 0), (3, 1)]
EXAMPLE_C = h(
    "4746565a 0100 0000 08000000 08000000 ff 00 00 00 00 00 00 00"
    + i64(*(v for b in EXAMPLE_C_BINS for v in b))
    + "00000000"
)
EMPTY = h("4746565a 0100 0000 00000000 00000000")


def test_example_a() -> None:
    fi = FragmentIndex.from_fragments([(0, 3)])
    assert len(EXAMPLE_A) == 44
    assert fi.encode() == EXAMPLE_A
    assert FragmentIndex.from_ranges([0], [3]).encode() == EXAMPLE_A
    assert FragmentIndex.from_counts([3]).encode() == EXAMPLE_A
    assert FragmentIndex.decode(EXAMPLE_A) == fi
    assert fi.is_tiling(3) and not fi.is_tiling(4)


def test_example_b() -> None:
    fi = FragmentIndex.from_fragments([(0, 2), [2, 0], [1, 2], (2, 1)])
    assert len(EXAMPLE_B) == 96
    assert fi.encode() == EXAMPLE_B
    decoded = FragmentIndex.decode(EXAMPLE_B)
    assert decoded == fi
    assert decoded.num_fragments == 4
    assert decoded.is_range.tolist() == [True, False, True, True]
    assert decoded.row_counts().tolist() == [2, 2, 2, 1]
    assert [decoded.rows(f).tolist() for f in range(4)] == [[0, 1], [2, 0], [1, 2], [2]]
    frag_ids, rows = decoded.expand()
    assert frag_ids.tolist() == [0, 0, 1, 1, 2, 2, 3]
    assert rows.tolist() == [0, 1, 2, 0, 1, 2, 2]
    assert decoded.max_row() == 2
    assert not decoded.is_tiling(3)


def test_example_c_point_cloud_bins() -> None:
    starts, counts = np.array(EXAMPLE_C_BINS).T
    fi = FragmentIndex.from_ranges(starts, counts)
    assert len(EXAMPLE_C) == 156
    assert fi.encode() == EXAMPLE_C
    assert FragmentIndex.from_counts(counts).encode() == EXAMPLE_C
    decoded = FragmentIndex.decode(EXAMPLE_C)
    assert decoded.is_tiling(4)
    assert decoded.max_row() == 3
    assert decoded.expand()[0].tolist() == [0, 0, 4, 7]


def test_link_fragments_example() -> None:
    """docs/format.md §6.5: link_fragments cell 0.0.0 = F=1 R=1 range (0,2)."""
    assert FragmentIndex.from_counts([2]).encode() == EXAMPLE_A.replace(h("03000000"), h("02000000"))


def test_empty_index_is_header_only() -> None:
    for fi in (FragmentIndex.from_counts([]), FragmentIndex.from_fragments([])):
        assert fi.encode() == EMPTY
        assert fi.num_fragments == 0
        assert fi.max_row() == -1
        assert fi.is_tiling(0) and not fi.is_tiling(1)
        assert [a.tolist() for a in fi.expand()] == [[], []]
    assert FragmentIndex.decode(EMPTY) == FragmentIndex.from_counts([])


def test_all_range_index_ends_with_four_zero_bytes() -> None:
    assert FragmentIndex.from_counts([1] * 9).encode().endswith(b"\x00" * 4)


def test_promotion_rules() -> None:
    fi = FragmentIndex.from_fragments([[3], [], [5, 6, 8], [0, 2], [2, 1], np.arange(4, 7), [0, 1]])
    assert fi.is_range.tolist() == [True, False, False, False, False, True, True]
    assert fi.range_starts.tolist() == [3, 4, 0]
    assert fi.range_counts.tolist() == [1, 3, 2]
    assert fi.csr_offsets.tolist() == [0, 0, 3, 5, 7]
    with pytest.raises(InputError, match="explicit row index -1"):
        FragmentIndex.from_fragments([[-1, 0]])


def test_empty_explicit_list_stays_explicit() -> None:
    fi = FragmentIndex.from_fragments([[]])
    encoded = fi.encode()
    assert encoded == h("4746565a 0100 0000 01000000 00000000 00 00 00 00 00 00 00 00 00000000 00000000")
    assert FragmentIndex.decode(encoded).rows(0).tolist() == []


def test_bitmap_padding_for_many_fragments() -> None:
    fi = FragmentIndex.from_counts([1] * 65)
    encoded = fi.encode()
    assert len(encoded) == 16 + 16 + 65 * 16 + 4
    assert encoded[16:32] == h("ff" * 8 + "01" + "00" * 7)


# ---- property tests ------------------------------------------------------------------

ranges = st.tuples(st.integers(0, 50), st.integers(0, 5))
explicit = st.lists(st.integers(0, 60), max_size=6)
fragments = st.lists(st.one_of(ranges, explicit), max_size=20)


@given(fragments)
def test_round_trip(frags: list) -> None:
    fi = FragmentIndex.from_fragments(frags)
    encoded = fi.encode()
    decoded = FragmentIndex.decode(encoded)
    assert decoded == fi
    assert decoded.encode() == encoded
    expected = [list(range(f[0], f[0] + f[1])) if isinstance(f, tuple) else list(f) for f in frags]
    assert [decoded.rows(f).tolist() for f in range(len(frags))] == expected
    frag_ids, rows = decoded.expand()
    assert rows.tolist() == [r for e in expected for r in e]
    assert frag_ids.tolist() == [f for f, e in enumerate(expected) for _ in e]
    assert decoded.row_counts().tolist() == [len(e) for e in expected]
    assert decoded.max_row() == max((r for e in expected for r in e), default=-1)


@given(st.lists(st.integers(0, 5), max_size=30))
def test_from_counts_tiles(counts: list[int]) -> None:
    fi = FragmentIndex.from_counts(counts)
    assert fi.is_tiling(sum(counts))
    assert FragmentIndex.decode(fi.encode()) == fi
    assert fi.expand()[1].tolist() == list(range(sum(counts)))


# ---- rejects ---------------------------------------------------------------------------


def patched(buf: bytes, offset: int, new: bytes) -> bytes:
    return buf[:offset] + new + buf[offset + len(new) :]


@pytest.mark.parametrize("blob", [EXAMPLE_A, EXAMPLE_B, EXAMPLE_C, EMPTY], ids="ABCE")
def test_rejects_every_truncation_and_trailing_byte(blob: bytes) -> None:
    for cut in range(len(blob)):
        with pytest.raises(EncodingError, match="FragmentIndex"):
            FragmentIndex.decode(blob[:cut])
    with pytest.raises(EncodingError, match="trailing"):
        FragmentIndex.decode(blob + b"\x00")


TWO_EXPLICIT = FragmentIndex.from_fragments([[5, 3], [2, 0]]).encode()


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (patched(EXAMPLE_B, 0, h("4746565b")), "bad magic 4746565b"),
        (patched(EXAMPLE_B, 4, h("0200")), "version 2"),
        (patched(EXAMPLE_B, 6, h("0100")), "flags 0x0001"),
        (patched(EXAMPLE_B, 8, h("03000000 05000000")), "R=5 exceeds F=3"),
        (patched(EXAMPLE_B, 16, h("0f")), "4 range bits but R=3"),
        (patched(EXAMPLE_B, 16, h("1d")), "padding"),
        (patched(EXAMPLE_B, 23, h("80")), "padding"),
        (patched(EXAMPLE_B, 72, h("01000000")), "csr_offsets start at 1"),
        (patched(EXAMPLE_B, 80, h(i64(-1))), "explicit row index -1"),
        (patched(EXAMPLE_B, 32, h(i64(-1))), r"range #0 \(0, -1\)"),
        (patched(EXAMPLE_B, 24, h(i64(-2))), r"range #0 \(-2, 2\)"),
        (patched(TWO_EXPLICIT, 16 + 8 + 4, h("05000000")), "csr_offsets decrease"),
        (patched(EMPTY, 12, h("01000000")), "R=1 exceeds F=0"),
    ],
)
def test_rejects_corruption(blob: bytes, message: str) -> None:
    with pytest.raises(EncodingError, match=message):
        FragmentIndex.decode(blob)


def test_constructor_rejects_inconsistent_arrays() -> None:
    with pytest.raises(InputError, match="2 range fragments but 1 starts"):
        FragmentIndex(np.array([True, True]), np.array([0]), np.array([1]), np.array([0]), np.array([]))
    with pytest.raises(InputError, match="bool"):
        FragmentIndex(np.array([1]), np.array([0]), np.array([1]), np.array([0]), np.array([]))
    with pytest.raises(InputError, match="negative"):
        FragmentIndex.from_fragments([(0, -1)])
    with pytest.raises(InputError, match="negative"):
        FragmentIndex.from_ranges([-1], [1])
    with pytest.raises(InputError, match="2 starts but 1 counts"):
        FragmentIndex.from_ranges([0, 1], [1])
    with pytest.raises(InputError, match=r"\(start, count\)"):
        FragmentIndex.from_fragments([(0, 1, 2)])
    with pytest.raises(InputError, match="integers"):
        FragmentIndex.from_fragments([[0.5]])
    with pytest.raises(InputError, match="out of range"):
        FragmentIndex.from_counts([1]).rows(1)
